#include "import_gpt2.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "errmsg.h"
#include "fsutil.h"
#include "model.h"
#include "model_io.h"
#include "safetensors.h"

void import_usage(void) {
    printf("usage: sgtrain import HF_DIR|MODEL.safetensors --out FILE.safetensors [--force] [--quiet]\n"
           "\n"
           "Converts a Hugging Face GPT-2 checkpoint (config.json beside model.safetensors: gpt2,\n"
           "gpt2-medium, gpt2-large, gpt2-xl, or any GPT2LMHeadModel saved by transformers) into\n"
           "a sinkgate model file of the baseline arm with GPT-2's biases and tanh GELU, which\n"
           "analyze, zeroshot, generate and export take as they take a checkpoint (docs/import.md).\n"
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

/* An integer field: absent gives def (or an error when def < 0). */
static int js_int(json_object *o, const char *path, const char *key, long def, long lo, long hi, long *out,
                  char *err, size_t errlen) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null)) {
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

/* A boolean field that must have the value sinkgate computes (absent: GPT2Config's default). */
static int js_bool_is(json_object *o, const char *path, const char *key, int def, int need, const char *why,
                      char *err, size_t errlen) {
    json_object *v;
    int x = def;
    if (json_object_object_get_ex(o, key, &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_boolean))
            return sg_fail(err, errlen, "%s: \"%s\" is not a boolean", path, key);
        x = json_object_get_boolean(v);
    }
    if (x != need)
        return sg_fail(err, errlen, "%s: \"%s\": %s is not supported (%s)", path, key, x ? "true" : "false", why);
    return 0;
}

/* GPT-2's config into a sinkgate Config: the baseline arm with LayerNorm and
 * linear biases, and the GELU its activation_function names. */
static int read_hf_config(const char *path, Config *c, char *err, size_t errlen) {
    json_object *o = json_object_from_file(path);
    if (!o) return sg_fail(err, errlen, "%s: cannot read it as JSON (%s)", path, json_util_get_last_err());
    int rc = -1;
    if (!json_object_is_type(o, json_type_object)) {
        sg_fail(err, errlen, "%s: not a JSON object", path);
        goto out;
    }
    json_object *v;
    if (json_object_object_get_ex(o, "model_type", &v) &&
        (!json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "gpt2"))) {
        sg_fail(err, errlen, "%s: model_type \"%s\", not \"gpt2\": only GPT-2 checkpoints are imported", path,
                json_object_get_string(v));
        goto out;
    }
    long L, H, C, T, V, inner;
    if (js_int(o, path, "n_layer", -1, 1, 4096, &L, err, errlen) ||
        js_int(o, path, "n_head", -1, 1, 4096, &H, err, errlen) ||
        js_int(o, path, "n_embd", -1, 1, 1L << 16, &C, err, errlen) ||
        js_int(o, path, "vocab_size", -1, 2, 65536, &V, err, errlen))
        goto out;
    if (json_object_object_get_ex(o, "n_positions", &v)) {
        if (js_int(o, path, "n_positions", -1, 1, 1L << 20, &T, err, errlen)) goto out;
    } else if (js_int(o, path, "n_ctx", -1, 1, 1L << 20, &T, err, errlen))
        goto out;
    if (js_int(o, path, "n_inner", 4 * C, 1, 1L << 20, &inner, err, errlen)) goto out;
    if (inner != 4 * C) {
        sg_fail(err, errlen, "%s: n_inner %ld is not 4 n_embd = %ld, the only MLP width sinkgate builds", path,
                inner, 4 * C);
        goto out;
    }
    if (C % H) {
        sg_fail(err, errlen, "%s: n_embd %ld is not divisible by n_head %ld", path, C, H);
        goto out;
    }
    int gelu_tanh = 1; /* GPT2Config's default, "gelu_new" */
    if (json_object_object_get_ex(o, "activation_function", &v)) {
        const char *a = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        /* gelu_new, gelu_fast and gelu_pytorch_tanh are one function, written three ways */
        if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_fast") || !strcmp(a, "gelu_pytorch_tanh")) gelu_tanh = 1;
        else if (!strcmp(a, "gelu")) gelu_tanh = 0;
        else {
            sg_fail(err, errlen, "%s: activation_function \"%s\" is not supported (gelu_new, gelu_fast, "
                    "gelu_pytorch_tanh or gelu)", path, json_object_get_string(v));
            goto out;
        }
    }
    if (json_object_object_get_ex(o, "layer_norm_epsilon", &v) && !json_object_is_type(v, json_type_null)) {
        double eps = json_object_get_double(v);
        if (!(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
            fabs(eps - 1e-5) > 1e-12) {
            sg_fail(err, errlen, "%s: layer_norm_epsilon %s is not supported (sinkgate's LayerNorm uses 1e-5, "
                    "as GPT-2)", path, json_object_get_string(v));
            goto out;
        }
    }
    if (js_bool_is(o, path, "scale_attn_weights", 1, 1, "scores are scaled by 1/sqrt(d)", err, errlen) ||
        js_bool_is(o, path, "scale_attn_by_inverse_layer_idx", 0, 0, "scores are scaled by 1/sqrt(d) alone", err,
                   errlen) ||
        js_bool_is(o, path, "add_cross_attention", 0, 0, "decoder-only models", err, errlen) ||
        js_bool_is(o, path, "tie_word_embeddings", 1, 1, "the LM head is wte", err, errlen))
        goto out;
    char cerr[512];
    if (config_from_tier(c, "124M", cerr, sizeof cerr)) {
        sg_fail(err, errlen, "%s", cerr);
        goto out;
    }
    c->n_layer = (int)L;
    c->n_head = (int)H;
    c->n_embd = (int)C;
    c->block_size = (int)T;
    c->vocab_size = (int)V;
    c->ln_bias = 1;
    c->linear_bias = 1;
    c->gelu_tanh = gelu_tanh;
    if (config_validate(c, cerr, sizeof cerr)) {
        sg_fail(err, errlen, "%s: %s", path, cerr);
        goto out;
    }
    rc = 0;
out:
    json_object_put(o);
    return rc;
}

