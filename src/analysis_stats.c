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
 * averaged over coordinates and layers.
 *
 * Incidence (Appendix F, Table 12), per head: the sink is the key positions
 * j < s = first + sink_positions (a sink token and the first text
 * positions), the reads past it are j >= s, and the quiet band at percentile
 * q is the reads with r_j below the q-th percentile of {r_j : j >= s} (linear
 * interpolation between order statistics).  Over query rows i >= first:
 *   sink mass      sum_{j < s} a_ij
 *   read mass      M = sum_{s <= j <= i} a_ij,  quiet part M_q
 *   content        K = sum_{s <= j <= i} a_ij c_j,  quiet part K_q
 * with a_ij the model's own attention weights (the routing slot's log-gate
 * included) and c_j = ||read_j|| the norm of what the row receives from j:
 * g_j r_j for a value-slot gate, r_j otherwise (Kobayashi et al.'s
 * ||a f(x)||).  A head's blind-mass ratio at q is (M_q / M) / (q / 100):
 * 1 for routing blind to read norms, 0 for routing that avoids quiet reads;
 * its content share is K_q / K.  Sums run over sequences before dividing. */
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

int an_incidence_alloc(AnStats *s, int sink_positions, const double *pct, int npct) {
    const size_t LH = (size_t)s->L * s->H;
    s->sink_pos = sink_positions, s->npct = npct;
    memcpy(s->pct, pct, sizeof(double) * (size_t)npct);
    s->inc_rows = calloc(LH, sizeof(double));
    s->inc_sink = calloc(LH, sizeof(double));
    s->inc_mass = calloc(LH, sizeof(double));
    s->inc_content = calloc(LH, sizeof(double));
    s->inc_qmass = calloc(LH * (size_t)npct, sizeof(double));
    s->inc_qcontent = calloc(LH * (size_t)npct, sizeof(double));
    return s->inc_rows && s->inc_sink && s->inc_mass && s->inc_content && s->inc_qmass && s->inc_qcontent ? 0 : -1;
}

void an_stats_free(AnStats *s) {
    double *all[] = {s->rows,     s->quiet_med, s->quiet_q25,   s->phantom,  s->pos0,     s->gate_rows,
                     s->gate_mean, s->gate_mean2, s->gate_sd,   s->tokens,   s->r0,       s->rmed,
                     s->r_n,      s->mom,       s->tok_gate,    s->tok_n,    s->inc_rows, s->inc_sink,
                     s->inc_mass, s->inc_content, s->inc_qmass, s->inc_qcontent};
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

typedef struct {
    double rows, sink, mass, content, qmass[AN_MAX_PCT], qcontent[AN_MAX_PCT];
} HeadIncidence;

/* One head's incidence sums (the block comment); norms [T] are the reads'
 * norms, gv the value-slot gates (NULL: the read is delivered unscaled),
 * band [T] and sorted [T] scratch. */
static void head_incidence(HeadIncidence *o, const AnStats *st, const real *P, const float *norms, const real *gv,
                           int T, int first, unsigned char *band, float *sorted) {
    memset(o, 0, sizeof *o);
    const int s = first + st->sink_pos < T ? first + st->sink_pos : T, n = T - s, np = st->npct;
    double cut[AN_MAX_PCT];
    if (n > 0) {
        memcpy(sorted, norms + s, sizeof(float) * (size_t)n);
        sort_floats(sorted, n);
        for (int p = 0; p < np; p++) cut[p] = quantile_sorted(sorted, n, st->pct[p] / 100);
    }
    /* band_j: the first percentile whose band holds read j (np: none); the
     * cuts ascend, so read j is quiet at percentiles band_j, ..., np - 1 */
    for (int j = s; j < T; j++) {
        int p = 0;
        while (p < np && !(norms[j] < cut[p])) p++;
        band[j] = (unsigned char)p;
    }
    const long ld = T + 1;
    for (int i = first; i < T; i++) {
        const real *row = P + (long)i * ld;
        double bm[AN_MAX_PCT + 1] = {0}, bc[AN_MAX_PCT + 1] = {0}, sink = 0;
        for (int j = 0; j <= i && j < s; j++) sink += row[j];
        for (int j = s; j <= i; j++) {
            const double a = row[j], w = a * norms[j] * (gv ? (double)gv[j] : 1.0);
            bm[band[j]] += a, bc[band[j]] += w;
        }
        double cm = 0, cc = 0;
        for (int p = 0; p < np; p++) {
            cm += bm[p], cc += bc[p];
            o->qmass[p] += cm, o->qcontent[p] += cc;
        }
        o->mass += cm + bm[np], o->content += cc + bc[np];
        o->sink += sink;
        o->rows += 1;
    }
}

void an_stats_sequence(AnCtx *c, int l, int b, const real *P, const real *v, int vs, const real *g) {
    AnStats *s = c->stats;
    const int T = c->Tp, H = c->H, d = c->d, first = c->first;
    HeadSums hs[H];
    HeadIncidence hi[H];
    const int value_slot = c->m && c->m->arm->filter != FILTER_NONE && c->m->arm->slot == FSLOT_VALUE;
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < H; h++) {
        float *norms = malloc(sizeof(float) * (size_t)T * 2);
        unsigned char *q = malloc((size_t)T * 2);
        if (!norms || !q) abort();
        const real *gh = g ? g + (long)h * T : NULL, *Ph = P + (long)h * T * (T + 1);
        head_sums(&hs[h], Ph, v + (long)h * d, vs, gh, T, first, d, norms, norms + T, q, q + T);
        if (s->inc_rows) head_incidence(&hi[h], s, Ph, norms, value_slot ? gh : NULL, T, first, q, norms + T);
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
        if (s->inc_rows) {
            const long lh = (long)l * H + h;
            s->inc_rows[lh] += hi[h].rows;
            s->inc_sink[lh] += hi[h].sink;
            s->inc_mass[lh] += hi[h].mass;
            s->inc_content[lh] += hi[h].content;
            for (int p = 0; p < s->npct; p++) {
                s->inc_qmass[lh * s->npct + p] += hi[h].qmass[p];
                s->inc_qcontent[lh * s->npct + p] += hi[h].qcontent[p];
            }
        }
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
