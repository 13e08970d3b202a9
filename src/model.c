/* The model's tensor table, initialisation, and the forward/backward graph.
 * Arm-specific behaviour enters only through the capabilities of the arm
 * (phantom, learned sink logit, sink token, filter kind and slot), which
 * select arguments of the one attention op and the one gate op. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "profile.h"
#include "rng.h"

#define ALIGN_ELEMS 16 /* 64-byte alignment of every tensor in the flat buffer */

static long round_up(long x, long a) { return (x + a - 1) / a * a; }

static int role_decays(TensorRole r) {
    /* Weight decay on every matrix and embedding (dimension >= 2 in the
     * paper's words) and on nothing whose zero has a mechanistic meaning:
     * sink logits, gate thresholds, directions and biases, LayerNorm, and
     * (as nanoGPT, which decays only tensors of dimension >= 2) the linear
     * layers' biases. */
    return r == ROLE_TOKEN_EMBED || r == ROLE_LM_HEAD || r == ROLE_POS_EMBED || r == ROLE_MATRIX ||
           r == ROLE_MATRIX_OUT;
}

static int role_arm_extra(TensorRole r) {
    return r == ROLE_SINK_TOKEN || r == ROLE_SINK_LOGIT || r == ROLE_GATE_TAU ||
           r == ROLE_GATE_DIR || r == ROLE_GATE_BIAS;
}

static void add_tensor(Model *m, const char *name, TensorRole role, int layer, int d0, int d1,
                       long stored_rows) {
    TensorInfo *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->role = role;
    t->layer = layer;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel_real = (long)d0 * (d1 > 0 ? d1 : 1);
    t->numel = stored_rows * (d1 > 0 ? d1 : 1);
    t->offset = m->n_params;
    t->decay = role_decays(role);
    t->arm_extra = role_arm_extra(role);
    m->n_params += round_up(t->numel, ALIGN_ELEMS);
}

static void build_table(Model *m) {
    const Arm *arm = m->arm;
    int C = m->C, H = m->H, d = m->d, lnb = m->cfg.ln_bias, lib = m->cfg.linear_bias;
    char n[64];
    m->n_tensors = 0;
    m->n_params = 0;
    add_tensor(m, "wte", ROLE_TOKEN_EMBED, -1, m->V, C, m->Vp);
    /* beside wte, in the vector's head: the classifier's gradients are
     * final only after the embeddings' (GradHook) */
    if (!m->cfg.tie_embeddings) add_tensor(m, "lm_head.weight", ROLE_LM_HEAD, -1, m->V, C, m->Vp);
    if (!m->cfg.rotary_dims) add_tensor(m, "wpe", ROLE_POS_EMBED, -1, m->T, C, m->T);
    if (arm_has_sink_token(arm)) add_tensor(m, "sink_token", ROLE_SINK_TOKEN, -1, C, 0, C);
    for (int l = 0; l < m->L; l++) {
#define T_(suffix, role, d0, d1)                                  \
    do {                                                          \
        snprintf(n, sizeof n, "h.%d.%s", l, suffix);              \
        add_tensor(m, n, role, l, d0, d1, d0);                    \
    } while (0)
        T_("ln_1.weight", ROLE_NORM_WEIGHT, C, 0);
        if (lnb) T_("ln_1.bias", ROLE_NORM_BIAS, C, 0);
        T_("attn.c_attn.weight", ROLE_MATRIX, 3 * C, C);
        if (lib) T_("attn.c_attn.bias", ROLE_LINEAR_BIAS, 3 * C, 0);
        if (arm_has_sink_logit(arm)) T_("attn.sink_logit", ROLE_SINK_LOGIT, H, 0);
        if (arm->filter == FILTER_NORM) T_("attn.gate_tau", ROLE_GATE_TAU, H, 0);
        if (arm->filter == FILTER_PROJ) {
            T_("attn.gate_w", ROLE_GATE_DIR, H, d);
            T_("attn.gate_b", ROLE_GATE_BIAS, H, 0);
        }
        T_("attn.c_proj.weight", ROLE_MATRIX_OUT, C, C);
        if (lib) T_("attn.c_proj.bias", ROLE_LINEAR_BIAS, C, 0);
        T_("ln_2.weight", ROLE_NORM_WEIGHT, C, 0);
        if (lnb) T_("ln_2.bias", ROLE_NORM_BIAS, C, 0);
        T_("mlp.c_fc.weight", ROLE_MATRIX, 4 * C, C);
        if (lib) T_("mlp.c_fc.bias", ROLE_LINEAR_BIAS, 4 * C, 0);
        T_("mlp.c_proj.weight", ROLE_MATRIX_OUT, C, 4 * C);
        if (lib) T_("mlp.c_proj.bias", ROLE_LINEAR_BIAS, C, 0);
#undef T_
    }
    add_tensor(m, "ln_f.weight", ROLE_NORM_WEIGHT, -1, C, 0, C);
    if (lnb) add_tensor(m, "ln_f.bias", ROLE_NORM_BIAS, -1, C, 0, C);
}

