/* Phase clocks inside the attention kernels (bench_gpu --attn-trace): the
 * mma forward, dK/dV and dQ kernels, and the warpgroup forwards.
 *
 * Why.  Three GPU runs changed the shape of these kernels (two m-tiles a
 * warp or one, 8 warps an SM or 16, mma.sync or Hopper's wgmma) and none
 * moved their rate, 88-101 TFLOP/s forward and backward (docs/cuda.md,
 * runs 4 and 5): what bounds them is not what those changes acted on.  A
 * profiler would say, but the lent GPU has none (no Nsight, 15 minutes in
 * all), so the kernels carry their own: in a traced launch every warp reads
 * the SM's cycle counter at each boundary of its loop and charges the
 * cycles since the previous read to the phase that just ended; its lane 0
 * writes one record (src/kernel_trace.h) at the end.
 *
 * The six phases, in each of the three kernels (names: attention_trace.cu):
 *   AT_WAIT      the next tile's copies issued, their wait and the barrier
 *                that publishes them (and, first, the kernel's prologue);
 *   AT_PROD1     the first products: S (forward), S^T and dP^T (dK/dV),
 *                S and dP (dQ), up to their last accumulator's completion;
 *   AT_ELEM      the elementwise part: the online softmax; P and dS;
 *   AT_PROD2     the second products: O += P V; dV and dK; dQ, to completion;
 *   AT_BARRIER   the barrier that frees the tile's buffer;
 *   AT_EPILOGUE  after the loop: O / l and LSE; the stores and sums.
 * In the mma kernels, product phases end with tc_hold on accumulators of
 * the last products, so a product's latency is charged where it was
 * issued.  That serialises a little (the next phase cannot start before
 * the products end), so the traced kernel is slower than the plain one:
 * bench_gpu prints both times.  The warpgroup forwards' phases end at their
 * own wgmma.wait_group instead, which adds nothing to their order: in the
 * pipelined one the first products are S and the previous tile's P V
 * issued, up to S's wait, and the second P V's wait and O's rescaling
 * (attention_fwd_wgmma.cu).  The warpgroup dK/dV kernel has no clocks.
 *
 * The plain kernels are the TR = false instantiations, where AttnClock is
 * empty: no instruction of theirs changes.  Only head dims 64 and 128 (the
 * paper's) have traced instantiations; at others nothing is recorded. */
#ifndef SG_ATTENTION_TRACE_H
#define SG_ATTENTION_TRACE_H

#include <mma_ptx.h> /* <>: the emulated build's stand-in comes first on the path */

#include "kernel_trace.h"

enum AttnTraceKernel { ATTN_TRACE_FWD, ATTN_TRACE_DKDV, ATTN_TRACE_DQ, ATTN_TRACE_KERNELS };
enum AttnTracePhase { AT_WAIT, AT_PROD1, AT_ELEM, AT_PROD2, AT_BARRIER, AT_EPILOGUE };
static_assert(AT_EPILOGUE + 1 == KTRACE_PHASES, "one record slot a phase");

/* The record buffer for this launch of kernel k (grid blocks of threads
 * threads, named name), filled with all bits set; null when tracing is off
 * (attention_trace.cu). */
KtraceRec *attn_trace_slot(int k, long blocks, int threads, const char *name);

template <bool ON>
struct AttnClock {
    template <int P>
    __device__ __forceinline__ void lap() {}
    __device__ __forceinline__ void hold(float) {}
    __device__ __forceinline__ void tile() {}
    __device__ __forceinline__ void finish(KtraceRec *, int, int) {}
};

template <>
struct AttnClock<true> {
    uint64_t ns0, t0, last;
    uint32_t ph[KTRACE_PHASES], tiles, sink;
    __device__ __forceinline__ AttnClock() : tiles(0), sink(0) {
#pragma unroll
        for (int p = 0; p < KTRACE_PHASES; ++p) ph[p] = 0;
        ns0 = tc_globaltimer();
        t0 = last = tc_clock();
    }
    /* the cycles since the last read go to phase P */
    template <int P>
    __device__ __forceinline__ void lap() {
        const uint64_t t = tc_clock();
        ph[P] += (uint32_t)(t - last);
        last = t;
    }
    /* wait until x is written (tc_hold) before the next read */
    __device__ __forceinline__ void hold(float x) { sink ^= tc_hold(x); }
    __device__ __forceinline__ void tile() { ++tiles; }
    /* the epilogue's lap, then lane 0 writes the warp's record: block
     * (x, y, z) is record block x + X (y + Y z), warp w of it w after it */
    __device__ __forceinline__ void finish(KtraceRec *rec, int warp, int lane) {
        lap<AT_EPILOGUE>();
        const uint64_t ns1 = tc_globaltimer();
        if (lane != 0) return;
        const long blk = (long)blockIdx.x + (long)gridDim.x * ((long)blockIdx.y + (long)gridDim.y * blockIdx.z);
        KtraceRec *r = rec + blk * (long)(blockDim.x >> 5) + warp;
        r->start_ns = ns0, r->end_ns = ns1, r->cycles = last - t0;
        r->sm = tc_smid(), r->warp = (uint32_t)warp, r->tiles = tiles, r->sink = sink;
#pragma unroll
        for (int p = 0; p < KTRACE_PHASES; ++p) r->phase[p] = ph[p];
    }
};

#endif
