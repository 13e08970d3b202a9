/* Causal attention backward on the GPU, fused, recomputing the probabilities
 * from the saved LSE (no T x T buffer).  With p_ij = exp(s_ij - LSE_i),
 * s_ij = q_i . k_j / sqrt(d) + lb_j (j <= i):
 *   D_i   = dO_i . O_i                 (= sum_j p_ij dO_i . v_j)
 *   dp_ij = dO_i . v_j
 *   dS_ij = p_ij (dp_ij - D_i)         (softmax backward)
 *   dq_i  = sum_j dS_ij k_j / sqrt(d)
 *   dk_j  = sum_i dS_ij q_i / sqrt(d)
 *   dv_j  = sum_i p_ij dO_i
 *   dlb_j = sum_i dS_ij                (column sum: lb_j enters every s_ij)
 *   dc_h  = -sum_{b,i} exp(c_h - LSE_i) D_i
 * the same as kernels/cpu/attention_bwd.c; see attention_cuda.h for the
 * precision and determinism.
 *
 * Why P can be recomputed from LSE alone: the forward's LSE_i already holds
 * the phantom's exp(c_h) in its sum, so exp(s_ij - LSE_i) is the exact
 * probability of key j with the phantom present, and no running max or sum
 * has to be saved.  The phantom is one more softmax column, with logit c_h
 * and value 0: its dp is 0, so its dS is p_i0 (0 - D_i) = -exp(c_h - LSE_i)
 * D_i, which summed over the rows of every sequence is dc_h; and D_i needs no
 * phantom term, since the phantom's zero value adds nothing to O_i.
 *
 * Four kernels, in stream order:
 *   1. pre:   D_i for every row (fp32, from the bf16-rounded dO that the
 *             tile products use), and per (b, h, 64-row chunk) the partial
 *             sum of exp(c_h - LSE_i) D_i (double) in a fixed scratch layout.
 *   2. dkdv:  one block per (key tile, h, b).  It owns keys k0..k0+63 and
 *             walks the query tiles at or below the diagonal, accumulating
 *             dK, dV in tensor-core fragments and the column sums of dS
 *             (dlogbias) in registers; each is written once at the end.
 *   3. dq:    one block per (query tile, h, b), walking key tiles 0..q0,
 *             accumulating dQ.  (S and dP are recomputed here rather than
 *             shared with dkdv: that costs two extra tile products but no
 *             atomics.)
 *   4. dsink: dsink[h] += the partials of head h, summed in (b, chunk) order.
 * Every output element has one owner and every sum a fixed order: results
 * are bitwise reproducible, with no atomics. */
#include "attention_cuda.h"

static constexpr int PRE_ROWS = 64;  /* rows per pre block (one dsink partial) */
static constexpr int PRE_NT = 256;   /* 8 warps, PRE_ROWS / 8 rows each */

/* ---- 1. D_i and the dsink partials -------------------------------------- */

