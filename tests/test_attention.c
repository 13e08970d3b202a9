/* Attention and gate kernels (float build) against a naive reference written
 * here in double: the explicit softmax over each row, phantom column
 * included, with the full T x T probability matrix in memory, and the
 * backward taken straight from the definitions (D_i as sum_j P_ij dP_ij, not
 * dO_i . O_i).  It shares no code with kernels/cpu/.
 *
 * Tolerances.  Inputs are exact in float; the kernels accumulate in float
 * over at most a few hundred terms and use a 1-ulp exponential, so the
 * observed error is ~6e-7 of the largest entry of each tensor (and ~6e-6 in
 * the amp = 6 case, whose logits reach ~50 and so carry ~3e-6 of rounding
 * each).  Every comparison asks |got - want| <= TOL (max(max|want|, 1) +
 * |want|) with TOL = 2e-5:
 * relative to the tensor's scale (small entries of a gradient are sums with
 * cancellation, so a pure relative test would be meaningless there), with
 * room for 1e-5-level drift and nothing close to an indexing or masking bug
 * (those give O(1) errors).
 *
 * Also: identities between arms (off-by-one == sink logit 0 bitwise; a sink
 * logit of -200 == no phantom), Lemma 3.1 (value slot = Z_i x routing slot),
 * and bitwise determinism across calls and thread counts. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "rng.h"

#define TOL 2e-5

/* ---- small helpers ------------------------------------------------------ */

/* The project's counter-based generator (src/rng.h), walked in order. */
static uint64_t rng_i = 0;
static double urand(void) { return rng_uniform(0x243f6a8885a308d3ull, rng_i++); }
static double unif(double a, double b) { return a + (b - a) * urand(); }
static void fill(real *x, long n, double a, double b) {
    for (long i = 0; i < n; i++) x[i] = (real)unif(a, b);
}
static void fill_nan(real *x, long n) {
    for (long i = 0; i < n; i++) x[i] = NAN;
}
static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) abort();
    return p;
}

static double worst_seen = 0; /* largest error / tolerance over the run */

