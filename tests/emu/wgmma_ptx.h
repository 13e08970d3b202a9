/* Stand-in for kernels/cuda/wgmma_ptx.h in the emulated build: Hopper's
 * warpgroup products with A from registers (wg_rs), as warpgroup
 * collectives over the layouts that header states.  Each of the 128 threads
 * posts its A fragment and the B descriptor between two warpgroup barriers,
 * then forms its own accumulators (mma.m16n8k16's C layout per warp, warp w
 * of the warpgroup holding rows 16w .. 16w+15), reading B from the
 * launched dynamic shared memory through the descriptor: element (k, n) at
 *   K-major (tnspB 0):  start + (n / 8) SBO + (k / 8) LBO + 16 (n % 8) + 2 (k % 8)
 *   MN-major (tnspB 1): start + (n / 8) SBO + (k / 8) LBO + 16 (k % 8) + 2 (n % 8)
 * (bytes of 2-byte elements; the EMU_BF16_EXACT build's are 4 bytes, and its
 * offsets twice these)
 * the readings tests/gpu/wgmma_probe.cu found on an H200 (run 5; the
 * first version of this file had the MN-major one the other way round,
 * and agreed with the kernels in the same error).  A product
 * sums over k in order in fp32 and lands at once (the device's may land
 * any time before wg_wait: the kernels touch no accumulator between).
 *
 * Checked, as the device requires: the block a whole number of warpgroups,
 * all 128 threads taking part with the same descriptor and accumulate flag
 * (a thread missing leaves the others at the barrier: reported as a
 * deadlock), no swizzle (the only layout the kernels use), every B element
 * inside the dynamic shared memory, addresses 16-byte aligned. */
#ifndef SG_EMU_WGMMA_PTX_H
#define SG_EMU_WGMMA_PTX_H

#include "emu_threads.h"
#include "mma_ptx.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

inline uint32_t __cvta_generic_to_shared(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < emu::smem_lo || c > emu::smem_hi) {
        fprintf(stderr, "emu __cvta_generic_to_shared: %p is not in the dynamic shared memory\n", p);
        abort();
    }
    return (uint32_t)(c - emu::smem_lo);
}

inline void wg_fence() {}
inline void wg_commit() {}
template <int N>
inline void wg_wait() {}
inline void wg_fence_smem() {}
template <int N>
inline void wg_pin(float *) {}

inline uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo, int swz = 0) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32 | (uint64_t)swz << 62;
}

/* as kernels/cuda/wgmma_ptx.h; the emulator decodes the device's reading
 * (swap 0), so a swap here is a wrong descriptor */
inline uint64_t wg_desc_core(uint32_t saddr, uint32_t along_k, uint32_t along_mn, int mn, int swap) {
    return swap >> mn & 1 ? wg_desc(saddr, along_mn, along_k) : wg_desc(saddr, along_k, along_mn);
}
namespace emu {
inline void wg_fail(const char *what);
}
inline uint32_t wg_zero(const uint32_t *smem_zero) { return *smem_zero; }
inline void wg_fresh(tc_reg out[4], const tc_reg in[4], uint32_t zero) {
    if (zero) emu::wg_fail("wg_fresh: the shared zero is not 0");
    for (int i = 0; i < 4; ++i) out[i] = in[i];
}

namespace emu {
struct WgSlot {
    tc_reg a[4];
    uint64_t db;
    int acc;
};
inline WgSlot wg_xchg[8][128]; /* [warpgroup][thread]: blocks of up to 1024 threads */

inline void wg_fail(const char *what) {
    fprintf(stderr, "emu wgmma: %s\n", what);
    abort();
}

template <int N, int TB>
inline void wg_rs_emu(float *d, const tc_reg a[4], uint64_t db, int accumulate) {
    if (wg_bars.empty()) wg_fail("the block is not a whole number of warpgroups (128 threads)");
    const int wg = cur->warp / 4, t = (cur->warp % 4) * 32 + cur->lane;
    WgSlot &mine = wg_xchg[wg][t];
    for (int j = 0; j < 4; j++) mine.a[j] = a[j];
    mine.db = db, mine.acc = accumulate != 0;
    barrier_wait(wg_bars[wg]);
    const WgSlot *all = wg_xchg[wg];
    for (int u = 0; u < 128; u++)
        if (all[u].db != db || all[u].acc != mine.acc) wg_fail("the warpgroup's threads disagree on B or accumulate");
    if (db >> 62) wg_fail("a swizzled layout (only no swizzle is emulated)");
    const uint32_t start = (uint32_t)(db & 0x3FFF) << 4, lbo = (uint32_t)(db >> 16 & 0x3FFF) << 4,
                   sbo = (uint32_t)(db >> 32 & 0x3FFF) << 4;
    constexpr uint32_t ES = sizeof(__nv_bfloat16); /* 2; 4 in the EMU_BF16_EXACT build, its cores 256 bytes */
    auto bval = [&](int k, int n) {
        const uint32_t off = TB ? start + (n / 8) * sbo + (k / 8) * lbo + 8 * ES * (k % 8) + ES * (n % 8)
                                : start + (n / 8) * sbo + (k / 8) * lbo + 8 * ES * (n % 8) + ES * (k % 8);
        const unsigned char *p = smem_lo + off;
        if (p + 2 > smem_hi) wg_fail("a B element outside the dynamic shared memory");
        return __bfloat162float(*(const __nv_bfloat16 *)p);
    };
    /* A (64 x 16) from the posted fragments: (row r, col k) is in the slot
     * of warp r / 16, lane 4 (r % 8) + (k % 8) / 2, register
     * (r % 16) / 8 + 2 (k / 8), half k % 2 */
    auto aval = [&](int r, int k) {
        const WgSlot &s = all[(r / 16) * 32 + 4 * (r % 8) + (k % 8) / 2];
        return tc_half(s.a[(r % 16) / 8 + 2 * (k / 8)], k % 2);
    };
    const int w = cur->warp % 4, g = cur->lane >> 2, tq = cur->lane & 3;
    float out[N / 2];
    for (int i = 0; i < N / 2; i++) {
        const int e = i & 3, row = 16 * w + g + 8 * (e >> 1), col = 8 * (i >> 2) + 2 * tq + (e & 1);
        float s = mine.acc ? d[i] : 0.f;
        for (int k = 0; k < 16; k++) s += aval(row, k) * bval(k, col);
        out[i] = s;
    }
    barrier_wait(wg_bars[wg]); /* no thread posts again before all have read */
    for (int i = 0; i < N / 2; i++) d[i] = out[i];
}
}  // namespace emu

template <int TB>
inline void wg_rs_n64(float *d, const tc_reg a[4], uint64_t db, int accumulate) {
    emu::wg_rs_emu<64, TB>(d, a, db, accumulate);
}
template <int N, int TB>
inline void wg_rs(float *d, const tc_reg a[4], uint64_t db, int accumulate) {
    static_assert(N == 64 || N == 128, "wg_rs: N 64 or 128");
    emu::wg_rs_emu<N, TB>(d, a, db, accumulate);
}

#endif
