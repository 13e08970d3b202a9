/* Causal attention forward on Hopper's warpgroup products (wgmma_ptx.h),
 * selected by SG_ATTN_WGMMA=1 under the mma tiles on an sm_90 GPU for head
 * dims 64 and 128 (attn_wgmma_ok).  The same math, masking, precision and
 * lazy rescaling as attention_fwd_mma.cu, through the same code
 * (attention_fwd_tile.h); what differs is who multiplies:
 *   - a block is two warpgroups of 64 queries (8 warps of 16 rows, 128
 *     queries as the mma kernel's), and each warpgroup forms its 64 x 64
 *     S = Q K^T of a key tile in one chain of DP / 16 products, Q from
 *     registers (the A fragments the mma kernel loads) and K from shared
 *     memory, and then O += P V in one chain of 4, P from the S
 *     accumulators and V from shared memory (read MN-major);
 *   - so each K and V fragment is read from shared memory once per
 *     warpgroup of 64 rows, where mma.sync read it once per warp of 16 or
 *     32: a quarter (a half) of the shared-memory traffic a product, which
 *     is what bounds the mma kernels (docs/cuda.md, "The dK/dV kernel and
 *     shared memory").
 * The K and V tiles sit in shared memory in the no-swizzle core-matrix
 * layout the products read (attn_cp_rows_core), double-buffered by
 * cp.async as in the mma kernel; Q keeps the padded rows ldmatrix reads.
 *
 * A tile's products run whole: S is formed for all 64 keys even where the
 * diagonal masks part of a warp's strip (the mask sets those logits to
 * -inf, and their P = 0 adds nothing to O), since a warpgroup's product
 * cannot skip one warp's columns.  Rows at or past T take part in the
 * products (their Q rows are zero) and are not stored.  The products' sums
 * are the tensor cores' own order, so results agree with the mma kernel's
 * to fp32 rounding, not bitwise. */
#include "attention_fwd_tile.h"
#include "wgmma_ptx.h"

static constexpr int FWD_WG_NT = 256; /* two warpgroups */
static_assert(FWD_WG_NT == 2 * FWD_MMA_BQ, "a warp per 16 of the block's queries");

