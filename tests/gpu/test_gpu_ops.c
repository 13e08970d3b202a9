/* Every CUDA op against the CPU op (the reference), on random inputs, and
 * every CUDA op run twice for bitwise determinism.  Needs a GPU: `make
 * test-gpu` (tests/gpu/run.sh).
 *
 * Tolerances, |gpu - cpu| <= atol + rtol |cpu| per element:
 *   fp32 ops (LayerNorm, GELU, add, embeddings, gates, AdamW, the explicit
 *   attention of the analyses):  atol 1e-5 scale, rtol 1e-4
 *   ops with bf16 matrix products (matmul, classifier) and attention
 *   (bf16 tensor cores where the kernel uses them): rtol 2e-2 with atol
 *   2e-2 of the output's largest magnitude -- bf16 keeps 8 significant bits,
 *   and a K-term product's error grows like sqrt(K) 2^-9 |x||w|. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "optable.h"
#include "rng.h"

static uint64_t g_key = 12345;
static long g_ctr;

static real *host_rand(long n, double scale) {
    real *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (long i = 0; i < n; i++) p[i] = (real)(scale * rng_normal(g_key, (uint64_t)g_ctr++));
    return p;
}

static real *dev_of(const real *h, long n) {
    real *d = gpu_ops.alloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (n > 0) gpu_ops.upload(d, h, (size_t)n * sizeof *d);
    return d;
}

static real *back(const real *d, long n) {
    real *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (n > 0) gpu_ops.download(h, d, (size_t)n * sizeof *h);
    return h;
}

static double maxabs(const real *x, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Compare a device result with the host reference. */
/* |dev - ref| <= atol + rtol |ref| elementwise, with atol the bf16 (lowp)
 * or fp32 rule's at the given scale */
static void compare(const char *what, const real *dev, const real *ref, long n, int lowp, double scale) {
    real *got = back(dev, n);
    double *a = calloc((size_t)(n > 0 ? n : 1), sizeof *a), *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
    for (long i = 0; i < n; i++) a[i] = got[i], b[i] = ref[i];
    double atol = lowp ? 2e-2 * scale + 1e-6 : 1e-5 * (scale > 1 ? scale : 1), rtol = lowp ? 2e-2 : 1e-4;
    long worst = 0;
    double e = check_max_err(a, b, n, atol, rtol, &worst);
    CHECK(e <= 1, "%s: worst %.3g of tolerance (scale %.4g) at %ld (gpu %.7g, cpu %.7g)", what, e, scale, worst,
          n ? a[worst] : 0, n ? b[worst] : 0);
    free(got), free(a), free(b);
}

/* the scale: the reference's largest magnitude */
static void same(const char *what, const real *dev, const real *ref, long n, int lowp) {
    compare(what, dev, ref, n, lowp, maxabs(ref, n));
}

static void bitwise(const char *what, const real *d1, const real *d2, long n) {
    real *a = back(d1, n), *b = back(d2, n);
    CHECK(!memcmp(a, b, (size_t)n * sizeof *a), "%s: two runs differ (determinism)", what);
    free(a), free(b);
}

static void test_matmul(int M, int K, int N) {
    real *x = host_rand((long)M * K, 1), *w = host_rand((long)N * K, 0.1), *dy = host_rand((long)M * N, 1);
    real *y = calloc((size_t)M * N, sizeof *y), *dx = calloc((size_t)M * K, sizeof *dx);
    real *dw = host_rand((long)N * K, 0.01); /* accumulated into */
    real *dx_d = dev_of(dx, (long)M * K), *dw_d = dev_of(dw, (long)N * K), *y_d = dev_of(y, (long)M * N);
    real *x_d = dev_of(x, (long)M * K), *w_d = dev_of(w, (long)N * K), *dy_d = dev_of(dy, (long)M * N);
    cpu_ops.matmul_fwd(y, x, w, M, K, N);
    gpu_ops.matmul_fwd(y_d, x_d, w_d, M, K, N);
    char what[96];
    snprintf(what, sizeof what, "matmul fwd %dx%dx%d", M, K, N);
    same(what, y_d, y, (long)M * N, 1);
    cpu_ops.matmul_bwd(dx, dw, dy, x, w, M, K, N);
    gpu_ops.matmul_bwd(dx_d, dw_d, dy_d, x_d, w_d, M, K, N);
    snprintf(what, sizeof what, "matmul dinp %dx%dx%d", M, K, N);
    same(what, dx_d, dx, (long)M * K, 1);
    snprintf(what, sizeof what, "matmul dw (accumulated) %dx%dx%d", M, K, N);
    same(what, dw_d, dw, (long)N * K, 1);
    real *y2 = dev_of(y, (long)M * N);
    gpu_ops.matmul_fwd(y2, x_d, w_d, M, K, N);
    snprintf(what, sizeof what, "matmul fwd %dx%dx%d", M, K, N);
    bitwise(what, y_d, y2, (long)M * N);
    /* the backward above read the forward's kept bf16 copy of x; one on a
     * copy of x that no forward read casts it afresh: the same bits */
    real *x2_d = dev_of(x, (long)M * K), *dw2_d = dev_of(dw, (long)N * K), *dw3_d = dev_of(dw, (long)N * K);
    gpu_ops.matmul_bwd(NULL, dw2_d, dy_d, x_d, w_d, M, K, N);
    gpu_ops.matmul_bwd(NULL, dw3_d, dy_d, x2_d, w_d, M, K, N);
    snprintf(what, sizeof what, "matmul dw from the forward's copy vs a fresh cast %dx%dx%d", M, K, N);
    bitwise(what, dw2_d, dw3_d, (long)N * K);
    void *ds[] = {dx_d, dw_d, y_d, x_d, w_d, dy_d, y2, x2_d, dw2_d, dw3_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w), free(dy), free(y), free(dx), free(dw);
}

/* ---- SG_MATMUL_TUNE (kernels/cuda/matmul.cu) -------------------------------
 * Tuning times cuBLASLt's candidates for a shape on its first call and keeps
 * the fastest of those that give the first choice's bits, so the products
 * with it are bitwise those without.  The dW accumulates twice into zeros,
 * as the model's gradients do over micro-batches: tuning runs in the first
 * call, where C is 0, and the second, of another dout, reads the first's
 * result as C, where an algorithm that adds C differently would show.  (Of
 * the same dout it would not: fl(x) + x rounds alike in any order.)  On the
 * device this is the check that cuBLASLt's candidates, run out of place
 * into scratch, give the bits they then give in place. */
void sg_matmul_set_tune(int on); /* kernels/cuda/matmul.cu */

static void test_matmul_tuned(int M, int K, int N) {
    const long ctr = g_ctr; /* the later cases keep the inputs they had before this one */
    real *x = host_rand((long)M * K, 1), *w = host_rand((long)N * K, 0.1), *dy = host_rand((long)M * N, 1);
    real *dy2 = host_rand((long)M * N, 1);
    real *zero = calloc((size_t)(M > N ? M : N) * K + (size_t)M * N, sizeof *zero);
    real *x_d = dev_of(x, (long)M * K), *w_d = dev_of(w, (long)N * K), *dy_d = dev_of(dy, (long)M * N);
    real *dy2_d = dev_of(dy2, (long)M * N);
    real *y[2], *dx[2], *dw[2];
    for (int t = 0; t < 2; t++) { /* untuned, then tuned */
        sg_matmul_set_tune(t);
        y[t] = dev_of(zero, (long)M * N), dx[t] = dev_of(zero, (long)M * K), dw[t] = dev_of(zero, (long)N * K);
        gpu_ops.matmul_fwd(y[t], x_d, w_d, M, K, N);
        gpu_ops.matmul_bwd(dx[t], dw[t], dy_d, x_d, w_d, M, K, N);
        gpu_ops.matmul_bwd(NULL, dw[t], dy2_d, x_d, w_d, M, K, N);
    }
    const char *e = getenv("SG_MATMUL_TUNE");
    sg_matmul_set_tune(e && !strcmp(e, "1")); /* as the environment has it, for the other cases */
    static const char *const what[] = {"fwd", "dinp", "dw accumulated twice"};
    real *const *got[] = {y, dx, dw};
    const long n[] = {(long)M * N, (long)M * K, (long)N * K};
    for (int c = 0; c < 3; c++) {
        real *a = back(got[c][0], n[c]), *b = back(got[c][1], n[c]);
        long i = 0;
        while (i < n[c] && !memcmp(a + i, b + i, sizeof *a)) i++;
        CHECK(i == n[c],
              "matmul %s %dx%dx%d, tuned: not the untuned bits (first difference at %ld: tuned %.9g, untuned %.9g)",
              what[c], M, K, N, i, i < n[c] ? b[i] : 0, i < n[c] ? a[i] : 0);
        free(a), free(b);
    }
    void *ds[] = {x_d, w_d, dy_d, dy2_d, y[0], y[1], dx[0], dx[1], dw[0], dw[1]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w), free(dy), free(dy2), free(zero);
    g_ctr = ctr;
}

static void test_tuning(void) {
    test_matmul_tuned(64, 32, 96);
    test_matmul_tuned(130, 64, 192);
    test_matmul_tuned(512, 384, 1152);
}

/* ---- producer-written bf16 twins (kernels/cuda/matmul.cu) ----------------
 * LayerNorm, the residual LayerNorm and GELU write the bf16 copy of their
 * output that the next matmul reads, and GELU's and LayerNorm's backward
 * that of their input gradient (the next matmul backward's dout).  A twin
 * must give the bits of the matmul's own cast, and must never be read once
 * anything could have rewritten its tensor.  The reference is the same
 * matmul on a copy of the tensor at another address, which has no twin: the
 * path SG_MATMUL_KEEP=0 takes.  sg_matmul_casts_skipped counts the operand
 * casts the matmuls skipped (for a twin, or for the forward's kept copy in
 * the dW), so each case also shows that the twin was (or, when stale, was
 * not) taken; with SG_MATMUL_KEEP=0 no cast is skipped. */
long sg_matmul_casts_skipped(void); /* kernels/cuda/matmul.cu */

static int twins_on(void) {
    const char *e = getenv("SG_MATMUL_KEEP");
    return !(e && e[0] == '0');
}

static void casts_skipped(const char *what, long before, long want) {
    long got = sg_matmul_casts_skipped() - before;
    if (!twins_on()) want = 0;
    CHECK(got == want, "%s: %ld operand casts skipped, want %ld", what, got, want);
}

/* two device results, bitwise; `of` names the reference in the message */
static void bits_as(const char *what, const char *of, const real *d1, const real *d2, long n) {
    real *a = back(d1, n), *b = back(d2, n);
    long i = 0;
    while (i < n && !memcmp(a + i, b + i, sizeof *a)) i++;
    CHECK(i == n, "%s: not the bits of %s (first difference at %ld: %.9g vs %.9g)", what, of, i, i < n ? a[i] : 0,
          i < n ? b[i] : 0);
    free(a), free(b);
}
/* a result through the twins against the reference's, bitwise */
static void twin_bits(const char *what, const real *d1, const real *d2, long n) {
    bits_as(what, "the matmul on a copy", d1, d2, n);
}

/* d[0, n) at a new address (download, then upload) */
static real *dev_copy(const real *d, long n) {
    real *h = back(d, n), *c = dev_of(h, n);
    free(h);
    return c;
}

/* producer: 0 LayerNorm of x, 1 residual LayerNorm of x + z, 2 GELU of x,
 * writing y [M, K] (LayerNorm weight w and bias b) */
static const char *const TWIN_FWD[] = {"layernorm", "residual layernorm", "gelu"};
static void twin_produce(int producer, real *y, real *res, real *mu, real *rs, const real *x, const real *z,
                         const real *w, const real *b, int M, int K) {
    if (producer == 0) gpu_ops.layernorm_fwd(y, mu, rs, x, w, b, M, K);
    if (producer == 1) gpu_ops.residual_layernorm_fwd(res, y, mu, rs, x, z, w, b, M, K);
    if (producer == 2) gpu_ops.gelu_fwd(y, x, (long)M * K);
}

/* The forward twin, then what may come between it and the matmul:
 * between 0 nothing, 1 a download and an op_sync (reads: the twin stays),
 * 2 an upload, 3 an op_copy, 4 an op_add into y, 5 op_zero of a few of
 * y's elements (all writes: the twin is stale, and the matmul must read the
 * new values), 6 an upload and then the backward alone (an untaken twin
 * must not serve its dW).  Forward and backward against the same on a copy
 * of y, bitwise. */
