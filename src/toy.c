/* The toy task's model and training (toy.h, docs/toy.md).
 *
 * Model, for a sequence of items x_j (dictionary rows) with key inputs c_j
 * (a random tag, or x_j itself when routing can see content):
 *   v_j = W_v x_j,  k_j = W_k c_j,  s_j = q . k_j / sqrt(d)
 *   gate (norm arms): g_j = sigmoid(beta (||v_j|| / sqrt(d) - tau))
 *   value slot: o = sum_j softmax(s)_j g_j v_j;  routing slot: s_j += log g_j
 *   off-by-one: a phantom key with logit 0 and value 0 joins the softmax
 *   oracle: the baseline with v_j = 0 for every irrelevant item
 *   logits z = W_r o + b_r (one per relevant feature), loss: binary
 *   cross-entropy against "feature k occurs in the sequence", mean over labels.
 *
 * Two exact rearrangements make a step cheap without changing the model or
 * its gradients.  Values and gates depend on the item only through its
 * feature, so they are computed once per dictionary row (V = D W_v^T, N rows
 * instead of B T) and gathered; their gradients are summed back per feature
 * before the gate's and W_v's backward.  And with one query the scores are
 * s_j = (W_k^T q) . c_j / sqrt(d), so the attention op is given u = W_k^T q
 * as its (shared) query and the raw key inputs as keys:
 *   du = sum_b dq_b,  dq = W_k du,  dW_k = q du^T.
 * The attention, gate, projection and Adam steps are the trainer's ops. */
#include "toy.h"
#include "toy_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rng.h"

static const char *const arm_names[TOY_ARMS] = {"baseline", "normgate", "offbyone", "renorm", "oracle"};
static const char *const arm_labels[TOY_ARMS] = {"baseline", "norm gate", "off-by-one", "routing-slot control",
                                                 "oracle"};
static const char *const cond_names[TOY_CONDS] = {"blind", "visible"};

const char *toy_arm_name(int a) { return a >= 0 && a < TOY_ARMS ? arm_names[a] : "?"; }
const char *toy_arm_label(int a) { return a >= 0 && a < TOY_ARMS ? arm_labels[a] : "?"; }
const char *toy_cond_name(int c) { return c >= 0 && c < TOY_CONDS ? cond_names[c] : "?"; }

int toy_arm_from_name(const char *s) {
    for (int i = 0; i < TOY_ARMS; i++)
        if (!strcmp(s, arm_names[i])) return i;
    return -1;
}

int toy_cond_from_name(const char *s) {
    for (int i = 0; i < TOY_CONDS; i++)
        if (!strcmp(s, cond_names[i])) return i;
    return -1;
}

void toy_defaults(ToyConfig *c) {
    memset(c, 0, sizeof *c);
    c->d = 64;
    c->n_features = 64;
    c->n_relevant = 16;
    c->T = 64;
    c->p_relevant = 0.15;
    c->n_tags = 4096;
    c->beta = 8;
    c->steps = 4000;
    c->batch = 256;
    c->lr = 1e-3;
    c->eval_seqs = 4096;
}

/* Random unit rows; Gram-Schmidt (in double, twice for accuracy) when they
 * fit, which gives the no-interference control an orthonormal dictionary. */
void toy_dictionary(real *D, int N, int d, uint64_t seed) {
    double *x = malloc(sizeof(double) * (size_t)N * d);
    if (!x) abort();
    const uint64_t key = rng_key(seed, 0xd1c7, (uint64_t)N);
    for (long i = 0; i < (long)N * d; i++) x[i] = rng_normal(key, (uint64_t)i);
    for (int f = 0; f < N; f++) {
        double *r = x + (long)f * d;
        for (int pass = 0; pass < (N <= d ? 2 : 0); pass++)
            for (int p = 0; p < f; p++) {
                const double *o = x + (long)p * d;
                double dot = 0;
                for (int k = 0; k < d; k++) dot += r[k] * o[k];
                for (int k = 0; k < d; k++) r[k] -= dot * o[k];
            }
        double n = 0;
        for (int k = 0; k < d; k++) n += r[k] * r[k];
        n = sqrt(n);
        for (int k = 0; k < d; k++) r[k] /= n;
    }
    for (long i = 0; i < (long)N * d; i++) D[i] = (real)x[i];
    free(x);
}

