#include "shard.h"
#include "errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens are mapped and read in place as uint16_t, which is only the file's
 * little-endian layout on a little-endian host. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sinkgate token shards are little-endian and read in place; big-endian hosts are not supported"
#endif

/* Header field offsets (docs/formats.md, "Token shard"). */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_HEADER_BYTES = 12,
    OFF_TOKEN_BYTES = 16,
    OFF_VOCAB = 20,
    OFF_NTOK = 24,
    OFF_SHA = 32,
    OFF_KIND = 64,
    OFF_RESERVED = 68,
};


static const char *kind_name(uint32_t kind) {
    return kind == SHARD_KIND_TRAIN ? "train" : kind == SHARD_KIND_VAL ? "val" : "unknown";
}

void shard_sha_hex(const uint8_t sha[32], char out[65]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[sha[i] >> 4];
        out[2 * i + 1] = hex[sha[i] & 15];
    }
    out[64] = 0;
}

static void build_header(uint8_t h[SHARD_HEADER_BYTES], uint32_t vocab, uint64_t n,
                         const uint8_t sha[32], uint32_t kind) {
    memset(h, 0, SHARD_HEADER_BYTES);
    memcpy(h + OFF_MAGIC, SHARD_MAGIC, 8);
    put_u32le(h + OFF_VERSION, SHARD_VERSION);
    put_u32le(h + OFF_HEADER_BYTES, SHARD_HEADER_BYTES);
    put_u32le(h + OFF_TOKEN_BYTES, 2);
    put_u32le(h + OFF_VOCAB, vocab);
    put_u64le(h + OFF_NTOK, n);
    if (sha) memcpy(h + OFF_SHA, sha, 32);
    put_u32le(h + OFF_KIND, kind);
}

static int check_write_args(const char *path, uint32_t vocab, uint32_t kind, char *err,
                            size_t errlen) {
    if (vocab == 0 || vocab > 65536)
        return sg_fail(err, errlen, "%s: vocab_size %u cannot be stored in a uint16 shard "
                    "(need 1..65536)", path, vocab);
    if (kind != SHARD_KIND_TRAIN && kind != SHARD_KIND_VAL)
        return sg_fail(err, errlen, "%s: shard kind %u is neither 0 (train) nor 1 (val)", path, kind);
    return 0;
}

/* Index of the first token >= vocab, or n if none.  Checks a block's maximum
 * first (a loop the compiler vectorises) and only searches a bad block. */
static uint64_t first_bad_token(const uint16_t *t, uint64_t n, uint32_t vocab) {
    if (vocab > 65535) return n; /* every uint16 is valid */
    const uint64_t B = 1 << 16;
    for (uint64_t b = 0; b < n; b += B) {
        uint64_t e = b + B < n ? b + B : n;
        uint16_t mx = 0;
        for (uint64_t i = b; i < e; i++) mx = t[i] > mx ? t[i] : mx;
        if (mx >= vocab)
            for (uint64_t i = b; i < e; i++)
                if (t[i] >= vocab) return i;
    }
    return n;
}

int shard_write(const char *path, const uint16_t *tokens, uint64_t n, uint32_t vocab_size,
                const uint8_t sha[32], uint32_t kind, char *err, size_t errlen) {
    if (check_write_args(path, vocab_size, kind, err, errlen)) return -1;
    uint64_t bad = first_bad_token(tokens, n, vocab_size);
    if (bad < n)
        return sg_fail(err, errlen, "%s: token %u at position %llu is not below vocab_size %u; "
                    "nothing was written", path, tokens[bad], (unsigned long long)bad, vocab_size);
    uint8_t h[SHARD_HEADER_BYTES];
    build_header(h, vocab_size, n, sha, kind);
    AtomicFile a;
    if (af_open(&a, path, err, errlen)) return -1;
    af_write(&a, h, sizeof h);
    af_write(&a, tokens, (size_t)n * 2);
    return af_commit(&a, err, errlen);
}

int shard_writer_open(ShardWriter *w, const char *path, uint32_t vocab_size,
                      const uint8_t sha[32], uint32_t kind, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (check_write_args(path, vocab_size, kind, err, errlen)) return -1;
    if (af_open(&w->af, path, err, errlen)) return -1;
    w->vocab_size = vocab_size;
    uint8_t h[SHARD_HEADER_BYTES];
    build_header(h, vocab_size, 0, sha, kind); /* n_tokens patched at commit */
    af_write(&w->af, h, sizeof h);
    return 0;
}

