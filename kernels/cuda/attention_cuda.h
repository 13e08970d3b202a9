/* Private to the CUDA attention kernels (attention_fwd.cu, attention_bwd.cu):
 * tile sizes, the geometry every kernel receives, the tile loader and the
 * tensor-core fragment types.
 *
 * Precision.  Q, K, V and dO are fp32 in global memory.  Each tile is
 * rounded to bf16 (round to nearest even) when it is copied into shared
 * memory (the mma kernels: once per call, into packed copies; attn_pack
 * below), and every tile product (S = Q K^T, dP = dO V^T, O += P V,
 * dV += P^T dO, dK += dS^T Q, dQ += dS K) runs on the tensor cores through
 * wmma 16x16x16 bf16 fragments with fp32 accumulation; P and dS are rounded
 * to bf16 only as operands of the next product.  Everything else is fp32:
 * the scores after the product, the running max, the running sum and the
 * LSE, the exponentials, D_i = dO_i . O_i, the column sums of dS (dlogbias)
 * and all accumulators; the dsink partials are summed in double.  This is the
 * paper's setting (attention in bf16 under autocast, fp32 softmax
 * statistics): outputs agree with the fp32 CPU reference to ~1e-2 relative,
 * the rounding of the bf16 operands.
 *
 * Tiles.  A block of 128 threads (4 warps) takes 64 queries x 64 keys at a
 * time; warp w owns a 16-row (or 16-key) strip of the tile, so the strips
 * that are wholly above the causal diagonal are skipped warp by warp.  The
 * head dimension is padded with zeros to DP in {16, 32, 64, 128} (the
 * kernels are instantiated per DP), which covers every d <= 128; rows past
 * the end of the sequence are zero in shared memory and masked.
 *
 * Determinism.  No kernel uses atomics.  Every output element is written by
 * exactly one thread, and every sum (the tile products, the warp shuffles,
 * the per-row and per-column reductions, the dsink partials) is formed in an
 * order fixed by the launch geometry alone, so results are bitwise
 * reproducible run to run. */
#ifndef SG_ATTENTION_CUDA_H
#define SG_ATTENTION_CUDA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

/* ops.h is a C header without linkage guards: included here first, inside
 * extern "C", so that the ops defined in the .cu files get C linkage (its
 * include guard makes cuda_common.h's own #include a no-op). */
extern "C" {
#include "ops.h"
}
#include "cuda_common.h"

#include <cuda_bf16.h>
#include <mma.h>
#include <mma_ptx.h>

namespace wmma = nvcuda::wmma;
typedef __nv_bfloat16 sg_bf16;

/* Fragments of one 16x16x16 product.  A "T" fragment reads its matrix
 * transposed (col_major), which is how K^T, V^T, P^T and dS^T are taken from
 * row-major tiles without a transposition. */
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, sg_bf16, wmma::row_major> AttFragA;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, sg_bf16, wmma::col_major> AttFragAT;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, sg_bf16, wmma::row_major> AttFragB;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, sg_bf16, wmma::col_major> AttFragBT;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> AttFragC;

static constexpr int ATTN_BQ = 64;    /* queries per tile */
static constexpr int ATTN_BK = 64;    /* keys per tile (== ATTN_BQ: the diagonal tile is square) */
static constexpr int ATTN_NT = 128;   /* threads per block: 4 warps of 16 rows */
static constexpr int ATTN_MAX_D = 128;
static constexpr int ATTN_PACK_ROWS = 128; /* the largest query tile (attention_fwd_mma.cu) */
static constexpr float ATTN_LOG2E = 1.4426950408889634f;
static constexpr float ATTN_LN2 = 0.6931471805599453f;
static_assert(ATTN_BQ == ATTN_BK, "the causal tile loops assume square tiles");
static_assert(ATTN_NT == 32 * (ATTN_BQ / 16), "one warp per 16-row strip");

/* Everything a kernel needs besides the pointers, passed by value. */
struct AttnGeom {
    int B, T, H, d;
    int q_stride, k_stride, v_stride, o_stride; /* elements between rows */
    float scale;      /* 1 / sqrt(d) */
    float scale_log2; /* scale * log2(e): scores are kept in base 2 */
    int phantom;
    int vec; /* every tile source is 16-byte aligned with d, strides % 4 == 0 */
    int Tp;  /* rows of a packed (b,h) slice (attn_pack): T rounded up to ATTN_PACK_ROWS */
    int f32; /* the backward stores dq, dk, dv in fp32; 0: their twin only (sg_twin_fp32) */
    int wgswap; /* the warpgroup kernels' descriptor readings (wg_desc_core; attn_wgmma_swap) */
};

