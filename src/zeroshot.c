/* `sgtrain zeroshot` (zeroshot.h, docs/zeroshot.md): every task is a list
 * of rows, each a token sequence whose last few targets are scored; rows
 * go through the model in batches padded at the end, and each row's
 * scored targets give its NLL (and for LAMBADA whether each was the greedy
 * choice). */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "analysis.h"
#include "arms.h"
#include "cli_parse.h"
#include "config.h"
#include "fsutil.h"
#include "model.h"
#include "model_io.h"
#include "ops.h"
#include "run_vocab.h"
#include "zeroshot.h"

static const char *const task_names[ZS_TASKS] = {"lambada", "hellaswag", "wikitext"};
const char *zs_task_name(ZsTask t) { return t >= 0 && t < ZS_TASKS ? task_names[t] : "?"; }

static int task_from(const char *s) {
    for (int t = 0; t < ZS_TASKS; t++)
        if (!strcmp(s, task_names[t])) return t;
    return -1;
}

void zs_defaults(ZsOpts *o) {
    memset(o, 0, sizeof *o);
    o->task = -1;
    o->batch_size = 8;
}

void zs_usage(void) {
    printf("usage: sgtrain zeroshot RUN_DIR|CHECKPOINT --task TASK --file FILE [flags]\n"
           "Zero-shot evaluation of one trained model (the paper's Tables 10 and 11; docs/zeroshot.md);\n"
           "writes RUN_DIR/analysis/TASK.json.\n"
           "  --task TASK         lambada, hellaswag or wikitext\n"
           "  --file FILE         LAMBADA or HellaSwag JSON Lines, or WikiText-2's raw text\n"
           "  --vocab FILE        GPT-2's vocabulary (default: the run's data manifest's)\n"
           "  --batch-size N      sequences per forward pass (8)\n"
           "  --stride N          WikiText-2: tokens scored per window (default half the context)\n"
           "  --limit N           LAMBADA, HellaSwag: the first N examples only\n"
           "  --out DIR           where TASK.json goes (default RUN_DIR/analysis)\n"
           "  --threads N         CPU threads (default OpenMP's)\n"
           "  --quiet             no progress lines\n");
}

int zs_parse_args(ZsOpts *o, int argc, char **argv, char *err, size_t errlen) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        char flag[64];
        const char *v;
        int r = cli_run_arg(argc, argv, &i, &o->src, &o->quiet, flag, sizeof flag, &v, err, errlen);
        if (r < 0) return -1;
        if (r) continue;
        long x;
        if (!strcmp(flag, "--task")) {
            if ((o->task = task_from(v)) < 0) {
                snprintf(err, errlen, "--task: unknown '%s' (expected lambada, hellaswag or wikitext)", v);
                return -1;
            }
        } else if (!strcmp(flag, "--batch-size")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->batch_size = (int)x;
        } else if (!strcmp(flag, "--stride")) {
            if (cli_long(flag, v, 1, 1 << 20, &x, err, errlen)) return -1;
            o->stride = (int)x;
        } else if (!strcmp(flag, "--limit")) {
            if (cli_long(flag, v, 1, 1L << 40, &x, err, errlen)) return -1;
            o->limit = x;
        } else if (!strcmp(flag, "--threads")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(flag, "--file")) o->file = v;
        else if (!strcmp(flag, "--vocab")) o->vocab = v;
        else if (!strcmp(flag, "--out")) o->out = v;
        else {
            snprintf(err, errlen, "unknown flag '%s' (sgtrain zeroshot --help lists them)", a);
            return -1;
        }
    }
    if (!o->src) return snprintf(err, errlen, "no run directory or checkpoint given"), -1;
    if (o->task < 0) return snprintf(err, errlen, "--task is required (lambada, hellaswag or wikitext)"), -1;
    if (!o->file) return snprintf(err, errlen, "--file is required: the %s data", task_names[o->task]), -1;
    if (o->stride && o->task != ZS_WIKITEXT) return snprintf(err, errlen, "--stride is for --task wikitext only"), -1;
    if (o->limit && o->task == ZS_WIKITEXT)
        return snprintf(err, errlen, "--limit is for lambada and hellaswag (wikitext is one text)"), -1;
    return 0;
}

/* ---- rows ---------------------------------------------------------------- */

/* The tokens a ++ b, of which the forward pass sees the last T + 1 (left
 * truncation); the last `scored` targets count. */
typedef struct {
    const uint32_t *a, *b;
    size_t na, nb;
    int scored;
    double nll;
    int greedy; /* every scored target was the first argmax (LAMBADA) */
} Row;

