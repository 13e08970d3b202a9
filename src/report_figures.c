/* The report's figures (drawn by report_plot.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"
#include "report_plot.h"

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

void figure1(const Grid *gr, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
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

void figure2(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
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
void tel_across_tiers(const Grid *gr, const Agg *ag, const char *key, const char *figdir, const char *file,
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
void figure5(const Grid *gr, const Agg *ag, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
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

void curves(const RunSet *rs, const char *figdir, Buf *md, ReportSummary *sum, Buf *problems) {
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
