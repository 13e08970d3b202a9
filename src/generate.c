/* `sgtrain generate` (generate.h, docs/generate.md).
 *
 * The prompt starts a document as training data does: <|endoftext|>, then
 * the prompt's tokens.  Sample k's draw for its i-th new token is
 * rng_uniform(rng_key(seed, k, i), 0), so a sample's draws depend only on
 * (seed, k, i), not on how many samples run beside it. */
#include "generate.h"

#include <json-c/json.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_parse.h"
#include "fsutil.h"
#include "arms.h"
#include "kvcache.h"
#include "model.h"
#include "model_io.h"
#include "next_token.h"
#include "ops.h"
#include "rng.h"
#include "run_vocab.h"
#include "tokenizer.h"
#include "utf8.h"

#define GEN_DEFAULT_TOKENS 64
#define GEN_MAX_PROMPT_BYTES (64L << 20)

void gen_defaults(GenOpts *o) {
    memset(o, 0, sizeof *o);
    o->samples = 1;
    o->temperature = 1;
    o->top_p = 1;
}

void gen_usage(void) {
    printf("usage: sgtrain generate RUN_DIR|CHECKPOINT [flags]\n"
           "Text from a trained model, sampled token by token with a key-value cache (docs/generate.md).\n"
           "The text starts a document: <|endoftext|>, then the prompt's tokens.\n"
           "  --prompt TEXT       the text to continue (default: none)\n"
           "  --prompt-file FILE  the text to continue, read from FILE\n"
           "  --tokens N          new tokens a sample at most (default %d, fewer if the context ends first)\n"
           "  --samples N         continuations of the prompt, sampled side by side (1)\n"
           "  --temperature T     softmax temperature; 0 takes the most likely token (greedy) (1)\n"
           "  --top-k K           draw among the K most likely tokens only (0: all)\n"
           "  --top-p P           then among the most likely tokens holding P of the probability (1: all)\n"
           "  --seed N            the draws' key: sample k's i-th draw depends on (N, k, i) only (0)\n"
           "  --ignore-eot        go on past <|endoftext|> (default: a sample ends there)\n"
           "  --telemetry         with --json: for each draw, every layer and head's attention on the first\n"
           "                      position and on the phantom, and the gate of its own read\n"
           "  --vocab FILE        GPT-2's vocabulary (default: the run's data manifest's)\n"
           "  --json FILE         also write the samples as JSON: token ids, text, log-probabilities\n"
           "  --threads N         CPU threads (default OpenMP's)\n"
           "  --quiet             the samples only, no setup or speed lines\n",
           GEN_DEFAULT_TOKENS);
}

int gen_parse_args(GenOpts *o, int argc, char **argv, char *err, size_t errlen) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--ignore-eot") || !strcmp(a, "--ignore_eot")) {
            o->ignore_eot = 1;
            continue;
        }
        if (!strcmp(a, "--telemetry")) {
            o->telemetry = 1;
            continue;
        }
        char flag[64];
        const char *v;
        int r = cli_run_arg(argc, argv, &i, &o->src, &o->quiet, flag, sizeof flag, &v, err, errlen);
        if (r < 0) return -1;
        if (r) continue;
        long x;
        if (!strcmp(flag, "--tokens")) {
            if (cli_long(flag, v, 1, 1 << 30, &x, err, errlen)) return -1;
            o->tokens = x;
        } else if (!strcmp(flag, "--samples")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->samples = (int)x;
        } else if (!strcmp(flag, "--top-k")) {
            if (cli_long(flag, v, 0, 1 << 30, &x, err, errlen)) return -1;
            o->top_k = (int)x;
        } else if (!strcmp(flag, "--seed")) {
            if (cli_long(flag, v, 0, 0x7fffffffffffffffL, &x, err, errlen)) return -1;
            o->seed = (uint64_t)x;
        } else if (!strcmp(flag, "--threads")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(flag, "--temperature")) {
            if (cli_double(flag, v, 0, 1e6, &o->temperature, err, errlen)) return -1;
        } else if (!strcmp(flag, "--top-p")) {
            if (cli_double(flag, v, 0, 1, &o->top_p, err, errlen)) return -1;
            if (o->top_p == 0) return snprintf(err, errlen, "--top-p: expected a number in (0, 1], got '%s'", v), -1;
        } else if (!strcmp(flag, "--prompt")) o->prompt = v;
        else if (!strcmp(flag, "--prompt-file")) o->prompt_file = v;
        else if (!strcmp(flag, "--vocab")) o->vocab = v;
        else if (!strcmp(flag, "--json")) o->json = v;
        else {
            snprintf(err, errlen, "unknown flag '%s' (sgtrain generate --help lists them)", a);
            return -1;
        }
    }
    if (!o->src) return snprintf(err, errlen, "no run directory or checkpoint given"), -1;
    if (o->prompt && o->prompt_file) return snprintf(err, errlen, "--prompt and --prompt-file: one or the other"), -1;
    if (o->telemetry && !o->json) return snprintf(err, errlen, "--telemetry goes into the --json file: give one"), -1;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The prompt's bytes (malloc'd; *n its length). */
