/* What the causal attention forward's register-tile kernels share: the
 * mma.sync kernel (attention_fwd_mma.cu) and the warpgroup one
 * (attention_fwd_wgmma.cu) hold S, P and O in the same per-warp layout
 * (mma.m16n8k16's accumulators: a lane has rows g and g + 8 of its warp's
 * 16), so the logits' masking and scaling, the online softmax with its lazy
 * rescaling, and the final O / l and LSE are one code for both; only the
 * products and the shared-memory tiles differ. */
#ifndef SG_ATTENTION_FWD_TILE_H
#define SG_ATTENTION_FWD_TILE_H

#include "attention_cuda.h"

/* 128 queries per block against the 64-key tiles: each K and V tile in
 * shared memory serves twice the queries of attention_fwd.cu's 64, which
 * halves the tile traffic per product.
 *
 * A warp owns MT 16-row m-tiles (attn_fwd_mma, SG_ATTN_WARP_ROWS):
 * every K or V fragment it reads from shared memory (ldmatrix) then feeds
 * MT products instead of one.  Why that matters: an m16n8k16 product
 * takes 256 bytes of B operand for 2,048 multiply-adds, and an SM of an
 * H100/H200 does about 2,048 bf16 multiply-adds a clock while its shared
 * memory delivers 128 bytes: with one m-tile a warp needs all of that
 * bandwidth to keep the tensor cores busy, with two, half.
 * FlashAttention-2 gives a warp 32 rows for the same reason.  MT = 2 (4
 * warps) for d <= 64; at d = 128 the accumulators of two m-tiles would not
 * fit in the registers, so MT = 1 (8 warps) there.  (The backward keeps 4
 * warps of one m-tile: its dK/dV kernel's 166 registers per thread would
 * leave one 8-warp block per SM.)
 *
 * The rows of an m-tile see the instructions they saw with MT = 1, so both
 * give the same bits: a strip past an m-tile's last query, which MT = 1
 * skipped, is computed for it here only in S, where the mask replaces
 * every such logit by -inf; and with P = 0 there, it is skipped in P V. */
static constexpr int FWD_MMA_BQ = 128;
/* how far (base 2) a row's max may rise before O and l are rescaled */
static constexpr float ATTN_LAZY_LOG2 = 8.f;
static_assert(FWD_MMA_BQ == ATTN_PACK_ROWS && FWD_MMA_BQ == 2 * ATTN_BK,
              "the Q tile is as tall as the packing's rows, and holds one K and one V tile afterwards");
template <int MT>
struct FwdMmaShape {
    static constexpr int WARPS = FWD_MMA_BQ / (16 * MT);
    static constexpr int NT = 32 * WARPS;
};

/* Two regions of 128 bf16 rows: A holds the Q tile until every warp has
 * its Q fragments in registers, then serves as the second K/V buffer; B is
 * the first.  A K/V buffer is the K tile in its first 64 rows and the V
 * tile in the next 64.  Key tile kt lives in buffer kt & 1 (B for even kt),
 * and its log-bias in LB[kt & 1]. */
template <int DP>
struct FwdMmaLayout {
    static constexpr int LDH = DP + 8; /* bf16 rows: 16-byte aligned, ldmatrix conflict-free */
    static constexpr size_t REGION = sizeof(sg_bf16) * FWD_MMA_BQ * LDH;
    static constexpr size_t A = 0;
    static constexpr size_t B = attn_align(A + REGION);
    static constexpr size_t LB = attn_align(B + REGION);
    static constexpr size_t ZERO = attn_align(LB + sizeof(float) * 2 * ATTN_BK); /* wg_fresh's zero word */
    static constexpr size_t BYTES = attn_align(ZERO + sizeof(uint32_t));
};

/* The tile's logits (element e of s[n]: row row[e >> 1], key
 * k0 + 8n + 2 tq + (e & 1)) and mx, the running max over them in base 2.
 * MASK: -inf where j > i or j >= T, needed only where the tile reaches past
 * the m-tile's first query or past T; before that every key precedes every
 * row.
 * LB (a log-bias, natural units in lbs: attn_cp_f32s): s becomes
 * x = s scale + lb, base 2, and the softmax's
 * exponent is x - m.  Without one s stays the raw product and the exponent
 * is one fma, s scale - m (FlashAttention's folding): the max is taken
 * over the raw s and scaled once, which gives the max of the scaled logits
 * bit for bit, since scale > 0 and rounding is monotone. */
