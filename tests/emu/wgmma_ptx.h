/* Stand-in for kernels/cuda/wgmma_ptx.h in the emulated build: Hopper's
 * warpgroup products with A from registers (wg_rs), as warpgroup
 * collectives over the layouts that header states, run as asynchronously
 * as the device may run them.
 *
 * Issue (wg_rs): each of the 128 threads posts its A fragment and the B
 * descriptor in a slot of its warpgroup's ring, saves the accumulators'
 * values the product starts from, and fills them with NaN.  Nothing is
 * multiplied yet.
 * Retirement (wg_wait<N>, all 128 threads): every product of a group older
 * than the newest N committed ones is formed then, in issue order, each
 * thread its own accumulators (mma.m16n8k16's C layout per warp, warp w of
 * the warpgroup holding rows 16w .. 16w+15), with B read from the launched
 * dynamic shared memory through the descriptor at that moment: element
 * (k, n) at
 *   K-major (tnspB 0):  start + (n / 8) SBO + (k / 8) LBO + 16 (n % 8) + 2 (k % 8)
 *   MN-major (tnspB 1): start + (n / 8) SBO + (k / 8) LBO + 16 (k % 8) + 2 (n % 8)
 * (bytes of 2-byte elements; the EMU_BF16_EXACT build's are 4 bytes, and its
 * offsets twice these), the readings tests/gpu/wgmma_probe.cu found on an
 * H200 (run 5; the first version of this file had the MN-major one the
 * other way round, and agreed with the kernels in the same error).  A
 * product sums over k in order in fp32.  A product whose accumulators are
 * those of an earlier one still in flight continues from its result, as a
 * chain does on the device.
 *
 * So what the device leaves undefined shows here: an accumulator read
 * between issue and its wait reads NaN; one written there is overwritten
 * by the product's result; shared memory overwritten before the wait (a
 * cp.async into a buffer still being read) changes the product; an A
 * fragment's registers written before the wait abort ("changed before the
 * wait"), as do products never waited for by the block's end, products
 * waited for before they were committed, and a product issued with no
 * wg_fence since the thread's last wait.
 *
 * Checked too, as the device requires: the block a whole number of
 * warpgroups, all 128 threads taking part with the same descriptor,
 * accumulate flag and shape (a thread missing leaves the others at the
 * barrier: reported as a deadlock), no swizzle (the only layout the kernels
 * use), every B element inside the dynamic shared memory. */
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

inline void wg_fence_smem() {}
template <int N>
inline void wg_pin(float *) {}
template <int N>
inline void wg_pin_a(tc_reg (*)[4]) {}

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
constexpr int WG_RING = 32; /* products a warpgroup may have in flight */
struct WgProd {                  /* one product of a warpgroup, as its threads posted it */
    tc_reg a[128][4];
    uint64_t db[128];
    int acc[128], n[128], tb[128];
};
inline WgProd wg_ring[8][WG_RING]; /* [warpgroup][slot]: blocks of up to 1024 threads */

struct WgPend { /* a product this thread issued and has not retired */
    long seq, group;
    float *d;
    int n; /* its accumulators */
    bool chained; /* its accumulators are an earlier product's in flight: it continues from that result */
    float init[128];
    const tc_reg *asrc; /* the caller's A registers, and what they held at issue */
    tc_reg asnap[4];
};
struct WgThread {
    long serial = -1;         /* the block (wg_block_serial) this state is of */
    long seq = 0, group = 0;  /* products issued; the open (uncommitted) group */
    bool fenced = false;      /* a wg_fence since the last wait */
    std::vector<WgPend> pend; /* in issue order */
};
inline WgThread wg_thr[1024];

inline void wg_fail(const char *what) {
    fprintf(stderr, "emu wgmma: %s\n", what);
    abort();
}
inline WgThread &wg_me() {
    if (wg_bars.empty()) wg_fail("the block is not a whole number of warpgroups (128 threads)");
    WgThread &t = wg_thr[cur->warp * 32 + cur->lane];
    if (t.serial != wg_block_serial) t = WgThread(), t.serial = wg_block_serial;
    return t;
}

template <int N, int TB>
inline void wg_rs_emu(float *d, const tc_reg a[4], uint64_t db, int accumulate) {
    WgThread &me = wg_me();
    if (!me.fenced) wg_fail("a product issued with no wg_fence since the last wait");
    if ((long)me.pend.size() >= WG_RING) wg_fail("more products in flight than the emulator's ring holds");
    const int wg = cur->warp / 4, t = (cur->warp % 4) * 32 + cur->lane;
    WgProd &pr = wg_ring[wg][me.seq % WG_RING];
    for (int j = 0; j < 4; j++) pr.a[t][j] = a[j];
    pr.db[t] = db, pr.acc[t] = accumulate != 0, pr.n[t] = N, pr.tb[t] = TB;
    WgPend p;
    p.seq = me.seq++, p.group = me.group, p.d = d, p.n = N / 2, p.chained = false, p.asrc = a;
    for (int j = 0; j < 4; j++) p.asnap[j] = a[j];
    for (const WgPend &q : me.pend) {
        if (q.d == d && q.n == N / 2) p.chained = true;
        else if (q.d < d + N / 2 && d < q.d + q.n) wg_fail("a product's accumulators overlap another's in flight");
    }
    if (!p.chained)
        for (int i = 0; i < N / 2; i++) p.init[i] = d[i];
    for (int i = 0; i < N / 2; i++) d[i] = NAN;
    me.pend.push_back(p);
    ++wg_in_flight;
}