static size_t row_len(const Row *r, int T) {
    size_t n = r->na + r->nb;
    return n > (size_t)T + 1 ? (size_t)T + 1 : n;
}

static uint32_t row_tok(const Row *r, size_t i) { return i < r->na ? r->a[i] : r->b[i - r->na]; }

typedef struct {
    Model m;
    Config cfg;
    long step;
    int model_ok;
    Tokenizer *tok;
    char vocab[1024], out_dir[1100], data_dir[1100];
    ZsData data;
    Row *rows;
    long nrows;
    int T, B; /* the context the rows use, and the batch */
    long truncated;
    double seconds;
} Zs;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One batch of rows [r0, r0 + n): inputs and targets padded with token 0,
 * whose outputs nothing reads. */
static void fill(const Zs *z, long r0, int n, int32_t *in, int32_t *tg) {
    const int T = z->T;
    memset(in, 0, sizeof *in * (size_t)z->B * T);
    memset(tg, 0, sizeof *tg * (size_t)z->B * T);
    for (int b = 0; b < n; b++) {
        const Row *r = &z->rows[r0 + b];
        size_t L = row_len(r, T), s = r->na + r->nb - L;
        for (size_t t = 0; t + 1 < L; t++) {
            in[(size_t)b * T + t] = (int32_t)row_tok(r, s + t);
            tg[(size_t)b * T + t] = (int32_t)row_tok(r, s + t + 1);
        }
    }
}

/* NLL and greedy flag of row R from its logits [T, V] (LAMBADA), in double. */
static void score_logits(Row *r, const real *logits, const int32_t *tg, int T, int V) {
    const size_t L = row_len(r, T);
    r->nll = 0;
    r->greedy = 1;
    for (size_t t = L - 1 - (size_t)r->scored; t + 1 < L; t++) {
        const real *x = logits + t * (size_t)V;
        int best = 0;
        for (int k = 1; k < V; k++)
            if (x[k] > x[best]) best = k;
        double s = 0;
        for (int k = 0; k < V; k++) s += exp((double)x[k] - (double)x[best]);
        r->nll += (double)x[best] + log(s) - (double)x[tg[t]];
        r->greedy &= best == tg[t];
    }
}

static int score_rows(Zs *z, int use_logits, int quiet, char *err, size_t errlen) {
    Model *m = &z->m;
    const int T = z->T, B = z->B, V = m->V;
    int32_t *in = malloc(sizeof *in * (size_t)B * T), *tg = malloc(sizeof *tg * (size_t)B * T);
    real *losses = malloc(sizeof *losses * (size_t)B * T);
    real *logits = use_logits ? malloc(sizeof *logits * (size_t)B * T * V) : NULL;
    int rc = -1;
    if (!in || !tg || !losses || (use_logits && !logits)) {
        snprintf(err, errlen, "out of memory for a batch of %d x %d tokens%s", B, T,
                 use_logits ? " and its logits" : "");
        goto out;
    }
    const long nb = (z->nrows + B - 1) / B;
    double t0 = now(), last = t0;
    for (long k = 0; k < nb; k++) {
        const long r0 = k * B;
        const int n = z->nrows - r0 < B ? (int)(z->nrows - r0) : B;
        fill(z, r0, n, in, tg);
        if (use_logits) {
            model_logits(m, in, B, logits);
#pragma omp parallel for schedule(dynamic)
            for (int b = 0; b < n; b++)
                score_logits(&z->rows[r0 + b], logits + (size_t)b * T * V, tg + (size_t)b * T, T, V);
        } else {
            model_forward(m, in, tg, B, 0, 0);
            op_download(losses, m->a.losses, sizeof *losses * (size_t)B * T);
            for (int b = 0; b < n; b++) {
                Row *r = &z->rows[r0 + b];
                const size_t L = row_len(r, T);
                r->nll = 0;
                for (size_t t = L - 1 - (size_t)r->scored; t + 1 < L; t++) r->nll += losses[(size_t)b * T + t];
            }
        }
        if (!quiet && (now() - last > 10 || k == nb - 1)) {
            last = now();
            fprintf(stderr, "  batch %ld/%ld (%.0f s)\n", k + 1, nb, last - t0);
        }
    }
    for (long i = 0; i < z->nrows; i++)
        if (!isfinite(z->rows[i].nll)) {
            snprintf(err, errlen, "the model's loss is not finite (row %ld)", i);
            goto out;
        }
    rc = 0;
out:
    free(in), free(tg), free(losses), free(logits);
    return rc;
}

