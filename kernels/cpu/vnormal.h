/* The standard normal's CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 and
 * exp(-x^2 / 2), written so that gcc vectorizes them: GELU's loops.  libm's
 * erff keeps a loop scalar (about 10 ns an element here, 15x these), and
 * 0.5 (1 + erff(u)) loses most of its digits for negative x by cancellation
 * (138 ulp at worst for |x| < 3).  Private to kernels/cpu.
 *
 * With u = x / sqrt 2, a = |u|:
 *   a < 1 (a < 1/2 for x < 0):  Phi = 1/2 + u P(2 u^2 - 1) / 2,
 *       P a degree-7 fit of erf(u) / u;
 *   otherwise:  erfc(a) = exp(-u^2) v H(v),  v = 1 / (1 + a / 2),
 *       H a degree-10 fit on a in [0.5, 9.5] (exp(-u^2) is 0 in float
 *       beyond), and Phi = erfc(a) / 2 for x < 0, 1 - erfc(a) / 2 else.
 * The tail is computed as erfc itself, never as 1 + erf, so Phi keeps its
 * relative accuracy for negative x.  exp(-x^2 / 2) takes x^2 as the exact
 * sum hi + lo (an FMA gives lo) and applies lo as the factor 1 - lo / 2:
 * rounding x^2 alone would cost x^2 / 2 ulp (40 ulp at x = 9).
 * Measured against libm in double on every 97th float with a normal
 * result (tests/test_vmath.c): Phi within 1.1 ulp for x >= 0 and 6.6 ulp
 * for x < 0 (98.8% of those within 1 ulp), exp(-x^2/2) within 2.1 ulp.  The double build (gradient checks) uses
 * libm's erfc and exp.  Coefficients: tools/fit_normal_cdf.py. */
#ifndef SG_VNORMAL_H
#define SG_VNORMAL_H

#include <math.h>

#include "real.h"
#include "vexp.h"

#ifdef SG_DOUBLE
static inline double sg_vnormal_exp(double x) { return exp(-0.5 * x * x); }
static inline double sg_vnormal_cdf(double x, double e) {
    (void)e;
    return 0.5 * erfc(-x * 0.70710678118654752440);
}
#else
/* tools/fit_normal_cdf.py: fit errors (float coefficients, exact
 * arithmetic) 2.7e-08 and 8.4e-10 relative */
#define VN_V_LO 0.17391304671764374f
#define VN_V_INV 1.5972222089767456f
static const float VN_P[8] = {0.9654687643051147f, -0.1405360996723175f, 0.019852040335536003f, -0.0022853752598166466f, 0.00021873101650271565f, -1.7788002878660336e-05f, 4.1880164758367755e-07f, 7.956843006695635e-08f};
static const float VN_H[11] = {0.339621901512146f, 0.2414349913597107f, 0.1383046805858612f, 0.05540618672966957f, 0.006812114268541336f, -0.008272478356957436f, -0.0065699378028512f, 0.0007062832009978592f, 0.00401133531704545f, -0.0022100326605141163f, 0.0003678942157421261f};

/* c[0] + c[1] x + ... + c[n-1] x^(n-1); unrolled, so that the loops calling
 * it stay vectorizable */
static inline __attribute__((always_inline)) float vn_horner(const float *c, int n, float x) {
    float r = c[n - 1];
#pragma GCC unroll 16
    for (int k = n - 2; k >= 0; k--) r = AFMA(r, x, c[k]);
    return r;
}

/* exp(-x^2 / 2) */
static inline float sg_vnormal_exp(float x) {
    x = fabsf(x) > 16.0f ? 16.0f : x; /* 0 in float from 13.2 on; no inf * inf - inf */
    const float x2 = x * x, lo = AFMA(x, x, -x2);
    return sg_vexpf(-0.5f * x2) * AFMA(-0.5f, lo, 1.0f);
}

/* Phi(x), given e = sg_vnormal_exp(x) (GELU's backward needs both) */
static inline float sg_vnormal_cdf(float x, float e) {
    const float u = x * 0.70710678118654752f, a = fabsf(u);
    const float z = AFMA(u * u, 2.0f, -1.0f);
    const float p = vn_horner(VN_P, 8, z);
    const float near0 = AFMA(0.5f * u, p, 0.5f);
    const float v = 1.0f / AFMA(0.5f, a, 1.0f), s = (v - VN_V_LO) * VN_V_INV;
    const float h = vn_horner(VN_H, 11, s);
    const float half_erfc = 0.5f * e * (v * h);
    const float tail = x < 0 ? half_erfc : 1.0f - half_erfc;
    return a < (x < 0 ? 0.5f : 1.0f) ? near0 : tail;
}
#endif

#endif
