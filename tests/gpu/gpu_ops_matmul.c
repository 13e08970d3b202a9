/* test_gpu_ops: the matmuls, and SG_MATMUL_TUNE's choice of algorithm. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

void test_matmul(int M, int K, int N) {
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

/* ---- SG_MATMUL_TUNE (kernels/cuda/gemm.cu) ---------------------------------
 * Tuning times cuBLASLt's candidates for a shape on its first call and keeps
 * the fastest of those that give the first choice's bits, so the products
 * with it are bitwise those without.  The dW accumulates twice into zeros,
 * as the model's gradients do over micro-batches: tuning runs in the first
 * call, where C is 0, and the second, of another dout, reads the first's
 * result as C, where an algorithm that adds C differently would show.  (Of
 * the same dout it would not: fl(x) + x rounds alike in any order.)  On the
 * device this is the check that cuBLASLt's candidates, run out of place
 * into scratch, give the bits they then give in place. */
void sg_matmul_set_tune(int on); /* kernels/cuda/gemm.cu */

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

void test_tuning(void) {
    test_matmul_tuned(64, 32, 96);
    test_matmul_tuned(130, 64, 192);
    test_matmul_tuned(512, 384, 1152);
}
