#include "config.h"

#include "arms.h"
#include "errmsg.h"
#include "json_out.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* ----------------------------------------------------------- field table */

/* What a numeric field accepts.  Kept beside the field table (not in
 * ConfigField, which is public) so config_set and config_validate apply the
 * very same rule. */
typedef enum {
    R_NONE,   /* strings and bools: checked by type only */
    R_POS,    /* integer >= 1 */
    R_NONNEG, /* integer >= 0 */
    R_VOCAB,  /* integer in [2, 65536]: token ids are stored as uint16 */
    R_GT0,    /* real > 0 */
    R_GE0,    /* real >= 0 */
    R_UNIT,   /* real in [0, 1) */
    R_ZERO    /* integer 0 or 1: the ZeRO stages implemented */
} Range;

/* One row per Config member, in struct order; tier is first so that the
 * written YAML applies the tier before the fields it would otherwise reset. */
#define FIELD_LIST(X)                                                                        \
    X(tier, CF_STR, CF_RUN, R_NONE, "size tier whose defaults the run starts from")          \
    X(arm, CF_STR, CF_RUN, R_NONE, "attention arm (zero option and filter)")                 \
    X(n_layer, CF_INT, CF_RUN, R_POS, "transformer blocks")                                  \
    X(n_head, CF_INT, CF_RUN, R_POS, "attention heads per block")                            \
    X(n_embd, CF_INT, CF_RUN, R_POS, "model width (d_model)")                                \
    X(block_size, CF_INT, CF_RUN, R_POS, "context length in tokens")                         \
    X(vocab_size, CF_INT, CF_RUN, R_VOCAB, "vocabulary size (at most 65536: uint16 shards)") \
    X(ln_bias, CF_BOOL, CF_RUN, R_NONE, "LayerNorm with a bias term")                        \
    X(linear_bias, CF_BOOL, CF_RUN, R_NONE, "bias terms on the four linear layers of a block, as GPT-2's (imported models)") \
    X(gelu_tanh, CF_BOOL, CF_RUN, R_NONE, "GELU's tanh approximation, as GPT-2's, instead of the exact erf form") \
    X(rotary_base, CF_DOUBLE, CF_RUN, R_GT0, "rotary angle base: pair i of position p turns by p / base^(2i / rotary_dims)") \
    X(rotary_dims, CF_INT, CF_RUN, R_NONNEG, "rotary position embedding on this many leading dims of each head's queries and keys (even, at most the head dim), in place of learned positions, as GPT-NeoX's (0: learned absolute positions, the study's)") \
    X(parallel_residual, CF_BOOL, CF_RUN, R_NONE, "attention and MLP both read the block's input, x + attn(ln_1 x) + mlp(ln_2 x), as GPT-NeoX's (false: the MLP reads the sum after attention, GPT-2's)") \
    X(tie_embeddings, CF_BOOL, CF_RUN, R_NONE, "the LM head is the token embedding, as GPT-2's (false: a separate lm_head.weight, as GPT-NeoX's)") \
    X(vocab_sha256, CF_STR, CF_RUN, R_NONE, "the SHA-256 (64 hex digits) of the vocabulary the model's token ids mean, set by sgtrain import; \"unknown\" when imported without its tokenizer; empty: the data manifest's (trained runs)") \
    X(gate_beta, CF_DOUBLE, CF_RUN, R_GT0, "norm-gate sharpness")                            \
    X(init_std, CF_DOUBLE, CF_RUN, R_GT0, "standard deviation of the weight init")           \
    X(seed, CF_LONG, CF_RUN, R_NONNEG, "seed for init and batch order")                      \
    X(micro_batch, CF_INT, CF_RUN, R_POS, "sequences per forward/backward pass")             \
    X(grad_accum, CF_INT, CF_RUN, R_POS, "micro-batches accumulated per optimizer step")     \
    X(iters, CF_LONG, CF_RUN, R_POS, "optimizer steps")                                      \
    X(warmup, CF_LONG, CF_RUN, R_NONNEG, "linear learning-rate warmup steps")                \
    X(lr, CF_DOUBLE, CF_RUN, R_GT0, "peak learning rate")                                    \
    X(lr_min, CF_DOUBLE, CF_RUN, R_GE0, "learning rate at the end of the cosine decay")      \
    X(beta1, CF_DOUBLE, CF_RUN, R_UNIT, "AdamW first-moment decay")                          \
    X(beta2, CF_DOUBLE, CF_RUN, R_UNIT, "AdamW second-moment decay")                         \
    X(adam_eps, CF_DOUBLE, CF_RUN, R_GT0, "AdamW epsilon")                                   \
    X(weight_decay, CF_DOUBLE, CF_RUN, R_GE0, "AdamW decoupled weight decay")                \
    X(grad_clip, CF_DOUBLE, CF_RUN, R_GE0, "global gradient-norm clip (0: no clipping)")     \
    X(val_every, CF_LONG, CF_IO, R_NONNEG, "steps between evaluations (0: final only)")     \
    X(val_batches, CF_INT, CF_IO, R_POS, "validation batches per evaluation during training") \
    X(val_batches_final, CF_INT, CF_RUN, R_POS, "validation batches in the final evaluation") \
    X(val_seed, CF_LONG, CF_RUN, R_NONNEG, "seed of the validation sample, shared by all runs") \
    X(data, CF_PATH, CF_IO, R_NONE, "directory holding val.bin and train_*.bin")             \
    X(out, CF_PATH, CF_IO, R_NONE, "run directory")                                          \
    X(ckpt_every, CF_LONG, CF_IO, R_NONNEG, "steps between checkpoints (0: end and signals only)") \
    X(log_every, CF_LONG, CF_IO, R_POS, "steps between log lines")                           \
    X(stop_at, CF_LONG, CF_IO, R_NONNEG, "checkpoint and exit with status 75 once this many steps are done (0: off)") \
    X(threads, CF_INT, CF_IO, R_NONNEG, "OpenMP threads (0: OpenMP's default)")                \
    X(zero, CF_INT, CF_IO, R_ZERO, "ZeRO stage under MPI: 1 shards the AdamW state over the ranks (same training, less memory), 0 keeps it whole") \
    X(bucket_mb, CF_DOUBLE, CF_IO, R_GE0, "MiB of gradients per sum over ranks started during the backward (0: one sum after it)") \
    X(auto_micro_batch, CF_BOOL, CF_IO, R_NONE, "split the micro_batch x grad_accum sequences of a step over the ranks and into the largest micro-batch the GPU holds (no GPU: at most micro_batch); the same sequences a step") \
    X(peak_tflops, CF_DOUBLE, CF_IO, R_GE0, "one device's dense bf16 peak in TFLOP/s, for the MFU in the log and result.json (0: from the GPU's name, if known)") \
    X(profile_every, CF_LONG, CF_IO, R_NONNEG, "time each op of every this-many-th step, each op synchronised (that step runs slower and is left out of the steady tokens/s); the split by op goes to the log and result.json (0: off)")