/* Named views of a flat buffer (params or grads) through the table. */
static void bind(const Model *m, real *base, ModelTensors *v) {
    LayerTensors *layers = v->layer;
    memset(v, 0, sizeof *v);
    memset(layers, 0, sizeof(LayerTensors) * m->L);
    v->layer = layers;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        real *p = base + t->offset;
        const char *s = t->name;
        if (t->layer < 0) {
            if (!strcmp(s, "wte")) v->wte = p;
            else if (!strcmp(s, "lm_head.weight")) v->lm_head = p;
            else if (!strcmp(s, "wpe")) v->wpe = p;
            else if (!strcmp(s, "sink_token")) v->sink_token = p;
            else if (!strcmp(s, "ln_f.weight")) v->lnf_w = p;
            else if (!strcmp(s, "ln_f.bias")) v->lnf_b = p;
            continue;
        }
        LayerTensors *L = &layers[t->layer];
        s = strchr(s + 2, '.') + 1; /* skip "h.<l>." */
        if (!strcmp(s, "ln_1.weight")) L->ln1_w = p;
        else if (!strcmp(s, "ln_1.bias")) L->ln1_b = p;
        else if (!strcmp(s, "attn.c_attn.weight")) L->attn_w = p;
        else if (!strcmp(s, "attn.sink_logit")) L->sink = p;
        else if (!strcmp(s, "attn.gate_tau")) L->tau = p;
        else if (!strcmp(s, "attn.gate_w")) L->gate_w = p;
        else if (!strcmp(s, "attn.gate_b")) L->gate_b = p;
        else if (!strcmp(s, "attn.c_proj.weight")) L->attn_proj = p;
        else if (!strcmp(s, "ln_2.weight")) L->ln2_w = p;
        else if (!strcmp(s, "ln_2.bias")) L->ln2_b = p;
        else if (!strcmp(s, "mlp.c_fc.weight")) L->fc_w = p;
        else if (!strcmp(s, "mlp.c_proj.weight")) L->fc_proj = p;
        else if (!strcmp(s, "attn.c_attn.bias")) L->attn_b = p;
        else if (!strcmp(s, "attn.c_proj.bias")) L->attn_proj_b = p;
        else if (!strcmp(s, "mlp.c_fc.bias")) L->fc_b = p;
        else if (!strcmp(s, "mlp.c_proj.bias")) L->fc_proj_b = p;
    }
}

/* op buffers are padded to ALIGN_ELEMS and zeroed */
static real *alloc_zero(long n) { return op_alloc((size_t)round_up(n, ALIGN_ELEMS) * sizeof(real)); }

static real *host_mirror(real *dev, long n) {
    if (op_host_memory()) return dev;
    return calloc((size_t)round_up(n, ALIGN_ELEMS), sizeof(real));
}

void model_state_download(Model *m) {
    size_t opt = (size_t)m->opt_len * sizeof(real);
    op_download(m->h_params, m->params, (size_t)m->n_params * sizeof(real));
    op_download(m->h_adam_m, m->adam_m, opt);
    op_download(m->h_adam_v, m->adam_v, opt);
}

void model_state_upload(Model *m) {
    size_t opt = (size_t)m->opt_len * sizeof(real);
    op_upload(m->params, m->h_params, (size_t)m->n_params * sizeof(real));
    op_upload(m->adam_m, m->h_adam_m, opt);
    op_upload(m->adam_v, m->h_adam_v, opt);
}

int model_describe(Model *m, const Config *c, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->arm = arm_find(c->arm);
    if (!m->arm) {
        snprintf(err, errlen, "unknown arm '%s' (known: %s)", c->arm, arm_names());
        return -1;
    }
    if (c->n_head <= 0 || c->n_embd % c->n_head) {
        snprintf(err, errlen, "n_embd %d is not divisible by n_head %d", c->n_embd, c->n_head);
        return -1;
    }
    if (c->rotary_dims < 0 || c->rotary_dims % 2 || c->rotary_dims > c->n_embd / c->n_head) {
        snprintf(err, errlen, "rotary_dims %d must be even and at most the head dim %d", c->rotary_dims,
                 c->n_embd / c->n_head);
        return -1;
    }
    m->L = c->n_layer;
    m->H = c->n_head;
    m->C = c->n_embd;
    m->d = c->n_embd / c->n_head;
    m->T = c->block_size;
    m->V = c->vocab_size;
    m->Vp = (int)round_up(c->vocab_size, 64);
    m->Tp = arm_has_sink_token(m->arm) ? m->T + 1 : m->T;
    m->tensors = calloc(16 + 16 * (size_t)m->L, sizeof(TensorInfo));
    m->p.layer = calloc((size_t)m->L, sizeof(LayerTensors));
    m->g.layer = calloc((size_t)m->L, sizeof(LayerTensors));
    if (!m->tensors || !m->p.layer || !m->g.layer) goto oom;
    build_table(m);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    model_free(m);
    return -1;
}

/* op_rope's table for positions [0, T + 1): pair i of position p turns by
 * theta = p / base^(2i / rd).  The exponent, the frequency and the angle
 * are each rounded to fp32, as GPT-NeoX's reference code computes them, so
 * that an imported model sees the angles it was trained with (at p = 2048
 * the fp32 angle is off the exact one by up to 1e-4 rad); the cosine and
 * sine of that angle are then taken in double. */
static int build_rope(Model *m) {
    const int rd = m->cfg.rotary_dims, h = rd / 2, rows = m->T + 1;
    real *cs = malloc(sizeof(real) * (size_t)rows * rd);
    m->rope_cs = op_alloc(sizeof(real) * (size_t)rows * rd);
    if (!cs || !m->rope_cs) {
        free(cs);
        return -1;
    }
    for (int i = 0; i < h; i++) {
        const float e = (float)(2 * i) / (float)rd, inv = 1.0f / powf((float)m->cfg.rotary_base, e);
        for (int p = 0; p < rows; p++) {
            const float a = (float)p * inv;
            cs[(size_t)p * rd + i] = (real)cos((double)a);
            cs[(size_t)p * rd + h + i] = (real)sin((double)a);
        }
    }
    op_upload(m->rope_cs, cs, sizeof(real) * (size_t)rows * rd);
    free(cs);
    m->rope_rows = rows;
    return 0;
}

