/* The gradient sum over ranks, overlapped with the backward.
 *
 * Without overlap every rank finishes its backward, then sums the whole
 * gradient vector (one collective of n_params reals).  With it, the last
 * micro-batch's backward announces each range of the vector it has finished
 * (GradHook, model.h): layers complete from the last to the first, and each
 * bucket of about `bucket` consecutive elements is handed to a nonblocking
 * sum (dist_isum_real) as soon as it is whole, so that the transfer of the
 * late layers' gradients runs while the early layers are differentiated.
 * The buckets follow layer boundaries, so a bucket is the smallest run of
 * whole layers reaching `bucket` elements (the embeddings close the last).
 *
 * The sums are the same per element as one collective's with 2 ranks
 * (bitwise: a + b); beyond 2 the collective's algorithm may group them
 * differently, which moves results by rounding only (dist.h).
 *
 * Under ZeRO-1 (scatter) each rank needs the sum of its own shard only,
 * and the shards stay the contiguous parts of dist_part whatever the
 * buckets: a bucket [a, b) is reduced piece by piece, the piece
 * [a, b) ∩ part r landing on rank r at its place in the vector
 * (dist_isum_scatter_real).  Over all buckets each element of part r is
 * summed once, onto rank r, as dist_sum_scatter_real sums it. */
#ifndef SG_GRAD_SYNC_H
#define SG_GRAD_SYNC_H

#include "model.h"

typedef struct {
    real *grads;
    long n;      /* elements of the vector */
    long bucket; /* elements per bucket, at least */
    long next;   /* the end the next announced range must have */
    long hi;     /* finished elements [next, hi) not yet handed to a sum */
    int buckets; /* sums started in this backward */
    int scatter; /* ZeRO-1: reduce each bucket onto the shards it meets */
    int pieces;  /* scatter: (bucket, rank) pieces reduced; more than buckets when buckets straddle shards */
    GradHook hook;
} GradSync;

/* Before the backward whose gradients are final: arms m->grad_hook.  With
 * scatter, each rank ends with the sum of its ZeRO-1 part of the vector
 * (dist_part over n_params) in place, the rest being scratch; without it,
 * every rank ends with the whole sum. */
void grad_sync_begin(GradSync *s, Model *m, long bucket, int scatter);
/* After it: every bucket has been started; waits for the sums (on the GPU,
 * makes the op stream wait) and disarms the hook.  Returns the number of
 * buckets. */
int grad_sync_end(GradSync *s, Model *m);

/* Elements per bucket for bucket_mb MiB of reals (at least 1). */
long grad_sync_bucket(double bucket_mb);

#endif
