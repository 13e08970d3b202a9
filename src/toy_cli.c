/* `sgtrain toy`: the grid of Figure 3 (loads x arms x conditions x seeds),
 * run in parallel one configuration per thread, then the table, the JSON and
 * the figure.  Each configuration is computed by one thread from start to
 * end, so its numbers do not depend on the thread count or the order. */
#include "toy_cli.h"

#include <errno.h>
#include <stddef.h>
#include <json-c/json.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_parse.h"
#include "fsutil.h"
#include "report_plot.h"
#include "toy.h"

#define TOY_MAX_LOADS 16
#define TOY_MAX_SEEDS 64

typedef struct {
    ToyConfig base;
    int loads[TOY_MAX_LOADS], nloads;
    int arm_mask, cond_mask, seeds;
    const char *out;
    int threads, figures, quiet;
} ToyOpts;

void toy_usage(void) {
    printf("sgtrain toy [flags]: the channel-blind superposition task (paper Appendix E, Figure 3)\n\n"
           "  --loads LIST        N/d values (1,2,4,8); N <= d gives an orthonormal dictionary\n"
           "  --arms LIST         baseline,normgate,offbyone,renorm,oracle or all (all)\n"
           "  --conditions LIST   blind,visible or all (all): keys are random tags, or the items\n"
           "  --seeds N           seeds 0..N-1 per configuration (3)\n"
           "  --steps N           Adam steps (4000)\n"
           "  --batch N           sequences per step (256)\n"
           "  --lr X              learning rate (1e-3)\n"
           "  --items N           items per sequence (64)\n"
           "  --dim N             item and head dimension d (64)\n"
           "  --relevant N        relevant features (16)\n"
           "  --p-relevant X      probability that an item is relevant (0.15)\n"
           "  --beta X            gate sharpness (8)\n"
           "  --eval-seqs N       held-out sequences for the task error (4096)\n"
           "  --out DIR           where toy.md, toy.json, toy.csv and figures/ go (runs/toy)\n"
           "  --threads N         configurations trained at once (default: OpenMP's thread count)\n"
           "  --no-figures        tables only\n"
           "  --quiet             no progress lines\n");
}