int model_build(Model *m, const Config *c, char *err, size_t errlen) {
    if (model_describe(m, c, err, errlen)) return -1;
    m->params = alloc_zero(m->n_params);
    m->grads = alloc_zero(m->n_params);
    m->adam_m = alloc_zero(m->n_params);
    m->adam_v = alloc_zero(m->n_params);
    m->h_params = m->params ? host_mirror(m->params, m->n_params) : NULL;
    m->h_adam_m = m->adam_m ? host_mirror(m->adam_m, m->n_params) : NULL;
    m->h_adam_v = m->adam_v ? host_mirror(m->adam_v, m->n_params) : NULL;
    if (!m->params || !m->grads || !m->adam_m || !m->adam_v) goto oom;
    m->opt_off = 0;
    m->opt_len = m->n_params;
    op_params(m->params, m->n_params);
    bind(m, m->params, &m->p);
    bind(m, m->grads, &m->g);
    if (m->cfg.rotary_dims && build_rope(m)) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory allocating %ld parameters (x4 for gradients and AdamW state)",
             m->n_params);
    model_free(m);
    return -1;
}

/* params and grads to flat_len elements, the tail zero (model_shard_optim) */
static int pad_flat(Model *m, long flat_len) {
    if (flat_len <= m->n_params) return 0;
    real *p = alloc_zero(flat_len), *g = alloc_zero(flat_len);
    if (!p || !g) {
        op_free(p);
        op_free(g);
        return -1;
    }
    op_free(m->grads);
    m->grads = g;
    if (m->h_params == m->params) {
        op_free(m->params);
        m->params = m->h_params = p;
    } else { /* the host mirror keeps n_params elements */
        op_free(m->params);
        m->params = p;
    }
    op_params(m->params, flat_len);
    bind(m, m->params, &m->p);
    bind(m, m->grads, &m->g);
    return 0;
}

int model_shard_optim(Model *m, long off, long len, long flat_len, char *err, size_t errlen) {
    if (off < 0 || len < 0 || off + len > m->n_params) {
        snprintf(err, errlen, "AdamW shard [%ld, %ld) is outside the %ld parameters", off, off + len, m->n_params);
        return -1;
    }
    if (pad_flat(m, flat_len)) {
        snprintf(err, errlen, "out of memory padding the parameters and gradients to %ld elements", flat_len);
        return -1;
    }
    if (m->h_adam_m != m->adam_m) free(m->h_adam_m);
    if (m->h_adam_v != m->adam_v) free(m->h_adam_v);
    op_free(m->adam_m);
    op_free(m->adam_v);
    m->opt_off = off;
    m->opt_len = len;
    m->opt_sharded = 1;
    m->adam_m = alloc_zero(len);
    m->adam_v = alloc_zero(len);
    m->h_adam_m = m->adam_m ? host_mirror(m->adam_m, len) : NULL;
    m->h_adam_v = m->adam_v ? host_mirror(m->adam_v, len) : NULL;
    if (m->adam_m && m->adam_v && m->h_adam_m && m->h_adam_v) return 0;
    snprintf(err, errlen, "out of memory allocating the AdamW state of %ld parameters", len);
    return -1;
}

static void release_acts(Model *m);

void model_free(Model *m) {
    free(m->tensors);
    free(m->p.layer);
    free(m->g.layer);
    if (m->h_params != m->params) free(m->h_params);
    if (m->h_adam_m != m->adam_m) free(m->h_adam_m);
    if (m->h_adam_v != m->adam_v) free(m->h_adam_v);
    op_free(m->params);
    op_free(m->grads);
    op_free(m->adam_m);
    op_free(m->adam_v);
    op_free(m->rope_cs);
    release_acts(m);
    free(m->a.layer);
    op_free(m->act_mem);
    op_free(m->inputs);
    op_free(m->targets);
    memset(m, 0, sizeof *m);
}

void model_init(Model *m, uint64_t seed) {
    double std = m->cfg.init_std, std_out = std / sqrt(2.0 * m->L);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        real *p = m->h_params + t->offset;
        uint64_t key = rng_key(seed, rng_hash_str(t->name), 0x1417);
        memset(p, 0, (size_t)t->numel * sizeof(real));
        switch (t->role) {
        case ROLE_TOKEN_EMBED:
        case ROLE_LM_HEAD:
        case ROLE_POS_EMBED:
        case ROLE_SINK_TOKEN:
        case ROLE_MATRIX:
            for (long j = 0; j < t->numel_real; j++) p[j] = (real)(std * rng_normal(key, (uint64_t)j));
            break;
        case ROLE_MATRIX_OUT:
            for (long j = 0; j < t->numel_real; j++) p[j] = (real)(std_out * rng_normal(key, (uint64_t)j));
            break;
        case ROLE_NORM_WEIGHT:
            for (long j = 0; j < t->numel_real; j++) p[j] = 1;
            break;
        case ROLE_NORM_BIAS:
        case ROLE_LINEAR_BIAS: /* zero, as PyTorch's GPT-2 initialises them */
        case ROLE_SINK_LOGIT: /* b_h = 0: starts as off-by-one */
        case ROLE_GATE_DIR:   /* w_h = 0 ... */
            break;
        case ROLE_GATE_BIAS: /* ... and b_h = 4: g = sigmoid(4) ~ 0.98, near identity */
            for (long j = 0; j < t->numel_real; j++) p[j] = 4;
            break;
        case ROLE_GATE_TAU: /* tau = -4/beta: g >= sigmoid(4) for every read */
            for (long j = 0; j < t->numel_real; j++) p[j] = (real)(-4.0 / m->cfg.gate_beta);
            break;
        }
    }
    memset(m->h_adam_m, 0, (size_t)m->opt_len * sizeof(real));
    memset(m->h_adam_v, 0, (size_t)m->opt_len * sizeof(real));
    model_state_upload(m);
}

