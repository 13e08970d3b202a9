/* Finding and reading run directories (see runs.h). */
#include "runs.h"

#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arms.h"
#include "config.h"
#include "errmsg.h"
#include "fsutil.h"

const char *const analysis_names[AN_KINDS] = {"injection", "probes", "exposure", "telemetry", "incidence"};
const ZeroShotField zeroshot_fields[ZS_VALUES] = {
    {ZS_LAMBADA, "accuracy", 1},           {ZS_LAMBADA, "perplexity", 0},
    {ZS_HELLASWAG, "accuracy", 1},         {ZS_HELLASWAG, "accuracy_norm", 1},
    {ZS_WIKITEXT, "token_perplexity", 0}, {ZS_WIKITEXT, "word_perplexity", 0},
};
const char *const zeroshot_buckets[ZS_BUCKETS] = {"absent", "<=32", "33-96", ">96"};

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, a[0] && a[strlen(a) - 1] == '/' ? "" : "/", b);
    return p;
}

static int has_file(const char *dir, const char *name) {
    char *p = join(dir, name);
    int r = p && fs_exists(p);
    free(p);
    return r;
}

static RunRec *add_run(RunSet *rs, const char *dir) {
    if (rs->n == rs->cap) {
        size_t c = rs->cap ? 2 * rs->cap : 256;
        RunRec *v = realloc(rs->v, c * sizeof *v);
        if (!v) return NULL;
        rs->v = v;
        rs->cap = c;
    }
    RunRec *r = &rs->v[rs->n];
    memset(r, 0, sizeof *r);
    if (!(r->dir = strdup(dir))) return NULL;
    r->seed = -1;
    r->group = -1;
    r->tok_s = r->mfu = r->wall_s = NAN;
    r->ranks = 1;
    rs->n++;
    return r;
}

static void copy_str(char *dst, size_t n, const char *s) {
    size_t k = s ? strnlen(s, n - 1) : 0;
    if (k) memcpy(dst, s, k);
    dst[k] = 0;
}

/* The last "step" of metrics.jsonl, read from its tail. */
static long last_step(const char *dir) {
    char *p = join(dir, "metrics.jsonl");
    FILE *f = p ? fopen(p, "rb") : NULL;
    free(p);
    if (!f) return 0;
    char buf[4096];
    long step = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f), off = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
        fseek(f, off, SEEK_SET);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        for (char *q = buf; (q = strstr(q, "{\"step\":")); q++) {
            long s = strtol(q + 8, NULL, 10);
            if (s > step) step = s;
        }
    }
    fclose(f);
    return step;
}

/* RunRec.setup from the run's config c */
static int keep_setup(RunRec *r, const Config *c, char *err, size_t errlen) {
    if (!(r->setup = malloc(sizeof *r->setup))) return sg_fail(err, errlen, "out of memory");
    *r->setup = *c;
    r->setup->arm[0] = r->setup->tier[0] = r->setup->data[0] = r->setup->out[0] = 0;
    r->setup->seed = 0;
    int nf;
    const ConfigField *f = config_fields(&nf);
    for (int i = 0; i < nf; i++)
        if (f[i].role == CF_IO) {
            const size_t sz = f[i].type == CF_STR ? CFG_STR : f[i].type == CF_PATH ? CFG_PATH
                              : f[i].type == CF_DOUBLE ? sizeof(double) : f[i].type == CF_LONG ? sizeof(long)
                                                                                              : sizeof(int);
            memset((char *)r->setup + f[i].offset, 0, sz);
        }
    return 0;
}

static int read_config(RunRec *r, char *err, size_t errlen) {
    char *p = join(r->dir, "config.yaml");
    Config c;
    memset(&c, 0, sizeof c);
    int rc = p ? config_load_yaml(&c, p, err, errlen) : sg_fail(err, errlen, "out of memory");
    free(p);
    if (rc) return -1;
    copy_str(r->tier, sizeof r->tier, c.tier);
    copy_str(r->arm, sizeof r->arm, c.arm);
    copy_str(r->data, sizeof r->data, c.data);
    r->seed = c.seed;
    r->iters = c.iters;
    return keep_setup(r, &c, err, errlen);
}

