/* Linear-layer biases (ops.h, config linear_bias), kernels/cpu/bias.c's
 * math in fp32:
 *   op_bias_add:  out[i, :] += bias            for every row i < M
 *   op_bias_bwd:  db[j] += sum_i dout[i, j]    (acc)
 *
 * The add is one float add an element, the CPU's, so its bits are the
 * CPU's.  A thread owns one column (four, from 16-byte loads, when N % 4 == 0
 * and out and bias are 16-byte aligned) of ADD_ROWS rows: it reads its bias
 * once, and a warp's loads are contiguous.
 *
 * The gradient is deterministic without atomics, as LayerNorm's dw/db
 * (layernorm.cu): the rows are cut into chunks of R rows (R = 64, more when
 * M > 64 MAX_CHUNKS, so that there are at most MAX_CHUNKS chunks: R depends
 * on M alone); stage 1 gives each (chunk, column) one thread, which adds the
 * chunk's rows of its column in row order into part[chunk][column] (a
 * warp's loads are 32 consecutive columns of one row); stage 2 gives each
 * column one warp, lane l adding the partials of chunks l, l + 32, ... in
 * chunk order, then a fixed butterfly, and lane 0 adds the total to db.
 * Every sum runs in an order fixed by M and N, so the bits repeat run to run
 * (not the CPU's bits: it sums each column in one pass, in double).  The
 * partials live in the SCRATCH_MISC slot (scratch.h): at most MAX_CHUNKS N
 * floats, 3 MiB at N = 3072.
 *
 * out, bias, dout and db are fp32: the model promises none of the bias ops'
 * tensors as bf16 (src/model.c, promise_acts).  A tensor stored in bf16
 * (sg_bf16_stored) stops the op with a message rather than be read or
 * written as floats. */
#include <stdint.h>

#include "cuda_common.h"

enum { THREADS = 256, ADD_ROWS = 8, CHUNK_ROWS = 64, MAX_CHUNKS = 256, SUM_WARPS = 8 };
static const long MAX_GRID_Y = 65535; /* gridDim.y's limit */

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* out[i, j] += bias[j]: thread (x, y) the column unit j (one float, or
 * with V4 a float4 of columns 4j .. 4j+3) of rows [r0, r0 + ADD_ROWS), for
 * r0 = y ADD_ROWS, (y + gridDim.y) ADD_ROWS, ... */
template <bool V4>
__global__ void bias_add_k(float *out, const float *bias, int M, int N) {
    const int units = V4 ? N / 4 : N, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= units) return;
    if (V4) {
        const float4 b = sg_ld4(bias + 4 * j);
        for (long r0 = (long)blockIdx.y * ADD_ROWS; r0 < M; r0 += (long)gridDim.y * ADD_ROWS) {
            const long r1 = r0 + ADD_ROWS < M ? r0 + ADD_ROWS : M;
            for (long i = r0; i < r1; i++) {
                float *o = out + i * N + 4 * j;
                float4 v = sg_ld4(o);
                v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
                sg_st4(o, v);
            }
        }
    } else {
        const float b = bias[j];
        for (long r0 = (long)blockIdx.y * ADD_ROWS; r0 < M; r0 += (long)gridDim.y * ADD_ROWS) {
            const long r1 = r0 + ADD_ROWS < M ? r0 + ADD_ROWS : M;
            for (long i = r0; i < r1; i++) out[i * N + j] += b;
        }
    }
}

/* stage 1: part[c][j] = sum of dout[i, j] over chunk c's rows, in row order */
__global__ void bias_part_k(float *part, const float *dout, int M, int N, int rows) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    const long r0 = (long)blockIdx.y * rows, r1 = r0 + rows < M ? r0 + rows : M;
    float s = 0;
    for (long i = r0; i < r1; i++) s += dout[i * N + j];
    part[(long)blockIdx.y * N + j] = s;
}

static __device__ __forceinline__ float bias_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* stage 2: db[j] += the nchunk partials of column j, one warp a column */
__global__ void bias_sum_k(float *db, const float *part, int nchunk, int N) {
    const int j = blockIdx.x * SUM_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (j >= N) return;
    float s = 0;
    for (int c = lane; c < nchunk; c += 32) s += part[(long)c * N + j];
    s = bias_warp_sum(s);
    if (lane == 0) db[j] += s;
}

/* Whole tensors: sg_bf16_stored's exact match on the promise, not
 * sg_bf16_inside's element lookup, which takes a pointer just past a
 * compact tensor's reals (dfch after datty) for a part of it. */
static void need_fp32(const char *op, const char *what, const float *p, long n) {
    if (!sg_bf16_stored(p, n)) return;
    char why[160];
    snprintf(why, sizeof why, "%s is stored in bf16 (a promised tensor); the bias ops take fp32 tensors only", what);
    sg_cuda_fail(__FILE__, __LINE__, op, why);
}

extern "C" void op_bias_add(real *out, const real *bias, int M, int N) {
    if (M <= 0 || N <= 0) return;
    need_fp32("op_bias_add", "out", out, (long)M * N);
    const bool v4 = N % 4 == 0 && aligned16(out) && aligned16(bias);
    const int units = v4 ? N / 4 : N;
    const long ychunks = (M + ADD_ROWS - 1) / ADD_ROWS;
    const dim3 grid(sg_blocks(units, THREADS), (unsigned)(ychunks < MAX_GRID_Y ? ychunks : MAX_GRID_Y));
    if (v4) bias_add_k<true><<<grid, THREADS, 0, sg_stream()>>>(out, bias, M, N);
    else bias_add_k<false><<<grid, THREADS, 0, sg_stream()>>>(out, bias, M, N);
    CUDA_LAUNCHED();
}

extern "C" void op_bias_bwd(real *db, const real *dout, int M, int N) {
    if (M <= 0 || N <= 0) return;
    need_fp32("op_bias_bwd", "dout", dout, (long)M * N);
    /* R rows a chunk: CHUNK_ROWS, or enough for at most MAX_CHUNKS chunks */
    const int rows = M <= CHUNK_ROWS * MAX_CHUNKS ? CHUNK_ROWS : (M + MAX_CHUNKS - 1) / MAX_CHUNKS;
    const int nchunk = (M + rows - 1) / rows;
    float *part = (float *)sg_scratch(SCRATCH_MISC, (size_t)nchunk * N * sizeof(float));
    bias_part_k<<<dim3(sg_blocks(N, THREADS), (unsigned)nchunk), THREADS, 0, sg_stream()>>>(part, dout, M, N, rows);
    CUDA_LAUNCHED();
    bias_sum_k<<<sg_blocks(N, SUM_WARPS), SUM_WARPS * 32, 0, sg_stream()>>>(db, part, nchunk, N);
    CUDA_LAUNCHED();
}
