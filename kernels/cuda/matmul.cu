/* Dense layers on cuBLASLt in the paper's precision: the operands are cast
 * to bf16 (as torch.autocast does), products accumulate in fp32, outputs
 * and weight gradients are fp32.
 *
 * Row-major X[M,K] is column-major X^T with leading dimension K, so with
 * y = x W^T (W stored [N,K]):
 *   forward  y^T[N,M]   = W[N,K]   . x^T[K,M]      A = W (transposed), B = x
 *   dinp     dx^T[K,M]  = W^T[K,N] . dy^T[N,M]     A = W, B = dy
 *   dW       dW^T[K,N] += x^T[K,M] . dy[M,N]       A = x, B = dy (transposed), beta = 1
 * cuBLASLt's results are deterministic for a fixed algorithm on one GPU;
 * the algorithm is chosen once per shape and cached, so every step uses
 * the same one.
 *
 * Kept copies.  The forward keeps its bf16 copy of x for the backward's dW
 * (ops.h: op_matmul_bwd reads the inp its forward read).  The model's
 * matmul inputs (the LayerNorm outputs, the attention output, the GELU
 * output) are written once per forward and read again only by the
 * backward, so the backward need not cast them a second time: at the 124M
 * tier that is 7 N C bf16 elements per layer not re-read as fp32 and
 * re-written.  The weight's copy likewise serves the backward's dinp
 * product (w too holds what the forward read), so a weight is cast once
 * per forward-backward instead of twice.  A copy is found by the tensor's
 * address and element count; op_free forgets every copy (an address may
 * come back for another buffer).  The model's own weights (inside the
 * vector ops.h's op_params promises) are not cast here at all:
 * weight_copies.cu keeps their bf16 copies from step to step, and AdamW
 * rewrites them as it updates the weights.
 *
 * Twins.  The ops that produce a matmul's operand write its bf16 copy
 * themselves, in the kernel that writes the fp32 value (cuda_common.h,
 * sg_twin_begin): the forward's LayerNorms and GELU (x of qkv, fc and
 * fc_proj), and in the backward GELU's dinp (dout of fc) and LayerNorm's
 * accumulated dinp, the residual gradient (dout of fc_proj and attn_proj).
 * A twin lives in this table's slot for its tensor, so the forward that
 * takes it keeps it for the dW as if it had cast it.  The matmul then
 * skips its cast (a read of 4 bytes and a write of 2 per element) for the
 * producer's extra 2-byte write.
 *
 * Why a twin is only taken fresh.  The twin is the fp32 tensor's value at
 * its producer's launch; anything issued after may have rewritten the
 * tensor (op_upload, op_copy, an accumulating op, another kernel), and the
 * table is keyed by address only.  So the producer stamps the twin with
 * sg_stream_seq() after its last launch, and a matmul takes it only while
 * that count has not moved: nothing at all was issued between the two ops
 * (runtime.cu counts every hand-out of the stream and of the library
 * handles, and nothing writes device memory any other way: the host never
 * maps it, and NCCL's sums, which write only parameter gradients, are
 * issued through sg_stream() too, their side stream included).  In the
 * model every twin is read by the op right after its producer (src/model.c);
 * anything else between costs a cast, never a result.  The test is made
 * before the matmul issues anything itself.  A twin that no forward took
 * serves the dW only under the same test: ops.h's reuse applies to what a
 * forward read.  Taken or cast, the bf16 values are the same bits
 * (sg_cast_bf16), so twins change no result.
 *
 * Twin-only outputs.  A tensor the model promised to matmuls alone (ops.h,
 * op_matmul_only: the LayerNorm outputs ln1 and ln2, GELU's output and its
 * input gradient) is read in fp32 by nobody once its producer has written
 * the twin, so the producer stores the twin only (sg_twin_fp32): at the
 * 124M tier that is 2 N C + 8 N C floats a layer not written, about 3 GB a
 * step.  The twin then is the tensor's only value, so its slot is pinned
 * (never evicted, never forgotten by op_free) until the promise ends, and a
 * matmul that would have to cast such a tensor, because something was
 * issued between producer and matmul or the forward did not take the
 * twin, stops the program instead of reading what was never stored.
 * SG_TWIN_POISON=1 fills each unstored fp32 tensor with NaN, so that a
 * reader that broke the promise shows up in the results (the emulated
 * tests run with it); SG_MATMUL_STATS=1 prints the counts at exit.
 *
 * bf16-stored outputs.  A tensor promised as a bf16 operand (ops.h,
 * op_bf16_operand: the MLP's hidden pre-activation, fc's output; the
 * gradient of GELU's output, fc_proj's dinp; and the gradient LayerNorm
 * gets from qkv and fc, their dinp) is stored as torch.autocast stores a
 * linear layer's output and input gradient: rounded to bf16.  The product
 * writes it with a bf16 D, cuBLASLt rounding its fp32 accumulator to
 * nearest even, into the first half of the tensor's own bytes, and GELU
 * or LayerNorm's backward reads it there (sg_bf16_stored) and computes in
 * fp32.  The first two are the largest activations a layer moves, N x 4C
 * each, written once and read once (the gradient) or twice (the
 * pre-activation, by both GELUs): at the 124M tier about 250 MB a layer,
 * and 50 MB more for the two LayerNorm gradients, 3.6 GB a step; the
 * pre-activations held for the backward take half the memory.  Unlike a twin this changes
 * the values (it is autocast's rounding, not fp32's), so it does not
 * depend on SG_MATMUL_KEEP; SG_BF16_OPERANDS=0 stores fp32 instead, for A/B
 * comparisons.
 *
 * Compact layouts (op_promised_len).  A tensor stored in bf16 needs only
 * half its reals, and so does a twin-only tensor if its twin lives in its
 * own first 2n bytes.  The model lays both out so (SG_COMPACT_ACTS=0 lays
 * them out in fp32, as before, for A/B comparisons): the next tensor
 * starts where the fp32 values would have gone on.  A twin-only tensor's
 * twin is then written in place (an "in-place" slot, no buffer of ours),
 * so its producer must always make the twin; the twin-only tensors whose
 * producer may store fp32 instead (the wmma backward's dqkv) keep their
 * full layout.  At the 124M tier and a micro-batch of 8 (the baseline,
 * under mma) the activations take 3.0 GiB instead of 4.9, at 350M 7.6
 * instead of 12.6, and the twins need no buffers (docs/cuda.md).
 *
 * SG_MATMUL_KEEP=0 turns kept copies, twins and twin-only outputs off
 * (every operand cast on every call, every output stored), and with them
 * the attention's kept packs (attention_pack.cu, sg_keep_copies).
 *
 * Tuning (SG_MATMUL_TUNE=1, off by default).  The heuristic's first choice
 * is a guess; PyTorch's TunableOp times the candidates instead.  Here the
 * first call of a shape (a Plan) asks for up to TUNE_CANDIDATES
 * algorithms, runs each on the call's own operands into scratch outputs,
 * and keeps the fastest (median of TUNE_REPS, cudaEvent timing).  But an
 * algorithm may sum in another order (split-K, another reduction tree), and
 * then every result would change with the timing: two runs of one seed
 * would differ, and so would tuned and untuned runs.  So a candidate is
 * eligible only if its output is bitwise the first choice's, and for an
 * accumulating product (beta = 1) also with another C, made of the first
 * choice's output: a dW's first call accumulates into zeros (the model
 * zeroes its gradients), which would hide an algorithm that adds C in
 * another order.  Equal bits in every output of a real product come, in
 * practice, only from the same summation order, so the choice changes no
 * later result; test_gpu_ops checks tuned products against untuned ones on
 * the device.  The caller's output is written once, by the chosen
 * algorithm, after tuning (an accumulating dW is read as C, never written,
 * while the candidates run).  Costs: a few dozen products per shape, once;
 * scratch outputs of the largest tuned product's size, two of them (at
 * 124M, 8192 x 3072 floats, 100 MB each), kept.  A product with a bf16
 * output (a bf16 operand) keeps the first choice: two sums in different
 * orders usually round to the same bf16, so equal bits there would not
 * show the same order.  SG_MATMUL_STATS=1 prints
 * each tuned shape's candidates, rejections and times at exit. */
