/* The GPT-2-style model: parameter layout, initialisation, forward and
 * backward graph for every arm.
 *
 * Parameters live in one flat buffer described by a tensor table.  Each
 * tensor has a role (matrix, embedding, LayerNorm, sink logit, gate ...) and
 * everything that depends on what a tensor *is* (weight decay, init, which
 * arm owns it, its export name) is decided from that role, never from its
 * index. */
#ifndef SG_MODEL_H
#define SG_MODEL_H

#include <stdint.h>

#include "arms.h"
#include "config.h"
#include "ops.h"
#include "real.h"

typedef enum {
    ROLE_TOKEN_EMBED,   /* wte, the LM head too unless untied */
    ROLE_LM_HEAD,       /* lm_head.weight: the untied LM head (tie_embeddings false) */
    ROLE_POS_EMBED,     /* wpe (absent with rotary positions) */
    ROLE_SINK_TOKEN,    /* the sinktoken arm's learned first position */
    ROLE_NORM_WEIGHT,   /* LayerNorm scale */
    ROLE_NORM_BIAS,     /* LayerNorm bias (ln_bias) */
    ROLE_MATRIX,        /* c_attn, c_fc */
    ROLE_MATRIX_OUT,    /* output projections: init std / sqrt(2L) */
    ROLE_SINK_LOGIT,    /* b_h of the phantom */
    ROLE_GATE_TAU,      /* norm-gate threshold tau_h */
    ROLE_GATE_DIR,      /* projection-gate direction w_h */
    ROLE_GATE_BIAS,     /* projection-gate bias b_h */
    ROLE_LINEAR_BIAS    /* a linear layer's bias (linear_bias) */
} TensorRole;

typedef struct {
    char name[64];      /* safetensors export name */
    TensorRole role;
    int layer;          /* -1 for model-level tensors */
    int ndim;
    int shape[2];       /* as exported (wte: [V, C], unpadded) */
    long offset;        /* into the flat buffers */
    long numel;         /* stored elements (wte: Vp * C) */
    long numel_real;    /* elements that are parameters (wte: V * C) */
    int decay;          /* receives weight decay */
    int arm_extra;      /* exists only because of the arm (Table 4) */
} TensorInfo;

typedef struct {
    real *ln1_w, *ln1_b, *attn_w, *sink, *tau, *gate_w, *gate_b, *attn_proj;
    real *ln2_w, *ln2_b, *fc_w, *fc_proj;
    real *attn_b, *attn_proj_b, *fc_b, *fc_proj_b; /* linear_bias, else NULL */
} LayerTensors;

typedef struct {
    real *wte, *lm_head, *wpe, *sink_token, *lnf_w, *lnf_b; /* lm_head, wpe: NULL when tied, rotary */
    LayerTensors *layer; /* [L] */
} ModelTensors;

/* Saved activations of one layer for a micro-batch of B sequences of Tp
 * positions (Tp = T, or T + 1 with a sink token); N = B * Tp rows. */
typedef struct {
    real *ln1, *ln1_mean, *ln1_rstd;  /* [N,C], [N], [N] */
    real *qkv;                        /* [N,3C] */
    real *gate;                       /* [B,H,Tp]  filter arms */
    real *vg;                         /* [N,C]     value-slot filter arms */
    real *logbias;                    /* [B,H,Tp]  routing-slot filter arms */
    real *atty, *lse;                 /* [N,C], [B,H,Tp] */
    real *res1;                       /* [N,C] residual after attention */
    real *ln2, *ln2_mean, *ln2_rstd;
    real *fch, *fch_gelu;             /* [N,4C] */
    real *res2;                       /* [N,C] layer output */
} LayerActs;

typedef struct {
    real *x0;                   /* [N,C] embeddings */
    LayerActs *layer;           /* [L] */
    real *xf;                   /* [B*T,C] final residual at real positions */
    real *lnf, *lnf_mean, *lnf_rstd;
    real *losses;               /* [B*T] */
    /* backward scratch, reused by every layer */
    real *dres, *dln, *dqkv, *dvg, *dlogbias, *datty, *dfch, *dfch_gelu, *dxf, *dlnf;
} Acts;

