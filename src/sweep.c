/* Sweep files: parsing with libyaml's document API (every node keeps its
 * line and column for messages), validation, expansion into tasks. */
#include "sweep.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "arms.h"
#include "batch_split.h"
#include "config.h"
#include "errmsg.h"
#include "fsutil.h"

const char *const task_state_names[] = {"pending", "started", "interrupted", "failed", "done"};

typedef struct {
    yaml_document_t *doc;
    const char *path;
    char *err;
    size_t errlen;
} P;

static int fail_at(P *p, yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(P *p, yaml_node_t *n, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n) return sg_fail(p->err, p->errlen, "%s:%zu:%zu: %s", p->path, n->start_mark.line + 1, n->start_mark.column + 1, msg);
    return sg_fail(p->err, p->errlen, "%s: %s", p->path, msg);
}

static yaml_node_t *node(P *p, int i) { return yaml_document_get_node(p->doc, i); }

static const char *kind_name(yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a scalar";
}

static int want_type(P *p, yaml_node_t *n, yaml_node_type_t t, const char *what) {
    if (n->type == t) return 0;
    return fail_at(p, n, "%s must be %s, not %s", what,
                   t == YAML_MAPPING_NODE ? "a mapping" : t == YAML_SEQUENCE_NODE ? "a list" : "a scalar", kind_name(n));
}

static const char *scalar(yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int get_str(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap) {
    if (want_type(p, n, YAML_SCALAR_NODE, what)) return -1;
    const char *s = scalar(n);
    if (strlen(s) >= cap) return fail_at(p, n, "%s is longer than %zu characters", what, cap - 1);
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) return fail_at(p, n, "%s contains a control character", what);
    snprintf(dst, cap, "%s", s);
    return 0;
}

/* Names end up in job names, directory names and log names: a safe set. */
static int safe_name(const char *s) {
    if (!*s || *s == '-' || *s == '.') return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int get_name(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap) {
    if (get_str(p, n, what, dst, cap)) return -1;
    if (!safe_name(dst))
        return fail_at(p, n, "%s \"%s\": use only letters, digits, '.', '_' and '-' (not first)", what, dst);
    return 0;
}

static int get_int(P *p, yaml_node_t *n, const char *what, long lo, long hi, long *v) {
    if (want_type(p, n, YAML_SCALAR_NODE, what)) return -1;
    const char *s = scalar(n);
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi)
        return fail_at(p, n, "%s: expected an integer in %ld..%ld, got \"%s\"", what, lo, hi, s);
    *v = x;
    return 0;
}

static int get_bool(P *p, yaml_node_t *n, const char *what, int *v) {
    if (want_type(p, n, YAML_SCALAR_NODE, what)) return -1;
    const char *s = scalar(n);
    if (!strcmp(s, "true") || !strcmp(s, "yes")) *v = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "no")) *v = 0;
    else return fail_at(p, n, "%s: expected true or false, got \"%s\"", what, s);
    return 0;
}

#define FOR_PAIRS(p, map, k, v)                                                                      \
    for (yaml_node_pair_t *pr_ = (map)->data.mapping.pairs.start; pr_ < (map)->data.mapping.pairs.top; pr_++) \
        for (yaml_node_t *k = node(p, pr_->key), *v = node(p, pr_->value); k; k = NULL)

static int unknown_key(P *p, yaml_node_t *k, const char *where, const char *known) {
    return fail_at(p, k, "unknown key \"%s\" in %s (known: %s)", k->type == YAML_SCALAR_NODE ? scalar(k) : "?", where,
                   known);
}

static int key_is(yaml_node_t *k, const char *name) { return k->type == YAML_SCALAR_NODE && !strcmp(scalar(k), name); }

/* set: {field: value}: every key an sgtrain field the sweep does not manage,
 * every value valid for it (checked on a scratch config of TIER). */
static int parse_set(P *p, yaml_node_t *n, const char *tier, SweepSet **set, int *nset) {
    if (want_type(p, n, YAML_MAPPING_NODE, "set")) return -1;
    FOR_PAIRS(p, n, k, v) {
        char key[64], val[SW_PATH];
        if (get_str(p, k, "a set key", key, sizeof key) || get_str(p, v, "a set value", val, sizeof val)) return -1;
        static const char *managed[] = {"tier", "arm", "seed", "data", "out"};
        for (size_t i = 0; i < sizeof managed / sizeof *managed; i++)
            if (!strcmp(key, managed[i]))
                return fail_at(p, k, "\"%s\" is set by the sweep itself (groups, arms, seeds, data, out), not in set", key);
        if (!config_field(key)) return fail_at(p, k, "\"%s\" is not an sgtrain setting (see sgtrain train --help)", key);
        Config c;
        char e[512];
        if (config_from_tier(&c, tier ? tier : "test", e, sizeof e) || config_set(&c, key, val, e, sizeof e))
            return fail_at(p, v, "%s", e);
        for (int i = 0; i < *nset; i++)
            if (!strcmp((*set)[i].key, key)) {
                snprintf((*set)[i].value, sizeof (*set)[i].value, "%s", val);
                goto next;
            }
        SweepSet *ns = realloc(*set, (size_t)(*nset + 1) * sizeof *ns);
        if (!ns) return fail_at(p, NULL, "out of memory");
        *set = ns;
        snprintf(ns[*nset].key, sizeof ns[*nset].key, "%s", key);
        snprintf(ns[*nset].value, sizeof ns[*nset].value, "%s", val);
        (*nset)++;
    next:;
    }
    return 0;
}

static int parse_resources(P *p, yaml_node_t *n, Resources *r) {
    if (want_type(p, n, YAML_MAPPING_NODE, "resources")) return -1;
    FOR_PAIRS(p, n, k, v) {
        long x;
        if (key_is(k, "nodes")) {
            if (get_int(p, v, "nodes", 1, 100000, &x)) return -1;
            r->nodes = (int)x;
        } else if (key_is(k, "gpus_per_node")) {
            if (get_int(p, v, "gpus_per_node", 0, 64, &x)) return -1;
            r->gpus_per_node = (int)x;
        } else if (key_is(k, "cpus_per_task")) {
            if (get_int(p, v, "cpus_per_task", 1, 4096, &x)) return -1;
            r->cpus_per_task = (int)x;
        } else if (key_is(k, "mem")) {
            if (get_str(p, v, "mem", r->mem, sizeof r->mem)) return -1;
        } else if (key_is(k, "time")) {
            if (get_str(p, v, "time", r->time, sizeof r->time)) return -1;
        } else if (key_is(k, "partition")) {
            if (get_str(p, v, "partition", r->partition, sizeof r->partition)) return -1;
        } else if (key_is(k, "account")) {
            if (get_str(p, v, "account", r->account, sizeof r->account)) return -1;
        } else if (key_is(k, "qos")) {
            if (get_str(p, v, "qos", r->qos, sizeof r->qos)) return -1;
        } else if (key_is(k, "sbatch")) {
            if (want_type(p, v, YAML_SEQUENCE_NODE, "sbatch")) return -1;
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = node(p, *it);
                char arg[512];
                if (get_str(p, e, "an sbatch argument", arg, sizeof arg)) return -1;
                if (strncmp(arg, "--", 2) || strlen(arg) < 3)
                    return fail_at(p, e, "an sbatch argument must be one long option like --constraint=h100, got \"%s\"", arg);
                char **ns = realloc(r->sbatch, (size_t)(r->n_sbatch + 1) * sizeof *ns);
                if (!ns || !(ns[r->n_sbatch] = strdup(arg))) return fail_at(p, NULL, "out of memory");
                r->sbatch = ns;
                r->n_sbatch++;
            }
        } else
            return unknown_key(p, k, "resources", "nodes, gpus_per_node, cpus_per_task, mem, time, partition, account, qos, sbatch");
    }
    /* sizes and times must look like what sbatch takes: no spaces, nothing else */
    static const char *ok = "0123456789:-KMGTkmgt";
    if (r->mem[0] && strspn(r->mem, ok) != strlen(r->mem)) return fail_at(p, n, "mem \"%s\": expected e.g. 64G", r->mem);
    if (r->time[0] && strspn(r->time, ok) != strlen(r->time))
        return fail_at(p, n, "time \"%s\": expected e.g. 12:00:00 or 1-00:00:00", r->time);
    for (const char *s = r->partition; *s; s++)
        if (*s == ' ') return fail_at(p, n, "partition \"%s\" contains a space", r->partition);
    return 0;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* seeds: N (0..N-1) or a list of distinct non-negative integers. */
