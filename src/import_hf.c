#include "import_hf.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "errmsg.h"
#include "fsutil.h"
#include "import_internal.h"
#include "model.h"
#include "model_io.h"
#include "safetensors.h"
#include "tokenizer.h"

void import_usage(void) {
    printf("usage: sgtrain import HF_DIR|MODEL.safetensors --out FILE.safetensors [--force] [--quiet]\n"
           "\n"
           "Converts a Hugging Face checkpoint (config.json beside model.safetensors) of GPT-2\n"
           "(gpt2, gpt2-medium, gpt2-large, gpt2-xl, any GPT2LMHeadModel saved by transformers) or\n"
           "GPT-NeoX (the Pythia suite, any GPTNeoXForCausalLM) into a sinkgate model file of the\n"
           "baseline arm with the family's parts turned on (biases, GELU form; rotary positions,\n"
           "parallel blocks and an untied head for GPT-NeoX), which analyze, zeroshot, generate\n"
           "and export take as they take a checkpoint (docs/import.md).\n"
           "\n"
           "  --out FILE   the sinkgate .safetensors to write (refused if it exists, without --force)\n"
           "  --force      replace FILE\n"
           "  --quiet      no summary on stderr\n");
}

int import_parse_args(ImportOpts *o, int argc, char **argv, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    int force = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            if (i + 1 >= argc) return sg_fail(err, errlen, "%s needs a file", a);
            o->out = argv[++i];
        } else if (!strcmp(a, "--force")) force = 1;
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (a[0] == '-' && a[1]) return sg_fail(err, errlen, "unknown flag '%s' (--help: the flags)", a);
        else if (o->src) return sg_fail(err, errlen, "one source only (got '%s' and '%s')", o->src, a);
        else o->src = a;
    }
    if (!o->src) return sg_fail(err, errlen, "which model? usage: sgtrain import HF_DIR --out FILE.safetensors");
    if (!o->out || !*o->out) return sg_fail(err, errlen, "--out FILE.safetensors is required");
    if (!force && fs_exists(o->out))
        return sg_fail(err, errlen, "%s exists; --force replaces it", o->out);
    char dir[4096];
    const char *slash = strrchr(o->out, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o->out) + (slash == o->out) : 1, slash ? o->out : ".");
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) return sg_fail(err, errlen, "%s: no such directory for --out", dir);
    return 0;
}

/* ---- config.json ---------------------------------------------------------- */

static int js_absent(json_object *o, const char *key, json_object **v) {
    return !json_object_object_get_ex(o, key, v) || json_object_is_type(*v, json_type_null);
}

int js_int(json_object *o, const char *path, const char *key, long def, long lo, long hi, long *out, char *err,
           size_t errlen) {
    json_object *v;
    if (js_absent(o, key, &v)) {
        if (def < 0) return sg_fail(err, errlen, "%s: no \"%s\"", path, key);
        *out = def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_int))
        return sg_fail(err, errlen, "%s: \"%s\" is not an integer", path, key);
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        return sg_fail(err, errlen, "%s: \"%s\" is %lld, outside [%ld, %ld]", path, key, (long long)x, lo, hi);
    *out = (long)x;
    return 0;
}

int js_bool(json_object *o, const char *path, const char *key, int def, int *out, char *err, size_t errlen) {
    json_object *v;
    *out = def;
    if (js_absent(o, key, &v)) return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return sg_fail(err, errlen, "%s: \"%s\" is not a boolean", path, key);
    *out = json_object_get_boolean(v);
    return 0;
}

int js_bool_is(json_object *o, const char *path, const char *key, int def, int need, const char *why, char *err,
               size_t errlen) {
    int x;
    if (js_bool(o, path, key, def, &x, err, errlen)) return -1;
    if (x != need)
        return sg_fail(err, errlen, "%s: \"%s\": %s is not supported (%s)", path, key, x ? "true" : "false", why);
    return 0;
}

int js_num(json_object *o, const char *path, const char *key, double def, double *out, char *err, size_t errlen) {
    json_object *v;
    *out = def;
    if (js_absent(o, key, &v)) return 0;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return sg_fail(err, errlen, "%s: \"%s\" is not a number", path, key);
    *out = json_object_get_double(v);
    if (!isfinite(*out)) return sg_fail(err, errlen, "%s: \"%s\" is not finite", path, key);
    return 0;
}

int js_eps(json_object *o, const char *path, const char *key, char *err, size_t errlen) {
    double eps;
    if (js_num(o, path, key, 1e-5, &eps, err, errlen)) return -1;
    if (fabs(eps - 1e-5) > 1e-12)
        return sg_fail(err, errlen, "%s: %s %g is not supported (sinkgate's LayerNorm uses 1e-5, as GPT-2 and "
                       "Pythia)", path, key, eps);
    return 0;
}

