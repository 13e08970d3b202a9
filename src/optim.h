/* Learning-rate schedule, global grad-norm clipping and the AdamW update
 * over the model's tensor table. */
#ifndef SG_OPTIM_H
#define SG_OPTIM_H

#include "config.h"
#include "model.h"

/* Step s (0-based): linear warmup lr (s+1)/warmup, then cosine from lr down
 * to lr_min, reached exactly at the final iteration s = iters - 1. */
double lr_at(const Config *c, long step);

/* Clips to grad_clip as torch.nn.utils.clip_grad_norm_ does (factor
 * min(1, clip / (norm + 1e-6))) and applies AdamW with each tensor's decay
 * flag.  step is 0-based; returns the global norm before clipping.
 *
 * Only params[opt_off, opt_off + opt_len) are updated, those the AdamW
 * state covers (model.h), and only those gradients are read.  When that is
 * a ZeRO-1 shard, each rank holds the summed gradient of its shard, the
 * norm is the square root of the sum over ranks of the shards' sums of
 * squares (a collective: every rank calls optim_step), and the caller
 * all-gathers the parameters afterwards. */
double optim_step(Model *m, long step, double lr);

#endif
