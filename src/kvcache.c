/* The key-value cache (kvcache.h).  Both entry points run the model's
 * layer as model.c's forward does, on the rows being entered:
 *   x -> LN1 -> qkv (rotated with rotary positions, into the cache) -> gate
 *     -> attention over the cache -> proj, + x -> LN2 -> fc -> GELU -> proj,
 *     + residual
 * (LN2 reads x itself with parallel_residual)
 * with the causal op over a prompt and the decode op for one new row. */
#include "kvcache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"
#include "ops.h"

static real *take(KvCache *kv, long n, int *ok) {
    size_t bytes = sizeof(real) * (size_t)(n > 0 ? n : 1);
    real *p = op_alloc(bytes);
    if (!p) *ok = 0;
    kv->bytes += bytes;
    return p;
}

double kv_bytes(const Model *m, int nseq) {
    const double C = m->C, cap = m->Tp, rows = cap > nseq ? cap : nseq;
    const double cache = (double)m->L * nseq * cap * (3 + (model_reads_gated(m) ? 1 : 0)) * C;
    const double scratch = rows * (12 * C + 2 + 2 * m->H) + nseq * 3 * C + cap * m->H + (double)nseq * m->V;
    return (cache + scratch) * sizeof(real) + rows * sizeof(int32_t);
}

int kv_init(KvCache *kv, Model *m, int nseq, char *err, size_t errlen) {
    memset(kv, 0, sizeof *kv);
    kv->m = m;
    kv->nseq = nseq;
    kv->cap = m->Tp;
    kv->gated = model_reads_gated(m);
    const long C = m->C, rows = kv->cap > nseq ? kv->cap : nseq, L = m->L;
    int ok = (kv->qkv = calloc((size_t)L, sizeof *kv->qkv)) && (kv->vg = calloc((size_t)L, sizeof *kv->vg));
    for (long l = 0; ok && l < L; l++) {
        kv->qkv[l] = take(kv, (long)nseq * kv->cap * 3 * C, &ok);
        if (kv->gated) kv->vg[l] = take(kv, (long)nseq * kv->cap * C, &ok);
    }
    if (ok) {
        kv->x = take(kv, rows * C, &ok), kv->ln = take(kv, rows * C, &ok), kv->atty = take(kv, rows * C, &ok);
        kv->res = take(kv, rows * C, &ok), kv->qkv_new = take(kv, (long)nseq * 3 * C, &ok);
        kv->fch = take(kv, rows * 4 * C, &ok), kv->fch_gelu = take(kv, rows * 4 * C, &ok);
        kv->mean = take(kv, rows, &ok), kv->rstd = take(kv, rows, &ok);
        kv->lse = take(kv, rows * m->H, &ok), kv->g = take(kv, rows * m->H, &ok);
        kv->logbias = take(kv, (long)kv->cap * m->H, &ok), kv->logits = take(kv, (long)nseq * m->V, &ok);
        size_t tb = sizeof(int32_t) * (size_t)rows;
        if (!(kv->tok = op_alloc(tb))) ok = 0;
        kv->bytes += tb;
    }
    if (!ok) {
        snprintf(err, errlen, "out of %s memory for the key-value cache of %d sequence%s (%.1f MiB)",
                 op_host_memory() ? "host" : "device", nseq, nseq == 1 ? "" : "s", (double)kv->bytes / (1 << 20));
        kv_free(kv);
        return -1;
    }
    return 0;
}

void kv_free(KvCache *kv) {
    for (int l = 0; kv->qkv && l < kv->m->L; l++) {
        op_free(kv->qkv[l]);
        if (kv->vg) op_free(kv->vg[l]);
    }
    free(kv->qkv), free(kv->vg);
    real *s[] = {kv->x, kv->ln, kv->qkv_new, kv->atty, kv->res, kv->fch, kv->fch_gelu,
                 kv->mean, kv->rstd, kv->lse, kv->g, kv->logbias, kv->logits};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) op_free(s[i]);
    op_free(kv->tok);
    free(kv->tel), free(kv->h_lse), free(kv->h_g), free(kv->h_lb), free(kv->h_q), free(kv->h_k0), free(kv->h_sink);
    memset(kv, 0, sizeof *kv);
}

/* Sequence b's cache rows of layer l: q | k | v, and g v when gated. */
static real *qkv_rows(const KvCache *kv, int l, int b) {
    return kv->qkv[l] + (size_t)b * kv->cap * 3 * kv->m->C;
}
static real *vg_rows(const KvCache *kv, int l, int b) { return kv->vg[l] + (size_t)b * kv->cap * kv->m->C; }