static inline int attn_dpad(int d) { return d <= 16 ? 16 : d <= 32 ? 32 : d <= 64 ? 64 : 128; }

/* f(std::integral_constant<int, DP>()) for d's padded head dim DP: the
 * kernels are instantiated per DP, and every launcher picks one this way. */
template <class F>
static inline void attn_by_dpad(int d, F &&f) {
    switch (attn_dpad(d)) {
    case 16: f(std::integral_constant<int, 16>()); break;
    case 32: f(std::integral_constant<int, 32>()); break;
    case 64: f(std::integral_constant<int, 64>()); break;
    default: f(std::integral_constant<int, 128>()); break;
    }
}

static inline bool attn_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* SG_WGMMA_SWAP (0 to 3, default 0; attention_fwd.cu): wg_desc_core's swap */
int attn_wgmma_swap(void);

static inline AttnGeom attn_geom(const AttnArgs *a, bool vec) {
    AttnGeom g;
    g.B = a->B, g.T = a->T, g.H = a->H, g.d = a->d;
    g.q_stride = a->q_stride, g.k_stride = a->k_stride;
    g.v_stride = a->v_stride, g.o_stride = a->o_stride;
    g.scale = 1.0f / sqrtf((float)a->d);
    g.scale_log2 = g.scale * ATTN_LOG2E;
    g.phantom = a->phantom;
    g.Tp = (a->T + ATTN_PACK_ROWS - 1) / ATTN_PACK_ROWS * ATTN_PACK_ROWS;
    g.vec = vec && a->d % 4 == 0 && a->q_stride % 4 == 0 && a->k_stride % 4 == 0 &&
            a->v_stride % 4 == 0 && a->o_stride % 4 == 0;
    g.f32 = 1;
    g.wgswap = attn_wgmma_swap();
    return g;
}

/* Shared-memory offsets are rounded up to 128 bytes (wmma wants 32). */
static constexpr size_t attn_align(size_t x) { return (x + 127) & ~(size_t)127; }

/* dst[r][c] (row length LD) = bf16(src[(row0 + r) * stride + c]) for
 * r < ROWS, c < DP, zero where row0 + r >= T or c >= d: padded rows and
 * columns must be zero, not stale, because a product over the whole tile
 * multiplies them (by a masked, zero probability for rows; by the zero
 * padding of the other operand for columns), and 0 * NaN would be NaN.
 * src is the first row of the (b,h) slice.  With vec, float4 loads.  NT:
 * the block's threads, all of which take part. */
template <int ROWS, int DP, int LD, int NT = ATTN_NT>
static __device__ __forceinline__ void attn_load_tile(sg_bf16 *__restrict__ dst,
                                                      const float *__restrict__ src, int stride,
                                                      int row0, int T, int d, int vec) {
    static_assert(LD % 8 == 0 && DP % 16 == 0, "wmma tile layout");
    if (vec) {
        constexpr int Q4 = DP / 4;
        for (int idx = threadIdx.x; idx < ROWS * Q4; idx += NT) {
            const int r = idx / Q4, c = (idx % Q4) * 4;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (row0 + r < T && c < d)
                x = *reinterpret_cast<const float4 *>(src + (long)(row0 + r) * stride + c);
            __nv_bfloat162 *p = reinterpret_cast<__nv_bfloat162 *>(dst + r * LD + c);
            p[0] = __floats2bfloat162_rn(x.x, x.y);
            p[1] = __floats2bfloat162_rn(x.z, x.w);
        }
    } else {
        for (int idx = threadIdx.x; idx < ROWS * DP; idx += NT) {
            const int r = idx / DP, c = idx % DP;
            float x = 0.f;
            if (row0 + r < T && c < d) x = src[(long)(row0 + r) * stride + c];
            dst[r * LD + c] = __float2bfloat16_rn(x);
        }
    }
}

/* Per-key log-bias of keys [k0, k0 + ATTN_BK), in base 2, 0 past T or
 * without a bias.  Threads 0..ATTN_BK-1 each write one. */
static __device__ __forceinline__ void attn_load_bias(float *__restrict__ dst,
                                                      const float *__restrict__ lb, int k0,
                                                      int T) {
    const int t = threadIdx.x;
    if (t < ATTN_BK) dst[t] = lb && k0 + t < T ? lb[k0 + t] * ATTN_LOG2E : 0.f;
}

/* Loads the query tile's LSE (base 2) and D; zero past T (those rows are
 * masked). */
static __device__ __forceinline__ void attn_load_rowstats(float *__restrict__ Ls,
                                                          float *__restrict__ Ds,
                                                          const float *__restrict__ lse,
                                                          const float *__restrict__ D, int q0,
                                                          int T) {
    const int t = threadIdx.x;
    if (t < ATTN_BQ) {
        const bool in = q0 + t < T;
        Ls[t] = in ? lse[q0 + t] * ATTN_LOG2E : 0.f;
        Ds[t] = in ? D[q0 + t] : 0.f;
    }
}

