/* Private to the analyses (analysis.c, analysis_hooks.c, analysis_stats.c):
 * the state the forward hooks act on. */
#ifndef SG_ANALYSIS_CTX_H
#define SG_ANALYSIS_CTX_H

#include <stdint.h>

#include "analysis.h"
#include "inject.h"
#include "model.h"

/* Clean-pass measurements, summed over sequences, heads and rows; per layer
 * where a per-layer view is reported. */
typedef struct {
    int L, H, C, V;
    double *rows;        /* [L] query rows measured */
    double *quiet_med;   /* [L] attention mass on reads below the head's median norm */
    double *quiet_q25;   /* [L] ... below the 25th percentile */
    double *phantom;     /* [L] mass on the phantom */
    double *pos0;        /* [L] mass on key position 0 */
    double *gate_rows;   /* [L] rows with read mass (the gate statistics' count) */
    double *gate_mean;   /* [L] sum over rows of the attention-weighted mean gate */
    double *gate_mean2;  /* [L] ... of its square (the between-row spread) */
    double *gate_sd;     /* [L] ... of the attention-weighted within-row SD */
    double *r0, *rmed;   /* [L*H] position-0 read norm and median other read norm, summed over sequences */
    double *r_n;         /* [L*H] sequences */
    double *mom;         /* [L*C*4] power sums 1..4 of each value coordinate */
    double *tokens;      /* [L] tokens in mom */
    double *tok_gate;    /* [V] sum of gate values at each token */
    double *tok_n;       /* [V] gate values summed */
    /* incidence (Table 12), per head [L*H] and per head and percentile [L*H*npct] */
    int sink_pos, npct;
    double pct[AN_MAX_PCT];
    double *inc_rows;    /* query rows */
    double *inc_sink;    /* mass on the sink positions */
    double *inc_mass;    /* mass on the reads past the sink */
    double *inc_content; /* their delivered content, sum a_ij ||read_j|| */
    double *inc_qmass;   /* ... of it on the quiet band, per percentile */
    double *inc_qcontent;
} AnStats;

typedef struct {
    Model *m;
    const AnalysisOpts *o;
    int Tp, first, C, H, d, L;
    const int32_t *inputs; /* host [B, T] tokens of the current batch */
    uint64_t batch;        /* index of the current batch */
    /* host staging (aliases of the op buffers on the CPU backend) */
    real *h_qkv, *h_gate, *h_p, *d_p;
    /* what this pass does */
    const InjectSpec *inject; /* NULL: clean values */
    int override;             /* OVR_* */
    int explicit_path;        /* OVR_NONE through the explicit ops too (tests) */
    AnStats *stats;           /* non-NULL on the measuring pass */
    long corrupted, reads;    /* reads corrupted / reads seen (this pass) */
} AnCtx;

/* The hooks; ctx is an AnCtx. */
void an_hook_values(void *ctx, Model *m, int layer, int B);
int an_hook_attention(void *ctx, Model *m, int layer, int B, const AttnArgs *aa, const real *v);

/* One head's gate-free probabilities P [T, T+1] edited in place into those
 * of override `kind` (analysis_hooks.c); g [T] the trained gates, perm [T]
 * scratch, key the shuffles' draw key. */
void an_override_head(real *P, const real *g, int T, int routing, int kind, uint64_t key, int *perm);

int an_stats_alloc(AnStats *s, int L, int H, int C, int V);
/* The incidence accumulators (after an_stats_alloc); pct ascending. */
int an_incidence_alloc(AnStats *s, int sink_positions, const double *pct, int npct);
void an_stats_free(AnStats *s);
/* One layer of the measuring pass: P holds sequence b's probabilities. */
void an_stats_sequence(AnCtx *c, int layer, int b, const real *P, const real *v, int vs, const real *g);

#endif
