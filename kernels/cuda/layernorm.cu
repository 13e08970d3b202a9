/* LayerNorm on the GPU, the math of kernels/cpu/layernorm.c:
 *   xhat = (x - mean) rstd,  rstd = 1/sqrt(var + 1e-5)  (biased variance),  y = xhat w + b
 *   dx += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dxhat = dy w
 *   dw += sum_rows dy xhat,  db += sum_rows dy
 * One warp per row; row statistics in fp32 with a two-pass variance (the
 * second pass over the row, not one pass's cancelling sums).  dw/db: each
 * block writes per-column partial sums over its rows, and a second kernel
 * adds the partials in a fixed order: deterministic, no atomics.  Rows of
 * C <= 1024 with 4 | C (every model's) take the register path below, which
 * holds the row in registers and forms the dw/db partials in the dx kernel;
 * other widths take the scalar kernels, which re-read the row from L1/L2.
 *
 * y is the next matmul's x (qkv, fc) and the accumulated dx its dout
 * (fc_proj, attn_proj: src/model.c's backward), so the kernels that write
 * them also write their bf16 twins t (cuda_common.h, sg_twin_begin; NULL:
 * none), from the float they store.  The forwards store y only when it is
 * not NULL: an output promised to matmuls alone keeps its twin only
 * (sg_twin_fp32).  The backward's dy, the dinp of the qkv or fc product,
 * is read in bf16 when the model promised it as a bf16 operand (ops.h,
 * op_bf16_operand; sg_bf16_stored), as autocast hands LayerNorm the bf16
 * gradient of a linear layer's input; the math stays fp32. */
#include <stdint.h>

#include <type_traits>

#include "cuda_common.h"

enum { WARPS = 8, ROWS_PER_BLOCK = 64 };

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* One row per warp, after its first pass: s is this lane's partial sum of
 * x[c] over c = lane, lane + 32, ..., so the pass that produces x may also
 * sum it.  mean = sum x / C, var = sum (x - mean)^2 / C (second pass),
 * y = (x - mean) rsqrt(var + eps) w + b, and t (the row of y's twin, or
 * NULL) its bf16.  The lane reads back only the x[c] it summed (and, in the
 * fused kernel, wrote), so no synchronisation. */
__device__ __forceinline__ void ln_row(float *y, __nv_bfloat16 *t, float *mean, float *rstd, const float *x, float s,
                                       const float *w, const float *b, int C, int lane) {
    float mu = warp_sum(s) / C;
    float v = 0;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - mu;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    for (int c = lane; c < C; c += 32) {
        float yc = (x[c] - mu) * r * w[c] + (b ? b[c] : 0.0f);
        if (y) y[c] = yc;
        if (t) t[c] = sg_cast_bf16(yc);
    }
    if (lane == 0) {
        *mean = mu;
        *rstd = r;
    }
}

__global__ void ln_fwd_k(float *out, __nv_bfloat16 *twin, float *mean, float *rstd, const float *inp,
                         const float *w, const float *b, int N, int C) {
    int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) s += x[c];
    ln_row(out ? out + (size_t)row * C : NULL, twin ? twin + (size_t)row * C : NULL, mean + row, rstd + row, x, s, w,
           b, C, lane);
}

/* res = a + b (add_k's float add) with the lane sums of ln_fwd_k taken in
 * the same pass, then ln_row: the bits of op_add then op_layernorm_fwd.
 * Each element is read before it is written, by the same thread, so res
 * may be a or b. */
__global__ void res_ln_fwd_k(float *res, float *out, __nv_bfloat16 *twin, float *mean, float *rstd, const float *a,
                             const float *b, const float *w, const float *bias, int N, int C) {
    int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    size_t o = (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) {
        float x = a[o + c] + b[o + c];
        res[o + c] = x;
        s += x;
    }
    ln_row(out ? out + o : NULL, twin ? twin + o : NULL, mean + row, rstd + row, res + o, s, w, bias, C, lane);
}