template <typename TD>
static __global__ void __launch_bounds__(PRE_NT)
    attn_bwd_pre_kernel(float *__restrict__ D, double *__restrict__ dc_part,
                        const TD *__restrict__ dout, const float *__restrict__ out,
                        const float *__restrict__ lse, const float *__restrict__ sink,
                        AttnGeom g, int want_dc) {
    constexpr int NW = PRE_NT / 32;
    __shared__ double wsum[NW];
    const int chunk = blockIdx.x, bh = blockIdx.y, b = bh / g.H, h = bh % g.H;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, T = g.T;
    const float c = want_dc ? sink[h] : 0.f;
    double part = 0.0; /* this warp's rows, ascending (held by lane 0) */
    /* Every load of the warp's rows first, then the sums: the rows' global
     * reads are in flight together instead of one row's latency at a time
     * (each row's sum waits on its loads, and its shuffles on the sum).
     * The arithmetic is the loop's it replaced, term by term. */
    constexpr int RW = PRE_ROWS / NW, EL = ATTN_MAX_D / 32; /* rows a warp; elements a lane */
    float x[RW][EL], y[RW][EL];
#pragma unroll
    for (int u = 0; u < RW; ++u) {
        const int i = chunk * PRE_ROWS + warp + NW * u;
        const long row = ((long)b * T + (i < T ? i : 0)) * g.o_stride + (long)h * g.d;
#pragma unroll
        for (int k = 0; k < EL; ++k) {
            const int e = lane + 32 * k;
            const bool in = i < T && e < g.d;
            /* dO is rounded to bf16 as in the tile products (O already
             * comes from them): then D_i = sum_j P_ij dP_ij for the dP
             * those products form, and sum_j dS_ij = 0 (no phantom) holds
             * to fp32 rounding, as in exact arithmetic.  With fp32 dO here,
             * dS would carry dO's rounding (~2^-9 |dO| |v|) as noise, even
             * where it is exactly 0 (T = 1, or row 0 without a phantom).  A
             * dO stored in bf16 (ops.h, op_attention_operand) rounds to
             * itself. */
            x[u][k] = in ? __bfloat162float(__float2bfloat16_rn(ld1(dout, row + e))) : 0.f;
            y[u][k] = in ? out[row + e] : 0.f;
        }
    }
#pragma unroll
    for (int u = 0; u < RW; ++u) {
        const int i = chunk * PRE_ROWS + warp + NW * u;
        if (i >= T) break; /* warp-uniform */
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < EL; ++k)
            if (lane + 32 * k < g.d) acc = fmaf(x[u][k], y[u][k], acc);
        /* butterfly: every lane ends with the same bits */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) {
            D[(long)bh * T + i] = acc;
            if (want_dc) part += (double)expf(c - lse[(long)bh * T + i]) * (double)acc;
        }
    }
    if (lane == 0) wsum[warp] = part;
    __syncthreads();
    if (want_dc && threadIdx.x == 0) {
        double s = 0.0;
        for (int w = 0; w < NW; ++w) s += wsum[w];
        dc_part[(long)bh * gridDim.x + chunk] = -s;
    }
}

/* ---- 4. dsink ------------------------------------------------------------ */

/* dsink[h] += the partials of head h, added in (b, chunk) order by one
 * thread.  A block per head: its threads first bring DSINK_BUF partials at
 * a time into shared memory together, so that the adder waits on shared
 * memory, not on one global read after another (B nchunk of them, 128 at
 * the 124M tier's micro-batch); the order of the additions, so their bits,
 * is that of one thread reading them in turn. */
static constexpr int DSINK_NT = 256, DSINK_BUF = 1024;

