/* `sgtrain import` of GPT-NeoX, the Pythia suite's architecture
 * (src/import_internal.h): the baseline arm with LayerNorm and linear
 * biases, rotary positions on rotary_pct of each head's dims, attention and
 * MLP in parallel (use_parallel_residual), and an untied LM head
 * (embed_out).  nn.Linear's [out, in] matrices are sinkgate's layout; only
 * the fused query_key_value projection is reordered: its rows are grouped
 * by head, [q_h | k_h | v_h] for each head h, where sinkgate's c_attn is
 * [q | k | v] with the heads inside each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "import_internal.h"

/* The rotary settings as transformers 5 reads them: rope_parameters'
 * partial_rotary_factor and rope_theta, each defaulting to the older
 * top-level rotary_pct (0.25) and rotary_emb_base (10000), the Pythia
 * repositories' keys.  Top-level partial_rotary_factor and rope_theta,
 * which it ignores, are refused unless they agree. */
static int neox_rope(json_object *o, const char *path, double *pct, double *base, char *err, size_t errlen) {
    json_object *rp, *v;
    if (js_num(o, path, "rotary_pct", 0.25, pct, err, errlen) ||
        js_num(o, path, "rotary_emb_base", 10000, base, err, errlen))
        return -1;
    if (json_object_object_get_ex(o, "rope_scaling", &v) && !json_object_is_type(v, json_type_null))
        return sg_fail(err, errlen, "%s: \"rope_scaling\" is not supported (the default rotary angles only)", path);
    if (json_object_object_get_ex(o, "rope_parameters", &rp) && !json_object_is_type(rp, json_type_null)) {
        if (!json_object_is_type(rp, json_type_object))
            return sg_fail(err, errlen, "%s: \"rope_parameters\" is not an object", path);
        if (json_object_object_get_ex(rp, "rope_type", &v) &&
            (!json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "default")))
            return sg_fail(err, errlen, "%s: rope_parameters.rope_type \"%s\" is not supported (the default rotary "
                           "angles only)", path, json_object_get_string(v));
        char sub[600];
        snprintf(sub, sizeof sub, "%s: rope_parameters", path);
        if (js_num(rp, sub, "partial_rotary_factor", *pct, pct, err, errlen) ||
            js_num(rp, sub, "rope_theta", *base, base, err, errlen))
            return -1;
    }
    static const char *const ignored[] = {"partial_rotary_factor", "rope_theta"};
    for (int i = 0; i < 2; i++) {
        double x;
        if (js_num(o, path, ignored[i], i ? *base : *pct, &x, err, errlen)) return -1;
        if (x != (i ? *base : *pct))
            return sg_fail(err, errlen, "%s: a top-level \"%s\" of %g, which transformers does not read (it "
                           "reads %g from %s): ambiguous", path, ignored[i], x, i ? *base : *pct,
                           i ? "rope_parameters or rotary_emb_base" : "rope_parameters or rotary_pct");
    }
    return 0;
}

