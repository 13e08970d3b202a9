/* Per-read gates on the device (paper Section 3.3, Eqs. 3 and 4); the CPU
 * reference is kernels/cpu/gate.c.  For the head-h slice v of the value row
 * at (b,t):
 *   norm gate:        z = beta (||v|| / sqrt(d) - tau_h)
 *   projection gate:  z = w_h . v + b_h
 *   g = sigmoid(z)
 * Value slot:   vg = g v, in fp32, or rounded to bf16 when vg is promised as
 *               an attention operand (ops.h): the attention alone reads it,
 *               in bf16, as autocast's attention rounds the fp32 g v
 * Routing slot: logbias = log g = -softplus(-z) = min(z,0) - log1p(exp(-|z|))
 *
 * Backward, with dz/dv = beta v / (sqrt(d) ||v||) (norm; 0 at v = 0) or w_h:
 *   value slot:   a = dvg . v,  dz = a g (1 - g),  dv = g dvg + dz dz/dv
 *   routing slot: dz = dlogbias (1 - g),          dv += dz dz/dv
 *   dtau_h += -beta dz,  dw_h += dz v,  db_h += dz
 * 1 - g is sigmoid(-z) of the recomputed z, not 1 - (saved g), so it keeps
 * its relative accuracy when the gate is nearly open.
 *
 * All gate math is fp32 (the paper runs it outside autocast).  The ops move
 * a few bytes per flop (forward: read v, write vg; backward: read v and dvg,
 * write dv), so they are written to run at memory bandwidth.
 *
 * Vector path (d % 4 == 0, row strides % 4 == 0, 16-byte-aligned tensors,
 * 8-byte for those stored in bf16, d <= 512).  A read is handled by a group of L lanes, L the power of two
 * >= d/4 capped at 32, each lane holding NV = ceil(d / 4L) float4 of it
 * (element 4j..4j+3 in lane j % L); a warp runs G = 32/L reads side by side
 * (d = 64: 16 lanes, two reads).  A lane's share of a dot product is summed
 * over its float4 in a fixed order, and the group adds the shares with an
 * xor butterfly over offsets L/2, ..., 1: lanes i and i^o add the same two
 * floats, and float addition is commutative, so every lane of the group
 * ends with the same bits, hence the same z, g and dz, with no broadcast.
 * Each lane issues the loads of several reads before the first shuffle
 * (GATE_FWD_ILP, GATE_BWD_ILP), so the latency of one read's butterfly hides
 * behind the others' loads.
 *
 * Scalar path (any other shape): one warp per read, lane e takes elements
 * e, e+32, ..., the same butterfly over 32 lanes.
 *
 * Determinism of the parameter gradients (no float atomics).  The backward
 * grid is (row tiles) x (heads), so a block works on one head and a lane's
 * share of dw_h stays its own across the tile.  Vector path: a tile holds
 * GATE_WARPS G GATE_RPG rows; group q of warp w (gq = w G + q) takes rows
 * gq, gq + 8G, ... of it (GATE_RPG of them), and each lane adds dz v over
 * its rows in that order in registers.  The lanes' sums then meet in a
 * fixed order: an xor butterfly over the G groups of a warp (in double), the
 * 8 warps' sums added in warp order through shared memory, one partial per
 * (tile, h).  Scalar path: tiles of GATE_ROWS rows, warp w takes rows w,
 * w+8, ... and adds its terms in double in its own shared-memory row; the
 * block adds its 8 rows in warp order.  A second kernel adds each (h, k)'s
 * partials over the tiles (warp w takes tiles w, w+8, ... in order, then
 * warp 0 adds the 8 sums in order) into dtau / db / dw.  Every order
 * depends only on (B, T, H, d) and the path, which depends only on the
 * shapes and the alignment of the pointers, never on the device or timing. */
extern "C" {
#include "ops.h"
}
#include <limits.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_common.h"

#define GATE_WARPS 8 /* warps per block */
/* Scalar path: (b,t) rows per backward block (fixes its partial-sum layout). */
#define GATE_ROWS 32
/* Vector path: reads per group per backward tile, so a tile is
 * GATE_WARPS * G * GATE_RPG rows (d = 64: 64 rows, 128 tiles at B T = 8192).
 * A lane adds GATE_RPG terms per dw element in fp32 before anything is
 * added in double (see gate_bwd_vec_kernel). */