template <bool MASK, bool LB, int NN>
static __device__ __forceinline__ void attn_fwd_logits(float (&s)[NN][4], float (&mx)[2], const float *lbs,
                                                       float scale_log2, int k0, const int (&row)[2], int T,
                                                       int tq) {
    float raw[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = 8 * n + 2 * tq + (e & 1), j = k0 + c;
            const bool in = !MASK || (j <= row[e >> 1] && j < T);
            if (LB) {
                const float x = in ? fmaf(s[n][e], scale_log2, attn_base2(lbs[c])) : -INFINITY;
                s[n][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            } else {
                if (MASK && !in) s[n][e] = -INFINITY;
                raw[e >> 1] = fmaxf(raw[e >> 1], s[n][e]);
            }
        }
    if (!LB)
#pragma unroll
        for (int r = 0; r < 2; ++r) mx[r] = fmaxf(mx[r], raw[r] * scale_log2);
}

/* Where a forward block works, as both kernels derive it: query tile qt
 * (blockIdx.z counts from the last, the longest, so that it starts first),
 * head h, sequence b, the thread's warp and lane (gq = lane / 4, tq =
 * lane % 4), the offsets of the (b,h) rows (row0: the sequence's first row,
 * bh: the (b,h) slice of lse and the log-bias, ho: the head's columns), the
 * (b,h) slices of Q, K and V, the log-bias row (null without one), and
 * last_kt, the last key tile the block's queries reach (up to T - 1). */
struct FwdPlace {
    int qt, h, b, q0, warp, lane, gq, tq, last_kt;
    long row0, bh, ho;
    const sg_bf16 *qh, *kh, *vh;
    const float *lb;
    __device__ __forceinline__ FwdPlace(const AttnGeom &g, const AttnOp &qo, const AttnOp &ko, const AttnOp &vo,
                                        const float *logbias)
        : qt(gridDim.z - 1 - blockIdx.z), h(blockIdx.x), b(blockIdx.y), q0(qt * FWD_MMA_BQ),
          warp(threadIdx.x >> 5), lane(threadIdx.x & 31), gq(lane >> 2), tq(lane & 3),
          last_kt(((q0 + FWD_MMA_BQ < g.T ? q0 + FWD_MMA_BQ : g.T) - 1) / ATTN_BK), row0((long)b * g.T),
          bh((long)b * g.H + h), ho((long)h * g.d), qh(qo.at(b, h)), kh(ko.at(b, h)), vh(vo.at(b, h)),
          lb(logbias ? logbias + bh * g.T : nullptr) {}
};

/* An m-tile's running state before the first key tile: m the phantom
 * logit in base 2 (the learned b_h, or 0) or -inf without one, l its
 * exp2(0) = 1 counted once among the row's four lanes, or 0; O zero. */
template <int NO>
static __device__ __forceinline__ void attn_fwd_init(float (&m)[2], float (&l)[2], float (&o)[NO][4],
                                                     const AttnGeom &g, const float *sink, const FwdPlace &p) {
    m[0] = m[1] = g.phantom ? (sink ? sink[p.h] : 0.f) * ATTN_LOG2E : -INFINITY;
    l[0] = l[1] = g.phantom && p.tq == 0 ? 1.f : 0.f;
#pragma unroll
    for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
}

/* One key tile's online-softmax step for one 16-row m-tile (base 2), on
 * its logits s (attn_fwd_logits's layout) and running m, l: s becomes
 * P = exp2(x - m_new), l = l alpha + rowsum(P) (each lane over its own
 * columns).  Returns whether the m-tile rescales, and then alpha, the
 * factor O takes to go from the old m to the new (attn_fwd_rescale): the
 * caller applies it when O is its own, which for the pipelined warpgroup
 * kernel is after the products still adding into O have landed.  mask: the
 * tile reaches past the m-tile's first query or past T
 * (attn_fwd_logits<true>). */
template <bool LB, int NN>
static __device__ __forceinline__ bool attn_fwd_softmax(float (&s)[NN][4], float (&m)[2], float (&l)[2],
                                                        float (&alpha)[2], const float *lbs, float scale_log2,
                                                        int k0, const int (&row)[2], int T, int tq, bool mask) {
    float mx[2] = {m[0], m[1]};
    if (mask) attn_fwd_logits<true, LB>(s, mx, lbs, scale_log2, k0, row, T, tq);
    else attn_fwd_logits<false, LB>(s, mx, lbs, scale_log2, k0, row, T, tq);
    float mu[2];
    bool grow = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        grow |= mx[r] > m[r] + ATTN_LAZY_LOG2; /* -inf + c = -inf: a first finite max grows */
    }
    /* the m-tile's 16 rows decide together (warp-uniform) */
    const bool rescale = __any_sync(0xffffffffu, grow);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (!rescale) mx[r] = m[r];
        /* 0 while the row has seen nothing (no phantom): exp2(-inf - 0) = 0,
         * never exp2(-inf + inf) = NaN */
        mu[r] = mx[r] == -INFINITY ? 0.f : mx[r];
        alpha[r] = tc_ex2(m[r] - mu[r]);
    }
    float ps[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float p = LB ? tc_ex2(s[n][e] - mu[e >> 1]) : tc_ex2(fmaf(s[n][e], scale_log2, -mu[e >> 1]));
            s[n][e] = p;
            ps[e >> 1] += p;
        }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] = fmaf(l[r], alpha[r], ps[r]);
        m[r] = mx[r];
    }
    return rescale;
}