static char *read_prompt(const GenOpts *o, size_t *n, char *err, size_t errlen) {
    if (!o->prompt_file) {
        const char *s = o->prompt ? o->prompt : "";
        *n = strlen(s);
        char *p = malloc(*n + 1);
        if (p) memcpy(p, s, *n + 1);
        else snprintf(err, errlen, "out of memory for the prompt");
        return p;
    }
    char ferr[1200];
    char *p = fs_read_file(o->prompt_file, GEN_MAX_PROMPT_BYTES, n, ferr, sizeof ferr);
    if (!p) snprintf(err, errlen, "--prompt-file %s", ferr);
    return p;
}

typedef struct {
    TokVec toks;      /* the new tokens, the end-of-text that stopped it excluded */
    double *logprob;  /* [max] each drawn token's log-probability under the model */
    real *tel;        /* [max][L][KV_TEL][H] with --telemetry: what the draw's query did (kvcache.h) */
    int eot;          /* ended at <|endoftext|> */
} Sample;

/* Bytes of tokens as JSON text: invalid UTF-8 (a character cut at the end)
 * spelled \xNN. */
static json_object *json_text(const Tokenizer *tok, const uint32_t *ids, size_t n) {
    ByteBuf b = {0};
    char e[256];
    tok_decode(tok, ids, n, &b, e, sizeof e);
    char *out = malloc(4 * b.n + 1);
    if (!out) abort();
    json_object *o = json_object_new_string_len(out, (int)utf8_escape_invalid(b.p ? b.p : (const uint8_t *)"", b.n, out));
    free(out);
    bytebuf_free(&b);
    return o;
}

static json_object *json_ids(const uint32_t *ids, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(a, json_object_new_int64(ids[i]));
    return a;
}

static void put(json_object *o, const char *k, json_object *v) { json_object_object_add(o, k, v); }

/* A sample's telemetry: for each field the arm has, [draw][layer][head]. */
static json_object *json_telemetry(const Model *m, const real *tel, size_t n) {
    static const char *const names[KV_TEL] = {"pos0", "phantom", "gate"};
    const int has[KV_TEL] = {1, arm_has_phantom(m->arm), m->arm->filter != FILTER_NONE};
    json_object *t = json_object_new_object();
    for (int f = 0; f < KV_TEL; f++) {
        if (!has[f]) continue;
        json_object *draws = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
            json_object *layers = json_object_new_array();
            for (int l = 0; l < m->L; l++) {
                json_object *heads = json_object_new_array();
                const real *x = tel + (((size_t)i * m->L + l) * KV_TEL + f) * m->H;
                for (int h = 0; h < m->H; h++) json_object_array_add(heads, json_object_new_double(x[h]));
                json_object_array_add(layers, heads);
            }
            json_object_array_add(draws, layers);
        }
        put(t, names[f], draws);
    }
    return t;
}