#define AS_FIELD(k, t, r, rg, h) {#k, t, offsetof(Config, k), r, h},
#define AS_RANGE(k, t, r, rg, h) rg,

static const ConfigField FIELDS[] = {FIELD_LIST(AS_FIELD)};
static const Range RANGES[] = {FIELD_LIST(AS_RANGE)};
#define NFIELDS ((int)(sizeof FIELDS / sizeof FIELDS[0]))
_Static_assert(sizeof FIELDS / sizeof FIELDS[0] == sizeof RANGES / sizeof RANGES[0],
               "one range per field");

const ConfigField *config_fields(int *n) {
    if (n) *n = NFIELDS;
    return FIELDS;
}

static int field_index(const char *key) {
    for (int i = 0; i < NFIELDS; i++)
        if (strcmp(FIELDS[i].key, key) == 0) return i;
    return -1;
}

const ConfigField *config_field(const char *key) {
    int i = key ? field_index(key) : -1;
    return i < 0 ? NULL : &FIELDS[i];
}

static size_t field_size(const ConfigField *f) {
    switch (f->type) {
    case CF_INT:
    case CF_BOOL: return sizeof(int);
    case CF_LONG: return sizeof(long);
    case CF_DOUBLE: return sizeof(double);
    case CF_STR: return CFG_STR;
    case CF_PATH: return CFG_PATH;
    }
    return 0;
}

#define FPTR(c, f, T) ((T *)(void *)((char *)(c) + (f)->offset))
#define FCPTR(c, f, T) ((const T *)(const void *)((const char *)(c) + (f)->offset))

/* ------------------------------------------------------------- suggestions */

/* Levenshtein distance, capped: anything longer than the buffer is simply
 * "far", which is all a did-you-mean needs. */
static int edit_distance(const char *a, const char *b) {
    enum { MAXL = 63 };
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAXL || lb > MAXL) return INT_MAX;
    int prev[MAXL + 1], cur[MAXL + 1];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            int m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        memcpy(prev, cur, (lb + 1) * sizeof(int));
    }
    return prev[lb];
}

/* Closest field key within distance 2 (first in table order on ties), with
 * "config" as an extra candidate when suggesting flags. */
static const char *suggest_key(const char *key, int with_config) {
    const char *best = NULL;
    int bestd = 3;
    for (int i = 0; i < NFIELDS; i++) {
        int d = edit_distance(key, FIELDS[i].key);
        if (d < bestd) bestd = d, best = FIELDS[i].key;
    }
    if (with_config && edit_distance(key, "config") < bestd) best = "config";
    return best;
}

