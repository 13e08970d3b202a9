/* Causal attention backward, the two tile kernels with register-resident
 * tiles (mma.sync; mma_ptx.h), selected by SG_ATTN=mma.  The math, the
 * precision, the D_i / dsink kernels around them and the division of work
 * (a dkdv kernel per key tile, a dq kernel per query tile, no atomics) are
 * attention_bwd.cu's; what differs is that no score tile goes through
 * shared memory:
 *
 *   dkdv: warp w keeps its 16 keys' K and V as mma A operands and forms the
 *         transposed tiles directly, S^T = K_w Q_m^T and dP^T = V_w dO_m^T
 *         (16 keys x 16 queries).  P^T and dS^T = P^T (dP^T - D) are then,
 *         packed to bf16, the A operands of dV_w += P^T dO_m and
 *         dK_w += dS^T Q_m (dO_m and Q_m read transposed by ldmatrix), and
 *         the column sums of dS (dlogbias) are row sums of dS^T: per lane
 *         over its own queries, the row's four lanes combined at the end.
 *   dq:   warp w keeps Q_w and dO_w as A operands: S = Q_w K_n^T,
 *         dP = dO_w V_n^T, dS packed into the A operand of dQ_w += dS K_n.
 *   or, with SG_ATTN_DQ=stored, the dkdv kernel also writes each dS^T tile
 *         it packs (bf16, 64 keys x 64 queries) to scratch, and a lighter
 *         dq kernel reads them back for dQ_w += dS K_n alone: one product
 *         a strip instead of three, and no exp, for a write and a read of
 *         dS (2 bytes an element of the causal triangle).
 *
 * Both read the packed bf16 Q, K, V and dO (attn_pack, attention_cuda.h):
 * the block's own tiles once, and the tiles it walks by cp.async into two
 * buffers, the next one fetched while the current one is used.
 *
 * In the accumulator layout (mma_ptx.h) a lane holds rows g and g+8 of a
 * tile and columns 2t, 2t+1 of each 8-column part: the row statistics it
 * needs are two values (dq) or, for dkdv's query columns, read from shared
 * memory per element. */
#include "attention_cuda.h"
#include "attention_trace.h"
#include "wgmma_ptx.h"

/* Two regions of two 64-row bf16 tiles each.  A holds the block's own
 * operands (dkdv: its K and V; dq: its Q and dO) until every warp has them
 * in registers, then serves as the second buffer of the tiles the block
 * walks (dkdv: Q and dO; dq: K and V); B is the first.  Step i of the walk
 * uses buffer i & 1 (B for even i), and the row statistics or log-bias in
 * half i & 1 of LSE, DD or LB. */
template <int DP>
struct BwdMmaLayout {
    static constexpr int LDH = DP + 8; /* bf16 rows: 16-byte aligned, ldmatrix conflict-free */
    static constexpr int TE = ATTN_BQ * LDH; /* elements of a tile */
    static constexpr size_t REGION = sizeof(sg_bf16) * 2 * TE;
    static constexpr size_t A = 0;
    static constexpr size_t B = attn_align(A + REGION);
    static constexpr size_t LSE = attn_align(B + REGION);
    static constexpr size_t DD = attn_align(LSE + sizeof(float) * 2 * ATTN_BQ);
    static constexpr size_t LB = attn_align(DD + sizeof(float) * 2 * ATTN_BQ);
    static constexpr size_t ZERO = attn_align(LB + sizeof(float) * 2 * ATTN_BK); /* wg_fresh's zero word */
    static constexpr size_t BYTES = attn_align(ZERO + sizeof(uint32_t));
};

/* The regions of layout L in the shared memory at smem: buf(0) = B,
 * buf(1) = A (so that step i uses buf(i & 1)), and the three halved float
 * arrays.  (A select, not an array: an array indexed at run time would
 * live in local memory.) */
template <class L>
struct BwdMmaSmem {
    sg_bf16 *a, *b;
    float *L2, *D2, *lb2;
    __device__ __forceinline__ explicit BwdMmaSmem(unsigned char *smem)
        : a(reinterpret_cast<sg_bf16 *>(smem + L::A)), b(reinterpret_cast<sg_bf16 *>(smem + L::B)),
          L2(reinterpret_cast<float *>(smem + L::LSE)), D2(reinterpret_cast<float *>(smem + L::DD)),
          lb2(reinterpret_cast<float *>(smem + L::LB)) {}
    __device__ __forceinline__ sg_bf16 *buf(int i) const { return i ? a : b; }
};

/* A pair of 64-row tiles of two operands' (b,h) slices (rows rs1 and rs2
 * apart; AttnOp), rows r0 .. r0+63, zero at or past T, into a buffer (the
 * first tile, then the second at TE elements), by cp.async; the caller
 * commits. */
template <int DP, int LD, int TE, int NT = ATTN_NT>
static __device__ __forceinline__ void attn_cp_pair(sg_bf16 *dst, const sg_bf16 *s1, int rs1, const sg_bf16 *s2,
                                                    int rs2, int r0, int T) {
    attn_cp_rows<ATTN_BQ, DP, LD, NT>(dst, s1, rs1, r0, T);
    attn_cp_rows<ATTN_BQ, DP, LD, NT>(dst + TE, s2, rs2, r0, T);
}

/* A warp's 16 rows of the two tiles of a buffer as NF k-step A operands:
 * the block's own operands (dkdv: K, V; dq: Q, dO), loaded once. */
template <int NF, int LD, int TE>
static __device__ __forceinline__ void attn_own_operands(tc_reg (&a1)[NF][4], tc_reg (&a2)[NF][4],
                                                         const sg_bf16 *buf, int r0, int lane) {
#pragma unroll
    for (int kk = 0; kk < NF; ++kk) {
        tc_load_a<LD>(a1[kk], buf, r0, kk * 16, lane);
        tc_load_a<LD>(a2[kk], buf + TE, r0, kk * 16, lane);
    }
}

/* The two score products of a 16 x 16 strip, from scratch: u = A1 X1^T
 * and w = A2 X2^T, with A1, A2 a warp's 16 rows as NF k-step A operands
 * and X1, X2 rows r0 .. r0+15 of two tiles (read transposed).  dkdv:
 * S^T = K Q^T and dP^T = V dO^T; dq: S = Q K^T and dP = dO V^T. */
template <int NF, int LD>
static __device__ __forceinline__ void attn_two_products(float (&u)[2][4], float (&w)[2][4], const tc_reg (&a1)[NF][4],
                                                         const tc_reg (&a2)[NF][4], const sg_bf16 *x1,
                                                         const sg_bf16 *x2, int r0, int lane) {
#pragma unroll
    for (int e = 0; e < 4; ++e) u[0][e] = u[1][e] = w[0][e] = w[1][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < NF; ++kk) {
        tc_reg b1[4], b2[4];
        tc_load_bt<LD>(b1, x1, r0, kk * 16, lane);
        tc_mma(u[0], a1[kk], b1);
        tc_mma(u[1], a1[kk], b1 + 2);
        tc_load_bt<LD>(b2, x2, r0, kk * 16, lane);
        tc_mma(w[0], a2[kk], b2);
        tc_mma(w[1], a2[kk], b2 + 2);
    }
}

/* dkdv's strip of m0 .. m0+15 queries of the tile at q0: st (S^T) becomes
 * P^T and dpt (dP^T) becomes dS^T = P^T (dP^T - D), and with a log-bias
 * (LB) colsum gathers the lane's part of dS's column sums.  MASK: P = 0
 * where i < j or i >= T.  The exponent is s scale + lb - L, or without a
 * log-bias the one fma s scale - L (the dq kernel's form, so that both
 * kernels recompute P alike).  In two steps, which the pipelined warpgroup
 * kernel takes apart (it forms P while dP^T is still being multiplied):
 * attn_dkdv_p makes st P^T, then attn_dkdv_ds dpt dS^T from it;
 * attn_dkdv_probs does both. */
template <bool MASK, bool LB>
static __device__ __forceinline__ void attn_dkdv_p(float (&st)[2][4], const float *Ls, const float (&lbj)[2],
                                                   float scale_log2, int m0, int q0, const int (&key)[2], int T,
                                                   int tq) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int ic = m0 + 8 * n + 2 * tq + (e & 1), i = q0 + ic;
            const float x =
                LB ? fmaf(st[n][e], scale_log2, lbj[e >> 1]) - attn_base2(Ls[ic])
                   : fmaf(st[n][e], scale_log2, -attn_base2(Ls[ic]));
            st[n][e] = !MASK || (key[e >> 1] <= i && i < T) ? tc_ex2(x) : 0.f;
        }
}
template <bool LB>
static __device__ __forceinline__ void attn_dkdv_ds(const float (&st)[2][4], float (&dpt)[2][4], float (&colsum)[2],
                                                    const float *Ds, int m0, int tq) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int ic = m0 + 8 * n + 2 * tq + (e & 1);
            const float ds = st[n][e] * (dpt[n][e] - Ds[ic]);
            dpt[n][e] = ds;
            if (LB) colsum[e >> 1] += ds;
        }
}

