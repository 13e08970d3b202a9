/* Dense layers on cuBLASLt in the paper's precision: the operands are cast
 * to bf16 (as torch.autocast does), products accumulate in fp32, outputs
 * and weight gradients are fp32.
 *
 * Row-major X[M,K] is column-major X^T with leading dimension K, so with
 * y = x W^T (W stored [N,K]):
 *   forward  y^T[N,M]   = W[N,K]   . x^T[K,M]      A = W (transposed), B = x
 *   dinp     dx^T[K,M]  = W^T[K,N] . dy^T[N,M]     A = W, B = dy
 *   dW       dW^T[K,N] += x^T[K,M] . dy[M,N]       A = x, B = dy (transposed), beta = 1
 * The products run on cuBLASLt (gemm.cu), one algorithm per shape, so
 * every step sums in the same order.
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
 * The products themselves, their plans and SG_MATMUL_TUNE are gemm.cu's. */
#include <stdint.h>
#include <string.h>

#include "attention_tiles_env.h"
#include "cuda_common.h"

enum { THREADS = 256, KEPT = 256 };

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

static void print_stats(void) {
    fprintf(stderr, "sg matmul: %ld operand casts skipped, %ld fp32 outputs not stored, %ld outputs stored in bf16\n",
            g_skipped, g_unstored, g_bf16_out);
    sg_gemm_print_tuning();
}

static int keep_on(void);
extern "C" int sg_keep_copies(void) { return keep_on(); }

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
        if (sg_env_switch(what[i][0], 0) < 0) {
            fprintf(stderr, "%s: %s must be %s\n", getenv(what[i][0]), what[i][0], what[i][1]);
            exit(2);
        }
}

/* SG_MATMUL_KEEP, SG_TWIN_POISON and SG_MATMUL_STATS, read together once */
static void read_env(void) {
    if (g_keep >= 0) return;
    g_keep = sg_env_switch("SG_MATMUL_KEEP", 1);
    g_poison = sg_env_switch("SG_TWIN_POISON", 0);
    if (sg_env_switch("SG_MATMUL_STATS", 0) == 1) atexit(print_stats);
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
static int bf16_operands_env(void) { return sg_env_switch("SG_BF16_OPERANDS", 1); }
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
static int compact_env(void) { return sg_env_switch("SG_COMPACT_ACTS", 1); }
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
    sg_gemm(out, wb, x, N, M, K, 1, 0, K, K, N, 0, bf16_output(out, (long)M * N));
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
        sg_gemm(dinp, wb, dy, K, M, N, 0, 0, K, N, K, 0, bf16_output(dinp, (long)M * K));
    }
    if (dw) {
        const __nv_bfloat16 *x = k ? k->copy : as_bf16(SCRATCH_BF16_B, inp, (long)M * K);
        sg_gemm(dw, x, dy, K, N, M, 0, 1, K, N, K, 1, 0);
    }
}
