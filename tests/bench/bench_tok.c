/* bench_tok: throughput of GPT-2 encoding (src/tokenizer.h), text already
 * in memory: no I/O, no shard writing.  The counterpart in tiktoken is
 * tests/bench/tok_tiktoken.py; tests/bench/run.sh runs both on one corpus.
 *
 *   bench_tok [--vocab FILE] [--reps N] [--threads LIST] [--json FILE] INPUT...
 *
 * Every file of INPUT (files, directories, globs as sgtok takes them) is one
 * document, read whole into memory before anything is timed; empty files
 * are skipped.  Two measurements:
 *   docs   1 thread, each document encoded whole by one TokEncoder
 *          (what tiktoken's encode_ordinary does document by document);
 *   items  T threads: documents cut into ~1 MiB work items at tok_cut_point
 *          exactly as `sgtok prepare` cuts them, OpenMP dynamic schedule,
 *          one TokEncoder per thread (sgtok's pipeline minus I/O), for
 *          each T of --threads (default 1..nproc; above 8 CPUs the powers
 *          of two and nproc).  Scaling efficiency: MB/s at T threads over
 *          T x MB/s of items on 1 thread.
 * Encoders are created fresh for every run (outside the timing), so each
 * run is one cold pass over the corpus, as sgtok makes.  Runs of every
 * configuration are interleaved round by round (noise hits all alike);
 * the table gives the best and the median of --reps runs.  MB = 10^6 bytes
 * of input text.
 *
 * Every run's token stream is checked against the first (untimed, warm-up)
 * pass: same count and same SHA-256 of the ids as little-endian uint32 in
 * order -- the digest tok_tiktoken.py prints for tiktoken's tokens.
 * Exit status 1 if any run differs. */
#include <errno.h>
#include <json-c/json.h>
#include <omp.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "textsrc.h"
#include "tokenizer.h"
#include "bench_util.h"

enum { ITEM_BYTES = 1 << 20, MAX_T = 64 }; /* ITEM_BYTES: as tools/sgtok.c */

typedef struct {
    const uint8_t *p;
    size_t n;
} Doc;

typedef struct {
    uint32_t doc;
    size_t off, len;
} Item;

typedef struct {
    const char *mode; /* "docs" or "items" */
    int threads;
    double *secs;
    int n;
} Config;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double best(const double *v, int n) {
    double b = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < b) b = v[i];
    return b;
}

static void die(const char *fmt, const char *a) {
    fputs("bench_tok: ", stderr);
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    exit(2);
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open", path);
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (len == cap) b = realloc(b, cap *= 2);
        if (!b) die("%s: out of memory", path);
        size_t k = fread(b + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    if (ferror(f)) die("%s: read error", path);
    fclose(f);
    *n = len;
    return b;
}

/* Count and SHA-256 (hex) of the token stream OUT[0..n) in order. */
static uint64_t digest(const TokVec *out, size_t n, char hex[65]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    uint64_t cnt = 0;
    static uint8_t buf[1 << 16];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        cnt += out[i].n;
        for (size_t k = 0; k < out[i].n; k++) { /* little-endian whatever the host */
            uint32_t x = out[i].v[k];
            buf[m] = (uint8_t)x;
            buf[m + 1] = (uint8_t)(x >> 8);
            buf[m + 2] = (uint8_t)(x >> 16);
            buf[m + 3] = (uint8_t)(x >> 24);
            if ((m += 4) == sizeof buf) {
                EVP_DigestUpdate(c, buf, m);
                m = 0;
            }
        }
    }
    EVP_DigestUpdate(c, buf, m);
    unsigned char md[32];
    unsigned int len;
    EVP_DigestFinal_ex(c, md, &len);
    EVP_MD_CTX_free(c);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return cnt;
}

/* One pass; returns seconds.  docs mode: OUT has a vector per document;
 * items mode: per item. */
static double run(const Tokenizer *t, const Config *c, const Doc *docs, size_t n_docs,
                  const Item *items, size_t n_items, TokVec *out) {
    TokEncoder *enc[MAX_T];
    char err[256];
    for (int i = 0; i < c->threads; i++)
        if (!(enc[i] = tok_encoder_new(t, err, sizeof err))) die("%s", err);
    int failed = 0;
    double t0 = now();
    if (!strcmp(c->mode, "docs")) {
        for (size_t d = 0; d < n_docs; d++) {
            out[d].n = 0;
            if (tok_encode(enc[0], docs[d].p, docs[d].n, &out[d])) failed = 1;
        }
    } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(c->threads) reduction(| : failed)
        for (size_t i = 0; i < n_items; i++) {
            TokVec *o = &out[i];
            o->n = 0;
            if (tok_encode(enc[omp_get_thread_num()], docs[items[i].doc].p + items[i].off,
                           items[i].len, o))
                failed = 1;
        }
    }
    double el = now() - t0;
    if (failed) die("%s", "out of memory while encoding");
    for (int i = 0; i < c->threads; i++) tok_encoder_free(enc[i]);
    return el;
}

