/* Shared by the model-level tests: a tiny config and parameter values that
 * exercise every mechanism (the near-identity init would leave the gates and
 * the phantom almost inert, and their gradients untested). */
#ifndef SG_TESTS_TINY_H
#define SG_TESTS_TINY_H

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"
#include "rng.h"

static inline Config tiny_config(const char *arm, int ln_bias) {
    Config c;
    char err[256];
    config_from_tier(&c, "test", err, sizeof err);
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 8;
    c.block_size = 5;
    c.vocab_size = 23;
    c.ln_bias = ln_bias;
    snprintf(c.arm, sizeof c.arm, "%s", arm);
    return c;
}

static inline double tiny_u(uint64_t key, uint64_t i) { return rng_uniform(key, i); }

/* The model's optional parts, as the importers build them:
 *   TINY_STUDY  the paper's model;
 *   TINY_GPT2   GPT-2's: LayerNorm and linear biases, the tanh GELU;
 *   TINY_NEOX   GPT-NeoX's (Pythia): the biases, rotary positions on half
 *               of each head's dims, attention and MLP in parallel, an
 *               untied LM head;
 *   TINY_ROPE   the study's model with rotary positions on every dim. */
enum { TINY_STUDY, TINY_GPT2, TINY_NEOX, TINY_ROPE, TINY_FORMS };
static const char *const tiny_form_name[TINY_FORMS] = {"", "+gpt2", "+neox", "+rope"};

static inline void tiny_form(Config *c, int form) {
    c->linear_bias = form == TINY_GPT2 || form == TINY_NEOX;
    c->gelu_tanh = form == TINY_GPT2;
    c->rotary_dims = form == TINY_NEOX ? c->n_embd / c->n_head / 2 : form == TINY_ROPE ? c->n_embd / c->n_head : 0;
    c->parallel_residual = form == TINY_NEOX;
    c->tie_embeddings = form != TINY_NEOX;
    if (form == TINY_NEOX) c->ln_bias = 1;
}

/* Values by role: large enough matrices that attention is far from uniform,
 * thresholds near the typical read norm so that gates spread over (0, 1). */
static inline void tiny_randomize(Model *m, uint64_t seed) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        real *p = m->params + t->offset;
        uint64_t key = rng_key(seed, rng_hash_str(t->name), 77);
        for (long j = 0; j < t->numel_real; j++) {
            double n = rng_normal(key, (uint64_t)j), u = tiny_u(key ^ 1, (uint64_t)j);
            switch (t->role) {
            case ROLE_TOKEN_EMBED: case ROLE_LM_HEAD: case ROLE_POS_EMBED: case ROLE_SINK_TOKEN: p[j] = (real)(0.5 * n); break;
            case ROLE_MATRIX: case ROLE_MATRIX_OUT: p[j] = (real)(0.4 * n); break;
            case ROLE_NORM_WEIGHT: p[j] = (real)(1 + 0.2 * n); break;
            case ROLE_NORM_BIAS: p[j] = (real)(0.2 * n); break;
            case ROLE_SINK_LOGIT: p[j] = (real)(2 * u - 1); break;
            case ROLE_GATE_TAU: p[j] = (real)(0.8 + 0.4 * u); break;
            case ROLE_GATE_DIR: p[j] = (real)(0.5 * n); break;
            case ROLE_GATE_BIAS: p[j] = (real)(u - 0.5); break;
            case ROLE_LINEAR_BIAS: p[j] = (real)(0.3 * n); break;
            }
        }
    }
}

/* B sequences of T+1 tokens split into inputs/targets. */
static inline void tiny_batch(const Model *m, int B, uint64_t seed, int32_t *in, int32_t *tg) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= m->T; t++) {
            int32_t tok = (int32_t)rng_below(rng_key(seed, (uint64_t)b, (uint64_t)t), (uint64_t)m->V);
            if (t < m->T) in[b * m->T + t] = tok;
            if (t > 0) tg[b * m->T + t - 1] = tok;
        }
}

#endif