int kv_telemetry(KvCache *kv, char *err, size_t errlen) {
    const Model *m = kv->m;
    const size_t H = (size_t)m->H, n = H * (size_t)kv->cap, L = (size_t)m->L, C = (size_t)m->C;
    kv->tel = calloc((size_t)kv->nseq * L * KV_TEL * H, sizeof(real));
    kv->h_lse = malloc(n * sizeof(real)), kv->h_g = malloc(n * sizeof(real)), kv->h_lb = malloc(n * sizeof(real));
    kv->h_q = malloc(C * sizeof(real)), kv->h_k0 = malloc(C * sizeof(real));
    kv->h_sink = calloc(L * H, sizeof(real));
    if (!kv->tel || !kv->h_lse || !kv->h_g || !kv->h_lb || !kv->h_q || !kv->h_k0 || !kv->h_sink)
        return snprintf(err, errlen, "out of host memory for the telemetry"), -1;
    if (arm_has_sink_logit(m->arm)) /* the learned phantom logits, from the host copy of the parameters */
        for (size_t l = 0; l < L; l++)
            memcpy(kv->h_sink + l * H, m->h_params + (m->p.layer[l].sink - m->params), H * sizeof(real));
    return 0;
}

/* Layer l's telemetry for sequence b's position `row` (kvcache.h): head h's
 * LSE at lse[h ls], its gate at g[h gs] (g NULL: no gate), the log-bias of
 * key 0 at lb[h lbs] (lb NULL: none); each op buffer is read over
 * (H - 1) stride + 1 reals from the pointer. */
static void tel_record(KvCache *kv, int l, int b, int row, const real *lse, long ls, const real *g, long gs,
                       const real *lb, long lbs) {
    const Model *m = kv->m;
    const int H = m->H, d = m->d, C = m->C;
    const real *qkv = qkv_rows(kv, l, b);
    op_download(kv->h_lse, lse, sizeof(real) * (size_t)((H - 1) * ls + 1));
    if (g) op_download(kv->h_g, g, sizeof(real) * (size_t)((H - 1) * gs + 1));
    if (lb) op_download(kv->h_lb, lb, sizeof(real) * (size_t)((H - 1) * lbs + 1));
    op_download(kv->h_q, qkv + (size_t)row * 3 * C, sizeof(real) * (size_t)C);
    op_download(kv->h_k0, qkv + C, sizeof(real) * (size_t)C);
    real *t = kv->tel + ((size_t)b * m->L + l) * KV_TEL * H;
    for (int h = 0; h < H; h++) {
        double dot = 0;
        for (int e = 0; e < d; e++) dot += (double)kv->h_q[h * d + e] * kv->h_k0[h * d + e];
        const double L = kv->h_lse[h * ls], s0 = dot / sqrt((double)d) + (lb ? kv->h_lb[h * lbs] : 0);
        t[KV_TEL_POS0 * H + h] = (real)exp(s0 - L);
        t[KV_TEL_PHANTOM * H + h] = arm_has_phantom(m->arm) ? (real)exp(kv->h_sink[l * H + h] - L) : 0;
        t[KV_TEL_GATE * H + h] = g ? kv->h_g[h * gs] : 1;
    }
}

/* The rest of layer l for N rows whose attention output is in atty and
 * whose input is x: x becomes the layer's output. */
static void mlp_half(KvCache *kv, int l, int N) {
    const Model *m = kv->m;
    const LayerTensors *lt = &m->p.layer[l];
    const int C = m->C;
    model_linear(kv->res, kv->atty, lt->attn_proj, lt->attn_proj_b, N, C, C);
    if (m->cfg.parallel_residual) { /* the MLP reads the layer's input */
        op_layernorm_fwd(kv->ln, kv->mean, kv->rstd, kv->x, lt->ln2_w, lt->ln2_b, N, C);
        op_add(kv->res, kv->res, kv->x, (long)N * C);
    } else {
        op_residual_layernorm_fwd(kv->res, kv->ln, kv->mean, kv->rstd, kv->res, kv->x, lt->ln2_w, lt->ln2_b, N, C);
    }
    model_linear(kv->fch, kv->ln, lt->fc_w, lt->fc_b, N, C, 4 * C);
    model_gelu(m, kv->fch_gelu, kv->fch, (long)N * 4 * C);
    model_linear(kv->x, kv->fch_gelu, lt->fc_proj, lt->fc_proj_b, N, 4 * C, C);
    op_add(kv->x, kv->x, kv->res, (long)N * C);
}

/* Logits of rows x[first .. first + n) into host memory. */
static void final_logits(KvCache *kv, int first, int n, real *logits) {
    const Model *m = kv->m;
    const int C = m->C;
    op_layernorm_fwd(kv->ln, kv->mean, kv->rstd, kv->x + (size_t)first * C, m->p.lnf_w, m->p.lnf_b, n, C);
    op_logits(kv->logits, kv->ln, model_head(m), n, C, m->V);
    op_download(logits, kv->logits, sizeof(real) * (size_t)n * m->V);
}

