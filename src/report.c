/* Tables and figures of a report (see report.h and docs/report.md). */
#include "report.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"
#include "errmsg.h"
#include "fsutil.h"
#include "pairstat.h"
#include "report_plot.h"
#include "report_tokens.h"

/* ---- the grid: group x arm x seed -> final loss ------------------------------ */

typedef struct {
    const RunSet *rs;
    int G, A, S;
    long *seeds;            /* S distinct seeds, ascending */
    double *loss;           /* [G][A][S] */
    unsigned char *has;     /* a done run is there */
    const RunRec **first;   /* the run shown in Table 5, any status */
    int base, ref;          /* arm indices */
} Grid;

#define AT(gr, g, a, s) ((((size_t)(g) * (gr)->A) + (size_t)(a)) * (gr)->S + (size_t)(s))

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int seed_index(const Grid *gr, long seed) {
    int lo = 0, hi = gr->S - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (gr->seeds[mid] == seed) return mid;
        if (gr->seeds[mid] < seed) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int arm_index(const char *name) {
    for (int i = 0; i < arm_count(); i++)
        if (!strcmp(arm_at(i)->name, name)) return i;
    return -1;
}

static int arm_by_caps(ZeroOption z, FilterKind f, FilterSlot slot) {
    for (int i = 0; i < arm_count(); i++) {
        const Arm *a = arm_at(i);
        if (a->zero == z && a->filter == f && a->slot == slot) return i;
    }
    return -1;
}

static int grid_build(Grid *gr, const RunSet *rs, const ReportOpts *o, char *err, size_t errlen) {
    memset(gr, 0, sizeof *gr);
    gr->rs = rs;
    gr->G = rs->n_groups;
    gr->A = arm_count();
    gr->base = o->baseline ? arm_index(o->baseline) : arm_by_caps(ZERO_NONE, FILTER_NONE, FSLOT_VALUE);
    gr->ref = o->reference ? arm_index(o->reference) : arm_by_caps(ZERO_PHANTOM_LEARNED, FILTER_NONE, FSLOT_VALUE);
    if (gr->base < 0) return sg_fail(err, errlen, "--baseline %s: unknown arm (known: %s)", o->baseline, arm_names());
    if (gr->ref < 0) return sg_fail(err, errlen, "--reference %s: unknown arm (known: %s)", o->reference, arm_names());
    gr->seeds = malloc((rs->n + 1) * sizeof *gr->seeds);
    if (!gr->seeds) return sg_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < rs->n; i++)
        if (rs->v[i].group >= 0 && rs->v[i].seed >= 0) gr->seeds[gr->S++] = rs->v[i].seed;
    qsort(gr->seeds, (size_t)gr->S, sizeof *gr->seeds, cmp_long);
    int k = 0;
    for (int i = 0; i < gr->S; i++)
        if (i == 0 || gr->seeds[i] != gr->seeds[k - 1]) gr->seeds[k++] = gr->seeds[i];
    gr->S = k;
    size_t cells = (size_t)gr->G * gr->A * (gr->S ? gr->S : 1);
    gr->loss = calloc(cells, sizeof *gr->loss);
    gr->has = calloc(cells, 1);
    gr->first = calloc(cells, sizeof *gr->first);
    if (!gr->loss || !gr->has || !gr->first) return sg_fail(err, errlen, "out of memory");
    return 0;
}

static void grid_free(Grid *gr) {
    free(gr->seeds);
    free(gr->loss);
    free(gr->has);
    free(gr->first);
}

/* ---- text accumulation ------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} Buf;

static void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(Buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t c = b->cap ? b->cap : 65536;
        while (c <= b->n + (size_t)k) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
}

/* CSV field: quoted when it holds a comma, quote or newline. */
static void csv_str(Buf *b, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        bprintf(b, "%s", s);
        return;
    }
    bprintf(b, "\"");
    for (; *s; s++) bprintf(b, *s == '"' ? "\"\"" : "%c", *s);
    bprintf(b, "\"");
}

static void csv_num(Buf *b, double x, int present) {
    if (present && isfinite(x)) bprintf(b, "%.17g", x);
}

static const char *label_of(int a) { return arm_at(a)->label; }

/* Markdown cells.  Differences: "-0.0185 ± 0.0033 (3/3)": mean ± SE over the
 * paired seeds, then how many pairs improved out of how many. */
static void md_paired(Buf *b, Paired p, int sign) {
    if (p.n == 0) {
        bprintf(b, " – |");
        return;
    }
    double m = sign * p.mean;
    if (p.n == 1) bprintf(b, " %+.4f (1 seed) |", m);
    else bprintf(b, " %+.4f ± %.4f (%d/%d) |", m, p.se, sign > 0 ? p.improved : p.n - p.improved, p.n);
}

/* {"n", "mean", "se"}: a plain mean (se null for one value); NULL for none */
static json_object *j_mean(Paired p) {
    if (p.n == 0) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "n", json_object_new_int(p.n));
    json_object_object_add(o, "mean", json_object_new_double(p.mean));
    json_object_object_add(o, "se", p.n > 1 ? json_object_new_double(p.se) : NULL);
    return o;
}

/* the same for a paired difference, signed, with its count of improved seeds */
static json_object *j_paired(Paired p, int sign) {
    p.mean *= sign;
    json_object *o = j_mean(p);
    if (o) json_object_object_add(o, "improved", json_object_new_int(p.improved));
    return o;
}

static Paired pair_at(const Grid *gr, int g, int a, int b) {
    return paired_diff(&gr->loss[AT(gr, g, a, 0)], &gr->has[AT(gr, g, a, 0)], &gr->loss[AT(gr, g, b, 0)],
                       &gr->has[AT(gr, g, b, 0)], gr->S);
}

static int arm_present(const Grid *gr, int a) {
    for (int g = 0; g < gr->G; g++)
        for (int s = 0; s < gr->S; s++)
            if (gr->has[AT(gr, g, a, s)]) return 1;
    return 0;
}

/* ---- Table 1 ------------------------------------------------------------------ */

static void table1(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    int G = gr->G;
    bprintf(md, "## Table 1: final validation loss and paired improvements\n\n"
                "Differences are arm minus reference in nats (negative is better), the mean over the "
                "seeds trained for both arms ± its standard error, then (k/n): k of the n paired seeds "
                "improved. A single pair is marked (1 seed).\n\n| Arm |");
    for (int g = 0; g < G; g++) bprintf(md, " %s |", gr->rs->groups[g]);
    bprintf(md, "\n|---|");
    for (int g = 0; g < G; g++) bprintf(md, "---|");
    bprintf(csv, "block,arm,reference,tier,n,improved,mean,se\n");
    json_object *jg = json_object_new_array();
    for (int g = 0; g < G; g++) json_object_array_add(jg, json_object_new_string(gr->rs->groups[g]));
    json_object_object_add(js, "tiers", jg);

    bprintf(md, "\n| **%s loss** |", label_of(gr->base));
    for (int g = 0; g < G; g++) bprintf(md, " |");
    bprintf(md, "\n| %s |", label_of(gr->base));
    json_object *jb = json_object_new_object();
    for (int g = 0; g < G; g++) {
        Paired p = plain_mean(&gr->loss[AT(gr, g, gr->base, 0)], &gr->has[AT(gr, g, gr->base, 0)], gr->S);
        if (!p.n) bprintf(md, " – |");
        else bprintf(md, " %.4f (%d seed%s) |", p.mean, p.n, p.n > 1 ? "s" : "");
        bprintf(csv, "loss,%s,,", arm_at(gr->base)->name);
        csv_str(csv, gr->rs->groups[g]);
        bprintf(csv, ",%d,,", p.n);
        csv_num(csv, p.mean, p.n > 0);
        bprintf(csv, ",");
        csv_num(csv, p.se, p.n > 1);
        bprintf(csv, "\n");
        json_object_object_add(jb, gr->rs->groups[g], j_mean(p));
    }
    json_object_object_add(js, "baseline_loss", jb);

    for (int block = 0; block < 2; block++) {
        int ref = block == 0 ? gr->base : gr->ref;
        if (block == 0)
            bprintf(md, "\n| **Improvement over %s (paired per seed)** |", label_of(ref));
        else
            bprintf(md, "\n| **Improvement over %s (filtering with abstention held fixed)** |", label_of(ref));
        for (int g = 0; g < G; g++) bprintf(md, " |");
        json_object *rows = json_object_new_array();
        for (int a = 0; a < gr->A; a++) {
            const Arm *arm = arm_at(a);
            if (a == ref || !arm_present(gr, a)) continue;
            if (block == 1 && !(arm->filter != FILTER_NONE && arm->slot == FSLOT_VALUE)) continue;
            bprintf(md, "\n| %s |", arm->label);
            json_object *row = json_object_new_object(), *cells = json_object_new_object();
            json_object_object_add(row, "arm", json_object_new_string(arm->name));
            json_object_object_add(row, "label", json_object_new_string(arm->label));
            for (int g = 0; g < G; g++) {
                Paired p = pair_at(gr, g, a, ref);
                md_paired(md, p, 1);
                bprintf(csv, "%s,%s,%s,", block ? "vs_reference" : "vs_baseline", arm->name, arm_at(ref)->name);
                csv_str(csv, gr->rs->groups[g]);
                bprintf(csv, ",%d,%d,", p.n, p.improved);
                csv_num(csv, p.mean, p.n > 0);
                bprintf(csv, ",");
                csv_num(csv, p.se, p.n > 1);
                bprintf(csv, "\n");
                json_object_object_add(cells, gr->rs->groups[g], j_paired(p, 1));
            }
            json_object_object_add(row, "cells", cells);
            json_object_array_add(rows, row);
        }
        json_object_object_add(js, block ? "vs_reference" : "vs_baseline", rows);
    }
    json_object_object_add(js, "baseline", json_object_new_string(arm_at(gr->base)->name));
    json_object_object_add(js, "reference", json_object_new_string(arm_at(gr->ref)->name));
    bprintf(md, "\n\n");
}