/* ---- activations -------------------------------------------------------- */

typedef struct {
    real *base;
    long used;
} Carver;

/* Every activation starts 256 bytes aligned: a tensor's bf16 twin may
 * live in its own first bytes (ops.h, op_promised_len) and be a matmul's
 * operand there, and cuBLASLt's fastest kernels want 256-byte operands
 * (kernels/cuda/matmul.cu asks for them). */
#define ACT_ALIGN_ELEMS 64

static real *carve(Carver *c, long n) {
    real *p = c->base ? c->base + c->used : NULL;
    c->used += round_up(n, ACT_ALIGN_ELEMS);
    return p;
}

/* A promised tensor's reals (ops.h, op_promised_len): all n on the CPU, and
 * half on a GPU that keeps only its bf16 values (a bf16 or attention
 * operand) or only its twin, in place (a tensor promised to matmuls).
 * qkv_on: each layer's qkv and vg are promised (promise_acts), as they are
 * while no analysis hook runs. */
static long layout_acts(Model *m, int B, real *base, int qkv_on) {
    Carver cv = {base, 0};
    const int lib = m->cfg.linear_bias; /* promises nothing a bias op touches (promise_acts) */
    const Arm *arm = m->arm;
    long C = m->C, N = (long)B * m->Tp, NT = (long)B * m->T, BHT = (long)B * m->H * m->Tp;
    const long att_qkv = qkv_on ? op_promised_len(OP_PROMISE_ATTENTION, N * 3 * C) : N * 3 * C;
    const long att_vg = qkv_on ? op_promised_len(OP_PROMISE_ATTENTION, N * C) : N * C;
    const long mm_c = op_promised_len(OP_PROMISE_MATMULS, N * C), mm_4c = op_promised_len(OP_PROMISE_MATMULS, N * 4 * C);
    const long bf_c = op_promised_len(OP_PROMISE_BF16, N * C), bf_4c = op_promised_len(OP_PROMISE_BF16, N * 4 * C);
    Acts *a = &m->a;
    a->x0 = carve(&cv, N * C);
    for (int l = 0; l < m->L; l++) {
        LayerActs *la = &a->layer[l];
        memset(la, 0, sizeof *la);
        la->ln1 = carve(&cv, mm_c);
        la->ln1_mean = carve(&cv, N);
        la->ln1_rstd = carve(&cv, N);
        la->qkv = carve(&cv, att_qkv);
        if (arm->filter != FILTER_NONE) {
            la->gate = carve(&cv, BHT);
            if (arm->slot == FSLOT_VALUE) la->vg = carve(&cv, att_vg);
            else la->logbias = carve(&cv, BHT);
        }
        la->atty = carve(&cv, N * C);
        la->lse = carve(&cv, BHT);
        la->res1 = carve(&cv, N * C);
        la->ln2 = carve(&cv, mm_c);
        la->ln2_mean = carve(&cv, N);
        la->ln2_rstd = carve(&cv, N);
        la->fch = carve(&cv, lib ? N * 4 * C : bf_4c);
        la->fch_gelu = carve(&cv, mm_4c);
        la->res2 = carve(&cv, N * C);
    }
    a->xf = arm_has_sink_token(arm) ? carve(&cv, NT * C) : NULL;
    a->lnf = carve(&cv, NT * C);
    a->lnf_mean = carve(&cv, NT);
    a->lnf_rstd = carve(&cv, NT);
    a->losses = carve(&cv, NT);
    a->dres = carve(&cv, N * C);
    a->dln = carve(&cv, bf_c);
    /* all its reals: under the wmma tiles the attention's backward stores
     * its fp32 (its twin-only promise then keeps the twin in place, as the
     * mma tiles write it, but saves no memory) */
    a->dqkv = carve(&cv, N * 3 * C);
    a->dvg = carve(&cv, N * C);
    a->dlogbias = carve(&cv, BHT);
    a->datty = carve(&cv, op_promised_len(OP_PROMISE_ATTENTION, N * C));
    a->dfch = carve(&cv, lib ? N * 4 * C : mm_4c);
    a->dfch_gelu = carve(&cv, bf_4c);
    a->dxf = arm_has_sink_token(arm) ? carve(&cv, NT * C) : NULL;
    a->dlnf = carve(&cv, NT * C);
    return cv.used;
}

/* Something besides the matmuls and the attention rewrites qkv and its
 * gradient: a linear bias, or the rotation of q and k. */
static int qkv_rewritten(const Model *m) { return m->cfg.linear_bias || m->cfg.rotary_dims; }

/* Promised to matmuls alone (ops.h, op_matmul_only): the LayerNorm outputs
 * and GELU's output, each read only by the matmul right after it and by
 * that matmul's backward; GELU's input gradient, read only by fc's backward
 * right after it; and dqkv, read only by the qkv backward right after the
 * attention's backward and, with a value gate, the gate's (a routing-slot
 * gate's backward reads the dv part, so that arm promises none).  The GPU
 * then stores their bf16 twins only.
 * Promised as bf16 operands (ops.h, op_bf16_operand), each written by a
 * matmul: fc's output, read by GELU's forward and backward; the gradient
 * of GELU's output, read by GELU's backward; and dln, the gradient the
 * qkv and fc backwards hand their LayerNorm's backward.  The GPU stores
 * them in bf16, as autocast does.
 * Promised as attention operands (ops.h, op_attention_operand): datty,
 * the attention projection's dinp, read by the attention's backward alone;
 * each layer's qkv, read by its attention and gate alone; and the value
 * gate's vg, read by the attention alone; the GPU may store them in bf16
 * too.  qkv and vg not while the analyses' hooks run (qkv_on 0): they read
 * them, and one writes qkv.  Every promise is made right after the layout,
 * before anything writes the tensors, as a tensor laid out for its bf16
 * alone needs (op_promised_len).
 * With linear_bias, the bias ops write the outputs of qkv and fc and read
 * the gradients of qkv's and fc's outputs: none of those four is promised
 * (qkv_on is 0 then, ensure_acts), as none of them would keep its promise.
 * Rotary positions likewise rewrite qkv and dqkv in place (qkv_rewritten). */
