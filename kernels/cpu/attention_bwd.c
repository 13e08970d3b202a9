/* Causal attention backward, recomputing the probabilities from the saved
 * LSE (no T x T buffer).  With p_ij = exp(s_ij - LSE_i):
 *   D_i     = dO_i . O_i                (= sum_j p_ij dO_i . v_j, in double)
 *   dp_ij   = dO_i . v_j
 *   dS_ij   = p_ij (dp_ij - D_i)        (softmax backward; see below for the phantom)
 *   dq_i    = sum_j dS_ij k_j / sqrt(d)
 *   dk_j    = sum_i dS_ij q_i / sqrt(d)
 *   dv_j    = sum_i p_ij dO_i
 *   dlb_j   = sum_i dS_ij               (column sum: lb_j enters every s_ij)
 *   dc_h    = -sum_{b,i} exp(c_h - LSE_i) D_i
 * The phantom is a softmax column with logit c_h and value 0, so its dp is 0
 * and its dS is p_i0 (0 - D_i): that is dc_h, and D_i needs no phantom term
 * because the phantom's value contributes nothing to O_i.
 *
 * Loop order (FlashAttention-2): the outer loop walks key tiles, the inner
 * loop the query blocks at or below the diagonal.  dK and dV of the tile are
 * complete when the inner loop ends, so they live in L1-sized accumulators and
 * are written once; dq accumulates across key tiles in the output itself.
 *
 * A thread owns whole (b,h) slices of dq, dk, dv and dlogbias, so nothing is
 * accumulated from two threads and no atomics are needed.  The one sum across
 * slices, dc_h over the batch, goes through per-(b,h) partials in a scratch
 * array added in a fixed order after the parallel loop: the result is bitwise
 * the same for any number of threads. */
#include "attention_tile.h"
#include "ops.h"

typedef struct {
    real *kt, *vt; /* [d][ATT_BK] transposed key (scaled) and value tiles */
    real *s, *dp;  /* [ATT_BQ][ATT_BK]: scores -> P, dP -> dS */
    real *dk, *dv; /* [ATT_BK][d] tile accumulators */
    real *dlb;     /* [ATT_BK] column sums of dS */
    real *D;       /* [T] */
} BwdScratch;

/* One (b,h) slice.  Pointers are already offset to the slice; returns the
 * slice's share of dc_h (0 when there is no phantom). */
static double bwd_slice(real *dq, real *dk, real *dv, real *dlb_out, const real *dout, long os,
                        const real *q, long qs, const real *k, long ks, const real *v, long vs,
                        const real *out, const real *lse, const real *lb, real c, int want_dc,
                        int T, int d, BwdScratch *w) {
    const real scale = 1 / ASQRT((real)d);
    double dc = 0;
    att_prefetch_rows(k, ks, T < ATT_BK ? T : ATT_BK, d, 0); /* first key tile */
    att_prefetch_rows(v, vs, T < ATT_BK ? T : ATT_BK, d, 0);
    for (int t = 0; t < T; t++) {
        const real *g = dout + (long)t * os, *o = out + (long)t * os;
        if (t + 8 < T) { /* the first key tile then finds q, dO, dq in cache */
            att_prefetch_rows(g + 8 * os, os, 1, d, 0);
            att_prefetch_rows(o + 8 * os, os, 1, d, 0);
            att_prefetch_rows(q + (long)(t + 8) * qs, qs, 1, d, 0);
        }
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int e = 0; e < d; e++) acc += (double)g[e] * (double)o[e];
        w->D[t] = (real)acc;
        if (want_dc) dc -= (double)AEXP(c - lse[t]) * acc;
        memset(dq + (long)t * qs, 0, sizeof(real) * (size_t)d);
    }

    for (int j0 = 0; j0 < T; j0 += ATT_BK) {
        const int nk = T - j0 < ATT_BK ? T - j0 : ATT_BK;
        att_transpose_tile(w->kt, ATT_BK, k + (long)j0 * ks, ks, nk, d, scale);
        att_transpose_tile(w->vt, ATT_BK, v + (long)j0 * vs, vs, nk, d, 1);
        memset(w->dk, 0, sizeof(real) * ATT_BK * (size_t)d);
        memset(w->dv, 0, sizeof(real) * ATT_BK * (size_t)d);
        memset(w->dlb, 0, sizeof(real) * ATT_BK);
        att_prefetch_rows(dk + (long)j0 * ks, ks, nk, d, 1); /* written after the tile */
        att_prefetch_rows(dv + (long)j0 * vs, vs, nk, d, 1);
        if (j0 + ATT_BK < T) { /* transposed at the next tile */
            const int nn = T - j0 - ATT_BK < ATT_BK ? T - j0 - ATT_BK : ATT_BK;
            att_prefetch_rows(k + (long)(j0 + ATT_BK) * ks, ks, nn, d, 0);
            att_prefetch_rows(v + (long)(j0 + ATT_BK) * vs, vs, nn, d, 0);
        }

        /* Query blocks that hold a query i >= j0 (causal: i < j0 sees nothing). */
        for (int i0 = j0 / ATT_BQ * ATT_BQ; i0 < T; i0 += ATT_BQ) {
            const int nq = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
            const real *qb = q + (long)i0 * qs, *gb = dout + (long)i0 * os;
            att_gemm_n(w->s, ATT_BK, nq, nk, qb, qs, 1, w->kt, ATT_BK, d, 0);
            att_gemm_n(w->dp, ATT_BK, nq, nk, gb, os, 1, w->vt, ATT_BK, d, 0);
            for (int r = 0; r < nq; r++) {
                real *sr = w->s + (long)r * ATT_BK, *dr = w->dp + (long)r * ATT_BK;
                const int ncol = i0 + r - j0 + 1; /* causal: row r sees tile columns < ncol */
                const real L = lse[i0 + r], Di = w->D[i0 + r];
                const int nv = ncol < nk ? ncol : nk;
                if (lb)
#pragma omp simd
                    for (int j = 0; j < nv; j++) sr[j] += lb[j0 + j];
#pragma omp simd
                for (int j = 0; j < nk; j++) { /* masked columns: exp(-inf) = 0 */
                    const real p = AVEXP(j < ncol ? sr[j] - L : -INFINITY);
                    sr[j] = p;
                    dr[j] = p * (dr[j] - Di);
                }
            }
            if (dlb_out)
                for (int r = 0; r < nq; r++) {
                    const real *dr = w->dp + (long)r * ATT_BK;
#pragma omp simd
                    for (int j = 0; j < nk; j++) w->dlb[j] += dr[j];
                }
            /* dV_tile += P^T dO_blk and dK_tile += dS^T Q_blk (P read transposed) */
            att_gemm_n(w->dv, d, nk, d, w->s, 1, ATT_BK, gb, os, nq, 1);
            att_gemm_n(w->dk, d, nk, d, w->dp, 1, ATT_BK, qb, qs, nq, 1);
            /* dq_blk += dS K_tile (scaled once at the end) */
            att_gemm_n(dq + (long)i0 * qs, qs, nq, d, w->dp, ATT_BK, 1, k + (long)j0 * ks, ks, nk,
                       1);
        }
        for (int j = 0; j < nk; j++) {
            real *dkr = dk + (long)(j0 + j) * ks, *dvr = dv + (long)(j0 + j) * vs;
            const real *ak = w->dk + (long)j * d, *av = w->dv + (long)j * d;
#pragma omp simd
            for (int e = 0; e < d; e++) {
                dkr[e] = ak[e] * scale;
                dvr[e] = av[e];
            }
        }
        if (dlb_out) memcpy(dlb_out + j0, w->dlb, sizeof(real) * (size_t)nk);
    }
    for (int t = 0; t < T; t++) {
        real *r = dq + (long)t * qs;
#pragma omp simd
        for (int e = 0; e < d; e++) r[e] *= scale;
    }
    return dc;
}

