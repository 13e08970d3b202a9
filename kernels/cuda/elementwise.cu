/* Pointwise ops: GELU (the exact erf form and the tanh form), the residual
 * add, AdamW, and the sum of squares behind the gradient-norm clip.  GELU's
 * output is fc_proj's x and its input gradient fc's dout, so both kernels
 * also write the bf16 twin t of what they store (cuda_common.h,
 * sg_twin_begin; NULL: none), and store the fp32 value only when out
 * (dinp) is not NULL: a tensor promised to matmuls alone keeps only its
 * twin (sg_twin_fp32).  GELU's inputs, fc's output and fc_proj's dinp, are
 * in bf16 when the model promised them as bf16 operands (op_bf16_operand,
 * matmul.cu).  The two forms share every kernel and host path below: the
 * math is their template parameter G (GeluErf, GeluTanh). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>

#include "cuda_common.h"

enum { THREADS = 256 };

/* The vector path, where every tensor is 16-byte aligned: groups of
 * eight consecutive elements, read and written 16 bytes at a time (fp32 in
 * two accesses, bf16 in one), and GELU_U groups a thread, every load issued
 * before the first is used; the scalar kernels take the rest (or
 * everything, for a tensor that is not aligned).  Each element gets the
 * scalar kernel's arithmetic, so both paths give the same bits.
 * Why this width: GELU moves 2 bytes an element each way in bf16 and is
 * bound by how many bytes an SM has in flight.  Four elements a thread in
 * bf16 (two 4-byte loads each) left 16 KB in flight an SM at full
 * occupancy, under the ~30 KB an H200's 4.8 TB/s needs at a microsecond's
 * latency; here a thread has 32 bytes in flight forward and 64 backward,
 * at 48-56 registers 32-40 KB and 64-80 KB an SM, and the index
 * arithmetic is paid once per 16 elements instead of 4 (AdamW, all fp32,
 * keeps four). */
enum { GELU_U = 2 };
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The erf form (op_gelu_fwd, op_gelu_bwd):
 * gelu(x) = 0.5 x (1 + erf(x / sqrt 2)),
 * gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x phi(x),  phi = exp(-x^2/2) / sqrt(2 pi) */
struct GeluErf {
    static __device__ __forceinline__ float f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
    static __device__ __forceinline__ float df(float x, float dy) {
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
        return dy * (cdf + x * pdf);
    }
};

/* The tanh form (op_gelu_tanh_fwd, op_gelu_tanh_bwd; kernels/cpu/gelu.c's
 * arithmetic in fp32), through s = (1 + tanh u) / 2 = 1 / (1 + exp(-2u)),
 * u = sqrt(2/pi) (x + 0.044715 x^3): with e = exp(-2|u|), s = 1 / (1 + e)
 * for u >= 0 and e / (1 + e) below, neither of which cancels, and
 * sech^2 u = 4 e / (1 + e)^2.  Past |u| = 44, e is taken as 0 (it is below
 * 1e-38 there), as on the CPU: s is then exactly 1 or 0 and the slope's
 * second term exactly 0, where for a huge x (x^3 overflowing to inf)
 * 0 * inf would make NaN.  expf, as the erf form's.
 * gelu(x) = x s,  gelu'(x) = s + 0.5 x sech^2(u) sqrt(2/pi) (1 + 3 0.044715 x^2) */
struct GeluTanh {
    static __device__ __forceinline__ float s(float x, float &sech2) {
        const float u = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
        const float au = u < 0.0f ? -u : u, e = au < 44.0f ? expf(-2.0f * au) : 0.0f, r = 1.0f / (1.0f + e);
        sech2 = 4.0f * e * r * r;
        return u < 0.0f ? e * r : r;
    }
    static __device__ __forceinline__ float f(float x) {
        float s2;
        return x * s(x, s2);
    }
    static __device__ __forceinline__ float df(float x, float dy) {
        float s2;
        const float sx = s(x, s2), du = 0.79788456080286535588f * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * (sx + (s2 > 0.0f ? 0.5f * x * s2 * du : 0.0f));
    }
};

/* GELU reads a bf16 operand's stored values (ld1, ldv4: cuda_common.h) as
 * autocast's GELU reads a bf16 linear output, and computes in fp32. */

template <class G, typename TI>
__global__ void gelu_fwd_k(float *out, __nv_bfloat16 *t, const TI *inp, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float y = G::f(ld1(inp, i));
        if (out) out[i] = y;
        if (t) t[i] = sg_cast_bf16(y);
    }
}
/* group q = blockIdx.x THREADS GELU_U + u THREADS + threadIdx.x of a
 * thread's u-th: consecutive lanes, consecutive groups */
