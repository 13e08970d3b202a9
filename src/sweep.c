/* Sweep files: parsing with libyaml's document API (every node keeps its
 * line and column for messages), validation of the groups and the root;
 * the analyses entries are parsed in sweep_analyses.c, the tasks expanded
 * in sweep_tasks.c. */
#include "sweep.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "arms.h"
#include "batch_split.h"
#include "config.h"
#include "errmsg.h"
#include "sweep_internal.h"

int fail_at(P *p, yaml_node_t *n, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n) return sg_fail(p->err, p->errlen, "%s:%zu:%zu: %s", p->path, n->start_mark.line + 1, n->start_mark.column + 1, msg);
    return sg_fail(p->err, p->errlen, "%s: %s", p->path, msg);
}

const char *kind_name(yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a scalar";
}

int want_type(P *p, yaml_node_t *n, yaml_node_type_t t, const char *what) {
    if (n->type == t) return 0;
    return fail_at(p, n, "%s must be %s, not %s", what,
                   t == YAML_MAPPING_NODE ? "a mapping" : t == YAML_SEQUENCE_NODE ? "a list" : "a scalar", kind_name(n));
}

/* A "\0" escape in any scalar: every reader takes scalars as C strings,
 * which would end there without a word. */
static int no_nul(P *p) {
    for (yaml_node_t *n = p->doc->nodes.start; n < p->doc->nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && strlen(scalar(n)) != n->data.scalar.length)
            return fail_at(p, n, "a value holds a NUL character (\\0)");
    return 0;
}

int get_str(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap) {
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

int get_name(P *p, yaml_node_t *n, const char *what, char *dst, size_t cap) {
    if (get_str(p, n, what, dst, cap)) return -1;
    if (!safe_name(dst))
        return fail_at(p, n, "%s \"%s\": use only letters, digits, '.', '_' and '-' (not first)", what, dst);
    return 0;
}

int get_int(P *p, yaml_node_t *n, const char *what, long lo, long hi, long *v) {
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

int unknown_key(P *p, yaml_node_t *k, const char *where, const char *known) {
    return fail_at(p, k, "unknown key \"%s\" in %s (known: %s)", k->type == YAML_SCALAR_NODE ? scalar(k) : "?", where,
                   known);
}

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

int parse_resources(P *p, yaml_node_t *n, Resources *r) {
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
int parse_seeds(P *p, yaml_node_t *n, long *out, int cap, int *count) {
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
    rc = no_nul(&p);
    if (!rc) rc = parse_root(&p, s);
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