/* A finished run's settings, from the config.yaml sgtrain writes beside
 * result.json (none: not compared) */
static void read_done_setup(RunRec *r) {
    char err[256], *p = join(r->dir, "config.yaml");
    Config c;
    memset(&c, 0, sizeof c);
    if (p && has_file(r->dir, "config.yaml") && !config_load_yaml(&c, p, err, sizeof err)) keep_setup(r, &c, err, sizeof err);
    free(p);
}

/* o[key] as a finite number > 0, else NaN (absent, null or not a number) */
static double json_positive(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) ||
        !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
        return NAN;
    const double x = json_object_get_double(v);
    return isfinite(x) && x > 0 ? x : NAN;
}

static int read_result(RunRec *r) {
    char *p = join(r->dir, "result.json");
    json_object *o = p ? json_object_from_file(p) : NULL, *v;
    int ok = 0;
    if (!o) {
        snprintf(r->why, sizeof r->why, "%s: not readable JSON (%s)", p ? p : "result.json",
                 json_util_get_last_err() ? json_util_get_last_err() : "unknown error");
        goto out;
    }
    const char *missing = NULL;
    if (!json_object_object_get_ex(o, "tier", &v) || !json_object_is_type(v, json_type_string)) missing = "tier";
    else copy_str(r->tier, sizeof r->tier, json_object_get_string(v));
    if (!missing && (!json_object_object_get_ex(o, "arm", &v) || !json_object_is_type(v, json_type_string)))
        missing = "arm";
    else if (!missing) copy_str(r->arm, sizeof r->arm, json_object_get_string(v));
    if (!missing && (!json_object_object_get_ex(o, "seed", &v) || !json_object_is_type(v, json_type_int)))
        missing = "seed";
    else if (!missing) r->seed = (long)json_object_get_int64(v);
    if (!missing && (!json_object_object_get_ex(o, "final_val_loss", &v) ||
                     !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))))
        missing = "final_val_loss";
    else if (!missing) r->final_loss = json_object_get_double(v);
    if (missing) {
        snprintf(r->why, sizeof r->why, "%s: no valid \"%s\"", p, missing);
        goto out;
    }
    if (!isfinite(r->final_loss)) {
        snprintf(r->why, sizeof r->why, "%s: final_val_loss is not finite", p);
        goto out;
    }
    if (!arm_find(r->arm)) {
        snprintf(r->why, sizeof r->why, "%s: unknown arm \"%s\"", p, r->arm);
        goto out;
    }
    if (json_object_object_get_ex(o, "steps", &v)) r->step = r->iters = (long)json_object_get_int64(v);
    r->wall_s = json_positive(o, "wall_s");
    json_object *tp;
    if (json_object_object_get_ex(o, "throughput", &tp) && json_object_is_type(tp, json_type_object)) {
        r->tok_s = json_positive(tp, "steady_tokens_per_s");
        r->mfu = json_positive(tp, "mfu");
    }
    if (json_object_object_get_ex(o, "backend", &v) && json_object_is_type(v, json_type_string))
        copy_str(r->backend, sizeof r->backend, json_object_get_string(v));
    if (json_object_object_get_ex(o, "ranks", &v) && json_object_is_type(v, json_type_int) &&
        json_object_get_int64(v) > 0 && json_object_get_int64(v) <= 1 << 20)
        r->ranks = (int)json_object_get_int64(v);
    json_object *cfg, *d;
    if (json_object_object_get_ex(o, "config", &cfg) && json_object_object_get_ex(cfg, "data", &d))
        copy_str(r->data, sizeof r->data, json_object_get_string(d));
    ok = 1;
out:
    if (o) json_object_put(o);
    free(p);
    return ok;
}

