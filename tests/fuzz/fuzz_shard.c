/* A token shard (shard_open), then a data directory made of it
 * (shardset_open: val.bin and a train shard, as `sgtrain train` opens
 * them).
 *
 * Properties: an opened shard's tokens lie inside the file and are all
 * below its vocabulary size; the window index counts exactly the windows
 * the shards hold, and every start it locates is one of them. */
#include "fuzz.h"

#include "fsutil.h"
#include "shard.h"

enum { BLOCK = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    char path[512], err[4096] = "";
    snprintf(path, sizeof path, "%s", fuzz_file(dir, "val.bin", data, size));
    Shard s;
    int rc = shard_open(&s, path, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return 0;
    FUZZ_REQUIRE(SHARD_HEADER_BYTES + 2 * s.n_tokens == size, "%llu tokens in %zu bytes",
                 (unsigned long long)s.n_tokens, size);
    for (uint64_t i = 0; i < s.n_tokens; i++)
        FUZZ_REQUIRE(s.tokens[i] < s.vocab_size, "token %u at %llu, vocabulary %u", s.tokens[i],
                     (unsigned long long)i, s.vocab_size);
    uint32_t vocab = s.vocab_size, kind = s.kind;
    shard_close(&s);

    /* the same tokens as a train shard beside it */
    uint8_t *train = malloc(size);
    memcpy(train, data, size);
    put_u32le(train + 64, SHARD_KIND_TRAIN);
    fuzz_file(dir, "train_000000.bin", train, size);
    free(train);
    ShardSet set;
    err[0] = 0;
    rc = shardset_open(&set, dir, vocab, BLOCK, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return 0;
    FUZZ_REQUIRE(kind == SHARD_KIND_VAL, "a train shard was taken as val.bin");
    FUZZ_REQUIRE(set.n_train == 1, "%d train shards", set.n_train);
    uint64_t n = set.train[0].n_tokens;
    FUZZ_REQUIRE(set.train_starts == (n > BLOCK ? n - BLOCK : 0), "%llu starts in %llu tokens",
                 (unsigned long long)set.train_starts, (unsigned long long)n);
    for (uint64_t g = 0; g < set.train_starts; g += 1 + set.train_starts / 7) {
        int shard;
        uint64_t off;
        shardset_locate(&set, g, &shard, &off);
        FUZZ_REQUIRE(shard == 0 && off + BLOCK + 1 <= n, "start %llu outside the shard",
                     (unsigned long long)g);
    }
    shardset_close(&set);
    return 0;
}
