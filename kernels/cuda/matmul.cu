/* Dense layers on cuBLASLt in the paper's precision: the operands are cast
 * to bf16 (as torch.autocast does), products accumulate in fp32, outputs
 * and weight gradients are fp32.
 *
 * Row-major X[M,K] is column-major X^T with leading dimension K, so with
 * y = x W^T (W stored [N,K]):
 *   forward  y^T[N,M]   = W[N,K]   . x^T[K,M]      A = W (transposed), B = x
 *   dinp     dx^T[K,M]  = W^T[K,N] . dy^T[N,M]     A = W, B = dy
 *   dW       dW^T[K,N] += x^T[K,M] . dy[M,N]       A = x, B = dy (transposed), beta = 1
 * cuBLASLt's results are deterministic for a fixed algorithm on one GPU;
 * the algorithm is chosen once per shape and cached, so every step uses
 * the same one. */
#include <string.h>

#include "cuda_common.h"

enum { THREADS = 256, CACHE = 64 };
static const size_t WORKSPACE = 32u << 20;

__global__ void to_bf16_k(__nv_bfloat16 *dst, const float *src, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = __float2bfloat16(src[i]);
}

static __nv_bfloat16 *as_bf16(int slot, const float *src, long n) {
    __nv_bfloat16 *dst = (__nv_bfloat16 *)sg_scratch(slot, (size_t)n * sizeof *dst);
    to_bf16_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(dst, src, n);
    CUDA_LAUNCHED();
    return dst;
}

typedef struct {
    int m, n, k, ta, tb, lda, ldb, ldc, accumulate;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    int used;
} Plan;

static Plan g_plans[CACHE];

static Plan *plan_for(int m, int n, int k, int ta, int tb, int lda, int ldb, int ldc, int accumulate) {
    for (int i = 0; i < CACHE; i++) {
        Plan *p = &g_plans[i];
        if (p->used && p->m == m && p->n == n && p->k == k && p->ta == ta && p->tb == tb && p->lda == lda &&
            p->ldb == ldb && p->ldc == ldc && p->accumulate == accumulate)
            return p;
    }
    Plan *p = NULL;
    for (int i = 0; i < CACHE && !p; i++)
        if (!g_plans[i].used) p = &g_plans[i];
    if (!p) { /* more shapes than slots: recycle the first */
        p = &g_plans[0];
        cublasLtMatmulDescDestroy(p->op);
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
    }
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k, p->ta = ta, p->tb = tb, p->lda = lda, p->ldb = ldb, p->ldc = ldc;
    p->accumulate = accumulate;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* stored shapes (column-major rows x cols) */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(sg_cublaslt(), p->op, p->a, p->b, p->c, p->c, pref, 1, &h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) sg_cuda_fail(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm for this shape");
    p->algo = h.algo;
    p->used = 1;
    return p;
}

/* D[m,n] = alpha op(A) op(B) + beta D, column-major, bf16 operands, fp32 D. */
static void gemm(float *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int m, int n, int k, int ta, int tb,
                 int lda, int ldb, int ldc, int accumulate) {
    Plan *p = plan_for(m, n, k, ta, tb, lda, ldb, ldc, accumulate);
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    void *ws = sg_scratch(SCRATCH_LT_WORKSPACE, WORKSPACE);
    CUBLAS_CHECK(cublasLtMatmul(sg_cublaslt(), p->op, &alpha, a, p->a, b, p->b, &beta, d, p->c, d, p->c, &p->algo, ws,
                                WORKSPACE, sg_stream()));
}

extern "C" void op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N) {
    const __nv_bfloat16 *x = as_bf16(SCRATCH_BF16_A, inp, (long)M * K);
    const __nv_bfloat16 *wb = as_bf16(SCRATCH_BF16_B, w, (long)N * K);
    gemm(out, wb, x, N, M, K, 1, 0, K, K, N, 0);
}

extern "C" void op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp, const real *w, int M, int K,
                              int N) {
    const __nv_bfloat16 *dy = as_bf16(SCRATCH_BF16_A, dout, (long)M * N);
    if (dinp) {
        const __nv_bfloat16 *wb = as_bf16(SCRATCH_BF16_B, w, (long)N * K);
        gemm(dinp, wb, dy, K, M, N, 0, 0, K, N, K, 0);
    }
    if (dw) {
        const __nv_bfloat16 *x = as_bf16(SCRATCH_BF16_B, inp, (long)M * K);
        gemm(dw, x, dy, K, N, M, 0, 1, K, N, K, 1);
    }
}
