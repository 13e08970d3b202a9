/* The report's training-throughput table: each arm's rate against the baseline's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

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
int table_throughput(const Grid *gr, Buf *md, Buf *csv, json_object *js) {
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
