/* Writing a data directory (docs/formats.md) from a token stream.
 *
 * The first val_tokens tokens of the stream go to val.bin, the rest to
 * train_000000.bin, train_000001.bin, ... of shard_tokens tokens each.  A
 * train shard is never shorter than CORPUS_MIN_SHARD tokens unless the
 * whole train split is: a remainder that small is appended to the shard
 * before it (the trainer needs block_size + 1 tokens in every shard).
 *
 * Nothing appears in the output directory until corpus_install: shards
 * are written in a fresh hidden directory inside it (OUT/.sgtok-XXXXXX),
 * then renamed into place with the manifest last.  corpus_abort removes
 * everything written.  An output directory that already holds shards is
 * refused unless replace is set; then the old shards are overwritten only
 * at install, and old train shards that the new corpus does not have are
 * removed. */
#ifndef SG_CORPUS_H
#define SG_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "shard.h"

#define CORPUS_MIN_SHARD 1025u /* the largest tier's block_size + 1 */

typedef struct {
    char name[32];
    uint32_t kind;
    uint64_t tokens;
} CorpusShard;

typedef struct {
    char *out, *tmp;
    uint32_t vocab_size;
    uint8_t sha[32];
    uint64_t val_tokens, shard_tokens;
    ShardWriter val, train;
    int val_open, train_open;
    uint64_t val_n, train_n, total;
    uint16_t *buf, *pend;
    size_t pend_n, pend_cap;
    CorpusShard *shards;
    size_t n_shards, cap_shards;
    int replace;
} CorpusWriter;

/* Refuses (before writing anything) an OUT that holds val.bin, train_*.bin
 * or manifest.json unless replace. */
int corpus_open(CorpusWriter *w, const char *out, int replace, uint32_t vocab_size,
                const uint8_t sha[32], uint64_t val_tokens, uint64_t shard_tokens, char *err,
                size_t errlen);
int corpus_write(CorpusWriter *w, const uint32_t *tokens, size_t n, char *err, size_t errlen);
/* Commit the shards (inside the hidden directory).  Fails if the stream
 * did not fill val.bin and leave train tokens. */
int corpus_close_shards(CorpusWriter *w, char *err, size_t errlen);
/* Write MANIFEST (JSON text) and move everything into OUT. */
int corpus_install(CorpusWriter *w, const char *manifest, char *err, size_t errlen);
void corpus_abort(CorpusWriter *w);

#endif
