/* Causal attention forward, streaming, for every arm.
 *
 * Per head h (c_h = the phantom's logit: sink[h], or 0 when sink is NULL):
 *   s_ij  = q_i . k_j / sqrt(d) + lb_j                 j <= i
 *   LSE_i = log(exp(c_h) [phantom] + sum_j exp(s_ij))
 *   o_i   = sum_j exp(s_ij - LSE_i) v_j                (the phantom's value is 0)
 *
 * Online softmax (Milakov & Gimelshein 2018; FlashAttention): each query
 * keeps a running max m, a running sum l = sum exp(s - m) and an unnormalised
 * output acc = sum exp(s - m) v, and visits the keys one tile at a time.
 * When a tile raises the max to m', the old l and acc are rescaled by
 * exp(m - m').  The phantom is simply the first "key" every query has seen:
 * m starts at c_h and l at exp(c_h - m) = 1, and because its value is zero it
 * adds nothing to acc.  Starting from the phantom rather than from -inf keeps
 * every exponent <= 0 even for a large learned c_h, and makes the phantom's
 * share exact: it is never a separate column that could be masked or padded.
 *
 * Work is split over (b,h) pairs; each thread owns whole slices, so there is
 * nothing to combine and the result does not depend on the thread count. */
#include <omp.h>

#include "attention_tile.h"
#include "ops.h"

/* One block of nq <= ATT_BQ queries [i0, i0+nq) of one (b,h) slice. */
static void fwd_block(real *o, long os, real *lse, const real *q, long qs, const real *kt,
                      const real *v, long vs, const real *lb, real c, int i0, int nq,
                      int T, int d, real *s, real *acc) {
    real m[ATT_BQ], l[ATT_BQ];
    for (int r = 0; r < nq; r++) {
        m[r] = c;                          /* -inf without a phantom */
        l[r] = isinf(c) && c < 0 ? 0 : 1;  /* exp(c - m) */
    }
    memset(acc, 0, sizeof(real) * (size_t)nq * d);

    const int jend = i0 + nq; /* keys [0, jend) are visible to some query */
    for (int j0 = 0; j0 < jend; j0 += ATT_BK) {
        const int nk = jend - j0 < ATT_BK ? jend - j0 : ATT_BK;
        /* S = Q_blk (K_tile / sqrt(d))^T, the key tile pre-transposed. */
        att_gemm_n(s, ATT_BK, nq, ATT_BK, q + (long)i0 * qs, qs, 1,
                   kt + (long)(j0 / ATT_BK) * d * ATT_BK, ATT_BK, d, 0);
        real lbt[ATT_BK]; /* this tile's log-bias, 0 past the end of the sequence */
        for (int j = 0; j < ATT_BK; j++) lbt[j] = lb && j < nk ? lb[j0 + j] : 0;
        for (int r = 0; r < nq; r++) {
            real *sr = s + (long)r * ATT_BK;
            const int ncol = i0 + r - j0 + 1; /* causal: row r sees tile columns < ncol */
            if (ncol <= 0) { /* none of this tile */
                memset(sr, 0, sizeof(real) * ATT_BK);
                continue;
            }
            /* Full-width loops with masked columns set to -inf (exp -> 0):
             * no remainder loops, and they vectorize. */
            real mx = m[r];
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < ATT_BK; j++) {
                const real x = j < ncol ? sr[j] + lbt[j] : -INFINITY;
                sr[j] = x;
                mx = x > mx ? x : mx;
            }
            const real alpha = AEXP(m[r] - mx); /* 0 on the first tile without phantom */
            real sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < ATT_BK; j++) {
                const real pj = AVEXP(sr[j] - mx);
                sr[j] = pj;
                sum += pj;
            }
            l[r] = l[r] * alpha + sum;
            m[r] = mx;
            if (alpha != 1) {
                real *ar = acc + (long)r * d;
#pragma omp simd
                for (int k = 0; k < d; k++) ar[k] *= alpha;
            }
        }
        /* acc += P V_tile */
        att_gemm_n(acc, d, nq, d, s, ATT_BK, 1, v + (long)j0 * vs, vs, nk, 1);
    }
    for (int r = 0; r < nq; r++) {
        const real inv = 1 / l[r];
        real *orow = o + (long)(i0 + r) * os;
        const real *ar = acc + (long)r * d;
#pragma omp simd
        for (int k = 0; k < d; k++) orow[k] = ar[k] * inv;
        lse[i0 + r] = m[r] + ALOG(l[r]);
    }
    (void)T;
}

void op_attention_fwd(real *out, real *lse, const real *q, const real *k, const real *v,
                      const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const int ntiles = (T + ATT_BK - 1) / ATT_BK;
    const real scale = 1 / ASQRT((real)d);
#pragma omp parallel if (att_worth_threads(B, H, T, d))
    {
        /* K^T of the whole slice, stored tile by tile ([tile][d][ATT_BK]) so
         * each tile is one contiguous 16 KiB block (a row stride of T floats
         * would map a tile's rows onto a few L1 sets).  It is O(T d), the size
         * of the slice itself; the 1/sqrt(d) scale is folded in here. */
        real *kt = att_alloc(sizeof(real) * (size_t)ntiles * d * ATT_BK);
        real *s = att_alloc(sizeof(real) * ATT_BQ * ATT_BK);
        real *acc = att_alloc(sizeof(real) * ATT_BQ * (size_t)d);
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const long row0 = (long)b * T;
            const real *qh = q + row0 * a->q_stride + (long)h * d;
            const real *kh = k + row0 * a->k_stride + (long)h * d;
            const real *vh = v + row0 * a->v_stride + (long)h * d;
            real *oh = out + row0 * a->o_stride + (long)h * d;
            real *lseh = lse + (long)bh * T;
            const real *lb = a->logbias ? a->logbias + (long)bh * T : NULL;
            const real c = att_phantom_logit(a->phantom, a->sink, h);

            for (int t = 0; t < ntiles; t++) {
                const int j0 = t * ATT_BK;
                const int nk = T - j0 < ATT_BK ? T - j0 : ATT_BK;
                real *dst = kt + (long)t * d * ATT_BK;
                att_transpose_tile(dst, ATT_BK, kh + (long)j0 * a->k_stride, a->k_stride, nk, d);
                for (long e = 0; e < (long)d * ATT_BK; e++) dst[e] *= scale;
            }
            for (int i0 = 0; i0 < T; i0 += ATT_BQ) {
                const int nq = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
                fwd_block(oh, a->o_stride, lseh, qh, a->q_stride, kt, vh, a->v_stride, lb, c,
                          i0, nq, T, d, s, acc);
            }
        }
        free(kt);
        free(s);
        free(acc);
    }
}
