/* Decode attention on the device (ops.h): one query per (b,h) against all T
 * keys of its sequence, no causal mask; the CPU reference is
 * kernels/cpu/attention_decode.c.  With c the phantom's logit (sink[h], 0
 * when sink is NULL, -inf without a phantom):
 *   s_j = q . k_j / sqrt(d) + lb_j,  M = max(c, max_j s_j)
 *   l   = exp(c - M) + sum_j exp(s_j - M),  LSE = M + log l
 *   o   = sum_j exp(s_j - M) v_j / l
 * Backward, with p_j = exp(s_j - LSE) and D = dO . O (the phantom's value is
 * zero, so it adds nothing to O, and its column of dS is p_c (0 - D)):
 *   dS_j = p_j (dO . v_j - D),  dq = sum_j dS_j k_j / sqrt(d),
 *   dk_j = dS_j q / sqrt(d),  dv_j = p_j dO,  dlb_j = dS_j,
 *   dc_h = -sum_b exp(c_h - LSE_b) D_b.
 *
 * Precision.  Everything is fp32 except where the reference accumulates in
 * double: l, the output accumulator sum_j p_j v_j, D, the dq accumulator and
 * the dc partials.  No tensor cores: the work per (b,h) is one query row, a
 * matrix-vector product that is bound by reading K and V, so bf16 operands
 * would save nothing and lose the fp32 agreement with the reference (the
 * toy task's gradients are compared with it).
 *
 * Geometry.  One block of DEC_NT threads per (b,h).  Warp w takes keys
 * j = w, w + DEC_NW, ...; lane e of it takes elements e, e + 32, ... of a
 * row, so each row is read coalesced, and the dot products are reduced with
 * an xor butterfly, which leaves every lane with the same bits.  The scores
 * of the forward are kept in shared memory (T floats) between the pass that
 * finds M and the pass that sums; the output and dq accumulators are one
 * row of d doubles per warp, owned lane by lane.
 *
 * Determinism.  No atomics.  Every sum has an order fixed by (T, d) alone:
 * within a warp, its keys ascending and then the butterfly; across warps,
 * warp order.  dc goes through one double partial per (b,h) in scratch,
 * which a second kernel adds over b in order into dsink, as the reference
 * does. */
extern "C" {
#include "ops.h"
}
#include "cuda_common.h"

#include <math.h>

#define DEC_NT 128          /* threads per (b,h) block */
#define DEC_NW (DEC_NT / 32) /* warps per block */

static __device__ __forceinline__ float dec_warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

static __device__ __forceinline__ double dec_warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

static __device__ __forceinline__ float dec_phantom_logit(int phantom, const float *sink, int h) {
    return phantom ? (sink ? sink[h] : 0.f) : -INFINITY;
}

