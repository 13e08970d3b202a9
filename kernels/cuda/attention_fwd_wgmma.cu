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
#include "attention_trace.h"
#include "wgmma_ptx.h"

static constexpr int FWD_WG_NT = 256; /* two warpgroups */
static_assert(FWD_WG_NT == 2 * FWD_MMA_BQ, "a warp per 16 of the block's queries");

/* O += P V over a key tile's 64 keys, issued and committed: NS products,
 * P from registers (pa, attn_fwd_softmax's P as A fragments), V from the
 * core layout at vs, MN-major (as above) */
template <int DP, int NS>
static __device__ __forceinline__ void attn_wg_pv(float (&o)[DP / 8][4], tc_reg (&pa)[NS][4], uint32_t vs,
                                                  int swap) {
    constexpr uint32_t ES = sizeof(sg_bf16), CORE = 64 * ES, GROUP = 8 * DP * ES;
#pragma unroll
    for (int st = 0; st < NS; ++st)
        wg_rs<DP, 1>(&o[0][0], pa[st], wg_desc_core(vs + 2 * GROUP * st, GROUP, CORE, 1, swap), 1);
    wg_commit();
}

/* The last P V of a warpgroup, on its own: O and P settled, then the chain,
 * waited for */
template <int DP, int NS>
static __device__ __forceinline__ void attn_wg_pv_last(float (&o)[DP / 8][4], tc_reg (&pa)[NS][4], uint32_t vs,
                                                       int swap) {
    wg_pin<DP / 2>(&o[0][0]);
    wg_pin_a<NS>(pa);
    wg_fence();
    attn_wg_pv<DP>(o, pa, vs, swap);
    wg_wait<0>();
    wg_pin<DP / 2>(&o[0][0]);
    wg_pin_a<NS>(pa);
}

template <int DP, bool LB, bool TR>
static __global__ void __launch_bounds__(FWD_WG_NT)
    attn_fwd_wgmma_kernel(float *__restrict__ out, float *__restrict__ lse, const AttnOp qo, const AttnOp ko,
                          const AttnOp vo, const float *__restrict__ sink, const float *__restrict__ logbias,
                          sg_bf16 *__restrict__ twin, AttnGeom g, KtraceRec *trace) {
    AttnClock<TR> clk; /* TR: the traced instantiation (attention_trace.h) */
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
    const int last_kt = p.last_kt;
    float m[2], l[2], o[DP / 8][4];
    attn_fwd_init(m, l, o, g, sink, p);

    /* Q into region A and key tile 0 into buffer 0 (region B), one group */
    attn_cp_rows<FWD_MMA_BQ, DP, L::LDH, NT>(bufA, p.qh, qo.rs, p.q0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(bufB, p.kh, ko.rs, 0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(bufB + ATTN_BK * DP, p.vh, vo.rs, 0, T);
    if (LB) attn_cp_f32s<ATTN_BK>(lbuf, p.lb, 0, T);
    tc_cp_commit();
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
            if (LB) attn_cp_f32s<ATTN_BK>(lbuf + (cur ^ 1) * ATTN_BK, p.lb, k0 + ATTN_BK, T);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        wg_fence_smem(); /* this thread's copies of tile kt, for the products */
        __syncthreads();
        clk.template lap<AT_WAIT>();
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
            clk.template lap<AT_PROD1>(); /* the chain waited for: no hold needed */
            attn_fwd_online<LB>(s, m, l, o, lbs, g.scale_log2, k0, row, T, p.tq,
                                k0 + ATTN_BK > wq0 + 1 || k0 + ATTN_BK > T);
            /* O += P V, P as the A operand straight from the accumulators */
            tc_reg pa[NS][4];
#pragma unroll
            for (int st = 0; st < NS; ++st) tc_acc_to_a(pa[st], s + 2 * st);
            clk.template lap<AT_ELEM>();
            attn_wg_pv_last<DP>(o, pa, vs, g.wgswap);
            clk.template lap<AT_PROD2>();
            clk.tile();
        }
        if (kt < last_kt) __syncthreads(); /* done with buffer cur: tile kt + 2 goes there */
        clk.template lap<AT_BARRIER>();
    }
    if (wq0 < T) attn_fwd_finish<DP>(o, m, l, out, lse, twin, g, p, wq0, row);
    clk.finish(trace, p.warp, p.lane);
}