/* ---- register-resident tiles (mma_ptx.h; attention_*_mma.cu) ---------- */

/* The row statistics and log-bias of the tiles a tile kernel walks come
 * by cp.async, in the group of the tile they go with, and stay in shared
 * memory as stored: the LSE and the log-bias in natural units, taken to
 * base 2 where they are read (attn_base2).  attn_load_rowstats and
 * attn_load_bias store the base-2 values themselves, so their stores wait
 * for their loads; in a loop that fetches the next tile that wait came
 * right before the barrier that publishes the tile, and a barrier waits
 * for its slowest thread: the whole block sat out one round trip to global
 * memory every step.  (The block's own rows or keys, read once before the
 * loop, keep those loaders.)
 * sg_rn_mul is the rounding those stores made (one product, never fused
 * into the fma that reads it), so the values are theirs bit for bit. */
static __device__ __forceinline__ float attn_base2(float x) { return sg_rn_mul(x, ATTN_LOG2E); }

/* N floats of a tile's rows or keys, src[r0 .. r0 + N - 1] (threads
 * 0 .. N-1, one each), zero past T, into the caller's cp.async group:
 * the query tile's LSE and D (N = ATTN_BQ), the key tile's log-bias
 * (N = ATTN_BK; src not null). */
template <int N>
static __device__ __forceinline__ void attn_cp_f32s(float *__restrict__ dst, const float *__restrict__ src, int r0,
                                                    int T) {
    const int t = threadIdx.x;
    if (t < N) {
        const bool in = r0 + t < T;
        tc_cp_f32_zfill(dst + t, src + (in ? r0 + t : 0), in);
    }
}
static __device__ __forceinline__ void attn_cp_rowstats(float *__restrict__ Ls, float *__restrict__ Ds,
                                                        const float *__restrict__ lse, const float *__restrict__ D,
                                                        int q0, int T) {
    attn_cp_f32s<ATTN_BQ>(Ls, lse, q0, T);
    attn_cp_f32s<ATTN_BQ>(Ds, D, q0, T);
}

/* The A operand of rows r0 .. r0+15, columns c0 .. c0+15 of a bf16 tile. */
template <int LD>
static __device__ __forceinline__ void tc_load_a(tc_reg a[4], const sg_bf16 *tile, int r0, int c0, int lane) {
    tc_ldsm_x4(a, tile + (r0 + (lane & 15)) * LD + c0 + (lane >> 4) * 8);
}
/* The B operands of two 8-column products, b[0..1] and b[2..3], whose
 * columns are rows r0 .. r0+7 and r0+8 .. r0+15 of a tile (k = tile columns
 * c0 .. c0+15): X^T for a row-major X. */
template <int LD>
static __device__ __forceinline__ void tc_load_bt(tc_reg b[4], const sg_bf16 *tile, int r0, int c0, int lane) {
    tc_ldsm_x4(b, tile + (r0 + (lane & 7) + ((lane >> 4) << 3)) * LD + c0 + ((lane >> 3) & 1) * 8);
}
/* The B operands of two 8-column products whose k runs over rows
 * r0 .. r0+15 of a tile and whose columns are c0 .. c0+7, c0+8 .. c0+15:
 * X itself for a row-major X. */
template <int LD>
static __device__ __forceinline__ void tc_load_b(tc_reg b[4], const sg_bf16 *tile, int r0, int c0, int lane) {
    tc_ldsm_x4_trans(b, tile + (r0 + (lane & 15)) * LD + c0 + (lane >> 4) * 8);
}
/* The A operand of rows r0 .. r0+15, columns c0 .. c0+15 of X^T, for a
 * row-major bf16 X (X's rows are the operand's columns): tc_load_bt's
 * addresses, read transposed. */
template <int LD>
static __device__ __forceinline__ void tc_load_at(tc_reg a[4], const sg_bf16 *tile, int r0, int c0, int lane) {
    tc_ldsm_x4_trans(a, tile + (c0 + (lane & 7) + ((lane >> 4) << 3)) * LD + r0 + ((lane >> 3) & 1) * 8);
}
/* Two 16 x 8 accumulators as the A operand of their 16 columns. */
static __device__ __forceinline__ void tc_acc_to_a(tc_reg a[4], const float x[][4]) {
    a[0] = tc_pack(x[0][0], x[0][1]);
    a[1] = tc_pack(x[0][2], x[0][3]);
    a[2] = tc_pack(x[1][0], x[1][1]);
    a[3] = tc_pack(x[1][2], x[1][3]);
}