/* Dynamic shared memory: acc [DEC_NW][d] (double), q [d], s [T]. */
static __global__ void __launch_bounds__(DEC_NT)
    attn_decode_fwd_kernel(float *__restrict__ out, float *__restrict__ lse,
                           const float *__restrict__ q, const float *__restrict__ k,
                           const float *__restrict__ v, const float *__restrict__ sink,
                           const float *__restrict__ logbias, int T, int H, int d, int q_stride,
                           int k_stride, int v_stride, int o_stride, int phantom, float scale) {
    extern __shared__ double dec_smem[];
    __shared__ float wmax[DEC_NW];
    __shared__ double wsum[DEC_NW];
    double *acc = dec_smem;
    float *qs = reinterpret_cast<float *>(acc + DEC_NW * d), *s = qs + d;
    const long bh = blockIdx.x, b = bh / H;
    const int h = (int)(bh % H), tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const float *qr = q + b * q_stride + (long)h * d;
    const float *lb = logbias ? logbias + bh * T : nullptr;
    const float c = dec_phantom_logit(phantom, sink, h);

    for (int e = tid; e < d; e += DEC_NT) qs[e] = qr[e];
    for (int e = tid; e < DEC_NW * d; e += DEC_NT) acc[e] = 0.0;
    __syncthreads();

    float m = c;
    for (int j = warp; j < T; j += DEC_NW) {
        const float *kr = k + (b * T + j) * k_stride + (long)h * d;
        float x = 0.f;
        for (int e = lane; e < d; e += 32) x = fmaf(qs[e], kr[e], x);
        x = dec_warp_sum(x);
        const float sj = fmaf(x, scale, lb ? lb[j] : 0.f);
        if (lane == 0) s[j] = sj;
        m = sj > m ? sj : m;
    }
    if (lane == 0) wmax[warp] = m;
    __syncthreads();
    m = c;
    for (int w = 0; w < DEC_NW; ++w) m = wmax[w] > m ? wmax[w] : m;

    /* each warp reads back the scores its lane 0 wrote (the barrier above
     * published them) */
    double l = 0.0;
    double *aw = acc + warp * d;
    for (int j = warp; j < T; j += DEC_NW) {
        const float p = expf(s[j] - m);
        const float *vr = v + (b * T + j) * v_stride + (long)h * d;
        l += p;
        for (int e = lane; e < d; e += 32) aw[e] += (double)p * vr[e];
    }
    if (lane == 0) wsum[warp] = l;
    __syncthreads();
    l = phantom ? (double)expf(c - m) : 0.0;
    for (int w = 0; w < DEC_NW; ++w) l += wsum[w];

    float *o = out + b * o_stride + (long)h * d;
    for (int e = tid; e < d; e += DEC_NT) {
        double a = 0.0;
        for (int w = 0; w < DEC_NW; ++w) a += acc[w * d + e];
        o[e] = l > 0 ? (float)(a / l) : 0.f;
    }
    if (tid == 0) lse[bh] = l > 0 ? m + (float)log(l) : -INFINITY;
}

/* Dynamic shared memory: gq [DEC_NW][d] (double), q [d], dO [d].
 * dc_part[bh] = -exp(c_h - LSE) D when dc_part is not NULL. */
static __global__ void __launch_bounds__(DEC_NT)
    attn_decode_bwd_kernel(float *__restrict__ dq, float *__restrict__ dk, float *__restrict__ dv,
                           float *__restrict__ dlogbias, double *__restrict__ dc_part,
                           const float *__restrict__ dout, const float *__restrict__ q,
                           const float *__restrict__ k, const float *__restrict__ v,
                           const float *__restrict__ out, const float *__restrict__ lse,
                           const float *__restrict__ sink, const float *__restrict__ logbias,
                           int T, int H, int d, int q_stride, int k_stride, int v_stride,
                           int o_stride, int phantom, float scale) {
    extern __shared__ double dec_smem[];
    __shared__ double Dsh;
    double *gq = dec_smem;
    float *qs = reinterpret_cast<float *>(gq + DEC_NW * d), *gs = qs + d;
    const long bh = blockIdx.x, b = bh / H;
    const int h = (int)(bh % H), tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const float *qr = q + b * q_stride + (long)h * d;
    const float *gr = dout + b * o_stride + (long)h * d, *orow = out + b * o_stride + (long)h * d;
    const float *lb = logbias ? logbias + bh * T : nullptr;
    const float L = lse[bh];

    for (int e = tid; e < d; e += DEC_NT) qs[e] = qr[e], gs[e] = gr[e];
    for (int e = tid; e < DEC_NW * d; e += DEC_NT) gq[e] = 0.0;
    if (warp == 0) {
        double x = 0.0;
        for (int e = lane; e < d; e += 32) x += (double)gr[e] * orow[e];
        x = dec_warp_sum(x);
        if (lane == 0) Dsh = x;
    }
    __syncthreads();
    const double D = Dsh;

    double *gw = gq + warp * d;
    for (int j = warp; j < T; j += DEC_NW) {
        const long r = b * T + j;
        const float *kr = k + r * k_stride + (long)h * d, *vr = v + r * v_stride + (long)h * d;
        float x = 0.f, dp = 0.f;
        for (int e = lane; e < d; e += 32) {
            x = fmaf(qs[e], kr[e], x);
            dp = fmaf(gs[e], vr[e], dp);
        }
        x = dec_warp_sum(x);
        dp = dec_warp_sum(dp);
        const float p = expf(fmaf(x, scale, lb ? lb[j] : 0.f) - L);
        const float ds = p * (float)(dp - D);
        float *dkr = dk + r * k_stride + (long)h * d, *dvr = dv + r * v_stride + (long)h * d;
        for (int e = lane; e < d; e += 32) {
            gw[e] += (double)ds * kr[e];
            dkr[e] = ds * qs[e] * scale;
            dvr[e] = p * gs[e];
        }
        if (dlogbias && lane == 0) dlogbias[bh * T + j] = ds;
    }
    __syncthreads();
    float *dqr = dq + b * H * d + (long)h * d;
    for (int e = tid; e < d; e += DEC_NT) {
        double a = 0.0;
        for (int w = 0; w < DEC_NW; ++w) a += gq[w * d + e];
        dqr[e] = (float)(a * scale);
    }
    if (dc_part && tid == 0)
        dc_part[bh] = -(double)expf(dec_phantom_logit(phantom, sink, h) - L) * D;
}

