/* The forward hooks of the analyses: corrupting values before the gate
 * (injection), observing explicit attention (the measuring pass), and
 * attention with overridden gate values (Table 8's probes).
 *
 * Gate overrides.  With p_ij the attention probabilities computed without
 * the gate and g_j the trained gate of read j, the trained model reads
 *   value slot:   o_i = sum_j p_ij g_j v_j
 *   routing slot: o_i = sum_j p_ij g_j v_j / (p_iT + sum_k p_ik g_k)
 * (the routing slot adds log g_j to the logits, which is the second line
 * after dividing by the gate-free normaliser; p_iT is the phantom).  A probe
 * replaces g_j by g'_ij, a value that may depend on the row:
 *   row_mean:  g'_ij = gbar_i = sum_j a_ij g_j / sum_j a_ij, a_ij the row's
 *              trained attention weights over reads (p_ij, or p_ij g_j in the
 *              routing slot): the row's attenuation kept, its choice removed
 *   shuffled:  g'_ij = g_pi(j), pi a random permutation of the row's reads
 *   reopened:  g'_ij = 1 where g_j < 1/2, else g_j
 * and the output is computed from the edited probabilities by
 * op_attention_apply.  Injection composes: the reads (and so g) are the
 * corrupted ones. */
#include <stdlib.h>
#include <string.h>

#include "analysis_ctx.h"
#include "ops.h"
#include "rng.h"

static real *host_view(real *host, const real *dev, size_t n) {
    if (op_host_memory()) return (real *)dev;
    op_download(host, dev, n * sizeof(real));
    return host;
}

static void push(real *dev, const real *host, size_t n) {
    if (host != dev) op_upload(dev, host, n * sizeof(real));
}

void an_hook_values(void *ctxp, Model *m, int l, int B) {
    AnCtx *c = ctxp;
    if (!c->inject) return;
    LayerActs *la = &m->a.layer[l];
    const size_t n = (size_t)B * c->Tp * 3 * c->C;
    real *qkv = host_view(c->h_qkv, la->qkv, n);
    InjectSpec s = *c->inject;
    const uint64_t junk_key = rng_key(c->o->seed, 0x1a7c + (uint64_t)s.junk, (uint64_t)l);
    s.key = rng_key(junk_key, c->batch, 0x0b);
    s.dir_key = rng_key(c->o->seed, 0xd1, (uint64_t)l);
    s.first = c->first;
    s.own = m->p.layer[l].gate_w ? m->h_params + (m->p.layer[l].gate_w - m->params) : NULL;
    c->corrupted += inject_values(qkv + 2 * c->C, 3 * c->C, B, c->Tp, c->H, c->d, &s);
    c->reads += (long)B * c->H * (c->Tp - c->first);
    push(la->qkv, qkv, n);
}

/* Arguments of the explicit ops for sequence b alone. */
static AttnArgs one_sequence(const AttnArgs *aa, int b, int with_logbias, int v_stride) {
    AttnArgs s = *aa;
    s.B = 1;
    s.v_stride = v_stride;
    s.logbias = with_logbias && aa->logbias ? aa->logbias + (long)b * aa->H * aa->T : NULL;
    return s;
}

static real gate_override(int kind, const real *g, int j, real gbar, const int *perm) {
    switch (kind) {
    case OVR_ROW_MEAN: return gbar;
    case OVR_SHUFFLED: return g[perm[j]];
    case OVR_REOPENED: return g[j] < (real)0.5 ? 1 : g[j];
    }
    return g[j];
}

void an_override_head(real *P, const real *g, int T, int routing, int kind, uint64_t key, int *perm) {
    const long ld = T + 1;
    for (int i = 0; i < T; i++) {
        real *row = P + (long)i * ld;
        double wsum = 0, gw = 0;
        for (int j = 0; j <= i; j++) {
            const double a = routing ? (double)row[j] * g[j] : row[j];
            wsum += a;
            gw += a * g[j];
        }
        const real gbar = wsum > 0 ? (real)(gw / wsum) : 1;
        if (kind == OVR_SHUFFLED) { /* Fisher-Yates, keyed by the row */
            for (int j = 0; j <= i; j++) perm[j] = j;
            const uint64_t rk = rng_key(key, (uint64_t)i, 0x5f);
            for (int j = i; j > 0; j--) {
                const int r = (int)rng_below(rng_mix(rk + (uint64_t)j), (uint64_t)j + 1);
                const int t = perm[j];
                perm[j] = perm[r];
                perm[r] = t;
            }
        }
        double z = routing ? row[T] : 1;
        for (int j = 0; j <= i; j++) {
            row[j] *= gate_override(kind, g, j, gbar, perm);
            z += routing ? row[j] : 0;
        }
        if (routing) {
            const real inv = (real)(1 / z);
            for (int j = 0; j <= i; j++) row[j] *= inv;
        }
    }
}

int an_hook_attention(void *ctxp, Model *m, int l, int B, const AttnArgs *aa, const real *v) {
    AnCtx *c = ctxp;
    if (!c->stats && c->override == OVR_NONE && !c->explicit_path) return 0;
    LayerActs *la = &m->a.layer[l];
    const int Tp = c->Tp, H = c->H, C = c->C;
    const size_t np = (size_t)H * Tp * (Tp + 1);
    const real *raw = la->qkv + 2 * C;
    const real *g = la->gate ? host_view(c->h_gate, la->gate, (size_t)B * H * Tp) : NULL;
    const int routing = m->arm->filter != FILTER_NONE && m->arm->slot == FSLOT_ROUTING;
    if (c->stats) {
        /* The measuring pass observes the model's own attention (with its
         * routing-slot log-gate) and lets the streaming op produce the
         * output. */
        const real *hv = host_view(c->h_qkv, la->qkv, (size_t)B * Tp * 3 * C) + 2 * C;
        for (int b = 0; b < B; b++) {
            AttnArgs s = one_sequence(aa, b, 1, 3 * C);
            const long r0 = (long)b * Tp;
            op_attention_probs(c->d_p, la->qkv + r0 * 3 * C, la->qkv + r0 * 3 * C + C, &s);
            const real *P = host_view(c->h_p, c->d_p, np);
            an_stats_sequence(c, l, b, P, hv + r0 * 3 * C, 3 * C, g ? g + (long)b * H * Tp : NULL);
        }
        return 0;
    }
    for (int b = 0; b < B; b++) {
        AttnArgs s = one_sequence(aa, b, 0, 3 * C);
        s.o_stride = C;
        const long r0 = (long)b * Tp;
        op_attention_probs(c->d_p, la->qkv + r0 * 3 * C, la->qkv + r0 * 3 * C + C, &s);
        real *P = host_view(c->h_p, c->d_p, np);
#pragma omp parallel for schedule(dynamic, 1)
        for (int h = 0; h < H; h++) {
            int *perm = malloc(sizeof(int) * (size_t)Tp);
            if (!perm) abort();
            const uint64_t key = rng_key(rng_key(c->o->seed, 0x9e0 + (uint64_t)l, c->batch),
                                         (uint64_t)b * H + h, 0x71);
            an_override_head(P + (long)h * Tp * (Tp + 1), g + ((long)b * H + h) * Tp, Tp, routing, c->override,
                          key, perm);
            free(perm);
        }
        push(c->d_p, P, np);
        op_attention_apply(la->atty + r0 * C, c->d_p, raw + r0 * 3 * C, &s);
    }
    (void)v;
    return 1;
}