static void read_failed(RunRec *r) {
    char *p = join(r->dir, "failed.json");
    json_object *o = p ? json_object_from_file(p) : NULL, *v;
    const char *reason = "unknown reason";
    long step = 0;
    if (o && json_object_object_get_ex(o, "reason", &v)) reason = json_object_get_string(v);
    if (o && json_object_object_get_ex(o, "step", &v)) step = (long)json_object_get_int64(v);
    snprintf(r->why, sizeof r->why, "failed at step %ld: %s", step, reason);
    r->step = step;
    if (o) json_object_put(o);
    free(p);
}

static void read_analysis(RunRec *r) {
    for (int k = 0; k < AN_KINDS; k++) {
        char name[64];
        snprintf(name, sizeof name, "analysis/%s.json", analysis_names[k]);
        char *p = join(r->dir, name);
        if (!p || !fs_exists(p)) {
            free(p);
            continue;
        }
        json_object *o = json_object_from_file(p), *v;
        /* a "kind" that is null or not a string has no string to compare */
        if (!o || !json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "kind", &v) || !json_object_is_type(v, json_type_string) ||
            strcmp(json_object_get_string(v), analysis_names[k])) {
            snprintf(r->analysis_err[k], sizeof r->analysis_err[k], "%s: %s", p,
                     o ? "not an analysis file of this kind (\"kind\" differs)" : "not readable JSON");
            if (o) json_object_put(o);
        } else
            r->analysis[k] = o;
        free(p);
    }
}

/* o[key] as a finite number, else NaN (absent, null, not a number) */
static double json_finite(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) ||
        !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)))
        return NAN;
    const double x = json_object_get_double(v);
    return isfinite(x) ? x : NAN;
}

/* lambada.json's by_distance: each of the four buckets once, in any order,
 * with its count and (unless empty) its accuracy.  "" or what is wrong. */
static void read_buckets(RunRec *r, json_object *o, char *why, size_t n) {
    json_object *b;
    if (!json_object_object_get_ex(o, "by_distance", &b) || !json_object_is_type(b, json_type_array) ||
        json_object_array_length(b) != ZS_BUCKETS) {
        snprintf(why, n, "\"by_distance\" is not a list of the %d buckets absent, <=32, 33-96, >96", ZS_BUCKETS);
        return;
    }
    unsigned seen = 0;
    for (size_t i = 0; i < ZS_BUCKETS; i++) {
        json_object *e = json_object_array_get_idx(b, i), *v;
        const char *name = json_object_is_type(e, json_type_object) && json_object_object_get_ex(e, "bucket", &v) &&
                                   json_object_is_type(v, json_type_string)
                               ? json_object_get_string(v)
                               : NULL;
        int k = 0;
        while (k < ZS_BUCKETS && (!name || strcmp(name, zeroshot_buckets[k]))) k++;
        if (k == ZS_BUCKETS || seen & 1u << k) {
            snprintf(why, n, "by_distance[%zu]: \"bucket\" is not one of absent, <=32, 33-96, >96 (each once)", i);
            return;
        }
        seen |= 1u << k;
        if (!json_object_object_get_ex(e, "n", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0) {
            snprintf(why, n, "by_distance[%zu] (%s): \"n\" is not a count", i, zeroshot_buckets[k]);
            return;
        }
        r->zs_bucket_n[k] = (long)json_object_get_int64(v);
        const double acc = json_finite(e, "accuracy");
        if (r->zs_bucket_n[k] > 0 && !(acc >= 0 && acc <= 1)) {
            snprintf(why, n, "by_distance[%zu] (%s): \"accuracy\" is missing or not a number in [0, 1]", i,
                     zeroshot_buckets[k]);
            return;
        }
        r->zs_bucket_acc[k] = r->zs_bucket_n[k] > 0 ? acc : NAN;
    }
}

/* Only the numbers are kept; a file that lacks one is not used at all, so
 * that a run's cells of a table all come from the same evaluation. */
static void read_zeroshot(RunRec *r) {
    for (int k = 0; k < ZS_TASKS; k++) {
        char name[64], why[200] = "";
        snprintf(name, sizeof name, "analysis/%s.json", zs_task_name(k));
        char *p = join(r->dir, name);
        if (!p || !fs_exists(p)) {
            free(p);
            continue;
        }
        json_object *o = json_object_from_file(p), *v;
        if (!o) snprintf(why, sizeof why, "not readable JSON");
        else if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "kind", &v) ||
                 !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), zs_task_name(k)))
            snprintf(why, sizeof why, "not a zero-shot file of this kind (\"kind\" differs)");
        for (int f = 0; f < ZS_VALUES && o && !why[0]; f++) {
            const ZeroShotField *zf = &zeroshot_fields[f];
            if (zf->task != k) continue;
            const double x = json_finite(o, zf->key);
            if (zf->share ? !(x >= 0 && x <= 1) : !(x > 0))
                snprintf(why, sizeof why, "\"%s\" is missing or not a number %s", zf->key,
                         zf->share ? "in [0, 1]" : "above 0");
            r->zs[f] = x;
        }
        if (o && !why[0] && k == ZS_LAMBADA) read_buckets(r, o, why, sizeof why);
        const char *size_key = k == ZS_WIKITEXT ? "tokens" : "examples";
        if (o && !why[0]) {
            if (!json_object_object_get_ex(o, size_key, &v) || !json_object_is_type(v, json_type_int) ||
                json_object_get_int64(v) < 1)
                snprintf(why, sizeof why, "\"%s\" is missing or not a positive count", size_key);
            else r->zs_size[k] = (long)json_object_get_int64(v);
        }
        if (why[0]) snprintf(r->zs_err[k], sizeof r->zs_err[k], "%s: %s", p, why);
        else r->zs_has[k] = 1;
        if (o) json_object_put(o);
        free(p);
    }
}

