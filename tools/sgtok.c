/* sgtok: GPT-2's tokenizer (token for token tiktoken's "gpt2") and the
 * corpus writer that turns text into sgtrain's shards.
 *
 *   sgtok prepare [vocab] --out DIR [options] INPUT...   text -> val.bin, train_*.bin, manifest.json
 *   sgtok encode  [vocab] [options] [INPUT...]           token ids, one document per line
 *   sgtok decode  [vocab] [--from N] [--count N] SHARD|-  tokens -> text
 *   sgtok info    [vocab]                                the vocabulary's size, end-of-text id, SHA-256
 *
 * Output is identical for any --threads: documents are cut into work items
 * in input order, items are encoded in parallel, and their tokens are
 * written in item order.  Run `sgtok --help` for every option. */
#include <errno.h>
#include <json-c/json.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "corpus.h"
#include "shard.h"
#include "textsrc.h"
#include "tokenizer.h"

static const char USAGE[] =
    "usage: sgtok COMMAND [options] [INPUT...]\n"
    "commands:\n"
    "  prepare  tokenize INPUTs into a data directory: val.bin (the first --val-tokens tokens),\n"
    "           train_000000.bin, ... and manifest.json; <|endoftext|> precedes every document\n"
    "  encode   print each document's token ids on a line (stdin when no INPUT)\n"
    "  decode   print the text of a shard's tokens, or of ids read from stdin (-)\n"
    "  info     print the vocabulary's size, end-of-text id and SHA-256\n"
    "vocabulary (default data/vocab/gpt2.tiktoken, as `make data` fetches it):\n"
    "  --vocab FILE             tiktoken format (BASE64 RANK lines)\n"
    "  --encoder-json F --vocab-bpe F   GPT-2's original two files\n"
    "  --vocab-sha256 HEX|any   expected SHA-256 of the vocabulary (default: GPT-2's "
    "306cd27f...); any accepts another vocabulary\n"
    "inputs (prepare, encode): files, directories (recursive, in byte order of names), globs;\n"
    "  *.gz is decompressed\n"
    "  --format auto|text|jsonl  auto: *.jsonl[.gz] is JSONL, the rest text (default auto)\n"
    "  --text-field NAME        JSONL field holding the document (default text)\n"
    "  --split file|line|para   documents in a text file: the whole file (default), each line,\n"
    "                           blocks between empty lines\n"
    "  --sep STRING             documents separated by STRING (e.g. '<|endoftext|>'), trimmed\n"
    "prepare:\n"
    "  --out DIR                the data directory (created if missing)\n"
    "  --val-tokens N           tokens in val.bin (default 5200000)\n"
    "  --shard-tokens N         tokens per train shard (default 100000000)\n"
    "  --threads N              encoding threads (default: all cores)\n"
    "  --force                  replace the shards DIR already holds\n"
    "  --quiet                  no progress bar\n"
    "encode:  --eot   put <|endoftext|> before each document as prepare does\n"
    "decode:  --from N --count N   a range of the shard's tokens\n"
    "exit status: 0 done, 1 failed while writing, 2 bad input (nothing written)\n";

typedef struct {
    const char *cmd, *vocab, *enc_json, *vocab_bpe, *sha, *out;
    TextOpts topt;
    uint64_t val_tokens, shard_tokens, from, count;
    int threads, force, quiet, eot;
    char **inputs;
    int n_inputs;
} Args;

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sgtok: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

