/* Data directory writer (see corpus.h). */
#include "corpus.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errmsg.h"

static int is_shard_name(const char *n) {
    return !strcmp(n, "val.bin") || !strcmp(n, "manifest.json") ||
           !fnmatch("train_*.bin", n, FNM_PERIOD);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

int corpus_open(CorpusWriter *w, const char *out, int replace, uint32_t vocab_size,
                const uint8_t sha[32], uint64_t val_tokens, uint64_t shard_tokens, char *err,
                size_t errlen) {
    memset(w, 0, sizeof *w);
    if (vocab_size == 0 || vocab_size > 65536)
        return sg_fail(err, errlen, "a vocabulary of %u tokens does not fit the shards' 16-bit tokens",
                       vocab_size);
    if (val_tokens == 0 || shard_tokens < CORPUS_MIN_SHARD)
        return sg_fail(err, errlen, "val tokens must be >= 1 and shard tokens >= %u", CORPUS_MIN_SHARD);
    if (fs_mkdir_p(out, err, errlen)) return -1;
    DIR *d = opendir(out);
    if (!d) return sg_fail(err, errlen, "%s: cannot open the output directory: %s", out, strerror(errno));
    struct dirent *de;
    int found = 0;
    char first[256] = "";
    while ((de = readdir(d)))
        if (is_shard_name(de->d_name) && !found++) snprintf(first, sizeof first, "%s", de->d_name);
    closedir(d);
    if (found && !replace)
        return sg_fail(err, errlen,
                       "%s already holds a corpus (%s and %d more file(s)); nothing was changed. Pass "
                       "--force to replace it, or choose another --out",
                       out, first, found - 1);
    w->out = strdup(out);
    w->tmp = join(out, ".sgtok-XXXXXX");
    w->buf = malloc(65536 * sizeof *w->buf);
    if (!w->out || !w->tmp || !w->buf) return sg_fail(err, errlen, "out of memory");
    if (!mkdtemp(w->tmp)) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL;
        return sg_fail(err, errlen, "%s: cannot create a working directory: %s", out, strerror(e));
    }
    w->vocab_size = vocab_size;
    memcpy(w->sha, sha, 32);
    w->val_tokens = val_tokens;
    w->shard_tokens = shard_tokens;
    w->replace = replace;
    return 0;
}

static int add_shard(CorpusWriter *w, const char *name, uint32_t kind, uint64_t n) {
    if (w->n_shards == w->cap_shards) {
        size_t c = w->cap_shards ? 2 * w->cap_shards : 16;
        CorpusShard *s = realloc(w->shards, c * sizeof *s);
        if (!s) return -1;
        w->shards = s;
        w->cap_shards = c;
    }
    CorpusShard *s = &w->shards[w->n_shards++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->kind = kind;
    s->tokens = n;
    return 0;
}

/* Append 32-bit ids to a shard as 16-bit tokens. */
static int put(CorpusWriter *w, ShardWriter *s, const uint32_t *t, size_t n, char *err, size_t errlen) {
    while (n) {
        size_t k = n < 65536 ? n : 65536;
        for (size_t i = 0; i < k; i++) {
            if (t[i] >= w->vocab_size)
                return sg_fail(err, errlen, "token %u is outside the vocabulary (%u)", t[i], w->vocab_size);
            w->buf[i] = (uint16_t)t[i];
        }
        if (shard_writer_append(s, w->buf, k)) return sg_fail(err, errlen, "%s", s->bad);
        t += k;
        n -= k;
    }
    return 0;
}

static int open_train(CorpusWriter *w, char *err, size_t errlen) {
    char name[32], *path;
    snprintf(name, sizeof name, "train_%06zu.bin", w->n_shards - (w->val_open ? 0 : 1));
    if (!(path = join(w->tmp, name))) return sg_fail(err, errlen, "out of memory");
    int rc = shard_writer_open(&w->train, path, w->vocab_size, w->sha, SHARD_KIND_TRAIN, err, errlen);
    free(path);
    if (rc) return -1;
    w->train_open = 1;
    w->train_n = 0;
    return 0;
}

static int commit_train(CorpusWriter *w, char *err, size_t errlen) {
    const char *slash = strrchr(w->train.af.path, '/');
    char name[32];
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : w->train.af.path);
    uint64_t n = w->train.n_tokens;
    w->train_open = 0;
    if (shard_writer_commit(&w->train, err, errlen)) return -1;
    return add_shard(w, name, SHARD_KIND_TRAIN, n) ? sg_fail(err, errlen, "out of memory") : 0;
}

