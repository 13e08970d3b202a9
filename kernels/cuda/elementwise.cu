/* Pointwise ops: GELU (exact erf form), the residual add, AdamW, and the
 * sum of squares behind the gradient-norm clip.  GELU's output is fc_proj's
 * x and its input gradient fc's dout, so both kernels also write the bf16
 * twin t of what they store (cuda_common.h, sg_twin_begin; NULL: none),
 * and store the fp32 value only when out (dinp) is not NULL: a tensor
 * promised to matmuls alone keeps only its twin (sg_twin_fp32). */
#include <math.h>

#include "cuda_common.h"

enum { THREADS = 256 };

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)),
 * gelu'(x) = 0.5 (1 + erf(x / sqrt 2)) + x phi(x),  phi = exp(-x^2/2) / sqrt(2 pi) */
__global__ void gelu_fwd_k(float *out, __nv_bfloat16 *t, const float *inp, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        float y = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
        if (out) out[i] = y;
        if (t) t[i] = sg_cast_bf16(y);
    }
}
__global__ void gelu_bwd_k(float *dinp, __nv_bfloat16 *t, const float *inp, const float *dout, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
        float dx = dout[i] * (cdf + x * pdf);
        if (dinp) dinp[i] = dx;
        if (t) t[i] = sg_cast_bf16(dx);
    }
}
__global__ void add_k(float *out, const float *a, const float *b, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

extern "C" void op_gelu_fwd(real *out, const real *inp, long n) {
    if (n <= 0) return;
    __nv_bfloat16 *t = sg_twin_begin(out, n);
    float *o = t ? sg_twin_fp32(out, n) : out;
    gelu_fwd_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(o, t, inp, n);
    CUDA_LAUNCHED();
    if (t) sg_twin_written(out, n);
}
extern "C" void op_gelu_bwd(real *dinp, const real *inp, const real *dout, long n) {
    if (n <= 0) return;
    __nv_bfloat16 *t = sg_twin_begin(dinp, n);
    float *d = t ? sg_twin_fp32(dinp, n) : dinp;
    gelu_bwd_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(d, t, inp, dout, n);
    CUDA_LAUNCHED();
    if (t) sg_twin_written(dinp, n);
}
extern "C" void op_add(real *out, const real *a, const real *b, long n) {
    if (n <= 0) return;
    add_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(out, a, b, n);
    CUDA_LAUNCHED();
}

/* torch.optim.AdamW, the same arithmetic as kernels/cpu/adamw.c in fp32:
 *   g *= gscale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps) */
__global__ void adamw_k(float *p, float *m, float *v, const float *g, long n, float step, float sbc2,
                        float decay, float b1, float b2, float eps, float gs) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] * gs;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
}

extern "C" void op_adamw(real *p, real *m, real *v, const real *g, long n, double lr, double b1, double b2,
                         double eps, double wd, long t, double gscale) {
    if (n <= 0) return;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    adamw_k<<<sg_blocks(n, THREADS), THREADS, 0, sg_stream()>>>(p, m, v, g, n, (float)(lr / bc1), (float)sqrt(bc2),
                                                              (float)(1.0 - lr * wd), (float)b1, (float)b2,
                                                              (float)eps, (float)gscale);
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
