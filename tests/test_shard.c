/* Token shards, the data directory and the window sampler. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "rng.h"
#include "sampler.h"
#include "shard.h"

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* ---- single shards ------------------------------------------------------ */

static void test_roundtrip(void) {
    uint16_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint16_t)((i * 37) % 500);
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) sha[i] = (uint8_t)(i * 7 + 1);
    int rc = shard_write(P("a.bin"), tok, 1000, 500, sha, SHARD_KIND_VAL, err, sizeof err);
    CHECK(rc == 0, "shard_write: %s", err);

    /* byte layout as docs/formats.md states it */
    size_t n;
    unsigned char *b = read_all(P("a.bin"), &n);
    CHECK(n == 256 + 2000, "file size %zu", n);
    CHECK(memcmp(b, "SGTOKENS", 8) == 0, "magic at 0");
    CHECK(rd32(b + 8) == 1 && rd32(b + 12) == 256 && rd32(b + 16) == 2 && rd32(b + 20) == 500,
          "version, header_bytes, token_bytes, vocab_size at 8, 12, 16, 20");
    CHECK(rd32(b + 24) == 1000 && rd32(b + 28) == 0, "n_tokens u64 at 24");
    CHECK(memcmp(b + 32, sha, 32) == 0, "vocab_sha256 at 32");
    CHECK(rd32(b + 64) == 1, "kind at 64");
    int zero = 1;
    for (int i = 68; i < 256; i++) zero &= b[i] == 0;
    CHECK(zero, "bytes 68..255 zero");
    CHECK(b[256] == 0 && b[258] == 37 && b[259] == 0, "tokens little-endian uint16 from 256");
    free(b);

    Shard s;
    rc = shard_open(&s, P("a.bin"), err, sizeof err);
    CHECK(rc == 0, "shard_open: %s", err);
    if (rc == 0) {
        CHECK(s.n_tokens == 1000 && s.vocab_size == 500 && s.kind == SHARD_KIND_VAL, "fields");
        CHECK(memcmp(s.tokens, tok, sizeof tok) == 0, "tokens");
        CHECK(memcmp(s.vocab_sha256, sha, 32) == 0, "sha");
        shard_close(&s);
    }

    /* the streaming writer makes the same bytes */
    ShardWriter w;
    rc = shard_writer_open(&w, P("b.bin"), 500, sha, SHARD_KIND_VAL, err, sizeof err);
    CHECK(rc == 0, "shard_writer_open: %s", err);
    CHECK(!fs_exists(P("b.bin")), "nothing at the path before commit");
    shard_writer_append(&w, tok, 300);
    shard_writer_append(&w, tok + 300, 0);
    shard_writer_append(&w, tok + 300, 700);
    rc = shard_writer_commit(&w, err, sizeof err);
    CHECK(rc == 0, "shard_writer_commit: %s", err);
    size_t n1, n2;
    unsigned char *b1 = read_all(P("a.bin"), &n1), *b2 = read_all(P("b.bin"), &n2);
    CHECK(b2 && n1 == n2 && memcmp(b1, b2, n1) == 0, "streamed shard identical");
    free(b1);
    free(b2);

    /* an out-of-range token refuses to write, and leaves nothing behind */
    tok[123] = 500;
    rc = shard_write(P("c.bin"), tok, 1000, 500, NULL, 0, err, sizeof err);
    CHECK(rc != 0 && has(err, "token 500 at position 123"), "write refuses bad token: %s", err);
    CHECK(!fs_exists(P("c.bin")), "no file written");
    rc = shard_writer_open(&w, P("c.bin"), 500, NULL, 0, err, sizeof err);
    shard_writer_append(&w, tok, 100);
    CHECK(shard_writer_append(&w, tok + 100, 100) != 0, "append refuses bad token");
    rc = shard_writer_commit(&w, err, sizeof err);
    CHECK(rc != 0 && has(err, "position 123"), "streaming writer: %s", err);
    CHECK(!fs_exists(P("c.bin")), "no file written by the streaming writer");
    rc = shard_write(P("c.bin"), tok, 10, 70000, NULL, 0, err, sizeof err);
    CHECK(rc != 0 && has(err, "70000"), "vocab too large for uint16: %s", err);
    /* vocab 65536 accepts every uint16 */
    uint16_t big[2] = {0, 65535};
    rc = shard_write(P("d.bin"), big, 2, 65536, NULL, 0, err, sizeof err);
    CHECK(rc == 0 && shard_open(&s, P("d.bin"), err, sizeof err) == 0, "vocab 65536: %s", err);
    shard_close(&s);
}