static void load_run(RunRec *r) {
    char err[sizeof r->why - 16];
    if (has_file(r->dir, "result.json")) {
        r->status = read_result(r) ? RUN_DONE : RUN_CORRUPT;
        if (r->status == RUN_DONE) read_done_setup(r);
    } else if (has_file(r->dir, "failed.json") || has_file(r->dir, "config.yaml")) {
        int failed = has_file(r->dir, "failed.json");
        if (read_config(r, err, sizeof err)) {
            r->status = RUN_CORRUPT;
            snprintf(r->why, sizeof r->why, "%s", err);
            return;
        }
        if (failed) {
            r->status = RUN_FAILED;
            read_failed(r);
        } else {
            r->status = RUN_UNFINISHED;
            r->step = last_step(r->dir);
            snprintf(r->why, sizeof r->why, "%s at step %ld of %ld",
                     has_file(r->dir, "checkpoint.bin") ? "interrupted or running, checkpointed,"
                                                        : r->step ? "running or killed, no checkpoint,"
                                                                  : "started or queued,",
                     r->step, r->iters);
        }
    }
    /* one look for the directory instead of seven for its files: most runs
     * of a large sweep are never analysed */
    if (r->status != RUN_CORRUPT && has_file(r->dir, "analysis")) {
        read_analysis(r);
        read_zeroshot(r);
    }
}

