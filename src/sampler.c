#include "sampler.h"

#include "rng.h"

/* Domain constants keep training and validation draws unrelated even when a
 * run's seed equals the validation seed.  (ASCII "sg-train", "sg-val\0\0".) */
#define DOMAIN_TRAIN 0x73672d747261696eull
#define DOMAIN_VAL 0x73672d76616c0000ull

static uint64_t draw(uint64_t domain, uint64_t seed, uint64_t step, uint64_t row, uint64_t n) {
    return rng_below(rng_key(rng_key(domain, seed, 0), step, row), n);
}

static void copy_window(const uint16_t *src, int block_size, int32_t *out) {
    for (int t = 0; t <= block_size; t++) out[t] = src[t];
}

uint64_t sampler_train_index(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row) {
    return draw(DOMAIN_TRAIN, seed, step, row, s->train_starts);
}

void sampler_train_window(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row,
                          int32_t *out) {
    int shard;
    uint64_t off;
    shardset_locate(s, sampler_train_index(s, seed, step, row), &shard, &off);
    copy_window(s->train[shard].tokens + off, s->block_size, out);
}

void sampler_train_rows(const ShardSet *s, uint64_t seed, uint64_t step, uint64_t row0,
                        int nrows, int32_t *out) {
    for (int r = 0; r < nrows; r++)
        sampler_train_window(s, seed, step, row0 + (uint64_t)r,
                             out + (size_t)r * (size_t)(s->block_size + 1));
}

uint64_t sampler_val_index(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row) {
    return draw(DOMAIN_VAL, val_seed, batch, row, s->val_starts);
}

void sampler_val_window(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row,
                        int32_t *out) {
    copy_window(s->val.tokens + sampler_val_index(s, val_seed, batch, row), s->block_size, out);
}

void sampler_val_rows(const ShardSet *s, uint64_t val_seed, uint64_t batch, uint64_t row0,
                      int nrows, int32_t *out) {
    for (int r = 0; r < nrows; r++)
        sampler_val_window(s, val_seed, batch, row0 + (uint64_t)r,
                           out + (size_t)r * (size_t)(s->block_size + 1));
}