/* SG_ATTN_WGMMA=2: the same forward with each warpgroup's softmax
 * overlapping its products (FlashAttention-3's intra-warpgroup pipelining).
 * Above, a tile's products run while the softmax waits, and the softmax
 * runs while the tensor cores idle: at d 64 a 64 x 64 tile is about as many
 * clocks of exp2 (4,096 at 16 a clock an SM) as of products.  Here, in key
 * tile kt's pass a warpgroup issues S_kt = Q K_kt^T and then O += P_{kt-1}
 * V_{kt-1}, the previous tile's second product, waits for S_kt alone, and
 * forms P_kt while P_{kt-1} V_{kt-1} runs on; only then does it wait for
 * that, and rescale O.  The order of the sums: O_kt = alpha_kt (O_{kt-1} +
 * P_{kt-1} V_{kt-1}), which is the serial kernel's alpha_kt O_{kt-1}' +
 * P_kt V_kt one pass shifted (O stays at the scale of the m that P_{kt-1}
 * was formed with until its product has landed); the last tile's P V runs
 * after the loop.
 *
 * Shared memory holds three K/V buffers (tile kt in buffer kt % 3, 16 KB
 * each at d 64): in pass kt, S reads buffer kt % 3 and P V buffer
 * (kt - 1) % 3 while tile kt + 1 loads into the third.
 *
 * Q at d 64 stays in shared memory, in a region of its own, and each pass
 * loads its A fragments afresh (ldmatrix): 16 registers fewer than holding
 * them, which keeps two blocks an SM (128 registers a thread) without
 * spilling, and no register A operand is loop-invariant (wg_fresh's
 * reason).  At d 128 (one block an SM whatever it does) Q's region would
 * take the shared memory over the RTX 5090's 99 KiB, which the emulator
 * holds every kernel to (and the emulator's 4-byte bf16 over the H200's
 * 227): there Q is staged in buffers 1 and 2 before the first pass and held
 * in registers, copied fresh for each pass (wg_fresh) as above. */
template <int DP>
struct FwdPipeLayout {
    static constexpr bool QREG = DP > 64; /* Q held in registers */
    static constexpr int LDH = FwdMmaLayout<DP>::LDH;                  /* Q's padded rows, as ldmatrix reads them */
    static constexpr size_t BUF = sizeof(sg_bf16) * 2 * ATTN_BK * DP; /* a K tile and a V tile, core layout */
    static constexpr size_t QBYTES = sizeof(sg_bf16) * FWD_MMA_BQ * LDH;
    static constexpr size_t KV = 0;
    static constexpr size_t Q = QREG ? KV + BUF : attn_align(KV + 3 * BUF);
    static constexpr size_t LB = attn_align(QREG ? KV + 3 * BUF : Q + QBYTES);
    static constexpr size_t ZERO = attn_align(LB + sizeof(float) * 3 * ATTN_BK); /* wg_fresh's zero word */
    static constexpr size_t BYTES = attn_align(ZERO + sizeof(uint32_t));
    static_assert(!QREG || QBYTES <= 2 * BUF, "Q is staged in buffers 1 and 2");
};

