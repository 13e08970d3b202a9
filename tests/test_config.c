#include "check.h"
#include "config.h"

#include <json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/sg_test_config_XXXXXX";
static char files[32][256];
static int nfiles;

/* Every file lives in the mkdtemp directory and is removed at the end. */
static const char *write_file(const char *name, const char *text) {
    char *path = files[nfiles++];
    snprintf(path, sizeof files[0], "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(100);
    }
    fputs(text, f);
    fclose(f);
    return path;
}

static void cleanup(void) {
    for (int i = 0; i < nfiles; i++) unlink(files[i]);
    rmdir(dir);
}

/* An error must be reported (-1) and contain the fragment. */
#define CHECK_ERR(rc, err, frag)                                                          \
    CHECK((rc) == -1 && strstr((err), (frag)) != NULL, "want error containing \"%s\", got rc %d \"%s\"", \
          (frag), (rc), (err))

static size_t type_size(ConfigType t) {
    switch (t) {
    case CF_INT:
    case CF_BOOL: return sizeof(int);
    case CF_LONG: return sizeof(long);
    case CF_DOUBLE: return sizeof(double);
    case CF_STR: return CFG_STR;
    case CF_PATH: return CFG_PATH;
    }
    return 0;
}

static void test_fields(void) {
    int n = 0;
    const ConfigField *f = config_fields(&n);
    CHECK(n == 44, "44 fields, got %d", n);

    /* Every byte of Config except padding belongs to exactly one field. */
    unsigned char owner[sizeof(Config)];
    memset(owner, 0, sizeof owner);
    int overlap = 0;
    for (int i = 0; i < n; i++) {
        CHECK(f[i].help && f[i].help[0], "%s has help", f[i].key);
        CHECK(config_field(f[i].key) == &f[i], "config_field(%s)", f[i].key);
        size_t sz = type_size(f[i].type);
        CHECK(f[i].offset + sz <= sizeof(Config), "%s inside Config", f[i].key);
        for (size_t b = f[i].offset; b < f[i].offset + sz && b < sizeof owner; b++) {
            if (owner[b]) overlap++;
            owner[b] = 1;
        }
    }
    size_t uncovered = 0;
    for (size_t b = 0; b < sizeof owner; b++) uncovered += !owner[b];
    CHECK(overlap == 0, "no two fields overlap (%d bytes do)", overlap);
    /* padding: two 4-byte gaps, each an odd run of ints before a double
     * (rotary_dims .. tie_embeddings, auto_micro_batch) */
    CHECK(uncovered <= 8, "every member has a field: %zu bytes uncovered", uncovered);

    CHECK(f[0].offset == offsetof(Config, tier), "tier is the first row");
    CHECK(config_field("nope") == NULL, "unknown key -> NULL");
    CHECK(config_field("micro_batch")->type == CF_INT, "micro_batch int");
    CHECK(config_field("iters")->type == CF_LONG, "iters long");
    CHECK(config_field("lr")->type == CF_DOUBLE, "lr double");
    CHECK(config_field("ln_bias")->type == CF_BOOL, "ln_bias bool");
    CHECK(config_field("linear_bias")->type == CF_BOOL && config_field("gelu_tanh")->type == CF_BOOL, "linear_bias, gelu_tanh bool");
    CHECK(config_field("out")->type == CF_PATH, "out path");
    CHECK(config_field("arm")->type == CF_STR, "arm str");
    CHECK(config_field("n_embd")->offset == offsetof(Config, n_embd), "n_embd offset");

    /* Fields that do not change what is trained (and may change on resume). */
    const char *io[] = {"data", "out", "ckpt_every", "log_every", "threads", "val_every", "val_batches", "stop_at", "zero",
                        "bucket_mb", "auto_micro_batch", "peak_tflops", "profile_every"};
    int nio = 0;
    for (int i = 0; i < n; i++) {
        int is_io = 0;
        for (int k = 0; k < 13; k++) is_io |= strcmp(f[i].key, io[k]) == 0;
        nio += is_io;
        CHECK(f[i].role == (is_io ? CF_IO : CF_RUN), "%s role", f[i].key);
    }
    CHECK(nio == 13, "thirteen io fields");
}

static void check_common(const Config *c, const char *tier) {
    CHECK(strcmp(c->arm, "baseline") == 0, "%s arm", tier);
    CHECK(c->ln_bias == 0, "%s ln_bias", tier);
    CHECK(c->linear_bias == 0 && c->gelu_tanh == 0, "%s: no linear biases, the erf GELU (the study's model)", tier);
    CHECK(c->rotary_dims == 0 && c->rotary_base == 10000 && c->parallel_residual == 0 && c->tie_embeddings == 1,
          "%s: learned positions, a sequential block, the LM head tied (the study's model)", tier);
    CHECK(c->gate_beta == 8 && c->init_std == 0.02, "%s gate_beta/init_std", tier);
    CHECK(c->seed == 0, "%s seed", tier);
    CHECK(c->lr == 6e-4 && c->lr_min == 6e-5, "%s lr", tier);
    CHECK(c->beta1 == 0.9 && c->beta2 == 0.95 && c->adam_eps == 1e-8, "%s adam", tier);
    CHECK(c->weight_decay == 0.1 && c->grad_clip == 1.0, "%s wd/clip", tier);
    CHECK(c->val_seed == 1337 && c->threads == 0, "%s val_seed/threads", tier);
    CHECK(strcmp(c->data, "data") == 0 && c->out[0] == 0, "%s data/out", tier);
}

