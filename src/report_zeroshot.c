/* Tables 10 and 11: the zero-shot evaluations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

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
int table10(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems) {
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
int table11(const Grid *gr, Buf *md, Buf *csv, json_object *js, Buf *problems) {
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
