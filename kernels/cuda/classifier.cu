/* Fused LM head + softmax + cross-entropy (+ its backward) on the device; the
 * CPU reference is kernels/cpu/classifier.c.
 *
 *   z_i      = x_i wte^T                       (classes j < V only)
 *   loss_i   = logsumexp(z_i) - z_i[y_i]
 *   dz_ij    = dscale (softmax(z_i)_j - [j == y_i])
 *   dx       = dz wte        (overwritten)
 *   dwte    += dz^T x        (acc)
 *
 * Rows go through in chunks so that N x V logits never exist at once: a
 * chunk's logits are computed (one GEMM), turned into dlogits by one block
 * per row, and consumed by the two backward GEMMs before the next chunk.
 * A chunk is as many rows as CLS_CHUNK_BYTES of logits hold (sg_classifier_chunk_rows:
 * at Vp = 50304, 10,672 rows, so the 124M and 350M tiers' 8192-row
 * micro-batch is one chunk and the 10M tier's 32,768 rows are four).  Each
 * chunk reads and rewrites all of dwte (the dW GEMM accumulates, beta 1),
 * Vp C floats, so fewer chunks move less: with 2048-row chunks that was
 * 1.2 GB a step at 124M and 2.5 GB at 10M, now 0.3 and 0.6 GB.  Longer
 * chunks also give the dwte product a longer k.  Only the V real classes
 * enter the softmax.  The bf16 GEMMs run
 * over all Vp rows: GPT-2's V = 50257 is odd, and a GEMM dimension that is
 * not a multiple of 8 bf16 elements rules out cuBLAS's vectorised
 * tensor-core kernels: on an H200 the classifier took 14.4 ms of a 124M
 * step with m and k = V, and takes 4.4 ms with Vp (docs/cuda.md).  The bf16 copy of wte has zero rows past
 * V (whatever the fp32 padding holds) and the dlogits are zero in the padded
 * columns, so the padded logits are 0, the padded columns add exactly 0 to
 * dx, and the padded dwte rows receive +0.  The fp32 build keeps m and k = V
 * (it reads wte itself, and its padding is not assumed to be zero).
 *
 * Precision.  By default the GEMMs read bf16 copies of x, wte and dlogits
 * (cast on the fly into scratch) and accumulate in fp32 (CUBLAS_COMPUTE_32F),
 * the paper's bf16 autocast.  The logits come out in bf16, as under
 * autocast, where the LM head's output is bf16 and cross-entropy upcasts
 * it: the softmax, the loss and the dlogits are computed in fp32 (the row
 * sum of exponentials and the loss in double) from the bf16 logits, and
 * the dlogits, rounded to bf16 once as autocast's backward GEMMs see them,
 * overwrite the logits in place.  Against fp32 logits this halves the
 * chunk's logits traffic (written by the GEMM, read by the softmax): at
 * the 124M tier's micro-batch 1.65 GB a step less, at 10M (64 x 1024 rows,
 * where the classifier is most of the work) 13 GB.
 * Built with -DSG_CLASSIFIER_FP32 the GEMMs read the fp32 tensors directly
 * (plain fp32 SGEMM, no TF32) and the logits and dlogits are fp32, for
 * comparisons with the CPU reference at fp32 tolerance.
 *
 * The softmax: one block per row, a two-pass kernel that reads the row
 * twice, in 16-byte groups of 8 logits where the rows allow it
 * (cls_softmax8_kernel: bf16, Vp a multiple of 8) and one logit a load
 * elsewhere (cls_softmax_kernel).  A version that held the row in
 * registers and read it once measured slower on an H200 (run 5,
 * 2026-12-04: the classifier's call 4.59 ms a 124M step against 3.88 with
 * the scalar two-pass kernel in run 4; 25 groups a thread left two
 * 256-thread blocks an SM, too few rows in flight), and was taken out: the
 * 16-byte kernel keeps the two passes and three 512-thread blocks an SM.
 *
 * Determinism.  cuBLAS GEMMs give the same bits on every run on the same
 * GPU model and library (one stream, no atomics mode).  Each row's max and
 * sum of exponentials are reduced over the block's threads in a fixed order;
 * the row losses are kept in double and summed in a fixed order by one
 * block; dwte accumulates chunk by chunk in row order.
 *
 * The GEMMs go through plain cuBLAS (not Lt): sg_cublas(), bound to
 * sg_stream().  Their outputs are stored by cuBLAS's Hopper kernels with
 * the tensor memory accelerator, which compute-sanitizer's initcheck does
 * not see: on an H200 it reported every logit the softmax read as
 * uninitialised (2026-12-04, while the loss matched the CPU's).  The scratch
 * is therefore zeroed when it is allocated (sg_scratch_zeroed), once; the
 * program still writes every logit before it reads it. */
