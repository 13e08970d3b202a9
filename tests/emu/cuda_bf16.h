/* Stand-in for cuda_bf16.h in the emulated build: __nv_bfloat16 and the
 * conversions the CUDA ops use (__float2bfloat16 rounds to nearest even,
 * as __float2bfloat16_rn).
 *
 * Default: a real 16-bit bfloat16, rounded to nearest even (NaN stays NaN),
 * as __float2bfloat16_rn on the device; the kernels' tiles then hold exactly
 * the values the tensor cores would read.  With EMU_BF16_EXACT the type keeps
 * the whole fp32 value (and is 4 bytes): no rounding anywhere, so the
 * kernels' algorithm can be compared with the fp32 CPU op at fp32
 * tolerances. */
#ifndef SG_EMU_CUDA_BF16_H
#define SG_EMU_CUDA_BF16_H

#include "emu_threads.h"

#ifdef EMU_BF16_EXACT
struct __nv_bfloat16 {
    float f;
};
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return {x}; }
inline float __bfloat162float(__nv_bfloat16 b) { return b.f; }
#else
struct __nv_bfloat16 {
    uint16_t u;
};
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((b >> 16) | 0x40u)}; /* quiet NaN */
    b += 0x7fffu + ((b >> 16) & 1u);
    return {(uint16_t)(b >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t b = (uint32_t)h.u << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
#endif
inline __nv_bfloat16 __float2bfloat16(float x) { return __float2bfloat16_rn(x); }
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}

#endif