/* ---- Table 2 ------------------------------------------------------------------ */

static void table2(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    bprintf(md, "## Table 2: two-by-two decomposition\n\n"
                "Improvements over %s in nats (positive is better), paired per seed, mean ± SE. "
                "Sink, gate and both: %s, the gate alone and the combined arm against %s. "
                "Overlap = sink + gate − both. Filter: the combined arm against %s, paired per seed.\n\n"
                "| Form | Tier | Sink | Gate | Both | Overlap | Filter |\n|---|---|---|---|---|---|---|\n",
                label_of(gr->base), label_of(gr->ref), label_of(gr->base), label_of(gr->ref));
    bprintf(csv, "form,tier,quantity,n,mean,se\n");
    json_object *rows = json_object_new_array();
    static const struct {
        FilterKind f;
        const char *name;
    } forms[] = {{FILTER_NORM, "norm"}, {FILTER_PROJ, "projection"}};
    for (int fi = 0; fi < 2; fi++) {
        int gate = arm_by_caps(ZERO_NONE, forms[fi].f, FSLOT_VALUE);
        int both = arm_by_caps(arm_at(gr->ref)->zero, forms[fi].f, FSLOT_VALUE);
        if (gate < 0 || both < 0) continue;
        int first = 1;
        for (int g = 0; g < gr->G; g++) {
            Paired q[5];
            q[0] = pair_at(gr, g, gr->ref, gr->base);
            q[1] = pair_at(gr, g, gate, gr->base);
            q[2] = pair_at(gr, g, both, gr->base);
            q[4] = pair_at(gr, g, both, gr->ref);
            if (!q[0].n && !q[1].n && !q[2].n && !q[4].n) continue;
            int ov = q[0].n && q[1].n && q[2].n;
            /* improvements are positive: minus the differences */
            double overlap = ov ? -q[0].mean - q[1].mean + q[2].mean : 0;
            bprintf(md, "| %s | %s |", first ? forms[fi].name : "", gr->rs->groups[g]);
            first = 0;
            static const char *qn[5] = {"sink", "gate", "both", "overlap", "filter"};
            json_object *row = json_object_new_object();
            json_object_object_add(row, "form", json_object_new_string(forms[fi].name));
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "gate_arm", json_object_new_string(arm_at(gate)->name));
            json_object_object_add(row, "both_arm", json_object_new_string(arm_at(both)->name));
            for (int k = 0; k < 5; k++) {
                bprintf(csv, "%s,", forms[fi].name);
                csv_str(csv, gr->rs->groups[g]);
                if (k == 3) {
                    bprintf(md, ov ? " %.4f |" : " – |", overlap);
                    bprintf(csv, ",overlap,,");
                    csv_num(csv, overlap, ov);
                    bprintf(csv, ",\n");
                    json_object_object_add(row, "overlap", ov ? json_object_new_double(overlap) : NULL);
                    continue;
                }
                Paired p = q[k];
                if (!p.n) bprintf(md, " – |");
                else if (p.n == 1) bprintf(md, " %.4f (1 seed) |", -p.mean);
                else bprintf(md, " %.4f ± %.4f |", -p.mean, p.se);
                bprintf(csv, ",%s,%d,", qn[k], p.n);
                csv_num(csv, -p.mean, p.n > 0);
                bprintf(csv, ",");
                csv_num(csv, p.se, p.n > 1);
                bprintf(csv, "\n");
                json_object_object_add(row, qn[k], j_paired(p, -1));
            }
            bprintf(md, "\n");
            json_object_array_add(rows, row);
        }
    }
    json_object_object_add(js, "rows", rows);
    bprintf(md, "\n");
}

/* ---- Table 5 ------------------------------------------------------------------ */