/* O *= alpha, row by row (attn_fwd_softmax's alpha) */
template <int NO>
static __device__ __forceinline__ void attn_fwd_rescale(float (&o)[NO][4], const float (&alpha)[2]) {
#pragma unroll
    for (int n = 0; n < NO; ++n) {
        o[n][0] *= alpha[0], o[n][1] *= alpha[0];
        o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
}

/* The step with O rescaled at once (the kernels whose O is idle here) */
template <bool LB, int NN, int NO>
static __device__ __forceinline__ void attn_fwd_online(float (&s)[NN][4], float (&m)[2], float (&l)[2],
                                                       float (&o)[NO][4], const float *lbs, float scale_log2,
                                                       int k0, const int (&row)[2], int T, int tq, bool mask) {
    float alpha[2];
    if (attn_fwd_softmax<LB>(s, m, l, alpha, lbs, scale_log2, k0, row, T, tq, mask)) attn_fwd_rescale(o, alpha);
}

/* The m-tile's end: l summed over the row's four lanes, O / l to rows
 * first .. first + 15 of out (and its twin), LSE = m + log l in natural log. */
template <int DP>
static __device__ __forceinline__ void attn_fwd_finish(float (&o)[DP / 8][4], const float (&m)[2], float (&l)[2],
                                                       float *out, float *lse, sg_bf16 *twin, const AttnGeom &g,
                                                       const FwdPlace &p, int first, const int (&row)[2]) {
    const long row0 = p.row0, ho = p.ho, bh = p.bh;
    const int lane = p.lane;
#pragma unroll
    for (int r = 0; r < 2; ++r) { /* a + b == b + a: the four lanes agree bitwise */
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    const float inv[2] = {1.f / l[0], 1.f / l[1]};
#pragma unroll
    for (int n = 0; n < DP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] *= inv[e >> 1];
    tc_store_rows<DP>(out + row0 * g.o_stride + ho, g.o_stride, o, first, g.T, g.d, 1.f, lane,
                      twin ? twin + row0 * g.o_stride + ho : nullptr);
    if ((lane & 3) == 0)
#pragma unroll
        for (int r = 0; r < 2; ++r)
            if (row[r] < g.T) lse[bh * g.T + row[r]] = (m[r] + log2f(l[r])) * ATTN_LN2;
}

#endif