#define GATE_RPG 4
#define GATE_MAX_NV 4 /* float4 per lane: the vector path takes d <= 4 * 32 * 4 */
/* Reads a lane has in flight at once: 64 bytes of v per lane forward, and
 * 2 x 32 bytes (v and dvg, or v and dv) backward, enough outstanding loads
 * per SM to cover the memory latency at half occupancy, with no spills at
 * NV = 4.  GATE_RPG must be a multiple of GATE_BWD_ILP. */
#define GATE_FWD_ILP(NV) ((NV) >= 4 ? 1 : 4 / (NV))
#define GATE_BWD_ILP(NV) ((NV) >= 2 ? 1 : 2)

/* log sigmoid(z) = -softplus(-z), without overflow for either sign of z */
__device__ __forceinline__ float gate_log_sigmoid(float z) {
    return (z < 0.f ? z : 0.f) - log1pf(expf(-fabsf(z)));
}

/* The backward block's partial for (tile blockIdx.x, head h): the
 * GATE_WARPS rows of sh (np sums each, one row per warp) added in warp
 * order, to part[(tile H + h) np + k]. */
__device__ __forceinline__ void gate_block_partial(double *__restrict__ part, const double *sh, int H, int h,
                                                   int np) {
    double *out = part + ((long)blockIdx.x * H + h) * np;
    for (int k = threadIdx.x; k < np; k += blockDim.x) {
        double t = 0.0;
        for (int w = 0; w < GATE_WARPS; w++) t += sh[w * np + k];
        out[k] = t;
    }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* vg's elements: fp32, or bf16 when vg is stored so (ops.h,
 * op_attention_operand: the attention alone reads it, and under autocast
 * it would round g v to bf16 itself) */
__device__ __forceinline__ void st_vg4(float *o, float4 x) { sg_st4(o, x); }
__device__ __forceinline__ void st_vg4(__nv_bfloat16 *o, float4 x) { sg_st_bf16x4(o, x); }
__device__ __forceinline__ void st_vg1(float *o, float x) { *o = x; }
__device__ __forceinline__ void st_vg1(__nv_bfloat16 *o, float x) { *o = sg_cast_bf16(x); }

/* ---- vector path -------------------------------------------------------- */

__device__ __forceinline__ float gate_dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

/* s[u] = the sum of s[u] over the L lanes of each group (lane bits below
 * log2 L); every lane of a group gets the same bits.  The U sums are
 * independent, interleaved so their shuffles overlap. */
template <int L, int U>
__device__ __forceinline__ void group_sums(float (&s)[U]) {
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1)
#pragma unroll
        for (int u = 0; u < U; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
}

/* Forward: warp w takes the GATE_FWD_ILP(NV) G reads r = (w U + u) G + q
 * (u < U, q its group), all loaded before the first shuffle.  Adjacent
 * groups take adjacent heads, so a warp's loads of one u are G d
 * contiguous floats while its G heads stay in one row. */