/* A warp's 16 x DP accumulators acc[n] (n = 8-column part; mma_ptx.h),
 * times mul, to rows first .. first+15 (those < T), columns < d, of a
 * (b,h) slice of stride `stride` (unless store is false); and, where twin
 * is not null, their bf16 values (sg_cast_bf16) at the same offsets of
 * twin, a slice laid out as dst's (the matmul twin of the attention
 * output or of dqkv; cuda_common.h). */
template <int DP>
static __device__ __forceinline__ void tc_store_rows(float *__restrict__ dst, int stride, const float acc[DP / 8][4],
                                                     int first, int T, int d, float mul, int lane,
                                                     sg_bf16 *__restrict__ twin = nullptr, bool store = true) {
    const int gq = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = first + gq + 8 * r;
        if (row >= T) continue;
        const long off = (long)row * stride;
#pragma unroll
        for (int n = 0; n < DP / 8; ++n) {
            const int c = 8 * n + 2 * tq;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                if (c + e >= d) continue;
                const float x = acc[n][2 * r + e] * mul;
                if (store) dst[off + c + e] = x;
                if (twin) twin[off + c + e] = sg_cast_bf16(x);
            }
        }
    }
}

/* Packed operands of the mma kernels.  attn_pack writes n tensors (Q, K,
 * V, and dO in the backward), each as bf16 [B*H][Tp][DP]: the (b,h) slice
 * of a tensor is Tp contiguous rows of DP elements, rounded to nearest
 * even from the fp32 rows, zero past d and past T.  A tile is then
 * contiguous, 16-byte aligned and needs no bounds test, so the kernels
 * copy it with cp.async straight into shared memory and can fetch the
 * next tile while they work on this one; and it is rounded once per layer
 * instead of once per block that reads it (every query block of a (b,h)
 * reads every key tile before its diagonal).  The rounding is the one the
 * fp32 tile loader applies, so the products see the same operands. */
static inline size_t attn_pack_elems_of(const AttnGeom &g) {
    return (size_t)g.B * g.H * g.Tp * attn_dpad(g.d);
}
static inline size_t attn_pack_elems(const AttnGeom &g) { return attn_pack_elems_of(g); }
struct AttnPackSrc {
    const float *p[4];
    int stride[4]; /* elements between rows */
    int vec;       /* all 16-byte aligned, d and the strides multiples of 4 */
};
/* attn_pack's kernel argument: the sources, and for each tensor stored in
 * bf16 (a part of the qkv the model promised as an attention operand, ops.h:
 * sg_bf16_inside) its bf16 instead, copied rather than rounded: the same
 * bits, since rounding a bf16 value to bf16 keeps it. */
struct AttnPackArgs {
    AttnPackSrc s;
    const sg_bf16 *b[4]; /* null: read p[i] in fp32 */
    int vecb;            /* bit i: b[i] 16-byte aligned, stride[i] and d multiples of 8 */
    int which;           /* 4 bits a y-slice: the tensor slice y packs (those read in place, AttnOp,
                          * get no slice, and their pack slots are left alone) */
};

/* A bf16 operand of the mma kernels: row t of head h of sequence b at
 * p + b bs + h hs + t rs, its d elements contiguous.  Either a pack slot
 * (bs = H Tp DP, hs = Tp DP, rs = DP), or, when q, k or v is a part of the
 * qkv stored in bf16 (ops.h, op_attention_operand) with d = DP and rows
 * 16-byte aligned, the tensor itself, read in place: bs = T stride, hs = d,
 * rs = stride.  Then nothing is packed for it: the packing's read and
 * write of it (at the 124M tier 25 MB each a tensor and layer) and its
 * share of the kept packs are saved.  Rows at or past T are zero either
 * way (attn_cp_rows fills them), so both give the kernels the same tiles. */
struct AttnOp {
    const sg_bf16 *p;
    long bs, hs;
    int rs;
    __host__ __device__ __forceinline__ const sg_bf16 *at(int b, int h) const { return p + b * bs + h * hs; }
};
/* Slot i of a pack buffer as an operand */
static inline AttnOp attn_packed_op(const sg_bf16 *pack, int i, const AttnGeom &g) {
    const int DP = attn_dpad(g.d);
    return {pack + (size_t)i * attn_pack_elems_of(g), (long)g.H * g.Tp * DP, (long)g.Tp * DP, DP};
}
/* q, k, v (and dO: n = 4) as the kernels read them: in place where they
 * can be (op[i].p set, bit i of the result), else pack slot i of `pack`
 * (null: the slot is filled later) */
int attn_inplace_ops(AttnOp *op, int n, const float *const *t, const int *stride, const AttnGeom &g);

