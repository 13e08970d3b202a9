/* Per-read gates on the device (paper Section 3.3, Eqs. 3 and 4); the CPU
 * reference is kernels/cpu/gate.c.  For the head-h slice v of the value row
 * at (b,t):
 *   norm gate:        z = beta (||v|| / sqrt(d) - tau_h)
 *   projection gate:  z = w_h . v + b_h
 *   g = sigmoid(z)
 * Value slot:   vg = g v
 * Routing slot: logbias = log g = -softplus(-z) = min(z,0) - log1p(exp(-|z|))
 *
 * Backward, with dz/dv = beta v / (sqrt(d) ||v||) (norm; 0 at v = 0) or w_h:
 *   value slot:   a = dvg . v,  dz = a g (1 - g),  dv = g dvg + dz dz/dv
 *   routing slot: dz = dlogbias (1 - g),          dv += dz dz/dv
 *   dtau_h += -beta dz,  dw_h += dz v,  db_h += dz
 * 1 - g is sigmoid(-z) of the recomputed z, not 1 - (saved g), so it keeps
 * its relative accuracy when the gate is nearly open.
 *
 * All gate math is fp32 (the paper runs it outside autocast).  One warp owns
 * one read: lane e takes elements e, e+32, ...; the dot products are reduced
 * with an xor butterfly, which gives every lane the same bits (float
 * addition is commutative), so every lane computes the same z, g and dz.
 *
 * Determinism of the parameter gradients (no float atomics).  The backward
 * grid is (row tiles of GATE_ROWS rows of (b,t)) x (heads).  Inside a block,
 * warp w takes rows w, w+8, ... of its tile in order and accumulates its
 * lanes' terms in double in its own shared-memory row; the block then adds
 * its 8 warp rows in warp order and writes one partial per (tile, h) to
 * scratch.  A second kernel adds the partials of each (h, k) over the tiles
 * (lane l takes tiles l, l+32, ... in order, then a fixed butterfly) and adds
 * the result into dtau / db / dw.  The layout depends only on (B, T, H, d),
 * never on the device or timing. */
extern "C" {
#include "ops.h"
}
#include "cuda_common.h"

#define GATE_WARPS 8   /* warps per block */
/* (b,t) rows per backward block: fixes the partial-sum layout.  32 rows
 * give each warp 4 reads in turn and the grid B T / 32 x H blocks (3,072 at
 * the 124M tier): with 128 the warps walked 16 reads each over a quarter
 * as many blocks (the gates of a 124M combo2 step on an H200: 1.63 ms with
 * 128, 1.48 with 32). */
#define GATE_ROWS 32

__device__ __forceinline__ float gate_sigmoid(float z) {
    if (z >= 0.f) return 1.f / (1.f + expf(-z));
    const float e = expf(z);
    return e / (1.f + e);
}

/* log sigmoid(z) = -softplus(-z), without overflow for either sign of z */
__device__ __forceinline__ float gate_log_sigmoid(float z) {
    return (z < 0.f ? z : 0.f) - log1pf(expf(-fabsf(z)));
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* One warp per read r = (b*T + t)*H + h: adjacent warps read adjacent heads
 * of one row, so a block's loads are contiguous. */
__global__ void gate_fwd_kernel(float *__restrict__ g, float *__restrict__ vg,
                                float *__restrict__ logbias, const float *__restrict__ v,
                                long v_stride, GateParams p, long nreads, int T, int H,
                                int d) {
    const long r = (long)blockIdx.x * GATE_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= nreads) return; /* whole warps leave together */
    const long bt = r / H, b = bt / T, t = bt % T;
    const int h = (int)(r % H);
    const float *vr = v + bt * v_stride + (long)h * d;
    const long gi = (b * H + h) * T + t;

    float gv = 1.f, lg = 0.f; /* GATE_NONE: g = 1, log g = 0 */
    if (p.kind != GATE_NONE) {
        float s = 0.f;
        if (p.kind == GATE_NORM) {
            for (int e = lane; e < d; e += 32) s += vr[e] * vr[e];
        } else {
            const float *wh = p.w + (long)h * d;
            for (int e = lane; e < d; e += 32) s += wh[e] * vr[e];
        }
        s = warp_sum(s);
        const float z = p.kind == GATE_NORM ? p.beta * (sqrtf(s) / sqrtf((float)d) - p.tau[h])
                                            : s + p.b[h];
        gv = gate_sigmoid(z);
        lg = gate_log_sigmoid(z);
    }
    if (lane == 0) g[gi] = gv;
    if (p.slot == SLOT_ROUTING) {
        if (lane == 0) logbias[gi] = lg;
    } else {
        float *o = vg + bt * (long)H * d + (long)h * d;
        for (int e = lane; e < d; e += 32) o[e] = gv * vr[e];
    }
}