static void promise_acts(Model *m, int B, int qkv_on) {
    long C = m->C, N = (long)B * m->Tp;
    const int lib = m->cfg.linear_bias;
    for (int l = 0; l < m->L; l++) {
        const LayerActs *la = &m->a.layer[l];
        op_matmul_only(la->ln1, N * C);
        op_matmul_only(la->ln2, N * C);
        op_matmul_only(la->fch_gelu, N * 4 * C);
        if (!lib) op_bf16_operand(la->fch, N * 4 * C);
        if (!qkv_on) continue;
        op_attention_operand(la->qkv, N * 3 * C);
        if (la->vg) op_attention_operand(la->vg, N * C);
    }
    if (!lib) op_matmul_only(m->a.dfch, N * 4 * C);
    op_bf16_operand(m->a.dfch_gelu, N * 4 * C);
    op_bf16_operand(m->a.dln, N * C);
    if (m->arm->slot == FSLOT_VALUE && !qkv_rewritten(m)) op_matmul_only(m->a.dqkv, N * 3 * C);
    op_attention_operand(m->a.datty, N * C);
    m->qkv_promised = qkv_on;
}

static void release_acts(Model *m) {
    if (m->act_mem) op_matmul_only_end(m->act_mem, sizeof(real) * (size_t)m->act_n);
}

/* The activations of a micro-batch of B, laid out for the hooks' state:
 * with hooks (or a single row), qkv and vg are not promised and take all
 * their reals.  A layout that fits the buffer is made in it; a larger one
 * gets a new buffer.  Each new layout ends every promise of the old one
 * first. */
static void ensure_acts(Model *m, int B) {
    /* k = qkv + C and v = qkv + 2C must lie within qkv's reals (ops.h),
     * which a single row (B T = 1) laid out compact would not give */
    const long N = (long)B * m->Tp;
    const int qkv_on = m->hooks == NULL && !qkv_rewritten(m) && op_promised_len(OP_PROMISE_ATTENTION, N * 3 * m->C) > 2L * m->C;
    if (m->act_mem && B == m->B && qkv_on == m->qkv_promised) return;
    if (!m->a.layer && !(m->a.layer = calloc((size_t)m->L, sizeof(LayerActs)))) {
        fprintf(stderr, "sgtrain: out of memory\n");
        exit(1);
    }
    const long n = layout_acts(m, B, NULL, qkv_on);
    release_acts(m);
    if (!m->act_mem || n > m->act_n) {
        op_free(m->act_mem);
        op_free(m->inputs);
        op_free(m->targets);
        m->act_mem = alloc_zero(n);
        m->act_n = n;
        m->inputs = op_alloc(sizeof(int32_t) * (size_t)B * m->T);
        m->targets = op_alloc(sizeof(int32_t) * (size_t)B * m->T);
        if (!m->act_mem || !m->inputs || !m->targets) {
            fprintf(stderr, "sgtrain: out of memory for the activations of a micro-batch of %d "
                            "(%.1f GB); lower micro_batch and raise grad_accum\n",
                    B, (double)n * sizeof(real) / 1e9);
            exit(1);
        }
    }
    layout_acts(m, B, m->act_mem, qkv_on);
    promise_acts(m, B, qkv_on);
    m->B = B;
}

/* ---- forward ------------------------------------------------------------ */

GateParams model_gate_params(const Model *m, int l) {
    const LayerTensors *lt = &m->p.layer[l];
    GateParams gp = {GATE_NONE, SLOT_VALUE, (real)m->cfg.gate_beta, lt->tau, lt->gate_w, lt->gate_b};
    if (m->arm->filter == FILTER_NORM) gp.kind = GATE_NORM;
    if (m->arm->filter == FILTER_PROJ) gp.kind = GATE_PROJ;
    gp.slot = m->arm->slot == FSLOT_ROUTING ? SLOT_ROUTING : SLOT_VALUE;
    return gp;
}

int model_reads_gated(const Model *m) { return m->arm->filter != FILTER_NONE && m->arm->slot == FSLOT_VALUE; }

AttnArgs model_attn_args(const Model *m, int l, int B, int T, const real *logbias) {
    const int C = m->C;
    AttnArgs aa = {B, T, m->H, m->d, 3 * C, 3 * C, model_reads_gated(m) ? C : 3 * C, C, arm_has_phantom(m->arm),
                   arm_has_sink_logit(m->arm) ? m->p.layer[l].sink : NULL, logbias};
    return aa;
}

void model_linear(real *out, const real *inp, const real *w, const real *b, int M, int K, int N) {
    op_matmul_fwd(out, inp, w, M, K, N);
    if (b) op_bias_add(out, b, M, N);
}

void model_gelu(const Model *m, real *out, const real *inp, long n) {
    if (m->cfg.gelu_tanh) op_gelu_tanh_fwd(out, inp, n);
    else op_gelu_fwd(out, inp, n);
}

const real *model_head(const Model *m) { return m->p.lm_head ? m->p.lm_head : m->p.wte; }
real *model_head_grad(Model *m) { return m->g.lm_head ? m->g.lm_head : m->g.wte; }

