/* Stand-in for cublas_v2.h in the emulated build: the types and the two
 * calls the CUDA ops make, cublasGemmStridedBatchedEx (the explicit
 * attention of the analyses, kernels/cuda/attention_probs.cu: fp32 only)
 * and cublasGemmEx (the classifier, kernels/cuda/classifier.cu: fp32 or
 * bf16 operands, fp32 output), both with CUBLAS_COMPUTE_32F.
 *
 * The GEMMs (emu_cublas.cpp, emu_gemm.h) are a plain column-major loop
 * summed in double: they check how an op maps its row-major tensors onto
 * cuBLAS's arguments (transposes, leading dimensions, batch strides,
 * alpha and beta, operand types) and reject arguments cuBLAS would reject
 * with its status, but say nothing about cuBLAS's own kernels, their speed
 * or their rounding. */
#ifndef SG_EMU_CUBLAS_V2_H
#define SG_EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

typedef struct emu_cublas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef cudaDataType cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

/* C = alpha op(A) op(B) + beta C; column-major; alpha, beta: host floats */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
/* C_i = alpha op(A_i) op(B_i) + beta C_i, i < batch; column-major; A_i = A + i * strideA */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

#endif