static int parse_seeds(P *p, yaml_node_t *n, long *out, int cap, int *count) {
    long x;
    if (n->type == YAML_SCALAR_NODE) {
        if (get_int(p, n, "seeds", 1, cap, &x)) return -1;
        for (long i = 0; i < x; i++) out[i] = i;
        *count = (int)x;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE) return fail_at(p, n, "seeds must be a count or a list of seeds, not %s", kind_name(n));
    int k = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        if (k == cap) return fail_at(p, n, "more than %d seeds", cap);
        if (get_int(p, node(p, *it), "a seed", 0, 2147483647L, &out[k])) return -1;
        for (int j = 0; j < k; j++)
            if (out[j] == out[k]) return fail_at(p, node(p, *it), "seed %ld is listed twice", out[k]);
        k++;
    }
    if (!k) return fail_at(p, n, "the seed list is empty");
    qsort(out, (size_t)k, sizeof *out, cmp_long);
    *count = k;
    return 0;
}

enum { MAX_SEEDS = 1000 };

static int parse_group(P *p, yaml_node_t *k, yaml_node_t *n, Sweep *s, SweepGroup *g, yaml_node_t *data_map) {
    if (get_name(p, k, "a group name", g->name, sizeof g->name)) return -1;
    if (want_type(p, n, YAML_MAPPING_NODE, "a group")) return -1;
    yaml_node_t *tier = NULL, *data = NULL, *set = NULL, *arms = NULL, *seeds = NULL, *per = NULL, *res = NULL, *thr = NULL;
    FOR_PAIRS(p, n, kk, v) {
        if (key_is(kk, "tier")) tier = v;
        else if (key_is(kk, "data")) data = v;
        else if (key_is(kk, "set")) set = v;
        else if (key_is(kk, "arms")) arms = v;
        else if (key_is(kk, "seeds")) seeds = v;
        else if (key_is(kk, "seeds_per_arm")) per = v;
        else if (key_is(kk, "resources")) res = v;
        else if (key_is(kk, "throttle")) thr = v;
        else return unknown_key(p, kk, "a group", "tier, data, set, arms, seeds, seeds_per_arm, resources, throttle");
    }
    if (!tier) return fail_at(p, k, "group %s has no tier", g->name);
    if (!arms) return fail_at(p, k, "group %s has no arms", g->name);
    if (!seeds) return fail_at(p, k, "group %s has no seeds", g->name);
    if (get_str(p, tier, "tier", g->tier, sizeof g->tier)) return -1;
    Config c;
    char e[512];
    if (config_from_tier(&c, g->tier, e, sizeof e)) return fail_at(p, tier, "%s", e);
    /* data: a name from the top-level data mapping */
    char dname[SW_NAME] = "";
    if (data) {
        if (get_str(p, data, "data", dname, sizeof dname)) return -1;
    } else if (data_map && data_map->data.mapping.pairs.top - data_map->data.mapping.pairs.start == 1) {
        snprintf(dname, sizeof dname, "%s", scalar(node(p, data_map->data.mapping.pairs.start->key)));
    } else
        return fail_at(p, k, "group %s has no data (name one of the corpora under data:)", g->name);
    int found = 0;
    if (data_map)
        FOR_PAIRS(p, data_map, dk, dv) {
            if (!strcmp(scalar(dk), dname)) {
                snprintf(g->data, sizeof g->data, "%s", scalar(dv));
                found = 1;
            }
        }
    if (!found) return fail_at(p, data ? data : k, "data \"%s\" is not one of the corpora under data:", dname);
    /* the sweep-wide set, then the group's */
    for (int i = 0; i < s->n_set; i++) {
        char e2[512];
        if (config_set(&c, s->set[i].key, s->set[i].value, e2, sizeof e2)) return fail_at(p, k, "group %s: %s", g->name, e2);
    }
    if (set && parse_set(p, set, g->tier, &g->set, &g->n_set)) return -1;
    for (int i = 0; i < g->n_set; i++) config_set(&c, g->set[i].key, g->set[i].value, e, sizeof e);
    if (config_validate(&c, e, sizeof e)) return fail_at(p, set ? set : tier, "group %s: %s", g->name, e);
    g->block_size = c.block_size;
    g->threads = c.threads;
    /* arms */
    if (want_type(p, arms, YAML_SEQUENCE_NODE, "arms")) return -1;
    for (yaml_node_item_t *it = arms->data.sequence.items.start; it < arms->data.sequence.items.top; it++) {
        yaml_node_t *an = node(p, *it);
        char name[SW_NAME];
        if (get_str(p, an, "an arm", name, sizeof name)) return -1;
        const Arm *a = arm_find(name);
        if (!a) return fail_at(p, an, "unknown arm \"%s\" (known: %s)", name, arm_names());
        int idx = 0;
        while (arm_at(idx) != a) idx++;
        for (int j = 0; j < g->n_arms; j++)
            if (g->arms[j] == idx) return fail_at(p, an, "arm %s is listed twice", name);
        if (g->n_arms == 16) return fail_at(p, an, "more than 16 arms");
        g->arms[g->n_arms++] = idx;
    }
    if (!g->n_arms) return fail_at(p, arms, "the arm list is empty");
    /* seeds, then per-arm seed sets */
    g->max_seeds = MAX_SEEDS;
    g->seeds = malloc((size_t)g->n_arms * MAX_SEEDS * sizeof *g->seeds);
    if (!g->seeds) return fail_at(p, NULL, "out of memory");
    long base[MAX_SEEDS];
    int nb;
    if (parse_seeds(p, seeds, base, MAX_SEEDS, &nb)) return -1;
    for (int a = 0; a < g->n_arms; a++) {
        memcpy(g->seeds + (size_t)a * MAX_SEEDS, base, (size_t)nb * sizeof *base);
        g->n_seeds[a] = nb;
    }
    if (per) {
        if (want_type(p, per, YAML_MAPPING_NODE, "seeds_per_arm")) return -1;
        FOR_PAIRS(p, per, ak, av) {
            char name[SW_NAME];
            if (get_str(p, ak, "an arm", name, sizeof name)) return -1;
            int j = -1;
            for (int a = 0; a < g->n_arms; a++)
                if (!strcmp(arm_at(g->arms[a])->name, name)) j = a;
            if (j < 0) return fail_at(p, ak, "seeds_per_arm names %s, which is not in this group's arms", name);
            if (parse_seeds(p, av, g->seeds + (size_t)j * MAX_SEEDS, MAX_SEEDS, &g->n_seeds[j])) return -1;
        }
    }
    if (res && parse_resources(p, res, &g->res)) return -1;
    /* every run of the group would stop at once on a batch that its ranks
     * (one a GPU, sgsweep task) cannot share: refused here instead */
    const int ranks = (g->res.nodes > 0 ? g->res.nodes : 1) * (g->res.gpus_per_node > 0 ? g->res.gpus_per_node : 1);
    if (ranks > 1 && batch_split_check(&c, ranks, e, sizeof e))
        return fail_at(p, res, "group %s (nodes x gpus_per_node = %d ranks): %s", g->name, ranks, e);
    long t = 0;
    if (thr && get_int(p, thr, "throttle", 1, 100000, &t)) return -1;
    g->throttle = (int)t;
    return 0;
}