static void check_tier(const char *name, int L, int H, int D, int T, int mb, int acc,
                       long iters, long warmup, long val_every) {
    Config c;
    char err[512] = "";
    int rc = config_from_tier(&c, name, err, sizeof err);
    CHECK(rc == 0, "tier %s: %s", name, err);
    CHECK(strcmp(c.tier, name) == 0, "tier name %s", c.tier);
    CHECK(c.n_layer == L && c.n_head == H && c.n_embd == D && c.block_size == T,
          "%s shape %d %d %d %d", name, c.n_layer, c.n_head, c.n_embd, c.block_size);
    CHECK(c.micro_batch == mb && c.grad_accum == acc, "%s batch %dx%d", name, c.micro_batch,
          c.grad_accum);
    CHECK(c.iters == iters && c.warmup == warmup, "%s iters %ld warmup %ld", name, c.iters,
          c.warmup);
    CHECK(c.val_every == val_every, "%s val_every %ld", name, c.val_every);
    check_common(&c, name);
    CHECK(config_validate(&c, err, sizeof err) == 0, "%s validates: %s", name, err);
}

static void test_tiers(void) {
    check_tier("10M", 6, 6, 384, 512, 64, 1, 6000, 200, 500);
    check_tier("50M", 10, 10, 640, 1024, 16, 2, 29000, 500, 1000);
    check_tier("124M", 12, 12, 768, 1024, 8, 4, 48800, 800, 1000);
    check_tier("350M", 24, 16, 1024, 1024, 8, 4, 177000, 2000, 2000);
    check_tier("test", 2, 2, 32, 16, 4, 1, 20, 2, 10);
    check_tier("cpu-tiny", 4, 4, 128, 128, 8, 1, 300, 30, 100);
    check_tier("cpu-small", 6, 6, 192, 256, 8, 2, 2000, 100, 250);

    Config c;
    char err[512] = "";
    config_from_tier(&c, "124M", err, sizeof err);
    CHECK(c.vocab_size == 50257 && c.val_batches == 16 && c.val_batches_final == 64 &&
              c.ckpt_every == 1000 && c.log_every == 10,
          "124M common io/eval defaults");
    config_from_tier(&c, "test", err, sizeof err);
    CHECK(c.vocab_size == 512 && c.val_batches == 2 && c.val_batches_final == 4 &&
              c.ckpt_every == 10 && c.log_every == 1,
          "test overrides");
    config_from_tier(&c, "cpu-tiny", err, sizeof err);
    CHECK(c.vocab_size == 50257 && c.val_batches == 4 && c.val_batches_final == 16 &&
              c.ckpt_every == 100 && c.log_every == 10,
          "cpu-tiny overrides");
    config_from_tier(&c, "cpu-small", err, sizeof err);
    CHECK(c.val_batches == 8 && c.val_batches_final == 32 && c.ckpt_every == 250,
          "cpu-small overrides");

    /* Case-insensitive, and the canonical name is recorded. */
    CHECK(config_from_tier(&c, "10m", err, sizeof err) == 0 && strcmp(c.tier, "10M") == 0,
          "10m -> 10M (%s)", c.tier);
    CHECK(config_from_tier(&c, "CPU-Tiny", err, sizeof err) == 0 &&
              strcmp(c.tier, "cpu-tiny") == 0,
          "CPU-Tiny -> cpu-tiny");

    /* Every listed name loads. */
    char names[256];
    snprintf(names, sizeof names, "%s", config_tier_names());
    int count = 0;
    for (char *save = NULL, *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        CHECK(config_from_tier(&c, t, err, sizeof err) == 0, "listed tier %s loads", t);
        count++;
    }
    CHECK(count == 7, "seven tiers listed, got %d", count);

    int rc = config_from_tier(&c, "1B", err, sizeof err);
    CHECK_ERR(rc, err, "unknown tier '1B'");
    CHECK_ERR(rc, err, "known tiers: test, cpu-tiny, cpu-small, 10M, 50M, 124M, 350M");

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_tiers(f);
    fclose(f);
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    CHECK(lines == 8, "header + 7 tier lines, got %d", lines);
    CHECK(strstr(buf, "124M") && strstr(buf, "8x4") && strstr(buf, "177000"), "table: %s", buf);
    /* Aligned: every line is as long as the header. */
    size_t w = strcspn(buf, "\n");
    int aligned = 1;
    for (char *p = buf; *p; p += strcspn(p, "\n") + 1) aligned &= strcspn(p, "\n") == w;
    CHECK(aligned, "table columns aligned:\n%s", buf);
    free(buf);
}