/* |got - want| <= TOL (max(max|want|, 1) + |want|) elementwise */
static void compare(const char *what, const char *ctx, const real *got, const double *want,
                    long n) {
    double *g = xcalloc(n, sizeof(double));
    double scale = 0;
    for (long i = 0; i < n; i++) {
        g[i] = got[i];
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    /* Floor of 1 on the scale: a gradient that is exactly 0 in exact
     * arithmetic (T = 1 without a phantom: p = 1, dS = dp - D = 0) comes out
     * as the rounding residue of dp - D, a few ulp of dp = O(1). */
    if (scale < 1) scale = 1;
    long w = 0;
    double e = check_max_err(g, want, n, TOL * scale, TOL, &w);
    if (e > worst_seen && isfinite(e)) worst_seen = e;
    if (getenv("SG_VERBOSE")) printf("  %-24s %-50s %.3g\n", what, ctx, e);
    CHECK(e <= 1, "%s [%s]: error %.3g x tolerance at %ld: got %.9g want %.9g", what, ctx, e, w,
          n ? g[w] : 0.0, n ? want[w] : 0.0);
    free(g);
}

/* ---- naive attention reference (double) ---------------------------------- */

typedef struct {
    int B, T, H, d;
    int phantom;
    const real *sink; /* NULL => phantom logit 0 */
    const real *lb;   /* [B,H,T] or NULL */
} Ref;

/* Row i of the probability matrix of (b,h): p[0] the phantom (0 without
 * one), p[1+j] key j (0 for j > i).  Returns LSE_i. */
static double ref_row(const Ref *r, const real *qkv, int b, int h, int i, double *p) {
    const int C = r->H * r->d, T = r->T, d = r->d;
    const real *qi = qkv + ((long)b * T + i) * 3 * C + h * d;
    double mx = -INFINITY;
    p[0] = r->phantom ? (r->sink ? r->sink[h] : 0.0) : -INFINITY;
    mx = p[0];
    for (int j = 0; j < T; j++) {
        if (j > i) {
            p[1 + j] = -INFINITY;
            continue;
        }
        const real *kj = qkv + ((long)b * T + j) * 3 * C + C + h * d;
        double s = 0;
        for (int e = 0; e < d; e++) s += (double)qi[e] * kj[e];
        s /= sqrt((double)d);
        if (r->lb) s += r->lb[((long)b * r->H + h) * T + j];
        p[1 + j] = s;
        if (s > mx) mx = s;
    }
    double z = 0;
    for (int j = 0; j <= T; j++) z += exp(p[j] - mx);
    for (int j = 0; j <= T; j++) p[j] = exp(p[j] - mx) / z;
    return mx + log(z);
}

/* o, dq, dk, dv compact [B,T,C]; lse, dlb [B,H,T]; dsink [H] (0 = no phantom). */
static void ref_attention(const Ref *r, const real *qkv, const real *dout, double *o, double *lse,
                          double *dq, double *dk, double *dv, double *dsink, double *dlb) {
    const int B = r->B, T = r->T, H = r->H, d = r->d, C = H * d;
    const double sc = 1 / sqrt((double)d);
    double *P = xcalloc((size_t)T * (T + 1), sizeof(double));
    double *dS = xcalloc((size_t)T * (T + 1), sizeof(double));
    memset(dq, 0, sizeof(double) * B * T * C);
    memset(dk, 0, sizeof(double) * B * T * C);
    memset(dv, 0, sizeof(double) * B * T * C);
    memset(dsink, 0, sizeof(double) * H);
    memset(dlb, 0, sizeof(double) * B * H * T);
#define Q(t) (qkv + ((long)b * T + (t)) * 3 * C + h * d)
#define K(t) (Q(t) + C)
#define V(t) (Q(t) + 2 * C)
#define CO(t) (((long)b * T + (t)) * C + h * d)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < T; i++) {
                double *p = P + (long)i * (T + 1);
                lse[((long)b * H + h) * T + i] = ref_row(r, qkv, b, h, i, p);
                for (int e = 0; e < d; e++) {
                    double acc = 0;
                    for (int j = 0; j <= i; j++) acc += p[1 + j] * V(j)[e];
                    o[CO(i) + e] = acc;
                }
            }
            for (int i = 0; i < T; i++) {
                const double *p = P + (long)i * (T + 1);
                double *ds = dS + (long)i * (T + 1);
                const real *g = dout + CO(i);
                double dp[T + 1], D = 0;
                dp[0] = 0; /* the phantom's value is zero */
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    if (j <= i)
                        for (int e = 0; e < d; e++) s += (double)g[e] * V(j)[e];
                    dp[1 + j] = s;
                }
                for (int j = 0; j <= T; j++) D += p[j] * dp[j];
                for (int j = 0; j <= T; j++) ds[j] = p[j] * (dp[j] - D);
                if (r->phantom) dsink[h] += ds[0];
            }
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const double ds = dS[(long)i * (T + 1) + 1 + j];
                    const double p = P[(long)i * (T + 1) + 1 + j];
                    for (int e = 0; e < d; e++) {
                        dq[CO(i) + e] += ds * K(j)[e] * sc;
                        dk[CO(j) + e] += ds * Q(i)[e] * sc;
                        dv[CO(j) + e] += p * dout[CO(i) + e];
                    }
                    dlb[((long)b * H + h) * T + j] += ds;
                }
        }
#undef Q
#undef K
#undef V
#undef CO
    free(P);
    free(dS);
}

/* ---- running the kernels --------------------------------------------------- */

typedef struct {
    int B, T, H, d;
    real *qkv, *dout, *sink, *lb;
    /* outputs */
    real *o, *lse, *dqkv, *dsink, *dlb;
} Bufs;