static __global__ void __launch_bounds__(DSINK_NT)
    attn_bwd_dsink_kernel(float *__restrict__ dsink, const double *__restrict__ dc_part, int B, int H, int nchunk) {
    __shared__ double buf[DSINK_BUF];
    const int h = blockIdx.x;
    const long n = (long)B * nchunk;
    double s = 0.0;
    for (long base = 0; base < n; base += DSINK_BUF) {
        const int m = n - base < DSINK_BUF ? (int)(n - base) : DSINK_BUF;
        for (int i = threadIdx.x; i < m; i += DSINK_NT) {
            const long k = base + i, b = k / nchunk, ch = k % nchunk;
            buf[i] = dc_part[(b * H + h) * nchunk + ch];
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (int i = 0; i < m; ++i) s += buf[i];
        __syncthreads(); /* buf is read before the next partials overwrite it */
    }
    if (threadIdx.x == 0) dsink[h] += (float)s;
}

/* ---- 2, 3. the tile kernels ---------------------------------------------- */

/* Shared memory of a dkdv or dq block: bf16 K, V, Q, dO tiles; per warp a
 * 16 x 16 strip of S and dP (fp32, as the tensor cores leave them) and of P
 * and dS (bf16, as the next product reads them); LSE (base 2), D and the key
 * tile's log-bias (base 2).  At the end the tile region [0, WARP) is reused
 * to stage the fp32 results (16 x DP per warp) so that rows are written
 * whole. */
template <int DP>
struct BwdLayout {
    static constexpr int LDH = DP + 8; /* tile rows (bf16) */
    static constexpr int LDS = 16 + 4; /* S, dP strips (fp32) */
    static constexpr int LDB = 16 + 8; /* P, dS strips (bf16) */
    static constexpr int LDST = DP + 4; /* staging rows (fp32) */
    static constexpr size_t TILE = sizeof(sg_bf16) * ATTN_BQ * LDH;
    static constexpr size_t K = 0;
    static constexpr size_t V = attn_align(K + TILE);
    static constexpr size_t Q = attn_align(V + TILE);
    static constexpr size_t DO = attn_align(Q + TILE);
    static constexpr size_t WARP = attn_align(DO + TILE);
    static constexpr size_t W_S = 0; /* offsets within a warp's strip area */
    static constexpr size_t W_DP = attn_align(W_S + sizeof(float) * 16 * LDS);
    static constexpr size_t W_P = attn_align(W_DP + sizeof(float) * 16 * LDS);
    static constexpr size_t W_DS = attn_align(W_P + sizeof(sg_bf16) * 16 * LDB);
    static constexpr size_t W_BYTES = attn_align(W_DS + sizeof(sg_bf16) * 16 * LDB);
    static constexpr size_t LSE = attn_align(WARP + W_BYTES * (ATTN_NT / 32));
    static constexpr size_t DD = attn_align(LSE + sizeof(float) * ATTN_BQ);
    static constexpr size_t LB = attn_align(DD + sizeof(float) * ATTN_BQ);
    static constexpr size_t BYTES = attn_align(LB + sizeof(float) * ATTN_BK);
    static_assert(sizeof(float) * (ATTN_NT / 32) * 16 * LDST <= WARP, "staging fits the tiles");
};

/* Per warp, the strip pointers of BwdLayout. */
template <int DP>
struct BwdStrip {
    float *S, *dP;
    sg_bf16 *P, *dS;
    __device__ __forceinline__ BwdStrip(unsigned char *smem, int warp) {
        typedef BwdLayout<DP> L;
        unsigned char *w = smem + L::WARP + L::W_BYTES * warp;
        S = reinterpret_cast<float *>(w + L::W_S);
        dP = reinterpret_cast<float *>(w + L::W_DP);
        P = reinterpret_cast<sg_bf16 *>(w + L::W_P);
        dS = reinterpret_cast<sg_bf16 *>(w + L::W_DS);
    }
};

/* Writes a warp's 16 x DP fp32 staging strip, times mul, to rows
 * first .. first+15 (those < T) of a (b,h) slice, columns < d. */
template <int DP>
static __device__ __forceinline__ void attn_store_rows(float *__restrict__ dst, int stride,
                                                       const float *__restrict__ st, int first,
                                                       int T, int d, float mul, int lane) {
    for (int idx = lane; idx < 16 * DP; idx += 32) {
        const int rr = idx / DP, c = idx % DP, row = first + rr;
        if (row < T && c < d) dst[(long)row * stride + c] = st[rr * BwdLayout<DP>::LDST + c] * mul;
    }
}

/* dK, dV and dlogbias of one key tile.  Warp w owns keys
 * kw0 = k0 + 16w .. kw0 + 15: for each query tile at or below the diagonal
 * and each 16-query strip m that sees any of them,
 *   S, dP (16 x 16)  = Q_m K_w^T, dO_m V_w^T
 *   P  = exp(S/sqrt(d) + lb - LSE),  dS = P (dP - D)     (masked: 0)
 *   dV_w += P^T dO_m,  dK_w += dS^T Q_m,  colsum += dS
 * Lane (rp, c) = (lane >> 4, lane & 15) handles column c, rows rp, rp+2, ...
 * of each strip, so the column sums stay in registers: the lanes c and c+16
 * are combined once at the end. */
template <int DP>
static __global__ void __launch_bounds__(ATTN_NT)
    attn_bwd_dkdv_kernel(float *__restrict__ dk, float *__restrict__ dv,
                         float *__restrict__ dlogbias, const float *__restrict__ dout,
                         const float *__restrict__ q, const float *__restrict__ k,
                         const float *__restrict__ v, const float *__restrict__ lse,
                         const float *__restrict__ D, const float *__restrict__ logbias,
                         AttnGeom g) {
    typedef BwdLayout<DP> L;
    constexpr int NF = DP / 16;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    const auto [Ks, Vs, Qs, dOs, Ls, Ds, lbs] = attn_bwd_tiles<L>(attn_smem);

    const int kt = blockIdx.z, h = blockIdx.x, b = blockIdx.y, T = g.T;
    const int k0 = kt * ATTN_BK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const float *qh = q + row0 * g.q_stride + ho;
    const float *gh = dout + row0 * g.o_stride + ho;
    const float *lseh = lse + bh * T, *Dh = D + bh * T;
    const BwdStrip<DP> w(attn_smem, warp);
    const int kw0 = k0 + warp * 16;
    const bool active = kw0 < T; /* warp-uniform */
    const int c = lane & 15, rp = lane >> 4;

    attn_load_tile<ATTN_BK, DP, L::LDH>(Ks, k + row0 * g.k_stride + ho, g.k_stride, k0, T, g.d,
                                        g.vec);
    attn_load_tile<ATTN_BK, DP, L::LDH>(Vs, v + row0 * g.v_stride + ho, g.v_stride, k0, T, g.d,
                                        g.vec);
    attn_load_bias(lbs, logbias ? logbias + bh * T : nullptr, k0, T);
    /* (the barrier at the top of the query loop publishes these) */

    AttFragC dkf[NF], dvf[NF];
#pragma unroll
    for (int n = 0; n < NF; ++n) {
        wmma::fill_fragment(dkf[n], 0.f);
        wmma::fill_fragment(dvf[n], 0.f);
    }
    float colsum = 0.f;

    const int ntq = (T + ATTN_BQ - 1) / ATTN_BQ;
    for (int qt = kt; qt < ntq; ++qt) { /* query tiles at or below the diagonal */
        const int q0 = qt * ATTN_BQ;
        attn_next_qdo<DP, L::LDH>(Qs, dOs, Ls, Ds, qh, gh, lseh, Dh, q0, g);
        if (!active) continue;
        const float lbj = lbs[warp * 16 + c]; /* this lane's key's bias */

#pragma unroll 1
        for (int m = 0; m < ATTN_BQ / 16; ++m) {
            const int mi0 = q0 + m * 16;
            /* strip wholly above the diagonal (every i < every j) or past T */
            if (mi0 + 15 < kw0 || mi0 >= T) continue;
            AttFragC s, dp;
            wmma::fill_fragment(s, 0.f);
            wmma::fill_fragment(dp, 0.f);
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) {
                AttFragA a;
                AttFragBT bt;
                wmma::load_matrix_sync(a, Qs + m * 16 * L::LDH + kk * 16, L::LDH);
                wmma::load_matrix_sync(bt, Ks + warp * 16 * L::LDH + kk * 16, L::LDH);
                wmma::mma_sync(s, a, bt, s);
                wmma::load_matrix_sync(a, dOs + m * 16 * L::LDH + kk * 16, L::LDH);
                wmma::load_matrix_sync(bt, Vs + warp * 16 * L::LDH + kk * 16, L::LDH);
                wmma::mma_sync(dp, a, bt, dp);
            }
            wmma::store_matrix_sync(w.S, s, L::LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(w.dP, dp, L::LDS, wmma::mem_row_major);
            __syncwarp();
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                const int rr = rp + 2 * t, i = mi0 + rr, j = kw0 + c;
                const float p = j <= i && i < T
                                    ? tc_ex2(fmaf(w.S[rr * L::LDS + c], g.scale_log2, lbj) -
                                            Ls[m * 16 + rr])
                                    : 0.f;
                const float ds = p * (w.dP[rr * L::LDS + c] - Ds[m * 16 + rr]);
                w.P[rr * L::LDB + c] = __float2bfloat16_rn(p);
                w.dS[rr * L::LDB + c] = __float2bfloat16_rn(ds);
                colsum += ds;
            }
            __syncwarp();
            /* dV_w += P^T dO_m, dK_w += dS^T Q_m (P, dS read transposed) */
            AttFragAT pt, dst;
            wmma::load_matrix_sync(pt, w.P, L::LDB);
            wmma::load_matrix_sync(dst, w.dS, L::LDB);
#pragma unroll
            for (int n = 0; n < NF; ++n) {
                AttFragB bo, bq;
                wmma::load_matrix_sync(bo, dOs + m * 16 * L::LDH + n * 16, L::LDH);
                wmma::mma_sync(dvf[n], pt, bo, dvf[n]);
                wmma::load_matrix_sync(bq, Qs + m * 16 * L::LDH + n * 16, L::LDH);
                wmma::mma_sync(dkf[n], dst, bq, dkf[n]);
            }
            /* the next strip writes S, P only after its own __syncwarp */
        }
    }

    colsum += __shfl_xor_sync(0xffffffffu, colsum, 16); /* rows of both parities */
    __syncthreads(); /* the tiles are free: stage the results over them */
    if (!active) return;
    float *st = reinterpret_cast<float *>(attn_smem) + warp * 16 * L::LDST;
#pragma unroll
    for (int n = 0; n < NF; ++n) wmma::store_matrix_sync(st + n * 16, dvf[n], L::LDST, wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dv + row0 * g.v_stride + ho, g.v_stride, st, kw0, T, g.d, 1.f, lane);
    __syncwarp();
#pragma unroll
    for (int n = 0; n < NF; ++n) wmma::store_matrix_sync(st + n * 16, dkf[n], L::LDST, wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dk + row0 * g.k_stride + ho, g.k_stride, st, kw0, T, g.d, g.scale, lane);
    if (dlogbias && lane < 16 && kw0 + lane < T) dlogbias[bh * T + kw0 + lane] = colsum;
}