void model_rope(const Model *m, real *qkv, int B, int T, int pos0, int inverse) {
    const int rd = m->cfg.rotary_dims;
    if (!rd) return;
    if (pos0 < 0 || pos0 + T > m->rope_rows) {
        fprintf(stderr, "sgtrain: internal error: rotary positions [%d, %d) outside the table's %d\n", pos0, pos0 + T,
                m->rope_rows);
        abort();
    }
    op_rope(qkv, qkv + m->C, 3 * m->C, m->rope_cs + (size_t)pos0 * rd, B, T, m->H, m->d, rd, inverse);
}

static const real *values_read(const Model *m, const LayerActs *la) {
    return model_reads_gated(m) ? la->vg : la->qkv + 2 * m->C;
}

/* Causal attention work in multiply-adds x 2 over the kept (j <= i) half:
 * `mats` score-sized products (4 forward: QK^T and PV; 10 backward). */
static double attn_flops(const Model *m, int B, int mats) {
    return (double)mats * B * m->H * ((double)m->Tp * (m->Tp + 1) / 2) * m->d;
}

/* Embeddings through the final LayerNorm; leaves lnf [B*T, C]. */
static void forward_trunk(Model *m, const int32_t *inputs, int B) {
    ensure_acts(m, B);
    const ForwardHooks *hk = m->hooks;
    op_upload(m->inputs, inputs, sizeof(int32_t) * (size_t)B * m->T);
    int C = m->C, N = B * m->Tp;
    Acts *a = &m->a;
    if (!(hk && hk->layer0_qkv))
        PROF(PROF_EMBED, 0, op_embed_fwd(a->x0, m->inputs, m->p.wte, m->p.wpe, m->p.sink_token, B, m->T, C));
    const real *x = a->x0;
    int lnf_done = 0; /* the last residual add also did the final LayerNorm */
    for (int l = 0; l < m->L; l++) {
        LayerActs *la = &a->layer[l];
        const LayerTensors *lt = &m->p.layer[l];
        if (l == 0 && hk && hk->layer0_qkv) {
            op_copy(la->qkv, hk->layer0_qkv, sizeof(real) * (size_t)N * 3 * C);
        } else {
            /* layers after the first got ln1 from the previous layer's residual add */
            if (l == 0)
                PROF(PROF_LAYERNORM, 0, op_layernorm_fwd(la->ln1, la->ln1_mean, la->ln1_rstd, x, lt->ln1_w, lt->ln1_b, N, C));
            PROF(PROF_MATMUL, 2.0 * N * C * 3 * C, op_matmul_fwd(la->qkv, la->ln1, lt->attn_w, N, C, 3 * C));
            if (lt->attn_b) PROF(PROF_POINTWISE, 0, op_bias_add(la->qkv, lt->attn_b, N, 3 * C));
            if (m->cfg.rotary_dims) PROF(PROF_POINTWISE, 0, model_rope(m, la->qkv, B, m->Tp, 0, 0));
        }
        if (hk && hk->values) hk->values(hk->ctx, m, l, B);
        if (m->arm->filter != FILTER_NONE) {
            GateParams gp = model_gate_params(m, l);
            PROF(PROF_GATE, 0, op_gate_fwd(la->gate, la->vg, la->logbias, la->qkv + 2 * C, 3 * C, &gp, B, m->Tp, m->H, m->d));
        }
        AttnArgs aa = model_attn_args(m, l, B, m->Tp, la->logbias);
        if (!(hk && hk->attention && hk->attention(hk->ctx, m, l, B, &aa, values_read(m, la))))
            PROF(PROF_ATTENTION, attn_flops(m, B, 4), op_attention_fwd(la->atty, la->lse, la->qkv, la->qkv + C, values_read(m, la), &aa));
        /* each residual add is fused with the LayerNorm that reads its sum */
        PROF(PROF_MATMUL, 2.0 * N * C * C, op_matmul_fwd(la->res1, la->atty, lt->attn_proj, N, C, C));
        if (lt->attn_proj_b) PROF(PROF_POINTWISE, 0, op_bias_add(la->res1, lt->attn_proj_b, N, C));
        if (m->cfg.parallel_residual) { /* the MLP reads the block's input x, not res1 */
            PROF(PROF_POINTWISE, 0, op_add(la->res1, la->res1, x, (long)N * C));
            PROF(PROF_LAYERNORM, 0, op_layernorm_fwd(la->ln2, la->ln2_mean, la->ln2_rstd, x, lt->ln2_w, lt->ln2_b, N, C));
        } else {
            PROF(PROF_LAYERNORM, 0,
                 op_residual_layernorm_fwd(la->res1, la->ln2, la->ln2_mean, la->ln2_rstd, la->res1, x, lt->ln2_w,
                                           lt->ln2_b, N, C));
        }
        PROF(PROF_MATMUL, 2.0 * N * C * 4 * C, op_matmul_fwd(la->fch, la->ln2, lt->fc_w, N, C, 4 * C));
        if (lt->fc_b) PROF(PROF_POINTWISE, 0, op_bias_add(la->fch, lt->fc_b, N, 4 * C));
        if (m->cfg.gelu_tanh) PROF(PROF_POINTWISE, 0, op_gelu_tanh_fwd(la->fch_gelu, la->fch, (long)N * 4 * C));
        else PROF(PROF_POINTWISE, 0, op_gelu_fwd(la->fch_gelu, la->fch, (long)N * 4 * C));
        PROF(PROF_MATMUL, 2.0 * N * 4 * C * C, op_matmul_fwd(la->res2, la->fch_gelu, lt->fc_proj, N, 4 * C, C));
        if (lt->fc_proj_b) PROF(PROF_POINTWISE, 0, op_bias_add(la->res2, lt->fc_proj_b, N, C));
        if (l + 1 < m->L) {
            LayerActs *nx = &a->layer[l + 1];
            const LayerTensors *nt = &m->p.layer[l + 1];
            PROF(PROF_LAYERNORM, 0,
                 op_residual_layernorm_fwd(la->res2, nx->ln1, nx->ln1_mean, nx->ln1_rstd, la->res2, la->res1,
                                           nt->ln1_w, nt->ln1_b, N, C));
        } else if (!a->xf) { /* no sink token: the last output rows are the final LayerNorm's rows */
            PROF(PROF_LAYERNORM, 0,
                 op_residual_layernorm_fwd(la->res2, a->lnf, a->lnf_mean, a->lnf_rstd, la->res2, la->res1, m->p.lnf_w,
                                           m->p.lnf_b, N, C));
            lnf_done = 1;
        } else {
            PROF(PROF_POINTWISE, 0, op_add(la->res2, la->res2, la->res1, (long)N * C));
        }
        x = la->res2;
    }
    if (a->xf) { /* drop the sink token's output position */
        for (int b = 0; b < B; b++)
            op_copy(a->xf + (size_t)b * m->T * C, x + ((size_t)b * m->Tp + 1) * C,
                    sizeof(real) * (size_t)m->T * C);
        x = a->xf;
    }
    if (!lnf_done)
        PROF(PROF_LAYERNORM, 0, op_layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, x, m->p.lnf_w, m->p.lnf_b, B * m->T, C));
}