void toy_item(const ToyConfig *c, long step, int b, int t, int *feature, int *tag) {
    const uint64_t w = rng_key(rng_key(c->seed, 0x7019 + (uint64_t)step, 0x1e), (uint64_t)b, (uint64_t)t);
    const int R = c->n_relevant, N = c->n_features;
    const uint64_t h = rng_mix(w ^ 0xa5a5a5a5a5a5a5a5ull);
    *feature = rng_uniform(w, 0) < c->p_relevant ? (int)rng_below(h, (uint64_t)R)
                                                 : R + (int)rng_below(h, (uint64_t)(N - R));
    *tag = (int)rng_below(rng_mix(w + 0x3c3c3c3c3c3c3c3cull), (uint64_t)c->n_tags);
}

static real *zalloc(long n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(real)); }

void toy_free(Toy *t) {
    real *all[] = {t->p, t->g, t->m, t->v, t->D, t->tags, t->Vd, t->gd, t->vgd, t->lbd, t->dVd, t->dvgd, t->dlbd,
                   t->u, t->du, t->K, t->V, t->LB, t->o, t->lse, t->z, t->dz, t->dout, t->dq, t->dK, t->dV, t->dLB};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    free(t->feat), free(t->tag), free(t->y);
}

int toy_init(Toy *t, const ToyConfig *c) {
    memset(t, 0, sizeof *t);
    t->c = *c;
    const int d = c->d, N = c->n_features, R = c->n_relevant, T = c->T, B = c->batch;
    t->N = N, t->R = R, t->d = d, t->T = T, t->B = B;
    t->gated = c->arm == TOY_NORMGATE || c->arm == TOY_RENORM;
    t->routing = c->arm == TOY_RENORM;
    t->off_wk = d;
    t->off_wv = t->off_wk + (long)d * d;
    t->off_tau = t->off_wv + (long)d * d;
    t->off_wr = t->off_tau + 1;
    t->off_br = t->off_wr + (long)R * d;
    t->np = t->off_br + R;
    const long BT = (long)B * T;
    t->p = zalloc(t->np), t->g = zalloc(t->np), t->m = zalloc(t->np), t->v = zalloc(t->np);
    t->D = zalloc((long)N * d), t->tags = zalloc((long)c->n_tags * d);
    t->Vd = zalloc((long)N * d), t->gd = zalloc(N), t->vgd = zalloc((long)N * d), t->lbd = zalloc(N);
    t->dVd = zalloc((long)N * d), t->dvgd = zalloc((long)N * d), t->dlbd = zalloc(N);
    t->u = zalloc(d), t->du = zalloc(d);
    t->K = zalloc(BT * d), t->V = zalloc(BT * d), t->LB = zalloc(BT), t->o = zalloc((long)B * d);
    t->lse = zalloc(B), t->z = zalloc((long)B * R), t->dz = zalloc((long)B * R), t->dout = zalloc((long)B * d);
    t->dq = zalloc((long)B * d), t->dK = zalloc(BT * d), t->dV = zalloc(BT * d), t->dLB = zalloc(BT);
    t->feat = malloc(sizeof(int) * (size_t)BT), t->tag = malloc(sizeof(int) * (size_t)BT);
    t->y = malloc((size_t)B * R);
    if (!t->p || !t->g || !t->m || !t->v || !t->D || !t->tags || !t->Vd || !t->gd || !t->vgd || !t->lbd ||
        !t->dVd || !t->dvgd || !t->dlbd || !t->u || !t->du || !t->K || !t->V || !t->LB || !t->o || !t->lse ||
        !t->z || !t->dz || !t->dout || !t->dq || !t->dK || !t->dV || !t->dLB || !t->feat || !t->tag || !t->y)
        return -1;
    toy_dictionary(t->D, N, d, c->seed);
    /* tags: random unit vectors, independent of the dictionary */
    const uint64_t tk = rng_key(c->seed, 0x7a95, 0);
    for (int i = 0; i < c->n_tags; i++) {
        real *r = t->tags + (long)i * d;
        double n = 0;
        for (int k = 0; k < d; k++) r[k] = (real)rng_normal(tk, (uint64_t)i * d + k), n += (double)r[k] * r[k];
        for (int k = 0; k < d; k++) r[k] = (real)(r[k] / sqrt(n));
    }
    /* q ~ N(0, 1); W_k, W_v, W_r ~ N(0, 1/d) (unit items keep unit-scale
     * reads); b_r = 0; tau = -4/beta opens the gate (g >= sigmoid(4)). */
    const uint64_t ik = rng_key(c->seed, 0x1417, 0);
    for (long i = 0; i < t->np; i++) {
        double sd = i < t->off_wk ? 1 : (i < t->off_tau || (i >= t->off_wr && i < t->off_br)) ? 1 / sqrt(d) : 0;
        t->p[i] = (real)(sd * rng_normal(ik, (uint64_t)i));
    }
    t->p[t->off_tau] = (real)(-4 / c->beta);
    return 0;
}

