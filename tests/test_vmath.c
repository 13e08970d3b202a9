/* The CPU backend's vectorizable math (kernels/cpu/vexp.h, vnormal.h) and
 * GELU built on it, against libm in double: every k-th float of each range,
 * in ulp of the exact value rounded to float.  Bounds are the measured worst
 * cases rounded up; the share within 1 ulp is checked as well, so that a
 * systematic drift cannot hide under the worst case.  Hand-worked values
 * of Phi and GELU (normal tables) and the special values close it. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "cpu/vnormal.h"
#include "ops.h"

enum { BUF = 4096 };

/* error of got against exact, in ulp of exact as a float; exact must be a
 * normal float */
static double ulps(float got, double exact) {
    return fabs((double)got - exact) / ldexp(1.0, ilogb((float)exact) - 23);
}

typedef struct {
    double worst, worst_x;
    long n, within1;
} Err;

static void err_add(Err *e, double u, float x) {
    if (!(u <= e->worst)) e->worst = u, e->worst_x = x; /* NaN counts as worst */
    e->n++;
    e->within1 += u <= 1.0;
}

/* e becomes the record of both ranges */
static void err_merge(Err *e, Err o) {
    e->n += o.n, e->within1 += o.within1;
    if (!(o.worst <= e->worst)) e->worst = o.worst, e->worst_x = o.worst_x;
}

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* vectorized the way the kernels' loops are */
static void v_exp(float *y, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] = sg_vexpf(x[i]);
}
static void v_nexp(float *y, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] = sg_vnormal_exp(x[i]);
}
static void v_cdf(float *y, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] = sg_vnormal_cdf(x[i], sg_vnormal_exp(x[i]));
}

/* Runs f over the floats with bits in [lo, hi) stepping by step, each with
 * its exact value ref(x) in double; skips exact values outside the normal
 * float range. */
static Err sweep(void (*f)(float *, const float *, int), double (*ref)(double), uint32_t lo, uint32_t hi,
                 uint32_t step) {
    static float xs[BUF], ys[BUF];
    Err e = {0, 0, 0, 0};
    for (uint64_t b = lo; b < hi;) {
        int n = 0;
        for (; b < hi && n < BUF; b += step) xs[n++] = from_bits((uint32_t)b);
        f(ys, xs, n);
        for (int i = 0; i < n; i++) {
            double r = ref(xs[i]);
            if (!(fabs(r) >= 0x1p-126 && fabs(r) <= 0x1.fffffep127)) continue;
            err_add(&e, ulps(ys[i], r), xs[i]);
        }
    }
    return e;
}

static double ref_exp(double x) { return exp(x); }
static double ref_nexp(double x) { return exp(-0.5 * x * x); }
static double ref_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

#define NEG(bits) (0x80000000u | (bits))

static void check_err(const char *what, Err e, double bound, double min_within1) {
    CHECK(e.worst <= bound, "%s: worst %.2f ulp at x = %.9g (bound %.1f)", what, e.worst, e.worst_x, bound);
    double share = e.n ? (double)e.within1 / (double)e.n : 0;
    CHECK(share >= min_within1, "%s: %.4f within 1 ulp (want >= %.2f) of %ld", what, share, min_within1, e.n);
    printf("  %-34s %10ld floats  worst %.2f ulp (x = %.7g)  within 1 ulp %.2f%%\n", what, e.n, e.worst,
           e.worst_x, 100.0 * share);
}

static void accuracy(void) {
    /* exp over (-87.3, 0.5]: the softmax loops' arguments */
    Err e = sweep(v_exp, ref_exp, 0, 0x3f000001u, 61);
    Err n = sweep(v_exp, ref_exp, NEG(0), NEG(0x42aeac4fu), 61);
    err_merge(&e, n);
    check_err("sg_vexpf, [-87.3, 0.5]", e, 1.0, 0.99);
    /* exp(-x^2/2) and Phi over |x| < 14 (beyond, exp(-x^2/2) is 0 in
     * float and Phi is 0 or 1) */
    Err a = sweep(v_nexp, ref_nexp, 0, 0x41600000u, 97);
    Err b = sweep(v_nexp, ref_nexp, NEG(0), NEG(0x41600000u), 97);
    err_merge(&a, b);
    check_err("sg_vnormal_exp, |x| < 14", a, 3.0, 0.90);
    Err p = sweep(v_cdf, ref_cdf, 0, 0x41600000u, 97);
    check_err("sg_vnormal_cdf, x in [0, 14)", p, 4.0, 0.95);
    Err q = sweep(v_cdf, ref_cdf, NEG(0), NEG(0x41600000u), 97);
    check_err("sg_vnormal_cdf, x in (-14, 0]", q, 8.0, 0.70);
}

