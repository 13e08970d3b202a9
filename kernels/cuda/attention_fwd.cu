/* Causal attention forward on the GPU, fused and streaming, for every arm.
 *
 * Per head h (c_h = the phantom's logit: sink[h], or 0 when sink is NULL):
 *   s_ij  = q_i . k_j / sqrt(d) + lb_j                 j <= i
 *   LSE_i = log(exp(c_h) [phantom] + sum_j exp(s_ij))
 *   o_i   = sum_j exp(s_ij - LSE_i) v_j                (the phantom's value is 0)
 * the same as kernels/cpu/attention_fwd.c; see attention_cuda.h for the
 * precision (bf16 tensor-core products, fp32 statistics) and determinism.
 *
 * One block per (query tile of 64, h, b); warp w owns queries
 * q0 + 16w .. q0 + 16w + 15 and walks the key tiles 0 .. q0 (causal) with the
 * online softmax (Milakov & Gimelshein 2018; FlashAttention).  For each tile:
 *   S_w   = Q_w K^T                           (tensor cores -> fp32 in smem)
 *   m'    = max(m, max_j s_ij)                (masked: j > i or j >= T)
 *   alpha = exp(m - m'),  P = exp(s - m')
 *   l     = alpha l + sum_j P_ij,   acc = alpha acc + P V   (P V on the tensor cores)
 * and at the end o_i = acc_i / l_i, LSE_i = m_i + log l_i.  Scores are kept
 * in base 2 (s log2 e), so every exponential is one exp2: the special-
 * function unit's, denormals flushed (tc_ex2, mma_ptx.h), as in every
 * attention tile kernel.
 *
 * The phantom is the first "key" every query has seen: m starts at c_h and
 * l at exp(c_h - m) = 1, and because its value is zero it adds nothing to
 * acc.  It is thus counted in the denominator and in LSE_i (which is all the
 * backward needs to recompute P exactly) without ever being a column that
 * could be masked or padded.  Without a phantom m starts at -inf and l at 0;
 * every query sees key 0 in the first tile, so m is finite from then on.
 *
 * Nothing of size T x T exists: a block holds one 64 x 64 score tile at a
 * time.  Each block writes its own rows of o and lse, once. */
#include <string.h>

#include "attention_cuda.h"
#include "attention_tiles_env.h"

/* Shared memory of one block: the bf16 Q, K, V tiles, the bf16 P tile, an
 * fp32 work tile that holds first S and then the tile's P V (per warp: its
 * 16 rows), and the key tile's log-bias. */
template <int DP>
struct FwdLayout {
    static constexpr int LDH = DP + 8;                                /* Q/K/V rows (bf16) */
    static constexpr int LDP = ATTN_BK + 8;                           /* P rows (bf16) */
    static constexpr int LDW = (DP > ATTN_BK ? DP : ATTN_BK) + 4;     /* work rows (fp32) */
    static constexpr size_t Q = 0;
    static constexpr size_t K = attn_align(Q + sizeof(sg_bf16) * ATTN_BQ * LDH);
    static constexpr size_t V = attn_align(K + sizeof(sg_bf16) * ATTN_BK * LDH);
    static constexpr size_t P = attn_align(V + sizeof(sg_bf16) * ATTN_BK * LDH);
    static constexpr size_t W = attn_align(P + sizeof(sg_bf16) * ATTN_BQ * LDP);
    static constexpr size_t LB = attn_align(W + sizeof(float) * ATTN_BQ * LDW);
    static constexpr size_t BYTES = attn_align(LB + sizeof(float) * ATTN_BK);
};

