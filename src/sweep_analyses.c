/* A sweep's analyses entries (sgtrain analyze and zeroshot on finished
 * runs): parsing and validation, their tasks, their command lines. */
#include "sweep.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arms.h"
#include "errmsg.h"
#include "sweep_internal.h"

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

int parse_analyses(P *p, yaml_node_t *n, Sweep *s) {
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
