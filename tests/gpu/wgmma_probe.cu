/* Hopper's warpgroup products (wgmma, sm_90a), probed on the device: which
 * shared-memory descriptors give the right product, and how fast a chain of
 * them runs against the warp-level mma.sync that the attention tiles use
 * today (docs/cuda.md, "The dK/dV kernel and shared memory").
 *
 * Why a probe before a kernel: the PTX ISA describes the descriptors'
 * leading and stride byte offsets (LBO, SBO) per layout in words that are
 * easy to read two ways, and no emulator here can settle it.  An attention
 * kernel built on the wrong reading fails as a wrong number with no hint of
 * why; this program tries both readings of each layout on one warpgroup
 * and says which one gives D = A B, so the kernel starts from layouts shown
 * on the hardware.
 *
 * What is tested (each with a chain of four k16 steps, K = 64, so that the
 * start address's advance along K is tested too, and N 64 and 128):
 *   ss  A and B from shared memory, both K-major (B stored N x K: S = Q K^T)
 *   rs  A from registers (mma.m16n8k16's A fragment, four warps of 16 rows),
 *       B K-major (tnspB 0) or MN-major (tnspB 1: B stored K x N, as dO
 *       and Q are for dV += P^T dO and dK += dS^T Q)
 * each with no swizzle (8 x 16-byte core matrices) and with the 128-byte
 * swizzle (rows of 128 bytes in 1024-byte atoms, chunk c of row r at c ^ (r
 * mod 8)).  The accumulator layout assumed is mma.m16n8k16's per warp, warp
 * w holding rows 16w .. 16w + 15: d[4j + i] = (row 16w + g + 8(i >> 1),
 * col 8j + 2t + (i & 1)), g = lane >> 2, t = lane & 3.  A mismatch prints
 * where in the reference the value was found instead.
 *
 * Then rates, in TFLOP/s over the whole GPU: chains of m64nNk16 from shared
 * memory (N 64, 128, 256), the register-A form, and mma.sync m16n8k16 from
 * registers (the ceiling of the present tiles).
 *
 * Exit 0 when every layout has a reading that works (the readings that
 * work are printed), 1 when one has none, 77 on a GPU that is not sm_90. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wgmma_ptx.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "wgmma_probe: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, \
                    __LINE__);                                                                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* A layout's descriptor fields (wg_desc, wgmma_ptx.h); the tiles are
 * 1024-byte aligned, so the swizzled ones need no base offset. */
struct WgDesc {
    uint32_t lbo, sbo, step; /* bytes; step: the start's advance per k16 step */
    int swz;
};

static __device__ __forceinline__ uint64_t wg_desc(uint32_t saddr, const WgDesc &w) {
    return wg_desc(saddr, w.lbo, w.sbo, w.swz);
}

template <int N, int RS, int TB> struct WgOp;
template <int TB> struct WgOp<64, 0, TB> {
    static __device__ void run(float *d, const uint32_t *, uint64_t da, uint64_t db, int acc) { wg_ss_n64<TB>(d, da, db, acc); }
};
template <int TB> struct WgOp<64, 1, TB> {
    static __device__ void run(float *d, const uint32_t *a, uint64_t, uint64_t db, int acc) { wg_rs_n64<TB>(d, a, db, acc); }
};
template <int TB> struct WgOp<128, 0, TB> {
    static __device__ void run(float *d, const uint32_t *, uint64_t da, uint64_t db, int acc) { wg_ss_n128<TB>(d, da, db, acc); }
};
template <int TB> struct WgOp<128, 1, TB> {
    static __device__ void run(float *d, const uint32_t *a, uint64_t, uint64_t db, int acc) { wg_rs_n128<TB>(d, a, db, acc); }
};

enum { KSTEPS = 4, K = 16 * KSTEPS, A_BYTES = 64 * K * 2, B_MAX = 128 * K * 2 };
/* dynamic shared memory of the layout probe: past the largest offset any
 * reading of these layouts can form (in run 5 the first version, with B's
 * 16 KB alone, faulted on a wrong reading and ended the probe) */