static int parse_u64(const char *flag, const char *s, uint64_t lo, uint64_t *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || x < lo) {
        die(2, "%s: expected an integer >= %llu, got \"%s\"", flag, (unsigned long long)lo, s);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->val_tokens = 5200000;
    a->shard_tokens = 100000000;
    a->count = UINT64_MAX;
    a->topt.format = TEXT_AUTO;
    a->topt.split = SPLIT_FILE;
    a->topt.text_field = "text";
    a->cmd = argv[1];
    a->inputs = calloc((size_t)argc, sizeof *a->inputs);
    if (!a->inputs) return die(1, "out of memory"), -1;
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        if (f[0] != '-' || !strcmp(f, "-")) {
            a->inputs[a->n_inputs++] = argv[i];
            continue;
        }
        if (!strcmp(f, "--")) {
            while (++i < argc) a->inputs[a->n_inputs++] = argv[i];
            break;
        }
        int flag_only = !strcmp(f, "--force") || !strcmp(f, "--quiet") || !strcmp(f, "--eot");
        if (flag_only) {
            if (!strcmp(f, "--force")) a->force = 1;
            else if (!strcmp(f, "--quiet")) a->quiet = 1;
            else a->eot = 1;
            continue;
        }
        static const char *valued[] = {"--vocab", "--encoder-json", "--vocab-bpe", "--vocab-sha256",
                                       "--out", "--text-field", "--sep", "--format", "--split",
                                       "--val-tokens", "--shard-tokens", "--from", "--count",
                                       "--threads"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(f, valued[k]);
        if (!known) return die(2, "unknown option %s (see sgtok --help)", f), -1;
        if (i + 1 >= argc) return die(2, "%s needs a value (see sgtok --help)", f), -1;
        const char *v = argv[++i];
        uint64_t u;
        if (!strcmp(f, "--vocab")) a->vocab = v;
        else if (!strcmp(f, "--encoder-json")) a->enc_json = v;
        else if (!strcmp(f, "--vocab-bpe")) a->vocab_bpe = v;
        else if (!strcmp(f, "--vocab-sha256")) a->sha = v;
        else if (!strcmp(f, "--out")) a->out = v;
        else if (!strcmp(f, "--text-field")) a->topt.text_field = v;
        else if (!strcmp(f, "--sep")) {
            if (!*v) return die(2, "--sep: the separator is empty"), -1;
            a->topt.sep = v;
            a->topt.split = SPLIT_SEP;
        } else if (!strcmp(f, "--format")) {
            if (!strcmp(v, "auto")) a->topt.format = TEXT_AUTO;
            else if (!strcmp(v, "text")) a->topt.format = TEXT_PLAIN;
            else if (!strcmp(v, "jsonl")) a->topt.format = TEXT_JSONL;
            else return die(2, "--format: expected auto, text or jsonl, got \"%s\"", v), -1;
        } else if (!strcmp(f, "--split")) {
            if (a->topt.sep) return die(2, "--split and --sep both name how to split documents"), -1;
            if (!strcmp(v, "file")) a->topt.split = SPLIT_FILE;
            else if (!strcmp(v, "line")) a->topt.split = SPLIT_LINE;
            else if (!strcmp(v, "para")) a->topt.split = SPLIT_PARA;
            else return die(2, "--split: expected file, line or para, got \"%s\"", v), -1;
        } else if (!strcmp(f, "--val-tokens")) {
            if (parse_u64(f, v, 1, &a->val_tokens)) return -1;
        } else if (!strcmp(f, "--shard-tokens")) {
            if (parse_u64(f, v, CORPUS_MIN_SHARD, &a->shard_tokens)) return -1;
        } else if (!strcmp(f, "--from")) {
            if (parse_u64(f, v, 0, &a->from)) return -1;
        } else if (!strcmp(f, "--count")) {
            if (parse_u64(f, v, 0, &a->count)) return -1;
        } else if (!strcmp(f, "--threads")) {
            if (parse_u64(f, v, 1, &u)) return -1;
            if (u > 1024) return die(2, "--threads: %llu is more than 1024", (unsigned long long)u), -1;
            a->threads = (int)u;
        }
    }
    if ((a->enc_json != NULL) != (a->vocab_bpe != NULL))
        return die(2, "--encoder-json and --vocab-bpe go together"), -1;
    if (a->vocab && a->enc_json) return die(2, "give --vocab or --encoder-json/--vocab-bpe, not both"), -1;
    return 0;
}