/* ---- setting up ------------------------------------------------------------ */

static int load_vocab(Zs *z, const ZsOpts *o, char *err, size_t errlen) {
    return run_vocab_load(z->data_dir, o->vocab, z->cfg.vocab_size, z->cfg.vocab_sha256, &z->tok, z->vocab, sizeof z->vocab, err, errlen)
               ? -1
               : 0;
}

static int add_row(Zs *z, long *cap, const uint32_t *a, size_t na, const uint32_t *b, size_t nb, int scored) {
    if (z->nrows == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        Row *nr = realloc(z->rows, (size_t)*cap * sizeof *nr);
        if (!nr) return -1;
        z->rows = nr;
    }
    z->rows[z->nrows++] = (Row){a, b, na, nb, scored, 0, 0};
    return 0;
}

/* The rows of the task, and the context they need (at most the model's). */
static int make_rows(Zs *z, ZsTask task, int stride, char *err, size_t errlen) {
    const int Tm = z->m.T;
    long cap = 0;
    size_t longest = 0;
    if (task == ZS_WIKITEXT) {
        const TokVec *x = &z->data.text;
        const long nf = (long)x->n - 1; /* scored tokens: all but the end-of-text token */
        if (nf < 1) return snprintf(err, errlen, "the text has no tokens"), -1;
        for (long s = 0, e; s < nf; s = e) {
            e = s == 0 ? (nf < Tm ? nf : Tm) : (s + stride < nf ? s + stride : nf);
            /* targets x[lo+1 .. e+1) from inputs x[lo .. e) */
            long lo = e - Tm > 0 ? e - Tm : 0;
            if (add_row(z, &cap, x->v + lo, (size_t)(e + 1 - lo), NULL, 0, (int)(e - s))) goto oom;
        }
        longest = (size_t)(nf < Tm ? nf : Tm) + 1;
    } else
        for (long i = 0; i < z->data.n; i++) {
            const ZsExample *e = &z->data.ex[i];
            int trunc = 0;
            for (int k = 0; k < e->ncont; k++) {
                const TokVec *c = &e->cont[k];
                if (c->n > (size_t)Tm) {
                    snprintf(err, errlen, "%s:%ld: a continuation of %zu tokens is longer than the model's context "
                                          "of %d", zs_task_name(task), e->line, c->n, Tm);
                    return -1;
                }
                if (add_row(z, &cap, e->ctx.v, e->ctx.n, c->v, c->n, (int)c->n)) goto oom;
                const size_t n = e->ctx.n + c->n;
                trunc |= n > (size_t)Tm + 1;
                if (n > longest) longest = n;
            }
            z->truncated += trunc;
        }
    z->T = longest - 1 < (size_t)Tm ? (int)(longest - 1) : Tm;
    return 0;
oom:
    snprintf(err, errlen, "out of memory for the rows");
    return -1;
}

/* ---- the output ------------------------------------------------------------ */

static json_object *jnum(double x) { return isfinite(x) ? json_object_new_double(x) : json_object_new_null(); }
static void put(json_object *o, const char *k, json_object *v) { json_object_object_add(o, k, v); }

static json_object *setup_json(const Zs *z, const ZsOpts *o) {
    json_object *s = json_object_new_object();
    put(s, "source", json_object_new_string(o->src));
    put(s, "arm", json_object_new_string(z->m.arm->name));
    put(s, "tier", json_object_new_string(z->cfg.tier));
    put(s, "run_seed", json_object_new_int64(z->cfg.seed));
    put(s, "step", json_object_new_int64(z->step));
    put(s, "data", json_object_new_string(z->data_dir));
    put(s, "vocab", json_object_new_string(z->vocab));
    put(s, "context", json_object_new_int(z->cfg.block_size));
    put(s, "seq_len", json_object_new_int(z->T));
    put(s, "batch_size", json_object_new_int(z->B));
    put(s, "limit", o->limit ? json_object_new_int64(o->limit) : NULL);
    put(s, "backend", json_object_new_string(op_backend()));
    put(s, "threads", json_object_new_int(op_threads()));
    put(s, "seconds", json_object_new_double(z->seconds));
    return s;
}

static const char *const buckets[4] = {"absent", "<=32", "33-96", ">96"};
static int bucket_of(long d) { return d < 0 ? 0 : d <= 32 ? 1 : d <= 96 ? 2 : 3; }