template <int L, int NV, typename TV, typename TO>
__global__ void __launch_bounds__(GATE_WARPS * 32)
    gate_fwd_vec_kernel(float *__restrict__ g, TO *__restrict__ vg, float *__restrict__ logbias,
                        const TV *__restrict__ v, long v_stride, GateParams p, long nreads, int T, int H, int d) {
    constexpr int G = 32 / L, U = GATE_FWD_ILP(NV);
    const int lane = threadIdx.x % 32, q = lane / L, c = lane % L, n4 = d / 4;
    const int gated = p.kind != GATE_NONE, norm = p.kind == GATE_NORM, proj = p.kind == GATE_PROJ;
    const long r0 = ((long)blockIdx.x * GATE_WARPS + threadIdx.x / 32) * U * G + q;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);

    float4 x[U][NV], wv[U][NV];
    float tb[U];
    bool ok[U];
    unsigned bt[U], h[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const long r = r0 + (long)u * G;
        ok[u] = r < nreads;
        const unsigned ru = ok[u] ? (unsigned)r : 0u; /* nreads <= INT_MAX */
        bt[u] = ru / (unsigned)H;
        h[u] = ru - bt[u] * (unsigned)H;
        const TV *vr = v + (long)bt[u] * v_stride + (long)h[u] * d;
        const float *wr = proj ? p.w + (long)h[u] * d : NULL;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int j = c + k * L;
            const bool in = ok[u] && j < n4;
            x[u][k] = in ? ldv4(vr + 4 * j) : zero;
            wv[u][k] = in && proj ? sg_ld4(wr + 4 * j) : zero;
        }
        tb[u] = norm ? p.tau[h[u]] : proj ? p.b[h[u]] : 0.f;
    }
    float s[U];
    if (gated) { /* warp-uniform: the whole warp reaches the shuffles */
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u] = 0.f;
#pragma unroll
            for (int k = 0; k < NV; k++) s[u] += gate_dot4(norm ? x[u][k] : wv[u][k], x[u][k]);
        }
        group_sums<L>(s);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (!ok[u]) continue;
        float gv = 1.f, lg = 0.f; /* GATE_NONE: g = 1, log g = 0 */
        if (gated) {
            float nrm;
            const float z = sg_gate_z(s[u], norm, p.beta, tb[u], d, &nrm);
            gv = sg_sigmoid(z);
            if (p.slot == SLOT_ROUTING) lg = gate_log_sigmoid(z);
        }
        const unsigned b = bt[u] / (unsigned)T, t = bt[u] - b * (unsigned)T;
        const long gi = ((long)b * H + h[u]) * T + t;
        if (c == 0) {
            g[gi] = gv;
            if (p.slot == SLOT_ROUTING) logbias[gi] = lg;
        }
        if (p.slot == SLOT_VALUE) {
            TO *o = vg + ((long)bt[u] * H + h[u]) * d;
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int j = c + k * L;
                const float4 e = x[u][k];
                if (j < n4) st_vg4(o + 4 * j, make_float4(gv * e.x, gv * e.y, gv * e.z, gv * e.w));
            }
        }
    }
}

/* Backward for one (tile, h) block; part as gate_bwd_kernel's.
 *
 * A lane's dw terms dz v (and its dz, the same in every lane of its group)
 * are added in fp32 registers over the GATE_RPG reads of its group, in
 * read order, then carried in double through the block's fixed-order
 * combine and the partials' sum.  GATE_RPG fp32 additions of fp32 products
 * carry a relative error of at most ~GATE_RPG 2^-24 of the sum of the
 * terms' magnitudes, below the rounding of dz itself, and the sums over
 * thousands of rows, where fp32 would lose digits, are all in double.
 * fp32 keeps the per-read work at one FMA per element: double there would
 * cost a conversion and a DFMA per element, which on sm_120 (fp64 at 1/64
 * of the fp32 rate) comes to about a third of the op's memory time. */
template <int L, int NV, typename TV>
__global__ void __launch_bounds__(GATE_WARPS * 32)
    gate_bwd_vec_kernel(float *__restrict__ dv, long dv_stride, const float *__restrict__ dvg,
                        const float *__restrict__ dlogbias, const TV *__restrict__ v, long v_stride,
                        const float *__restrict__ g, GateParams p, long BT, int T, int H, int d, int np,
                        double *__restrict__ part, __nv_bfloat16 *__restrict__ tw, int store) {
    extern __shared__ double wsum_sh[]; /* [GATE_WARPS][np] */
    constexpr int G = 32 / L, U = GATE_BWD_ILP(NV), STEP = GATE_WARPS * G;
    const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane / L, c = lane % L;
    const int n4 = d / 4, route = p.slot == SLOT_ROUTING, norm = p.kind == GATE_NORM;
    const long HD = (long)H * d;
    const float rsd = 1.f / sqrtf((float)d), tau_or_b = norm ? p.tau[h] : p.b[h];
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);

    float4 w[NV], acc[NV]; /* w_h (projection), this lane's dw terms */
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = c + k * L;
        w[k] = !norm && j < n4 ? sg_ld4(p.w + (long)h * d + 4 * j) : zero;
        acc[k] = zero;
    }
    float acc0 = 0.f; /* sum of dz */
    const long r0 = (long)blockIdx.x * STEP * GATE_RPG + warp * G + q;
