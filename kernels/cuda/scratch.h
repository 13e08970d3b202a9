/* The CUDA ops' reusable device scratch (runtime.cu), in its own header so
 * that host-only C++ (cudnn_sdpa.cpp) can take a slot without the device
 * code of cuda_common.h. */
#ifndef SG_SCRATCH_H
#define SG_SCRATCH_H

#include <stddef.h>

/* SCRATCH_TUNE_*: the outputs SG_MATMUL_TUNE's candidates write (gemm.cu) */
enum {
    SCRATCH_BF16_A,
    SCRATCH_BF16_B,
    SCRATCH_LT_WORKSPACE,
    SCRATCH_REDUCE,
    SCRATCH_CLASSIFIER,
    SCRATCH_MISC,
    SCRATCH_TUNE_REF,
    SCRATCH_TUNE_OUT,
    SCRATCH_CUDNN,     /* cuDNN's attention workspace (cudnn_sdpa.cpp) */
    SCRATCH_ATTN_BF16, /* the bf16 outputs and O around it (attention_cudnn.cu) */
    SCRATCH_SLOTS
};

#ifdef __cplusplus
extern "C" {
#endif
/* A scratch buffer of at least `bytes` on the device, reused across calls
 * (grown when needed); valid until the next sg_scratch call with the same slot. */
void *sg_scratch(int slot, size_t bytes);
/* sg_scratch, and zeroed whenever it is (re)allocated: for a buffer that a
 * library writes in ways compute-sanitizer's initcheck cannot see
 * (classifier.cu) */
void *sg_scratch_zeroed(int slot, size_t bytes);
#ifdef __cplusplus
}
#endif

#endif
