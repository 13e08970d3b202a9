/* A report from a set of runs (report.h, docs/report.md): the grid filled
 * from the runs, every table and figure, the problems, and the files. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "fsutil.h"
#include "report_internal.h"
#include "report_tokens.h"

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

/* Runs whose settings (RunRec.setup: all but arm, seed, data and output)
 * differ from their group's first run's, grouped by what differs: a sweep's
 * runs differ in their arm and seed alone, and the tables pair them so. */
static void mixed_settings(const RunSet *rs, Buf *out, ReportSummary *sum) {
    char diff[1024], prev[1024];
    for (int g = 0; g < rs->n_groups; g++) {
        const RunRec *ref = NULL;
        for (size_t i = 0; i < rs->n; i++) {
            const RunRec *r = &rs->v[i];
            if (r->group == g && r->setup && r->status != RUN_CORRUPT && !ref) ref = r;
        }
        if (!ref) continue;
        /* each distinct difference once, with its runs (in scan order) */
        unsigned char *seen = calloc(rs->n, 1);
        if (!seen) return;
        for (size_t i = 0; i < rs->n; i++) {
            const RunRec *r = &rs->v[i];
            if (seen[i] || r->group != g || !r->setup || r->status == RUN_CORRUPT) continue;
            if (!config_diff_run(ref->setup, r->setup, diff, sizeof diff)) continue;
            int n = 0;
            bprintf(out, "- %s: %s (the first run, %s, has the former):", rs->groups[g], diff, ref->dir);
            for (size_t j = i; j < rs->n; j++) {
                const RunRec *q = &rs->v[j];
                if (seen[j] || q->group != g || !q->setup || q->status == RUN_CORRUPT) continue;
                config_diff_run(ref->setup, q->setup, prev, sizeof prev);
                if (strcmp(prev, diff)) continue;
                seen[j] = 1;
                if (n++ < 8) bprintf(out, " %s", q->dir);
            }
            if (n > 8) bprintf(out, " and %d more", n - 8);
            bprintf(out, "\n");
            sum->mixed_settings += n;
        }
        free(seen);
    }
}

int report_write(const RunSet *rs, const ReportOpts *o, const char *outdir, ReportSummary *sum, char *err,
                 size_t errlen) {
    memset(sum, 0, sizeof *sum);
    Grid gr;
    Buf md = {0}, problems = {0}, c1 = {0}, c2 = {0}, c5 = {0}, ctp = {0}, ca[AN_KINDS] = {{0}};
    Buf c10 = {0}, c11 = {0}, ctok = {0}, bad_runs = {0}, dups = {0}, missing = {0}, zsprob = {0}, mixed = {0};
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

    mixed_settings(rs, &mixed, sum);
    bprintf(&md, "## Problems\n\n");
    if (!bad_runs.n && !missing.n && !dups.n && !problems.n && !zsprob.n && !mixed.n)
        bprintf(&md, "None: every run finished and was read.\n");
    if (mixed.n)
        bprintf(&md, "### Runs of one tier trained with other settings\n\nTheir arms are paired as if only the arm "
                     "differed. Give a variant a sweep of its own (docs/sweeps.md, \"Model options\").\n\n%.*s\n",
                (int)mixed.n, mixed.p);
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
    json_object_object_add(jp, "settings", json_object_new_string(mixed.n ? mixed.p : ""));
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
    free(mixed.p);
    return rc;
}
