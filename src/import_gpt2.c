/* `sgtrain import` of GPT-2 (src/import_internal.h): the baseline arm with
 * LayerNorm and linear biases and the GELU config.json names; Conv1D's
 * [in, out] matrices transposed to sinkgate's [out, in]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "import_internal.h"

static int gpt2_config(json_object *o, const char *path, Config *c, char *err, size_t errlen) {
    long L, H, C, T, V, inner;
    json_object *v;
    if (js_int(o, path, "n_layer", -1, 1, 4096, &L, err, errlen) ||
        js_int(o, path, "n_head", -1, 1, 4096, &H, err, errlen) ||
        js_int(o, path, "n_embd", -1, 1, 1L << 16, &C, err, errlen) ||
        js_int(o, path, "vocab_size", -1, 2, 65536, &V, err, errlen))
        return -1;
    if (json_object_object_get_ex(o, "n_positions", &v)) {
        if (js_int(o, path, "n_positions", -1, 1, 1L << 20, &T, err, errlen)) return -1;
    } else if (js_int(o, path, "n_ctx", -1, 1, 1L << 20, &T, err, errlen))
        return -1;
    if (js_int(o, path, "n_inner", 4 * C, 1, 1L << 20, &inner, err, errlen)) return -1;
    if (inner != 4 * C)
        return sg_fail(err, errlen, "%s: n_inner %ld is not 4 n_embd = %ld, the only MLP width sinkgate builds",
                       path, inner, 4 * C);
    if (C % H) return sg_fail(err, errlen, "%s: n_embd %ld is not divisible by n_head %ld", path, C, H);
    int gelu_tanh;
    if (js_gelu(o, path, "activation_function", "gelu_new", &gelu_tanh, err, errlen) || /* GPT2Config's default */
        js_eps(o, path, "layer_norm_epsilon", err, errlen) ||
        js_bool_is(o, path, "scale_attn_weights", 1, 1, "scores are scaled by 1/sqrt(d)", err, errlen) ||
        js_bool_is(o, path, "scale_attn_by_inverse_layer_idx", 0, 0, "scores are scaled by 1/sqrt(d) alone", err,
                   errlen) ||
        js_bool_is(o, path, "add_cross_attention", 0, 0, "decoder-only models", err, errlen) ||
        js_bool(o, path, "tie_word_embeddings", 1, &c->tie_embeddings, err, errlen))
        return -1;
    c->n_layer = (int)L;
    c->n_head = (int)H;
    c->n_embd = (int)C;
    c->block_size = (int)T;
    c->vocab_size = (int)V;
    c->ln_bias = 1;
    c->linear_bias = 1;
    c->gelu_tanh = gelu_tanh;
    return 0;
}

/* h.<n>.attn.bias and h.<n>.attn.masked_bias: the causal mask and its fill
 * value, which older transformers saved as buffers; not parameters. */
static int is_mask_buffer(const char *name) {
    unsigned layer;
    int end = 0;
    if (sscanf(name, "h.%u.attn.%n", &layer, &end) != 1 || !end) return 0;
    return !strcmp(name + end, "bias") || !strcmp(name + end, "masked_bias");
}

/* The file's name of sinkgate tensor t: the same, but for the embeddings
 * and an untied head, which is outside the transformer's prefix. */
static void hf_name(const TensorInfo *t, const char *prefix, char *out, size_t n) {
    if (t->role == ROLE_LM_HEAD) snprintf(out, n, "lm_head.weight");
    else if (!strcmp(t->name, "wte") || !strcmp(t->name, "wpe")) snprintf(out, n, "%s%s.weight", prefix, t->name);
    else snprintf(out, n, "%s%s", prefix, t->name);
}

/* Every tensor of the model from the file, Conv1D's [in, out] matrices
 * transposed to [out, in]; anything in the file that is neither a model
 * tensor, a mask buffer nor lm_head is refused, and a tied model's
 * lm_head must be wte. */
static int gpt2_tensors(const Model *m, const StFile *f, real *params, char *err, size_t errlen) {
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
            if (import_read(f, name, t, dst, err, errlen)) goto out;
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
    rc = import_check_tied(m, f, "lm_head.weight", prefix[0] ? "transformer.wte.weight" : "wte.weight", params, err,
                           errlen);
out:
    free(tmp);
    return rc;
}

const ImportFamily import_gpt2 = {"gpt2", "GPT-2", gpt2_config, gpt2_tensors};
