/* The compute ops behind one interface.
 *
 * src/ calls only these functions.  kernels/cpu/ implements them in C with
 * OpenMP and a CPU BLAS; a CUDA backend implements the same signatures on
 * device pointers.  The CPU op is the reference the GPU tests compare with.
 *
 * Conventions
 * - Activations are row-major [rows, features]; a "row" is one position of
 *   one sequence.  Linear layers store W as [out, in] (PyTorch's layout), so
 *   a forward is y = x W^T.
 * - "(acc)" marks an output that is accumulated into (+=): weight gradients
 *   accumulate over micro-batches.  Every other output is overwritten.
 * - Reductions over rows are done in fixed-size chunks combined in a fixed
 *   order, and no op uses float atomics: a result never depends on thread
 *   timing, and CPU runs are bitwise reproducible.
 */
#ifndef SG_OPS_H
#define SG_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend implements these in .cu files */
#endif

/* ---- dense ------------------------------------------------------------- */

/* out[M,N] = inp[M,K] W[N,K]^T */
void op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N);
/* dinp[M,K] = dout[M,N] W[N,K]   (dinp may be NULL)
 * dw[N,K]  += dout^T inp          (acc)
 * inp and w must hold what they held when op_matmul_fwd last read them,
 * if it did (autograd's order: no optimizer step between a forward and
 * its backward): a backend may reuse the low-precision copies of inp and w
 * that its forward made (kernels/cuda/matmul.cu). */
void op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp,
                   const real *w, int M, int K, int N);
/* A promise about buf[0, n), kept until op_matmul_only_end: it is
 * written only by op_layernorm_fwd, op_residual_layernorm_fwd (their out),
 * op_gelu_fwd (out), op_gelu_bwd (dinp), op_attention_bwd (dq, with dk the
 * next third of its rows, and dv the last or written apart) or, right after
 * that, op_gate_bwd (a value slot's dv, that last third), or
 * op_attention_gate_bwd (dq, dk and the gate's dv, the three thirds), and read only as
 * the operand of
 * op_matmul_fwd (inp) or op_matmul_bwd (inp, dout): by the matmul issued
 * right after the op that wrote it, and by that forward's backward.  A
 * backend whose matmuls read low-precision copies may then keep only the
 * copy and never store the real values (kernels/cuda/matmul.cu); a matmul
 * that finds no fresh copy of a promised tensor stops the program rather
 * than read what was never stored.  The CPU backend ignores the promise. */
void op_matmul_only(const real *buf, long n);
/* A promise about buf[0, n), kept until op_matmul_only_end: it is
 * written only by op_matmul_fwd (out) or op_matmul_bwd (dinp), and read
 * only by op_gelu_fwd (inp), op_gelu_bwd (inp, dout) or op_layernorm_bwd
 * (dout).  A backend may then store it rounded to bf16, as torch.autocast
 * stores a linear layer's output and the gradient of a linear layer's
 * input (the MLP's hidden pre-activation, the gradient of GELU's output,
 * and the gradient reaching a LayerNorm from qkv or fc); its readers
 * compute in fp32 from those values.  A promised tensor's bytes are the
 * backend's: nothing else may read them.  The CPU backend ignores the
 * promise. */
void op_bf16_operand(const real *buf, long n);
/* A promise about buf[0, n), kept until op_matmul_only_end: it is written
 * only by op_matmul_fwd (out), op_matmul_bwd (dinp) or op_gate_fwd (vg),
 * and read only by op_attention_fwd and op_attention_bwd (q, k and v, each
 * a part of it, or dout) and by op_gate_fwd and op_gate_bwd (v, a part of
 * it): the qkv projection's output, the gradient of the attention
 * projection's input, and the value gate's output.  A backend whose
 * attention reads bf16 operands may then store it rounded to bf16, as
 * torch.autocast stores a linear layer's output and the gradient of its
 * input, and as its attention rounds the gated values (the gates, which
 * the paper runs outside autocast, compute in fp32 from a bf16 v, as from
 * autocast's).  Its bytes are then the backend's, as op_bf16_operand's.
 * The CPU backend ignores the promise. */