static int parse_threads(const char *s, int *v, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > MAX_T || n == max) return -1;
        v[n++] = (int)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *vocab = "data/vocab/gpt2.tiktoken", *json = NULL, *threads_arg = NULL;
    int reps = 3;
    char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (f[0] != '-') {
            inputs[n_inputs++] = argv[i];
            continue;
        }
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            puts("usage: bench_tok [--vocab FILE] [--reps N] [--threads 1,2,...] [--json FILE] INPUT...");
            return 0;
        }
        if (i + 1 >= argc) die("%s needs a value", f);
        const char *v = argv[++i];
        if (!strcmp(f, "--vocab")) vocab = v;
        else if (!strcmp(f, "--json")) json = v;
        else if (!strcmp(f, "--threads")) threads_arg = v;
        else if (!strcmp(f, "--reps")) {
            reps = atoi(v);
            if (reps < 1) die("--reps: expected an integer >= 1, got \"%s\"", v);
        } else
            die("unknown option %s", f);
    }
    if (!n_inputs) die("%s", "no INPUT (files or directories of text); see --help");

    /* Thread counts: 1..nproc, or powers of two and nproc above 8 cores. */
    int tl[MAX_T], ntl = 0, np = omp_get_num_procs();
    if (np > MAX_T) np = MAX_T;
    if (threads_arg) {
        if ((ntl = parse_threads(threads_arg, tl, MAX_T)) <= 0)
            die("--threads: expected a list like 1,2,4 (each 1..64), got \"%s\"", threads_arg);
    } else
        for (int t = 1; t <= np; t++)
            if (np <= 8 || (t & (t - 1)) == 0 || t == np) tl[ntl++] = t;

    char err[1024];
    Tokenizer *tk = tok_load_tiktoken(vocab, err, sizeof err);
    if (!tk) die("%s", err);
    PathList files;
    if (textsrc_expand(inputs, n_inputs, &files, err, sizeof err)) die("%s", err);

    Doc *docs = calloc(files.n, sizeof *docs);
    size_t n_docs = 0, bytes = 0;
    for (size_t f = 0; f < files.n; f++) {
        size_t n;
        uint8_t *p = read_file(files.v[f], &n);
        if (!n) {
            free(p);
            continue;
        }
        docs[n_docs++] = (Doc){p, n};
        bytes += n;
    }
    if (!n_docs) die("%s", "every input file is empty");
    /* Work items as sgtok prepare makes them with --split file. */
    size_t n_items = 0, cap_items = 1024, max_item = 0;
    Item *items = malloc(cap_items * sizeof *items);
    for (size_t d = 0; d < n_docs; d++) {
        const uint8_t *p = docs[d].p;
        size_t n = docs[d].n;
        for (size_t pos = 0; pos < n;) {
            size_t cut = n - pos > 2 * ITEM_BYTES ? tok_cut_point(p, n, pos + ITEM_BYTES) : n;
            if (n_items == cap_items) items = realloc(items, (cap_items *= 2) * sizeof *items);
            if (!items) die("%s", "out of memory");
            items[n_items++] = (Item){(uint32_t)d, pos, cut - pos};
            if (cut - pos > max_item) max_item = cut - pos;
            pos = cut;
        }
    }
    TokVec *out_docs = calloc(n_docs, sizeof *out_docs), *out_items = calloc(n_items, sizeof *out_items);

    int ncfg = 1 + ntl;
    Config *cfg = calloc((size_t)ncfg, sizeof *cfg);
    cfg[0] = (Config){"docs", 1, calloc((size_t)reps, sizeof(double)), 0};
    for (int i = 0; i < ntl; i++) cfg[1 + i] = (Config){"items", tl[i], calloc((size_t)reps, sizeof(double)), 0};

    /* Warm-up: page the text in, fault the output vectors in, and the
     * reference token stream. */
    double wu = run(tk, &cfg[0], docs, n_docs, items, n_items, out_docs);
    char ref[65], hex[65];
    uint64_t tokens = digest(out_docs, n_docs, ref);
    run(tk, &cfg[ncfg - 1], docs, n_docs, items, n_items, out_items);

    printf("bench_tok: %zu documents (%zu files), %.2f MB, %zu work items (largest %.2f MB), "
           "%d rep(s), %d CPU(s)\n",
           n_docs, files.n, (double)bytes / 1e6, n_items, (double)max_item / 1e6, reps,
           omp_get_num_procs());
    printf("tokens %llu  bytes/token %.3f  sha256(ids) %s  (warm-up %.2f s)\n",
           (unsigned long long)tokens, (double)bytes / (double)tokens, ref, wu);
    fflush(stdout);

    int bad = 0;
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < ncfg; c++) {
            int is_docs = !strcmp(cfg[c].mode, "docs");
            TokVec *out = is_docs ? out_docs : out_items;
            double s = run(tk, &cfg[c], docs, n_docs, items, n_items, out);
            uint64_t cnt = digest(out, is_docs ? n_docs : n_items, hex);
            if (cnt != tokens || strcmp(hex, ref)) {
                fprintf(stderr,
                        "bench_tok: MISMATCH: %s on %d thread(s) gave %llu tokens sha256 %s, "
                        "expected %llu %s\n",
                        cfg[c].mode, cfg[c].threads, (unsigned long long)cnt, hex,
                        (unsigned long long)tokens, ref);
                bad = 1;
            }
            cfg[c].secs[cfg[c].n++] = s;
        }

    double mb = (double)bytes / 1e6, base = 0;
    printf("%-6s %7s %10s %10s %10s %9s %6s\n", "mode", "threads", "best MB/s", "med MB/s",
           "Mtok/s", "scaling", "runs");
    json_object *jr = json_object_new_array();
    for (int c = 0; c < ncfg; c++) {
        double b = best(cfg[c].secs, cfg[c].n), m = bench_median(cfg[c].secs, cfg[c].n);
        int is_items = !strcmp(cfg[c].mode, "items");
        if (is_items && cfg[c].threads == 1) base = mb / b;
        /* scaling efficiency: best MB/s over (threads x items on 1 thread) */
        double eff = is_items && base > 0 ? mb / b / (base * cfg[c].threads) : 0;
        char effs[16] = "";
        if (eff > 0) snprintf(effs, sizeof effs, "%.0f%%", 100 * eff);
        printf("%-6s %7d %10.2f %10.2f %10.3f %9s %6d\n", cfg[c].mode, cfg[c].threads, mb / b,
               mb / m, (double)tokens / 1e6 / b, effs, cfg[c].n);
        json_object *o = json_object_new_object(), *ts = json_object_new_array();
        json_object_object_add(o, "mode", json_object_new_string(cfg[c].mode));
        json_object_object_add(o, "threads", json_object_new_int(cfg[c].threads));
        json_object_object_add(o, "best_mb_s", json_object_new_double(mb / b));
        json_object_object_add(o, "median_mb_s", json_object_new_double(mb / m));
        json_object_object_add(o, "best_mtok_s", json_object_new_double((double)tokens / 1e6 / b));
        if (eff > 0) json_object_object_add(o, "scaling_efficiency", json_object_new_double(eff));
        for (int i = 0; i < cfg[c].n; i++) json_object_array_add(ts, json_object_new_double(cfg[c].secs[i]));
        json_object_object_add(o, "seconds", ts);
        json_object_array_add(jr, o);
    }
    if (bad) printf("MISMATCH: some runs gave another token stream (see stderr)\n");
    if (json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "impl", json_object_new_string("sinkgate"));
        json_object_object_add(j, "cpus", json_object_new_int(omp_get_num_procs()));
        json_object_object_add(j, "files", json_object_new_int64((int64_t)files.n));
        json_object_object_add(j, "documents", json_object_new_int64((int64_t)n_docs));
        json_object_object_add(j, "items", json_object_new_int64((int64_t)n_items));
        json_object_object_add(j, "bytes", json_object_new_int64((int64_t)bytes));
        json_object_object_add(j, "tokens", json_object_new_int64((int64_t)tokens));
        json_object_object_add(j, "bytes_per_token", json_object_new_double((double)bytes / (double)tokens));
        json_object_object_add(j, "sha256_ids", json_object_new_string(ref));
        json_object_object_add(j, "reps", json_object_new_int(reps));
        json_object_object_add(j, "consistent", json_object_new_boolean(!bad));
        json_object_object_add(j, "runs", jr);
        if (json_object_to_file_ext(json, j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)) {
            fprintf(stderr, "bench_tok: %s: cannot write: %s\n", json, strerror(errno));
            bad = 1;
        }
        json_object_put(j);
    } else
        json_object_put(jr);

    for (size_t d = 0; d < n_docs; d++) {
        free((void *)docs[d].p);
        tokvec_free(&out_docs[d]);
    }
    for (size_t i = 0; i < n_items; i++) tokvec_free(&out_items[i]);
    for (int c = 0; c < ncfg; c++) free(cfg[c].secs);
    free(cfg);
    free(out_docs);
    free(out_items);
    free(items);
    free(docs);
    free(inputs);
    pathlist_free(&files);
    tok_free(tk);
    return bad;
}