extern "C" {
#include "ops.h"
}
#include <cublas_v2.h>

#include "cuda_common.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define CLS_CHUNK_BYTES (1L << 30) /* logits a chunk may hold */
#define CLS_THREADS 512 /* threads per row of the softmax; a power of two (tree) */
#define SUM_THREADS 1024

#ifdef SG_CLASSIFIER_FP32
typedef float gin_t; /* what the GEMMs read */
#define GIN_TYPE CUDA_R_32F
#else
typedef __nv_bfloat16 gin_t;
#define GIN_TYPE CUDA_R_16BF
#endif

__device__ __forceinline__ void store_gin(float *p, float x) { *p = x; }
__device__ __forceinline__ void store_gin(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ float load_gin(const float *p) { return *p; }
__device__ __forceinline__ float load_gin(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

/* out[i] = in[i] for i < n, 0 for n <= i < n_out */
__global__ void cast_kernel(gin_t *__restrict__ out, const float *__restrict__ in, long n, long n_out) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n_out; i += (long)gridDim.x * blockDim.x)
        store_gin(out + i, i < n ? in[i] : 0.f);
}

/* (m1, s1) <- the pair for the union of two sets of exponentials, where
 * s = sum exp(z - m) over the set; an empty set is (-inf, 0). */
__device__ __forceinline__ void lse_combine(float &m1, double &s1, float m2, double s2) {
    const float m = m1 > m2 ? m1 : m2;
    if (m == -INFINITY) return; /* both empty */
    s1 = s1 * (double)expf(m1 - m) + s2 * (double)expf(m2 - m);
    m1 = m;
}

/* A softmax block's row i = blockIdx.x: its logits zi, its target y and,
 * in thread 0, z_y, read before any thread overwrites the row with its
 * dlogits (they do so only after the first barrier). */
struct ClsRow {
    int tid;
    long i;
    const gin_t *zi;
    int y;
    float zy;
    __device__ ClsRow(const gin_t *z, int ldz, const int32_t *targets)
        : tid(threadIdx.x), i(blockIdx.x), zi(z + i * ldz), y(targets[i]), zy(tid == 0 ? load_gin(zi + y) : 0.f) {}
    /* The row's max M and sum S of exp(z - M) from each thread's pair
     * (m, s), combined over the block in a fixed tree through shared
     * memory; then the row's loss M + log S - z_y, in double, into
     * rowloss[i] and (if given) losses[i].  Gives M and dscale / S. */
    __device__ float finish(float m, double s, float *m_sh, double *s_sh, double *rowloss, float *losses,
                            float dscale, float &M) const {
        m_sh[tid] = m;
        s_sh[tid] = s;
        __syncthreads();
        for (int w = CLS_THREADS / 2; w > 0; w >>= 1) {
            if (tid < w) {
                float mm = m_sh[tid];
                double ss = s_sh[tid];
                lse_combine(mm, ss, m_sh[tid + w], s_sh[tid + w]);
                m_sh[tid] = mm;
                s_sh[tid] = ss;
            }
            __syncthreads();
        }
        M = m_sh[0];
        const double S = s_sh[0];
        if (tid == 0) {
            const double li = (double)M + log(S) - (double)zy;
            rowloss[i] = li;
            if (losses) losses[i] = (float)li;
        }
        return (float)((double)dscale / S);
    }
};

/* One block per row i of the chunk.  z[i*ldz + j], j < V: the logits.
 * Writes rowloss[i] (double), losses[i] (if given) and, when dz is not NULL,
 * dz[i*ldz + j] for j < V, and 0 for V <= j < Vg (the padded columns the
 * GEMMs read); dz may be z itself (it is): every element is read by the
 * thread that overwrites it, and z[y] is read before the first barrier. */