static const char *known_keys(void) {
    static char buf[1024];
    if (!buf[0]) {
        size_t at = 0;
        for (int i = 0; i < NFIELDS && at < sizeof buf; i++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? ", " : "",
                                   FIELDS[i].key);
    }
    return buf;
}

/* The suggestion comes before the list so it survives a short buffer. */
static int unknown_key(const char *key, char *err, size_t errlen) {
    const char *s = suggest_key(key, 0);
    if (s)
        return sg_fail(err, errlen, "unknown key '%s', did you mean '%s'? (known keys: %s)", key,
                      s, known_keys());
    return sg_fail(err, errlen, "unknown key '%s' (known keys: %s)", key, known_keys());
}

/* ------------------------------------------------------------------ tiers */

typedef struct {
    const char *name;
    int n_layer, n_head, n_embd, block_size, micro_batch, grad_accum;
    long iters, warmup;
    /* Every tier states these explicitly so a row reads as the whole story. */
    int vocab_size;
    long val_every;
    int val_batches, val_batches_final;
    long ckpt_every, log_every;
} Tier;

static const Tier TIERS[] = {
    /* name        L   H     D   ctx  mb acc   iters warmup  vocab  val_every vb vbf ckpt log */
    {"test",       2,  2,   32,   16,  4, 1,     20,    2,   512,    10,  2,  4,   10,  1},
    {"cpu-tiny",   4,  4,  128,  128,  8, 1,    300,   30, 50257,   100,  4, 16,  100, 10},
    {"cpu-small",  6,  6,  192,  256,  8, 2,   2000,  100, 50257,   250,  8, 32,  250, 10},
    {"10M",        6,  6,  384,  512, 64, 1,   6000,  200, 50257,   500, 16, 64, 1000, 10},
    {"50M",       10, 10,  640, 1024, 16, 2,  29000,  500, 50257,  1000, 16, 64, 1000, 10},
    {"124M",      12, 12,  768, 1024,  8, 4,  48800,  800, 50257,  1000, 16, 64, 1000, 10},
    {"350M",      24, 16, 1024, 1024,  8, 4, 177000, 2000, 50257,  2000, 16, 64, 1000, 10},
};
#define NTIERS ((int)(sizeof TIERS / sizeof TIERS[0]))

const char *config_tier_names(void) {
    return "test, cpu-tiny, cpu-small, 10M, 50M, 124M, 350M";
}

static const Tier *tier_find(const char *name) {
    for (int i = 0; i < NTIERS; i++)
        if (strcasecmp(TIERS[i].name, name) == 0) return &TIERS[i];
    return NULL;
}

static void set_str(char *dst, size_t cap, const char *src) {
    /* Zero the whole buffer so two configs holding the same text are
     * byte-identical (callers compare and hash configs with memcmp). */
    memset(dst, 0, cap);
    size_t n = strlen(src);
    memcpy(dst, src, n < cap ? n : cap - 1);
}

int config_from_tier(Config *c, const char *tier, char *err, size_t errlen) {
    const Tier *t = tier ? tier_find(tier) : NULL;
    if (!t)
        return sg_fail(err, errlen, "unknown tier '%s' (known tiers: %s)", tier ? tier : "(null)",
                      config_tier_names());
    memset(c, 0, sizeof *c);
    set_str(c->arm, sizeof c->arm, "baseline");
    c->vocab_size = 50257;
    c->ln_bias = 0;
    c->linear_bias = 0;
    c->gelu_tanh = 0;
    c->rotary_dims = 0;
    c->rotary_base = 10000;
    c->parallel_residual = 0;
    c->tie_embeddings = 1;
    c->gate_beta = 8;
    c->init_std = 0.02;
    c->seed = 0;
    c->lr = 6e-4;
    c->lr_min = 6e-5;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->adam_eps = 1e-8;
    c->weight_decay = 0.1;
    c->grad_clip = 1.0;
    c->val_batches = 16;
    c->val_batches_final = 64;
    c->val_seed = 1337;
    c->ckpt_every = 1000;
    c->log_every = 10;
    c->threads = 0;
    c->bucket_mb = 25;
    set_str(c->data, sizeof c->data, "data");

    set_str(c->tier, sizeof c->tier, t->name);
    c->n_layer = t->n_layer;
    c->n_head = t->n_head;
    c->n_embd = t->n_embd;
    c->block_size = t->block_size;
    c->micro_batch = t->micro_batch;
    c->grad_accum = t->grad_accum;
    c->iters = t->iters;
    c->warmup = t->warmup;
    c->vocab_size = t->vocab_size;
    c->val_every = t->val_every;
    c->val_batches = t->val_batches;
    c->val_batches_final = t->val_batches_final;
    c->ckpt_every = t->ckpt_every;
    c->log_every = t->log_every;
    return 0;
}

