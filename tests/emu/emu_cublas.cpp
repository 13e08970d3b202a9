/* The emulated cublasGemmStridedBatchedEx (see cublas_v2.h): fp32 in and
 * out, summed in double, column-major as cuBLAS.  Arguments cuBLAS rejects
 * are rejected with its status, so that CUBLAS_CHECK fails as it would. */
#include "cublas_v2.h"

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A,
                                          cudaDataType Atype, int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB, const void *beta,
                                          void *C, cudaDataType Ctype, int ldc, long long strideC,
                                          int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F || computeType != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
    if ((transa != CUBLAS_OP_N && !ta) || (transb != CUBLAS_OP_N && !tb)) return CUBLAS_STATUS_INVALID_VALUE;
    const int arows = ta ? k : m, brows = tb ? n : k; /* rows of A and B as stored */
    if (m < 0 || n < 0 || k < 0 || batchCount < 0 || lda < (arows > 1 ? arows : 1) ||
        ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    for (int bi = 0; bi < batchCount; bi++) {
        const float *a = (const float *)A + bi * strideA, *b = (const float *)B + bi * strideB;
        float *c = (float *)C + bi * strideC;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    const float x = ta ? a[(long)i * lda + l] : a[(long)l * lda + i];
                    const float y = tb ? b[(long)l * ldb + j] : b[(long)j * ldb + l];
                    s += (double)x * y;
                }
                float *cij = c + (long)j * ldc + i;
                /* beta == 0: C is not read (it may hold NaN), as in cuBLAS */
                *cij = be == 0.f ? (float)(al * s) : (float)(al * s + (double)be * *cij);
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