template <bool MASK, bool LB>
static __device__ __forceinline__ void attn_dkdv_probs(float (&st)[2][4], float (&dpt)[2][4], float (&colsum)[2],
                                                       const float *Ls, const float *Ds, const float (&lbj)[2],
                                                       float scale_log2, int m0, int q0, const int (&key)[2], int T,
                                                       int tq) {
    attn_dkdv_p<MASK, LB>(st, Ls, lbj, scale_log2, m0, q0, key, T, tq);
    attn_dkdv_ds<LB>(st, dpt, colsum, Ds, m0, tq);
}

/* dq's strip of keys c0 .. c0+15 of the tile at k0: dp (dP) becomes
 * dS = P (dP - D), P recomputed from s (S) as the dkdv kernel does.  MASK:
 * P = 0 where j > i or i >= T. */
template <bool MASK, bool LB>
static __device__ __forceinline__ void attn_dq_dscores(const float (&s)[2][4], float (&dp)[2][4], const float *lbs,
                                                       const float (&Lr)[2], const float (&Dr)[2], float scale_log2,
                                                       int c0, int k0, const int (&row)[2], int T, int tq) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = c0 + 8 * nt + 2 * tq + (e & 1), j = k0 + c, i = row[e >> 1];
            const float x =
                LB ? fmaf(s[nt][e], scale_log2, attn_base2(lbs[c])) - Lr[e >> 1]
                   : fmaf(s[nt][e], scale_log2, -Lr[e >> 1]);
            const float p = !MASK || (j <= i && i < T) ? tc_ex2(x) : 0.f;
            dp[nt][e] = p * (dp[nt][e] - Dr[e >> 1]);
        }
}

/* A warp's packed dS^T strip (an A operand: keys r0 .. r0+15 of the
 * tile, queries c0 .. c0+15) into a stored dS tile (8 x 8 blocks of 128
 * bytes: ATTN_DS_KEYBLOCK, attention_cuda.h).  Each register of the fragment is one block:
 * lane (g, t) holds its row g, queries 2t and 2t+1, so each of the four
 * stores is a warp's 128 contiguous bytes (row-major by key, they were 16
 * bytes in each of 8 rows). */
static __device__ __forceinline__ void attn_st_ds(sg_bf16 *tile, const tc_reg (&a)[4], int r0, int c0, int lane) {
    const int gq = lane >> 2, tq = lane & 3;
    /* r0 and c0 are multiples of 8: (r0 + g, c0 + 2t) is (g, 2t) of block
     * (r0, c0), at KEYBLOCK r0 / 8 + 64 c0 / 8 + 8 g + 2 t; written so, the
     * dS-storing kernels spill least (other forms gave ptxas other code) */
    tc_reg *lo = reinterpret_cast<tc_reg *>(tile + r0 * ATTN_BQ + 8 * (c0 + gq) + 2 * tq);
    constexpr int KB = ATTN_DS_KEYBLOCK / 2, QB = 64 / 2; /* tc_regs to the next 8 keys, 8 queries */
    lo[0] = a[0], lo[KB] = a[1], lo[QB] = a[2], lo[KB + QB] = a[3];
}

/* dkdv's strip once its S^T (st) and dP^T (dpt) are formed: P^T and dS^T
 * (attn_dkdv_probs, masked or not) packed into the A operands pa and dsa,
 * and dS^T stored into the tile dst if there is one.  Element e of st[n]
 * is key key[e >> 1], query q0 + m0 + 8n + 2tq + (e & 1). */
template <bool LB>
static __device__ __forceinline__ void attn_dkdv_elem(tc_reg (&pa)[4], tc_reg (&dsa)[4], float (&st)[2][4],
                                                      float (&dpt)[2][4], float (&colsum)[2], const float *Ls,
                                                      const float *Ds, const float (&lbj)[2], float scale_log2,
                                                      bool mask, int m0, int q0, const int (&key)[2], int T, int tq,
                                                      sg_bf16 *dst, int warp, int lane) {
    if (mask) attn_dkdv_probs<true, LB>(st, dpt, colsum, Ls, Ds, lbj, scale_log2, m0, q0, key, T, tq);
    else attn_dkdv_probs<false, LB>(st, dpt, colsum, Ls, Ds, lbj, scale_log2, m0, q0, key, T, tq);
    tc_acc_to_a(pa, st);
    tc_acc_to_a(dsa, dpt);
    if (dst) attn_st_ds(dst, dsa, warp * 16, m0, lane);
}

/* dV_w += P^T dO_m and dK_w += dS^T Q_m for the strip of queries m0 ..
 * m0+15 of the tile (dO and Q read transposed from shared memory) */
template <int NF, int LD>
static __device__ __forceinline__ void attn_dkdv_products(float (&dva)[2 * NF][4], float (&dka)[2 * NF][4],
                                                          const tc_reg (&pa)[4], const tc_reg (&dsa)[4],
                                                          const sg_bf16 *Qs, const sg_bf16 *dOs, int m0, int lane) {
#pragma unroll
    for (int nd = 0; nd < NF; ++nd) {
        tc_reg ob[4], qb[4];
        tc_load_b<LD>(ob, dOs, m0, nd * 16, lane);
        tc_mma(dva[2 * nd], pa, ob);
        tc_mma(dva[2 * nd + 1], pa, ob + 2);
        tc_load_b<LD>(qb, Qs, m0, nd * 16, lane);
        tc_mma(dka[2 * nd], dsa, qb);
        tc_mma(dka[2 * nd + 1], dsa, qb + 2);
    }
}

/* Stored dS tile (kt, qt) of (b,h) slice bh (attention_cuda.h,
 * attn_ds_bytes): the triangle's rows of tiles one after another, so the
 * tiles kt = 0 .. qt of a query tile are contiguous. */
template <class E> /* sg_bf16 or const sg_bf16 */
static __device__ __forceinline__ E *attn_ds_tile(E *ds, long bh, int T, int kt, int qt) {
    return ds + (bh * (long)attn_ds_tiles(T) + (long)qt * (qt + 1) / 2 + kt) * (ATTN_BK * ATTN_BQ);
}

/* What a value gate's backward reads of a warp's 16 keys, for the lane's
 * two rows (key[r]) and columns 8n + 2tq + c: v, the gate's input (zero
 * past T or d), the projection's w_h (zero past d) and g (zero past T).
 * Every load is issued before any is used, so the epilogue waits for global
 * memory once: written inline with the sums, each load sat behind a branch
 * (v16 or v32, in range or not) and was used at once, a wait per column read,
 * 34 in a row for the projection gate (tests/gpu/sass_mix.py's GWAIT).  Out-of-range reads take
 * in-range addresses (row 0, column d - 1) and are zeroed after. */
template <int DP> struct GateRowsIn {
    float v[2][DP / 8][2], w[DP / 8][2], g[2];
};

template <int DP, int GK>
static __device__ __forceinline__ void attn_gate_load(GateRowsIn<DP> &in, const AttnGateEpi &epi,
                                                      const AttnGeom &g, long row0, long bh, int h,
                                                      const int (&key)[2], int lane) {
    const int tq = lane & 3, d = g.d, T = g.T;
    const float *wh = GK == GATE_PROJ ? epi.w + (long)h * d : nullptr;
    long vo[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const bool ok = key[r] < T;
        vo[r] = (row0 + (ok ? key[r] : 0)) * epi.v_stride + (long)h * d;
        in.g[r] = epi.g[bh * T + (ok ? key[r] : 0)];
    }
    auto load_v = [&](const auto *v) { /* v in bf16 or fp32 (ld1): one branch, around all the loads */
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int n = 0; n < DP / 8; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int col = 8 * n + 2 * tq + c;
                    in.v[r][n][c] = ld1(v, vo[r] + (col < d ? col : d - 1));
                }
    };
    if (epi.v16) load_v(epi.v16);
    else load_v(epi.v32);
    if (GK == GATE_PROJ)
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int col = 8 * n + 2 * tq + c;
                in.w[n][c] = wh[col < d ? col : d - 1];
            }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const bool ok = key[r] < T;
        in.g[r] = ok ? in.g[r] : 0.f;
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int col = 8 * n + 2 * tq + c;
                in.v[r][n][c] = ok && col < d ? in.v[r][n][c] : 0.f;
                if (GK == GATE_PROJ && r == 0) in.w[n][c] = col < d ? in.w[n][c] : 0.f;
            }
    }
}

/* A value gate's backward on a warp's 16 keys, after their dV (dva)
 * (op_attention_gate_bwd; gate.cu states the math), from what
 * attn_gate_load read: dva holds dvg, the gradient of the attention's v
 * input vg = g v, and becomes dv, the gradient of the gate's input v.  Per
 * key row j (head h):
 *   s = w_h . v_j (GK = GATE_PROJ) or ||v_j||^2 (GATE_NORM), z = sg_gate_z(s)
 *   a = dvg_j . v_j,  dz = a g_j (1 - g_j),  1 - g_j = sigmoid(-z)
 *   dv_j = g_j dvg_j + dz (w_h, or beta v_j / (sqrt(d) ||v_j||))
 * A row's columns are in its four lanes (tq): each sums its own, then two
 * xor shuffles, which leave the same bits in all four.  dwp gathers this
 * lane's dz v over its two rows (projection), dzs the dz of its rows (tq 0
 * only, so that a row counts once).  Rows at or past T get dz = 0. */