/* dQ of one query tile.  Warp w owns queries qw0 = q0 + 16w .. qw0 + 15 and
 * walks the key tiles 0 .. q0; for each 16-key strip n that any of them sees:
 *   S, dP (16 x 16) = Q_w K_n^T, dO_w V_n^T
 *   dS = P (dP - D) as in dkdv,   dQ_w += dS K_n
 * Q_w and dO_w stay in fragments for the whole loop. */
template <int DP>
static __global__ void __launch_bounds__(ATTN_NT)
    attn_bwd_dq_kernel(float *__restrict__ dq, const float *__restrict__ dout,
                       const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, const float *__restrict__ lse,
                       const float *__restrict__ D, const float *__restrict__ logbias,
                       AttnGeom g) {
    typedef BwdLayout<DP> L;
    constexpr int NF = DP / 16;
    extern __shared__ __align__(128) unsigned char attn_smem[];
    const auto [Ks, Vs, Qs, dOs, Ls, Ds, lbs] = attn_bwd_tiles<L>(attn_smem);

    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y, T = g.T;
    const int q0 = qt * ATTN_BQ;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const float *kh = k + row0 * g.k_stride + ho;
    const float *vh = v + row0 * g.v_stride + ho;
    const float *lb = logbias ? logbias + bh * T : nullptr;
    const BwdStrip<DP> w(attn_smem, warp);
    const int qw0 = q0 + warp * 16;
    const bool active = qw0 < T; /* warp-uniform */
    const int c = lane & 15, rp = lane >> 4;

    attn_next_qdo<DP, L::LDH>(Qs, dOs, Ls, Ds, q + row0 * g.q_stride + ho, dout + row0 * g.o_stride + ho,
                              lse + bh * T, D + bh * T, q0, g);
    AttFragA qf[NF], of[NF];
#pragma unroll
    for (int kk = 0; kk < NF; ++kk) {
        wmma::load_matrix_sync(qf[kk], Qs + warp * 16 * L::LDH + kk * 16, L::LDH);
        wmma::load_matrix_sync(of[kk], dOs + warp * 16 * L::LDH + kk * 16, L::LDH);
    }
    AttFragC dqf[NF];
#pragma unroll
    for (int n = 0; n < NF; ++n) wmma::fill_fragment(dqf[n], 0.f);
    /* this lane's rows' statistics (rows rp, rp+2, ... of the warp's strip) */
    float Lr[8], Dr[8];
#pragma unroll
    for (int t = 0; t < 8; ++t) {
        Lr[t] = Ls[warp * 16 + rp + 2 * t];
        Dr[t] = Ds[warp * 16 + rp + 2 * t];
    }

    for (int kt = 0; kt <= qt; ++kt) { /* key tiles at or left of the diagonal */
        const int k0 = kt * ATTN_BK;
        attn_next_kv<DP, L::LDH>(Ks, Vs, lbs, kh, vh, lb, k0, g);
        if (!active) continue;

#pragma unroll 1
        for (int n = 0; n < ATTN_BK / 16; ++n) {
            const int kn0 = k0 + n * 16;
            /* strips past the warp's last query, or past T, and all after them */
            if (kn0 > qw0 + 15 || kn0 >= T) break;
            AttFragC s, dp;
            wmma::fill_fragment(s, 0.f);
            wmma::fill_fragment(dp, 0.f);
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) {
                AttFragBT bt;
                wmma::load_matrix_sync(bt, Ks + n * 16 * L::LDH + kk * 16, L::LDH);
                wmma::mma_sync(s, qf[kk], bt, s);
                wmma::load_matrix_sync(bt, Vs + n * 16 * L::LDH + kk * 16, L::LDH);
                wmma::mma_sync(dp, of[kk], bt, dp);
            }
            wmma::store_matrix_sync(w.S, s, L::LDS, wmma::mem_row_major);
            wmma::store_matrix_sync(w.dP, dp, L::LDS, wmma::mem_row_major);
            __syncwarp();
            const float lbj = lbs[n * 16 + c];
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                const int rr = rp + 2 * t, i = qw0 + rr, j = kn0 + c;
                const float p = j <= i && i < T
                                    ? tc_ex2(fmaf(w.S[rr * L::LDS + c], g.scale_log2, lbj) - Lr[t])
                                    : 0.f;
                w.dS[rr * L::LDB + c] = __float2bfloat16_rn(p * (w.dP[rr * L::LDS + c] - Dr[t]));
            }
            __syncwarp();
            AttFragA sa;
            wmma::load_matrix_sync(sa, w.dS, L::LDB);
#pragma unroll
            for (int nd = 0; nd < NF; ++nd) {
                AttFragB kb;
                wmma::load_matrix_sync(kb, Ks + n * 16 * L::LDH + nd * 16, L::LDH);
                wmma::mma_sync(dqf[nd], sa, kb, dqf[nd]);
            }
        }
    }

    __syncthreads(); /* the tiles are free: stage the results over them */
    if (!active) return;
    float *st = reinterpret_cast<float *>(attn_smem) + warp * 16 * L::LDST;