/* ---- analyses: sgtrain analyze on finished runs ---------------------------------------- */

const char *const sweep_analysis_kinds[AN_K_COUNT] = {"injection", "probes",    "exposure", "telemetry",
                                                       "incidence", "lambada",   "hellaswag", "wikitext"};
static const char *const junk_kinds[] = {"structured", "same_context", "gaussian", "random_direction", "own_direction"};
enum { JK_STRUCTURED = 0, JK_OWN_DIRECTION = 4, JK_COUNT = 5 };
static const char *const cutoff_kinds[] = {"median", "q25"};

/* sgtrain analyze's flags that an entry may give, in its --help order (the
 * keys take '_' or '-'; the command line gets '-'). */
enum { F_WHAT, F_BATCHES, F_BATCH_SIZE, F_SEQ_LEN, F_SEED, F_JUNK, F_CUTOFFS, F_DOSES, F_PROBE_DOSE, F_PROBE_JUNK,
       F_PROBE_CUTOFF, F_TOP_TOKENS, F_MIN_COUNT, F_SINK_POSITIONS, F_PERCENTILES, F_THREADS, F_COUNT };
static const char *const flag_keys[F_COUNT] = {"what",         "batches",        "batch_size",   "seq_len",
                                               "seed",         "junk",           "cutoffs",      "doses",
                                               "probe_dose",   "probe_junk",     "probe_cutoff", "top_tokens",
                                               "min_count",    "sink_positions", "percentiles",  "threads"};
#define FLAG_KEYS_TEXT                                                                                            \
    "what, batches, batch_size, seq_len, seed, junk, cutoffs, doses, probe_dose, probe_junk, probe_cutoff, "      \
    "top_tokens, min_count, sink_positions, percentiles, threads"

static void join_names(const char *const *names, int n, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%s%s", i ? ", " : "", names[i]);
    }
}

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

/* The words of a value that is a YAML list or one scalar with words separated
 * by commas (as sgtrain analyze takes them), each with the node to blame. */
typedef struct {
    yaml_node_t *node;
    char text[128];
} Word;
enum { MAX_WORDS = 64 };

static int get_words(P *p, yaml_node_t *n, const char *what, Word *w, int *count) {
    int k = 0;
    yaml_node_t *items[MAX_WORDS];
    int ni = 0;
    if (n->type == YAML_SCALAR_NODE) items[ni++] = n;
    else if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            if (ni == MAX_WORDS) return fail_at(p, n, "%s: more than %d entries", what, MAX_WORDS);
            items[ni++] = node(p, *it);
        }
    } else
        return fail_at(p, n, "%s must be a list (or one value), not %s", what, kind_name(n));
    for (int i = 0; i < ni; i++) {
        char buf[512];
        if (get_str(p, items[i], what, buf, sizeof buf)) return -1;
        char *save = NULL;
        int any = 0;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ') t++;
            size_t len = strlen(t);
            while (len && t[len - 1] == ' ') t[--len] = 0;
            if (!len) continue;
            if (k == MAX_WORDS) return fail_at(p, items[i], "%s: more than %d entries", what, MAX_WORDS);
            if (len >= sizeof w[k].text) return fail_at(p, items[i], "%s: \"%s\" is too long", what, t);
            w[k].node = items[i];
            snprintf(w[k].text, sizeof w[k].text, "%s", t);
            k++;
            any = 1;
        }
        if (!any) return fail_at(p, items[i], "%s: an empty entry", what);
    }
    if (!k) return fail_at(p, n, "%s: the list is empty", what);
    *count = k;
    return 0;
}

/* Names from NAMES (or "all" alone): *mask the bits, *all set for all,
 * JOINED the names joined by commas. */
static int get_names(P *p, yaml_node_t *n, const char *what, const char *const *names, int nn, int *mask, int *all,
                     char *joined, size_t cap) {
    Word w[MAX_WORDS];
    int k;
    if (get_words(p, n, what, w, &k)) return -1;
    char known[256];
    join_names(names, nn, known, sizeof known);
    *mask = 0, *all = 0, joined[0] = 0;
    for (int i = 0; i < k; i++) {
        if (!strcmp(w[i].text, "all")) {
            if (k > 1) return fail_at(p, w[i].node, "%s: \"all\" means every one and stands alone", what);
            *mask = (1 << nn) - 1, *all = 1;
            snprintf(joined, cap, "all");
            return 0;
        }
        int x = name_index(names, nn, w[i].text);
        if (x < 0) return fail_at(p, w[i].node, "%s: unknown \"%s\" (known: %s, or all)", what, w[i].text, known);
        if (*mask >> x & 1) return fail_at(p, w[i].node, "%s: %s is listed twice", what, w[i].text);
        *mask |= 1 << x;
        size_t len = strlen(joined);
        snprintf(joined + len, cap - len, "%s%s", len ? "," : "", w[i].text);
    }
    return 0;
}

/* A dose eps: a number >= 0, as sgtrain analyze takes it. */
static int get_dose(P *p, yaml_node_t *n, const char *what, const char *s, double *x) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0 || v > 1e6)
        return fail_at(p, n, "%s: expected a dose eps, a number in 0..1e6, got \"%s\"", what, s);
    *x = v;
    return 0;
}

typedef struct {
    yaml_node_t *node[F_COUNT]; /* the values given; NULL: sgtrain's default */
    char value[F_COUNT][512];   /* as sgtrain takes them; "" leaves the flag out */
    int what, junk_mask, junk_all, batch_size, probe_junk, seq_len, sink_positions;
    double probe_dose;
} AnFlags;