template <int DP, int GK>
static __device__ __forceinline__ void attn_gate_bwd_rows(float (&dva)[DP / 8][4], float (&dwp)[DP / 8][2],
                                                          float &dzs, const GateRowsIn<DP> &in,
                                                          const AttnGateEpi &epi, const AttnGeom &g, int h,
                                                          const int (&key)[2], int lane) {
    const int tq = lane & 3, d = g.d, T = g.T;
    const float tb = epi.tb[h];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const bool ok = key[r] < T;
        float s = 0.f, a = 0.f;
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const float x = in.v[r][n][c];
                s += GK == GATE_NORM ? x * x : in.w[n][c] * x;
                a += dva[n][2 * r + c] * x;
            }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        a += __shfl_xor_sync(0xffffffffu, a, 1);
        a += __shfl_xor_sync(0xffffffffu, a, 2);
        float nrm;
        const float z = sg_gate_z(s, GK == GATE_NORM, epi.beta, tb, d, &nrm);
        const float gv = in.g[r];
        const float dz = ok ? a * gv * sg_sigmoid(-z) : 0.f;
        const float f = sg_gate_dir(dz, GK == GATE_NORM, epi.beta, 1.f / sqrtf((float)d), nrm);
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const float dir = GK == GATE_NORM ? in.v[r][n][c] : in.w[n][c];
                dva[n][2 * r + c] = gv * dva[n][2 * r + c] + f * dir;
                if (GK == GATE_PROJ) dwp[n][c] = fmaf(dz, in.v[r][n][c], dwp[n][c]);
            }
        if (tq == 0) dzs += dz;
    }
}

/* The block's partial of the gate's parameter gradients (AttnGateEpi.part):
 * each warp's lanes added over the row bits (xor 4, 8, 16) in double, then
 * the warps in order through shared memory, which the tiles no longer need
 * once every warp has passed the barrier below.  Every warp of the block
 * takes part, those without keys with zeros. */
template <int DP, int GK>
static __device__ __forceinline__ void attn_gate_partial(const float (&dwp)[DP / 8][2], float dzs,
                                                         const AttnGateEpi &epi, const AttnGeom &g, int b, int kt,
                                                         int h, int warp, int lane, unsigned char *smem) {
    const int tq = lane & 3, np = epi.np;
    double s0 = dzs, sw[DP / 8][2];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) sw[n][0] = dwp[n][0], sw[n][1] = dwp[n][1];
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        if (GK == GATE_PROJ)
#pragma unroll
            for (int n = 0; n < DP / 8; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) sw[n][c] += __shfl_xor_sync(0xffffffffu, sw[n][c], o);
    }
    double *sh = reinterpret_cast<double *>(smem); /* [ATTN_NT / 32][np] */
    __syncthreads();                               /* every warp is done with the tiles */
    if (lane < 4) {
        if (lane == 0) sh[warp * np] = GK == GATE_NORM ? -(double)epi.beta * s0 : s0;
        if (GK == GATE_PROJ)
#pragma unroll
            for (int n = 0; n < DP / 8; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int col = 8 * n + 2 * tq + c;
                    if (col < g.d) sh[warp * np + 1 + col] = sw[n][c];
                }
    }
    __syncthreads();
    const long nkt = (g.T + ATTN_BK - 1) / ATTN_BK;
    double *out = epi.part + (((long)b * nkt + kt) * g.H + h) * np;
    for (int k = threadIdx.x; k < np; k += ATTN_NT) {
        double t = 0.0;
        for (int w = 0; w < ATTN_NT / 32; ++w) t += sh[w * np + k];
        out[k] = t;
    }
}

/* The strip loop of both backward kernels under SG_ATTN_BWD_PIPE=1 (SP):
 * strip n + 1's score products issued before strip n's exponentials, so
 * that they run while those do; two strips' scores in registers (sets a and
 * b, R each), strips lo .. hi in order, each strip's sums as in the plain
 * loop.  products(n, s, dp) forms strip n's pair, rest(n, s, dp) the rest
 * of its work. */
template <class R, class Products, class Rest>
static __device__ __forceinline__ void attn_strips_piped(int lo, int hi, const Products &products, const Rest &rest) {
    if (lo > hi) return;
    R sa, da, sb, db;
    products(lo, sa, da);
#pragma unroll 1
    for (int n = lo; n <= hi; n += 2) {
        if (n + 1 <= hi) products(n + 1, sb, db);
        rest(n, sa, da);
        if (n + 1 > hi) break;
        if (n + 2 <= hi) products(n + 2, sa, da);
        rest(n + 1, sb, db);
    }
}

static long g_dq_stored; /* backwards whose dQ came from the stored dS */
extern "C" long sg_attn_dq_stored(void) { return g_dq_stored; }
static long g_bwd_piped; /* dK/dV and dQ launches with the strips pipelined */
extern "C" long sg_attn_bwd_piped(void) { return g_bwd_piped; }

/* Where a dK/dV block works, as both kernels derive it: key tile kt, head
 * h, sequence b, the thread's warp and lane (gq = lane / 4, tq = lane % 4),
 * bh (the (b,h) slice of lse, D and the log-bias), the (b,h) slices of Q
 * and dO, the rows' LSE and D, the warp's first key kw0 and the lane's two
 * keys, and the number of query tiles. */
struct DkdvPlace {
    int kt, h, b, k0, warp, lane, gq, tq;
    long bh;
    const sg_bf16 *qh, *gh;
    const float *lseh, *Dh;
    int kw0, key[2], ntq;
    __device__ __forceinline__ DkdvPlace(const AttnGeom &g, const AttnOp &qo, const AttnOp &go, const float *lse,
                                         const float *D)
        : kt(blockIdx.z), h(blockIdx.x), b(blockIdx.y), k0(kt * ATTN_BK), warp(threadIdx.x >> 5),
          lane(threadIdx.x & 31), gq(lane >> 2), tq(lane & 3), bh((long)b * g.H + h), qh(qo.at(b, h)),
          gh(go.at(b, h)), lseh(lse + bh * g.T), Dh(D + bh * g.T), kw0(k0 + warp * 16),
          key{kw0 + gq, kw0 + gq + 8}, ntq((g.T + ATTN_BQ - 1) / ATTN_BQ) {}
};

/* The dK/dV kernels' end, for a warp's 16 keys: dK (times the softmax
 * scale) and dV stored with their twins, through a value gate's backward
 * (GK) with the block's partial of its parameter gradients, or with the
 * log-bias's gradient (LB), the column sums of dS. */
template <int DP, bool LB, int GK>
static __device__ __forceinline__ void attn_dkdv_epilogue(float (&dka)[DP / 8][4], float (&dva)[DP / 8][4],
                                                          float (&colsum)[2], float *__restrict__ dk,
                                                          float *__restrict__ dv, float *__restrict__ dlogbias,
                                                          sg_bf16 *__restrict__ tk, sg_bf16 *__restrict__ tv,
                                                          const AttnGateEpi &epi, const AttnGeom &g,
                                                          const DkdvPlace &p, unsigned char *smem) {
    const int b = p.b, kt = p.kt, h = p.h, warp = p.warp, lane = p.lane, T = g.T, tq = p.tq, kw0 = p.kw0;
    const int(&key)[2] = p.key;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const bool active = kw0 < T;
    if constexpr (GK != 0) {
        float dwp[DP / 8][2], dzs = 0.f;
#pragma unroll
        for (int n = 0; n < DP / 8; ++n) dwp[n][0] = dwp[n][1] = 0.f;
        if (active) {
            tc_store_rows<DP>(dk + row0 * g.k_stride + ho, g.k_stride, dka, kw0, T, g.d, g.scale, lane,
                              tk ? tk + row0 * g.k_stride + ho : nullptr, g.f32);
            GateRowsIn<DP> in; /* after dK's stores, which leave its registers free */
            attn_gate_load<DP, GK>(in, epi, g, row0, bh, h, key, lane);
            attn_gate_bwd_rows<DP, GK>(dva, dwp, dzs, in, epi, g, h, key, lane);
            tc_store_rows<DP>(dv + row0 * epi.dv_stride + ho, epi.dv_stride, dva, kw0, T, g.d, 1.f, lane,
                              tv ? tv + row0 * epi.dv_stride + ho : nullptr, g.f32 || !tv);
        }
        attn_gate_partial<DP, GK>(dwp, dzs, epi, g, b, kt, h, warp, lane, smem);
        return;
    }
    if (!active) return;
    if (LB)
#pragma unroll
        for (int r = 0; r < 2; ++r) { /* the row's four lanes, in a fixed order */
            colsum[r] += __shfl_xor_sync(0xffffffffu, colsum[r], 1);
            colsum[r] += __shfl_xor_sync(0xffffffffu, colsum[r], 2);
        }
    tc_store_rows<DP>(dv + row0 * g.v_stride + ho, g.v_stride, dva, kw0, T, g.d, 1.f, lane,
                      tv ? tv + row0 * g.v_stride + ho : nullptr, g.f32 || !tv);
    tc_store_rows<DP>(dk + row0 * g.k_stride + ho, g.k_stride, dka, kw0, T, g.d, g.scale, lane,
                      tk ? tk + row0 * g.k_stride + ho : nullptr, g.f32);
    if (LB && dlogbias && tq == 0) /* null when logbias is, and may be without it (ops.h) */
#pragma unroll
        for (int r = 0; r < 2; ++r)
            if (key[r] < T) dlogbias[bh * T + key[r]] = colsum[r];
}