void config_print_tiers(FILE *f) {
    fprintf(f, "%-10s %6s %5s %5s %7s %7s %7s %6s\n", "tier", "layers", "heads", "width",
            "context", "batch", "iters", "warmup");
    for (int i = 0; i < NTIERS; i++) {
        const Tier *t = &TIERS[i];
        char batch[32];
        snprintf(batch, sizeof batch, "%dx%d", t->micro_batch, t->grad_accum);
        fprintf(f, "%-10s %6d %5d %5d %7d %7s %7ld %6ld\n", t->name, t->n_layer, t->n_head,
                t->n_embd, t->block_size, batch, t->iters, t->warmup);
    }
}

/* ---------------------------------------------------------------- parsing */

enum { P_OK = 0, P_BAD = -1, P_RANGE = -2 };

/* strtol accepts leading blanks; we do not, so " 5" is not silently "5". */
static int parse_long(const char *s, long *out) {
    if (!*s || isspace((unsigned char)*s)) return P_BAD;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end) return P_BAD;
    if (errno == ERANGE) return P_RANGE;
    *out = v;
    return P_OK;
}

static int parse_double(const char *s, double *out) {
    if (!*s || isspace((unsigned char)*s)) return P_BAD;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return P_BAD;
    /* strtod takes "nan" and "inf"; no field means anything by them. */
    if (!isfinite(v)) return errno == ERANGE ? P_RANGE : P_BAD;
    /* ERANGE on a finite result is underflow: the value would not be the one written. */
    if (errno == ERANGE) return P_RANGE;
    *out = v;
    return P_OK;
}

static int parse_bool(const char *s, int *out) {
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = 1, P_OK;
        if (strcasecmp(s, no[i]) == 0) return *out = 0, P_OK;
    }
    return P_BAD;
}

static const char *range_expect(Range r, ConfigType t) {
    switch (r) {
    case R_POS: return "a positive integer";
    case R_NONNEG: return "a non-negative integer";
    case R_VOCAB: return "an integer in [2, 65536] (shards store uint16 tokens)";
    case R_GT0: return "a number > 0";
    case R_GE0: return "a number >= 0";
    case R_UNIT: return "a number in [0, 1)";
    case R_ZERO: return "0 (off) or 1 (shard the AdamW state over the ranks)";
    case R_NONE: break;
    }
    switch (t) {
    case CF_INT:
    case CF_LONG: return "an integer";
    case CF_DOUBLE: return "a number";
    case CF_BOOL: return "a boolean (true/false, yes/no, on/off, 1/0)";
    default: return "a string";
    }
}

/* Written so NaN fails every test. */
static int range_ok(Range r, double v) {
    switch (r) {
    case R_POS: return v >= 1;
    case R_NONNEG: return v >= 0;
    case R_VOCAB: return v >= 2 && v <= 65536;
    case R_GT0: return v > 0;
    case R_GE0: return v >= 0;
    case R_UNIT: return v >= 0 && v < 1;
    case R_ZERO: return v == 0 || v == 1;
    case R_NONE: return 1;
    }
    return 0;
}

