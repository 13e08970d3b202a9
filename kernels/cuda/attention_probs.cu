/* Explicit attention for the evaluation-time analyses (ops.h), on the
 * device; the CPU reference is kernels/cpu/attention_probs.c.
 *
 * Per (b,h), with c_h the phantom's logit (sink[h], or 0 when sink is NULL;
 * -inf without a phantom, so it adds nothing below):
 *   S    = Q K^T / sqrt(d)                   one GEMM into p (row stride T+1)
 *   s_ij = S_ij + lb_j                       j <= i
 *   M_i  = max(c_h, max_j s_ij)
 *   p_ij = exp(s_ij - M_i) / Z_i,  p_iT = exp(c_h - M_i) / Z_i
 *   p_ij = 0                                 i < j < T
 * with Z_i the sum of the T+1 numerators: the streaming op's
 * exp(s_ij - LSE_i), with LSE_i = M_i + log Z_i.  The apply is
 *   O = P[:, 0:T] V                          one GEMM; column T is never read
 * so the phantom's value is exactly zero, as in op_attention_fwd.
 *
 * Precision.  These ops feed analyses, not training, so everything is fp32,
 * as the CPU reference: the GEMMs are plain SGEMMs (CUBLAS_COMPUTE_32F on
 * a handle left in CUBLAS_DEFAULT_MATH, which never uses TF32 or BF16x9
 * emulation; those need a math mode this file never sets), the exponentials
 * are expf, and Z_i is summed in double so that a row of 1024 probabilities
 * sums to one to float rounding.
 *
 * Layout.  Row-major Q and K slices of one sequence are, in cuBLAS's
 * column-major terms, Q^T [d,T] and K^T [d,T] with leading dimensions
 * q_stride and k_stride; head h starts h*d further along the row, so the H
 * heads of one sequence are one strided batch (stride d), and S^T = K Q^T
 * lands in p with leading dimension T+1.  Likewise O^T = V^T P^T with V^T
 * [d,T] (ld v_stride), P^T [T,T] (ld T+1) and O^T [d,T] (ld o_stride).
 * Sequences (b) differ by T rows, not by a multiple of d, so they are one
 * batched call each.  The GEMM computes the whole T x T score block; the
 * softmax overwrites the part above the diagonal with exact zeros.
 *
 * Softmax: one block per row (b,h,i); thread t takes columns t, t+nt, ...
 * Determinism: cuBLAS GEMMs give the same bits on every run on the same GPU
 * model and library (one stream, atomics mode off).  Each row's max and sum
 * are reduced with an xor butterfly inside a warp (every lane gets the same
 * bits) and then over the warps in warp order by every thread, so the
 * result depends only on T, never on timing.  No atomics.
 *
 * The GEMMs go through plain cuBLAS (not Lt): sg_cublas(), bound to
 * sg_stream(). */
extern "C" {
#include "ops.h"
}
#include <cublas_v2.h>

#include "cuda_common.h"

#include <math.h>

#define PROBS_THREADS 256 /* most threads per softmax row; a multiple of 32 */

__device__ __forceinline__ float probs_warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ double probs_warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* One block per row r = (b*H + h)*T + i of p, which starts at r*(T+1) and
 * holds S_ij for j < T on entry. */
__global__ void __launch_bounds__(PROBS_THREADS)
probs_softmax_kernel(float *__restrict__ p, const float *__restrict__ sink,
                     const float *__restrict__ logbias, int T, int H, int phantom) {
    __shared__ float mx_sh[PROBS_THREADS / 32];
    __shared__ double z_sh[PROBS_THREADS / 32];
    const long r = blockIdx.x, bh = r / T;
    const int i = (int)(r % T), h = (int)(bh % H);
    const int tid = threadIdx.x, nt = blockDim.x, warp = tid / 32, nw = nt / 32;
    float *row = p + r * (T + 1);
    const float *lb = logbias ? logbias + bh * T : NULL;
    const float c = phantom ? (sink ? sink[h] : 0.f) : -INFINITY;

    float m = c;
    for (int j = tid; j <= i; j += nt) {
        const float s = lb ? row[j] + lb[j] : row[j];
        row[j] = s;
        m = fmaxf(m, s);
    }
    m = probs_warp_max(m);
    if (tid % 32 == 0) mx_sh[warp] = m;
    __syncthreads();
    float M = mx_sh[0];
    for (int w = 1; w < nw; w++) M = fmaxf(M, mx_sh[w]);

    double z = 0.0;
    for (int j = tid; j <= i; j += nt) { /* the same j as above: this thread's own writes */
        const float e = expf(row[j] - M);
        row[j] = e;
        z += e;
    }
    z = probs_warp_sum(z);
    if (tid % 32 == 0) z_sh[warp] = z;
    __syncthreads();
    double Z = 0.0;
    for (int w = 0; w < nw; w++) Z += z_sh[w];
    const float ph = phantom ? expf(c - M) : 0.f;
    Z += ph;
    const float inv = (float)(1.0 / Z);

    for (int j = tid; j < T; j += nt) row[j] = j <= i ? row[j] * inv : 0.f;
    if (tid == 0) row[T] = ph * inv;
}

/* column-major C_h[m,n] = alpha op(A_h)[m,k] op(B_h)[k,n] for h < batch, fp32 throughout */
static void sgemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                          const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                          float *C, int ldc, long long sc, int batch) {
    const float beta = 0.f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(sg_cublas(), ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B,
                                            CUDA_R_32F, ldb, sb, &beta, C, CUDA_R_32F, ldc, sc, batch,
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

extern "C" void op_attention_probs(real *p, const real *q, const real *k, const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    if (B <= 0 || T <= 0 || H <= 0 || d <= 0) return;
    sg_attn_need_fp32("op_attention_probs", q, k, nullptr);
    const long long ld = (long long)T + 1, slice = (long long)T * ld;
    const long rows = (long)B * H * T;
    if (rows > 0x7fffffffL)
        sg_cuda_fail(__FILE__, __LINE__, "op_attention_probs", "B*H*T rows beyond one grid");
    const float scale = 1.f / sqrtf((float)d);
    for (int b = 0; b < B; b++) {
        const float *qb = q + (size_t)b * T * a->q_stride, *kb = k + (size_t)b * T * a->k_stride;
        sgemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, d, scale, kb, a->k_stride, d, qb, a->q_stride, d,
                      p + (size_t)b * H * slice, (int)ld, slice, H);
    }
    const int threads = T < PROBS_THREADS ? (T + 31) / 32 * 32 : PROBS_THREADS;
    probs_softmax_kernel<<<(unsigned)rows, threads, 0, sg_stream()>>>(p, a->sink, a->logbias, T, H, a->phantom);
    CUDA_LAUNCHED();
}

extern "C" void op_attention_apply(real *out, const real *p, const real *v, const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    if (B <= 0 || T <= 0 || H <= 0 || d <= 0) return;
    sg_attn_need_fp32("op_attention_apply", nullptr, nullptr, v);
    const long long ld = (long long)T + 1, slice = (long long)T * ld;
    for (int b = 0; b < B; b++) {
        const float *vb = v + (size_t)b * T * a->v_stride;
        sgemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, d, T, T, 1.f, vb, a->v_stride, d, p + (size_t)b * H * slice, (int)ld,
                      slice, out + (size_t)b * T * a->o_stride, a->o_stride, d, H);
    }
}