/* ---- tensors -------------------------------------------------------------- */

/* h.<n>.attn.bias and h.<n>.attn.masked_bias: the causal mask and its fill
 * value, which older transformers saved as buffers; not parameters. */
static int is_mask_buffer(const char *name) {
    unsigned layer;
    int end = 0;
    if (sscanf(name, "h.%u.attn.%n", &layer, &end) != 1 || !end) return 0;
    return !strcmp(name + end, "bias") || !strcmp(name + end, "masked_bias");
}

/* The file's name of sinkgate tensor t: the same, but for the embeddings. */
static void hf_name(const TensorInfo *t, const char *prefix, char *out, size_t n) {
    if (!strcmp(t->name, "wte") || !strcmp(t->name, "wpe")) snprintf(out, n, "%s%s.weight", prefix, t->name);
    else snprintf(out, n, "%s%s", prefix, t->name);
}

/* Every tensor of the model from the file, Conv1D's [in, out] matrices
 * transposed to [out, in]; anything in the file that is neither a model
 * tensor, a mask buffer nor a tied lm_head is refused. */
static int load_tensors(const Model *m, const StFile *f, real *params, char *err, size_t errlen) {
    const char *prefix = st_find(f, "transformer.wte.weight") ? "transformer." : "";
    if (!*prefix && !st_find(f, "wte.weight"))
        return sg_fail(err, errlen, "%s: no wte.weight (nor transformer.wte.weight): not a GPT-2 model", f->path);
    size_t plen = strlen(prefix);
    for (int i = 0; i < st_count(f); i++) {
        const char *name = st_at(f, i)->name, *bare = strncmp(name, prefix, plen) ? NULL : name + plen;
        if (!strcmp(name, "lm_head.weight")) continue;
        int known = bare && (is_mask_buffer(bare) || !strcmp(bare, "wte.weight") || !strcmp(bare, "wpe.weight") ||
                             (strcmp(bare, "wte") && strcmp(bare, "wpe") && model_tensor(m, bare)));
        if (!known)
            return sg_fail(err, errlen, "%s: tensor \"%s\" is not part of the GPT-2 model config.json describes",
                           f->path, name);
    }
    real *tmp = NULL;
    size_t tmp_n = 0;
    int rc = -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        char name[160];
        hf_name(t, prefix, name, sizeof name);
        real *dst = params + t->offset;
        if (t->role != ROLE_MATRIX && t->role != ROLE_MATRIX_OUT) {
            int64_t shape[2] = {t->shape[0], t->shape[1]};
            if (st_read_real(f, name, t->ndim, shape, dst, err, errlen)) goto out;
            continue;
        }
        const long out_f = t->shape[0], in_f = t->shape[1];
        if ((size_t)t->numel_real > tmp_n) {
            free(tmp);
            tmp_n = (size_t)t->numel_real;
            if (!(tmp = malloc(tmp_n * sizeof(real)))) {
                sg_fail(err, errlen, "out of memory reading %s", name);
                goto out;
            }
        }
        int64_t conv1d[2] = {in_f, out_f};
        if (st_read_real(f, name, 2, conv1d, tmp, err, errlen)) goto out;
        for (long r = 0; r < in_f; r++)
            for (long c = 0; c < out_f; c++) dst[c * in_f + r] = tmp[r * out_f + c];
    }
    const StTensor *head = st_find(f, "lm_head.weight");
    if (head) { /* saved although tied: it must be wte */
        const TensorInfo *wte = model_tensor(m, "wte");
        int64_t shape[2] = {wte->shape[0], wte->shape[1]};
        free(tmp);
        if (!(tmp = malloc((size_t)wte->numel_real * sizeof(real)))) {
            sg_fail(err, errlen, "out of memory reading lm_head.weight");
            goto out;
        }
        if (st_read_real(f, "lm_head.weight", 2, shape, tmp, err, errlen)) goto out;
        if (memcmp(tmp, params + wte->offset, (size_t)wte->numel_real * sizeof(real))) {
            sg_fail(err, errlen, "%s: lm_head.weight differs from wte.weight: an untied LM head is not supported",
                    f->path);
            goto out;
        }
    }
    rc = 0;
out:
    free(tmp);
    return rc;
}

int import_gpt2(const ImportOpts *o, char *err, size_t errlen) {
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
    if (read_hf_config(cfg_path, &c, err, errlen)) return 2;
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
    if (load_tensors(&m, &f, params, err, errlen)) goto out;
    st_close(&f);
    open = 0;
    for (long i = 0; i < m.n_params; i++)
        if (!isfinite(params[i])) {
            sg_fail(err, errlen, "%s: holds a value that is not finite", st_path);
            goto out;
        }
    rc = 1;
    if (model_write_st(&m, params, &c, 0, o->src, o->out, err, errlen)) goto out;
    if (!o->quiet)
        fprintf(stderr,
                "sgtrain import: %s -> %s: %d layers, %d heads, width %d, context %d, vocabulary %d, "
                "%ld parameters, %s GELU\n",
                o->src, o->out, c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, model_count_params(&m),
                c.gelu_tanh ? "tanh" : "erf");
    rc = 0;
out:
    if (open) st_close(&f);
    free(params);
    model_free(&m);
    return rc;
}
