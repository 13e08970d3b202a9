/* What `sgtrain import`'s driver (src/import_hf.c) asks of a model family
 * (src/import_gpt2.c, src/import_neox.c): its config.json read into a
 * sinkgate Config, and its weights into the model's flat parameters. */
#ifndef SG_IMPORT_INTERNAL_H
#define SG_IMPORT_INTERNAL_H

#include <json-c/json.h>
#include <stddef.h>

#include "config.h"
#include "model.h"
#include "safetensors.h"

typedef struct {
    const char *model_type; /* config.json's */
    const char *name;       /* for messages */
    /* config.json (an object, at path) into c, the baseline arm: 0, or -1
     * with the reason */
    int (*config)(json_object *o, const char *path, Config *c, char *err, size_t errlen);
    /* every tensor of m from f into params (laid out by m's table); a tensor
     * in f that is neither the model's nor a known buffer is refused */
    int (*tensors)(const Model *m, const StFile *f, real *params, char *err, size_t errlen);
} ImportFamily;

extern const ImportFamily import_gpt2, import_neox;

/* config.json's fields.  An integer: absent or null gives def, or an error
 * when def < 0.  A boolean: absent or null gives def. */
int js_int(json_object *o, const char *path, const char *key, long def, long lo, long hi, long *out, char *err,
           size_t errlen);
int js_bool(json_object *o, const char *path, const char *key, int def, int *out, char *err, size_t errlen);
/* A boolean that must have the value sinkgate computes (why: what it does). */
int js_bool_is(json_object *o, const char *path, const char *key, int def, int need, const char *why, char *err,
               size_t errlen);
/* A number: absent or null gives def. */
int js_num(json_object *o, const char *path, const char *key, double def, double *out, char *err, size_t errlen);
/* A LayerNorm epsilon, which must be sinkgate's 1e-5. */
int js_eps(json_object *o, const char *path, const char *key, char *err, size_t errlen);
/* The GELU an activation name means: 1 tanh, 0 erf, -1 with an error. */
int js_gelu(json_object *o, const char *path, const char *key, const char *def, int *tanh_form, char *err,
            size_t errlen);

/* A tied model's head saved anyway (head, the file's name for it): it must
 * equal the embedding already read into params (wte_name, the file's name
 * for that, in the message).  0 when it does or f has no such tensor. */
int import_check_tied(const Model *m, const StFile *f, const char *head, const char *wte_name, const real *params,
                      char *err, size_t errlen);

/* Reads tensor `name` of f, of the shape of t, into dst (t's elements). */
int import_read(const StFile *f, const char *name, const TensorInfo *t, real *dst, char *err, size_t errlen);

#endif