#include <stdint.h>
#include <string.h>

#include "attention_tiles_env.h"
#include "cuda_common.h"

enum { THREADS = 256, CACHE = 64, KEPT = 256 };
static const size_t WORKSPACE = 32u << 20;

__global__ void to_bf16_k(__nv_bfloat16 *dst, const float *src, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = sg_cast_bf16(src[i]);
}
/* four elements a thread (16-byte loads, 8-byte stores): the same bits */
__global__ void to_bf16x4_k(__nv_bfloat16 *dst, const float *src, long n4) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) sg_st_bf16x4(dst + 4 * i, sg_ld4(src + 4 * i));
}

extern "C" void sg_cast_into(__nv_bfloat16 *dst, const float *src, long n) {
    /* dst is a kept slot or a scratch buffer, both from cudaMalloc */
    const long n4 = ((uintptr_t)src & 15) || ((uintptr_t)dst & 7) ? 0 : n / 4, k = 4 * n4;
    if (n4) {
        to_bf16x4_k<<<sg_blocks(n4, THREADS), THREADS, 0, sg_stream()>>>(dst, src, n4);
        CUDA_LAUNCHED();
    }
    if (k < n) {
        to_bf16_k<<<sg_blocks(n - k, THREADS), THREADS, 0, sg_stream()>>>(dst + k, src + k, n - k);
        CUDA_LAUNCHED();
    }
}

static __nv_bfloat16 *as_bf16(int slot, const float *src, long n) {
    __nv_bfloat16 *dst = (__nv_bfloat16 *)sg_scratch(slot, (size_t)n * sizeof *dst);
    sg_cast_into(dst, src, n);
    return dst;
}

/* The forward's copies (of x and of w) and the producers' twins, least
 * recently used first out. */
typedef struct {
    const float *src; /* NULL: free slot (its buffer may be kept for reuse) */
    long n;
    __nv_bfloat16 *copy;
    size_t cap; /* elements */
    unsigned long used;
    int read;          /* a forward read copy: the backward's dW may reuse it (ops.h) */
    unsigned long seq; /* a twin: sg_stream_seq() after its producer; 0 none (the count
                        * moves before any launch, so a producer's stamp is not 0) */
    int only;          /* a twin whose fp32 tensor was not stored: pinned */
    int inplace;       /* copy is src's own first 2n bytes (a compact twin-only tensor), not our buffer */
    unsigned long part; /* a twin two ops write: sg_stream_seq() after the first's part; 0 none */
} Kept;

static Kept g_kept[KEPT];
static unsigned long g_kept_clock;
static int g_keep = -1; /* SG_MATMUL_KEEP, read once */
static long g_skipped; /* casts skipped: sg_matmul_casts_skipped */
static long g_unstored; /* fp32 outputs not stored: sg_matmul_stores_skipped */
static long g_bf16_out; /* outputs stored in bf16 (op_bf16_operand): sg_matmul_bf16_outputs */
static int g_poison;    /* SG_TWIN_POISON=1 */

/* The promises (address, count, as the table is keyed): op_matmul_only's,
 * op_bf16_operand's and op_attention_operand's */