struct Model;

/* Evaluation-time interventions (src/analysis.c); training leaves them NULL.
 *  values:    after layer l's QKV projection and before any gate: may rewrite
 *             the values (la->qkv + 2C, row stride 3C) in place.
 *  attention: instead of the streaming op: returns 1 if it wrote la->atty
 *             itself, 0 to let the op run (it may only observe).  `aa` are
 *             the op's arguments and `v` the values it reads (gated in the
 *             value slot).
 *  layer0_qkv: when set, layer 0's embedding, LayerNorm and QKV projection
 *             are not recomputed: the values of this op buffer [B*Tp, 3C]
 *             are copied in, and x0 must still hold the same batch's
 *             embeddings (an earlier forward of the same tokens). */
typedef struct {
    void *ctx;
    void (*values)(void *ctx, struct Model *m, int layer, int B);
    int (*attention)(void *ctx, struct Model *m, int layer, int B, const AttnArgs *aa, const real *v);
    const real *layer0_qkv;
} ForwardHooks;

/* model_backward announces each range of the flat gradient vector whose
 * values it has finished: ready(ctx, off, len) means grads[off, off + len)
 * receives nothing more from this backward, so data parallelism may start
 * summing it over ranks while earlier layers are still being differentiated
 * (src/grad_sync.c).  The ranges are disjoint, contiguous, arrive in
 * descending order and cover [0, n_params) exactly once: the final
 * LayerNorm (the vector's tail), layers L-1 .. 0, then the embeddings (its
 * head, which the classifier and the embedding backward both feed). */
typedef struct {
    void (*ready)(void *ctx, long off, long len);
    void *ctx;
} GradHook;

typedef struct Model {
    Config cfg;
    const Arm *arm;
    int L, H, C, d, T, V, Vp, Tp;
    TensorInfo *tensors;
    int n_tensors;
    long n_params;        /* stored elements of the flat buffers */
    real *params, *grads, *adam_m, *adam_v; /* op buffers (device memory on a GPU backend) */
    /* The AdamW state covers params[opt_off, opt_off + opt_len): adam_m[i]
     * and adam_v[i] are the moments of params[opt_off + i].  The whole vector
     * (0, n_params) unless ZeRO-1 keeps one rank's shard (dist.h). */
    long opt_off, opt_len;
    int opt_sharded;      /* set by model_shard_optim: other ranks hold the rest */
    /* Host copies of the state, for init, checkpoints and exports: the same
     * buffers as above when op buffers are host memory (the CPU backend).
     * h_params has n_params elements, h_adam_m and h_adam_v opt_len. */
    real *h_params, *h_adam_m, *h_adam_v;
    ModelTensors p, g;    /* named views of params and grads */
    int B;                /* micro-batch the activations are laid out for */
    Acts a;
    real *act_mem;
    long act_n; /* elements in act_mem */
    int32_t *inputs, *targets; /* [B*T] copies of the current batch */
    const ForwardHooks *hooks; /* NULL outside the analyses */
    int qkv_promised;     /* the layout promises each layer's qkv and vg as attention operands (model.c) */
    const GradHook *grad_hook; /* NULL unless the gradient sum overlaps the backward */
    /* rotary_dims > 0: op_rope's table (ops.h), rows for positions
     * [0, T + 1) (a sink token's row 0 included), op buffer; else NULL */
    real *rope_cs;
    int rope_rows;
} Model;

/* Builds the tensor table and allocates parameters, gradients and AdamW
 * state (zeroed).  Activations are sized lazily for the first batch. */
