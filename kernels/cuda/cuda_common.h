/* Shared by the CUDA ops (kernels/cuda/): error checks, the stream and
 * cuBLASLt handle every op uses, and the launch helpers.
 *
 * All ops run on one stream (sg_stream()) in issue order, so an op may use
 * the previous op's output without synchronising; the host waits only where
 * it reads a result (op_download, a returned loss).  Device buffers hold
 * fp32 (`real` is float in the CUDA build); matrix multiplies read bf16
 * copies made on the fly and accumulate in fp32 (the paper's autocast). */
#ifndef SG_CUDA_COMMON_H
#define SG_CUDA_COMMON_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "scratch.h"

/* An on/off environment switch: unset or empty gives dflt, "1" on (1), "0"
 * off (0), anything else -1, which the caller reports: "off" or "no" must
 * not read as on. */
static inline int sg_env_switch(const char *name, int dflt) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    return !strcmp(e, "1") ? 1 : !strcmp(e, "0") ? 0 : -1;
}

#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) sg_cuda_fail(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)
#define CUBLAS_CHECK(call)                                                                      \
    do {                                                                                        \
        cublasStatus_t s_ = (call);                                                             \
        if (s_ != CUBLAS_STATUS_SUCCESS) sg_cuda_fail(__FILE__, __LINE__, #call, "cuBLAS error"); \
    } while (0)
/* after a kernel launch: configuration errors surface here, not later */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

#ifdef __cplusplus
extern "C" {
#endif
/* Prints where and why, then exits 1: a failed CUDA call leaves the device
 * state unknown, and training must not go on with it. */
void sg_cuda_fail(const char *file, int line, const char *call, const char *why) __attribute__((noreturn));
cudaStream_t sg_stream(void);
cublasLtHandle_t sg_cublaslt(void);
cublasHandle_t sg_cublas(void); /* bound to sg_stream() */
/* Device buffers, counted (device_memory.cu): cudaMalloc and cudaFree for
 * every buffer the backend holds, so that op_memory_peak and
 * sg_out_of_memory know them.  sg_malloc leaves no sticky error behind a failure. */
cudaError_t sg_malloc(void **p, size_t bytes);
cudaError_t sg_free(void *p);
/* A buffer the step cannot do without (scratch) was refused: says so, with
 * the sizes and what to change, and exits 1. */
void sg_out_of_memory(size_t bytes, const char *what) __attribute__((noreturn));
/* The matmuls forget the bf16 copies they keep for the backward (matmul.cu):
 * called when any op buffer is freed. */
void sg_matmul_forget(void);

/* Issue order, for the bf16 twins below: a count that every sg_stream(),
 * sg_cublas() and sg_cublaslt() call moves on.  Whatever writes device
 * memory issues it on the op stream through one of these (a kernel launch,
 * an async copy or memset, a library call, op_upload, op_copy, op_zero),
 * so while the count stands still nothing can have been written.  Paths
 * that only wait or read back (op_sync, op_download) leave it alone. */
unsigned long sg_stream_seq(void);

/* Producer-written bf16 twins (matmul.cu).  An op whose fp32 output a
 * matmul reads next (LayerNorm, GELU, the gradients of both) also writes
 * each output element's bf16 value, __float2bfloat16 of the very float it
 * stores (the matmul's own cast), into a buffer from the matmul's table of
 * kept copies, so the matmul need not read the fp32 tensor again.
 *   t = sg_twin_begin(out, n);   NULL: no twin (SG_MATMUL_KEEP=0, no memory)
 *   ...launch the kernels, the one that writes out[0, n) also writing t...
 *   if (t) sg_twin_written(out, n);   after the op's last launch
 * Every element of out[0, n) must be written, to both.  The matmul takes
 * the twin only while sg_stream_seq() has not moved since
 * sg_twin_written, else it casts out as before. */
__nv_bfloat16 *sg_twin_begin(const float *out, long n);
void sg_twin_written(const float *out, long n);
/* Twin-only outputs.  After sg_twin_begin gave a twin: the fp32 output the
 * kernel must store, which is out, or NULL when out[0, n) was promised to
 * matmuls alone (ops.h, op_matmul_only) and the twin is all they will read,
 * so the kernel stores the twin only (a write of 4 bytes an element saved).
 * An op that can take NULL calls it; one that cannot simply stores out. */
float *sg_twin_fp32(float *out, long n);
/* out[0, n) is being stored in fp32 with no twin: a twin an earlier call
 * left for it is forgotten (an op that writes a twin only sometimes). */
void sg_twin_none(const float *out, long n);
/* A twin that two ops write (dqkv in the value-gated arms: the attention's
 * backward writes the dq and dk parts, the gate's backward the dv part).
 * The first op, instead of sg_twin_written, calls sg_twin_partial after
 * its last launch.  The second, if issued right after it, gets the twin
 * from sg_twin_rest (NULL otherwise: it then writes no twin, which is never
 * taken), and *store: whether the fp32 tensor is stored (sg_twin_fp32's
 * answer to the first op); it writes its part and calls sg_twin_written. */
void sg_twin_partial(const float *out, long n);
__nv_bfloat16 *sg_twin_rest(const float *out, long n, int *store);
/* How many fp32 outputs were left unstored that way (tests). */
long sg_matmul_stores_skipped(void);
/* A tensor promised as a bf16 operand (ops.h, op_bf16_operand) holds its
 * values in bf16, in its own first 2n bytes: those, else NULL (not
 * promised, or SG_BF16_OPERANDS=0) and the tensor is fp32 (matmul.cu). */
const __nv_bfloat16 *sg_bf16_stored(const float *p, long n);
/* A tensor promised as an attention operand (ops.h, op_attention_operand:
 * qkv) is stored the same way; its parts (q, k, v) are found by
 * sg_bf16_inside(p): the bf16 of element p of any tensor stored in bf16,
 * else NULL (p's tensor holds fp32). */
const __nv_bfloat16 *sg_bf16_inside(const float *p);
/* For a writer of out[0, n) other than a matmul (the value gate's vg,
 * ops.h: op_attention_operand): where to store its bf16 values, when out
 * is promised so (counted in sg_matmul_bf16_outputs, and under
 * SG_TWIN_POISON=1 the unused half of its bytes set to NaN), else NULL:
 * store fp32. */
__nv_bfloat16 *sg_bf16_output(float *out, long n);
/* Stops the program if any of q, k, v (null allowed; any fp32 operand) is
 * stored in bf16: op reads them in fp32, and op_attention_operand's promise
 * is taken only for the mma tiles (attention_fwd.cu). */
void sg_attn_need_fp32(const char *op, const float *q, const float *k, const float *v);
/* How many matmul outputs were stored in bf16 that way (tests). */
long sg_matmul_bf16_outputs(void);
/* How many operand casts the matmuls have skipped, for a twin or a kept
 * copy (tests). */
long sg_matmul_casts_skipped(void);
/* Whether kept bf16 copies are on (SG_MATMUL_KEEP, matmul.cu): the
 * matmuls' copies and twins, and the attention's kept packs. */
int sg_keep_copies(void);
/* How many mma backwards took their forward's packed Q, K, V
 * (attention_pack.cu; tests). */
long sg_attn_packs_reused(void);
long sg_attn_dq_stored(void);
/* the mma backward's dK/dV and dQ launches with their strips pipelined
 * (SG_ATTN_BWD_PIPE=1; attention_bwd_mma.cu) */
long sg_attn_bwd_piped(void);
/* the attention kernels launched on Hopper's warpgroup products (SG_ATTN_WGMMA=1; attention_fwd.cu) */
long sg_attn_wgmma_calls(void);
/* How many of the mma kernels' q, k, v (and dO) operands were read in
 * place, from a qkv stored in bf16, instead of packed (attention_pack.cu;
 * tests) */
long sg_attn_inplace_reads(void); /* backwards whose dQ came from the stored dS (SG_ATTN_DQ=stored) */
/* op_free's count (runtime.cu): an address may come back for another
 * buffer, so what a table keyed by address holds from before the count
 * moved is not used (attention_pack.cu). */
unsigned long sg_free_count(void);
void sg_count_free(void);
/* SG_MATMUL_TUNE's switch for a program that compares both ways
 * (bench_gpu --matmul, test_gpu_ops): on (1) or off (0), overriding the
 * variable. */
void sg_matmul_set_tune(int on);
/* d[m, n] = op(a) op(b) (+ d when accumulate), column-major, with bf16
 * operands on cuBLASLt; d fp32, or bf16 when out_bf16 (never
 * accumulated), issued on the stream (gemm.cu). */
void sg_gemm(void *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, int m, int n, int k, int ta, int tb, int lda,
             int ldb, int ldc, int accumulate, int out_bf16);
/* SG_MATMUL_STATS=1's report of what tuning chose, per shape (gemm.cu) */
void sg_gemm_print_tuning(void);
/* The classifier's rows per chunk for N rows of Vp classes
 * (classifier.cu), and, for tests, a fixed chunk (0: the rule). */
int sg_classifier_chunk_rows(int N, int Vp);
void sg_classifier_set_chunk(int rows);
/* dst[0, n) = sg_cast_bf16(src[0, n)), issued on the stream: the matmuls'
 * operand cast (matmul.cu), four elements a thread where aligned. */
void sg_cast_into(__nv_bfloat16 *dst, const float *src, long n);
/* bf16 copies of the weights, kept across forwards (weight_copies.cu).
 * sg_weight_bf16: the copy of w[0, n), current (cast now if it was stale),
 * zero in [n, n_out); NULL when w is not inside the vector promised with
 * op_params, SG_MATMUL_KEEP=0 or no memory: the caller casts as before.
 * sg_weight_update: for AdamW's segment p[0, n): the copy of exactly that
 * weight, for the caller's launch to write whole (it counts as current
 * from then on), or NULL; copies it covers only in part become stale.
 * sg_weights_freed: op_free's hook (the promise ends with its vector).
 * The counts, for tests: reads a current copy served, casts into copies. */
const __nv_bfloat16 *sg_weight_bf16(const float *w, long n, long n_out);
__nv_bfloat16 *sg_weight_update(const float *p, long n);
void sg_weights_freed(const void *p);
long sg_weight_reads_served(void);
long sg_weight_casts(void);
/* op_upload's copy of host[0, bytes) to dev through a pinned staging
 * buffer, issued on the stream and not waited for (upload_staging.cu): 1,
 * or 0 when bytes is too large or no pinned memory could be had, and the
 * caller copies and waits. */
int sg_upload_staged(void *dev, const void *host, size_t bytes);
#ifdef __cplusplus
}
#endif

static inline unsigned sg_blocks(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

/* fp32 operations each rounded on its own: the _rn intrinsics, which nvcc
 * never fuses into an fma, so a kernel gets the bits of the CPU build's C11
 * (no contraction) whatever nvcc would schedule (AdamW, the rotary
 * embedding).  The host emulator (tests/emu) has no such intrinsics, and
 * g++ does not contract there, so it computes the plain operation. */
#ifdef __CUDA_ARCH__
#define SG_RN(dev, host) dev
#else
#define SG_RN(dev, host) host
#endif
__device__ __forceinline__ float sg_rn_mul(float a, float b) { return SG_RN(__fmul_rn(a, b), a * b); }
__device__ __forceinline__ float sg_rn_add(float a, float b) { return SG_RN(__fadd_rn(a, b), a + b); }
__device__ __forceinline__ float sg_rn_sub(float a, float b) { return SG_RN(__fsub_rn(a, b), a - b); }
__device__ __forceinline__ float sg_rn_div(float a, float b) { return SG_RN(__fdiv_rn(a, b), a / b); }
__device__ __forceinline__ float sg_rn_sqrt(float a) { return SG_RN(__fsqrt_rn(a), sqrtf(a)); }

/* sigmoid(z) without overflow for either sign of z: the gates' g
 * (gate.cu) and, fused into the attention's backward, their 1 - g */
__device__ __forceinline__ float sg_sigmoid(float z) {
    if (z >= 0.f) return 1.f / (1.f + expf(-z));
    const float e = expf(z);
    return e / (1.f + e);
}

/* A gate's z from its read's reduced dot product s (||v||^2 or w.v);
 * *nrm = ||v|| (norm gate), else 0.  The gates' forward and backward
 * (gate.cu) and the backward fused into the attention's share it, so a
 * backward recomputes the forward's z bit for bit where their reductions
 * agree. */
__device__ __forceinline__ float sg_gate_z(float s, int norm, float beta, float tau_or_b, int d, float *nrm) {
    if (!norm) {
        *nrm = 0.f;
        return s + tau_or_b;
    }
    *nrm = sqrtf(s);
    return beta * (*nrm / sqrtf((float)d) - tau_or_b);
}

/* The factor of dz dz/dv in a gate's backward: dz (times w_h, the
 * projection gate) or dz beta rsd / ||v|| (times v, the norm gate; 0 at
 * v = 0), rsd = 1 / sqrt(d). */
__device__ __forceinline__ float sg_gate_dir(float dz, int norm, float beta, float rsd, float nrm) {
    return norm ? (nrm > 0.f ? dz * beta * rsd / nrm : 0.f) : dz;
}

/* The gates' parameter gradients from per-tile partials
 * part[(tile H + h) np + k], added over the tiles in a fixed order into
 * dtau (np 1) or db (k 0) and dw (k 1 .. d): gate.cu's reduction, also
 * launched after the attention's backward with the gate fused into it. */
void sg_gate_param_reduce(float *dtau, float *dw, float *db, const double *part, int ntiles, int H, int d, int np,
                          int norm);

/* The bf16 a matmul reads for the fp32 value v (round to nearest even):
 * matmul.cu's cast and every twin store go through this one conversion,
 * which is what makes a twin bitwise the cast it replaces. */
__device__ __forceinline__ __nv_bfloat16 sg_cast_bf16(float v) { return __float2bfloat16(v); }

/* 16-byte accesses for the vector paths (p 16-byte aligned).  A float4
 * store through a float4 pointer came out of nvcc 13 as four 4-byte stores
 * in places; __stwb is one 16-byte st.global.wb (the default write-back
 * policy). */
__device__ __forceinline__ float4 sg_ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ void sg_st4(float *p, float4 x) { __stwb(reinterpret_cast<float4 *>(p), x); }
/* Four and eight consecutive bf16 as one access: 8 and 16 bytes, aligned
 * so.  Through __nv_bfloat162 pointers, or a struct of them, nvcc 13 makes
 * one 4-byte access per pair, each a warp instruction of its own, and an
 * elementwise kernel reading 4 bytes a lane has too few loads in flight to
 * cover the memory's latency (docs/cuda.md, "Elementwise ops"); on the
 * device the bits therefore go through uint2 and uint4.  The emulator
 * copies the struct (in its exact-bf16 build, 4 bytes an element, twice
 * the size at the same alignment). */
struct __align__(8) sg_bf16x4 {
    __nv_bfloat162 h[2];
};
struct __align__(16) sg_bf16x8 {
    __nv_bfloat162 h[4];
};
#ifdef __CUDA_ARCH__
__device__ __forceinline__ sg_bf16x4 sg_ld_bf16x4(const __nv_bfloat16 *p) {
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    sg_bf16x4 q;
    q.h[0] = *reinterpret_cast<const __nv_bfloat162 *>(&u.x), q.h[1] = *reinterpret_cast<const __nv_bfloat162 *>(&u.y);
    return q;
}
__device__ __forceinline__ sg_bf16x8 sg_ld_bf16x8(const __nv_bfloat16 *p) {
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    sg_bf16x8 q;
    q.h[0] = *reinterpret_cast<const __nv_bfloat162 *>(&u.x), q.h[1] = *reinterpret_cast<const __nv_bfloat162 *>(&u.y);
    q.h[2] = *reinterpret_cast<const __nv_bfloat162 *>(&u.z), q.h[3] = *reinterpret_cast<const __nv_bfloat162 *>(&u.w);
    return q;
}
__device__ __forceinline__ void sg_st_bf16x4(__nv_bfloat16 *p, const sg_bf16x4 &q) {
    uint2 u;
    u.x = *reinterpret_cast<const unsigned *>(&q.h[0]), u.y = *reinterpret_cast<const unsigned *>(&q.h[1]);
    *reinterpret_cast<uint2 *>(p) = u;
}
__device__ __forceinline__ void sg_st_bf16x8(__nv_bfloat16 *p, const sg_bf16x8 &q) {
    uint4 u;
    u.x = *reinterpret_cast<const unsigned *>(&q.h[0]), u.y = *reinterpret_cast<const unsigned *>(&q.h[1]);
    u.z = *reinterpret_cast<const unsigned *>(&q.h[2]), u.w = *reinterpret_cast<const unsigned *>(&q.h[3]);
    *reinterpret_cast<uint4 *>(p) = u;
}
#else
__device__ __forceinline__ sg_bf16x4 sg_ld_bf16x4(const __nv_bfloat16 *p) {
    return *reinterpret_cast<const sg_bf16x4 *>(p);
}
__device__ __forceinline__ sg_bf16x8 sg_ld_bf16x8(const __nv_bfloat16 *p) {
    return *reinterpret_cast<const sg_bf16x8 *>(p);
}
__device__ __forceinline__ void sg_st_bf16x4(__nv_bfloat16 *p, const sg_bf16x4 &q) {
    *reinterpret_cast<sg_bf16x4 *>(p) = q;
}
__device__ __forceinline__ void sg_st_bf16x8(__nv_bfloat16 *p, const sg_bf16x8 &q) {
    *reinterpret_cast<sg_bf16x8 *>(p) = q;
}
#endif
/* The bf16 of four floats, each as sg_cast_bf16 rounds it, at t (8-byte
 * aligned): one 8-byte store. */
__device__ __forceinline__ void sg_st_bf16x4(__nv_bfloat16 *t, float4 v) {
    sg_bf16x4 q;
    q.h[0].x = sg_cast_bf16(v.x), q.h[0].y = sg_cast_bf16(v.y);
    q.h[1].x = sg_cast_bf16(v.z), q.h[1].y = sg_cast_bf16(v.w);
    sg_st_bf16x4(t, q);
}
/* The same for eight floats at t (16-byte aligned): one 16-byte store. */
__device__ __forceinline__ void sg_st_bf16x8(__nv_bfloat16 *t, float4 a, float4 b) {
    sg_bf16x8 q;
    q.h[0].x = sg_cast_bf16(a.x), q.h[0].y = sg_cast_bf16(a.y);
    q.h[1].x = sg_cast_bf16(a.z), q.h[1].y = sg_cast_bf16(a.w);
    q.h[2].x = sg_cast_bf16(b.x), q.h[2].y = sg_cast_bf16(b.y);
    q.h[3].x = sg_cast_bf16(b.z), q.h[3].y = sg_cast_bf16(b.w);
    sg_st_bf16x8(t, q);
}

/* An operand element in fp32: from an fp32 tensor, or from one stored in
 * bf16 (sg_bf16_stored, sg_bf16_inside), as autocast's fp32 ops read a bf16
 * linear output. */
__device__ __forceinline__ float ld1(const float *p, long i) { return p[i]; }
__device__ __forceinline__ float ld1(const __nv_bfloat16 *p, long i) { return __bfloat162float(p[i]); }
/* four consecutive elements at p (16-byte aligned fp32, 8-byte bf16) */
__device__ __forceinline__ float4 ldv4(const float *p) { return sg_ld4(p); }
__device__ __forceinline__ float4 sg_bf16x2_f4(__nv_bfloat162 lo, __nv_bfloat162 hi) {
    return make_float4(__bfloat162float(lo.x), __bfloat162float(lo.y), __bfloat162float(hi.x),
                       __bfloat162float(hi.y));
}
__device__ __forceinline__ float4 ldv4(const __nv_bfloat16 *p) {
    const sg_bf16x4 q = sg_ld_bf16x4(p);
    return sg_bf16x2_f4(q.h[0], q.h[1]);
}
/* eight consecutive elements at p (16-byte aligned), as two float4: fp32
 * in two 16-byte loads, bf16 in one */
__device__ __forceinline__ void ldv8(const float *p, float4 &a, float4 &b) {
    a = sg_ld4(p);
    b = sg_ld4(p + 4);
}
__device__ __forceinline__ void ldv8(const __nv_bfloat16 *p, float4 &a, float4 &b) {
    const sg_bf16x8 q = sg_ld_bf16x8(p);
    a = sg_bf16x2_f4(q.h[0], q.h[1]);
    b = sg_bf16x2_f4(q.h[2], q.h[3]);
}

#endif