enum { TO_MATMULS = OP_PROMISE_MATMULS, TO_BF16 = OP_PROMISE_BF16, TO_ATTENTION = OP_PROMISE_ATTENTION };
typedef struct {
    const float *p;
    long n;
    int kind;
    long len; /* the reals its layout may have (op_promised_len): the pointers into it lie there */
} Promise;
static Promise *g_promised;
static int g_n_promised, g_cap_promised;

static void print_tuning(void); /* below, with the plans */

static void print_stats(void) {
    fprintf(stderr, "sg matmul: %ld operand casts skipped, %ld fp32 outputs not stored, %ld outputs stored in bf16\n",
            g_skipped, g_unstored, g_bf16_out);
    print_tuning();
}

static int keep_on(void);
extern "C" int sg_keep_copies(void) { return keep_on(); }

/* A switch: unset or empty gives dflt, "1" on, "0" off, anything else -1 */
static int env_switch(const char *name, int dflt) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    return !strcmp(e, "1") ? 1 : !strcmp(e, "0") ? 0 : -1;
}
/* A bad value stops the program as it loads, with the usage status, before
 * a run directory exists (as a bad SG_ATTN does): "off" or "no" must not
 * read as on. */
__attribute__((constructor)) static void switches_check_env(void) {
    static const char *const what[][2] = {
        {"SG_MATMUL_KEEP", "\"1\" (or unset: the matmuls keep their operands' bf16 copies and twins) or \"0\""},
        {"SG_TWIN_POISON", "\"0\" (or unset) or \"1\" (fp32 outputs left unstored for their twins read as NaN)"},
        {"SG_MATMUL_STATS", "\"0\" (or unset) or \"1\" (the matmuls' counts and tuning printed at exit)"},
    };
    for (int i = 0; i < 3; i++)
        if (env_switch(what[i][0], 0) < 0) {
            fprintf(stderr, "%s: %s must be %s\n", getenv(what[i][0]), what[i][0], what[i][1]);
            exit(2);
        }
}

/* SG_MATMUL_KEEP, SG_TWIN_POISON and SG_MATMUL_STATS, read together once */
static void read_env(void) {
    if (g_keep >= 0) return;
    g_keep = env_switch("SG_MATMUL_KEEP", 1);
    g_poison = env_switch("SG_TWIN_POISON", 0);
    if (env_switch("SG_MATMUL_STATS", 0) == 1) atexit(print_stats);
}
static int keep_on(void) {
    read_env();
    return g_keep;
}
static int poison_on(void) {
    read_env();
    return g_poison;
}

/* op_free: an address may come back for another buffer.  A pinned twin
 * stays: it lives in a promised tensor, which its owner ends the promise
 * of before it frees it (ops.h). */
extern "C" void sg_matmul_forget(void) {
    for (int i = 0; i < KEPT; i++)
        if (!g_kept[i].only) g_kept[i].src = NULL;
}

extern "C" long sg_matmul_casts_skipped(void) { return g_skipped; }
extern "C" long sg_matmul_stores_skipped(void) { return g_unstored; }

extern "C" long sg_matmul_bf16_outputs(void) { return g_bf16_out; }

/* SG_BF16_OPERANDS: 1 (or unset) on, 0 off, -1 a bad value */
static int bf16_operands_env(void) {
    const char *e = getenv("SG_BF16_OPERANDS");
    if (!e || !*e || !strcmp(e, "1")) return 1;
    return !strcmp(e, "0") ? 0 : -1;
}
#define BF16_OPERANDS_ERROR \
    "SG_BF16_OPERANDS must be \"1\" (or unset: the tensors promised as bf16 operands, such as the MLP's hidden " \
    "activation, stored in bf16 as autocast stores them) or \"0\" (stored in fp32)"

/* A bad SG_BF16_OPERANDS stops the program as it loads, with the usage status,
 * before a run directory exists (as a bad SG_ATTN does). */
__attribute__((constructor)) static void bf16_operands_check_env(void) {
    if (bf16_operands_env() >= 0) return;
    fprintf(stderr, "%s: " BF16_OPERANDS_ERROR "\n", getenv("SG_BF16_OPERANDS"));
    exit(2);
}

/* SG_COMPACT_ACTS: 1 (or unset) the tensors kept in bf16 alone (stored so,
 * or as their twins) laid out in half their reals (op_promised_len), 0 in
 * all of them, as before: the same bits either way, in more memory; -1 a
 * bad value */
static int compact_env(void) {
    const char *e = getenv("SG_COMPACT_ACTS");
    if (!e || !*e || !strcmp(e, "1")) return 1;
    return !strcmp(e, "0") ? 0 : -1;
}
__attribute__((constructor)) static void compact_check_env(void) {
    if (compact_env() >= 0) return;
    fprintf(stderr,
            "%s: SG_COMPACT_ACTS must be \"1\" (or unset: the activations stored in bf16 take half the memory) or "
            "\"0\" (laid out as fp32)\n",
            getenv("SG_COMPACT_ACTS"));
    exit(2);
}

static void promise(const real *buf, long n, int kind) {
    if (g_n_promised == g_cap_promised) {
        int cap = g_cap_promised ? 2 * g_cap_promised : 64;
        Promise *p = (Promise *)realloc(g_promised, (size_t)cap * sizeof *p);
        /* a tensor laid out for its bf16 alone (op_promised_len) has no room for fp32 */
        if (!p) sg_cuda_fail(__FILE__, __LINE__, "promise", "out of host memory for the table of promised tensors");
        g_promised = p, g_cap_promised = cap;
    }
    g_promised[g_n_promised].p = buf, g_promised[g_n_promised].n = n, g_promised[g_n_promised].kind = kind;
    g_promised[g_n_promised].len = op_promised_len(kind, n);
    g_n_promised++;
}

