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
 * The tiles come from the packed bf16 copies of Q, K and V (attn_pack,
 * attention_cuda.h), by cp.async, double-buffered: while the warps work on
 * key tile kt, tile kt + 1 is already on its way into the other buffer,
 * so the block waits on global memory once, for the first tile, instead of
 * at every step.
 *
 * Lazy rescaling (FlashAttention-4's): the running max m of a row moves
 * only when some row of the m-tile would see its max grow by more than
 * ATTN_LAZY_LOG2 = 8 (base 2); otherwise the tile's P = exp2(x - m) are
 * taken against the old m, at most 2^8, and O and l need no rescaling:
 * alpha = 1, and the m-tile's 64 multiplications of O by alpha are
 * skipped (a warp vote, so the warp stays converged).  O / l and
 * LSE = m + log l are the same quantities whichever m a row ends with; P
 * up to 2^8 keeps bf16's relative precision, and l and O in fp32 have room.
 * After the first tiles, a row's max rarely jumps by 8 (about 5.5 in the
 * natural logits), so most tiles skip the rescale.  The m-tile's rows
 * decide as one whether MT is 1 or 2, so both still give the same bits.
 *
 * The running sum l is kept per lane over the lane's own columns and summed
 * across the row's four lanes once at the end (alpha scales every partial
 * alike); the phantom's term exp(c_h - m) = 1 starts in the partial of lane
 * t = 0 only. */
#include "attention_fwd_tile.h"
#include "attention_trace.h"