static void lambada_json(const Zs *z, json_object *f, FILE *sum) {
    const ZsData *d = &z->data;
    long hits = 0, bn[4] = {0}, bh[4] = {0};
    double nll = 0;
    json_object *res = json_object_new_array();
    for (long i = 0; i < d->n; i++) {
        const ZsExample *e = &d->ex[i];
        const Row *r = &z->rows[i];
        hits += r->greedy;
        nll += r->nll;
        bn[bucket_of(e->distance)]++;
        bh[bucket_of(e->distance)] += r->greedy;
        json_object *x = json_object_new_object();
        put(x, "line", json_object_new_int64(e->line));
        put(x, "context_tokens", json_object_new_int64((int64_t)e->ctx.n));
        put(x, "target_tokens", json_object_new_int64((int64_t)e->cont[0].n));
        put(x, "nll", jnum(r->nll));
        put(x, "greedy", json_object_new_boolean(r->greedy));
        put(x, "distance", e->distance < 0 ? NULL : json_object_new_int64(e->distance));
        json_object_array_add(res, x);
    }
    const double acc = (double)hits / d->n, ppl = exp(nll / d->n);
    put(f, "examples", json_object_new_int64(d->n));
    put(f, "truncated", json_object_new_int64(z->truncated));
    put(f, "accuracy", jnum(acc));
    put(f, "perplexity", jnum(ppl));
    json_object *by = json_object_new_array();
    for (int k = 0; k < 4; k++) {
        json_object *x = json_object_new_object();
        put(x, "bucket", json_object_new_string(buckets[k]));
        put(x, "n", json_object_new_int64(bn[k]));
        put(x, "accuracy", bn[k] ? jnum((double)bh[k] / bn[k]) : NULL);
        json_object_array_add(by, x);
    }
    put(f, "by_distance", by);
    put(f, "results", res);
    if (sum) {
        fprintf(sum, "lambada: %ld passages, accuracy %.4f, perplexity %.3f", d->n, acc, ppl);
        for (int k = 0; k < 4; k++)
            if (bn[k]) fprintf(sum, "; %s %.4f (%ld)", buckets[k], (double)bh[k] / bn[k], bn[k]);
        fprintf(sum, "\n");
    }
}

static void hellaswag_json(const Zs *z, json_object *f, FILE *sum) {
    const ZsData *d = &z->data;
    long hits = 0, hits_norm = 0;
    json_object *res = json_object_new_array();
    for (long i = 0; i < d->n; i++) {
        const ZsExample *e = &d->ex[i];
        const Row *r = &z->rows[i * ZS_CHOICES];
        int pred = 0, pred_norm = 0;
        json_object *nl = json_object_new_array(), *ch = json_object_new_array();
        for (int k = 0; k < ZS_CHOICES; k++) {
            if (r[k].nll < r[pred].nll) pred = k;
            if (r[k].nll / e->chars[k] < r[pred_norm].nll / e->chars[pred_norm]) pred_norm = k;
            json_object_array_add(nl, jnum(r[k].nll));
            json_object_array_add(ch, json_object_new_int64(e->chars[k]));
        }
        hits += pred == e->label;
        hits_norm += pred_norm == e->label;
        json_object *x = json_object_new_object();
        put(x, "line", json_object_new_int64(e->line));
        put(x, "label", json_object_new_int(e->label));
        put(x, "nll", nl);
        put(x, "chars", ch);
        put(x, "pred", json_object_new_int(pred));
        put(x, "pred_norm", json_object_new_int(pred_norm));
        json_object_array_add(res, x);
    }
    put(f, "examples", json_object_new_int64(d->n));
    put(f, "truncated", json_object_new_int64(z->truncated));
    put(f, "accuracy", jnum((double)hits / d->n));
    put(f, "accuracy_norm", jnum((double)hits_norm / d->n));
    put(f, "results", res);
    if (sum)
        fprintf(sum, "hellaswag: %ld examples, accuracy %.4f, accuracy_norm %.4f\n", d->n, (double)hits / d->n,
                (double)hits_norm / d->n);
}

static void wikitext_json(const Zs *z, int stride, json_object *f, FILE *sum) {
    const ZsData *d = &z->data;
    double nll = 0;
    for (long i = 0; i < z->nrows; i++) nll += z->rows[i].nll;
    const long ntok = (long)d->text.n - 1;
    const double tppl = exp(nll / ntok), wppl = d->words ? exp(nll / d->words) : NAN,
                 bpb = nll / (log(2.0) * d->bytes);
    put(f, "tokens", json_object_new_int64(ntok));
    put(f, "words", json_object_new_int64(d->words));
    put(f, "bytes", json_object_new_int64(d->bytes));
    put(f, "stride", json_object_new_int(stride));
    put(f, "windows", json_object_new_int64(z->nrows));
    put(f, "nll", jnum(nll));
    put(f, "token_perplexity", jnum(tppl));
    put(f, "word_perplexity", jnum(wppl));
    put(f, "bits_per_byte", jnum(bpb));
    if (sum)
        fprintf(sum, "wikitext: %ld tokens in %ld windows, token perplexity %.3f, word perplexity %.3f, %.4f bits "
                     "per byte\n", ntok, z->nrows, tppl, wppl, bpb);
}