__device__ __forceinline__ long gelu_group(int u) {
    return (long)blockIdx.x * (THREADS * GELU_U) + u * THREADS + threadIdx.x;
}
template <class G>
__device__ __forceinline__ float4 gelu_f4(float4 x) {
    return make_float4(G::f(x.x), G::f(x.y), G::f(x.z), G::f(x.w));
}
template <class G>
__device__ __forceinline__ float4 gelu_df4(float4 x, float4 dy) {
    return make_float4(G::df(x.x, dy.x), G::df(x.y, dy.y), G::df(x.z, dy.z), G::df(x.w, dy.w));
}
template <class G, typename TI>
__global__ void gelu_fwd8_k(float *out, __nv_bfloat16 *t, const TI *inp, long n8) {
    float4 x[GELU_U][2];
#pragma unroll
    for (int u = 0; u < GELU_U; ++u)
        if (gelu_group(u) < n8) ldv8(inp + 8 * gelu_group(u), x[u][0], x[u][1]);
#pragma unroll
    for (int u = 0; u < GELU_U; ++u) {
        const long e = 8 * gelu_group(u);
        if (gelu_group(u) >= n8) break;
        const float4 y0 = gelu_f4<G>(x[u][0]), y1 = gelu_f4<G>(x[u][1]);
        if (out) sg_st4(out + e, y0), sg_st4(out + e + 4, y1);
        if (t) sg_st_bf16x8(t + e, y0, y1);
    }
}
template <class G, typename TI, typename TD>
__global__ void gelu_bwd_k(float *dinp, __nv_bfloat16 *t, const TI *inp, const TD *dout, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float dx = G::df(ld1(inp, i), ld1(dout, i));
        if (dinp) dinp[i] = dx;
        if (t) t[i] = sg_cast_bf16(dx);
    }
}
template <class G, typename TI, typename TD>
__global__ void gelu_bwd8_k(float *dinp, __nv_bfloat16 *t, const TI *inp, const TD *dout, long n8) {
    float4 x[GELU_U][2], dy[GELU_U][2];
#pragma unroll
    for (int u = 0; u < GELU_U; ++u)
        if (gelu_group(u) < n8) {
            ldv8(inp + 8 * gelu_group(u), x[u][0], x[u][1]);
            ldv8(dout + 8 * gelu_group(u), dy[u][0], dy[u][1]);
        }
#pragma unroll
    for (int u = 0; u < GELU_U; ++u) {
        const long e = 8 * gelu_group(u);
        if (gelu_group(u) >= n8) break;
        const float4 d0 = gelu_df4<G>(x[u][0], dy[u][0]), d1 = gelu_df4<G>(x[u][1], dy[u][1]);
        if (dinp) sg_st4(dinp + e, d0), sg_st4(dinp + e + 4, d1);
        if (t) sg_st_bf16x8(t + e, d0, d1);
    }
}
__global__ void add_k(float *out, const float *a, const float *b, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

/* [0, n4 * 4) on the vector path when the tensors allow it, the rest scalar */
static long vec_groups(long n, std::initializer_list<const void *> ps) {
    for (const void *p : ps)
        if (p && !aligned16(p)) return 0;
    return n / 4;
}

template <class G, typename TI>
static void gelu_fwd(float *o, __nv_bfloat16 *t, const TI *inp, long n) {
    const long n8 = vec_groups(n, {o, inp, t}) / 2, k = 8 * n8;
    if (n8) {
        gelu_fwd8_k<G><<<sg_blocks(n8, THREADS * GELU_U), THREADS, 0, sg_stream()>>>(o, t, inp, n8);
        CUDA_LAUNCHED();
    }
    if (k < n) {
        gelu_fwd_k<G><<<sg_blocks(n - k, THREADS), THREADS, 0, sg_stream()>>>(o ? o + k : o, t ? t + k : t, inp + k,
                                                                             n - k);
        CUDA_LAUNCHED();
    }
}
/* inp fp32 or, promised as a bf16 operand, bf16 */
template <class G>
static void gelu_fwd_op(real *out, const real *inp, long n) {
    if (n <= 0) return;
    __nv_bfloat16 *t = sg_twin_begin(out, n);
    float *o = t ? sg_twin_fp32(out, n) : out;
    const __nv_bfloat16 *ib = sg_bf16_stored(inp, n);
    if (ib) gelu_fwd<G>(o, t, ib, n);
    else gelu_fwd<G>(o, t, inp, n);
    if (t) sg_twin_written(out, n);
}
extern "C" void op_gelu_fwd(real *out, const real *inp, long n) { gelu_fwd_op<GeluErf>(out, inp, n); }
extern "C" void op_gelu_tanh_fwd(real *out, const real *inp, long n) { gelu_fwd_op<GeluTanh>(out, inp, n); }

template <class G, typename TI, typename TD>
static void gelu_bwd(float *d, __nv_bfloat16 *t, const TI *inp, const TD *dout, long n) {
    const long n8 = vec_groups(n, {d, inp, dout, t}) / 2, k = 8 * n8;
    if (n8) {
        gelu_bwd8_k<G><<<sg_blocks(n8, THREADS * GELU_U), THREADS, 0, sg_stream()>>>(d, t, inp, dout, n8);
        CUDA_LAUNCHED();
    }
    if (k < n) {
        gelu_bwd_k<G><<<sg_blocks(n - k, THREADS), THREADS, 0, sg_stream()>>>(d ? d + k : d, t ? t + k : t, inp + k,
                                                                             dout + k, n - k);
        CUDA_LAUNCHED();
    }
}
/* inp and dout each fp32 or, promised as bf16 operands, bf16 */
template <class G>
static void gelu_bwd_op(real *dinp, const real *inp, const real *dout, long n) {
    if (n <= 0) return;
    __nv_bfloat16 *t = sg_twin_begin(dinp, n);
    float *d = t ? sg_twin_fp32(dinp, n) : dinp;
    const __nv_bfloat16 *ib = sg_bf16_stored(inp, n), *db = sg_bf16_stored(dout, n);
    if (ib && db) gelu_bwd<G>(d, t, ib, db, n);
    else if (ib) gelu_bwd<G>(d, t, ib, dout, n);
    else if (db) gelu_bwd<G>(d, t, inp, db, n);
    else gelu_bwd<G>(d, t, inp, dout, n);
    if (t) sg_twin_written(dinp, n);
}
extern "C" void op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n) {
    gelu_bwd_op<GeluErf>(dinp, inp, dout, n);
}
extern "C" void op_gelu_tanh_bwd(real *dinp, const real *inp, const real *dout, long n) {
    gelu_bwd_op<GeluTanh>(dinp, inp, dout, n);
}
extern "C" void op_add(real *out, const real *a, const real *b, long n) {
    if (n <= 0) return;
    add_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(out, a, b, n);
    CUDA_LAUNCHED();
}