static void table5(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    bprintf(md, "## Table 5: final validation loss of every run\n\n"
                "– : no run directory for that seed. Runs that did not finish show their state.\n\n| Tier | Arm |");
    for (int s = 0; s < gr->S; s++) bprintf(md, " seed %ld |", gr->seeds[s]);
    bprintf(md, " mean |\n|---|---|");
    for (int s = 0; s <= gr->S; s++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,arm,seed,status,final_val_loss,run\n");
    json_object *rows = json_object_new_array();
    static const char *st[] = {"done", "failed", "unfinished", "corrupt"};
    for (int g = 0; g < gr->G; g++) {
        int first = 1;
        for (int a = 0; a < gr->A; a++) {
            int any = 0;
            for (int s = 0; s < gr->S; s++) any |= gr->first[AT(gr, g, a, s)] != NULL;
            if (!any) continue;
            bprintf(md, "| %s | %s |", first ? gr->rs->groups[g] : "", label_of(a));
            first = 0;
            json_object *row = json_object_new_object(), *seeds = json_object_new_object();
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
            for (int s = 0; s < gr->S; s++) {
                const RunRec *r = gr->first[AT(gr, g, a, s)];
                char key[32];
                snprintf(key, sizeof key, "%ld", gr->seeds[s]);
                if (!r) {
                    bprintf(md, " – |");
                    continue;
                }
                if (gr->has[AT(gr, g, a, s)]) bprintf(md, " %.4f |", gr->loss[AT(gr, g, a, s)]);
                else if (r->status == RUN_FAILED) bprintf(md, " failed at %ld |", r->step);
                else bprintf(md, " %s %ld/%ld |", st[r->status], r->step, r->iters);
                int done = gr->has[AT(gr, g, a, s)];
                csv_str(csv, gr->rs->groups[g]);
                bprintf(csv, ",%s,%ld,%s,", arm_at(a)->name, gr->seeds[s], done ? "done" : st[r->status]);
                csv_num(csv, gr->loss[AT(gr, g, a, s)], done);
                bprintf(csv, ",");
                csv_str(csv, r->dir);
                bprintf(csv, "\n");
                json_object_object_add(seeds, key, done ? json_object_new_double(gr->loss[AT(gr, g, a, s)])
                                                        : json_object_new_string(st[r->status]));
            }
            Paired m = plain_mean(&gr->loss[AT(gr, g, a, 0)], &gr->has[AT(gr, g, a, 0)], gr->S);
            if (m.n) bprintf(md, " %.4f |\n", m.mean);
            else bprintf(md, " – |\n");
            json_object_object_add(row, "seeds", seeds);
            json_object_object_add(row, "mean", m.n ? json_object_new_double(m.mean) : NULL);
            json_object_object_add(row, "n", json_object_new_int(m.n));
            json_object_array_add(rows, row);
        }
    }
    json_object_object_add(js, "seeds", json_object_new_array());
    for (int s = 0; s < gr->S; s++)
        json_object_array_add(json_object_object_get(js, "seeds"), json_object_new_int64(gr->seeds[s]));
    json_object_object_add(js, "rows", rows);
    bprintf(md, "\n");
}

/* ---- training throughput ------------------------------------------------------ */

static int cmp_double(const void *a, const void *b);

static double median_of(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* the done run of (g, a, s) with a steady rate, or NULL */
static const RunRec *timed_run(const Grid *gr, int g, int a, int s) {
    const RunRec *r = gr->first[AT(gr, g, a, s)];
    return gr->has[AT(gr, g, a, s)] && r && isfinite(r->tok_s) ? r : NULL;
}

/* the done run of (g, a, s) with a wall time, or NULL */
static const RunRec *walled_run(const Grid *gr, int g, int a, int s) {
    const RunRec *r = gr->first[AT(gr, g, a, s)];
    return gr->has[AT(gr, g, a, s)] && r && isfinite(r->wall_s) ? r : NULL;
}

/* "42 s", "12 min", "47.5 h" */
static void md_duration(Buf *b, double s) {
    if (s < 90) bprintf(b, "%.0f s", s);
    else if (s < 5400) bprintf(b, "%.0f min", s / 60);
    else bprintf(b, "%.1f h", s / 3600);
}

/* Over the done runs of group g (arm a, or every arm with a < 0) with a
 * wall time: how many, their median wall time, and their device-hours
 * (wall time x ranks).  xs has room for S values a seed of every arm. */
static int wall_stats(const Grid *gr, int g, int a, double *xs, double *median, double *hours) {
    int n = 0;
    *hours = 0;
    for (int b = a < 0 ? 0 : a; b < (a < 0 ? gr->A : a + 1); b++)
        for (int s = 0; s < gr->S; s++) {
            const RunRec *r = walled_run(gr, g, b, s);
            if (!r) continue;
            *hours += r->wall_s * r->ranks / 3600;
            xs[n++] = r->wall_s;
        }
    *median = n ? median_of(xs, n) : NAN;
    return n;
}

static int same_setup(const RunRec *x, const RunRec *y) {
    return x->ranks == y->ranks && !strcmp(x->backend, y->backend);
}

/* Each arm's training rate against the baseline's, paired per seed on the
 * same setup (backend and ranks): result.json's steady tokens/s.  Returns
 * 0 where no run has one (runs of earlier versions), writing nothing. */
static int table_throughput(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
    const int G = gr->G, S = gr->S;
    int any = 0;
    for (int g = 0; g < G && !any; g++)
        for (int a = 0; a < gr->A && !any; a++)
            for (int s = 0; s < S && !any; s++) any = timed_run(gr, g, a, s) || walled_run(gr, g, a, s);
    if (!any) return 0;
    /* x, y: a value a seed of one arm; w: a wall time a run of a tier */
    double *x = malloc(sizeof *x * (size_t)(S + 1)), *y = malloc(sizeof *y * (size_t)(S + 1));
    double *w = malloc(sizeof *w * ((size_t)S * gr->A + 1));
    unsigned char *h = malloc((size_t)S + 1);
    if (!x || !y || !h || !w) {
        free(x), free(y), free(h), free(w);
        md->oom = 1;
        return 0;
    }
    bprintf(md, "## Training throughput\n\n"
                "The training steps' own rate: result.json's steady tokens/s, over each run's steps after "
                "its first, without evaluations and checkpoints. The %s row gives the median over seeds, "
                "with the MFU where the device's peak is known. The other rows give the arm's tokens/s "
                "over the %s's of the same seed, mean ± SE over the seeds (n), paired only where both ran "
                "on the same backend with the same number of ranks: above 1 is faster (a median tok/s marked "
                "unpaired where no seed pairs). Timings depend on "
                "the machine and its load, so compare runs made under the same conditions. *run time* is the "
                "median wall time of a finished run (all sessions, evaluations included), *device-hours* the "
                "sum over finished runs of wall time × ranks: the study's compute, as the paper reports it "
                "(Appendix A).\n\n| Arm |",
            label_of(gr->base), label_of(gr->base));
    for (int g = 0; g < G; g++) bprintf(md, " %s |", gr->rs->groups[g]);
    bprintf(md, "\n|---|");
    for (int g = 0; g < G; g++) bprintf(md, "---|");
    bprintf(md, "\n| *where* |");
    bprintf(csv, "tier,arm,runs,median_tokens_per_s,median_mfu,pairs,ratio_mean,ratio_se,where,median_run_s,device_hours\n");
    json_object *jw = json_object_new_object(), *rows = json_object_new_array();
    char (*where)[192] = calloc((size_t)G + 1, sizeof *where); /* "" where no run is timed */
    if (!where) {
        md->oom = 1;
        goto out;
    }
    for (int g = 0; g < G; g++) {
        const RunRec *one = NULL;
        int setups = 0;
        for (int a = 0; a < gr->A; a++)
            for (int s = 0; s < S; s++) {
                const RunRec *r = timed_run(gr, g, a, s);
                if (!r) continue;
                int seen = 0;
                for (int b = 0; b <= a && !seen; b++)
                    for (int t = 0; t < (b == a ? s : S) && !seen; t++) {
                        const RunRec *q = timed_run(gr, g, b, t);
                        seen = q && same_setup(q, r);
                    }
                if (!seen) setups++, one = r;
            }
        if (setups > 1) snprintf(where[g], sizeof where[g], "%d setups", setups);
        else if (setups && one->ranks > 1)
            snprintf(where[g], sizeof where[g], "%s, %d ranks", one->backend[0] ? one->backend : "?", one->ranks);
        else if (setups) snprintf(where[g], sizeof where[g], "%s", one->backend[0] ? one->backend : "?");
        bprintf(md, " %s |", where[g][0] ? where[g] : "–");
        json_object_object_add(jw, gr->rs->groups[g], where[g][0] ? json_object_new_string(where[g]) : NULL);
    }
    json_object *jt = json_object_new_object(), *jh = json_object_new_object();
    for (int pass = 0; pass < 2; pass++) {
        bprintf(md, pass ? "\n| *device-hours* |" : "\n| *run time* |");
        for (int g = 0; g < G; g++) {
            double med, hours;
            const int n = wall_stats(gr, g, -1, w, &med, &hours);
            if (!n) {
                bprintf(md, " – |");
                json_object_object_add(pass ? jh : jt, gr->rs->groups[g], NULL);
                continue;
            }
            if (pass) {
                bprintf(md, " %.3g (%d run%s) |", hours, n, n > 1 ? "s" : "");
                json_object_object_add(jh, gr->rs->groups[g], json_object_new_double(hours));
                continue;
            }
            bprintf(md, " ");
            md_duration(md, med);
            bprintf(md, " |");
            json_object_object_add(jt, gr->rs->groups[g], json_object_new_double(med));
        }
    }
    json_object_object_add(js, "median_run_s", jt);
    json_object_object_add(js, "device_hours", jh);
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < gr->A; a++) {
            if ((pass == 0) != (a == gr->base)) continue;
            int present = 0;
            for (int g = 0; g < G && !present; g++)
                for (int s = 0; s < S && !present; s++) present = timed_run(gr, g, a, s) || walled_run(gr, g, a, s);
            if (!present) continue;
            bprintf(md, "\n| %s |", label_of(a));
            json_object *row = json_object_new_object(), *cells = json_object_new_object();
            json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
            json_object_object_add(row, "label", json_object_new_string(label_of(a)));
            for (int g = 0; g < G; g++) {
                int n = 0, nm = 0;
                for (int s = 0; s < S; s++) {
                    const RunRec *r = timed_run(gr, g, a, s);
                    if (r) x[n++] = r->tok_s;
                    if (r && isfinite(r->mfu)) y[nm++] = r->mfu;
                }
                const double med = n ? median_of(x, n) : NAN, mfu = nm ? median_of(y, nm) : NAN;
                for (int s = 0; s < S; s++) {
                    const RunRec *r = timed_run(gr, g, a, s), *b = timed_run(gr, g, gr->base, s);
                    h[s] = a != gr->base && r && b && same_setup(r, b);
                    x[s] = h[s] ? r->tok_s / b->tok_s : 0;
                }
                const Paired p = a == gr->base ? (Paired){0, 0, 0, 0} : plain_mean(x, h, S);
                if (a == gr->base) {
                    if (!n) bprintf(md, " – |");
                    else {
                        bprintf(md, " %.0f tok/s", med);
                        if (nm) bprintf(md, ", MFU %.1f%%", 100 * mfu);
                        bprintf(md, " (%d seed%s) |", n, n > 1 ? "s" : "");
                    }
                } else if (!p.n && n)
                    bprintf(md, " %.0f tok/s, unpaired |", med);
                else if (!p.n)
                    bprintf(md, " – |");
                else if (p.n == 1)
                    bprintf(md, " %.3f (1 seed) |", p.mean);
                else
                    bprintf(md, " %.3f ± %.3f (%d) |", p.mean, p.se, p.n);
                double wmed, whours;
                const int wn = wall_stats(gr, g, a, w, &wmed, &whours);
                if (n || wn) {
                    csv_str(csv, gr->rs->groups[g]);
                    bprintf(csv, ",%s,%d,", arm_at(a)->name, n);
                    csv_num(csv, med, n > 0);
                    bprintf(csv, ",");
                    csv_num(csv, mfu, nm > 0);
                    bprintf(csv, ",%d,", p.n);
                    csv_num(csv, p.mean, p.n > 0);
                    bprintf(csv, ",");
                    csv_num(csv, p.se, p.n > 1);
                    bprintf(csv, ",");
                    csv_str(csv, where[g]);
                    bprintf(csv, ",");
                    csv_num(csv, wmed, wn > 0);
                    bprintf(csv, ",");
                    csv_num(csv, whours, wn > 0);
                    bprintf(csv, "\n");
                }
                json_object *c = NULL;
                if (n) {
                    c = json_object_new_object();
                    json_object_object_add(c, "runs", json_object_new_int(n));
                    json_object_object_add(c, "median_tokens_per_s", json_object_new_double(med));
                    json_object_object_add(c, "median_mfu", nm ? json_object_new_double(mfu) : NULL);
                    if (a != gr->base) json_object_object_add(c, "ratio_to_baseline", j_mean(p));
                }
                json_object_object_add(cells, gr->rs->groups[g], c);
            }
            json_object_object_add(row, "cells", cells);
            json_object_array_add(rows, row);
        }
    bprintf(md, "\n\n");
out:
    json_object_object_add(js, "where", jw);
    json_object_object_add(js, "rows", rows);
    free(where);
    free(x), free(y), free(h), free(w);
    return 1;
}

/* ---- analysis tables: values aggregated over seeds per (tier, sub, arm, column) --- */

typedef struct {
    int g, a, sub;   /* sub: index into Agg.subs (condition, override...) */
    double x;        /* column: a dose, or an index into Agg.cols */
    double *v;
    int n, cap;
} Cell;

typedef struct {
    Cell *c;
    int n, cap;
    char **subs, **cols;
    int nsubs, ncols;
    int oom;
} Agg;

static int name_index(char ***list, int *n, const char *s, int *oom) {
    for (int i = 0; i < *n; i++)
        if (!strcmp((*list)[i], s)) return i;
    char **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
    if (!l || !(l[*n] = strdup(s))) {
        *oom = 1;
        if (l) *list = l;
        return 0;
    }
    *list = l;
    return (*n)++;
}

static void agg_add(Agg *ag, int g, int a, int sub, double x, double v) {
    int i = ag->n - 1;
    while (i >= 0 && !(ag->c[i].g == g && ag->c[i].a == a && ag->c[i].sub == sub && ag->c[i].x == x)) i--;
    if (i < 0) {
        if (ag->n == ag->cap) {
            int c = ag->cap ? 2 * ag->cap : 64;
            Cell *nc = realloc(ag->c, (size_t)c * sizeof *nc);
            if (!nc) {
                ag->oom = 1;
                return;
            }
            ag->c = nc;
            ag->cap = c;
        }
        i = ag->n++;
        ag->c[i] = (Cell){g, a, sub, x, NULL, 0, 0};
    }
    Cell *c = &ag->c[i];
    if (c->n == c->cap) {
        int k = c->cap ? 2 * c->cap : 4;
        double *nv = realloc(c->v, (size_t)k * sizeof *nv);
        if (!nv) {
            ag->oom = 1;
            return;
        }
        c->v = nv;
        c->cap = k;
    }
    c->v[c->n++] = v;
}

static void agg_free(Agg *ag) {
    for (int i = 0; i < ag->n; i++) free(ag->c[i].v);
    free(ag->c);
    for (int i = 0; i < ag->nsubs; i++) free(ag->subs[i]);
    for (int i = 0; i < ag->ncols; i++) free(ag->cols[i]);
    free(ag->subs);
    free(ag->cols);
    memset(ag, 0, sizeof *ag);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Distinct column values, ascending. */
static int agg_columns(const Agg *ag, double *xs) {
    int n = 0;
    for (int i = 0; i < ag->n; i++) {
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = xs[k] == ag->c[i].x;
        if (!seen) xs[n++] = ag->c[i].x;
    }
    qsort(xs, (size_t)n, sizeof *xs, cmp_double);
    return n;
}

static Paired cell_stat(const Agg *ag, int g, int sub, int a, double x) {
    for (int i = 0; i < ag->n; i++) {
        const Cell *c = &ag->c[i];
        if (c->g == g && c->sub == sub && c->a == a && c->x == x) {
            unsigned char has[c->n > 0 ? c->n : 1];
            memset(has, 1, sizeof has);
            return plain_mean(c->v, has, c->n);
        }
    }
    return (Paired){0, 0, 0, -1};
}

static int row_exists(const Agg *ag, int g, int sub, int a) {
    for (int i = 0; i < ag->n; i++)
        if (ag->c[i].g == g && ag->c[i].sub == sub && ag->c[i].a == a) return 1;
    return 0;
}

static int json_num(json_object *o, const char *key, double *x) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) return 0;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) return 0;
    *x = json_object_get_double(v);
    return isfinite(*x);
}