static const int PROBE_SMEM = 200 * 1024;

/* One warpgroup: D = A B over KSTEPS k16 steps, A and B copied verbatim
 * from the host's images of their layouts; afrag: RS's A fragments, four
 * words a thread a step. */
template <int N, int RS, int TB>
__global__ void __launch_bounds__(128) probe_kernel(const uint4 *a_img, const uint4 *b_img, int b_bytes,
                                                    const uint32_t *afrag, WgDesc wa, WgDesc wb, float *out) {
    /* A, then B, then room: a wrong reading reads garbage inside the
     * block's shared memory instead of faulting, which would end the
     * program (PROBE_SMEM) */
    extern __shared__ __align__(1024) uint8_t probe_smem[];
    uint8_t *const sa = probe_smem, *const sb = probe_smem + A_BYTES;
    const int tid = threadIdx.x;
    for (int i = tid; i < A_BYTES / 16; i += 128) reinterpret_cast<uint4 *>(sa)[i] = a_img[i];
    for (int i = tid; i < b_bytes / 16; i += 128) reinterpret_cast<uint4 *>(sb)[i] = b_img[i];
    wg_fence_smem(); /* ordinary stores, read next by the products */
    __syncthreads();
    uint32_t a[KSTEPS][4];
#pragma unroll
    for (int s = 0; s < KSTEPS; s++)
#pragma unroll
        for (int j = 0; j < 4; j++) a[s][j] = RS ? afrag[(s * 128 + tid) * 4 + j] : 0;
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.f;
    const uint32_t a0 = (uint32_t)__cvta_generic_to_shared(sa), b0 = (uint32_t)__cvta_generic_to_shared(sb);
    wg_fence();
#pragma unroll
    for (int s = 0; s < KSTEPS; s++)
        WgOp<N, RS, TB>::run(d, a[s], wg_desc(a0 + s * wa.step, wa), wg_desc(b0 + s * wb.step, wb), s > 0);
    wg_commit();
    wg_wait<0>();
    wg_pin<N / 2>(d);
#pragma unroll
    for (int i = 0; i < N / 2; i++) out[tid * (N / 2) + i] = d[i];
}

/* ---- host: layouts ---- */

enum { KMAJ = 0, MNMAJ = 1 };
struct Layout {
    int major, swz, mn; /* mn rows (K-major) or columns (MN-major); K = 64 */
};

/* Byte offset of element (i along MN, k along K).  No swizzle: 8 x 8 core
 * matrices of 128 bytes, 8 elements of the contiguous dimension a 16-byte
 * row, the cores of one 8-group of the other dimension adjacent.  128-byte
 * swizzle: 64 elements of the contiguous dimension a 128-byte row, 8 rows
 * an atom of 1024 bytes, 16-byte chunk c of row r stored at c ^ (r & 7). */
static size_t lay_off(const Layout &l, int i, int k) {
    if (l.major == KMAJ) {
        if (!l.swz) return (size_t)(i / 8) * (K / 8) * 128 + (k / 8) * 128 + (i % 8) * 16 + (k % 8) * 2;
        return (size_t)(i / 8) * 1024 + (i % 8) * 128 + (((k / 8) ^ (i % 8)) * 16) + (k % 8) * 2;
    }
    if (!l.swz) return (size_t)(k / 8) * (l.mn / 8) * 128 + (i / 8) * 128 + (k % 8) * 16 + (i % 8) * 2;
    return (size_t)(i / 64) * (K / 8) * 1024 + (k / 8) * 1024 + (k % 8) * 128 + ((((i % 64) / 8) ^ (k % 8)) * 16) +
           (i % 8) * 2;
}

/* The two readings of a layout's offsets: reading 0 puts in LBO the stride
 * named first below (along K) and in SBO the second (along M or N); reading
 * 1 swaps them.  (A
 * swizzled K-major operand of 64 elements a row has one core along K, so its
 * LBO should not matter: 16 bytes.) */