void op_attention_operand(const real *buf, long n);
/* The reals a tensor of n elements needs in memory if it will be promised
 * as kind (op_matmul_only: OP_PROMISE_MATMULS, op_bf16_operand:
 * OP_PROMISE_BF16, op_attention_operand: OP_PROMISE_ATTENTION): n where
 * the backend stores its real values (the CPU; a GPU that will not take
 * the promise), (n + 1) / 2 where it keeps only its bf16 values, in the
 * tensor's own bytes.  A tensor laid out in fewer than n reals must be
 * promised before anything writes it, and must not be written or read but
 * as the promise says until it is laid out again: its promise may not end
 * while it is in use (op_matmul_only_end before a new layout).  A pointer
 * into it that an op is handed (k = qkv + C) must lie within those reals:
 * past them it would point into the next tensor. */
enum { OP_PROMISE_MATMULS, OP_PROMISE_BF16, OP_PROMISE_ATTENTION };
long op_promised_len(int kind, long n);
/* Ends every promise (of either kind) on a tensor inside base[0, bytes); a
 * buffer's owner calls it before it frees the buffer or lays other tensors
 * over it.  Until a promised tensor is written again, its values are
 * unspecified. */
void op_matmul_only_end(const void *base, size_t bytes);
/* A promise about buf[0, n), the model's parameters, kept until
 * op_free(buf): every part of it is written only by op_upload, op_copy,
 * op_zero, op_adamw or op_adamw_multi, and anything else that writes a
 * part (an MPI or NCCL collective) calls op_written on that part right
 * after.  A backend whose matmuls read bf16 copies of their weights may
 * then keep one copy per weight, which AdamW rewrites as it updates the
 * weight, instead of casting every weight in every forward
 * (kernels/cuda/weight_copies.cu).  One promise at a time: a second
 * replaces the first.  The CPU backend ignores it. */
void op_params(const real *buf, long n);
/* p[0, bytes) was written by something other than an op (a collective):
 * what a backend keeps derived from it is out of date. */
void op_written(const void *p, size_t bytes);

/* LayerNorm over the last dim, eps 1e-5.  b may be NULL (no bias).
 * mean/rstd [N] are saved for the backward. */
void op_layernorm_fwd(real *out, real *mean, real *rstd, const real *inp,
                      const real *w, const real *b, int N, int C);
/* Residual add fused with the LayerNorm that reads it (one pass over the
 * residual stream instead of two):
 *   res = a + b  (res may be a or b),  out = LayerNorm(res) as op_layernorm_fwd
 * bitwise equal to op_add then op_layernorm_fwd.  bias may be NULL. */
void op_residual_layernorm_fwd(real *res, real *out, real *mean, real *rstd,
                               const real *a, const real *b, const real *w,
                               const real *bias, int N, int C);
/* dinp (acc): the residual stream's gradient is summed into;
 * dw, db (acc, db may be NULL). */
void op_layernorm_bwd(real *dinp, real *dw, real *db, const real *dout,
                      const real *inp, const real *w, const real *mean,
                      const real *rstd, int N, int C);

/* GELU, exact erf form: 0.5 x (1 + erf(x / sqrt 2)). */
void op_gelu_fwd(real *out, const real *inp, long n);
/* dinp = dout * gelu'(inp) */
void op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n);

/* GELU, tanh form (GPT-2's "gelu_new", PyTorch's approximate='tanh'):
 *   gelu(x)  = x s(x),  s(x) = (1 + tanh u) / 2,  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = s(x) + x (1 - tanh^2 u) / 2 * sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * (config gelu_tanh; the study's models use the erf form above). */
void op_gelu_tanh_fwd(real *out, const real *inp, long n);
void op_gelu_tanh_bwd(real *dinp, const real *inp, const real *dout, long n);

/* out = a + b */
void op_add(real *out, const real *a, const real *b, long n);

/* A linear layer's bias (config linear_bias, GPT-2's Conv1D biases):
 * out[i, :] += bias[0, N) for every row i < M. */
void op_bias_add(real *out, const real *bias, int M, int N);
/* Its gradient: db[j] += sum_i dout[i, j] (acc), the rows summed in a fixed
 * order, whatever the threads. */
void op_bias_bwd(real *db, const real *dout, int M, int N);

/* Rotary position embedding (config rotary_dims, GPT-NeoX's "rotate half"
 * form), in place on the first rd (even) dims of every head of q and k:
 * with h = rd / 2, each pair (x_i, x_{i+h}), i < h, of the row at position p
 * turns by the angle a = theta_{p,i}:
 *   x_i' = x_i cos a - x_{i+h} sin a,   x_{i+h}' = x_{i+h} cos a + x_i sin a.
 * cs holds rd values per position, [cos theta_{p,0..h-1}, sin theta_{p,0..h-1}];
 * row t of every sequence uses cs row t (offset cs for a first position
 * other than 0).  Rows (b, t) of q and k start at (b T + t) ld, head j at
 * j d.  inverse turns by -a: the backward, since dx = R^T dy for a
 * rotation R. */