template <int DP, bool LB, bool TR>
static __global__ void __launch_bounds__(FWD_WG_NT, DP == 64 ? 2 : 1)
    attn_fwd_wgmma_pipe_kernel(float *__restrict__ out, float *__restrict__ lse, const AttnOp qo, const AttnOp ko,
                               const AttnOp vo, const float *__restrict__ sink, const float *__restrict__ logbias,
                               sg_bf16 *__restrict__ twin, AttnGeom g, KtraceRec *trace) {
    /* TR: the traced instantiation (attention_trace.h).  Its phases end at
     * the waits the kernel has anyway: the first products are S and the
     * previous tile's P V issued, up to S's wait; the second, P V's wait
     * and the rescaling; so the overlap is what it is untraced. */
    AttnClock<TR> clk;
    typedef FwdPipeLayout<DP> L;
    constexpr int NT = FWD_WG_NT, NF = DP / 16, NS = ATTN_BK / 16;
    constexpr uint32_t ES = sizeof(sg_bf16), CORE = 64 * ES, GROUP = 8 * DP * ES; /* as above */
    constexpr uint32_t BUFE = 2 * ATTN_BK * DP;                                 /* a buffer, in elements */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    sg_bf16 *const kv = reinterpret_cast<sg_bf16 *>(attn_smem + L::KV);
    const sg_bf16 *const qstage = reinterpret_cast<const sg_bf16 *>(attn_smem + L::Q);
    float *const lbuf = reinterpret_cast<float *>(attn_smem + L::LB);

    const FwdPlace p(g, qo, ko, vo, LB ? logbias : nullptr);
    const int T = g.T;
    /* Warp w has the 16 queries of strip 2 (w % 4) + w / 4 of the block's
     * 8: each warpgroup's 64 rows reach the block's last key tile, so both
     * take every tile and no product is in a branch that only one of them
     * takes (ptxas serialises the products of a loop with such branches,
     * its C7520, and the overlap would be lost; tests/e2e_cuda_build.sh). */
    const int strip = 2 * (p.warp & 3) + (p.warp >> 2), wq0 = p.q0 + 16 * strip;
    const int row[2] = {wq0 + p.gq, wq0 + p.gq + 8};
    const int last_kt = p.last_kt;
    float m[2], l[2], o[DP / 8][4];
    attn_fwd_init(m, l, o, g, sink, p);

    attn_cp_rows<FWD_MMA_BQ, DP, L::LDH, NT>(reinterpret_cast<sg_bf16 *>(attn_smem + L::Q), p.qh, qo.rs, p.q0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(kv, p.kh, ko.rs, 0, T);
    attn_cp_rows_core<ATTN_BK, DP, NT>(kv + ATTN_BK * DP, p.vh, vo.rs, 0, T);
    if (LB) attn_cp_f32s<ATTN_BK>(lbuf, p.lb, 0, T);
    tc_cp_commit();
    tc_reg qa[L::QREG ? NF : 1][4];
    uint32_t *const zword = reinterpret_cast<uint32_t *>(attn_smem + L::ZERO);
    if constexpr (L::QREG) {
        if (threadIdx.x == 0) *zword = 0u;
        tc_cp_wait<0>();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < NF; ++kk) tc_load_a<L::LDH>(qa[kk], qstage, 16 * strip, kk * 16, p.lane);
        __syncthreads(); /* buffers 1 and 2 are free */
    }
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(kv);

    /* Pass kt's start: tile kt + 1 on its way into the buffer after kt's,
     * tile kt in place (for the products too); its K at the address
     * returned, V after it, the log-bias in lbuf's slot kt % 3. */
    auto arrive = [&](int kt) {
        if (kt < last_kt) {
            const int nxt = (kt + 1) % 3, k1 = (kt + 1) * ATTN_BK;
            attn_cp_rows_core<ATTN_BK, DP, NT>(kv + nxt * BUFE, p.kh, ko.rs, k1, T);
            attn_cp_rows_core<ATTN_BK, DP, NT>(kv + nxt * BUFE + ATTN_BK * DP, p.vh, vo.rs, k1, T);
            if (LB) attn_cp_f32s<ATTN_BK>(lbuf + nxt * ATTN_BK, p.lb, k1, T);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        wg_fence_smem();
        __syncthreads();
        return s0 + (uint32_t)(kt % 3) * BUFE * ES;
    };
    /* S = Q K^T of the tile whose K is at ks, issued and committed, Q's
     * fragments loaded or copied for it */
    auto issue_s = [&](float (&s)[2 * NS][4], tc_reg (&qf)[NF][4], uint32_t ks) {
        if constexpr (L::QREG) {
            const uint32_t zero = wg_zero(zword);
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) wg_fresh(qf[kk], qa[kk], zero);
        } else {
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) tc_load_a<L::LDH>(qf[kk], qstage, 16 * strip, kk * 16, p.lane);
        }
        wg_pin_a<NF>(qf);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < NF; ++kk)
            wg_rs_n64<0>(&s[0][0], qf[kk], wg_desc_core(ks + 2 * CORE * kk, CORE, GROUP, 0, g.wgswap), kk);
        wg_commit();
    };
    const auto mask = [&](int k0) { return k0 + ATTN_BK > wq0 + 1 || k0 + ATTN_BK > T; };

    /* pass 0: S_0, P_0 */
    tc_reg pa[NS][4]; /* P of the previous tile, whose P V is issued in this pass */
    uint32_t vprev;   /* that tile's V */
    {
        const uint32_t ks = arrive(0);
        clk.template lap<AT_WAIT>();
        float s[2 * NS][4];
        tc_reg qf[NF][4];
        issue_s(s, qf, ks);
        wg_wait<0>();
        wg_pin<8 * NS>(&s[0][0]);
        wg_pin_a<NF>(qf);
        clk.template lap<AT_PROD1>();
        float alpha[2];
        attn_fwd_softmax<LB>(s, m, l, alpha, lbuf, g.scale_log2, 0, row, T, p.tq, mask(0)); /* O is 0 */
#pragma unroll
        for (int st = 0; st < NS; ++st) tc_acc_to_a(pa[st], s + 2 * st);
        clk.template lap<AT_ELEM>();
        clk.tile();
        vprev = ks + ATTN_BK * DP * ES;
        if (0 < last_kt) __syncthreads();
        clk.template lap<AT_BARRIER>();
    }
    for (int kt = 1; kt <= last_kt; ++kt) {
        const int k0 = kt * ATTN_BK;
        const uint32_t ks = arrive(kt);
        clk.template lap<AT_WAIT>();
        float s[2 * NS][4];
        tc_reg qf[NF][4];
        wg_pin<DP / 2>(&o[0][0]); /* the last pass's rescaling of O and its P, above the fence */
        wg_pin_a<NS>(pa);
        issue_s(s, qf, ks);
        attn_wg_pv<DP>(o, pa, vprev, g.wgswap);
        wg_wait<1>(); /* S only: P_{kt-1} V_{kt-1} runs on under the softmax */
        wg_pin<8 * NS>(&s[0][0]);
        wg_pin_a<NF>(qf);
        clk.template lap<AT_PROD1>();
        float alpha[2];
        const bool rescale = attn_fwd_softmax<LB>(s, m, l, alpha, lbuf + (kt % 3) * ATTN_BK, g.scale_log2, k0, row,
                                                  T, p.tq, mask(k0));
        clk.template lap<AT_ELEM>();
        wg_wait<0>();
        wg_pin<DP / 2>(&o[0][0]);
        wg_pin_a<NS>(pa); /* P_{kt-1}'s registers stay its own until its product has landed */
        if (rescale) attn_fwd_rescale(o, alpha);
#pragma unroll
        for (int st = 0; st < NS; ++st) tc_acc_to_a(pa[st], s + 2 * st);
        clk.template lap<AT_PROD2>();
        clk.tile();
        vprev = ks + ATTN_BK * DP * ES;
        if (kt < last_kt) __syncthreads(); /* done with buffer (kt - 1) % 3: tile kt + 2 goes there */
        clk.template lap<AT_BARRIER>();
    }
    attn_wg_pv_last<DP>(o, pa, vprev, g.wgswap);
    clk.template lap<AT_PROD2>();
    if (wq0 < T) attn_fwd_finish<DP>(o, m, l, out, lse, twin, g, p, wq0, row);
    clk.finish(trace, p.warp, p.lane);
}