/* TR: the traced instantiation (attention_trace.h), records to trace */
template <int DP, int MT, bool LB, bool TR>
static __global__ void __launch_bounds__(FwdMmaShape<MT>::NT)
    attn_fwd_mma_kernel(float *__restrict__ out, float *__restrict__ lse, const AttnOp qo, const AttnOp ko,
                        const AttnOp vo, const float *__restrict__ sink, const float *__restrict__ logbias,
                        sg_bf16 *__restrict__ twin, AttnGeom g, KtraceRec *trace) {
    AttnClock<TR> clk;
    typedef FwdMmaLayout<DP> L;
    constexpr int NT = FwdMmaShape<MT>::NT, RW = 16 * MT; /* threads; rows a warp owns */
    constexpr int NF = DP / 16;                             /* k-steps over the head dim */
    constexpr int NS = ATTN_BK / 16;                        /* 16-key strips of a tile */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    sg_bf16 *const bufB = reinterpret_cast<sg_bf16 *>(attn_smem + L::B);
    sg_bf16 *const bufA = reinterpret_cast<sg_bf16 *>(attn_smem + L::A);
    float *const lbuf = reinterpret_cast<float *>(attn_smem + L::LB);

    const FwdPlace p(g, qo, ko, vo, LB ? logbias : nullptr);
    const int T = g.T;
    const int wq0 = p.q0 + p.warp * RW, wlast = wq0 + RW - 1;
    const bool active = wq0 < T; /* warp-uniform */
    /* this lane's queries: rows g and g + 8 of each m-tile */
    int row[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) row[i][0] = wq0 + 16 * i + p.gq, row[i][1] = wq0 + 16 * i + p.gq + 8;
    const int last_kt = p.last_kt;
    float m[MT][2], l[MT][2];
    float o[MT][DP / 8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) attn_fwd_init(m[i], l[i], o[i], g, sink, p);

    /* Q into region A and key tile 0 into buffer 0 (region B), one group */
    attn_cp_rows<FWD_MMA_BQ, DP, L::LDH, NT>(bufA, p.qh, qo.rs, p.q0, T);
    attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(bufB, p.kh, ko.rs, 0, T);
    attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(bufB + ATTN_BK * L::LDH, p.vh, vo.rs, 0, T);
    if (LB) attn_cp_f32s<ATTN_BK>(lbuf, p.lb, 0, T);
    tc_cp_commit();
    tc_cp_wait<0>();
    __syncthreads();
    tc_reg qa[MT][NF][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int kk = 0; kk < NF; ++kk)
            tc_load_a<L::LDH>(qa[i][kk], bufA, p.warp * RW + 16 * i, kk * 16, p.lane);
    __syncthreads(); /* region A is free: the second K/V buffer from now on */

    for (int kt = 0; kt <= last_kt; ++kt) {
        const int k0 = kt * ATTN_BK, cur = kt & 1;
        /* fetch tile kt + 1 into the other buffer while this one is used;
         * that buffer's last readers (tile kt - 1) passed the barrier at the
         * end of the previous step */
        if (kt < last_kt) {
            sg_bf16 *nb = cur ? bufB : bufA;
            attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(nb, p.kh, ko.rs, k0 + ATTN_BK, T);
            attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(nb + ATTN_BK * L::LDH, p.vh, vo.rs, k0 + ATTN_BK, T);
            if (LB) attn_cp_f32s<ATTN_BK>(lbuf + (cur ^ 1) * ATTN_BK, p.lb, k0 + ATTN_BK, T);
            tc_cp_commit();
            tc_cp_wait<1>(); /* tile kt has landed, kt + 1 may still be in flight */
        } else {
            tc_cp_wait<0>();
        }
        __syncthreads(); /* every thread's copies of tile kt are visible */
        clk.template lap<AT_WAIT>();
        const sg_bf16 *Ks = cur ? bufA : bufB, *Vs = Ks + ATTN_BK * L::LDH;
        const float *lbs = lbuf + cur * ATTN_BK;

        /* A tile wholly before the warp's first query and within T (most
         * tiles) runs a copy of the step with no masking, no skipped strips
         * and no per-strip branches: under those branches nvcc guards every
         * mma.sync with a WARPSYNC and predicates it, about a fifth of the
         * warp's issue cycles in a step (docs/cuda.md, "Issue cycles from
         * the control codes").  The same products in the same order: the
         * same bits. */
        auto step = [&](auto full) {
            constexpr bool FULL = decltype(full)::value;
            /* S: s[i][n] covers keys k0 + 8n .. k0 + 8n + 7 of m-tile i.
             * Strips wholly past the warp's last query are not computed
             * (they are masked below for every row). */
            float s[MT][2 * NS][4];
#pragma unroll
            for (int st = 0; st < NS; ++st) {
#pragma unroll
                for (int i = 0; i < MT; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[i][2 * st][e] = s[i][2 * st + 1][e] = 0.f;
                if (!FULL && k0 + st * 16 > wlast) continue;
#pragma unroll
                for (int kk = 0; kk < NF; ++kk) {
                    tc_reg kb[4];
                    tc_load_bt<L::LDH>(kb, Ks, st * 16, kk * 16, p.lane);
#pragma unroll
                    for (int i = 0; i < MT; ++i) {
                        tc_mma(s[i][2 * st], qa[i][kk], kb);
                        tc_mma(s[i][2 * st + 1], qa[i][kk], kb + 2);
                    }
                }
            }
#pragma unroll
            for (int st = 0; st < NS; ++st) clk.hold(s[MT - 1][2 * st + 1][3]);
            clk.template lap<AT_PROD1>();

            /* Online softmax in base 2, per m-tile */
#pragma unroll
            for (int i = 0; i < MT; ++i)
                attn_fwd_online<LB>(s[i], m[i], l[i], o[i], lbs, g.scale_log2, k0, row[i], T, p.tq,
                                    !FULL && (k0 + ATTN_BK > wq0 + 16 * i + 1 || k0 + ATTN_BK > T));
            clk.template lap<AT_ELEM>();

            /* O += P V, P as the A operand straight from the accumulators;
             * an m-tile skips the strips past its last query (P = 0 there) */
#pragma unroll
            for (int st = 0; st < NS; ++st) {
                if (!FULL && k0 + st * 16 > wlast) continue;
                tc_reg pa[MT][4];
#pragma unroll
                for (int i = 0; i < MT; ++i) tc_acc_to_a(pa[i], s[i] + 2 * st);
#pragma unroll
                for (int nd = 0; nd < NF; ++nd) {
                    tc_reg vb[4];
                    tc_load_b<L::LDH>(vb, Vs, st * 16, nd * 16, p.lane);
#pragma unroll
                    for (int i = 0; i < MT; ++i) {
                        if (!FULL && k0 + st * 16 > wq0 + 16 * i + 15) continue;
                        tc_mma(o[i][2 * nd], pa[i], vb);
                        tc_mma(o[i][2 * nd + 1], pa[i], vb + 2);
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) clk.hold(o[i][DP / 8 - 1][3]);
            clk.template lap<AT_PROD2>();
            clk.tile();
        };
        /* a warp whose queries all precede the tile has nothing in it */
        if (active && k0 + ATTN_BK <= wq0 + 1 && k0 + ATTN_BK <= T) step(std::true_type());
        else if (active && k0 <= wlast) step(std::false_type());
        if (kt < last_kt) __syncthreads(); /* done with buffer cur: tile kt + 2 goes there */
        clk.template lap<AT_BARRIER>();
    }

    if (active)
#pragma unroll
        for (int i = 0; i < MT; ++i)
            attn_fwd_finish<DP>(o[i], m[i], l[i], out, lse, twin, g, p, wq0 + 16 * i, row[i]);
    clk.finish(trace, p.warp, p.lane);
}

template <int DP, int MT, bool LB>
static void attn_fwd_mma_launch(real *out, real *lse, const AttnOp *op, sg_bf16 *twin, const AttnArgs *a,
                                const AttnGeom &g) {
    const size_t smem = FwdMmaLayout<DP>::BYTES;
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + FWD_MMA_BQ - 1) / FWD_MMA_BQ));
    constexpr int NT = FwdMmaShape<MT>::NT;
    auto go = [&](auto kernel, KtraceRec *trace) {
        attn_smem_attr(kernel, smem);
        kernel<<<grid, NT, smem, sg_stream()>>>(out, lse, op[0], op[1], op[2], a->sink, a->logbias, twin, g, trace);
        CUDA_LAUNCHED();
    };
    if constexpr (DP >= 64) {
        static const char *const name = MT == 2 ? "attn_fwd_mma (2 m-tiles a warp)" : "attn_fwd_mma (1 m-tile a warp)";
        if (KtraceRec *trace = attn_trace_slot(ATTN_TRACE_FWD, (long)grid.x * grid.y * grid.z, NT, name)) {
            go(attn_fwd_mma_kernel<DP, MT, LB, true>, trace);
            return;
        }
    }
    go(attn_fwd_mma_kernel<DP, MT, LB, false>, nullptr);
}