static const real *final_residual(const Model *m) {
    return m->a.xf ? m->a.xf : m->a.layer[m->L - 1].res2;
}

double model_forward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int grad,
                     real dscale) {
    forward_trunk(m, inputs, B);
    op_upload(m->targets, targets, sizeof(int32_t) * (size_t)B * m->T);
    Acts *a = &m->a;
    double loss;
    PROF(PROF_CLASSIFIER, (grad ? 6.0 : 2.0) * B * m->T * m->C * m->V,
         loss = op_classifier(a->losses, grad ? a->dlnf : NULL, grad ? model_head_grad(m) : NULL, a->lnf,
                              model_head(m), m->targets, B * m->T, m->C, m->V, m->Vp, dscale));
    return loss;
}

void model_logits(Model *m, const int32_t *inputs, int B, real *logits) {
    forward_trunk(m, inputs, B);
    size_t bytes = sizeof(real) * (size_t)B * m->T * m->V;
    real *dev = op_host_memory() ? logits : op_alloc(bytes);
    if (!dev) {
        fprintf(stderr, "sgtrain: out of memory for %zu bytes of logits\n", bytes);
        exit(1);
    }
    op_logits(dev, m->a.lnf, model_head(m), B * m->T, m->C, m->V);
    if (dev != logits) {
        op_download(logits, dev, bytes);
        op_free(dev);
    }
}

/* ---- backward ----------------------------------------------------------- */

/* Where layer l's tensors start in the flat vector; l = L gives the final
 * LayerNorm's start (the table is laid out embeddings, layers 0..L-1, ln_f). */
static long layer_start(const Model *m, int l) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].layer == l || (l == m->L && !strcmp(m->tensors[i].name, "ln_f.weight")))
            return m->tensors[i].offset;
    return m->n_params;
}

/* Announces the gradients of layer l as final (GradHook): l = L is the final
 * LayerNorm (the vector's tail), l = -1 the embeddings (its head).  Nothing
 * is looked up when no hook is set. */
static void grads_done(const Model *m, int l) {
    if (!m->grad_hook) return;
    long off = l < 0 ? 0 : layer_start(m, l);
    long end = l < 0 ? layer_start(m, 0) : l == m->L ? m->n_params : layer_start(m, l + 1);
    m->grad_hook->ready(m->grad_hook->ctx, off, end - off);
}

/* Layer l's attention projection backward: datty and the projection's
 * gradients from dres, d res1. */
static void attn_proj_bwd(Model *m, int l) {
    const int C = m->C, N = m->B * m->Tp;
    Acts *a = &m->a;
    LayerTensors *gl = &m->g.layer[l];
    PROF(PROF_MATMUL, 4.0 * N * C * C,
         op_matmul_bwd(a->datty, gl->attn_proj, a->dres, a->layer[l].atty, m->p.layer[l].attn_proj, N, C, C));
    if (gl->attn_proj_b) PROF(PROF_POINTWISE, 0, op_bias_bwd(gl->attn_proj_b, a->dres, N, C));
}

