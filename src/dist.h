/* Data parallelism: N processes train one run exactly as one process would.
 *
 * The global batch of a step is grad_accum micro-batches of micro_batch
 * rows, each row keyed by (seed, step, row) in the sampler, so the batch
 * does not depend on who computes it.  Rank r of N takes the micro-batches
 * k = r*A/N .. (r+1)*A/N - 1 (A = grad_accum, a multiple of N), and the
 * gradients, which every micro-batch scales by 1/(global tokens), are
 * summed over ranks: every rank then holds the gradient of the whole batch
 * and takes the same AdamW step, so parameters stay identical without
 * being sent.  The sums are in a different order than one process's, so
 * trajectories agree to rounding (about 1e-7 relative), not bitwise.
 *
 * ZeRO-1 (Config.zero = 1) keeps the AdamW state of one shard of the
 * parameter vector per rank instead of all of it: gradients are
 * reduce-scattered (each rank receives the sum of its shard only), each rank
 * updates its shard, and the parameters are all-gathered.  The same sums
 * as an all-reduce (bitwise with 2 ranks, grouped differently beyond), so
 * the same training; per rank the AdamW state drops
 * from 2n to 2n/N reals while parameters and gradients stay whole
 * (docs/distributed.md).
 *
 * Built with MPI (make finds Open MPI with pkg-config; SG_MPI), ranks come
 * from mpirun or srun.  Built without it, a process that is one of several
 * ranks refuses to start rather than train N copies into one directory.
 * The CUDA build sums device buffers with NCCL (SG_NCCL, src/dist_nccl.c);
 * without NCCL it refuses to run as several ranks, since Open MPI as Debian
 * builds it cannot read device memory. */
#ifndef SG_DIST_H
#define SG_DIST_H

#include "real.h"

typedef struct {
    int rank, size, local_rank;
} Dist;

/* Before anything else: MPI_Init when launched as several ranks.  0 ok, -1
 * with a message on stderr. */
int dist_init(int *argc, char ***argv);
void dist_finalize(void);
const Dist *dist(void);
static inline int dist_root(void) { return dist()->rank == 0; }

/* Sum over ranks, in place, the same result on every rank.  x is an op
 * buffer (device memory in the CUDA build, summed by NCCL there). */
void dist_sum_real(real *x, long n);

/* Nonblocking sums, for overlapping the gradient sum with the backward
 * (src/grad_sync.c).  dist_isum_real starts the in-place sum of x[0, n)
 * over ranks and returns at once; x must not be read or written until
 * dist_isum_wait, which completes every started sum.  On the CPU they are
 * MPI_Iallreduce, and dist_isum_progress lets MPI advance them (Open MPI
 * moves nonblocking collectives only inside MPI calls).  In the CUDA build
 * the sum is queued on NCCL's own stream behind the ops queued so far, and
 * dist_isum_wait makes the op stream wait for it: neither call waits on the
 * host.  Every rank must start the same sums in the same order. */
void dist_isum_real(real *x, long n);
void dist_isum_progress(void);
void dist_isum_wait(void);

/* ZeRO-1 shards.  A vector of n elements is cut into one contiguous part
 * per rank, in rank order: part r is [off, off + len) with off = min(r s, n),
 * len = min(s, n - off), s = ceil(n / N) rounded up to 64 elements (256-byte
 * boundaries); the last parts may be short or empty.  MPI counts are int: n
 * must be at most INT_MAX.  On the CPU the buffers are host memory of n
 * elements; in the CUDA build they are device buffers of dist_padded(n) =
 * N s elements, since NCCL's reduce-scatter and all-gather take equal parts
 * (the tail beyond n is carried along and never used). */
void dist_part(long n, int rank, long *off, long *len);
long dist_padded(long n);
/* Sum x[0, n) over ranks, keeping only this rank's part: afterwards
 * x[off, off + len) holds the sum of its part; the rest of x is scratch. */
void dist_sum_scatter_real(real *x, long n);
/* Each rank's part x[off, off + len) to every rank, in place. */
void dist_allgather_real(real *x, long n);
/* Rank 0 receives every rank's part into full[0, n), from mine[0, len) of
 * each rank; full is only written on rank 0 (may be NULL elsewhere). */
void dist_gather_real(real *full, const real *mine, long n);

/* The nonblocking ZeRO-1 reduce of one bucket, for overlapping the
 * reduce-scatter with the backward (src/grad_sync.c).  x is the sharded
 * vector of n elements (dist_part); [a, b) is a range of it.  Starts the
 * sum over ranks of x[a, b) such that, after dist_isum_wait, each rank r
 * holds in x the sum of [a, b) ∩ part r at that part's own place: the
 * shards are those of dist_sum_scatter_real whatever the buckets, so the
 * result per element is the same sum, and checkpoints and resumes do not
 * see the bucketing.  The rest of x[a, b) is scratch afterwards, and
 * x[a, b) must not be read or written before the wait.  [a, b) meets the
 * parts of consecutive ranks, whose intersections tile it in rank order.
 * Returns how many ranks receive a non-empty piece (1 when [a, b) lies in
 * one part).  Every rank must start the same ranges in the same order. */
int dist_isum_scatter_real(real *x, long n, long a, long b);

/* Seconds spent in the collectives that carry gradients and parameters
 * (dist_sum_real, dist_sum_scatter_real, dist_allgather_real), timed only
 * when SG_DIST_TIMES is set: *wait_s in a barrier before each (waiting
 * for the slowest rank), *comm_s in the transfer itself.  The nonblocking
 * sums add to *comm_s only the time the host spends in them (progress and
 * the final wait): the part not hidden behind the backward. */
void dist_times(double *wait_s, double *comm_s);
/* SG_DIST_TIMES=1 (dist_init refuses any value but 0 and 1) */
int dist_times_on(void);
double dist_sum_double(double x);
long dist_max_long(long x);
/* End every rank now: a failed rank must not leave the others waiting in
 * a collective.  Prints the rank and the reason first. */
void dist_abort(int code, const char *why) __attribute__((noreturn));

#endif
