/* The packed bf16 operands of the mma attention kernels (attention_cuda.h,
 * attn_pack), and the forward's packs kept for the backward.
 *
 * Kept packs.  The forward packs Q, K and V; its backward reads the same
 * q, k and v (ops.h: op_attention_bwd's q, k, v, out and lse are what its
 * forward read and wrote), so it would pack the same bits again: at the
 * 124M tier a read of 3 N C floats and a write of 3 N C bf16 a layer, about
 * 1.4 GB a step.  So the forward packs into a buffer of its own, kept per
 * (q, k, v, shape), and the backward packs only dO.  The cost is memory:
 * 3 B H Tp DP bf16 a layer, 38 MB at the 124M tier's micro-batch (0.45 GB
 * for its 12 layers), 1.2 GB at 350M.  An entry from before the last
 * op_free is never taken again, so its buffer serves the next forward that
 * needs one: the packs held are those of the tensors live since then.
 *
 * When a kept pack is used.  Only by an mma backward whose q, k, v and
 * shape are those of the last mma forward that kept it, with no op_free
 * since (an address may come back for another buffer: sg_free_count).  A
 * forward that does not keep a pack (the wmma tiles, SG_MATMUL_KEEP=0, or
 * another shape at those addresses) drops the entry, so a backward never
 * reads a pack older than its own forward.  Anything else that rewrote q,
 * k or v between a forward and its backward would break ops.h's contract
 * for the backward in any case (out and lse are the forward's).
 * SG_MATMUL_KEEP=0 turns kept packs off with the matmuls' kept copies: the
 * backward then packs all four tensors, the same bits (the emulated
 * sgtrain checks every arm's gradients both ways). */
#include <limits.h>

#include "attention_cuda.h"

static constexpr int PACK_NT = 256;

/* Thread idx writes elements 8c .. 8c+7 of packed row idx / (DP/8) of
 * tensor a.which's nibble blockIdx.y: consecutive threads write consecutive
 * 16-byte chunks, and read the matching 32 bytes of the fp32 row (16 of a
 * bf16 one).  The grid has a slice for each tensor packed and none for
 * those read in place, so no block starts only to leave. */
template <int DP>
static __global__ void __launch_bounds__(PACK_NT)
    attn_pack_kernel(sg_bf16 *__restrict__ dst, AttnPackArgs a, AttnGeom g) {
    constexpr int CH = DP / 8;
    const long per = (long)g.B * g.H * g.Tp * CH; /* chunks per tensor */
    const long idx = (long)blockIdx.x * PACK_NT + threadIdx.x;
    if (idx >= per) return;
    const int which = a.which >> 4 * blockIdx.y & 15, c = (int)(idx % CH) * 8;
    const long prow = idx / CH, bh = prow / g.Tp;
    const int t = (int)(prow % g.Tp), b = (int)(bh / g.H), h = (int)(bh % g.H);
    sg_bf16x8 o; /* stored with one 16-byte write */
    for (int e = 0; e < 4; ++e) o.h[e] = __floats2bfloat162_rn(0.f, 0.f);
    if (t < g.T && c < g.d) {
        /* selected, not indexed: a dynamic index into the parameter would
         * copy it to local memory */
        const int stride = which == 0   ? a.s.stride[0]
                           : which == 1 ? a.s.stride[1]
                           : which == 2 ? a.s.stride[2]
                                        : a.s.stride[3];
        const long off = ((long)b * g.T + t) * stride + (long)h * g.d + c;
        const sg_bf16 *pb = which == 0 ? a.b[0] : which == 1 ? a.b[1] : which == 2 ? a.b[2] : a.b[3];
        if (pb) {
            const sg_bf16 *s = pb + off;
            if ((a.vecb >> which & 1) && c + 8 <= g.d) {
                o = sg_ld_bf16x8(s);
            } else {
                sg_bf16 x[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) x[e] = c + e < g.d ? s[e] : __float2bfloat16(0.f);
#pragma unroll
                for (int e = 0; e < 4; ++e) o.h[e].x = x[2 * e], o.h[e].y = x[2 * e + 1];
            }
        } else {
            const float *p = which == 0 ? a.s.p[0] : which == 1 ? a.s.p[1] : which == 2 ? a.s.p[2] : a.s.p[3];
            const float *s = p + off;
            float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            if (a.s.vec && c + 8 <= g.d) {
                const float4 lo = reinterpret_cast<const float4 *>(s)[0], hi = reinterpret_cast<const float4 *>(s)[1];
                x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
                x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    if (c + e < g.d) x[e] = s[e];
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) o.h[e] = __floats2bfloat162_rn(x[2 * e], x[2 * e + 1]);
        }
    }
    sg_st_bf16x8(dst + ((size_t)which * per + idx) * 8, o);
}

void attn_pack(sg_bf16 *dst, int n, const AttnPackSrc &src, const AttnGeom &g, int skip) {
    AttnPackArgs a = {src, {nullptr, nullptr, nullptr, nullptr}, 0, 0};
    int slices = 0;
    for (int i = 0; i < n; i++) {
        if (skip >> i & 1) continue;
        a.which |= i << 4 * slices++;
        a.b[i] = sg_bf16_inside(src.p[i]);
        if (a.b[i] && ((uintptr_t)a.b[i] & 15) == 0 && src.stride[i] % 8 == 0 && g.d % 8 == 0) a.vecb |= 1 << i;
    }
    if (slices == 0) return;
    attn_by_dpad(g.d, [&](auto dp) {
        constexpr int DP = decltype(dp)::value;
        const long per = (long)g.B * g.H * g.Tp * (DP / 8);
        attn_pack_kernel<DP><<<dim3((unsigned)((per + PACK_NT - 1) / PACK_NT), (unsigned)slices), PACK_NT, 0,
                               sg_stream()>>>(dst, a, g);
        CUDA_LAUNCHED();
    });
}