/* The ops on a grid of x in [-10, 10]: gelu within a few ulp of x Phi(x);
 * gelu' against its two terms' scale (they cancel near x = -0.75). */
static void gelu_ops(void) {
    enum { N = 200001 };
    static real x[N], y[N], d[N], one[N];
    for (int i = 0; i < N; i++) x[i] = (real)(-10.0 + 20.0 * i / (N - 1)), one[i] = 1;
    op_gelu_fwd(y, x, N);
    op_gelu_bwd(d, x, one, N);
    double wf = 0, wb = 0;
    for (int i = 0; i < N; i++) {
        double xd = x[i], cdf = 0.5 * erfc(-xd / sqrt(2.0)), pdf = exp(-0.5 * xd * xd) / sqrt(2 * M_PI);
        double g = xd * cdf, dg = cdf + xd * pdf;
        if (fabs(g) >= 0x1p-126) {
            double u = ulps(y[i], g);
            if (!(u <= wf)) wf = u;
        }
        double scale = fabs(cdf) + fabs(xd * pdf);
        double u = fabs(d[i] - dg) / (scale * 0x1p-24);
        if (!(u <= wb)) wb = u;
    }
    CHECK(wf <= 8.5, "op_gelu_fwd: worst %.2f ulp", wf);
    CHECK(wb <= 9.0, "op_gelu_bwd: worst %.2f ulp of the terms' scale", wb);
    printf("  op_gelu_fwd %.2f ulp, op_gelu_bwd %.2f ulp of |Phi| + |x phi| (x in [-10, 10])\n", wf, wb);
}

/* The tanh form against long double's tanh on the same grid:
 * gelu(x) = x s, s = (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3);
 * gelu' = s + x (1 - tanh^2 u) / 2 * du/dx.  The bound is set by float's
 * rounding of u itself: a relative error of k ulp in u moves s by
 * s (1 - s) 2|u| k ulps, large where |u| is (s tiny for x << 0, where gelu
 * is -|x| e^-2|u|, so a relative error of a few |u| ulp is the best float
 * can do there). */
static void gelu_tanh_ops(void) {
    enum { N = 200001 };
    static real x[N], y[N], d[N], one[N];
    for (int i = 0; i < N; i++) x[i] = (real)(-10.0 + 20.0 * i / (N - 1)), one[i] = 1;
    op_gelu_tanh_fwd(y, x, N);
    op_gelu_tanh_bwd(d, x, one, N);
    double wf = 0, wb = 0, wfx = 0;
    for (int i = 0; i < N; i++) {
        long double xd = x[i], c = sqrtl(2.0L / 3.14159265358979323846264338327950288L);
        /* (1 + tanh u) / 2 as 1 / (1 + e^-2u) and 1 - tanh^2 u as 1 / cosh^2 u:
         * in long double, (1 + tanhl(u)) would cancel for u << 0 */
        long double u = c * (xd + 0.044715L * xd * xd * xd), s = 1 / (1 + expl(-2 * u)), ch = coshl(u);
        long double sech2 = 1 / (ch * ch), g = xd * s, dg = s + xd * sech2 / 2 * c * (1 + 3 * 0.044715L * xd * xd);
        /* ulps: 4, plus u's own error of up to 3 ulp (x^3, the sum and the
         * product each round) carried through s, which moves by s (1 - s) 2 du */
        double allow = 4 + 6 * fabs((double)u) * (double)(1 - s);
        /* below 1e-30, near where exp(-2|u|) leaves float's normal range
         * (x < -9.5), an absolute 1e-30 (PyTorch's float tanh form is 0 from
         * x < -3.6 on, where tanh u rounds to -1) */
        double e = fabsl(g) >= 1e-30 ? ulps(y[i], (double)g) / allow : fabs(y[i] - (double)g) / 1e-30;
        if (!(e <= wf)) wf = e, wfx = xd;
        double scale = fabs((double)s) + fabs((double)(xd * sech2 / 2 * c * (1 + 3 * 0.044715L * xd * xd)));
        scale = fmax(scale, 1e-30 / 0x1p-24);
        e = fabs(d[i] - (double)dg) / (scale * 0x1p-24) / (allow + 4);
        if (!(e <= wb)) wb = e;
    }
    CHECK(wf <= 1, "op_gelu_tanh_fwd: worst %.2f of the bound (x = %.9g)", wf, wfx);
    CHECK(wb <= 1, "op_gelu_tanh_bwd: worst %.2f of the bound", wb);
    printf("  op_gelu_tanh_fwd %.2f, op_gelu_tanh_bwd %.2f of their bounds (x in [-10, 10])\n", wf, wb);
    /* hand values: gelu_tanh(1) = 0.8411919906082768, (-1) = -0.1588080093917232,
     * (3) = 2.996362607918227; the inf - inf of a huge x is not made */
    const double hx[3] = {1, -1, 3}, hv[3] = {0.8411919906082768, -0.15880800939172324, 2.996362607918227};
    for (int i = 0; i < 3; i++) {
        real in = (real)hx[i], g;
        op_gelu_tanh_fwd(&g, &in, 1);
        CHECK(fabs(g - hv[i]) <= 4e-7 * fabs(hv[i]), "gelu_tanh(%g) = %.9g, want %.17g", hx[i], g, hv[i]);
    }
    real big[2] = {(real)3e38, (real)-3e38}, gb[2], db[2], ones[2] = {1, 1};
    op_gelu_tanh_fwd(gb, big, 2);
    op_gelu_tanh_bwd(db, big, ones, 2);
    CHECK(gb[0] == big[0] && gb[1] == 0 && db[0] == 1 && db[1] == 0, "gelu_tanh(+-3e38) = %g %g, slopes %g %g", gb[0],
          gb[1], db[0], db[1]);
}