static GateParams toy_gate(const Toy *t) {
    GateParams gp = {GATE_NORM, t->routing ? SLOT_ROUTING : SLOT_VALUE, (real)t->c.beta, t->p + t->off_tau, NULL,
                     NULL};
    return gp;
}

static AttnArgs toy_attn(const Toy *t, int B) {
    AttnArgs a = {B, t->T, 1, t->d, 0, t->d, t->d, t->d, t->c.arm == TOY_OFFBYONE, NULL, t->routing ? t->LB : NULL};
    return a;
}

/* Forward on B sequences of batch `step`; returns the mean BCE per label and
 * leaves the logits in z. */
double toy_forward(Toy *t, long step, int B) {
    const int d = t->d, T = t->T, R = t->R;
    const real *q = t->p, *wk = t->p + t->off_wk, *wv = t->p + t->off_wv;
    memset(t->y, 0, (size_t)B * R);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++) {
            const long i = (long)b * T + j;
            toy_item(&t->c, step, b, j, &t->feat[i], &t->tag[i]);
            if (t->feat[i] < R) t->y[b * R + t->feat[i]] = 1;
        }
    op_matmul_fwd(t->Vd, t->D, wv, t->N, d, d);
    GateParams gp = toy_gate(t);
    if (t->gated) op_gate_fwd(t->gd, t->routing ? NULL : t->vgd, t->routing ? t->lbd : NULL, t->Vd, d, &gp, 1, t->N, 1, d);
    op_matmul_bwd(t->u, NULL, q, NULL, wk, 1, d, d); /* u = W_k^T q */
    const real *vsrc = t->gated && !t->routing ? t->vgd : t->Vd;
    for (long i = 0; i < (long)B * T; i++) {
        const int f = t->feat[i];
        if (t->c.arm == TOY_ORACLE && f >= R) memset(t->V + i * d, 0, sizeof(real) * (size_t)d);
        else memcpy(t->V + i * d, vsrc + (long)f * d, sizeof(real) * (size_t)d);
        memcpy(t->K + i * d, t->c.cond == TOY_BLIND ? t->tags + (long)t->tag[i] * d : t->D + (long)f * d,
               sizeof(real) * (size_t)d);
        if (t->routing) t->LB[i] = t->lbd[f];
    }
    AttnArgs a = toy_attn(t, B);
    op_attention_decode_fwd(t->o, t->lse, t->u, t->K, t->V, &a);
    op_matmul_fwd(t->z, t->o, t->p + t->off_wr, B, d, R);
    double loss = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < R; k++) {
            real *zz = &t->z[b * R + k];
            *zz += t->p[t->off_br + k];
            const double x = *zz; /* softplus(x) - y x, stably */
            loss += (x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))) - (t->y[b * R + k] ? x : 0);
        }
    return loss / ((double)B * R);
}

void toy_backward(Toy *t, int B) {
    const int d = t->d, T = t->T, R = t->R, N = t->N;
    real *gr = t->g;
    memset(gr, 0, sizeof(real) * (size_t)t->np);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < R; k++) {
            const double x = t->z[b * R + k], s = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
            t->dz[b * R + k] = (real)((s - t->y[b * R + k]) / ((double)B * R));
        }
    for (int k = 0; k < R; k++) {
        double s = 0;
        for (int b = 0; b < B; b++) s += t->dz[b * R + k];
        gr[t->off_br + k] = (real)s;
    }
    op_matmul_bwd(t->dout, gr + t->off_wr, t->dz, t->o, t->p + t->off_wr, B, d, R);
    AttnArgs a = toy_attn(t, B);
    op_attention_decode_bwd(t->dq, t->dK, t->dV, NULL, t->routing ? t->dLB : NULL, t->dout, t->u, t->K, t->V, t->o,
                            t->lse, &a);
    for (int k = 0; k < d; k++) {
        double s = 0;
        for (int b = 0; b < B; b++) s += t->dq[(long)b * d + k];
        t->du[k] = (real)s;
    }
    op_matmul_fwd(gr, t->du, t->p + t->off_wk, 1, d, d);                      /* dq = W_k du */
    op_matmul_bwd(NULL, gr + t->off_wk, t->p, t->du, t->p + t->off_wk, 1, d, d); /* dW_k = q du^T */
    /* per-feature sums of the read gradients, in item order */
    const int value_gated = t->gated && !t->routing;
    real *dsum = value_gated ? t->dvgd : t->dVd;
    memset(dsum, 0, sizeof(real) * (size_t)N * d);
    if (t->routing) memset(t->dlbd, 0, sizeof(real) * (size_t)N);
    for (long i = 0; i < (long)B * T; i++) {
        const int f = t->feat[i];
        if (t->c.arm == TOY_ORACLE && f >= R) continue;
        real *dst = dsum + (long)f * d;
        const real *src = t->dV + i * d;
        for (int k = 0; k < d; k++) dst[k] += src[k];
        if (t->routing) t->dlbd[f] += t->dLB[i];
    }
    if (t->gated) {
        GateParams gp = toy_gate(t);
        op_gate_bwd(t->dVd, d, gr + t->off_tau, NULL, NULL, value_gated ? t->dvgd : NULL, t->routing ? t->dlbd : NULL,
                    t->Vd, d, t->gd, &gp, 1, N, 1, d);
    }
    op_matmul_bwd(NULL, gr + t->off_wv, t->dVd, t->D, t->p + t->off_wv, N, d, d);
}