int js_gelu(json_object *o, const char *path, const char *key, const char *def, int *tanh_form, char *err,
            size_t errlen) {
    json_object *v;
    const char *a = def;
    if (!js_absent(o, key, &v)) a = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    /* gelu_new, gelu_fast and gelu_pytorch_tanh are one function, written three ways */
    if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_fast") || !strcmp(a, "gelu_pytorch_tanh")) *tanh_form = 1;
    else if (!strcmp(a, "gelu")) *tanh_form = 0;
    else
        return sg_fail(err, errlen, "%s: %s \"%s\" is not supported (gelu_new, gelu_fast, gelu_pytorch_tanh or "
                       "gelu)", path, key, json_object_get_string(v));
    return 0;
}

/* ---- tensors -------------------------------------------------------------- */

int import_read(const StFile *f, const char *name, const TensorInfo *t, real *dst, char *err, size_t errlen) {
    int64_t shape[2] = {t->shape[0], t->shape[1]};
    return st_read_real(f, name, t->ndim, shape, dst, err, errlen);
}

/* The vocabulary the model's ids mean (config vocab_sha256), from the
 * tokenizer files beside config.json in dir: tokenizer.json (either
 * family), GPT-2's vocab.json and merges.txt; without them GPT-2 of 50257
 * ids is taken to be OpenAI's vocabulary (every GPT-2 checkpoint of that
 * size on the Hub is), and anything else is "unknown".  what says which,
 * for the summary.  0, or -1 with the reason (a damaged tokenizer file). */
static int import_vocab(const char *dir, const ImportFamily *fam, Config *c, char *what, size_t wn, char *err,
                        size_t errlen) {
    char tj[4200], vj[4200], mt[4200], terr[1024];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(vj, sizeof vj, "%s/vocab.json", dir);
    snprintf(mt, sizeof mt, "%s/merges.txt", dir);
    if (fs_exists(tj)) {
        if (tok_hf_vocab_sha256(tj, c->vocab_size, c->vocab_sha256, terr, sizeof terr))
            return sg_fail(err, errlen, "%s", terr);
        snprintf(what, wn, "tokenizer.json's, SHA-256 %.16s...", c->vocab_sha256);
    } else if (fam == &import_gpt2 && fs_exists(vj) && fs_exists(mt)) {
        Tokenizer *t = tok_load_gpt2_files(vj, mt, terr, sizeof terr);
        if (!t) return sg_fail(err, errlen, "%s", terr);
        const uint32_t n = tok_vocab_size(t);
        tok_sha256_hex(t, c->vocab_sha256);
        tok_free(t);
        if ((int)n > c->vocab_size)
            return sg_fail(err, errlen, "%s: %u tokens, more than the model's %d", vj, n, c->vocab_size);
        snprintf(what, wn, "vocab.json and merges.txt's, SHA-256 %.16s...", c->vocab_sha256);
    } else if (fam == &import_gpt2 && c->vocab_size == 50257) {
        snprintf(c->vocab_sha256, sizeof c->vocab_sha256, "%s", TOK_GPT2_SHA256);
        snprintf(what, wn, "GPT-2's (vocab_size 50257; no tokenizer files beside config.json)");
    } else {
        snprintf(c->vocab_sha256, sizeof c->vocab_sha256, "unknown");
        snprintf(what, wn, "unknown (no tokenizer files beside config.json): generate and zeroshot will refuse it");
    }
    return 0;
}

int import_check_tied(const Model *m, const StFile *f, const char *head, const char *wte_name, const real *params,
                      char *err, size_t errlen) {
    if (!m->cfg.tie_embeddings || !st_find(f, head)) return 0;
    const TensorInfo *wte = model_tensor(m, "wte");
    real *tmp = malloc((size_t)wte->numel_real * sizeof(real));
    if (!tmp) return sg_fail(err, errlen, "out of memory reading %s", head);
    int rc = import_read(f, head, wte, tmp, err, errlen);
    if (!rc && memcmp(tmp, params + wte->offset, (size_t)wte->numel_real * sizeof(real)))
        rc = sg_fail(err, errlen, "%s: %s differs from %s, which config.json ties it to (tie_word_embeddings)",
                     f->path, head, wte_name);
    free(tmp);
    return rc;
}

static const ImportFamily *const FAMILIES[] = {&import_gpt2, &import_neox};
#define NFAMILIES (int)(sizeof FAMILIES / sizeof *FAMILIES)

/* The family config.json's model_type names; an absent model_type is GPT-2
 * (OpenAI's original files have none). */
