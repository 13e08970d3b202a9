/* The CUDA execution model on the host, for the emulated CUDA kernels
 * (tests/e2e_cuda_emu.sh): blocks, threads, barriers, warp shuffles and
 * shared memory.
 *
 * What is emulated.  A launch runs its blocks one after another, in an order
 * shuffled by the scheduler's seed.  Every thread of a block is a coroutine
 * with its own stack (emu_runtime.cpp), so a kernel's code runs unchanged,
 * one thread at a time.  A thread runs until it reaches a barrier (__syncthreads,
 * __syncwarp, or a shuffle, which is two warp barriers); the scheduler then
 * resumes a runnable thread picked at random.  Between two barriers each
 * thread's code thus runs in a random order relative to the others', so a
 * thread that reads shared memory another thread writes, without a barrier
 * between them, sees the old contents (or the poison below) for some seeds:
 * the result comes out wrong, or differs between two seeds.  Shared memory
 * (dynamic and static) is filled with 0xff bytes, a NaN in fp32 and bf16,
 * before each block, so a read of anything not written in this block shows.
 *
 * What is not.  Timing, occupancy, memory coalescing and bank conflicts;
 * blocks running at the same time (they never communicate in these
 * kernels: no atomics, no global-memory handshakes; launches run to the end
 * in issue order, as on one stream); warp divergence (a __syncwarp or
 * shuffle must be reached by all 32 lanes, full mask only, which is all the
 * kernels use; anything else aborts).  A shuffle is a rendezvous of the
 * warp here, so it orders shared memory the way a __syncwarp does; on the
 * device it need not, and a __syncwarp missing where a shuffle lies between
 * a write and another lane's read goes unnoticed.  A block whose threads
 * wait at a barrier that not all of them reach (some exited, or the barrier
 * is in a divergent branch) is reported as a deadlock, and aborts. */
#ifndef SG_EMU_THREADS_H
#define SG_EMU_THREADS_H

#include <setjmp.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

/* CUDA's declaration specifiers: host code here */
#define __global__
#define __device__
#define __host__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct emu_uint3 {
    unsigned x, y, z;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

namespace emu {
struct Thread {
    jmp_buf jb; /* where it waits */
    void *fake; /* AddressSanitizer's fake stack while it waits (emu_runtime.cpp) */
    bool started, done;
    emu_uint3 tid;
    int warp, lane;
    int slot; /* its index in the scheduler's list of runnable threads, or -1 while it waits */
};
/* A barrier of `size` threads: the last one to arrive releases the others. */
struct Barrier {
    int size = 0;
    std::vector<int> waiting; /* thread indices */
};
extern Thread *cur; /* the thread now running */
extern emu_uint3 g_blockIdx;
extern dim3 g_blockDim, g_gridDim;
extern Barrier block_bar;
extern std::vector<Barrier> warp_bars;
extern std::vector<Barrier> wg_bars; /* per warpgroup of 128 threads; none unless the block is whole warpgroups */
extern std::vector<std::array<uint64_t, 32>> xchg; /* per warp: the shuffle slots */
extern unsigned char *smem_lo, *smem_hi;           /* the launched dynamic shared memory */
/* warpgroup products issued and not yet waited for, in the running block
 * (wgmma_ptx.h): a block must end with none */
inline long wg_in_flight = 0;
inline long wg_block_serial = 0; /* counts the blocks run, so that per-thread product state starts afresh in each */

/* Arrive at b and give the scheduler the choice of who runs next: one of
 * the runnable threads at random (this one among them once b opened). */
void barrier_wait(Barrier &b);

/* The block's dynamic shared memory (extern __shared__ arrays). */
unsigned char *dyn_smem();
/* A __shared__ variable of `bytes`: an offset into the static shared memory,
 * fixed per declaration (the caller keeps the pointer in a function-local
 * static), poisoned before each block like the dynamic part. */
void *static_smem(size_t bytes, size_t align);

void launch_impl(dim3 grid, dim3 block, size_t smem, std::function<void()> f);
template <class F>
void launch(dim3 grid, dim3 block, size_t smem, void *stream, F f) {
    (void)stream;
    launch_impl(grid, block, smem, f);
}
template <class F>
void launch(dim3 grid, dim3 block, F f) {
    launch_impl(grid, block, 0, f);
}
template <class F>
void launch(dim3 grid, dim3 block, size_t smem, F f) {
    launch_impl(grid, block, smem, f);
}
}  // namespace emu

/* `__shared__ T name dims;` in a kernel becomes EMU_SHARED(T, name, dims)
 * (tests/emu/cu2cpp.py): a reference to the same storage in every thread. */
#define EMU_SHARED(T, name, dims)                                                          \
    typedef T name##_emu_type dims;                                                        \
    static name##_emu_type *const name##_emu_at = static_cast<name##_emu_type *>(         \
        emu::static_smem(sizeof(name##_emu_type), alignof(name##_emu_type)));              \
    name##_emu_type &name = *name##_emu_at

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::g_blockIdx)
#define blockDim (emu::g_blockDim)
#define gridDim (emu::g_gridDim)

inline void __syncthreads() { emu::barrier_wait(emu::block_bar); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) {
        fprintf(stderr, "emu: __syncwarp with a partial mask is not emulated\n");
        abort();
    }
    emu::barrier_wait(emu::warp_bars[emu::cur->warp]);
}
/* Every lane posts its value, the warp meets, every lane reads its partner's,
 * the warp meets again (so that no lane overwrites a slot still to be read). */
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    static_assert(sizeof(T) <= 8, "shuffles of up to 8 bytes");
    if (mask != 0xffffffffu || width != 32) {
        fprintf(stderr, "emu: only full-warp shuffles are emulated\n");
        abort();
    }
    auto &x = emu::xchg[emu::cur->warp];
    memcpy(&x[emu::cur->lane], &v, sizeof(T));
    emu::barrier_wait(emu::warp_bars[emu::cur->warp]);
    T r;
    memcpy(&r, &x[emu::cur->lane ^ (lane_mask & 31)], sizeof(T));
    emu::barrier_wait(emu::warp_bars[emu::cur->warp]);
    return r;
}
/* The warp's vote: every lane posts its predicate, the warp meets, every
 * lane reads all 32, the warp meets again. */
inline bool __any_sync(unsigned mask, bool pred) {
    if (mask != 0xffffffffu) {
        fprintf(stderr, "emu: only full-warp votes are emulated\n");
        abort();
    }
    auto &x = emu::xchg[emu::cur->warp];
    x[emu::cur->lane] = pred ? 1 : 0;
    emu::barrier_wait(emu::warp_bars[emu::cur->warp]);
    bool any = false;
    for (int l = 0; l < 32; l++) any = any || x[l] != 0;
    emu::barrier_wait(emu::warp_bars[emu::cur->warp]);
    return any;
}

#endif
