/* Generation with a key-value cache, for every arm.
 *
 * Each layer keeps, for every position already entered, the row its qkv
 * projection wrote (q | k | v) and, in the arms that gate in the value slot,
 * the gated value g v that the attention reads: written once, when the
 * position enters, because each gate is a function of the read it
 * multiplies (the paper's Table 4: every arm is compatible with the cache).
 * The routing slot's bias log g is a function of the raw read too; it is
 * recomputed over the cached reads at each step (op_gate_fwd over the
 * prefix: H x len x d multiply-adds, half the decode attention's own
 * work), which keeps every arm's arithmetic inside the gate and attention
 * ops as training has it.
 *
 * A new position costs one row through each layer and one decode attention
 * (ops.h: op_attention_decode_fwd) over the cached keys, instead of a whole
 * forward over the prefix.  Logits agree with model_logits's full forward
 * at every position to rounding (tests/dtest_kvcache.c checks every arm).
 *
 * Positions: a sequence of n tokens takes n cache rows, n + 1 in the
 * sink-token arm, whose row 0 is the learned sink (no positional
 * embedding); token t has positional embedding t, so at most the model's
 * block_size tokens fit.  All sequences of one cache advance together:
 * they share a prompt and take one token each per step. */
#ifndef SG_KVCACHE_H
#define SG_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
    Model *m;
    int nseq, cap;   /* sequences; cache rows each (block_size, + 1 with a sink token) */
    int len;         /* rows filled in every sequence */
    int ntok;        /* tokens entered (len less the sink row) */
    int gated;       /* the attention reads g v (value-slot filter arms) */
    real **qkv;      /* [L]: [nseq][cap][3C] */
    real **vg;       /* [L]: [nseq][cap][C] when gated */
    /* scratch op buffers, rows = max(cap, nseq) */
    real *x, *ln, *qkv_new, *atty, *res, *fch, *fch_gelu, *mean, *rstd, *lse, *g, *logbias, *logits;
    int32_t *tok;    /* [max(cap, nseq)] the tokens being entered */
    size_t bytes;    /* op memory held */
    /* telemetry (kv_telemetry): host, tel [nseq][L][KV_TEL][H], and the
     * host copies it is computed from */
    real *tel, *h_lse, *h_g, *h_lb, *h_q, *h_k0, *h_sink;
} KvCache;

/* What the query of the position just entered did in each layer and head,
 * recorded when kv_telemetry is on:
 *   KV_TEL_POS0     its attention on the cache's first row: the sink token
 *                   in that arm, the <|endoftext|> that starts the text in
 *                   the others, exp(q.k_0/sqrt(d) + lb_0 - LSE);
 *   KV_TEL_PHANTOM  its attention on the phantom, exp(c_h - LSE) (arms with
 *                   one; 0 in the others);
 *   KV_TEL_GATE     the gate of its own read, g (filter arms; 1 in the
 *                   others). */
enum { KV_TEL_POS0, KV_TEL_PHANTOM, KV_TEL_GATE, KV_TEL };

/* The op memory a cache for NSEQ sequences takes, in bytes. */
double kv_bytes(const Model *m, int nseq);

/* A cache for NSEQ sequences of the model's block_size tokens.  0, or -1
 * with a message (out of device memory). */
int kv_init(KvCache *kv, Model *m, int nseq, char *err, size_t errlen);
void kv_free(KvCache *kv);

/* Turns telemetry on: after each kv_prefill or kv_step, kv->tel holds the
 * values above for every sequence's last entered position.  0, or -1 with a
 * message (out of host memory). */
int kv_telemetry(KvCache *kv, char *err, size_t errlen);

/* Enters the N tokens of a prompt (1 <= N <= block_size) into every
 * sequence of an empty cache, as one causal forward over the prompt, and
 * writes the logits [V] that follow its last token (host memory). */
void kv_prefill(KvCache *kv, const int32_t *tokens, int n, real *logits);

/* Enters one token per sequence (tokens [nseq]; kv->ntok < block_size) and
 * writes the logits [nseq, V] that follow each (host memory). */
void kv_step(KvCache *kv, const int32_t *tokens, real *logits);

#endif