static Tokenizer *load_vocab(const Args *a) {
    char err[512];
    Tokenizer *t;
    const char *what;
    if (a->enc_json) {
        t = tok_load_gpt2_files(a->enc_json, a->vocab_bpe, err, sizeof err);
        what = a->enc_json;
    } else {
        const char *v = a->vocab ? a->vocab : getenv("SG_VOCAB");
        if (!v) v = "data/vocab/gpt2.tiktoken";
        if (!a->vocab && access(v, F_OK)) {
            die(2, "no vocabulary: pass --vocab FILE (`make data` fetches GPT-2's to %s)", v);
            return NULL;
        }
        t = tok_load_tiktoken(v, err, sizeof err);
        what = v;
    }
    if (!t) {
        die(2, "%s", err);
        return NULL;
    }
    char hex[65];
    tok_sha256_hex(t, hex);
    const char *want = a->sha ? a->sha : TOK_GPT2_SHA256;
    if (strcmp(want, "any") && strcasecmp(want, hex)) {
        die(2,
            "%s: the vocabulary's SHA-256 is %s, expected %s%s: the file is corrupt or a "
            "different vocabulary (fetch it again with `make data`, or pass --vocab-sha256 any "
            "to use it anyway)",
            what, hex, want, a->sha ? "" : " (GPT-2's)");
        tok_free(t);
        return NULL;
    }
    return t;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile sig_atomic_t interrupted;
static void on_signal(int s) { interrupted = s; }

/* ---- prepare -------------------------------------------------------------- */

/* A work item: consecutive text segments of one file, encoded by one
 * thread.  A segment is a document or a part of a long one cut at
 * tok_cut_point; <|endoftext|> goes before a segment that starts a document. */
typedef struct {
    size_t off, len;
    int starts_doc;
} Seg;
typedef struct {
    size_t seg0, seg1;
    uint32_t file;
    size_t bytes;
} Item;

enum { ITEM_BYTES = 1 << 20 };

typedef struct {
    ByteBuf text;
    Seg *segs;
    size_t n_segs, cap_segs;
    Item *items;
    size_t n_items, cap_items;
    TokVec *out; /* per item */
    size_t cap_out;
} Batch;

typedef struct {
    uint64_t bytes, text_bytes, docs, tokens;
} FileStat;

static int batch_add(Batch *b, uint32_t file, const uint8_t *p, size_t n, int starts_doc) {
    if (b->n_segs == b->cap_segs) {
        size_t c = b->cap_segs ? 2 * b->cap_segs : 1024;
        Seg *s = realloc(b->segs, c * sizeof *s);
        if (!s) return -1;
        b->segs = s;
        b->cap_segs = c;
    }
    Item *it = b->n_items ? &b->items[b->n_items - 1] : NULL;
    if (!it || it->file != file || it->bytes >= ITEM_BYTES) {
        if (b->n_items == b->cap_items) {
            size_t c = b->cap_items ? 2 * b->cap_items : 256;
            Item *x = realloc(b->items, c * sizeof *x);
            if (!x) return -1;
            b->items = x;
            b->cap_items = c;
        }
        it = &b->items[b->n_items++];
        it->seg0 = it->seg1 = b->n_segs;
        it->file = file;
        it->bytes = 0;
    }
    b->segs[b->n_segs++] = (Seg){b->text.n, n, starts_doc};
    it->seg1 = b->n_segs;
    it->bytes += n;
    return bytebuf_append(&b->text, p, n);
}

typedef struct {
    const Args *a;
    PathList files;
    FileStat *stat;
    uint64_t total_in, done_in; /* input bytes as stored (compressed for .gz) */
    uint64_t tokens, docs, text_bytes;
    double t0, last_bar;
    int tty;
} Prep;

static void bar(Prep *p, uint64_t in_now, int final) {
    if (!p->tty) return;
    double t = now();
    if (!final && t - p->last_bar < 0.2) return;
    p->last_bar = t;
    double el = t - p->t0, frac = p->total_in ? (double)in_now / (double)p->total_in : 1;
    if (frac > 1) frac = 1;
    enum { W = 24 };
    char b[W + 1];
    for (int i = 0; i < W; i++) b[i] = i < (int)(frac * W) ? '#' : '.';
    b[W] = 0;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    fprintf(stderr, "\r[%s] %.1f/%.1f MB  %.1f MB/s  %.2fM tokens  eta %.0fs\033[K", b,
            (double)in_now / 1e6, (double)p->total_in / 1e6,
            el > 0 ? (double)p->text_bytes / 1e6 / el : 0, (double)p->tokens / 1e6,
            final ? 0 : eta);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static char *manifest_json(const Prep *p, const Tokenizer *t, const CorpusWriter *w, const char *vocab) {
    json_object *m = json_object_new_object(), *tk = json_object_new_object(),
                *opt = json_object_new_object(), *tot = json_object_new_object(),
                *src = json_object_new_array(), *sh = json_object_new_array();
    char hex[65];
    tok_sha256_hex(t, hex);
    json_object_object_add(m, "format", json_object_new_string("sinkgate-corpus"));
    json_object_object_add(m, "version", json_object_new_int(1));
    json_object_object_add(tk, "vocab", json_object_new_string(vocab));
    json_object_object_add(tk, "vocab_sha256", json_object_new_string(hex));
    json_object_object_add(tk, "vocab_size", json_object_new_int64(tok_vocab_size(t)));
    json_object_object_add(tk, "eot", json_object_new_int64(tok_eot(t)));
    json_object_object_add(tk, "encoding", json_object_new_string("gpt2 (tiktoken r50k_base pattern and merges)"));
    json_object_object_add(m, "tokenizer", tk);
    const TextOpts *o = &p->a->topt;
    static const char *fmts[] = {"auto", "text", "jsonl"}, *splits[] = {"file", "line", "para", "sep"};
    json_object_object_add(opt, "format", json_object_new_string(fmts[o->format]));
    json_object_object_add(opt, "split", json_object_new_string(splits[o->split]));
    if (o->sep) json_object_object_add(opt, "sep", json_object_new_string(o->sep));
    json_object_object_add(opt, "text_field", json_object_new_string(o->text_field));
    json_object_object_add(opt, "val_tokens", json_object_new_int64((int64_t)p->a->val_tokens));
    json_object_object_add(opt, "shard_tokens", json_object_new_int64((int64_t)p->a->shard_tokens));
    json_object_object_add(opt, "eot_before_each_document", json_object_new_boolean(1));
    json_object_object_add(m, "options", opt);
    json_object_object_add(tot, "files", json_object_new_int64((int64_t)p->files.n));
    json_object_object_add(tot, "documents", json_object_new_int64((int64_t)p->docs));
    json_object_object_add(tot, "text_bytes", json_object_new_int64((int64_t)p->text_bytes));
    json_object_object_add(tot, "tokens", json_object_new_int64((int64_t)p->tokens));
    json_object_object_add(tot, "bytes_per_token",
                           json_object_new_double(p->tokens ? (double)p->text_bytes / (double)p->tokens : 0));
    json_object_object_add(m, "totals", tot);
    for (size_t i = 0; i < p->files.n; i++) {
        json_object *f = json_object_new_object();
        json_object_object_add(f, "path", json_object_new_string(p->files.v[i]));
        json_object_object_add(f, "bytes", json_object_new_int64((int64_t)p->stat[i].bytes));
        json_object_object_add(f, "documents", json_object_new_int64((int64_t)p->stat[i].docs));
        json_object_object_add(f, "text_bytes", json_object_new_int64((int64_t)p->stat[i].text_bytes));
        json_object_object_add(f, "tokens", json_object_new_int64((int64_t)p->stat[i].tokens));
        json_object_array_add(src, f);
    }
    json_object_object_add(m, "sources", src);
    for (size_t i = 0; i < w->n_shards; i++) {
        json_object *f = json_object_new_object();
        json_object_object_add(f, "file", json_object_new_string(w->shards[i].name));
        json_object_object_add(f, "kind", json_object_new_string(w->shards[i].kind == SHARD_KIND_VAL ? "val" : "train"));
        json_object_object_add(f, "tokens", json_object_new_int64((int64_t)w->shards[i].tokens));
        json_object_array_add(sh, f);
    }
    json_object_object_add(m, "shards", sh);
    const char *s = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *r = malloc(n + 2);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\n';
        r[n + 1] = 0;
    }
    json_object_put(m);
    return r;
}

/* Encode every item of the batch (in parallel), then hand the tokens to
 * the writer in item order. */
static int flush_batch(Prep *p, Batch *b, TokEncoder **enc, int nt, uint32_t eot, CorpusWriter *w,
                       char *err, size_t errlen) {
    if (b->cap_out < b->n_items) {
        TokVec *o = realloc(b->out, b->n_items * sizeof *o);
        if (!o) return snprintf(err, errlen, "out of memory"), -1;
        memset(o + b->cap_out, 0, (b->n_items - b->cap_out) * sizeof *o);
        b->out = o;
        b->cap_out = b->n_items;
    }
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(| : failed)
    for (size_t i = 0; i < b->n_items; i++) {
        TokEncoder *e = enc[omp_get_thread_num()];
        TokVec *o = &b->out[i];
        o->n = 0;
        for (size_t s = b->items[i].seg0; s < b->items[i].seg1; s++) {
            const Seg *g = &b->segs[s];
            if (g->starts_doc && tokvec_push(o, eot)) failed = 1;
            if (tok_encode(e, b->text.p + g->off, g->len, o)) failed = 1;
        }
    }
    if (failed) return snprintf(err, errlen, "out of memory while encoding"), -1;
    for (size_t i = 0; i < b->n_items; i++) {
        if (corpus_write(w, b->out[i].v, b->out[i].n, err, errlen)) return -1;
        p->stat[b->items[i].file].tokens += b->out[i].n;
        p->tokens += b->out[i].n;
    }
    b->text.n = b->n_segs = b->n_items = 0;
    return 0;
}

/* Reading overlaps encoding: a reader thread fills one batch while the
 * encoder threads work on the other (decompression and JSON parsing are
 * serial, and would otherwise stall every encoder). */
typedef struct {
    Batch b[2];
    int full[2], last[2];
    uint64_t in_pos[2], text_pos[2]; /* progress when the batch was published */
    int err_code;                    /* reader failure, with the last batch */
    char err[1024];
    atomic_int stop;                 /* the main thread gave up */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Prep *p;
    size_t batch_bytes;
} Pipe;

static void publish(Pipe *q, int slot, int last, uint64_t in_pos, int code, const char *msg) {
    pthread_mutex_lock(&q->mu);
    q->full[slot] = 1;
    q->last[slot] = last;
    q->in_pos[slot] = in_pos;
    q->text_pos[slot] = q->p->text_bytes;
    if (code) {
        q->err_code = code;
        snprintf(q->err, sizeof q->err, "%s", msg);
    }
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* Wait until SLOT is free to fill; 0 if the main thread stopped. */
static int acquire(Pipe *q, int slot) {
    pthread_mutex_lock(&q->mu);
    while (q->full[slot] && !atomic_load(&q->stop)) pthread_cond_wait(&q->cv, &q->mu);
    int ok = !atomic_load(&q->stop);
    pthread_mutex_unlock(&q->mu);
    return ok;
}

static void *reader_main(void *arg) {
    Pipe *q = arg;
    Prep *p = q->p;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
    char err[1024];
    int slot = 0;
    uint64_t in_done = 0;
    DocReader r;
    if (!acquire(q, slot)) return NULL;
    for (size_t f = 0; f < p->files.n; f++) {
        if (docreader_open(&r, p->files.v[f], &p->a->topt, err, sizeof err)) {
            publish(q, slot, 1, in_done, 2, err);
            return NULL;
        }
        const uint8_t *doc;
        size_t n;
        int got;
        while ((got = docreader_next(&r, &doc, &n, err, sizeof err)) == 1) {
            p->stat[f].docs++;
            p->stat[f].text_bytes += n;
            p->docs++;
            p->text_bytes += n;
            Batch *b = &q->b[slot];
            /* A long document is cut where encoding the parts apart is exact. */
            for (size_t pos = 0; pos < n;) {
                size_t cut = n - pos > 2 * ITEM_BYTES ? tok_cut_point(doc, n, pos + ITEM_BYTES) : n;
                if (batch_add(b, (uint32_t)f, doc + pos, cut - pos, pos == 0)) {
                    docreader_close(&r);
                    publish(q, slot, 1, in_done, 1, "out of memory");
                    return NULL;
                }
                pos = cut;
            }
            if (b->text.n >= q->batch_bytes) {
                publish(q, slot, 0, in_done + docreader_offset(&r), 0, NULL);
                slot ^= 1;
                if (!acquire(q, slot)) {
                    docreader_close(&r);
                    return NULL;
                }
            }
            if (interrupted || atomic_load(&q->stop)) break;
        }
        if (got < 0 || interrupted || atomic_load(&q->stop)) {
            docreader_close(&r);
            publish(q, slot, 1, in_done, interrupted ? 130 : 2, err);
            return NULL;
        }
        p->stat[f].bytes = r.bytes_read;
        in_done += docreader_offset(&r);
        docreader_close(&r);
    }
    publish(q, slot, 1, in_done, 0, NULL);
    return NULL;
}

static int cmd_prepare(const Args *a) {
    if (!a->out) return die(2, "prepare: --out DIR is required");
    if (a->n_inputs == 0) return die(2, "prepare: no INPUT (files, directories or globs of text)");
    char err[1024];
    Prep p = {.a = a, .t0 = now(), .tty = !a->quiet && isatty(2)};
    if (textsrc_expand(a->inputs, a->n_inputs, &p.files, err, sizeof err)) return die(2, "%s", err);
    for (size_t i = 0; i < p.files.n; i++) {
        struct stat st;
        if (strcmp(p.files.v[i], "-") && !stat(p.files.v[i], &st)) p.total_in += (uint64_t)st.st_size;
    }
    Tokenizer *t = load_vocab(a);
    if (!t) {
        pathlist_free(&p.files);
        return 2;
    }
    int nt = a->threads ? a->threads : omp_get_max_threads();
    TokEncoder **enc = calloc((size_t)nt, sizeof *enc);
    p.stat = calloc(p.files.n, sizeof *p.stat);
    int rc = 2;
    CorpusWriter w;
    int w_open = 0, reader_started = 0;
    pthread_t reader;
    Pipe q = {.p = &p};
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.cv, NULL);
    if (!enc || !p.stat) {
        die(1, "out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++)
        if (!(enc[i] = tok_encoder_new(t, err, sizeof err))) {
            die(1, "%s", err);
            goto out;
        }
    if (corpus_open(&w, a->out, a->force, tok_vocab_size(t), tok_sha256(t), a->val_tokens,
                    a->shard_tokens, err, sizeof err)) {
        die(2, "%s", err);
        goto out;
    }
    w_open = 1;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    q.batch_bytes = (size_t)nt * 8 * ITEM_BYTES;
    if (q.batch_bytes < 32u * ITEM_BYTES) q.batch_bytes = 32u * ITEM_BYTES;
    /* Only the reader takes SIGINT/SIGTERM: a read() blocked on a pipe then
     * returns EINTR instead of waiting for input that may never come.  The
     * encoder threads, started later by this thread, inherit the block. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (pthread_create(&reader, NULL, reader_main, &q)) {
        die(1, "cannot start the reader thread");
        goto out;
    }
    reader_started = 1;
    for (int slot = 0;; slot ^= 1) {
        pthread_mutex_lock(&q.mu);
        while (!q.full[slot]) pthread_cond_wait(&q.cv, &q.mu);
        int last = q.last[slot], code = q.err_code;
        uint64_t in_pos = q.in_pos[slot];
        pthread_mutex_unlock(&q.mu);
        if (code) {
            rc = code == 130 ? die(130, "interrupted; nothing was written to %s", a->out)
                             : die(code, "%s", q.err);
            goto out;
        }
        if (flush_batch(&p, &q.b[slot], enc, nt, tok_eot(t), &w, err, sizeof err)) {
            rc = die(1, "%s", err);
            goto out;
        }
        if (interrupted) {
            rc = die(130, "interrupted; nothing was written to %s", a->out);
            goto out;
        }
        if (last) break;
        bar(&p, in_pos, 0);
        pthread_mutex_lock(&q.mu);
        q.full[slot] = 0;
        pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.mu);
    }
    pthread_join(reader, NULL);
    reader_started = 0;
    if (corpus_close_shards(&w, err, sizeof err)) {
        rc = die(strstr(err, "give more text") ? 2 : 1, "%s", err);
        goto out;
    }
    bar(&p, p.total_in, 1);
    char *man = manifest_json(&p, t, &w, a->enc_json ? a->enc_json : a->vocab ? a->vocab : "data/vocab/gpt2.tiktoken");
    if (!man || corpus_install(&w, man, err, sizeof err)) {
        free(man);
        rc = die(1, "%s", man ? err : "out of memory");
        goto out;
    }
    free(man);
    w_open = 0;
    double el = now() - p.t0;
    fprintf(stderr,
            "sgtok: %zu file(s), %llu documents, %.1f MB of text -> %llu tokens (%.3f bytes/token) "
            "in %s: val.bin %llu, %zu train shard(s); %.2f s, %.1f MB/s on %d thread(s)\n",
            p.files.n, (unsigned long long)p.docs, (double)p.text_bytes / 1e6,
            (unsigned long long)p.tokens, p.tokens ? (double)p.text_bytes / (double)p.tokens : 0,
            a->out, (unsigned long long)w.val_tokens, w.n_shards - 1, el,
            (double)p.text_bytes / 1e6 / el, nt);
    rc = 0;
out:
    if (reader_started) {
        pthread_mutex_lock(&q.mu);
        atomic_store(&q.stop, 1);
        pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.mu);
        pthread_join(reader, NULL);
    }
    if (p.tty && rc) fputc('\n', stderr);
    if (w_open) corpus_abort(&w);
    for (int i = 0; enc && i < nt; i++) tok_encoder_free(enc[i]);
    free(enc);
    for (int k = 0; k < 2; k++) {
        Batch *b = &q.b[k];
        for (size_t i = 0; i < b->cap_out; i++) tokvec_free(&b->out[i]);
        free(b->out);
        free(b->segs);
        free(b->items);
        bytebuf_free(&b->text);
    }
    pthread_mutex_destroy(&q.mu);
    pthread_cond_destroy(&q.cv);
    free(p.stat);
    pathlist_free(&p.files);
    tok_free(t);
    return rc;
}

/* ---- encode / decode / info ------------------------------------------------ */

static int cmd_encode(const Args *a) {
    char err[1024];
    char *dash[] = {"-"};
    PathList files;
    if (textsrc_expand(a->n_inputs ? a->inputs : dash, a->n_inputs ? a->n_inputs : 1, &files, err,
                       sizeof err))
        return die(2, "%s", err);
    Tokenizer *t = load_vocab(a);
    if (!t) {
        pathlist_free(&files);
        return 2;
    }
    TokEncoder *e = tok_encoder_new(t, err, sizeof err);
    TokVec v = {0};
    int rc = e ? 0 : die(1, "%s", err);
    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    for (size_t f = 0; !rc && f < files.n; f++) {
        DocReader r;
        if (docreader_open(&r, files.v[f], &a->topt, err, sizeof err)) {
            rc = die(2, "%s", err);
            break;
        }
        const uint8_t *doc;
        size_t n;
        int got;
        while ((got = docreader_next(&r, &doc, &n, err, sizeof err)) == 1) {
            v.n = 0;
            if ((a->eot && tokvec_push(&v, tok_eot(t))) || tok_encode(e, doc, n, &v)) {
                got = -2;
                break;
            }
            for (size_t i = 0; i < v.n; i++) printf(i ? " %u" : "%u", v.v[i]);
            putchar('\n');
        }
        if (got == -2) rc = die(1, "out of memory");
        else if (got < 0) rc = die(2, "%s", err);
        docreader_close(&r);
    }
    if (fflush(stdout) || ferror(stdout)) rc = rc ? rc : die(1, "writing the output: %s", strerror(errno));
    tokvec_free(&v);
    tok_encoder_free(e);
    tok_free(t);
    pathlist_free(&files);
    return rc;
}

static int cmd_decode(const Args *a) {
    if (a->n_inputs != 1) return die(2, "decode: give one shard file, or - to read ids from stdin");
    char err[1024];
    Tokenizer *t = load_vocab(a);
    if (!t) return 2;
    TokVec v = {0};
    int rc = 0;
    if (!strcmp(a->inputs[0], "-")) {
        char word[32];
        unsigned long long pos = 0;
        int c, k = 0;
        do {
            c = getchar();
            if (c == EOF || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
                if (!k) continue;
                word[k] = 0;
                char *end;
                errno = 0;
                unsigned long long x = strtoull(word, &end, 10);
                if (*end || errno || x > UINT32_MAX) {
                    rc = die(2, "stdin: token %llu is \"%s\", not a token id", pos, word);
                    break;
                }
                if (tokvec_push(&v, (uint32_t)x)) {
                    rc = die(1, "out of memory");
                    break;
                }
                pos++;
                k = 0;
            } else if (k < 31)
                word[k++] = (char)c;
            else {
                word[k] = 0;
                rc = die(2, "stdin: token %llu starts \"%s...\", not a token id", pos, word);
                break;
            }
        } while (c != EOF);
    } else {
        Shard s;
        if (shard_open(&s, a->inputs[0], err, sizeof err)) {
            tok_free(t);
            return die(2, "%s", err);
        }
        if (s.vocab_size != tok_vocab_size(t)) {
            rc = die(2, "%s: made with a vocabulary of %u tokens, this one has %u", a->inputs[0],
                     s.vocab_size, tok_vocab_size(t));
        } else {
            uint64_t from = a->from < s.n_tokens ? a->from : s.n_tokens;
            uint64_t cnt = s.n_tokens - from < a->count ? s.n_tokens - from : a->count;
            for (uint64_t i = 0; i < cnt && !rc; i++)
                if (tokvec_push(&v, s.tokens[from + i])) rc = die(1, "out of memory");
        }
        shard_close(&s);
    }
    ByteBuf out = {0};
    if (!rc && tok_decode(t, v.v, v.n, &out, err, sizeof err)) rc = die(2, "%s", err);
    if (!rc && (fwrite(out.p, 1, out.n, stdout) != out.n || fflush(stdout)))
        rc = die(1, "writing the output: %s", strerror(errno));
    bytebuf_free(&out);
    tokvec_free(&v);
    tok_free(t);
    return rc;
}

static int cmd_info(const Args *a) {
    Tokenizer *t = load_vocab(a);
    if (!t) return 2;
    char hex[65];
    tok_sha256_hex(t, hex);
    printf("vocab_size %u\neot %u\nsha256 %s\ngpt2 %s\n", tok_vocab_size(t), tok_eot(t), hex,
           strcmp(hex, TOK_GPT2_SHA256) ? "no" : "yes");
    tok_free(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    Args a;
    if (parse_args(argc, argv, &a)) {
        free(a.inputs);
        return 2;
    }
    int rc;
    if (!strcmp(a.cmd, "prepare")) rc = cmd_prepare(&a);
    else if (!strcmp(a.cmd, "encode")) rc = cmd_encode(&a);
    else if (!strcmp(a.cmd, "decode")) rc = cmd_decode(&a);
    else if (!strcmp(a.cmd, "info")) rc = cmd_info(&a);
    else rc = die(2, "unknown command \"%s\" (prepare, encode, decode, info; see sgtok --help)", a.cmd);
    free(a.inputs);
    return rc;
}