/* GK: GATE_NORM or GATE_PROJ, a value gate's backward fused after dV
 * (attn_gate_bwd_rows; with no log-bias), or 0.  SP: the strips
 * pipelined (SG_ATTN_BWD_PIPE=1, head dim 64), the same sums in the same
 * order.  DS: dS stored for the dq kernel (SG_ATTN_DQ=stored; ds is then
 * not null).  A template flag, not a test of ds: tested, it left a
 * branch and 16 stores (12 predicated) in every tile of the recomputing
 * backward, the default.  Up to head dim 64 every untraced kernel is held to 168
 * registers, so that three blocks (12 warps) fit an SM whatever the arm:
 * uncapped, the gate's epilogue and the pipelined strips took more, and
 * so did the log-bias on sm_90 (177), which left two.  At 168 the kernels
 * with the unrolled strips of a full tile spill 0 to 8 bytes on sm_80 and
 * sm_90, outside the strips.  On sm_120 the 100 KB of shared memory an SM
 * holds these 38 KB blocks to two anyway, so there they are held to two,
 * which leaves them their registers (they spilled up to 32 bytes at 168). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define ATTN_DKDV_BLOCKS 2
#else
#define ATTN_DKDV_BLOCKS 3
#endif
template <int DP, bool LB, int GK, bool SP, bool DS, bool TR>
static __global__ void __launch_bounds__(ATTN_NT, DP <= 64 && !TR ? ATTN_DKDV_BLOCKS : 1)
    attn_bwd_dkdv_mma_kernel(float *__restrict__ dk, float *__restrict__ dv, float *__restrict__ dlogbias,
                             const AttnOp qo, const AttnOp ko, const AttnOp vo, const AttnOp go,
                             const float *__restrict__ lse, const float *__restrict__ D,
                             const float *__restrict__ logbias, sg_bf16 *__restrict__ tk, sg_bf16 *__restrict__ tv,
                             sg_bf16 *__restrict__ ds, AttnGeom g, const AttnGateEpi epi, KtraceRec *trace) {
    static_assert(!(GK && LB), "the value gates have no log-bias");
    static_assert(!(SP && TR), "the clocks' laps would undo the pipelining");
    AttnClock<TR> clk; /* TR: the traced instantiation (attention_trace.h) */
    typedef BwdMmaLayout<DP> L;
    constexpr int NF = DP / 16, LD = L::LDH, TE = L::TE;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    const BwdMmaSmem<L> sm(attn_smem);

    const DkdvPlace p(g, qo, go, lse, D);
    const int T = g.T;
    const bool active = p.kw0 < T; /* warp-uniform */
    /* The stored dS (or null): every element of each tile of column kt is
     * written, zero where a strip is skipped, so its reader never meets
     * memory nothing wrote. */
    const tc_reg zero[4] = {0u, 0u, 0u, 0u};

    /* the block's K and V into region A, query tile kt (the diagonal one)
     * into buffer 0, one group */
    attn_cp_pair<DP, LD, TE>(sm.buf(1), ko.at(p.b, p.h), ko.rs, vo.at(p.b, p.h), vo.rs, p.k0, T);
    attn_cp_pair<DP, LD, TE>(sm.buf(0), p.qh, qo.rs, p.gh, go.rs, p.k0, T);
    attn_cp_rowstats(sm.L2, sm.D2, p.lseh, p.Dh, p.k0, T);
    tc_cp_commit();
    if (LB) attn_load_bias(sm.lb2, logbias + p.bh * T, p.k0, T);
    tc_cp_wait<0>();
    __syncthreads();
    tc_reg ka[NF][4], va[NF][4];
    attn_own_operands<NF, LD, TE>(ka, va, sm.buf(1), p.warp * 16, p.lane);
    const float lbj[2] = {LB ? sm.lb2[p.warp * 16 + p.gq] : 0.f, LB ? sm.lb2[p.warp * 16 + p.gq + 8] : 0.f};
    __syncthreads(); /* region A is free: the second Q/dO buffer from now on */
    float dka[DP / 8][4], dva[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) dka[n][e] = dva[n][e] = 0.f;
    float colsum[2] = {0.f, 0.f};

    for (int qt = p.kt; qt < p.ntq; ++qt) { /* query tiles at or below the diagonal */
        const int q0 = qt * ATTN_BQ, cur = (qt - p.kt) & 1;
        if (qt + 1 < p.ntq) { /* fetch the next query tile while this one is used */
            attn_cp_pair<DP, LD, TE>(sm.buf(cur ^ 1), p.qh, qo.rs, p.gh, go.rs, q0 + ATTN_BQ, T);
            attn_cp_rowstats(sm.L2 + (cur ^ 1) * ATTN_BQ, sm.D2 + (cur ^ 1) * ATTN_BQ, p.lseh, p.Dh, q0 + ATTN_BQ, T);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        __syncthreads(); /* every thread's copies of tile qt are visible */
        clk.template lap<AT_WAIT>();
        const sg_bf16 *Qs = sm.buf(cur), *dOs = sm.buf(cur) + TE;
        const float *Ls = sm.L2 + cur * ATTN_BQ, *Ds = sm.D2 + cur * ATTN_BQ;

        sg_bf16 *const dst = DS ? attn_ds_tile(ds, p.bh, T, p.kt, qt) : nullptr;
        /* below the diagonal tile every i > j; only the last tile has rows past T */
        const bool mask = qt == p.kt || q0 + ATTN_BQ > T;
        /* strip m's S^T and dP^T, formed: the rest of its work; mk: whether
         * it masks (mask, or a constant false that the inlining folds) */
        auto rest = [&](int m, float(&st)[2][4], float(&dpt)[2][4], bool mk) {
            tc_reg pa[4], dsa[4];
            attn_dkdv_elem<LB>(pa, dsa, st, dpt, colsum, Ls, Ds, lbj, g.scale_log2, mk, m * 16, q0, p.key, T,
                               p.tq, dst, p.warp, p.lane);
            clk.template lap<AT_ELEM>();
            attn_dkdv_products<NF, LD>(dva, dka, pa, dsa, Qs, dOs, m * 16, p.lane);
            clk.hold(dva[DP / 8 - 1][3]), clk.hold(dka[DP / 8 - 1][3]);
            clk.template lap<AT_PROD2>();
        };
        /* strip m, unpiped: S^T, dP^T (keys x queries q0 + 16m .. q0 + 16m + 15), the rest */
        auto strip = [&](int m, bool mk) {
            float st[2][4], dpt[2][4];
            attn_two_products<NF, LD>(st, dpt, ka, va, Qs, dOs, m * 16, p.lane);
            clk.hold(st[1][3]), clk.hold(dpt[1][3]);
            clk.template lap<AT_PROD1>();
            rest(m, st, dpt, mk);
        };
        if (!SP && qt > p.kt && q0 + ATTN_BQ <= T) {
            /* A tile below the diagonal and within T (most tiles): every
             * strip has work and none masks, so its four strips run
             * unrolled, with constant addresses and no branches, and nvcc
             * interleaves one strip's products with the previous strip's
             * exponentials (docs/cuda.md, "Issue cycles from the control
             * codes").  The same sums in the same order: the same bits.
             * At head dim 128 the unrolled strips spill, so they loop (two
             * loops: "#pragma unroll 4" here gave other code, which spilled
             * 8 to 24 bytes at d 64, against 0 to 8 fully unrolled). */
            if constexpr (DP <= 64) {
#pragma unroll
                for (int m = 0; m < ATTN_BQ / 16; ++m) strip(m, false);
            } else {
#pragma unroll 1
                for (int m = 0; m < ATTN_BQ / 16; ++m) strip(m, false);
            }
        } else {
            /* the strips with work: a query at or past a key of the warp's
             * (mi0 + 15 >= kw0) and before T; a contiguous run [mlo, mhi] */
            int mlo = ATTN_BQ / 16, mhi = -1;
            for (int m = 0; m < ATTN_BQ / 16; ++m) {
                const int mi0 = q0 + m * 16;
                if (active && mi0 + 15 >= p.kw0 && mi0 < T) mlo = mhi < 0 ? m : mlo, mhi = m;
                else if (dst) attn_st_ds(dst, zero, p.warp * 16, m * 16, p.lane);
            }
            if constexpr (SP) {
                attn_strips_piped<float[2][4]>(
                    mlo, mhi,
                    [&](int m, float(&st)[2][4], float(&dpt)[2][4]) {
                        attn_two_products<NF, LD>(st, dpt, ka, va, Qs, dOs, m * 16, p.lane);
                    },
                    [&](int m, float(&st)[2][4], float(&dpt)[2][4]) { rest(m, st, dpt, mask); });
            } else {
#pragma unroll 1
                for (int m = mlo; m <= mhi; ++m) strip(m, mask);
            }
        }
        if (active) clk.tile();
        if (qt + 1 < p.ntq) __syncthreads(); /* done with buffer cur: tile qt + 2 goes there */
        clk.template lap<AT_BARRIER>();
    }

    attn_dkdv_epilogue<DP, LB, GK>(dka, dva, colsum, dk, dv, dlogbias, tk, tv, epi, g, p, attn_smem);
    clk.finish(trace, p.warp, p.lane);
}