/* p's result into its accumulators, from the ring's slot and the shared
 * memory as it is now */
inline void wg_retire(const WgPend &p) {
    const int wg = cur->warp / 4;
    const WgProd &pr = wg_ring[wg][p.seq % WG_RING];
    const int t = (cur->warp % 4) * 32 + cur->lane, N = pr.n[t], TB = pr.tb[t], acc = pr.acc[t];
    const uint64_t db = pr.db[t];
    for (int u = 0; u < 128; u++)
        if (pr.db[u] != db || pr.acc[u] != acc || pr.n[u] != N || pr.tb[u] != TB)
            wg_fail("the warpgroup's threads disagree on B, accumulate or the shape");
    for (int j = 0; j < 4; j++)
        if (memcmp(&p.asrc[j], &p.asnap[j], sizeof(tc_reg)))
            wg_fail("an A fragment's registers changed before the wait");
    if (db >> 62) wg_fail("a swizzled layout (only no swizzle is emulated)");
    const uint32_t start = (uint32_t)(db & 0x3FFF) << 4, lbo = (uint32_t)(db >> 16 & 0x3FFF) << 4,
                   sbo = (uint32_t)(db >> 32 & 0x3FFF) << 4;
    constexpr uint32_t ES = sizeof(__nv_bfloat16); /* 2; 4 in the EMU_BF16_EXACT build, its cores 256 bytes */
    auto bval = [&](int k, int n) {
        const uint32_t off = TB ? start + (n / 8) * sbo + (k / 8) * lbo + 8 * ES * (k % 8) + ES * (n % 8)
                                : start + (n / 8) * sbo + (k / 8) * lbo + 8 * ES * (n % 8) + ES * (k % 8);
        const unsigned char *q = smem_lo + off;
        if (q + 2 > smem_hi) wg_fail("a B element outside the dynamic shared memory");
        return __bfloat162float(*(const __nv_bfloat16 *)q);
    };
    /* A (64 x 16) from the posted fragments: (row r, col k) is in the slot
     * of warp r / 16, lane 4 (r % 8) + (k % 8) / 2, register
     * (r % 16) / 8 + 2 (k / 8), half k % 2 */
    auto aval = [&](int r, int k) {
        return tc_half(pr.a[(r / 16) * 32 + 4 * (r % 8) + (k % 8) / 2][(r % 16) / 8 + 2 * (k / 8)], k % 2);
    };
    const int w = cur->warp % 4, g = cur->lane >> 2, tq = cur->lane & 3;
    for (int i = 0; i < N / 2; i++) {
        const int e = i & 3, row = 16 * w + g + 8 * (e >> 1), col = 8 * (i >> 2) + 2 * tq + (e & 1);
        float s = !acc ? 0.f : p.chained ? p.d[i] : p.init[i];
        for (int k = 0; k < 16; k++) s += aval(row, k) * bval(k, col);
        p.d[i] = s;
    }
}

/* wgmma.wait_group N: the products of all but the newest N committed
 * groups retire */
inline void wg_wait_emu(int n) {
    WgThread &me = wg_me();
    const int wg = cur->warp / 4;
    barrier_wait(wg_bars[wg]); /* every thread has posted what it issued */
    size_t k = 0;
    for (; k < me.pend.size() && me.pend[k].group < me.group - n; k++) wg_retire(me.pend[k]);
    if (n == 0 && k < me.pend.size()) wg_fail("a wait for products issued and not committed (wg_commit)");
    me.pend.erase(me.pend.begin(), me.pend.begin() + (long)k);
    barrier_wait(wg_bars[wg]); /* no thread posts in a retired slot before all have read it */
    if (cur->warp % 4 == 0 && cur->lane == 0) wg_in_flight -= 128 * (long)k;
    me.fenced = false;
}
}  // namespace emu

inline void wg_fence() { emu::wg_me().fenced = true; }
inline void wg_commit() { ++emu::wg_me().group; }
template <int N>
inline void wg_wait() {
    emu::wg_wait_emu(N);
}
inline uint32_t wg_zero(const uint32_t *smem_zero) { return *smem_zero; }
inline void wg_fresh(tc_reg out[4], const tc_reg in[4], uint32_t zero) {
    if (zero) emu::wg_fail("wg_fresh: the shared zero is not 0");
    for (int i = 0; i < 4; ++i) out[i] = in[i];
}

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