#pragma unroll
    for (int n = 0; n < NF; ++n) wmma::store_matrix_sync(st + n * 16, dqf[n], L::LDST, wmma::mem_row_major);
    __syncwarp();
    attn_store_rows<DP>(dq + row0 * g.q_stride + ho, g.q_stride, st, qw0, T, g.d, g.scale, lane);
}

/* ---- the op --------------------------------------------------------------- */

template <int DP>
static void attn_bwd_launch(real *dq, real *dk, real *dv, real *dlogbias, const real *dout,
                            const real *q, const real *k, const real *v, const real *lse,
                            const float *D, const AttnArgs *a, const AttnGeom &g) {
    const size_t smem = BwdLayout<DP>::BYTES;
    const unsigned ntiles = (unsigned)((a->T + ATTN_BQ - 1) / ATTN_BQ);
    attn_smem_attr(attn_bwd_dkdv_kernel<DP>, smem);
    attn_smem_attr(attn_bwd_dq_kernel<DP>, smem);
    /* Grid (h, b, tile): blocks are dispatched x fastest, so the tiles with
     * the most work go first for every (b,h): key tile kt sees the query
     * tiles kt.. (low kt first), query tile qt the key tiles ..qt (the dq
     * kernel reverses z). */
    const dim3 grid((unsigned)a->H, (unsigned)a->B, ntiles);
    attn_bwd_dkdv_kernel<DP><<<grid, ATTN_NT, smem, sg_stream()>>>(dk, dv, dlogbias, dout, q, k,
                                                                   v, lse, D, a->logbias, g);
    CUDA_LAUNCHED();
    attn_bwd_dq_kernel<DP><<<grid, ATTN_NT, smem, sg_stream()>>>(dq, dout, q, k, v, lse, D,
                                                                 a->logbias, g);
    CUDA_LAUNCHED();
}

