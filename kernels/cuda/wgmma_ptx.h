/* Hopper's warpgroup products (wgmma, sm_90a) as PTX: D (+)= A B for one
 * warpgroup of four consecutive warps (the first a multiple of 4), M 64,
 * N 64, 128 or 256, K 16, bf16 operands and fp32 accumulators.  B is read
 * from shared memory through a descriptor (wg_desc); A from shared memory
 * too (wg_ss_*) or from registers (wg_rs_*), in mma.m16n8k16's A fragment
 * (mma_ptx.h) per warp, warp w of the warpgroup holding rows 16w .. 16w+15.
 * The accumulators of warp w are mma.m16n8k16's C fragments of those rows,
 * one per 8 columns: d[4j + e] = (row 16w + g + 8 (e >> 1), col 8j + 2t +
 * (e & 1)), g = lane >> 2, t = lane & 3; so, as with mma.sync, two adjacent
 * 8-column blocks of an accumulator are the A operand of the next product
 * (tc_acc_to_a).
 *
 * The products run asynchronously: wg_fence before the first of a batch
 * (and whenever the registers they read or accumulate into were written by
 * other instructions since), wg_commit after it, and wg_wait<0> before any
 * accumulator is read.  Shared memory written by ordinary stores or cp.async
 * must be made visible to them by wg_fence_smem in each writing thread
 * before the barrier that orders the writes before the products.
 *
 * Shared-memory layouts (no swizzle): 8 x 8 core matrices of 128 contiguous
 * bytes, 16 bytes (8 elements along the contiguous dimension) a row.  LBO
 * is the byte stride between cores along K, SBO along M or N, whether the
 * operand is K-major (K contiguous: K for S = Q K^T) or MN-major (tnspB =
 * 1, N contiguous: V for O = P V); wg_desc_core says how that was settled.
 *
 * Only sm_90a has these instructions: in a build for any other target the
 * wrappers trap, and the kernels that use them are never launched there
 * (attn_wgmma_ok).  The emulated build (tests/emu) puts its own header of
 * this name first on the include path. */
#ifndef SG_WGMMA_PTX_H
#define SG_WGMMA_PTX_H

#include <stdint.h>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ASM(...) asm volatile(__VA_ARGS__)
#else
#define WG_ASM(...) __trap()
#endif

#define WG_D8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])

