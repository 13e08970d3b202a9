/* How a step's sequences are split into micro-batches (auto_micro_batch).
 *
 * A step trains on micro_batch x grad_accum sequences, row r of the step
 * being the same sequence however they are split (sampler.h), so a split
 * changes only the order of the gradient's sums: the same training, to
 * rounding.  With auto_micro_batch the split is chosen afresh on each
 * start: the step's sequences are shared equally by the ranks, and each
 * rank's share goes in micro-batches of the largest size that divides the
 * share and that
 *   - on a GPU, the device holds: one forward and backward at micro-batch
 *     1 and at 2 measure the backend's footprint, P(b) = P(1) + (b - 1)
 *     (P(2) - P(1)) bytes, and a size is taken if P(b) leaves a sixteenth
 *     of the device free.  The footprint is affine in b but for the
 *     classifier's logits, capped at 1 GiB a chunk, which the line
 *     overestimates, so the estimate errs on the safe side;
 *   - with no device (the CPU backend), is at most micro_batch: a larger
 *     one is no faster there and takes more memory.
 * Every rank takes the smallest of the ranks' choices. */
#ifndef SG_BATCH_SPLIT_H
#define SG_BATCH_SPLIT_H

#include <stddef.h>

#include "config.h"
#include "model.h"

typedef struct {
    int micro_batch, grad_accum; /* the split: micro_batch x grad_accum is the step's sequences */
    int measured;                /* 1 when the device's footprint was measured */
    size_t room, keep_free;      /* the device's memory for the backend, and the part left free */
    size_t at1, per_seq;         /* P(1) and P(2) - P(1), bytes; without a probe at 2, P(1) less the state */
    int probed2;                 /* 0 where a probe at 2 might not have fit */
    size_t predicted;            /* P(micro_batch) on the line */
    size_t checked;              /* the footprint measured at micro_batch; 0 if not (another rank's choice) */
    size_t next_predicted;       /* P of the next larger candidate, 0 if none */
} BatchSplit;

/* The largest divisor d of share, at most limit, with P(d) = at1 + (d - 1)
 * per_seq within budget; 1 if none is. */
long batch_split_choose(long share, long limit, size_t at1, size_t per_seq, size_t budget);
/* 0 if the ranks can share a step: its micro-batches (grad_accum), or with
 * auto_micro_batch its sequences, split evenly over them; else -1 and why. */
int batch_split_check(const Config *c, int ranks, char *err, size_t errlen);
/* Chooses the split for m (built, its parameters set) and applies it to
 * m->cfg, which the training loop and the evaluation read; c keeps the
 * configured micro_batch and grad_accum (checkpoints compare those).  Runs
 * the probe steps on a GPU, with zero gradients left behind.  Collective
 * under MPI: every rank calls it. */
void batch_split_plan(Model *m, const Config *c, int ranks, BatchSplit *out);

#endif