static int set_field(Config *c, int idx, const char *value, char *err, size_t errlen) {
    const ConfigField *f = &FIELDS[idx];
    Range r = RANGES[idx];
    const char *expect = range_expect(r, f->type);
    if (!value) value = "";

    switch (f->type) {
    case CF_INT:
    case CF_LONG: {
        long v;
        int rc = parse_long(value, &v);
        if (rc == P_OK && f->type == CF_INT && (v < INT_MIN || v > INT_MAX)) rc = P_RANGE;
        if (rc == P_RANGE)
            return sg_fail(err, errlen, "%s: expected %s, got '%s' (out of range)", f->key,
                          expect, value);
        if (rc != P_OK || !range_ok(r, (double)v))
            return sg_fail(err, errlen, "%s: expected %s, got '%s'", f->key, expect, value);
        if (f->type == CF_INT)
            *FPTR(c, f, int) = (int)v;
        else
            *FPTR(c, f, long) = v;
        return 0;
    }
    case CF_DOUBLE: {
        double v;
        int rc = parse_double(value, &v);
        if (rc == P_RANGE)
            return sg_fail(err, errlen, "%s: expected %s, got '%s' (out of range)", f->key,
                          expect, value);
        if (rc != P_OK || !range_ok(r, v))
            return sg_fail(err, errlen, "%s: expected %s, got '%s'", f->key, expect, value);
        *FPTR(c, f, double) = v;
        return 0;
    }
    case CF_BOOL: {
        int v;
        if (parse_bool(value, &v) != P_OK)
            return sg_fail(err, errlen, "%s: expected %s, got '%s'", f->key, expect, value);
        *FPTR(c, f, int) = v;
        return 0;
    }
    case CF_STR:
    case CF_PATH: {
        size_t cap = field_size(f), n = strlen(value);
        if (n >= cap)
            return sg_fail(err, errlen, "%s: value is too long (%zu bytes, at most %zu)", f->key,
                          n, cap - 1);
        /* Every run saves its config as YAML, which is UTF-8 text: a value
         * that is not could be written but never read back (a resume, an
         * analysis or an export of the run would then fail). */
        if (!utf8_valid(value, n))
            return sg_fail(err, errlen, "%s: '%s' is not valid UTF-8 (configs are saved as YAML, "
                          "which is UTF-8); use a name in UTF-8", f->key, value);
        if (strcmp(f->key, "arm") == 0 && !arm_find(value))
            return sg_fail(err, errlen, "arm: unknown arm '%s' (known arms: %s)", value,
                          arm_names());
        if (strcmp(f->key, "tier") == 0) {
            /* Only the name is recorded here: applying a tier resets every
             * field, which must happen where precedence says, not as a side
             * effect of setting a key. */
            const Tier *t = tier_find(value);
            if (!t)
                return sg_fail(err, errlen, "tier: unknown tier '%s' (known tiers: %s)", value,
                              config_tier_names());
            value = t->name;
        }
        set_str(FPTR(c, f, char), cap, value);
        return 0;
    }
    }
    return sg_fail(err, errlen, "%s: unsupported field type", f->key);
}

int config_set(Config *c, const char *key, const char *value, char *err, size_t errlen) {
    int idx = key ? field_index(key) : -1;
    if (idx < 0) return unknown_key(key ? key : "(null)", err, errlen);
    return set_field(c, idx, value, err, errlen);
}

/* ------------------------------------------------------------------- YAML */

/* libyaml reports reader errors (bad UTF-8, control characters) as a byte
 * offset without a mark; recover line and column from the text itself. */
static void offset_to_linecol(const char *text, size_t len, size_t off, size_t *line,
                              size_t *col) {
    size_t l = 1, c = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n')
            l++, c = 1;
        else
            c++;
    }
    *line = l, *col = c;
}

static int yaml_syntax_error(const yaml_parser_t *p, const char *text, size_t len,
                             const char *name, char *err, size_t errlen) {
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_MEMORY_ERROR) return sg_fail(err, errlen, "%s: out of memory", name);
    if (p->error == YAML_READER_ERROR) {
        size_t line, col;
        offset_to_linecol(text, len, p->problem_offset, &line, &col);
        return sg_fail(err, errlen, "%s:%zu:%zu: %s", name, line, col, problem);
    }
    size_t line = p->problem_mark.line + 1, col = p->problem_mark.column + 1;
    if (p->context)
        return sg_fail(err, errlen, "%s:%zu:%zu: %s (%s started at %zu:%zu)", name, line, col,
                      problem, p->context, (size_t)p->context_mark.line + 1,
                      (size_t)p->context_mark.column + 1);
    return sg_fail(err, errlen, "%s:%zu:%zu: %s", name, line, col, problem);
}

static const char *event_kind(yaml_event_type_t t) {
    switch (t) {
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_ALIAS_EVENT: return "an alias";
    default: return "a scalar";
    }
}

static int is_null_scalar(const yaml_event_t *ev) {
    const char *v = (const char *)ev->data.scalar.value;
    return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
            strcmp(v, "NULL") == 0);
}