static int neox_config(json_object *o, const char *path, Config *c, char *err, size_t errlen) {
    long L, H, C, T, V, inner, hd;
    if (js_int(o, path, "num_hidden_layers", -1, 1, 4096, &L, err, errlen) ||
        js_int(o, path, "num_attention_heads", -1, 1, 4096, &H, err, errlen) ||
        js_int(o, path, "hidden_size", -1, 1, 1L << 16, &C, err, errlen) ||
        js_int(o, path, "vocab_size", -1, 2, 65536, &V, err, errlen) ||
        js_int(o, path, "max_position_embeddings", -1, 1, 1L << 20, &T, err, errlen) ||
        js_int(o, path, "intermediate_size", -1, 1, 1L << 20, &inner, err, errlen))
        return -1;
    if (C % H) return sg_fail(err, errlen, "%s: hidden_size %ld is not divisible by num_attention_heads %ld", path, C, H);
    if (js_int(o, path, "head_dim", C / H, 1, 1L << 16, &hd, err, errlen)) return -1;
    if (hd != C / H)
        return sg_fail(err, errlen, "%s: head_dim %ld is not hidden_size / num_attention_heads = %ld, the only head "
                       "size sinkgate builds", path, hd, C / H);
    if (inner != 4 * C)
        return sg_fail(err, errlen, "%s: intermediate_size %ld is not 4 hidden_size = %ld, the only MLP width "
                       "sinkgate builds", path, inner, 4 * C);
    double pct, base;
    int gelu_tanh, parallel, tied;
    if (neox_rope(o, path, &pct, &base, err, errlen) ||
        js_gelu(o, path, "hidden_act", "gelu", &gelu_tanh, err, errlen) ||
        js_eps(o, path, "layer_norm_eps", err, errlen) ||
        js_bool_is(o, path, "attention_bias", 1, 1, "sinkgate's linear_bias gives every linear layer a bias", err,
                   errlen) ||
        js_bool(o, path, "use_parallel_residual", 1, &parallel, err, errlen) ||
        js_bool(o, path, "tie_word_embeddings", 0, &tied, err, errlen))
        return -1;
    /* transformers: rotary_ndims = int(head_size * partial_rotary_factor) */
    if (!(pct > 0 && pct <= 1))
        return sg_fail(err, errlen, "%s: the rotary fraction %g is outside (0, 1]", path, pct);
    const long rd = (long)(hd * pct);
    if (rd < 2 || rd % 2)
        return sg_fail(err, errlen, "%s: rotary on %ld of %ld head dims: sinkgate rotates an even number, at least 2",
                       path, rd, hd);
    if (!(base > 1)) return sg_fail(err, errlen, "%s: the rotary base %g is not above 1", path, base);
    c->n_layer = (int)L;
    c->n_head = (int)H;
    c->n_embd = (int)C;
    c->block_size = (int)T;
    c->vocab_size = (int)V;
    c->ln_bias = 1;
    c->linear_bias = 1;
    c->gelu_tanh = gelu_tanh;
    c->rotary_dims = (int)rd;
    c->rotary_base = base;
    c->parallel_residual = parallel;
    c->tie_embeddings = tied;
    return 0;
}

/* A layer's parts: the file's name after "gpt_neox.layers.N.", sinkgate's
 * after "h.N." (the weight or bias suffix follows both). */
static const char *const LAYER_PARTS[][2] = {
    {"input_layernorm.", "ln_1."},                  {"post_attention_layernorm.", "ln_2."},
    {"attention.query_key_value.", "attn.c_attn."}, {"attention.dense.", "attn.c_proj."},
    {"mlp.dense_h_to_4h.", "mlp.c_fc."},            {"mlp.dense_4h_to_h.", "mlp.c_proj."}};
#define NPARTS (sizeof LAYER_PARTS / sizeof *LAYER_PARTS)

/* A file tensor's sinkgate name (without the gpt_neox. prefix, where it
 * has one): 1 mapped into sg, 0 a buffer older transformers saved (the
 * causal mask, its fill value, the rotary frequencies), -1 unknown. */
static int neox_to_sg(const char *name, char *sg, size_t n) {
    static const char *const buffers[] = {"attention.bias", "attention.masked_bias", "attention.rotary_emb.inv_freq"};
    if (!strcmp(name, "embed_out.weight") || !strcmp(name, "lm_head.weight")) return snprintf(sg, n, "lm_head.weight"), 1;
    if (strncmp(name, "gpt_neox.", 9)) return -1;
    name += 9;
    if (!strcmp(name, "embed_in.weight")) return snprintf(sg, n, "wte"), 1;
    if (!strcmp(name, "rotary_emb.inv_freq")) return 0;
    if (!strncmp(name, "final_layer_norm.", 17)) return snprintf(sg, n, "ln_f.%s", name + 17), 1;
    unsigned layer;
    int end = 0;
    if (sscanf(name, "layers.%u.%n", &layer, &end) != 1 || !end) return -1;
    const char *rest = name + end;
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
        if (!strcmp(rest, buffers[i])) return 0;
    for (size_t i = 0; i < NPARTS; i++) {
        size_t k = strlen(LAYER_PARTS[i][0]);
        if (!strncmp(rest, LAYER_PARTS[i][0], k))
            return snprintf(sg, n, "h.%u.%s%s", layer, LAYER_PARTS[i][1], rest + k), 1;
    }
    return -1;
}

/* sinkgate's name back to the file's (neox_to_sg's inverse); the head is
 * embed_out, as the files name it, or lm_head, as transformers 5 does in
 * memory (a state_dict saved directly) */
