/* test_gpu_ops: the weights' bf16 copies that AdamW keeps current. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

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

void test_weight_copies(int M, int K, int N, int shift) {
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