int config_load_yaml_buf(Config *c, const char *text, size_t len, const char *name,
                         char *err, size_t errlen) {
    if (!name) name = "(buffer)";
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return sg_fail(err, errlen, "%s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)(text ? text : ""), text ? len : 0);

    enum { TOP, KEY, VALUE, DONE } state = TOP;
    int rc = 0, ndocs = 0, nkeys = 0, cur = -1;
    size_t seen_line[NFIELDS] = {0}; /* 0: not seen; else 1-based line of first use */
    char sub[2048];

    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_syntax_error(&p, text, len, name, err, errlen);
            break;
        }
        yaml_event_type_t t = ev.type;
        size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
        int stop = 0;

        if (t == YAML_STREAM_END_EVENT) {
            stop = 1;
        } else if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            /* nothing */
        } else if (t == YAML_DOCUMENT_START_EVENT) {
            if (++ndocs > 1)
                rc = sg_fail(err, errlen, "%s:%zu:%zu: only one YAML document is allowed", name,
                            line, col);
        } else if (state == TOP) {
            if (t == YAML_MAPPING_START_EVENT)
                state = KEY;
            else if (t == YAML_SCALAR_EVENT && is_null_scalar(&ev))
                state = DONE; /* "---" alone: an empty document changes nothing */
            else
                rc = sg_fail(err, errlen, "%s:%zu:%zu: expected a mapping of key: value, got %s",
                            name, line, col, event_kind(t));
        } else if (state == KEY) {
            if (t == YAML_MAPPING_END_EVENT) {
                state = DONE;
            } else if (t != YAML_SCALAR_EVENT) {
                rc = sg_fail(err, errlen, "%s:%zu:%zu: keys must be scalars, got %s", name, line,
                            col, event_kind(t));
            } else {
                const char *key = (const char *)ev.data.scalar.value;
                cur = strlen(key) == ev.data.scalar.length ? field_index(key) : -1;
                if (cur < 0) {
                    unknown_key(key, sub, sizeof sub);
                    rc = sg_fail(err, errlen, "%s:%zu:%zu: %s", name, line, col, sub);
                } else if (seen_line[cur]) {
                    rc = sg_fail(err, errlen, "%s:%zu:%zu: duplicate key '%s' (first at line %zu)",
                                name, line, col, key, seen_line[cur]);
                } else if (cur == field_index("tier") && nkeys > 0) {
                    /* Applying a tier resets every field; after other keys it
                     * would silently discard them. */
                    rc = sg_fail(err, errlen,
                                "%s:%zu:%zu: 'tier' must be the first key (it resets every "
                                "field set before it)",
                                name, line, col);
                } else {
                    seen_line[cur] = line;
                    nkeys++;
                    state = VALUE;
                }
            }
        } else if (state == VALUE) {
            if (t != YAML_SCALAR_EVENT) {
                rc = sg_fail(err, errlen,
                            "%s:%zu:%zu: '%s' must be a scalar value, got %s (nested values "
                            "are not allowed)",
                            name, line, col, FIELDS[cur].key, event_kind(t));
            } else {
                const char *v = (const char *)ev.data.scalar.value;
                /* a "\0" escape would silently cut the value short */
                int r = strlen(v) != ev.data.scalar.length
                            ? sg_fail(sub, sizeof sub, "%s: the value holds a NUL character (\\0)",
                                      FIELDS[cur].key)
                        : strcmp(FIELDS[cur].key, "tier") == 0
                            ? config_from_tier(c, v, sub, sizeof sub)
                            : set_field(c, cur, v, sub, sizeof sub);
                if (r)
                    rc = sg_fail(err, errlen, "%s:%zu:%zu: %s", name, line, col, sub);
                state = KEY;
            }
        }
        yaml_event_delete(&ev);
        if (rc || stop) break;
    }
    yaml_parser_delete(&p);
    return rc;
}