int shard_writer_append(ShardWriter *w, const uint16_t *tokens, size_t n) {
    if (w->failed || !w->af.f) return -1;
    uint64_t bad = first_bad_token(tokens, n, w->vocab_size);
    if (bad < n) {
        snprintf(w->bad, sizeof w->bad, "token %u at position %llu is not below vocab_size %u",
                 tokens[bad], (unsigned long long)(w->n_tokens + bad), w->vocab_size);
        w->failed = 1;
        return -1;
    }
    if (af_write(&w->af, tokens, n * 2)) {
        snprintf(w->bad, sizeof w->bad, "write failed: %s", strerror(w->af.write_errno));
        w->failed = 1;
        return -1;
    }
    w->n_tokens += n;
    return 0;
}

int shard_writer_commit(ShardWriter *w, char *err, size_t errlen) {
    if (!w->af.f) return sg_fail(err, errlen, "shard writer is not open");
    if (w->failed) {
        sg_fail(err, errlen, "%s: %s; nothing was written", w->af.path, w->bad);
        shard_writer_abort(w);
        return -1;
    }
    uint8_t n8[8];
    put_u64le(n8, w->n_tokens);
    if (fseek(w->af.f, OFF_NTOK, SEEK_SET) != 0 || fwrite(n8, 1, 8, w->af.f) != 8) {
        int e = errno;
        sg_fail(err, errlen, "%s: cannot patch the token count: %s", w->af.path, strerror(e));
        shard_writer_abort(w);
        return -1;
    }
    return af_commit(&w->af, err, errlen);
}

void shard_writer_abort(ShardWriter *w) { af_abort(&w->af); }

void shard_close(Shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    free(s->path);
    memset(s, 0, sizeof *s);
}