#pragma unroll
    for (int i0 = 0; i0 < GATE_RPG; i0 += U) {
        /* every load of the U reads first: v, dvg (value) or dv (routing),
         * g and dlogbias do not wait for any reduction */
        float4 x[U][NV], y[U][NV];
        float gv[U], dl[U];
        bool ok[U];
        long row[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const long bt = r0 + (long)(i0 + u) * STEP;
            ok[u] = bt < BT;
            row[u] = ok[u] ? bt : 0;
            const unsigned b = (unsigned)row[u] / (unsigned)T, t = (unsigned)row[u] - b * (unsigned)T;
            const long gi = ((long)b * H + h) * T + t;
            const TV *vr = v + row[u] * v_stride + (long)h * d;
            const float *yr = route ? dv + row[u] * dv_stride + (long)h * d : dvg + row[u] * HD + (long)h * d;
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int j = c + k * L;
                const bool in = ok[u] && j < n4;
                x[u][k] = in ? ldv4(vr + 4 * j) : zero;
                y[u][k] = in ? sg_ld4(yr + 4 * j) : zero;
            }
            /* a row past the end gets g = dlogbias = 0, hence dz = 0 */
            gv[u] = ok[u] ? g[gi] : 0.f;
            dl[u] = ok[u] && route ? dlogbias[gi] : 0.f;
        }
        float s[U], a[U]; /* ||v||^2 or w.v;  dvg.v */
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u] = a[u] = 0.f;
#pragma unroll
            for (int k = 0; k < NV; k++) {
                s[u] += gate_dot4(norm ? x[u][k] : w[k], x[u][k]);
                a[u] += gate_dot4(y[u][k], x[u][k]);
            }
        }
        group_sums<L>(s);
        if (!route) group_sums<L>(a);
#pragma unroll
        for (int u = 0; u < U; u++) {
            float nrm;
            const float z = sg_gate_z(s[u], norm, p.beta, tau_or_b, d, &nrm);
            const float omg = sg_sigmoid(-z); /* 1 - g */
            const float dz = route ? dl[u] * omg : a[u] * gv[u] * omg;
            /* dv: the direct term (value slot) or what is there (routing
             * slot), plus dz dz/dv = f (v or w_h) */
            const float f = sg_gate_dir(dz, norm, p.beta, rsd, nrm);
            float *dr = dv + row[u] * dv_stride + (long)h * d;
            __nv_bfloat16 *tr = tw ? tw + row[u] * dv_stride + (long)h * d : nullptr;
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int j = c + k * L;
                const float4 dir = norm ? x[u][k] : w[k], yk = y[u][k];
                const float gy = route ? 1.f : gv[u];
                if (ok[u] && j < n4) {
                    const float4 o = make_float4(gy * yk.x + f * dir.x, gy * yk.y + f * dir.y,
                                                 gy * yk.z + f * dir.z, gy * yk.w + f * dir.w);
                    if (store) sg_st4(dr + 4 * j, o);
                    if (tr) sg_st_bf16x4(tr + 4 * j, o);
                }
                if (!norm) {
                    acc[k].x = fmaf(dz, x[u][k].x, acc[k].x);
                    acc[k].y = fmaf(dz, x[u][k].y, acc[k].y);
                    acc[k].z = fmaf(dz, x[u][k].z, acc[k].z);
                    acc[k].w = fmaf(dz, x[u][k].w, acc[k].w);
                }
            }
            acc0 += dz;
        }
    }

    /* the G groups of the warp: an xor butterfly over the group bits of the
     * lane, in double; lane c of every group then holds the warp's sums */
    double s0 = acc0, sw[NV][4];
#pragma unroll
    for (int k = 0; k < NV; k++)
        sw[k][0] = acc[k].x, sw[k][1] = acc[k].y, sw[k][2] = acc[k].z, sw[k][3] = acc[k].w;
#pragma unroll
    for (int o = L; o < 32; o <<= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        if (!norm)
#pragma unroll
            for (int k = 0; k < NV; k++)
#pragma unroll
                for (int e = 0; e < 4; e++) sw[k][e] += __shfl_xor_sync(0xffffffffu, sw[k][e], o);
    }
    double *mine = wsum_sh + warp * np;
    if (q == 0) {
        if (c == 0) mine[0] = norm ? -(double)p.beta * s0 : s0;
        if (!norm)
#pragma unroll
            for (int k = 0; k < NV; k++) {
                const int j = c + k * L;
                if (j < n4)
#pragma unroll
                    for (int e = 0; e < 4; e++) mine[1 + 4 * j + e] = sw[k][e];
            }
    }
    __syncthreads();
    gate_block_partial(part, wsum_sh, H, h, np);
}