static int parse_an_flags(P *p, yaml_node_t *n, const SweepGroup *g, AnFlags *f) {
    if (want_type(p, n, YAML_MAPPING_NODE, "flags")) return -1;
    FOR_PAIRS(p, n, k, v) {
        char key[64];
        if (get_str(p, k, "a flag", key, sizeof key)) return -1;
        for (char *q = key; *q; q++) *q = *q == '-' ? '_' : *q;
        int id = name_index(flag_keys, F_COUNT, key);
        if (id < 0) return unknown_key(p, k, "flags", FLAG_KEYS_TEXT);
        if (f->node[id]) return fail_at(p, k, "flags: %s is given twice", key);
        f->node[id] = v;
        char *val = f->value[id];
        const size_t cap = sizeof f->value[id];
        long x;
        int mask, all;
        Word w[MAX_WORDS];
        int nw;
        switch (id) {
        case F_WHAT:
            if (get_names(p, v, "what", sweep_analysis_kinds, AN_K_ANALYZE, &mask, &all, val, cap)) return -1;
            f->what = all ? 0 : mask;
            if (all) val[0] = 0; /* sgtrain's default: every analysis the arm has */
            break;
        case F_JUNK:
            if (get_names(p, v, "junk", junk_kinds, JK_COUNT, &f->junk_mask, &f->junk_all, val, cap)) return -1;
            if (f->junk_all) val[0] = 0; /* every junk type the arm has */
            break;
        case F_CUTOFFS:
            if (get_names(p, v, "cutoffs", cutoff_kinds, 2, &mask, &all, val, cap)) return -1;
            if (all) val[0] = 0;
            break;
        case F_DOSES: {
            if (get_words(p, v, "doses", w, &nw)) return -1;
            if (nw > 16) return fail_at(p, v, "doses: at most 16 doses, got %d", nw);
            double d[16];
            for (int i = 0; i < nw; i++) {
                if (get_dose(p, w[i].node, "doses", w[i].text, &d[i])) return -1;
                for (int j = 0; j < i; j++)
                    if (d[j] == d[i]) return fail_at(p, w[i].node, "doses: %s is listed twice", w[i].text);
                size_t len = strlen(val);
                snprintf(val + len, cap - len, "%s%s", i ? "," : "", w[i].text);
            }
            break;
        }
        case F_PROBE_DOSE:
            if (get_str(p, v, "probe_dose", val, cap) || get_dose(p, v, "probe_dose", val, &f->probe_dose)) return -1;
            break;
        case F_PROBE_JUNK:
        case F_PROBE_CUTOFF: {
            const char *const *names = id == F_PROBE_JUNK ? junk_kinds : cutoff_kinds;
            int nn = id == F_PROBE_JUNK ? JK_COUNT : 2;
            if (get_str(p, v, key, val, cap)) return -1;
            int i = name_index(names, nn, val);
            if (i < 0) {
                char known[256];
                join_names(names, nn, known, sizeof known);
                return fail_at(p, v, "%s: unknown \"%s\" (known: %s)", key, val, known);
            }
            if (id == F_PROBE_JUNK) f->probe_junk = i;
            break;
        }
        case F_SEQ_LEN:
            if (get_int(p, v, key, 2, 1L << 20, &x)) return -1;
            if (x > g->block_size)
                return fail_at(p, v, "seq_len %ld exceeds the context of group %s (%s: %d tokens)", x, g->name, g->tier,
                               g->block_size);
            snprintf(val, cap, "%ld", x);
            f->seq_len = (int)x;
            break;
        case F_PERCENTILES: {
            if (get_words(p, v, "percentiles", w, &nw)) return -1;
            if (nw > 8) return fail_at(p, v, "percentiles: at most 8, got %d", nw);
            double q[8];
            for (int i = 0; i < nw; i++) {
                char *end;
                errno = 0;
                q[i] = strtod(w[i].text, &end);
                if (errno || end == w[i].text || *end || !(q[i] > 0 && q[i] < 100))
                    return fail_at(p, w[i].node, "percentiles: expected a percentile between 0 and 100 (exclusive), "
                                                 "got \"%s\"", w[i].text);
                for (int j = 0; j < i; j++)
                    if (q[j] == q[i]) return fail_at(p, w[i].node, "percentiles: %s is listed twice", w[i].text);
                size_t len = strlen(val);
                snprintf(val + len, cap - len, "%s%s", i ? "," : "", w[i].text);
            }
            break;
        }
        default: {
            static const long lo[F_COUNT] = {[F_BATCHES] = 1, [F_BATCH_SIZE] = 1, [F_SEED] = 0, [F_TOP_TOKENS] = 0,
                                             [F_MIN_COUNT] = 1, [F_SINK_POSITIONS] = 0, [F_THREADS] = 1};
            static const long hi[F_COUNT] = {[F_BATCHES] = 100000, [F_BATCH_SIZE] = 4096, [F_SEED] = LONG_MAX,
                                             [F_TOP_TOKENS] = 10000, [F_MIN_COUNT] = 1L << 40,
                                             [F_SINK_POSITIONS] = 1L << 20, [F_THREADS] = 4096};
            if (get_int(p, v, key, lo[id], hi[id], &x)) return -1;
            snprintf(val, cap, "%ld", x);
            if (id == F_BATCH_SIZE) f->batch_size = (int)x;
            if (id == F_SINK_POSITIONS) f->sink_positions = (int)x;
        }
        }
    }
    return 0;
}

/* The files an entry's analysis of ARM writes. */
static int entry_kinds(const SweepAnalysis *e, int arm) {
    if (e->what) return e->what;
    int k = (1 << AN_K_ANALYZE) - 1;
    if (arm_at(arm)->filter == FILTER_NONE) k &= ~(1 << AN_K_PROBES);
    return k;
}

static int has_seed(const SweepGroup *g, int a, long seed) {
    for (int j = 0; j < g->n_seeds[a]; j++)
        if (g->seeds[(size_t)a * g->max_seeds + j] == seed) return 1;
    return 0;
}

static int group_arm_pos(const SweepGroup *g, int arm) {
    for (int a = 0; a < g->n_arms; a++)
        if (g->arms[a] == arm) return a;
    return -1;
}

static int entry_selects(const SweepAnalysis *e, const SweepGroup *g, int arm, long seed) {
    int in = 0;
    for (int i = 0; i < e->n_arms; i++) in |= e->arms[i] == arm;
    if (!in) return 0;
    if (e->all_seeds) return group_arm_pos(g, arm) >= 0 && has_seed(g, group_arm_pos(g, arm), seed);
    for (int i = 0; i < e->n_seeds; i++)
        if (e->seeds[i] == seed) return 1;
    return 0;
}

static int res_copy(Resources *dst, const Resources *src) {
    *dst = *src;
    dst->sbatch = NULL;
    dst->n_sbatch = 0;
    for (int i = 0; i < src->n_sbatch; i++) {
        char **ns = realloc(dst->sbatch, (size_t)(i + 1) * sizeof *ns);
        if (!ns) return -1;
        dst->sbatch = ns;
        if (!(ns[i] = strdup(src->sbatch[i]))) return -1;
        dst->n_sbatch = i + 1;
    }
    return 0;
}

/* An entry's zeroshot: mapping (docs/zeroshot.md): the task and its file,
 * checked as sgtrain zeroshot checks its flags; the file itself is read
 * when the task runs, as a group's data is. */
