/* Decode attention (ops.h): one query per (b,h) against every key of its
 * sequence.  With c the phantom's logit (-inf without one):
 *   s_j = q . k_j / sqrt(d) + lb_j,  M = max(c, max_j s_j)
 *   LSE = M + log(exp(c - M) + sum_j exp(s_j - M)),  o = sum_j exp(s_j - LSE) v_j
 * Backward, with p_j = exp(s_j - LSE) and D = dO . O (the phantom's value is
 * zero, so it adds nothing to O and its column of dS is p_c (0 - D)):
 *   dS_j = p_j (dO . v_j - D),  dq = sum_j dS_j k_j / sqrt(d),
 *   dk_j = dS_j q / sqrt(d),  dv_j = p_j dO,  dlb_j = dS_j,
 *   dc   = -sum_b exp(c - LSE_b) D_b.
 * A (b,h) slice is one thread's work; dc goes through per-slice partials
 * added in slice order, so results do not depend on the thread count. */
#include <stdlib.h>

#include "attention_tile.h"
#include "ops.h"
#include "vexp.h"

/* Enough work for threads to pay off (the toy task calls this from inside
 * a parallel loop over runs, where it stays single-threaded anyway). */
static int decode_threads(const AttnArgs *a) { return (double)a->B * a->H * a->T * a->d > 1e5; }

void op_attention_decode_fwd(real *out, real *lse, const real *q, const real *k, const real *v,
                             const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const real scale = 1 / ASQRT((real)d);
#pragma omp parallel if (decode_threads(a))
    {
        real *s = att_alloc(sizeof(real) * (size_t)(T > 0 ? T : 1), 0);
        real *acc = att_alloc(sizeof(real) * (size_t)d, 0);
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const real *qr = q + (long)b * a->q_stride + (long)h * d;
            const real *lb = a->logbias ? a->logbias + (long)bh * T : NULL;
            const real c = att_phantom_logit(a->phantom, a->sink, h);
            real m = c;
            for (int j = 0; j < T; j++) {
                const real *kr = k + ((long)b * T + j) * a->k_stride + (long)h * d;
                real x = 0;
#pragma omp simd reduction(+ : x)
                for (int e = 0; e < d; e++) x += qr[e] * kr[e];
                s[j] = x * scale + (lb ? lb[j] : 0);
                m = s[j] > m ? s[j] : m;
            }
            double l = a->phantom ? AEXP(c - m) : 0;
            memset(acc, 0, sizeof(real) * (size_t)d);
            for (int j = 0; j < T; j++) {
                const real p = AEXP(s[j] - m);
                const real *vr = v + ((long)b * T + j) * a->v_stride + (long)h * d;
                l += p;
#pragma omp simd
                for (int e = 0; e < d; e++) acc[e] = AFMA(p, vr[e], acc[e]);
            }
            real *o = out + (long)b * a->o_stride + (long)h * d;
            const real inv = l > 0 ? (real)(1 / l) : 0;
#pragma omp simd
            for (int e = 0; e < d; e++) o[e] = acc[e] * inv;
            lse[bh] = l > 0 ? m + (real)log(l) : -INFINITY;
        }
        free(s);
        free(acc);
    }
}

void op_attention_decode_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias, const real *dout,
                             const real *q, const real *k, const real *v, const real *out, const real *lse,
                             const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const real scale = 1 / ASQRT((real)d);
    double *dc = dsink ? calloc((size_t)B * H, sizeof(double)) : NULL;
    if (dsink && !dc) abort();
#pragma omp parallel if (decode_threads(a))
    {
        real *gq = att_alloc(sizeof(real) * (size_t)d, 0);
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const real *qr = q + (long)b * a->q_stride + (long)h * d;
            const real *g = dout + (long)b * a->o_stride + (long)h * d, *o = out + (long)b * a->o_stride + (long)h * d;
            const real *lb = a->logbias ? a->logbias + (long)bh * T : NULL;
            double D = 0;
            for (int e = 0; e < d; e++) D += (double)g[e] * o[e];
            const real Dr = (real)D;
            memset(gq, 0, sizeof(real) * (size_t)d);
            for (int j = 0; j < T; j++) {
                const long r = ((long)b * T + j);
                const real *kr = k + r * a->k_stride + (long)h * d, *vr = v + r * a->v_stride + (long)h * d;
                real x = 0, dp = 0;
#pragma omp simd reduction(+ : x, dp)
                for (int e = 0; e < d; e++) x += qr[e] * kr[e], dp += g[e] * vr[e];
                const real p = AEXP(x * scale + (lb ? lb[j] : 0) - lse[bh]);
                const real ds = p * (dp - Dr), dss = ds * scale;
                real *dkr = dk + r * a->k_stride + (long)h * d, *dvr = dv + r * a->v_stride + (long)h * d;
#pragma omp simd
                for (int e = 0; e < d; e++) {
                    gq[e] = AFMA(ds, kr[e], gq[e]);
                    dkr[e] = dss * qr[e];
                    dvr[e] = p * g[e];
                }
                if (dlogbias) dlogbias[(long)bh * T + j] = ds;
            }
            real *dqr = dq + (long)b * H * d + (long)h * d;
#pragma omp simd
            for (int e = 0; e < d; e++) dqr[e] = gq[e] * scale;
            if (dc) dc[bh] = -(double)AEXP(att_phantom_logit(a->phantom, a->sink, h) - lse[bh]) * D;
        }
        free(gq);
    }
    if (dsink) {
        for (int h = 0; h < H; h++) {
            double sum = 0;
            for (int b = 0; b < B; b++) sum += dc[b * H + h];
            dsink[h] += (real)sum;
        }
        free(dc);
    }
}