/* Whether a promise of this kind is taken, one rule for the promises and
 * op_promised_len.  Without twins every output is stored.  The qkv
 * projection's output, read by the attention and the gates alone (ops.h),
 * is stored in bf16 as a bf16 operand is when the attention reads bf16
 * operands (the mma kernels, whose packing then copies bf16 instead of
 * rounding fp32: attention_pack.cu); the wmma tiles read fp32, so under
 * them the promise is not taken. */
static int takes(int kind) {
    switch (kind) {
    case TO_MATMULS: return keep_on();
    case TO_BF16: return bf16_operands_env() == 1;
    case TO_ATTENTION: return bf16_operands_env() == 1 && sg_attn_tiles_env() >= 1;
    }
    return 0;
}

/* A tensor stored in bf16 holds its values in its own first 2n bytes, and
 * a twin-only tensor laid out so keeps its twin there (in_place): either
 * needs only half the reals (the comment at the top). */
extern "C" long op_promised_len(int kind, long n) {
    if (n <= 0 || compact_env() != 1 || !takes(kind)) return n;
    /* (n + 1) / 2 for a 2-byte bf16; n in the emulator's exact build, whose bf16 is a float */
    return (long)(((size_t)n * sizeof(__nv_bfloat16) + sizeof(float) - 1) / sizeof(float));
}

extern "C" void op_matmul_only(const real *buf, long n) {
    if (buf && n > 0 && takes(TO_MATMULS)) promise(buf, n, TO_MATMULS);
}

extern "C" void op_bf16_operand(const real *buf, long n) {
    if (buf && n > 0 && takes(TO_BF16)) promise(buf, n, TO_BF16);
}

extern "C" void op_attention_operand(const real *buf, long n) {
    if (buf && n > 0 && takes(TO_ATTENTION)) promise(buf, n, TO_ATTENTION);
}

/* The pinned twins of the tensors whose promise ends are dropped with it:
 * they held values whose fp32 tensor was never stored. */
extern "C" void op_matmul_only_end(const void *base, size_t bytes) {
    const char *lo = (const char *)base, *hi = lo + bytes;
    int kept = 0;
    for (int i = 0; i < g_n_promised; i++) {
        const char *p = (const char *)g_promised[i].p;
        if (p < lo || p >= hi) g_promised[kept++] = g_promised[i];
    }
    g_n_promised = kept;
    for (int i = 0; i < KEPT; i++) {
        const char *p = (const char *)g_kept[i].src;
        if (g_kept[i].only && p >= lo && p < hi) g_kept[i].src = NULL, g_kept[i].only = 0;
    }
}

static int promised(const float *p, long n, int kind) {
    for (int i = 0; i < g_n_promised; i++)
        if (g_promised[i].p == p && g_promised[i].n == n && g_promised[i].kind == kind) return 1;
    return 0;
}
/* src[0, n) is a twin-only tensor laid out for its twin alone: the twin
 * lives in its own bytes */
static int in_place(const float *src, long n) {
    for (int i = 0; i < g_n_promised; i++) {
        const Promise *q = &g_promised[i];
        if (q->p == src && q->n == n && q->kind == TO_MATMULS) return q->len < n;
    }
    return 0;
}
static int bf16_kind(int kind) { return kind == TO_BF16 || kind == TO_ATTENTION; }

/* A bf16 operand's values, which live in its own first 2n bytes.
 * The promise says that only a matmul (or, for an attention operand, the
 * value gate: sg_bf16_output) writes it, always with those bf16 values
 * (op_matmul_fwd's out, op_matmul_bwd's dinp, op_gate_fwd's vg, all
 * overwritten). */
extern "C" const __nv_bfloat16 *sg_bf16_stored(const float *p, long n) {
    return p && n > 0 && (promised(p, n, TO_BF16) || promised(p, n, TO_ATTENTION)) ? (const __nv_bfloat16 *)p
                                                                                   : NULL;
}

/* Element p of a tensor stored in bf16 (q, k and v are parts of qkv): its
 * bf16, at the same index from the tensor's first byte.  The tensor is the
 * one whose reals hold p (ops.h, op_promised_len): a compact layout puts
 * the next tensors (vg after qkv) where this one's fp32 elements would
 * have gone on, and ops.h keeps every pointer into a compact tensor within
 * its reals.  A pointer in no tensor's reals but within a tensor's n
 * belongs to a tensor laid out in all its reals. */
extern "C" const __nv_bfloat16 *sg_bf16_inside(const float *p) {
    if (!p) return NULL;
    const Promise *own = NULL, *past = NULL; /* p within its reals; p past them, within its n */
    for (int i = 0; i < g_n_promised; i++) {
        const Promise *q = &g_promised[i];
        if (!bf16_kind(q->kind) || p < q->p || p >= q->p + q->n) continue;
        if (p < q->p + q->len) own = q;
        else past = q;
    }
    const Promise *q = own ? own : past; /* past alone: a tensor laid out in all its reals */
    return q ? (const __nv_bfloat16 *)q->p + (p - q->p) : NULL;
}

static Kept *kept_find(const float *src, long n) {
    for (int i = 0; i < KEPT; i++)
        if (g_kept[i].src == src && g_kept[i].n == n) return &g_kept[i];
    return NULL;
}