static WgDesc lay_desc(const Layout &l, int reading) {
    WgDesc w;
    w.swz = l.swz;
    uint32_t first, second;
    if (l.major == KMAJ) {
        /* first: between cores along K; second: between 8-row groups */
        first = l.swz ? 16 : 128;
        second = l.swz ? 1024 : (K / 8) * 128;
        w.step = l.swz ? 32 : 256;
    } else {
        /* first: between 8-row groups along K; second: between cores (atoms)
         * along MN (no swizzle: run 5 on an H200 found this reading, and
         * not the other, right) */
        first = l.swz ? 1024 : (uint32_t)(l.mn / 8) * 128;
        second = l.swz ? (K / 8) * 1024 : 128;
        w.step = 2 * first;
    }
    w.lbo = reading ? second : first;
    w.sbo = reading ? first : second;
    return w;
}

static size_t lay_bytes(const Layout &l) { return (size_t)l.mn * K * 2; }

static uint16_t bf16_bits(float x) {
    __nv_bfloat16 b = __float2bfloat16(x);
    uint16_t u;
    memcpy(&u, &b, 2);
    return u;
}
static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}

struct Case {
    const char *kind; /* ss or rs */
    int rs, tb, n, swz, reading_a, reading_b;
};

/* Runs one case; returns the number of wrong accumulators (0: this reading works). */
static int run_case(const Case &c, int verbose) {
    const int n = c.n;
    static float A[64][K], Bm[K][128];
    static double C[64][128], S[64][128];
    for (int m = 0; m < 64; m++)
        for (int k = 0; k < K; k++) A[m][k] = bf16_round(urand());
    for (int k = 0; k < K; k++)
        for (int j = 0; j < n; j++) Bm[k][j] = bf16_round(urand());
    for (int m = 0; m < 64; m++)
        for (int j = 0; j < n; j++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) s += (double)A[m][k] * Bm[k][j], a += fabs((double)A[m][k] * Bm[k][j]);
            C[m][j] = s, S[m][j] = a;
        }
    const Layout la = {KMAJ, c.swz, 64}, lb = {c.tb ? MNMAJ : KMAJ, c.swz, n};
    static uint8_t aimg[A_BYTES], bimg[B_MAX];
    memset(aimg, 0, sizeof aimg), memset(bimg, 0, sizeof bimg);
    for (int m = 0; m < 64; m++)
        for (int k = 0; k < K; k++) {
            uint16_t u = bf16_bits(A[m][k]);
            memcpy(aimg + lay_off(la, m, k), &u, 2);
        }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < n; j++) {
            uint16_t u = bf16_bits(Bm[k][j]);
            memcpy(bimg + lay_off(lb, j, k), &u, 2);
        }
    static uint32_t frag[KSTEPS * 128 * 4];
    for (int s = 0; s < KSTEPS; s++)
        for (int tid = 0; tid < 128; tid++) {
            const int w = tid / 32, g = (tid % 32) >> 2, t = tid & 3, r0 = 16 * w + g, k0 = 16 * s + 2 * t;
            const int rr[4] = {r0, r0 + 8, r0, r0 + 8}, kk[4] = {k0, k0, k0 + 8, k0 + 8};
            for (int j = 0; j < 4; j++)
                frag[(s * 128 + tid) * 4 + j] =
                    (uint32_t)bf16_bits(A[rr[j]][kk[j]]) | (uint32_t)bf16_bits(A[rr[j]][kk[j] + 1]) << 16;
        }
    uint4 *da, *db;
    uint32_t *dfrag;
    float *dout;
    const int nreg = n / 2;
    CK(cudaMalloc(&da, A_BYTES));
    CK(cudaMalloc(&db, B_MAX));
    CK(cudaMalloc(&dfrag, sizeof frag));
    CK(cudaMalloc(&dout, 128 * nreg * sizeof(float)));
    CK(cudaMemcpy(da, aimg, A_BYTES, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, bimg, B_MAX, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dfrag, frag, sizeof frag, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, 128 * nreg * sizeof(float))); /* NaN: an unwritten accumulator fails */
    const WgDesc wa = lay_desc(la, c.reading_a), wb = lay_desc(lb, c.reading_b);
    const int bb = (int)lay_bytes(lb);