/* dy's element in fp32, from fp32 or from bf16 storage */
__device__ __forceinline__ float ln_val(const float *p) { return *p; }
__device__ __forceinline__ float ln_val(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

/* dx for one row per warp, and the twin of the sum dx holds after it */
template <typename TD>
__global__ void ln_bwd_dx_k(float *dinp, __nv_bfloat16 *twin, const TD *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, int N, int C) {
    int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    const TD *dy = dout + (size_t)row * C;
    float m = mean[row], r = rstd[row], sd = 0, sdx = 0;
    for (int c = lane; c < C; c += 32) {
        float xh = (x[c] - m) * r, g = ln_val(dy + c) * w[c];
        sd += g;
        sdx += g * xh;
    }
    float md = warp_sum(sd) / C, mdx = warp_sum(sdx) / C;
    float *dx = dinp + (size_t)row * C;
    __nv_bfloat16 *t = twin ? twin + (size_t)row * C : NULL;
    for (int c = lane; c < C; c += 32) {
        float xh = (x[c] - m) * r;
        float v = dx[c] + r * (ln_val(dy + c) * w[c] - md - xh * mdx);
        dx[c] = v;
        if (t) t[c] = sg_cast_bf16(v);
    }
}

/* part[blk][0..C) = sum over the block's rows of dy xhat, part[blk][C..2C) of dy */
template <typename TD>
__global__ void ln_bwd_part_k(float *part, const TD *dout, const float *inp, const float *mean, const float *rstd,
                              int N, int C) {
    int r0 = blockIdx.y * ROWS_PER_BLOCK, r1 = r0 + ROWS_PER_BLOCK < N ? r0 + ROWS_PER_BLOCK : N;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        float sw = 0, sb = 0;
        for (int i = r0; i < r1; i++) {
            float dy = ln_val(dout + (size_t)i * C + c);
            sw += dy * (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            sb += dy;
        }
        part[(size_t)blockIdx.y * 2 * C + c] = sw;
        part[(size_t)blockIdx.y * 2 * C + C + c] = sb;
    }
}

/* One warp per column: lane l adds the partials of blocks l, l + 32, ... in
 * order, then a fixed butterfly.  (One thread per column summing all the
 * blocks in turn left C threads doing nblk dependent loads each: at N = 8192
 * rows, 128 loads in a row on 768 threads.  On an H200 LayerNorm's share of
 * a 10M step went from 2.50 to 2.23 ms; at 124M it stayed at 2.9 ms.) */
__global__ void ln_bwd_sum_k(float *dw, float *db, const float *part, int nblk, int C) {
    int c = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (c >= C) return;
    float sw = 0, sb = 0;
    for (int k = lane; k < nblk; k += 32) {
        sw += part[(size_t)k * 2 * C + c];
        sb += part[(size_t)k * 2 * C + C + c];
    }
    sw = warp_sum(sw);
    sb = warp_sum(sb);
    if (lane) return;
    dw[c] += sw;
    if (db) db[c] += sb;
}

/* ---- the register path: C % 4 == 0 and C <= 128 LN_MAX_NV ---------------
 * A warp still owns a row, but holds it in registers: lane l takes the
 * float4 j = l + 32 k (k < NV) of the row, columns 4j .. 4j+3, so each of
 * the NV loads of a warp is 512 contiguous bytes, and the statistics'
 * second pass and the output pass read registers, not L1.  The backward
 * also forms the dw/db partials from those registers (a lane's columns are
 * the same in every row; it adds them up in shared memory, ln_bwd_reg_k),
 * so it reads dy and x once instead of twice.
 *
 * The sums run in one order whatever the loads: a lane adds its groups in
 * k order, each group as (e0 + e1) + (e2 + e3), then the butterfly.  A
 * tensor that is not 16-byte aligned is read with scalar loads (LOAD4
 * false) into the same groups, so op_residual_layernorm_fwd gives the bits
 * of op_add then op_layernorm_fwd whichever of them can use float4. */
enum { LN_MAX_NV = 8 };

template <bool LOAD4>
__device__ __forceinline__ float4 ln_ld4(const float *p) {
    if (LOAD4) return *reinterpret_cast<const float4 *>(p);
    return make_float4(p[0], p[1], p[2], p[3]);
}
/* four bf16 (8-byte aligned with LOAD4), widened */
template <bool LOAD4>
__device__ __forceinline__ float4 ln_ld4(const __nv_bfloat16 *p) {
    if (LOAD4) return ldv4(p);
    return make_float4(__bfloat162float(p[0]), __bfloat162float(p[1]), __bfloat162float(p[2]),
                       __bfloat162float(p[3]));
}
template <bool LOAD4>
__device__ __forceinline__ void ln_st4(float *p, float4 v) {
    if (LOAD4) {
        *reinterpret_cast<float4 *>(p) = v;
    } else {
        p[0] = v.x, p[1] = v.y, p[2] = v.z, p[3] = v.w;
    }
}
__device__ __forceinline__ float ln_sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* y = (x - mean) rstd w + b for a row held as x[k] (slots j < n4), after
 * the lane sums s of x; writes y, its twin t (or NULL), mean and rstd.
 * The lane's columns of w and b are all loaded before the first store:
 * y may be anything, so nvcc keeps a load of w after a store of y that
 * precedes it in the code, and with a load and a store a group the pass
 * waited on w and b NV times a row (the SASS, sm_90a). */
template <int NV, bool LOAD4>
__device__ __forceinline__ void ln_row_reg(float *y, __nv_bfloat16 *t, float *mean, float *rstd, const float4 (&x)[NV],
                                           float s, const float *w, const float *b, int C, int lane) {
    const int n4 = C / 4;
    const float mu = warp_sum(s) / C;
    float v = 0;
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (lane + 32 * k < n4) {
            const float a = x[k].x - mu, bb = x[k].y - mu, c = x[k].z - mu, d = x[k].w - mu;
            v += (a * a + bb * bb) + (c * c + d * d);
        }
    const float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 wv[NV], bv[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = lane + 32 * k;
        wv[k] = j < n4 ? ln_ld4<LOAD4>(w + 4 * j) : zero;
        bv[k] = j < n4 && b ? ln_ld4<LOAD4>(b + 4 * j) : zero;
    }
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = lane + 32 * k;
        if (j >= n4) continue;
        const float4 yv = make_float4((x[k].x - mu) * r * wv[k].x + bv[k].x, (x[k].y - mu) * r * wv[k].y + bv[k].y,
                                      (x[k].z - mu) * r * wv[k].z + bv[k].z, (x[k].w - mu) * r * wv[k].w + bv[k].w);
        if (y) ln_st4<LOAD4>(y + 4 * j, yv);
        if (t) sg_st_bf16x4(t + 4 * j, yv);
    }
    if (lane == 0) {
        *mean = mu;
        *rstd = r;
    }
}

