/* GELU, exact erf form (PyTorch's default approximate='none'):
 *   gelu(x)  = x Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *   gelu'(x) = Phi(x) + x exp(-x^2/2) / sqrt(2 pi)
 * with Phi and the exponential from vnormal.h, which vectorize. */
#include "cpu_common.h"
#include "ops.h"
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

void op_add(real *out, const real *a, const real *b, long n) {
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}
