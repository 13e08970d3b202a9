/* Keyed window sampler: which tokens row `row` of step `step` trains on.
 *
 * Window choice is a pure function of (seed, step, row), where row is the
 * sequence's position in the GLOBAL batch of that optimizer step: with
 * micro-batch size Bm, row r of micro-batch m is global row m*Bm + r, and a
 * rank whose slice starts at global row r0 adds r0.  So the sequences trained
 * on at a step are the same for any accumulation split and any number of
 * ranks, and a resumed run draws exactly what an uninterrupted one would.
 *
 * Sampling is with replacement, uniformly over every window start of every
 * train shard (a shard weighs in proportion to its length). */
#ifndef SG_SAMPLER_H
#define SG_SAMPLER_H

#include <stdint.h>

#include "shard.h"

/* Global train start index (< s->train_starts) for (seed, step, row). */
uint64_t sampler_train_index(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row);
/* Copy that window's block_size+1 tokens to out. */
void sampler_train_window(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row,
                          int32_t *out);
/* Rows row0 .. row0+nrows-1 of a step, one window after another in out
 * (nrows * (block_size+1) tokens): a micro-batch or a rank's slice. */
void sampler_train_rows(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row0,
                        int nrows, int32_t *out);

/* Validation: the same construction over val.bin, keyed by a fixed val_seed
 * shared by every run (so runs are scored on the same tokens) and the index
 * of the validation batch. */
uint64_t sampler_val_index(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row);
void sampler_val_window(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row,
                        int32_t *out);
void sampler_val_rows(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row0,
                      int nrows, int32_t *out);

#endif