/* torch.optim.AdamW, the same arithmetic as kernels/cpu/adamw.c in fp32:
 *   g *= gscale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
 * Every operation rounded on its own (sg_rn_*, cuda_common.h), as the CPU
 * build's C11 computes it.  With the plain expression nvcc chose fmas per
 * kernel: on an H200 op_adamw_multi's parameters came out one ulp off
 * op_adamw's for the same inputs (2026-12-04, test_gpu_ops "adamw multi"). */
struct AdamW {
    float step, sbc2, decay, b1, b2, eps, gs;
    __device__ __forceinline__ void operator()(float &p, float &m, float &v, float g) const {
        const float gi = sg_rn_mul(g, gs);
        m = sg_rn_add(sg_rn_mul(b1, m), sg_rn_mul(sg_rn_sub(1.0f, b1), gi));
        v = sg_rn_add(sg_rn_mul(b2, v), sg_rn_mul(sg_rn_mul(sg_rn_sub(1.0f, b2), gi), gi));
        const float den = sg_rn_add(sg_rn_div(sg_rn_sqrt(v), sbc2), eps);
        p = sg_rn_sub(sg_rn_mul(p, decay), sg_rn_div(sg_rn_mul(step, m), den));
    }
};
__global__ void adamw_k(float *p, float *m, float *v, const float *g, long n, AdamW a) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float pi = p[i], mi = m[i], vi = v[i];
    a(pi, mi, vi, g[i]);
    m[i] = mi, v[i] = vi, p[i] = pi;
}
__global__ void adamw4_k(float *p, float *m, float *v, const float *g, long n4, AdamW a) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 p4 = sg_ld4(p + 4 * i), m4 = sg_ld4(m + 4 * i), v4 = sg_ld4(v + 4 * i);
    const float4 g4 = sg_ld4(g + 4 * i);
    a(p4.x, m4.x, v4.x, g4.x);
    a(p4.y, m4.y, v4.y, g4.y);
    a(p4.z, m4.z, v4.z, g4.z);
    a(p4.w, m4.w, v4.w, g4.w);
    sg_st4(m + 4 * i, m4), sg_st4(v + 4 * i, v4), sg_st4(p + 4 * i, p4);
}