/* The per-read backward and the block's partial parameter gradient.
 * part[(tile*H + h)*np + k]: k = 0 the dtau (norm) or db (projection) term,
 * k = 1..d the dw term (projection only; np = 1 for the norm gate). */
__global__ void gate_bwd_kernel(float *__restrict__ dv, long dv_stride,
                                const float *__restrict__ dvg, const float *__restrict__ dlogbias,
                                const float *__restrict__ v, long v_stride,
                                const float *__restrict__ g, GateParams p, long BT, int T, int H,
                                int d, int np, double *__restrict__ part) {
    extern __shared__ double acc_sh[]; /* [GATE_WARPS][np] */
    const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int route = p.slot == SLOT_ROUTING, norm = p.kind == GATE_NORM;
    double *acc = acc_sh + warp * np;
    for (int k = lane; k < np; k += 32) acc[k] = 0.0;
    __syncwarp(); /* acc[1+e] is later owned by lane e%32, not by lane (1+e)%32 */

    const long HD = (long)H * d;
    const float *wh = norm ? NULL : p.w + (long)h * d;
    const float rsd = 1.f / sqrtf((float)d);
    const float tau_or_b = norm ? p.tau[h] : p.b[h];
    const long r0 = (long)blockIdx.x * GATE_ROWS;
    const long r1 = r0 + GATE_ROWS < BT ? r0 + GATE_ROWS : BT;
    for (long bt = r0 + warp; bt < r1; bt += GATE_WARPS) {
        const long b = bt / T, t = bt % T, gi = (b * H + h) * T + t;
        const float *vr = v + bt * v_stride + (long)h * d;
        float *dr = dv + bt * dv_stride + (long)h * d;
        const float *dgr = route ? NULL : dvg + bt * HD + (long)h * d;
        float s = 0.f, a = 0.f; /* ||v||^2 or w.v;  dvg.v */
        for (int e = lane; e < d; e += 32) {
            const float x = vr[e];
            s += norm ? x * x : wh[e] * x;
            if (!route) a += dgr[e] * x;
        }
        s = warp_sum(s);
        if (!route) a = warp_sum(a);
        const float nrm = norm ? sqrtf(s) : 0.f;
        const float z = norm ? p.beta * (nrm / sqrtf((float)d) - tau_or_b) : s + tau_or_b;
        const float gv = g[gi], omg = gate_sigmoid(-z); /* omg = 1 - g */
        const float dz = route ? dlogbias[gi] * omg : a * gv * omg;
        /* dv: the direct term (value slot) or what is there (routing slot),
         * plus dz dz/dv */
        const float f = norm ? (nrm > 0.f ? dz * p.beta * rsd / nrm : 0.f) : dz;
        const float *dir = norm ? vr : wh;
        for (int e = lane; e < d; e += 32) {
            float x = route ? dr[e] : gv * dgr[e];
            x += f * dir[e];
            dr[e] = x;
        }
        if (norm) {
            if (lane == 0) acc[0] -= (double)p.beta * dz;
        } else {
            if (lane == 0) acc[0] += dz;
            for (int e = lane; e < d; e += 32) acc[1 + e] += (double)dz * vr[e];
        }
    }
    __syncthreads();
    double *out = part + ((long)blockIdx.x * H + h) * np;
    for (int k = threadIdx.x; k < np; k += blockDim.x) {
        double s = 0.0;
        for (int w = 0; w < GATE_WARPS; w++) s += acc_sh[w * np + k];
        out[k] = s;
    }
}