static void test_set(void) {
    Config c;
    char err[1024] = "";
    config_from_tier(&c, "test", err, sizeof err);

    CHECK(config_set(&c, "n_head", "4", err, sizeof err) == 0 && c.n_head == 4, "n_head 4");
    CHECK(config_set(&c, "iters", "+123", err, sizeof err) == 0 && c.iters == 123, "iters +123");
    CHECK(config_set(&c, "lr", "3e-4", err, sizeof err) == 0 && c.lr == 3e-4, "lr 3e-4");
    CHECK(config_set(&c, "out", "runs/a b", err, sizeof err) == 0 &&
              strcmp(c.out, "runs/a b") == 0,
          "out");
    CHECK(config_set(&c, "arm", "normgate", err, sizeof err) == 0 &&
              strcmp(c.arm, "normgate") == 0,
          "arm normgate");
    /* Text fields must be UTF-8: a run saves its config as YAML, which
     * could not hold anything else, so the run could never be resumed. */
    const char *not_utf8[] = {"runs/\xff", "runs/\xc0\xaf", "runs/\xed\xa0\x80", "runs/\xe2\x80",
                              "runs/\xf4\x90\x80\x80"};
    for (int i = 0; i < 5; i++) {
        err[0] = 0;
        CHECK(config_set(&c, "out", not_utf8[i], err, sizeof err) != 0 && strstr(err, "out: '") &&
                  strstr(err, "is not valid UTF-8") && strcmp(c.out, "runs/a b") == 0,
              "invalid UTF-8 %d refused, out unchanged: %s", i, err);
    }
    CHECK(config_set(&c, "data", "d/\xf0\x9f\x98\x80 \xe2\x80\xa8", err, sizeof err) == 0,
          "four-byte and line-separator characters are UTF-8: %s", err);
    const char *yes[] = {"true", "yes", "on", "1", "TRUE", "On"};
    const char *no[] = {"false", "no", "off", "0", "False", "NO"};
    for (int i = 0; i < 6; i++) {
        c.ln_bias = 0;
        CHECK(config_set(&c, "ln_bias", yes[i], err, sizeof err) == 0 && c.ln_bias == 1,
              "ln_bias %s", yes[i]);
        CHECK(config_set(&c, "ln_bias", no[i], err, sizeof err) == 0 && c.ln_bias == 0,
              "ln_bias %s", no[i]);
    }
    /* Boundaries that are allowed. */
    CHECK(config_set(&c, "vocab_size", "65536", err, sizeof err) == 0, "vocab 65536");
    CHECK(config_set(&c, "vocab_size", "2", err, sizeof err) == 0, "vocab 2");
    CHECK(config_set(&c, "lr_min", "0", err, sizeof err) == 0, "lr_min 0");
    CHECK(config_set(&c, "beta2", "0", err, sizeof err) == 0, "beta2 0");
    CHECK(config_set(&c, "grad_clip", "0", err, sizeof err) == 0, "grad_clip 0");
    CHECK(config_set(&c, "warmup", "0", err, sizeof err) == 0, "warmup 0");
    CHECK(config_set(&c, "val_every", "0", err, sizeof err) == 0, "val_every 0");
    CHECK(config_set(&c, "ckpt_every", "0", err, sizeof err) == 0, "ckpt_every 0");
    CHECK(config_set(&c, "threads", "0", err, sizeof err) == 0, "threads 0");
    CHECK(config_set(&c, "seed", "9223372036854775807", err, sizeof err) == 0 &&
              c.seed == 9223372036854775807L,
          "seed LONG_MAX");
    CHECK(config_set(&c, "n_layer", "2147483647", err, sizeof err) == 0, "n_layer INT_MAX");

    /* Setting tier records the (canonical) name and applies nothing. */
    config_from_tier(&c, "test", err, sizeof err);
    CHECK(config_set(&c, "tier", "124m", err, sizeof err) == 0 && strcmp(c.tier, "124M") == 0 &&
              c.n_layer == 2,
          "tier only recorded");

    struct {
        const char *key, *value, *frag;
    } bad[] = {
        {"n_head", "x", "n_head: expected a positive integer, got 'x'"},
        {"n_head", "", "n_head: expected a positive integer, got ''"},
        {"n_head", "4x", "got '4x'"},
        {"n_head", " 4", "got ' 4'"},
        {"n_head", "4 ", "got '4 '"},
        {"n_head", "4.0", "got '4.0'"},
        {"n_head", "3000000000", "n_head: expected a positive integer, got '3000000000' (out of range)"},
        {"n_head", "-3000000000", "(out of range)"},
        {"iters", "99999999999999999999", "iters: expected a positive integer, got '99999999999999999999' (out of range)"},
        {"n_layer", "0", "n_layer: expected a positive integer, got '0'"},
        {"n_embd", "-1", "n_embd: expected a positive integer"},
        {"block_size", "0", "block_size: expected a positive integer"},
        {"micro_batch", "0", "micro_batch: expected a positive integer"},
        {"grad_accum", "0", "grad_accum: expected a positive integer"},
        {"iters", "0", "iters: expected a positive integer"},
        {"val_batches", "0", "val_batches: expected a positive integer"},
        {"val_batches_final", "0", "val_batches_final: expected a positive integer"},
        {"vocab_size", "65537", "vocab_size: expected an integer in [2, 65536]"},
        {"vocab_size", "1", "got '1'"},
        {"warmup", "-1", "warmup: expected a non-negative integer, got '-1'"},
        {"seed", "-5", "seed: expected a non-negative integer"},
        {"val_every", "-1", "val_every: expected a non-negative integer"},
        {"ckpt_every", "-1", "ckpt_every: expected a non-negative integer"},
        {"log_every", "0", "log_every: expected a positive integer"},
        {"threads", "-2", "threads: expected a non-negative integer"},
        {"lr", "0", "lr: expected a number > 0, got '0'"},
        {"lr", "fast", "lr: expected a number > 0, got 'fast'"},
        {"lr", "nan", "got 'nan'"},
        {"lr", "inf", "got 'inf'"},
        {"lr", "1e999", "(out of range)"},
        {"lr", "1e-400", "(out of range)"},
        {"lr_min", "-1e-5", "lr_min: expected a number >= 0"},
        {"beta1", "1", "beta1: expected a number in [0, 1), got '1'"},
        {"beta2", "-0.1", "beta2: expected a number in [0, 1)"},
        {"adam_eps", "0", "adam_eps: expected a number > 0"},
        {"weight_decay", "-0.1", "weight_decay: expected a number >= 0"},
        {"grad_clip", "-1", "grad_clip: expected a number >= 0"},
        {"gate_beta", "0", "gate_beta: expected a number > 0"},
        {"init_std", "-0.02", "init_std: expected a number > 0"},
        {"ln_bias", "maybe", "ln_bias: expected a boolean (true/false, yes/no, on/off, 1/0), got 'maybe'"},
        {"auto_micro_batch", "2", "auto_micro_batch: expected a boolean (true/false, yes/no, on/off, 1/0), got '2'"},
        {"peak_tflops", "-989", "peak_tflops: expected a number >= 0, got '-989'"},
        {"peak_tflops", "nan", "peak_tflops: expected a number >= 0, got 'nan'"},
        {"peak_tflops", "H200", "peak_tflops: expected a number >= 0, got 'H200'"},
        {"profile_every", "-5", "profile_every: expected a non-negative integer, got '-5'"},
        {"profile_every", "2.5", "profile_every: expected a non-negative integer, got '2.5'"},
        {"ln_bias", "2", "got '2'"},
        {"arm", "sinkhole", "arm: unknown arm 'sinkhole' (known arms: baseline, offbyone"},
        {"tier", "1B", "tier: unknown tier '1B' (known tiers: test, cpu-tiny"},
        {"n_heads", "4", "unknown key 'n_heads', did you mean 'n_head'?"},
        {"zzzzzzzz", "4", "unknown key 'zzzzzzzz' (known keys: tier, arm, n_layer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Config before;
        config_from_tier(&c, "test", err, sizeof err);
        before = c;
        err[0] = 0;
        int rc = config_set(&c, bad[i].key, bad[i].value, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].frag);
        CHECK(memcmp(&before, &c, sizeof c) == 0, "failed set of %s leaves Config alone",
              bad[i].key);
    }

    char longv[CFG_PATH + 10];
    memset(longv, 'a', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    CHECK_ERR(config_set(&c, "out", longv, err, sizeof err), err,
              "out: value is too long (1033 bytes, at most 1023)");
    longv[CFG_PATH - 1] = 0; /* exactly fits */
    CHECK(config_set(&c, "out", longv, err, sizeof err) == 0 && strlen(c.out) == CFG_PATH - 1,
          "1023-byte path fits");
    longv[CFG_STR] = 0;
    CHECK_ERR(config_set(&c, "arm", longv, err, sizeof err), err, "arm: value is too long");

    /* Small and absent error buffers are safe. */
    char tiny[8];
    CHECK(config_set(&c, "n_head", "x", tiny, sizeof tiny) == -1 && strlen(tiny) == 7,
          "truncated error");
    CHECK(config_set(&c, "n_head", "x", NULL, 0) == -1, "NULL err buffer");
}

/* Zeroed first so the memcmp also covers padding and the tails of strings. */
static void load_zeroed(Config *c, const char *text, int *rc, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    *rc = config_load_yaml_buf(c, text, strlen(text), "mem", err, errlen);
}

static void test_yaml_roundtrip(void) {
    char err[2048] = "";
    const char *names[] = {"test", "cpu-tiny", "cpu-small", "10M", "50M", "124M", "350M"};
    for (int i = 0; i < 7; i++) {
        Config a, b;
        config_from_tier(&a, names[i], err, sizeof err);
        char *text = NULL;
        CHECK(config_to_yaml_string(&a, &text) == 0 && text, "to_yaml_string");
        int rc;
        load_zeroed(&b, text, &rc, err, sizeof err);
        CHECK(rc == 0, "%s reload: %s", names[i], err);
        CHECK(memcmp(&a, &b, sizeof a) == 0, "%s round trip identical", names[i]);
        free(text);
    }

    /* Awkward values: doubles that need 17 digits, strings needing escapes. */
    Config a, b;
    config_from_tier(&a, "124M", err, sizeof err);
    config_set(&a, "arm", "combo2", err, sizeof err);
    a.lr = 0.1 + 0.2;
    a.lr_min = 1.0 / 3.0;
    a.init_std = 0.02 * 1.0000000000000002;
    a.adam_eps = 1e-300;
    a.weight_decay = 0;
    a.gate_beta = 123456789.123456789;
    a.ln_bias = 1;
    a.seed = 9223372036854775807L;
    a.threads = 3;
    config_set(&a, "out", "runs/\"q\" \\back\\ tab\there\nnl: #hash 'sq' \xc3\xa9\x01", err,
               sizeof err);
    config_set(&a, "data", "", err, sizeof err);

    char *text = NULL;
    CHECK(config_to_yaml_string(&a, &text) == 0, "to_yaml_string");
    CHECK(strncmp(text, "# sinkgate resolved config\ntier: \"124M\"\narm: \"combo2\"\n", 51) == 0,
          "header, tier first:\n%s", text);
    CHECK(strstr(text, "\nlr: 0.30000000000000004\n") != NULL, "lr printed exactly");
    CHECK(strstr(text, "\nlr_min: 0.3333333333333333\n") != NULL, "lr_min printed exactly");
    CHECK(strstr(text, "\nln_bias: true\n") != NULL, "bool as true");
    CHECK(strstr(text, "\nbeta1: 0.9\n") != NULL, "short doubles stay short");
    int rc;
    load_zeroed(&b, text, &rc, err, sizeof err);
    CHECK(rc == 0, "awkward reload: %s\n%s", err, text);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "awkward round trip identical");
    CHECK(strcmp(a.out, b.out) == 0, "out '%s' vs '%s'", a.out, b.out);

    /* Characters YAML reads as line breaks or refuses in a file: U+0085,
     * U+2028, U+2029, a C1 control, the byte-order mark, U+FFFE (the
     * fuzzer's first finding: NEL came back as a space). */
    config_set(&a, "data", "a\xc2\x85" "b\xe2\x80\xa8" "c\xe2\x80\xa9" "d\xc2\x80" "e\xef\xbb\xbf"
               "f\xef\xbf\xbe" "g\xe6\x97\xa5\x7f", err, sizeof err);
    char *breaks = NULL;
    CHECK(config_to_yaml_string(&a, &breaks) == 0, "to_yaml_string");
    CHECK(strstr(breaks, "\ndata: \"a\\Nb\\Lc\\Pd\\x80e\\ufefff\\ufffeg\xe6\x97\xa5\\x7f\"\n"),
          "escaped as \\N \\L \\P \\x80 \\ufeff \\ufffe, other text as it is:\n%s", breaks);
    load_zeroed(&b, breaks, &rc, err, sizeof err);
    CHECK(rc == 0 && strcmp(a.data, b.data) == 0, "line breaks round trip: '%s' vs '%s' %s", a.data,
          b.data, err);
    free(breaks);
    config_set(&a, "data", "", err, sizeof err);

    /* Through a real file too. */
    const char *path = write_file("resolved.yaml", text);
    memset(&b, 0, sizeof b);
    CHECK(config_load_yaml(&b, path, err, sizeof err) == 0, "file reload: %s", err);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "file round trip identical");
    free(text);

    /* config_write_yaml to a FILE gives the same text. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(config_write_yaml(&a, f) == 0, "write_yaml");
    fclose(f);
    char *text2 = NULL;
    config_to_yaml_string(&a, &text2);
    CHECK(strcmp(buf, text2) == 0, "write_yaml == to_yaml_string");
    free(buf);
    free(text2);

    /* A partial file changes only what it names. */
    config_from_tier(&a, "10M", err, sizeof err);
    b = a;
    rc = config_load_yaml_buf(&b, "# comment\nlr: 1e-3\narm: 'sinklogit'\nout: \"x\"\n", 44,
                              "p.yaml", err, sizeof err);
    CHECK(rc == 0, "partial: %s", err);
    CHECK(b.lr == 1e-3 && strcmp(b.arm, "sinklogit") == 0 && strcmp(b.out, "x") == 0 &&
              b.n_layer == 6 && b.iters == 6000,
          "partial applied");

    /* Empty inputs change nothing. */
    const char *empties[] = {"", "# just a comment\n", "---\n", "---\n...\n", "{}\n"};
    for (int i = 0; i < 5; i++) {
        b = a;
        rc = config_load_yaml_buf(&b, empties[i], strlen(empties[i]), "e.yaml", err, sizeof err);
        CHECK(rc == 0 && memcmp(&a, &b, sizeof a) == 0, "empty doc %d: %s", i, err);
    }

    /* A tier key applies the tier's defaults before the keys after it. */
    b = a;
    rc = config_load_yaml_buf(&b, "tier: test\nn_layer: 3\n", 22, "t.yaml", err, sizeof err);
    CHECK(rc == 0 && strcmp(b.tier, "test") == 0 && b.n_layer == 3 && b.n_embd == 32 &&
              b.vocab_size == 512,
          "tier in yaml: %s", err);

    /* Flow style is a mapping too. */
    b = a;
    rc = config_load_yaml_buf(&b, "{n_head: 3, n_embd: 96}", 23, "f.yaml", err, sizeof err);
    CHECK(rc == 0 && b.n_head == 3 && b.n_embd == 96, "flow mapping: %s", err);
}