#define LAUNCH(N_, RS_, TB_)                                                                                  \
    do {                                                                                                      \
        CK(cudaFuncSetAttribute(probe_kernel<N_, RS_, TB_>, cudaFuncAttributeMaxDynamicSharedMemorySize,       \
                                PROBE_SMEM));                                                                 \
        probe_kernel<N_, RS_, TB_><<<1, 128, PROBE_SMEM>>>(da, db, bb, dfrag, wa, wb, dout);                   \
    } while (0)
    if (n == 64) {
        if (c.rs) { if (c.tb) LAUNCH(64, 1, 1); else LAUNCH(64, 1, 0); }
        else { if (c.tb) LAUNCH(64, 0, 1); else LAUNCH(64, 0, 0); }
    } else {
        if (c.rs) { if (c.tb) LAUNCH(128, 1, 1); else LAUNCH(128, 1, 0); }
        else { if (c.tb) LAUNCH(128, 0, 1); else LAUNCH(128, 0, 0); }
    }
#undef LAUNCH
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    static float out[128 * 64];
    CK(cudaMemcpy(out, dout, 128 * nreg * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(da), cudaFree(db), cudaFree(dfrag), cudaFree(dout);
    int bad = 0;
    for (int tid = 0; tid < 128; tid++)
        for (int i = 0; i < nreg; i++) {
            const int w = tid / 32, g = (tid % 32) >> 2, t = tid & 3, q = i & 3;
            const int row = 16 * w + g + 8 * (q >> 1), col = 8 * (i >> 2) + 2 * t + (q & 1);
            const double v = out[tid * nreg + i];
            if (fabs(v - C[row][col]) <= 1e-4 * S[row][col] + 1e-6) continue;
            if (bad++ < 2 && verbose) {
                int fr = -1, fc = -1;
                for (int r = 0; r < 64 && fr < 0; r++)
                    for (int j = 0; j < n; j++)
                        if (fabs(v - C[r][j]) <= 1e-4 * S[r][j] + 1e-6) { fr = r, fc = j; break; }
                printf("    thread %d d[%d] = %.6g, expected C[%d][%d] = %.6g; found at C[%d][%d]\n", tid, i, v, row,
                       col, C[row][col], fr, fc);
            }
        }
    return bad;
}

/* ---- rates ---- */

enum { RATE_STEPS = 16 };

template <int N>
__global__ void __launch_bounds__(256) rate_ss(int iters, float *sink) {
    __shared__ __align__(1024) uint8_t sm[64 * 16 * 2 + 256 * 16 * 2];
    for (int i = threadIdx.x; i < (int)sizeof sm / 4; i += blockDim.x) reinterpret_cast<uint32_t *>(sm)[i] = 0x3c003c00u * (i & 1);
    wg_fence_smem();
    __syncthreads();
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
    const WgDesc w = {128, 256, 0, 0};
    const uint64_t da = wg_desc(base, w), db = wg_desc(base + 64 * 16 * 2, w);
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d[i] = 0.f;
    for (int it = 0; it < iters; it++) {
        wg_fence();
#pragma unroll
        for (int s = 0; s < RATE_STEPS; s++) {
            if (N == 64) wg_ss_n64<0>(d, da, db, 1);
            else if (N == 128) wg_ss_n128<0>(d, da, db, 1);
            else wg_ss_n256<0>(d, da, db, 1);
        }
        wg_commit();
        wg_wait<0>();
    }
    wg_pin<N / 2>(d);
    float s = 0;
#pragma unroll
    for (int i = 0; i < N / 2; i++) s += d[i];
    if (s == 1234.5f) *sink = s;
}

__global__ void __launch_bounds__(256) rate_rs64(int iters, float *sink) {
    __shared__ __align__(1024) uint8_t sm[64 * 16 * 2];
    for (int i = threadIdx.x; i < (int)sizeof sm / 4; i += blockDim.x) reinterpret_cast<uint32_t *>(sm)[i] = 0x3c003c00u * (i & 1);
    wg_fence_smem();
    __syncthreads();
    const WgDesc w = {128, 256, 0, 0};
    const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm), w);
    uint32_t a[4] = {0x3c003c00u, threadIdx.x, 0x3c00u, 0u};
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.f;
    for (int it = 0; it < iters; it++) {
        wg_fence();
#pragma unroll
        for (int s = 0; s < RATE_STEPS; s++) wg_rs_n64<0>(d, a, db, 1);
        wg_commit();
        wg_wait<0>();
    }
    wg_pin<32>(d);
    float s = 0;