/* LayerNorm of the rows of x (RES false), or of res = a + b (RES true:
 * the bits of op_add then the RES false kernel on res; every element of a
 * and b is read before res is written, by the same thread, so res may be
 * a or b, as it is in the model: res1 += x).  Every load of the row is
 * issued before the first store to res.  Why: res may be a or b, so nvcc
 * may not move a load above a store to res, and with a load, an add and a
 * store a group the kernel went to memory NV times a row with one 16-byte
 * pair of a and b a lane in flight: 32 KB an SM at its 32 warps (55
 * registers), under the about 36 KB an H200's latency asks at its
 * bandwidth.  Now 12 loads a lane at C 768, 6 KB a warp. */
template <int NV, bool LOAD4, bool RES>
__global__ void __launch_bounds__(WARPS * 32)
    ln_fwd_reg_k(float *res, float *out, __nv_bfloat16 *twin, float *mean, float *rstd, const float *a,
                 const float *b, const float *w, const float *bias, int N, int C) {
    const int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32, n4 = C / 4;
    if (row >= N) return;
    const size_t o = (size_t)row * C;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 x[NV], xb[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = lane + 32 * k;
        x[k] = j < n4 ? ln_ld4<LOAD4>(a + o + 4 * j) : zero;
        xb[k] = RES && j < n4 ? ln_ld4<LOAD4>(b + o + 4 * j) : zero;
    }
    float s = 0;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = lane + 32 * k;
        if (j >= n4) continue;
        if (RES) {
            x[k] = make_float4(x[k].x + xb[k].x, x[k].y + xb[k].y, x[k].z + xb[k].z, x[k].w + xb[k].w);
            ln_st4<LOAD4>(res + o + 4 * j, x[k]);
        }
        s += ln_sum4(x[k]);
    }
    ln_row_reg<NV, LOAD4>(out ? out + o : NULL, twin ? twin + o : NULL, mean + row, rstd + row, x, s, w, bias, C,
                          lane);
}