static Bufs bufs_new(int B, int T, int H, int d, double amp) {
    Bufs u = {B, T, H, d, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const long C = (long)H * d, BT = (long)B * T;
    u.qkv = xcalloc(BT * 3 * C, sizeof(real));
    u.dout = xcalloc(BT * C, sizeof(real));
    u.sink = xcalloc(H, sizeof(real));
    u.lb = xcalloc((size_t)B * H * T, sizeof(real));
    u.o = xcalloc(BT * C, sizeof(real));
    u.lse = xcalloc((size_t)B * H * T, sizeof(real));
    u.dqkv = xcalloc(BT * 3 * C, sizeof(real));
    u.dsink = xcalloc(H, sizeof(real));
    u.dlb = xcalloc((size_t)B * H * T, sizeof(real));
    for (long row = 0; row < BT; row++) {
        fill(u.qkv + row * 3 * C, 2 * C, -amp, amp); /* q, k: logits spread ~amp^2/3 */
        fill(u.qkv + row * 3 * C + 2 * C, C, -1, 1); /* v */
    }
    fill(u.dout, BT * C, -1, 1);
    fill(u.sink, H, -2, 2);
    for (long i = 0; i < (long)B * H * T; i++) { /* log sigmoid(z), z in [-3, 3] */
        double z = unif(-3, 3);
        u.lb[i] = (real)(-log1p(exp(-z)));
    }
    return u;
}

static void bufs_free(Bufs *u) {
    free(u->qkv), free(u->dout), free(u->sink), free(u->lb), free(u->o), free(u->lse);
    free(u->dqkv), free(u->dsink), free(u->dlb);
}

static AttnArgs args_of(const Bufs *u, int phantom, const real *sink, const real *lb) {
    const int C = u->H * u->d;
    AttnArgs a = {u->B, u->T, u->H, u->d, 3 * C, 3 * C, 3 * C, C, phantom, sink, lb};
    return a;
}

/* Forward and backward; outputs are pre-filled with NaN (they must be
 * overwritten) except dsink, which accumulates onto dsink0. */
static void run_attn(Bufs *u, const AttnArgs *a, real dsink0) {
    const long C = (long)u->H * u->d, BT = (long)u->B * u->T;
    fill_nan(u->o, BT * C);
    fill_nan(u->lse, (long)u->B * u->H * u->T);
    fill_nan(u->dqkv, BT * 3 * C);
    fill_nan(u->dlb, (long)u->B * u->H * u->T);
    for (int h = 0; h < u->H; h++) u->dsink[h] = dsink0;
    op_attention_fwd(u->o, u->lse, u->qkv, u->qkv + C, u->qkv + 2 * C, a);
    op_attention_bwd(u->dqkv, u->dqkv + C, u->dqkv + 2 * C, a->sink ? u->dsink : NULL,
                     a->logbias ? u->dlb : NULL, u->dout, u->qkv, u->qkv + C, u->qkv + 2 * C, u->o,
                     u->lse, a);
}

/* Column block `part` (0 q, 1 k, 2 v) of a [B,T,3C] buffer, compacted. */
static void extract(real *dst, const real *src, long BT, long C, int part) {
    for (long row = 0; row < BT; row++)
        memcpy(dst + row * C, src + row * 3 * C + part * C, sizeof(real) * C);
}

static const char *mode_name[] = {"baseline", "offbyone",         "sinklogit",
                                  "logbias",  "logbias+offbyone", "logbias+sinklogit"};

static void test_against_reference(int B, int T, int H, int d, double amp) {
    Bufs u = bufs_new(B, T, H, d, amp);
    const long C = (long)H * d, BT = (long)B * T, BHT = (long)B * H * T;
    double *o = xcalloc(BT * C, sizeof(double)), *lse = xcalloc(BHT, sizeof(double)),
           *dq = xcalloc(BT * C, sizeof(double));
    double *dk = xcalloc(BT * C, sizeof(double)), *dv = xcalloc(BT * C, sizeof(double)),
           *dsink = xcalloc(H, sizeof(double));
    double *dlb = xcalloc(BHT, sizeof(double));
    real *tmp = xcalloc(BT * C, sizeof(real));
    for (int mode = 0; mode < 6; mode++) {
        const int phantom = mode == 1 || mode == 2 || mode == 4 || mode == 5;
        const real *sink = mode == 2 || mode == 5 ? u.sink : NULL;
        const real *lb = mode >= 3 ? u.lb : NULL;
        char ctx[128];
        snprintf(ctx, sizeof ctx, "B=%d T=%d H=%d d=%d amp=%g %s", B, T, H, d, amp,
                 mode_name[mode]);
        AttnArgs a = args_of(&u, phantom, sink, lb);
        run_attn(&u, &a, (real)0.25);
        Ref r = {B, T, H, d, phantom, sink, lb};
        ref_attention(&r, u.qkv, u.dout, o, lse, dq, dk, dv, dsink, dlb);

        compare("o", ctx, u.o, o, BT * C);
        compare("lse", ctx, u.lse, lse, BHT);
        extract(tmp, u.dqkv, BT, C, 0);
        compare("dq", ctx, tmp, dq, BT * C);
        extract(tmp, u.dqkv, BT, C, 1);
        compare("dk", ctx, tmp, dk, BT * C);
        extract(tmp, u.dqkv, BT, C, 2);
        compare("dv", ctx, tmp, dv, BT * C);
        if (sink) {
            for (int h = 0; h < H; h++) dsink[h] += 0.25; /* accumulated onto 0.25 */
            compare("dsink", ctx, u.dsink, dsink, H);
        } else {
            int untouched = 1;
            for (int h = 0; h < H; h++) untouched &= u.dsink[h] == (real)0.25;
            CHECK(untouched, "dsink must not be touched without a sink [%s]", ctx);
        }
        if (lb) compare("dlogbias", ctx, u.dlb, dlb, BHT);
    }
    free(o), free(lse), free(dq), free(dk), free(dv), free(dsink), free(dlb), free(tmp);
    bufs_free(&u);
}

/* ---- identities between arms ------------------------------------------------ */

static int bitwise_eq(const real *a, const real *b, long n) {
    return memcmp(a, b, sizeof(real) * n) == 0;
}

typedef struct {
    real *o, *lse, *dqkv, *dsink, *dlb;
} Snap;

static Snap snap(const Bufs *u) {
    const long C = (long)u->H * u->d, BT = (long)u->B * u->T, BHT = (long)u->B * u->H * u->T;
    Snap s;
    s.o = xcalloc(BT * C, sizeof(real));
    s.lse = xcalloc(BHT, sizeof(real));
    s.dqkv = xcalloc(BT * 3 * C, sizeof(real));
    s.dsink = xcalloc(u->H, sizeof(real));
    s.dlb = xcalloc(BHT, sizeof(real));
    memcpy(s.o, u->o, sizeof(real) * BT * C);
    memcpy(s.lse, u->lse, sizeof(real) * BHT);
    memcpy(s.dqkv, u->dqkv, sizeof(real) * BT * 3 * C);
    memcpy(s.dsink, u->dsink, sizeof(real) * u->H);
    memcpy(s.dlb, u->dlb, sizeof(real) * BHT);
    return s;
}
static void snap_free(Snap *s) {
    free(s->o), free(s->lse), free(s->dqkv), free(s->dsink), free(s->dlb);
}

static int snap_eq(const Snap *s, const Bufs *u, int with_dsink) {
    const long C = (long)u->H * u->d, BT = (long)u->B * u->T, BHT = (long)u->B * u->H * u->T;
    return bitwise_eq(s->o, u->o, BT * C) && bitwise_eq(s->lse, u->lse, BHT) &&
           bitwise_eq(s->dqkv, u->dqkv, BT * 3 * C) && bitwise_eq(s->dlb, u->dlb, BHT) &&
           (!with_dsink || bitwise_eq(s->dsink, u->dsink, u->H));
}

static void test_arm_identities(int T, int d) {
    const int B = 2, H = 3;
    Bufs u = bufs_new(B, T, H, d, 2.0);
    const long C = (long)H * d, BT = (long)B * T;
    real zeros[3] = {0, 0, 0}, minus200[3] = {-200, -200, -200};
    for (int with_lb = 0; with_lb < 2; with_lb++) {
        const real *lb = with_lb ? u.lb : NULL;
        /* off-by-one (sink == NULL) is the sink logit with b_h = 0, bitwise */
        AttnArgs a = args_of(&u, 1, NULL, lb);
        run_attn(&u, &a, 0);
        Snap s = snap(&u);
        a = args_of(&u, 1, zeros, lb);
        run_attn(&u, &a, 0);
        CHECK(snap_eq(&s, &u, 0), "offbyone != sinklogit(b=0) bitwise (T=%d d=%d lb=%d)", T, d,
              with_lb);
        snap_free(&s);

        /* a sink logit of -200 is no phantom: exp(-200) underflows in float */
        a = args_of(&u, 0, NULL, lb);
        run_attn(&u, &a, 0);
        s = snap(&u);
        a = args_of(&u, 1, minus200, lb);
        run_attn(&u, &a, 0);
        long w;
        double *x = xcalloc(BT * 3 * C, sizeof(double)), *y = xcalloc(BT * 3 * C, sizeof(double));
        for (long i = 0; i < BT * C; i++) x[i] = s.o[i], y[i] = u.o[i];
        double e = check_max_err(x, y, BT * C, 1e-7, 1e-6, &w);
        CHECK(e <= 1, "sink -200 vs no phantom: o differs (%.3g x tol) T=%d d=%d", e, T, d);
        for (long i = 0; i < BT * 3 * C; i++) x[i] = s.dqkv[i], y[i] = u.dqkv[i];
        e = check_max_err(x, y, BT * 3 * C, 1e-7, 1e-6, &w);
        CHECK(e <= 1, "sink -200 vs no phantom: dqkv differs (%.3g x tol) T=%d d=%d", e, T, d);
        for (int h = 0; h < H; h++)
            CHECK(fabs(u.dsink[h]) < 1e-30, "dsink at b=-200 is %g", (double)u.dsink[h]);
        free(x), free(y);
        snap_free(&s);
    }
    bufs_free(&u);
}

/* ---- determinism ------------------------------------------------------------- */

static void test_determinism(void) {
    const int B = 2, T = 130, H = 3, d = 64;
    Bufs u = bufs_new(B, T, H, d, 2.0);
    const int nthr = omp_get_max_threads();
    for (int mode = 0; mode < 6; mode++) {
        const int phantom = mode == 1 || mode == 2 || mode == 4 || mode == 5;
        const real *sink = mode == 2 || mode == 5 ? u.sink : NULL;
        const real *lb = mode >= 3 ? u.lb : NULL;
        AttnArgs a = args_of(&u, phantom, sink, lb);
        run_attn(&u, &a, 0);
        Snap s = snap(&u);
        run_attn(&u, &a, 0);
        CHECK(snap_eq(&s, &u, 1), "two calls differ (%s)", mode_name[mode]);
        const int counts[] = {1, 3, 7};
        for (int c = 0; c < 3; c++) {
            omp_set_num_threads(counts[c]);
            run_attn(&u, &a, 0);
            CHECK(snap_eq(&s, &u, 1), "%d threads differ from %d (%s)", counts[c], nthr,
                  mode_name[mode]);
        }
        omp_set_num_threads(nthr);
        snap_free(&s);
    }
    bufs_free(&u);
}

/* ---- gates ------------------------------------------------------------------- */

typedef struct {
    int kind, slot;
    double beta;
    real tau[4], w[4 * 64], b[4];
} GateSpec;

static GateParams gate_params(const GateSpec *s) {
    GateParams p = {s->kind, s->slot, (real)s->beta, s->tau, s->w, s->b};
    return p;
}

/* z, g of one read, in double; *dzdv filled (d entries). */
static double ref_gate_z(const GateSpec *s, const real *v, int h, int d, double *dzdv) {
    if (s->kind == GATE_NORM) {
        double nn = 0;
        for (int e = 0; e < d; e++) nn += (double)v[e] * v[e];
        const double n = sqrt(nn);
        for (int e = 0; e < d; e++) dzdv[e] = n > 0 ? s->beta * v[e] / (sqrt((double)d) * n) : 0;
        return s->beta * (n / sqrt((double)d) - s->tau[h]);
    }
    double z = s->b[h];
    for (int e = 0; e < d; e++) {
        z += (double)s->w[h * d + e] * v[e];
        dzdv[e] = s->w[h * d + e];
    }
    return z;
}

static void test_gate(int kind, int slot, int B, int T, int H, int d) {
    const long C = (long)H * d, BT = (long)B * T, BHT = (long)B * H * T;
    GateSpec s = {kind, slot, 8.0, {0}, {0}, {0}};
    for (int h = 0; h < H; h++) {
        s.tau[h] = (real)unif(0.45, 0.65); /* ||v||/sqrt(d) of a uniform read ~ 0.58 */
        s.b[h] = (real)unif(-1, 1);
        for (int e = 0; e < d; e++) s.w[h * d + e] = (real)unif(-0.4, 0.4);
    }
    GateParams p = gate_params(&s);
    real *qkv = xcalloc(BT * 3 * C, sizeof(real));
    fill(qkv, BT * 3 * C, -1, 1);
    for (int e = 0; e < d; e++) qkv[2 * C + e] = 0; /* one zero read: dz/dv = 0 there */
    const real *v = qkv + 2 * C;
    real *g = xcalloc(BHT, sizeof(real)), *vg = xcalloc(BT * C, sizeof(real));
    real *lb = xcalloc(BHT, sizeof(real)), *dvg = xcalloc(BT * C, sizeof(real));
    real *dlb = xcalloc(BHT, sizeof(real)), *dqkv = xcalloc(BT * 3 * C, sizeof(real));
    real dtau[4], dw[4 * 64], db[4];
    fill(dvg, BT * C, -1, 1);
    fill(dlb, BHT, -1, 1);
    fill(dqkv, BT * 3 * C, -1, 1); /* routing slot accumulates onto this */
    real *dqkv0 = xcalloc(BT * 3 * C, sizeof(real));
    memcpy(dqkv0, dqkv, sizeof(real) * BT * 3 * C);
    if (slot == SLOT_VALUE) {
        fill_nan(lb, BHT); /* untouched */
        for (long row = 0; row < BT; row++) fill_nan(dqkv + row * 3 * C + 2 * C, C);
    } else {
        fill_nan(vg, BT * C); /* untouched */
    }
    fill_nan(g, BHT);
    for (int i = 0; i < 4; i++) dtau[i] = db[i] = (real)0.5;
    for (int i = 0; i < 4 * 64; i++) dw[i] = (real)-0.5;

    op_gate_fwd(g, slot == SLOT_VALUE ? vg : NULL, slot == SLOT_ROUTING ? lb : NULL, v, 3 * C, &p,
                B, T, H, d);
    op_gate_bwd(dqkv + 2 * C, 3 * C, dtau, dw, db, slot == SLOT_VALUE ? dvg : NULL,
                slot == SLOT_ROUTING ? dlb : NULL, v, 3 * C, g, &p, B, T, H, d);

    double *rg = xcalloc(BHT, sizeof(double)), *rvg = xcalloc(BT * C, sizeof(double)),
           *rlb = xcalloc(BHT, sizeof(double));
    double *rdv = xcalloc(BT * C, sizeof(double)), rdtau[4], rdw[4 * 64], rdb[4], dzdv[64];
    for (int i = 0; i < 4; i++) rdtau[i] = rdb[i] = 0.5;
    for (int i = 0; i < 4 * 64; i++) rdw[i] = -0.5;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const long row = (long)b * T + t, gi = ((long)b * H + h) * T + t;
                const real *vr = v + row * 3 * C + h * d;
                const double z = ref_gate_z(&s, vr, h, d, dzdv);
                const double gv = 1 / (1 + exp(-z));
                rg[gi] = gv;
                rlb[gi] = log(gv);
                double dz;
                double *o = rdv + row * C + h * d;
                if (slot == SLOT_VALUE) {
                    double a = 0;
                    for (int e = 0; e < d; e++) {
                        rvg[row * C + h * d + e] = gv * vr[e];
                        a += (double)dvg[row * C + h * d + e] * vr[e];
                    }
                    dz = a * gv * (1 - gv);
                    for (int e = 0; e < d; e++) o[e] = gv * dvg[row * C + h * d + e] + dz * dzdv[e];
                } else {
                    dz = dlb[gi] * (1 - gv);
                    for (int e = 0; e < d; e++)
                        o[e] = dqkv0[row * 3 * C + 2 * C + h * d + e] + dz * dzdv[e];
                }
                if (kind == GATE_NORM) {
                    rdtau[h] -= s.beta * dz;
                } else {
                    rdb[h] += dz;
                    for (int e = 0; e < d; e++) rdw[h * d + e] += dz * vr[e];
                }
            }
    char ctx[96];
    snprintf(ctx, sizeof ctx, "%s gate, %s slot, B=%d T=%d H=%d d=%d",
             kind == GATE_NORM ? "norm" : "proj", slot == SLOT_VALUE ? "value" : "routing", B, T, H,
             d);
    compare("g", ctx, g, rg, BHT);
    real *tmp = xcalloc(BT * C, sizeof(real));
    if (slot == SLOT_VALUE) {
        compare("vg", ctx, vg, rvg, BT * C);
        int untouched = 1;
        for (long i = 0; i < BHT; i++) untouched &= isnan(lb[i]);
        CHECK(untouched, "logbias written in the value slot [%s]", ctx);
    } else {
        compare("logbias", ctx, lb, rlb, BHT);
        int untouched = 1;
        for (long i = 0; i < BT * C; i++) untouched &= isnan(vg[i]);
        CHECK(untouched, "vg written in the routing slot [%s]", ctx);
    }
    extract(tmp, dqkv, BT, C, 2);
    compare("dv", ctx, tmp, rdv, BT * C);
    /* q and k columns of the gradient buffer are not the gate's */
    int qk_kept = 1;
    for (long row = 0; row < BT; row++)
        qk_kept &= bitwise_eq(dqkv + row * 3 * C, dqkv0 + row * 3 * C, 2 * C);
    CHECK(qk_kept, "gate backward wrote outside dv [%s]", ctx);
    if (kind == GATE_NORM) {
        compare("dtau", ctx, dtau, rdtau, H);
    } else {
        compare("db", ctx, db, rdb, H);
        compare("dw", ctx, dw, rdw, (long)H * d);
    }

    /* determinism of the parameter-gradient reduction across thread counts */
    real dtau1[4], dw1[4 * 64], db1[4];
    const int nthr = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? 1 : nthr);
        for (int i = 0; i < 4; i++) dtau[i] = db[i] = 0;
        for (int i = 0; i < 4 * 64; i++) dw[i] = 0;
        op_gate_bwd(dqkv + 2 * C, 3 * C, dtau, dw, db, dvg, dlb, v, 3 * C, g, &p, B, T, H, d);
        if (rep == 0) {
            memcpy(dtau1, dtau, sizeof dtau), memcpy(dw1, dw, sizeof dw),
                memcpy(db1, db, sizeof db);
        }
    }
    omp_set_num_threads(nthr);
    CHECK(!memcmp(dtau1, dtau, sizeof dtau) && !memcmp(dw1, dw, sizeof dw) &&
              !memcmp(db1, db, sizeof db),
          "gate parameter gradients depend on the thread count [%s]", ctx);

    free(qkv), free(g), free(vg), free(lb), free(dvg), free(dlb), free(dqkv), free(dqkv0);
    free(rg), free(rvg), free(rlb), free(rdv), free(tmp);
}

