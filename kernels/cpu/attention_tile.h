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

#ifndef ATT_BQ
#define ATT_BQ 32 /* queries per block */
#endif
#define ATT_BK 64 /* keys per tile; also the column chunk of the micro-kernel */
#define ATT_NB 64 /* widest row segment the micro-kernel keeps in registers */

#ifdef SG_DOUBLE
#define AEXP exp
#define ALOG log
#define ASQRT sqrt
#else
#define AEXP expf
#define ALOG logf
#define ASQRT sqrtf
#endif

/* Fused multiply-add.  -std=c11 turns off gcc's contraction of a*b+c, and
 * the tile products are FMA-bound, so it is spelled out where the hardware
 * has one (fmaf/fma then compile to the vector instruction). */
#if defined(__FMA__) || defined(__aarch64__)
#ifdef SG_DOUBLE
#define AFMA(a, b, c) fma(a, b, c)
#else
#define AFMA(a, b, c) fmaf(a, b, c)
#endif
#else
#define AFMA(a, b, c) ((a) * (b) + (c))
#endif

#if defined(__GNUC__)
#define ATT_INLINE static inline __attribute__((always_inline))
#else
#define ATT_INLINE static inline
#endif

/* exp for the softmax loops, written so that gcc vectorizes it (a call to
 * libm's expf keeps the loop scalar, and at d = 64 the exponentials would
 * then cost as much as the tile products).  Arguments are <= 0 here (logits
 * minus a running max or minus the LSE, or -inf for a masked column).
 * Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the degree-7 Taylor
 * polynomial of e^r (truncation < 5e-9 relative) and 2^k built in the
 * exponent bits: within 2 ulp of expf.  Below -87.33 (where 2^k would leave
 * the normal range) it returns 0, which makes exp(-inf) = 0 for masked
 * columns.  The double build (gradient checks) uses libm's exp. */
#ifdef SG_DOUBLE
#define AVEXP exp
#else
static inline float att_vexpf(float x) {
    const float lo = -87.33654f, hi = 88.0f, shifter = 12582912.0f; /* 1.5 * 2^23 */
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    /* k = round(x / ln2): adding 1.5*2^23 rounds to an integer in float */
    const float kf = AFMA(xc, 1.44269504088896341f, shifter) - shifter;
    float r = AFMA(kf, -0.693145751953125f, xc); /* ln2 high part: k*hi is exact */
    r = AFMA(kf, -1.42860682030941723e-6f, r);   /* ln2 low part */
    float p = 1.0f / 5040;
    p = AFMA(p, r, 1.0f / 720);
    p = AFMA(p, r, 1.0f / 120);
    p = AFMA(p, r, 1.0f / 24);
    p = AFMA(p, r, 1.0f / 6);
    p = AFMA(p, r, 0.5f);
    p = AFMA(p, r, 1.0f);
    p = AFMA(p, r, 1.0f);
    union {
        int32_t i;
        float f;
    } two_k = {.i = ((int32_t)kf + 127) << 23};
    return x < lo ? 0.0f : p * two_k.f;
}
#define AVEXP att_vexpf
#endif

/* 64-byte aligned scratch (zeroed), size rounded up as aligned_alloc needs. */
static inline void *att_alloc(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) abort();
    memset(p, 0, n);
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
 * rows of C, ATT_NB wide, are held in accumulators across the whole K loop,
 * so each row of X loaded from L1 feeds four FMAs per element.  With N == 64
 * a compile-time constant (the caller dispatches d == 64 and N == ATT_BK to
 * a constant argument) gcc unrolls the n loop completely and keeps the
 * accumulators in vector registers. */
ATT_INLINE void att_gemm(real *restrict c, long ldc, int M, int N, const real *restrict w,
                         long wrs, long wcs, const real *restrict x, long ldx, int K,
                         int acc) {
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

/* Dispatch so that the common widths are compile-time constants inside the
 * inlined kernel (see att_gemm); any other width takes the generic path. */
static inline void att_gemm_n(real *restrict c, long ldc, int M, int N, const real *restrict w,
                              long wrs, long wcs, const real *restrict x, long ldx, int K,
                              int acc) {
    if (N == 64)
        att_gemm(c, ldc, M, 64, w, wrs, wcs, x, ldx, K, acc);
    else
        att_gemm(c, ldc, M, N, w, wrs, wcs, x, ldx, K, acc);
}

/* Dst[k][j] = src row (j0+j), element k, for j < nk; columns nk..ATT_BK-1 are
 * zero so that score columns past the end of the sequence are finite (they
 * are masked afterwards). */
static inline void att_transpose_tile(real *restrict dst, long ldd, const real *restrict src,
                                      long lds, int nk, int d) {
    for (int j = 0; j < nk; j++) {
        const real *s = src + (long)j * lds;
        for (int k = 0; k < d; k++) dst[(long)k * ldd + j] = s[k];
    }
    for (int k = 0; k < d; k++)
        for (int j = nk; j < ATT_BK; j++) dst[(long)k * ldd + j] = 0;
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
