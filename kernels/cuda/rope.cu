/* Rotary position embedding on the device (ops.h, op_rope; config
 * rotary_dims, GPT-NeoX's "rotate half" form); the CPU reference is
 * kernels/cpu/rope.c.  In place on q and k: with h = rd / 2, each pair
 * (x_i, x_{i+h}), i < h, of a head's first rd dims at position t turns by
 * the angle a = theta_{t,i} read from cs row t ([cos, sin] of the h angles):
 *   x_i' = x_i cos a - x_{i+h} sin a,   x_{i+h}' = x_{i+h} cos a + x_i sin a
 * inverse turns by -a (sin negated, exactly): a rotation's transpose is its
 * inverse, so the backward dx = R^T dy is the same kernel.
 *
 * One thread per (row, q or k, head, pair i): each element is read and
 * written by exactly one thread, so there is nothing to sum, no atomics, and
 * the result does not depend on the schedule.  The pair's two outputs need
 * both inputs, which is why a thread owns a pair, not an element.  Within a
 * row, i runs fastest, so a warp's loads are runs of h consecutive floats.
 * Rows go on gridDim.y (a grid-stride loop past its 65,535 limit).
 *
 * The bits are the CPU's: each product and each sum is rounded on its own
 * (the CPU build compiles C11 without contraction), where nvcc would fuse
 * x c - y s into an fma; sg_rn_* (cuda_common.h) are never fused.
 *
 * q and k are fp32.  The model rotates only qkv and dqkv tensors it has not
 * promised (ops.h: op_attention_operand, op_matmul_only; src/model.c,
 * qkv_rewritten): a q or k tensor stored in bf16 stops the op with a
 * message rather than be read as floats.  The check is sg_bf16_stored's
 * exact match on the whole tensor, as bias.cu's: q (or k) with the B T ld
 * elements of its rows, which is qkv itself when q is its start and k
 * lies inside it.  sg_bf16_inside's element lookup would also take a tensor
 * laid out just past a compact one's reals (dqkv after dln) for a part of
 * it. */
#include <stdint.h>

#include "cuda_common.h"

enum { MAX_THREADS = 256 };
static const long MAX_GRID_Y = 65535; /* gridDim.y's limit */

/* x c - y s and x c + y s, each product and the sum rounded on its own */
__device__ __forceinline__ float rope_sub(float x, float c, float y, float s) {
    return sg_rn_sub(sg_rn_mul(x, c), sg_rn_mul(y, s));
}
__device__ __forceinline__ float rope_add(float x, float c, float y, float s) {
    return sg_rn_add(sg_rn_mul(x, c), sg_rn_mul(y, s));
}

/* Thread x of the row's units = 2 H h: pair i = x % h of head (x / h) % H
 * of q (x < H h) or k; rows y, y + gridDim.y, ... of the B T. */
__global__ void rope_k(float *q, float *k, int ld, const float *__restrict__ cs, long rows, int T, int H, int d,
                       int h, int inverse) {
    const int units = 2 * H * h, x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= units) return;
    const int i = x % h, j = (x / h) % H;
    float *base = (x < H * h ? q : k) + (long)j * d + i;
    for (long r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *c = cs + (r % T) * 2 * h;
        const float cn = c[i], sn = inverse ? -c[h + i] : c[h + i];
        float *p = base + r * ld;
        const float a = p[0], b = p[h];
        p[0] = rope_sub(a, cn, b, sn);
        p[h] = rope_add(b, cn, a, sn);
    }
}

static void need_fp32(const char *what, const float *p, long n) {
    if (!sg_bf16_stored(p, n)) return;
    char why[200];
    snprintf(why, sizeof why, "%s is stored in bf16 (a promised tensor); the rotary embedding rotates fp32 tensors only",
             what);
    sg_cuda_fail(__FILE__, __LINE__, "op_rope", why);
}

extern "C" void op_rope(real *q, real *k, int ld, const real *cs, int B, int T, int H, int d, int rd, int inverse) {
    const int h = rd / 2;
    const long rows = (long)B * T;
    if (rows <= 0 || H <= 0 || h <= 0) return;
    need_fp32("q", q, rows * ld);
    need_fp32("k", k, rows * ld);
    const int units = 2 * H * h;
    const int threads = units < MAX_THREADS ? (units + 31) / 32 * 32 : MAX_THREADS;
    const dim3 grid(sg_blocks(units, threads), (unsigned)(rows < MAX_GRID_Y ? rows : MAX_GRID_Y));
    rope_k<<<grid, threads, 0, sg_stream()>>>(q, k, ld, cs, rows, T, H, d, h, inverse);
    CUDA_LAUNCHED();
}