template <int DP, bool LB>
static void attn_fwd_wgmma_launch(real *out, real *lse, const AttnOp *op, sg_bf16 *twin, const AttnArgs *a,
                                  const AttnGeom &g, bool pipe) {
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + FWD_MMA_BQ - 1) / FWD_MMA_BQ));
    KtraceRec *trace = attn_trace_slot(ATTN_TRACE_FWD, (long)grid.x * grid.y * grid.z, FWD_WG_NT,
                                       pipe ? "attn_fwd_wgmma_pipe_kernel" : "attn_fwd_wgmma_kernel");
    auto go = [&](auto kernel, size_t smem) {
        attn_smem_attr(kernel, smem);
        kernel<<<grid, FWD_WG_NT, smem, sg_stream()>>>(out, lse, op[0], op[1], op[2], a->sink, a->logbias, twin, g,
                                                        trace);
    };
    if (pipe) {
        const size_t smem = FwdPipeLayout<DP>::BYTES;
        if (trace) go(attn_fwd_wgmma_pipe_kernel<DP, LB, true>, smem);
        else go(attn_fwd_wgmma_pipe_kernel<DP, LB, false>, smem);
    } else {
        const size_t smem = FwdMmaLayout<DP>::BYTES;
        if (trace) go(attn_fwd_wgmma_kernel<DP, LB, true>, smem);
        else go(attn_fwd_wgmma_kernel<DP, LB, false>, smem);
    }
    CUDA_LAUNCHED();
    attn_wgmma_count(1);
}

bool attn_fwd_wgmma(real *out, real *lse, const AttnArgs *a, const AttnGeom &g, const AttnOp *op, sg_bf16 *twin) {
    const int dp = attn_dpad(a->d);
    if ((dp != 64 && dp != 128) || !attn_wgmma_ok()) return false;
    const bool pipe = attn_wgmma_mode() == 2;
    if (dp == 64) {
        if (a->logbias) attn_fwd_wgmma_launch<64, true>(out, lse, op, twin, a, g, pipe);
        else attn_fwd_wgmma_launch<64, false>(out, lse, op, twin, a, g, pipe);
    } else {
        if (a->logbias) attn_fwd_wgmma_launch<128, true>(out, lse, op, twin, a, g, pipe);
        else attn_fwd_wgmma_launch<128, false>(out, lse, op, twin, a, g, pipe);
    }
    return true;
}
