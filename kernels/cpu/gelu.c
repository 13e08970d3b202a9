/* GELU, exact erf form (PyTorch's default approximate='none'):
 *   gelu(x)  = 0.5 x (1 + erf(x / sqrt 2))
 *   gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2/2) / sqrt(2 pi) */
#include "cpu_common.h"
#include "ops.h"

#define INV_SQRT2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794

void op_gelu_fwd(real *out, const real *inp, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        real x = inp[i];
        out[i] = (real)0.5 * x * ((real)1 + RERF(x * (real)INV_SQRT2));
    }
}

void op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        real x = inp[i];
        real cdf = (real)0.5 * ((real)1 + RERF(x * (real)INV_SQRT2));
        real pdf = (real)INV_SQRT_2PI * REXP((real)-0.5 * x * x);
        dinp[i] = dout[i] * (cdf + x * pdf);
    }
}

void op_add(real *out, const real *a, const real *b, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}