static void test_json(void) {
    Config a;
    char err[512];
    config_from_tier(&a, "124M", err, sizeof err);
    config_set(&a, "out", "r\"u\\n\n\x01", err, sizeof err);
    a.ln_bias = 1;
    a.lr = 0.1 + 0.2;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(config_write_json(&a, f) == 0, "write_json");
    fclose(f);
    CHECK(strchr(buf, '\n') == NULL, "one line: %s", buf);
    CHECK(strncmp(buf, "{\"tier\":\"124M\",\"arm\":\"baseline\",", 31) == 0, "starts: %s", buf);

    json_object *o = json_tokener_parse(buf);
    CHECK(o != NULL, "valid JSON: %s", buf);
    if (o) {
        int n;
        const ConfigField *fs = config_fields(&n);
        CHECK(json_object_object_length(o) == n, "every field");
        for (int i = 0; i < n; i++) {
            json_object *v;
            CHECK(json_object_object_get_ex(o, fs[i].key, &v), "key %s", fs[i].key);
        }
        json_object *v;
        json_object_object_get_ex(o, "out", &v);
        CHECK(v && strcmp(json_object_get_string(v), a.out) == 0, "out escaped");
        json_object_object_get_ex(o, "ln_bias", &v);
        CHECK(v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v),
              "bool");
        json_object_object_get_ex(o, "lr", &v);
        CHECK(v && json_object_get_double(v) == a.lr, "lr exact");
        json_object_object_get_ex(o, "iters", &v);
        CHECK(v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 48800,
              "iters int");
        json_object_put(o);
    }
    free(buf);
}