static int parse_zeroshot(P *p, yaml_node_t *n, const SweepGroup *g, SweepAnalysis *e) {
    if (want_type(p, n, YAML_MAPPING_NODE, "zeroshot")) return -1;
    static const char *const keys[] = {"task", "file", "vocab", "batch_size", "stride", "limit", "threads"};
    enum { Z_TASK, Z_FILE, Z_VOCAB, Z_BATCH_SIZE, Z_STRIDE, Z_LIMIT, Z_THREADS, Z_COUNT };
    yaml_node_t *at[Z_COUNT] = {0};
    char val[Z_COUNT][SW_PATH] = {{0}};
    FOR_PAIRS(p, n, k, v) {
        char key[64];
        if (get_str(p, k, "a zeroshot key", key, sizeof key)) return -1;
        for (char *q = key; *q; q++) *q = *q == '-' ? '_' : *q;
        int id = name_index(keys, Z_COUNT, key);
        if (id < 0) return unknown_key(p, k, "zeroshot", "task, file, vocab, batch_size, stride, limit, threads");
        if (at[id]) return fail_at(p, k, "zeroshot: %s is given twice", key);
        at[id] = v;
        long x;
        static const long lo[Z_COUNT] = {[Z_BATCH_SIZE] = 1, [Z_STRIDE] = 1, [Z_LIMIT] = 1, [Z_THREADS] = 1};
        static const long hi[Z_COUNT] = {[Z_BATCH_SIZE] = 4096, [Z_STRIDE] = 1L << 20, [Z_LIMIT] = 1L << 40,
                                         [Z_THREADS] = 4096};
        if (id <= Z_VOCAB) {
            if (get_str(p, v, key, val[id], sizeof val[id])) return -1;
            if (!val[id][0]) return fail_at(p, v, "zeroshot: %s is empty", key);
        } else {
            if (get_int(p, v, key, lo[id], hi[id], &x)) return -1;
            snprintf(val[id], sizeof val[id], "%ld", x);
        }
    }
    if (!at[Z_TASK]) return fail_at(p, n, "analysis %s: zeroshot needs a task (lambada, hellaswag or wikitext)", e->name);
    if (!at[Z_FILE]) return fail_at(p, n, "analysis %s: zeroshot needs the task's file", e->name);
    const int task = name_index(sweep_analysis_kinds + AN_K_ANALYZE, AN_K_COUNT - AN_K_ANALYZE, val[Z_TASK]);
    if (task < 0)
        return fail_at(p, at[Z_TASK], "zeroshot: unknown task \"%s\" (known: lambada, hellaswag, wikitext)",
                       val[Z_TASK]);
    const int wikitext = AN_K_ANALYZE + task == AN_K_WIKITEXT;
    if (at[Z_STRIDE] && !wikitext) return fail_at(p, at[Z_STRIDE], "zeroshot: stride is for the wikitext task only");
    if (at[Z_LIMIT] && wikitext)
        return fail_at(p, at[Z_LIMIT], "zeroshot: limit is for lambada and hellaswag (wikitext is one text)");
    if (at[Z_STRIDE] && strtol(val[Z_STRIDE], NULL, 10) > g->block_size)
        return fail_at(p, at[Z_STRIDE], "zeroshot: stride %s exceeds the context of group %s (%s: %d tokens)",
                       val[Z_STRIDE], g->name, g->tier, g->block_size);
    if (!at[Z_THREADS] && g->threads > 0) snprintf(val[Z_THREADS], sizeof val[Z_THREADS], "%d", g->threads);
    e->zeroshot = 1;
    e->what = 1 << (AN_K_ANALYZE + task);
    for (int id = 0; id < Z_COUNT; id++) {
        if (!val[id][0]) continue;
        SweepFlag *fl = &e->flags[e->n_flags++];
        snprintf(fl->flag, sizeof fl->flag, "%s", keys[id]);
        for (char *q = fl->flag; *q; q++) *q = *q == '_' ? '-' : *q;
        memcpy(fl->value, val[id], sizeof fl->value);
    }
    return 0;
}

