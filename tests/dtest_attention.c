/* Gradient checks of the attention and gate kernels (double build).
 *
 * Scalar loss L = sum(o * R) for a fixed random R, so dL/do = R is what the
 * backward is fed.  Every checked input element x gets a central difference
 *   (L(x + h) - L(x - h)) / 2h,  h = 1e-5
 * and we require |analytic - numeric| <= 1e-6 (max|numeric| + |numeric|) for
 * each tensor (relative to the tensor's scale).  Why h = 1e-5: the error of
 * the difference is truncation (h^2/6 times the third derivative, ~1e-10
 * here) plus the rounding noise of L divided by 2h.  L sums thousands of
 * outputs, each a few ulp off; at d = 64 that noise measured ~6e-7 relative
 * at h = 1e-6 (it scales as 1/h), too close to the limit.  At h = 1e-5 the
 * worst error is ~7e-8, and at 1e-4 ~5e-9, so the analytic gradients are what
 * the differences converge to.  A wrong index, mask or sign gives O(1) errors.
 *
 * Cases: every element of q, k, v, sink and logbias on a small shape
 * (B=2, T=9, H=2, d=4, one tile); a subset of elements on shapes that cross
 * key-tile (64) and query-block (32) boundaries, one of them at d = 64
 * (the kernels' constant-width path); and the gates (norm and projection,
 * value and routing slot) chained with attention, w.r.t. v, tau, w and b. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "rng.h"

#define FD_H 1e-5
#define FD_TOL 1e-6

/* The project's counter-based generator (src/rng.h), walked in order. */
static uint64_t rng_i = 0;
static double urand(void) { return rng_uniform(0x13198a2e03707344ull, rng_i++); }
static double unif(double a, double b) { return a + (b - a) * urand(); }
static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) abort();
    return p;
}

/* One problem: the inputs, and what the chain through gate and attention
 * needs.  gate.kind == GATE_NONE means plain attention. */
typedef struct {
    int B, T, H, d, C;
    int phantom, use_sink, use_lb; /* use_lb: an external logbias input */
    GateParams gate;
    real *qkv, *sink, *lb, *R;
    real *tau, *w, *gb; /* gate parameters */
    /* work */
    real *o, *lse, *g, *vg, *glb;
} Prob;

static Prob prob_new(int B, int T, int H, int d, int phantom, int use_sink, int use_lb,
                     int gate_kind, int slot) {
    Prob p;
    memset(&p, 0, sizeof p);
    p.B = B, p.T = T, p.H = H, p.d = d, p.C = H * d;
    p.phantom = phantom, p.use_sink = use_sink, p.use_lb = use_lb;
    const long BT = (long)B * T, C = p.C, BHT = (long)B * H * T;
    p.qkv = xcalloc(BT * 3 * C, sizeof(real));
    p.sink = xcalloc(H, sizeof(real));
    p.lb = xcalloc(BHT, sizeof(real));
    p.R = xcalloc(BT * C, sizeof(real));
    p.tau = xcalloc(H, sizeof(real));
    p.w = xcalloc((size_t)H * d, sizeof(real));
    p.gb = xcalloc(H, sizeof(real));
    p.o = xcalloc(BT * C, sizeof(real));
    p.lse = xcalloc(BHT, sizeof(real));
    p.g = xcalloc(BHT, sizeof(real));
    p.vg = xcalloc(BT * C, sizeof(real));
    p.glb = xcalloc(BHT, sizeof(real));
    for (long i = 0; i < BT * 3 * C; i++) p.qkv[i] = unif(-1.5, 1.5);
    for (int h = 0; h < H; h++) p.sink[h] = unif(-2, 2);
    for (long i = 0; i < BHT; i++) p.lb[i] = -log1p(exp(-unif(-3, 3)));
    for (long i = 0; i < BT * C; i++) p.R[i] = unif(-1, 1);
    for (int h = 0; h < H; h++) {
        p.tau[h] = unif(0.5, 0.9); /* ||v||/sqrt(d) of these reads ~ 0.87 */
        p.gb[h] = unif(-1, 1);
    }
    for (long i = 0; i < (long)H * d; i++) p.w[i] = unif(-0.5, 0.5);
    GateParams gp = {gate_kind, slot, 8.0, p.tau, p.w, p.gb};
    p.gate = gp;
    return p;
}

static void prob_free(Prob *p) {
    free(p->qkv), free(p->sink), free(p->lb), free(p->R), free(p->tau), free(p->w);
    free(p->gb), free(p->o), free(p->lse), free(p->g), free(p->vg), free(p->glb);
}

