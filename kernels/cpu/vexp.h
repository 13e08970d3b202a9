/* A vectorizable exp for the CPU kernels' softmax loops, and FMA spelled
 * out.  Private to kernels/cpu. */
#ifndef SG_VEXP_H
#define SG_VEXP_H

#include <math.h>
#include <stdint.h>

#include "real.h"

/* Fused multiply-add.  -std=c11 turns off gcc's contraction of a*b+c, and
 * the tile products are FMA-bound, so it is spelled out where the hardware
 * has one (fmaf/fma then compile to the vector instruction). */
#if defined(__FMA__) || defined(__aarch64__)
#ifdef SG_DOUBLE
#define AFMA(a, b, c) fma(a, b, c)
#else
#define AFMA(a, b, c) fmaf(a, b, c)
#endif
#else
#define AFMA(a, b, c) ((a) * (b) + (c))
#endif

/* exp for softmax loops (attention, the classifier), written so that gcc vectorizes it (a call to
 * libm's expf keeps the loop scalar, and at d = 64 the exponentials would
 * then cost as much as the tile products).  Arguments are <= 0 here (logits
 * minus a running max or minus the LSE, or -inf for a masked column).
 * Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the degree-7 Taylor
 * polynomial of e^r (truncation < 5e-9 relative) and 2^k built in the
 * exponent bits: within 0.93 ulp of the exact value over [-87.3, 0.5]
 * (checked on every 8th float; libm's expf: 0.5 ulp).  Below -87.33 (where
 * 2^k would leave the normal range) it returns 0, which makes exp(-inf) = 0
 * for masked columns; NaN stays NaN.  The double build (gradient checks)
 * uses libm's exp. */
#ifdef SG_DOUBLE
#define AVEXP exp
#else
static inline float sg_vexpf(float x) {
    const float lo = -87.33654f, hi = 88.0f, shifter = 12582912.0f; /* 1.5 * 2^23 */
    float xc = x < hi ? x : hi; /* a NaN becomes hi: converting it to int32_t would be undefined */
    xc = xc < lo ? lo : xc;
    /* k = round(x / ln2): adding 1.5*2^23 rounds to an integer in float */
    const float kf = AFMA(xc, 1.44269504088896341f, shifter) - shifter;
    float r = AFMA(kf, -0.693145751953125f, xc); /* ln2 high part: k*hi is exact */
    r = AFMA(kf, -1.42860682030941723e-6f, r);   /* ln2 low part */
    float p = 1.0f / 5040;
    p = AFMA(p, r, 1.0f / 720);
    p = AFMA(p, r, 1.0f / 120);
    p = AFMA(p, r, 1.0f / 24);
    p = AFMA(p, r, 1.0f / 6);
    p = AFMA(p, r, 0.5f);
    p = AFMA(p, r, 1.0f);
    p = AFMA(p, r, 1.0f);
    union {
        int32_t i;
        float f;
    } two_k = {.i = ((int32_t)kf + 127) << 23};
    return x < lo ? 0.0f : x == x ? p * two_k.f : x;
}
#define AVEXP sg_vexpf
#endif

#endif