template <int DP, bool LB>
static __global__ void __launch_bounds__(FWD_WG_NT)
    attn_fwd_wgmma_kernel(float *__restrict__ out, float *__restrict__ lse, const AttnOp qo, const AttnOp ko,
                          const AttnOp vo, const float *__restrict__ sink, const float *__restrict__ logbias,
                          sg_bf16 *__restrict__ twin, AttnGeom g) {
    typedef FwdMmaLayout<DP> L;
    constexpr int NT = FWD_WG_NT, NF = DP / 16, NS = ATTN_BK / 16;
    /* descriptor strides (bytes) of the core layout: cores along a row 128
     * apart, 8-row groups 16 DP apart (K: LBO the cores along d, SBO the
     * groups of keys; V, MN-major: LBO the groups of keys, SBO the cores
     * along d); a k16 step along the head dim spans two cores, one along
     * the keys two row groups.  (In elements, so that
     * the emulated build's 4-byte bf16 keeps the layout.) */
    constexpr uint32_t ES = sizeof(sg_bf16), CORE = 64 * ES, GROUP = 8 * DP * ES;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    sg_bf16 *const bufB = reinterpret_cast<sg_bf16 *>(attn_smem + L::B);
    sg_bf16 *const bufA = reinterpret_cast<sg_bf16 *>(attn_smem + L::A);
    float *const lbuf = reinterpret_cast<float *>(attn_smem + L::LB);

    const FwdPlace p(g, qo, ko, vo, LB ? logbias : nullptr);
    const int T = g.T;
    const int wq0 = p.q0 + 16 * p.warp;                          /* the warp's 16 queries */
    const int gq0 = p.q0 + 64 * (p.warp >> 2), glast = gq0 + 63; /* its warpgroup's 64 */
    const bool gactive = gq0 < T;                                /* warpgroup-uniform */
    const int row[2] = {wq0 + p.gq, wq0 + p.gq + 8};
    const int last_kt = ((p.q0 + FWD_MMA_BQ < T ? p.q0 + FWD_MMA_BQ : T) - 1) / ATTN_BK;

    const float c0 = g.phantom ? (sink ? sink[p.h] : 0.f) * ATTN_LOG2E : -INFINITY;
    float m[2] = {c0, c0}, l[2];
    l[0] = l[1] = g.phantom && p.tq == 0 ? 1.f : 0.f;
    float o[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    /* Q into region A and key tile 0 into buffer 0 (region B), one group */
    attn_cp_rows<FWD_MMA_BQ, DP, L::LDH, NT>(bufA, p.qh, qo.rs, p.q0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(bufB, p.kh, ko.rs, 0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(bufB + ATTN_BK * DP, p.vh, vo.rs, 0, T);
    tc_cp_commit();
    if (LB) attn_load_bias(lbuf, p.lb, 0, T);
    uint32_t *const zword = reinterpret_cast<uint32_t *>(attn_smem + L::ZERO);
    if (threadIdx.x == 0) *zword = 0u;
    tc_cp_wait<0>();
    wg_fence_smem();
    __syncthreads();
    tc_reg qa[NF][4];
#pragma unroll
    for (int kk = 0; kk < NF; ++kk) tc_load_a<L::LDH>(qa[kk], bufA, 16 * p.warp, kk * 16, p.lane);
    __syncthreads(); /* region A is free: the second K/V buffer from now on */
    const uint32_t sa = (uint32_t)__cvta_generic_to_shared(bufA), sb = (uint32_t)__cvta_generic_to_shared(bufB);

    for (int kt = 0; kt <= last_kt; ++kt) {
        const int k0 = kt * ATTN_BK, cur = kt & 1;
        /* tile kt + 1 into the other buffer while this one is used (as in
         * the mma kernel) */
        if (kt < last_kt) {
            sg_bf16 *nb = cur ? bufB : bufA;
            attn_cp_rows_core<ATTN_BK, DP, NT>(nb, p.kh, ko.rs, k0 + ATTN_BK, T);
            attn_cp_rows_core<ATTN_BK, DP, NT>(nb + ATTN_BK * DP, p.vh, vo.rs, k0 + ATTN_BK, T);
            tc_cp_commit();
            if (LB) attn_load_bias(lbuf + (cur ^ 1) * ATTN_BK, p.lb, k0 + ATTN_BK, T);
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        wg_fence_smem(); /* this thread's copies of tile kt, for the products */
        __syncthreads();
        const uint32_t ks = cur ? sa : sb, vs = ks + ATTN_BK * DP * ES;
        const float *lbs = lbuf + cur * ATTN_BK;

        /* a warpgroup whose queries all precede the tile has nothing in it */
        if (gactive && k0 <= glast) {
            /* S: s[n] covers keys k0 + 8n .. k0 + 8n + 7 of the warp's 16 rows */
            float s[2 * NS][4];
            tc_reg qf[NF][4]; /* this pass's copy of Q (wg_fresh), made before the chain */
            const uint32_t zero = wg_zero(zword);
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) wg_fresh(qf[kk], qa[kk], zero);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < NF; ++kk)
                wg_rs_n64<0>(&s[0][0], qf[kk], wg_desc_core(ks + 2 * CORE * kk, CORE, GROUP, 0, g.wgswap), kk);
            wg_commit();
            wg_wait<0>();
            wg_pin<8 * NS>(&s[0][0]);
            attn_fwd_online<LB>(s, m, l, o, lbs, g.scale_log2, k0, row, T, p.tq,
                                k0 + ATTN_BK > wq0 + 1 || k0 + ATTN_BK > T);
            /* O += P V, P as the A operand straight from the accumulators */
            tc_reg pa[NS][4];
#pragma unroll
            for (int st = 0; st < NS; ++st) tc_acc_to_a(pa[st], s + 2 * st);
            wg_pin<DP / 2>(&o[0][0]);
            wg_fence();
#pragma unroll
            for (int st = 0; st < NS; ++st)
                wg_rs<DP, 1>(&o[0][0], pa[st], wg_desc_core(vs + 2 * GROUP * st, GROUP, CORE, 1, g.wgswap), 1);
            wg_commit();
            wg_wait<0>();
            wg_pin<DP / 2>(&o[0][0]);
        }
        if (kt < last_kt) __syncthreads(); /* done with buffer cur: tile kt + 2 goes there */
    }
    if (wq0 >= T) return;
    attn_fwd_finish<DP>(o, m, l, out, lse, twin, g, p, wq0, row);
}

template <int DP, bool LB>
static void attn_fwd_wgmma_launch(real *out, real *lse, const AttnOp *op, sg_bf16 *twin, const AttnArgs *a,
                                  const AttnGeom &g) {
    const size_t smem = FwdMmaLayout<DP>::BYTES;
    attn_smem_attr(attn_fwd_wgmma_kernel<DP, LB>, smem);
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + FWD_MMA_BQ - 1) / FWD_MMA_BQ));
    attn_fwd_wgmma_kernel<DP, LB><<<grid, FWD_WG_NT, smem, sg_stream()>>>(out, lse, op[0], op[1], op[2], a->sink,
                                                                         a->logbias, twin, g);
    CUDA_LAUNCHED();
    attn_wgmma_count(1);
}

bool attn_fwd_wgmma(real *out, real *lse, const AttnArgs *a, const AttnGeom &g, const AttnOp *op, sg_bf16 *twin) {
    const int dp = attn_dpad(a->d);
    if ((dp != 64 && dp != 128) || !attn_wgmma_ok()) return false;
    if (dp == 64) {
        if (a->logbias) attn_fwd_wgmma_launch<64, true>(out, lse, op, twin, a, g);
        else attn_fwd_wgmma_launch<64, false>(out, lse, op, twin, a, g);
    } else {
        if (a->logbias) attn_fwd_wgmma_launch<128, true>(out, lse, op, twin, a, g);
        else attn_fwd_wgmma_launch<128, false>(out, lse, op, twin, a, g);
    }
    return true;
}