static int parse_analysis(P *p, yaml_node_t *k, yaml_node_t *n, Sweep *s, SweepAnalysis *e) {
    if (get_name(p, k, "an analysis name", e->name, sizeof e->name)) return -1;
    if (want_type(p, n, YAML_MAPPING_NODE, "an analysis")) return -1;
    yaml_node_t *group = NULL, *arms = NULL, *seeds = NULL, *flags = NULL, *zs = NULL, *res = NULL, *thr = NULL;
    FOR_PAIRS(p, n, kk, v) {
        if (key_is(kk, "group")) group = v;
        else if (key_is(kk, "arms")) arms = v;
        else if (key_is(kk, "seeds")) seeds = v;
        else if (key_is(kk, "flags")) flags = v;
        else if (key_is(kk, "zeroshot")) zs = v;
        else if (key_is(kk, "resources")) res = v;
        else if (key_is(kk, "throttle")) thr = v;
        else return unknown_key(p, kk, "an analysis", "group, arms, seeds, flags, zeroshot, resources, throttle");
    }
    if (flags && zs)
        return fail_at(p, zs, "analysis %s: flags are sgtrain analyze's and zeroshot is sgtrain zeroshot's: an entry "
                              "runs one of them", e->name);
    /* the group: named, or the entry's own name */
    char gname[SW_NAME];
    if (group) {
        if (get_str(p, group, "group", gname, sizeof gname)) return -1;
    } else
        snprintf(gname, sizeof gname, "%s", e->name);
    e->group = -1;
    for (int i = 0; i < s->n_groups; i++)
        if (!strcmp(s->groups[i].name, gname)) e->group = i;
    if (e->group < 0) {
        char known[1024] = "";
        for (int i = 0; i < s->n_groups; i++) {
            size_t len = strlen(known);
            snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", s->groups[i].name);
        }
        if (group) return fail_at(p, group, "analysis %s: no group named \"%s\" (groups: %s)", e->name, gname, known);
        return fail_at(p, k, "analysis %s: which group? None is named %s; add group: (one of %s)", e->name, e->name,
                       known);
    }
    const SweepGroup *g = &s->groups[e->group];
    /* arms: the group's, or some of them */
    if (arms) {
        if (want_type(p, arms, YAML_SEQUENCE_NODE, "arms")) return -1;
        for (yaml_node_item_t *it = arms->data.sequence.items.start; it < arms->data.sequence.items.top; it++) {
            yaml_node_t *an = node(p, *it);
            char name[SW_NAME];
            if (get_str(p, an, "an arm", name, sizeof name)) return -1;
            const Arm *a = arm_find(name);
            if (!a) return fail_at(p, an, "unknown arm \"%s\" (known: %s)", name, arm_names());
            int idx = 0;
            while (arm_at(idx) != a) idx++;
            if (group_arm_pos(g, idx) < 0) {
                char known[512] = "";
                for (int j = 0; j < g->n_arms; j++) {
                    size_t len = strlen(known);
                    snprintf(known + len, sizeof known - len, "%s%s", j ? ", " : "", arm_at(g->arms[j])->name);
                }
                return fail_at(p, an, "arm %s is not in group %s (its arms: %s)", name, g->name, known);
            }
            for (int j = 0; j < e->n_arms; j++)
                if (e->arms[j] == idx) return fail_at(p, an, "arm %s is listed twice", name);
            e->arms[e->n_arms++] = idx;
        }
        if (!e->n_arms) return fail_at(p, arms, "the arm list is empty");
    } else {
        memcpy(e->arms, g->arms, sizeof e->arms);
        e->n_arms = g->n_arms;
    }
    /* seeds: [0] unless given; "all" is every seed of each arm */
    e->seeds = malloc(MAX_SEEDS * sizeof *e->seeds);
    if (!e->seeds) return fail_at(p, NULL, "out of memory");
    if (!seeds) {
        e->seeds[0] = 0;
        e->n_seeds = 1;
    } else if (seeds->type == YAML_SCALAR_NODE && !strcmp(scalar(seeds), "all"))
        e->all_seeds = 1;
    else if (parse_seeds(p, seeds, e->seeds, MAX_SEEDS, &e->n_seeds))
        return -1;
    for (int i = 0; i < e->n_arms && !e->all_seeds; i++) {
        int a = group_arm_pos(g, e->arms[i]);
        for (int j = 0; j < e->n_seeds; j++)
            if (!has_seed(g, a, e->seeds[j])) {
                char known[512] = "";
                for (int q = 0; q < g->n_seeds[a] && strlen(known) < 400; q++) {
                    size_t len = strlen(known);
                    snprintf(known + len, sizeof known - len, "%s%ld", q ? ", " : "", g->seeds[(size_t)a * g->max_seeds + q]);
                }
                /* blame the list entry that names it */
                yaml_node_t *at = seeds ? seeds : k;
                if (seeds && seeds->type == YAML_SEQUENCE_NODE)
                    for (yaml_node_item_t *it = seeds->data.sequence.items.start; it < seeds->data.sequence.items.top; it++)
                        if (strtol(scalar(node(p, *it)), NULL, 10) == e->seeds[j]) at = node(p, *it);
                return fail_at(p, at, "analysis %s: seed %ld is not a seed of %s in group %s (its seeds: %s)%s",
                               e->name, e->seeds[j], arm_at(e->arms[i])->name, g->name, known,
                               seeds ? "" : "; an analysis takes seed 0 unless seeds: says otherwise");
            }
    }
    if (zs) {
        if (parse_zeroshot(p, zs, g, e)) return -1;
        goto resources;
    }
    /* flags, then what each selected arm can do with them (sgtrain's own checks) */
    AnFlags f;
    memset(&f, 0, sizeof f);
    f.junk_all = 1, f.junk_mask = (1 << JK_COUNT) - 1, f.batch_size = 8, f.probe_junk = JK_STRUCTURED,
    f.probe_dose = 0.2, f.seq_len = g->block_size, f.sink_positions = 4;
    if (flags && parse_an_flags(p, flags, g, &f)) return -1;
    e->what = f.what;
    if ((!f.what || (f.what >> AN_K_INCIDENCE & 1)) && f.seq_len - f.sink_positions < 2)
        return fail_at(p, f.node[F_SINK_POSITIONS] ? f.node[F_SINK_POSITIONS] : f.node[F_SEQ_LEN],
                       "analysis %s: incidence needs at least 2 reads past the %d sink positions, and sequences of %d "
                       "tokens have %d: lower sink_positions, raise seq_len, or list what without incidence",
                       e->name, f.sink_positions, f.seq_len,
                       f.seq_len > f.sink_positions ? f.seq_len - f.sink_positions : 0);
    for (int i = 0; i < e->n_arms; i++) {
        const Arm *a = arm_at(e->arms[i]);
        const int gated = a->filter != FILTER_NONE, proj = a->filter == FILTER_PROJ;
        const int kinds = entry_kinds(e, e->arms[i]);
        if ((f.what >> AN_K_PROBES & 1) && !gated)
            return fail_at(p, f.node[F_WHAT],
                           "analysis %s: probes override a gate, and %s has none: list only gated arms (normgate, "
                           "renorm, projgate, combo, combo2) in arms, or leave probes out of what (without what, "
                           "every arm gets each analysis it has)",
                           e->name, a->name);
        if (!f.junk_all && (f.junk_mask >> JK_OWN_DIRECTION & 1) && !proj)
            return fail_at(p, f.node[F_JUNK],
                           "analysis %s: own_direction junk is the direction of a projection gate, which only projgate "
                           "and combo2 have, and %s has none (without junk, every arm gets each junk type it has)",
                           e->name, a->name);
        const int probes = kinds >> AN_K_PROBES & 1;
        if (probes && f.probe_junk == JK_OWN_DIRECTION && f.probe_dose > 0 && !proj)
            return fail_at(p, f.node[F_PROBE_JUNK],
                           "analysis %s: probe_junk own_direction needs a projection gate (projgate, combo2), and %s "
                           "has a norm gate",
                           e->name, a->name);
        const int uses_struct = ((kinds >> AN_K_INJECTION & 1) && (f.junk_mask >> JK_STRUCTURED & 1)) ||
                                (probes && f.probe_dose > 0 && f.probe_junk == JK_STRUCTURED);
        if (uses_struct && f.batch_size < 2)
            return fail_at(p, f.node[F_BATCH_SIZE],
                           "analysis %s: structured junk is a read from another sequence of the batch, so batch_size "
                           "must be at least 2 (or leave structured out of junk%s)",
                           e->name, probes ? " and set another probe_junk" : "");
    }
    if (!f.node[F_THREADS] && g->threads > 0) snprintf(f.value[F_THREADS], sizeof f.value[F_THREADS], "%d", g->threads);
    for (int id = 0; id < F_COUNT; id++) {
        if (!f.value[id][0]) continue;
        SweepFlag *fl = &e->flags[e->n_flags++];
        snprintf(fl->flag, sizeof fl->flag, "%s", flag_keys[id]);
        for (char *q = fl->flag; *q; q++) *q = *q == '_' ? '-' : *q;
        snprintf(fl->value, sizeof fl->value, "%s", f.value[id]);
    }
resources: /* one process on one node */
    if (res) {
        if (parse_resources(p, res, &e->res)) return -1;
        if (e->res.nodes > 1 || e->res.gpus_per_node > 1)
            return fail_at(p, res, "analysis %s: an analysis runs as one process: at most nodes: 1 and gpus_per_node: 1",
                           e->name);
    } else {
        if (res_copy(&e->res, &g->res)) return fail_at(p, NULL, "out of memory");
        if (e->res.nodes > 1) e->res.nodes = 1;
        if (e->res.gpus_per_node > 1) e->res.gpus_per_node = 1;
    }
    long t = 0;
    if (thr && get_int(p, thr, "throttle", 1, 100000, &t)) return -1;
    e->throttle = (int)t;
    return 0;
}

static int parse_analyses(P *p, yaml_node_t *n, Sweep *s) {
    if (want_type(p, n, YAML_MAPPING_NODE, "analyses")) return -1;
    int na = (int)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    s->analyses = calloc((size_t)na + 1, sizeof *s->analyses);
    yaml_node_t **keys = calloc((size_t)na + 1, sizeof *keys);
    if (!s->analyses || !keys) {
        free(keys);
        return fail_at(p, NULL, "out of memory");
    }
    int rc = 0;
    FOR_PAIRS(p, n, ak, av) {
        SweepAnalysis *e = &s->analyses[s->n_analyses];
        keys[s->n_analyses++] = ak; /* counted first: sweep_free frees a half-parsed entry too */
        rc = parse_analysis(p, ak, av, s, e);
        for (int i = 0; !rc && i < s->n_analyses - 1; i++)
            if (!strcmp(s->analyses[i].name, e->name)) rc = fail_at(p, ak, "analysis %s is defined twice", e->name);
        if (rc) {
            free(keys);
            return -1;
        }
    }
    /* two entries must not write the same file of the same run */
    for (int j = 0; !rc && j < s->n_analyses; j++)
        for (int i = 0; !rc && i < j; i++) {
            const SweepAnalysis *a = &s->analyses[i], *b = &s->analyses[j];
            if (a->group != b->group) continue;
            const SweepGroup *g = &s->groups[a->group];
            for (int q = 0; !rc && q < g->n_arms; q++)
                for (int r = 0; !rc && r < g->n_seeds[q]; r++) {
                    long seed = g->seeds[(size_t)q * g->max_seeds + r];
                    int arm = g->arms[q];
                    if (!entry_selects(a, g, arm, seed) || !entry_selects(b, g, arm, seed)) continue;
                    int both = entry_kinds(a, arm) & entry_kinds(b, arm);
                    if (!both) continue;
                    int kind = 0;
                    while (!(both >> kind & 1)) kind++;
                    rc = fail_at(p, keys[j],
                                 "analyses %s and %s both write %s.json of %s/%s-s%ld: give them different arms, "
                                 "seeds or what",
                                 a->name, b->name, sweep_analysis_kinds[kind], g->name, arm_at(arm)->name, seed);
                }
        }
    free(keys);
    return rc;
}