static const char *json_str(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    return json_object_get_string(v);
}

/* Fill AG from every done run's analysis file of KIND.  Malformed entries
 * are counted in *bad and named in PROBLEMS. */
static void agg_collect(const RunSet *rs, int kind, Agg *ag, int *bad, Buf *problems) {
    for (size_t i = 0; i < rs->n; i++) {
        const RunRec *r = &rs->v[i];
        json_object *o = r->analysis[kind], *res;
        if (!o || r->group < 0) continue;
        int a = arm_index(r->arm);
        if (a < 0) continue;
        if (kind == AN_INJECTION || kind == AN_PROBES) {
            double clean = 0;
            if (kind == AN_INJECTION && !json_num(o, "clean_val_loss", &clean)) {
                (*bad)++;
                bprintf(problems, "- %s/analysis/injection.json: no finite \"clean_val_loss\"\n", r->dir);
                continue;
            }
            if (!json_object_object_get_ex(o, "results", &res) || !json_object_is_type(res, json_type_array)) {
                (*bad)++;
                bprintf(problems, "- %s/analysis/%s.json: no \"results\" array\n", r->dir, analysis_names[kind]);
                continue;
            }
            for (size_t k = 0; k < json_object_array_length(res); k++) {
                json_object *e = json_object_array_get_idx(res, k);
                double dose, loss;
                const char *s1 = json_str(e, kind == AN_INJECTION ? "junk" : "override");
                const char *s2 = kind == AN_INJECTION ? json_str(e, "cutoff") : "";
                if (!s1 || !s2 || !json_num(e, "dose", &dose) || !json_num(e, "val_loss", &loss)) {
                    (*bad)++;
                    bprintf(problems, "- %s/analysis/%s.json: result %zu lacks %s\n", r->dir,
                            analysis_names[kind], k,
                            kind == AN_INJECTION ? "junk, cutoff, dose or val_loss" : "override, dose or val_loss");
                    continue;
                }
                char sub[128];
                if (kind == AN_INJECTION) snprintf(sub, sizeof sub, "%s (%s)", s1, s2);
                else snprintf(sub, sizeof sub, "%s", s1);
                int si = name_index(&ag->subs, &ag->nsubs, sub, &ag->oom);
                agg_add(ag, r->group, a, si, dose, kind == AN_INJECTION ? loss - clean : loss);
            }
        } else {
            int si = name_index(&ag->subs, &ag->nsubs, "", &ag->oom);
            json_object_object_foreach(o, key, val) {
                if (!strcmp(key, "kind") || !strcmp(key, "version")) continue;
                if (!json_object_is_type(val, json_type_double) && !json_object_is_type(val, json_type_int)) continue;
                int ci = name_index(&ag->cols, &ag->ncols, key, &ag->oom);
                agg_add(ag, r->group, a, si, ci, json_object_get_double(val));
            }
        }
    }
}

/* One analysis table: rows (tier, sub, arm), columns XS (doses, or names). */
static void agg_table(const Grid *gr, const Agg *ag, const char *title, const char *note, const char *subhead,
                      const char *colfmt, int signed_vals, Buf *md, Buf *csv, json_object *jrows) {
    double xs[ag->n > 0 ? ag->n : 1];
    int nx = agg_columns(ag, xs);
    bprintf(md, "## %s\n\n%s\n\n| Tier |", title, note);
    if (subhead) bprintf(md, " %s |", subhead);
    bprintf(md, " Arm |");
    for (int k = 0; k < nx; k++) {
        if (ag->ncols) bprintf(md, " %s |", ag->cols[(int)xs[k]]);
        else {
            bprintf(md, " ");
            bprintf(md, colfmt, xs[k]);
            bprintf(md, " |");
        }
    }
    bprintf(md, "\n|---|%s---|", subhead ? "---|" : "");
    for (int k = 0; k < nx; k++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,%sarm,column,n,mean,se\n", subhead ? "condition," : "");
    for (int g = 0; g < gr->G; g++)
        for (int sub = 0; sub < (ag->nsubs ? ag->nsubs : 1); sub++)
            for (int a = 0; a < gr->A; a++) {
                if (!row_exists(ag, g, sub, a)) continue;
                bprintf(md, "| %s |", gr->rs->groups[g]);
                if (subhead) bprintf(md, " %s |", ag->subs[sub]);
                bprintf(md, " %s |", label_of(a));
                json_object *row = json_object_new_object(), *cells = json_object_new_object();
                json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
                if (subhead) json_object_object_add(row, "condition", json_object_new_string(ag->subs[sub]));
                json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
                for (int k = 0; k < nx; k++) {
                    Paired p = cell_stat(ag, g, sub, a, xs[k]);
                    char col[64];
                    if (ag->ncols) snprintf(col, sizeof col, "%s", ag->cols[(int)xs[k]]);
                    else snprintf(col, sizeof col, "%g", xs[k]);
                    if (!p.n) bprintf(md, " – |");
                    else if (p.n == 1) bprintf(md, signed_vals ? " %+.3f |" : " %.4f |", p.mean);
                    else bprintf(md, signed_vals ? " %+.3f ± %.3f (%d seeds) |" : " %.4f ± %.4f (%d seeds) |", p.mean, p.se, p.n);
                    if (!p.n) continue;
                    csv_str(csv, gr->rs->groups[g]);
                    bprintf(csv, ",");
                    if (subhead) {
                        csv_str(csv, ag->subs[sub]);
                        bprintf(csv, ",");
                    }
                    bprintf(csv, "%s,%s,%d,", arm_at(a)->name, col, p.n);
                    csv_num(csv, p.mean, 1);
                    bprintf(csv, ",");
                    csv_num(csv, p.se, p.n > 1);
                    bprintf(csv, "\n");
                    json_object_object_add(cells, col, j_paired(p, 1));
                }
                bprintf(md, "\n");
                json_object_object_add(row, "cells", cells);
                json_object_array_add(jrows, row);
            }
    bprintf(md, "\n");
}

/* ---- Tables 10 and 11: the zero-shot evaluations ------------------------------- */

/* These tables give the spread of the models, as the paper's Table 10 does:
 * the standard deviation over seeds (n - 1), not the standard error of the
 * mean that every other table of the report gives. */
typedef struct {
    int n;
    double mean, sd; /* sd: NaN for fewer than two values */
} MeanSd;

/* two passes, as pairstat.c: the spread is small beside perplexities ~50 */
static MeanSd mean_sd(const double *x, int n) {
    MeanSd m = {n, 0, NAN};
    if (!n) return m;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    m.mean = s / n;
    if (n > 1) {
        double q = 0;
        for (int i = 0; i < n; i++) q += (x[i] - m.mean) * (x[i] - m.mean);
        m.sd = sqrt(q / (n - 1));
    }
    return m;
}

/* {"n", "mean", "sd"} (sd null for one seed); null for none */
static json_object *j_mean_sd(MeanSd m) {
    if (!m.n) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "n", json_object_new_int(m.n));
    json_object_object_add(o, "mean", json_object_new_double(m.mean));
    json_object_object_add(o, "sd", m.n > 1 ? json_object_new_double(m.sd) : NULL);
    return o;
}

/* "0.1850 ± 0.0071 (2 seeds", "0.1800 (1 seed": the caller closes it */
static void md_mean_sd(Buf *b, MeanSd m, int digits) {
    if (m.n == 1) bprintf(b, " %.*f (1 seed", digits, m.mean);
    else bprintf(b, " %.*f ± %.*f (%d seeds", digits, m.mean, digits, m.sd, m.n);
}

static void csv_mean_sd(Buf *csv, const Grid *gr, int g, int a, const char *col, MeanSd m) {
    csv_str(csv, gr->rs->groups[g]);
    bprintf(csv, ",%s,%s,%d,", arm_at(a)->name, col, m.n);
    csv_num(csv, m.mean, 1);
    bprintf(csv, ",");
    csv_num(csv, m.sd, m.n > 1);
}

/* The run of (g, a, s) whose zero-shot file TASK is used, or NULL: the
 * finished run Table 5 shows, so that a duplicate counts once. */
static const RunRec *seed_zs_run(const Grid *gr, int g, int a, int s, int task) {
    const RunRec *r = gr->first[AT(gr, g, a, s)];
    return gr->has[AT(gr, g, a, s)] && r->zs_has[task] ? r : NULL;
}