static void test_twin_fwd(int producer, int between, int M, int K, int N) {
    long nx = (long)M * K;
    real *x = host_rand(nx, 2), *z = host_rand(nx, 1), *lw = host_rand(K, 1), *lb = host_rand(K, 1);
    real *w = host_rand((long)N * K, 0.1), *dy = host_rand((long)M * N, 1), *dw = host_rand((long)N * K, 0.01);
    real *x_d = dev_of(x, nx), *z_d = dev_of(z, nx), *lw_d = dev_of(lw, K), *lb_d = dev_of(lb, K),
         *w_d = dev_of(w, (long)N * K), *dy_d = dev_of(dy, (long)M * N);
    real *y_d = gpu_ops.alloc(sizeof(real) * nx), *res_d = gpu_ops.alloc(sizeof(real) * nx),
         *mu_d = gpu_ops.alloc(sizeof(real) * M), *rs_d = gpu_ops.alloc(sizeof(real) * M);
    real *o1 = gpu_ops.alloc(sizeof(real) * M * N), *o2 = gpu_ops.alloc(sizeof(real) * M * N),
         *dx1 = gpu_ops.alloc(sizeof(real) * nx), *dx2 = gpu_ops.alloc(sizeof(real) * nx);
    real *dw1 = dev_of(dw, (long)N * K), *dw2 = dev_of(dw, (long)N * K);
    static const char *const how[] = {"nothing",    "a download and op_sync", "op_upload",
                                      "op_copy",    "op_add",                 "op_zero",
                                      "op_upload, backward alone"};
    char what[160];
    snprintf(what, sizeof what, "twin: %s, then %s, then matmul %dx%dx%d", TWIN_FWD[producer], how[between], M, K,
             N);
    real *peek = malloc(sizeof(real) * (size_t)M);
    twin_produce(producer, y_d, res_d, mu_d, rs_d, x_d, z_d, lw_d, lb_d, M, K);
    long t0 = sg_matmul_casts_skipped();
    if (between == 1) gpu_ops.download(peek, y_d, sizeof(real) * (size_t)M), op_sync();
    if (between == 2 || between == 6) gpu_ops.upload(y_d, z, sizeof(real) * (size_t)nx);
    if (between == 3) op_copy(y_d, z_d, sizeof(real) * (size_t)nx);
    if (between == 4) gpu_ops.add(y_d, y_d, z_d, nx);
    if (between == 5) op_zero(y_d + nx / 2, sizeof(real) * 3);
    if (between != 6) gpu_ops.matmul_fwd(o1, y_d, w_d, M, K, N);
    gpu_ops.matmul_bwd(between == 6 ? NULL : dx1, dw1, dy_d, y_d, w_d, M, K, N);
    /* the twin in the forward (and its kept copy in the dW), or the dW
     * from the forward's own cast, or no forward and a cast for the dW */
    casts_skipped(what, t0, between <= 1 ? 2 : between <= 5 ? 1 : 0);
    real *yc_d = dev_copy(y_d, nx);
    if (between != 6) gpu_ops.matmul_fwd(o2, yc_d, w_d, M, K, N);
    gpu_ops.matmul_bwd(between == 6 ? NULL : dx2, dw2, dy_d, yc_d, w_d, M, K, N);
    char part[200];
    if (between != 6) {
        snprintf(part, sizeof part, "%s, fwd", what);
        twin_bits(part, o1, o2, (long)M * N);
        snprintf(part, sizeof part, "%s, dinp", what);
        twin_bits(part, dx1, dx2, nx);
    }
    snprintf(part, sizeof part, "%s, dw", what);
    twin_bits(part, dw1, dw2, (long)N * K);
    if (between >= 2) { /* the write changed y: the reference read the new values */
        real *a = back(y_d, nx);
        int changed = 0;
        twin_produce(producer, y_d, res_d, mu_d, rs_d, x_d, z_d, lw_d, lb_d, M, K);
        real *b = back(y_d, nx);
        for (long i = 0; i < nx; i++) changed |= a[i] != b[i];
        CHECK(changed, "%s: the write left y as the producer wrote it (the case shows nothing)", what);
        free(a), free(b);
    }
    void *ds[] = {x_d, z_d, lw_d, lb_d, w_d, dy_d, y_d, res_d, mu_d, rs_d, o1, o2, dx1, dx2, dw1, dw2, yc_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(z), free(lw), free(lb), free(w), free(dy), free(dw), free(peek);
}

/* The backward twins, in src/model.c's order: GELU's dinp is fc's dout, and
 * LayerNorm's accumulated dinp (the residual gradient) is the dout of the
 * projection before it.  stale: an op_add into dout between (the twin must
 * not be read).  dinp and dW against the same on a copy of dout, bitwise. */
static void test_twin_bwd(int gelu, int stale, int M, int K, int N) {
    long nd = (long)M * N, nx = (long)M * K;
    real *h = host_rand(nd, 2), *g = host_rand(nd, 1), *acc = host_rand(nd, 1), *z = host_rand(nd, 1);
    real *lw = host_rand(N, 1), *mu = malloc(sizeof(real) * M), *rs = malloc(sizeof(real) * M);
    for (int i = 0; i < M; i++) mu[i] = (real)(0.1 * (i % 7)), rs[i] = (real)(0.5 + 0.01 * (i % 13));
    real *x = host_rand(nx, 1), *w = host_rand((long)N * K, 0.1), *dw = host_rand((long)N * K, 0.01);
    real *h_d = dev_of(h, nd), *g_d = dev_of(g, nd), *d_d = dev_of(acc, nd), *z_d = dev_of(z, nd),
         *lw_d = dev_of(lw, N), *lgw_d = dev_of(lw, N), *mu_d = dev_of(mu, M), *rs_d = dev_of(rs, M),
         *x_d = dev_of(x, nx), *w_d = dev_of(w, (long)N * K);
    real *dx1 = gpu_ops.alloc(sizeof(real) * nx), *dx2 = gpu_ops.alloc(sizeof(real) * nx);
    real *dw1 = dev_of(dw, (long)N * K), *dw2 = dev_of(dw, (long)N * K);
    char what[160];
    snprintf(what, sizeof what, "twin: %s backward, then %s, then matmul bwd %dx%dx%d", gelu ? "gelu" : "layernorm",
             stale ? "op_add into its dinp" : "nothing", M, K, N);
    /* dout = d_d: GELU's overwritten dinp, or LayerNorm's accumulated one */
    if (gelu) gpu_ops.gelu_bwd(d_d, h_d, g_d, nd);
    else gpu_ops.layernorm_bwd(d_d, lgw_d, NULL, g_d, h_d, lw_d, mu_d, rs_d, M, N);
    long t0 = sg_matmul_casts_skipped();
    if (stale) gpu_ops.add(d_d, d_d, z_d, nd);
    gpu_ops.matmul_bwd(dx1, dw1, d_d, x_d, w_d, M, K, N);
    casts_skipped(what, t0, !stale); /* dout's; x had no forward */
    real *dc_d = dev_copy(d_d, nd);
    gpu_ops.matmul_bwd(dx2, dw2, dc_d, x_d, w_d, M, K, N);
    char part[200];
    snprintf(part, sizeof part, "%s, dinp", what);
    twin_bits(part, dx1, dx2, nx);
    snprintf(part, sizeof part, "%s, dw", what);
    twin_bits(part, dw1, dw2, (long)N * K);
    void *ds[] = {h_d, g_d, d_d, z_d, lw_d, lgw_d, mu_d, rs_d, x_d, w_d, dx1, dx2, dw1, dw2, dc_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(h), free(g), free(acc), free(z), free(lw), free(mu), free(rs), free(x), free(w), free(dw);
}

/* One layer's MLP backward and the attention projection's as src/model.c
 * runs them, each producer right before its matmul: the residual
 * LayerNorm, fc, GELU, fc_proj; then fc_proj's backward, GELU's, fc's, the
 * LayerNorm backward into the residual gradient, and attn_proj's backward
 * reading it.  Against the same ops with every matmul on a copy of its
 * operand (no twin anywhere), bitwise. */
static void test_twin_layer(int M, int C) {
    long n = (long)M * C, n4 = 4 * n, cc = (long)C * C;
    real *a = host_rand(n, 1), *b = host_rand(n, 1), *lw = host_rand(C, 1), *lb = host_rand(C, 1);
    real *fw = host_rand(4 * cc, 0.1), *pw = host_rand(4 * cc, 0.05), *aw = host_rand(cc, 0.1);
    real *dres = host_rand(n, 1), *atty = host_rand(n, 1), *gw = host_rand(4 * cc, 0.01), *gl = host_rand(C, 0.1);
    enum { OUTS = 8 };
    real *out[2][OUTS];
    for (int path = 0; path < 2; path++) {
        real *a_d = dev_of(a, n), *b_d = dev_of(b, n), *lw_d = dev_of(lw, C), *lb_d = dev_of(lb, C),
             *fw_d = dev_of(fw, 4 * cc), *pw_d = dev_of(pw, 4 * cc), *aw_d = dev_of(aw, cc),
             *dres_d = dev_of(dres, n), *atty_d = dev_of(atty, n);
        /* the gradients accumulate into the same starting values on both paths */
        real *gfw_d = dev_of(gw, 4 * cc), *gpw_d = dev_of(gw, 4 * cc), *gaw_d = dev_of(gw, cc),
             *glw_d = dev_of(gl, C), *glb_d = dev_of(gl, C);
        real *res_d = gpu_ops.alloc(sizeof(real) * n), *ln_d = gpu_ops.alloc(sizeof(real) * n),
             *mu_d = gpu_ops.alloc(sizeof(real) * M), *rs_d = gpu_ops.alloc(sizeof(real) * M),
             *fch_d = gpu_ops.alloc(sizeof(real) * n4), *gel_d = gpu_ops.alloc(sizeof(real) * n4),
             *y_d = gpu_ops.alloc(sizeof(real) * n), *dgel_d = gpu_ops.alloc(sizeof(real) * n4),
             *dfch_d = gpu_ops.alloc(sizeof(real) * n4), *dln_d = gpu_ops.alloc(sizeof(real) * n),
             *datty_d = gpu_ops.alloc(sizeof(real) * n);
        real *copies[5] = {0};
        int nc = 0;
        long t0 = sg_matmul_casts_skipped();
        /* path 1 hands every matmul a copy of its operand */
#define OPERAND(p, len) (path ? (copies[nc++] = dev_copy((p), (len))) : (p))
        gpu_ops.residual_layernorm_fwd(res_d, ln_d, mu_d, rs_d, a_d, b_d, lw_d, lb_d, M, C);
        real *ln_m = OPERAND(ln_d, n);
        gpu_ops.matmul_fwd(fch_d, ln_m, fw_d, M, C, 4 * C);
        gpu_ops.gelu_fwd(gel_d, fch_d, n4);
        real *gel_m = OPERAND(gel_d, n4);
        gpu_ops.matmul_fwd(y_d, gel_m, pw_d, M, 4 * C, C);
        gpu_ops.matmul_bwd(dgel_d, gpw_d, OPERAND(dres_d, n), gel_m, pw_d, M, 4 * C, C);
        gpu_ops.gelu_bwd(dfch_d, fch_d, dgel_d, n4);
        gpu_ops.matmul_bwd(dln_d, gfw_d, OPERAND(dfch_d, n4), ln_m, fw_d, M, C, 4 * C);
        gpu_ops.layernorm_bwd(dres_d, glw_d, glb_d, dln_d, res_d, lw_d, mu_d, rs_d, M, C);
        gpu_ops.matmul_bwd(datty_d, gaw_d, OPERAND(dres_d, n), atty_d, aw_d, M, C, C);
#undef OPERAND
        /* both paths reuse the forwards' copies of ln and gel in the dWs;
         * the first also skips the casts of ln (fc fwd), gel (fc_proj fwd),
         * dfch (fc bwd) and the residual gradient (attn_proj bwd) for their
         * twins (fc_proj's dout has no producer here) */
        char what[96];
        snprintf(what, sizeof what, "twin: a layer as the model runs it, M%d C%d, %s", M, C,
                 path ? "every operand a copy" : "with the twins");
        casts_skipped(what, t0, path ? 2 : 6);
        real *got[OUTS] = {y_d, dgel_d, gpw_d, dln_d, gfw_d, dres_d, datty_d, gaw_d};
        const long len[OUTS] = {n, n4, 4 * cc, n, 4 * cc, n, n, cc};
        for (int k = 0; k < OUTS; k++) out[path][k] = back(got[k], len[k]);
        void *ds[] = {a_d,   b_d,   lw_d,  lb_d,  fw_d, pw_d, aw_d,  dres_d, atty_d, gfw_d,  gpw_d, gaw_d,
                      glw_d, glb_d, res_d, ln_d,  mu_d, rs_d, fch_d, gel_d,  y_d,    dgel_d, dfch_d, dln_d,
                      datty_d};
        for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
        for (int i = 0; i < nc; i++) gpu_ops.free(copies[i]);
    }
    static const char *const names[OUTS] = {"fc_proj out", "fc_proj dinp", "fc_proj dw", "fc dinp",
                                            "fc dw",       "residual grad", "attn_proj dinp", "attn_proj dw"};
    const long len[OUTS] = {n, n4, 4 * cc, n, 4 * cc, n, n, cc};
    for (int k = 0; k < OUTS; k++) {
        CHECK(!memcmp(out[0][k], out[1][k], sizeof(real) * (size_t)len[k]),
              "twin: a layer as the model runs it, M%d C%d, %s: not the bits of the matmuls on copies", M, C,
              names[k]);
        free(out[0][k]), free(out[1][k]);
    }
    free(a), free(b), free(lw), free(lb), free(fw), free(pw), free(aw), free(dres), free(atty), free(gw), free(gl);
}

/* ---- twin-only outputs (ops.h, op_matmul_only) ----------------------------
 * A tensor promised to matmuls alone keeps only its twin: its producer
 * stores no fp32 (sg_matmul_stores_skipped counts each), or NaN under
 * SG_TWIN_POISON=1, and the matmuls that read it right after and in the
 * backward give the bits of the same ops on an unpromised tensor.  With
 * SG_MATMUL_KEEP=0 the promise changes nothing and every output is stored. */
long sg_matmul_stores_skipped(void); /* kernels/cuda/matmul.cu */

static int poison_on(void) {
    const char *e = getenv("SG_TWIN_POISON");
    return e && e[0] == '1';
}
static int compact_off(void) {
    const char *e = getenv("SG_COMPACT_ACTS");
    return e && e[0] == '0';
}

static float bf16_round(float x);

/* y unstored: still the sentinel, or NaN (poison); else the reference bits.
 * Laid out compact (ops.h, op_promised_len: half the reals; SG_COMPACT_ACTS
 * unset), y's first 2n bytes hold the twin, each element the reference
 * rounded to bf16, and the reals past them (the next tensor's) keep the
 * sentinel, poison or not. */
static void stored_or_not(const char *what, const real *y_d, const real *ref_d, real sentinel, long n) {
    real *y = back(y_d, n), *r = back(ref_d, n);
    const long len = twins_on() ? op_promised_len(OP_PROMISE_MATMULS, n) : n;
    CHECK(len == (twins_on() && !compact_off() ? (n + 1) / 2 : n), "%s: laid out in %ld reals for %ld elements",
          what, len, n);
    long bad = 0, twin_off = 0;
    if (len < n) {
        const uint16_t *t = (const uint16_t *)y;
        for (long i = 0; i < n; i++) {
            const float want = bf16_round(r[i]);
            uint32_t wb;
            memcpy(&wb, &want, 4);
            twin_off += t[i] != (uint16_t)(wb >> 16);
        }
        for (long i = len; i < n; i++) bad += y[i] != sentinel;
        CHECK(twin_off == 0, "%s: %ld of %ld elements of the in-place twin not the reference rounded to bf16", what,
              twin_off, n);
        CHECK(bad == 0, "%s: %ld of the %ld reals past the in-place twin (the next tensor's) written", what, bad,
              n - len);
    } else {
        for (long i = 0; i < n; i++) {
            int ok = !twins_on() ? !memcmp(y + i, r + i, sizeof *y) : poison_on() ? isnan(y[i]) : y[i] == sentinel;
            bad += !ok;
        }
        CHECK(bad == 0, "%s: %ld of %ld fp32 elements %s", what, bad, n,
              !twins_on() ? "differ from the stored reference" : poison_on() ? "not NaN" : "overwritten");
    }
    free(y), free(r);
}

/* producer 0-2 as test_twin_fwd's (forward twins) or 3: GELU's backward
 * (dout of a matmul backward).  Promised y against an unpromised yr, both
 * from the same inputs; then the matmuls on each, bitwise.  free_between:
 * op_free of an unrelated buffer between the forward and its backward
 * (every unpinned kept copy is forgotten there; the pinned ones stay). */
static void test_twin_only(int producer, int free_between, int M, int K, int N) {
    long nx = (long)M * K, ny = producer == 3 ? (long)M * N : nx;
    real *x = host_rand(ny, 2), *z = host_rand(ny, 1), *lw = host_rand(K, 1), *lb = host_rand(K, 1);
    real *w = host_rand((long)N * K, 0.1), *dy = host_rand((long)M * N, 1), *dw = host_rand((long)N * K, 0.01);
    real *xin = host_rand(nx, 1);
    const real sentinel = (real)12345.5;
    real *sent = malloc(sizeof(real) * (size_t)ny);
    for (long i = 0; i < ny; i++) sent[i] = sentinel;
    real *x_d = dev_of(x, ny), *z_d = dev_of(z, ny), *lw_d = dev_of(lw, K), *lb_d = dev_of(lb, K),
         *w_d = dev_of(w, (long)N * K), *dy_d = dev_of(dy, (long)M * N), *xin_d = dev_of(xin, nx);
    real *y_d = dev_of(sent, ny), *yr_d = gpu_ops.alloc(sizeof(real) * ny), *res_d = gpu_ops.alloc(sizeof(real) * ny),
         *mu_d = gpu_ops.alloc(sizeof(real) * M), *rs_d = gpu_ops.alloc(sizeof(real) * M);
    real *o[2], *dx[2], *dwk[2];
    for (int k = 0; k < 2; k++)
        o[k] = gpu_ops.alloc(sizeof(real) * M * N), dx[k] = gpu_ops.alloc(sizeof(real) * nx),
        dwk[k] = dev_of(dw, (long)N * K);
    char what[160];
    snprintf(what, sizeof what, "twin only: %s%s, %dx%dx%d", producer == 3 ? "gelu backward" : TWIN_FWD[producer],
             free_between ? ", op_free before the backward" : "", M, K, N);
    op_matmul_only(y_d, ny);
    long s0 = sg_matmul_stores_skipped();
    for (int k = 0; k < 2; k++) { /* k 0: promised y; k 1: the reference yr */
        real *t = k ? yr_d : y_d;
        if (producer == 3) {
            gpu_ops.gelu_bwd(t, x_d, z_d, ny);
            gpu_ops.matmul_bwd(dx[k], dwk[k], t, xin_d, w_d, M, K, N);
        } else {
            twin_produce(producer, t, res_d, mu_d, rs_d, x_d, z_d, lw_d, lb_d, M, K);
            gpu_ops.matmul_fwd(o[k], t, w_d, M, K, N);
            if (free_between) gpu_ops.free(gpu_ops.alloc(64));
            gpu_ops.matmul_bwd(dx[k], dwk[k], dy_d, t, w_d, M, K, N);
        }
    }
    long skipped = sg_matmul_stores_skipped() - s0;
    CHECK(skipped == twins_on(), "%s: %ld fp32 outputs not stored, want %d", what, skipped, twins_on());
    stored_or_not(what, y_d, yr_d, sentinel, ny);
    real *yc_d = dev_copy(yr_d, ny); /* no twin, no kept copy: the cast path */
    real *oc = gpu_ops.alloc(sizeof(real) * M * N), *dxc = gpu_ops.alloc(sizeof(real) * nx),
         *dwc = dev_of(dw, (long)N * K);
    if (producer == 3) {
        gpu_ops.matmul_bwd(dxc, dwc, yc_d, xin_d, w_d, M, K, N);
    } else {
        gpu_ops.matmul_fwd(oc, yc_d, w_d, M, K, N);
        gpu_ops.matmul_bwd(dxc, dwc, dy_d, yc_d, w_d, M, K, N);
    }
    char part[200];
    for (int k = 0; k < 2; k++) {
        const char *which = k ? "unpromised" : "promised";
        if (producer != 3) {
            snprintf(part, sizeof part, "%s, %s, fwd", what, which);
            twin_bits(part, o[k], oc, (long)M * N);
        }
        snprintf(part, sizeof part, "%s, %s, dinp", what, which);
        twin_bits(part, dx[k], dxc, nx);
        snprintf(part, sizeof part, "%s, %s, dw", what, which);
        twin_bits(part, dwk[k], dwc, (long)N * K);
    }
    /* once the promise ends, the producer stores y again */
    op_matmul_only_end(y_d, sizeof(real) * (size_t)ny);
    s0 = sg_matmul_stores_skipped();
    if (producer == 3) gpu_ops.gelu_bwd(y_d, x_d, z_d, ny);
    else twin_produce(producer, y_d, res_d, mu_d, rs_d, x_d, z_d, lw_d, lb_d, M, K);
    CHECK(sg_matmul_stores_skipped() == s0, "%s: an output stored after op_matmul_only_end", what);
    snprintf(part, sizeof part, "%s, after the promise ended", what);
    twin_bits(part, y_d, yr_d, ny);
    void *ds[] = {x_d, z_d, lw_d, lb_d, w_d, dy_d, xin_d, y_d, yr_d, res_d, mu_d, rs_d,
                  o[0], o[1], dx[0], dx[1], dwk[0], dwk[1], yc_d, oc, dxc, dwc};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(z), free(lw), free(lb), free(w), free(dy), free(dw), free(xin), free(sent);
}

/* `test_gpu_ops broken-promise fwd|dw|dout`: an op issued between a
 * promised tensor's producer and the matmul that reads it, so its twin is
 * stale.  The reader is a forward's x (fwd), a backward's x whose forward
 * never read it (dw), or a backward's dout (dout, GELU's backward the
 * producer).  The matmul must stop the program (exit 1, a message naming
 * op_matmul_only) rather than read the fp32 values never stored; the caller
 * checks that it did (tests/e2e_cuda_sgtrain_emu.sh, run.sh). */
static int broken_promise(const char *how) {
    int M = 64, K = 32, N = 48;
    long nx = (long)M * K, nd = (long)M * N;
    int dout = !strcmp(how, "dout");
    long ny = dout ? nd : nx;
    real *x = host_rand(ny, 1), *w = host_rand((long)N * K, 0.1), *dy = host_rand(nd, 1);
    real *x_d = dev_of(x, ny), *w_d = dev_of(w, (long)N * K), *dy_d = dev_of(dy, nd), *xin_d = dev_of(x, nx);
    real *y_d = gpu_ops.alloc(sizeof(real) * ny), *o_d = gpu_ops.alloc(sizeof(real) * nd),
         *dx_d = gpu_ops.alloc(sizeof(real) * nx), *dw_d = gpu_ops.alloc(sizeof(real) * N * K);
    op_matmul_only(y_d, ny);
    if (dout) gpu_ops.gelu_bwd(y_d, x_d, dy_d, ny);
    else gpu_ops.gelu_fwd(y_d, x_d, ny);
    gpu_ops.add(x_d, x_d, x_d, ny); /* any op between: the twin is stale */
    if (!strcmp(how, "fwd")) gpu_ops.matmul_fwd(o_d, y_d, w_d, M, K, N);
    else if (dout) gpu_ops.matmul_bwd(dx_d, dw_d, y_d, xin_d, w_d, M, K, N);
    else gpu_ops.matmul_bwd(NULL, dw_d, dy_d, y_d, w_d, M, K, N);
    op_sync();
    printf("broken promise (%s): the matmul went on, %ld fp32 outputs were not stored\n", how,
           sg_matmul_stores_skipped());
    return 0;
}

/* ---- bf16 operands (ops.h, op_bf16_operand) --------------------------------
 * The MLP's hidden pre-activation (fc's output), the gradient of GELU's
 * output (fc_proj's dinp) and the gradient a LayerNorm gets from qkv or fc
 * (their dinp) are promised as bf16 operands, and the CUDA backend then
 * stores them as autocast does: its matmul writes them in bf16, into the
 * tensor's first 2n bytes, and GELU or LayerNorm's backward reads them
 * there.  Shown here, for one MLP's forward and backward:
 *   - the stored bf16 is the unpromised product rounded to nearest even
 *     (bitwise in the emulator, whose cuBLASLt rounds the same fp32 result;
 *     within one bf16 ulp on a device, whose bf16 and fp32 products may be
 *     different algorithms), and the promise leaves dW's bits alone;
 *   - GELU's forward and backward on the promised tensors give the bits of
 *     the same ops on fp32 tensors holding those bf16 values, with either
 *     or both backward inputs promised, and agree with the CPU op on them;
 *   - laid out in half the reals (ops.h, op_promised_len), nothing writes
 *     past its bf16 values, where a compact layout puts the next tensor;
 *   - once the promise ends the product stores fp32 again;
 *   - with SG_BF16_OPERANDS=0 the promise changes nothing: fp32, the same bits. */
long sg_matmul_bf16_outputs(void); /* kernels/cuda/matmul.cu */

static int bf16_operands_on(void) {
    const char *e = getenv("SG_BF16_OPERANDS");
    return !(e && e[0] == '0');
}
static int emulated(void) { return strstr(gpu_ops.backend(), "emulated") != NULL; }

static float bf16_widen(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* round to nearest even, as __float2bfloat16 (finite x) */
static float bf16_round(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    b &= 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}

/* What a promised tensor holds, as fp32: its bf16 values widened (or its
 * fp32 values, SG_BF16_OPERANDS=0). */
static real *operand_values(const real *d, long n) {
    real *h = back(d, n);
    if (!bf16_operands_on()) return h;
    real *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    const uint16_t *b = (const uint16_t *)h;
    for (long i = 0; i < n; i++) v[i] = bf16_widen(b[i]);
    free(h);
    return v;
}

/* the promised tensor's values against the unpromised product's */
static void operand_check(const char *what, const real *v, const real *ref_d, long n) {
    real *r = back(ref_d, n);
    long off = 0, far = 0;
    for (long i = 0; i < n; i++) {
        if (!bf16_operands_on()) {
            off += memcmp(v + i, r + i, sizeof *v) != 0;
            continue;
        }
        off += v[i] != bf16_round(r[i]);
        far += fabs((double)v[i] - r[i]) > ldexp(fabs((double)r[i]), -7) + 1e-30;
    }
    if (!bf16_operands_on() || emulated())
        CHECK(off == 0, "%s: %ld of %ld elements not the unpromised product's %s", what, off, n,
              bf16_operands_on() ? "rounded to bf16" : "bits");
    else
        CHECK(far == 0, "%s: %ld of %ld elements further than one bf16 ulp from the unpromised product (%ld not "
              "its rounding)", what, far, n, off);
    free(r);
}

/* A compact layout (ops.h, op_promised_len) puts the next tensor right
 * after a promised tensor's bf16 values.  tail_fill writes a sentinel into
 * the reals of the tensor's n past its layout's length; tail_check wants
 * the length to be half of n exactly when the promise is taken, and every
 * sentinel still there: nothing the promise allows writes past the bf16
 * values. */
static const real TAIL_SENTINEL = (real)-1234.5;
static void tail_fill(real *d, int kind, long n) {
    const long len = op_promised_len(kind, n);
    if (len >= n) return;
    real *h = malloc(sizeof *h * (size_t)(n - len));
    for (long i = 0; i < n - len; i++) h[i] = TAIL_SENTINEL;
    gpu_ops.upload(d + len, h, sizeof *h * (size_t)(n - len));
    free(h);
}
static void tail_check(const char *what, const real *d, int kind, long n, int taken) {
    const long len = op_promised_len(kind, n);
    CHECK(len == (taken ? (n + 1) / 2 : n), "%s: laid out in %ld reals for %ld elements (promise %s)", what, len, n,
          taken ? "taken" : "not taken");
    if (len >= n) return;
    real *h = back(d, n);
    long bad = 0;
    for (long i = len; i < n; i++) bad += h[i] != TAIL_SENTINEL;
    CHECK(bad == 0, "%s: %ld of the %ld reals past its bf16 values (the next tensor of a compact layout) written",
          what, bad, n - len);
    free(h);
}

static void test_bf16_operand(int M, int K, int F) {
    const long nx = (long)M * K, n = (long)M * F;
    real *x = host_rand(nx, 1), *w1 = host_rand((long)F * K, 0.3), *w2 = host_rand((long)K * F, 0.1);
    real *dy = host_rand(nx, 1), *dw = host_rand((long)K * F, 0.01);
    real *x_d = dev_of(x, nx), *w1_d = dev_of(w1, (long)F * K), *w2_d = dev_of(w2, (long)K * F),
         *dy_d = dev_of(dy, nx);
    real *h_p = gpu_ops.alloc(sizeof(real) * n), *h_r = gpu_ops.alloc(sizeof(real) * n),
         *dg_p = gpu_ops.alloc(sizeof(real) * n), *dg_r = gpu_ops.alloc(sizeof(real) * n),
         *g_p = gpu_ops.alloc(sizeof(real) * n), *g_r = gpu_ops.alloc(sizeof(real) * n),
         *dw_p = dev_of(dw, (long)K * F), *dw_r = dev_of(dw, (long)K * F);
    char what[160], part[256];
    snprintf(what, sizeof what, "bf16 operand, mlp %dx%dx%d%s", M, K, F, bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    op_bf16_operand(h_p, n);
    op_bf16_operand(dg_p, n);
    tail_fill(h_p, OP_PROMISE_BF16, n);
    tail_fill(dg_p, OP_PROMISE_BF16, n);
    const long b0 = sg_matmul_bf16_outputs();
    /* the forward: h = x W1^T, g = gelu(h) */
    gpu_ops.matmul_fwd(h_p, x_d, w1_d, M, K, F);
    gpu_ops.matmul_fwd(h_r, x_d, w1_d, M, K, F);
    real *hv = operand_values(h_p, n);
    snprintf(part, sizeof part, "%s, fc output", what);
    operand_check(part, hv, h_r, n);
    real *hv_d = dev_of(hv, n); /* fp32 tensor of the stored values: the reference's input */
    gpu_ops.gelu_fwd(g_p, h_p, n);
    gpu_ops.gelu_fwd(g_r, hv_d, n);
    snprintf(part, sizeof part, "%s, gelu forward on the stored values", what);
    bits_as(part, "the reference on fp32 tensors", g_p, g_r, n);
    real *g = calloc((size_t)n, sizeof *g);
    cpu_ops.gelu_fwd(g, hv, n);
    snprintf(part, sizeof part, "%s, gelu forward against the CPU op", what);
    same(part, g_p, g, n, 0);
    /* the backward: dg = dy W2 (promised), dW2 += dy^T g, dh = gelu'(h) dg */
    gpu_ops.matmul_bwd(dg_p, dw_p, dy_d, g_r, w2_d, M, F, K);
    gpu_ops.matmul_bwd(dg_r, dw_r, dy_d, g_r, w2_d, M, F, K);
    real *dgv = operand_values(dg_p, n);
    snprintf(part, sizeof part, "%s, fc_proj dinp", what);
    operand_check(part, dgv, dg_r, n);
    snprintf(part, sizeof part, "%s, fc_proj dw beside a promised dinp", what);
    bits_as(part, "the unpromised product", dw_p, dw_r, (long)K * F);
    real *dgv_d = dev_of(dgv, n), *dh[4], *dh_ref = gpu_ops.alloc(sizeof(real) * n);
    gpu_ops.gelu_bwd(dh_ref, hv_d, dgv_d, n);
    for (int c = 0; c < 4; c++) { /* c & 1: inp promised; c & 2: dout promised */
        dh[c] = gpu_ops.alloc(sizeof(real) * n);
        gpu_ops.gelu_bwd(dh[c], c & 1 ? h_p : hv_d, c & 2 ? dg_p : dgv_d, n);
        snprintf(part, sizeof part, "%s, gelu backward (inp %s, dout %s)", what, c & 1 ? "promised" : "fp32",
                 c & 2 ? "promised" : "fp32");
        bits_as(part, "the reference on fp32 tensors", dh[c], dh_ref, n);
    }
    real *dh_cpu = calloc((size_t)n, sizeof *dh_cpu);
    cpu_ops.gelu_bwd(dh_cpu, hv, dgv, n);
    snprintf(part, sizeof part, "%s, gelu backward against the CPU op", what);
    same(part, dh[3], dh_cpu, n, 0);
    const long stored = sg_matmul_bf16_outputs() - b0;
    CHECK(stored == 2 * bf16_operands_on(), "%s: %ld outputs stored in bf16, want %d", what, stored, 2 * bf16_operands_on());
    snprintf(part, sizeof part, "%s, fc output", what);
    tail_check(part, h_p, OP_PROMISE_BF16, n, bf16_operands_on());
    snprintf(part, sizeof part, "%s, gelu output gradient", what);
    tail_check(part, dg_p, OP_PROMISE_BF16, n, bf16_operands_on());
    /* once the promise ends, the product stores fp32 again */
    op_matmul_only_end(h_p, sizeof(real) * (size_t)n);
    const long b1 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_fwd(h_p, x_d, w1_d, M, K, F);
    CHECK(sg_matmul_bf16_outputs() == b1, "%s: an output stored in bf16 after the promise ended", what);
    snprintf(part, sizeof part, "%s, fc output after the promise ended", what);
    bits_as(part, "the unpromised product", h_p, h_r, n);
    op_matmul_only_end(dg_p, sizeof(real) * (size_t)n);
    void *ds[] = {x_d, w1_d, w2_d, dy_d, h_p, h_r, dg_p, dg_r, g_p, g_r, dw_p, dw_r, hv_d, dgv_d, dh_ref,
                  dh[0], dh[1], dh[2], dh[3]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w1), free(w2), free(dy), free(dw), free(hv), free(g), free(dgv), free(dh_cpu);
}

/* `test_gpu_ops broken-promise bf16`: a matmul reads a bf16 operand as its
 * x.  It holds bf16 values, so the matmul must stop the program (exit 1, a
 * message naming op_bf16_operand); with SG_BF16_OPERANDS=0 it goes on. */
static int broken_bf16_promise(void) {
    int M = 64, K = 32, F = 48;
    real *x = host_rand((long)M * K, 1), *w1 = host_rand((long)F * K, 0.1), *w2 = host_rand((long)K * F, 0.1);
    real *x_d = dev_of(x, (long)M * K), *w1_d = dev_of(w1, (long)F * K), *w2_d = dev_of(w2, (long)K * F);
    real *h_d = gpu_ops.alloc(sizeof(real) * M * F), *o_d = gpu_ops.alloc(sizeof(real) * M * K);
    op_bf16_operand(h_d, (long)M * F);
    gpu_ops.matmul_fwd(h_d, x_d, w1_d, M, K, F);
    gpu_ops.matmul_fwd(o_d, h_d, w2_d, M, F, K);
    op_sync();
    printf("broken promise (bf16): the matmul went on, %ld outputs were stored in bf16\n", sg_matmul_bf16_outputs());
    return 0;
}

/* LayerNorm's backward with its dy promised: dy = g W (a qkv or fc
 * backward's dinp, stored in bf16), then dx (accumulated), dw and db against
 * the same op on an fp32 dy holding the stored values, bitwise, and against
 * the CPU op.  C a multiple of 4 up to 1024 takes the register path, other
 * widths the scalar kernels; both read bf16. */
static void test_bf16_layernorm(int M, int C, int N, int bias) {
    const long n = (long)M * C;
    real *g = host_rand((long)M * N, 1), *w = host_rand((long)N * C, 0.1), *x = host_rand(n, 2);
    real *lw = host_rand(C, 1), *lb = host_rand(C, 1), *dx0 = host_rand(n, 1), *dw0 = host_rand(C, 1),
         *db0 = host_rand(C, 1);
    real *g_d = dev_of(g, (long)M * N), *w_d = dev_of(w, (long)N * C), *x_d = dev_of(x, n), *lw_d = dev_of(lw, C),
         *lb_d = dev_of(lb, C);
    real *dy_p = gpu_ops.alloc(sizeof(real) * n), *dy_r = gpu_ops.alloc(sizeof(real) * n),
         *y_d = gpu_ops.alloc(sizeof(real) * n), *mu_d = gpu_ops.alloc(sizeof(real) * M),
         *rs_d = gpu_ops.alloc(sizeof(real) * M);
    char what[160], part[256];
    snprintf(what, sizeof what, "bf16 operand, layernorm backward M%d C%d%s%s", M, C, bias ? " bias" : "",
             bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    gpu_ops.layernorm_fwd(y_d, mu_d, rs_d, x_d, lw_d, bias ? lb_d : NULL, M, C);
    op_bf16_operand(dy_p, n);
    const long b0 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_bwd(dy_p, NULL, g_d, NULL, w_d, M, C, N);
    gpu_ops.matmul_bwd(dy_r, NULL, g_d, NULL, w_d, M, C, N);
    real *dyv = operand_values(dy_p, n);
    snprintf(part, sizeof part, "%s, dinp", what);
    operand_check(part, dyv, dy_r, n);
    real *dyv_d = dev_of(dyv, n), *dx[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) { /* k 0: dy promised; 1: an fp32 dy of the same values */
        dx[k] = dev_of(dx0, n), dw[k] = dev_of(dw0, C), db[k] = dev_of(db0, C);
        gpu_ops.layernorm_bwd(dx[k], dw[k], bias ? db[k] : NULL, k ? dyv_d : dy_p, x_d, lw_d, mu_d, rs_d, M, C);
    }
    static const char *const out[3] = {"dx", "dw", "db"};
    real *const *got[3] = {dx, dw, db};
    const long len[3] = {n, C, C};
    for (int o = 0; o < 2 + bias; o++) {
        snprintf(part, sizeof part, "%s, %s", what, out[o]);
        bits_as(part, "the op on an fp32 dy", got[o][0], got[o][1], len[o]);
    }
    real *mu = back(mu_d, M), *rs = back(rs_d, M);
    cpu_ops.layernorm_bwd(dx0, dw0, bias ? db0 : NULL, dyv, x, lw, mu, rs, M, C);
    const real *ref[3] = {dx0, dw0, db0};
    for (int o = 0; o < 2 + bias; o++) {
        snprintf(part, sizeof part, "%s, %s against the CPU op", what, out[o]);
        same(part, got[o][0], ref[o], len[o], 0);
    }
    const long stored = sg_matmul_bf16_outputs() - b0;
    CHECK(stored == bf16_operands_on(), "%s: %ld outputs stored in bf16, want %d", what, stored, bf16_operands_on());
    op_matmul_only_end(dy_p, sizeof(real) * (size_t)n);
    void *ds[] = {g_d, w_d, x_d, lw_d, lb_d, dy_p, dy_r, y_d, mu_d, rs_d, dyv_d, dx[0], dx[1], dw[0], dw[1],
                  db[0], db[1]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(g), free(w), free(x), free(lw), free(lb), free(dx0), free(dw0), free(db0), free(dyv), free(mu), free(rs);
}

/* ---- the attention operand (ops.h, op_attention_operand) -------------------
 * Each layer's qkv is promised to its attention and gate alone.  Under the
 * mma tiles the CUDA backend stores it in bf16, as autocast stores the qkv
 * projection; the attention's packing then copies the bf16 q, k and v
 * instead of rounding fp32, or, where d is a padded head size (16, 32, 64,
 * 128), the kernels read them in place and nothing is packed; the gates
 * read v's bf16 and compute in fp32.
 * Shown for one layer's qkv product, attention and gate, forward and
 * backward:
 *   - the stored bf16 is the unpromised product rounded to nearest even
 *     (operand_check: bitwise in the emulator, within one bf16 ulp on a
 *     device), and nothing writes past its bf16 values (tail_check);
 *   - the attention's out, lse and dq/dk/dv and the gate's g, vg or
 *     logbias, dv and parameter gradients are the bits of the same ops on an
 *     fp32 qkv holding the stored values: rounding a bf16 value to bf16
 *     keeps it, and widening it is exact, on any device;
 *   - the attention agrees with the CPU op on those values;
 *   - under the wmma tiles, which read fp32, and with SG_BF16_OPERANDS=0,
 *     the promise is not taken: the product stores fp32, the same bits. */
void op_attention_operand(const real *buf, long n);
long sg_attn_inplace_reads(void); /* kernels/cuda/attention_pack.cu */
const void *sg_bf16_inside(const real *p); /* kernels/cuda/matmul.cu: the bf16 of element p, or NULL */

static void test_attention_operand(int B, int T, int H, int d, int kind, int slot) {
    const int C = H * d, qs = 3 * C;
    const long N = (long)B * T, nq = N * qs, no = N * C, nl = (long)B * H * T;
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma";
    const int taken = bf16_operands_on() && !strcmp(tiles, "mma");
    real *x = host_rand(N * C, 1), *w = host_rand((long)qs * C, 1.0 / sqrt((double)C)), *sink = host_rand(H, 1);
    real *tau = host_rand(H, 0.5), *gw = host_rand((long)H * d, 0.3), *gb = host_rand(H, 1);
    real *dout = host_rand(no, 1), *dvg = host_rand(no, 1), *dlb = host_rand(nl, 1);
    real *x_d = dev_of(x, N * C), *w_d = dev_of(w, (long)qs * C), *sink_d = dev_of(sink, H), *dout_d = dev_of(dout, no);
    real *tau_d = dev_of(tau, H), *gw_d = dev_of(gw, (long)H * d), *gb_d = dev_of(gb, H);
    real *qkv_p = gpu_ops.alloc(sizeof(real) * nq), *qkv_r = gpu_ops.alloc(sizeof(real) * nq);
    char what[160], part[256];
    snprintf(what, sizeof what, "attention operand B%d T%d H%d d%d %s gate, %s slot, tiles %s%s", B, T, H, d,
             kind == GATE_NORM ? "norm" : "proj", slot ? "routing" : "value", tiles,
             bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    op_attention_operand(qkv_p, nq);
    tail_fill(qkv_p, OP_PROMISE_ATTENTION, nq);
    const long b0 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_fwd(qkv_p, x_d, w_d, (int)N, C, qs);
    gpu_ops.matmul_fwd(qkv_r, x_d, w_d, (int)N, C, qs);
    CHECK(sg_matmul_bf16_outputs() - b0 == taken, "%s: %ld outputs stored in bf16, want %d", what,
          sg_matmul_bf16_outputs() - b0, taken);
    real *qv;
    if (taken) {
        qv = operand_values(qkv_p, nq);
        snprintf(part, sizeof part, "%s, qkv", what);
        operand_check(part, qv, qkv_r, nq);

    } else {
        snprintf(part, sizeof part, "%s, qkv not taken", what);
        bits_as(part, "the unpromised product", qkv_p, qkv_r, nq);
        qv = back(qkv_r, nq);
    }
    real *qv_d = dev_of(qv, nq); /* an fp32 qkv of the stored values: the reference's input */
    real *src[2] = {qkv_p, qv_d};

    /* the gate on v */
    GateParams gp = {kind, slot, 8, tau, gw, gb}, gpd = {kind, slot, 8, tau_d, gw_d, gb_d};
    real *g_d[2], *vg_d[2], *lb_d[2], *dv_d[2], *dtau_d[2], *dw_d[2], *db_d[2];
    real *dv0 = host_rand(nq, 1), *dz = calloc((size_t)(H * d + 1), sizeof *dz);
    for (int k = 0; k < 2; k++) {
        g_d[k] = gpu_ops.alloc(sizeof(real) * nl), vg_d[k] = gpu_ops.alloc(sizeof(real) * no);
        lb_d[k] = gpu_ops.alloc(sizeof(real) * nl);
        dv_d[k] = dev_of(dv0, nq), dtau_d[k] = dev_of(dz, H), dw_d[k] = dev_of(dz, (long)H * d), db_d[k] = dev_of(dz, H);
        gpu_ops.gate_fwd(g_d[k], vg_d[k], lb_d[k], src[k] + 2 * C, qs, &gpd, B, T, H, d);
    }
    real *dvg_d = dev_of(dvg, no), *dlb_d = dev_of(dlb, nl);
    for (int k = 0; k < 2; k++)
        gpu_ops.gate_bwd(dv_d[k] + 2 * C, qs, dtau_d[k], dw_d[k], db_d[k], slot ? NULL : dvg_d, slot ? dlb_d : NULL,
                         src[k] + 2 * C, qs, g_d[k], &gpd, B, T, H, d);
    static const char *const gname[] = {"gate g", "gate vg", "gate logbias", "gate dv", "gate dtau", "gate dw",
                                        "gate db"};
    real **gout[] = {g_d, vg_d, lb_d, dv_d, dtau_d, dw_d, db_d};
    const long glen[] = {nl, no, nl, nq, H, (long)H * d, H};
    for (int o = 0; o < 7; o++) {
        if ((o == 1 && slot) || (o == 2 && !slot) || (o == 4 && kind != GATE_NORM) || (o >= 5 && kind != GATE_PROJ))
            continue;
        snprintf(part, sizeof part, "%s, %s", what, gname[o]);
        bits_as(part, "the op on an fp32 qkv", gout[o][0], gout[o][1], glen[o]);
    }
    real *g = calloc((size_t)nl, sizeof *g), *vg = calloc((size_t)no, sizeof *vg), *lbh = calloc((size_t)nl, sizeof *lbh);
    cpu_ops.gate_fwd(g, vg, lbh, qv + 2 * C, qs, &gp, B, T, H, d);
    snprintf(part, sizeof part, "%s, gate g against the CPU op", what);
    same(part, g_d[0], g, nl, 0);

    /* the attention: the routing slot's log-bias as its per-key bias */
    real *lbk = back(lb_d[1], nl);
    real *lbk_d = dev_of(lbk, nl);
    AttnArgs ad = {B, T, H, d, qs, qs, qs, C, 1, sink_d, slot ? lbk_d : NULL};
    AttnArgs a = {B, T, H, d, qs, qs, qs, C, 1, sink, slot ? lbk : NULL};
    real *o_d[2], *lse_d[2], *dq_d[2], *ds_d[2];
    real *zero = calloc((size_t)nq, sizeof *zero);
    const long r0 = sg_attn_inplace_reads();
    for (int k = 0; k < 2; k++) {
        o_d[k] = gpu_ops.alloc(sizeof(real) * no), lse_d[k] = gpu_ops.alloc(sizeof(real) * nl);
        dq_d[k] = dev_of(zero, nq), ds_d[k] = dev_of(zero, H);
        gpu_ops.attention_fwd(o_d[k], lse_d[k], src[k], src[k] + C, src[k] + 2 * C, &ad);
        gpu_ops.attention_bwd(dq_d[k], dq_d[k] + C, dq_d[k] + 2 * C, ds_d[k], NULL, dout_d, src[k], src[k] + C,
                              src[k] + 2 * C, o_d[k], lse_d[k], &ad);
    }
    const int dp = d == 16 || d == 32 || d == 64 || d == 128, want_ip = taken && dp ? 6 : 0;
    CHECK(sg_attn_inplace_reads() - r0 == want_ip, "%s: %ld operands read in place, want %d", what,
          sg_attn_inplace_reads() - r0, want_ip);
    if (slot == SLOT_VALUE) {
        /* vg promised as an attention operand too: the gate stores g v
         * rounded to bf16 (the fp32 vg's rounding, bitwise: the same
         * kernel's arithmetic), and the attention on it gives the bits of
         * the attention on the fp32 vg, reading it in place */
        real *vg_p = gpu_ops.alloc(sizeof(real) * no), *gq_d = gpu_ops.alloc(sizeof(real) * nl);
        op_attention_operand(vg_p, no);
        tail_fill(vg_p, OP_PROMISE_ATTENTION, no);
        const long b1 = sg_matmul_bf16_outputs();
        gpu_ops.gate_fwd(gq_d, vg_p, NULL, qkv_p + 2 * C, qs, &gpd, B, T, H, d);
        CHECK(sg_matmul_bf16_outputs() - b1 == taken, "%s: vg promised: %ld outputs stored in bf16, want %d", what,
              sg_matmul_bf16_outputs() - b1, taken);
        snprintf(part, sizeof part, "%s, gate g with vg promised", what);
        bits_as(part, "the op with vg unpromised", gq_d, g_d[0], nl);
        real *vgv = NULL;
        if (taken) {
            vgv = operand_values(vg_p, no);
            real *ref = back(vg_d[1], no);
            long off = 0;
            for (long i = 0; i < no; i++) off += vgv[i] != bf16_round(ref[i]);
            CHECK(off == 0, "%s: %ld of %ld elements of the bf16 vg not the fp32 vg rounded", what, off, no);
            free(ref);
        } else {
            snprintf(part, sizeof part, "%s, vg not taken", what);
            bits_as(part, "the unpromised gate", vg_p, vg_d[0], no);
            vgv = back(vg_p, no);
        }
        real *vgv_d = dev_of(vgv, no), *vsrc[2] = {vg_p, vgv_d}, *o2[2], *l2[2], *dq2[2], *dv2[2], *ds2[2];
        AttnArgs av = ad;
        av.v_stride = C;
        const long r1 = sg_attn_inplace_reads();
        for (int k = 0; k < 2; k++) {
            o2[k] = gpu_ops.alloc(sizeof(real) * no), l2[k] = gpu_ops.alloc(sizeof(real) * nl);
            dq2[k] = dev_of(zero, nq), dv2[k] = dev_of(zero, no), ds2[k] = dev_of(zero, H);
            gpu_ops.attention_fwd(o2[k], l2[k], src[k], src[k] + C, vsrc[k], &av);
            gpu_ops.attention_bwd(dq2[k], dq2[k] + C, dv2[k], ds2[k], NULL, dout_d, src[k], src[k] + C, vsrc[k], o2[k],
                                  l2[k], &av);
        }
        CHECK(sg_attn_inplace_reads() - r1 == (taken && dp ? 6 : 0), "%s: vg promised: %ld operands read in place, "
              "want %d", what, sg_attn_inplace_reads() - r1, taken && dp ? 6 : 0);
        static const char *const vname[] = {"attention out on vg", "attention lse on vg", "attention dq/dk on vg",
                                            "attention dvg", "attention dsink on vg"};
        real **vout[] = {o2, l2, dq2, dv2, ds2};
        const long vlen[] = {no, nl, nq, no, H};
        for (int o = 0; o < 5; o++) {
            snprintf(part, sizeof part, "%s, %s", what, vname[o]);
            bits_as(part, "the op on an fp32 vg", vout[o][0], vout[o][1], vlen[o]);
        }
        snprintf(part, sizeof part, "%s, vg", what);
        tail_check(part, vg_p, OP_PROMISE_ATTENTION, no, taken);
        op_matmul_only_end(vg_p, sizeof(real) * (size_t)no);
        void *dv_free[] = {vg_p, gq_d, vgv_d};
        for (size_t i = 0; i < sizeof dv_free / sizeof *dv_free; i++) gpu_ops.free(dv_free[i]);
        for (int k = 0; k < 2; k++) {
            void *dk[] = {o2[k], l2[k], dq2[k], dv2[k], ds2[k]};
            for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) gpu_ops.free(dk[i]);
        }
        free(vgv);
    }
    static const char *const aname[] = {"attention out", "attention lse", "attention dq/dk/dv", "attention dsink"};
    real **aout[] = {o_d, lse_d, dq_d, ds_d};
    const long alen[] = {no, nl, nq, H};
    for (int o = 0; o < 4; o++) {
        snprintf(part, sizeof part, "%s, %s", what, aname[o]);
        bits_as(part, "the op on an fp32 qkv", aout[o][0], aout[o][1], alen[o]);
    }
    real *oh = calloc((size_t)no, sizeof *oh), *lse = calloc((size_t)nl, sizeof *lse);
    cpu_ops.attention_fwd(oh, lse, qv, qv + C, qv + 2 * C, &a);
    snprintf(part, sizeof part, "%s, attention out against the CPU op", what);
    same(part, o_d[0], oh, no, 1);

    snprintf(part, sizeof part, "%s, qkv", what);
    tail_check(part, qkv_p, OP_PROMISE_ATTENTION, nq, taken);
    op_matmul_only_end(qkv_p, sizeof(real) * (size_t)nq);
    CHECK(!sg_bf16_inside(qkv_p + C), "%s: k still found in bf16 after the promise ended", what);
    void *ds[] = {x_d, w_d, sink_d, dout_d, tau_d, gw_d, gb_d, qkv_p, qkv_r, qv_d, dvg_d, dlb_d, lbk_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    for (int k = 0; k < 2; k++) {
        void *dk[] = {g_d[k], vg_d[k], lb_d[k], dv_d[k], dtau_d[k], dw_d[k], db_d[k], o_d[k], lse_d[k], dq_d[k], ds_d[k]};
        for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) gpu_ops.free(dk[i]);
    }
    free(x), free(w), free(sink), free(tau), free(gw), free(gb), free(dout), free(dvg), free(dlb), free(qv), free(dv0);
    free(dz), free(g), free(vg), free(lbh), free(lbk), free(zero), free(oh), free(lse);
}

static void test_attention_operands(void) {
    static const char *const tiles[] = {"mma", "wmma"};
    for (int ki = 0; ki < 2; ki++) {
        setenv("SG_ATTN", tiles[ki], 1);
        for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
            for (int slot = 0; slot < 2; slot++) test_attention_operand(2, 70, 2, 64, kind, slot); /* vector paths */
        test_attention_operand(1, 33, 3, 30, GATE_PROJ, SLOT_VALUE); /* d 30: the scalar paths */
        test_attention_operand(1, 40, 2, 36, GATE_NORM, SLOT_VALUE); /* d 36: the pack's scalar path, gate's vector */
        test_attention_operand(2, 130, 2, 32, GATE_PROJ, SLOT_ROUTING); /* read in place: 3 tiles, the last short */
        test_attention_operand(1, 200, 4, 16, GATE_NORM, SLOT_ROUTING);
        test_attention_operand(1, 64, 1, 128, GATE_PROJ, SLOT_VALUE);
    }
    unsetenv("SG_ATTN");
}

/* `test_gpu_ops broken-promise attention`: under SG_ATTN=mma the analyses'
 * explicit attention (op_attention_probs, which reads fp32) is given a q and
 * k stored in bf16.  It must stop the program (exit 1, a message naming
 * op_attention_operand); under wmma the promise is not taken and it goes on. */
static int broken_attention_promise(void) {
    const int B = 1, T = 16, H = 2, d = 16, C = H * d;
    real *x = host_rand((long)B * T * C, 1), *w = host_rand(3L * C * C, 0.2);
    real *x_d = dev_of(x, (long)B * T * C), *w_d = dev_of(w, 3L * C * C);
    real *qkv_d = gpu_ops.alloc(sizeof(real) * B * T * 3 * C), *p_d = gpu_ops.alloc(sizeof(real) * B * H * T * (T + 1));
    op_attention_operand(qkv_d, (long)B * T * 3 * C);
    gpu_ops.matmul_fwd(qkv_d, x_d, w_d, B * T, C, 3 * C);
    AttnArgs a = {B, T, H, d, 3 * C, 3 * C, 3 * C, C, 0, NULL, NULL};
    gpu_ops.attention_probs(p_d, qkv_d, qkv_d + C, &a);
    op_sync();
    printf("broken promise (attention): the probabilities went on, %ld outputs were stored in bf16\n",
           sg_matmul_bf16_outputs());
    return 0;
}

static void test_bf16_operands(void) {
    test_bf16_operand(130, 64, 96);
    test_bf16_operand(67, 48, 98); /* n % 4 = 2: GELU's scalar tail reads bf16 too */
    test_bf16_operand(128, 384, 1536);
    test_bf16_layernorm(130, 768, 2304, 0); /* the register path */
    test_bf16_layernorm(70, 98, 392, 1);    /* the scalar kernels */
}

/* ---- the weights' bf16 copies that AdamW keeps (kernels/cuda/weight_copies.cu)
 * Two weights inside a vector promised with op_params (the model's
 * parameters), one element off 16-byte alignment when `shift` (the scalar
 * cast and AdamW paths).  After each write the matmuls' products with them
 * must be, bitwise, the products with a copy of their values at an
 * unpromised address (the cast SG_MATMUL_KEEP=0 makes), and the counts
 * must show whether a kept copy served the read or a cast refreshed it:
 * AdamW over a whole weight keeps its copy current; everything else that
 * writes into a weight (op_upload, op_copy, op_zero, op_adamw, op_written,
 * an AdamW segment that covers part of it) makes the next read cast it.
 * The classifier reads its wte's copy, Vp rows of it, the same way.  With
 * SG_MATMUL_KEEP=0 nothing is kept, and the products are the same. */
long sg_weight_reads_served(void); /* kernels/cuda/weight_copies.cu */
long sg_weight_casts(void);

static long g_wserved, g_wcast; /* the counts at the last weight_counts */

static void weight_counts(const char *what, long want_served, long want_cast) {
    const long served = sg_weight_reads_served() - g_wserved, cast = sg_weight_casts() - g_wcast;
    g_wserved += served, g_wcast += cast;
    if (!twins_on()) want_served = want_cast = 0;
    CHECK(served == want_served && cast == want_cast,
          "%s: %ld weight reads from kept copies and %ld casts into them, want %ld and %ld", what, served, cast,
          want_served, want_cast);
}

/* the forward and dinp of x with w_d (N x K) against the same with a copy
 * of w_d's values at another address; two reads of w_d */
static void weight_product(const char *what, const real *x_d, const real *w_d, const real *dy_d, int M, int K,
                           int N) {
    real *wr_d = dev_copy(w_d, (long)N * K);
    real *y1 = gpu_ops.alloc(sizeof(real) * M * N), *y2 = gpu_ops.alloc(sizeof(real) * M * N),
         *dx1 = gpu_ops.alloc(sizeof(real) * M * K), *dx2 = gpu_ops.alloc(sizeof(real) * M * K);
    gpu_ops.matmul_fwd(y1, x_d, w_d, M, K, N);
    gpu_ops.matmul_bwd(dx1, NULL, dy_d, x_d, w_d, M, K, N);
    gpu_ops.matmul_fwd(y2, x_d, wr_d, M, K, N);
    gpu_ops.matmul_bwd(dx2, NULL, dy_d, x_d, wr_d, M, K, N);
    char part[200];
    snprintf(part, sizeof part, "%s, fwd", what);
    bits_as(part, "the product with an unpromised copy of the weight", y1, y2, (long)M * N);
    snprintf(part, sizeof part, "%s, dinp", what);
    bits_as(part, "the product with an unpromised copy of the weight", dx1, dx2, (long)M * K);
    void *ds[] = {wr_d, y1, y2, dx1, dx2};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
}

/* the classifier with wte_d (V x C, inside the promise) against the same
 * with a copy of its values; one read of wte_d */
static void weight_classifier(const char *what, const real *x_d, const real *wte_d, const int32_t *tg_d, int rows,
                              int C, int V, int Vp) {
    real *wr_d = dev_copy(wte_d, (long)V * C);
    real *l1 = gpu_ops.alloc(sizeof(real) * rows), *l2 = gpu_ops.alloc(sizeof(real) * rows),
         *dx1 = gpu_ops.alloc(sizeof(real) * rows * C), *dx2 = gpu_ops.alloc(sizeof(real) * rows * C),
         *dw1 = gpu_ops.alloc(sizeof(real) * Vp * C), *dw2 = gpu_ops.alloc(sizeof(real) * Vp * C);
    const double s1 = gpu_ops.classifier(l1, dx1, dw1, x_d, wte_d, tg_d, rows, C, V, Vp, (real)(1.0 / rows));
    const double s2 = gpu_ops.classifier(l2, dx2, dw2, x_d, wr_d, tg_d, rows, C, V, Vp, (real)(1.0 / rows));
    CHECK(!memcmp(&s1, &s2, sizeof s1), "%s, classifier: loss %.17g, with an unpromised copy of wte %.17g", what, s1,
          s2);
    char part[200];
    snprintf(part, sizeof part, "%s, classifier row losses", what);
    bits_as(part, "the classifier with an unpromised copy of wte", l1, l2, rows);
    snprintf(part, sizeof part, "%s, classifier dx", what);
    bits_as(part, "the classifier with an unpromised copy of wte", dx1, dx2, (long)rows * C);
    snprintf(part, sizeof part, "%s, classifier dwte", what);
    bits_as(part, "the classifier with an unpromised copy of wte", dw1, dw2, (long)Vp * C);
    void *ds[] = {wr_d, l1, l2, dx1, dx2, dw1, dw2};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
}

static void test_weight_copies(int M, int K, int N, int shift) {
    const long nw = (long)N * K, o1 = 16 + shift, o2 = o1 + nw + 16, ob = o2 + nw + 16, L = ob + 40;
    const int Vp = (N + 64) / 64 * 64; /* the classifier reads w1 as wte: V = N classes, Vp > V */
    real *ph = host_rand(L, 0.1), *mh = host_rand(L, 0.01), *vh = host_rand(L, 0.01), *gh = host_rand(L, 1);
    for (long i = 0; i < L; i++) vh[i] = vh[i] * vh[i];
    real *x = host_rand((long)M * K, 1), *dy = host_rand((long)M * N, 1), *z = host_rand(nw, 0.2);
    int32_t *tg = malloc(sizeof *tg * (size_t)M);
    for (int i = 0; i < M; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 93, (uint64_t)i), (uint64_t)N);
    real *P = dev_of(ph, L), *m_d = dev_of(mh, L), *v_d = dev_of(vh, L), *g_d = dev_of(gh, L);
    real *x_d = dev_of(x, (long)M * K), *dy_d = dev_of(dy, (long)M * N), *z_d = dev_of(z, nw);
    int32_t *tg_d = gpu_ops.alloc(sizeof *tg * (size_t)M);
    gpu_ops.upload(tg_d, tg, sizeof *tg * (size_t)M);
    real *w1 = P + o1, *w2 = P + o2;
    op_params(P, L);
    g_wserved = sg_weight_reads_served(), g_wcast = sg_weight_casts();
    char what[200];
#define WHAT(step) (snprintf(what, sizeof what, "weight copies %dx%dx%d%s: %s", M, K, N, \
                             shift ? " (unaligned)" : "", step), what)
    weight_product(WHAT("w1 first read"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    weight_product(WHAT("w2 first read"), x_d, w2, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    weight_product(WHAT("w1 read again"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 2, 0);
    weight_classifier(WHAT("w1 as wte"), x_d, w1, tg_d, M, K, N, Vp);
    weight_counts(what, 0, 1); /* w1's copy grows to Vp rows, zeros past V, and is cast again */
    weight_classifier(WHAT("w1 as wte, again"), x_d, w1, tg_d, M, K, N, Vp);
    weight_counts(what, 1, 0);

    /* AdamW over both weights whole and the tail: both copies rewritten */
    AdamwSeg segs[] = {{o1, nw, 1}, {o2, nw, 1}, {ob, 40, 0}};
    long t = 1;
    gpu_ops.adamw_multi(P, m_d, v_d, g_d, 0, segs, 3, 1e-2, 0.9, 0.95, 1e-8, 0.1, t++, 0.7);
    weight_product(WHAT("w2 after op_adamw_multi"), x_d, w2, dy_d, M, K, N);
    weight_counts(what, 2, 0);
    weight_product(WHAT("w1 after op_adamw_multi"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 2, 0);
    gpu_ops.adamw_multi(P, m_d, v_d, g_d, 0, segs, 3, 1e-2, 0.9, 0.95, 1e-8, 0.1, t++, 0.7);
    weight_classifier(WHAT("w1 as wte after op_adamw_multi"), x_d, w1, tg_d, M, K, N, Vp);
    weight_counts(what, 1, 0);
    /* a segment that cuts w1 (a ZeRO shard's edge): its copy is stale, w2's current */
    AdamwSeg cut[] = {{o1 + nw / 2, nw - nw / 2 + 16, 1}, {o2, nw, 1}};
    gpu_ops.adamw_multi(P, m_d, v_d, g_d, 0, cut, 2, 1e-2, 0.9, 0.95, 1e-8, 0.1, t++, 0.7);
    weight_product(WHAT("w1 after a segment over part of it"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    weight_product(WHAT("w2 after the same op_adamw_multi"), x_d, w2, dy_d, M, K, N);
    weight_counts(what, 2, 0);

    /* every other writer: the next read casts */
    gpu_ops.upload(w1 + 3, z, sizeof(real) * 5);
    weight_product(WHAT("after op_upload into w1"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    op_copy(w2 + nw - 7, z_d, sizeof(real) * 7);
    weight_product(WHAT("after op_copy into w2"), x_d, w2, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    op_zero(w1 + nw / 3, sizeof(real) * 9);
    weight_product(WHAT("after op_zero in w1"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    gpu_ops.adamw(w2, m_d + o2, v_d + o2, g_d + o2, nw, 1e-2, 0.9, 0.95, 1e-8, 0.1, t++, 0.7);
    weight_product(WHAT("after op_adamw over w2"), x_d, w2, dy_d, M, K, N);
    weight_counts(what, 1, 1);
    /* op_written: what a collective wrote.  Into the tail: no copy is touched */
    op_written(P + ob, sizeof(real) * 40);
    weight_product(WHAT("after op_written outside the weights"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 2, 0);
    op_written(w1 + nw - 1, sizeof(real)); /* into w1's last element: its copy is cast again */
    weight_product(WHAT("after op_written on w1's last element"), x_d, w1, dy_d, M, K, N);
    weight_counts(what, 1, 1);

    /* the promise ends with its vector: a buffer at the same address is not a weight */
    gpu_ops.free(P);
    real *Q = dev_of(ph, L);
    weight_product(WHAT("after op_free of the promised vector"), x_d, Q + o1, dy_d, M, K, N);
    weight_counts(what, 0, 0);
#undef WHAT
    void *ds[] = {Q, m_d, v_d, g_d, x_d, dy_d, z_d, tg_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(ph), free(mh), free(vh), free(gh), free(x), free(dy), free(z), free(tg);
}

static void test_twins(void) {
    for (int producer = 0; producer < 3; producer++)
        for (int between = 0; between <= 6; between++) {
            test_twin_fwd(producer, between, 130, 64, 96);
            if (between <= 2) test_twin_fwd(producer, between, 64, 768, 192);
        }
    for (int gelu = 0; gelu <= 1; gelu++)
        for (int stale = 0; stale <= 1; stale++) {
            test_twin_bwd(gelu, stale, 130, 96, 64);
            test_twin_bwd(gelu, stale, 64, 192, 768);
        }
    test_twin_layer(70, 32);
    for (int producer = 0; producer < 4; producer++) {
        test_twin_only(producer, 0, 130, 64, 96);
        test_twin_only(producer, producer == 2, 64, 768, 192);
    }
    test_weight_copies(64, 32, 96, 0);
    test_weight_copies(130, 64, 192, 1);
}

/* op_upload through pinned staging (kernels/cuda/upload_staging.cu): the
 * host refills one buffer between uploads, as the model refills its token
 * buffers every micro-batch, and an op reads each upload right after it
 * (op_add, as the embedding reads the tokens).  Ten small uploads cycle
 * through the staging buffers twice and more, and two are over the
 * staging size (copied and waited for).  Every upload, and every sum,
 * must hold the values the host had when it called op_upload.  (The
 * emulator also stops the program if a staging buffer is refilled before
 * its last copy was seen complete.) */
static void test_uploads(void) {
    enum { UPLOADS = 12 };
    const long sizes[UPLOADS] = {7, 8192, 300000, 1, 262144, 1000, 262145, 5, 4096, 77, 100000, 33};
    real *host = malloc(sizeof(real) * 300000), *ones = malloc(sizeof(real) * 300000);
    for (long i = 0; i < 300000; i++) ones[i] = 1;
    real *one_d = dev_of(ones, 300000), *dev[UPLOADS], *sum[UPLOADS];
    for (int u = 0; u < UPLOADS; u++) {
        for (long i = 0; i < sizes[u]; i++) host[i] = (real)(1000 * u + i % 997);
        dev[u] = gpu_ops.alloc(sizeof(real) * (size_t)sizes[u]);
        sum[u] = gpu_ops.alloc(sizeof(real) * (size_t)sizes[u]);
        gpu_ops.upload(dev[u], host, sizeof(real) * (size_t)sizes[u]);
        gpu_ops.add(sum[u], dev[u], one_d, sizes[u]);
        for (long i = 0; i < sizes[u]; i++) host[i] = -1; /* reused at once */
    }
    for (int u = 0; u < UPLOADS; u++) {
        real *got = back(dev[u], sizes[u]), *s = back(sum[u], sizes[u]);
        long bad = 0, bad_sum = 0;
        for (long i = 0; i < sizes[u]; i++) {
            bad += got[i] != (real)(1000 * u + i % 997);
            bad_sum += s[i] != (real)(1000 * u + i % 997) + 1;
        }
        CHECK(!bad && !bad_sum, "upload %d (%ld elements): %ld values not the host's at the call, %ld sums wrong", u,
              sizes[u], bad, bad_sum);
        free(got), free(s);
        gpu_ops.free(dev[u]), gpu_ops.free(sum[u]);
    }
    gpu_ops.free(one_d);
    free(host), free(ones);
}

static void test_layernorm(int N, int C, int bias) {
    real *x = host_rand((long)N * C, 2), *w = host_rand(C, 1), *b = bias ? host_rand(C, 1) : NULL;
    real *dy = host_rand((long)N * C, 1), *y = calloc((size_t)N * C, sizeof *y), *mu = calloc(N, sizeof *mu),
         *rs = calloc(N, sizeof *rs), *dx = host_rand((long)N * C, 1), *dw = host_rand(C, 1), *db = host_rand(C, 1);
    real *x_d = dev_of(x, (long)N * C), *w_d = dev_of(w, C), *b_d = bias ? dev_of(b, C) : NULL,
         *dy_d = dev_of(dy, (long)N * C), *y_d = dev_of(y, (long)N * C), *mu_d = dev_of(mu, N), *rs_d = dev_of(rs, N),
         *dx_d = dev_of(dx, (long)N * C), *dw_d = dev_of(dw, C), *db_d = dev_of(db, C);
    cpu_ops.layernorm_fwd(y, mu, rs, x, w, b, N, C);
    gpu_ops.layernorm_fwd(y_d, mu_d, rs_d, x_d, w_d, b_d, N, C);
    same("layernorm out", y_d, y, (long)N * C, 0);
    same("layernorm mean", mu_d, mu, N, 0);
    same("layernorm rstd", rs_d, rs, N, 0);
    cpu_ops.layernorm_bwd(dx, dw, bias ? db : NULL, dy, x, w, mu, rs, N, C);
    gpu_ops.layernorm_bwd(dx_d, dw_d, bias ? db_d : NULL, dy_d, x_d, w_d, mu_d, rs_d, N, C);
    same("layernorm dinp (accumulated)", dx_d, dx, (long)N * C, 0);
    same("layernorm dw (accumulated)", dw_d, dw, C, 0);
    if (bias) same("layernorm db (accumulated)", db_d, db, C, 0);
    void *ds[] = {x_d, w_d, b_d, dy_d, y_d, mu_d, rs_d, dx_d, dw_d, db_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w), free(b), free(dy), free(y), free(mu), free(rs), free(dx), free(dw), free(db);
}

/* Residual add + LayerNorm: against the CPU op (fp32 tolerance, as
 * LayerNorm), and bitwise against the CUDA op_add then op_layernorm_fwd,
 * whose reduction order the fused kernel keeps.  alias: 0 res separate,
 * 1 res == a, 2 res == b (on both sides). */
static void test_residual_layernorm(int N, int C, int bias, int alias) {
    long n = (long)N * C;
    real *a = host_rand(n, 2), *bb = host_rand(n, 1), *w = host_rand(C, 1), *b = bias ? host_rand(C, 1) : NULL;
    real *res = calloc((size_t)n, sizeof *res), *y = calloc((size_t)n, sizeof *y), *mu = calloc(N, sizeof *mu),
         *rs = calloc(N, sizeof *rs);
    real *a_d = dev_of(a, n), *bb_d = dev_of(bb, n), *w_d = dev_of(w, C), *b_d = bias ? dev_of(b, C) : NULL,
         *res_d = dev_of(res, n), *y_d = dev_of(y, n), *mu_d = dev_of(mu, N), *rs_d = dev_of(rs, N);
    /* the composition on the device, from the untouched inputs */
    real *res2_d = dev_of(res, n), *y2_d = dev_of(y, n), *mu2_d = dev_of(mu, N), *rs2_d = dev_of(rs, N);
    gpu_ops.add(res2_d, a_d, bb_d, n);
    gpu_ops.layernorm_fwd(y2_d, mu2_d, rs2_d, res2_d, w_d, b_d, N, C);

    real *dst = alias == 1 ? a : alias == 2 ? bb : res, *dst_d = alias == 1 ? a_d : alias == 2 ? bb_d : res_d;
    cpu_ops.residual_layernorm_fwd(dst, y, mu, rs, a, bb, w, b, N, C);
    gpu_ops.residual_layernorm_fwd(dst_d, y_d, mu_d, rs_d, a_d, bb_d, w_d, b_d, N, C);
    char what[128], tag[64];
    snprintf(tag, sizeof tag, "N%d C%d bias %d %s", N, C, bias,
             alias == 1 ? "res == a" : alias == 2 ? "res == b" : "res separate");
    snprintf(what, sizeof what, "residual layernorm res %s", tag);
    same(what, dst_d, dst, n, 0);
    snprintf(what, sizeof what, "residual layernorm out %s", tag);
    same(what, y_d, y, n, 0);
    snprintf(what, sizeof what, "residual layernorm mean %s", tag);
    same(what, mu_d, mu, N, 0);
    snprintf(what, sizeof what, "residual layernorm rstd %s", tag);
    same(what, rs_d, rs, N, 0);
    const real *pairs[][2] = {{dst_d, res2_d}, {y_d, y2_d}, {mu_d, mu2_d}, {rs_d, rs2_d}};
    const long lens[] = {n, n, N, N};
    const char *names[] = {"res", "out", "mean", "rstd"};
    for (int k = 0; k < 4; k++) {
        real *f = back(pairs[k][0], lens[k]), *g = back(pairs[k][1], lens[k]);
        CHECK(!memcmp(f, g, (size_t)lens[k] * sizeof *f),
              "residual layernorm %s %s: not the bits of add then layernorm", names[k], tag);
        free(f), free(g);
    }
    void *ds[] = {a_d, bb_d, w_d, b_d, res_d, y_d, mu_d, rs_d, res2_d, y2_d, mu2_d, rs2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(a), free(bb), free(w), free(b), free(res), free(y), free(mu), free(rs);
}

static void test_pointwise(long n) {
    real *x = host_rand(n, 3), *x2 = host_rand(n, 1), *dy = host_rand(n, 1), *y = calloc(n, sizeof *y),
         *dx = calloc(n, sizeof *dx);
    real *x_d = dev_of(x, n), *x2_d = dev_of(x2, n), *dy_d = dev_of(dy, n), *y_d = dev_of(y, n), *dx_d = dev_of(dx, n);
    cpu_ops.gelu_fwd(y, x, n);
    gpu_ops.gelu_fwd(y_d, x_d, n);
    same("gelu fwd", y_d, y, n, 0);
    cpu_ops.gelu_bwd(dx, x, dy, n);
    gpu_ops.gelu_bwd(dx_d, x_d, dy_d, n);
    same("gelu bwd", dx_d, dx, n, 0);
    cpu_ops.add(y, x, x2, n);
    gpu_ops.add(y_d, x_d, x2_d, n);
    same("add", y_d, y, n, 0);
    /* AdamW, step 3, with a clip factor */
    real *p = host_rand(n, 1), *m = host_rand(n, 0.1), *v = host_rand(n, 0.1), *g = host_rand(n, 1);
    for (long i = 0; i < n; i++) v[i] = v[i] * v[i];
    real *p_d = dev_of(p, n), *m_d = dev_of(m, n), *v_d = dev_of(v, n), *g_d = dev_of(g, n);
    cpu_ops.adamw(p, m, v, g, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    gpu_ops.adamw(p_d, m_d, v_d, g_d, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    same("adamw p", p_d, p, n, 0);
    same("adamw m", m_d, m, n, 0);
    same("adamw v", v_d, v, n, 0);
    double s1 = cpu_ops.sumsq(g, n), s2 = gpu_ops.sumsq(g_d, n), s3 = gpu_ops.sumsq(g_d, n);
    CHECK(fabs(s1 - s2) <= 1e-10 * s1, "sumsq %.17g vs cpu %.17g", s2, s1);
    CHECK(s2 == s3, "sumsq twice: %.17g %.17g (determinism)", s2, s3);
    void *ds[] = {x_d, x2_d, dy_d, y_d, dx_d, p_d, m_d, v_d, g_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(x2), free(dy), free(y), free(dx), free(p), free(m), free(v), free(g);
}

/* ---- op_adamw_multi: every tensor's AdamW in one launch --------------------
 * Segments of one buffer, as the model's tensors are, in every shape the
 * kernel distinguishes: aligned (the vector blocks) with a scalar tail, one
 * element off alignment (all scalar), shorter than a block, empty, and a
 * gap between segments that must stay as it was; with the moments covering
 * the whole buffer (base 0) or starting at the second segment (a ZeRO
 * shard's).  Each against one op_adamw per segment, bitwise, and against the
 * CPU's op_adamw_multi.  The kernel's work table is uploaded when the
 * segments change and reused while they do not: two calls with the same
 * segments, then other ones. */
static void test_adamw_multi(long base) {
    const AdamwSeg segs[] = {{0, 1000, 1}, {1000, 3, 0}, {1003, 4097, 1}, {5100, 0, 1},
                             {5104, 777, 0}, {6000, 3077, 1}, {9100, 1, 0}};
    const int nseg = (int)(sizeof segs / sizeof *segs), shift = base ? 1 : 0;
    const long n = 9104, nm = n - base;
    real *p = host_rand(n, 1), *m = host_rand(nm, 0.1), *v = host_rand(nm, 0.1), *g = host_rand(n, 1);
    for (long i = 0; i < nm; i++) v[i] = v[i] * v[i];
    real *p_d = dev_of(p, n), *m_d = dev_of(m, nm), *v_d = dev_of(v, nm), *g_d = dev_of(g, n);
    real *pr_d = dev_of(p, n), *mr_d = dev_of(m, nm), *vr_d = dev_of(v, nm);
    char what[120];
    for (int call = 0; call < 3; call++) { /* 0, 1: the same segments; 2: all but the first (another table) */
        const AdamwSeg *sg = segs + shift + (call == 2);
        const int ns = nseg - shift - (call == 2);
        const long t = 3 + call;
        gpu_ops.adamw_multi(p_d, m_d, v_d, g_d, base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, t, 0.7);
        cpu_ops.adamw_multi(p, m, v, g, base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, t, 0.7);
        for (int i = 0; i < ns; i++)
            gpu_ops.adamw(pr_d + sg[i].off, mr_d + (sg[i].off - base), vr_d + (sg[i].off - base), g_d + sg[i].off,
                          sg[i].n, 6e-4, 0.9, 0.95, 1e-8, sg[i].decay ? 0.1 : 0.0, t, 0.7);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) p", base, call);
        bits_as(what, "one op_adamw a segment", p_d, pr_d, n);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) m", base, call);
        bits_as(what, "one op_adamw a segment", m_d, mr_d, nm);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) v", base, call);
        bits_as(what, "one op_adamw a segment", v_d, vr_d, nm);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) p, against the CPU", base, call);
        same(what, p_d, p, n, 0);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) m, against the CPU", base, call);
        same(what, m_d, m, nm, 0);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) v, against the CPU", base, call);
        same(what, v_d, v, nm, 0);
    }
    /* the gaps (and everything before base) were never written: the CPU's
     * values there are the initial ones, compared bitwise */
    real *got = back(p_d, n);
    long touched = 0;
    for (long i = 0; i < n; i++) {
        int in = 0;
        for (int k = shift; k < nseg; k++) in |= i >= segs[k].off && i < segs[k].off + segs[k].n;
        if (!in) touched += memcmp(got + i, p + i, sizeof *got) != 0;
    }
    CHECK(touched == 0, "adamw multi (base %ld): %ld elements outside the segments changed", base, touched);
    void *ds[] = {p_d, m_d, v_d, g_d, pr_d, mr_d, vr_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(p), free(m), free(v), free(g), free(got);
}

/* GELU and AdamW take four elements a thread when their tensors are
 * 16-byte aligned, and one otherwise (kernels/cuda/elementwise.cu): the
 * same arithmetic, so the same bits.  Each op on tensors one element off
 * alignment (the scalar kernels) against the same on aligned tensors (the
 * vector path, the n % 4 left scalar), bitwise; the shifted results also
 * against the CPU. */
static void test_pointwise_paths(long n) {
    enum { IN = 5, OUT = 5 };
    real *in[IN] = {host_rand(n, 3), host_rand(n, 1), host_rand(n, 1), host_rand(n, 0.1), host_rand(n, 0.1)};
    real *x = in[0], *dy = in[1], *p = in[2], *m = in[3], *v = in[4];
    for (long i = 0; i < n; i++) v[i] = v[i] * v[i];
    static const char *const names[OUT] = {"gelu fwd", "gelu bwd", "adamw p", "adamw m", "adamw v"};
    real *got[2][OUT];
    for (int shift = 0; shift <= 1; shift++) {
        real *buf[IN + 2], *d[IN + 2];
        for (int k = 0; k < IN + 2; k++) {
            buf[k] = gpu_ops.alloc(sizeof(real) * (size_t)(n + 1));
            d[k] = buf[k] + shift;
            if (k < IN) gpu_ops.upload(d[k], in[k], sizeof(real) * (size_t)n);
        }
        real *y_d = d[IN], *dx_d = d[IN + 1];
        gpu_ops.gelu_fwd(y_d, d[0], n);
        gpu_ops.gelu_bwd(dx_d, d[0], d[1], n);
        gpu_ops.adamw(d[2], d[3], d[4], d[1], n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
        real *outs[OUT] = {y_d, dx_d, d[2], d[3], d[4]};
        for (int k = 0; k < OUT; k++) got[shift][k] = back(outs[k], n);
        if (shift) {
            real *y = calloc((size_t)n, sizeof *y), *dx = calloc((size_t)n, sizeof *dx);
            cpu_ops.gelu_fwd(y, x, n);
            cpu_ops.gelu_bwd(dx, x, dy, n);
            cpu_ops.adamw(p, m, v, dy, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
            const real *ref[OUT] = {y, dx, p, m, v};
            for (int k = 0; k < OUT; k++) {
                char what[64];
                snprintf(what, sizeof what, "%s, tensors off 16-byte alignment", names[k]);
                same(what, outs[k], ref[k], n, 0);
            }
            free(y), free(dx);
        }
        for (int k = 0; k < IN + 2; k++) gpu_ops.free(buf[k]);
    }
    for (int k = 0; k < OUT; k++) {
        CHECK(!memcmp(got[0][k], got[1][k], sizeof(real) * (size_t)n),
              "%s (n %ld): the vector path's bits differ from the scalar kernel's", names[k], n);
        free(got[0][k]), free(got[1][k]);
    }
    for (int k = 0; k < IN; k++) free(in[k]);
}

static void test_embed(int B, int T, int C, int V, int sink) {
    int Tp = T + (sink ? 1 : 0);
    int32_t *tok = malloc(sizeof *tok * (size_t)B * T);
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)rng_below(rng_key(g_key, 77, (uint64_t)i), (uint64_t)(i % 3 ? V : 4));
    real *wte = host_rand((long)V * C, 1), *wpe = host_rand((long)T * C, 1), *st = sink ? host_rand(C, 1) : NULL;
    real *out = calloc((size_t)B * Tp * C, sizeof *out), *dout = host_rand((long)B * Tp * C, 1);
    real *dwte = host_rand((long)V * C, 1), *dwpe = host_rand((long)T * C, 1), *dst = sink ? host_rand(C, 1) : NULL;
    int32_t *tok_d = gpu_ops.alloc(sizeof *tok * (size_t)B * T);
    gpu_ops.upload(tok_d, tok, sizeof *tok * (size_t)B * T);
    real *wte_d = dev_of(wte, (long)V * C), *wpe_d = dev_of(wpe, (long)T * C), *st_d = sink ? dev_of(st, C) : NULL,
         *out_d = dev_of(out, (long)B * Tp * C), *dout_d = dev_of(dout, (long)B * Tp * C),
         *dwte_d = dev_of(dwte, (long)V * C), *dwpe_d = dev_of(dwpe, (long)T * C), *dst_d = sink ? dev_of(dst, C) : NULL;
    cpu_ops.embed_fwd(out, tok, wte, wpe, st, B, T, C);
    gpu_ops.embed_fwd(out_d, tok_d, wte_d, wpe_d, st_d, B, T, C);
    same(sink ? "embed fwd (sink token)" : "embed fwd", out_d, out, (long)B * Tp * C, 0);
    cpu_ops.embed_bwd(dwte, dwpe, dst, dout, tok, B, T, C);
    gpu_ops.embed_bwd(dwte_d, dwpe_d, dst_d, dout_d, tok_d, B, T, C);
    same("embed dwte (repeated tokens, accumulated)", dwte_d, dwte, (long)V * C, 0);
    same("embed dwpe (accumulated)", dwpe_d, dwpe, (long)T * C, 0);
    if (sink) same("embed dsink (accumulated)", dst_d, dst, C, 0);
    void *ds[] = {tok_d, wte_d, wpe_d, st_d, out_d, dout_d, dwte_d, dwpe_d, dst_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(tok), free(wte), free(wpe), free(st), free(out), free(dout), free(dwte), free(dwpe), free(dst);
}

static void test_gate(int kind, int slot, int B, int T, int H, int d) {
    int C = H * d, vs = 3 * C;
    long nv = (long)B * T * vs, ng = (long)B * H * T, nvg = (long)B * T * C;
    real *v = host_rand(nv, 1), *tau = host_rand(H, 0.5), *w = host_rand((long)H * d, 0.3), *b = host_rand(H, 1);
    GateParams gp = {kind, slot, 8, tau, w, b};
    real *g = calloc(ng, sizeof *g), *vg = calloc(nvg, sizeof *vg), *lb = calloc(ng, sizeof *lb);
    real *tau_d = dev_of(tau, H), *w_d = dev_of(w, (long)H * d), *b_d = dev_of(b, H), *v_d = dev_of(v, nv);
    GateParams gpd = {kind, slot, 8, tau_d, w_d, b_d};
    real *g_d = dev_of(g, ng), *vg_d = dev_of(vg, nvg), *lb_d = dev_of(lb, ng);
    cpu_ops.gate_fwd(g, vg, lb, v, vs, &gp, B, T, H, d);
    gpu_ops.gate_fwd(g_d, vg_d, lb_d, v_d, vs, &gpd, B, T, H, d);
    char what[96];
    snprintf(what, sizeof what, "gate fwd g (%s, %s)", kind == GATE_NORM ? "norm" : "proj", slot ? "routing" : "value");
    same(what, g_d, g, ng, 0);
    if (slot == SLOT_VALUE) same("gate fwd vg", vg_d, vg, nvg, 0);
    else same("gate fwd logbias", lb_d, lb, ng, 0);
    real *dv = host_rand(nv, 1), *dvg = host_rand(nvg, 1), *dlb = host_rand(ng, 1), *dtau = host_rand(H, 1),
         *dw = host_rand((long)H * d, 1), *db = host_rand(H, 1);
    real *dv_d = dev_of(dv, nv), *dvg_d = dev_of(dvg, nvg), *dlb_d = dev_of(dlb, ng), *dtau_d = dev_of(dtau, H),
         *dw_d = dev_of(dw, (long)H * d), *db_d = dev_of(db, H);
    cpu_ops.gate_bwd(dv, vs, dtau, dw, db, slot ? NULL : dvg, slot ? dlb : NULL, v, vs, g, &gp, B, T, H, d);
    gpu_ops.gate_bwd(dv_d, vs, dtau_d, dw_d, db_d, slot ? NULL : dvg_d, slot ? dlb_d : NULL, v_d, vs, g_d, &gpd, B, T,
                     H, d);
    same("gate bwd dv", dv_d, dv, nv, 0);
    if (kind == GATE_NORM) same("gate bwd dtau (accumulated)", dtau_d, dtau, H, 0);
    if (kind == GATE_PROJ) {
        same("gate bwd dw (accumulated)", dw_d, dw, (long)H * d, 0);
        same("gate bwd db (accumulated)", db_d, db, H, 0);
    }
    void *ds[] = {tau_d, w_d, b_d, v_d, g_d, vg_d, lb_d, dv_d, dvg_d, dlb_d, dtau_d, dw_d, db_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(v), free(tau), free(w), free(b), free(g), free(vg), free(lb), free(dv), free(dvg), free(dlb), free(dtau),
        free(dw), free(db);
}

/* phantom: 0 none, 1 logit 0, 2 learned logits; logbias: routing-slot bias */
static void test_attention(int B, int T, int H, int d, int phantom, int logbias) {
    int C = H * d, qs = 3 * C;
    long nq = (long)B * T * qs, no = (long)B * T * C, nl = (long)B * H * T;
    real *qkv = host_rand(nq, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *o = calloc(no, sizeof *o), *lse = calloc(nl, sizeof *lse), *dout = host_rand(no, 1);
    real *dqkv = calloc(nq, sizeof *dqkv), *dsink = host_rand(H, 1), *dlb = calloc(nl, sizeof *dlb);
    real *qkv_d = dev_of(qkv, nq), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl), *o_d = dev_of(o, no),
         *lse_d = dev_of(lse, nl), *dout_d = dev_of(dout, no), *dqkv_d = dev_of(dqkv, nq), *dsink_d = dev_of(dsink, H),
         *dlb_d = dev_of(dlb, nl);
    AttnArgs a = {B, T, H, d, qs, qs, qs, C, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, qs, qs, C, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    cpu_ops.attention_fwd(o, lse, qkv, qkv + C, qkv + 2 * C, &a);
    gpu_ops.attention_fwd(o_d, lse_d, qkv_d, qkv_d + C, qkv_d + 2 * C, &ad);
    char what[128];
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma";
    snprintf(what, sizeof what, "attention fwd B%d T%d H%d d%d phantom %d logbias %d tiles %s", B, T, H, d, phantom,
             logbias, tiles);
    same(what, o_d, o, no, 1);
    same("attention lse", lse_d, lse, nl, 1);
    cpu_ops.attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, phantom == 2 ? dsink : NULL, logbias ? dlb : NULL, dout, qkv,
                          qkv + C, qkv + 2 * C, o, lse, &a);
    gpu_ops.attention_bwd(dqkv_d, dqkv_d + C, dqkv_d + 2 * C, phantom == 2 ? dsink_d : NULL, logbias ? dlb_d : NULL,
                          dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d, lse_d, &ad);
    snprintf(what, sizeof what, "attention dq/dk/dv B%d T%d d%d phantom %d logbias %d tiles %s", B, T, d, phantom,
             logbias, tiles);
    same(what, dqkv_d, dqkv, nq, 1);
    if (phantom == 2) {
        /* dsink_h += -sum_{b,i} exp(c_h - LSE_i) D_i: its terms may cancel,
         * with each other and with the value added to, so its bf16 rounding
         * error scales with the terms, not with the result (as in
         * tests/emu/attention_emu_test.cpp): the scale is the larger of
         * |dsink| and sum_{b,i} exp(c_h - LSE_i) |D_i|, D_i = dO_i . o_i. */
        double scale = 0;
        for (int h = 0; h < H; h++) {
            double t = 0;
            for (long r = 0; r < (long)B * T; r++) {
                double Di = 0;
                for (int e = 0; e < d; e++) Di += (double)dout[r * C + h * d + e] * o[r * C + h * d + e];
                const long bh = (r / T) * H + h, i = r % T;
                t += exp((double)sink[h] - lse[bh * T + i]) * fabs(Di);
            }
            if (t > scale) scale = t;
            if (fabs(dsink[h]) > scale) scale = fabs(dsink[h]);
        }
        compare("attention dsink (accumulated)", dsink_d, dsink, H, 1, scale);
    }
    /* At T = 1 without a phantom the exact dlogbias is 0 (P = 1): both sides
     * hold rounding noise of different sums, so there is nothing to compare. */
    if (logbias && !(T == 1 && !phantom)) same("attention dlogbias", dlb_d, dlb, nl, 1);
    real *dqkv2 = dev_of(dqkv, nq);
    gpu_ops.attention_bwd(dqkv2, dqkv2 + C, dqkv2 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d, lse_d,
                          &ad);
    bitwise("attention bwd", dqkv_d, dqkv2, nq);
    if (!strcmp(tiles, "mma") && d <= 64) {
        /* one 16-row m-tile a warp instead of two (SG_ATTN_WARP_ROWS,
         * kernels/cuda/attention_fwd_mma.cu): every row runs the same
         * instructions, so the bits must be the same */
        real *o16 = dev_of(o, no), *lse16 = dev_of(lse, nl), *dq16 = dev_of(dqkv, nq);
        setenv("SG_ATTN_WARP_ROWS", "16", 1);
        gpu_ops.attention_fwd(o16, lse16, qkv_d, qkv_d + C, qkv_d + 2 * C, &ad);
        gpu_ops.attention_bwd(dq16, dq16 + C, dq16 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d,
                              lse_d, &ad);
        unsetenv("SG_ATTN_WARP_ROWS");
        snprintf(what, sizeof what, "attention fwd/bwd B%d T%d d%d, 16 rows a warp against 32", B, T, d);
        real *a1 = back(o_d, no), *a2 = back(o16, no), *l1 = back(lse_d, nl), *l2 = back(lse16, nl);
        real *g1 = back(dqkv2, nq), *g2 = back(dq16, nq);
        CHECK(!memcmp(a1, a2, sizeof *a1 * (size_t)no) && !memcmp(l1, l2, sizeof *l1 * (size_t)nl) &&
                  !memcmp(g1, g2, sizeof *g1 * (size_t)nq),
              "%s: not bitwise", what);
        free(a1), free(a2), free(l1), free(l2), free(g1), free(g2);
        gpu_ops.free(o16), gpu_ops.free(lse16), gpu_ops.free(dq16);
    }
    if (!strcmp(tiles, "mma")) {
        /* dQ from the dS tiles the dK/dV kernel stored (SG_ATTN_DQ=stored,
         * kernels/cuda/attention_bwd_mma.cu): the same dS and the same order
         * of products as recomputing it.  The emulator shows the bits equal;
         * here the recomputed dS^T = K Q^T must round as S = Q K^T does,
         * which the hardware does not promise, so: within the bf16
         * tolerance, said when bitwise, and deterministic. */
        real *dqs = dev_of(dqkv, nq), *dqs2 = dev_of(dqkv, nq);
        setenv("SG_ATTN_DQ", "stored", 1);
        gpu_ops.attention_bwd(dqs, dqs + C, dqs + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d,
                              lse_d, &ad);
        gpu_ops.attention_bwd(dqs2, dqs2 + C, dqs2 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C,
                              o_d, lse_d, &ad);
        unsetenv("SG_ATTN_DQ");
        real *g1 = back(dqkv2, nq), *g2 = back(dqs, nq);
        snprintf(what, sizeof what, "attention bwd B%d T%d d%d, dQ from the stored dS against recomputed", B, T, d);
        compare(what, dqs, g1, nq, 1, maxabs(g1, nq));
        printf("%s: %s\n", what, memcmp(g1, g2, sizeof *g1 * (size_t)nq) ? "within tolerance, not bitwise" : "bitwise");
        snprintf(what, sizeof what, "attention bwd B%d T%d d%d, dQ from the stored dS", B, T, d);
        bitwise(what, dqs, dqs2, nq);
        free(g1), free(g2);
        gpu_ops.free(dqs), gpu_ops.free(dqs2);
    }
    void *ds[] = {qkv_d, sink_d, lb_d, o_d, lse_d, dout_d, dqkv_d, dsink_d, dlb_d, dqkv2};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(qkv), free(sink), free(lb), free(o), free(lse), free(dout), free(dqkv), free(dsink), free(dlb);
}

/* Explicit attention (analyses): probabilities and their apply, as
 * test_attention's arms.  p and out start as junk on both sides, so every
 * entry the op owns must be written; out has a padded row stride whose
 * padding must survive.  apply is checked on the reference's p and on a
 * dense random p (entries above the diagonal and in the phantom column:
 * the first count, the second must not). */
static void test_attention_probs(int B, int T, int H, int d, int phantom, int logbias) {
    int C = H * d, qs = 3 * C, os = C + 8;
    long nq = (long)B * T * qs, no = (long)B * T * os, nl = (long)B * H * T, np = (long)B * H * T * (T + 1);
    real *qkv = host_rand(nq, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *p = host_rand(np, 1), *dense = host_rand(np, 0.1), *o0 = host_rand(no, 1);
    real *o = malloc(sizeof *o * (size_t)no);
    memcpy(o, o0, sizeof *o * (size_t)no);
    real *qkv_d = dev_of(qkv, nq), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl), *p_d = dev_of(p, np),
         *p2_d = dev_of(p, np), *o_d = dev_of(o0, no), *o2_d = dev_of(o0, no);
    AttnArgs a = {B, T, H, d, qs, qs, qs, os, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, qs, qs, os, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    char what[160], tag[96];
    snprintf(tag, sizeof tag, "B%d T%d H%d d%d phantom %d logbias %d", B, T, H, d, phantom, logbias);

    cpu_ops.attention_probs(p, qkv, qkv + C, &a);
    gpu_ops.attention_probs(p_d, qkv_d, qkv_d + C, &ad);
    snprintf(what, sizeof what, "attention probs %s", tag);
    same(what, p_d, p, np, 0);
    /* the device's own rows: sum to one, exact zeros above the diagonal and
     * (without a phantom) in the phantom column */
    real *g = back(p_d, np);
    long badsum = -1, badzero = -1;
    double worst = 0; /* the largest |row sum - 1| */
    for (long r = 0; r < (long)B * H * T; r++) {
        const real *row = g + r * (T + 1);
        int i = (int)(r % T);
        double s = 0;
        for (int j = 0; j <= T; j++) s += row[j];
        if (fabs(s - 1) > worst) worst = fabs(s - 1);
        if (fabs(s - 1) > 1e-5 && badsum < 0) badsum = r;
        for (int j = i + 1; j < T; j++)
            if (row[j] != 0 && badzero < 0) badzero = r;
        if (!phantom && row[T] != 0 && badzero < 0) badzero = r;
    }
    CHECK(badsum < 0, "attention probs %s: row %ld does not sum to 1 within 1e-5 (worst |sum - 1| %.3g)", tag,
          badsum, worst);
    CHECK(badzero < 0, "attention probs %s: row %ld has a nonzero entry above the diagonal%s", tag, badzero,
          phantom ? "" : " or in the phantom column");
    free(g);
    gpu_ops.attention_probs(p2_d, qkv_d, qkv_d + C, &ad);
    snprintf(what, sizeof what, "attention probs %s", tag);
    bitwise(what, p_d, p2_d, np);

    /* apply, on the reference's p (uploaded over the device's) */
    gpu_ops.upload(p_d, p, sizeof *p * (size_t)np);
    cpu_ops.attention_apply(o, p, qkv + 2 * C, &a);
    gpu_ops.attention_apply(o_d, p_d, qkv_d + 2 * C, &ad);
    snprintf(what, sizeof what, "attention apply %s", tag);
    same(what, o_d, o, no, 0);
    gpu_ops.attention_apply(o2_d, p_d, qkv_d + 2 * C, &ad);
    bitwise(what, o_d, o2_d, no);
    /* apply, on a dense p */
    gpu_ops.upload(p_d, dense, sizeof *dense * (size_t)np);
    cpu_ops.attention_apply(o, dense, qkv + 2 * C, &a);
    gpu_ops.attention_apply(o_d, p_d, qkv_d + 2 * C, &ad);
    snprintf(what, sizeof what, "attention apply (dense p) %s", tag);
    same(what, o_d, o, no, 0);

    void *ds[] = {qkv_d, sink_d, lb_d, p_d, p2_d, o_d, o2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(qkv), free(sink), free(lb), free(p), free(dense), free(o0), free(o);
}

/* Decode attention (one query per sequence), as test_attention's arms, with
 * a shared query (q_stride 0) or one per sequence (q_stride H*d).  K and V
 * are interleaved rows (stride 2C), out has a padded row stride whose
 * padding must survive, and every overwritten output starts as the same
 * junk on both sides.  Everything is fp32 (fp32 tolerance); the second GPU
 * run, from the same starting buffers, must give the same bits. */
static void test_attention_decode(int B, int T, int H, int d, int phantom, int logbias, int qshared) {
    int C = H * d, kvs = 2 * C, os = C + 8, qs = qshared ? 0 : C;
    long nq = qshared ? C : (long)B * C, nkv = (long)B * T * kvs, no = (long)B * os, nbh = (long)B * H,
         nl = nbh * T, ndq = (long)B * C;
    real *q = host_rand(nq, 1), *kv = host_rand(nkv, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *o = host_rand(no, 1), *lse = host_rand(nbh, 1), *dout = host_rand(no, 1);
    real *dq = host_rand(ndq, 1), *dkv = host_rand(nkv, 1), *dlb = host_rand(nl, 1), *dsink = host_rand(H, 1);
    real *q_d = dev_of(q, nq), *kv_d = dev_of(kv, nkv), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl);
    real *o_d = dev_of(o, no), *o2_d = dev_of(o, no), *lse_d = dev_of(lse, nbh), *lse2_d = dev_of(lse, nbh),
         *dout_d = dev_of(dout, no);
    real *dq_d = dev_of(dq, ndq), *dq2_d = dev_of(dq, ndq), *dkv_d = dev_of(dkv, nkv), *dkv2_d = dev_of(dkv, nkv),
         *dlb_d = dev_of(dlb, nl), *dlb2_d = dev_of(dlb, nl), *dsink_d = dev_of(dsink, H),
         *dsink2_d = dev_of(dsink, H);
    AttnArgs a = {B, T, H, d, qs, kvs, kvs, os, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, kvs, kvs, os, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    char what[160], tag[112];
    snprintf(tag, sizeof tag, "B%d T%d H%d d%d phantom %d logbias %d q_stride %d", B, T, H, d, phantom, logbias, qs);

    cpu_ops.attention_decode_fwd(o, lse, q, kv, kv + C, &a);
    gpu_ops.attention_decode_fwd(o_d, lse_d, q_d, kv_d, kv_d + C, &ad);
    snprintf(what, sizeof what, "attention decode out %s", tag);
    same(what, o_d, o, no, 0);
    snprintf(what, sizeof what, "attention decode lse %s", tag);
    same(what, lse_d, lse, nbh, 0);
    gpu_ops.attention_decode_fwd(o2_d, lse2_d, q_d, kv_d, kv_d + C, &ad);
    snprintf(what, sizeof what, "attention decode fwd %s", tag);
    bitwise(what, o_d, o2_d, no);
    bitwise(what, lse_d, lse2_d, nbh);

    /* the backward from the reference's forward on both sides */
    gpu_ops.upload(o_d, o, sizeof *o * (size_t)no);
    gpu_ops.upload(lse_d, lse, sizeof *lse * (size_t)nbh);
    real *ds = phantom == 2 ? dsink : NULL, *ds_d = phantom == 2 ? dsink_d : NULL;
    real *ds2_d = phantom == 2 ? dsink2_d : NULL;
    cpu_ops.attention_decode_bwd(dq, dkv, dkv + C, ds, logbias ? dlb : NULL, dout, q, kv, kv + C, o, lse, &a);
    gpu_ops.attention_decode_bwd(dq_d, dkv_d, dkv_d + C, ds_d, logbias ? dlb_d : NULL, dout_d, q_d, kv_d, kv_d + C, o_d,
                                 lse_d, &ad);
    /* At T = 1 without a phantom the exact dS is 0 (p = 1, dO . v = D), so dq,
     * dk and dlogbias are rounding noise on both sides; in fp32 that is
     * ~1e-6 (the error of a d-term dot product), under the 1e-5 absolute
     * tolerance, so they are compared as everywhere else. */
    snprintf(what, sizeof what, "attention decode dq %s", tag);
    same(what, dq_d, dq, ndq, 0);
    snprintf(what, sizeof what, "attention decode dk/dv %s", tag);
    same(what, dkv_d, dkv, nkv, 0);
    if (phantom == 2) {
        snprintf(what, sizeof what, "attention decode dsink (accumulated) %s", tag);
        same(what, dsink_d, dsink, H, 0);
    }
    if (logbias) {
        snprintf(what, sizeof what, "attention decode dlogbias %s", tag);
        same(what, dlb_d, dlb, nl, 0);
    }
    gpu_ops.attention_decode_bwd(dq2_d, dkv2_d, dkv2_d + C, ds2_d, logbias ? dlb2_d : NULL, dout_d, q_d, kv_d,
                                 kv_d + C, o_d, lse_d, &ad);
    snprintf(what, sizeof what, "attention decode bwd %s", tag);
    bitwise(what, dq_d, dq2_d, ndq);
    bitwise(what, dkv_d, dkv2_d, nkv);
    bitwise(what, dlb_d, dlb2_d, nl);
    bitwise(what, dsink_d, dsink2_d, H);

    void *dd[] = {q_d, kv_d, sink_d, lb_d, o_d, o2_d, lse_d, lse2_d, dout_d, dq_d, dq2_d, dkv_d, dkv2_d, dlb_d, dlb2_d,
                  dsink_d, dsink2_d};
    for (size_t i = 0; i < sizeof dd / sizeof *dd; i++) gpu_ops.free(dd[i]);
    free(q), free(kv), free(sink), free(lb), free(o), free(lse), free(dout), free(dq), free(dkv), free(dlb),
        free(dsink);
}

static void test_classifier(int N, int C, int V, int Vp) {
    real *x = host_rand((long)N * C, 1), *wte = host_rand((long)Vp * C, 0.3);
    int32_t *tg = malloc(sizeof *tg * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 91, (uint64_t)i), (uint64_t)V);
    real *loss = calloc(N, sizeof *loss), *dx = calloc((size_t)N * C, sizeof *dx), *dwte = host_rand((long)Vp * C, 0.1);
    real *x_d = dev_of(x, (long)N * C), *wte_d = dev_of(wte, (long)Vp * C), *loss_d = dev_of(loss, N),
         *dx_d = dev_of(dx, (long)N * C), *dwte_d = dev_of(dwte, (long)Vp * C);
    int32_t *tg_d = gpu_ops.alloc(sizeof *tg * (size_t)N);
    gpu_ops.upload(tg_d, tg, sizeof *tg * (size_t)N);
    double l1 = cpu_ops.classifier(loss, dx, dwte, x, wte, tg, N, C, V, Vp, (real)(1.0 / N));
    double l2 = gpu_ops.classifier(loss_d, dx_d, dwte_d, x_d, wte_d, tg_d, N, C, V, Vp, (real)(1.0 / N));
    CHECK(fabs(l1 - l2) <= 2e-3 * fabs(l1), "classifier loss sum %.6f vs cpu %.6f", l2, l1);
    same("classifier row losses", loss_d, loss, N, 1);
    same("classifier dx", dx_d, dx, (long)N * C, 1);
    same("classifier dwte (accumulated)", dwte_d, dwte, (long)Vp * C, 1);
    double l3 = gpu_ops.classifier(NULL, NULL, NULL, x_d, wte_d, tg_d, N, C, V, Vp, 1);
    CHECK(l3 == l2, "classifier: evaluation gives the training loss bitwise (%.17g, %.17g)", l3, l2);
    void *ds[] = {x_d, wte_d, loss_d, dx_d, dwte_d, tg_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(wte), free(tg), free(loss), free(dx), free(dwte);
}

/* The classifier's rows in chunks of `chunk` (sg_classifier_set_chunk)
 * against one chunk, the default for rows this few: the same loss, row
 * losses and dx (bitwise in the emulator, whose GEMMs do not depend on the
 * chunk; within tolerance on a device, where cuBLAS may choose another
 * algorithm for another row count), and dwte, which accumulates chunk by
 * chunk, within tolerance; and against the CPU. */
void sg_classifier_set_chunk(int rows); /* kernels/cuda/classifier.cu */

static void test_classifier_chunks(int N, int C, int V, int Vp, int chunk) {
    real *x = host_rand((long)N * C, 1), *wte = host_rand((long)Vp * C, 0.3), *dwte = host_rand((long)Vp * C, 0.1);
    int32_t *tg = malloc(sizeof *tg * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 92, (uint64_t)i), (uint64_t)V);
    real *x_d = dev_of(x, (long)N * C), *wte_d = dev_of(wte, (long)Vp * C);
    int32_t *tg_d = gpu_ops.alloc(sizeof *tg * (size_t)N);
    gpu_ops.upload(tg_d, tg, sizeof *tg * (size_t)N);
    real *loss_d[2], *dx_d[2], *dwte_d[2];
    double l[2];
    for (int k = 0; k < 2; k++) { /* k 0: one chunk; 1: chunks of `chunk` rows */
        loss_d[k] = gpu_ops.alloc(sizeof(real) * N), dx_d[k] = gpu_ops.alloc(sizeof(real) * N * C);
        dwte_d[k] = dev_of(dwte, (long)Vp * C);
        sg_classifier_set_chunk(k ? chunk : 0);
        l[k] = gpu_ops.classifier(loss_d[k], dx_d[k], dwte_d[k], x_d, wte_d, tg_d, N, C, V, Vp, (real)(1.0 / N));
    }
    sg_classifier_set_chunk(0);
    char what[160];
    real *loss = calloc((size_t)N, sizeof *loss), *dx = calloc((size_t)N * C, sizeof *dx);
    const double l0 = cpu_ops.classifier(loss, dx, dwte, x, wte, tg, N, C, V, Vp, (real)(1.0 / N));
    CHECK(fabs(l[1] - l0) <= 2e-3 * fabs(l0), "classifier in chunks of %d: loss sum %.6f vs cpu %.6f", chunk, l[1], l0);
    snprintf(what, sizeof what, "classifier N %d in chunks of %d, dwte against the CPU", N, chunk);
    same(what, dwte_d[1], dwte, (long)Vp * C, 1);
    real *one = back(dwte_d[0], (long)Vp * C);
    snprintf(what, sizeof what, "classifier N %d in chunks of %d, dwte against one chunk", N, chunk);
    same(what, dwte_d[1], one, (long)Vp * C, 1);
    free(one);
    if (emulated()) {
        CHECK(l[0] == l[1], "classifier in chunks of %d: loss sum %.17g, one chunk %.17g (want the same bits)", chunk,
              l[1], l[0]);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, row losses against one chunk", N, chunk);
        bits_as(what, "one chunk", loss_d[1], loss_d[0], N);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, dx against one chunk", N, chunk);
        bits_as(what, "one chunk", dx_d[1], dx_d[0], (long)N * C);
    } else {
        CHECK(fabs(l[0] - l[1]) <= 1e-5 * fabs(l[0]), "classifier in chunks of %d: loss sum %.9g, one chunk %.9g",
              chunk, l[1], l[0]);
        real *h = back(loss_d[0], N);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, row losses against one chunk", N, chunk);
        same(what, loss_d[1], h, N, 1);
        free(h);
        h = back(dx_d[0], (long)N * C);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, dx against one chunk", N, chunk);
        same(what, dx_d[1], h, (long)N * C, 1);
        free(h);
    }
    void *ds[] = {x_d, wte_d, tg_d, loss_d[0], loss_d[1], dx_d[0], dx_d[1], dwte_d[0], dwte_d[1]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(wte), free(dwte), free(tg), free(loss), free(dx);
}

int main(int argc, char **argv) {
    check_name = "test_gpu_ops";
    printf("CPU reference: %s; GPU: %s\n", cpu_ops.backend(), gpu_ops.backend());
    if (argc > 2 && !strcmp(argv[1], "broken-promise"))
        return !strcmp(argv[2], "bf16")        ? broken_bf16_promise()
               : !strcmp(argv[2], "attention") ? broken_attention_promise()
                                               : broken_promise(argv[2]);
    if (argc > 1 && !strcmp(argv[1], "bf16-operands")) { /* the bf16 operand cases alone */
        test_bf16_operands();
        test_attention_operands();
        return check_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "twins")) { /* the twin cases alone (tests/e2e_cuda_sgtrain_emu.sh) */
        test_twins();
        return check_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "tune")) { /* the SG_MATMUL_TUNE cases alone */
        test_tuning();
        return check_finish();
    }
    test_uploads();
    test_matmul(64, 32, 96);
    test_matmul(130, 64, 192);
    test_matmul(512, 384, 1152);
    test_tuning();
    test_twins();
    test_bf16_operands();
    test_attention_operands();
    test_layernorm(50, 64, 1);
    test_layernorm(300, 768, 0);
    for (int alias = 0; alias <= 2; alias++) {
        test_residual_layernorm(50, 64, 1, alias);
        test_residual_layernorm(301, 768, 0, alias);
    }
    test_residual_layernorm(7, 100, 1, 0);
    test_pointwise(100003);
    test_pointwise_paths(4099);
    test_pointwise_paths(4096);
    test_adamw_multi(0);
    test_adamw_multi(1000);
    test_embed(2, 16, 32, 100, 0);
    test_embed(3, 9, 32, 50, 1);
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = 0; slot < 2; slot++) test_gate(kind, slot, 2, 17, 2, 16);
    test_gate(GATE_PROJ, SLOT_VALUE, 2, 64, 6, 64);
    /* the streaming attention under both tile kernels and cuDNN's fused
     * attention (SG_ATTN, kernels/cuda/attention_cuda.h; under cudnn the
     * log-bias cases run the mma tiles) */
    static const char *const tiles[] = {"wmma", "mma", "cudnn"};
    for (int ki = 0; ki < 3; ki++) {
        setenv("SG_ATTN", tiles[ki], 1);
        int Ts[] = {1, 7, 64, 130};
        for (int ti = 0; ti < 4; ti++)
            for (int ph = 0; ph <= 2; ph++) {
                test_attention(2, Ts[ti], 2, 16, ph, 0);
                test_attention(1, Ts[ti], 2, 64, ph, ph == 0);
            }
        test_attention(1, 1024, 4, 64, 2, 0);
        test_attention(1, 300, 2, 128, 2, 1);
        test_attention(2, 200, 3, 32, 1, 1);
    }
    unsetenv("SG_ATTN");
    int pshape[][4] = {{2, 7, 3, 16}, {1, 1, 2, 16}, {1, 130, 2, 64}, {1, 512, 4, 64}};
    for (int si = 0; si < 4; si++)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++)
                test_attention_probs(pshape[si][0], pshape[si][1], pshape[si][2], pshape[si][3], ph, lb);
    int dshape[][4] = {{3, 7, 2, 16}, {256, 64, 1, 64}, {2, 1000, 4, 64}, {3, 1, 2, 16}};
    for (int si = 0; si < 4; si++)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++)
                for (int qsh = 0; qsh <= 1; qsh++)
                    test_attention_decode(dshape[si][0], dshape[si][1], dshape[si][2], dshape[si][3], ph, lb, qsh);
    test_classifier(37, 32, 100, 128);
    test_classifier(256, 384, 50257, 50304);
    test_classifier_chunks(2100, 32, 100, 128, 1000); /* three chunks, the last short */
    test_classifier_chunks(300, 64, 1031, 1088, 64);
    return check_finish();
}