static void test_yaml_errors(void) {
    char err[2048];
    Config c;
    struct {
        const char *name, *text, *frag;
    } bad[] = {
        {"unknown.yaml", "tier: test\nn_layer: 2\nn_heads: 4\n",
         "unknown.yaml:3:1: unknown key 'n_heads', did you mean 'n_head'? (known keys: tier, arm,"},
        {"unknown2.yaml", "n_layer: 2\n  # x\nwibblewobble: 4\n",
         "unknown2.yaml:3:1: unknown key 'wibblewobble' (known keys: tier, arm, n_layer"},
        {"dup.yaml", "n_layer: 2\nlr: 1e-3\nn_layer: 3\n",
         "dup.yaml:3:1: duplicate key 'n_layer' (first at line 1)"},
        {"nested.yaml", "n_layer: 2\nlr:\n  peak: 1e-3\n",
         "nested.yaml:3:3: 'lr' must be a scalar value, got a mapping"},
        {"seq.yaml", "arm: [baseline, normgate]\n",
         "seq.yaml:1:6: 'arm' must be a scalar value, got a sequence"},
        {"badint.yaml", "n_layer: 2\nn_head: four\n",
         "badint.yaml:2:9: n_head: expected a positive integer, got 'four'"},
        {"nul.yaml", "n_layer: 2\ndata: \"runs\\0/x\"\n",
         "nul.yaml:2:7: data: the value holds a NUL character (\\0)"},
        {"nulkey.yaml", "\"data\\0x\": d\n", "nulkey.yaml:1:1: unknown key 'data'"},
        {"overflow.yaml", "micro_batch: 99999999999\n",
         "overflow.yaml:1:14: micro_batch: expected a positive integer, got '99999999999' (out of range)"},
        {"range.yaml", "beta2: 1.5\n", "range.yaml:1:8: beta2: expected a number in [0, 1), got '1.5'"},
        {"bool.yaml", "ln_bias: sometimes\n",
         "bool.yaml:1:10: ln_bias: expected a boolean (true/false, yes/no, on/off, 1/0), got 'sometimes'"},
        {"arm.yaml", "arm: \"sinkhole\"\n", "arm.yaml:1:6: arm: unknown arm 'sinkhole' (known arms: baseline"},
        {"tier.yaml", "tier: 2B\n", "tier.yaml:1:7: unknown tier '2B' (known tiers: test, cpu-tiny"},
        {"late.yaml", "lr: 1e-3\ntier: 10M\n", "late.yaml:2:1: 'tier' must be the first key"},
        {"syntax.yaml", "n_layer: 2\nn_head: 4: 5\n",
         "syntax.yaml:2:10: mapping values are not allowed in this context"},
        {"syntax2.yaml", "n_layer: 2\nlr: \"1e-3\n",
         "syntax2.yaml:3:1: found unexpected end of stream"},
        /* A more-indented line continues the plain scalar before it. */
        {"indent.yaml", "n_layer: 2\n n_head: 4\n",
         "indent.yaml:1:10: n_layer: expected a positive integer, got '2 n_head'"},
        {"scalar.yaml", "just words\n", "scalar.yaml:1:1: expected a mapping of key: value, got a scalar"},
        {"list.yaml", "- n_layer\n- 2\n", "list.yaml:1:1: expected a mapping of key: value, got a sequence"},
        {"docs.yaml", "n_layer: 2\n---\nn_layer: 3\n", "docs.yaml:2:1: only one YAML document is allowed"},
        {"alias.yaml", "n_layer: &a 2\nn_head: *a\n", "alias.yaml:2:9: 'n_head' must be a scalar value, got an alias"},
        {"utf8.yaml", "out: \"\xff\"\n", "utf8.yaml:1:7: invalid leading UTF-8 octet"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = write_file(bad[i].name, bad[i].text);
        config_from_tier(&c, "test", err, sizeof err);
        err[0] = 0;
        int rc = config_load_yaml(&c, path, err, sizeof err);
        /* Files report their path; strip the directory to compare. */
        const char *msg = strstr(err, bad[i].name);
        CHECK(rc == -1 && msg && strncmp(msg, bad[i].frag, strlen(bad[i].frag)) == 0,
              "%s: want \"%s\", got \"%s\"", bad[i].name, bad[i].frag, err);
        CHECK(strncmp(err, path, strlen(path)) == 0, "%s: message starts with the path", bad[i].name);
    }

    /* Buffers use the given name. */
    config_from_tier(&c, "test", err, sizeof err);
    int rc = config_load_yaml_buf(&c, "lr: 1: 2", 8, "ckpt:config", err, sizeof err);
    CHECK_ERR(rc, err, "ckpt:config:1:6: mapping values are not allowed");

    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope.yaml", dir);
    rc = config_load_yaml(&c, missing, err, sizeof err);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", missing);
    CHECK(rc == -1 && strcmp(err, want) == 0, "missing file: %s", err);

    rc = config_load_yaml(&c, dir, err, sizeof err);
    CHECK_ERR(rc, err, ": cannot read: Is a directory");
}

static void test_args(void) {
    char err[2048] = "";
    Config c;
    int rc;

    /* No --tier and no tier in a file: cpu-tiny. */
    {
        char *argv[] = {"--lr", "1e-3"};
        rc = config_from_args(&c, 2, argv, err, sizeof err);
        CHECK(rc == 0 && strcmp(c.tier, "cpu-tiny") == 0 && c.n_embd == 128 && c.lr == 1e-3,
              "default tier cpu-tiny: %s", err);
    }
    rc = config_from_args(&c, 0, NULL, err, sizeof err);
    CHECK(rc == 0 && strcmp(c.tier, "cpu-tiny") == 0, "no args");

    /* Precedence: tier < config file (in order) < flags, wherever they appear. */
    const char *f1 = write_file("a.yaml", "n_layer: 3\nlr: 2e-4\narm: normgate\nseed: 5\n");
    const char *f2 = write_file("b.yaml", "lr: 3e-4\nseed: 6\n");
    {
        char *argv[] = {"--seed", "7", "--config", (char *)f1, "--tier", "10M",
                        "--config=" "", "--arm=sinklogit"};
        /* the empty --config= must fail: there is no file called "" */
        rc = config_from_args(&c, 8, argv, err, sizeof err);
        CHECK_ERR(rc, err, ": cannot open:");
    }
    {
        char cfg2[300];
        snprintf(cfg2, sizeof cfg2, "--config=%s", f2);
        char *argv[] = {"--seed", "7", "--config", (char *)f1, "--tier", "10M", cfg2,
                        "--arm=sinklogit"};
        rc = config_from_args(&c, 8, argv, err, sizeof err);
        CHECK(rc == 0, "precedence: %s", err);
        CHECK(strcmp(c.tier, "10M") == 0 && c.n_embd == 384, "tier applied");
        CHECK(c.n_layer == 3, "file beats tier");
        CHECK(c.lr == 3e-4, "later file beats earlier file");
        CHECK(c.seed == 7, "flag beats file though it came first");
        CHECK(strcmp(c.arm, "sinklogit") == 0, "--arm is just a field");
    }
    /* A file with a tier key overrides --tier. */
    {
        const char *f3 = write_file("c.yaml", "tier: test\nlr: 1e-2\n");
        char *argv[] = {"--tier=350M", "--config", (char *)f3};
        rc = config_from_args(&c, 3, argv, err, sizeof err);
        CHECK(rc == 0 && strcmp(c.tier, "test") == 0 && c.n_embd == 32 && c.lr == 1e-2,
              "file tier wins: %s", err);
    }
    /* Dashes and underscores are the same flag; a later flag wins. */
    {
        char *argv[] = {"--micro-batch", "5", "--grad_accum=3", "--val-batches-final=7",
                        "--micro_batch", "6", "--ln-bias", "yes", "--tier", "124m", "--lr",
                        "-0"};
        rc = config_from_args(&c, 10, argv, err, sizeof err);
        CHECK(rc == 0 && c.micro_batch == 6 && c.grad_accum == 3 && c.val_batches_final == 7 &&
                  c.ln_bias == 1 && strcmp(c.tier, "124M") == 0,
              "dashes: %s", err);
        rc = config_from_args(&c, 12, argv, err, sizeof err);
        CHECK_ERR(rc, err, "lr: expected a number > 0, got '-0'");
    }
    {
        char *argv[] = {"--out=", "--data", "-weird-dir"};
        rc = config_from_args(&c, 3, argv, err, sizeof err);
        CHECK(rc == 0 && c.out[0] == 0 && strcmp(c.data, "-weird-dir") == 0, "empty and dash values");
    }

    struct {
        int argc;
        char *argv[4];
        const char *frag;
    } bad[] = {
        {1, {"--foo"}, "unknown flag '--foo'; run 'sgtrain train --help'"},
        {2, {"--n-heads", "4"}, "unknown flag '--n-heads' (did you mean '--n-head'?); run 'sgtrain train --help'"},
        {2, {"--n_heads", "4"}, "unknown flag '--n_heads' (did you mean '--n_head'?)"},
        {2, {"--confg", "x"}, "unknown flag '--confg' (did you mean '--config'?)"},
        {1, {"--tire=10M"}, "unknown flag '--tire' (did you mean '--tier'?)"},
        {1, {"--lr"}, "flag '--lr' is missing its value"},
        {2, {"--lr", "--seed"}, "flag '--lr' is missing its value"},
        {1, {"--tier"}, "flag '--tier' is missing its value"},
        {1, {"--config"}, "flag '--config' is missing its value"},
        {1, {"10M"}, "unexpected argument '10M'"},
        {3, {"--lr", "1e-3", "extra"}, "unexpected argument 'extra'"},
        {1, {"-x"}, "unexpected argument '-x'"},
        {1, {"--"}, "unknown flag '--'"},
        {2, {"--tier", "9B"}, "unknown tier '9B' (known tiers:"},
        {2, {"--n-head", "x"}, "n_head: expected a positive integer, got 'x'"},
        {2, {"--arm", "nope"}, "arm: unknown arm 'nope'"},
        {2, {"--iters", "1e3"}, "iters: expected a positive integer, got '1e3'"},
        /* Syntax is checked before anything is applied: the bad tier is not reported. */
        {3, {"--tier", "9B", "--bogus"}, "unknown flag '--bogus'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        rc = config_from_args(&c, bad[i].argc, bad[i].argv, err, sizeof err);
        CHECK_ERR(rc, err, bad[i].frag);
    }
}

static void test_validate(void) {
    Config c;
    char err[512];
    config_from_tier(&c, "test", err, sizeof err);
    CHECK(config_validate(&c, err, sizeof err) == 0, "test tier valid");

    config_set(&c, "n_embd", "100", err, sizeof err);
    config_set(&c, "n_head", "3", err, sizeof err);
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "n_embd 100 is not divisible by n_head 3");

    config_from_tier(&c, "test", err, sizeof err);
    c.warmup = 20;
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "warmup 20 must be less than iters 20");
    c.warmup = 19;
    CHECK(config_validate(&c, err, sizeof err) == 0, "warmup 19 < 20");

    config_from_tier(&c, "test", err, sizeof err);
    c.lr_min = 1e-3;
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "lr_min 0.001 must not exceed lr 0.0006");
    c.lr_min = c.lr;
    CHECK(config_validate(&c, err, sizeof err) == 0, "lr_min == lr allowed");

    /* test tier: 2 heads of 16 dims */
    config_from_tier(&c, "test", err, sizeof err);
    CHECK(config_set(&c, "rotary_dims", "7", err, sizeof err) == 0, "rotary_dims 7 parses: %s", err);
    CHECK_ERR(config_validate(&c, err, sizeof err), err,
              "rotary_dims 7 must be even and at most the head dim 16 (n_embd / n_head)");
    c.rotary_dims = 18;
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "rotary_dims 18 must be even and at most the head dim 16");
    c.rotary_dims = 16;
    CHECK(config_validate(&c, err, sizeof err) == 0, "rotary_dims = head dim allowed: %s", err);
    CHECK_ERR(config_set(&c, "rotary_dims", "-2", err, sizeof err), err, "rotary_dims: expected a non-negative integer");
    CHECK_ERR(config_set(&c, "rotary_base", "0", err, sizeof err), err, "rotary_base: expected a number > 0");
    CHECK_ERR(config_set(&c, "parallel_residual", "2", err, sizeof err), err, "parallel_residual: expected a boolean");
    CHECK_ERR(config_set(&c, "tie_embeddings", "untied", err, sizeof err), err, "tie_embeddings: expected a boolean");
    config_from_tier(&c, "test", err, sizeof err);
    CHECK(c.vocab_sha256[0] == 0, "a trained run's vocabulary is its data manifest's (vocab_sha256 empty)");
    const char *sha_ok[] = {"unknown", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"};
    for (int i = 0; i < 2; i++) {
        CHECK(config_set(&c, "vocab_sha256", sha_ok[i], err, sizeof err) == 0 && config_validate(&c, err, sizeof err) == 0,
              "vocab_sha256 %s: %s", sha_ok[i], err);
    }
    const char *sha_bad[] = {"306CD27F03C1A714ECA7108E03D66B7DC042ABE8C258B44C199A7ED9838DD930", "306cd27f", "gpt2"};
    for (int i = 0; i < 3; i++) {
        config_set(&c, "vocab_sha256", sha_bad[i], err, sizeof err);
        CHECK_ERR(config_validate(&c, err, sizeof err), err, "vocab_sha256: expected 64 lower-case hex digits");
    }

    config_from_tier(&c, "test", err, sizeof err);
    strcpy(c.arm, "nope");
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "arm: unknown arm 'nope'");

    /* Fields set by code still get their range check; n_head 0 is caught
     * before it could divide. */
    config_from_tier(&c, "test", err, sizeof err);
    c.n_head = 0;
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "n_head: expected a positive integer, got '0'");
    config_from_tier(&c, "test", err, sizeof err);
    c.beta1 = NAN;
    CHECK_ERR(config_validate(&c, err, sizeof err), err, "beta1: expected a number in [0, 1)");
}