/* A matmul needs the fp32 values of src[0, n); stops if they were never stored. */
static void need_fp32(const float *src, long n, const char *role) {
    if (sg_bf16_stored(src, n)) {
        char why[320];
        snprintf(why, sizeof why,
                 "%s (%ld elements) was promised as a bf16 operand (op_bf16_operand), so it holds bf16 values, not "
                 "the fp32 a matmul reads: the promise was broken",
                 role, n);
        sg_cuda_fail(__FILE__, __LINE__, "op_bf16_operand", why);
    }
    const Kept *k = kept_find(src, n);
    if (k && k->only) {
        char why[320];
        snprintf(why, sizeof why,
                 "%s (%ld elements) was promised to matmuls alone (op_matmul_only), so only its bf16 twin "
                 "was stored, and that twin is stale here: the promise was broken",
                 role, n);
        sg_cuda_fail(__FILE__, __LINE__, "op_matmul_only", why);
    }
}

/* The slot for x[0, n), claimed (the least recently used) if there is none,
 * with room for n elements; its contents are the caller's to write.  NULL
 * when out of memory or when every slot is pinned. */
static Kept *kept_slot(const float *src, long n) {
    Kept *k = kept_find(src, n);
    const int inplace = in_place(src, n);
    if (k && k->inplace != inplace) k->src = NULL, k->only = 0, k = NULL; /* the tensor was laid out again */
    if (!k) {
        for (int i = 0; i < KEPT; i++) { /* a free slot, else the least recently used unpinned one */
            Kept *c = &g_kept[i];
            if (c->only) continue;
            if (!c->src) {
                k = c;
                break;
            }
            if (!k || c->used < k->used) k = c;
        }
        if (!k) return NULL; /* every slot pinned: the caller casts into scratch, or stores fp32 */
        if (k->inplace) k->copy = NULL, k->cap = 0, k->inplace = 0; /* another tensor's bytes, not ours */
        if (inplace) {
            if (k->copy) { /* the slot's own buffer goes: in-place slots stay pinned while in use */
                CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued product may read it */
                CUDA_CHECK(sg_free(k->copy));
            }
            k->copy = (__nv_bfloat16 *)src, k->cap = (size_t)n, k->inplace = 1;
        } else if (k->cap < (size_t)n) {
            if (k->copy) {
                CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued product may read it */
                CUDA_CHECK(sg_free(k->copy));
                k->copy = NULL, k->cap = 0;
            }
            if (sg_malloc((void **)&k->copy, (size_t)n * sizeof *k->copy) != cudaSuccess) {
                cudaGetLastError(); /* out of memory: cast into scratch as before */
                k->src = NULL;
                return NULL;
            }
            k->cap = (size_t)n;
        }
        k->src = src, k->n = n;
    }
    k->used = ++g_kept_clock;
    k->read = 0, k->seq = 0, k->only = 0, k->part = 0; /* about to be rewritten: nothing until then */
    return k;
}

/* The slot of x[0, n) if it holds a twin that nothing issued since its
 * producer can have made stale (the comment at the top).  Called before
 * the matmul issues anything. */
static Kept *twin_fresh(const float *src, long n) {
    Kept *k = kept_find(src, n);
    return k && k->seq && k->seq == sg_stream_seq() ? k : NULL;
}

/* The forward's bf16 copy of x[0, n), kept for the backward: the
 * producer's twin when fresh, else cast here. */
static const __nv_bfloat16 *keep_bf16(const float *src, long n) {
    Kept *k = twin_fresh(src, n);
    if (k) {
        g_skipped++;
        k->used = ++g_kept_clock;
    } else {
        need_fp32(src, n, "a forward's x");
        k = kept_slot(src, n);
        if (!k) return NULL;
        sg_cast_into(k->copy, src, n);
    }
    k->read = 1;
    return k->copy;
}

/* The forward's bf16 copy of its weight: a model weight's copy that AdamW
 * keeps current (weight_copies.cu), else one cast here and kept for the
 * backward's dinp product (ops.h: w holds what the forward read, as inp
 * does), since an optimizer step may have changed w since the last
 * forward.  Not counted in g_skipped, which counts the casts of x and
 * dout. */
static const __nv_bfloat16 *keep_weight(const float *w, long n) {
    const __nv_bfloat16 *c = sg_weight_bf16(w, n, n);
    if (c) return c;
    Kept *k = kept_slot(w, n);
    if (!k) return NULL;
    sg_cast_into(k->copy, w, n);
    k->read = 1;
    return k->copy;
}

extern "C" __nv_bfloat16 *sg_twin_begin(const float *out, long n) {
    if (!keep_on() || n <= 0) return NULL;
    Kept *k = kept_slot(out, n);
    if (!k && in_place(out, n)) /* without a twin the producer would store fp32 over the next tensor */
        sg_cuda_fail(__FILE__, __LINE__, "sg_twin_begin",
                     "every twin slot is pinned (more than 250 twin-only tensors at once): a tensor laid out for "
                     "its bf16 twin alone cannot be written; SG_COMPACT_ACTS=0 lays them out in fp32");
    return k ? k->copy : NULL;
}

extern "C" void sg_twin_written(const float *out, long n) {
    Kept *k = kept_find(out, n);
    if (k) k->seq = sg_stream_seq();
}

extern "C" void sg_twin_partial(const float *out, long n) {
    Kept *k = kept_find(out, n);
    if (k) k->part = sg_stream_seq();
}

extern "C" __nv_bfloat16 *sg_twin_rest(const float *out, long n, int *store) {
    Kept *k = kept_find(out, n);
    if (!k || !k->part || k->part != sg_stream_seq()) return NULL;
    k->part = 0;
    *store = !k->only;
    return k->copy;
}

extern "C" void sg_twin_none(const float *out, long n) {
    Kept *k = kept_find(out, n);
    if (k) k->src = NULL, k->only = 0;
}