static int parse_root(P *p, Sweep *s) {
    yaml_node_t *root = yaml_document_get_root_node(p->doc);
    if (!root) return fail_at(p, NULL, "the file is empty (a sweep needs name, out and groups)");
    if (want_type(p, root, YAML_MAPPING_NODE, "a sweep file")) return -1;
    yaml_node_t *name = NULL, *out = NULL, *groups = NULL, *data = NULL, *set = NULL, *analyses = NULL;
    FOR_PAIRS(p, root, k, v) {
        if (key_is(k, "name")) name = v;
        else if (key_is(k, "analyses")) analyses = v;
        else if (key_is(k, "out")) out = v;
        else if (key_is(k, "groups")) groups = v;
        else if (key_is(k, "data")) data = v;
        else if (key_is(k, "set")) set = v;
        else if (key_is(k, "sgtrain")) {
            if (get_str(p, v, "sgtrain", s->sgtrain, sizeof s->sgtrain)) return -1;
        } else if (key_is(k, "slurm")) {
            if (want_type(p, v, YAML_MAPPING_NODE, "slurm")) return -1;
            FOR_PAIRS(p, v, sk, sv) {
                long x;
                if (key_is(sk, "signal_margin")) {
                    if (get_int(p, sv, "signal_margin", 10, 65535, &x)) return -1;
                    s->signal_margin = (int)x;
                } else if (key_is(sk, "log_dir")) {
                    if (get_str(p, sv, "log_dir", s->log_dir, sizeof s->log_dir)) return -1;
                } else if (key_is(sk, "resources")) {
                    if (parse_resources(p, sv, &s->report_res)) return -1;
                } else
                    return unknown_key(p, sk, "slurm", "signal_margin, log_dir, resources");
            }
        } else if (key_is(k, "report")) {
            if (want_type(p, v, YAML_MAPPING_NODE, "report")) return -1;
            FOR_PAIRS(p, v, rk, rv) {
                if (key_is(rk, "figures")) {
                    if (get_bool(p, rv, "figures", &s->figures)) return -1;
                } else if (key_is(rk, "curves")) {
                    if (get_bool(p, rv, "curves", &s->curves)) return -1;
                } else
                    return unknown_key(p, rk, "report", "figures, curves");
            }
        } else
            return unknown_key(p, k, "the sweep", "name, out, sgtrain, data, set, groups, analyses, slurm, report");
    }
    if (!name) return fail_at(p, root, "no name (a name for the sweep's jobs, e.g. name: paper)");
    if (!out) return fail_at(p, root, "no out (the directory the runs go to, e.g. out: runs/paper)");
    if (!groups) return fail_at(p, root, "no groups (each a tier on a corpus with its arms and seeds)");
    if (get_name(p, name, "the sweep name", s->name, sizeof s->name) || get_str(p, out, "out", s->out, sizeof s->out))
        return -1;
    if (!s->out[0]) return fail_at(p, out, "out is empty");
    if (data) {
        if (want_type(p, data, YAML_MAPPING_NODE, "data")) return -1;
        FOR_PAIRS(p, data, dk, dv) {
            char nm[SW_NAME], path[SW_PATH];
            if (get_name(p, dk, "a corpus name", nm, sizeof nm) || get_str(p, dv, "a data directory", path, sizeof path))
                return -1;
        }
    }
    if (set && parse_set(p, set, NULL, &s->set, &s->n_set)) return -1;
    if (want_type(p, groups, YAML_MAPPING_NODE, "groups")) return -1;
    int ng = (int)(groups->data.mapping.pairs.top - groups->data.mapping.pairs.start);
    if (!ng) return fail_at(p, groups, "groups is empty");
    s->groups = calloc((size_t)ng, sizeof *s->groups);
    if (!s->groups) return fail_at(p, NULL, "out of memory");
    FOR_PAIRS(p, groups, gk, gv) {
        SweepGroup *g = &s->groups[s->n_groups++]; /* counted first: sweep_free frees a half-parsed group too */
        if (parse_group(p, gk, gv, s, g, data)) return -1;
        for (int i = 0; i < s->n_groups - 1; i++)
            if (!strcmp(s->groups[i].name, g->name)) return fail_at(p, gk, "group %s is defined twice", g->name);
    }
    if (analyses && parse_analyses(p, analyses, s)) return -1;
    return 0;
}