int attn_fwd_ops(AttnOp *op, int inplace, sg_bf16 *pack, const real *q, const real *k, const real *v,
                 const AttnArgs *a, const AttnGeom &g) {
    if (inplace != 7) {
        const AttnPackSrc src = {{q, k, v, nullptr}, {a->q_stride, a->k_stride, a->v_stride, 0}, g.vec};
        attn_pack(pack, 3, src, g, inplace);
        for (int i = 0; i < 3; i++)
            if (!(inplace >> i & 1)) op[i] = attn_packed_op(pack, i, g);
    }
    return 7;
}

void attn_fwd_mma(real *out, real *lse, const real *q, const real *k, const real *v, const AttnArgs *a,
                  const AttnGeom &g, AttnOp *op, int inplace, sg_bf16 *pack, sg_bf16 *twin) {
    attn_fwd_ops(op, inplace, pack, q, k, v, a, g);
    if (attn_fwd_wgmma(out, lse, a, g, op, twin)) return;
    attn_by_dpad(a->d, [&](auto dp) {
        constexpr int DP = decltype(dp)::value;
        attn_by_mtiles<DP>([&](auto mt) {
            constexpr int MT = decltype(mt)::value;
            if (a->logbias) attn_fwd_mma_launch<DP, MT, true>(out, lse, op, twin, a, g);
            else attn_fwd_mma_launch<DP, MT, false>(out, lse, op, twin, a, g);
        });
    });
}