void attn_pack(sg_bf16 *dst, int n, const AttnPackSrc &src, const AttnGeom &g, int skip = 0);
/* The forward's packs kept for its backward (attention_pack.cu):
 * attn_pack_keep gives the buffer (3 packs) the forward of q, k, v packs
 * into, or null when there is no memory for one; attn_pack_kept, the one
 * the last such forward filled, or null; attn_pack_drop forgets it (a
 * forward that packs elsewhere). */
sg_bf16 *attn_pack_keep(const real *q, const real *k, const real *v, const AttnArgs *a, const AttnGeom &g);
const sg_bf16 *attn_pack_kept(const real *q, const real *k, const real *v, const AttnArgs *a);
void attn_pack_drop(const real *q, const real *k, const real *v, const AttnArgs *a);

/* Rows r0 .. r0+ROWS-1 of an operand's (b,h) slice (AttnOp::at; rows rs
 * apart) into a tile of row length LD, by cp.async, 8 elements a copy;
 * rows at or past T are zero-filled.  The caller commits and waits. */
template <int ROWS, int DP, int LD, int NT>
static __device__ __forceinline__ void attn_cp_rows(sg_bf16 *__restrict__ dst, const sg_bf16 *__restrict__ slice,
                                                    int rs, int r0, int T) {
    constexpr int CH = DP / 8, N = ROWS * CH;
    /* A thread copies the same 8 columns of every RSTEP-th row: its source
     * offset is formed once a call and stepped per copy.  The compiler
     * still forms each 64-bit address, so few instructions are saved; the
     * gain is registers (sm_90, d 64, two m-tiles: 225 -> 212 a thread in
     * the forward, 225 -> 204 in the dQ kernel). */
    static_assert(NT % CH == 0, "a thread's copies keep their columns");
    constexpr int RSTEP = NT / CH;
    const int rt = (int)threadIdx.x / CH, c = (int)threadIdx.x % CH * 8;
    /* a slice's offsets fit in 32 bits (T rs < 2^31, checked on the host),
     * which keeps the address arithmetic in one register; rows past T are
     * not read (offset 0), the copy's zero fill stands in for them */
    const int off0 = (r0 + rt) * rs + c, step = RSTEP * rs;
    if (r0 + ROWS <= T) {
        /* every row present (all tiles but the last): no row tests, no
         * zero fill, and one 64-bit address stepped by a constant multiple
         * of rs, where the general copy forms and selects an address a copy
         * (some 40 instructions of a dQ tile's 16 copies; docs/cuda.md,
         * "Issue cycles from the control codes") */
        const sg_bf16 *src = slice + off0;
#pragma unroll
        for (int u = 0; u < (N + NT - 1) / NT; ++u) {
            if (N % NT != 0 && (int)threadIdx.x + u * NT >= N) break;
            tc_cp8(dst + (rt + u * RSTEP) * LD + c, src + u * step);
        }
        return;
    }
#pragma unroll
    for (int u = 0; u < (N + NT - 1) / NT; ++u) {
        if (N % NT != 0 && (int)threadIdx.x + u * NT >= N) break;
        const int r = rt + u * RSTEP;
        const bool in = r0 + r < T;
        tc_cp8_zfill(dst + r * LD + c, slice + (in ? off0 + u * step : 0), in);
    }
}

/* attn_cp_rows into the no-swizzle core-matrix layout the warpgroup
 * products read (wgmma_ptx.h): 16-byte chunk c of tile row r at element
 * (r >> 3) 8 DP + 64 c + 8 (r & 7), i.e. 8 x 8 cores of 128 bytes, the
 * cores of an 8-row group adjacent along the row.  The same image serves as
 * a K-major operand (rows along N: K for S = Q K^T) and as an MN-major one
 * (rows along K: V for O = P V).  Eight consecutive threads take the same
 * chunk of 8 consecutive rows: one core, 128 contiguous bytes, so that a
 * warp's stores hit distinct banks. */
template <int ROWS, int DP, int NT>
static __device__ __forceinline__ void attn_cp_rows_core(sg_bf16 *__restrict__ dst,
                                                         const sg_bf16 *__restrict__ slice, int rs, int r0,
                                                         int T) {
    constexpr int CH = DP / 8, N = ROWS * CH;
    static_assert(ROWS % 8 == 0 && N % NT == 0, "whole cores, every thread busy");
#pragma unroll
    for (int u = 0; u < N / NT; ++u) {
        const int idx = (int)threadIdx.x + u * NT;
        const int r = (idx & 7) + 8 * (idx / (8 * CH)), c = (idx >> 3) % CH;
        const bool in = r0 + r < T;
        tc_cp8_zfill(dst + (r >> 3) * 8 * DP + 64 * c + 8 * (r & 7), slice + (in ? (r0 + r) * rs + 8 * c : 0), in);
    }
}