/* The vector kernels' instances: L lanes per read and NV float4 per lane
 * for n4 = d/4 float4 per read (n4 <= 32 GATE_MAX_NV). */
template <class F>
static void gate_by_width(int n4, F &&f) {
    using C1 = std::integral_constant<int, 1>;
    using C2 = std::integral_constant<int, 2>;
    using C32 = std::integral_constant<int, 32>;
    if (n4 <= 1) f(C1(), C1());
    else if (n4 <= 2) f(C2(), C1());
    else if (n4 <= 4) f(std::integral_constant<int, 4>(), C1());
    else if (n4 <= 8) f(std::integral_constant<int, 8>(), C1());
    else if (n4 <= 16) f(std::integral_constant<int, 16>(), C1());
    else if (n4 <= 32) f(C32(), C1());
    else if (n4 <= 64) f(C32(), C2());
    else f(C32(), std::integral_constant<int, GATE_MAX_NV>());
}

static inline bool gate_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* f(v as the kernels read it, whether the vector path may): the fp32 v, or
 * its bf16 when v is a part of the qkv stored in bf16 (ops.h,
 * op_attention_operand; sg_bf16_inside), whose four-element groups then
 * need 8-byte alignment instead of 16. */
template <class F>
static void gate_with_v(const float *v, F &&f) {
    const __nv_bfloat16 *vb = sg_bf16_inside(v);
    if (vb) f(vb, ((uintptr_t)vb & 7) == 0);
    else f(v, gate_aligned(v));
}

/* ---- scalar path -------------------------------------------------------- */

__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* One warp per read r = (b*T + t)*H + h: adjacent warps read adjacent heads
 * of one row, so a block's loads are contiguous. */
template <typename TV, typename TO>
__global__ void gate_fwd_kernel(float *__restrict__ g, TO *__restrict__ vg,
                                float *__restrict__ logbias, const TV *__restrict__ v,
                                long v_stride, GateParams p, long nreads, int T, int H,
                                int d) {
    const long r = (long)blockIdx.x * GATE_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= nreads) return; /* whole warps leave together */
    const long bt = r / H, b = bt / T, t = bt % T;
    const int h = (int)(r % H);
    const TV *vr = v + bt * v_stride + (long)h * d;
    const long gi = (b * H + h) * T + t;

    float gv = 1.f, lg = 0.f; /* GATE_NONE: g = 1, log g = 0 */
    if (p.kind != GATE_NONE) {
        float s = 0.f;
        if (p.kind == GATE_NORM) {
            for (int e = lane; e < d; e += 32) s += ld1(vr, e) * ld1(vr, e);
        } else {
            const float *wh = p.w + (long)h * d;
            for (int e = lane; e < d; e += 32) s += wh[e] * ld1(vr, e);
        }
        s = warp_sum(s);
        const float z = p.kind == GATE_NORM ? p.beta * (sqrtf(s) / sqrtf((float)d) - p.tau[h])
                                            : s + p.b[h];
        gv = sg_sigmoid(z);
        lg = gate_log_sigmoid(z);
    }
    if (lane == 0) g[gi] = gv;
    if (p.slot == SLOT_ROUTING) {
        if (lane == 0) logbias[gi] = lg;
    } else {
        TO *o = vg + bt * (long)H * d + (long)h * d;
        for (int e = lane; e < d; e += 32) st_vg1(o + e, gv * ld1(vr, e));
    }
}

/* The per-read backward and the block's partial parameter gradient.
 * part[(tile*H + h)*np + k]: k = 0 the dtau (norm) or db (projection) term,
 * k = 1..d the dw term (projection only; np = 1 for the norm gate). */