#pragma unroll
    for (int i = 0; i < 32; i++) s += d[i];
    if (s == 1234.5f) *sink = s;
}

/* mma.sync m16n8k16 from registers, 8 independent accumulators a warp */
__global__ void __launch_bounds__(256) rate_mma(int iters, float *sink) {
    uint32_t a[4] = {0x3c003c00u, threadIdx.x, 0x3c00u, 0u}, b[2] = {0x3c003c00u, 0x3c00u};
    float d[8][4] = {};
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int s = 0; s < RATE_STEPS / 2; s++)
#pragma unroll
            for (int j = 0; j < 8; j++)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                             "{%8, %9}, {%0, %1, %2, %3};\n"
                             : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    float s = 0;
    for (int j = 0; j < 8; j++) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
    if (s == 1234.5f) *sink = s;
}

typedef void (*RateFn)(int, float *);

static double time_rate(RateFn fn, int blocks, int iters, double flop_per_block_iter, float *sink) {
    fn<<<blocks, 256>>>(1, sink);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0));
        fn<<<blocks, 256>>>(iters, sink);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CK(cudaGetLastError());
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return flop_per_block_iter * blocks * iters / (best * 1e-3) / 1e12;
}

int main(void) {
    cudaDeviceProp p;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        fprintf(stderr, "wgmma_probe: no CUDA device\n");
        return 2;
    }
    if (p.major != 9 || p.minor != 0) {
        printf("wgmma_probe: %s is sm_%d%d, not sm_90: skipped\n", p.name, p.major, p.minor);
        return 77;
    }
    printf("wgmma_probe on %s (%d SMs)\n", p.name, p.multiProcessorCount);
    /* layouts: [major][swz]; works[l][reading] counts the cases that passed */
    int works[2][2][2] = {}, tried[2][2][2] = {};
    const char *major_name[2] = {"K-major", "MN-major"}, *swz_name[2] = {"no swizzle", "128B swizzle"};
    int ka_reading[2] = {-1, -1}; /* A's K-major reading that works, per swizzle */
    for (int pass = 0; pass < 2; pass++)
        for (int swz = 0; swz < 2; swz++)
            for (int rs = 0; rs < 2; rs++)
                for (int tb = 0; tb < 2; tb++) {
                    /* pass 0: ss with both K-major, which settles A's reading; pass 1: the rest */
                    if ((pass == 0) != (!rs && !tb)) continue;
                    for (int n = 64; n <= 128; n += 64)
                        for (int reading = 0; reading < 2; reading++) {
                            Case c = {rs ? "rs" : "ss", rs, tb, n, swz, reading, reading};
                            if (!rs && tb) {
                                if (ka_reading[swz] < 0) continue;
                                c.reading_a = ka_reading[swz];
                            }
                            const int bad = run_case(c, 1);
                            const int maj = tb ? MNMAJ : KMAJ;
                            tried[maj][swz][reading]++;
                            works[maj][swz][reading] += bad == 0;
                            printf("%s n%-3d B %-8s %-12s reading %d (LBO %u, SBO %u): %s (%d of %d wrong)\n", c.kind,
                                   n, major_name[maj], swz_name[swz], reading,
                                   lay_desc(Layout{maj, swz, n}, reading).lbo,
                                   lay_desc(Layout{maj, swz, n}, reading).sbo, bad ? "WRONG" : "right", bad,
                                   64 * n);
                            if (pass == 0 && !bad && n == 128) ka_reading[swz] = reading;
                        }
                }
    int rc = 0;
    printf("readings that work (the reading's cases that passed / tried):\n");
    for (int maj = 0; maj < 2; maj++)
        for (int swz = 0; swz < 2; swz++) {
            int any = 0;
            printf("  %-8s %-12s", major_name[maj], swz_name[swz]);
            for (int r = 0; r < 2; r++) {
                const Layout l = {maj, swz, 128};
                printf("  reading %d (LBO %u, SBO %u at N 128): %d/%d", r, lay_desc(l, r).lbo, lay_desc(l, r).sbo,
                       works[maj][swz][r], tried[maj][swz][r]);
                any |= tried[maj][swz][r] && works[maj][swz][r] == tried[maj][swz][r];
            }
            printf("%s\n", any ? "" : "  <- none works");
            rc |= !any;
        }
    /* The kernels' no-swizzle operands take reading 0 (wgmma_ptx.h,
     * wg_desc_core); SG_WGMMA_SWAP's bit for a layout where only reading 1
     * works, for tests/gpu/device.sh to set */
    int swap = 0, known = 1;
    for (int maj = 0; maj < 2; maj++) {
        const int ok0 = tried[maj][0][0] && works[maj][0][0] == tried[maj][0][0];
        const int ok1 = tried[maj][0][1] && works[maj][0][1] == tried[maj][0][1];
        if (!ok0 && ok1) swap |= 1 << maj;
        known &= ok0 || ok1;
    }
    if (known) printf("wgmma_probe: SG_WGMMA_SWAP=%d\n", swap);
    else printf("wgmma_probe: SG_WGMMA_SWAP=none (a no-swizzle layout has no reading that works)\n");
    float *sink;
    CK(cudaMalloc(&sink, 4));
    const int sms = p.multiProcessorCount, it = 2048;
    /* two warpgroups a block, one block an SM; per block iteration: 2 x RATE_STEPS products */
    const double f64 = 2.0 * RATE_STEPS * 2.0 * 64 * 64 * 16, f128 = 2 * f64, f256 = 4 * f64;
    printf("rates (TFLOP/s, %d blocks of 2 warpgroups, chains of %d products into one accumulator):\n", sms,
           RATE_STEPS);
    printf("  wgmma m64n64k16 ss   %7.1f\n", time_rate(rate_ss<64>, sms, it, f64, sink));
    printf("  wgmma m64n128k16 ss  %7.1f\n", time_rate(rate_ss<128>, sms, it, f128, sink));
    printf("  wgmma m64n256k16 ss  %7.1f\n", time_rate(rate_ss<256>, sms, it, f256, sink));
    printf("  wgmma m64n64k16 rs   %7.1f\n", time_rate(rate_rs64, sms, it, f64, sink));
    printf("  wgmma m64n64k16 ss, 2 blocks an SM %7.1f\n", time_rate(rate_ss<64>, 2 * sms, it, f64, sink));
    /* 8 warps x RATE_STEPS/2 x 8 products of 2*16*8*16 */
    printf("  mma.sync m16n8k16    %7.1f\n", time_rate(rate_mma, sms, it, 8.0 * RATE_STEPS / 2 * 8 * 4096, sink));
    printf("  mma.sync m16n8k16, 2 blocks an SM %7.1f\n",
           time_rate(rate_mma, 2 * sms, it, 8.0 * RATE_STEPS / 2 * 8 * 4096, sink));
    cudaFree(sink);
    printf("wgmma_probe: %s\n", rc ? "some layout has no reading that works" : "every layout has a reading that works");
    return rc;
}
