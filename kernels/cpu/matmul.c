/* Linear layers through the CPU BLAS.  W is stored [out, in] (PyTorch's
 * Linear layout), so every product is a row-major GEMM with W transposed or
 * not; no copies, no transposes in memory. */

#include "blas.h"
#include "ops.h"

#ifdef SG_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* out[M,N] = inp[M,K] W[N,K]^T */
void op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N) {
    blas_threads_sync(M, N, K);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, inp, K, w, K, 0, out, N);
}

/* dinp = dout W ;  dW += dout^T inp */
void op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp,
                   const real *w, int M, int K, int N) {
    blas_threads_sync(M, N, K);
    if (dinp) GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1, dout, N, w, K, 0, dinp, K);
    if (dw) GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, dout, N, inp, K, 1, dw, K);
}

/* The fp32 products read the fp32 values themselves, so there is no
 * smaller copy to keep in their place. */
void op_matmul_only(const real *buf, long n) {
    (void)buf;
    (void)n;
}
/* The CPU keeps fp32 activations: its products are fp32. */
void op_bf16_operand(const real *buf, long n) {
    (void)buf;
    (void)n;
}
void op_attention_operand(const real *buf, long n) {
    (void)buf;
    (void)n;
}
void op_matmul_only_end(const void *base, size_t bytes) {
    (void)base;
    (void)bytes;
}
/* Every promised tensor keeps its fp32 values here. */
long op_promised_len(int kind, long n) {
    (void)kind;
    return n;
}