template <typename TV>
__global__ void gate_bwd_kernel(float *__restrict__ dv, long dv_stride,
                                const float *__restrict__ dvg, const float *__restrict__ dlogbias,
                                const TV *__restrict__ v, long v_stride,
                                const float *__restrict__ g, GateParams p, long BT, int T, int H,
                                int d, int np, double *__restrict__ part, __nv_bfloat16 *__restrict__ tw,
                                int store) {
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
        const TV *vr = v + bt * v_stride + (long)h * d;
        float *dr = dv + bt * dv_stride + (long)h * d;
        __nv_bfloat16 *tr = tw ? tw + bt * dv_stride + (long)h * d : nullptr;
        const float *dgr = route ? NULL : dvg + bt * HD + (long)h * d;
        float s = 0.f, a = 0.f; /* ||v||^2 or w.v;  dvg.v */
        for (int e = lane; e < d; e += 32) {
            const float x = ld1(vr, e);
            s += norm ? x * x : wh[e] * x;
            if (!route) a += dgr[e] * x;
        }
        s = warp_sum(s);
        if (!route) a = warp_sum(a);
        const float nrm = norm ? sqrtf(s) : 0.f;
        const float z = norm ? p.beta * (nrm / sqrtf((float)d) - tau_or_b) : s + tau_or_b;
        const float gv = g[gi], omg = sg_sigmoid(-z); /* omg = 1 - g */
        const float dz = route ? dlogbias[gi] * omg : a * gv * omg;
        /* dv: the direct term (value slot) or what is there (routing slot),
         * plus dz dz/dv */
        const float f = sg_gate_dir(dz, norm, p.beta, rsd, nrm);
        for (int e = lane; e < d; e += 32) {
            float x = route ? dr[e] : gv * dgr[e];
            x += f * (norm ? ld1(vr, e) : wh[e]);
            if (store) dr[e] = x;
            if (tr) tr[e] = sg_cast_bf16(x);
        }
        if (norm) {
            if (lane == 0) acc[0] -= (double)p.beta * dz;
        } else {
            if (lane == 0) acc[0] += dz;
            for (int e = lane; e < d; e += 32) acc[1 + e] += (double)dz * ld1(vr, e);
        }
    }
    __syncthreads();
    gate_block_partial(part, acc_sh, H, h, np);
}

/* grid (ceil(np / 32), H): lane l of every warp owns k = 32 blockIdx.x + l
 * of head h, so a warp's loads are 32 adjacent partials; warp w adds the
 * tiles w, w+8, ... in order, then warp 0 adds the 8 warps' sums in warp
 * order, and the result is added into the accumulated parameter gradient. */
__global__ void gate_param_reduce_kernel(float *__restrict__ dtau, float *__restrict__ dw, float *__restrict__ db,
                                         const double *__restrict__ part, int ntiles, int H, int d, int np,
                                         int norm) {
    __shared__ double red_sh[GATE_WARPS][32];
    const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32, k = blockIdx.x * 32 + lane;
    double s = 0.0;
    if (k < np)
        for (int tile = warp; tile < ntiles; tile += GATE_WARPS) s += part[((long)tile * H + h) * np + k];
    red_sh[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || k >= np) return;
    for (int wi = 1; wi < GATE_WARPS; wi++) s += red_sh[wi][lane];
    if (norm)
        dtau[h] += (float)s;
    else if (k == 0)
        db[h] += (float)s;
    else
        dw[(long)h * d + k - 1] += (float)s;
}

void sg_gate_param_reduce(float *dtau, float *dw, float *db, const double *part, int ntiles, int H, int d, int np,
                          int norm) {
    gate_param_reduce_kernel<<<dim3((unsigned)((np + 31) / 32), (unsigned)H), GATE_WARPS * 32, 0, sg_stream()>>>(
        dtau, dw, db, part, ntiles, H, d, np, norm);
    CUDA_LAUNCHED();
}

