/* test_gpu_ops: the bf16 twins the producers write for the next matmul, and
 * the tensors promised to matmuls alone (kernels/cuda/matmul.cu). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

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

static void casts_skipped(const char *what, long before, long want) {
    long got = sg_matmul_casts_skipped() - before;
    if (!twins_on()) want = 0;
    CHECK(got == want, "%s: %ld operand casts skipped, want %ld", what, got, want);
}

/* a result through the twins against the reference's, bitwise */
static void twin_bits(const char *what, const real *d1, const real *d2, long n) {
    bits_as(what, "the matmul on a copy", d1, d2, n);
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
int broken_promise(const char *how) {
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

void test_twins(void) {
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