/* The backward's dx (and its twin) for the LN_BWD_ROWS rows of a block,
 * warp w taking rows w, w + LN_BWD_WARPS, ..., and the block's dw/db
 * partials, as ln_bwd_part_k writes them: each lane adds dy xhat and dy
 * over the warp's rows in row order for its columns, then the block adds
 * its warps' sums in warp order.  A row's x, dy and the dx it adds to are
 * loaded together, before the row sums: one trip to memory a row.
 * Why the partials live in shared memory ([LN_BWD_WARPS][2][C], each lane
 * reading and writing only its own columns) and the blocks are 4 warps of
 * 16 rows: a warp's row loop waits on memory once a row, so the rows in
 * flight are the warps an SM holds.  With dw and db summed in registers
 * (48 of them at C 768) the kernel took 184-202 registers and one 8-warp
 * block an SM, and an H200 ran it at about 2.8 TB/s (run 5: 39 us a 124M
 * call for about 110 MB); the 64-row blocks of N = 8192 rows made 128 of
 * them, one wave on 132 SMs.  Now at C = 768 at most 128 registers
 * (LN_BWD_MIN_BLOCKS), four blocks an SM, 16 warps, and 512 blocks. */
enum { LN_BWD_WARPS = 4, LN_BWD_ROWS = 16 };
/* blocks an SM the register cap leaves room for, the most without a
 * spill: 4 (128 registers) up to C = 768, 3 (168) for wider rows, which
 * spilled 88-100 bytes at 128; sm_120's ptxas spilled 8-24 bytes at 128
 * from C = 641 and 8-16 at 168 from C = 769, so there 3 and then 2 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define LN_BWD_MIN_BLOCKS(NV) ((NV) <= 5 ? 4 : (NV) == 6 ? 3 : 2)
#else
#define LN_BWD_MIN_BLOCKS(NV) ((NV) <= 6 ? 4 : 3)
#endif
template <int NV, bool LOAD4, typename TD>
__global__ void __launch_bounds__(LN_BWD_WARPS * 32, LN_BWD_MIN_BLOCKS(NV))
    ln_bwd_reg_k(float *dinp, __nv_bfloat16 *twin, float *part, const TD *dout, const float *inp, const float *w,
                 const float *mean, const float *rstd, int N, int C) {
    extern __shared__ float ln_sh[]; /* [LN_BWD_WARPS][2][C]: a warp's dw sums, then its db sums */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n4 = C / 4;
    const int r0 = blockIdx.x * LN_BWD_ROWS, r1 = r0 + LN_BWD_ROWS < N ? r0 + LN_BWD_ROWS : N;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    float *const shw = ln_sh + (size_t)warp * 2 * C, *const shb = shw + C;
    float4 wv[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int j = lane + 32 * k;
        wv[k] = j < n4 ? ln_ld4<LOAD4>(w + 4 * j) : zero;
        if (j < n4) {
            *reinterpret_cast<float4 *>(shw + 4 * j) = zero;
            *reinterpret_cast<float4 *>(shb + 4 * j) = zero;
        }
    }
    for (int row = r0 + warp; row < r1; row += LN_BWD_WARPS) {
        const size_t o = (size_t)row * C;
        const float m = mean[row], r = rstd[row];
        float4 xh[NV], dy[NV], d0[NV];
        float sd = 0, sdx = 0;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int j = lane + 32 * k;
            const bool in = j < n4;
            const float4 xv = in ? ln_ld4<LOAD4>(inp + o + 4 * j) : zero;
            dy[k] = in ? ln_ld4<LOAD4>(dout + o + 4 * j) : zero;
            d0[k] = in ? ln_ld4<LOAD4>(dinp + o + 4 * j) : zero;
            xh[k] = make_float4((xv.x - m) * r, (xv.y - m) * r, (xv.z - m) * r, (xv.w - m) * r);
            const float4 g = make_float4(dy[k].x * wv[k].x, dy[k].y * wv[k].y, dy[k].z * wv[k].z, dy[k].w * wv[k].w);
            if (in) {
                sd += ln_sum4(g);
                sdx += (g.x * xh[k].x + g.y * xh[k].y) + (g.z * xh[k].z + g.w * xh[k].w);
            }
        }
        const float md = warp_sum(sd) / C, mdx = warp_sum(sdx) / C;
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int j = lane + 32 * k;
            if (j >= n4) continue;
            const float4 g = dy[k], x = xh[k];
            const float4 dv = make_float4(d0[k].x + r * (g.x * wv[k].x - md - x.x * mdx),
                                          d0[k].y + r * (g.y * wv[k].y - md - x.y * mdx),
                                          d0[k].z + r * (g.z * wv[k].z - md - x.z * mdx),
                                          d0[k].w + r * (g.w * wv[k].w - md - x.w * mdx));
            ln_st4<LOAD4>(dinp + o + 4 * j, dv);
            if (twin) sg_st_bf16x4(twin + o + 4 * j, dv);
            float4 &sw = *reinterpret_cast<float4 *>(shw + 4 * j), &sb = *reinterpret_cast<float4 *>(shb + 4 * j);
            sw.x += g.x * x.x, sw.y += g.y * x.y, sw.z += g.z * x.z, sw.w += g.w * x.w;
            sb.x += g.x, sb.y += g.y, sb.z += g.z, sb.w += g.w;
        }
    }
    __syncthreads();
    float *out = part + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += LN_BWD_WARPS * 32) { /* dw's C sums, then db's */
        float t = 0;
        for (int wi = 0; wi < LN_BWD_WARPS; wi++) t += ln_sh[(size_t)wi * 2 * C + c];
        out[c] = t;
    }
}

