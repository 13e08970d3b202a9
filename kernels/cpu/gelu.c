/* GELU, exact erf form (PyTorch's default approximate='none'):
 *   gelu(x)  = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *   gelu'(x) = Phi(x) + x exp(-x^2/2) / sqrt(2 pi)
 * with Phi and the exponential from vnormal.h, which vectorize. */
#include "cpu_common.h"
#include "ops.h"
#include "vexp.h"
#include "vnormal.h"

#define INV_SQRT_2PI 0.39894228040143267794

void op_gelu_fwd(real *out, const real *inp, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        const real x = inp[i];
        out[i] = x * sg_vnormal_cdf(x, sg_vnormal_exp(x));
    }
}

void op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        const real x = inp[i], e = sg_vnormal_exp(x);
        dinp[i] = dout[i] * (sg_vnormal_cdf(x, e) + x * ((real)INV_SQRT_2PI * e));
    }
}

/* The tanh form (ops.h), through s = (1 + tanh u) / 2 = 1 / (1 + exp(-2u))
 * rather than tanh itself: with e = exp(-2|u|) (vexp.h's vectorizable exp,
 * whose argument is <= 0 here), s = 1 / (1 + e) for u >= 0 and e / (1 + e)
 * below, each without cancellation, and sech^2 u = 4 e / (1 + e)^2.  Past
 * |u| = 44, e is taken as 0 (it is below 1e-38 there): s is then exactly 1
 * or 0 and the slope's second term exactly 0, where for a huge x (x^3
 * overflowing to inf) 0 * inf would otherwise make NaN. */
#define SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_TANH_C 0.044715

static inline real gelu_tanh_s(real x, real *sech2) {
    const real u = (real)SQRT_2_OVER_PI * (x + (real)GELU_TANH_C * x * x * x);
    const real au = u < 0 ? -u : u, e = au < 44 ? AVEXP(-2 * au) : 0, r = 1 / (1 + e);
    *sech2 = 4 * e * r * r;
    return u < 0 ? e * r : r;
}

void op_gelu_tanh_fwd(real *out, const real *inp, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        real s2;
        out[i] = inp[i] * gelu_tanh_s(inp[i], &s2);
    }
}

void op_gelu_tanh_bwd(real *dinp, const real *inp, const real *dout, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        const real x = inp[i];
        real s2;
        const real s = gelu_tanh_s(x, &s2);
        const real du = (real)SQRT_2_OVER_PI * (1 + 3 * (real)GELU_TANH_C * x * x);
        dinp[i] = dout[i] * (s + (s2 > 0 ? (real)0.5 * x * s2 * du : 0));
    }
}

void op_add(real *out, const real *a, const real *b, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}