static int num(const char *flag, const char *v, double lo, double hi, int integer, double *out, char *err,
               size_t errlen) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi || (integer && x != floor(x))) {
        snprintf(err, errlen, "%s: expected %s in [%g, %g], got '%s'", flag, integer ? "an integer" : "a number", lo,
                 hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The numeric flags: where each goes and its range (integer ones are
 * stored as int, the others as double). */
typedef struct {
    const char *flag;
    double lo, hi;
    int integer;
    size_t off;   /* into ToyOpts */
} NumFlag;

static const NumFlag num_flags[] = {
    {"--seeds", 1, TOY_MAX_SEEDS, 1, offsetof(ToyOpts, seeds)},
    {"--steps", 0, 1e7, 1, offsetof(ToyOpts, base.steps)},
    {"--batch", 1, 65536, 1, offsetof(ToyOpts, base.batch)},
    {"--lr", 1e-9, 10, 0, offsetof(ToyOpts, base.lr)},
    {"--items", 1, 65536, 1, offsetof(ToyOpts, base.T)},
    {"--dim", 1, 1024, 1, offsetof(ToyOpts, base.d)},
    {"--relevant", 1, 1024, 1, offsetof(ToyOpts, base.n_relevant)},
    {"--p-relevant", 0, 1, 0, offsetof(ToyOpts, base.p_relevant)},
    {"--beta", 1e-6, 1e6, 0, offsetof(ToyOpts, base.beta)},
    {"--eval-seqs", 1, 1e7, 1, offsetof(ToyOpts, base.eval_seqs)},
    {"--threads", 1, 4096, 1, offsetof(ToyOpts, threads)},
};

/* 0 set, -1 bad value (err), 1 not a numeric flag */
static int number_flag(ToyOpts *o, const char *flag, const char *v, char *err, size_t errlen) {
    for (size_t i = 0; i < sizeof num_flags / sizeof *num_flags; i++) {
        const NumFlag *f = &num_flags[i];
        if (strcmp(flag, f->flag)) continue;
        double x;
        if (num(flag, v, f->lo, f->hi, f->integer, &x, err, errlen)) return -1;
        if (f->integer) *(int *)((char *)o + f->off) = (int)x;
        else *(double *)((char *)o + f->off) = x;
        return 0;
    }
    return 1;
}

static int parse(ToyOpts *o, int argc, char **argv, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    toy_defaults(&o->base);
    const int dl[] = {1, 2, 4, 8};
    memcpy(o->loads, dl, sizeof dl);
    o->nloads = 4;
    o->arm_mask = (1 << TOY_ARMS) - 1;
    o->cond_mask = (1 << TOY_CONDS) - 1;
    o->seeds = 3;
    o->out = "runs/toy";
    o->figures = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-figures")) {
            o->figures = 0;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        char flag[64];
        const char *v;
        if (strncmp(a, "--", 2)) {
            snprintf(err, errlen, "unexpected argument '%s' (sgtrain toy --help lists the flags)", a);
            return -1;
        }
        if (cli_flag_value(argc, argv, &i, flag, sizeof flag, &v, err, errlen)) return -1;
        double x = 0;
        int rc = 0;
        if (!strcmp(flag, "--loads")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            o->nloads = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
                if (o->nloads == TOY_MAX_LOADS) {
                    snprintf(err, errlen, "--loads: at most %d loads", TOY_MAX_LOADS);
                    return -1;
                }
                rc = num(flag, t, 1, 64, 1, &x, err, errlen);
                for (int k = 0; k < o->nloads && !rc; k++)
                    if (o->loads[k] == (int)x) {
                        snprintf(err, errlen, "--loads: %s is listed twice", t);
                        rc = -1;
                    }
                if (!rc) o->loads[o->nloads++] = (int)x;
            }
            if (!rc && !o->nloads) {
                snprintf(err, errlen, "--loads: empty list");
                rc = -1;
            }
        } else if (!strcmp(flag, "--arms"))
            rc = cli_name_mask(flag, v, toy_arm_from_name, TOY_ARMS, "baseline, normgate, offbyone, renorm, oracle",
                       &o->arm_mask, err, errlen);
        else if (!strcmp(flag, "--conditions"))
            rc = cli_name_mask(flag, v, toy_cond_from_name, TOY_CONDS, "blind, visible", &o->cond_mask, err, errlen);
        else if (!strcmp(flag, "--out")) o->out = v;
        else if ((rc = number_flag(o, flag, v, err, errlen)) == 1) {
            snprintf(err, errlen, "unknown flag '%s' (sgtrain toy --help lists them)", a);
            return -1;
        }
        if (rc) return -1;
    }
    for (int k = 0; k < o->nloads; k++)
        if ((long)o->loads[k] * o->base.d <= o->base.n_relevant) {
            snprintf(err, errlen, "--loads %d: N = %d features cannot hold %d relevant ones and any irrelevant",
                     o->loads[k], o->loads[k] * o->base.d, o->base.n_relevant);
            return -1;
        }
    return 0;
}

typedef struct {
    ToyConfig c;
    int load_i, seed;
    ToyResult r;
    int ok;
    char err[256];
    double seconds;
} ToyJob;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { F_ERROR, F_RELEVANT, F_TOP };

static double field(const ToyResult *r, int f) {
    return f == F_RELEVANT ? r->relevant_mass : f == F_TOP ? r->top_weight : r->error;
}

/* mean and standard error over the seeds of one (arm, condition, load) */
static PlotValue cell_of(const ToyJob *jobs, int n, int f, int arm, int cond, int li) {
    double s = 0, s2 = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].ok && jobs[i].c.arm == arm && jobs[i].c.cond == cond && jobs[i].load_i == li) {
            const double x = field(&jobs[i].r, f);
            s += x, s2 += x * x, k++;
        }
    PlotValue v = {0, -1, k > 0};
    if (!k) return v;
    v.y = s / k;
    if (k > 1) v.se = sqrt(fmax(s2 / k - v.y * v.y, 0) * k / (k - 1) / k);
    return v;
}

static PlotValue cell(const ToyJob *jobs, int n, int arm, int cond, int li) {
    return cell_of(jobs, n, F_ERROR, arm, cond, li);
}