/* A stored dS tile (ATTN_BK keys x ATTN_BQ queries, bf16) is 8 x 8
 * blocks of 128 bytes, each row-major, the blocks row-major by key:
 * element (key r, query c) at
 *   ATTN_DS_KEYBLOCK (r / 8) + 64 (c / 8) + 8 (r % 8) + c % 8.
 * A warp's mma fragment register is one block (attn_st_ds), so its stores
 * are whole 128-byte lines. */
static constexpr int ATTN_DS_KEYBLOCK = 8 * ATTN_BQ; /* elements from keys r to r + 8 */

/* A stored dS tile (all present) into a row-major tile of row length LD,
 * by cp.async: thread idx copies the tile's idx-th 16 bytes, so a warp
 * reads 512 contiguous bytes, and its 8 rows of a block land 2 LD bytes
 * apart (conflict-free for LD = ATTN_BQ + 8). */
template <int LD, int NT>
static __device__ __forceinline__ void attn_cp_ds_tile(sg_bf16 *__restrict__ dst, const sg_bf16 *__restrict__ tile) {
    constexpr int CH = ATTN_BQ / 8, N = ATTN_BK * CH;
    static_assert(N % NT == 0, "whole passes");
#pragma unroll
    for (int u = 0; u < N / NT; ++u) {
        const int idx = (int)threadIdx.x + u * NT;
        const int r = 8 * (idx / (8 * CH)) + (idx & 7), c = 8 * ((idx >> 3) % CH);
        tc_cp8(dst + r * LD + c, tile + 8 * idx); /* 8 idx: (r, c) in the stored layout */
    }
}

/* SG_ATTN selects the streaming attention's tile kernels: "wmma" (the
 * default; attention_fwd.cu, attention_bwd.cu), "mma" (register-resident
 * tiles; attention_fwd_mma.cu, attention_bwd_mma.cu) or "cudnn" (cuDNN's
 * fused attention where it takes the call, else mma).  attn_use_mma is
 * true for mma and cudnn.  Read at every call, so that one process can
 * compare them. */
bool attn_use_mma(void);
/* SG_ATTN_WARP_ROWS: the rows a warp owns in the mma forward and dQ
 * kernels, 16 or 32 (attention_fwd_mma.cu); 0 when unset (32 where
 * d <= 64, else 16).  For the benchmarks' comparison; d = 128 always
 * takes 16. */
int attn_warp_rows(void);
/* SG_ATTN_DQ: how the mma backward gets dQ.  "recompute" (the default):
 * the dq kernel forms S, P, dP and dS again from Q, K, V and dO, three
 * products a strip; "stored": the dK/dV kernel also writes each dS tile
 * it forms (bf16, as the dK product reads it) to scratch, and the dq
 * kernel only multiplies them by K, one product a strip, at the price of
 * writing and reading dS once (attn_ds_bytes).  Read at every call. */
bool attn_dq_stored(void);
/* SG_ATTN_BWD_PIPE=1: the mma backward's dK/dV and dQ kernels (head dim
 * 64) issue each strip's two score products before the previous
 * strip's exponentials and second products, so that the tensor cores work
 * while the softmax does: two strips' scores in registers at once.  The
 * same operations on every sum in the same order, so the same bits.  0
 * (the default) until a GPU has measured it.  Read at every call. */
bool attn_bwd_pipe(void);
/* The stored dS of a backward: per (b,h) the tiles of the causal triangle
 * (key tile kt <= query tile qt), row qt after row qt - 1, each 64 keys x
 * 64 queries in 8 x 8 blocks (ATTN_DS_KEYBLOCK).  Above ATTN_DS_MAX_BYTES (1 GiB: 124M at
 * B 8, T 1024 needs 107 MB) the backward recomputes instead. */
static constexpr size_t ATTN_DS_MAX_BYTES = (size_t)1 << 30;
static __host__ __device__ __forceinline__ size_t attn_ds_tiles(int T) {
    const size_t n = (size_t)(T + ATTN_BQ - 1) / ATTN_BQ;
    return n * (n + 1) / 2;
}
static inline size_t attn_ds_bytes(const AttnGeom &g) {
    return (size_t)g.B * g.H * attn_ds_tiles(g.T) * ATTN_BK * ATTN_BQ * sizeof(sg_bf16);
}
/* f(std::integral_constant<int, MT>()) for the m-tiles a warp of the mma
 * forward and dQ kernels owns at padded head dim DP: 2 where they fit
 * (DP <= 64) unless SG_ATTN_WARP_ROWS=16, else 1 (MT = 2 is never
 * instantiated at DP = 128, where it would spill). */
