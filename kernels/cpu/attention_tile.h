/* Private to the CPU attention kernels (attention_fwd.c, attention_bwd.c):
 * tile sizes, the one register-blocked micro-kernel every tile product goes
 * through, and small helpers.
 *
 * Why tiles.  A (b,h) slice at T=512, d=64 holds 128 KiB of K and as much of
 * V; the scores of one query against all keys would be 2 KiB per query.  We
 * instead take ATT_BQ queries against ATT_BK keys at a time: the key tile
 * (transposed, 16 KiB), the value tile (16 KiB) and the score tile (8 KiB)
 * stay in L1 while every query of the block uses them, and nothing of size
 * T x T ever exists. */
#ifndef SG_ATTENTION_TILE_H
#define SG_ATTENTION_TILE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "real.h"
#include "vexp.h"

#define ATT_BQ 32 /* queries per block */
#define ATT_BK 64 /* keys per tile; also the column chunk of the micro-kernel */
#define ATT_NB 64 /* widest row segment the portable micro-kernel accumulates */

#ifdef SG_DOUBLE
#define AEXP exp
#define ALOG log
#define ASQRT sqrt
#else
#define AEXP expf
#define ALOG logf
#define ASQRT sqrtf
#endif

#if defined(__GNUC__)
#define ATT_INLINE static inline __attribute__((always_inline))
#else
#define ATT_INLINE static inline
#endif


/* 64-byte aligned scratch, zeroed if asked; the size is rounded up as
 * aligned_alloc requires. */
static inline void *att_alloc(size_t bytes, int zero) {
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) abort();
    if (zero) memset(p, 0, n);
    return p;
}

/* The micro-kernel of every tile product:
 *
 *   C[r][n] (=, or += if acc) sum_{j<K} W(r,j) X[j][n]     r < M, n < N
 *   W(r,j) = w[r*wrs + j*wcs]
 *
 * W is read one scalar at a time (a broadcast), so its strides are free: a
 * transposed W costs nothing, which is how dV += P^T dO and dK += dS^T Q use
 * the same kernel as S = Q K^T (with K pre-transposed) and O += P V.  Four
 * rows of C, ATT_NB wide, are accumulated across the whole K loop, so each
 * row of X loaded from L1 feeds four FMAs per element.  This is the portable
 * kernel (double build, and float without AVX-512): gcc vectorizes the n
 * loop, fully so when N == 64 is a compile-time constant (see att_gemm_n),
 * but keeps the accumulator arrays in memory; see att_gemm64_avx512. */
ATT_INLINE void att_gemm(real *restrict c, long ldc, int M, int N, const real *restrict w, long wrs,
                         long wcs, const real *restrict x, long ldx, int K, int acc) {
    for (int n0 = 0; n0 < N; n0 += ATT_NB) {
        const int nb = N - n0 < ATT_NB ? N - n0 : ATT_NB;
        int r = 0;
        for (; r + 4 <= M; r += 4) {
            real c0[ATT_NB], c1[ATT_NB], c2[ATT_NB], c3[ATT_NB];
            real *cr = c + (long)r * ldc + n0;
            for (int n = 0; n < nb; n++) {
                c0[n] = acc ? cr[n] : 0;
                c1[n] = acc ? cr[ldc + n] : 0;
                c2[n] = acc ? cr[2 * ldc + n] : 0;
                c3[n] = acc ? cr[3 * ldc + n] : 0;
            }
            const real *wr = w + (long)r * wrs;
            for (int j = 0; j < K; j++) {
                const real w0 = wr[j * wcs], w1 = wr[wrs + j * wcs];
                const real w2 = wr[2 * wrs + j * wcs], w3 = wr[3 * wrs + j * wcs];
                const real *xj = x + (long)j * ldx + n0;
#pragma omp simd
                for (int n = 0; n < nb; n++) {
                    c0[n] = AFMA(w0, xj[n], c0[n]);
                    c1[n] = AFMA(w1, xj[n], c1[n]);
                    c2[n] = AFMA(w2, xj[n], c2[n]);
                    c3[n] = AFMA(w3, xj[n], c3[n]);
                }
            }
            for (int n = 0; n < nb; n++) {
                cr[n] = c0[n];
                cr[ldc + n] = c1[n];
                cr[2 * ldc + n] = c2[n];
                cr[3 * ldc + n] = c3[n];
            }
        }
        for (; r < M; r++) {
            real c0[ATT_NB];
            real *cr = c + (long)r * ldc + n0;
            for (int n = 0; n < nb; n++) c0[n] = acc ? cr[n] : 0;
            const real *wr = w + (long)r * wrs;
            for (int j = 0; j < K; j++) {
                const real w0 = wr[j * wcs];
                const real *xj = x + (long)j * ldx + n0;
#pragma omp simd
                for (int n = 0; n < nb; n++) c0[n] = AFMA(w0, xj[n], c0[n]);
            }
            for (int n = 0; n < nb; n++) cr[n] = c0[n];
        }
    }
}

