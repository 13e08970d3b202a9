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
 * Work is split over (query block, b, h); each unit writes its own rows of
 * o and lse, so there is nothing to combine and the result does not depend
 * on the thread count. */
#include "attention_tile.h"
#include "ops.h"

/* One block of nq <= ATT_BQ queries [i0, i0+nq) of one (b,h) slice. */
static void fwd_block(real *o, long os, real *lse, const real *q, long qs, const real *kt,
                      const real *v, long vs, const real *lb, real c, int i0, int nq, int d,
                      real *s, real *acc) {
    real m[ATT_BQ], l[ATT_BQ];
    for (int r = 0; r < nq; r++) {
        m[r] = c;                         /* -inf without a phantom */
        l[r] = isinf(c) && c < 0 ? 0 : 1; /* exp(c - m) */
    }
    memset(acc, 0, sizeof(real) * (size_t)nq * d);
    att_prefetch_rows(o + (long)i0 * os, os, nq, d, 1); /* written at the end */
    if (i0 >= ATT_BQ) /* the block this thread most likely takes next */
        att_prefetch_rows(q + (long)(i0 - ATT_BQ) * qs, qs, ATT_BQ, d, 0);

    const int jend = i0 + nq; /* keys [0, jend) are visible to some query */
    for (int j0 = 0; j0 < jend; j0 += ATT_BK) {
        const int nk = jend - j0 < ATT_BK ? jend - j0 : ATT_BK;
        /* S = Q_blk (K_tile / sqrt(d))^T, the key tile pre-transposed. */
        att_gemm_n(s, ATT_BK, nq, nk, q + (long)i0 * qs, qs, 1,
                   kt + (long)(j0 / ATT_BK) * d * ATT_BK, ATT_BK, d, 0);
        for (int r = 0; r < nq; r++) {
            real *sr = s + (long)r * ATT_BK;
            const int ncol = i0 + r - j0 + 1; /* causal: row r sees tile columns < ncol */
            if (ncol <= 0) {                  /* none of this tile */
                memset(sr, 0, sizeof(real) * (size_t)nk);
                continue;
            }
            /* Loops over all nk columns with the masked ones set to -inf
             * (exp -> 0): one trip count per tile, so they vectorize. */
            const int nv = ncol < nk ? ncol : nk;
            if (lb)
#pragma omp simd
                for (int j = 0; j < nv; j++) sr[j] += lb[j0 + j];
            real mx = m[r];
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < nk; j++) {
                const real x = j < ncol ? sr[j] : -INFINITY;
                sr[j] = x;
                mx = x > mx ? x : mx;
            }
            const real alpha = AEXP(m[r] - mx); /* 0 on the first tile without phantom */
            real sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < nk; j++) {
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
        if (j0 + ATT_BK < jend) {
            const int nn = jend - j0 - ATT_BK < ATT_BK ? jend - j0 - ATT_BK : ATT_BK;
            att_prefetch_rows(v + (long)(j0 + ATT_BK) * vs, vs, nn, d, 0);
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
}

void op_attention_fwd(real *out, real *lse, const real *q, const real *k, const real *v,
                      const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const int ntiles = (T + ATT_BK - 1) / ATT_BK, nblocks = (T + ATT_BQ - 1) / ATT_BQ;
    const long slice = (long)ntiles * d * ATT_BK;
    const real scale = 1 / ASQRT((real)d);
    /* K^T of every slice, stored tile by tile ([b,h][tile][d][ATT_BK]) so each
     * tile is one contiguous 16 KiB block (a row stride of T floats would map
     * a tile's rows onto a few L1 sets).  It is the size of K itself, built
     * once so that no query block repeats the transposition; the 1/sqrt(d)
     * scale is folded in here. */
    real *kt = att_alloc(sizeof(real) * (size_t)B * H * slice, 0); /* all overwritten */
#pragma omp parallel if (att_worth_threads(B, H, T, d))
    {
#pragma omp for schedule(static)
        for (int u = 0; u < B * H * ntiles; u++) {
            const int bh = u / ntiles, t = u % ntiles, b = bh / H, h = bh % H;
            const int j0 = t * ATT_BK, nk = T - j0 < ATT_BK ? T - j0 : ATT_BK;
            real *dst = kt + bh * slice + (long)t * d * ATT_BK;
            const real *src = k + ((long)b * T + j0) * a->k_stride + (long)h * d;
            if (t + 1 < ntiles) {
                const int nn = T - j0 - ATT_BK < ATT_BK ? T - j0 - ATT_BK : ATT_BK;
                att_prefetch_rows(src + (long)ATT_BK * a->k_stride, a->k_stride, nn, d, 0);
            }
            att_transpose_tile(dst, ATT_BK, src, a->k_stride, nk, d, scale);
        }

        /* Work units are (b, h, query block): the rows of a block are
         * independent, so a thread owns its block's outputs outright.  Units
         * of one slice are consecutive, so threads share the slice's K and V
         * while they are in cache, and within a slice the blocks near the end
         * (which see the most keys) go first, which keeps the dynamic
         * schedule evenly loaded at the end. */
        real *s = att_alloc(sizeof(real) * ATT_BQ * ATT_BK, 1);
        real *acc = att_alloc(sizeof(real) * ATT_BQ * (size_t)d, 1);
#pragma omp for schedule(dynamic, 1)
        for (int u = 0; u < nblocks * B * H; u++) {
            const int bh = u / nblocks, i0 = (nblocks - 1 - u % nblocks) * ATT_BQ;
            const int b = bh / H, h = bh % H, nq = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
            const long row0 = (long)b * T, ho = (long)h * d;
            fwd_block(out + row0 * a->o_stride + ho, a->o_stride, lse + (long)bh * T,
                      q + row0 * a->q_stride + ho, a->q_stride, kt + bh * slice,
                      v + row0 * a->v_stride + ho, a->v_stride,
                      a->logbias ? a->logbias + (long)bh * T : NULL,
                      att_phantom_logit(a->phantom, a->sink, h), i0, nq, d, s, acc);
        }
        free(s);
        free(acc);
    }
    free(kt);
}