int model_build(Model *m, const Config *c, char *err, size_t errlen);
/* Replaces the AdamW state by state for params[off, off + len) only, zeroed
 * (ZeRO-1: this rank's shard).  Call it right after model_build: the
 * full-size moments were never written, and on the CPU backend large ones
 * are fresh calloc'd pages that held no memory.  With flat_len > n_params
 * the params and grads buffers grow to flat_len elements (a zero tail), so
 * that collectives with equal parts per rank (NCCL's reduce-scatter and
 * all-gather, dist_padded) address every part in place; n_params and the
 * host mirror stay as they are.  0, or -1 with a message. */
int model_shard_optim(Model *m, long off, long len, long flat_len, char *err, size_t errlen);
/* The tensor table alone, no buffers: counts and layouts of any tier. */
int model_describe(Model *m, const Config *c, char *err, size_t errlen);
void model_free(Model *m);
/* Copy parameters and AdamW state (opt_len elements of each moment)
 * between the op buffers and the host copies (nothing to do on the CPU
 * backend). */
void model_state_download(Model *m);
void model_state_upload(Model *m);

/* Initialisation keyed by (seed, tensor name, element): the same values for
 * any layout, thread count or order of construction. */
void model_init(Model *m, uint64_t seed);

/* Forward on B sequences; inputs/targets [B*T].  With grad != 0 the
 * classifier also writes the gradient of dscale * sum(losses) w.r.t. the
 * final LayerNorm output, and model_backward must follow.  Returns the sum of
 * the B*T token losses. */
double model_forward(Model *m, const int32_t *inputs, const int32_t *targets, int B,
                     int grad, real dscale);
/* Backward of the last forward; gradients accumulate into m->grads. */
void model_backward(Model *m);
void model_zero_grad(Model *m);

/* The arm's part of layer l's ops, for every caller that runs the layer
 * (the forward and backward here, generation in src/kvcache.c): the gate's
 * parameters (kind GATE_NONE without a filter); whether the attention reads
 * the gated values g v (value-slot filters) rather than the raw v; and the
 * attention's arguments for B sequences of T positions, with q and k rows
 * of the qkv projection (stride 3C), values of stride C when gated and 3C
 * when raw, outputs of stride C, and the routing slot's log-bias (NULL in
 * the other arms). */
GateParams model_gate_params(const Model *m, int l);
int model_reads_gated(const Model *m);
AttnArgs model_attn_args(const Model *m, int l, int B, int T, const real *logbias);
/* A layer's linear layer, out[M, N] = inp W^T + b (w and b from
 * LayerTensors, b NULL without linear_bias), and the MLP's activation (erf
 * or tanh GELU), for callers that run a layer outside the training graph
 * (src/kvcache.c).  model_forward issues the same ops, each as its own
 * profiled site (src/profile.h names sites by their call). */
void model_linear(real *out, const real *inp, const real *w, const real *b, int M, int K, int N);
void model_gelu(const Model *m, real *out, const real *inp, long n);

/* The LM head's weights [Vp, C] and their gradient: wte, or lm_head when
 * untied (config tie_embeddings). */
const real *model_head(const Model *m);
real *model_head_grad(Model *m);
/* Rotary positions (config rotary_dims): turns the q and k parts of
 * T rows of stride 3C per sequence, for B sequences whose first row sits at
 * position pos0 (the forward's rows, or one new token of a key-value
 * cache); inverse turns a gradient back (ops.h, op_rope).  Nothing without
 * rotary_dims. */
void model_rope(const Model *m, real *qkv, int B, int T, int pos0, int inverse);

/* Logits [B*T, V] (unpadded) for tests and sampling. */
void model_logits(Model *m, const int32_t *inputs, int B, real *logits);

/* Parameter counts, padding excluded. */
long model_count_params(const Model *m);        /* everything */
long model_count_non_embedding(const Model *m); /* minus wte, wpe and an untied lm_head */
long model_count_arm_extra(const Model *m);     /* Table 4's per-arm cost, whole model */

const TensorInfo *model_tensor(const Model *m, const char *name);

#endif