/* Gate logits far out: the stable forms must stay finite and accurate. */
static void test_gate_extremes(void) {
    const int B = 1, T = 4, H = 1, d = 2;
    real v[4 * 2] = {0, 0, 1, 0, 0, 1, 1, 1};
    const real zs[4] = {-120, -30, 30, 120};
    real w[2] = {0, 0}, b[1] = {0}, g[4], lb[4];
    for (int t = 0; t < 4; t++) {
        b[0] = zs[t];
        GateParams p = {GATE_PROJ, SLOT_ROUTING, 8, NULL, w, b};
        op_gate_fwd(g, NULL, lb, v, 2, &p, B, T, H, d);
        const double z = zs[t];
        const double want_lb = z < 0 ? z - log1p(exp(z)) : -log1p(exp(-z));
        CHECK(isfinite(lb[0]), "log g not finite at z=%g", z);
        CHECK_CLOSE(lb[0], want_lb, 1e-30, 1e-6, "log sigmoid(z) extreme z");
        CHECK(g[0] >= 0 && g[0] <= 1, "g out of [0,1] at z=%g", z);
    }
}

/* ---- Lemma 3.1 ------------------------------------------------------------- */

/* Value slot (v <- g v, no bias) against routing slot (logbias = log g, raw
 * v): o_value_i = Z_i o_routing_i with Z_i = sum_j a_ij g_j and a_ij the
 * baseline weights (no phantom, no bias), from the double reference. */