template <int DP>
static __global__ void __launch_bounds__(ATTN_NT)
    attn_fwd_kernel(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ q,
                    const float *__restrict__ k, const float *__restrict__ v,
                    const float *__restrict__ sink, const float *__restrict__ logbias,
                    sg_bf16 *__restrict__ twin, AttnGeom g) {
    typedef FwdLayout<DP> L;
    constexpr int NF = DP / 16;      /* fragments across the head dim */
    constexpr int NKF = ATTN_BK / 16; /* fragments across a key tile */
    extern __shared__ __align__(128) unsigned char attn_smem[];
    sg_bf16 *Qs = reinterpret_cast<sg_bf16 *>(attn_smem + L::Q);
    sg_bf16 *Ks = reinterpret_cast<sg_bf16 *>(attn_smem + L::K);
    sg_bf16 *Vs = reinterpret_cast<sg_bf16 *>(attn_smem + L::V);
    float *lbs = reinterpret_cast<float *>(attn_smem + L::LB);

    /* Blocks are dispatched x fastest: the tile index is z, so the last
     * query tiles (which see the most keys) of every (b,h) go first. */
    const int qt = gridDim.z - 1 - blockIdx.z, h = blockIdx.x, b = blockIdx.y;
    const int q0 = qt * ATTN_BQ, T = g.T;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long row0 = (long)b * T, bh = (long)b * g.H + h, ho = (long)h * g.d;
    const float *qh = q + row0 * g.q_stride + ho;
    const float *kh = k + row0 * g.k_stride + ho;
    const float *vh = v + row0 * g.v_stride + ho;
    const float *lb = logbias ? logbias + bh * T : nullptr;

    sg_bf16 *Pw = reinterpret_cast<sg_bf16 *>(attn_smem + L::P) + warp * 16 * L::LDP;
    float *Ww = reinterpret_cast<float *>(attn_smem + L::W) + warp * 16 * L::LDW;
    const int wq0 = q0 + warp * 16;     /* the warp's first query */
    const int wlast = wq0 + 15;         /* ... and its last (keys beyond it are masked) */
    const bool active = wq0 < T;        /* warp-uniform */

    /* Softmax lanes: lane pair (2r, 2r+1) owns row r of the warp's strip,
     * lane parity cp the columns cp, cp + 2, ... of every tile (of S and of
     * the output accumulator). */
    const int r = lane >> 1, cp = lane & 1, i = wq0 + r;
    float m = g.phantom ? (sink ? sink[h] : 0.f) * ATTN_LOG2E : -INFINITY;
    float l = g.phantom ? 1.f : 0.f;
    float acc[DP / 2];
#pragma unroll
    for (int t = 0; t < DP / 2; ++t) acc[t] = 0.f;

    attn_load_tile<ATTN_BQ, DP, L::LDH>(Qs, qh, g.q_stride, q0, T, g.d, g.vec);
    __syncthreads();
    AttFragA qf[NF]; /* the warp's 16 queries, for the whole key loop */
#pragma unroll
    for (int kk = 0; kk < NF; ++kk)
        wmma::load_matrix_sync(qf[kk], Qs + warp * 16 * L::LDH + kk * 16, L::LDH);

    for (int kt = 0; kt <= qt; ++kt) {
        const int k0 = kt * ATTN_BK;
        attn_next_kv<DP, L::LDH>(Ks, Vs, lbs, kh, vh, lb, k0, g);
        if (!active) continue;

        /* S_w = Q_w K^T, one 16-key strip at a time; strips wholly past the
         * warp's last query (only in the diagonal tile) are masked for all of
         * its rows and are not computed: the softmax below masks them
         * without reading a value. */
#pragma unroll
        for (int n = 0; n < NKF; ++n) {
            if (k0 + n * 16 > wlast) break;
            AttFragC s;
            wmma::fill_fragment(s, 0.f);
#pragma unroll
            for (int kk = 0; kk < NF; ++kk) {
                AttFragBT kb; /* K^T: K rows read column-major */
                wmma::load_matrix_sync(kb, Ks + n * 16 * L::LDH + kk * 16, L::LDH);
                wmma::mma_sync(s, qf[kk], kb, s);
            }
            wmma::store_matrix_sync(Ww + n * 16, s, L::LDW, wmma::mem_row_major);
        }
        __syncwarp();

        /* Online softmax of row r over the tile, in base 2. */
        float x[ATTN_BK / 2];
        float mx = m;
#pragma unroll
        for (int t = 0; t < ATTN_BK / 2; ++t) {
            const int c = cp + 2 * t, j = k0 + c;
            x[t] = j <= i && j < T ? fmaf(Ww[r * L::LDW + c], g.scale_log2, lbs[c]) : -INFINITY;
            mx = fmaxf(mx, x[t]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        /* mu = the new max, or 0 while the row has seen nothing (no phantom):
         * exp2(-inf - 0) = 0 then, never exp2(-inf + inf) = NaN. */
        const float mu = mx == -INFINITY ? 0.f : mx;
        const float alpha = tc_ex2(m - mu);
        float ps = 0.f;
#pragma unroll
        for (int t = 0; t < ATTN_BK / 2; ++t) {
            const float p = tc_ex2(x[t] - mu);
            ps += p;
            Pw[r * L::LDP + cp + 2 * t] = __float2bfloat16_rn(p);
        }
        /* a + b == b + a: both lanes of the pair hold the same l */
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l = fmaf(l, alpha, ps);
        m = mx;
#pragma unroll
        for (int t = 0; t < DP / 2; ++t) acc[t] *= alpha;
        __syncwarp(); /* P written; S read (its space takes P V next) */

        /* acc += P V: the tile's product goes through the work tile, then
         * into each lane's accumulator columns.  Key strips past the warp's
         * last query have P = 0 and are skipped. */
        AttFragA pa[NKF];
#pragma unroll
        for (int kk = 0; kk < NKF; ++kk)
            if (k0 + kk * 16 <= wlast) wmma::load_matrix_sync(pa[kk], Pw + kk * 16, L::LDP);
#pragma unroll
        for (int n = 0; n < NF; ++n) {
            AttFragC o;
            wmma::fill_fragment(o, 0.f);
#pragma unroll
            for (int kk = 0; kk < NKF; ++kk) {
                if (k0 + kk * 16 > wlast) break;
                AttFragB vb;
                wmma::load_matrix_sync(vb, Vs + kk * 16 * L::LDH + n * 16, L::LDH);
                wmma::mma_sync(o, pa[kk], vb, o);
            }
            wmma::store_matrix_sync(Ww + n * 16, o, L::LDW, wmma::mem_row_major);
        }
        __syncwarp();
#pragma unroll
        for (int t = 0; t < DP / 2; ++t) acc[t] += Ww[r * L::LDW + cp + 2 * t];
        /* the loop-top barrier orders these reads before the next S store */
    }

    if (active) {
        /* o_i = acc_i / l_i, staged through the work tile so that the warp
         * writes whole rows; each lane rewrites only the elements it read. */
        const float inv = 1.f / l;
#pragma unroll
        for (int t = 0; t < DP / 2; ++t) Ww[r * L::LDW + cp + 2 * t] = acc[t] * inv;
        __syncwarp();
        float *oh = out + row0 * g.o_stride + ho;
        sg_bf16 *th = twin ? twin + row0 * g.o_stride + ho : nullptr;
        for (int idx = lane; idx < 16 * DP; idx += 32) {
            const int rr = idx / DP, c = idx % DP, ii = wq0 + rr;
            if (ii < T && c < g.d) {
                const float x = Ww[rr * L::LDW + c];
                oh[(long)ii * g.o_stride + c] = x;
                if (th) th[(long)ii * g.o_stride + c] = sg_cast_bf16(x);
            }
        }
        /* LSE_i = m_i + log l_i, back in natural log */
        if (cp == 0 && i < T) lse[bh * T + i] = (m + log2f(l)) * ATTN_LN2;
    }
}

template <int DP>
static void attn_fwd_launch(real *out, real *lse, const real *q, const real *k, const real *v,
                            sg_bf16 *twin, const AttnArgs *a, const AttnGeom &g) {
    const size_t smem = FwdLayout<DP>::BYTES;
    attn_smem_attr(attn_fwd_kernel<DP>, smem);
    const dim3 grid((unsigned)a->H, (unsigned)a->B, (unsigned)((a->T + ATTN_BQ - 1) / ATTN_BQ));
    attn_fwd_kernel<DP><<<grid, ATTN_NT, smem, sg_stream()>>>(out, lse, q, k, v, a->sink,
                                                              a->logbias, twin, g);
    CUDA_LAUNCHED();
}

/* 16 or 32, 0 unset, -1 anything else */
static int attn_rows_env(void) {
    const char *e = getenv("SG_ATTN_WARP_ROWS");
    if (!e || !*e) return 0;
    return !strcmp(e, "16") ? 16 : !strcmp(e, "32") ? 32 : -1;
}
#define ATTN_ROWS_ERROR "SG_ATTN_WARP_ROWS must be 16 or 32 (the rows a warp owns in the mma forward and dQ kernels)"

/* 1 stored, 0 recompute or unset, -1 anything else */
static int attn_dq_env(void) {
    const char *e = getenv("SG_ATTN_DQ");
    if (!e || !*e || !strcmp(e, "recompute")) return 0;
    return !strcmp(e, "stored") ? 1 : -1;
}
#define ATTN_DQ_ERROR "SG_ATTN_DQ must be \"recompute\" (the default) or \"stored\" (how the mma backward gets dQ)"

/* 1 on, 0 off or unset, -1 anything else */
static int attn_bwd_pipe_env(void) {
    const char *e = getenv("SG_ATTN_BWD_PIPE");
    if (!e || !*e || !strcmp(e, "0")) return 0;
    return !strcmp(e, "1") ? 1 : -1;
}
#define ATTN_BWD_PIPE_ERROR                                                                                     \
    "SG_ATTN_BWD_PIPE must be 0 (the default) or 1 (the mma backward kernels issue a strip's score products " \
    "before the previous strip's exponentials)"

/* 1 or 2 on, 0 off or unset, -1 anything else */
static int attn_wgmma_env(void) {
    const char *e = getenv("SG_ATTN_WGMMA");
    if (!e || !*e || !strcmp(e, "0")) return 0;
    return !strcmp(e, "1") ? 1 : !strcmp(e, "2") ? 2 : -1;
}
#define ATTN_WGMMA_ERROR                                                                                        \
    "SG_ATTN_WGMMA must be 0 (the default), 1 (the mma tiles' forward and dK/dV on Hopper's warpgroup products) " \
    "or 2 (the same, pipelined: their softmax work overlapping their products)"

/* 0 .. 3, 0 unset, -1 anything else */
static int attn_swap_env(void) {
    const char *e = getenv("SG_WGMMA_SWAP");
    if (!e || !*e) return 0;
    return e[1] == 0 && e[0] >= '0' && e[0] <= '3' ? e[0] - '0' : -1;
}
#define ATTN_SWAP_ERROR                                                                                        \
    "SG_WGMMA_SWAP must be 0 to 3 (bit 0: K-major, bit 1: MN-major operands of the warpgroup kernels take LBO " \
    "and SBO the other way round; tests/gpu/wgmma_probe.cu)"

/* A bad SG_ATTN, SG_ATTN_WARP_ROWS, SG_ATTN_DQ, SG_ATTN_BWD_PIPE, SG_ATTN_WGMMA or SG_WGMMA_SWAP stops the program as it loads, with
 * the usage status, before a run directory exists; attn_use_mma,
 * attn_warp_rows and attn_dq_stored catch one set later. */
__attribute__((constructor)) static void attn_check_env(void) {
    if (sg_attn_tiles_env() < 0) {
        fprintf(stderr, "%s: " ATTN_TILES_ERROR "\n", getenv("SG_ATTN"));
        exit(2);
    }
    if (attn_rows_env() < 0) {
        fprintf(stderr, "%s: " ATTN_ROWS_ERROR "\n", getenv("SG_ATTN_WARP_ROWS"));
        exit(2);
    }
    if (attn_dq_env() < 0) {
        fprintf(stderr, "%s: " ATTN_DQ_ERROR "\n", getenv("SG_ATTN_DQ"));
        exit(2);
    }
    if (attn_wgmma_env() < 0) {
        fprintf(stderr, "%s: " ATTN_WGMMA_ERROR "\n", getenv("SG_ATTN_WGMMA"));
        exit(2);
    }
    if (attn_bwd_pipe_env() < 0) {
        fprintf(stderr, "%s: " ATTN_BWD_PIPE_ERROR "\n", getenv("SG_ATTN_BWD_PIPE"));
        exit(2);
    }
    if (attn_swap_env() < 0) {
        fprintf(stderr, "%s: " ATTN_SWAP_ERROR "\n", getenv("SG_WGMMA_SWAP"));
        exit(2);
    }
}

int attn_wgmma_swap(void) {
    const int r = attn_swap_env();
    if (r < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_WGMMA_SWAP", ATTN_SWAP_ERROR);
    return r;
}

/* SG_ATTN_WGMMA=1 or 2 and a GPU of compute capability 9.0, the only one
 * with wgmma (kernels built for sm_90a); elsewhere the request is noted once
 * and the mma tiles run. */
bool attn_wgmma_ok(void) {
    const int e = attn_wgmma_env();
    if (e < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_ATTN_WGMMA", ATTN_WGMMA_ERROR);
    if (e == 0) return false;
    static int hopper = -1;
    if (hopper < 0) {
        int dev = 0, major = 0, minor = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        hopper = major == 9 && minor == 0;
        if (!hopper)
            fprintf(stderr, "sg attention: SG_ATTN_WGMMA=%d needs an sm_90 GPU (this is sm_%d%d); the mma tiles run\n",
                    e, major, minor);
    }
    return hopper == 1;
}

int attn_wgmma_mode(void) { return attn_wgmma_ok() ? attn_wgmma_env() : 0; }

static long g_wgmma_calls;
void attn_wgmma_count(int n) { g_wgmma_calls += n; }
/* the attention kernels launched on the warpgroup products (tests) */
extern "C" long sg_attn_wgmma_calls(void) { return g_wgmma_calls; }

static int attn_tiles(void) {
    const int t = sg_attn_tiles_env();
    if (t < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_ATTN", ATTN_TILES_ERROR);
    return t;
}
bool attn_use_mma(void) { return attn_tiles() >= 1; }
bool attn_use_cudnn(void) { return attn_tiles() == 2; }

bool attn_bwd_pipe(void) {
    const int r = attn_bwd_pipe_env();
    if (r < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_ATTN_BWD_PIPE", ATTN_BWD_PIPE_ERROR);
    return r == 1;
}

bool attn_dq_stored(void) {
    const int r = attn_dq_env();
    if (r < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_ATTN_DQ", ATTN_DQ_ERROR);
    return r == 1;
}

extern "C" void sg_attn_need_fp32(const char *op, const real *q, const real *k, const real *v) {
    if (!sg_bf16_inside(q) && !sg_bf16_inside(k) && !sg_bf16_inside(v)) return;
    sg_cuda_fail(__FILE__, __LINE__, op,
                 "an operand it reads in fp32 was promised as an attention operand (op_attention_operand) and "
                 "holds bf16 values, which only the mma tiles read: the promise was broken");
}

int attn_warp_rows(void) {
    const int r = attn_rows_env();
    if (r < 0) sg_cuda_fail(__FILE__, __LINE__, "SG_ATTN_WARP_ROWS", ATTN_ROWS_ERROR);
    return r;
}

extern "C" void op_attention_fwd(real *out, real *lse, const real *q, const real *k,
                                 const real *v, const AttnArgs *a) {
    if (a->B <= 0 || a->T <= 0 || a->H <= 0 || a->d <= 0) return;
    if (a->d > ATTN_MAX_D)
        sg_cuda_fail(__FILE__, __LINE__, "op_attention_fwd", "head dim > 128 is not supported");
    const bool vec = attn_aligned16(q) && attn_aligned16(k) && attn_aligned16(v);
    const AttnGeom g = attn_geom(a, vec);
    /* The output is the next matmul's input (the attention projection):
     * when its rows are whole ([B T, H d], nothing between the heads), the
     * kernels also write its bf16 twin, which that matmul then reads
     * instead of casting the fp32 output (cuda_common.h). */
    const long n = (long)a->B * a->T * a->H * a->d;
    sg_bf16 *twin = a->o_stride == a->H * a->d ? sg_twin_begin(out, n) : nullptr;
    if (attn_use_mma()) {
        /* read in place where they are stored in bf16 (AttnOp), the rest
         * packed into a buffer kept for the backward (attention_pack.cu) */
        AttnOp op[3];
        const float *t[3] = {q, k, v};
        const int st[3] = {a->q_stride, a->k_stride, a->v_stride};
        int inplace = attn_inplace_ops(op, 3, t, st, g);
        sg_bf16 *pack = nullptr;
        if (inplace != 7) pack = sg_keep_copies() ? attn_pack_keep(q, k, v, a, g) : nullptr;
        if (!pack) {
            attn_pack_drop(q, k, v, a);
            if (inplace != 7) pack = (sg_bf16 *)sg_scratch(SCRATCH_MISC, 3 * attn_pack_elems(g) * sizeof(sg_bf16));
        }
        bool done = false;
        if (attn_use_cudnn()) {
            inplace = attn_fwd_ops(op, inplace, pack, q, k, v, a, g);
            done = attn_cudnn_fwd(out, lse, a, g, op, twin);
        }
        if (!done) attn_fwd_mma(out, lse, q, k, v, a, g, op, inplace, pack, twin);
    } else {
        sg_attn_need_fp32("op_attention_fwd", q, k, v);
        attn_pack_drop(q, k, v, a); /* a later mma backward must not take an older forward's */
        attn_by_dpad(a->d, [&](auto dp) { attn_fwd_launch<decltype(dp)::value>(out, lse, q, k, v, twin, a, g); });
    }
    if (twin) sg_twin_written(out, n);
}
