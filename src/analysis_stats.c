/* What the measuring (clean) pass records: exposure (Table 9) and the
 * mechanism telemetry (Section 4.4, Appendix G), from the explicit attention
 * probabilities of each sequence.
 *
 * Per head h of sequence b, with norms r_t = ||v_t|| of the reads (positions
 * t >= first; a sink token is the arm's zero option, not a read) and the
 * cutoffs of inject.h, for every query row i >= first:
 *   quiet mass     sum_{first <= j <= i, r_j < cut} p_ij   (median and q25)
 *   phantom mass   p_iT;   position-0 mass   p_i0
 *   gate, with w_ij = p_ij / sum_{j<=i} p_ij over the row's reads:
 *     gbar_i = sum_j w_ij g_j,   sd_i = sqrt(sum_j w_ij (g_j - gbar_i)^2)
 * each averaged over rows, heads, sequences (and layers for the headline).
 * The position-0 norm ratio of a head is mean_b r_0 / mean_b median_{t>=1} r_t,
 * and the headline is its median over the L*H heads.  Excess kurtosis is per
 * value coordinate over tokens, m4 / m2^2 - 3 from power sums in double,
 * averaged over coordinates and layers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_ctx.h"
#include "inject.h"

int an_stats_alloc(AnStats *s, int L, int H, int C, int V) {
    memset(s, 0, sizeof *s);
    s->L = L, s->H = H, s->C = C, s->V = V;
    double **per_layer[] = {&s->rows, &s->quiet_med, &s->quiet_q25, &s->phantom, &s->pos0, &s->gate_rows,
                            &s->gate_mean, &s->gate_mean2, &s->gate_sd, &s->tokens};
    for (size_t i = 0; i < sizeof per_layer / sizeof *per_layer; i++)
        if (!(*per_layer[i] = calloc((size_t)L, sizeof(double)))) return -1;
    s->r0 = calloc((size_t)L * H, sizeof(double));
    s->rmed = calloc((size_t)L * H, sizeof(double));
    s->r_n = calloc((size_t)L * H, sizeof(double));
    s->mom = calloc((size_t)L * C * 4, sizeof(double));
    s->tok_gate = calloc((size_t)V, sizeof(double));
    s->tok_n = calloc((size_t)V, sizeof(double));
    return s->r0 && s->rmed && s->r_n && s->mom && s->tok_gate && s->tok_n ? 0 : -1;
}

void an_stats_free(AnStats *s) {
    double *all[] = {s->rows, s->quiet_med, s->quiet_q25, s->phantom, s->pos0, s->gate_rows, s->gate_mean,
                     s->gate_mean2, s->gate_sd, s->tokens, s->r0, s->rmed, s->r_n, s->mom, s->tok_gate, s->tok_n};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    memset(s, 0, sizeof *s);
}

typedef struct {
    double rows, qm, qq, ph, p0, grows, gm, gm2, gsd, r0, rmed;
} HeadSums;

static void head_sums(HeadSums *o, const real *P, const real *v, int vs, const real *g, int T, int first, int d,
                      float *norms, float *scratch, unsigned char *qm, unsigned char *qq) {
    memset(o, 0, sizeof *o);
    const long ld = T + 1;
    for (int t = 0; t < T; t++) {
        double s = 0;
        for (int k = 0; k < d; k++) s += (double)v[(long)t * vs + k] * v[(long)t * vs + k];
        norms[t] = (float)sqrt(s);
    }
    const int n = T - first;
    double med, q25;
    head_cutoff(norms + first, n, CUT_Q25, scratch, &med, &q25);
    for (int t = 0; t < T; t++) {
        qm[t] = t >= first && norms[t] < med;
        qq[t] = t >= first && norms[t] < q25;
    }
    o->r0 = norms[0];
    const int o1 = first > 1 ? first : 1; /* the ordinary reads: positions >= 1 */
    if (T - o1 > 0) {
        double m1, unused;
        head_cutoff(norms + o1, T - o1, CUT_MEDIAN, scratch, &m1, &unused);
        o->rmed = m1;
    }
    for (int i = first; i < T; i++) {
        const real *row = P + (long)i * ld;
        double a = 0, b = 0, w = 0, gw = 0;
        for (int j = 0; j <= i; j++) {
            a += qm[j] ? row[j] : 0;
            b += qq[j] ? row[j] : 0;
            w += row[j];
            if (g) gw += (double)row[j] * g[j];
        }
        o->rows += 1;
        o->qm += a, o->qq += b, o->ph += row[T], o->p0 += row[0];
        if (g && w > 0) {
            const double gbar = gw / w;
            double var = 0;
            for (int j = 0; j <= i; j++) var += (double)row[j] * (g[j] - gbar) * (g[j] - gbar);
            o->grows += 1, o->gm += gbar, o->gm2 += gbar * gbar, o->gsd += sqrt(var / w);
        }
    }
}

void an_stats_sequence(AnCtx *c, int l, int b, const real *P, const real *v, int vs, const real *g) {
    AnStats *s = c->stats;
    const int T = c->Tp, H = c->H, d = c->d, first = c->first;
    HeadSums hs[H];
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < H; h++) {
        float *norms = malloc(sizeof(float) * (size_t)T * 2);
        unsigned char *q = malloc((size_t)T * 2);
        if (!norms || !q) abort();
        head_sums(&hs[h], P + (long)h * T * (T + 1), v + (long)h * d, vs, g ? g + (long)h * T : NULL, T, first, d,
                  norms, norms + T, q, q + T);
        free(norms);
        free(q);
    }
    for (int h = 0; h < H; h++) { /* in head order: sums do not depend on threads */
        s->rows[l] += hs[h].rows;
        s->quiet_med[l] += hs[h].qm;
        s->quiet_q25[l] += hs[h].qq;
        s->phantom[l] += hs[h].ph;
        s->pos0[l] += hs[h].p0;
        s->gate_rows[l] += hs[h].grows;
        s->gate_mean[l] += hs[h].gm;
        s->gate_mean2[l] += hs[h].gm2;
        s->gate_sd[l] += hs[h].gsd;
        s->r0[(long)l * H + h] += hs[h].r0;
        s->rmed[(long)l * H + h] += hs[h].rmed;
        s->r_n[(long)l * H + h] += 1;
    }
    /* value coordinates over tokens, and the gate at each token */
    const int C = c->C;
    double *mom = s->mom + (long)l * C * 4;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < C; k++) {
        double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
        for (int t = first; t < T; t++) {
            const double x = v[(long)t * vs + k], x2 = x * x;
            s1 += x, s2 += x2, s3 += x2 * x, s4 += x2 * x2;
        }
        mom[4 * k] += s1, mom[4 * k + 1] += s2, mom[4 * k + 2] += s3, mom[4 * k + 3] += s4;
    }
    s->tokens[l] += T - first;
    if (g)
        for (int t = first; t < T; t++) {
            const int32_t tok = c->inputs[(long)b * (T - first) + (t - first)];
            if (tok < 0 || tok >= s->V) continue;
            for (int h = 0; h < H; h++) s->tok_gate[tok] += g[(long)h * T + t];
            s->tok_n[tok] += H;
        }
}