int config_load_yaml(Config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return sg_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    /* Read to EOF rather than trusting a size: works for pipes and /dev/stdin. */
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = 0;
    for (;;) {
        if (!buf) {
            rc = sg_fail(err, errlen, "%s: out of memory", path);
            break;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (ferror(f)) {
            rc = sg_fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        if (feof(f)) break;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!rc) rc = config_load_yaml_buf(c, buf, len, path, err, errlen);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------ command line */

enum { FLAG_FIELD, FLAG_TIER, FLAG_CONFIG };

typedef struct {
    int kind;
    int field;          /* FLAG_FIELD: index into FIELDS */
    const char *value;
} Flag;

static const char *HELP_HINT = "run 'sgtrain train --help'";

/* Parses the flag at argv[*i] and advances *i past it and its value. */
static int next_flag(int argc, char **argv, int *i, Flag *fl, char *err, size_t errlen) {
    const char *arg = argv[*i];
    if (strncmp(arg, "--", 2) != 0)
        return sg_fail(err, errlen, "unexpected argument '%s' (options are --KEY VALUE); %s", arg,
                      HELP_HINT);
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);

    char key[64];
    int known = nlen > 0 && nlen < sizeof key;
    if (known) {
        for (size_t k = 0; k < nlen; k++) key[k] = name[k] == '-' ? '_' : name[k];
        key[nlen] = 0;
        if (strcmp(key, "config") == 0)
            fl->kind = FLAG_CONFIG;
        else if (strcmp(key, "tier") == 0)
            fl->kind = FLAG_TIER;
        else if ((fl->field = field_index(key)) >= 0)
            fl->kind = FLAG_FIELD;
        else
            known = 0;
    }
    if (!known) {
        const char *s = (nlen > 0 && nlen < sizeof key) ? suggest_key(key, 1) : NULL;
        if (s) {
            /* Answer in the user's spelling: dashes if they used dashes. */
            char sug[64];
            int dashes = memchr(name, '-', nlen) != NULL;
            size_t k = 0;
            for (; s[k] && k + 1 < sizeof sug; k++) sug[k] = (dashes && s[k] == '_') ? '-' : s[k];
            sug[k] = 0;
            return sg_fail(err, errlen, "unknown flag '--%.*s' (did you mean '--%s'?); %s",
                          (int)nlen, name, sug, HELP_HINT);
        }
        return sg_fail(err, errlen, "unknown flag '--%.*s'; %s", (int)nlen, name, HELP_HINT);
    }
    if (eq) {
        fl->value = eq + 1;
        (*i)++;
        return 0;
    }
    /* A following "--x" is taken as the next flag, not as this one's value:
     * "--out --lr 1e-3" is far more likely a forgotten value than a path. */
    if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0)
        return sg_fail(err, errlen, "flag '%s' is missing its value (%s VALUE or %s=VALUE)", arg,
                      arg, arg);
    fl->value = argv[*i + 1];
    *i += 2;
    return 0;
}

int config_from_args(Config *c, int argc, char **argv, char *err, size_t errlen) {
    Flag fl = {0};
    /* Check the whole command line before applying anything, so a typo late
     * on is reported before a slow or confusing error from an earlier file. */
    const char *tier = NULL;
    for (int i = 0; i < argc;) {
        if (next_flag(argc, argv, &i, &fl, err, errlen)) return -1;
        if (fl.kind == FLAG_TIER) tier = fl.value; /* the last --tier wins */
    }
    if (config_from_tier(c, tier ? tier : "cpu-tiny", err, errlen)) return -1;
    for (int i = 0; i < argc;) {
        next_flag(argc, argv, &i, &fl, NULL, 0);
        if (fl.kind == FLAG_CONFIG && config_load_yaml(c, fl.value, err, errlen)) return -1;
    }
    for (int i = 0; i < argc;) {
        next_flag(argc, argv, &i, &fl, NULL, 0);
        if (fl.kind == FLAG_FIELD && set_field(c, fl.field, fl.value, err, errlen)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- validation */

int config_validate(const Config *c, char *err, size_t errlen) {
    /* Re-check every field's own range: a Config may come from code or a
     * checkpoint rather than config_set, and n_head must be non-zero before
     * it is used as a divisor below. */
    for (int i = 0; i < NFIELDS; i++) {
        const ConfigField *f = &FIELDS[i];
        double v;
        if (f->type == CF_INT)
            v = *FCPTR(c, f, int);
        else if (f->type == CF_LONG)
            v = (double)*FCPTR(c, f, long);
        else if (f->type == CF_DOUBLE)
            v = *FCPTR(c, f, double);
        else
            continue;
        if (!range_ok(RANGES[i], v) || (f->type == CF_DOUBLE && !isfinite(v)))
            return sg_fail(err, errlen, "%s: expected %s, got '%.17g'", f->key,
                          range_expect(RANGES[i], f->type), v);
    }
    if (!arm_find(c->arm))
        return sg_fail(err, errlen, "arm: unknown arm '%s' (known arms: %s)", c->arm,
                      arm_names());
    if (c->n_embd % c->n_head != 0)
        return sg_fail(err, errlen, "n_embd %d is not divisible by n_head %d", c->n_embd,
                      c->n_head);
    if (c->vocab_sha256[0] && strcmp(c->vocab_sha256, "unknown") &&
        (strlen(c->vocab_sha256) != 64 || strspn(c->vocab_sha256, "0123456789abcdef") != 64))
        return sg_fail(err, errlen, "vocab_sha256: expected 64 lower-case hex digits, \"unknown\" or nothing, got '%s'",
                      c->vocab_sha256);
    if (c->rotary_dims % 2 || c->rotary_dims > c->n_embd / c->n_head)
        return sg_fail(err, errlen, "rotary_dims %d must be even and at most the head dim %d (n_embd / n_head)",
                      c->rotary_dims, c->n_embd / c->n_head);
    if (c->warmup >= c->iters)
        return sg_fail(err, errlen, "warmup %ld must be less than iters %ld", c->warmup,
                      c->iters);
    if (c->lr_min > c->lr)
        return sg_fail(err, errlen, "lr_min %g must not exceed lr %g", c->lr_min, c->lr);
    return 0;
}

/* ----------------------------------------------------------------- output */

/* Shortest of %.15g..%.17g that reads back as the same double: as exact as
 * %.17g, but 6e-4 is written "0.0006", not "0.00059999999999999995". */
static void fmt_double(char *buf, size_t n, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* A double-quoted YAML scalar that reads back as exactly S (valid UTF-8:
 * set_field sees to it).  Escaped: what YAML would fold or refuse in a
 * file, namely the C0 and C1 controls, DEL, the line breaks U+0085, U+2028
 * and U+2029 (\N, \L, \P), the byte-order mark and the noncharacters
 * U+FFFE and U+FFFF; everything else is written as it is. */
static void yaml_quote(FILE *f, const char *s) {
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, n = strlen(s); i < n;) {
        uint32_t cp;
        int len = utf8_char(p + i, n - i, &cp);
        if (!len) len = 1, cp = p[i]; /* not reached for a set_field value */
        switch (cp) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case 0x85: fputs("\\N", f); break;
        case 0x2028: fputs("\\L", f); break;
        case 0x2029: fputs("\\P", f); break;
        default:
            if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
                fprintf(f, "\\x%02x", (unsigned)cp);
            else if (cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
                fprintf(f, "\\u%04x", (unsigned)cp);
            else
                fwrite(p + i, 1, (size_t)len, f);
        }
        i += (size_t)len;
    }
    fputc('"', f);
}

/* Plain-text value, as diff messages show it. */
static void fmt_value(const Config *c, const ConfigField *f, char *buf, size_t n) {
    switch (f->type) {
    case CF_INT: snprintf(buf, n, "%d", *FCPTR(c, f, int)); break;
    case CF_LONG: snprintf(buf, n, "%ld", *FCPTR(c, f, long)); break;
    case CF_DOUBLE: fmt_double(buf, n, *FCPTR(c, f, double)); break;
    case CF_BOOL: snprintf(buf, n, "%s", *FCPTR(c, f, int) ? "true" : "false"); break;
    case CF_STR:
    case CF_PATH: snprintf(buf, n, "%.*s", (int)field_size(f), FCPTR(c, f, char)); break;
    }
}

int config_write_yaml(const Config *c, FILE *f) {
    char buf[64];
    fputs("# sinkgate resolved config\n", f);
    for (int i = 0; i < NFIELDS; i++) {
        const ConfigField *fd = &FIELDS[i];
        /* A Config never given a tier cannot name one; loading it then
         * leaves the tier of whatever it is loaded onto. */
        if (fd->offset == offsetof(Config, tier) && !c->tier[0]) continue;
        fprintf(f, "%s: ", fd->key);
        if (fd->type == CF_STR || fd->type == CF_PATH) {
            yaml_quote(f, FCPTR(c, fd, char));
        } else {
            fmt_value(c, fd, buf, sizeof buf);
            fputs(buf, f);
        }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

int config_write_json(const Config *c, FILE *f) {
    char buf[64];
    fputc('{', f);
    for (int i = 0; i < NFIELDS; i++) {
        const ConfigField *fd = &FIELDS[i];
        fprintf(f, "%s\"%s\":", i ? "," : "", fd->key);
        if (fd->type == CF_STR || fd->type == CF_PATH)
            json_put_string(f, FCPTR(c, fd, char));
        else if (fd->type == CF_DOUBLE && !isfinite(*FCPTR(c, fd, double)))
            fputs("null", f); /* JSON has no inf/nan */
        else {
            fmt_value(c, fd, buf, sizeof buf);
            fputs(buf, f);
        }
    }
    fputc('}', f);
    return ferror(f) ? -1 : 0;
}

int config_to_yaml_string(const Config *c, char **out) {
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return -1;
    int rc = config_write_yaml(c, f);
    if (fclose(f) != 0) rc = -1;
    if (rc) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

static int field_equal(const Config *a, const Config *b, const ConfigField *f) {
    switch (f->type) {
    case CF_INT:
    case CF_BOOL: return *FCPTR(a, f, int) == *FCPTR(b, f, int);
    case CF_LONG: return *FCPTR(a, f, long) == *FCPTR(b, f, long);
    case CF_DOUBLE: {
        double x = *FCPTR(a, f, double), y = *FCPTR(b, f, double);
        return x == y || (isnan(x) && isnan(y));
    }
    case CF_STR:
    case CF_PATH: return strncmp(FCPTR(a, f, char), FCPTR(b, f, char), field_size(f)) == 0;
    }
    return 1;
}

int config_diff_run(const Config *a, const Config *b, char *out, size_t outlen) {
    int count = 0;
    size_t at = 0;
    if (out && outlen) out[0] = 0;
    for (int i = 0; i < NFIELDS; i++) {
        const ConfigField *f = &FIELDS[i];
        if (f->role != CF_RUN || field_equal(a, b, f)) continue;
        char va[CFG_PATH + 1], vb[CFG_PATH + 1];
        fmt_value(a, f, va, sizeof va);
        fmt_value(b, f, vb, sizeof vb);
        if (out && at < outlen) {
            int w = snprintf(out + at, outlen - at, "%s%s: %s -> %s", count ? "; " : "", f->key,
                             va, vb);
            at = w < 0 ? outlen : at + (size_t)w;
        }
        count++;
    }
    return count;
}