void kv_prefill(KvCache *kv, const int32_t *tokens, int n, real *logits) {
    Model *m = kv->m;
    const int C = m->C, H = m->H, d = m->d, P = n + (kv->cap - m->T);
    op_upload(kv->tok, tokens, sizeof(int32_t) * (size_t)n);
    op_embed_fwd(kv->x, kv->tok, m->p.wte, m->p.wpe, m->p.sink_token, 1, n, C);
    for (int l = 0; l < m->L; l++) {
        const LayerTensors *lt = &m->p.layer[l];
        real *qkv = qkv_rows(kv, l, 0);
        op_layernorm_fwd(kv->ln, kv->mean, kv->rstd, kv->x, lt->ln1_w, lt->ln1_b, P, C);
        model_linear(qkv, kv->ln, lt->attn_w, lt->attn_b, P, C, 3 * C);
        model_rope(m, qkv, 1, P, 0, 0);
        GateParams gp = model_gate_params(m, l);
        const int routing = gp.kind != GATE_NONE && gp.slot == SLOT_ROUTING;
        if (gp.kind != GATE_NONE)
            op_gate_fwd(kv->g, kv->gated ? vg_rows(kv, l, 0) : NULL, routing ? kv->logbias : NULL, qkv + 2 * C,
                        3 * C, &gp, 1, P, H, d);
        AttnArgs aa = model_attn_args(m, l, 1, P, routing ? kv->logbias : NULL);
        op_attention_fwd(kv->atty, kv->lse, qkv, qkv + C, kv->gated ? vg_rows(kv, l, 0) : qkv + 2 * C, &aa);
        if (kv->tel) /* lse and g are [H, P]: the last row's at h P + P - 1 */
            tel_record(kv, l, 0, P - 1, kv->lse + P - 1, P, gp.kind != GATE_NONE ? kv->g + P - 1 : NULL, P,
                       routing ? kv->logbias : NULL, P);
        mlp_half(kv, l, P);
        for (int b = 1; b < kv->nseq; b++) {
            op_copy(qkv_rows(kv, l, b), qkv, sizeof(real) * (size_t)P * 3 * C);
            if (kv->gated) op_copy(vg_rows(kv, l, b), vg_rows(kv, l, 0), sizeof(real) * (size_t)P * C);
        }
    }
    kv->len = P;
    kv->ntok = n;
    if (kv->tel)
        for (int b = 1; b < kv->nseq; b++)
            memcpy(kv->tel + (size_t)b * m->L * KV_TEL * H, kv->tel, sizeof(real) * (size_t)m->L * KV_TEL * H);
    final_logits(kv, P - 1, 1, logits);
}

void kv_step(KvCache *kv, const int32_t *tokens, real *logits) {
    Model *m = kv->m;
    const int C = m->C, H = m->H, d = m->d, B = kv->nseq, p = kv->len;
    op_upload(kv->tok, tokens, sizeof(int32_t) * (size_t)B);
    /* token t = ntok of every sequence: wte[tok] + wpe[t] (the op's row 0 of
     * a one-position batch, with wpe shifted to row t); rotary positions
     * turn its q and k instead, at its row p of the cache (a sink token's
     * row 0 counted, as in the forward) */
    op_embed_fwd(kv->x, kv->tok, m->p.wte, m->p.wpe ? m->p.wpe + (size_t)kv->ntok * C : NULL, NULL, B, 1, C);
    for (int l = 0; l < m->L; l++) {
        const LayerTensors *lt = &m->p.layer[l];
        op_layernorm_fwd(kv->ln, kv->mean, kv->rstd, kv->x, lt->ln1_w, lt->ln1_b, B, C);
        model_linear(kv->qkv_new, kv->ln, lt->attn_w, lt->attn_b, B, C, 3 * C);
        model_rope(m, kv->qkv_new, B, 1, p, 0);
        GateParams gp = model_gate_params(m, l);
        const int routing = gp.kind != GATE_NONE && gp.slot == SLOT_ROUTING;
        for (int b = 0; b < B; b++) {
            real *qkv = qkv_rows(kv, l, b), *row = qkv + (size_t)p * 3 * C;
            op_copy(row, kv->qkv_new + (size_t)b * 3 * C, sizeof(real) * 3 * (size_t)C);
            if (kv->gated) op_gate_fwd(kv->g, vg_rows(kv, l, b) + (size_t)p * C, NULL, row + 2 * C, 3 * C, &gp, 1, 1, H, d);
            if (routing) op_gate_fwd(kv->g, NULL, kv->logbias, qkv + 2 * C, 3 * C, &gp, 1, p + 1, H, d);
            AttnArgs aa = model_attn_args(m, l, 1, p + 1, routing ? kv->logbias : NULL);
            op_attention_decode_fwd(kv->atty + (size_t)b * C, kv->lse + (size_t)b * H, row, qkv + C,
                                    kv->gated ? vg_rows(kv, l, b) : qkv + 2 * C, &aa);
            if (kv->tel) /* the routing slot's g and log-bias are [H, p + 1] */
                tel_record(kv, l, b, p, kv->lse + (size_t)b * H, 1,
                           gp.kind == GATE_NONE ? NULL : routing ? kv->g + p : kv->g, routing ? p + 1 : 1,
                           routing ? kv->logbias : NULL, p + 1);
        }
        mlp_half(kv, l, B);
    }
    kv->len = p + 1;
    kv->ntok++;
    final_logits(kv, 0, B, logits);
}