void model_backward(Model *m) {
    int B = m->B, C = m->C, T = m->T, Tp = m->Tp, N = B * Tp;
    const int par = m->cfg.parallel_residual;
    Acts *a = &m->a;
    ModelTensors *g = &m->g;
    /* final LayerNorm; its input gradient lands on the real positions */
    real *dxf = a->dxf ? a->dxf : a->dres;
    op_zero(dxf, sizeof(real) * (size_t)B * T * C);
    PROF(PROF_LAYERNORM, 0, op_layernorm_bwd(dxf, g->lnf_w, g->lnf_b, a->dlnf, final_residual(m), m->p.lnf_w, a->lnf_mean,
                     a->lnf_rstd, B * T, C));
    grads_done(m, m->L);
    if (a->dxf) {
        op_zero(a->dres, sizeof(real) * (size_t)N * C);
        for (int b = 0; b < B; b++)
            op_copy(a->dres + ((size_t)b * Tp + 1) * C, a->dxf + (size_t)b * T * C,
                    sizeof(real) * (size_t)T * C);
    }
    /* a->dres holds d loss / d (output of layer l) */
    for (int l = m->L - 1; l >= 0; l--) {
        LayerActs *la = &a->layer[l];
        const LayerTensors *lt = &m->p.layer[l];
        LayerTensors *gl = &g->layer[l];
        const real *x_in = l ? a->layer[l - 1].res2 : a->x0;
        /* MLP branch: res2 = res1 + fc_proj(gelu(fc(ln2(u)))), u = res1, or
         * x_in with parallel_residual */
        /* each bias gradient reads what the matmul backward before it read,
         * after it: a launch between a gradient's writer and its matmul
         * would cost the matmul its bf16 twin (kernels/cuda/matmul.cu) */
        PROF(PROF_MATMUL, 4.0 * N * 4 * C * C, op_matmul_bwd(a->dfch_gelu, gl->fc_proj, a->dres, la->fch_gelu, lt->fc_proj, N, 4 * C, C));
        if (gl->fc_proj_b) PROF(PROF_POINTWISE, 0, op_bias_bwd(gl->fc_proj_b, a->dres, N, C));
        /* parallel: dres is d res1 as well as d res2; the attention's
         * projection reads it before ln_2's backward adds d x_in's MLP part */
        if (par) attn_proj_bwd(m, l);
        if (m->cfg.gelu_tanh) PROF(PROF_POINTWISE, 0, op_gelu_tanh_bwd(a->dfch, la->fch, a->dfch_gelu, (long)N * 4 * C));
        else PROF(PROF_POINTWISE, 0, op_gelu_bwd(a->dfch, la->fch, a->dfch_gelu, (long)N * 4 * C));
        PROF(PROF_MATMUL, 4.0 * N * 4 * C * C, op_matmul_bwd(a->dln, gl->fc_w, a->dfch, la->ln2, lt->fc_w, N, C, 4 * C));
        if (gl->fc_b) PROF(PROF_POINTWISE, 0, op_bias_bwd(gl->fc_b, a->dfch, N, 4 * C));
        PROF(PROF_LAYERNORM, 0, op_layernorm_bwd(a->dres, gl->ln2_w, gl->ln2_b, a->dln, par ? x_in : la->res1, lt->ln2_w,
                                                 la->ln2_mean, la->ln2_rstd, N, C));
        /* attention branch: res1 = x_in + c_proj(attn(gate(c_attn(ln1(x_in))))) */
        if (!par) attn_proj_bwd(m, l);
        AttnArgs aa = model_attn_args(m, l, B, Tp, la->logbias);
        if (model_reads_gated(m)) {
            /* the value gate's backward with the attention's, as one op
             * (a backend may fuse them: ops.h); its time counts as the
             * attention's */
            GateParams gp = model_gate_params(m, l);
            AttnGateBwd gb = {.p = &gp, .v = la->qkv + 2 * C, .v_stride = 3 * C, .g = la->gate,
                              .dv = a->dqkv + 2 * C, .dv_stride = 3 * C, .dtau = gl->tau, .dw = gl->gate_w,
                              .db = gl->gate_b, .dvg = a->dvg};
            PROF(PROF_ATTENTION, attn_flops(m, B, 10),
                 op_attention_gate_bwd(a->dqkv, a->dqkv + C, aa.sink ? gl->sink : NULL, a->datty, la->qkv,
                                       la->qkv + C, values_read(m, la), la->atty, la->lse, &aa, &gb));
        } else {
            PROF(PROF_ATTENTION, attn_flops(m, B, 10),
                 op_attention_bwd(a->dqkv, a->dqkv + C, a->dqkv + 2 * C, aa.sink ? gl->sink : NULL,
                                  aa.logbias ? a->dlogbias : NULL, a->datty, la->qkv, la->qkv + C,
                                  values_read(m, la), la->atty, la->lse, &aa));
            if (m->arm->filter != FILTER_NONE) { /* a routing-slot gate */
                GateParams gp = model_gate_params(m, l);
                PROF(PROF_GATE, 0,
                     op_gate_bwd(a->dqkv + 2 * C, 3 * C, gl->tau, gl->gate_w, gl->gate_b, NULL, a->dlogbias,
                                 la->qkv + 2 * C, 3 * C, la->gate, &gp, B, Tp, m->H, m->d));
            }
        }
        if (m->cfg.rotary_dims) PROF(PROF_POINTWISE, 0, model_rope(m, a->dqkv, B, Tp, 0, 1));
        PROF(PROF_MATMUL, 4.0 * N * C * 3 * C, op_matmul_bwd(a->dln, gl->attn_w, a->dqkv, la->ln1, lt->attn_w, N, C, 3 * C));
        if (gl->attn_b) PROF(PROF_POINTWISE, 0, op_bias_bwd(gl->attn_b, a->dqkv, N, 3 * C));
        PROF(PROF_LAYERNORM, 0, op_layernorm_bwd(a->dres, gl->ln1_w, gl->ln1_b, a->dln, x_in, lt->ln1_w, la->ln1_mean,
                         la->ln1_rstd, N, C));
        grads_done(m, l);
    }
    PROF(PROF_EMBED, 0, op_embed_bwd(g->wte, g->wpe, g->sink_token, a->dres, m->inputs, B, T, C));
    grads_done(m, -1);
}

void model_zero_grad(Model *m) { op_zero(m->grads, sizeof(real) * (size_t)m->n_params); }

/* ---- counts ------------------------------------------------------------- */

long model_count_params(const Model *m) {
    long n = 0;
    for (int i = 0; i < m->n_tensors; i++) n += m->tensors[i].numel_real;
    return n;
}

long model_count_non_embedding(const Model *m) {
    long n = model_count_params(m);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role == ROLE_TOKEN_EMBED || m->tensors[i].role == ROLE_LM_HEAD ||
            m->tensors[i].role == ROLE_POS_EMBED)
            n -= m->tensors[i].numel_real;
    return n;
}

long model_count_arm_extra(const Model *m) {
    long n = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].arm_extra) n += m->tensors[i].numel_real;
    return n;
}

const TensorInfo *model_tensor(const Model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}