/* Write a valid 10-token shard, let `mutate` damage its bytes, open it. */
static int open_damaged(void (*mutate)(unsigned char *b, size_t *n)) {
    uint16_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    shard_write(P("x.bin"), tok, 10, 100, NULL, 0, err, sizeof err);
    size_t n;
    unsigned char *b = read_all(P("x.bin"), &n);
    unsigned char *big = calloc(n + 16, 1);
    memcpy(big, b, n);
    mutate(big, &n);
    write_bytes(P("x.bin"), big, n);
    free(b);
    free(big);
    Shard s;
    int rc = shard_open(&s, P("x.bin"), err, sizeof err);
    if (rc == 0) shard_close(&s);
    return rc;
}

static void m_short(unsigned char *b, size_t *n) { *n = 100; }
static void m_magic(unsigned char *b, size_t *n) { b[0] = 'X'; }
static void m_version(unsigned char *b, size_t *n) { b[8] = 2; }
static void m_hbytes(unsigned char *b, size_t *n) { b[12] = 0; b[13] = 2; }
static void m_tbytes(unsigned char *b, size_t *n) { b[16] = 4; }
static void m_vocab0(unsigned char *b, size_t *n) { memset(b + 20, 0, 4); }
static void m_kind(unsigned char *b, size_t *n) { b[64] = 7; }
static void m_reserved(unsigned char *b, size_t *n) { b[200] = 1; }
static void m_trunc(unsigned char *b, size_t *n) { *n -= 5; }
static void m_trailing(unsigned char *b, size_t *n) { *n += 3; }
static void m_token(unsigned char *b, size_t *n) { b[256 + 2 * 6] = 100; }
static void m_huge_n(unsigned char *b, size_t *n) { memset(b + 24, 0xff, 8); }

static void test_errors(void) {
    Shard s;
    CHECK(shard_open(&s, P("none.bin"), err, sizeof err) != 0 && has(err, "none.bin") &&
              has(err, "no such file"), "missing: %s", err);
    CHECK(open_damaged(m_short) && has(err, "100 bytes, too short") && has(err, "x.bin"),
          "short: %s", err);
    CHECK(open_damaged(m_magic) && has(err, "not a sinkgate token shard"), "magic: %s", err);
    CHECK(open_damaged(m_version) && has(err, "version 2, this build reads 1"), "version: %s", err);
    CHECK(open_damaged(m_hbytes) && has(err, "header_bytes is 512"), "header_bytes: %s", err);
    CHECK(open_damaged(m_tbytes) && has(err, "token_bytes is 4"), "token_bytes: %s", err);
    CHECK(open_damaged(m_vocab0) && has(err, "vocab_size 0"), "vocab 0: %s", err);
    CHECK(open_damaged(m_kind) && has(err, "kind 7"), "kind: %s", err);
    CHECK(open_damaged(m_reserved) && has(err, "header byte 200"), "reserved: %s", err);
    CHECK(open_damaged(m_trunc) && has(err, "truncated") && has(err, "5 missing"),
          "truncated: %s", err);
    CHECK(open_damaged(m_trailing) && has(err, "3 unexpected bytes"), "trailing: %s", err);
    CHECK(open_damaged(m_token) && has(err, "token 6 has value 100, not below vocab_size 100"),
          "bad token: %s", err);
    CHECK(open_damaged(m_huge_n) && has(err, "corrupt"), "huge n_tokens: %s", err);
}

/* ---- data directory ----------------------------------------------------- */

/* Token value encodes (shard id, position): id*1000 + position. */
static void make_shard(const char *dir, const char *name, int id, int len, uint32_t kind,
                       uint32_t vocab, uint8_t sha0) {
    uint16_t *t = malloc((size_t)len * 2 + 2);
    for (int i = 0; i < len; i++) t[i] = (uint16_t)((id * 1000 + i) % (int)vocab);
    uint8_t sha[32] = {sha0};
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = shard_write(path, t, (uint64_t)len, vocab, sha, kind, err, sizeof err);
    CHECK(rc == 0, "make_shard %s: %s", name, err);
    free(t);
}

