/* Stand-in for kernels/cuda/mma_ptx.h in the emulated build: ldmatrix and
 * mma.sync m16n8k16 as warp collectives, with the register layouts of the
 * PTX ISA that mma_ptx.h lists.  Unlike wmma (mma.h here), the kernels
 * depend on these layouts, so they are emulated exactly: each lane holds
 * only its own fragment registers, and an instruction gathers the others'
 * through a per-warp exchange between two warp barriers, as the hardware
 * does through its register file.
 *
 * tc_reg is a pair of __nv_bfloat16 (cuda_bf16.h), so that the
 * EMU_BF16_EXACT build, whose bf16 keeps fp32 values, runs the same code.
 * A product sums over k in order in fp32, starting from the accumulator:
 * not the tensor cores' internal order, so results agree with the device to
 * fp32 rounding of the sums, not bitwise.
 *
 * Checked, as the device requires: every ldmatrix row address 16-byte
 * aligned and inside the launched dynamic shared memory (the only shared
 * memory these kernels read with it), and all 32 lanes taking part (a lane
 * missing leaves the others at the warp barrier: reported as a deadlock). */
#ifndef SG_EMU_MMA_PTX_H
#define SG_EMU_MMA_PTX_H

#include "cuda_bf16.h"
#include "emu_threads.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

typedef __nv_bfloat162 tc_reg;

inline tc_reg tc_pack(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }

namespace emu {
struct TcSlot {
    const __nv_bfloat16 *row; /* ldmatrix: this lane's row address */
    tc_reg a[4], b[2];        /* mma: this lane's operands */
};
inline TcSlot tc_xchg[32][32]; /* [warp][lane]: blocks of up to 1024 threads */

inline float tc_half(const tc_reg &r, int hi) { return __bfloat162float(hi ? r.y : r.x); }

inline void tc_ldsm(tc_reg r[4], const __nv_bfloat16 *row, bool trans) {
    const unsigned char *lo = (const unsigned char *)row, *hi = (const unsigned char *)(row + 8);
    if (((uintptr_t)row & 15) != 0 || lo < smem_lo || hi > smem_hi) {
        fprintf(stderr, "emu ldmatrix: row address %p not 16-byte aligned or outside the dynamic shared memory\n",
                (const void *)row);
        abort();
    }
    const int w = cur->warp, lane = cur->lane, gq = lane >> 2, tq = lane & 3;
    tc_xchg[w][lane].row = row;
    barrier_wait(warp_bars[w]);
    for (int m = 0; m < 4; m++) {
        if (!trans) { /* (row gq, cols 2tq, 2tq+1) of matrix m */
            const __nv_bfloat16 *p = tc_xchg[w][8 * m + gq].row;
            r[m] = {p[2 * tq], p[2 * tq + 1]};
        } else { /* (rows 2tq, 2tq+1, col gq) */
            r[m] = {tc_xchg[w][8 * m + 2 * tq].row[gq], tc_xchg[w][8 * m + 2 * tq + 1].row[gq]};
        }
    }
    barrier_wait(warp_bars[w]); /* no lane posts again before all have read */
}
}  // namespace emu

inline void tc_ldsm_x4(tc_reg r[4], const __nv_bfloat16 *row) { emu::tc_ldsm(r, row, false); }
inline void tc_ldsm_x4_trans(tc_reg r[4], const __nv_bfloat16 *row) { emu::tc_ldsm(r, row, true); }

/* cp.async: a copy lands at a moment the hardware is free to choose, from
 * the issue to the wait that covers its group.  Each copy here takes one of
 * the two extremes, at random: at once, which shows a copy issued into a
 * tile that another warp still reads (a missing barrier before the issue),
 * or only at the wait, which shows a read before the wait or before the
 * barrier after it (the other threads' copies are not there yet).  The
 * choice mixes a counter with the scheduler's switch count, so that two
 * scheduler seeds make different choices.  Checked: both addresses 16-byte
 * aligned (8 elements), the destination inside the launched dynamic shared
 * memory, and no copy of one block left pending when the next block of the
 * launch issues its own (a kernel must wait for all it issued). */
namespace emu {
extern long switches;
struct CpCopy {
    void *dst;
    const void *src; /* null: the zero fill */
    size_t bytes;
};
struct CpThread {
    std::vector<std::vector<CpCopy>> groups; /* committed, oldest first */
    std::vector<CpCopy> open;                /* issued since the last commit */
    emu_uint3 block;                         /* the block that issued them */
};
inline CpThread cp_threads[1024];
inline unsigned long cp_draws;

inline void cp_land(const CpCopy &c) {
    if (c.src) memcpy(c.dst, c.src, c.bytes);
    else memset(c.dst, 0, c.bytes); /* zero bits: +0 for floats and the emulated bf16 alike */
}
inline CpThread &cp_thread() {
    CpThread &t = cp_threads[cur->warp * 32 + cur->lane];
    const bool pending = !t.open.empty() || !t.groups.empty();
    if (pending && (t.block.x != g_blockIdx.x || t.block.y != g_blockIdx.y || t.block.z != g_blockIdx.z)) {
        fprintf(stderr, "emu cp.async: a block ended with copies it never waited for\n");
        abort();
    }
    t.block = g_blockIdx;
    return t;
}
/* a copy issued: landed at once or left to the wait, by the draw above */
inline void cp_issue(const CpCopy &c) {
    CpThread &t = cp_thread();
    const unsigned long r = (++cp_draws + (unsigned long)switches) * 0x9e3779b97f4a7c15ul;
    if (r >> 63) cp_land(c);
    else t.open.push_back(c);
}
}  // namespace emu