static int write_json(AtomicFile *af, const GenOpts *o, const Model *m, const Config *cfg, long step, const char *vocab, const Tokenizer *tok,
                      const TokVec *prompt, const Sample *s, long max_new, double secs, char *err, size_t errlen) {
    json_object *f = json_object_new_object(), *set = json_object_new_object();
    put(f, "kind", json_object_new_string("generate"));
    put(f, "version", json_object_new_int(1));
    put(set, "source", json_object_new_string(o->src));
    put(set, "arm", json_object_new_string(cfg->arm));
    put(set, "tier", json_object_new_string(cfg->tier));
    put(set, "run_seed", json_object_new_int64(cfg->seed));
    put(set, "step", json_object_new_int64(step));
    put(set, "vocab", json_object_new_string(vocab));
    put(set, "context", json_object_new_int(cfg->block_size));
    put(set, "max_tokens", json_object_new_int64(max_new));
    put(set, "temperature", json_object_new_double(o->temperature));
    put(set, "top_k", json_object_new_int(o->top_k));
    put(set, "top_p", json_object_new_double(o->top_p));
    put(set, "seed", json_object_new_int64((int64_t)o->seed));
    put(set, "ignore_eot", json_object_new_boolean(o->ignore_eot));
    put(set, "backend", json_object_new_string(op_backend()));
    put(set, "threads", json_object_new_int(op_threads()));
    put(set, "seconds", json_object_new_double(secs));
    put(f, "setup", set);
    json_object *p = json_object_new_object();
    put(p, "text", json_text(tok, prompt->v + 1, prompt->n - 1));
    put(p, "tokens", json_ids(prompt->v, prompt->n));
    put(f, "prompt", p);
    json_object *arr = json_object_new_array();
    for (int k = 0; k < o->samples; k++) {
        json_object *x = json_object_new_object(), *lp = json_object_new_array();
        put(x, "index", json_object_new_int(k));
        put(x, "text", json_text(tok, s[k].toks.v, s[k].toks.n));
        put(x, "tokens", json_ids(s[k].toks.v, s[k].toks.n));
        for (size_t i = 0; i < s[k].toks.n + (size_t)s[k].eot; i++)
            json_object_array_add(lp, json_object_new_double(s[k].logprob[i]));
        put(x, "logprobs", lp);
        put(x, "stop", json_object_new_string(s[k].eot ? "eot" : "length"));
        if (s[k].tel) put(x, "telemetry", json_telemetry(m, s[k].tel, s[k].toks.n + (size_t)s[k].eot));
        json_object_array_add(arr, x);
    }
    put(f, "samples", arr);
    const char *txt = json_object_to_json_string_ext(f, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    /* a failed write is reported by the commit, which then keeps the old file */
    af_write(af, txt, strlen(txt));
    af_write(af, "\n", 1);
    int rc = af_commit(af, err, errlen);
    json_object_put(f);
    return rc;
}

static void print_tokens(const Tokenizer *tok, const uint32_t *ids, size_t n) {
    ByteBuf b = {0};
    char e[256];
    if (!tok_decode(tok, ids, n, &b, e, sizeof e) && b.n) fwrite(b.p, 1, b.n, stdout);
    bytebuf_free(&b);
}

/* Everything one run holds; gen_free releases what is set. */
typedef struct {
    const GenOpts *o;
    Model m;
    int model_ok;
    Config cfg;
    long step;
    Tokenizer *tok;
    char vocab[1024];
    TokVec prompt;     /* <|endoftext|>, then the prompt's tokens */
    long N;            /* new tokens a sample at most */
    KvCache kv;
    PickScratch ps;
    Sample *s;
    real *logits;      /* [samples, m.V] */
    int32_t *feed;     /* [max(samples, prompt)] the tokens entered next */
    AtomicFile af;
} Gen;

static void gen_free(Gen *g) {
    af_abort(&g->af);
    for (int k = 0; g->s && k < g->o->samples; k++)
        tokvec_free(&g->s[k].toks), free(g->s[k].logprob), free(g->s[k].tel);
    free(g->s), free(g->logits), free(g->feed);
    pick_scratch_free(&g->ps);
    if (g->kv.m) kv_free(&g->kv);
    tokvec_free(&g->prompt);
    tok_free(g->tok);
    if (g->model_ok) model_free(&g->m);
}

/* The model, the vocabulary, the prompt's tokens and the checks of what was
 * asked against them, before any work.  0, or -1 with err (bad input). */
static int gen_setup(Gen *g, char *err, size_t errlen) {
    const GenOpts *o = g->o;
    if (model_from_checkpoint(&g->m, &g->cfg, &g->step, o->src, err, errlen)) return -1;
    g->model_ok = 1;
    if (run_vocab_load(g->cfg.data, o->vocab, g->cfg.vocab_size, g->cfg.vocab_sha256, &g->tok, g->vocab, sizeof g->vocab, err, errlen))
        return -1;
    size_t nbytes;
    char *text = read_prompt(o, &nbytes, err, errlen);
    if (!text) return -1;
    TokEncoder *enc = tok_encoder_new(g->tok, err, errlen);
    int bad = !enc || tokvec_push(&g->prompt, tok_eot(g->tok)) ||
              tok_encode(enc, (const uint8_t *)text, nbytes, &g->prompt);
    if (bad && enc) snprintf(err, errlen, "out of memory encoding the prompt");
    tok_encoder_free(enc);
    free(text);
    if (bad) return -1;
    const long T = g->m.T, P = (long)g->prompt.n;
    if (P > T)
        return snprintf(err, errlen, "the prompt is %ld tokens with the <|endoftext|> that starts it; the model's "
                                     "context is %ld", P, T), -1;
    /* the last new token is never entered: P + N - 1 positions */
    const long room = T + 1 - P;
    if (o->tokens > room)
        return snprintf(err, errlen, "--tokens %ld does not fit: the prompt takes %ld of the model's %ld positions, "
                                     "which leaves room for %ld new tokens", o->tokens, P, T, room), -1;
    g->N = o->tokens ? o->tokens : (room < GEN_DEFAULT_TOKENS ? room : GEN_DEFAULT_TOKENS);
    /* a cache larger than the memory is said before anything is touched (on
     * the CPU a huge calloc succeeds and the first write kills the process) */
    size_t mem = 0, total = 0;
    if (op_host_memory()) mem = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    else op_memory_room(&mem, &total);
    const double need = kv_bytes(&g->m, o->samples);
    if (mem && need > (double)mem)
        return snprintf(err, errlen, "--samples %d: the key-value cache needs %.2f GiB, more than the %.2f GiB of %s "
                                     "memory there is room for", o->samples, need / (1 << 30),
                        (double)mem / (1 << 30), op_host_memory() ? "host" : "device"), -1;
    /* the output file's directory is checked before any work: a temporary
     * file beside it, renamed over it once the samples are complete */
    return o->json && af_open(&g->af, o->json, err, errlen) ? -1 : 0;
}

/* The cache, the prompt through it, and every draw.  0, or -1 with err. */
static int gen_draw(Gen *g, double *t_prompt, long *drawn, char *err, size_t errlen) {
    const GenOpts *o = g->o;
    const int S = o->samples, V = (int)tok_vocab_size(g->tok), eot = (int)tok_eot(g->tok), Vm = g->m.V;
    const size_t P = g->prompt.n;
    if (kv_init(&g->kv, &g->m, S, err, errlen) || (o->telemetry && kv_telemetry(&g->kv, err, errlen))) return -1;
    const size_t tel_n = (size_t)g->m.L * KV_TEL * g->m.H; /* a draw's telemetry */
    g->s = calloc((size_t)S, sizeof *g->s);
    g->logits = malloc(sizeof *g->logits * (size_t)S * Vm);
    g->feed = malloc(sizeof *g->feed * (P > (size_t)S ? P : (size_t)S));
    int ok = g->s && g->logits && g->feed && !pick_scratch_init(&g->ps, V);
    for (int k = 0; ok && k < S; k++)
        ok = (g->s[k].logprob = malloc(sizeof(double) * (size_t)g->N)) != NULL &&
             (!o->telemetry || (g->s[k].tel = malloc(sizeof(real) * tel_n * (size_t)g->N)) != NULL);
    if (!ok) return snprintf(err, errlen, "out of memory for %d samples of %ld tokens", S, g->N), -1;
    const int stream = S == 1;
    if (stream) {
        print_tokens(g->tok, g->prompt.v + 1, P - 1);
        fflush(stdout);
    }
    const double t0 = now();
    for (size_t i = 0; i < P; i++) g->feed[i] = (int32_t)g->prompt.v[i];
    kv_prefill(&g->kv, g->feed, (int)P, g->logits);
    for (int k = 1; k < S; k++) memcpy(g->logits + (size_t)k * Vm, g->logits, sizeof *g->logits * (size_t)Vm);
    *t_prompt = now() - t0;
    const PickOpts po = {o->temperature, o->top_k, o->top_p};
    int live = S;
    for (long i = 0; i < g->N && live; i++) {
        for (int k = 0; k < S; k++) {
            Sample *sk = &g->s[k];
            g->feed[k] = eot;
            if (sk->eot) continue;
            const real *z = g->logits + (size_t)k * Vm;
            for (int j = 0; j < V; j++)
                if (!isfinite(z[j]))
                    return snprintf(err, errlen, "the model's logits are not finite (sample %d, new token %ld, id %d)",
                                    k, i, j), -1;
            const double u = rng_uniform(rng_key(o->seed, (uint64_t)k, (uint64_t)i), 0);
            const int t = pick_token(z, V, &po, u, &g->ps, &sk->logprob[i]);
            if (sk->tel) memcpy(sk->tel + (size_t)i * tel_n, g->kv.tel + (size_t)k * tel_n, sizeof(real) * tel_n);
            ++*drawn;
            g->feed[k] = t;
            if (t == eot && !o->ignore_eot) {
                sk->eot = 1;
                live--;
            } else if (tokvec_push(&sk->toks, (uint32_t)t)) {
                return snprintf(err, errlen, "out of memory for the samples"), -1;
            } else if (stream) {
                print_tokens(g->tok, &sk->toks.v[sk->toks.n - 1], 1);
                fflush(stdout);
            }
        }
        if (i + 1 < g->N && live) kv_step(&g->kv, g->feed, g->logits);
    }
    return 0;
}

int gen_run(const GenOpts *o, char *err, size_t errlen) {
    Gen g;
    memset(&g, 0, sizeof g);
    g.o = o;
    int rc = 2;
    if (o->threads > 0) omp_set_num_threads(o->threads);
    if (gen_setup(&g, err, errlen)) goto out;
    rc = 1;
    if (!o->quiet)
        fprintf(stderr, "generate: %s (%s, step %ld), a prompt of %zu tokens with <|endoftext|>, %d sample%s of up "
                        "to %ld tokens, %s\n", o->src, g.cfg.arm, g.step, g.prompt.n, o->samples,
                o->samples == 1 ? "" : "s", g.N, op_backend());
    const double t0 = now();
    double t_prompt = 0;
    long drawn = 0;
    if (gen_draw(&g, &t_prompt, &drawn, err, errlen)) goto out;
    const double secs = now() - t0;
    if (o->samples == 1) printf("\n");
    else
        for (int k = 0; k < o->samples; k++) {
            printf("=== sample %d%s ===\n", k, g.s[k].eot ? " (ended at <|endoftext|>)" : "");
            print_tokens(g.tok, g.prompt.v + 1, g.prompt.n - 1);
            print_tokens(g.tok, g.s[k].toks.v, g.s[k].toks.n);
            printf("\n");
        }
    fflush(stdout);
    if (!o->quiet)
        fprintf(stderr, "generate: %ld tokens drawn in %.2f s (the prompt %.3f s; %.1f tokens/s after it)\n", drawn,
                secs, t_prompt, secs > t_prompt ? drawn / (secs - t_prompt) : 0.0);
    if (o->json && write_json(&g.af, o, &g.m, &g.cfg, g.step, g.vocab, g.tok, &g.prompt, g.s, g.N, secs, err, errlen))
        goto out;
    if (o->json && !o->quiet) fprintf(stderr, "wrote %s\n", o->json);
    rc = 0;
out:
    gen_free(&g);
    return rc;
}
