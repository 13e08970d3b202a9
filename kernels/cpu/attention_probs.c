/* Explicit attention for the evaluation-time analyses (ops.h).
 *
 * Per (b,h), with c_h the phantom's logit (-inf without one):
 *   S    = Q K^T / sqrt(d)                 one BLAS GEMM into p (row stride T+1)
 *   s_ij = S_ij + lb_j                     j <= i
 *   M_i  = max(c_h, max_j s_ij)
 *   p_ij = exp(s_ij - M_i) / Z_i,  p_iT = exp(c_h - M_i) / Z_i
 * with Z_i the sum of the T+1 numerators.  This is the same distribution as
 * the streaming op's exp(s_ij - LSE_i); the normaliser is summed in double so
 * a row of 1024 probabilities sums to one to float rounding.
 *
 * The GEMMs run one (b,h) slice after another with the BLAS's own threads;
 * the row softmaxes are independent and split over OpenMP threads. */
#include <math.h>

#include "attention_tile.h"
#include "blas.h"
#include "ops.h"

#ifdef SG_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

void op_attention_probs(real *p, const real *q, const real *k, const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const long ld = T + 1, slice = (long)T * ld;
    const real scale = 1 / ASQRT((real)d);
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        blas_threads_sync(T, T, d);
        GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, d, scale, q + (long)b * T * a->q_stride + (long)h * d,
             a->q_stride, k + (long)b * T * a->k_stride + (long)h * d, a->k_stride, 0, p + bh * slice, (int)ld);
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * H * T; r++) {
        const int bh = (int)(r / T), i = (int)(r % T), h = bh % H;
        real *row = p + bh * slice + (long)i * ld;
        const real *lb = a->logbias ? a->logbias + (long)bh * T : NULL;
        const real c = att_phantom_logit(a->phantom, a->sink, h);
        real mx = c;
        for (int j = 0; j <= i; j++) {
            if (lb) row[j] += lb[j];
            mx = row[j] > mx ? row[j] : mx;
        }
        double z = 0;
        for (int j = 0; j <= i; j++) {
            row[j] = AEXP(row[j] - mx);
            z += row[j];
        }
        const real ph = a->phantom ? AEXP(c - mx) : 0;
        z += ph;
        const real inv = (real)(1 / z);
        for (int j = 0; j <= i; j++) row[j] *= inv;
        for (int j = i + 1; j < T; j++) row[j] = 0;
        row[T] = ph * inv;
    }
}

void op_attention_apply(real *out, const real *p, const real *v, const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const long ld = T + 1, slice = (long)T * ld;
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        blas_threads_sync(T, d, T);
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, T, 1, p + bh * slice, (int)ld,
             v + (long)b * T * a->v_stride + (long)h * d, a->v_stride, 0,
             out + (long)b * T * a->o_stride + (long)h * d, a->o_stride);
    }
}