/* Attention arguments of the chain: with a value-slot gate the values are
 * the gated copy ([B,T,C]); with a routing-slot gate its log g is the bias. */
static AttnArgs chain_args(const Prob *p, const real **v) {
    const int C = p->C;
    AttnArgs a = {p->B,
                  p->T,
                  p->H,
                  p->d,
                  3 * C,
                  3 * C,
                  3 * C,
                  C,
                  p->phantom,
                  p->use_sink ? p->sink : NULL,
                  p->use_lb ? p->lb : NULL};
    *v = p->qkv + 2 * C;
    if (p->gate.kind != GATE_NONE) {
        if (p->gate.slot == SLOT_VALUE) {
            *v = p->vg;
            a.v_stride = C;
        } else {
            a.logbias = p->glb;
        }
    }
    return a;
}

static double loss(Prob *p) {
    const int C = p->C;
    if (p->gate.kind != GATE_NONE)
        op_gate_fwd(p->g, p->vg, p->glb, p->qkv + 2 * C, 3 * C, &p->gate, p->B, p->T, p->H, p->d);
    const real *v;
    AttnArgs a = chain_args(p, &v);
    op_attention_fwd(p->o, p->lse, p->qkv, p->qkv + C, v, &a);
    double L = 0;
    for (long i = 0; i < (long)p->B * p->T * C; i++) L += p->o[i] * p->R[i];
    return L;
}

typedef struct {
    real *dqkv, *dsink, *dlb, *dtau, *dw, *db;
} Grads;

static Grads grads(Prob *p) {
    const int C = p->C;
    const long BT = (long)p->B * p->T, BHT = (long)p->B * p->H * p->T;
    Grads g;
    g.dqkv = xcalloc(BT * 3 * C, sizeof(real));
    g.dsink = xcalloc(p->H, sizeof(real));
    g.dlb = xcalloc(BHT, sizeof(real));
    g.dtau = xcalloc(p->H, sizeof(real));
    g.dw = xcalloc((size_t)p->H * p->d, sizeof(real));
    g.db = xcalloc(p->H, sizeof(real));
    real *dvg = xcalloc(BT * C, sizeof(real)), *dglb = xcalloc(BHT, sizeof(real));
    loss(p);
    const real *v;
    AttnArgs a = chain_args(p, &v);
    const int value_gate = p->gate.kind != GATE_NONE && p->gate.slot == SLOT_VALUE;
    const int route_gate = p->gate.kind != GATE_NONE && p->gate.slot == SLOT_ROUTING;
    op_attention_bwd(g.dqkv, g.dqkv + C, value_gate ? dvg : g.dqkv + 2 * C,
                     p->use_sink ? g.dsink : NULL,
                     route_gate  ? dglb
                     : p->use_lb ? g.dlb
                                 : NULL,
                     p->R, p->qkv, p->qkv + C, v, p->o, p->lse, &a);
    if (p->gate.kind != GATE_NONE)
        op_gate_bwd(g.dqkv + 2 * C, 3 * C, g.dtau, g.dw, g.db, dvg, dglb, p->qkv + 2 * C, 3 * C,
                    p->g, &p->gate, p->B, p->T, p->H, p->d);
    free(dvg), free(dglb);
    return g;
}

static void grads_free(Grads *g) {
    free(g->dqkv), free(g->dsink), free(g->dlb), free(g->dtau), free(g->dw), free(g->db);
}

static double worst_rel = 0;

/* Central differences of L w.r.t. x[idx[0..n)] against ana[idx[...]]. */
static void fd_check(Prob *p, const char *what, const char *ctx, real *x, const real *ana,
                     const long *idx, long n) {
    double *a = xcalloc(n, sizeof(double)), *num = xcalloc(n, sizeof(double)), scale = 0;
    for (long m = 0; m < n; m++) {
        const real x0 = x[idx[m]];
        x[idx[m]] = x0 + FD_H;
        const double lp = loss(p);
        x[idx[m]] = x0 - FD_H;
        const double lm = loss(p);
        x[idx[m]] = x0;
        num[m] = (lp - lm) / (2 * FD_H);
        a[m] = ana[idx[m]];
        if (fabs(num[m]) > scale) scale = fabs(num[m]);
    }
    long w = 0;
    const double e = check_max_err(a, num, n, FD_TOL * scale, FD_TOL, &w);
    double rel = 0;
    for (long m = 0; m < n; m++) {
        const double r = fabs(a[m] - num[m]) / (scale > 0 ? scale : 1);
        if (r > rel) rel = r;
    }
    if (rel > worst_rel) worst_rel = rel;
    if (getenv("SG_VERBOSE"))
        printf("  %-8s %-48s n=%-4ld scale %.2g rel %.2g\n", what, ctx, n, scale, rel);
    CHECK(scale > 1e-8, "%s [%s]: gradient is identically 0, the check is vacuous", what, ctx);
    CHECK(e <= 1, "%s [%s]: element %ld: analytic %.12g numeric %.12g (%.3g x tolerance)", what,
          ctx, idx[w], a[w], num[w], e);
    free(a), free(num);
}