/* One warp per (h, k): the partials of all tiles in a fixed order, added
 * into the accumulated parameter gradient. */
__global__ void gate_param_reduce_kernel(float *__restrict__ dtau, float *__restrict__ dw,
                                         float *__restrict__ db, const double *__restrict__ part,
                                         int ntiles, int H, int d, int np, int norm) {
    const long o = (long)blockIdx.x * GATE_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long)H * np) return;
    const int h = (int)(o / np), k = (int)(o % np);
    double s = 0.0;
    for (int tile = lane; tile < ntiles; tile += 32) s += part[((long)tile * H + h) * np + k];
    s = warp_sum(s);
    if (lane != 0) return;
    if (norm)
        dtau[h] += (float)s;
    else if (k == 0)
        db[h] += (float)s;
    else
        dw[(long)h * d + k - 1] += (float)s;
}

extern "C" void op_gate_fwd(real *g, real *vg, real *logbias, const real *v, int v_stride,
                            const GateParams *p, int B, int T, int H, int d) {
    const long nreads = (long)B * T * H;
    if (nreads == 0 || d <= 0) return;
    gate_fwd_kernel<<<sg_blocks(nreads, GATE_WARPS), GATE_WARPS * 32, 0, sg_stream()>>>(
        g, vg, logbias, v, v_stride, *p, nreads, T, H, d);
    CUDA_LAUNCHED();
}

extern "C" void op_gate_bwd(real *dv, int dv_stride, real *dtau, real *dw, real *db,
                            const real *dvg, const real *dlogbias, const real *v, int v_stride,
                            const real *g, const GateParams *p, int B, int T, int H, int d) {
    const long BT = (long)B * T, HD = (long)H * d;
    if (BT == 0 || H == 0 || d <= 0) return;
    if (p->kind == GATE_NONE) { /* g = 1: the value slot passes dvg through */
        if (p->slot == SLOT_ROUTING) return;
        CUDA_CHECK(cudaMemcpy2DAsync(dv, sizeof(real) * (size_t)dv_stride, dvg,
                                     sizeof(real) * (size_t)HD, sizeof(real) * (size_t)HD,
                                     (size_t)BT, cudaMemcpyDeviceToDevice, sg_stream()));
        return;
    }
    const int norm = p->kind == GATE_NORM;
    const int np = norm ? 1 : d + 1;
    const int ntiles = (int)((BT + GATE_ROWS - 1) / GATE_ROWS);
    double *part = (double *)sg_scratch(SCRATCH_REDUCE, sizeof(double) * (size_t)ntiles * H * np);
    const size_t shmem = sizeof(double) * GATE_WARPS * (size_t)np;
    if (shmem > 48 * 1024) /* only for head sizes beyond ~760 */
        CUDA_CHECK(cudaFuncSetAttribute(gate_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)shmem));
    gate_bwd_kernel<<<dim3((unsigned)ntiles, (unsigned)H), GATE_WARPS * 32, shmem, sg_stream()>>>(
        dv, dv_stride, dvg, dlogbias, v, v_stride, g, *p, BT, T, H, d, np, part);
    CUDA_LAUNCHED();
    gate_param_reduce_kernel<<<sg_blocks((long)H * np, GATE_WARPS), GATE_WARPS * 32, 0,
                               sg_stream()>>>(dtau, dw, db, part, ntiles, H, d, np, norm);
    CUDA_LAUNCHED();
}