/* The dK/dV kernel on Hopper's warpgroup products (wgmma_ptx.h; with
 * SG_ATTN_WGMMA=1 on an sm_90 GPU, head dim 64): the block's four warps are
 * one warpgroup of 64 keys, and per query tile it forms the whole 64 x 64
 * S^T = K Q^T and dP^T = V dO^T in two chains of DP / 16 products, K and V
 * from registers (the A fragments the mma kernel loads), Q and dO from
 * shared memory; then dV += P^T dO and dK += dS^T Q in two chains of 4, P^T
 * and dS^T from the accumulators, dO and Q read MN-major.  Each Q and dO
 * fragment is so read from shared memory once per 64 keys instead of once
 * per warp of 16: a quarter of the traffic that bounds the mma kernel
 * (docs/cuda.md, "The dK/dV kernel and shared memory").
 *
 * The products cannot skip one warp's strips, so every strip is formed and
 * the mask does what the skips did: a tile with keys at or past T masks
 * too (P = 0 for those keys, where the mma kernel skipped their warp), so
 * dV, dK, the column sums and the stored dS get zeros there, as before.
 * The Q and dO tiles sit in the core-matrix layout (attn_cp_rows_core);
 * K and V keep the padded rows ldmatrix reads.  At head dim 128 the
 * accumulators would not fit in the registers: the mma kernel runs there. */
template <int DP, bool LB, int GK, bool PIPE>
static __global__ void __launch_bounds__(ATTN_NT)
    attn_bwd_dkdv_wgmma_kernel(float *__restrict__ dk, float *__restrict__ dv, float *__restrict__ dlogbias,
                               const AttnOp qo, const AttnOp ko, const AttnOp vo, const AttnOp go,
                               const float *__restrict__ lse, const float *__restrict__ D,
                               const float *__restrict__ logbias, sg_bf16 *__restrict__ tk, sg_bf16 *__restrict__ tv,
                               sg_bf16 *__restrict__ ds, AttnGeom g, const AttnGateEpi epi,
                               KtraceRec * /* the mma kernel's trace: not traced */) {
    static_assert(!(GK && LB), "the value gates have no log-bias");
    static_assert(DP == 64, "the accumulators of head dim 128 do not fit");
    typedef BwdMmaLayout<DP> L;
    constexpr int NF = DP / 16, LD = L::LDH, TE = L::TE, NS = ATTN_BQ / 16;
    constexpr uint32_t ES = sizeof(sg_bf16), CORE = 64 * ES, GROUP = 8 * DP * ES; /* attention_fwd_wgmma.cu */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    const BwdMmaSmem<L> sm(attn_smem);

    const DkdvPlace p(g, qo, go, lse, D);
    const int T = g.T;

    /* the block's K and V into region A (padded rows), query tile kt into
     * buffer 0 (core layout), one group */
    attn_cp_pair<DP, LD, TE>(sm.buf(1), ko.at(p.b, p.h), ko.rs, vo.at(p.b, p.h), vo.rs, p.k0, T);
    attn_cp_rows_core<ATTN_BQ, DP, ATTN_NT>(sm.buf(0), p.qh, qo.rs, p.k0, T);
    attn_cp_rows_core<ATTN_BQ, DP, ATTN_NT>(sm.buf(0) + TE, p.gh, go.rs, p.k0, T);
    attn_cp_rowstats(sm.L2, sm.D2, p.lseh, p.Dh, p.k0, T);
    tc_cp_commit();
    if (LB) attn_load_bias(sm.lb2, logbias + p.bh * T, p.k0, T);
    uint32_t *const zword = reinterpret_cast<uint32_t *>(attn_smem + L::ZERO);
    if (threadIdx.x == 0) *zword = 0u;
    tc_cp_wait<0>();
    wg_fence_smem();
    __syncthreads();
    tc_reg ka[NF][4], va[NF][4];
    attn_own_operands<NF, LD, TE>(ka, va, sm.buf(1), p.warp * 16, p.lane);
    const float lbj[2] = {LB ? sm.lb2[p.warp * 16 + p.gq] : 0.f, LB ? sm.lb2[p.warp * 16 + p.gq + 8] : 0.f};
    __syncthreads(); /* region A is free: the second Q/dO buffer from now on */
    float dka[DP / 8][4], dva[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) dka[n][e] = dva[n][e] = 0.f;
    float colsum[2] = {0.f, 0.f};
    const uint32_t sbuf[2] = {(uint32_t)__cvta_generic_to_shared(sm.buf(0)),
                              (uint32_t)__cvta_generic_to_shared(sm.buf(1))};

    for (int qt = p.kt; qt < p.ntq; ++qt) { /* query tiles at or below the diagonal */
        const int q0 = qt * ATTN_BQ, cur = (qt - p.kt) & 1;
        if (qt + 1 < p.ntq) { /* fetch the next query tile while this one is used */
            attn_cp_rows_core<ATTN_BQ, DP, ATTN_NT>(sm.buf(cur ^ 1), p.qh, qo.rs, q0 + ATTN_BQ, T);
            attn_cp_rows_core<ATTN_BQ, DP, ATTN_NT>(sm.buf(cur ^ 1) + TE, p.gh, go.rs, q0 + ATTN_BQ, T);
            attn_cp_rowstats(sm.L2 + (cur ^ 1) * ATTN_BQ, sm.D2 + (cur ^ 1) * ATTN_BQ, p.lseh, p.Dh, q0 + ATTN_BQ, T);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        wg_fence_smem(); /* this thread's copies of tile qt, for the products */
        __syncthreads();
        const uint32_t qs = cur ? sbuf[1] : sbuf[0], os = qs + TE * ES;
        const float *Ls = sm.L2 + cur * ATTN_BQ, *Ds = sm.D2 + cur * ATTN_BQ;
        sg_bf16 *const dst = ds ? attn_ds_tile(ds, p.bh, T, p.kt, qt) : nullptr;

        /* S^T and dP^T, keys x the tile's 64 queries: st[m][n] covers
         * queries q0 + 16m + 8n .. + 7 */
        float st[NS][2][4], dpt[NS][2][4];
        tc_reg kf[NF][4], vf[NF][4]; /* this pass's copies of K and V (wg_fresh), made before the chains */
        const uint32_t zero = wg_zero(zword);
#pragma unroll
        for (int kk = 0; kk < NF; ++kk) wg_fresh(kf[kk], ka[kk], zero), wg_fresh(vf[kk], va[kk], zero);
        wg_pin_a<NF>(kf);
        wg_pin_a<NF>(vf);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < NF; ++kk)
            wg_rs_n64<0>(&st[0][0][0], kf[kk], wg_desc_core(qs + 2 * CORE * kk, CORE, GROUP, 0, g.wgswap), kk);
        if (PIPE) wg_commit(); /* S^T alone, so that P is formed while dP^T is multiplied */
#pragma unroll
        for (int kk = 0; kk < NF; ++kk)
            wg_rs_n64<0>(&dpt[0][0][0], vf[kk], wg_desc_core(os + 2 * CORE * kk, CORE, GROUP, 0, g.wgswap), kk);
        wg_commit();
        /* on the diagonal tile, the last one (rows past T), or with keys past T */
        const bool mask = qt == p.kt || q0 + ATTN_BQ > T || p.k0 + ATTN_BK > T;
        tc_reg pa[NS][4], dsa[NS][4];
        auto dv_chain = [&] {
#pragma unroll
            for (int m = 0; m < NS; ++m)
                wg_rs<DP, 1>(&dva[0][0], pa[m], wg_desc_core(os + 2 * GROUP * m, GROUP, CORE, 1, g.wgswap), 1);
        };
        auto dk_chain = [&] {
#pragma unroll
            for (int m = 0; m < NS; ++m)
                wg_rs<DP, 1>(&dka[0][0], dsa[m], wg_desc_core(qs + 2 * GROUP * m, GROUP, CORE, 1, g.wgswap), 1);
        };
        if constexpr (PIPE) {
            /* SG_ATTN_WGMMA=2: P^T while dP^T runs, then dV += P^T dO issued
             * and dS^T formed while it runs, then dK += dS^T Q: the same
             * sums in the same order as below, each product overlapped
             * with the CUDA-core work that does not need it */
            wg_wait<1>();
            wg_pin<8 * NS>(&st[0][0][0]);
            wg_pin_a<NF>(kf);
#pragma unroll
            for (int m = 0; m < NS; ++m) {
                if (mask)
                    attn_dkdv_p<true, LB>(st[m], Ls, lbj, g.scale_log2, m * 16, q0, p.key, T, p.tq);
                else
                    attn_dkdv_p<false, LB>(st[m], Ls, lbj, g.scale_log2, m * 16, q0, p.key, T, p.tq);
                tc_acc_to_a(pa[m], st[m]);
            }
            wg_pin<DP / 2>(&dva[0][0]);
            wg_pin_a<NS>(pa);
            wg_fence();
            dv_chain();
            wg_commit();
            wg_wait<1>(); /* dP^T; dV runs on */
            wg_pin<8 * NS>(&dpt[0][0][0]);
            wg_pin_a<NF>(vf);
#pragma unroll
            for (int m = 0; m < NS; ++m) {
                attn_dkdv_ds<LB>(st[m], dpt[m], colsum, Ds, m * 16, p.tq);
                tc_acc_to_a(dsa[m], dpt[m]);
                if (dst) attn_st_ds(dst, dsa[m], p.warp * 16, m * 16, p.lane);
            }
            wg_pin<DP / 2>(&dka[0][0]);
            wg_pin_a<NS>(dsa);
            wg_fence();
            dk_chain();
            wg_commit();
            wg_wait<0>();
            wg_pin_a<NS>(pa);
            wg_pin_a<NS>(dsa);
        } else {
            wg_wait<0>();
            wg_pin<8 * NS>(&st[0][0][0]);
            wg_pin<8 * NS>(&dpt[0][0][0]);
#pragma unroll
            for (int m = 0; m < NS; ++m) {
                if (mask)
                    attn_dkdv_probs<true, LB>(st[m], dpt[m], colsum, Ls, Ds, lbj, g.scale_log2, m * 16, q0, p.key,
                                              T, p.tq);
                else
                    attn_dkdv_probs<false, LB>(st[m], dpt[m], colsum, Ls, Ds, lbj, g.scale_log2, m * 16, q0, p.key,
                                               T, p.tq);
                tc_acc_to_a(pa[m], st[m]);
                tc_acc_to_a(dsa[m], dpt[m]);
                if (dst) attn_st_ds(dst, dsa[m], p.warp * 16, m * 16, p.lane);
            }
            wg_pin<DP / 2>(&dva[0][0]);
            wg_pin<DP / 2>(&dka[0][0]);
            wg_fence();
            dv_chain();
            dk_chain();
            wg_commit();
            wg_wait<0>();
        }
        wg_pin<DP / 2>(&dva[0][0]);
        wg_pin<DP / 2>(&dka[0][0]);
        if (qt + 1 < p.ntq) __syncthreads(); /* done with buffer cur: tile qt + 2 goes there */
    }
    attn_dkdv_epilogue<DP, LB, GK>(dka, dva, colsum, dk, dv, dlogbias, tk, tv, epi, g, p, attn_smem);
}