static int write_outputs(const ToyOpts *o, const ToyJob *jobs, int n, double secs, char *err, size_t errlen) {
    if (fs_mkdir_p(o->out, err, errlen)) return -1;
    char path[2048];
    /* toy.md: one table per condition, rows arms, columns loads */
    size_t cap = 1 << 16, len = 0;
    char *md = malloc(cap), *csv = malloc(cap);
    if (!md || !csv) abort();
    size_t clen = 0;
#define MD(...) len += (size_t)snprintf(md + len, len < cap ? cap - len : 0, __VA_ARGS__)
#define CSV(...) clen += (size_t)snprintf(csv + clen, clen < cap ? cap - clen : 0, __VA_ARGS__)
    MD("# The superposition task (Appendix E, Figure 3)\n\nTask error on %d held-out sequences: the share of "
       "(sequence, relevant feature) labels the readout gets wrong (docs/toy.md); mean ± SE over %d seeds. "
       "d = %d, %d items, %d relevant features, p = %.2f, %d steps of %d, lr %g. %.0f s.\n",
       o->base.eval_seqs, o->seeds, o->base.d, o->base.T, o->base.n_relevant, o->base.p_relevant, o->base.steps,
       o->base.batch, o->base.lr, secs);
    CSV("condition,arm,load,n,mean_error,se\n");
    json_object *root = json_object_new_object(), *runs = json_object_new_array();
    for (int cond = 0; cond < TOY_CONDS; cond++) {
        if (!(o->cond_mask >> cond & 1)) continue;
        MD("\n## %s\n\n| arm |", cond == TOY_BLIND ? "Channel-blind (keys are random tags)" : "Routing-visible (keys are the items)");
        for (int li = 0; li < o->nloads; li++) MD(" load %d |", o->loads[li]);
        MD("\n|---|");
        for (int li = 0; li < o->nloads; li++) MD("---|");
        MD("\n");
        for (int arm = 0; arm < TOY_ARMS; arm++) {
            if (!(o->arm_mask >> arm & 1)) continue;
            MD("| %s |", toy_arm_label(arm));
            for (int li = 0; li < o->nloads; li++) {
                PlotValue v = cell(jobs, n, arm, cond, li);
                if (!v.present) MD(" – |");
                else if (v.se < 0) MD(" %.4f |", v.y);
                else MD(" %.4f ± %.4f |", v.y, v.se);
                if (v.present) {
                    CSV("%s,%s,%d,%d,%.6g,", toy_cond_name(cond), toy_arm_name(arm), o->loads[li], o->seeds, v.y);
                    if (v.se >= 0) CSV("%.6g", v.se);
                    CSV("\n");
                }
            }
            MD("\n");
        }
    }
    /* where the heads look: attention on relevant items, and the largest weight */
    MD("\n## Where the head looks\n\nMean attention on relevant items (their share of the items is %.2f), and "
       "in brackets the largest single item's weight (uniform attention: %.3f), on the held-out sequences; mean "
       "over seeds.\n", o->base.p_relevant, 1.0 / o->base.T);
    for (int cond = 0; cond < TOY_CONDS; cond++) {
        if (!(o->cond_mask >> cond & 1)) continue;
        MD("\n| %s |", toy_cond_name(cond));
        for (int li = 0; li < o->nloads; li++) MD(" load %d |", o->loads[li]);
        MD("\n|---|");
        for (int li = 0; li < o->nloads; li++) MD("---|");
        MD("\n");
        for (int arm = 0; arm < TOY_ARMS; arm++) {
            if (!(o->arm_mask >> arm & 1)) continue;
            MD("| %s |", toy_arm_label(arm));
            for (int li = 0; li < o->nloads; li++) {
                PlotValue a = cell_of(jobs, n, F_RELEVANT, arm, cond, li), b = cell_of(jobs, n, F_TOP, arm, cond, li);
                if (a.present) MD(" %.2f (%.2f) |", a.y, b.y);
                else MD(" – |");
            }
            MD("\n");
        }
    }
    for (int i = 0; i < n; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "condition", json_object_new_string(toy_cond_name(jobs[i].c.cond)));
        json_object_object_add(e, "arm", json_object_new_string(toy_arm_name(jobs[i].c.arm)));
        json_object_object_add(e, "load", json_object_new_int(o->loads[jobs[i].load_i]));
        json_object_object_add(e, "n_features", json_object_new_int(jobs[i].c.n_features));
        json_object_object_add(e, "seed", json_object_new_int(jobs[i].seed));
        if (jobs[i].ok) {
            json_object_object_add(e, "error", json_object_new_double(jobs[i].r.error));
            json_object_object_add(e, "bce", json_object_new_double(jobs[i].r.bce));
            json_object_object_add(e, "train_bce", json_object_new_double(jobs[i].r.train_bce));
            json_object_object_add(e, "first_bce", json_object_new_double(jobs[i].r.first_bce));
            json_object_object_add(e, "relevant_mass", json_object_new_double(jobs[i].r.relevant_mass));
            json_object_object_add(e, "top_weight", json_object_new_double(jobs[i].r.top_weight));
        } else json_object_object_add(e, "failed", json_object_new_string(jobs[i].err));
        json_object_object_add(e, "seconds", json_object_new_double(jobs[i].seconds));
        json_object_array_add(runs, e);
    }
    json_object *setup = json_object_new_object();
    json_object_object_add(setup, "d", json_object_new_int(o->base.d));
    json_object_object_add(setup, "items", json_object_new_int(o->base.T));
    json_object_object_add(setup, "relevant", json_object_new_int(o->base.n_relevant));
    json_object_object_add(setup, "p_relevant", json_object_new_double(o->base.p_relevant));
    json_object_object_add(setup, "steps", json_object_new_int(o->base.steps));
    json_object_object_add(setup, "batch", json_object_new_int(o->base.batch));
    json_object_object_add(setup, "lr", json_object_new_double(o->base.lr));
    json_object_object_add(setup, "beta", json_object_new_double(o->base.beta));
    json_object_object_add(setup, "eval_seqs", json_object_new_int(o->base.eval_seqs));
    json_object_object_add(setup, "seeds", json_object_new_int(o->seeds));
    json_object_object_add(setup, "seconds", json_object_new_double(secs));
    json_object_object_add(root, "kind", json_object_new_string("toy"));
    json_object_object_add(root, "version", json_object_new_int(1));
    json_object_object_add(root, "setup", setup);
    json_object_object_add(root, "runs", runs);
    int rc = 0;
    snprintf(path, sizeof path, "%s/toy.json", o->out);
    const char *js = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (fs_write_atomic(path, js, strlen(js), err, errlen)) rc = -1;
    json_object_put(root);
    /* Figure 3: error against load, one line per arm, one figure per condition */
    if (!rc && o->figures) {
        char fdir[2048], cats[TOY_MAX_LOADS][16];
        const char *catp[TOY_MAX_LOADS];
        snprintf(fdir, sizeof fdir, "%s/figures", o->out);
        for (int li = 0; li < o->nloads; li++) snprintf(cats[li], sizeof cats[li], "%d", o->loads[li]), catp[li] = cats[li];
        for (int cond = 0; cond < TOY_CONDS && !rc; cond++) {
            if (!(o->cond_mask >> cond & 1)) continue;
            PlotValue vals[TOY_ARMS][TOY_MAX_LOADS];
            PlotSeries ser[TOY_ARMS];
            int ns = 0;
            for (int arm = 0; arm < TOY_ARMS; arm++) {
                if (!(o->arm_mask >> arm & 1)) continue;
                for (int li = 0; li < o->nloads; li++) vals[ns][li] = cell(jobs, n, arm, cond, li);
                ser[ns] = (PlotSeries){toy_arm_label(arm), vals[ns]};
                ns++;
            }
            char name[64], title[128], perr[1024];
            snprintf(name, sizeof name, "fig3-toy-%s", toy_cond_name(cond));
            snprintf(title, sizeof title, "Superposition task, %s", cond == TOY_BLIND ? "channel-blind routing" : "routing sees content");
            int prc = plot_categories_x(fdir, name, title, "load N/d", "task error", catp, o->nloads, ser, ns, perr,
                                        sizeof perr);
            if (prc < 0) {
                snprintf(err, errlen, "%s", perr);
                rc = -1;
            } else if (prc == 1) MD("\nFigure %s: not drawn (%s); %s/%s.dat and .gp are written.\n", name, perr, fdir, name);
            else MD("\n![%s](figures/%s.png)\n", title, name);
        }
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/toy.md", o->out);
        if (len >= cap || clen >= cap) {
            snprintf(err, errlen, "toy: table too large");
            rc = -1;
        } else if (fs_write_atomic(path, md, len, err, errlen)) rc = -1;
        snprintf(path, sizeof path, "%s/toy.csv", o->out);
        if (!rc && fs_write_atomic(path, csv, clen, err, errlen)) rc = -1;
    }
    if (!rc && !o->quiet) fwrite(md, 1, len, stdout);
    free(md);
    free(csv);