static long g_inplace; /* operands read in place: sg_attn_inplace_reads */
extern "C" long sg_attn_inplace_reads(void) { return g_inplace; }

int attn_inplace_ops(AttnOp *op, int n, const float *const *t, const int *stride, const AttnGeom &g) {
    int inplace = 0;
    for (int i = 0; i < n; i++) {
        op[i] = AttnOp{nullptr, 0, 0, 0};
        const sg_bf16 *b = sg_bf16_inside(t[i]);
        if (!b || attn_dpad(g.d) != g.d || stride[i] % 8 != 0 || ((uintptr_t)b & 15) != 0 ||
            (long)g.T * stride[i] >= INT_MAX) /* attn_cp_rows's 32-bit offsets */
            continue;
        op[i] = AttnOp{b, (long)g.T * stride[i], (long)g.d, stride[i]};
        inplace |= 1 << i;
        g_inplace++;
    }
    return inplace;
}

/* ---- kept packs ----------------------------------------------------------- */

enum { PACKS_KEPT = 128 }; /* more than any model's layers */

typedef struct {
    const float *q, *k, *v; /* q NULL: a free entry (its buffer kept for reuse) */
    int B, T, H, d, qs, ks, vs;
    unsigned long frees; /* sg_free_count() when packed */
    sg_bf16 *buf;
    size_t cap; /* elements */
    unsigned long used;
} KeptPack;

static KeptPack g_packs[PACKS_KEPT];
static unsigned long g_pack_clock;
static long g_packs_reused;

static bool pack_is(const KeptPack &e, const float *q, const float *k, const float *v, const AttnArgs *a) {
    return e.q == q && e.k == k && e.v == v && e.B == a->B && e.T == a->T && e.H == a->H && e.d == a->d &&
           e.qs == a->q_stride && e.ks == a->k_stride && e.vs == a->v_stride;
}

static KeptPack *pack_find(const float *q, const float *k, const float *v, const AttnArgs *a) {
    for (int i = 0; i < PACKS_KEPT; i++)
        if (g_packs[i].q && pack_is(g_packs[i], q, k, v, a)) return &g_packs[i];
    return nullptr;
}

void attn_pack_drop(const real *q, const real *k, const real *v, const AttnArgs *a) {
    KeptPack *e = pack_find(q, k, v, a);
    if (e) e->q = nullptr;
}

sg_bf16 *attn_pack_keep(const real *q, const real *k, const real *v, const AttnArgs *a, const AttnGeom &g) {
    const size_t n = 3 * attn_pack_elems(g);
    KeptPack *e = pack_find(q, k, v, a);
    if (!e) { /* a free entry (or one from before an op_free: never taken again), else the least recently used */
        for (int i = 0; i < PACKS_KEPT && !e; i++)
            if (!g_packs[i].q || g_packs[i].frees != sg_free_count()) e = &g_packs[i];
        if (!e) {
            e = &g_packs[0];
            for (int i = 1; i < PACKS_KEPT; i++)
                if (g_packs[i].used < e->used) e = &g_packs[i];
        }
    }
    if (e->cap < n) {
        if (e->buf) {
            CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* the stream may still read it */
            CUDA_CHECK(sg_free(e->buf));
        }
        e->buf = nullptr, e->cap = 0;
        if (sg_malloc((void **)&e->buf, n * sizeof(sg_bf16)) != cudaSuccess) {
            cudaGetLastError();
            e->buf = nullptr, e->q = nullptr;
            return nullptr; /* no room: the caller packs into scratch, the backward packs again */
        }
        e->cap = n;
    }
    e->q = q, e->k = k, e->v = v;
    e->B = a->B, e->T = a->T, e->H = a->H, e->d = a->d;
    e->qs = a->q_stride, e->ks = a->k_stride, e->vs = a->v_stride;
    e->frees = sg_free_count();
    e->used = ++g_pack_clock;
    return e->buf;
}

static void print_stats(void) {
    fprintf(stderr, "sg attention: %ld backwards took their forward's packed Q, K, V\n", g_packs_reused);
    fprintf(stderr, "sg attention: %ld operands read in place\n", g_inplace);
    if (sg_attn_dq_stored()) fprintf(stderr, "sg attention: %ld backwards formed dQ from the stored dS\n", sg_attn_dq_stored());
    if (sg_attn_bwd_piped())
        fprintf(stderr, "sg attention: %ld backward kernels ran with their strips pipelined (SG_ATTN_BWD_PIPE=1)\n",
                sg_attn_bwd_piped());
    if (sg_attn_wgmma_calls())
        fprintf(stderr, "sg attention: %ld kernels ran on the warpgroup products (SG_ATTN_WGMMA=%d)\n",
                sg_attn_wgmma_calls(), attn_wgmma_mode());
    if (attn_use_cudnn())
        fprintf(stderr, "sg attention: %ld forwards and %ld backwards ran on cuDNN\n", sg_attn_cudnn_calls(0),
                sg_attn_cudnn_calls(1));
}

const sg_bf16 *attn_pack_kept(const real *q, const real *k, const real *v, const AttnArgs *a) {
    static bool stats;
    if (!stats) { /* SG_MATMUL_STATS=1, as matmul.cu's counts */
        stats = true;
        if (sg_env_switch("SG_MATMUL_STATS", 0) == 1) atexit(print_stats);
    }
    const KeptPack *e = pack_find(q, k, v, a);
    if (!e || e->frees != sg_free_count()) return nullptr;
    g_packs_reused++;
    return e->buf;
}

extern "C" long sg_attn_packs_reused(void) { return g_packs_reused; }
