/* Causal attention forward with register-resident tiles (FlashAttention-2's
 * scheme on mma.sync; mma_ptx.h), selected by SG_ATTN=mma.  Same math,
 * masking and precision as attention_fwd.cu, whose header states them, and
 * a warp per 16 queries walking 64-key tiles; what differs is the block
 * (128 queries, below) and where the tiles live:
 *   - S = Q K^T stays in the mma accumulators: each lane holds two query
 *     rows (g and g+8 of the warp's 16) at 16 key columns of a 64-key tile;
 *   - the online softmax runs on those registers, the row max and sum
 *     shared by the 4 lanes of a row with two shuffles;
 *   - P is packed to bf16 straight from the accumulators into the A operand
 *     of O += P V (the layouts coincide, mma_ptx.h), and O is an
 *     accumulator too, rescaled by alpha in place.
 * Shared memory holds only the bf16 Q, K, V tiles (read with ldmatrix) and
 * the key tile's log-bias: no fp32 work tile, no P tile, and a warp needs
 * no barrier of its own between the products.
 *
 * The running sum l is kept per lane over the lane's own columns and summed
 * across the row's four lanes once at the end (alpha scales every partial
 * alike); the phantom's term exp(c_h - m) = 1 starts in the partial of lane
 * t = 0 only. */
#include "attention_cuda.h"

/* 128 queries (8 warps) per block against the 64-key tiles: each K and V
 * tile loaded into shared memory (fp32 from global memory, rounded to
 * bf16) serves twice the queries of attention_fwd.cu's 64, which halves
 * that traffic per product; it, not the tensor cores, bounds these tiles
 * when Q, K and V arrive as fp32.  (The backward keeps 4 warps: its
 * dK/dV kernel's 166 registers per thread would leave one 8-warp block per
 * SM.) */
static constexpr int FWD_MMA_WARPS = 8;
static constexpr int FWD_MMA_NT = 32 * FWD_MMA_WARPS;
static constexpr int FWD_MMA_BQ = 16 * FWD_MMA_WARPS;

template <int DP>
struct FwdMmaLayout {
    static constexpr int LDH = DP + 8; /* bf16 rows: 16-byte aligned, ldmatrix conflict-free */
    static constexpr size_t Q = 0;
    static constexpr size_t K = attn_align(Q + sizeof(sg_bf16) * FWD_MMA_BQ * LDH);
    static constexpr size_t V = attn_align(K + sizeof(sg_bf16) * ATTN_BK * LDH);
    static constexpr size_t LB = attn_align(V + sizeof(sg_bf16) * ATTN_BK * LDH);
    static constexpr size_t BYTES = attn_align(LB + sizeof(float) * ATTN_BK);
};

/* s = the tile's logits in base 2 (element e of s[n]: row row[e >> 1], key
 * k0 + 8n + 2 tq + (e & 1)), and mx = the running max over them.  MASK:
 * -inf where j > i or j >= T, needed only where the tile reaches past the
 * warp's first query or past T; before that every key precedes every row. */