static int is_run_dir(const char *d) {
    return has_file(d, "result.json") || has_file(d, "failed.json") || has_file(d, "config.yaml");
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int walk(RunSet *rs, const char *dir, int depth, char *err, size_t errlen) {
    if (is_run_dir(dir)) {
        RunRec *r = add_run(rs, dir);
        if (!r) return sg_fail(err, errlen, "out of memory");
        load_run(r);
        return 0;
    }
    if (depth > 32) return 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (depth == 0) return sg_fail(err, errlen, "%s: %s", dir, strerror(errno));
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *p = join(dir, de->d_name);
        struct stat st;
        if (!p || stat(p, &st) || !S_ISDIR(st.st_mode)) {
            free(p);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                free(p);
                rc = sg_fail(err, errlen, "out of memory");
                break;
            }
            names = nn;
        }
        names[n++] = p;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (!rc) rc = walk(rs, names[i], depth + 1, err, errlen);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* Display order of tiers: sgtrain's tier table, then unknown ones by name. */
static int tier_rank(const char *tier) {
    const char *all = config_tier_names();
    int rank = 0;
    for (const char *p = all; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t k = strcspn(p, ", ");
        if (k == strlen(tier) && !strncmp(p, tier, k)) return rank;
        rank++;
        p += k;
    }
    return 1000;
}

static const char *base_name(const char *path, char *buf, size_t n) {
    snprintf(buf, n, "%s", path);
    size_t k = strlen(buf);
    while (k > 1 && buf[k - 1] == '/') buf[--k] = 0;
    const char *s = strrchr(buf, '/');
    return s ? s + 1 : buf;
}

typedef struct {
    char *label, *tier;
    int rank;
} GroupKey;

static int cmp_group(const void *a, const void *b) {
    const GroupKey *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    int t = strcmp(x->tier, y->tier);
    return t ? t : strcmp(x->label, y->label);
}

/* The (tier, data) pairs present, few even in a large sweep. */
typedef struct {
    const char *tier, *data;
} Pair;

static int make_groups(RunSet *rs, char *err, size_t errlen) {
    Pair *pairs = NULL;
    int np = 0, cp = 0, rc = 0;
    int *pair_of = calloc(rs->n + 1, sizeof *pair_of);
    GroupKey *keys = NULL;
    int nk = 0;
    if (!pair_of) return sg_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < rs->n; i++) {
        RunRec *r = &rs->v[i];
        pair_of[i] = -1;
        if (!r->tier[0] || r->status == RUN_CORRUPT) continue;
        int k = np - 1; /* runs of one pair tend to be adjacent: look back first */
        while (k >= 0 && (strcmp(pairs[k].tier, r->tier) || strcmp(pairs[k].data, r->data))) k--;
        if (k < 0) {
            if (np == cp) {
                cp = cp ? 2 * cp : 16;
                Pair *q = realloc(pairs, (size_t)cp * sizeof *q);
                if (!q) {
                    rc = sg_fail(err, errlen, "out of memory");
                    goto out;
                }
                pairs = q;
            }
            pairs[np] = (Pair){r->tier, r->data};
            k = np++;
        }
        pair_of[i] = k;
    }
    /* a tier is split by data directory only when its runs use several */
    int *label_of = calloc((size_t)np + 1, sizeof *label_of);
    keys = calloc((size_t)np + 1, sizeof *keys);
    if (!label_of || !keys) {
        free(label_of);
        rc = sg_fail(err, errlen, "out of memory");
        goto out;
    }
    char (*labels)[400] = calloc((size_t)np + 1, sizeof *labels);
    if (!labels) {
        free(label_of);
        rc = sg_fail(err, errlen, "out of memory");
        goto out;
    }
    for (int k = 0; k < np; k++) {
        int split = 0;
        for (int j = 0; j < np; j++) split |= j != k && !strcmp(pairs[j].tier, pairs[k].tier);
        char bb[256];
        const char *dn = base_name(pairs[k].data, bb, sizeof bb);
        char *label = labels[k];
        if (split && *dn) snprintf(label, sizeof labels[k], "%s %s", dn, pairs[k].tier);
        else snprintf(label, sizeof labels[k], "%s", pairs[k].tier);
        int g = 0;
        while (g < nk && strcmp(keys[g].label, label)) g++;
        if (g == nk) {
            keys[nk] = (GroupKey){strdup(label), (char *)pairs[k].tier, tier_rank(pairs[k].tier)};
            nk++;
        }
    }
    qsort(keys, (size_t)nk, sizeof *keys, cmp_group);
    rs->groups = calloc((size_t)nk + 1, sizeof *rs->groups);
    if (!rs->groups) {
        free(label_of);
        free(labels);
        rc = sg_fail(err, errlen, "out of memory");
        goto out;
    }
    for (int g = 0; g < nk; g++) rs->groups[g] = keys[g].label;
    rs->n_groups = nk;
    for (int k = 0; k < np; k++) {
        for (int g = 0; g < nk; g++)
            if (!strcmp(rs->groups[g], labels[k])) label_of[k] = g;
    }
    for (size_t i = 0; i < rs->n; i++)
        if (pair_of[i] >= 0) rs->v[i].group = label_of[pair_of[i]];
    free(label_of);
    free(labels);
    nk = 0; /* the labels now belong to rs->groups */
out:
    for (int g = 0; g < nk; g++) free(keys[g].label);
    free(keys);
    free(pairs);
    free(pair_of);
    return rc;
}