void op_rope(real *q, real *k, int ld, const real *cs, int B, int T, int H, int d, int rd, int inverse);

/* ---- embeddings ---------------------------------------------------------
 * out[B, Tp, C].  With sink == NULL, Tp = T and row (b,t) = wte[tok] + wpe[t].
 * With a sink token, Tp = T + 1: row (b,0) = sink (no positional embedding)
 * and row (b,t+1) = wte[tok[b,t]] + wpe[t].  wpe NULL (rotary positions):
 * no positional term; op_embed_bwd's dwpe is then NULL too. */
void op_embed_fwd(real *out, const int32_t *tokens, const real *wte,
                  const real *wpe, const real *sink, int B, int T, int C);
/* dwte, dwpe, dsink (acc; dsink may be NULL when sink is absent). */
void op_embed_bwd(real *dwte, real *dwpe, real *dsink, const real *dout,
                  const int32_t *tokens, int B, int T, int C);

/* ---- gates ---------------------------------------------------------------
 * One gate value g[b,h,t] per read v (the head-h slice of the value row at
 * position t), computed in the precision of `real` (fp32 in training):
 *   norm gate:       g = sigmoid(beta (||v|| / sqrt(d) - tau_h))
 *   projection gate: g = sigmoid(w_h . v + b_h)
 * Value slot:   vg = g v  (written once; this is what a KV cache stores)
 * Routing slot: logbias = log g = -softplus(-z), values left as they are. */
enum { GATE_NONE = 0, GATE_NORM = 1, GATE_PROJ = 2 };
enum { SLOT_VALUE = 0, SLOT_ROUTING = 1 };

typedef struct {
    int kind;        /* GATE_NONE, GATE_NORM, GATE_PROJ */
    int slot;        /* SLOT_VALUE, SLOT_ROUTING */
    real beta;       /* norm-gate sharpness (8 in the paper) */
    const real *tau; /* [H]   norm gate threshold */
    const real *w;   /* [H,d] projection direction */
    const real *b;   /* [H]   projection bias */
} GateParams;

/* v: raw values, row stride v_stride (elements), head h at offset h*d.
 * g[B,H,T] (saved for the backward).  vg [B,T,H*d] (value slot, else unused,
 * may be NULL); logbias [B,H,T] (routing slot, else may be NULL). */
void op_gate_fwd(real *g, real *vg, real *logbias, const real *v, int v_stride,
                 const GateParams *p, int B, int T, int H, int d);
/* Value slot:   dv = g dvg + (dvg . v) dg/dv    (dv overwritten), dvg [B,T,H*d]
 * Routing slot: dv += dlogbias (1 - g) dz/dv    (dv accumulated: the attention
 *               backward already wrote the direct value gradient there)
 * dtau [H], dw [H,d], db [H] (acc).  dv has row stride dv_stride. */
void op_gate_bwd(real *dv, int dv_stride, real *dtau, real *dw, real *db,
                 const real *dvg, const real *dlogbias, const real *v,
                 int v_stride, const real *g, const GateParams *p, int B,
                 int T, int H, int d);

/* ---- attention -----------------------------------------------------------
 * Causal multi-head attention, streaming (online softmax over key tiles, no
 * T x T buffer), one op for every arm:
 *   s_ij = q_i . k_j / sqrt(d) + logbias_j          (j <= i)
 *   phantom: an extra key with logit c_h (0 for off-by-one, the learned b_h
 *            for the sink logit) and value exactly 0, visible to every query;
 *            the running max starts at c_h.
 *   LSE_i = log(exp(c_h) + sum_j exp(s_ij))
 *   o_i   = sum_j exp(s_ij - LSE_i) v_j
 * Rows of q/k/v/o for position t of sequence b live at (b*T + t) * stride,
 * head h at offset h*d within the row. */
typedef struct {
    int B, T, H, d;
    int q_stride, k_stride, v_stride, o_stride;
    int phantom;          /* 0: no phantom key; 1: phantom present */
    const real *sink;     /* [H] learned phantom logits, NULL => logit 0 */
    const real *logbias;  /* [B,H,T] additive per-key log-bias, or NULL */
} AttnArgs;