extern "C" float *sg_twin_fp32(float *out, long n) {
    Kept *k = kept_find(out, n);
    if (!k || !promised(out, n, TO_MATMULS)) return out;
    k->only = 1;
    g_unstored++;
    /* in place, the tensor's bytes are its twin and the next tensor's */
    if (poison_on() && !k->inplace) CUDA_CHECK(cudaMemsetAsync(out, 0xff, (size_t)n * sizeof *out, sg_stream())); /* NaN */
    return NULL;
}

typedef struct {
    int m, n, k, ta, tb, lda, ldb, ldc, accumulate;
    int out_bf16; /* C and D bf16 (a bf16 operand, never accumulated into), else fp32 */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t first; /* the heuristic's first choice: what every untuned call runs */
    cublasLtMatmulAlgo_t algo;  /* the tuned choice, once tuned */
    int used, tuned;
    int n_cand, n_rejected;     /* tuning's record, for SG_MATMUL_STATS */
    float first_us, chosen_us;
} Plan;

static Plan g_plans[CACHE];

/* The workspace limit and the alignments the operands keep. */
static cublasLtMatmulPreference_t preference(void) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* The heuristic otherwise assumes 256-byte-aligned pointers.  A and B are
     * bf16 scratch copies (256-byte aligned); C and D are the caller's fp32
     * tensors, which the model aligns to 64 bytes only (src/model.c). */
    uint32_t align_ab = 256, align_cd = 64;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_ab, sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_ab, sizeof align_ab));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd, sizeof align_cd));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd, sizeof align_cd));
    return pref;
}

static Plan *plan_for(int m, int n, int k, int ta, int tb, int lda, int ldb, int ldc, int accumulate,
                      int out_bf16) {
    for (int i = 0; i < CACHE; i++) {
        Plan *p = &g_plans[i];
        if (p->used && p->m == m && p->n == n && p->k == k && p->ta == ta && p->tb == tb && p->lda == lda &&
            p->ldb == ldb && p->ldc == ldc && p->accumulate == accumulate && p->out_bf16 == out_bf16)
            return p;
    }
    Plan *p = NULL;
    for (int i = 0; i < CACHE && !p; i++)
        if (!g_plans[i].used) p = &g_plans[i];
    if (!p) { /* more shapes than slots: recycle the first */
        p = &g_plans[0];
        cublasLtMatmulDescDestroy(p->op);
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
    }
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k, p->ta = ta, p->tb = tb, p->lda = lda, p->ldb = ldb, p->ldc = ldc;
    p->accumulate = accumulate, p->out_bf16 = out_bf16;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* stored shapes (column-major rows x cols) */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, out_bf16 ? CUDA_R_16BF : CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref = preference();
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(sg_cublaslt(), p->op, p->a, p->b, p->c, p->c, pref, 1, &h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) sg_cuda_fail(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "no algorithm for this shape");
    p->first = h.algo;
    p->used = 1;
    return p;
}

/* D = op(A) op(B) + beta C with the plan's layouts (C and D alike, of the
 * plan's output type) */
static void lt_matmul(const Plan *p, const cublasLtMatmulAlgo_t *algo, float beta, const __nv_bfloat16 *a,
                      const __nv_bfloat16 *b, const void *c, void *d, void *ws) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasLtMatmul(sg_cublaslt(), p->op, &alpha, a, p->a, b, p->b, &beta, c, p->c, d, p->c, algo, ws,
                                WORKSPACE, sg_stream()));
}

/* ---- tuning (SG_MATMUL_TUNE=1; the comment at the top) ---- */

enum { TUNE_CANDIDATES = 8, TUNE_REPS = 5, DIFF_BLOCKS = 128 };
static int g_tune = -1; /* SG_MATMUL_TUNE, read once; sg_matmul_set_tune */

/* 1 on, 0 off, -1 a bad value */
static int tune_env(void) {
    const char *e = getenv("SG_MATMUL_TUNE");
    if (!e || !*e || !strcmp(e, "0")) return 0;
    return !strcmp(e, "1") ? 1 : -1;
}
#define TUNE_ERROR \
    "SG_MATMUL_TUNE must be \"0\" (or unset: the heuristic's first choice) or \"1\" (time the candidates)"

/* A bad SG_MATMUL_TUNE stops the program as it loads, with the usage
 * status, before a run directory exists (as a bad SG_ATTN does); tune_on
 * catches one set later. */
__attribute__((constructor)) static void tune_check_env(void) {
    if (tune_env() >= 0) return;
    fprintf(stderr, "%s: " TUNE_ERROR "\n", getenv("SG_MATMUL_TUNE"));
    exit(2);
}