/* f(integral_constant NV) for the register path's row width, NV float4 per
 * lane, C <= 128 NV; false if C takes the scalar kernels. */
template <class F>
static bool ln_by_width(int C, F &&f) {
    if (C % 4 || C <= 0 || C > 128 * LN_MAX_NV) return false;
    switch ((C + 127) / 128) {
    case 1: f(std::integral_constant<int, 1>()); break;
    case 2: f(std::integral_constant<int, 2>()); break;
    case 3: f(std::integral_constant<int, 3>()); break;
    case 4: f(std::integral_constant<int, 4>()); break;
    case 5: f(std::integral_constant<int, 5>()); break;
    case 6: f(std::integral_constant<int, 6>()); break;
    case 7: f(std::integral_constant<int, 7>()); break;
    default: f(std::integral_constant<int, 8>()); break;
    }
    return true;
}
static inline bool ln_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* The register-path forward of either op (RES: the residual one), with
 * float4 loads where every tensor allows; false for widths it does not take. */
template <bool RES>
static bool ln_fwd_reg(bool v4, float *res, float *y, __nv_bfloat16 *twin, float *mean, float *rstd, const float *a,
                       const float *b, const float *w, const float *bias, int N, int C) {
    return ln_by_width(C, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if (v4)
            ln_fwd_reg_k<NV, true, RES><<<sg_blocks(N, WARPS), WARPS * 32, 0, sg_stream()>>>(res, y, twin, mean, rstd,
                                                                                            a, b, w, bias, N, C);
        else
            ln_fwd_reg_k<NV, false, RES><<<sg_blocks(N, WARPS), WARPS * 32, 0, sg_stream()>>>(res, y, twin, mean, rstd,
                                                                                             a, b, w, bias, N, C);
    });
}

extern "C" void op_layernorm_fwd(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                                 int N, int C) {
    if (N <= 0) return;
    __nv_bfloat16 *twin = sg_twin_begin(out, (long)N * C);
    float *y = twin ? sg_twin_fp32(out, (long)N * C) : out;
    const bool v4 = ln_aligned(out) && ln_aligned(inp) && ln_aligned(w) && (!b || ln_aligned(b));
    const bool reg = ln_fwd_reg<false>(v4, NULL, y, twin, mean, rstd, inp, NULL, w, b, N, C);
    if (!reg) ln_fwd_k<<<sg_blocks(N, WARPS), WARPS * 32, 0, sg_stream()>>>(y, twin, mean, rstd, inp, w, b, N, C);
    CUDA_LAUNCHED();
    if (twin) sg_twin_written(out, (long)N * C);
}