void op_attention_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias, const real *dout,
                      const real *q, const real *k, const real *v, const real *out, const real *lse,
                      const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    const int want_dc = a->phantom && a->sink && dsink;
    double *dc = want_dc ? att_alloc(sizeof(double) * (size_t)B * H, 1) : NULL;
#pragma omp parallel if (att_worth_threads(B, H, T, d))
    {
        BwdScratch w;
        w.kt = att_alloc(sizeof(real) * (size_t)d * ATT_BK, 1);
        w.vt = att_alloc(sizeof(real) * (size_t)d * ATT_BK, 1);
        w.s = att_alloc(sizeof(real) * ATT_BQ * ATT_BK, 1);
        w.dp = att_alloc(sizeof(real) * ATT_BQ * ATT_BK, 1);
        w.dk = att_alloc(sizeof(real) * ATT_BK * (size_t)d, 1);
        w.dv = att_alloc(sizeof(real) * ATT_BK * (size_t)d, 1);
        w.dlb = att_alloc(sizeof(real) * ATT_BK, 1);
        w.D = att_alloc(sizeof(real) * (size_t)T, 1);
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const long row0 = (long)b * T, ho = (long)h * d;
            const real c = att_phantom_logit(a->phantom, a->sink, h);
            double part = bwd_slice(
                dq + row0 * a->q_stride + ho, dk + row0 * a->k_stride + ho,
                dv + row0 * a->v_stride + ho, dlogbias ? dlogbias + (long)bh * T : NULL,
                dout + row0 * a->o_stride + ho, a->o_stride, q + row0 * a->q_stride + ho,
                a->q_stride, k + row0 * a->k_stride + ho, a->k_stride, v + row0 * a->v_stride + ho,
                a->v_stride, out + row0 * a->o_stride + ho, lse + (long)bh * T,
                a->logbias ? a->logbias + (long)bh * T : NULL, c, want_dc, T, d, &w);
            if (want_dc) dc[bh] = part;
        }
        free(w.kt);
        free(w.vt);
        free(w.s);
        free(w.dp);
        free(w.dk);
        free(w.dv);
        free(w.dlb);
        free(w.D);
    }
    if (want_dc) {
        for (int h = 0; h < H; h++) {
            double sum = 0;
            for (int b = 0; b < B; b++) sum += dc[(long)b * H + h];
            dsink[h] += (real)sum;
        }
        free(dc);
    }
}

/* The reference: the two ops in turn, dvg stored in full. */
void op_attention_gate_bwd(real *dq, real *dk, real *dsink, const real *dout, const real *q, const real *k,
                           const real *vg, const real *out, const real *lse, const AttnArgs *a,
                           const AttnGateBwd *gb) {
    op_attention_bwd(dq, dk, gb->dvg, dsink, NULL, dout, q, k, vg, out, lse, a);
    op_gate_bwd(gb->dv, gb->dv_stride, gb->dtau, gb->dw, gb->db, gb->dvg, NULL, gb->v, gb->v_stride, gb->g, gb->p,
                a->B, a->T, a->H, a->d);
}