static int tune_on(void) {
    if (g_tune < 0) {
        const int t = tune_env();
        if (t < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_MATMUL_TUNE", TUNE_ERROR);
        g_tune = t;
    }
    return g_tune;
}

/* For a program that compares both ways (bench_gpu --matmul, test_gpu_ops):
 * overrides SG_MATMUL_TUNE.  Plans keep what tuning chose; a plan not yet
 * tuned is tuned at its next call while on, and every call while off runs
 * the first choice. */
extern "C" void sg_matmul_set_tune(int on) { g_tune = on != 0; }

/* Per block, how many elements (W: their words, fp32 or bf16) of x and y
 * differ in rows [0, rows) of cols columns (leading dimension ld); the host
 * adds the blocks' counts.  No atomics: the emulator has none, and this
 * runs once per shape. */
template <typename W>
__global__ void count_diff_k(unsigned long long *part, const W *x, const W *y, long rows, long cols, long ld) {
    __shared__ unsigned long long s[THREADS];
    unsigned long long c = 0;
    const long n = rows * cols, stride = (long)gridDim.x * blockDim.x;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long at = i / rows * ld + i % rows;
        c += x[at] != y[at];
    }
    s[threadIdx.x] = c;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

/* the elements in which two of the plan's outputs differ; part: DIFF_BLOCKS counts of scratch */
static unsigned long long count_diff(const Plan *p, const void *x, const void *y, unsigned long long *part) {
    const long n = (long)p->m * p->n;
    if (n <= 0) return 0;
    const unsigned blocks = n < (long)DIFF_BLOCKS * THREADS ? sg_blocks(n, THREADS) : (unsigned)DIFF_BLOCKS;
    if (p->out_bf16)
        count_diff_k<<<blocks, THREADS, 0, sg_stream()>>>(part, (const unsigned short *)x, (const unsigned short *)y,
                                                           p->m, p->n, p->ldc);
    else
        count_diff_k<<<blocks, THREADS, 0, sg_stream()>>>(part, (const unsigned *)x, (const unsigned *)y, p->m, p->n,
                                                           p->ldc);
    CUDA_LAUNCHED();
    unsigned long long h[DIFF_BLOCKS], sum = 0;
    CUDA_CHECK(cudaMemcpyAsync(h, part, blocks * sizeof *h, cudaMemcpyDeviceToHost, sg_stream()));
    CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    for (unsigned i = 0; i < blocks; i++) sum += h[i];
    return sum;
}

/* The median time of TUNE_REPS runs of one algorithm, in µs. */
static float time_us(const Plan *p, const cublasLtMatmulAlgo_t *algo, float beta, const __nv_bfloat16 *a,
                     const __nv_bfloat16 *b, const void *c, void *d, void *ws, cudaEvent_t ev[2]) {
    float us[TUNE_REPS];
    for (int r = 0; r < TUNE_REPS; r++) {
        CUDA_CHECK(cudaEventRecord(ev[0], sg_stream()));
        lt_matmul(p, algo, beta, a, b, c, d, ws);
        CUDA_CHECK(cudaEventRecord(ev[1], sg_stream()));
        CUDA_CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        int j = r; /* insertion into the sorted prefix */
        for (; j > 0 && us[j - 1] > 1000 * ms; j--) us[j] = us[j - 1];
        us[j] = 1000 * ms;
    }
    return us[TUNE_REPS / 2];
}

/* Chooses p->algo (the comment at the top), on the call's operands a and b
 * and, accumulating, its output d as C.  Only scratch is written.
 *
 * The twins' freshness count (sg_stream_seq) moves with every launch and
 * library call made here.  That cannot make a twin be taken wrongly or
 * missed: op_matmul_fwd and op_matmul_bwd look up every twin and kept copy
 * they use before their first cast or gemm issues anything, and an untuned
 * gemm already moves the count (cublasLtMatmul on sg_stream()), so no stamp
 * made before a gemm was ever fresh after it; tuning only moves it more
 * within the same call. */
static void tune(Plan *p, void *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, void *ws) {
    cublasLtMatmulHeuristicResult_t h[TUNE_CANDIDATES];
    int found = 0;
    cublasLtMatmulPreference_t pref = preference();
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(sg_cublaslt(), p->op, p->a, p->b, p->c, p->c, pref, TUNE_CANDIDATES,
                                                h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    /* the first choice is plan_for's, the untuned algorithm, whatever a
     * longer request puts first; then the others that fit */
    cublasLtMatmulAlgo_t cand[TUNE_CANDIDATES + 1];
    int nc = 0;
    cand[nc++] = p->first;
    for (int i = 0; i < found; i++)
        if (h[i].state == CUBLAS_STATUS_SUCCESS && h[i].workspaceSize <= WORKSPACE &&
            memcmp(&h[i].algo, &p->first, sizeof p->first))
            cand[nc++] = h[i].algo;

    /* ref: the first choice's output R; accumulating, also C2 (below) and
     * the first choice's output with C2 as C, a plane each.  out: a
     * candidate's output, then the blocks' counts.  Planes start 256-byte
     * aligned, as the C and D promises want. */
    const float beta = p->accumulate ? 1.0f : 0.0f;
    const size_t ld = (size_t)p->ldc, plane = (ld * p->n + 63) / 64 * 64;
    float *ref = (float *)sg_scratch(SCRATCH_TUNE_REF, (p->accumulate ? 3 : 1) * plane * sizeof(float));
    float *out =
        (float *)sg_scratch(SCRATCH_TUNE_OUT, plane * sizeof(float) + DIFF_BLOCKS * sizeof(unsigned long long));
    float *c2 = ref + plane, *ref2 = ref + 2 * plane;
    unsigned long long *part = (unsigned long long *)(out + plane);
    cudaEvent_t ev[2];
    CUDA_CHECK(cudaEventCreate(&ev[0]));
    CUDA_CHECK(cudaEventCreate(&ev[1]));

    lt_matmul(p, &cand[0], beta, a, b, d, ref, ws); /* also the first choice's warm-up */
    if (p->accumulate) {
        /* C2: R moved on by one column (one row if there is one column), so
         * that no output gets its own product as C: adding fl(x) to x
         * rounds alike in any order, which would hide an algorithm that
         * adds C apart.  Rows past m (ld > m) are moved along, unread. */
        const size_t at = p->n > 1 ? ld : 1, len = p->n > 1 ? ld * p->n : (size_t)p->m;
        CUDA_CHECK(cudaMemcpyAsync(c2, ref + at, (len - at) * sizeof *c2, cudaMemcpyDeviceToDevice, sg_stream()));
        CUDA_CHECK(cudaMemcpyAsync(c2 + len - at, ref, at * sizeof *c2, cudaMemcpyDeviceToDevice, sg_stream()));
        lt_matmul(p, &cand[0], beta, a, b, c2, ref2, ws);
    }
    const float first_us = time_us(p, &cand[0], beta, a, b, d, out, ws, ev);
    float best = first_us;
    int chosen = 0, rejected = 0;
    for (int i = 1; i < nc; i++) {
        lt_matmul(p, &cand[i], beta, a, b, d, out, ws); /* also its warm-up */
        unsigned long long diff = count_diff(p, out, ref, part);
        if (!diff && p->accumulate) {
            lt_matmul(p, &cand[i], beta, a, b, c2, out, ws);
            diff = count_diff(p, out, ref2, part);
        }
        if (diff) {
            rejected++;
            continue;
        }
        const float us = time_us(p, &cand[i], beta, a, b, d, out, ws, ev);
        if (us < best) best = us, chosen = i;
    }
    CUDA_CHECK(cudaEventDestroy(ev[0]));
    CUDA_CHECK(cudaEventDestroy(ev[1]));
    p->algo = cand[chosen];
    p->tuned = 1;
    p->n_cand = nc, p->n_rejected = rejected;
    p->first_us = first_us, p->chosen_us = best;
}

static void print_tuning(void) {
    int used = 0, tuned = 0, bf16 = 0;
    for (int i = 0; i < CACHE; i++) {
        const Plan *p = &g_plans[i];
        bf16 += p->used && p->out_bf16;
        used += p->used && !p->out_bf16;
        if (!p->used || !p->tuned) continue;
        tuned++;
        fprintf(stderr,
                "sg matmul tune: m %d n %d k %d ta %d tb %d accumulate %d: %d candidates, %d rejected (other bits), "
                "first %.1f us, chosen %.1f us\n",
                p->m, p->n, p->k, p->ta, p->tb, p->accumulate, p->n_cand, p->n_rejected, p->first_us, p->chosen_us);
    }
    if (g_tune == 1 || tuned) {
        fprintf(stderr, "sg matmul tune: %d of %d shapes tuned\n", tuned, used);
        if (bf16) fprintf(stderr, "sg matmul tune: %d shapes with bf16 outputs keep the first choice\n", bf16);
    }
}

/* D[m,n] = alpha op(A) op(B) + beta D, column-major, bf16 operands, D fp32
 * or (out_bf16, not accumulating) bf16. */
static void gemm(void *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int m, int n, int k, int ta, int tb,
                 int lda, int ldb, int ldc, int accumulate, int out_bf16) {
    Plan *p = plan_for(m, n, k, ta, tb, lda, ldb, ldc, accumulate, out_bf16);
    void *ws = sg_scratch(SCRATCH_LT_WORKSPACE, WORKSPACE);
    /* A bf16 output is not tuned: equal bf16 bits, unlike equal fp32 bits,
     * would not show that a candidate sums in the first choice's order. */
    const int tuned = tune_on() && !out_bf16;
    if (tuned && !p->tuned) tune(p, d, a, b, ws);
    lt_matmul(p, tuned ? &p->algo : &p->first, accumulate ? 1.0f : 0.0f, a, b, d, d, ws);
}

/* An output promised as a bf16 operand is written in bf16 (the comment at
 * the top), in its first 2n bytes and nowhere past them: the model lays
 * the next tensor out there (op_promised_len). */
static int bf16_output(const float *out, long n) {
    if (!sg_bf16_stored(out, n)) return 0;
    g_bf16_out++;
    return 1;
}

extern "C" __nv_bfloat16 *sg_bf16_output(float *out, long n) {
    return bf16_output(out, n) ? (__nv_bfloat16 *)out : NULL;
}

extern "C" void op_matmul_fwd(real *out, const real *inp, const real *w, int M, int K, int N) {
    const __nv_bfloat16 *x = keep_on() ? keep_bf16(inp, (long)M * K) : NULL;
    if (!x) x = as_bf16(SCRATCH_BF16_A, inp, (long)M * K);
    const __nv_bfloat16 *wb = keep_on() ? keep_weight(w, (long)N * K) : NULL;
    if (!wb) wb = as_bf16(SCRATCH_BF16_B, w, (long)N * K);
    gemm(out, wb, x, N, M, K, 1, 0, K, K, N, 0, bf16_output(out, (long)M * N));
}

extern "C" void op_matmul_bwd(real *dinp, real *dw, const real *dout, const real *inp, const real *w, int M, int K,
                              int N) {
    /* both lookups before anything is issued: the first launch moves the
     * count (and so do a tuning gemm's, tune()) */
    const Kept *t = keep_on() ? twin_fresh(dout, (long)M * N) : NULL;
    const Kept *k = NULL;
    if (dw && keep_on()) {
        k = kept_find(inp, (long)M * K);
        if (k && !k->read && !twin_fresh(inp, (long)M * K)) k = NULL; /* an untaken twin, stale */
    }
    if (!t) need_fp32(dout, (long)M * N, "a backward's dout");
    if (dw && !k) need_fp32(inp, (long)M * K, "a backward's x");
    g_skipped += (t != NULL) + (k != NULL);
    const __nv_bfloat16 *dy = t ? t->copy : as_bf16(SCRATCH_BF16_A, dout, (long)M * N);
    if (dinp) {
        const Kept *kw = keep_on() ? kept_find(w, (long)N * K) : NULL;
        const __nv_bfloat16 *wb = sg_weight_bf16(w, (long)N * K, (long)N * K);
        if (!wb) wb = kw && kw->read ? kw->copy : as_bf16(SCRATCH_BF16_B, w, (long)N * K);
        gemm(dinp, wb, dy, K, M, N, 0, 0, K, N, K, 0, bf16_output(dinp, (long)M * K));
    }
    if (dw) {
        const __nv_bfloat16 *x = k ? k->copy : as_bf16(SCRATCH_BF16_B, inp, (long)M * K);
        gemm(dw, x, dy, K, N, M, 0, 1, K, N, K, 1, 0);
    }
}