/* out: o (row stride o_stride), lse [B,H,T] saved for the backward. */
void op_attention_fwd(real *out, real *lse, const real *q, const real *k,
                      const real *v, const AttnArgs *a);
/* dq, dk, dv (overwritten; their strides are q/k/v's);
 * dsink [H] (acc; NULL when sink is NULL):
 *     d c_h = -sum_i exp(c_h - LSE_i) D_i,  D_i = dO_i . O_i
 * dlogbias [B,H,T] (overwritten; NULL when logbias is NULL):
 *     d logbias_j = sum_i dS_ij  (the column sum of dS). */
void op_attention_bwd(real *dq, real *dk, real *dv, real *dsink,
                      real *dlogbias, const real *dout, const real *q,
                      const real *k, const real *v, const real *out,
                      const real *lse, const AttnArgs *a);
/* The backward of an attention that reads a value-slot gate's output vg
 * (its v argument), with the gate's backward: op_attention_bwd(dq, dk,
 * dvg, dsink, NULL, ...) then op_gate_bwd(dv, dv_stride, dtau, dw, db, dvg,
 * NULL, v, v_stride, g, p, ...), as one op.  The gradient of vg (dvg, row
 * stride a->v_stride) is the op's scratch: a backend may fuse the gate into
 * the attention's backward and never store it.  a->logbias must be NULL
 * (dlogbias is not asked for). */
typedef struct {
    const GateParams *p; /* a value-slot gate: GATE_NORM or GATE_PROJ */
    const real *v;       /* the gate's input, row stride v_stride */
    int v_stride;
    const real *g;       /* [B,H,T], saved by op_gate_fwd */
    real *dv;            /* overwritten, row stride dv_stride */
    int dv_stride;
    real *dtau, *dw, *db; /* accumulated, as op_gate_bwd's */
    real *dvg;           /* scratch: [B,T,H*d] at row stride a->v_stride */
} AttnGateBwd;
void op_attention_gate_bwd(real *dq, real *dk, real *dsink, const real *dout,
                           const real *q, const real *k, const real *vg,
                           const real *out, const real *lse, const AttnArgs *a,
                           const AttnGateBwd *gb);

/* ---- decode attention ------------------------------------------------------
 * One query per (b,h) over all T keys of its sequence, with no causal mask:
 * the KV-cache step of generation, and the single learned query of the toy
 * task (src/toy.c).  Otherwise the definitions of op_attention_fwd:
 *   s_j = q . k_j / sqrt(d) + logbias_j,  phantom logit c_h as there,
 *   LSE = log(exp(c_h) + sum_j exp(s_j)),  o = sum_j exp(s_j - LSE) v_j
 * q and out hold one row per sequence (row strides q_stride and o_stride; a
 * q_stride of 0 shares one query among all sequences); k and v rows as in
 * op_attention_fwd; lse [B,H]. */
void op_attention_decode_fwd(real *out, real *lse, const real *q, const real *k,
                             const real *v, const AttnArgs *a);
/* dq [B, H*d] (overwritten; its own contiguous rows, so a shared query's
 * gradient is the sum of the B rows); dk, dv (overwritten, k/v strides);
 * dsink [H] (acc; NULL when sink is NULL); dlogbias [B,H,T] (overwritten;
 * NULL when logbias is NULL).  With p_j = exp(s_j - LSE), D = dO . O:
 *   dS_j = p_j (dO . v_j - D),  dq = sum_j dS_j k_j / sqrt(d),
 *   dk_j = dS_j q / sqrt(d),  dv_j = p_j dO,  dlogbias_j = dS_j,
 *   dc_h = -sum_b exp(c_h - LSE_b) D_b. */
void op_attention_decode_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias,
                             const real *dout, const real *q, const real *k, const real *v,
                             const real *out, const real *lse, const AttnArgs *a);

/* ---- explicit attention (analyses only) ------------------------------------
 * The evaluation-time analyses (src/analysis*.c) need what the streaming op
 * never materialises: every attention probability, and outputs from
 * probabilities they have edited.  With the same s_ij, c_h and LSE_i as
 * op_attention_fwd:
 *   p[b,h,i,j] = exp(s_ij - LSE_i)   j <= i;   0 for i < j < T
 *   p[b,h,i,T] = exp(c_h - LSE_i)    the phantom (0 without one)
 * so each row of T+1 entries sums to 1.  p is [B,H,T,T+1]: callers bound its
 * size by passing one sequence at a time (B = 1, pointers offset). */