static int open_set(const char *sub, uint32_t vocab, int block) {
    ShardSet s;
    int rc = shardset_open(&s, P(sub), vocab, block, err, sizeof err);
    if (rc == 0) shardset_close(&s);
    return rc;
}

/* Evaluation opens val.bin alone: train_*.bin may be absent or too short. */
static void test_val_only(void) {
    char d[512];
    ShardSet s;
    snprintf(d, sizeof d, "%s/v1", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 1, 10000, 0);
    CHECK(open_set("v1", 0, 4) != 0 && has(err, "no train_*.bin"), "training needs train shards: %s", err);
    int rc = shardset_open_val(&s, d, 10000, 4, err, sizeof err);
    CHECK(rc == 0 && s.n_train == 0 && s.val_starts == 96 && s.train_starts == 0 && s.vocab_size == 10000,
          "val.bin alone opens for evaluation: %s", rc ? err : "");
    if (!rc) shardset_close(&s);
    make_shard(d, "train_0.bin", 0, 3, 0, 10000, 0); /* shorter than a window: not read */
    rc = shardset_open_val(&s, d, 10000, 4, err, sizeof err);
    CHECK(rc == 0 && s.n_train == 0, "a train shard too short for a window is not read: %s", rc ? err : "");
    if (!rc) shardset_close(&s);
    CHECK(shardset_open_val(&s, d, 50257, 4, err, sizeof err) != 0 && has(err, "val.bin") && has(err, "50257"),
          "val.bin still answers for its vocabulary: %s", err);
    CHECK(shardset_open_val(&s, d, 10000, 100, err, sizeof err) != 0 && has(err, "too short"),
          "and for its length: %s", err);
    snprintf(d, sizeof d, "%s/v2", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "train_0.bin", 0, 100, 0, 10000, 0);
    CHECK(shardset_open_val(&s, d, 10000, 4, err, sizeof err) != 0 && has(err, "no val.bin"), "no val.bin: %s",
          err);
    snprintf(d, sizeof d, "%s/v-none", tmpdir);
    CHECK(shardset_open_val(&s, d, 10000, 4, err, sizeof err) != 0 &&
              has(err, "holding val.bin (made by") && !has(err, "train_"),
          "missing directory, for evaluation: %s", err);
}

static void test_dir_errors(void) {
    char d[512];
    CHECK(open_set("nodir", 0, 4) != 0 && has(err, "nodir: data directory not found"),
          "missing dir: %s", err);
    snprintf(d, sizeof d, "%s/e1", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "train_0.bin", 0, 100, 0, 10000, 0);
    CHECK(open_set("e1", 0, 4) != 0 && has(err, "no val.bin"), "no val: %s", err);

    snprintf(d, sizeof d, "%s/e2", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 1, 10000, 0);
    make_shard(d, "notes.bin", 0, 100, 0, 10000, 0); /* not a train_*.bin name: ignored */
    CHECK(open_set("e2", 0, 4) != 0 && has(err, "no train_*.bin"), "no train: %s", err);

    snprintf(d, sizeof d, "%s/e3", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 1, 50257, 0);
    make_shard(d, "train_0.bin", 0, 100, 0, 50257, 0);
    CHECK(open_set("e3", 512, 4) != 0 && has(err, "e3/val.bin: vocabulary size 50257, the model "
                                                  "expects 512 (vocab_size)"),
          "vocab: %s", err);
    CHECK(open_set("e3", 50257, 4) == 0, "matching vocab opens: %s", err);
    CHECK(open_set("e3", 0, 4) == 0, "expect_vocab 0 accepts: %s", err);
    CHECK(open_set("e3", 50257, 0) != 0 && has(err, "block_size 0"), "block 0: %s", err);

    snprintf(d, sizeof d, "%s/e4", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 1, 10000, 1);
    make_shard(d, "train_0.bin", 0, 100, 0, 10000, 1);
    make_shard(d, "train_1.bin", 1, 100, 0, 10000, 2);
    CHECK(open_set("e4", 10000, 4) != 0 && has(err, "e4/train_1.bin and") &&
              has(err, "e4/val.bin") && has(err, "different tokenizer"),
          "sha: %s", err);

    snprintf(d, sizeof d, "%s/e5", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 0, 10000, 0); /* kind 0 named val */
    make_shard(d, "train_0.bin", 0, 100, 0, 10000, 0);
    CHECK(open_set("e5", 10000, 4) != 0 && has(err, "e5/val.bin: header says kind 0 (train)"),
          "kind val: %s", err);
    make_shard(d, "val.bin", 9, 100, 1, 10000, 0);
    make_shard(d, "train_0.bin", 0, 100, 1, 10000, 0);
    CHECK(open_set("e5", 10000, 4) != 0 && has(err, "train_0.bin: header says kind 1 (val)"),
          "kind train: %s", err);

    snprintf(d, sizeof d, "%s/e6", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "val.bin", 9, 100, 1, 10000, 0);
    make_shard(d, "train_0.bin", 0, 100, 0, 10000, 0);
    make_shard(d, "train_1.bin", 1, 16, 0, 10000, 0);
    CHECK(open_set("e6", 10000, 15) == 0, "16 tokens hold one window of 16: %s", err);
    CHECK(open_set("e6", 10000, 16) != 0 &&
              has(err, "train_1.bin: 16 tokens, too short for one window of block_size+1 = 17"),
          "short train: %s", err);
    CHECK(open_set("e6", 10000, 100) != 0 && has(err, "val.bin: 100 tokens, too short"),
          "short val: %s", err);
    /* a damaged member names itself */
    write_bytes(P("e6/train_1.bin"), "garbage", 7);
    CHECK(open_set("e6", 10000, 4) != 0 && has(err, "e6/train_1.bin: 7 bytes"), "damaged: %s", err);
}