static __device__ __forceinline__ void wg_fence() { WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit() { WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void wg_wait() {
    WG_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Pins n accumulator registers in place (an empty asm that reads and
 * writes each): called after wg_wait and before a chain, so that the
 * compiler moves no read of an accumulator above the wait (it cannot see
 * that the products write them late) nor a write below the chain's start. */
template <int N>
static __device__ __forceinline__ void wg_pin(float *d) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
/* The same for n register A fragments (mma_ptx.h's tc_reg[4]): pinned
 * before wg_fence, so that the instructions writing them stay above it,
 * and after the wait of the last product that reads them, so that the
 * compiler gives their registers to nothing else while that product may
 * still read them (it sees the read only at the issue). */
template <int N>
static __device__ __forceinline__ void wg_pin_a(uint32_t (*a)[4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}
/* ordinary (and cp.async) shared-memory writes before the products read them */
static __device__ __forceinline__ void wg_fence_smem() { WG_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
 * the start address, LBO and SBO in 16-byte units in bits 0-13, 16-29 and
 * 32-45, the swizzle in bits 62-63 (0: none, 1: 128-byte), base offset 0.
 * saddr: a shared-state-space address (__cvta_generic_to_shared). */
static __device__ __forceinline__ uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo, int swz = 0) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32 | (uint64_t)swz << 62;
}

/* The descriptor of a no-swizzle core-matrix operand at saddr: LBO the
 * byte stride between its cores along K (the products' reduction
 * dimension), SBO along M or N, for K-major and MN-major operands alike.
 * That is the reading an H200 confirmed (tests/gpu/wgmma_probe.cu, run 5,
 * 2026-12-04): a K-major operand's cores along K are adjacent (LBO 128
 * bytes) and its 8-row groups SBO apart; an MN-major one (tnspB: V, or Q
 * and dO in the dK/dV products) has its 8-row groups along K (LBO) and its
 * cores along N 128 bytes apart (SBO).  swap (bit 0: K-major, bit 1:
 * MN-major; SG_WGMMA_SWAP) exchanges the two, for a device that reads them
 * the other way: tests/gpu/device.sh sets it from the probe's verdict. */
static __device__ __forceinline__ uint64_t wg_desc_core(uint32_t saddr, uint32_t along_k, uint32_t along_mn, int mn,
                                                        int swap) {
    return swap >> mn & 1 ? wg_desc(saddr, along_mn, along_k) : wg_desc(saddr, along_k, along_mn);
}

/* A fresh copy of a register A operand that a loop reuses in every pass
 * (the forward's Q, the dK/dV kernel's K and V).  ptxas 13.0 was seen to
 * give such registers to other values after the product that read them
 * (run 5: the forward at d 64 read P for Q from its second key tile on), as
 * though a product's A registers died with it.  So each product reads a
 * copy made in the same pass, out = in ^ zero with zero loaded from shared
 * memory in that pass (a volatile load, so that neither compiler can hoist
 * the copy out of the loop, nor fold it away as it folds a plain move), and
 * the loop-invariant value lives in registers that only ordinary
 * instructions read. */
static __device__ __forceinline__ uint32_t wg_zero(const uint32_t *smem_zero) {
    return *reinterpret_cast<const volatile uint32_t *>(smem_zero);
}
static __device__ __forceinline__ void wg_fresh(uint32_t out[4], const uint32_t in[4], uint32_t zero) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = in[i] ^ zero;
}

/* accumulate 0: D = A B (the accumulators' values are ignored); TB: B is
 * MN-major (tnspB) */

template <int TB>
static __device__ __forceinline__ void wg_ss_n64(float *d, uint64_t da, uint64_t db, int accumulate) {
    WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
           "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
           "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
           "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"
           " %32, %33, p, 1, 1, 0, %35;\n}\n"
           : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
           : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wg_rs_n64(float *d, const uint32_t a[4], uint64_t db, int accumulate) {
    WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
           "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
           "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
           "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"
           " {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
           : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
           : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wg_ss_n128(float *d, uint64_t da, uint64_t db, int accumulate) {
    WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
           "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
           "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
           "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
           "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
           "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
           " %64, %65, p, 1, 1, 0, %67;\n}\n"
           : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
           : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wg_rs_n128(float *d, const uint32_t a[4], uint64_t db, int accumulate) {
    WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
           "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
           "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
           "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
           "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
           "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
           " {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
           : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
           : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB));
}

template <int TB>
static __device__ __forceinline__ void wg_ss_n256(float *d, uint64_t da, uint64_t db, int accumulate) {
    WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
           "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
           "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
           "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
           "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
           "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "
           "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "
           "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, "
           "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "
           "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
           " %128, %129, p, 1, 1, 0, %131;\n}\n"
           : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56), WG_D8(64),
                   WG_D8(72), WG_D8(80), WG_D8(88), WG_D8(96), WG_D8(104), WG_D8(112), WG_D8(120)
           : "l"(da), "l"(db), "r"(accumulate), "n"(TB));
}

/* D (+)= A B with A from registers, N = 64 or 128 (the head dim of O = P V) */
template <int N, int TB>
static __device__ __forceinline__ void wg_rs(float *d, const uint32_t a[4], uint64_t db, int accumulate) {
    static_assert(N == 64 || N == 128, "wg_rs: N 64 or 128");
    if constexpr (N == 64) wg_rs_n64<TB>(d, a, db, accumulate);
    else wg_rs_n128<TB>(d, a, db, accumulate);
}

#undef WG_D8
#undef WG_ASM
#endif

