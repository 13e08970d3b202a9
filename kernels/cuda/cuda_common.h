/* Shared by the CUDA ops (kernels/cuda/): error checks, the stream and
 * cuBLASLt handle every op uses, and the launch helpers.
 *
 * All ops run on one stream (sg_stream()) in issue order, so an op may use
 * the previous op's output without synchronising; the host waits only where
 * it reads a result (op_download, a returned loss).  Device buffers hold
 * fp32 (`real` is float in the CUDA build); matrix multiplies read bf16
 * copies made on the fly and accumulate in fp32 (the paper's autocast). */
#ifndef SG_CUDA_COMMON_H
#define SG_CUDA_COMMON_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops.h"

#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) sg_cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)
#define CUBLAS_CHECK(call)                                                                      \
    do {                                                                                        \
        cublasStatus_t s_ = (call);                                                             \
        if (s_ != CUBLAS_STATUS_SUCCESS) sg_cuda_fail(__FILE__, __LINE__, #call, "cuBLAS error"); \
    } while (0)
/* after a kernel launch: configuration errors surface here, not later */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

#ifdef __cplusplus
extern "C" {
#endif
/* Prints where and why, then exits 1: a failed CUDA call leaves the device
 * state unknown, and training must not go on with it. */
void sg_cuda_fail(const char *file, int line, const char *call, const char *why) __attribute__((noreturn));
cudaStream_t sg_stream(void);
cublasLtHandle_t sg_cublaslt(void);
cublasHandle_t sg_cublas(void); /* bound to sg_stream() */
/* A scratch buffer of at least `bytes` on the device, reused across calls
 * (grown when needed); valid until the next sg_scratch call with the same slot. */
void *sg_scratch(int slot, size_t bytes);
/* The matmuls forget the bf16 copies they keep for the backward (matmul.cu):
 * called when any op buffer is freed. */
void sg_matmul_forget(void);
#ifdef __cplusplus
}
#endif

enum { SCRATCH_BF16_A, SCRATCH_BF16_B, SCRATCH_LT_WORKSPACE, SCRATCH_REDUCE, SCRATCH_CLASSIFIER, SCRATCH_MISC, SCRATCH_SLOTS };

static inline unsigned sg_blocks(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

#endif