template <int DP, class F>
static inline void attn_by_mtiles(F &&f) {
    if constexpr (DP <= 64) {
        if (attn_warp_rows() != 16) {
            f(std::integral_constant<int, 2>());
            return;
        }
    }
    f(std::integral_constant<int, 1>());
}
/* Fills op[i] for each of q, k, v not read in place (inplace's bits,
 * attn_inplace_ops) by packing it into its slot of pack; returns 7, the
 * inplace mask of operands that are all ready (attn_fwd_mma then packs
 * nothing). */
int attn_fwd_ops(AttnOp *op, int inplace, sg_bf16 *pack, const real *q, const real *k, const real *v,
                 const AttnArgs *a, const AttnGeom &g);
/* SG_ATTN_WGMMA=1 or 2 on an sm_90 GPU (attention_fwd.cu): the mma path's
 * forward and dK/dV run on Hopper's warpgroup products
 * (attention_fwd_wgmma.cu, attention_bwd_mma.cu); attn_wgmma_mode: that
 * setting where it applies, else 0 (2: the pipelined kernels) */
bool attn_wgmma_ok(void);
int attn_wgmma_mode(void);
void attn_wgmma_count(int n);
/* The forward on the warpgroup products, if attn_wgmma_ok and the padded
 * head dim is 64 or 128 (else false, nothing launched); op: the operands
 * as attn_fwd_ops left them */
bool attn_fwd_wgmma(real *out, real *lse, const AttnArgs *a, const AttnGeom &g, const AttnOp *op, sg_bf16 *twin);
/* op, inplace: attn_inplace_ops of q, k, v; pack: room for 3 packed
 * tensors of attn_pack_elems(g) elements, 256-byte aligned, of which the
 * slots of those not read in place are filled (null when all are); twin:
 * out's bf16 twin or null (attn_twin_begin) */
void attn_fwd_mma(real *out, real *lse, const real *q, const real *k, const real *v, const AttnArgs *a,
                  const AttnGeom &g, AttnOp *op, int inplace, sg_bf16 *pack, sg_bf16 *twin);
/* the dkdv and dq kernels; D (fp32, [B,H,T]) from attention_bwd.cu's pre kernel;
 * twin: when dq, dk, dv are the three parts of one [B T, 3 H d] gradient,
 * its bf16 twin (dq's offsets), else null; kept: the forward's packed Q, K,
 * V (attn_pack_kept; the slots of those it read in place unused), and then
 * pack has room for dO alone, else null and pack room for all four (those
 * read in place skipped); ds: attn_ds_bytes of scratch for the stored dS
 * (SG_ATTN_DQ=stored), or null to recompute it in the dq kernel */
void attn_bwd_mma(real *dq, real *dk, real *dv, real *dlogbias, const real *dout, const real *q, const real *k,
                  const real *v, const real *lse, const float *D, const AttnArgs *a, const AttnGeom &g,
                  sg_bf16 *pack, const sg_bf16 *kept, sg_bf16 *twin, sg_bf16 *ds, const struct AttnGateEpi *gate);

/* A value-slot gate's backward fused into the dK/dV kernel's epilogue
 * (op_attention_gate_bwd, attention_bwd.cu): what the kernel needs of
 * op_gate_bwd's arguments.  dv, the kernel's output, is then the gradient
 * of the gate's input v, with row stride dv_stride, and part receives one
 * partial of the parameter gradients a block: [(b ceil(T / ATTN_BK) + kt) H
 * + h][np], np = 1 (the norm gate's dtau term) or d + 1 (the projection's
 * db term, then dw), as gate.cu's gate_param_reduce_kernel adds them. */
struct AttnGateEpi {
    int kind;              /* GATE_NORM or GATE_PROJ */
    const float *v32;      /* the gate's input v, fp32 ... */
    const sg_bf16 *v16;    /* ... or stored in bf16 (one of the two is null) */
    int v_stride;
    const float *g;        /* [B,H,T], saved by op_gate_fwd */
    const float *w;        /* [H,d] projection direction */
    const float *tb;       /* [H] tau (norm) or b (projection) */
    float beta;
    int dv_stride;
    double *part;
    int np;
};

/* attn_bwd_mma in two steps: the operands (q, k, v, dO: in place, kept or
 * packed into pack), then the kernels over them */
void attn_bwd_ops(AttnOp op[4], const real *dout, const real *q, const real *k, const real *v, const AttnArgs *a,
                  const AttnGeom &g, sg_bf16 *pack, const sg_bf16 *kept);