void op_attention_probs(real *p, const real *q, const real *k, const AttnArgs *a);
/* o_i = sum_{j<T} p[b,h,i,j] v_j (the phantom column adds nothing); out has
 * row stride o_stride, v row stride v_stride, head h at offset h*d. */
void op_attention_apply(real *out, const real *p, const real *v, const AttnArgs *a);

/* ---- classifier ----------------------------------------------------------
 * Fused LM head, softmax and cross-entropy over the V real classes of a
 * matrix padded to Vp rows; padded logits never enter the softmax.  Rows are
 * processed in chunks so that all N x Vp probabilities never exist at once:
 * each chunk's logits become dlogits in place and are consumed immediately.
 *   loss_i  = LSE(logits_i[0:V]) - logits_i[target_i]
 *   dlogit  = dscale (softmax - onehot)
 * losses[N] per row (may be NULL).  dx [N,C] overwritten and dwte (acc) may
 * both be NULL for evaluation.  Returns the sum of the row losses. */
double op_classifier(real *losses, real *dx, real *dwte, const real *x,
                     const real *wte, const int32_t *targets, int N, int C,
                     int V, int Vp, real dscale);
/* Plain logits [N, Vp] for tests and sampling. */
void op_logits(real *logits, const real *x, const real *wte, int N, int C, int Vp);

/* ---- optimizer -----------------------------------------------------------
 * PyTorch's AdamW, step t (1-based):
 *   p -= lr wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 * g is multiplied by gscale first (the grad-norm clip factor). */
void op_adamw(real *p, real *m, real *v, const real *g, long n, double lr,
              double b1, double b2, double eps, double wd, long t, double gscale);
/* The same step over many tensors of one buffer at once (PyTorch's
 * multi-tensor AdamW): segment s updates p[off, off + n) from g[off, off + n)
 * and the moments m, v at [off - base, off - base + n) (base: where the
 * moments begin in p's indexing, as for a ZeRO shard; 0 when they cover
 * all of p), with weight decay wd if its decay flag is set, else 0.  Every
 * element gets exactly op_adamw's arithmetic, so the result is bitwise that
 * of one op_adamw per segment. */
typedef struct {
    long off, n;
    int decay;
} AdamwSeg;
void op_adamw_multi(real *p, real *m, real *v, const real *g, long base,
                    const AdamwSeg *segs, int nseg, double lr, double b1,
                    double b2, double eps, double wd, long t, double gscale);

/* sum of squares in double, fixed-order reduction */
double op_sumsq(const real *x, long n);

/* Number of worker threads the ops use (OpenMP). */
int op_threads(void);

/* ---- memory ----------------------------------------------------------------
 * The buffers the ops read and write.  On the CPU backend they are host
 * memory and upload/download are plain copies (or nothing when the two
 * pointers are the same buffer); on the CUDA backend they are device memory
 * and every op runs on one stream in issue order, so only op_download (and
 * ops that return a value) wait for the device. */
void *op_alloc(size_t bytes); /* zeroed; NULL when out of memory */
void op_free(void *p);
void op_upload(void *dev, const void *host, size_t bytes);
void op_download(void *host, const void *dev, size_t bytes);
void op_copy(void *dst, const void *src, size_t bytes); /* between op buffers */
void op_zero(void *p, size_t bytes);
/* Waits until every op queued so far has finished (nothing to wait for on
 * the CPU): profiling (src/profile.h) times an op only between two. */
void op_sync(void);
/* 1 when op buffers are host memory (the host may read and write them). */
int op_host_memory(void);
/* "cpu" or "cuda (device name)" */
const char *op_backend(void);
/* The most device memory the backend's buffers held at once since the
 * program started, in bytes: op_alloc's and the backend's own (scratch,
 * copies).  0 on a backend whose buffers are host memory. */
size_t op_memory_peak(void);
/* The peak from now on counts from what is held now (op_memory_peak). */
void op_memory_peak_reset(void);
/* The device's memory: *total its size, *room what the backend holds now
 * plus what the device has free, i.e. the most the backend could hold
 * (the CUDA context and other processes excluded).  0, and both 0, on a
 * backend whose buffers are host memory. */
int op_memory_room(size_t *room, size_t *total);

#ifdef __cplusplus
}
#endif

#endif