extern "C" void op_gate_fwd(real *g, real *vg, real *logbias, const real *v, int v_stride,
                            const GateParams *p, int B, int T, int H, int d) {
    const long nreads = (long)B * T * H;
    if (nreads == 0 || d <= 0) return;
    /* the value slot's vg in bf16 when it is promised as an attention operand */
    __nv_bfloat16 *vgb = p->slot == SLOT_VALUE ? sg_bf16_output(vg, nreads * d) : nullptr;
    const bool vg_aligned = p->slot == SLOT_ROUTING || (vgb ? ((uintptr_t)vgb & 7) == 0 : gate_aligned(vg));
    gate_with_v(v, [&](auto *vr, bool v_aligned) {
        using TV = std::remove_const_t<std::remove_pointer_t<decltype(vr)>>;
        const bool vec = d % 4 == 0 && d <= 4 * 32 * GATE_MAX_NV && v_stride % 4 == 0 && nreads <= INT_MAX / 2 &&
                         v_aligned && vg_aligned && (p->kind != GATE_PROJ || gate_aligned(p->w));
        auto launch = [&](auto *vo) {
            using TO = std::remove_pointer_t<decltype(vo)>;
            if (vec) {
                gate_by_width(d / 4, [&](auto l, auto nv) {
                    constexpr int L = decltype(l)::value, NV = decltype(nv)::value;
                    const int per_block = GATE_WARPS * GATE_FWD_ILP(NV) * (32 / L);
                    gate_fwd_vec_kernel<L, NV, TV, TO><<<sg_blocks(nreads, per_block), GATE_WARPS * 32, 0,
                                                         sg_stream()>>>(g, vo, logbias, vr, v_stride, *p, nreads, T,
                                                                        H, d);
                });
            } else {
                gate_fwd_kernel<TV, TO><<<sg_blocks(nreads, GATE_WARPS), GATE_WARPS * 32, 0, sg_stream()>>>(
                    g, vo, logbias, vr, v_stride, *p, nreads, T, H, d);
            }
        };
        if (vgb) launch(vgb);
        else launch(vg);
        CUDA_LAUNCHED();
    });
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
    const size_t shmem = sizeof(double) * GATE_WARPS * (size_t)np;
    /* The value slot's dv as the last third of dqkv's rows: the twin the
     * attention's backward began right before gets its dv part here
     * (cuda_common.h, sg_twin_rest), and the fp32 is stored unless dqkv
     * was promised to matmuls alone. */
    const float *base = NULL;
    __nv_bfloat16 *tw = NULL;
    int store = 1;
    if (p->slot == SLOT_VALUE && dv_stride == 3 * HD) {
        base = dv - 2 * HD;
        __nv_bfloat16 *t = sg_twin_rest(base, BT * 3 * HD, &store);
        if (t) tw = t + 2 * HD;
    }
    int ntiles = 0;
    double *part = NULL;
    gate_with_v(v, [&](auto *vr, bool v_aligned) {
        using TV = std::remove_const_t<std::remove_pointer_t<decltype(vr)>>;
        const bool vec = d % 4 == 0 && d <= 4 * 32 * GATE_MAX_NV && v_stride % 4 == 0 && dv_stride % 4 == 0 &&
                         BT <= INT_MAX / 2 && v_aligned && gate_aligned(dv) &&
                         (p->slot == SLOT_ROUTING || gate_aligned(dvg)) && (norm || gate_aligned(p->w));
        int rows = GATE_ROWS; /* per tile */
        if (vec) gate_by_width(d / 4, [&](auto l, auto) { rows = GATE_WARPS * (32 / decltype(l)::value) * GATE_RPG; });
        ntiles = (int)((BT + rows - 1) / rows);
        part = (double *)sg_scratch(SCRATCH_REDUCE, sizeof(double) * (size_t)ntiles * H * np);
        if (vec) {
            /* shmem <= 8 (4 32 GATE_MAX_NV + 1) doubles: under the default 48 KiB */
            gate_by_width(d / 4, [&](auto l, auto nv) {
                constexpr int L = decltype(l)::value, NV = decltype(nv)::value;
                gate_bwd_vec_kernel<L, NV, TV><<<dim3((unsigned)ntiles, (unsigned)H), GATE_WARPS * 32, shmem,
                                                 sg_stream()>>>(dv, dv_stride, dvg, dlogbias, vr, v_stride, g, *p, BT,
                                                                T, H, d, np, part, tw, store);
            });
        } else {
            if (shmem > 48 * 1024) /* only for head sizes beyond ~760 */
                CUDA_CHECK(cudaFuncSetAttribute(gate_bwd_kernel<TV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)shmem));
            gate_bwd_kernel<TV><<<dim3((unsigned)ntiles, (unsigned)H), GATE_WARPS * 32, shmem, sg_stream()>>>(
                dv, dv_stride, dvg, dlogbias, vr, v_stride, g, *p, BT, T, H, d, np, part, tw, store);
        }
        CUDA_LAUNCHED();
    });
    sg_gate_param_reduce(dtau, dw, db, part, ntiles, H, d, np, norm);
    if (tw) sg_twin_written(base, BT * 3 * HD);
}
