/* Phase clocks of traced GPU kernels, and what they add up to.
 *
 * A traced kernel (kernels/cuda/attention_trace.h) leaves one record a
 * warp: the SM it ran on, the %globaltimer nanoseconds of its first and last
 * clock read, the %clock64 cycles between them, and those cycles split
 * among KTRACE_PHASES phases of its loop (which phase is which is the
 * kernel's; attention_trace.h names them).  The split is exact: every
 * cycle between the first and the last read is charged to the phase that
 * ended at the next read, so a record's phases sum to its cycles (modulo
 * 2^32 per phase, far past any kernel here).
 *
 * ktrace_summarize turns a launch's records into what says where its time
 * went: each phase's share of all warps' cycles and its cycles per loop
 * tile, and from the nanoseconds the launch's timeline on the SMs: how long
 * each SM had a warp of it resident (busy), how many warps it held on
 * average while busy (the occupancy achieved, against the configured one),
 * and the tail, from the moment the first SM ran out of work for good to
 * the end of the launch (the causal grid's imbalance); and the clock the
 * SMs ran at, cycles over nanoseconds (a GPU that lowers its clock under
 * tensor-core load shows it here, not in the cycle counts).  Host code only; the
 * CPU test (tests/test_kernel_trace.c) checks it on hand-made records. */
#ifndef SG_KERNEL_TRACE_H
#define SG_KERNEL_TRACE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { KTRACE_PHASES = 6 };

/* 64 bytes; a record its warp never wrote keeps the buffer's fill, all bits
 * set (sm 0xffffffff) */
typedef struct {
    uint64_t start_ns, end_ns; /* %globaltimer at the warp's first and last read */
    uint64_t cycles;           /* %clock64, last read minus first */
    uint32_t sm;               /* %smid */
    uint32_t warp;             /* within its block */
    uint32_t tiles;            /* loop tiles the warp worked on */
    uint32_t sink;             /* the values the reads waited for, folded (kept so none is dropped) */
    uint32_t phase[KTRACE_PHASES];
} KtraceRec;

typedef struct {
    long warps, missing, bad; /* records; unwritten; phases not summing to cycles, or end before start */
    int sms;                  /* distinct SMs */
    double cycles;            /* all warps' cycles */
    double phase_share[KTRACE_PHASES];
    double phase_per_tile[KTRACE_PHASES]; /* cycles a warp spent in the phase per tile it worked on */
    double tiles;                         /* all warps' tiles */
    double warp_cycles_mean, warp_cycles_max;
    double clock_ghz;    /* the consistent records' cycles over their nanoseconds: the SMs' clock while they ran */
    double span_ns;      /* first start to last end */
    double busy;         /* mean over the SMs seen of (time with a warp resident) / span */
    double resident;     /* mean warps resident on an SM while it is busy */
    double tail_ns;      /* last end minus the earliest time an SM finished its last warp */
} KtraceSummary;

/* Fills *s from n records (n >= 0).  Returns 0, or -1 if no record was
 * written (s then holds the counts only). */
int ktrace_summarize(const KtraceRec *r, long n, KtraceSummary *s);

/* One line per phase (its name from names[], share, cycles per tile), then
 * the timeline, each line starting with indent. */
void ktrace_print(FILE *f, const KtraceSummary *s, const char *const names[KTRACE_PHASES], const char *indent);

#ifdef __cplusplus
}
#endif

#endif
