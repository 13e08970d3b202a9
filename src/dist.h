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
 * Built with MPI (make finds Open MPI with pkg-config; SG_MPI), ranks come
 * from mpirun or srun.  Built without it, a process that is one of several
 * ranks refuses to start rather than train N copies into one directory. */
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

/* Sum over ranks, in place, the same result on every rank. */
void dist_sum_real(real *x, long n);
double dist_sum_double(double x);
long dist_max_long(long x);
/* End every rank now: a failed rank must not leave the others waiting in
 * a collective.  Prints the rank and the reason first. */
void dist_abort(int code, const char *why) __attribute__((noreturn));

#endif