#undef MD
#undef CSV
    return rc;
}

int toy_main(int argc, char **argv) {
    ToyOpts o;
    char err[2048];
    if (parse(&o, argc, argv, err, sizeof err)) {
        fprintf(stderr, "sgtrain toy: %s\n", err);
        return 2;
    }
    /* the jobs, heaviest (largest dictionary) first for an even finish */
    int n = 0;
    ToyJob *jobs = calloc((size_t)o.nloads * TOY_ARMS * TOY_CONDS * o.seeds, sizeof *jobs);
    if (!jobs) abort();
    for (int li = o.nloads - 1; li >= 0; li--)
        for (int cond = 0; cond < TOY_CONDS; cond++)
            for (int arm = 0; arm < TOY_ARMS; arm++)
                for (int s = 0; s < o.seeds; s++) {
                    if (!(o.cond_mask >> cond & 1) || !(o.arm_mask >> arm & 1)) continue;
                    ToyJob *j = &jobs[n++];
                    j->c = o.base;
                    j->c.arm = arm, j->c.cond = cond, j->c.seed = (uint64_t)s;
                    j->c.n_features = o.loads[li] * o.base.d;
                    j->load_i = li, j->seed = s;
                }
    if (o.threads > 0) omp_set_num_threads(o.threads);
    omp_set_max_active_levels(1); /* one configuration per thread; the ops inside run serially */
    if (!o.quiet)
        fprintf(stderr, "toy: %d configurations (%d loads x %d arms x %d conditions x %d seeds), %d steps each, %d threads\n",
                n, o.nloads, __builtin_popcount((unsigned)o.arm_mask), __builtin_popcount((unsigned)o.cond_mask),
                o.seeds, o.base.steps, omp_get_max_threads());
    const double t0 = now();
    int done = 0, failed = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        const double t1 = now();
        jobs[i].ok = toy_run(&jobs[i].c, &jobs[i].r, jobs[i].err, sizeof jobs[i].err) == 0;
        jobs[i].seconds = now() - t1;
#pragma omp critical
        {
            done++;
            failed += !jobs[i].ok;
            if (!o.quiet) {
                if (jobs[i].ok)
                    fprintf(stderr, "  [%d/%d] %s %s load %d seed %d: error %.4f, bce %.4f (%.1f s)\n", done, n,
                            toy_cond_name(jobs[i].c.cond), toy_arm_name(jobs[i].c.arm), o.loads[jobs[i].load_i],
                            jobs[i].seed, jobs[i].r.error, jobs[i].r.bce, jobs[i].seconds);
                else
                    fprintf(stderr, "  [%d/%d] failed: %s\n", done, n, jobs[i].err);
            }
        }
    }
    int rc = 0;
    if (write_outputs(&o, jobs, n, now() - t0, err, sizeof err)) {
        fprintf(stderr, "sgtrain toy: %s\n", err);
        rc = 1;
    } else if (failed) {
        fprintf(stderr, "sgtrain toy: %d of %d configurations failed: %s\n", failed, n, jobs[0].ok ? "see toy.json" : jobs[0].err);
        rc = 1;
    } else if (!o.quiet)
        fprintf(stderr, "wrote %s/toy.md, toy.json, toy.csv%s\n", o.out, o.figures ? " and figures/" : "");
    free(jobs);
    return rc;
}
