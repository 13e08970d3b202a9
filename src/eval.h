/* Validation loss on the fixed validation batches and the batch plumbing
 * shared by training and evaluation. */
#ifndef SG_EVAL_H
#define SG_EVAL_H

#include <stdint.h>

#include "model.h"
#include "shard.h"

/* Splits windows of T+1 tokens [n, T+1] into inputs and targets [n, T]. */
void split_windows(const int32_t *win, int n, int T, int32_t *inputs, int32_t *targets);

/* Mean token loss over validation batches 0..nbatches-1.  A validation batch
 * has as many sequences as a global training batch (micro_batch x
 * grad_accum) and is drawn with val_seed, so every arm and seed, and any
 * micro-batch split, is evaluated on the same tokens. */
double eval_loss(Model *m, const ShardSet *data, int nbatches);

#endif