int shard_open(Shard *s, const char *path, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return sg_fail(err, errlen, "%s: no such file", path);
        return sg_fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sg_fail(err, errlen, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < SHARD_HEADER_BYTES) {
        close(fd);
        return sg_fail(err, errlen, "%s: %llu bytes, too short for the %u-byte shard header "
                    "(not a token shard, or truncated); regenerate it", path,
                    (unsigned long long)size, SHARD_HEADER_BYTES);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return sg_fail(err, errlen, "%s: mmap failed: %s", path, strerror(e));
    s->map = map;
    s->map_len = (size_t)size;
    s->path = strdup(path);
    if (!s->path) {
        shard_close(s);
        return sg_fail(err, errlen, "%s: out of memory", path);
    }

    const uint8_t *h = map;
    uint32_t version = get_u32le(h + OFF_VERSION);
    uint32_t hbytes = get_u32le(h + OFF_HEADER_BYTES);
    uint32_t tbytes = get_u32le(h + OFF_TOKEN_BYTES);
    uint32_t vocab = get_u32le(h + OFF_VOCAB);
    uint64_t n = get_u64le(h + OFF_NTOK);
    uint32_t kind = get_u32le(h + OFF_KIND);
    int rc = 0;
    if (memcmp(h + OFF_MAGIC, SHARD_MAGIC, 8) != 0)
        rc = sg_fail(err, errlen, "%s: not a sinkgate token shard (the file does not start with "
                  "\"%s\"); make shards with the sinkgate tokenizer tool", path, SHARD_MAGIC);
    else if (version != SHARD_VERSION)
        rc = sg_fail(err, errlen, "%s: shard format version %u, this build reads %u; regenerate "
                  "the shard or use a matching sinkgate build", path, version, SHARD_VERSION);
    else if (hbytes != SHARD_HEADER_BYTES)
        rc = sg_fail(err, errlen, "%s: header_bytes is %u, expected %u; the header is corrupt",
                  path, hbytes, SHARD_HEADER_BYTES);
    else if (tbytes != 2)
        rc = sg_fail(err, errlen, "%s: token_bytes is %u, this build reads 2-byte (uint16) "
                  "tokens only", path, tbytes);
    else if (vocab == 0 || vocab > 65536)
        rc = sg_fail(err, errlen, "%s: vocab_size %u is not in 1..65536 (uint16 tokens); the "
                  "header is corrupt", path, vocab);
    else if (kind != SHARD_KIND_TRAIN && kind != SHARD_KIND_VAL)
        rc = sg_fail(err, errlen, "%s: kind %u is neither 0 (train) nor 1 (val); the header is "
                  "corrupt", path, kind);
    if (rc) {
        shard_close(s);
        return -1;
    }
    for (uint32_t i = OFF_RESERVED; i < SHARD_HEADER_BYTES; i++)
        if (h[i] != 0) {
            unsigned v = h[i];
            shard_close(s); /* unmaps h */
            return sg_fail(err, errlen, "%s: header byte %u is %u, but bytes %d..%u are reserved "
                        "and must be zero; the header is corrupt", path, i, v, OFF_RESERVED,
                        SHARD_HEADER_BYTES - 1);
        }
    uint64_t payload = size - SHARD_HEADER_BYTES;
    if (n > payload / 2) {
        /* also catches an n so large that 2*n would overflow */
        shard_close(s);
        if (n > (UINT64_MAX - SHARD_HEADER_BYTES) / 2)
            return sg_fail(err, errlen, "%s: header claims %llu tokens, which no file can hold; "
                        "the header is corrupt", path, (unsigned long long)n);
        uint64_t want = SHARD_HEADER_BYTES + 2 * n;
        return sg_fail(err, errlen, "%s: truncated: the header declares %llu tokens (%llu bytes) "
                    "but the file has %llu bytes, %llu missing; regenerate it", path,
                    (unsigned long long)n, (unsigned long long)want, (unsigned long long)size,
                    (unsigned long long)(want - size));
    }
    if (payload != 2 * n) {
        shard_close(s);
        return sg_fail(err, errlen, "%s: %llu unexpected bytes after the %llu tokens the header "
                    "declares (file %llu bytes, expected %llu); the file is corrupt",
                    path, (unsigned long long)(payload - 2 * n), (unsigned long long)n,
                    (unsigned long long)size, (unsigned long long)(SHARD_HEADER_BYTES + 2 * n));
    }
    s->tokens = (const uint16_t *)(h + SHARD_HEADER_BYTES);
    s->n_tokens = n;
    s->vocab_size = vocab;
    s->kind = kind;
    memcpy(s->vocab_sha256, h + OFF_SHA, 32);
    uint64_t bad = first_bad_token(s->tokens, n, vocab);
    if (bad < n) {
        unsigned v = s->tokens[bad];
        shard_close(s);
        return sg_fail(err, errlen, "%s: token %llu has value %u, not below vocab_size %u; the "
                    "shard is corrupt or was made for another vocabulary", path,
                    (unsigned long long)bad, v, vocab);
    }
    return 0;
}

/* ---- data directory ---------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_train_name(const char *name) {
    size_t n = strlen(name);
    return n >= 10 && strncmp(name, "train_", 6) == 0 && strcmp(name + n - 4, ".bin") == 0;
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

void shardset_close(ShardSet *s) {
    shard_close(&s->val);
    for (int i = 0; i < s->n_train; i++) shard_close(&s->train[i]);
    free(s->train);
    free(s->train_prefix);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

/* Checks every shard of a set must pass; `first` is the shard whose
 * vocabulary and tokenizer hash the others are held to. */
static int check_member(const ShardSet *set, const Shard *sh, const Shard *first,
                        uint32_t want_kind, uint32_t expect_vocab, char *err, size_t errlen) {
    if (sh->kind != want_kind)
        return sg_fail(err, errlen, "%s: header says kind %u (%s) but a file named like this must "
                    "hold %s tokens (kind %u); the file was misnamed or written with the wrong kind",
                    sh->path, sh->kind, kind_name(sh->kind), kind_name(want_kind), want_kind);
    if (expect_vocab && sh->vocab_size != expect_vocab)
        return sg_fail(err, errlen, "%s: vocabulary size %u, the model expects %u (vocab_size); "
                    "set vocab_size to %u or use shards made with the model's tokenizer",
                    sh->path, sh->vocab_size, expect_vocab, sh->vocab_size);
    if (first && sh->vocab_size != first->vocab_size)
        return sg_fail(err, errlen, "%s: vocabulary size %u, but %s has %u; all shards of a data "
                    "directory must come from one tokenizer", sh->path, sh->vocab_size,
                    first->path, first->vocab_size);
    if (first && memcmp(sh->vocab_sha256, first->vocab_sha256, 32) != 0) {
        char a[65], b[65];
        shard_sha_hex(sh->vocab_sha256, a);
        shard_sha_hex(first->vocab_sha256, b);
        return sg_fail(err, errlen, "%s and %s were made with different tokenizer vocabularies "
                    "(vocab_sha256 %.16s... vs %.16s...); regenerate them with one tokenizer",
                    sh->path, first->path, a, b);
    }
    uint64_t need = (uint64_t)set->block_size + 1;
    if (sh->n_tokens < need)
        return sg_fail(err, errlen, "%s: %llu tokens, too short for one window of block_size+1 = "
                    "%llu tokens; use a smaller block_size or a longer shard", sh->path,
                    (unsigned long long)sh->n_tokens, (unsigned long long)need);
    return 0;
}

static int open_set(ShardSet *s, const char *dir, uint32_t expect_vocab, int block_size, int with_train, char *err,
                    size_t errlen) {
    memset(s, 0, sizeof *s);
    if (block_size < 1) return sg_fail(err, errlen, "block_size %d: must be at least 1", block_size);
    s->block_size = block_size;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT)
            return sg_fail(err, errlen, "%s: data directory not found; point data at a directory "
                        "holding val.bin%s (made by the tokenizer tool)", dir, with_train ? " and train_*.bin" : "");
        return sg_fail(err, errlen, "%s: cannot read the data directory: %s", dir, strerror(e));
    }
    char **names = NULL;
    int n = 0, cap = 0, has_val = 0, oom = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, "val.bin") == 0) has_val = 1;
        if (!with_train || !is_train_name(de->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *names);
            if (!nn) {
                oom = 1;
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            oom = 1;
            break;
        }
        n++;
    }
    closedir(d);
    int rc = 0;
    char *path = NULL;
    if (oom) {
        rc = sg_fail(err, errlen, "%s: out of memory listing the directory", dir);
        goto done;
    }
    if (!has_val) {
        rc = sg_fail(err, errlen, "%s: no val.bin (the validation shard, kind 1); write one with "
                  "the tokenizer tool", dir);
        goto done;
    }
    if (n == 0 && with_train) {
        rc = sg_fail(err, errlen, "%s: no train_*.bin training shards; write them with the "
                  "tokenizer tool", dir);
        goto done;
    }
    /* Byte order, not locale order: the batch sequence must not depend on LANG. */
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    s->dir = strdup(dir);
    s->train = calloc((size_t)n + 1, sizeof *s->train);
    s->train_prefix = calloc((size_t)n + 1, sizeof *s->train_prefix);
    if (!s->dir || !s->train || !s->train_prefix || !(path = join(dir, "val.bin"))) {
        rc = sg_fail(err, errlen, "%s: out of memory", dir);
        goto done;
    }
    if ((rc = shard_open(&s->val, path, err, errlen))) goto done;
    if ((rc = check_member(s, &s->val, NULL, SHARD_KIND_VAL, expect_vocab, err, errlen)))
        goto done;
    for (int i = 0; i < n; i++) {
        free(path);
        if (!(path = join(dir, names[i]))) {
            rc = sg_fail(err, errlen, "%s: out of memory", dir);
            goto done;
        }
        if ((rc = shard_open(&s->train[i], path, err, errlen))) goto done;
        s->n_train = i + 1;
        if ((rc = check_member(s, &s->train[i], &s->val, SHARD_KIND_TRAIN, expect_vocab, err,
                               errlen)))
            goto done;
        s->train_prefix[i + 1] = s->train_prefix[i] + (s->train[i].n_tokens - (uint64_t)block_size);
    }
    s->train_starts = s->train_prefix[n];
    s->val_starts = s->val.n_tokens - (uint64_t)block_size;
    s->vocab_size = s->val.vocab_size;
    memcpy(s->vocab_sha256, s->val.vocab_sha256, 32);
done:
    free(path);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) shardset_close(s);
    return rc;
}

int shardset_open(ShardSet *s, const char *dir, uint32_t expect_vocab, int block_size, char *err, size_t errlen) {
    return open_set(s, dir, expect_vocab, block_size, 1, err, errlen);
}

int shardset_open_val(ShardSet *s, const char *dir, uint32_t expect_vocab, int block_size, char *err,
                      size_t errlen) {
    return open_set(s, dir, expect_vocab, block_size, 0, err, errlen);
}

void shardset_locate(const ShardSet *s, uint64_t global, int *shard, uint64_t *offset) {
    /* Largest i with prefix[i] <= global: shard i holds that start. */
    int lo = 0, hi = s->n_train - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (s->train_prefix[mid] <= global)
            lo = mid;
        else
            hi = mid - 1;
    }
    *shard = lo;
    *offset = global - s->train_prefix[lo];
}