/* dsink[h] += sum_b dc_part[b*H + h], b ascending. */
static __global__ void attn_decode_dsink_kernel(float *__restrict__ dsink,
                                                const double *__restrict__ dc_part, int B, int H) {
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    double s = 0.0;
    for (int b = 0; b < B; ++b) s += dc_part[(long)b * H + h];
    dsink[h] += (float)s;
}

/* Dynamic shared memory of either kernel, opted in above 48 KiB (T beyond
 * ~11000 in the forward); fails clearly past the device's limit. */
template <typename K>
static size_t dec_smem_bytes(K kernel, const char *op, int d, int nfloats) {
    const size_t bytes = sizeof(double) * DEC_NW * (size_t)d + sizeof(float) * (size_t)nfloats;
    if (bytes > 48 * 1024) {
        int dev = 0, optin = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        if (bytes > (size_t)optin - 1024)
            sg_cuda_fail(__FILE__, __LINE__, op, "T or d too large for shared memory");
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    }
    return bytes;
}

extern "C" void op_attention_decode_fwd(real *out, real *lse, const real *q, const real *k,
                                        const real *v, const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    if (B <= 0 || H <= 0 || d <= 0 || T < 0) return;
    sg_attn_need_fp32("op_attention_decode_fwd", q, k, v);
    const size_t smem =
        dec_smem_bytes(attn_decode_fwd_kernel, "op_attention_decode_fwd", d, d + T);
    attn_decode_fwd_kernel<<<(unsigned)((long)B * H), DEC_NT, smem, sg_stream()>>>(
        out, lse, q, k, v, a->sink, a->logbias, T, H, d, a->q_stride, a->k_stride, a->v_stride,
        a->o_stride, a->phantom, 1.0f / sqrtf((float)d));
    CUDA_LAUNCHED();
}

extern "C" void op_attention_decode_bwd(real *dq, real *dk, real *dv, real *dsink, real *dlogbias,
                                        const real *dout, const real *q, const real *k,
                                        const real *v, const real *out, const real *lse,
                                        const AttnArgs *a) {
    const int B = a->B, T = a->T, H = a->H, d = a->d;
    if (B <= 0 || H <= 0 || d <= 0 || T < 0) return;
    sg_attn_need_fp32("op_attention_decode_bwd", q, k, v);
    double *dc_part =
        dsink ? (double *)sg_scratch(SCRATCH_MISC, sizeof(double) * (size_t)B * H) : nullptr;
    const size_t smem =
        dec_smem_bytes(attn_decode_bwd_kernel, "op_attention_decode_bwd", d, 2 * d);
    attn_decode_bwd_kernel<<<(unsigned)((long)B * H), DEC_NT, smem, sg_stream()>>>(
        dq, dk, dv, dlogbias, dc_part, dout, q, k, v, out, lse, a->sink, a->logbias, T, H, d,
        a->q_stride, a->k_stride, a->v_stride, a->o_stride, a->phantom, 1.0f / sqrtf((float)d));
    CUDA_LAUNCHED();
    if (dsink) {
        attn_decode_dsink_kernel<<<sg_blocks(H, 128), 128, 0, sg_stream()>>>(dsink, dc_part, B, H);
        CUDA_LAUNCHED();
    }
}
