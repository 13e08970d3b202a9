/* SG_ATTN, the attention's tile kernels: read by the attention ops
 * (attention_fwd.cu, which stops the program on a bad value as it loads) and
 * by the matmuls (matmul.cu), which store the qkv projection in bf16 only
 * for the mma tiles and cuDNN (ops.h, op_attention_operand). */
#ifndef SG_ATTENTION_TILES_ENV_H
#define SG_ATTENTION_TILES_ENV_H

#include <stdlib.h>
#include <string.h>

/* 0: wmma, 1: mma (the default), 2: cudnn (cuDNN's fused attention, over
 * the mma path's bf16 operands), -1: none of these (a bad value).
 * The default is mma since an H200 measured it (2026-12-04, docs/cuda.md):
 * attention 93 TFLOP/s against wmma's 55, and a 124M step 31% faster.
 * cudnn was faster still (128 TFLOP/s, 7% a baseline step, 4% combo2's) but
 * needs cuDNN 9.13 or later on the loader's path and costs combo2 more
 * against the baseline (6% against mma's 3%), so it stays a choice. */
static inline int sg_attn_tiles_env(void) {
    const char *e = getenv("SG_ATTN");
    if (!e || !*e || !strcmp(e, "mma")) return 1;
    if (!strcmp(e, "wmma")) return 0;
    return !strcmp(e, "cudnn") ? 2 : -1;
}
#define ATTN_TILES_ERROR "SG_ATTN must be \"mma\" (the default), \"wmma\" or \"cudnn\""

#endif
