/* sgsynth: a data directory of synthetic token shards, for tests and for
 * trying sgtrain before real text is tokenized.
 *
 * The stream has structure a small model can learn, so that a falling loss
 * means something: token frequencies are heavy-tailed like a real
 * vocabulary's (log-uniform: P(t <= x) = log x / log V), each token has four
 * preferred successors drawn that way (an order-1 Markov chain with
 * probabilities 0.5, 0.25, 0.15, 0.1), and with
 * probability 0.3 a document re-plays a span of 8 tokens it has already
 * produced (which only attention can predict).  Documents are separated by
 * token 0, as <|endoftext|> separates real documents.
 *
 *   sgsynth --out DIR [--vocab 512] [--val-tokens 20000] [--train-tokens 200000]
 *           [--shard-tokens 100000] [--seed 0]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "rng.h"
#include "shard.h"

typedef struct {
    uint64_t key, i;
    uint32_t vocab;
    uint16_t prev;
    uint16_t hist[4096];
    int hlen, replay, rpos;
} Gen;

static double uni(Gen *g) { return rng_uniform(g->key, g->i++); }

static uint16_t next_token(Gen *g) {
    if (g->replay > 0) {
        g->replay--;
        return g->hist[g->rpos++ % 4096];
    }
    double u = uni(g);
    if (g->hlen > 64 && u < 0.3 / 8) { /* start a replay of an earlier span */
        int back = 16 + (int)(uni(g) * (g->hlen < 4000 ? g->hlen - 16 : 3984));
        g->rpos = g->hlen - back;
        g->replay = 8;
        return next_token(g);
    }
    if (uni(g) < 0.002) { /* end of document */
        g->hlen = 0;
        return 0;
    }
    double r = uni(g);
    int k = r < 0.5 ? 0 : r < 0.75 ? 1 : r < 0.9 ? 2 : 3;
    uint64_t h = rng_key(g->key ^ 0x5eed, g->prev, (uint64_t)k);
    double w = (double)(h >> 11) * 0x1.0p-53; /* [0, 1) */
    uint32_t t = (uint32_t)pow((double)(g->vocab - 1), w); /* 1 .. vocab-1, log-uniform */
    return (uint16_t)(t < 1 ? 1 : t > g->vocab - 1 ? g->vocab - 1 : t);
}

static uint16_t emit(Gen *g) {
    uint16_t t = next_token(g);
    g->prev = t;
    if (t != 0) g->hist[g->hlen++ % 4096] = t;
    return t;
}

static int write_stream(Gen *g, const char *path, uint64_t n, uint32_t kind) {
    uint16_t *buf = malloc(sizeof(uint16_t) * n);
    if (!buf) {
        fprintf(stderr, "sgsynth: out of memory\n");
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) buf[i] = emit(g);
    uint8_t sha[32] = {0};
    char err[512];
    int rc = shard_write(path, buf, n, g->vocab, sha, kind, err, sizeof err);
    if (rc) fprintf(stderr, "sgsynth: %s\n", err);
    free(buf);
    return rc;
}

static int parse_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') {
        fprintf(stderr, "sgsynth: %s expects a non-negative integer, got '%s'\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    const char *out = NULL;
    uint64_t vocab = 512, val = 20000, train = 200000, per = 100000, seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help")) {
            printf("usage: sgsynth --out DIR [--vocab N] [--val-tokens N] [--train-tokens N] "
                   "[--shard-tokens N] [--seed N]\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sgsynth: %s needs a value\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(f, "--out")) out = v;
        else if (!strcmp(f, "--vocab")) bad = parse_u64(f, v, &vocab);
        else if (!strcmp(f, "--val-tokens")) bad = parse_u64(f, v, &val);
        else if (!strcmp(f, "--train-tokens")) bad = parse_u64(f, v, &train);
        else if (!strcmp(f, "--shard-tokens")) bad = parse_u64(f, v, &per);
        else if (!strcmp(f, "--seed")) bad = parse_u64(f, v, &seed);
        else {
            fprintf(stderr, "sgsynth: unknown flag '%s'\n", f);
            return 2;
        }
        if (bad) return 2;
    }
    if (!out || vocab < 8 || vocab > 65536 || per == 0 || val == 0 || train == 0) {
        fprintf(stderr, "sgsynth: need --out DIR, 8 <= vocab <= 65536 and positive token counts\n");
        return 2;
    }
    char err[512], path[4096];
    if (fs_mkdir_p(out, err, sizeof err)) {
        fprintf(stderr, "sgsynth: %s\n", err);
        return 1;
    }
    Gen *g = calloc(1, sizeof *g);
    g->key = rng_key(seed, 0x5717, 0);
    g->vocab = (uint32_t)vocab;
    snprintf(path, sizeof path, "%s/val.bin", out);
    int rc = write_stream(g, path, val, SHARD_KIND_VAL);
    for (uint64_t s = 0, done = 0; !rc && done < train; s++) {
        uint64_t n = train - done < per ? train - done : per;
        snprintf(path, sizeof path, "%s/train_%03llu.bin", out, (unsigned long long)s);
        rc = write_stream(g, path, n, SHARD_KIND_TRAIN);
        done += n;
    }
    free(g);
    return rc ? 1 : 0;
}