static int read_hf_config(const char *path, Config *c, const ImportFamily **fam, char *err, size_t errlen) {
    json_object *o = json_object_from_file(path);
    if (!o) return sg_fail(err, errlen, "%s: cannot read it as JSON (%s)", path, json_util_get_last_err());
    int rc = -1;
    if (!json_object_is_type(o, json_type_object)) {
        sg_fail(err, errlen, "%s: not a JSON object", path);
        goto out;
    }
    json_object *v;
    const char *type = "gpt2";
    if (json_object_object_get_ex(o, "model_type", &v))
        type = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    *fam = NULL;
    for (int i = 0; i < NFAMILIES; i++)
        if (!strcmp(type, FAMILIES[i]->model_type)) *fam = FAMILIES[i];
    if (!*fam) {
        sg_fail(err, errlen, "%s: model_type \"%s\" is not imported (gpt2: GPT-2; gpt_neox: GPT-NeoX, Pythia)",
                path, json_object_get_string(v));
        goto out;
    }
    char cerr[512];
    if (config_from_tier(c, "124M", cerr, sizeof cerr)) {
        sg_fail(err, errlen, "%s", cerr);
        goto out;
    }
    if ((*fam)->config(o, path, c, err, errlen)) goto out;
    if (config_validate(c, cerr, sizeof cerr)) {
        sg_fail(err, errlen, "%s: %s", path, cerr);
        goto out;
    }
    rc = 0;
out:
    json_object_put(o);
    return rc;
}

int import_hf(const ImportOpts *o, char *err, size_t errlen) {
    char dir[4096], cfg_path[4200], st_path[4200];
    struct stat sb;
    if (stat(o->src, &sb)) return sg_fail(err, errlen, "%s: no such file or directory", o->src), 2;
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", o->src);
        snprintf(st_path, sizeof st_path, "%s/model.safetensors", o->src);
    } else {
        const char *slash = strrchr(o->src, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o->src) : 1, slash ? o->src : ".");
        snprintf(st_path, sizeof st_path, "%s", o->src);
    }
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    if (!fs_exists(cfg_path)) return sg_fail(err, errlen, "%s: no config.json beside the weights", cfg_path), 2;
    if (!fs_exists(st_path))
        return sg_fail(err, errlen, "%s: no such file (pytorch_model.bin checkpoints are not read: save the model "
                       "with safe_serialization)", st_path), 2;
    struct stat so, ss;
    if (stat(o->out, &so) == 0 && stat(st_path, &ss) == 0 && so.st_dev == ss.st_dev && so.st_ino == ss.st_ino)
        return sg_fail(err, errlen, "%s is the model being imported: write elsewhere", o->out), 2;
    Config c;
    const ImportFamily *fam = NULL;
    char vocab_what[200];
    if (read_hf_config(cfg_path, &c, &fam, err, errlen) ||
        import_vocab(dir, fam, &c, vocab_what, sizeof vocab_what, err, errlen))
        return 2;
    Model m;
    if (model_describe(&m, &c, err, errlen)) return 2;
    StFile f;
    real *params = NULL;
    int rc = 2, open = 0;
    if (st_open(&f, st_path, err, errlen)) goto out;
    open = 1;
    /* a file too small for the model config.json describes is refused
     * before that model's memory is asked for */
    uint64_t held = 0;
    for (int i = 0; i < st_count(&f); i++) held += st_at(&f, i)->numel;
    if (held < (uint64_t)model_count_params(&m)) {
        sg_fail(err, errlen, "%s: holds %llu values, fewer than the %ld parameters of the model config.json "
                "describes", st_path, (unsigned long long)held, model_count_params(&m));
        goto out;
    }
    if (!(params = calloc((size_t)m.n_params, sizeof(real)))) {
        sg_fail(err, errlen, "out of memory for %ld parameters", m.n_params);
        rc = 1;
        goto out;
    }
    if (fam->tensors(&m, &f, params, err, errlen)) goto out;
    st_close(&f);
    open = 0;
    for (long i = 0; i < m.n_params; i++)
        if (!isfinite(params[i])) {
            sg_fail(err, errlen, "%s: holds a value that is not finite", st_path);
            goto out;
        }
    rc = 1;
    if (model_write_st(&m, params, &c, 0, o->src, o->out, err, errlen)) goto out;
    if (!o->quiet) {
        char parts[160] = "";
        if (c.rotary_dims)
            snprintf(parts, sizeof parts, ", rotary positions on %d of %d head dims", c.rotary_dims, c.n_embd / c.n_head);
        size_t k = strlen(parts);
        snprintf(parts + k, sizeof parts - k, "%s%s", c.parallel_residual ? ", attention and MLP in parallel" : "",
                 c.tie_embeddings ? "" : ", untied LM head");
        fprintf(stderr,
                "sgtrain import: %s -> %s: %s, %d layers, %d heads, width %d, context %d, vocabulary %d, "
                "%ld parameters, %s GELU%s\n",
                o->src, o->out, fam->name, c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size,
                model_count_params(&m), c.gelu_tanh ? "tanh" : "erf", parts);
        fprintf(stderr, "sgtrain import: vocabulary: %s\n", vocab_what);
    }
    rc = 0;
out:
    if (open) st_close(&f);
    free(params);
    model_free(&m);
    return rc;
}