static long g_gate_fused; /* op_attention_gate_bwd calls that fused the gate */
extern "C" long sg_attn_gate_fused(void) { return g_gate_fused; }

/* op_attention_bwd, or with gate (the mma tiles, or cuDNN) op_attention_gate_bwd's
 * fused form: dv is then the gate input's gradient, the last third of the
 * [B T, 3 H d] rows dq begins, and the gate's parameter gradients are
 * added after the kernels. */
static void attn_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias, const real *dout, const real *q,
                     const real *k, const real *v, const real *out, const real *lse, const AttnArgs *a,
                     const AttnGateBwd *gate) {
    const int B = a->B, T = a->T, H = a->H;
    if (a->d > ATTN_MAX_D)
        sg_cuda_fail(__FILE__, __LINE__, "op_attention_bwd", "head dim > 128 is not supported");
    const bool vec = attn_aligned16(q) && attn_aligned16(k) && attn_aligned16(v) &&
                     attn_aligned16(dout);
    AttnGeom g = attn_geom(a, vec);
    const int want_dc = a->phantom && a->sink && dsink;

    /* scratch: D [B,H,T] fp32, the dsink partials [B,H,nchunk] double, and
     * for the mma tiles the packed Q, K, V, dO, and the stored dS when
     * SG_ATTN_DQ=stored and it fits in ATTN_DS_MAX_BYTES */
    const int nchunk = (T + PRE_ROWS - 1) / PRE_ROWS;
    const bool mma = attn_use_mma();
    const bool stored = mma && attn_dq_stored() && attn_ds_bytes(g) <= ATTN_DS_MAX_BYTES;
    /* the forward's packed Q, K, V (attention_pack.cu): then only dO is packed here */
    const sg_bf16 *kept = mma && sg_keep_copies() ? attn_pack_kept(q, k, v, a) : nullptr;
    const size_t d_bytes = attn_align(sizeof(float) * (size_t)B * H * T);
    const size_t c_bytes = attn_align(sizeof(double) * (size_t)B * H * nchunk);
    const size_t p_bytes = attn_align(mma ? (kept ? 1 : 4) * attn_pack_elems(g) * sizeof(sg_bf16) : 0);
    const size_t s_bytes = stored ? attn_ds_bytes(g) : 0;
    /* the fused gate's partials: one a block of the dkdv kernel */
    const int gnp = gate ? (gate->p->kind == GATE_NORM ? 1 : a->d + 1) : 0;
    const long gtiles = (long)B * ((T + ATTN_BK - 1) / ATTN_BK);
    const size_t g_bytes = attn_align(sizeof(double) * (size_t)gtiles * H * gnp);
    unsigned char *scratch =
        (unsigned char *)sg_scratch(SCRATCH_MISC, d_bytes + c_bytes + p_bytes + s_bytes + g_bytes);
    float *D = (float *)scratch;
    double *dc_part = (double *)(scratch + d_bytes);
    sg_bf16 *pack = mma ? (sg_bf16 *)(scratch + d_bytes + c_bytes) : nullptr;
    sg_bf16 *ds = stored ? (sg_bf16 *)(scratch + d_bytes + c_bytes + p_bytes) : nullptr;

    if (!mma) { /* the wmma tiles read fp32 */
        sg_attn_need_fp32("op_attention_bwd", q, k, v);
        sg_attn_need_fp32("op_attention_bwd", dout, nullptr, nullptr);
    }
    /* D_i = dO_i . O_i for the tile kernels, and the sink's gradient
     * partials; cuDNN forms its own D, so under it this runs only for the
     * sink's gradient, which cuDNN is not asked for (cudnn_sdpa.h) */
    const sg_bf16 *dob = sg_bf16_inside(dout);
    auto pre = [&] {
        if (dob)
            attn_bwd_pre_kernel<<<dim3((unsigned)nchunk, (unsigned)(B * H)), PRE_NT, 0, sg_stream()>>>(
                D, dc_part, dob, out, lse, a->sink, g, want_dc);
        else
            attn_bwd_pre_kernel<<<dim3((unsigned)nchunk, (unsigned)(B * H)), PRE_NT, 0, sg_stream()>>>(
                D, dc_part, dout, out, lse, a->sink, g, want_dc);
        CUDA_LAUNCHED();
    };
    const bool cudnn = mma && attn_use_cudnn();
    if (!cudnn || want_dc) pre();
    /* dq, dk and dv are the qkv matmul's dout when they are the three parts
     * of one [B T, 3 H d] row: the mma kernels then also write its bf16
     * twin (cuda_common.h).  A routing-slot gate's backward that adds into
     * dv after this op moves the issue count, and the matmul casts instead.
     * The value-slot gates write dv apart, and their backward the row's
     * last third from it. */
    const long C = (long)H * a->d;
    const bool qk = dk == dq + C && a->q_stride == 3 * C && a->k_stride == 3 * C;
    const bool whole = qk && dv == dq + 2 * C && (gate ? gate->dv_stride : a->v_stride) == 3 * C;
    AttnGateEpi epi{};
    if (gate) {
        const GateParams *p = gate->p;
        epi.kind = p->kind;
        epi.v16 = sg_bf16_inside(gate->v);
        epi.v32 = epi.v16 ? nullptr : gate->v;
        epi.v_stride = gate->v_stride;
        epi.g = gate->g;
        epi.w = p->w;
        epi.tb = p->kind == GATE_NORM ? p->tau : p->b;
        epi.beta = p->beta;
        epi.dv_stride = gate->dv_stride;
        epi.part = (double *)(scratch + d_bytes + c_bytes + p_bytes + s_bytes);
        epi.np = gnp;
    }
    const long n3 = (long)B * T * 3 * C;
    /* With dv apart (the value gates), the twin's dv part is the gate
     * backward's to write (sg_twin_partial).  A dqkv promised to matmuls
     * alone (ops.h) keeps its twin only; without a twin this call stores
     * fp32, and any twin an earlier call left is stale. */
    sg_bf16 *twin = mma && qk ? sg_twin_begin(dq, n3) : nullptr;
    if (twin) g.f32 = sg_twin_fp32(dq, n3) != nullptr;
    else if (qk) sg_twin_none(dq, n3);
    /* with a gate: fused into the mma tiles' dK/dV kernel, or, where cuDNN
     * takes the call (it cannot apply the gate), dvg written apart and the
     * gate's backward run after it as its own op */
    bool fused = false, gate_apart = false;
    if (cudnn) {
        AttnOp op[4];
        attn_bwd_ops(op, dout, q, k, v, a, g, pack, kept);
        if (attn_cudnn_bwd(dq, dk, gate ? gate->dvg : dv, out, lse, a, g, op, twin)) {
            gate_apart = gate != nullptr;
        } else {
            if (!want_dc) pre();
            attn_bwd_mma_ops(dq, dk, dv, dlogbias, op, lse, D, a, g, twin, ds, gate ? &epi : nullptr);
            fused = gate != nullptr;
        }
    } else if (mma) {
        attn_bwd_mma(dq, dk, dv, dlogbias, dout, q, k, v, lse, D, a, g, pack, kept, twin, ds, gate ? &epi : nullptr);
        fused = gate != nullptr;
    } else {
        attn_by_dpad(a->d, [&](auto dp) {
            attn_bwd_launch<decltype(dp)::value>(dq, dk, dv, dlogbias, dout, q, k, v, lse, D, a, g);
        });
    }
    if (want_dc) {
        attn_bwd_dsink_kernel<<<H, DSINK_NT, 0, sg_stream()>>>(dsink, dc_part, B, H, nchunk);
        CUDA_LAUNCHED();
    }
    if (fused) {
        sg_gate_param_reduce(gate->dtau, gate->dw, gate->db, epi.part, (int)gtiles, H, a->d, gnp,
                             gate->p->kind == GATE_NORM);
        g_gate_fused++;
    }
    if (twin && whole && !gate_apart) sg_twin_written(dq, n3);
    else if (twin) sg_twin_partial(dq, n3);
    if (gate_apart)
        op_gate_bwd(gate->dv, gate->dv_stride, gate->dtau, gate->dw, gate->db, gate->dvg, nullptr, gate->v,
                    gate->v_stride, gate->g, gate->p, B, T, H, a->d);
}