/* The dq kernel's warps own MT 16-row m-tiles each (DqMma<MT>), for the
 * reason the forward's do (attention_fwd_mma.cu): every K or V fragment
 * read from shared memory then feeds MT products.  With MT = 2 a 64-query
 * block is 2 warps.  As in the forward, each row sees the instructions it
 * saw with one m-tile: a strip past an m-tile's last query is computed for
 * it only in S and dP, where the mask sets P = 0 by selection, and is
 * skipped in dQ += dS K. */
template <int MT>
struct DqMma {
    static constexpr int NT = 32 * ATTN_BQ / (16 * MT);
};

/* S = Q_w K_n^T and dP = dO_w V_n^T for the 16 keys n*16 .. n*16+15 of the
 * K and V tiles (read transposed), qa and oa a warp's MT m-tiles of Q and
 * dO as NF k-step A operands */
template <int NF, int MT, int LD>
static __device__ __forceinline__ void attn_dq_scores(float (&s)[MT][2][4], float (&dp)[MT][2][4],
                                                      const tc_reg (&qa)[MT][NF][4], const tc_reg (&oa)[MT][NF][4],
                                                      const sg_bf16 *Ks, const sg_bf16 *Vs, int n, int lane) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][0][e] = s[i][1][e] = dp[i][0][e] = dp[i][1][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < NF; ++kk) {
        tc_reg kb[4], vb[4];
        tc_load_bt<LD>(kb, Ks, n * 16, kk * 16, lane);
        tc_load_bt<LD>(vb, Vs, n * 16, kk * 16, lane);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            tc_mma(s[i][0], qa[i][kk], kb);
            tc_mma(s[i][1], qa[i][kk], kb + 2);
            tc_mma(dp[i][0], oa[i][kk], vb);
            tc_mma(dp[i][1], oa[i][kk], vb + 2);
        }
    }
}

/* dQ_w += dS K for the 16 keys n*16 .. n*16+15 of the K tile Ks (those
 * from kn0 on), dsa[i] the strip's dS as the A operand of m-tile i: what
 * both dq kernels do with their dS, in one order, so that the same dS
 * gives the same bits.  FULL: a key tile left of the diagonal tile, which
 * every m-tile sees whole. */
template <int NF, int MT, int LD, bool FULL = false>
static __device__ __forceinline__ void attn_dq_products(float (&dqa)[MT][2 * NF][4], const tc_reg (&dsa)[MT][4],
                                                        const sg_bf16 *Ks, int n, int kn0, int qw0, int lane) {
#pragma unroll
    for (int nd = 0; nd < NF; ++nd) {
        tc_reg kb[4];
        tc_load_b<LD>(kb, Ks, n * 16, nd * 16, lane);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            /* past the m-tile's last query: dS = 0 (FULL: no m-tile is) */
            if (!FULL && kn0 > qw0 + 16 * i + 15) continue;
            tc_mma(dqa[i][2 * nd], dsa[i], kb);
            tc_mma(dqa[i][2 * nd + 1], dsa[i], kb + 2);
        }
    }
}

/* A warp's dQ rows, times the softmax scale, and dq's twin where there is one */
template <int DP, int MT>
static __device__ __forceinline__ void attn_dq_store(float *__restrict__ dq, sg_bf16 *__restrict__ twq,
                                                     const float (&dqa)[MT][DP / 8][4], long row0, long ho, int qw0,
                                                     const AttnGeom &g, int lane) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
        tc_store_rows<DP>(dq + row0 * g.q_stride + ho, g.q_stride, dqa[i], qw0 + 16 * i, g.T, g.d, g.scale, lane,
                          twq ? twq + row0 * g.q_stride + ho : nullptr, g.f32);
}