/* Adds, for each of the B sequences of the last forward, the attention on
 * its relevant items and its largest item weight: p_j = exp(s_j - LSE) with
 * s_j = u . k_j / sqrt(d) (+ log g_j in the routing slot), the decode op's
 * definition. */
void toy_attention_stats(const Toy *t, int B, double *relevant, double *top) {
    const int d = t->d, T = t->T;
    const double scale = 1 / sqrt((double)d);
    for (int b = 0; b < B; b++) {
        double mx = 0;
        for (int j = 0; j < T; j++) {
            const long i = (long)b * T + j;
            double s = 0;
            for (int k = 0; k < d; k++) s += (double)t->u[k] * t->K[i * d + k];
            s = s * scale + (t->routing ? t->LB[i] : 0);
            const double p = exp(s - t->lse[b]);
            if (t->feat[i] < t->R) *relevant += p;
            mx = p > mx ? p : mx;
        }
        *top += mx;
    }
}

static int check_config(const ToyConfig *c, char *err, size_t errlen) {
    const char *bad = c->d < 1 ? "d" : c->n_relevant < 1 ? "n_relevant" : c->n_features <= c->n_relevant ? "n_features"
                    : c->T < 1 ? "T" : c->batch < 1 ? "batch" : c->steps < 0 ? "steps" : c->n_tags < 1 ? "n_tags"
                    : !(c->p_relevant >= 0 && c->p_relevant <= 1) ? "p_relevant" : !(c->lr > 0) ? "lr"
                    : c->eval_seqs < 1 ? "eval_seqs" : c->arm < 0 || c->arm >= TOY_ARMS ? "arm"
                    : c->cond < 0 || c->cond >= TOY_CONDS ? "condition" : NULL;
    if (bad) {
        snprintf(err, errlen, "toy: invalid %s", bad);
        return -1;
    }
    if (!op_host_memory()) {
        snprintf(err, errlen, "the toy task runs on the CPU backend (build/sgtrain), not on %s", op_backend());
        return -1;
    }
    return 0;
}

int toy_run(const ToyConfig *c, ToyResult *r, char *err, size_t errlen) {
    if (check_config(c, err, errlen)) return -1;
    Toy t;
    if (toy_init(&t, c)) {
        toy_free(&t);
        snprintf(err, errlen, "toy: out of memory");
        return -1;
    }
    memset(r, 0, sizeof *r);
    double tail = 0;
    int ntail = 0;
    for (int s = 0; s < c->steps; s++) {
        const double loss = toy_forward(&t, s, c->batch);
        if (!s) r->first_bce = loss;
        if (s >= c->steps - 100) tail += loss, ntail++;
        toy_backward(&t, c->batch);
        op_adamw(t.p, t.m, t.v, t.g, t.np, c->lr, 0.9, 0.999, 1e-8, 0, s + 1, 1);
    }
    r->train_bce = ntail ? tail / ntail : NAN;
    /* held-out set: sequences of "steps" -1, -2, ... (never trained on) */
    long wrong = 0, labels = 0;
    double bce = 0, rel = 0, top = 0;
    for (int e = 0; e < c->eval_seqs; e += c->batch) {
        const int B = c->eval_seqs - e < c->batch ? c->eval_seqs - e : c->batch;
        bce += toy_forward(&t, -1 - e / c->batch, B) * B * t.R;
        for (int i = 0; i < B * t.R; i++) wrong += (t.z[i] > 0) != (t.y[i] != 0);
        labels += (long)B * t.R;
        toy_attention_stats(&t, B, &rel, &top);
    }
    r->error = (double)wrong / labels;
    r->bce = bce / labels;
    r->relevant_mass = rel / c->eval_seqs;
    r->top_weight = top / c->eval_seqs;
    toy_free(&t);
    return 0;
}