static int zs_row(const Grid *gr, int g, int a, int task) {
    for (int s = 0; s < gr->S; s++)
        for (int k = task < 0 ? 0 : task; k < (task < 0 ? ZS_TASKS : task + 1); k++)
            if (seed_zs_run(gr, g, a, s, k)) return 1;
    return 0;
}

static const struct {
    const char *head, *col;
    int digits;
} zs_cols[ZS_VALUES] = {
    [ZS_LAMBADA_ACC] = {"LAMBADA acc", "lambada_accuracy", 4},
    [ZS_LAMBADA_PPL] = {"LAMBADA ppl", "lambada_perplexity", 2},
    [ZS_HELLASWAG_ACC] = {"HellaSwag acc", "hellaswag_accuracy", 4},
    [ZS_HELLASWAG_ACC_NORM] = {"HellaSwag acc_norm", "hellaswag_accuracy_norm", 4},
    [ZS_WIKITEXT_TOKEN_PPL] = {"WikiText-2 ppl (token)", "wikitext_token_perplexity", 2},
    [ZS_WIKITEXT_WORD_PPL] = {"WikiText-2 ppl (word)", "wikitext_word_perplexity", 2},
};

/* A task's runs of one tier must have evaluated the same thing (the same
 * count of examples, or of WikiText-2's tokens) for their numbers to
 * average: names the runs of each count where they differ. */
static void size_disagreement(const Grid *gr, int g, int task, Buf *problems) {
    long first = -1;
    int differ = 0;
    for (int a = 0; a < gr->A; a++)
        for (int s = 0; s < gr->S; s++) {
            const RunRec *r = seed_zs_run(gr, g, a, s, task);
            if (!r) continue;
            if (first < 0) first = r->zs_size[task];
            differ |= r->zs_size[task] != first;
        }
    if (!differ) return;
    bprintf(problems, "- %s: the runs' %s.json evaluated different numbers of %s (another file, or --limit?):",
            gr->rs->groups[g], zs_task_name(task), task == ZS_WIKITEXT ? "tokens" : "examples");
    const char *sep = " ";
    for (int a = 0; a < gr->A; a++)
        for (int s = 0; s < gr->S; s++) {
            const RunRec *r = seed_zs_run(gr, g, a, s, task);
            if (r) bprintf(problems, "%s%s %ld", sep, r->dir, r->zs_size[task]), sep = "; ";
        }
    bprintf(problems, "\n");
}

