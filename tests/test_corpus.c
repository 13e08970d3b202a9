/* CorpusWriter: val.bin and train shards from a token stream, the short
 * tail rule, the hidden working directory, install, replace and abort. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "corpus.h"
#include "shard.h"

#define VOCAB 50257u
#define MANIFEST "{\"test\": \"manifest\"}\n"

static uint8_t SHA[32];

/* Token i of the test stream. */
static uint32_t tok(uint64_t i, uint32_t vocab) { return (uint32_t)(i % vocab); }

/* ---- directory listings --------------------------------------------------- */

typedef struct {
    char **v;
    size_t n;
} Names;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static Names list_dir(const char *dir) {
    Names l = {0};
    DIR *d = opendir(dir);
    if (!d) return l;
    struct dirent *de;
    size_t cap = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (l.n == cap) {
            cap = cap ? 2 * cap : 16;
            l.v = realloc(l.v, cap * sizeof *l.v);
        }
        l.v[l.n++] = strdup(de->d_name);
    }
    closedir(d);
    if (l.n) qsort(l.v, l.n, sizeof *l.v, cmp_str);
    return l;
}
static void names_free(Names *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
/* The listing joined by spaces (for messages). */
static const char *names_str(const Names *l) {
    static char buf[2048];
    buf[0] = 0;
    for (size_t i = 0; i < l->n; i++) {
        size_t k = strlen(buf);
        snprintf(buf + k, sizeof buf - k, "%s%s", i ? " " : "", l->v[i]);
    }
    return buf;
}
/* DIR holds exactly the names in WANT (NULL-terminated, sorted). */
static int dir_is(const char *dir, const char *const *want) {
    Names l = list_dir(dir);
    size_t n = 0;
    while (want[n]) n++;
    int ok = l.n == n;
    for (size_t i = 0; ok && i < n; i++) ok = !strcmp(l.v[i], want[i]);
    if (!ok) fprintf(stderr, "  %s holds: [%s]\n", dir, names_str(&l));
    names_free(&l);
    return ok;
}
static int has_hidden_workdir(const char *dir) {
    Names l = list_dir(dir);
    int found = 0;
    for (size_t i = 0; i < l.n; i++) found |= !strncmp(l.v[i], ".sgtok-", 7);
    names_free(&l);
    return found;
}

/* ---- writing and checking a corpus --------------------------------------- */

static int is_train_name(const char *n) {
    size_t k = strlen(n);
    return !strncmp(n, "train_", 6) && k > 10 && !strcmp(n + k - 4, ".bin");
}

/* Write tokens [from, to) of the stream in chunks cycling through CHUNKS. */
static int write_stream(CorpusWriter *w, uint64_t from, uint64_t to, uint32_t vocab,
                        const size_t *chunks, size_t nchunks) {
    uint64_t i = from;
    size_t c = 0;
    uint32_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    while (i < to && !rc) {
        size_t k = chunks[c++ % nchunks];
        if (k > to - i) k = (size_t)(to - i);
        if (k > cap) {
            cap = k;
            buf = realloc(buf, cap * sizeof *buf);
        }
        for (size_t j = 0; j < k; j++) buf[j] = tok(i + j, vocab);
        rc = corpus_write(w, buf, k, err, sizeof err);
        i += k;
    }
    free(buf);
    return rc;
}

/* The train shard sizes the header promises for T train tokens. */
static size_t expect_sizes(uint64_t T, uint64_t S, uint64_t *sz) {
    size_t k = (size_t)(T / S);
    uint64_t rest = T % S;
    if (k == 0) {
        sz[0] = T;
        return 1;
    }
    for (size_t i = 0; i < k; i++) sz[i] = S;
    if (rest >= CORPUS_MIN_SHARD) sz[k++] = rest;
    else sz[k - 1] += rest;
    return k;
}

/* One shard holds tokens [first, first+n) of the stream, with the header. */
static void check_shard(const char *what, const char *path, uint64_t first, uint64_t n,
                        uint32_t vocab, const uint8_t *sha, uint32_t kind) {
    Shard s;
    int rc = shard_open(&s, path, err, sizeof err);
    CHECK(rc == 0, "%s: shard_open %s: %s", what, path, err);
    if (rc) return;
    CHECK(s.n_tokens == n, "%s: %s holds %llu tokens, want %llu", what, path,
          (unsigned long long)s.n_tokens, (unsigned long long)n);
    CHECK(s.kind == kind && s.vocab_size == vocab && !memcmp(s.vocab_sha256, sha, 32),
          "%s: %s header: kind %u vocab %u (want %u, %u, and the sha)", what, path, s.kind,
          s.vocab_size, kind, vocab);
    uint64_t bad = UINT64_MAX;
    for (uint64_t i = 0; i < s.n_tokens && i < n && bad == UINT64_MAX; i++)
        if (s.tokens[i] != tok(first + i, vocab)) bad = i;
    CHECK(bad == UINT64_MAX, "%s: %s token %llu is %u, want %u (stream position %llu)", what, path,
          (unsigned long long)bad, bad == UINT64_MAX ? 0 : s.tokens[bad],
          bad == UINT64_MAX ? 0 : tok(first + bad, vocab), (unsigned long long)(first + bad));
    shard_close(&s);
}

/* OUT holds the corpus of a V + T token stream: val.bin, the train shards
 * with sizes by the tail rule, the manifest, EXTRA files; no working dir. */
static void check_corpus(const char *what, const char *out, uint64_t V, uint64_t T, uint64_t S,
                         uint32_t vocab, const uint8_t *sha, const char *const *extra) {
    char path[600];
    snprintf(path, sizeof path, "%s/val.bin", out);
    check_shard(what, path, 0, V, vocab, sha, SHARD_KIND_VAL);

    uint64_t sz[4096];
    size_t ns = expect_sizes(T, S, sz);
    Names l = list_dir(out);
    size_t nt = 0;
    for (size_t i = 0; i < l.n; i++) nt += is_train_name(l.v[i]);
    CHECK(nt == ns, "%s: %zu train shards, want %zu", what, nt, ns);
    char sizes[1024] = "", got[1024] = "";
    uint64_t first = V;
    for (size_t i = 0; i < ns; i++) {
        size_t k = strlen(sizes);
        snprintf(sizes + k, sizeof sizes - k, " %llu", (unsigned long long)sz[i]);
        snprintf(path, sizeof path, "%s/train_%06zu.bin", out, i);
        if (!fs_exists(path)) {
            CHECK(0, "%s: %s missing", what, path);
            continue;
        }
        Shard s;
        if (shard_open(&s, path, err, sizeof err) == 0) {
            k = strlen(got);
            snprintf(got + k, sizeof got - k, " %llu", (unsigned long long)s.n_tokens);
            shard_close(&s);
        }
        check_shard(what, path, first, sz[i], vocab, sha, SHARD_KIND_TRAIN);
        first += sz[i];
    }
    if (strcmp(sizes, got)) fprintf(stderr, "  %s: train shard sizes%s, want%s\n", what, got, sizes);

    /* exactly val.bin, manifest.json, the train shards and the extras */
    size_t nextra = 0;
    while (extra && extra[nextra]) nextra++;
    int only = l.n == 2 + ns + nextra;
    for (size_t i = 0; i < l.n; i++) {
        int known = !strcmp(l.v[i], "val.bin") || !strcmp(l.v[i], "manifest.json") ||
                    is_train_name(l.v[i]);
        for (size_t j = 0; j < nextra; j++) known |= !strcmp(l.v[i], extra[j]);
        only &= known;
    }
    CHECK(only, "%s: OUT holds [%s]", what, names_str(&l));
    CHECK(!has_hidden_workdir(out), "%s: a .sgtok-* directory is left in OUT", what);
    names_free(&l);

    snprintf(path, sizeof path, "%s/manifest.json", out);
    size_t n;
    unsigned char *m = read_all(path, &n);
    CHECK(m && n == strlen(MANIFEST) && !memcmp(m, MANIFEST, n), "%s: manifest.json", what);
    free(m);

    /* the trainer can open it: every shard holds a 1024-token window */
    if (V >= CORPUS_MIN_SHARD && T >= CORPUS_MIN_SHARD) {
        ShardSet ss;
        int rc = shardset_open(&ss, out, vocab, 1024, err, sizeof err);
        CHECK(rc == 0, "%s: shardset_open(block 1024): %s", what, err);
        if (rc == 0) {
            CHECK(ss.n_train == (int)ns, "%s: shardset sees %d train shards", what, ss.n_train);
            shardset_close(&ss);
        }
    }
}

/* Build a corpus in OUT from a V + T token stream written in CHUNKS. */
static int build(const char *what, const char *out, int replace, uint32_t vocab, uint64_t V,
                 uint64_t T, uint64_t S, const size_t *chunks, size_t nchunks) {
    CorpusWriter w;
    err[0] = 0;
    if (corpus_open(&w, out, replace, vocab, SHA, V, S, err, sizeof err)) {
        CHECK(0, "%s: corpus_open: %s", what, err);
        corpus_abort(&w);
        return -1;
    }
    int rc = write_stream(&w, 0, V + T, vocab, chunks, nchunks);
    CHECK(rc == 0, "%s: corpus_write: %s", what, err);
    if (!rc) {
        rc = corpus_close_shards(&w, err, sizeof err);
        CHECK(rc == 0, "%s: corpus_close_shards: %s", what, err);
    }
    if (!rc) {
        /* nothing in OUT yet: the shards wait in the hidden directory */
        char pre[600];
        snprintf(pre, sizeof pre, "%s/.sgtok-", out);
        CHECK(w.tmp && !strncmp(w.tmp, pre, strlen(pre)), "%s: working dir %s", what,
              w.tmp ? w.tmp : "(null)");
        snprintf(pre, sizeof pre, "%s/train_000000.bin", out);
        CHECK(!replace ? !fs_exists(pre) : 1, "%s: train_000000.bin before install", what);
        rc = corpus_install(&w, MANIFEST, err, sizeof err);
        CHECK(rc == 0, "%s: corpus_install: %s", what, err);
        return rc;
    }
    corpus_abort(&w);
    return -1;
}

static void test_layout(void) {
    const uint64_t S = 4096, V = 1500;
    const size_t small[] = {1, 7, 300, 1000, 3, 2500, 64, 999};
    struct {
        const char *what;
        uint64_t T;
    } cases[] = {
        {"rest 1024 joins the last shard", 3 * S + 1024},
        {"rest 1025 is its own shard", 3 * S + 1025},
        {"no rest", 3 * S},
        {"rest 1", 3 * S + 1},
        {"rest 2000", 2 * S + 2000},
        {"one full shard", S},
        {"one shard plus 1", S + 1},
        {"one shard plus 500", S + 500},
        {"under one shard", S - 1},
        {"train split shorter than 1025", 100},
        {"a single train token", 1},
        {"train split of exactly 1025", 1025},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(out, sizeof out, "layout%zu", i);
        if (build(cases[i].what, P(out), 0, VOCAB, V, cases[i].T, S, small,
                  sizeof small / sizeof *small) == 0)
            check_corpus(cases[i].what, P(out), V, cases[i].T, S, VOCAB, SHA, NULL);
    }

    /* one token at a time: the pending tokens become a shard at exactly 1025 */
    const size_t one[] = {1};
    if (build("token by token", P("one"), 0, VOCAB, 3, 2 * S + 1030, S, one, 1) == 0)
        check_corpus("token by token", P("one"), 3, 2 * S + 1030, S, VOCAB, SHA, NULL);

    /* a val split that ends in the middle of a chunk */
    const size_t odd[] = {333, 2999, 17};
    if (build("val ends mid-chunk", P("midval"), 0, VOCAB, 1234, 3 * S + 77, S, odd, 3) == 0)
        check_corpus("val ends mid-chunk", P("midval"), 1234, 3 * S + 77, S, VOCAB, SHA, NULL);

    /* an OUT that does not exist yet is created, parents too */
    if (build("nested new OUT", P("new/a/b"), 0, VOCAB, V, S + 7, S, small, 8) == 0)
        check_corpus("nested new OUT", P("new/a/b"), V, S + 7, S, VOCAB, SHA, NULL);

    /* the full 16-bit range */
    const size_t big[] = {7000, 18976};
    if (build("vocab 65536", P("v65536"), 0, 65536, 2000, 80000, 20000, big, 2) == 0)
        check_corpus("vocab 65536", P("v65536"), 2000, 80000, 20000, 65536, SHA, NULL);
}

/* Writes larger than shard_tokens - 1024 tokens at a time must still give
 * shards of shard_tokens (the chunking of the stream is not the corpus's). */
static void test_large_writes(void) {
    const uint64_t S = 4096, V = 1500;
    const size_t all[] = {(size_t)(V + 5 * S + 100)};
    if (build("everything in one write", P("big1"), 0, VOCAB, V, 5 * S + 100, S, all, 1) == 0)
        check_corpus("everything in one write", P("big1"), V, 5 * S + 100, S, VOCAB, SHA, NULL);

    const size_t c3000[] = {3000};
    if (build("chunks of 3000, shards of 2048", P("big2"), 0, VOCAB, V, 10 * 2048 + 50, 2048, c3000,
              1) == 0)
        check_corpus("chunks of 3000, shards of 2048", P("big2"), V, 10 * 2048 + 50, 2048, VOCAB,
                     SHA, NULL);

    const size_t c100[] = {100};
    if (build("minimum shards of 1025, chunks of 100", P("big3"), 0, VOCAB, V, 10 * 1025 + 50,
              CORPUS_MIN_SHARD, c100, 1) == 0)
        check_corpus("minimum shards of 1025, chunks of 100", P("big3"), V, 10 * 1025 + 50,
                     CORPUS_MIN_SHARD, VOCAB, SHA, NULL);
}

/* ---- failures ------------------------------------------------------------- */

static const char *const EMPTY[] = {NULL};

/* Write V + T tokens; corpus_close_shards must fail with MSG; after abort
 * OUT holds nothing. */
static void expect_close_fails(const char *what, const char *out, uint64_t V, uint64_t n,
                               const char *msg, const char *msg2) {
    CorpusWriter w;
    int rc = corpus_open(&w, out, 0, VOCAB, SHA, V, 2048, err, sizeof err);
    CHECK(rc == 0, "%s: corpus_open: %s", what, err);
    if (rc) return;
    const size_t chunks[] = {100, 1};
    rc = write_stream(&w, 0, n, VOCAB, chunks, 2);
    CHECK(rc == 0, "%s: corpus_write: %s", what, err);
    err[0] = 0;
    rc = corpus_close_shards(&w, err, sizeof err);
    CHECK(rc != 0 && has(err, msg) && has(err, msg2), "%s: corpus_close_shards: rc %d, \"%s\"",
          what, rc, err);
    corpus_abort(&w);
    CHECK(dir_is(out, EMPTY), "%s: OUT empty after corpus_abort", what);
}

static void test_close_errors(void) {
    expect_close_fails("too few tokens for val", P("few"), 1500, 1000, "1000", "1500");
    expect_close_fails("no tokens", P("none"), 1500, 0, "0 tokens", "1500");
    expect_close_fails("all tokens in val", P("allval"), 1500, 1500, "1500", "val.bin");

    /* abort right after open, and after writing into train */
    CorpusWriter w;
    CHECK(corpus_open(&w, P("ab1"), 0, VOCAB, SHA, 10, 2048, err, sizeof err) == 0, "open: %s", err);
    CHECK(has_hidden_workdir(P("ab1")), "open makes the working directory");
    corpus_abort(&w);
    CHECK(dir_is(P("ab1"), EMPTY), "abort right after open");
    CHECK(corpus_open(&w, P("ab2"), 0, VOCAB, SHA, 10, 2048, err, sizeof err) == 0, "open: %s", err);
    const size_t chunks[] = {777};
    CHECK(write_stream(&w, 0, 10 + 3 * 2048 + 5, VOCAB, chunks, 1) == 0, "write: %s", err);
    corpus_abort(&w);
    CHECK(dir_is(P("ab2"), EMPTY), "abort with shards open and committed");
    CHECK(corpus_open(&w, P("ab3"), 0, VOCAB, SHA, 10, 2048, err, sizeof err) == 0, "open: %s", err);
    CHECK(write_stream(&w, 0, 10 + 3 * 2048 + 5, VOCAB, chunks, 1) == 0, "write: %s", err);
    CHECK(corpus_close_shards(&w, err, sizeof err) == 0, "close: %s", err);
    corpus_abort(&w);
    CHECK(dir_is(P("ab3"), EMPTY), "abort after close_shards");
}

static void test_open_errors(void) {
    CorpusWriter w;
    struct {
        const char *what, *msg;
        uint32_t vocab;
        uint64_t V, S;
    } bad[] = {
        {"vocab 65537", "65537", 65537, 100, 2048},
        {"vocab 0", "vocabulary", 0, 100, 2048},
        {"val_tokens 0", "val tokens", VOCAB, 0, 2048},
        {"shard_tokens 1024", "1025", VOCAB, 100, 1024},
        {"shard_tokens 0", "1025", VOCAB, 100, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        int rc = corpus_open(&w, P("badopen"), 0, bad[i].vocab, SHA, bad[i].V, bad[i].S, err,
                             sizeof err);
        CHECK(rc != 0 && has(err, bad[i].msg), "%s refused: rc %d, \"%s\"", bad[i].what, rc, err);
        if (rc == 0) corpus_abort(&w);
        CHECK(!fs_exists(P("badopen")), "%s: OUT not created", bad[i].what);
    }
    /* the smallest legal values work */
    CHECK(corpus_open(&w, P("minopen"), 0, 1, SHA, 1, CORPUS_MIN_SHARD, err, sizeof err) == 0,
          "vocab 1, val 1, shard 1025: %s", err);
    uint32_t zeros[2000] = {0};
    CHECK(corpus_write(&w, zeros, 2000, err, sizeof err) == 0, "write zeros: %s", err);
    CHECK(corpus_close_shards(&w, err, sizeof err) == 0, "close: %s", err);
    CHECK(corpus_install(&w, MANIFEST, err, sizeof err) == 0, "install: %s", err);
    check_corpus("vocab 1", P("minopen"), 1, 1999, CORPUS_MIN_SHARD, 1, SHA, NULL);

    /* a token outside the vocabulary: in val, in a train shard, while held back */
    struct {
        const char *what;
        uint64_t before; /* good tokens written first */
    } tb[] = {{"in val", 5}, {"in a train shard", 10 + 100}, {"held back after a full shard", 10 + 1025}};
    for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) {
        CHECK(corpus_open(&w, P("badtok"), 0, 1000, SHA, 10, CORPUS_MIN_SHARD, err, sizeof err) == 0,
              "open: %s", err);
        const size_t one[] = {1};
        CHECK(write_stream(&w, 0, tb[i].before, 1000, one, 1) == 0, "%s: good tokens: %s",
              tb[i].what, err);
        uint32_t t[3] = {999, 1000, 1};
        err[0] = 0;
        int rc = corpus_write(&w, t, 3, err, sizeof err);
        CHECK(rc != 0 && has(err, "1000"), "token 1000 %s refused: rc %d \"%s\"", tb[i].what, rc,
              err);
        uint32_t t2[1] = {4000000000u};
        if (rc == 0) {
            rc = corpus_write(&w, t2, 1, err, sizeof err);
            CHECK(rc != 0, "token 4e9 %s refused", tb[i].what);
        }
        corpus_abort(&w);
        CHECK(dir_is(P("badtok"), EMPTY), "%s: OUT empty after abort", tb[i].what);
    }
}

static void test_existing(void) {
    CorpusWriter w;
    /* an OUT holding any of val.bin, train_*.bin, manifest.json is refused */
    const char *names[] = {"val.bin", "train_000000.bin", "train_000007.bin", "manifest.json"};
    for (size_t i = 0; i < 4; i++) {
        char dir[64], path[96];
        snprintf(dir, sizeof dir, "exist%zu", i);
        mkdir(P(dir), 0755);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        write_bytes(P(path), "old bytes\n", 10);
        snprintf(path, sizeof path, "%s/notes.txt", dir);
        write_bytes(P(path), "notes", 5);
        err[0] = 0;
        int rc = corpus_open(&w, P(dir), 0, VOCAB, SHA, 10, 2048, err, sizeof err);
        CHECK(rc != 0 && has(err, names[i]) && has(err, P(dir)), "OUT with %s refused: rc %d \"%s\"",
              names[i], rc, err);
        if (rc == 0) corpus_abort(&w);
        const char *want[] = {names[i], "notes.txt", NULL};
        if (strcmp(names[i], "notes.txt") > 0) want[0] = "notes.txt", want[1] = names[i];
        CHECK(dir_is(P(dir), want), "OUT with %s: nothing added", names[i]);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t n;
        unsigned char *b = read_all(P(path), &n);
        CHECK(b && n == 10 && !memcmp(b, "old bytes\n", 10), "%s byte-identical", names[i]);
        free(b);
    }

    /* names that only look like shards are not a corpus */
    mkdir(P("lookalike"), 0755);
    write_bytes(P("lookalike/val.bin.bak"), "x", 1);
    write_bytes(P("lookalike/train_1.txt"), "x", 1);
    write_bytes(P("lookalike/.train_000000.bin"), "x", 1);
    const size_t chunks[] = {500};
    const char *const extra[] = {".train_000000.bin", "train_1.txt", "val.bin.bak", NULL};
    if (build("look-alike names", P("lookalike"), 0, VOCAB, 100, 3000, 2048, chunks, 1) == 0)
        check_corpus("look-alike names", P("lookalike"), 100, 3000, 2048, VOCAB, SHA, extra);

    /* replace: an old corpus with 6 train shards, and files of the user's */
    const uint64_t S0 = 1100;
    const size_t c50[] = {50};
    if (build("old corpus", P("rep"), 0, VOCAB, 50, 6 * S0, S0, c50, 1)) return;
    check_corpus("old corpus", P("rep"), 50, 6 * S0, S0, VOCAB, SHA, NULL);
    write_bytes(P("rep/notes.txt"), "keep me", 7);
    mkdir(P("rep/sub"), 0755);
    write_bytes(P("rep/sub/train_000009.bin"), "nested", 6);
    size_t n_old;
    unsigned char *old_val = read_all(P("rep/val.bin"), &n_old);

    /* replace=0 refuses, and leaves it alone */
    int rc = corpus_open(&w, P("rep"), 0, VOCAB, SHA, 10, 2048, err, sizeof err);
    CHECK(rc != 0 && has(err, "--force"), "existing corpus refused: \"%s\"", err);
    if (rc == 0) corpus_abort(&w);

    /* replace=1, then abort: the old corpus is untouched */
    uint8_t sha2[32];
    for (int i = 0; i < 32; i++) sha2[i] = (uint8_t)(0xa0 + i);
    rc = corpus_open(&w, P("rep"), 1, 30000, sha2, 200, 4096, err, sizeof err);
    CHECK(rc == 0, "replace: corpus_open: %s", err);
    if (rc) return;
    CHECK(write_stream(&w, 0, 200 + 2 * 4096 + 10, 30000, chunks, 1) == 0, "replace write: %s", err);
    CHECK(corpus_close_shards(&w, err, sizeof err) == 0, "replace close: %s", err);
    corpus_abort(&w);
    const char *const user[] = {"notes.txt", "sub", NULL};
    check_corpus("old corpus after an aborted replace", P("rep"), 50, 6 * S0, S0, VOCAB, SHA, user);

    /* replace=1 and install: new shards, old extra train shards gone, user files kept */
    rc = corpus_open(&w, P("rep"), 1, 30000, sha2, 200, 4096, err, sizeof err);
    CHECK(rc == 0, "replace: corpus_open: %s", err);
    if (rc) return;
    CHECK(write_stream(&w, 0, 200 + 2 * 4096 + 10, 30000, chunks, 1) == 0, "replace write: %s", err);
    CHECK(corpus_close_shards(&w, err, sizeof err) == 0, "replace close: %s", err);
    /* until install, the old corpus is what OUT holds */
    size_t n;
    unsigned char *b = read_all(P("rep/val.bin"), &n);
    CHECK(b && n == n_old && !memcmp(b, old_val, n), "old val.bin intact before install");
    free(b);
    CHECK(fs_exists(P("rep/train_000005.bin")), "old train_000005.bin intact before install");
    CHECK(corpus_install(&w, MANIFEST, err, sizeof err) == 0, "replace install: %s", err);
    check_corpus("replaced corpus", P("rep"), 200, 2 * 4096 + 10, 4096, 30000, sha2, user);
    CHECK(!fs_exists(P("rep/train_000002.bin")) && !fs_exists(P("rep/train_000005.bin")),
          "old train shards 2..5 removed");
    b = read_all(P("rep/notes.txt"), &n);
    CHECK(b && n == 7 && !memcmp(b, "keep me", 7), "notes.txt kept");
    free(b);
    CHECK(fs_exists(P("rep/sub/train_000009.bin")), "a subdirectory's files are not touched");
    free(old_val);
}

int main(void) {
    check_name = "test_corpus";
    if (make_tmpdir("corpus")) return 1;
    for (int i = 0; i < 32; i++) SHA[i] = (uint8_t)(i * 11 + 3);
    test_layout();
    test_large_writes();
    test_close_errors();
    test_open_errors();
    test_existing();
    rm_rf(tmpdir);
    return check_finish();
}