#if defined(__AVX512F__) && !defined(SG_DOUBLE)
#include <immintrin.h>
/* att_gemm for N == 64 in float with AVX-512 intrinsics, the hot path of
 * training (d = 64, full key tiles).  The portable kernel keeps its 4 x 64
 * accumulators in memory, so each FMA also loads and stores one and the loop
 * runs at about one FMA per cycle; GCC vector types would stay in registers,
 * but under -std=c11 gcc will not contract their a*b+c into an FMA.  Here the
 * accumulators are 16 zmm registers and each step is 4 row loads, 4
 * broadcasts and 16 FMAs: ~190 against ~93 GFLOP/s on one core of the
 * development machine.  It forms the same sums in the same order as the
 * portable kernel (one fused multiply-add per term, j ascending). */
#define ATT_FMA_ROW(a0, a1, a2, a3, wv)                                 \
    a0 = _mm512_fmadd_ps(wv, x0, a0), a1 = _mm512_fmadd_ps(wv, x1, a1), \
    a2 = _mm512_fmadd_ps(wv, x2, a2), a3 = _mm512_fmadd_ps(wv, x3, a3)
#define ATT_LOAD_ROW(a0, a1, a2, a3, p)                         \
    a0 = acc ? _mm512_loadu_ps(p) : _mm512_setzero_ps(),        \
    a1 = acc ? _mm512_loadu_ps((p) + 16) : _mm512_setzero_ps(), \
    a2 = acc ? _mm512_loadu_ps((p) + 32) : _mm512_setzero_ps(), \
    a3 = acc ? _mm512_loadu_ps((p) + 48) : _mm512_setzero_ps()
#define ATT_STORE_ROW(a0, a1, a2, a3, p)                                                     \
    _mm512_storeu_ps(p, a0), _mm512_storeu_ps((p) + 16, a1), _mm512_storeu_ps((p) + 32, a2), \
        _mm512_storeu_ps((p) + 48, a3)

static inline void att_gemm64_avx512(float *restrict c, long ldc, int M, const float *restrict w,
                                     long wrs, long wcs, const float *restrict x, long ldx, int K,
                                     int acc) {
    int r = 0;
    for (; r + 4 <= M; r += 4) {
        float *c0 = c + (long)r * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
        __m512 a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33;
        ATT_LOAD_ROW(a00, a01, a02, a03, c0);
        ATT_LOAD_ROW(a10, a11, a12, a13, c1);
        ATT_LOAD_ROW(a20, a21, a22, a23, c2);
        ATT_LOAD_ROW(a30, a31, a32, a33, c3);
        const float *wr = w + (long)r * wrs;
        for (int j = 0; j < K; j++) {
            const float *xj = x + (long)j * ldx, *wj = wr + (long)j * wcs;
            const __m512 x0 = _mm512_loadu_ps(xj), x1 = _mm512_loadu_ps(xj + 16);
            const __m512 x2 = _mm512_loadu_ps(xj + 32), x3 = _mm512_loadu_ps(xj + 48);
            __m512 wv = _mm512_set1_ps(wj[0]);
            ATT_FMA_ROW(a00, a01, a02, a03, wv);
            wv = _mm512_set1_ps(wj[wrs]);
            ATT_FMA_ROW(a10, a11, a12, a13, wv);
            wv = _mm512_set1_ps(wj[2 * wrs]);
            ATT_FMA_ROW(a20, a21, a22, a23, wv);
            wv = _mm512_set1_ps(wj[3 * wrs]);
            ATT_FMA_ROW(a30, a31, a32, a33, wv);
        }
        ATT_STORE_ROW(a00, a01, a02, a03, c0);
        ATT_STORE_ROW(a10, a11, a12, a13, c1);
        ATT_STORE_ROW(a20, a21, a22, a23, c2);
        ATT_STORE_ROW(a30, a31, a32, a33, c3);
    }
    for (; r < M; r++) {
        float *c0 = c + (long)r * ldc;
        __m512 a00, a01, a02, a03;
        ATT_LOAD_ROW(a00, a01, a02, a03, c0);
        const float *wr = w + (long)r * wrs;
        for (int j = 0; j < K; j++) {
            const float *xj = x + (long)j * ldx;
            const __m512 x0 = _mm512_loadu_ps(xj), x1 = _mm512_loadu_ps(xj + 16);
            const __m512 x2 = _mm512_loadu_ps(xj + 32), x3 = _mm512_loadu_ps(xj + 48);
            const __m512 wv = _mm512_set1_ps(wr[(long)j * wcs]);
            ATT_FMA_ROW(a00, a01, a02, a03, wv);
        }
        ATT_STORE_ROW(a00, a01, a02, a03, c0);
    }
}
#undef ATT_FMA_ROW
#undef ATT_LOAD_ROW
#undef ATT_STORE_ROW
#endif