enum { BLOCK = 8, NSH = 3 };
static const int LENS[NSH] = {37, 9, 60}; /* 9 = one window exactly */

/* A directory whose shard names sort differently than their creation order. */
static void make_sampling_dir(void) {
    char d[512];
    snprintf(d, sizeof d, "%s/data", tmpdir);
    fs_mkdir_p(d, err, sizeof err);
    make_shard(d, "train_b.bin", 1, LENS[1], 0, 10000, 0);
    make_shard(d, "train_c.bin", 2, LENS[2], 0, 10000, 0);
    make_shard(d, "train_a.bin", 0, LENS[0], 0, 10000, 0);
    make_shard(d, "val.bin", 9, 50, 1, 10000, 0);
}

/* A window's tokens are one shard's consecutive positions. */
static int window_ok(const int32_t *w, int *id, int *pos) {
    *id = w[0] / 1000;
    *pos = w[0] % 1000;
    for (int t = 1; t <= BLOCK; t++)
        if (w[t] != w[0] + t) return 0;
    return 1;
}

static void test_sampler(void) {
    make_sampling_dir();
    ShardSet s;
    int rc = shardset_open(&s, P("data"), 10000, BLOCK, err, sizeof err);
    CHECK(rc == 0, "shardset_open: %s", err);
    if (rc) return;
    CHECK(s.n_train == 3 && has(s.train[0].path, "train_a") && has(s.train[1].path, "train_b") &&
              has(s.train[2].path, "train_c"), "train shards in lexicographic order");
    uint64_t total = 0;
    for (int i = 0; i < NSH; i++) total += (uint64_t)(LENS[i] - BLOCK);
    CHECK(s.train_starts == total, "train_starts %llu want %llu",
          (unsigned long long)s.train_starts, (unsigned long long)total);
    CHECK(s.val_starts == 50 - BLOCK, "val_starts");

    /* locate enumerates every (shard, offset) once, in order */
    int ok = 1, prev_sh = 0;
    uint64_t prev_off = 0;
    for (uint64_t g = 0; g < total; g++) {
        int sh;
        uint64_t off;
        shardset_locate(&s, g, &sh, &off);
        ok &= off + BLOCK + 1 <= s.train[sh].n_tokens;
        if (g) ok &= (sh == prev_sh && off == prev_off + 1) || (sh == prev_sh + 1 && off == 0);
        else ok &= sh == 0 && off == 0;
        prev_sh = sh;
        prev_off = off;
    }
    CHECK(ok && prev_sh == NSH - 1, "locate covers all starts in order");

    /* windows: in bounds, one shard, equal to the located tokens */
    int32_t w[BLOCK + 1], w2[BLOCK + 1];
    int inside = 1, match = 1, same = 1;
    int hits[200] = {0};
    for (uint64_t step = 0; step < 200; step++)
        for (uint64_t row = 0; row < 50; row++) {
            sampler_train_window(&s, 1234, step, row, w);
            uint64_t g = sampler_train_index(&s, 1234, step, row);
            int sh;
            uint64_t off;
            shardset_locate(&s, g, &sh, &off);
            int id, pos;
            inside &= window_ok(w, &id, &pos) && id == sh && pos >= 0 &&
                      pos + BLOCK < LENS[id];
            for (int t = 0; t <= BLOCK; t++) match &= w[t] == s.train[sh].tokens[off + t];
            sampler_train_window(&s, 1234, step, row, w2);
            same &= memcmp(w, w2, sizeof w) == 0;
            hits[g]++;
        }
    CHECK(inside, "windows stay inside one shard");
    CHECK(match, "windows equal the shard tokens at the located offset");
    CHECK(same, "same (seed, step, row) gives the same window");
    int all = 1;
    for (uint64_t g = 0; g < total; g++) all &= hits[g] > 0;
    CHECK(all, "every window start is drawn (10000 draws over %llu starts)",
          (unsigned long long)total);

    /* a global batch of 8 is the same for every micro-batch split and for
     * ranks each reading their slice */
    int32_t ref[8][BLOCK + 1], got[8][BLOCK + 1];
    sampler_train_rows(&s, 99, 17, 0, 8, &ref[0][0]);
    const int micro[4] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        int bm = micro[k];
        memset(got, 0, sizeof got);
        for (int m = 0; m < 8 / bm; m++)
            for (int r = 0; r < bm; r++)
                sampler_train_window(&s, 99, 17, (uint64_t)(m * bm + r), got[m * bm + r]);
        CHECK(memcmp(ref, got, sizeof ref) == 0, "global batch identical as %dx%d", 8 / bm, bm);
    }
    memset(got, 0, sizeof got);
    for (int rank = 0; rank < 2; rank++)     /* 2 ranks x 2 micro-batches x 2 rows */
        for (int m = 0; m < 2; m++)
            sampler_train_rows(&s, 99, 17, (uint64_t)(rank * 4 + m * 2), 2, got[rank * 4 + m * 2]);
    CHECK(memcmp(ref, got, sizeof ref) == 0, "global batch identical over 2 ranks");

    /* different seeds or steps give different batches */
    int32_t other[8][BLOCK + 1];
    sampler_train_rows(&s, 100, 17, 0, 8, &other[0][0]);
    CHECK(memcmp(ref, other, sizeof ref) != 0, "another seed gives other windows");
    sampler_train_rows(&s, 99, 18, 0, 8, &other[0][0]);
    CHECK(memcmp(ref, other, sizeof ref) != 0, "another step gives other windows");

    /* validation: inside val.bin, fixed by (val_seed, batch, row) */
    int vin = 1, vsame = 1;
    for (uint64_t b = 0; b < 20; b++)
        for (uint64_t r = 0; r < 16; r++) {
            sampler_val_window(&s, 7, b, r, w);
            int id, pos;
            vin &= window_ok(w, &id, &pos) && id == 9 && pos + BLOCK < 50 &&
                   (uint64_t)pos == sampler_val_index(&s, 7, b, r);
            sampler_val_window(&s, 7, b, r, w2);
            vsame &= memcmp(w, w2, sizeof w) == 0;
        }
    CHECK(vin, "val windows inside val.bin at the reported offset");
    CHECK(vsame, "val windows deterministic");
    int32_t vr[4][BLOCK + 1];
    sampler_val_rows(&s, 7, 3, 0, 4, &vr[0][0]);
    sampler_val_window(&s, 7, 3, 2, w);
    CHECK(memcmp(vr[2], w, sizeof w) == 0, "sampler_val_rows row 2");
    shardset_close(&s);
}

int main(void) {
    check_name = "test_shard";
    if (make_tmpdir("shard")) return 1;
    test_roundtrip();
    test_errors();
    test_dir_errors();
    test_val_only();
    test_sampler();
    rm_rf(tmpdir);
    return check_finish();
}
