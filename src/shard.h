/* Token shards and the data directory (byte layout: docs/formats.md).
 *
 * A shard is a 256-byte little-endian header followed by n_tokens uint16
 * tokens.  Readers memory-map it: a training run touches only the windows it
 * samples, and many ranks on one node share the page cache.
 *
 * A data directory holds val.bin (kind 1) and train_*.bin (kind 0); the
 * train shards are taken in lexicographic (byte) order of their names. */
#ifndef SG_SHARD_H
#define SG_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "fsutil.h"

#define SHARD_MAGIC "SGTOKENS"
#define SHARD_VERSION 1u
#define SHARD_HEADER_BYTES 256u
#define SHARD_KIND_TRAIN 0u
#define SHARD_KIND_VAL 1u

typedef struct {
    char *path;
    const uint16_t *tokens; /* n_tokens tokens, inside the mapping */
    uint64_t n_tokens;
    uint32_t vocab_size;
    uint32_t kind;              /* SHARD_KIND_TRAIN or SHARD_KIND_VAL */
    uint8_t vocab_sha256[32];   /* all zero for synthetic data */
    void *map;
    size_t map_len;
} Shard;

/* Write a whole shard atomically.  Every token must be < vocab_size, and
 * vocab_size must be in 1..65536.  sha may be NULL (all zero). */
int shard_write(const char *path, const uint16_t *tokens, uint64_t n, uint32_t vocab_size,
                const uint8_t sha[32], uint32_t kind, char *err, size_t errlen);

/* Streaming writer for corpora that do not fit in memory: the header is
 * written with n_tokens = 0 and patched at commit, and nothing appears at
 * PATH until shard_writer_commit succeeds. */
typedef struct {
    AtomicFile af;
    uint64_t n_tokens;
    uint32_t vocab_size;
    int failed; /* a token was out of range or a write failed */
    char bad[160];
} ShardWriter;
int shard_writer_open(ShardWriter *w, const char *path, uint32_t vocab_size,
                      const uint8_t sha[32], uint32_t kind, char *err, size_t errlen);
int shard_writer_append(ShardWriter *w, const uint16_t *tokens, size_t n);
int shard_writer_commit(ShardWriter *w, char *err, size_t errlen);
void shard_writer_abort(ShardWriter *w);

/* Map and validate a shard: magic, version, header fields, exact file size,
 * and every token < vocab_size (one scan).  On error *s is left closed. */
int shard_open(Shard *s, const char *path, char *err, size_t errlen);
void shard_close(Shard *s);

/* Lower-case hex of a vocab_sha256 (65 bytes with the NUL). */
void shard_sha_hex(const uint8_t sha[32], char out[65]);

/* The shards of one data directory, and the window index space over them.
 *
 * A window is block_size+1 consecutive tokens inside one shard (inputs are
 * the first block_size, targets the last block_size); windows never cross
 * shards.  Shard i with n_i tokens has n_i - block_size start positions; a
 * global start index counts the starts of train shard 0, then shard 1, ... */
typedef struct {
    char *dir;
    int block_size;
    uint32_t vocab_size;
    uint8_t vocab_sha256[32];
    Shard val;
    Shard *train;
    int n_train;
    uint64_t *train_prefix; /* n_train+1 prefix sums of start counts */
    uint64_t train_starts;  /* total training window starts */
    uint64_t val_starts;    /* val window starts */
} ShardSet;

/* Open DIR/val.bin and DIR/train_*.bin.  expect_vocab is the model's
 * vocab_size (0: accept whatever the shards agree on).  Every shard must hold
 * at least one window of block_size+1 tokens. */
int shardset_open(ShardSet *s, const char *dir, uint32_t expect_vocab, int block_size,
                  char *err, size_t errlen);
/* DIR/val.bin alone, for evaluation (n_train 0): train_*.bin are neither
 * needed nor read. */
int shardset_open_val(ShardSet *s, const char *dir, uint32_t expect_vocab, int block_size, char *err,
                      size_t errlen);
void shardset_close(ShardSet *s);

/* Map a global train start index (< train_starts) to (shard, offset). */
void shardset_locate(const ShardSet *s, uint64_t global, int *shard, uint64_t *offset);

#endif