int runs_scan(char *const *roots, int nroots, RunSet *rs, char *err, size_t errlen) {
    memset(rs, 0, sizeof *rs);
    for (int i = 0; i < nroots; i++) {
        struct stat st;
        if (stat(roots[i], &st)) {
            runs_free(rs);
            return sg_fail(err, errlen, "%s: %s", roots[i], strerror(errno));
        }
        if (!S_ISDIR(st.st_mode)) {
            runs_free(rs);
            return sg_fail(err, errlen, "%s: not a directory (give a sweep's output directory or run directories)", roots[i]);
        }
        if (walk(rs, roots[i], 0, err, errlen)) {
            runs_free(rs);
            return -1;
        }
    }
    if (make_groups(rs, err, errlen)) {
        runs_free(rs);
        return -1;
    }
    return 0;
}

void runs_free(RunSet *rs) {
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].dir);
        free(rs->v[i].setup);
        for (int k = 0; k < AN_KINDS; k++)
            if (rs->v[i].analysis[k]) json_object_put(rs->v[i].analysis[k]);
    }
    free(rs->v);
    for (int k = 0; k < rs->n_groups; k++) free(rs->groups[k]);
    free(rs->groups);
    memset(rs, 0, sizeof *rs);
}

static int push2(double **a, double **b, int *n, int *cap, double x, double y) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 256;
        double *na = realloc(*a, (size_t)c * sizeof *na);
        if (!na) return -1;
        *a = na;
        double *nb = realloc(*b, (size_t)c * sizeof *nb);
        if (!nb) return -1;
        *b = nb;
        *cap = c;
    }
    (*a)[*n] = x;
    (*b)[*n] = y;
    (*n)++;
    return 0;
}

int runs_read_curves(const char *dir, double **ts, double **tl, int *nt, double **vs, double **vl,
                     int *nv, char *err, size_t errlen) {
    *ts = *tl = *vs = *vl = NULL;
    *nt = *nv = 0;
    int ct = 0, cv = 0;
    char *p = join(dir, "metrics.jsonl");
    FILE *f = p ? fopen(p, "r") : NULL;
    if (!f) {
        int e = errno;
        sg_fail(err, errlen, "%s: %s", p ? p : "metrics.jsonl", p ? strerror(e) : "out of memory");
        free(p);
        return -1;
    }
    char line[1024];
    int rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        long step;
        double x;
        const char *q;
        if (sscanf(line, "{\"step\":%ld,", &step) != 1) continue;
        if ((q = strstr(line, "\"val_loss\":")) && sscanf(q + 11, "%lf", &x) == 1)
            rc = push2(vs, vl, nv, &cv, (double)step, x);
        else if ((q = strstr(line, "\"loss\":")) && sscanf(q + 7, "%lf", &x) == 1)
            rc = push2(ts, tl, nt, &ct, (double)step, x);
    }
    fclose(f);
    if (rc) {
        free(*ts), free(*tl), free(*vs), free(*vl);
        *ts = *tl = *vs = *vl = NULL;
        free(p);
        return sg_fail(err, errlen, "out of memory reading %s", dir);
    }
    free(p);
    return 0;
}