int sweep_load(Sweep *s, const char *path, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->sgtrain, sizeof s->sgtrain, "build/sgtrain");
    snprintf(s->log_dir, sizeof s->log_dir, "logs");
    s->signal_margin = 300;
    s->figures = 1;
    FILE *f = fopen(path, "rb");
    if (!f) return sg_fail(err, errlen, "%s: %s", path, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = sg_fail(err, errlen, "%s:%zu:%zu: %s%s%s", path, parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "YAML syntax error", parser.context ? " " : "",
                     parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        fclose(f);
        return rc;
    }
    P p = {&doc, path, err, errlen};
    rc = parse_root(&p, s);
    yaml_document_delete(&doc);
    /* a second document in the file would be silently ignored: refuse it */
    if (!rc && yaml_parser_load(&parser, &doc)) {
        if (yaml_document_get_root_node(&doc))
            rc = sg_fail(err, errlen, "%s:%zu: a second YAML document; a sweep file holds one", path,
                         doc.start_mark.line + 1);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    fclose(f);
    if (rc) sweep_free(s);
    return rc;
}

static void res_free(Resources *r) {
    for (int i = 0; i < r->n_sbatch; i++) free(r->sbatch[i]);
    free(r->sbatch);
}

void sweep_free(Sweep *s) {
    for (int i = 0; i < s->n_groups; i++) {
        free(s->groups[i].set);
        free(s->groups[i].seeds);
        res_free(&s->groups[i].res);
    }
    free(s->groups);
    for (int i = 0; i < s->n_analyses; i++) {
        free(s->analyses[i].seeds);
        res_free(&s->analyses[i].res);
    }
    free(s->analyses);
    free(s->set);
    res_free(&s->report_res);
    memset(s, 0, sizeof *s);
}

int sweep_tasks(const Sweep *s, SweepTask **tasks, int *n, char *err, size_t errlen) {
    int total = 0;
    for (int g = 0; g < s->n_groups; g++)
        for (int a = 0; a < s->groups[g].n_arms; a++) total += s->groups[g].n_seeds[a];
    SweepTask *t = calloc((size_t)total + 1, sizeof *t);
    if (!t) return sg_fail(err, errlen, "out of memory");
    int k = 0;
    for (int g = 0; g < s->n_groups; g++) {
        const SweepGroup *G = &s->groups[g];
        int idx = 0;
        for (int a = 0; a < G->n_arms; a++)
            for (int j = 0; j < G->n_seeds[a]; j++) {
                SweepTask *x = &t[k++];
                x->group = g;
                x->arm = G->arms[a];
                x->seed = G->seeds[(size_t)a * G->max_seeds + j];
                x->index = idx++;
                snprintf(x->dir, sizeof x->dir, "%s/%s/%s-s%ld", s->out, G->name, arm_at(x->arm)->name, x->seed);
            }
    }
    *tasks = t;
    *n = total;
    return 0;
}

static int push(char ***v, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int push(char ***v, int *n, const char *fmt, ...) {
    char buf[SW_PATH + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nv = realloc(*v, (size_t)(*n + 2) * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    if (!(nv[*n] = strdup(buf))) return -1;
    nv[++*n] = NULL;
    return 0;
}

char **sweep_train_argv(const Sweep *s, const SweepTask *t) {
    const SweepGroup *g = &s->groups[t->group];
    char **v = NULL;
    int n = 0, bad = 0;
    bad |= push(&v, &n, "%s", s->sgtrain);
    bad |= push(&v, &n, "train");
    bad |= push(&v, &n, "--tier"), bad |= push(&v, &n, "%s", g->tier);
    bad |= push(&v, &n, "--arm"), bad |= push(&v, &n, "%s", arm_at(t->arm)->name);
    bad |= push(&v, &n, "--seed"), bad |= push(&v, &n, "%ld", t->seed);
    bad |= push(&v, &n, "--data"), bad |= push(&v, &n, "%s", g->data);
    bad |= push(&v, &n, "--out"), bad |= push(&v, &n, "%s", t->dir);
    for (int i = 0; i < s->n_set; i++) {
        int over = 0;
        for (int j = 0; j < g->n_set; j++) over |= !strcmp(g->set[j].key, s->set[i].key);
        if (over) continue;
        bad |= push(&v, &n, "--%s", s->set[i].key), bad |= push(&v, &n, "%s", s->set[i].value);
    }
    for (int j = 0; j < g->n_set; j++)
        bad |= push(&v, &n, "--%s", g->set[j].key), bad |= push(&v, &n, "%s", g->set[j].value);
    if (bad) {
        sweep_argv_free(v);
        return NULL;
    }
    return v;
}

void sweep_argv_free(char **argv) {
    for (char **p = argv; p && *p; p++) free(*p);
    free(argv);
}

static int file_in(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    return fs_exists(path);
}

TaskState sweep_task_state(const SweepTask *t, long *step) {
    char path[SW_PATH + 256];
    if (step) *step = 0;
    if (file_in(t->dir, "result.json", path, sizeof path)) {
        json_object *o = json_object_from_file(path), *v;
        int ok = o && json_object_object_get_ex(o, "final_val_loss", &v) &&
                 (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
        if (o) json_object_put(o);
        if (ok) return TS_DONE;
    }
    if (file_in(t->dir, "failed.json", path, sizeof path)) return TS_FAILED;
    if (step && file_in(t->dir, "metrics.jsonl", path, sizeof path)) {
        FILE *f = fopen(path, "rb");
        if (f) {
            char buf[4096];
            fseek(f, 0, SEEK_END);
            long size = ftell(f);
            fseek(f, size > 4095 ? size - 4095 : 0, SEEK_SET);
            size_t k = fread(buf, 1, sizeof buf - 1, f);
            buf[k] = 0;
            for (char *q = buf; (q = strstr(q, "{\"step\":")); q++) {
                long x = strtol(q + 8, NULL, 10);
                if (x > *step) *step = x;
            }
            fclose(f);
        }
    }
    if (file_in(t->dir, "checkpoint.bin", path, sizeof path)) return TS_INTERRUPTED;
    if (file_in(t->dir, "config.yaml", path, sizeof path)) return TS_STARTED;
    return TS_PENDING;
}

void shell_quote(char *dst, size_t n, const char *w) {
    size_t k = strlen(dst);
    int plain = *w != 0;
    for (const char *q = w; *q; q++)
        plain &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                 strchr("-_./=:,%@+", *q) != NULL;
    if (plain) {
        snprintf(dst + k, n > k ? n - k : 0, "%s", w);
        return;
    }
    if (k + 1 < n) dst[k++] = '\'';
    for (const char *q = w; *q && k + 5 < n; q++) {
        if (*q == '\'') {
            memcpy(dst + k, "'\\''", 4);
            k += 4;
        } else
            dst[k++] = *q;
    }
    if (k + 1 < n) dst[k++] = '\'';
    dst[k < n ? k : n - 1] = 0;
}

/* ---- analysis tasks ------------------------------------------------------------------ */

const char *const an_state_names[] = {"waiting", "blocked", "pending", "failed", "done"};

int sweep_analysis_tasks(const Sweep *s, const SweepTask *tasks, int ntasks, SweepAnTask **an, int *n, char *err,
                         size_t errlen) {
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        int k = 0;
        for (int e = 0; e < s->n_analyses; e++) {
            const SweepAnalysis *E = &s->analyses[e];
            for (int i = 0; i < ntasks; i++) {
                const SweepTask *t = &tasks[i];
                if (t->group != E->group || !entry_selects(E, &s->groups[t->group], t->arm, t->seed)) continue;
                if (pass) (*an)[k] = (SweepAnTask){e, i, t->index, entry_kinds(E, t->arm)};
                k++;
            }
        }
        if (!pass) {
            total = k;
            *an = calloc((size_t)total + 1, sizeof **an);
            if (!*an) return sg_fail(err, errlen, "out of memory");
        }
    }
    *n = total;
    return 0;
}

char **sweep_analyze_argv(const Sweep *s, const SweepTask *run, const SweepAnTask *a) {
    const SweepAnalysis *e = &s->analyses[a->entry];
    char **v = NULL;
    int n = 0, bad = 0;
    bad |= push(&v, &n, "%s", s->sgtrain);
    bad |= push(&v, &n, e->zeroshot ? "zeroshot" : "analyze");
    bad |= push(&v, &n, "%s", run->dir);
    for (int i = 0; i < e->n_flags; i++)
        bad |= push(&v, &n, "--%s", e->flags[i].flag), bad |= push(&v, &n, "%s", e->flags[i].value);
    if (bad) {
        sweep_argv_free(v);
        return NULL;
    }
    return v;
}

void sweep_analysis_failed_path(const Sweep *s, const SweepTask *run, const SweepAnTask *a, char *path, size_t n) {
    snprintf(path, n, "%s/analysis/failed-%s.json", run->dir, s->analyses[a->entry].name);
}

static int older(const struct stat *a, const struct stat *b) {
    return a->st_mtim.tv_sec < b->st_mtim.tv_sec ||
           (a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec < b->st_mtim.tv_nsec);
}

AnState sweep_analysis_state(const Sweep *s, const SweepTask *run, const SweepAnTask *a) {
    TaskState ts = sweep_task_state(run, NULL);
    if (ts == TS_FAILED) return AS_BLOCKED;
    if (ts != TS_DONE) return AS_WAITING;
    char path[SW_PATH + 256];
    struct stat ck, st;
    snprintf(path, sizeof path, "%s/checkpoint.bin", run->dir);
    int have_ck = stat(path, &ck) == 0;
    int done = 1;
    for (int k = 0; k < AN_K_COUNT && done; k++) {
        if (!(a->kinds >> k & 1)) continue;
        snprintf(path, sizeof path, "%s/analysis/%s.json", run->dir, sweep_analysis_kinds[k]);
        if (stat(path, &st) || !S_ISREG(st.st_mode) || (have_ck && older(&st, &ck))) done = 0;
    }
    if (done) return AS_DONE;
    /* a failure record older than the checkpoint is about an earlier model */
    sweep_analysis_failed_path(s, run, a, path, sizeof path);
    if (stat(path, &st) == 0 && !(have_ck && older(&st, &ck))) return AS_FAILED;
    return AS_PENDING;
}