extern "C" void op_adamw(real *p, real *m, real *v, const real *g, long n, double lr, double b1, double b2,
                         double eps, double wd, long t, double gscale) {
    if (n <= 0) return;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const AdamW a = {(float)(lr / bc1), (float)sqrt(bc2), (float)(1.0 - lr * wd), (float)b1, (float)b2, (float)eps,
                     (float)gscale};
    op_written(p, (size_t)n * sizeof *p); /* a weight's kept bf16 copy is now stale */
    const long n4 = vec_groups(n, {p, m, v, g}), k = 4 * n4;
    if (n4) {
        adamw4_k<<<sg_blocks(n4, THREADS), THREADS, 0, sg_stream()>>>(p, m, v, g, n4, a);
        CUDA_LAUNCHED();
    }
    if (k < n) {
        adamw_k<<<sg_blocks(n - k, THREADS), THREADS, 0, sg_stream()>>>(p + k, m + k, v + k, g + k, n - k, a);
        CUDA_LAUNCHED();
    }
}

/* ---- AdamW over many tensors in one launch (op_adamw_multi) ----
 * One launch per tensor costs a launch and a ramp each: at 124M 75 tensors
 * (baseline) to 111 (combo2), 219 at 350M's combo2, a third or more of
 * them a LayerNorm's weight or a gate's or a sink's few parameters, each a
 * kernel of a few microseconds that barely fills the GPU.  Here
 * every segment gets its blocks from one grid: segment s owns the blocks
 * [first, first + vec_blocks + tail_blocks), the vector blocks taking four
 * elements a thread (when the segment's four tensors are 16-byte aligned)
 * and the tail blocks one.  A block finds its segment by binary search over
 * the segments' first blocks.  Each element gets adamw_k's arithmetic, with
 * the segment's decay, so the bits are those of one op_adamw per segment.
 * A segment that is a weight with a kept bf16 copy (weight_copies.cu) also
 * stores each new value's bf16 there, sg_cast_bf16 of the float it stores,
 * so the copy stays the cast the next forward's matmul would make. */
struct AdamwWork {
    long off;  /* p and g index of the segment's first element */
    long n4;   /* vector groups: elements [0, 4 n4) of the segment */
    long n;    /* elements */
    int first; /* the segment's first block */
    int nvec;  /* its vector blocks; the rest of its blocks are scalar */
    int decay;
    int pad;             /* 0: no padding bytes, so that tables compare with memcmp */
    __nv_bfloat16 *copy; /* the weight's bf16 copy (cudaMalloc'd: aligned), or NULL */
};

__global__ void adamw_multi_k(float *p, float *m, float *v, const float *g, long base,
                              const AdamwWork *__restrict__ w, int nseg, AdamW a) {
    const int b = (int)blockIdx.x;
    int lo = 0, hi = nseg - 1; /* the last segment whose first block is <= b */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (w[mid].first <= b) lo = mid;
        else hi = mid - 1;
    }
    const AdamwWork s = w[lo];
    AdamW as = a;
    if (!s.decay) as.decay = 1.0f; /* (float)(1.0 - lr * 0.0), as op_adamw with wd 0 */
    const long off = s.off, mo = s.off - base;
    const int lb = b - s.first;
    if (lb < s.nvec) {
        const long i = (long)lb * blockDim.x + threadIdx.x;
        if (i >= s.n4) return;
        const long e = 4 * i;
        float4 p4 = sg_ld4(p + off + e), m4 = sg_ld4(m + mo + e), v4 = sg_ld4(v + mo + e);
        const float4 g4 = sg_ld4(g + off + e);
        as(p4.x, m4.x, v4.x, g4.x);
        as(p4.y, m4.y, v4.y, g4.y);
        as(p4.z, m4.z, v4.z, g4.z);
        as(p4.w, m4.w, v4.w, g4.w);
        sg_st4(m + mo + e, m4), sg_st4(v + mo + e, v4), sg_st4(p + off + e, p4);
        if (s.copy) sg_st_bf16x4(s.copy + e, p4);
        return;
    }
    const long e = 4 * s.n4 + (long)(lb - s.nvec) * blockDim.x + threadIdx.x;
    if (e >= s.n) return;
    float pi = p[off + e], mi = m[mo + e], vi = v[mo + e];
    as(pi, mi, vi, g[off + e]);
    m[mo + e] = mi, v[mo + e] = vi, p[off + e] = pi;
    if (s.copy) s.copy[e] = sg_cast_bf16(pi);
}

/* The work table on the device, uploaded only when it changes: the model's
 * segments are the same every step. */