static int write_out(const Zs *z, const ZsOpts *o, int stride, char *err, size_t errlen) {
    json_object *f = json_object_new_object();
    put(f, "kind", json_object_new_string(task_names[o->task]));
    put(f, "version", json_object_new_int(1));
    put(f, "file", json_object_new_string(o->file));
    put(f, "file_sha256", json_object_new_string(z->data.sha256));
    FILE *sum = o->quiet ? NULL : stdout;
    if (o->task == ZS_LAMBADA) lambada_json(z, f, sum);
    else if (o->task == ZS_HELLASWAG) hellaswag_json(z, f, sum);
    else wikitext_json(z, stride, f, sum);
    put(f, "setup", setup_json(z, o));
    char path[1300];
    snprintf(path, sizeof path, "%s/%s.json", z->out_dir, task_names[o->task]);
    const char *s = json_object_to_json_string_ext(f, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *buf = malloc(n + 2);
    int rc = -1;
    if (!buf) snprintf(err, errlen, "out of memory writing %s", path);
    else {
        memcpy(buf, s, n);
        buf[n] = '\n';
        rc = fs_mkdir_p(z->out_dir, err, errlen) || fs_write_atomic(path, buf, n + 1, err, errlen) ? -1 : 0;
        if (!rc && !o->quiet) printf("wrote %s\n", path);
    }
    free(buf);
    json_object_put(f);
    return rc;
}

int zs_run(const ZsOpts *o, char *err, size_t errlen) {
    Zs z;
    memset(&z, 0, sizeof z);
    int rc = 2;
    const double t0 = now();
    if (o->threads > 0) omp_set_num_threads(o->threads);
    if (model_from_checkpoint(&z.m, &z.cfg, &z.step, o->src, err, errlen)) goto out;
    z.model_ok = 1;
    snprintf(z.data_dir, sizeof z.data_dir, "%s", z.cfg.data);
    analysis_default_out(o->src, z.out_dir, sizeof z.out_dir);
    if (o->out) snprintf(z.out_dir, sizeof z.out_dir, "%s", o->out);
    if (load_vocab(&z, o, err, errlen)) goto out;
    const int Tm = z.m.T, stride = o->task == ZS_WIKITEXT ? (o->stride ? o->stride : (Tm + 1) / 2) : 0;
    if (stride > Tm) {
        snprintf(err, errlen, "--stride %d exceeds the model's context of %d tokens", stride, Tm);
        goto out;
    }
    if (zs_load(&z.data, o->task, o->file, o->limit, z.tok, err, errlen)) goto out;
    if (make_rows(&z, o->task, stride, err, errlen)) goto out;
    rc = 1;
    /* LAMBADA reads whole logits: at most 1 GiB of them a batch */
    const int use_logits = o->task == ZS_LAMBADA;
    z.B = o->task == ZS_HELLASWAG ? (o->batch_size + ZS_CHOICES - 1) / ZS_CHOICES * ZS_CHOICES : o->batch_size;
    if (use_logits) {
        const long cap = (1L << 30) / ((long)z.T * z.m.V * (long)sizeof(real));
        if (z.B > cap) z.B = cap > 0 ? (int)cap : 1;
    }
    if (z.B > z.nrows) z.B = (int)z.nrows;
    z.m.T = z.T; /* positions past T are never read: wpe rows [0, T) only */
    z.m.Tp = z.T + (arm_has_sink_token(z.m.arm) ? 1 : 0);
    if (!o->quiet)
        fprintf(stderr, "zeroshot %s on %s (%s, step %ld): %ld sequences of up to %d tokens, batches of %d, %s\n",
                task_names[o->task], o->src, z.m.arm->name, z.step, z.nrows, z.T, z.B, op_backend());
    if (score_rows(&z, use_logits, o->quiet, err, errlen)) goto out;
    z.seconds = now() - t0;
    rc = write_out(&z, o, stride, err, errlen) ? 1 : 0;
out:
    free(z.rows);
    zs_data_free(&z.data);
    tok_free(z.tok);
    if (z.model_ok) model_free(&z.m);
    return rc;
}