inline void tc_cp8(__nv_bfloat16 *dst, const __nv_bfloat16 *src) {
    const size_t chunk = 8 * sizeof(__nv_bfloat16);
    const unsigned char *lo = (const unsigned char *)dst, *hi = (const unsigned char *)(dst + 8);
    if ((uintptr_t)dst % chunk || (uintptr_t)src % chunk || lo < emu::smem_lo || hi > emu::smem_hi) {
        fprintf(stderr, "emu cp.async: %p <- %p not 16-byte aligned or outside the dynamic shared memory\n",
                (void *)dst, (const void *)src);
        abort();
    }
    emu::cp_issue({dst, src, chunk});
}
/* src-size 16 when in, else 0: zeros, and src is not read (but must be a
 * valid, aligned address, as on the device) */
inline void tc_cp8_zfill(__nv_bfloat16 *dst, const __nv_bfloat16 *src, bool in) {
    if (in) {
        tc_cp8(dst, src);
        return;
    }
    if ((uintptr_t)src % 16) {
        fprintf(stderr, "emu cp.async: zero fill from %p, not 16-byte aligned\n", (const void *)src);
        abort();
    }
    const __nv_bfloat16 *none = nullptr;
    tc_cp8(dst, none); /* the checks of dst, and the landing order */
}
/* cp.async of 4 bytes (.ca): both addresses 4-byte aligned, the
 * destination inside the dynamic shared memory, src a valid address even
 * for the zero fill (!in), as on the device */
inline void tc_cp_f32_zfill(float *dst, const float *src, bool in) {
    const unsigned char *lo = (const unsigned char *)dst, *hi = (const unsigned char *)(dst + 1);
    if ((uintptr_t)dst % 4 || (uintptr_t)src % 4 || !src || lo < emu::smem_lo || hi > emu::smem_hi) {
        fprintf(stderr, "emu cp.async: %p <- %p not 4-byte aligned, or outside the dynamic shared memory\n",
                (void *)dst, (const void *)src);
        abort();
    }
    emu::cp_issue({dst, in ? src : nullptr, sizeof(float)});
}
inline void tc_cp_commit() {
    emu::CpThread &t = emu::cp_thread();
    t.groups.push_back(std::move(t.open));
    t.open.clear();
}
template <int N>
inline void tc_cp_wait() {
    emu::CpThread &t = emu::cp_thread();
    while (t.groups.size() > (size_t)N) {
        for (const emu::CpCopy &c : t.groups.front()) emu::cp_land(c);
        t.groups.erase(t.groups.begin());
    }
}

/* ex2.approx.ftz.f32: the host's exp2f between the device's two flushes,
 * a denormal input read as 0 (of its sign) and a denormal result stored
 * as +0; the device's approximation differs from exp2f in the last bits,
 * which the tests' tolerances cover as they do for exp2f. */
inline float tc_ex2(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.f, x);
    const float y = exp2f(x);
    return std::fpclassify(y) == FP_SUBNORMAL ? 0.f : y;
}

/* d += a b: A (16 x 16) element (i, k) is half k & 1 of register
 * (i >= 8) + 2 (k >= 8) of lane 4 (i & 7) + ((k & 7) >> 1); B (16 x 8)
 * element (k, j) half k & 1 of register (k >= 8) of lane 4 j + ((k & 7) >> 1);
 * this lane's d[e] is element (g + 8 (e >> 1), 2t + (e & 1)). */
inline void tc_mma(float d[4], const tc_reg a[4], const tc_reg b[2]) {
    const int w = emu::cur->warp, lane = emu::cur->lane, gq = lane >> 2, tq = lane & 3;
    emu::TcSlot *x = emu::tc_xchg[w];
    for (int e = 0; e < 4; e++) x[lane].a[e] = a[e];
    x[lane].b[0] = b[0], x[lane].b[1] = b[1];
    emu::barrier_wait(emu::warp_bars[w]);
    float r[4];
    for (int e = 0; e < 4; e++) {
        const int i = gq + 8 * (e >> 1), j = 2 * tq + (e & 1);
        float acc = d[e];
        for (int k = 0; k < 16; k++) {
            const int sub = (k & 7) >> 1;
            const float av = emu::tc_half(x[4 * (i & 7) + sub].a[(i >= 8) + 2 * (k >= 8)], k & 1);
            const float bv = emu::tc_half(x[4 * j + sub].b[k >= 8], k & 1);
            acc += av * bv;
        }
        r[e] = acc;
    }
    emu::barrier_wait(emu::warp_bars[w]);
    for (int e = 0; e < 4; e++) d[e] = r[e];
}

/* The traced kernels' clocks (kernels/cuda/mma_ptx.h).  tc_clock counts
 * the reads of all threads (the emulated device has no cycles): a thread's
 * own reads rise, so its phases add up to its total as on the device.
 * %globaltimer is the host's monotonic clock, %smid the block's index
 * modulo EMU_SMS, as if the blocks took the SMs in turn. */
namespace emu {
constexpr unsigned EMU_SMS = 132;
inline uint64_t clock_reads;
}  // namespace emu
inline uint64_t tc_clock() { return ++emu::clock_reads; }
inline uint64_t tc_globaltimer() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
inline uint32_t tc_smid() {
    const unsigned id = emu::g_blockIdx.x + emu::g_gridDim.x * (emu::g_blockIdx.y + emu::g_gridDim.y * emu::g_blockIdx.z);
    return id % emu::EMU_SMS;
}
inline uint32_t tc_hold(float x) {
    uint32_t r;
    memcpy(&r, &x, sizeof r);
    return r;
}

#endif