/* Table 10: rows (tier, arm) with any of the three files.  0 where none. */
static int table10(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems) {
    for (int g = 0; g < gr->G; g++)
        for (int t = 0; t < ZS_TASKS; t++) size_disagreement(gr, g, t, problems);
    int any = 0;
    for (int g = 0; g < gr->G && !any; g++)
        for (int a = 0; a < gr->A && !any; a++) any = zs_row(gr, g, a, -1);
    if (!any) return 0;
    double x[gr->S > 0 ? gr->S : 1];
    bprintf(md, "## Zero-shot evaluation (Table 10)\n\n"
                "LAMBADA, HellaSwag and WikiText-2 zero-shot (analysis/lambada.json, hellaswag.json, wikitext.json; "
                "docs/zeroshot.md): the mean over the seeds evaluated ± their **standard deviation** (n − 1), "
                "as the paper's Table 10 gives it, not the standard error of the other tables; then the number "
                "of seeds. LAMBADA's perplexity is that of the target word; WikiText-2's is per token and per "
                "word. – : no seed has the file.\n\n| Tier | Arm |");
    for (int v = 0; v < ZS_VALUES; v++) bprintf(md, " %s |", zs_cols[v].head);
    bprintf(md, "\n|---|---|");
    for (int v = 0; v < ZS_VALUES; v++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,arm,column,n,mean,sd\n");
    json_object *cols = json_object_new_array(), *rows = json_object_new_array();
    for (int v = 0; v < ZS_VALUES; v++) json_object_array_add(cols, json_object_new_string(zs_cols[v].col));
    for (int g = 0; g < gr->G; g++)
        for (int a = 0; a < gr->A; a++) {
            if (!zs_row(gr, g, a, -1)) continue;
            bprintf(md, "| %s | %s |", gr->rs->groups[g], label_of(a));
            json_object *row = json_object_new_object(), *cells = json_object_new_object();
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
            for (int v = 0; v < ZS_VALUES; v++) {
                int n = 0;
                for (int s = 0; s < gr->S; s++) {
                    const RunRec *r = seed_zs_run(gr, g, a, s, zeroshot_fields[v].task);
                    if (r) x[n++] = r->zs[v];
                }
                const MeanSd m = mean_sd(x, n);
                json_object_object_add(cells, zs_cols[v].col, j_mean_sd(m));
                if (!n) {
                    bprintf(md, " – |");
                    continue;
                }
                md_mean_sd(md, m, zs_cols[v].digits);
                bprintf(md, ") |");
                csv_mean_sd(csv, gr, g, a, zs_cols[v].col, m);
                bprintf(csv, "\n");
            }
            bprintf(md, "\n");
            json_object_object_add(row, "cells", cells);
            json_object_array_add(rows, row);
        }
    bprintf(md, "\n");
    json_object_object_add(js, "columns", cols);
    json_object_object_add(js, "rows", rows);
    return 1;
}

static const char *const bucket_heads[ZS_BUCKETS] = {"target absent", "distance ≤ 32", "distance 33–96",
                                                     "distance > 96"};

/* The runs of tier G with lambada.json, in (arm, seed) order: the I-th, or
 * NULL past the last. */
static const RunRec *lambada_run(const Grid *gr, int g, int i) {
    for (int a = 0; a < gr->A; a++)
        for (int s = 0; s < gr->S; s++) {
            const RunRec *r = seed_zs_run(gr, g, a, s, ZS_LAMBADA);
            if (r && !i--) return r;
        }
    return NULL;
}

static int same_buckets(const RunRec *x, const RunRec *y) {
    return !memcmp(x->zs_bucket_n, y->zs_bucket_n, sizeof x->zs_bucket_n);
}

/* The buckets' sizes depend only on the data and the tokenizer: runs of a
 * tier that disagree on them were evaluated on different passages (another
 * file, or --limit), and their accuracies do not average.  Names every run
 * of the tier, grouped by its sizes; 1 where they disagree. */
static int bucket_disagreement(const Grid *gr, int g, Buf *problems) {
    const RunRec *r0 = lambada_run(gr, g, 0), *r;
    int differ = 0;
    for (int i = 1; r0 && (r = lambada_run(gr, g, i)) && !differ; i++) differ = !same_buckets(r, r0);
    if (!differ) return 0;
    bprintf(problems, "- %s: the runs' LAMBADA buckets (absent, ≤ 32, 33–96, > 96) hold different numbers of "
                      "passages, which depend only on the data and the tokenizer (another file, or --limit?):",
            gr->rs->groups[g]);
    for (int i = 0; (r = lambada_run(gr, g, i)); i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = same_buckets(lambada_run(gr, g, j), r);
        if (seen) continue;
        bprintf(problems, "%s n = %ld/%ld/%ld/%ld in", i ? ";" : "", r->zs_bucket_n[0], r->zs_bucket_n[1],
                r->zs_bucket_n[2], r->zs_bucket_n[3]);
        const RunRec *q;
        for (int j = i, k = 0; (q = lambada_run(gr, g, j)); j++)
            if (same_buckets(q, r)) bprintf(problems, "%s %s", k++ ? "," : "", q->dir);
    }
    bprintf(problems, "\n");
    return 1;
}

/* Table 11: LAMBADA's accuracy by distance, rows (tier, arm) with
 * lambada.json.  The header gives each bucket's n when every run agrees;
 * otherwise each cell gives its own.  0 where no run has the file. */
static int table11(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems) {
    const RunRec *ref = NULL;
    int agree = 1;
    for (int g = 0; g < gr->G; g++) {
        bucket_disagreement(gr, g, problems);
        const RunRec *r;
        for (int i = 0; (r = lambada_run(gr, g, i)); i++) {
            if (!ref) ref = r;
            agree &= same_buckets(r, ref);
        }
    }
    if (!ref) return 0;
    double x[gr->S > 0 ? gr->S : 1];
    bprintf(md, "## LAMBADA accuracy by target distance (Table 11)\n\n"
                "The share of passages whose target word is predicted, by the distance in tokens from the target "
                "to its most recent earlier occurrence in the passage (docs/zeroshot.md): the mean over the seeds "
                "evaluated ± their standard deviation (n − 1), not the standard error, then the number of seeds. "
                "n: the passages in the bucket, the same for every model evaluated on the same data%s\n\n"
                "| Tier | Arm |",
            agree ? "." : "; the runs here disagree on it, so each cell gives the n of its runs (see Problems when "
                          "the runs of one tier disagree).");
    json_object *buckets = json_object_new_array(), *rows = json_object_new_array();
    for (int k = 0; k < ZS_BUCKETS; k++) {
        if (agree) bprintf(md, " %s (n=%ld) |", bucket_heads[k], ref->zs_bucket_n[k]);
        else bprintf(md, " %s |", bucket_heads[k]);
        json_object *b = json_object_new_object();
        json_object_object_add(b, "bucket", json_object_new_string(zeroshot_buckets[k]));
        json_object_object_add(b, "n", agree ? json_object_new_int64(ref->zs_bucket_n[k]) : NULL);
        json_object_array_add(buckets, b);
    }
    bprintf(md, "\n|---|---|");
    for (int k = 0; k < ZS_BUCKETS; k++) bprintf(md, "---|");
    bprintf(md, "\n");
    bprintf(csv, "tier,arm,column,n,mean,sd,examples\n");
    for (int g = 0; g < gr->G; g++)
        for (int a = 0; a < gr->A; a++) {
            if (!zs_row(gr, g, a, ZS_LAMBADA)) continue;
            bprintf(md, "| %s | %s |", gr->rs->groups[g], label_of(a));
            json_object *row = json_object_new_object(), *cells = json_object_new_object();
            json_object_object_add(row, "tier", json_object_new_string(gr->rs->groups[g]));
            json_object_object_add(row, "arm", json_object_new_string(arm_at(a)->name));
            for (int k = 0; k < ZS_BUCKETS; k++) {
                int n = 0;
                long lo = -1, hi = -1; /* the bucket's n over the cell's runs */
                for (int s = 0; s < gr->S; s++) {
                    const RunRec *r = seed_zs_run(gr, g, a, s, ZS_LAMBADA);
                    if (!r) continue;
                    const long e = r->zs_bucket_n[k];
                    if (lo < 0 || e < lo) lo = e;
                    if (e > hi) hi = e;
                    if (isfinite(r->zs_bucket_acc[k])) x[n++] = r->zs_bucket_acc[k];
                }
                const MeanSd m = mean_sd(x, n);
                char en[64] = "";
                if (!agree && lo == hi) snprintf(en, sizeof en, "n=%ld", lo);
                else if (!agree) snprintf(en, sizeof en, "n=%ld–%ld", lo, hi);
                if (!n && en[0]) bprintf(md, " – (%s) |", en);
                else if (!n) bprintf(md, " – |");
                else {
                    md_mean_sd(md, m, 4);
                    bprintf(md, "%s%s) |", en[0] ? ", " : "", en);
                    csv_mean_sd(csv, gr, g, a, zeroshot_buckets[k], m);
                    bprintf(csv, ",");
                    if (lo == hi) bprintf(csv, "%ld", lo);
                    bprintf(csv, "\n");
                }
                json_object *c = j_mean_sd(m);
                if (c) json_object_object_add(c, "examples", lo == hi ? json_object_new_int64(lo) : NULL);
                json_object_object_add(cells, zeroshot_buckets[k], c);
            }
            bprintf(md, "\n");
            json_object_object_add(row, "cells", cells);
            json_object_array_add(rows, row);
        }
    bprintf(md, "\n");
    json_object_object_add(js, "buckets", buckets);
    json_object_object_add(js, "rows", rows);
    return 1;
}

/* ---- figures ------------------------------------------------------------------- */

static void sanitize(char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-'))
            *s = '_';
}

static void note_figure(int rc, const char *file, const char *caption, Buf *md, ReportSummary *sum, Buf *problems,
                        const char *err) {
    if (rc == 0) {
        sum->figures++;
        bprintf(md, "![%s](figures/%s.png)\n\n*%s* ([SVG](figures/%s.svg))\n\n", caption, file, caption, file);
    } else if (rc == 1) {
        sum->figures_undrawn++;
        bprintf(md, "*%s*: not drawn (gnuplot is not installed); data and script in figures/%s.dat, %s.gp\n\n",
                caption, file, file);
    } else
        bprintf(problems, "- figure %s: %s\n", file, err);
}

static void figure1(const Grid *gr, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
    int norm_both = arm_by_caps(arm_at(gr->ref)->zero, FILTER_NORM, FSLOT_VALUE);
    int proj_both = arm_by_caps(arm_at(gr->ref)->zero, FILTER_PROJ, FSLOT_VALUE);
    const char *cats[gr->G > 0 ? gr->G : 1];
    PlotValue v[3][gr->G > 0 ? gr->G : 1];
    int nc = 0;
    for (int g = 0; g < gr->G; g++) {
        Paired p[3] = {pair_at(gr, g, gr->ref, gr->base),
                       norm_both >= 0 ? pair_at(gr, g, norm_both, gr->ref) : (Paired){0, 0, 0, -1},
                       proj_both >= 0 ? pair_at(gr, g, proj_both, gr->ref) : (Paired){0, 0, 0, -1}};
        if (!p[0].n && !p[1].n && !p[2].n) continue;
        cats[nc] = gr->rs->groups[g];
        for (int k = 0; k < 3; k++) v[k][nc] = (PlotValue){-p[k].mean, p[k].n > 1 ? p[k].se : -1, p[k].n > 0};
        nc++;
    }
    if (!nc) return;
    char n0[160], n1[160], n2[160];
    snprintf(n0, sizeof n0, "zero option (%s over %s)", label_of(gr->ref), label_of(gr->base));
    snprintf(n1, sizeof n1, "filtering, norm gate (%s over %s)", norm_both >= 0 ? label_of(norm_both) : "-", label_of(gr->ref));
    snprintf(n2, sizeof n2, "filtering, projection gate (%s over %s)", proj_both >= 0 ? label_of(proj_both) : "-", label_of(gr->ref));
    PlotSeries s[3] = {{n0, v[0]}, {n1, v[1]}, {n2, v[2]}};
    char err[512] = "";
    int rc = plot_categories(figdir, "fig1a-increments", "The two primitives across scale",
                             "improvement (nats)", cats, nc, s, 3, err, sizeof err);
    note_figure(rc, "fig1a-increments",
                "Figure 1(a): zero-option increment and filtering increments, paired per seed, ± SE "
                "(no bar: a single seed)", md, sum, problems, err);
}

static void figure2(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
    double xs[ag->n > 0 ? ag->n : 1];
    int nx = agg_columns(ag, xs);
    for (int g = 0; g < gr->G; g++)
        for (int sub = 0; sub < ag->nsubs; sub++) {
            PlotValue vals[gr->A][nx > 0 ? nx : 1];
            PlotSeries series[gr->A];
            int ns = 0;
            for (int a = 0; a < gr->A; a++) {
                if (!row_exists(ag, g, sub, a)) continue;
                for (int k = 0; k < nx; k++) {
                    Paired p = cell_stat(ag, g, sub, a, xs[k]);
                    vals[ns][k] = (PlotValue){p.mean, p.n > 1 ? p.se : -1, p.n > 0};
                }
                series[ns] = (PlotSeries){label_of(a), vals[ns]};
                ns++;
            }
            if (!ns) continue;
            char name[256], title[300], err[512] = "";
            snprintf(name, sizeof name, "fig2-dose-%s-%s", gr->rs->groups[g], ag->subs[sub]);
            sanitize(name + 10);
            snprintf(title, sizeof title, "%s: %s junk", gr->rs->groups[g], ag->subs[sub]);
            int rc = plot_dose(figdir, name, title, "increase in validation loss (nats)", xs, nx, series, ns, err,
                               sizeof err);
            char cap[400];
            snprintf(cap, sizeof cap, "Figure 2: dose-response at %s, %s junk", gr->rs->groups[g], ag->subs[sub]);
            note_figure(rc, name, cap, md, sum, problems, err);
        }
}

/* ---- Figures 1(b), 1(c) and 5: telemetry, the mean over the seeds analysed --- */

/* Column KEY of the telemetry aggregate at (tier G, arm A) as mean ± SE;
 * n = 0 where no run has it. */
static Paired tel_at(const Agg *ag, int g, int a, const char *key) {
    for (int k = 0; k < ag->ncols; k++)
        if (!strcmp(ag->cols[k], key)) return cell_stat(ag, g, 0, a, k);
    return (Paired){0, 0, 0, -1};
}

static PlotValue plot_value(Paired p) { return (PlotValue){p.mean, p.n > 1 ? p.se : -1, p.n > 0}; }

/* One measurement across the tiers, a series for every arm that has it. */
static void tel_across_tiers(const Grid *gr, const Agg *ag, const char *key, const char *figdir, const char *file,
                             const char *title, const char *ylabel, const char *caption, Buf *md,
                             ReportSummary *sum, Buf *problems) {
    const int G = gr->G > 0 ? gr->G : 1, A = gr->A > 0 ? gr->A : 1;
    const char *cats[G];
    int tiers[G], nc = 0;
    for (int g = 0; g < gr->G; g++) {
        int any = 0;
        for (int a = 0; a < gr->A && !any; a++) any = tel_at(ag, g, a, key).n > 0;
        if (any) tiers[nc] = g, cats[nc++] = gr->rs->groups[g];
    }
    if (!nc) return;
    PlotValue v[A][G];
    PlotSeries series[A];
    int ns = 0;
    for (int a = 0; a < gr->A; a++) {
        int any = 0;
        for (int c = 0; c < nc; c++) {
            v[ns][c] = plot_value(tel_at(ag, tiers[c], a, key));
            any |= v[ns][c].present;
        }
        if (any) series[ns] = (PlotSeries){label_of(a), v[ns]}, ns++;
    }
    char err[512] = "";
    int rc = plot_categories(figdir, file, title, ylabel, cats, nc, series, ns, err, sizeof err);
    note_figure(rc, file, caption, md, sum, problems, err);
}

/* Figure 5 at every tier with telemetry: (a) the mass on the first key
 * position and on the phantom, (b) the first position's read norm against
 * an ordinary read's, per arm. */
static void figure5(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
    const int A = gr->A > 0 ? gr->A : 1;
    for (int g = 0; g < gr->G; g++) {
        const char *cats[A];
        PlotValue pos0[A], phantom[A], ratio[A];
        int nc = 0, nratio = 0;
        for (int a = 0; a < gr->A; a++) {
            Paired p0 = tel_at(ag, g, a, "pos0_mass"), ph = tel_at(ag, g, a, "phantom_mass"),
                   r0 = tel_at(ag, g, a, "pos0_norm_ratio");
            if (!p0.n && !ph.n && !r0.n) continue;
            cats[nc] = label_of(a);
            pos0[nc] = plot_value(p0), phantom[nc] = plot_value(ph), ratio[nc] = plot_value(r0);
            nratio += r0.n > 0;
            nc++;
        }
        if (!nc) continue;
        const char *tier = gr->rs->groups[g];
        char file[256], title[300], cap[400], err[512] = "";
        PlotSeries mass[2] = {{"first key position", pos0}, {"phantom", phantom}};
        snprintf(file, sizeof file, "fig5a-sink-mass-%s", tier);
        sanitize(file + 16);
        snprintf(title, sizeof title, "%s: where the attention mass parks", tier);
        int rc = plot_categories_points(figdir, file, title, "arm", "share of attention mass", cats, nc, mass, 2,
                                        err, sizeof err);
        snprintf(cap, sizeof cap, "Figure 5(a): attention mass on the first key position and on the phantom at %s, "
                                  "mean over seeds ± SE", tier);
        note_figure(rc, file, cap, md, sum, problems, err);
        if (!nratio) continue;
        PlotSeries norm[1] = {{"position 0 / median read", ratio}};
        snprintf(file, sizeof file, "fig5b-pos0-norm-%s", tier);
        sanitize(file + 16);
        snprintf(title, sizeof title, "%s: the first position's value read", tier);
        err[0] = 0;
        rc = plot_categories_points(figdir, file, title, "arm", "read norm at position 0 / median read norm", cats,
                                    nc, norm, 1, err, sizeof err);
        snprintf(cap, sizeof cap, "Figure 5(b): the value read at position 0 relative to an ordinary read at %s "
                                  "(median over heads), mean over seeds ± SE", tier);
        note_figure(rc, file, cap, md, sum, problems, err);
    }
}

static char *path_cat(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static void curves(const RunSet *rs, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
    char *dir = path_cat(figdir, "curves");
    if (!dir) {
        bprintf(problems, "- loss curves: out of memory\n");
        return;
    }
    bprintf(md, "### Loss curves\n\n");
    for (size_t i = 0; i < rs->n; i++) {
        const RunRec *r = &rs->v[i];
        if (r->status == RUN_CORRUPT || r->group < 0) continue;
        double *ts, *tl, *vs, *vl;
        int nt, nv;
        char err[512] = "";
        if (runs_read_curves(r->dir, &ts, &tl, &nt, &vs, &vl, &nv, err, sizeof err)) {
            bprintf(problems, "- loss curve of %s: %s\n", r->dir, err);
            continue;
        }
        char name[256], title[300];
        snprintf(name, sizeof name, "%s-%s-s%ld", rs->groups[r->group], r->arm, r->seed);
        sanitize(name);
        snprintf(title, sizeof title, "%s %s seed %ld", rs->groups[r->group], label_of(arm_index(r->arm)), r->seed);
        int rc = plot_curve(dir, name, title, ts, tl, nt, vs, vl, nv, err, sizeof err);
        char file[300];
        snprintf(file, sizeof file, "curves/%s", name);
        if (rc == 0) {
            sum->figures++;
            bprintf(md, "- [%s](figures/%s.png)\n", title, file);
        } else if (rc == 1) sum->figures_undrawn++;
        else bprintf(problems, "- loss curve of %s: %s\n", r->dir, err);
        free(ts), free(tl), free(vs), free(vl);
    }
    free(dir);
    bprintf(md, "\n");
}

/* ---- the report ----------------------------------------------------------------- */

static int put_file(const char *dir, const char *name, Buf *b, char *err, size_t errlen) {
    if (b->oom) return sg_fail(err, errlen, "out of memory writing %s", name);
    char *path = path_cat(dir, name);
    if (!path) return sg_fail(err, errlen, "out of memory");
    int rc = fs_write_atomic(path, b->p ? b->p : "", b->n, err, errlen);
    free(path);
    return rc;
}

/* "What the filter removes" (report_tokens.c): the done runs with
 * telemetry, by tier and arm, seeds ascending. */
static int tokens_section(const Grid *gr, Buf *md, Buf *csv, json_object *root, Buf *problems, int *bad) {
    TokenRun *v = malloc(sizeof *v * (gr->rs->n ? gr->rs->n : 1));
    if (!v) return -1;
    int n = 0;
    for (int g = 0; g < gr->G; g++)
        for (int a = 0; a < gr->A; a++)
            for (int s = 0; s < gr->S; s++) {
                const RunRec *r = gr->first[AT(gr, g, a, s)];
                if (!gr->has[AT(gr, g, a, s)] || !r->analysis[AN_TELEMETRY]) continue;
                v[n++] = (TokenRun){gr->rs->groups[g], arm_at(a)->name, label_of(a), gr->seeds[s], r->dir,
                                    r->analysis[AN_TELEMETRY]};
            }
    char *pm = NULL, *pc = NULL, *pp = NULL;
    size_t nm = 0, nc = 0, np = 0;
    FILE *fm = open_memstream(&pm, &nm), *fc = open_memstream(&pc, &nc), *fp = open_memstream(&pp, &np);
    int rc = -1;
    if (fm && fc && fp) {
        json_object *rows = json_object_new_array();
        if (report_tokens(v, n, fm, fc, rows, fp, bad)) json_object_object_add(root, "tokens", rows);
        else json_object_put(rows);
        rc = 0;
    }
    if (fm) fclose(fm);
    if (fc) fclose(fc);
    if (fp) fclose(fp);
    if (!rc) {
        if (nm) bprintf(md, "%s", pm);
        if (nc) bprintf(csv, "%s", pc);
        if (np) bprintf(problems, "%s", pp);
    }
    free(pm), free(pc), free(pp), free(v);
    return rc;
}

int report_write(const RunSet *rs, const ReportOpts *o, const char *outdir, ReportSummary *sum, char *err,
                 size_t errlen) {
    memset(sum, 0, sizeof *sum);
    Grid gr;
    Buf md = {0}, problems = {0}, c1 = {0}, c2 = {0}, c5 = {0}, ctp = {0}, ca[AN_KINDS] = {{0}};
    Buf c10 = {0}, c11 = {0}, ctok = {0}, bad_runs = {0}, dups = {0}, missing = {0}, zsprob = {0};
    json_object *root = json_object_new_object();
    Agg ag[AN_KINDS] = {{0}};
    char *figdir = NULL, *tdir = NULL;
    int rc = -1;
    if (grid_build(&gr, rs, o, err, errlen)) goto out;
    sum->runs = (int)rs->n;

    /* fill the grid; duplicates and unfinished runs go to the problems */
    for (size_t i = 0; i < rs->n; i++) {
        const RunRec *r = &rs->v[i];
        sum->done += r->status == RUN_DONE;
        sum->failed += r->status == RUN_FAILED;
        sum->unfinished += r->status == RUN_UNFINISHED;
        sum->corrupt += r->status == RUN_CORRUPT;
        for (int k = 0; k < AN_KINDS; k++)
            if (r->analysis_err[k][0]) {
                sum->analysis_errors++;
                bprintf(&bad_runs, "- %s\n", r->analysis_err[k]);
            }
        for (int k = 0; k < ZS_TASKS; k++)
            if (r->zs_err[k][0]) {
                sum->analysis_errors++;
                bprintf(&bad_runs, "- %s\n", r->zs_err[k]);
            }
        int a = arm_index(r->arm), s = seed_index(&gr, r->seed);
        if (r->status == RUN_CORRUPT) {
            bprintf(&bad_runs, "- %s: unreadable: %s\n", r->dir, r->why);
            continue;
        }
        if (r->status != RUN_DONE)
            bprintf(&bad_runs, "- %s: %s %s seed %ld: %s\n", r->dir, r->tier, r->arm, r->seed, r->why);
        if (a < 0 || s < 0 || r->group < 0) {
            if (r->status == RUN_DONE) bprintf(&bad_runs, "- %s: unknown arm \"%s\"\n", r->dir, r->arm);
            continue;
        }
        size_t at = AT(&gr, r->group, a, s);
        if (gr.first[at] && (gr.has[at] || r->status != RUN_DONE)) {
            sum->duplicates++;
            bprintf(&dups, "- %s %s seed %ld: %s and %s (the first is used)\n", rs->groups[r->group], r->arm,
                    r->seed, gr.first[at]->dir, r->dir);
            continue;
        }
        gr.first[at] = r;
        if (r->status == RUN_DONE) {
            gr.has[at] = 1;
            gr.loss[at] = r->final_loss;
        }
    }

    /* missing: an arm of a tier lacks a seed that another arm of the tier has */
    for (int g = 0; g < gr.G; g++)
        for (int a = 0; a < gr.A; a++) {
            int any = 0;
            for (int s = 0; s < gr.S; s++) any |= gr.first[AT(&gr, g, a, s)] != NULL;
            if (!any) continue;
            int nmiss = 0;
            for (int s = 0; s < gr.S; s++) {
                int seed_used = 0;
                for (int b = 0; b < gr.A && !seed_used; b++) seed_used = gr.first[AT(&gr, g, b, s)] != NULL;
                if (!seed_used || gr.first[AT(&gr, g, a, s)]) continue;
                if (nmiss++) bprintf(&missing, ", %ld", gr.seeds[s]);
                else bprintf(&missing, "- %s %s: no run for seed %ld", rs->groups[g], label_of(a), gr.seeds[s]);
                sum->missing++;
            }
            if (nmiss) bprintf(&missing, " (trained for other arms of %s)\n", rs->groups[g]);
        }

    char hdr[512];
    snprintf(hdr, sizeof hdr, "%d run directories: %d done, %d failed, %d unfinished, %d unreadable", sum->runs,
             sum->done, sum->failed, sum->unfinished, sum->corrupt);
    bprintf(&md, "# sinkgate report\n\n%s. %d tier%s, %d seed%s. Baseline: %s; reference for filtering: %s.\n\n", hdr,
            gr.G, gr.G == 1 ? "" : "s", gr.S, gr.S == 1 ? "" : "s", label_of(gr.base), label_of(gr.ref));
    json_object *jruns = json_object_new_object();
    json_object_object_add(jruns, "total", json_object_new_int(sum->runs));
    json_object_object_add(jruns, "done", json_object_new_int(sum->done));
    json_object_object_add(jruns, "failed", json_object_new_int(sum->failed));
    json_object_object_add(jruns, "unfinished", json_object_new_int(sum->unfinished));
    json_object_object_add(jruns, "unreadable", json_object_new_int(sum->corrupt));
    json_object_object_add(jruns, "missing", json_object_new_int(sum->missing));
    json_object_object_add(jruns, "duplicates", json_object_new_int(sum->duplicates));
    json_object_object_add(root, "runs", jruns);

    json_object *t1 = json_object_new_object(), *t2 = json_object_new_object(), *t5 = json_object_new_object();
    table1(&gr, &md, &c1, t1);
    table2(&gr, &md, &c2, t2);
    table5(&gr, &md, &c5, t5);
    json_object_object_add(root, "table1", t1);
    json_object_object_add(root, "table2", t2);
    json_object_object_add(root, "table5", t5);
    json_object *tt = json_object_new_object();
    const int have_tp = table_throughput(&gr, &md, &ctp, tt);
    if (have_tp) json_object_object_add(root, "throughput", tt);
    else json_object_put(tt);

    static const char *titles[AN_KINDS] = {"Injection battery (Tables 6-7)", "Gate-override probes (Table 8)",
                                           "Exposure (Table 9)", "Telemetry", "Incidence (Table 12)"};
    static const char *notes[AN_KINDS] = {
        "Increase in validation loss (nats) over the uncorrupted model, by dose ε; mean over the seeds "
        "analysed (± SE when more than one).",
        "Validation loss (nats) under each gate override, by dose ε.",
        "Share of each attention row's mass on quiet reads (below the per-head median or 25th-percentile "
        "norm) and on the phantom.",
        "Attention telemetry of the trained models (analysis/telemetry.json), mean over seeds.",
        "Appendix F's incidence measurement on the trained models (analysis/incidence.json), mean over seeds: "
        "attention mass on the sink positions; the position-0 read norm relative to other reads (median over "
        "heads); per quiet-band percentile q, the share of the mass past the sink on reads below the head's "
        "q-th percentile norm divided by q/100 (blind-mass ratio: 1 for norm-blind routing) and the share of the "
        "delivered content ||a_ij read_j|| through them (content share); means over heads."};
    static const char *subheads[AN_KINDS] = {"Junk type (cutoff)", "Gate override", NULL, NULL, NULL};
    static const char *colfmts[AN_KINDS] = {"ε=%g", "ε=%g", "%g", "%g", "%g"};
    int bad_an = 0;
    for (int k = 0; k < AN_KINDS; k++) {
        agg_collect(rs, k, &ag[k], &bad_an, &bad_runs);
        if (ag[k].oom) {
            sg_fail(err, errlen, "out of memory");
            goto out;
        }
        if (!ag[k].n) continue;
        json_object *rows = json_object_new_array();
        agg_table(&gr, &ag[k], titles[k], notes[k], subheads[k], colfmts[k], k == AN_INJECTION, &md, &ca[k], rows);
        json_object_object_add(root, analysis_names[k], rows);
    }
    sum->analysis_errors += bad_an;
    if (tokens_section(&gr, &md, &ctok, root, &bad_runs, &sum->analysis_errors)) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    json_object *j10 = json_object_new_object(), *j11 = json_object_new_object();
    const int have10 = table10(&gr, &md, &c10, j10, &zsprob), have11 = table11(&gr, &md, &c11, j11, &zsprob);
    if (have10) json_object_object_add(root, "zeroshot", j10);
    else json_object_put(j10);
    if (have11) json_object_object_add(root, "lambada_distance", j11);
    else json_object_put(j11);

    figdir = path_cat(outdir, "figures");
    tdir = path_cat(outdir, "tables");
    if (!figdir || !tdir) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    if (fs_mkdir_p(outdir, err, errlen)) goto out;
    if (o->figures) {
        if (fs_mkdir_p(figdir, err, errlen)) goto out;
        bprintf(&md, "## Figures\n\n");
        figure1(&gr, figdir, &md, sum, &problems);
        /* quantities across tiers, a series per arm, mean over seeds ± SE (no bar: a single seed) */
        static const struct {
            int kind;
            const char *key, *file, *title, *ylabel, *caption;
        } across[] = {
            {AN_TELEMETRY, "phantom_mass", "fig1b-phantom-mass", "The phantom's share across scale",
             "share of attention mass on the phantom", "Figure 1(b): the share of attention mass on the phantom"},
            {AN_TELEMETRY, "gate_within_row_sd", "fig1c-gate-spread", "The gate's within-row spread across scale",
             "within-row SD of the gate", "Figure 1(c): the within-row spread of the gate"},
            {AN_INCIDENCE, "sink_mass", "fig4a-sink-mass", "Mass on the sink positions across scale",
             "attention mass on the sink positions",
             "Figure 4(a): the attention mass on the sink positions (the first four by default)"},
            {AN_INCIDENCE, "blind_mass_ratio_q30", "fig4b-blind-mass-ratio", "Quiet-read mass against norm-blind routing",
             "blind-mass ratio at the 30th percentile",
             "Figure 4(b): the blind-mass ratio at the 30th percentile (1: routing blind to read norms, 0: quiet "
             "reads avoided)"},
            {AN_INCIDENCE, "content_share_q30", "fig4c-content-share", "Content through the quiet band",
             "content share at the 30th percentile",
             "Figure 4(c): the share of delivered content through the reads below the 30th percentile norm"},
        };
        for (size_t i = 0; i < sizeof across / sizeof *across; i++) {
            char caption[400];
            snprintf(caption, sizeof caption, "%s, mean over seeds ± SE (no bar: a single seed)", across[i].caption);
            if (ag[across[i].kind].n)
                tel_across_tiers(&gr, &ag[across[i].kind], across[i].key, figdir, across[i].file, across[i].title,
                                 across[i].ylabel, caption, &md, sum, &problems);
        }
        if (ag[AN_INJECTION].n) figure2(&gr, &ag[AN_INJECTION], figdir, &md, sum, &problems);
        const Agg *tel = &ag[AN_TELEMETRY];
        if (tel->n) figure5(&gr, tel, figdir, &md, sum, &problems);
        if (o->curves) curves(rs, figdir, &md, sum, &problems);
    }

    bprintf(&md, "## Problems\n\n");
    if (!bad_runs.n && !missing.n && !dups.n && !problems.n && !zsprob.n) bprintf(&md, "None: every run finished and was read.\n");
    if (bad_runs.n) bprintf(&md, "### Runs that did not finish, or could not be read\n\n%.*s\n", (int)bad_runs.n, bad_runs.p);
    if (missing.n) bprintf(&md, "### Missing runs\n\nPairs use only the seeds present for both arms.\n\n%.*s\n", (int)missing.n, missing.p);
    if (dups.n) bprintf(&md, "### Duplicate runs\n\n%.*s\n", (int)dups.n, dups.p);
    if (zsprob.n) bprintf(&md, "### Zero-shot evaluations\n\n%.*s\n", (int)zsprob.n, zsprob.p);
    if (problems.n) bprintf(&md, "### Figures and curves\n\n%.*s\n", (int)problems.n, problems.p);
    json_object *jp = json_object_new_object();
    json_object_object_add(jp, "runs", json_object_new_string(bad_runs.n ? bad_runs.p : ""));
    json_object_object_add(jp, "missing", json_object_new_string(missing.n ? missing.p : ""));
    json_object_object_add(jp, "duplicates", json_object_new_string(dups.n ? dups.p : ""));
    json_object_object_add(jp, "figures", json_object_new_string(problems.n ? problems.p : ""));
    json_object_object_add(jp, "zeroshot", json_object_new_string(zsprob.n ? zsprob.p : ""));
    json_object_object_add(root, "problems", jp);

    if (fs_mkdir_p(tdir, err, errlen)) goto out;
    if (put_file(tdir, "table1.csv", &c1, err, errlen) || put_file(tdir, "table2.csv", &c2, err, errlen) ||
        put_file(tdir, "table5.csv", &c5, err, errlen) || (have_tp && put_file(tdir, "throughput.csv", &ctp, err, errlen)))
        goto out;
    for (int k = 0; k < AN_KINDS; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s.csv", analysis_names[k]);
        if (ag[k].n && put_file(tdir, name, &ca[k], err, errlen)) goto out;
    }
    if ((ctok.n && put_file(tdir, "tokens.csv", &ctok, err, errlen)) ||
        (have10 && put_file(tdir, "zeroshot.csv", &c10, err, errlen)) ||
        (have11 && put_file(tdir, "lambada_distance.csv", &c11, err, errlen)))
        goto out;
    const char *js = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    Buf jb = {(char *)js, strlen(js), strlen(js) + 1, 0};
    if (put_file(outdir, "report.json", &jb, err, errlen) || put_file(outdir, "report.md", &md, err, errlen)) goto out;
    rc = 0;
out:
    free(figdir);
    free(tdir);
    grid_free(&gr);
    json_object_put(root);
    for (int k = 0; k < AN_KINDS; k++) {
        agg_free(&ag[k]);
        free(ca[k].p);
    }
    free(md.p);
    free(problems.p);
    free(bad_runs.p);
    free(missing.p);
    free(dups.p);
    free(c1.p);
    free(c2.p);
    free(ctok.p);
    free(c5.p);
    free(ctp.p);
    free(c10.p);
    free(c11.p);
    free(zsprob.p);
    return rc;
}
