/* NCCL for the CUDA build with MPI (SG_NCCL): the gradient sum between GPUs
 * (dist.h).  Compiled only into the CUDA build, and only when make finds
 * NCCL; dist.c calls it when the op buffers are device memory. */
#ifndef SG_DIST_NCCL_H
#define SG_DIST_NCCL_H

#include "real.h"

/* After MPI_Init, before any CUDA allocation: every rank selects GPU
 * local_rank mod (GPUs it sees), rank 0's ncclUniqueId reaches the others
 * over MPI_Bcast, and all join one communicator.  Collective: 0 on every
 * rank, or -1 on every rank after a message (a rank without a GPU). */
int dist_nccl_init(int rank, int size, int local_rank);
/* In-place sum of the device buffer x[0, n) over ranks, enqueued on the
 * stream of every op (sg_stream()): it follows the backward and precedes
 * the optimizer without the host waiting. */
void dist_nccl_sum(real *x, long n);
/* dist_isum_real and dist_isum_wait (dist.h) for device buffers: the sum
 * runs on a second stream, after the ops queued before the call and
 * concurrently with those queued after it; join makes the op stream wait
 * for every sum started so far. */
void dist_nccl_isum(real *x, long n);
void dist_nccl_join(void);
/* dist_isum_scatter_real (dist.h) for device buffers: on the same second
 * stream, one ncclReduce per rank r whose part of x[0, n) (dist_part) meets
 * [a, b), of that intersection, in place, to root r, all in one NCCL group.
 * join (above) orders it before the optimizer. */
void dist_nccl_ireduce_pieces(real *x, long n, long a, long b);
/* ZeRO-1 (dist_sum_scatter_real, dist_allgather_real) on device buffers of
 * size x N parts, in place: rank r's part is x[r part, (r+1) part). */
void dist_nccl_sum_scatter(real *x, long part);
void dist_nccl_allgather(real *x, long part);
void dist_nccl_finalize(void);

#endif