/* Dispatch: N == 64 (d = 64, or a full key tile) takes the register kernel
 * where there is one, else the portable kernel with N a compile-time
 * constant; any other width takes the generic path. */
static inline void att_gemm_n(real *restrict c, long ldc, int M, int N, const real *restrict w,
                              long wrs, long wcs, const real *restrict x, long ldx, int K,
                              int acc) {
#if defined(__AVX512F__) && !defined(SG_DOUBLE)
    if (N == 64) {
        att_gemm64_avx512(c, ldc, M, w, wrs, wcs, x, ldx, K, acc);
        return;
    }
#endif
    if (N == 64)
        att_gemm(c, ldc, M, 64, w, wrs, wcs, x, ldx, K, acc);
    else
        att_gemm(c, ldc, M, N, w, wrs, wcs, x, ldx, K, acc);
}

/* dst[k][j] = scale * (element k of source row j) for j < nk, where the
 * tile's rows are src + j*lds; columns nk..ATT_BK-1 are zero, so a product
 * over the full tile width stays finite past the end of the sequence. */
static inline void att_transpose_tile(real *restrict dst, long ldd, const real *restrict src,
                                      long lds, int nk, int d, real scale) {
    for (int j = 0; j < nk; j++) {
        const real *s = src + (long)j * lds;
        for (int k = 0; k < d; k++) dst[(long)k * ldd + j] = s[k] * scale;
    }
    for (int k = 0; k < d; k++)
        for (int j = nk; j < ATT_BK; j++) dst[(long)k * ldd + j] = 0;
}

/* Rows of q, k, v, o and their gradients are d-wide pieces of [B,T,3C] or
 * [B,T,C] rows, one row per 4 KiB page or so at training widths.  The
 * hardware prefetchers do not cross pages, so a tile's rows would each be a
 * demand miss; the kernels prefetch the rows of the next tile (for writing:
 * rw = 1) while computing on the current one. */
static inline void att_prefetch_rows(const real *p, long stride, int rows, int d, int rw) {
#if defined(__GNUC__)
    for (int r = 0; r < rows; r++)
        for (int e = 0; e < d; e += 64 / (int)sizeof(real)) {
            if (rw)
                __builtin_prefetch(p + (long)r * stride + e, 1);
            else
                __builtin_prefetch(p + (long)r * stride + e, 0);
        }
#else
    (void)p, (void)stride, (void)rows, (void)d, (void)rw;
#endif
}

/* Fork threads only when there is enough work to pay for it (a parallel
 * region costs microseconds, and much more on a loaded machine).  Which
 * thread computes a (b,h) slice never changes its result, so this cannot
 * change any output. */
static inline int att_worth_threads(int B, int H, int T, int d) {
    return B * H > 1 && (double)B * H * T * T * d >= 1e6;
}

/* The phantom's logit for head h, or -inf when there is no phantom. */
static inline real att_phantom_logit(int phantom, const real *sink, int h) {
    if (!phantom) return -INFINITY;
    return sink ? sink[h] : (real)0;
}

#endif
