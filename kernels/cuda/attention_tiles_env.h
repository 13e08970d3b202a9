/* SG_ATTN, the attention's tile kernels: read by the attention ops
 * (attention_fwd.cu, which stops the program on a bad value as it loads) and
 * by the matmuls (matmul.cu), which store the qkv projection in bf16 only
 * for the mma tiles and cuDNN (ops.h, op_attention_operand). */
#ifndef SG_ATTENTION_TILES_ENV_H
#define SG_ATTENTION_TILES_ENV_H

#include <stdlib.h>
#include <string.h>

/* 0: wmma (the default), 1: mma, 2: cudnn (cuDNN's fused attention, over
 * the mma path's bf16 operands), -1: none of these (a bad value) */
static inline int sg_attn_tiles_env(void) {
    const char *e = getenv("SG_ATTN");
    if (!e || !*e || !strcmp(e, "wmma")) return 0;
    if (!strcmp(e, "mma")) return 1;
    return !strcmp(e, "cudnn") ? 2 : -1;
}
#define ATTN_TILES_ERROR "SG_ATTN must be \"wmma\" (the default), \"mma\" or \"cudnn\""

#endif
