/* The emulated cuBLAS GEMMs (cublas_v2.h) and the loop they and the
 * emulated cuBLASLt share (emu_gemm.h).  Arguments cuBLAS rejects are
 * rejected with its status, so that CUBLAS_CHECK fails as it would;
 * arguments cuBLAS takes but the emulator does not (other types) fail
 * too, with a message that says so. */
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "emu_gemm.h"

namespace emu {
bool gemm_reads(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

static float element(const GemmOperand &x, long i) {
    if (x.type == CUDA_R_32F) return static_cast<const float *>(x.p)[i];
    uint16_t h;
    memcpy(&h, static_cast<const char *>(x.p) + 2 * i, 2);
    const uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

void gemm(bool ta, bool tb, int m, int n, int k, float alpha, GemmOperand A, GemmOperand B, float beta,
          const float *C, long ldc, float *D, long ldd) {
    /* EMU_GEMM=zero: every product taken as 0, D = beta C, for runs that
     * only record what the program asks for (tests/cudnn/record-graphs.sh),
     * where the values do not matter and the products are most of the time */
    static const bool zero = getenv("EMU_GEMM") && !strcmp(getenv("EMU_GEMM"), "zero");
    if (zero) {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) D[(long)j * ldd + i] = beta == 0.f ? 0.f : beta * C[(long)j * ldc + i];
        return;
    }
    /* op(A) by rows and op(B) by columns, so that each sum runs over
     * contiguous memory */
    std::vector<float> a((size_t)m * k), b((size_t)n * k);
    for (int i = 0; i < m; i++)
        for (int l = 0; l < k; l++) a[(size_t)i * k + l] = element(A, ta ? (long)i * A.ld + l : (long)l * A.ld + i);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++) b[(size_t)j * k + l] = element(B, tb ? (long)l * B.ld + j : (long)j * B.ld + l);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const float *x = &a[(size_t)i * k], *y = &b[(size_t)j * k];
            double s[4] = {0, 0, 0, 0};
            int l = 0;
            for (; l + 4 <= k; l += 4)
                for (int u = 0; u < 4; u++) s[u] += (double)x[l + u] * y[l + u];
            for (; l < k; l++) s[0] += (double)x[l] * y[l];
            const double sum = (s[0] + s[1]) + (s[2] + s[3]);
            const double c = beta == 0.f ? 0.0 : (double)beta * C[(long)j * ldc + i];
            D[(long)j * ldd + i] = (float)((double)alpha * sum + c);
        }
}
}  // namespace emu

/* cuBLAS's checks: sizes, leading dimensions at least the stored rows */
static cublasStatus_t check_args(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                 int n, int k, const void *alpha, int lda, int ldb, const void *beta, int ldc) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) || (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    const int arows = transa == CUBLAS_OP_T ? k : m, brows = transb == CUBLAS_OP_T ? n : k; /* as stored */
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

/* CUBLAS_COMPUTE_32F takes A and B of one type; of its combinations the
 * emulator has fp32 and bf16 operands with an fp32 C, and bf16 operands
 * with a bf16 C (cuBLAS rounds the fp32 result to nearest even; the
 * emulator's C of that type is only written: beta 0, as the classifier's
 * logits). */
static cublasStatus_t check_types(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t compute) {
    if (compute != CUBLAS_COMPUTE_32F || at != bt) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!emu::gemm_reads(at) || (ct != CUDA_R_32F && !(ct == CUDA_R_16BF && at == CUDA_R_16BF))) {
        fprintf(stderr, "emu cuBLAS: operand types %d, %d -> %d are not emulated\n", (int)at, (int)bt, (int)ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
    cublasStatus_t s = check_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_types(Atype, Btype, Ctype, computeType);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (Ctype == CUDA_R_16BF) {
        if (*(const float *)beta != 0.f) {
            fprintf(stderr, "emu cuBLAS: a bf16 C is only written (beta 0)\n");
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        std::vector<float> t((size_t)m * n);
        emu::gemm(transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k, *(const float *)alpha, {A, Atype, lda},
                  {B, Btype, ldb}, 0.f, nullptr, m, t.data(), m);
        __nv_bfloat16 *c = static_cast<__nv_bfloat16 *>(C);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) c[(long)j * ldc + i] = __float2bfloat16_rn(t[(size_t)j * m + i]);
        return CUBLAS_STATUS_SUCCESS;
    }
    emu::gemm(transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k, *(const float *)alpha, {A, Atype, lda},
              {B, Btype, ldb}, *(const float *)beta, (const float *)C, ldc, (float *)C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A,
                                          cudaDataType Atype, int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB, const void *beta,
                                          void *C, cudaDataType Ctype, int ldc, long long strideC,
                                          int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
    cublasStatus_t s = check_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
    if (s == CUBLAS_STATUS_SUCCESS && batchCount < 0) s = CUBLAS_STATUS_INVALID_VALUE;
    if (s == CUBLAS_STATUS_SUCCESS && (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F ||
                                       computeType != CUBLAS_COMPUTE_32F))
        s = CUBLAS_STATUS_NOT_SUPPORTED; /* the attention's GEMMs are fp32; others are not emulated */
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    for (int i = 0; i < batchCount; i++) {
        float *c = (float *)C + i * strideC;
        emu::gemm(transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k, *(const float *)alpha,
                  {(const float *)A + i * strideA, CUDA_R_32F, lda}, {(const float *)B + i * strideB, CUDA_R_32F, ldb},
                  *(const float *)beta, c, ldc, c, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}