template <bool MASK, int NN>
static __device__ __forceinline__ void attn_fwd_logits(float (&s)[NN][4], float (&mx)[2], const float *lbs,
                                                       float scale_log2, int k0, const int (&row)[2], int T,
                                                       int tq) {
#pragma unroll
    for (int n = 0; n < NN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = 8 * n + 2 * tq + (e & 1), j = k0 + c;
            const float x =
                !MASK || (j <= row[e >> 1] && j < T) ? fmaf(s[n][e], scale_log2, lbs[c]) : -INFINITY;
            s[n][e] = x;
            mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
}

template <int DP>
static __global__ void __launch_bounds__(FWD_MMA_NT)
    attn_fwd_mma_kernel(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ q,
                        const float *__restrict__ k, const float *__restrict__ v,
                        const float *__restrict__ sink, const float *__restrict__ logbias,
                        AttnGeom g) {
    typedef FwdMmaLayout<DP> L;
    constexpr int NF = DP / 16;      /* k-steps over the head dim */
    constexpr int NS = ATTN_BK / 16; /* 16-key strips of a tile */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    sg_bf16 *Qs = reinterpret_cast<sg_bf16 *>(attn_smem + L::Q);
    sg_bf16 *Ks = reinterpret_cast<sg_bf16 *>(attn_smem + L::K);
    sg_bf16 *Vs = reinterpret_cast<sg_bf16 *>(attn_smem + L::V);
    float *lbs = reinterpret_cast<float *>(attn_smem + L::LB);

    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    const int q0 = qt * FWD_MMA_BQ, T = g.T;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const float *lb = logbias ? logbias + bh * T : nullptr;
    const int wq0 = q0 + warp * 16, wlast = wq0 + 15;
    const bool active = wq0 < T; /* warp-uniform */
    const int row[2] = {wq0 + gq, wq0 + gq + 8}; /* this lane's queries */

    const float c0 = g.phantom ? (sink ? sink[h] : 0.f) * ATTN_LOG2E : -INFINITY;
    float m[2] = {c0, c0};
    float l[2];
    l[0] = l[1] = g.phantom && tq == 0 ? 1.f : 0.f;
    float o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    attn_load_tile<FWD_MMA_BQ, DP, L::LDH, FWD_MMA_NT>(Qs, q + row0 * g.q_stride + ho, g.q_stride, q0, T, g.d,
                                                      g.vec);
    __syncthreads();
    tc_reg qa[NF][4];
#pragma unroll
    for (int kk = 0; kk < NF; ++kk)
        tc_load_a<L::LDH>(qa[kk], Qs, warp * 16, kk * 16, lane);

    /* key tiles up to the block's last query (or T - 1) */
    const int last_kt = ((q0 + FWD_MMA_BQ < T ? q0 + FWD_MMA_BQ : T) - 1) / ATTN_BK;
    for (int kt = 0; kt <= last_kt; ++kt) {
        const int k0 = kt * ATTN_BK;
        attn_next_kv<DP, L::LDH, FWD_MMA_NT>(Ks, Vs, lbs, k + row0 * g.k_stride + ho, v + row0 * g.v_stride + ho, lb,
                                             k0, g);
        /* a warp whose queries all precede the tile has nothing in it */
        if (!active || k0 > wlast) continue;

        /* S: s[n] covers keys k0 + 8n .. k0 + 8n + 7.  Strips wholly past
         * the warp's last query are not computed (they are masked below for
         * every row). */
        float s[2 * NS][4];
#pragma unroll
        for (int st = 0; st < NS; ++st) {
#pragma unroll
            for (int e = 0; e < 4; ++e) s[2 * st][e] = s[2 * st + 1][e] = 0.f;
            if (k0 + st * 16 > wlast) continue;
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) {
                tc_reg kb[4];
                tc_load_bt<L::LDH>(kb, Ks, st * 16, kk * 16, lane);
                tc_mma(s[2 * st], qa[kk], kb);
                tc_mma(s[2 * st + 1], qa[kk], kb + 2);
            }
        }

        /* Online softmax in base 2 */
        float mx[2] = {m[0], m[1]};
        if (k0 + ATTN_BK > wq0 + 1 || k0 + ATTN_BK > T)
            attn_fwd_logits<true>(s, mx, lbs, g.scale_log2, k0, row, T, tq);
        else attn_fwd_logits<false>(s, mx, lbs, g.scale_log2, k0, row, T, tq);
        float alpha[2], mu[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            /* 0 while the row has seen nothing (no phantom): exp2(-inf - 0) = 0,
             * never exp2(-inf + inf) = NaN */
            mu[r] = mx[r] == -INFINITY ? 0.f : mx[r];
            alpha[r] = exp2f(m[r] - mu[r]);
        }
        float ps[2] = {0.f, 0.f};
#pragma unroll
        for (int n = 0; n < 2 * NS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = exp2f(s[n][e] - mu[e >> 1]);
                s[n][e] = p;
                ps[e >> 1] += p;
            }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l[r] = fmaf(l[r], alpha[r], ps[r]);
            m[r] = mx[r];
        }
#pragma unroll
        for (int n = 0; n < DP / 8; ++n) {
            o[n][0] *= alpha[0], o[n][1] *= alpha[0];
            o[n][2] *= alpha[1], o[n][3] *= alpha[1];
        }

        /* O += P V, P as the A operand straight from the accumulators */
#pragma unroll
        for (int st = 0; st < NS; ++st) {
            if (k0 + st * 16 > wlast) continue;
            tc_reg pa[4];
            tc_acc_to_a(pa, s + 2 * st);
#pragma unroll
            for (int nd = 0; nd < NF; ++nd) {
                tc_reg vb[4];
                tc_load_b<L::LDH>(vb, Vs, st * 16, nd * 16, lane);
                tc_mma(o[2 * nd], pa, vb);
                tc_mma(o[2 * nd + 1], pa, vb + 2);
            }
        }
    }

    if (!active) return;
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
    tc_store_rows<DP>(out + row0 * g.o_stride + ho, g.o_stride, o, wq0, T, g.d, 1.f, lane);
    /* LSE_i = m_i + log l_i, back in natural log */
    if (tq == 0)
#pragma unroll
        for (int r = 0; r < 2; ++r)
            if (row[r] < T) lse[bh * T + row[r]] = (m[r] + log2f(l[r])) * ATTN_LN2;
}

template <int DP>
static void attn_fwd_mma_launch(real *out, real *lse, const real *q, const real *k, const real *v,
                                const AttnArgs *a, const AttnGeom &g) {
    const size_t smem = FwdMmaLayout<DP>::BYTES;
    attn_smem_attr(attn_fwd_mma_kernel<DP>, smem);
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + FWD_MMA_BQ - 1) / FWD_MMA_BQ));
    attn_fwd_mma_kernel<DP><<<grid, FWD_MMA_NT, smem, sg_stream()>>>(out, lse, q, k, v, a->sink, a->logbias, g);
    CUDA_LAUNCHED();
}

void attn_fwd_mma(real *out, real *lse, const real *q, const real *k, const real *v, const AttnArgs *a,
                  const AttnGeom &g) {
    attn_by_dpad(a->d, [&](auto dp) { attn_fwd_mma_launch<decltype(dp)::value>(out, lse, q, k, v, a, g); });
}