/* SP: the strips pipelined (SG_ATTN_BWD_PIPE=1), as in the dkdv kernel */
template <int DP, int MT, bool LB, bool SP, bool TR>
static __global__ void __launch_bounds__(DqMma<MT>::NT)
    attn_bwd_dq_mma_kernel(float *__restrict__ dq, const AttnOp qo, const AttnOp ko, const AttnOp vo, const AttnOp go,
                           const float *__restrict__ lse, const float *__restrict__ D,
                           const float *__restrict__ logbias, sg_bf16 *__restrict__ twq, AttnGeom g,
                           KtraceRec *trace) {
    static_assert(!(SP && TR), "the clocks' laps would undo the pipelining");
    AttnClock<TR> clk; /* TR: the traced instantiation (attention_trace.h) */
    typedef BwdMmaLayout<DP> L;
    constexpr int NF = DP / 16, LD = L::LDH, TE = L::TE, NT = DqMma<MT>::NT, RW = 16 * MT;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    const BwdMmaSmem<L> sm(attn_smem);

    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y, T = g.T, q0 = qt * ATTN_BQ;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const sg_bf16 *kh = ko.at(b, h), *vh = vo.at(b, h);
    const float *lb = LB ? logbias + bh * T : nullptr;
    const int qw0 = q0 + warp * RW, wlast = qw0 + RW - 1;
    const bool active = qw0 < T; /* warp-uniform */
    int row[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) row[i][0] = qw0 + 16 * i + gq, row[i][1] = qw0 + 16 * i + gq + 8;

    /* the block's Q and dO into region A, key tile 0 into buffer 0, one group */
    attn_cp_pair<DP, LD, TE, NT>(sm.buf(1), qo.at(b, h), qo.rs, go.at(b, h), go.rs, q0, T);
    attn_cp_pair<DP, LD, TE, NT>(sm.buf(0), kh, ko.rs, vh, vo.rs, 0, T);
    if (LB) attn_cp_f32s<ATTN_BK>(sm.lb2, lb, 0, T);
    tc_cp_commit();
    attn_load_rowstats(sm.L2, sm.D2, lse + bh * T, D + bh * T, q0, T);
    tc_cp_wait<0>();
    __syncthreads();
    tc_reg qa[MT][NF][4], oa[MT][NF][4];
    float Lr[MT][2], Dr[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int r0 = warp * RW + 16 * i;
        attn_own_operands<NF, LD, TE>(qa[i], oa[i], sm.buf(1), r0, lane);
        Lr[i][0] = sm.L2[r0 + gq], Lr[i][1] = sm.L2[r0 + gq + 8];
        Dr[i][0] = sm.D2[r0 + gq], Dr[i][1] = sm.D2[r0 + gq + 8];
    }
    __syncthreads(); /* region A is free: the second K/V buffer from now on */
    float dqa[MT][DP / 8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) dqa[i][n][e] = 0.f;

    for (int kt = 0; kt <= qt; ++kt) { /* key tiles at or left of the diagonal */
        const int k0 = kt * ATTN_BK, cur = kt & 1;
        if (kt < qt) { /* fetch the next key tile while this one is used */
            attn_cp_pair<DP, LD, TE, NT>(sm.buf(cur ^ 1), kh, ko.rs, vh, vo.rs, k0 + ATTN_BK, T);
            if (LB) attn_cp_f32s<ATTN_BK>(sm.lb2 + (cur ^ 1) * ATTN_BK, lb, k0 + ATTN_BK, T);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        __syncthreads(); /* every thread's copies of tile kt are visible */
        clk.template lap<AT_WAIT>();
        const sg_bf16 *Ks = sm.buf(cur), *Vs = sm.buf(cur) + TE;
        const float *lbs = sm.lb2 + cur * ATTN_BK;

        if (active) {
            /* the strips with work: keys from kn0 = k0 + 16n on that some
             * query of the warp sees (kn0 <= wlast) and before T, n = 0 .. nhi */
            int nhi = -1;
            for (int n = 0; n < ATTN_BK / 16; ++n)
                if (k0 + n * 16 <= wlast && k0 + n * 16 < T) nhi = n;
            /* S, dP of strip n (queries x keys k0 + 16n .. k0 + 16n + 15), per m-tile */
            auto scores = [&](int n, float(&s)[MT][2][4], float(&dp)[MT][2][4]) {
                attn_dq_scores<NF, MT, LD>(s, dp, qa, oa, Ks, Vs, n, lane);
            };
            /* strip n's S and dP, formed: dS, then dQ += dS K; full: a
             * tile left of the diagonal one (no mask, no m-tile skipped) */
            auto rest = [&](int n, float(&s)[MT][2][4], float(&dp)[MT][2][4], auto full) {
                constexpr bool FULL = decltype(full)::value;
                /* element e of s[i][nt]: query row[i][e >> 1], key k0 + 16n + 8nt + 2tq + (e & 1).
                 * Left of the diagonal tile every j < i; rows past T (in the last
                 * tile) have finite P and are never written. */
                tc_reg dsa[MT][4];
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    if (!FULL && kt == qt)
                        attn_dq_dscores<true, LB>(s[i], dp[i], lbs, Lr[i], Dr[i], g.scale_log2, n * 16, k0, row[i], T,
                                                  tq);
                    else
                        attn_dq_dscores<false, LB>(s[i], dp[i], lbs, Lr[i], Dr[i], g.scale_log2, n * 16, k0, row[i],
                                                   T, tq);
                    tc_acc_to_a(dsa[i], dp[i]);
                }
                clk.template lap<AT_ELEM>();
                attn_dq_products<NF, MT, LD, FULL>(dqa, dsa, Ks, n, k0 + n * 16, qw0, lane);
#pragma unroll
                for (int i = 0; i < MT; ++i) clk.hold(dqa[i][DP / 8 - 1][3]);
                clk.template lap<AT_PROD2>();
            };
            auto strip = [&](int n, auto full) {
                float s[MT][2][4], dp[MT][2][4];
                scores(n, s, dp);
                clk.hold(s[MT - 1][1][3]), clk.hold(dp[MT - 1][1][3]);
                clk.template lap<AT_PROD1>();
                rest(n, s, dp, full);
            };
            if (!SP && kt < qt) {
                /* A key tile left of the diagonal one (every step but the
                 * last): all four strips have work and none masks, so they
                 * run with no per-strip branches, as in the dK/dV kernel,
                 * unrolled by two (by four the two m-tiles' registers
                 * spill).  The same products in the same order. */
#pragma unroll 2
                for (int n = 0; n < ATTN_BK / 16; ++n) strip(n, std::true_type());
            } else if constexpr (SP) {
                attn_strips_piped<float[MT][2][4]>(0, nhi, scores, [&](int n, float(&s)[MT][2][4],
                                                                       float(&dp)[MT][2][4]) {
                    rest(n, s, dp, std::false_type());
                });
            } else {
#pragma unroll 1
                for (int n = 0; n <= nhi; ++n) strip(n, std::false_type());
            }
            clk.tile();
        }
        if (kt < qt) __syncthreads(); /* done with buffer cur: tile kt + 2 goes there */
        clk.template lap<AT_BARRIER>();
    }

    if (active) attn_dq_store<DP, MT>(dq, twq, dqa, row0, ho, qw0, g, lane);
    clk.finish(trace, warp, lane);
}

/* dQ from the stored dS (SG_ATTN_DQ=stored): per query tile, the key
 * tiles at or left of the diagonal bring their K tile and the dS tile the
 * dkdv kernel wrote, by cp.async into two buffers, and each warp adds
 * dQ_w += dS_w K_n, dS_w read transposed from the key-major tile.  The
 * m-tiles, strips, skips and order of products are the recomputing
 * kernel's, so the same dS gives the same bits.  A buffer is a K tile,
 * then a dS tile (row-major by key: attn_cp_ds_tile undoes the stored
 * blocks). */
template <int DP>
struct DqStoredLayout {
    static constexpr int LDH = DP + 8;      /* K rows (bf16) */
    static constexpr int LDS = ATTN_BQ + 8; /* dS rows (bf16): ldmatrix conflict-free */
    static constexpr size_t S = attn_align(sizeof(sg_bf16) * ATTN_BK * LDH);
    static constexpr size_t BUF = attn_align(S + sizeof(sg_bf16) * ATTN_BK * LDS);
    static constexpr size_t BYTES = 2 * BUF;
};

template <int DP, int MT>
static __global__ void __launch_bounds__(DqMma<MT>::NT)
    attn_bwd_dq_stored_kernel(float *__restrict__ dq, const AttnOp ko,
                              const sg_bf16 *__restrict__ ds, sg_bf16 *__restrict__ twq, AttnGeom g) {
    typedef DqStoredLayout<DP> L;
    constexpr int NF = DP / 16, NT = DqMma<MT>::NT, RW = 16 * MT, TILE = ATTN_BK * ATTN_BQ;
    extern __shared__ __align__(128) unsigned char attn_smem[];

    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y, T = g.T, q0 = qt * ATTN_BQ;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const sg_bf16 *kh = ko.at(b, h);
    const sg_bf16 *dsq = attn_ds_tile(ds, bh, T, 0, qt); /* tiles kt = 0 .. qt follow */
    const int qw0 = q0 + warp * RW, wlast = qw0 + RW - 1;
    const bool active = qw0 < T; /* warp-uniform */

    attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(reinterpret_cast<sg_bf16 *>(attn_smem), kh, ko.rs, 0, T);
    attn_cp_ds_tile<L::LDS, NT>(reinterpret_cast<sg_bf16 *>(attn_smem + L::S), dsq);
    tc_cp_commit();
    float dqa[MT][DP / 8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int n = 0; n < DP / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) dqa[i][n][e] = 0.f;

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * ATTN_BK, cur = kt & 1;
        if (kt < qt) { /* fetch the next tiles while these are used */
            unsigned char *nb = attn_smem + (cur ^ 1) * L::BUF;
            attn_cp_rows<ATTN_BK, DP, L::LDH, NT>(reinterpret_cast<sg_bf16 *>(nb), kh, ko.rs, k0 + ATTN_BK, T);
            attn_cp_ds_tile<L::LDS, NT>(reinterpret_cast<sg_bf16 *>(nb + L::S), dsq + (long)(kt + 1) * TILE);
            tc_cp_commit();
            tc_cp_wait<1>();
        } else {
            tc_cp_wait<0>();
        }
        __syncthreads(); /* every thread's copies of tile kt are visible */
        const sg_bf16 *Ks = reinterpret_cast<const sg_bf16 *>(attn_smem + cur * L::BUF);
        const sg_bf16 *Ss = reinterpret_cast<const sg_bf16 *>(attn_smem + cur * L::BUF + L::S);

        /* strip n: dQ += dS K; full: a key tile left of the diagonal one */
        auto strip = [&](int n, auto full) {
            tc_reg dsa[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i) tc_load_at<L::LDS>(dsa[i], Ss, warp * RW + 16 * i, n * 16, lane);
            attn_dq_products<NF, MT, L::LDH, decltype(full)::value>(dqa, dsa, Ks, n, k0 + n * 16, qw0, lane);
        };
        if (active && kt < qt) {
            /* every strip, unrolled, with no branch between the products,
             * as in the recomputing kernel */
#pragma unroll
            for (int n = 0; n < ATTN_BK / 16; ++n) strip(n, std::true_type());
        } else if (active) {
#pragma unroll 1
            for (int n = 0; n < ATTN_BK / 16; ++n) {
                const int kn0 = k0 + n * 16;
                if (kn0 > wlast || kn0 >= T) break;
                strip(n, std::false_type());
            }
        }
        if (kt < qt) __syncthreads(); /* done with buffer cur: tile kt + 2 goes there */
    }

    if (active) attn_dq_store<DP, MT>(dq, twq, dqa, row0, ho, qw0, g, lane);
}