int corpus_write(CorpusWriter *w, const uint32_t *t, size_t n, char *err, size_t errlen) {
    w->total += n;
    if (w->val_n < w->val_tokens) {
        if (!w->val_open) {
            char *path = join(w->tmp, "val.bin");
            if (!path) return sg_fail(err, errlen, "out of memory");
            int rc = shard_writer_open(&w->val, path, w->vocab_size, w->sha, SHARD_KIND_VAL, err, errlen);
            free(path);
            if (rc) return -1;
            w->val_open = 1;
        }
        size_t k = w->val_tokens - w->val_n < n ? (size_t)(w->val_tokens - w->val_n) : n;
        if (put(w, &w->val, t, k, err, errlen)) return -1;
        w->val_n += k;
        t += k;
        n -= k;
        if (w->val_n == w->val_tokens) {
            uint64_t vn = w->val.n_tokens;
            w->val_open = 0;
            if (shard_writer_commit(&w->val, err, errlen)) return -1;
            if (add_shard(w, "val.bin", SHARD_KIND_VAL, vn)) return sg_fail(err, errlen, "out of memory");
        }
    }
    while (n) {
        if (!w->train_open && open_train(w, err, errlen)) return -1;
        if (w->train_n < w->shard_tokens) {
            size_t k = w->shard_tokens - w->train_n < n ? (size_t)(w->shard_tokens - w->train_n) : n;
            if (put(w, &w->train, t, k, err, errlen)) return -1;
            w->train_n += k;
            t += k;
            n -= k;
            continue;
        }
        /* The shard is full: hold tokens back until there are enough for
         * the next shard to be a usable one. */
        if (w->pend_n + n > w->pend_cap) {
            size_t c = w->pend_cap ? w->pend_cap : 4096;
            while (c < w->pend_n + n) c *= 2;
            uint16_t *p = realloc(w->pend, c * sizeof *p);
            if (!p) return sg_fail(err, errlen, "out of memory");
            w->pend = p;
            w->pend_cap = c;
        }
        for (size_t i = 0; i < n; i++) {
            if (t[i] >= w->vocab_size)
                return sg_fail(err, errlen, "token %u is outside the vocabulary (%u)", t[i], w->vocab_size);
            w->pend[w->pend_n++] = (uint16_t)t[i];
        }
        n = 0;
        /* Enough held back for a usable shard: start it, and as many full
         * ones as the held-back tokens make. */
        size_t used = 0;
        while (w->pend_n - used >= CORPUS_MIN_SHARD) {
            if (commit_train(w, err, errlen) || open_train(w, err, errlen)) return -1;
            size_t k = w->pend_n - used < w->shard_tokens ? w->pend_n - used : (size_t)w->shard_tokens;
            if (shard_writer_append(&w->train, w->pend + used, k)) return sg_fail(err, errlen, "%s", w->train.bad);
            w->train_n = k;
            used += k;
            if (w->train_n < w->shard_tokens) break;
        }
        memmove(w->pend, w->pend + used, (w->pend_n - used) * sizeof *w->pend);
        w->pend_n -= used;
    }
    return 0;
}

int corpus_close_shards(CorpusWriter *w, char *err, size_t errlen) {
    if (w->val_n < w->val_tokens)
        return sg_fail(err, errlen,
                       "the text makes %llu tokens, fewer than the %llu the validation split takes; "
                       "give more text or lower --val-tokens",
                       (unsigned long long)w->total, (unsigned long long)w->val_tokens);
    if (!w->train_open)
        return sg_fail(err, errlen,
                       "the text makes %llu tokens and all of them went to val.bin; give more text "
                       "or lower --val-tokens",
                       (unsigned long long)w->total);
    if (w->pend_n && shard_writer_append(&w->train, w->pend, w->pend_n))
        return sg_fail(err, errlen, "%s", w->train.bad);
    w->pend_n = 0;
    return commit_train(w, err, errlen);
}

static void remove_tree_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *p = join(dir, de->d_name);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

int corpus_install(CorpusWriter *w, const char *manifest, char *err, size_t errlen) {
    char *mp = join(w->tmp, "manifest.json");
    if (!mp) return sg_fail(err, errlen, "out of memory");
    int rc = fs_write_atomic(mp, manifest, strlen(manifest), err, errlen);
    free(mp);
    if (rc) return -1;
    /* Old train shards that the new corpus does not have go first, so the
     * directory never mixes two corpora's train shards. */
    if (w->replace) {
        DIR *d = opendir(w->out);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (fnmatch("train_*.bin", de->d_name, FNM_PERIOD)) continue;
            int keep = 0;
            for (size_t i = 0; i < w->n_shards; i++) keep |= !strcmp(w->shards[i].name, de->d_name);
            if (keep) continue;
            char *p = join(w->out, de->d_name);
            if (p && unlink(p) && errno != ENOENT) rc = sg_fail(err, errlen, "%s: cannot remove the old shard: %s", p, strerror(errno));
            free(p);
        }
        if (d) closedir(d);
        if (rc) return -1;
    }
    for (size_t i = 0; i <= w->n_shards; i++) {
        const char *name = i < w->n_shards ? w->shards[i].name : "manifest.json";
        char *a = join(w->tmp, name), *b = join(w->out, name);
        if (!a || !b) rc = sg_fail(err, errlen, "out of memory");
        else if (rename(a, b)) rc = sg_fail(err, errlen, "%s: cannot move into place: %s", b, strerror(errno));
        free(a);
        free(b);
        if (rc) return -1;
    }
    rmdir(w->tmp);
    char *probe = join(w->out, "manifest.json");
    rc = probe ? fs_fsync_parent(probe, err, errlen) : sg_fail(err, errlen, "out of memory");
    free(probe);
    free(w->tmp);
    w->tmp = NULL;
    corpus_abort(w);
    return rc;
}

void corpus_abort(CorpusWriter *w) {
    if (w->val_open) shard_writer_abort(&w->val);
    if (w->train_open) shard_writer_abort(&w->train);
    w->val_open = w->train_open = 0;
    if (w->tmp) remove_tree_files(w->tmp);
    free(w->tmp);
    free(w->out);
    free(w->buf);
    free(w->pend);
    free(w->shards);
    w->tmp = w->out = NULL;
    w->buf = w->pend = NULL;
    w->shards = NULL;
}