/* Indices of x to check: all of [0,n) or `sub` random ones; stride/offset
 * select the q, k or v columns of a [B,T,3C] buffer. */
static long pick(long *idx, long rows, long width, long stride, long off, long sub) {
    const long total = rows * width;
    if (sub <= 0 || sub >= total) {
        for (long r = 0; r < rows; r++)
            for (long e = 0; e < width; e++) idx[r * width + e] = r * stride + off + e;
        return total;
    }
    for (long m = 0; m < sub; m++) {
        const long t = (long)(urand() * total);
        idx[m] = (t / width) * stride + off + t % width;
    }
    return sub;
}

static void check_problem(Prob *p, const char *ctx, long sub) {
    const long BT = (long)p->B * p->T, C = p->C, BHT = (long)p->B * p->H * p->T;
    Grads g = grads(p);
    long *idx = xcalloc(BT * 3 * C + BHT + 64, sizeof(long));
    const char *part[3] = {"q", "k", "v"};
    for (int s = 0; s < 3; s++) {
        /* with a gate on v, v is checked through the whole chain */
        long n = pick(idx, BT, C, 3 * C, s * C, sub);
        fd_check(p, part[s], ctx, p->qkv, g.dqkv, idx, n);
    }
    if (p->use_sink) fd_check(p, "sink", ctx, p->sink, g.dsink, idx, pick(idx, 1, p->H, 0, 0, 0));
    if (p->use_lb) fd_check(p, "logbias", ctx, p->lb, g.dlb, idx, pick(idx, 1, BHT, 0, 0, sub));
    if (p->gate.kind == GATE_NORM)
        fd_check(p, "tau", ctx, p->tau, g.dtau, idx, pick(idx, 1, p->H, 0, 0, 0));
    if (p->gate.kind == GATE_PROJ) {
        fd_check(p, "gate w", ctx, p->w, g.dw, idx, pick(idx, 1, (long)p->H * p->d, 0, 0, sub));
        fd_check(p, "gate b", ctx, p->gb, g.db, idx, pick(idx, 1, p->H, 0, 0, 0));
    }
    free(idx);
    grads_free(&g);
}

static void attention_cases(int B, int T, int H, int d, long sub) {
    static const struct {
        const char *name;
        int phantom, sink, lb;
    } modes[] = {{"baseline", 0, 0, 0},
                 {"offbyone", 1, 0, 0},
                 {"sinklogit", 1, 1, 0},
                 {"logbias", 0, 0, 1},
                 {"logbias+sinklogit", 1, 1, 1}};
    for (int m = 0; m < 5; m++) {
        Prob p = prob_new(B, T, H, d, modes[m].phantom, modes[m].sink, modes[m].lb, GATE_NONE,
                          SLOT_VALUE);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "B=%d T=%d H=%d d=%d %s", B, T, H, d, modes[m].name);
        check_problem(&p, ctx, sub);
        prob_free(&p);
    }
}

static void gate_cases(int B, int T, int H, int d, long sub) {
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = SLOT_VALUE; slot <= SLOT_ROUTING; slot++)
            for (int sink = 0; sink < 2; sink++) {
                Prob p = prob_new(B, T, H, d, sink, sink, 0, kind, slot);
                char ctx[96];
                snprintf(ctx, sizeof ctx, "B=%d T=%d H=%d d=%d %s gate %s slot%s", B, T, H, d,
                         kind == GATE_NORM ? "norm" : "proj",
                         slot == SLOT_VALUE ? "value" : "routing", sink ? " +sinklogit" : "");
                check_problem(&p, ctx, sub);
                prob_free(&p);
            }
}

int main(void) {
    check_name = "dtest_attention";
    attention_cases(2, 9, 2, 4, 0);    /* every element */
    attention_cases(2, 130, 2, 4, 30); /* crosses key tiles at 64, 128; query blocks at 32 */
    attention_cases(1, 40, 2, 64, 24); /* d = 64, the constant-width path; 2 query blocks */
    gate_cases(2, 9, 2, 4, 0);
    gate_cases(1, 40, 2, 64, 16);
    printf("dtest_attention: worst relative error %.3g (limit %g)\n", worst_rel, FD_TOL);
    return check_finish();
}