extern "C" void op_residual_layernorm_fwd(real *res, real *out, real *mean, real *rstd, const real *a,
                                          const real *b, const real *w, const real *bias, int N, int C) {
    if (N <= 0) return;
    __nv_bfloat16 *twin = sg_twin_begin(out, (long)N * C);
    float *y = twin ? sg_twin_fp32(out, (long)N * C) : out;
    const bool v4 = ln_aligned(res) && ln_aligned(out) && ln_aligned(a) && ln_aligned(b) && ln_aligned(w) &&
                    (!bias || ln_aligned(bias));
    const bool reg = ln_fwd_reg<true>(v4, res, y, twin, mean, rstd, a, b, w, bias, N, C);
    if (!reg)
        res_ln_fwd_k<<<sg_blocks(N, WARPS), WARPS * 32, 0, sg_stream()>>>(res, y, twin, mean, rstd, a, b, w, bias, N, C);
    CUDA_LAUNCHED();
    if (twin) sg_twin_written(out, (long)N * C);
}

/* dx (and its twin) and the dw/db partials, dy of type TD: the blocks
 * whose partials it wrote (LN_BWD_ROWS rows each on the register path,
 * ROWS_PER_BLOCK on the scalar one) */
template <typename TD>
static int ln_bwd(float *dinp, __nv_bfloat16 *twin, float *part, const TD *dout, const float *inp, const float *w,
                  const float *mean, const float *rstd, int N, int C) {
    const bool v4 = ln_aligned(dinp) && ln_aligned(dout) && ln_aligned(inp) && ln_aligned(w);
    const size_t shmem = sizeof(float) * LN_BWD_WARPS * 2 * (size_t)C; /* <= 32 KiB */
    const int nreg = (N + LN_BWD_ROWS - 1) / LN_BWD_ROWS;
    const bool reg = ln_by_width(C, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if (v4)
            ln_bwd_reg_k<NV, true><<<(unsigned)nreg, LN_BWD_WARPS * 32, shmem, sg_stream()>>>(dinp, twin, part, dout,
                                                                                             inp, w, mean, rstd, N, C);
        else
            ln_bwd_reg_k<NV, false><<<(unsigned)nreg, LN_BWD_WARPS * 32, shmem, sg_stream()>>>(dinp, twin, part, dout,
                                                                                              inp, w, mean, rstd, N, C);
    });
    if (reg) {
        CUDA_LAUNCHED();
        return nreg;
    }
    const int nblk = (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    ln_bwd_dx_k<<<sg_blocks(N, WARPS), WARPS * 32, 0, sg_stream()>>>(dinp, twin, dout, inp, w, mean, rstd, N, C);
    CUDA_LAUNCHED();
    dim3 grid(sg_blocks(C, 256) < 4 ? sg_blocks(C, 256) : 4, (unsigned)nblk);
    ln_bwd_part_k<<<grid, 256, 0, sg_stream()>>>(part, dout, inp, mean, rstd, N, C);
    CUDA_LAUNCHED();
    return nblk;
}

extern "C" void op_layernorm_bwd(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                                 const real *mean, const real *rstd, int N, int C) {
    if (N <= 0) return;
    __nv_bfloat16 *twin = sg_twin_begin(dinp, (long)N * C);
    const int most = (N + LN_BWD_ROWS - 1) / LN_BWD_ROWS; /* the register path's blocks: the most of either */
    float *part = (float *)sg_scratch(SCRATCH_MISC, (size_t)most * 2 * C * sizeof(float));
    const __nv_bfloat16 *dout16 = sg_bf16_stored(dout, (long)N * C);
    const int nblk = dout16 ? ln_bwd(dinp, twin, part, dout16, inp, w, mean, rstd, N, C)
                            : ln_bwd(dinp, twin, part, dout, inp, w, mean, rstd, N, C);
    ln_bwd_sum_k<<<sg_blocks(C, WARPS), WARPS * 32, 0, sg_stream()>>>(dw, db, part, nblk, C);
    CUDA_LAUNCHED();
    /* stamped after the op's last launch: the two dw/db kernels write
     * neither dinp nor the twin (dw, db are other tensors) */
    if (twin) sg_twin_written(dinp, (long)N * C);
}