void attn_bwd_mma_ops(real *dq, real *dk, real *dv, real *dlogbias, const AttnOp op[4], const real *lse,
                      const float *D, const AttnArgs *a, const AttnGeom &g, sg_bf16 *twin, sg_bf16 *ds,
                      const struct AttnGateEpi *gate = nullptr);

/* SG_ATTN=cudnn (attention_cudnn.cu): cuDNN's fused attention
 * (cudnn_sdpa.h) over the operands the mma path prepares (every other
 * choice of the mma path, bf16 qkv read in place, packs, twins, holds
 * under it too).  attn_use_cudnn: whether SG_ATTN says cudnn (attn_use_mma
 * is then true as well).  attn_cudnn_fwd and attn_cudnn_bwd return false,
 * having written nothing, where cuDNN cannot take the call (the routing
 * slot's log-bias, a head dim or a machine it refuses: said once on
 * stderr); the caller then runs the mma tiles on the same operands.
 * fwd: op as attn_fwd_ops leaves it; twin: out's bf16 twin or null.
 * bwd: op as attn_bwd_ops leaves it; out: the forward's output (fp32);
 * twin, f32: as op_attention_bwd has them for dqkv. */
bool attn_use_cudnn(void);
bool attn_cudnn_fwd(real *out, real *lse, const AttnArgs *a, const AttnGeom &g, const AttnOp op[3], sg_bf16 *twin);
bool attn_cudnn_bwd(real *dq, real *dk, real *dv, const real *out, const real *lse, const AttnArgs *a,
                    const AttnGeom &g, const AttnOp op[4], sg_bf16 *twin);
/* calls of cuDNN's forward (bwd 0) or backward (1) that ran (tests;
 * SG_MATMUL_STATS=1 prints them) */
extern "C" long sg_attn_cudnn_calls(int bwd);

/* The backward kernels' shared-memory tiles, where layout L (BwdLayout,
 * BwdMmaLayout: offsets K, V, Q, DO, LSE, DD, LB) puts them:
 *   auto [Ks, Vs, Qs, dOs, Ls, Ds, lbs] = attn_bwd_tiles<L>(smem); */
struct AttnBwdTiles {
    sg_bf16 *K, *V, *Q, *dO;
    float *L, *D, *lb;
};
template <class L>
static __device__ __forceinline__ AttnBwdTiles attn_bwd_tiles(unsigned char *smem) {
    return {reinterpret_cast<sg_bf16 *>(smem + L::K),   reinterpret_cast<sg_bf16 *>(smem + L::V),
            reinterpret_cast<sg_bf16 *>(smem + L::Q),   reinterpret_cast<sg_bf16 *>(smem + L::DO),
            reinterpret_cast<float *>(smem + L::LSE),   reinterpret_cast<float *>(smem + L::DD),
            reinterpret_cast<float *>(smem + L::LB)};
}

/* One step of a tile loop: every warp is done with the previous tiles
 * (the first barrier), then the key tile k0's K, V and log-bias are loaded
 * and published (the second).  kh, vh: the (b,h) slice's first rows. */
template <int DP, int LD, int NT = ATTN_NT>
static __device__ __forceinline__ void attn_next_kv(sg_bf16 *Ks, sg_bf16 *Vs, float *lbs, const float *kh,
                                                    const float *vh, const float *lb, int k0, const AttnGeom &g) {
    __syncthreads();
    attn_load_tile<ATTN_BK, DP, LD, NT>(Ks, kh, g.k_stride, k0, g.T, g.d, g.vec);
    attn_load_tile<ATTN_BK, DP, LD, NT>(Vs, vh, g.v_stride, k0, g.T, g.d, g.vec);
    attn_load_bias(lbs, lb, k0, g.T);
    __syncthreads();
}
/* The same for the query tile q0 of the dK/dV kernels: Q, dO and the rows'
 * LSE and D.  qh, gh: the (b,h) slice's first rows of q and dO; lseh, Dh:
 * its LSE and D. */
template <int DP, int LD>
static __device__ __forceinline__ void attn_next_qdo(sg_bf16 *Qs, sg_bf16 *dOs, float *Ls, float *Ds, const float *qh,
                                                     const float *gh, const float *lseh, const float *Dh, int q0,
                                                     const AttnGeom &g) {
    __syncthreads();
    attn_load_tile<ATTN_BQ, DP, LD>(Qs, qh, g.q_stride, q0, g.T, g.d, g.vec);
    attn_load_tile<ATTN_BQ, DP, LD>(dOs, gh, g.o_stride, q0, g.T, g.d, g.vec);
    attn_load_rowstats(Ls, Ds, lseh, Dh, q0, g.T);
    __syncthreads();
}

/* Opt a kernel into more than 48 KiB of dynamic shared memory. */
template <typename K>
static inline void attn_smem_attr(K kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
}

#endif