template <int DP>
static void attn_bwd_mma_launch(real *dq, real *dk, real *dv, real *dlogbias, const AttnOp *op, const real *lse,
                                const float *D, const AttnArgs *a, const AttnGeom &g, sg_bf16 *twin, sg_bf16 *ds,
                                const AttnGateEpi *gate) {
    /* the twin's parts at dk's and dv's offsets from dq; dv apart (a value
     * gate's input gradient) has no part in it and is always stored */
    const long C = (long)a->H * a->d;
    sg_bf16 *tk = twin ? twin + C : nullptr, *tv = twin && dv == dq + 2 * C ? twin + 2 * C : nullptr;
    const size_t smem = BwdMmaLayout<DP>::BYTES;
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + ATTN_BQ - 1) / ATTN_BQ));
    const bool lb = a->logbias != nullptr;
    if (gate && lb) sg_cuda_fail(__FILE__, __LINE__, "op_attention_gate_bwd", "a value gate with a log-bias");
    const long blocks = (long)grid.x * grid.y * grid.z;
    KtraceRec *trace = nullptr; /* the traced kernels' records (attention_trace.h) */
    auto mma_dkdv_ds = [&](auto sp, auto tr, auto dsf) {
        constexpr bool SP = decltype(sp)::value, TR = decltype(tr)::value, DS = decltype(dsf)::value;
        return lb                        ? attn_bwd_dkdv_mma_kernel<DP, true, 0, SP, DS, TR>
               : !gate                   ? attn_bwd_dkdv_mma_kernel<DP, false, 0, SP, DS, TR>
               : gate->kind == GATE_NORM ? attn_bwd_dkdv_mma_kernel<DP, false, GATE_NORM, SP, DS, TR>
                                         : attn_bwd_dkdv_mma_kernel<DP, false, GATE_PROJ, SP, DS, TR>;
    };
    auto mma_dkdv = [&](auto sp, auto tr) {
        return ds ? mma_dkdv_ds(sp, tr, std::true_type{}) : mma_dkdv_ds(sp, tr, std::false_type{});
    };
    /* the pipelined strips at head dim 64, the tiers' (at 128 the second
     * strip's registers would spill) */
    const bool sp = DP == 64 && attn_bwd_pipe();
    auto dkdv = mma_dkdv(std::false_type{}, std::false_type{});
    if constexpr (DP == 64)
        if (sp) dkdv = mma_dkdv(std::true_type{}, std::false_type{});
    bool wgmma = false;
    if constexpr (DP == 64)
        if (attn_wgmma_ok()) {
            auto pick = [&](auto pipe) {
                constexpr bool P = decltype(pipe)::value;
                dkdv = lb                        ? attn_bwd_dkdv_wgmma_kernel<DP, true, 0, P>
                       : !gate                   ? attn_bwd_dkdv_wgmma_kernel<DP, false, 0, P>
                       : gate->kind == GATE_NORM ? attn_bwd_dkdv_wgmma_kernel<DP, false, GATE_NORM, P>
                                                 : attn_bwd_dkdv_wgmma_kernel<DP, false, GATE_PROJ, P>;
            };
            if (attn_wgmma_mode() == 2) pick(std::true_type{});
            else pick(std::false_type{});
            wgmma = true;
        }
    bool dkdv_sp = sp && !wgmma;
    if constexpr (DP >= 64)
        if (!wgmma && (trace = attn_trace_slot(ATTN_TRACE_DKDV, blocks, ATTN_NT, "attn_bwd_dkdv_mma")))
            dkdv = mma_dkdv(std::false_type{}, std::true_type{}), dkdv_sp = false;
    attn_smem_attr(dkdv, smem);
    const AttnGateEpi epi = gate ? *gate : AttnGateEpi{};
    dkdv<<<grid, ATTN_NT, smem, sg_stream()>>>(dk, dv, dlogbias, op[0], op[1], op[2], op[3], lse, D, a->logbias, tk,
                                               tv, ds, g, epi, trace);
    CUDA_LAUNCHED();
    if (wgmma) attn_wgmma_count(1);
    g_bwd_piped += dkdv_sp;
    attn_by_mtiles<DP>([&](auto mt) {
        constexpr int MT = decltype(mt)::value;
        if (ds) {
            const size_t sbytes = DqStoredLayout<DP>::BYTES;
            attn_smem_attr(attn_bwd_dq_stored_kernel<DP, MT>, sbytes);
            attn_bwd_dq_stored_kernel<DP, MT><<<grid, DqMma<MT>::NT, sbytes, sg_stream()>>>(dq, op[1], ds, twin, g);
            CUDA_LAUNCHED();
            g_dq_stored++;
            return;
        }
        auto dqk = lb ? attn_bwd_dq_mma_kernel<DP, MT, true, false, false>
                      : attn_bwd_dq_mma_kernel<DP, MT, false, false, false>;
        if constexpr (DP == 64)
            if (sp)
                dqk = lb ? attn_bwd_dq_mma_kernel<DP, MT, true, true, false>
                         : attn_bwd_dq_mma_kernel<DP, MT, false, true, false>;
        KtraceRec *tq = nullptr;
        bool dq_sp = sp;
        if constexpr (DP >= 64)
            if ((tq = attn_trace_slot(ATTN_TRACE_DQ, blocks, DqMma<MT>::NT,
                                      MT == 2 ? "attn_bwd_dq_mma (2 m-tiles a warp)" : "attn_bwd_dq_mma (1 m-tile a warp)")))
                dqk = lb ? attn_bwd_dq_mma_kernel<DP, MT, true, false, true>
                         : attn_bwd_dq_mma_kernel<DP, MT, false, false, true>,
                dq_sp = false;
        attn_smem_attr(dqk, smem);
        dqk<<<grid, DqMma<MT>::NT, smem, sg_stream()>>>(dq, op[0], op[1], op[2], op[3], lse, D, a->logbias, twin, g,
                                                        tq);
        CUDA_LAUNCHED();
        g_bwd_piped += dq_sp;
    });
}

void attn_bwd_ops(AttnOp op[4], const real *dout, const real *q, const real *k, const real *v, const AttnArgs *a,
                  const AttnGeom &g, sg_bf16 *pack, const sg_bf16 *kept) {
    /* Q, K, V read in place as the forward read them (the same test on
     * the same tensors), else from the forward's kept packs or packed here;
     * dO packed (it is fp32) */
    const float *t[4] = {q, k, v, dout};
    const int st[4] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride};
    const int inplace = attn_inplace_ops(op, 4, t, st, g);
    if (kept) {
        if (!(inplace >> 3 & 1)) {
            const AttnPackSrc src = {{dout, nullptr, nullptr, nullptr}, {a->o_stride, 0, 0, 0}, g.vec};
            attn_pack(pack, 1, src, g);
            op[3] = attn_packed_op(pack, 0, g);
        }
        for (int i = 0; i < 3; i++)
            if (!(inplace >> i & 1)) op[i] = attn_packed_op(kept, i, g);
    } else if (inplace != 15) {
        const AttnPackSrc src = {{q, k, v, dout}, {a->q_stride, a->k_stride, a->v_stride, a->o_stride}, g.vec};
        attn_pack(pack, 4, src, g, inplace);
        for (int i = 0; i < 4; i++)
            if (!(inplace >> i & 1)) op[i] = attn_packed_op(pack, i, g);
    }
}

void attn_bwd_mma_ops(real *dq, real *dk, real *dv, real *dlogbias, const AttnOp op[4], const real *lse,
                      const float *D, const AttnArgs *a, const AttnGeom &g, sg_bf16 *twin, sg_bf16 *ds,
                      const AttnGateEpi *gate) {
    attn_by_dpad(a->d, [&](auto dp) {
        attn_bwd_mma_launch<decltype(dp)::value>(dq, dk, dv, dlogbias, op, lse, D, a, g, twin, ds, gate);
    });
}

void attn_bwd_mma(real *dq, real *dk, real *dv, real *dlogbias, const real *dout, const real *q, const real *k,
                  const real *v, const real *lse, const float *D, const AttnArgs *a, const AttnGeom &g,
                  sg_bf16 *pack, const sg_bf16 *kept, sg_bf16 *twin, sg_bf16 *ds, const AttnGateEpi *gate) {
    AttnOp op[4];
    attn_bwd_ops(op, dout, q, k, v, a, g, pack, kept);
    attn_bwd_mma_ops(dq, dk, dv, dlogbias, op, lse, D, a, g, twin, ds, gate);
}
