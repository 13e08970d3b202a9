/* What the sweep files share: the YAML reading helpers (sweep.c), which
 * sweep_analyses.c uses for its entries, and the argv builder
 * (sweep_tasks.c).  Not part of sweep.h. */
#ifndef SG_SWEEP_INTERNAL_H
#define SG_SWEEP_INTERNAL_H

#include <string.h>
#include <yaml.h>

#include "sweep.h"

/* A parse in progress: the document, and where its first error goes. */
typedef struct {
    yaml_document_t *doc;
    const char *path;
    char *err;
    size_t errlen;
} P;

/* "PATH:LINE:COL: MESSAGE" (or "PATH: MESSAGE" without a node) into the
 * error; returns -1. */
int fail_at(P *p, yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline yaml_node_t *node(P *p, int i) { return yaml_document_get_node(p->doc, i); }
static inline const char *scalar(yaml_node_t *n) { return (const char *)n->data.scalar.value; }
static inline int key_is(yaml_node_t *k, const char *name) {
    return k->type == YAML_SCALAR_NODE && !strcmp(scalar(k), name);
}
const char *kind_name(yaml_node_t *n); /* "a mapping", "a list", "a scalar" */

/* Each reads node N as WHAT (named in the message), 0 or -1 after fail_at. */
int want_type(P *p, yaml_node_t *n, yaml_node_type_t t, const char *what);
int get_str(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap);  /* no control characters */
int get_name(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap); /* letters, digits, . _ - */
int get_int(P *p, yaml_node_t *n, const char *what, long lo, long hi, long *v);
int unknown_key(P *p, yaml_node_t *k, const char *where, const char *known);

#define FOR_PAIRS(p, map, k, v)                                                                      \
    for (yaml_node_pair_t *pr_ = (map)->data.mapping.pairs.start; pr_ < (map)->data.mapping.pairs.top; pr_++) \
        for (yaml_node_t *k = node(p, pr_->key), *v = node(p, pr_->value); k; k = NULL)

int parse_resources(P *p, yaml_node_t *n, Resources *r);
enum { MAX_SEEDS = 1000 }; /* seeds a group's arm may list */
/* seeds: N (0..N-1) or a list of distinct non-negative integers, at most CAP */
int parse_seeds(P *p, yaml_node_t *n, long *out, int cap, int *count);
/* the analyses: list, after the groups (sweep_analyses.c) */
int parse_analyses(P *p, yaml_node_t *n, Sweep *s);

/* Appends a formatted word to the NULL-terminated argv *V of *N words;
 * -1 when out of memory. */
int push(char ***v, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