extern "C" void op_attention_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias,
                                 const real *dout, const real *q, const real *k, const real *v,
                                 const real *out, const real *lse, const AttnArgs *a) {
    if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->d <= 0) return;
    attn_bwd(dq, dk, dv, dsink, dlogbias, dout, q, k, v, out, lse, a, nullptr);
}

/* Fused (the gate's backward in the dK/dV kernel's epilogue, its dvg never
 * stored) where the mma tiles run the backward, with dq, dk and dv the
 * three parts of one [B T, 3 H d] gradient, d <= 128, no log-bias, and v's
 * rows at least H d apart; under SG_ATTN=cudnn, where cuDNN takes the call,
 * the attention's backward is cuDNN's and the gate's runs after it.  Anything
 * else runs the two ops, as the CPU does. */
extern "C" void op_attention_gate_bwd(real *dq, real *dk, real *dsink, const real *dout, const real *q,
                                      const real *k, const real *vg, const real *out, const real *lse,
                                      const AttnArgs *a, const AttnGateBwd *gb) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    if (B <= 0 || T <= 0 || H <= 0 || d <= 0) return;
    const GateParams *p = gb->p;
    if (p->slot != SLOT_VALUE || (p->kind != GATE_NORM && p->kind != GATE_PROJ))
        sg_cuda_fail(__FILE__, __LINE__, "op_attention_gate_bwd", "needs a value-slot norm or projection gate");
    const long C = (long)H * d;
    const bool tiles = attn_use_mma() && !a->logbias && d <= ATTN_MAX_D && dk == dq + C && gb->dv == dq + 2 * C &&
                       a->q_stride == 3 * C && a->k_stride == 3 * C && gb->dv_stride == 3 * C && gb->v_stride >= C;
    if (tiles) {
        attn_bwd(dq, dk, gb->dv, dsink, nullptr, dout, q, k, vg, out, lse, a, gb);
        return;
    }
    op_attention_bwd(dq, dk, gb->dvg, dsink, nullptr, dout, q, k, vg, out, lse, a);
    op_gate_bwd(gb->dv, gb->dv_stride, gb->dtau, gb->dw, gb->db, gb->dvg, nullptr, gb->v, gb->v_stride, gb->g, p, B,
                T, H, d);
}