__global__ void __launch_bounds__(CLS_THREADS)
cls_softmax_kernel(const gin_t *z, gin_t *dz, double *__restrict__ rowloss,
                   float *__restrict__ losses, const int32_t *__restrict__ targets, int V, int Vg,
                   int ldz, float dscale) {
    __shared__ float m_sh[CLS_THREADS];
    __shared__ double s_sh[CLS_THREADS];
    const ClsRow r(z, ldz, targets);
    const int tid = r.tid, y = r.y;
    const gin_t *zi = r.zi;

    /* online max and sum of exponentials over this thread's columns: one
     * read of the row, one exp per element */
    float m = -INFINITY, s = 0.f;
    for (int j = tid; j < V; j += CLS_THREADS) {
        const float v = load_gin(zi + j);
        if (v > m) {
            s = s * expf(m - v) + 1.f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    float M;
    const float f = r.finish(m, s, m_sh, s_sh, rowloss, losses, dscale, M);
    if (!dz) return;
    /* dz = dscale softmax - dscale [j == y], as the reference: exp(z - max)
     * times f = dscale / sum */
    gin_t *di = dz + r.i * ldz;
    for (int j = tid; j < V; j += CLS_THREADS) {
        float e = expf(load_gin(zi + j) - M) * f;
        if (j == y) e -= dscale;
        store_gin(di + j, e);
    }
    for (int j = V + tid; j < Vg; j += CLS_THREADS) store_gin(di + j, 0.f);
}

#ifndef SG_CLASSIFIER_FP32
/* cls_softmax_kernel's work on groups of 8 consecutive logits, each read
 * in one 16-byte load (bf16 logits, ldz and Vg multiples of 8, z 16-byte
 * aligned: cls_vec_ok).  Thread tid takes groups tid, tid + CLS_THREADS,
 * ..., two at a time with both loads issued first.  Why: the scalar
 * kernel's 2-byte loads put 2 bytes a thread in flight, 4 KB an SM, where
 * covering the memory's latency at 4.8 TB/s takes about 30 KB; here it is
 * 32 bytes a thread.  Per group the running pair (m, s) moves once, to the
 * group's max, and the 8 exponentials are taken against it: the same
 * quantities as the scalar kernel's, summed in another order.  Columns
 * j >= V in the last group count as -inf (exp 0) and their dlogits are 0,
 * as are the groups past V up to Vg, which are written, not read. */
__device__ __forceinline__ void cls_load(float v[8], const gin_t *zi, int q) {
    float4 a, b;
    ldv8(zi + 8 * q, a, b);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void cls_mask(float v[8], int q, int V) {
#pragma unroll
    for (int k = 0; k < 8; ++k)
        if (8 * q + k >= V) v[k] = -INFINITY;
}
__device__ __forceinline__ void cls_group_add(float &m, float &s, const float v[8]) {
    float g = v[0];
#pragma unroll
    for (int k = 1; k < 8; ++k) g = fmaxf(g, v[k]);
    if (g > m) {
        s *= expf(m - g);
        m = g;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) s += expf(v[k] - m);
}
__global__ void __launch_bounds__(CLS_THREADS)
cls_softmax8_kernel(const gin_t *z, gin_t *dz, double *__restrict__ rowloss, float *__restrict__ losses,
                    const int32_t *__restrict__ targets, int V, int Vg, int ldz, float dscale) {
    __shared__ float m_sh[CLS_THREADS];
    __shared__ double s_sh[CLS_THREADS];
    const ClsRow r(z, ldz, targets);
    const int tid = r.tid, y = r.y;
    const gin_t *zi = r.zi;

    const int nv = (V + 7) / 8, ng = Vg / 8; /* groups holding logits; all groups */
    float m = -INFINITY, s = 0.f;
    int q = tid;
    for (; q + CLS_THREADS < nv; q += 2 * CLS_THREADS) {
        float v0[8], v1[8];
        cls_load(v0, zi, q);
        cls_load(v1, zi, q + CLS_THREADS);
        cls_mask(v1, q + CLS_THREADS, V); /* v0 lies below v1 */
        cls_group_add(m, s, v0);
        cls_group_add(m, s, v1);
    }
    if (q < nv) {
        float v0[8];
        cls_load(v0, zi, q);
        cls_mask(v0, q, V);
        cls_group_add(m, s, v0);
    }
    float M;
    const float f = r.finish(m, s, m_sh, s_sh, rowloss, losses, dscale, M);
    if (!dz) return;
    gin_t *di = dz + r.i * ldz;
    for (q = tid; q < ng; q += 2 * CLS_THREADS) {
        float v[2][8];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int qq = q + u * CLS_THREADS;
            if (qq < nv) cls_load(v[u], zi, qq);
            else
#pragma unroll
                for (int k = 0; k < 8; ++k) v[u][k] = -INFINITY;
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int qq = q + u * CLS_THREADS;
            if (qq >= ng) break;
            if (8 * qq + 8 > V) cls_mask(v[u], qq, V);
            float e[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                e[k] = expf(v[u][k] - M) * f; /* 0 at -inf */
                e[k] = 8 * qq + k == y ? e[k] - dscale : e[k];
            }
            sg_st_bf16x8(di + 8 * qq, make_float4(e[0], e[1], e[2], e[3]), make_float4(e[4], e[5], e[6], e[7]));
        }
    }
}
#endif

/* *out = sum of x[0..n) in a fixed order: thread t adds t, t+1024, ...,
 * then a fixed tree. */
__global__ void __launch_bounds__(SUM_THREADS)
sum_double_kernel(double *__restrict__ out, const double *__restrict__ x, int n) {
    __shared__ double sh[SUM_THREADS];
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += SUM_THREADS) s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = SUM_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

/* column-major C[m,n] = op(A)[m,k] op(B)[k,n] + beta C, fp32 accumulate;
 * C fp32, or (ctype GIN_TYPE, the logits) the GEMMs' input type */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const gin_t *A,
                 int lda, const gin_t *B, int ldb, float beta, void *Cm, int ldc,
                 cudaDataType ctype = CUDA_R_32F) {
    const float alpha = 1.f;
    CUBLAS_CHECK(cublasGemmEx(sg_cublas(), ta, tb, m, n, k, &alpha, A, GIN_TYPE, lda, B, GIN_TYPE,
                              ldb, &beta, Cm, ctype, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

/* The GEMM operand for n fp32 values, zero-extended to n_out: a bf16 copy
 * in `buf`, or the values themselves in the fp32 build (which never asks
 * for an extension). */
static const gin_t *gemm_input(gin_t *buf, const float *src, long n, long n_out) {
#ifdef SG_CLASSIFIER_FP32
    (void)buf;
    (void)n;
    (void)n_out;
    return src;
#else
    if (n_out > 0) {
        long blocks = (n_out + 255) / 256;
        if (blocks > 65536) blocks = 65536;
        cast_kernel<<<(unsigned)blocks, 256, 0, sg_stream()>>>(buf, src, n, n_out);
        CUDA_LAUNCHED();
    }
    return buf;
#endif
}

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

static int g_chunk_rows; /* sg_classifier_set_chunk: 0, the rule below */

/* For tests: chunks of `rows` rows (0: cls_chunk_rows's rule), so that a
 * small vocabulary can still take several chunks. */
extern "C" void sg_classifier_set_chunk(int rows) { g_chunk_rows = rows > 0 ? rows : 0; }

/* Rows per chunk for N rows of Vp classes: all N if CLS_CHUNK_BYTES of
 * logits hold them (but at least 64 rows), else the fewest chunks that
 * fit, made equal and rounded up to 64 rows where that still fits (the
 * last chunk shorter). */
extern "C" int sg_classifier_chunk_rows(int N, int Vp) {
    if (N <= 0) return 0;
    if (g_chunk_rows) return N < g_chunk_rows ? N : g_chunk_rows;
    long cap = CLS_CHUNK_BYTES / ((long)(Vp > 0 ? Vp : 1) * (long)sizeof(gin_t));
    if (cap < 64) cap = 64;
    if (N <= cap) return N;
    const long chunks = (N + cap - 1) / cap, rows = ((N + chunks - 1) / chunks + 63) / 64 * 64;
    return (int)(rows < cap ? rows : cap);
}

/* In the row-major terms of ops.h, with cuBLAS's column-major view of a
 * row-major [r, c] matrix being [c, r], and Vg the classes the GEMMs cover
 * (Vp in the bf16 build, V in the fp32 one):
 *   z[n, Vp]  = x[n, C] wte[Vg, C]^T   -> gemm(T, N, Vg, n, C;  wte ld C, x ld C;  z ld Vp)
 *   dx[n, C]  = dz[n, Vg] wte[Vg, C]   -> gemm(N, N, C, n, Vg;  wte ld C, dz ld Vp; dx ld C)
 *   dwte[Vg,C] += dz[n, Vg]^T x[n, C]  -> gemm(N, T, C, Vg, n;  x ld C, dz ld Vp;  dwte ld C) */
extern "C" double op_classifier(real *losses, real *dx, real *dwte, const real *x, const real *wte,
                                const int32_t *targets, int N, int C, int V, int Vp,
                                real dscale) {
    if (N <= 0) return 0.0;
    if (V > Vp || V <= 0 || C <= 0)
        sg_cuda_fail(__FILE__, __LINE__, "op_classifier", "needs 0 < V <= Vp and C > 0");
    cudaStream_t st = sg_stream();
    const int grad = dx || dwte;
    const int chunk = sg_classifier_chunk_rows(N, Vp);

    /* SCRATCH_CLASSIFIER, carved: the logits chunk (then its dlogits, in
     * place), rows' losses, the total and (bf16 build) the bf16 copies of
     * wte and x */
    const size_t zb = align256(sizeof(gin_t) * (size_t)chunk * Vp);
    const size_t lb = align256(sizeof(double) * (size_t)N);
#ifdef SG_CLASSIFIER_FP32
    const size_t wb = 0, xb = 0;
#else
    const size_t wb = align256(sizeof(gin_t) * (size_t)Vp * C);
    const size_t xb = align256(sizeof(gin_t) * (size_t)chunk * C);
#endif
#ifdef SG_CLASSIFIER_FP32
    const int Vg = V;
#else
    const int Vg = Vp;
#endif
    char *s = (char *)sg_scratch_zeroed(SCRATCH_CLASSIFIER, zb + lb + 256 + wb + xb);
    gin_t *z = (gin_t *)s;
    double *rowloss = (double *)(s + zb);
    double *total = (double *)(s + zb + lb);
    gin_t *dz = grad ? z : NULL; /* dlogits overwrite the logits */
    gin_t *wbuf = (gin_t *)(s + zb + lb + 256);
    gin_t *xbuf = (gin_t *)(s + zb + lb + 256 + wb);
#ifndef SG_CLASSIFIER_FP32
    /* the 16-byte path: rows and the classes the GEMMs cover in whole
     * groups of 8 (the scratch is 256-byte aligned) */
    const bool vec = Vp % 8 == 0;
#endif

#ifdef SG_CLASSIFIER_FP32
    const gin_t *w = gemm_input(wbuf, wte, (long)V * C, (long)Vg * C);
#else
    /* wte's copy that AdamW keeps current (weight_copies.cu), else a cast */
    const gin_t *w = sg_weight_bf16(wte, (long)V * C, (long)Vg * C);
    if (!w) w = gemm_input(wbuf, wte, (long)V * C, (long)Vg * C);
#endif
    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int n = N - r0 < chunk ? N - r0 : chunk;
        const gin_t *xc = gemm_input(xbuf, x + (size_t)r0 * C, (long)n * C, (long)n * C);
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, Vg, n, C, w, C, xc, C, 0.f, z, Vp, GIN_TYPE);
#ifndef SG_CLASSIFIER_FP32
        if (vec)
            cls_softmax8_kernel<<<n, CLS_THREADS, 0, st>>>(z, dz, rowloss + r0, losses ? losses + r0 : NULL,
                                                           targets + r0, V, Vg, Vp, dscale);
        else
#endif
            cls_softmax_kernel<<<n, CLS_THREADS, 0, st>>>(z, dz, rowloss + r0, losses ? losses + r0 : NULL,
                                                          targets + r0, V, Vg, Vp, dscale);
        CUDA_LAUNCHED();
        if (dx) gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, n, Vg, w, C, dz, Vp, 0.f, dx + (size_t)r0 * C, C);
        if (dwte) gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, Vg, n, xc, C, dz, Vp, 1.f, dwte, C);
    }
    sum_double_kernel<<<1, SUM_THREADS, 0, st>>>(total, rowloss, N);
    CUDA_LAUNCHED();
    double h = 0.0;
    CUDA_CHECK(cudaMemcpyAsync(&h, total, sizeof(double), cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    return h;
}

/* logits[N, Vp] = x[N, C] wte[Vp, C]^T, in the classifier's precision. */
extern "C" void op_logits(real *logits, const real *x, const real *wte, int N, int C, int Vp) {
    if (N <= 0 || Vp <= 0) return;
#ifdef SG_CLASSIFIER_FP32
    gin_t *wbuf = NULL, *xbuf = NULL;
#else
    const size_t wb = align256(sizeof(gin_t) * (size_t)Vp * C);
    char *s = (char *)sg_scratch_zeroed(SCRATCH_CLASSIFIER, wb + sizeof(gin_t) * (size_t)N * C);
    gin_t *wbuf = (gin_t *)s, *xbuf = (gin_t *)(s + wb);
#endif
    const gin_t *w = gemm_input(wbuf, wte, (long)Vp * C, (long)Vp * C);
    const gin_t *xx = gemm_input(xbuf, x, (long)N * C, (long)N * C);
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, Vp, N, C, w, C, xx, C, 0.f, logits, Vp);
}