/* Phi(x) from normal tables; gelu(x) = x Phi(x), gelu'(x) = Phi + x phi */
static void hand_values(void) {
    static const struct {
        float x;
        double phi;
    } t[] = {{0.0f, 0.5},
             {1.0f, 0.841344746068542948},
             {-1.0f, 0.158655253931457052},
             {2.0f, 0.977249868051820793},
             {-2.0f, 0.0227501319481792072},
             {-3.0f, 0.00134989803163009452},
             {-5.0f, 2.86651571879193912e-7},
             {-8.0f, 6.22096057427178413e-16}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        float x = t[i].x, p = sg_vnormal_cdf(x, sg_vnormal_exp(x));
        CHECK(ulps(p, t[i].phi) <= 4, "Phi(%g) = %.9g, want %.17g", x, p, t[i].phi);
        real in = x, g, dg, one = 1;
        op_gelu_fwd(&g, &in, 1);
        op_gelu_bwd(&dg, &in, &one, 1);
        if (x != 0) CHECK(ulps(g, x * t[i].phi) <= 5, "gelu(%g) = %.9g, want %.17g", x, g, x * t[i].phi);
        else CHECK(g == 0, "gelu(0) = %g", g);
        double want = t[i].phi + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
        CHECK(fabs(dg - want) <= 4e-7 * (t[i].phi + fabs(x) * exp(-0.5 * x * x)), "gelu'(%g) = %.9g, want %.17g", x,
              dg, want);
    }
    /* gelu(1) = 0.8413447..., the value PyTorch prints */
    real in = 1, g;
    op_gelu_fwd(&g, &in, 1);
    CHECK(fabs(g - 0.84134474f) <= 1e-7, "gelu(1) = %.9g", g);
}

static void specials(void) {
    float inf = INFINITY;
    CHECK(sg_vnormal_cdf(inf, sg_vnormal_exp(inf)) == 1.0f, "Phi(inf)");
    CHECK(sg_vnormal_cdf(-inf, sg_vnormal_exp(-inf)) == 0.0f, "Phi(-inf)");
    CHECK(sg_vnormal_cdf(30.0f, sg_vnormal_exp(30.0f)) == 1.0f, "Phi(30)");
    CHECK(sg_vnormal_cdf(-30.0f, sg_vnormal_exp(-30.0f)) == 0.0f, "Phi(-30)");
    CHECK(isnan(sg_vnormal_cdf(NAN, sg_vnormal_exp(NAN))), "Phi(NaN)");
    CHECK(sg_vnormal_exp(0.0f) == 1.0f, "exp(-0/2)");
    CHECK(sg_vexpf(0.0f) == 1.0f && sg_vexpf(-INFINITY) == 0.0f, "exp(0), exp(-inf)");
    CHECK(isnan(sg_vexpf(NAN)), "exp(NaN)");
}

int main(void) {
    check_name = "test_vmath";
    accuracy();
    gelu_ops();
    gelu_tanh_ops();
    hand_values();
    specials();
    return check_finish();
}