static AdamwWork *g_work_host, *g_work_dev;
static int g_work_n, g_work_cap;

extern "C" void op_adamw_multi(real *p, real *m, real *v, const real *g, long base, const AdamwSeg *segs, int nseg,
                               double lr, double b1, double b2, double eps, double wd, long t, double gscale) {
    if (nseg <= 0) return;
    AdamwWork *w = (AdamwWork *)malloc(sizeof *w * (size_t)nseg);
    if (!w) sg_cuda_fail(__FILE__, __LINE__, "malloc", "no host memory for the AdamW work table");
    int nw = 0;
    long blocks = 0;
    for (int i = 0; i < nseg; i++) {
        const AdamwSeg *q = &segs[i];
        if (q->n <= 0) continue;
        const long mo = q->off - base;
        const long n4 = vec_groups(q->n, {p + q->off, g + q->off, m + mo, v + mo});
        const long nvec = (n4 + THREADS - 1) / THREADS, ntail = (q->n - 4 * n4 + THREADS - 1) / THREADS;
        w[nw++] = {q->off, n4, q->n, (int)blocks, (int)nvec, q->decay != 0, 0, sg_weight_update(p + q->off, q->n)};
        blocks += nvec + ntail;
        if (blocks > 0x7fffffffL) sg_cuda_fail(__FILE__, __LINE__, "op_adamw_multi", "more than 2^31 blocks");
    }
    if (!nw) {
        free(w);
        return;
    }
    if (nw != g_work_n || memcmp(w, g_work_host, sizeof *w * (size_t)nw)) {
        if (nw > g_work_cap) {
            CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued launch may still read the old table */
            CUDA_CHECK(sg_free(g_work_dev));
            g_work_dev = NULL, g_work_cap = 0;
            if (sg_malloc((void **)&g_work_dev, sizeof *w * (size_t)nw) != cudaSuccess)
                sg_out_of_memory(sizeof *w * (size_t)nw, "AdamW's segment table");
            g_work_cap = nw;
        }
        /* waited for on both sides: the launches queued before may read the
         * old table, and the host copy must outlive the transfer */
        CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
        CUDA_CHECK(cudaMemcpyAsync(g_work_dev, w, sizeof *w * (size_t)nw, cudaMemcpyHostToDevice, sg_stream()));
        CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
        free(g_work_host);
        g_work_host = w, g_work_n = nw;
    } else
        free(w);
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const AdamW a = {(float)(lr / bc1), (float)sqrt(bc2), (float)(1.0 - lr * wd), (float)b1, (float)b2, (float)eps,
                     (float)gscale};
    adamw_multi_k<<<(unsigned)blocks, THREADS, 0, sg_stream()>>>(p, m, v, g, base, g_work_dev, nw, a);
    CUDA_LAUNCHED();
}

/* Sum of squares in double, deterministic: block c sums elements
 * [c*CH, (c+1)*CH) with a fixed tree, then one block adds the partials in
 * index order.  The same bits every run (not the CPU's bits: its chunks
 * are summed sequentially). */
enum { CH = 8192, RED_THREADS = 256 };

__device__ double block_sum(double x) {
    __shared__ double s[RED_THREADS];
    s[threadIdx.x] = x;
    __syncthreads();
    for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    double r = s[0];
    __syncthreads();
    return r;
}

__global__ void sumsq_part_k(double *part, const float *x, long n) {
    long i0 = (long)blockIdx.x * CH, i1 = i0 + CH < n ? i0 + CH : n;
    double s = 0;
    for (long i = i0 + threadIdx.x; i < i1; i += RED_THREADS) s += (double)x[i] * x[i];
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_parts_k(double *out, const double *part, long np) {
    double s = 0;
    for (long i = threadIdx.x; i < np; i += RED_THREADS) s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

extern "C" double op_sumsq(const real *x, long n) {
    if (n <= 0) return 0;
    long np = (n + CH - 1) / CH;
    double *part = (double *)sg_scratch(SCRATCH_REDUCE, (size_t)(np + 1) * sizeof(double));
    sumsq_part_k<<<(unsigned)np, RED_THREADS, 0, sg_stream()>>>(part + 1, x, n);
    CUDA_LAUNCHED();
    sum_parts_k<<<1, RED_THREADS, 0, sg_stream()>>>(part, part + 1, np);
    CUDA_LAUNCHED();
    double r;
    CUDA_CHECK(cudaMemcpyAsync(&r, part, sizeof r, cudaMemcpyDeviceToHost, sg_stream()));
    CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    return r;
}
