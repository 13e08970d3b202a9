/* Warp-level tensor-core primitives of sm_80 and later, as PTX: the
 * m16n8k16 bf16 product with fp32 accumulation and the ldmatrix shared
 * memory loads that feed it.  Unlike wmma, the register layout of these
 * fragments is specified (PTX ISA, "Matrix Fragments for mma.m16n8k16"), so
 * a kernel may turn an accumulator into the next product's operand without
 * a trip through shared memory, which is what the streaming attention
 * (attention_*_mma.cu) is built on.
 *
 * Included as <mma_ptx.h>: the emulated build (tests/emu) puts its own
 * header of this name first on the include path, which implements the same
 * layouts on the host.
 *
 * Layouts, with g = lane >> 2 and t = lane & 3 (a tc_reg holds two bf16,
 * the lower index in the low half):
 *   A (16 x 16, row-major):  a[0] = (row g,   cols 2t, 2t+1)
 *                            a[1] = (row g+8, cols 2t, 2t+1)
 *                            a[2] = (row g,   cols 2t+8, 2t+9)
 *                            a[3] = (row g+8, cols 2t+8, 2t+9)
 *   B (16 x 8, k x n):       b[0] = (rows 2t, 2t+1,   col g)
 *                            b[1] = (rows 2t+8, 2t+9, col g)
 *   C, D (16 x 8, fp32):     c[0], c[1] = (row g,   cols 2t, 2t+1)
 *                            c[2], c[3] = (row g+8, cols 2t, 2t+1)
 * So the accumulators of two adjacent 8-column products, c and c', are the
 * A operand of their 16 columns: {pack(c0,c1), pack(c2,c3), pack(c'0,c'1),
 * pack(c'2,c'3)}.
 *
 * ldmatrix .x4 loads four 8 x 8 bf16 matrices: lanes 8m .. 8m+7 give the
 * addresses of the 8 rows of matrix m (16-byte aligned rows of 8
 * elements), and r[m] of lane l receives (row l >> 2, cols 2(l & 3),
 * 2(l & 3) + 1) of matrix m; .trans receives (rows 2(l & 3), 2(l & 3) + 1,
 * col l >> 2) instead, the matrix read transposed. */
#ifndef SG_MMA_PTX_H
#define SG_MMA_PTX_H

#include <cuda_bf16.h>
#include <stdint.h>

typedef uint32_t tc_reg;

static __device__ __forceinline__ tc_reg tc_pack(float lo, float hi) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const tc_reg *>(&p);
}

static __device__ __forceinline__ void tc_ldsm_x4(tc_reg r[4], const __nv_bfloat16 *row) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void tc_ldsm_x4_trans(tc_reg r[4], const __nv_bfloat16 *row) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* Asynchronous copies (sm_80's cp.async): 8 bf16 (16 bytes) from global
 * to shared memory, both 16-byte aligned, bypassing the registers and L1
 * (.cg).  A thread's copies form groups (tc_cp_commit); tc_cp_wait<N>
 * returns once all but the newest N of its groups have landed.  Another
 * thread sees the data only after that wait and a barrier. */
static __device__ __forceinline__ void tc_cp8(__nv_bfloat16 *dst, const __nv_bfloat16 *src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}
/* The same copy when in, else 16 bytes of zeros into dst and nothing read
 * (src-size 0: the copy's zero fill); src must still be a valid address. */
static __device__ __forceinline__ void tc_cp8_zfill(__nv_bfloat16 *dst, const __nv_bfloat16 *src, bool in) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(in ? 16 : 0) : "memory");
}
/* One float (4 bytes, both 4-byte aligned) by cp.async, into the same
 * groups; zeros when !in (src still a valid address).  Sizes under 16
 * bytes take .ca (through L1), the only form that has them. */
static __device__ __forceinline__ void tc_cp_f32_zfill(float *dst, const float *src, bool in) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(in ? 4 : 0) : "memory");
}
static __device__ __forceinline__ void tc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void tc_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* 2^x on the special-function unit with denormals flushed: an input
 * below 2^-126 in magnitude is read as 0 and a result below 2^-126 comes
 * out +0 (ex2.approx.ftz.f32; 2^-inf = +0).  exp2f, without fast math,
 * wraps the same MUFU.EX2 in a fix-up for denormal results: a compare and
 * two predicated multiplies around every exponential, which in the
 * softmax loops cost more issue slots than the exponential itself.  A
 * probability below 2^-126 is 0 either way once it is rounded for the next
 * product and summed with the row's largest term, 1. */
static __device__ __forceinline__ float tc_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* d += a b: A 16 x 16, B 16 x 8, fp32 accumulators.  Not volatile: it
 * touches nothing but its operands, so the compiler may schedule it freely
 * (the loads are volatile: they read shared memory, which the asm cannot
 * declare, and must stay between the barriers that order it). */
static __device__ __forceinline__ void tc_mma(float d[4], const tc_reg a[4], const tc_reg b[2]) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The clocks of a traced kernel (attention_trace.h).  tc_clock is the SM's
 * cycle counter and tc_globaltimer the device's nanoseconds; both are
 * volatile, so they stay where they are written relative to the other
 * volatile instructions (the loads, barriers and tc_hold).  tc_hold reads x
 * into a register the caller keeps: the instruction waits, by the register
 * scoreboard, until whatever writes x has completed (an mma's
 * accumulator), so a clock read after it counts that product's latency in
 * the phase that issued it rather than in the next one. */
static __device__ __forceinline__ uint64_t tc_clock() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
    return t;
}
static __device__ __forceinline__ uint64_t tc_globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t)::"memory");
    return t;
}
static __device__ __forceinline__ uint32_t tc_smid() {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
    return s;
}
static __device__ __forceinline__ uint32_t tc_hold(float x) {
    uint32_t r;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(r) : "f"(x) : "memory");
    return r;
}

#endif