static void test_diff(void) {
    Config a, b;
    char err[512], out[1024];
    config_from_tier(&a, "10M", err, sizeof err);
    b = a;
    CHECK(config_diff_run(&a, &b, out, sizeof out) == 0 && out[0] == 0, "no diff");

    /* IO fields never count. */
    config_set(&b, "out", "elsewhere", err, sizeof err);
    config_set(&b, "ckpt_every", "5", err, sizeof err);
    config_set(&b, "threads", "4", err, sizeof err);
    CHECK(config_diff_run(&a, &b, out, sizeof out) == 0, "io ignored: %s", out);

    config_set(&b, "arm", "normgate", err, sizeof err);
    config_set(&b, "lr", "1e-3", err, sizeof err);
    config_set(&b, "iters", "7000", err, sizeof err);
    config_set(&b, "ln_bias", "on", err, sizeof err);
    int n = config_diff_run(&a, &b, out, sizeof out);
    CHECK(n == 4, "4 diffs, got %d", n);
    CHECK(strcmp(out, "arm: baseline -> normgate; ln_bias: false -> true; iters: 6000 -> 7000; "
                      "lr: 0.0006 -> 0.001") == 0,
          "diff text: %s", out);

    char small[10];
    CHECK(config_diff_run(&a, &b, small, sizeof small) == 4 && strlen(small) == 9,
          "truncated diff still counts");
    CHECK(config_diff_run(&a, &b, NULL, 0) == 4, "NULL out");
}

int main(void) {
    check_name = "config";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 100;
    }
    test_fields();
    test_tiers();
    test_set();
    test_yaml_roundtrip();
    test_json();
    test_yaml_errors();
    test_args();
    test_validate();
    test_diff();
    cleanup();
    return check_finish();
}