static void test_lemma31(int kind, int T, int d) {
    const int B = 2, H = 3;
    const long C = (long)H * d, BT = (long)B * T, BHT = (long)B * H * T;
    Bufs u = bufs_new(B, T, H, d, 2.0);
    GateSpec s = {kind, SLOT_VALUE, 8.0, {0}, {0}, {0}};
    for (int h = 0; h < H; h++) {
        s.tau[h] = (real)unif(0.5, 0.65);
        s.b[h] = (real)unif(-1, 1);
        for (int e = 0; e < d; e++) s.w[h * d + e] = (real)unif(-0.5, 0.5);
    }
    real *g = xcalloc(BHT, sizeof(real)), *vg = xcalloc(BT * C, sizeof(real));
    real *lb = xcalloc(BHT, sizeof(real)), *ov = xcalloc(BT * C, sizeof(real));
    real *orr = xcalloc(BT * C, sizeof(real)), *lse = xcalloc(BHT, sizeof(real));
    GateParams p = gate_params(&s);
    op_gate_fwd(g, vg, NULL, u.qkv + 2 * C, 3 * C, &p, B, T, H, d);
    p.slot = SLOT_ROUTING;
    op_gate_fwd(g, NULL, lb, u.qkv + 2 * C, 3 * C, &p, B, T, H, d);

    AttnArgs a = args_of(&u, 0, NULL, NULL);
    a.v_stride = (int)C; /* gated values live in their own [B,T,C] buffer */
    op_attention_fwd(ov, lse, u.qkv, u.qkv + C, vg, &a);
    a = args_of(&u, 0, NULL, lb);
    op_attention_fwd(orr, lse, u.qkv, u.qkv + C, u.qkv + 2 * C, &a);

    Ref r = {B, T, H, d, 0, NULL, NULL};
    double *prow = xcalloc(T + 1, sizeof(double)), *want = xcalloc(BT * C, sizeof(double));
    double minz = 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                ref_row(&r, u.qkv, b, h, i, prow);
                double Z = 0;
                for (int j = 0; j <= i; j++) Z += prow[1 + j] * g[((long)b * H + h) * T + j];
                if (Z < minz) minz = Z;
                for (int e = 0; e < d; e++) {
                    const long idx = ((long)b * T + i) * C + h * d + e;
                    want[idx] = Z * orr[idx];
                }
            }
    char ctx[64];
    snprintf(ctx, sizeof ctx, "Lemma 3.1, %s gate, T=%d d=%d (min Z %.2f)",
             kind == GATE_NORM ? "norm" : "proj", T, d, minz);
    compare("o_value vs Z o_routing", ctx, ov, want, BT * C);
    CHECK(minz < 0.9, "Lemma 3.1 test is vacuous: the gates are all open (min Z %.3f)", minz);
    free(g), free(vg), free(lb), free(ov), free(orr), free(lse), free(prow), free(want);
    bufs_free(&u);
}

int main(void) {
    check_name = "test_attention";
    const int Ts[] = {1, 7, 64, 130}, ds[] = {8, 64};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) test_against_reference(2, Ts[a], 3, ds[b], 2.0);
    /* large logits (spread ~12): the running max moves a lot between tiles */
    test_against_reference(2, 130, 3, 64, 6.0);
    test_against_reference(1, 200, 2, 24, 3.0); /* a width that is neither 8 nor 64 */
    test_against_reference(1, 70, 1, 128, 1.0); /* wider than one register row */

    test_arm_identities(7, 8);
    test_arm_identities(130, 64);
    test_determinism();

    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = SLOT_VALUE; slot <= SLOT_ROUTING; slot++) {
            test_gate(kind, slot, 2, 7, 3, 8);
            test_gate(kind, slot, 2, 33, 3, 64);
        }
    test_gate_extremes();
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++) {
        test_lemma31(kind, 7, 8);
        test_lemma31(kind, 130, 64);
    }
    printf("test_attention: worst error %.3g of tolerance (TOL %g)\n", worst_seen, TOL);
    return check_finish();
}