static void sg_to_neox(const StFile *f, const char *sg, char *out, size_t n) {
    if (!strcmp(sg, "lm_head.weight")) {
        snprintf(out, n, "%s", st_find(f, "embed_out.weight") || !st_find(f, "lm_head.weight") ? "embed_out.weight"
                                                                                              : "lm_head.weight");
        return;
    }
    if (!strcmp(sg, "wte")) {
        snprintf(out, n, "gpt_neox.embed_in.weight");
        return;
    }
    if (!strncmp(sg, "ln_f.", 5)) {
        snprintf(out, n, "gpt_neox.final_layer_norm.%s", sg + 5);
        return;
    }
    unsigned layer;
    int end = 0;
    sscanf(sg, "h.%u.%n", &layer, &end);
    for (size_t i = 0; i < NPARTS; i++) {
        size_t k = strlen(LAYER_PARTS[i][1]);
        if (!strncmp(sg + end, LAYER_PARTS[i][1], k)) {
            snprintf(out, n, "gpt_neox.layers.%u.%s%s", layer, LAYER_PARTS[i][0], sg + end + k);
            return;
        }
    }
    snprintf(out, n, "%s", sg);
}

/* query_key_value's rows, head-major [h][q|k|v][d], into c_attn's
 * [q|k|v][h][d]: row (h 3d + s d + e) of the file is row (s C + h d + e);
 * cols values per row (the input width, or 1 for the bias). */
static void unpack_qkv(real *dst, const real *src, int H, int d, long cols) {
    const long C = (long)H * d;
    for (int h = 0; h < H; h++)
        for (int s = 0; s < 3; s++)
            for (int e = 0; e < d; e++)
                memcpy(dst + ((long)s * C + (long)h * d + e) * cols, src + ((long)h * 3 * d + (long)s * d + e) * cols,
                       sizeof(real) * (size_t)cols);
}

static int neox_tensors(const Model *m, const StFile *f, real *params, char *err, size_t errlen) {
    if (!st_find(f, "gpt_neox.embed_in.weight"))
        return sg_fail(err, errlen, "%s: no gpt_neox.embed_in.weight: not a GPT-NeoX model", f->path);
    if (st_find(f, "embed_out.weight") && st_find(f, "lm_head.weight"))
        return sg_fail(err, errlen, "%s: both embed_out.weight and lm_head.weight: which is the LM head?", f->path);
    char sg[160], name[200];
    for (int i = 0; i < st_count(f); i++) {
        const char *fn = st_at(f, i)->name;
        int k = neox_to_sg(fn, sg, sizeof sg);
        if (k < 0 || (k == 1 && !model_tensor(m, sg))) {
            if (k == 1 && !strcmp(sg, "lm_head.weight"))
                continue; /* tied (tie_word_embeddings): checked against wte below */
            return sg_fail(err, errlen, "%s: tensor \"%s\" is not part of the GPT-NeoX model config.json describes",
                           f->path, fn);
        }
    }
    real *tmp = NULL;
    int rc = -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        sg_to_neox(f, t->name, name, sizeof name);
        real *dst = params + t->offset;
        const char *dot = strrchr(t->name, '.');
        if (!strstr(t->name, ".attn.c_attn.")) {
            if (t->role == ROLE_LM_HEAD && !st_find(f, name)) {
                sg_fail(err, errlen, "%s: no embed_out.weight (nor lm_head.weight), the LM head config.json unties "
                        "from the embedding (tie_word_embeddings false)", f->path);
                goto out;
            }
            if (import_read(f, name, t, dst, err, errlen)) goto out;
            continue;
        }
        free(tmp);
        if (!(tmp = malloc((size_t)t->numel_real * sizeof(real)))) {
            sg_fail(err, errlen, "out of memory reading %s", name);
            goto out;
        }
        if (import_read(f, name, t, tmp, err, errlen)) goto out;
        unpack_qkv(dst, tmp, m->H, m->d, dot && !strcmp(dot, ".bias") ? 1 : m->C);
    }
    rc = import_check_tied(m, f, st_find(f, "embed_out.weight") ? "embed_out.weight" : "lm_head.weight",
                           "gpt_neox.embed_in.weight", params, err, errlen);
out:
    free(tmp);
    return rc;
}

const ImportFamily import_neox = {"gpt_neox", "GPT-NeoX", neox_config, neox_tensors};
