/* Reports against the paper: the per-seed losses of its Table 5 become run
 * directories, and the report must give back its Tables 1 and 2 within one
 * unit of the last printed digit (the per-seed inputs are themselves
 * rounded to 4 decimals).  Then the edge cases: a single seed, unpaired
 * seeds, a missing baseline, a corrupt result.json, failed, unfinished and
 * duplicate runs; every way a zero-shot file can be malformed. */
#define _XOPEN_SOURCE 700
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pairstat.h"
#include "report.h"
#include "runs.h"
#include "testfs.h"

/* Table 5 of the paper; 0 = not trained. */
static const struct {
    const char *tier, *data, *arm;
    double s[5];
} T5[] = {
    {"10M", "tinystories", "baseline", {1.5881, 1.5870, 1.5869, 0, 0}},
    {"10M", "tinystories", "offbyone", {1.5852, 1.5826, 1.5835, 0, 0}},
    {"10M", "tinystories", "renorm", {1.5880, 1.5869, 1.5876, 0, 0}},
    {"10M", "tinystories", "normgate", {1.5862, 1.5840, 1.5871, 0, 0}},
    {"10M", "fineweb", "baseline", {4.2141, 4.2060, 4.2155, 0, 0}},
    {"10M", "fineweb", "offbyone", {4.1988, 4.1944, 4.1945, 0, 0}},
    {"10M", "fineweb", "sinktoken", {4.2037, 4.2061, 4.2184, 0, 0}},
    {"10M", "fineweb", "sinklogit", {4.1981, 4.1916, 4.1904, 0, 0}},
    {"10M", "fineweb", "renorm", {4.2137, 4.2103, 4.2166, 0, 0}},
    {"10M", "fineweb", "normgate", {4.2099, 4.2071, 4.2076, 0, 0}},
    {"10M", "fineweb", "projgate", {4.2070, 4.1890, 4.2057, 0, 0}},
    {"10M", "fineweb", "combo", {4.2014, 4.1906, 4.1905, 0, 0}},
    {"10M", "fineweb", "combo2", {4.1952, 4.1864, 4.1876, 0, 0}},
    {"50M", "fineweb", "baseline", {3.5417, 3.5399, 3.5381, 0, 0}},
    {"50M", "fineweb", "sinklogit", {3.5347, 3.5338, 3.5309, 3.5285, 3.5279}},
    {"50M", "fineweb", "normgate", {3.5359, 3.5337, 3.5295, 0, 0}},
    {"50M", "fineweb", "projgate", {3.5301, 3.5319, 3.5295, 0, 0}},
    {"50M", "fineweb", "combo", {3.5282, 3.5314, 3.5282, 3.5264, 3.5264}},
    {"50M", "fineweb", "combo2", {3.5249, 3.5287, 3.5261, 0, 0}},
    {"124M", "fineweb", "baseline", {3.3747, 3.3681, 3.3700, 0, 0}},
    {"124M", "fineweb", "sinklogit", {3.3646, 3.3663, 3.3664, 0, 0}},
    {"124M", "fineweb", "normgate", {3.3666, 3.3623, 3.3661, 0, 0}},
    {"124M", "fineweb", "projgate", {3.3658, 3.3571, 3.3627, 0, 0}},
    {"124M", "fineweb", "combo", {3.3618, 3.3615, 3.3633, 0, 0}},
    {"124M", "fineweb", "combo2", {3.3600, 3.3585, 3.3626, 0, 0}},
    {"350M", "fineweb", "baseline", {3.0338, 0, 0, 0, 0}},
    {"350M", "fineweb", "sinklogit", {3.0325, 0, 0, 0, 0}},
    {"350M", "fineweb", "combo", {3.0251, 0, 0, 0, 0}},
    {"350M", "fineweb", "combo2", {3.0210, 0, 0, 0, 0}},
};

static void mkd(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd)) fprintf(stderr, "mkdir -p %s failed\n", dir);
}

static void write_result(const char *root, const char *tier, const char *data, const char *arm, int seed,
                         double loss) {
    char dir[1024], path[1100], buf[1024];
    snprintf(dir, sizeof dir, "%s/%s-%s/%s/s%d", root, data, tier, arm, seed);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd)) return;
    snprintf(path, sizeof path, "%s/result.json", dir);
    int n = snprintf(buf, sizeof buf,
                     "{\n  \"tier\": \"%s\",\n  \"arm\": \"%s\",\n  \"seed\": %d,\n  \"steps\": 100,\n"
                     "  \"final_val_loss\": %.17g,\n  \"config\": {\"data\": \"data/%s\"}\n}\n",
                     tier, arm, seed, loss, data);
    write_bytes(path, buf, (size_t)n);
}

static void make_paper_sweep(const char *root) {
    for (size_t i = 0; i < sizeof T5 / sizeof *T5; i++)
        for (int s = 0; s < 5; s++)
            if (T5[i].s[s] > 0) write_result(root, T5[i].tier, T5[i].data, T5[i].arm, s, T5[i].s[s]);
}

static json_object *load_report(const char *dir) {
    char p[1100];
    snprintf(p, sizeof p, "%s/report.json", dir);
    return json_object_from_file(p);
}

static json_object *jget(json_object *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && o; k = strtok(NULL, ".")) {
        json_object *v = NULL;
        if (json_object_is_type(o, json_type_array)) v = json_object_array_get_idx(o, (size_t)atoi(k));
        else if (!json_object_object_get_ex(o, k, &v)) v = NULL;
        o = v;
    }
    return o;
}

/* A row of table1.vs_baseline / vs_reference by arm name. */
static json_object *t1_cell(json_object *rep, const char *block, const char *arm, const char *tier) {
    json_object *rows = jget(rep, block);
    for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        if (!strcmp(json_object_get_string(jget(r, "arm")), arm)) {
            json_object *c = NULL;
            json_object_object_get_ex(jget(r, "cells"), tier, &c);
            return c;
        }
    }
    return NULL;
}

/* Paper value to 4 decimals: within one unit of the last digit (plus the
 * rounding of our own value) */
#define NEAR(x, want) (fabs((x) - (want)) <= 1.0e-4 + 1e-9)

static void check_t1(json_object *rep, const char *block, const char *arm, const char *tier, double mean,
                     double se, int n) {
    json_object *c = t1_cell(rep, block, arm, tier);
    double m = c ? json_object_get_double(jget(c, "mean")) : NAN;
    json_object *jse = c ? jget(c, "se") : NULL;
    double s = jse ? json_object_get_double(jse) : -1;
    int cn = c ? json_object_get_int(jget(c, "n")) : 0;
    CHECK(c && NEAR(m, mean) && (se < 0 ? jse == NULL : NEAR(s, se)) && cn == n,
          "Table 1 %s %s %s: got %.5f ± %.5f (n=%d), paper %.4f ± %.4f (n=%d)", block, arm, tier, m, s, cn, mean,
          se, n);
}

static json_object *t2_row(json_object *rep, const char *form, const char *tier) {
    json_object *rows = jget(rep, "table2.rows");
    for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        if (!strcmp(json_object_get_string(jget(r, "form")), form) &&
            !strcmp(json_object_get_string(jget(r, "tier")), tier))
            return r;
    }
    return NULL;
}

static void check_t2(json_object *rep, const char *form, const char *tier, double sink, double gate, double both,
                     double overlap, double filter) {
    json_object *r = t2_row(rep, form, tier);
    double want[5] = {sink, gate, both, overlap, filter}, got[5];
    static const char *q[5] = {"sink", "gate", "both", "overlap", "filter"};
    int ok = r != NULL;
    for (int k = 0; k < 5 && r; k++) {
        json_object *v = jget(r, q[k]);
        if (k != 3 && v) v = jget(v, "mean");
        got[k] = v ? json_object_get_double(v) : NAN;
        if (isnan(want[k])) ok &= v == NULL;
        else ok &= v && NEAR(got[k], want[k]);
    }
    CHECK(ok, "Table 2 %s %s: got %.4f %.4f %.4f %.4f %.4f, paper %.4f %.4f %.4f %.4f %.4f", form, tier, got[0],
          got[1], got[2], got[3], got[4], sink, gate, both, overlap, filter);
}

static void test_pairstat(void) {
    double a[4] = {4.1981, 4.1916, 4.1904, 9}, b[4] = {4.2141, 4.2060, 4.2155, 1};
    unsigned char ha[4] = {1, 1, 1, 1}, hb[4] = {1, 1, 1, 0};
    Paired p = paired_diff(a, ha, b, hb, 4);
    /* d = -0.0160, -0.0144, -0.0251: mean -0.018500, sd 0.0057714, se 0.0033321 */
    CHECK(p.n == 3 && p.improved == 3 && fabs(p.mean + 0.0185) < 1e-12 && fabs(p.se - 0.00333217) < 1e-7,
          "paired: n %d improved %d mean %.8f se %.8f", p.n, p.improved, p.mean, p.se);
    hb[1] = hb[2] = 0;
    p = paired_diff(a, ha, b, hb, 4);
    CHECK(p.n == 1 && p.se < 0 && fabs(p.mean + 0.016) < 1e-12, "one pair: no SE");
    memset(hb, 0, sizeof hb);
    p = paired_diff(a, ha, b, hb, 4);
    CHECK(p.n == 0, "no pair");
    Paired m = plain_mean(b, ha, 3);
    CHECK(fabs(m.mean - 4.2118667) < 1e-6, "plain mean %.7f", m.mean);
}

static void test_paper(void) {
    char root[600], out[700];
    snprintf(root, sizeof root, "%s/paper", tmpdir);
    snprintf(out, sizeof out, "%s/report", tmpdir);
    make_paper_sweep(root);
    char *roots[] = {root};
    RunSet rs;
    CHECK(runs_scan(roots, 1, &rs, err, sizeof err) == 0, "scan: %s", err);
    CHECK(rs.n == 83, "83 runs of Table 5 found: %zu", rs.n);
    CHECK(rs.n_groups == 5 && !strcmp(rs.groups[0], "fineweb 10M") && !strcmp(rs.groups[1], "tinystories 10M") &&
              !strcmp(rs.groups[2], "50M") && !strcmp(rs.groups[4], "350M"),
          "tiers in order, 10M split by corpus: %s, %s, %s", rs.n_groups > 0 ? rs.groups[0] : "",
          rs.n_groups > 1 ? rs.groups[1] : "", rs.n_groups > 2 ? rs.groups[2] : "");
    ReportOpts o = {NULL, NULL, 0, 0};
    ReportSummary sum;
    CHECK(report_write(&rs, &o, out, &sum, err, sizeof err) == 0, "report: %s", err);
    CHECK(sum.done == 83 && sum.missing == 8, "83 done; missing: baseline, normgate, projgate, combo2 of 50M lack seeds 3 and 4 -> %d", sum.missing);
    json_object *rep = load_report(out);
    CHECK(rep != NULL, "report.json parses");
    if (!rep) {
        runs_free(&rs);
        return;
    }
    json_object *bl = jget(rep, "table1.baseline_loss");
    static const struct {
        const char *t;
        double v;
    } bls[] = {{"fineweb 10M", 4.2119}, {"50M", 3.5399}, {"124M", 3.3710}, {"350M", 3.0338}};
    for (int i = 0; i < 4; i++) {
        json_object *c = NULL;
        json_object_object_get_ex(bl, bls[i].t, &c);
        double m = c ? json_object_get_double(jget(c, "mean")) : NAN;
        CHECK(c && NEAR(m, bls[i].v), "baseline loss %s: %.5f, paper %.4f", bls[i].t, m, bls[i].v);
    }
    /* Table 1, improvement over baseline */
    const char *VB = "table1.vs_baseline", *VR = "table1.vs_reference";
    check_t1(rep, VB, "offbyone", "fineweb 10M", -0.0160, 0.0027, 3);
    check_t1(rep, VB, "sinktoken", "fineweb 10M", -0.0025, 0.0041, 3);
    check_t1(rep, VB, "sinklogit", "fineweb 10M", -0.0185, 0.0033, 3);
    check_t1(rep, VB, "sinklogit", "50M", -0.0068, 0.0003, 3);
    check_t1(rep, VB, "sinklogit", "124M", -0.0052, 0.0025, 3);
    check_t1(rep, VB, "sinklogit", "350M", -0.0013, -1, 1);
    check_t1(rep, VB, "renorm", "fineweb 10M", +0.0017, 0.0014, 3);
    check_t1(rep, VB, "normgate", "fineweb 10M", -0.0037, 0.0026, 3);
    check_t1(rep, VB, "normgate", "50M", -0.0069, 0.0008, 3);
    check_t1(rep, VB, "normgate", "124M", -0.0059, 0.0012, 3);
    check_t1(rep, VB, "projgate", "fineweb 10M", -0.0113, 0.0029, 3);
    check_t1(rep, VB, "projgate", "50M", -0.0094, 0.0011, 3);
    check_t1(rep, VB, "projgate", "124M", -0.0091, 0.0011, 3);
    check_t1(rep, VB, "combo", "fineweb 10M", -0.0177, 0.0037, 3);
    check_t1(rep, VB, "combo", "50M", -0.0106, 0.0015, 3);
    check_t1(rep, VB, "combo", "124M", -0.0087, 0.0021, 3);
    check_t1(rep, VB, "combo", "350M", -0.0087, -1, 1);
    check_t1(rep, VB, "combo2", "fineweb 10M", -0.0221, 0.0029, 3);
    check_t1(rep, VB, "combo2", "50M", -0.0133, 0.0018, 3);
    check_t1(rep, VB, "combo2", "124M", -0.0106, 0.0022, 3);
    check_t1(rep, VB, "combo2", "350M", -0.0128, -1, 1);
    /* Table 1, improvement over the sink logit (50M combo: 5 paired seeds) */
    check_t1(rep, VR, "normgate", "fineweb 10M", +0.0148, 0.0016, 3);
    check_t1(rep, VR, "normgate", "50M", -0.0001, 0.0007, 3);
    check_t1(rep, VR, "normgate", "124M", -0.0008, 0.0018, 3);
    check_t1(rep, VR, "projgate", "fineweb 10M", +0.0072, 0.0053, 3);
    check_t1(rep, VR, "projgate", "50M", -0.0026, 0.0010, 3);
    check_t1(rep, VR, "projgate", "124M", -0.0039, 0.0030, 3);
    check_t1(rep, VR, "combo", "fineweb 10M", +0.0008, 0.0013, 3);
    check_t1(rep, VR, "combo", "50M", -0.0030, 0.0009, 5);
    check_t1(rep, VR, "combo", "124M", -0.0036, 0.0006, 3);
    check_t1(rep, VR, "combo", "350M", -0.0074, -1, 1);
    check_t1(rep, VR, "combo2", "fineweb 10M", -0.0036, 0.0008, 3);
    check_t1(rep, VR, "combo2", "50M", -0.0065, 0.0016, 3);
    check_t1(rep, VR, "combo2", "124M", -0.0054, 0.0012, 3);
    check_t1(rep, VR, "combo2", "350M", -0.0114, -1, 1);
    CHECK(t1_cell(rep, VB, "offbyone", "50M") == NULL, "an arm absent at a tier has no cell (a dash)");
    json_object *c = t1_cell(rep, VR, "combo2", "50M");
    CHECK(c && json_object_get_int(jget(c, "improved")) == 3, "combo2 improves on the sink logit in 3 of 3 seeds at 50M");
    /* Table 2 */
    check_t2(rep, "norm", "fineweb 10M", 0.0185, 0.0037, 0.0177, 0.0045, -0.0008);
    check_t2(rep, "norm", "50M", 0.0068, 0.0069, 0.0106, 0.0030, 0.0030);
    check_t2(rep, "norm", "124M", 0.0052, 0.0059, 0.0087, 0.0024, 0.0036);
    check_t2(rep, "norm", "350M", 0.0013, NAN, 0.0087, NAN, 0.0074);
    check_t2(rep, "projection", "fineweb 10M", 0.0185, 0.0113, 0.0221, 0.0076, 0.0036);
    check_t2(rep, "projection", "50M", 0.0068, 0.0094, 0.0133, 0.0029, 0.0065);
    check_t2(rep, "projection", "124M", 0.0052, 0.0091, 0.0106, 0.0037, 0.0054);
    check_t2(rep, "projection", "350M", 0.0013, NAN, 0.0128, NAN, 0.0114);
    /* Table 5: means */
    json_object *rows = jget(rep, "table5.rows");
    int found = 0;
    for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
        json_object *r = json_object_array_get_idx(rows, i);
        if (!strcmp(json_object_get_string(jget(r, "tier")), "50M") &&
            !strcmp(json_object_get_string(jget(r, "arm")), "sinklogit")) {
            found = NEAR(json_object_get_double(jget(r, "mean")), 3.5311) && json_object_get_int(jget(r, "n")) == 5;
        }
    }
    CHECK(found, "Table 5: 50M sink logit mean 3.5311 over 5 seeds");
    CHECK(rows && json_object_array_length(rows) == 29, "Table 5 has the paper's 29 rows: %zu",
          rows ? json_object_array_length(rows) : 0);
    /* The Markdown shows the same */
    size_t n;
    char p[800];
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md = (char *)read_all(p, &n);
    CHECK(md && has(md, "| sink logit | -0.0185 ± 0.0033 (3/3) | – | -0.0068 ± 0.0003 (3/3) | -0.0052 ± 0.0025 (3/3) | -0.0013 (1 seed) |"),
          "Markdown row of the sink logit in Table 1");
    CHECK(md && has(md, "- 50M baseline: no run for seed 3, 4 (trained for other arms of 50M)"),
          "missing seeds are listed");
    free(md);
    json_object_put(rep);
    runs_free(&rs);
}

static void test_edges(void) {
    char root[600], out[700];
    snprintf(root, sizeof root, "%s/edge", tmpdir);
    snprintf(out, sizeof out, "%s/edge-report", tmpdir);
    /* 10M: no baseline at all; sinklogit and combo2 with seeds {0,1} and {1,2} */
    write_result(root, "10M", "fw", "sinklogit", 0, 4.20);
    write_result(root, "10M", "fw", "sinklogit", 1, 4.19);
    write_result(root, "10M", "fw", "combo2", 1, 4.18);
    write_result(root, "10M", "fw", "combo2", 2, 4.17);
    /* 50M: one seed each; a corrupt result.json; a failed and an unfinished run; a duplicate */
    write_result(root, "50M", "fw", "baseline", 0, 3.54);
    write_result(root, "50M", "fw", "sinklogit", 0, 3.53);
    char d[800], pth[900];
    snprintf(d, sizeof d, "%s/fw-50M/combo2/s0", root);
    mkd(d);
    snprintf(pth, sizeof pth, "%s/result.json", d);
    write_bytes(pth, "{\"tier\": \"50M\", \"arm\": \"combo2\", \"seed\": 0, \"final_val_lo", 58);
    snprintf(d, sizeof d, "%s/fw-50M/combo/s0", root);
    mkd(d);
    snprintf(pth, sizeof pth, "%s/config.yaml", d);
    write_bytes(pth, "tier: 50M\narm: combo\nseed: 0\ndata: data/fw\n", 42);
    snprintf(pth, sizeof pth, "%s/failed.json", d);
    write_bytes(pth, "{\"status\": \"failed\", \"step\": 17, \"reason\": \"the training loss is NaN\"}\n", 71);
    snprintf(d, sizeof d, "%s/fw-50M/normgate/s0", root);
    mkd(d);
    snprintf(pth, sizeof pth, "%s/config.yaml", d);
    write_bytes(pth, "tier: 50M\narm: normgate\nseed: 0\ndata: data/fw\n", 45);
    snprintf(pth, sizeof pth, "%s/metrics.jsonl", d);
    write_bytes(pth, "{\"step\":1,\"loss\":9}\n{\"step\":2,\"loss\":8}\n", 40);
    write_result(root, "50M", "fw", "sinklogit-again", 0, 3.0);
    char dup[800];
    snprintf(dup, sizeof dup, "%s/zdup", root); /* sorts after fw-50M: the first found is used */
    write_result(dup, "50M", "fw", "baseline", 0, 3.99);
    char *roots[] = {root};
    RunSet rs;
    CHECK(runs_scan(roots, 1, &rs, err, sizeof err) == 0, "scan: %s", err);
    ReportOpts o = {NULL, NULL, 0, 0};
    ReportSummary sum;
    CHECK(report_write(&rs, &o, out, &sum, err, sizeof err) == 0, "report despite problems: %s", err);
    CHECK(sum.corrupt == 2 && sum.failed == 1 && sum.unfinished == 1 && sum.duplicates == 1,
          "corrupt %d (truncated JSON, unknown arm), failed %d, unfinished %d, duplicates %d", sum.corrupt,
          sum.failed, sum.unfinished, sum.duplicates);
    json_object *rep = load_report(out);
    json_object *c = rep ? t1_cell(rep, "table1.vs_reference", "combo2", "10M") : NULL;
    CHECK(c && json_object_get_int(jget(c, "n")) == 1 && NEAR(json_object_get_double(jget(c, "mean")), -0.01) &&
              jget(c, "se") == NULL,
          "unpaired seeds: only seed 1 pairs, marked as one seed");
    CHECK(rep && t1_cell(rep, "table1.vs_baseline", "combo2", "10M") == NULL, "no baseline at 10M: no cell");
    c = rep ? t1_cell(rep, "table1.vs_baseline", "sinklogit", "50M") : NULL;
    CHECK(c && json_object_get_int(jget(c, "n")) == 1 && NEAR(json_object_get_double(jget(c, "mean")), -0.01),
          "one seed at 50M; the duplicate baseline (3.99) is not used");
    size_t n;
    char p[800];
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md = (char *)read_all(p, &n);
    CHECK(md && has(md, "combo2/s0/result.json: not readable JSON"), "the corrupt result.json is named");
    CHECK(md && has(md, "unknown arm \"sinklogit-again\""), "an unknown arm is named");
    CHECK(md && has(md, "50M combo seed 0: failed at step 17: the training loss is NaN"), "the failed run is named");
    CHECK(md && has(md, "50M normgate seed 0: running or killed, no checkpoint, at step 2"), "the unfinished run is named");
    CHECK(md && has(md, "### Duplicate runs") && has(md, "zdup/fw-50M/baseline/s0"), "the duplicate is named");
    CHECK(md && has(md, "| 50M | baseline | 3.5400 |") && has(md, "failed at 17"), "Table 5 shows states");
    free(md);
    snprintf(p, sizeof p, "%s/tables/throughput.csv", out);
    CHECK(rep && jget(rep, "throughput") == NULL && access(p, F_OK) != 0,
          "runs without a throughput (an earlier version's): no throughput table");
    snprintf(p, sizeof p, "%s/tables/zeroshot.csv", out);
    CHECK(rep && !jget(rep, "zeroshot") && !jget(rep, "lambada_distance") && access(p, F_OK) != 0,
          "runs without zero-shot files: no Tables 10 and 11");
    json_object_put(rep);
    runs_free(&rs);
    /* a root that does not exist; a root with no runs */
    char *bad[] = {(char *)P("nope")};
    CHECK(runs_scan(bad, 1, &rs, err, sizeof err) == -1 && has(err, "nope"), "a missing root is named: %s", err);
    mkdir(P("empty"), 0777);
    char *empty[] = {(char *)P("empty")};
    CHECK(runs_scan(empty, 1, &rs, err, sizeof err) == 0 && rs.n == 0, "an empty root: no runs");
    runs_free(&rs);
    ReportOpts bo = {"nosucharm", NULL, 0, 0};
    CHECK(runs_scan(roots, 1, &rs, err, sizeof err) == 0 && report_write(&rs, &bo, out, &sum, err, sizeof err) == -1 &&
              has(err, "unknown arm"),
          "--baseline with an unknown arm: %s", err);
    runs_free(&rs);
}

/* A result.json with the throughput sgtrain writes (mfu < 0: null). */
static void write_timed(const char *root, const char *tier, const char *arm, int seed, double tok_s, double mfu,
                        const char *backend, int ranks, double wall_s) {
    char dir[1024], path[1100], buf[1024], mf[32] = "null";
    snprintf(dir, sizeof dir, "%s/fw-%s/%s/s%d", root, tier, arm, seed);
    mkd(dir);
    snprintf(path, sizeof path, "%s/result.json", dir);
    if (mfu >= 0) snprintf(mf, sizeof mf, "%.17g", mfu);
    int n = snprintf(buf, sizeof buf,
                     "{\n  \"tier\": \"%s\",\n  \"arm\": \"%s\",\n  \"seed\": %d,\n  \"steps\": 100,\n"
                     "  \"final_val_loss\": 3.5,\n  \"wall_s\": %.3f,\n  \"tokens_per_s\": 1.0,\n  \"ranks\": %d,\n"
                     "  \"throughput\": {\"steady_tokens_per_s\": %.17g, \"steady_steps\": 99, \"flop_per_token\": 1e9, "
                     "\"peak_tflops_per_rank\": null, \"peak_source\": null, \"mfu\": %s},\n"
                     "  \"backend\": \"%s\",\n  \"config\": {\"data\": \"data/fw\"}\n}\n",
                     tier, arm, seed, wall_s, ranks, tok_s, mf, backend);
    write_bytes(path, buf, (size_t)n);
}

/* The throughput table: each arm's tokens/s over the baseline's of the same
 * seed, paired only on the same backend and ranks; hand-computed. */
static void test_throughput(void) {
    char root[600], out[700];
    snprintf(root, sizeof root, "%s/tp", tmpdir);
    snprintf(out, sizeof out, "%s/tp-report", tmpdir);
    const char *h200 = "cuda (NVIDIA H200, sm_90)";
    write_timed(root, "124M", "baseline", 0, 1000, 0.20, h200, 1, 600);
    write_timed(root, "124M", "baseline", 1, 1100, 0.22, h200, 1, 660);
    write_timed(root, "124M", "baseline", 2, 1200, -1, "cpu", 1, 720);
    write_timed(root, "124M", "combo2", 0, 950, 0.19, h200, 1, 630);   /* 0.95 */
    write_timed(root, "124M", "combo2", 1, 1078, 0.21, h200, 1, 690);  /* 0.98 */
    write_timed(root, "124M", "combo2", 2, 1300, 0.25, h200, 1, 7200); /* the baseline's seed 2 ran on the CPU */
    write_timed(root, "124M", "sinklogit", 0, 990, -1, h200, 2, 500);  /* 2 ranks against 1 */
    write_result(root, "124M", "fw", "sinklogit", 1, 3.5);       /* no throughput: an earlier version's */
    write_result(root, "10M", "fw", "baseline", 0, 4.2);
    char *roots[] = {root};
    RunSet rs;
    CHECK(runs_scan(roots, 1, &rs, err, sizeof err) == 0, "scan: %s", err);
    ReportOpts o = {NULL, NULL, 0, 0};
    ReportSummary sum;
    CHECK(report_write(&rs, &o, out, &sum, err, sizeof err) == 0, "report: %s", err);
    json_object *rep = load_report(out);
    json_object *w = rep ? jget(rep, "throughput.where") : NULL, *v = NULL;
    CHECK(w && json_object_object_get_ex(w, "124M", &v) && !strcmp(json_object_get_string(v), "3 setups"),
          "124M ran on 3 setups: %s", v ? json_object_get_string(v) : "(none)");
    CHECK(w && json_object_object_get_ex(w, "10M", &v) && v == NULL, "10M: no timed run");
    json_object *b = rep ? t1_cell(rep, "throughput.rows", "baseline", "124M") : NULL;
    CHECK(b && json_object_get_int(jget(b, "runs")) == 3 &&
              json_object_get_double(jget(b, "median_tokens_per_s")) == 1100 &&
              fabs(json_object_get_double(jget(b, "median_mfu")) - 0.21) < 1e-12 &&
              jget(b, "ratio_to_baseline") == NULL,
          "baseline: median 1100 tok/s of 3, MFU 0.21 of 2");
    json_object *c = rep ? t1_cell(rep, "throughput.rows", "combo2", "124M") : NULL;
    json_object *r = c ? jget(c, "ratio_to_baseline") : NULL;
    CHECK(c && json_object_get_double(jget(c, "median_tokens_per_s")) == 1078 && r &&
              json_object_get_int(jget(r, "n")) == 2 && fabs(json_object_get_double(jget(r, "mean")) - 0.965) < 1e-12 &&
              fabs(json_object_get_double(jget(r, "se")) - 0.015) < 1e-12,
          "combo2: seeds 0 and 1 pair (0.95, 0.98): 0.965 ± 0.015; seed 2 does not (the CPU)");
    c = rep ? t1_cell(rep, "throughput.rows", "sinklogit", "124M") : NULL;
    CHECK(c && json_object_get_int(jget(c, "runs")) == 1 && jget(c, "ratio_to_baseline") == NULL,
          "sinklogit: one timed run, on 2 ranks: no pair");
    CHECK(rep && t1_cell(rep, "throughput.rows", "baseline", "10M") == NULL, "10M: no cell");
    /* the 124M runs' wall times: 500 600 630 660 690 720 7200 s, median 660;
     * device-hours (600 + 660 + 720 + 630 + 690 + 7200 + 2 x 500) / 3600 */
    json_object *t = rep ? jget(rep, "throughput.median_run_s") : NULL;
    CHECK(t && json_object_object_get_ex(t, "124M", &v) && json_object_get_double(v) == 660, "median run time 660 s");
    t = rep ? jget(rep, "throughput.device_hours") : NULL;
    CHECK(t && json_object_object_get_ex(t, "124M", &v) && fabs(json_object_get_double(v) - 11500.0 / 3600) < 1e-12 &&
              json_object_object_get_ex(t, "10M", &v) && v == NULL,
          "device-hours 11,500 s / 3,600 at 124M; none at 10M (no wall time)");
    size_t n;
    char p[800];
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md = (char *)read_all(p, &n);
    CHECK(md && has(md, "## Training throughput") && has(md, "| baseline | – | 1100 tok/s, MFU 21.0% (3 seeds) |") &&
              has(md, "| combo2 | – | 0.965 ± 0.015 (2) |") && has(md, "| sink logit | – | 990 tok/s, unpaired |") &&
              has(md, "| *where* | – | 3 setups |") && has(md, "| *run time* | – | 11 min |") &&
              has(md, "| *device-hours* | – | 3.19 (7 runs) |"),
          "report.md's throughput rows: %s", md ? strstr(md, "## Training throughput") : "(none)");
    free(md);
    snprintf(p, sizeof p, "%s/tables/throughput.csv", out);
    char *csv = (char *)read_all(p, &n);
    CHECK(csv &&
              has(csv, "tier,arm,runs,median_tokens_per_s,median_mfu,pairs,ratio_mean,ratio_se,where,median_run_s,"
                       "device_hours\n") &&
              has(csv, "124M,combo2,3,1078,0.20999999999999999,2,0.96499999999999997,0.015000000000000012,3 setups,"
                       "690,2.3666666666666667\n"),
          "throughput.csv: %s", csv ? csv : "(none)");
    free(csv);
    json_object_put(rep);
    runs_free(&rs);
}

/* RUN/analysis/NAME.json of the run at root/fw-124M/ARM/sSEED */
static void write_zs(const char *root, const char *arm, int seed, const char *name, const char *text) {
    char d[900], p[1000];
    snprintf(d, sizeof d, "%s/fw-124M/%s/s%d/analysis", root, arm, seed);
    mkd(d);
    snprintf(p, sizeof p, "%s/%s.json", d, name);
    write_bytes(p, text, strlen(text));
}

#define BUCKETS(a, b, c, d) "\"by_distance\": [" a ", " b ", " c ", " d "]"
#define B_ABSENT "{\"bucket\": \"absent\", \"n\": 953, \"accuracy\": 0.03}"
#define B_NEAR "{\"bucket\": \"<=32\", \"n\": 1508, \"accuracy\": 0.26}"
#define B_MID "{\"bucket\": \"33-96\", \"n\": 2660, \"accuracy\": 0.2}"
#define B_FAR "{\"bucket\": \">96\", \"n\": 0, \"accuracy\": null}"
#define LAMBADA_RAW(fields) "{\"kind\": \"lambada\", \"version\": 1, " fields "}"
#define LAMBADA(fields) LAMBADA_RAW("\"examples\": 5153, " fields)
#define LAMBADA_OK(bk) LAMBADA("\"accuracy\": 0.18, \"perplexity\": 40, " bk)

/* Every way a zero-shot file can be malformed is named, counted as an
 * analysis error, and leaves the well-formed files' tables intact. */
static void test_zeroshot(void) {
    char root[600], out[700];
    snprintf(root, sizeof root, "%s/zs", tmpdir);
    snprintf(out, sizeof out, "%s/zs-report", tmpdir);
    static const struct {
        const char *file, *text, *why;
    } bad[] = {
        {"lambada", "{\"kind\": \"lambada\", \"accuracy\": 0.1", "lambada.json: not readable JSON"},
        {"lambada", "[1, 2]", "lambada.json: not a zero-shot file of this kind"},
        {"lambada", "{\"kind\": null}", "lambada.json: not a zero-shot file of this kind"},
        {"lambada", "{\"kind\": \"hellaswag\", \"accuracy\": 0.3, \"accuracy_norm\": 0.3}",
         "lambada.json: not a zero-shot file of this kind"},
        {"lambada", LAMBADA("\"perplexity\": 40, " BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"accuracy\" is missing or not a number in [0, 1]"},
        {"lambada", LAMBADA("\"accuracy\": \"0.18\", \"perplexity\": 40, " BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"accuracy\" is missing or not a number in [0, 1]"},
        {"lambada", LAMBADA("\"accuracy\": 18, \"perplexity\": 40, " BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"accuracy\" is missing or not a number in [0, 1]"},
        {"lambada", LAMBADA("\"accuracy\": 0.18, \"perplexity\": 0, " BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"perplexity\" is missing or not a number above 0"},
        {"lambada", LAMBADA_OK("\"by_distance\": {\"absent\": 953}"),
         "lambada.json: \"by_distance\" is not a list of the 4 buckets"},
        {"lambada", LAMBADA_OK("\"by_distance\": [" B_ABSENT ", " B_NEAR ", " B_MID ", " B_FAR ", " B_FAR "]"),
         "lambada.json: \"by_distance\" is not a list of the 4 buckets"},
        {"lambada", LAMBADA_OK(BUCKETS(B_ABSENT, B_NEAR, B_MID, B_NEAR)),
         "lambada.json: by_distance[3]: \"bucket\" is not one of absent, <=32, 33-96, >96 (each once)"},
        {"lambada", LAMBADA_OK(BUCKETS(B_ABSENT, "{\"bucket\": \"<=16\", \"n\": 1, \"accuracy\": 0}", B_MID, B_FAR)),
         "lambada.json: by_distance[1]: \"bucket\" is not one of"},
        {"lambada", LAMBADA_OK(BUCKETS("7", B_NEAR, B_MID, B_FAR)), "lambada.json: by_distance[0]: \"bucket\""},
        {"lambada", LAMBADA_OK(BUCKETS("{\"bucket\": \"absent\", \"n\": -1, \"accuracy\": 0}", B_NEAR, B_MID, B_FAR)),
         "lambada.json: by_distance[0] (absent): \"n\" is not a count"},
        {"lambada", LAMBADA_OK(BUCKETS(B_ABSENT, B_NEAR, B_FAR, "{\"bucket\": \"33-96\", \"n\": 2.5, \"accuracy\": 0}")),
         "lambada.json: by_distance[3] (33-96): \"n\" is not a count"},
        {"lambada", LAMBADA_OK(BUCKETS(B_ABSENT, B_NEAR, "{\"bucket\": \"33-96\", \"n\": 2660, \"accuracy\": null}", B_FAR)),
         "lambada.json: by_distance[2] (33-96): \"accuracy\" is missing or not a number in [0, 1]"},
        {"lambada", LAMBADA_RAW("\"accuracy\": 0.18, \"perplexity\": 40, " BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"examples\" is missing or not a positive count"},
        {"lambada", LAMBADA_RAW("\"examples\": 0, \"accuracy\": 0.18, \"perplexity\": 40, "
                                BUCKETS(B_ABSENT, B_NEAR, B_MID, B_FAR)),
         "lambada.json: \"examples\" is missing or not a positive count"},
        {"wikitext", "{\"kind\": \"wikitext\", \"token_perplexity\": 58, \"word_perplexity\": 90, "
                     "\"bits_per_byte\": 1.1, \"tokens\": 2.5}",
         "wikitext.json: \"tokens\" is missing or not a positive count"},
        {"hellaswag", "{\"kind\": \"hellaswag\", \"accuracy\": 0.32}",
         "hellaswag.json: \"accuracy_norm\" is missing or not a number in [0, 1]"},
        {"wikitext", "{\"kind\": \"wikitext\", \"token_perplexity\": 58, \"word_perplexity\": null}",
         "wikitext.json: \"word_perplexity\" is missing or not a number above 0"},
    };
    const int nbad = (int)(sizeof bad / sizeof *bad);
    for (int i = 0; i < nbad; i++) {
        write_result(root, "124M", "fw", "combo", i, 3.36);
        write_zs(root, "combo", i, bad[i].file, bad[i].text);
    }
    /* well formed, in another bucket order, with keys the report ignores */
    write_result(root, "124M", "fw", "baseline", 0, 3.37);
    write_result(root, "124M", "fw", "baseline", 1, 3.37);
    write_zs(root, "baseline", 0, "lambada",
             LAMBADA("\"accuracy\": 0.18, \"perplexity\": 40, \"extra\": [1], \"results\": [{\"line\": 1}], "
                     BUCKETS(B_FAR, B_MID, B_NEAR, B_ABSENT)));
    write_zs(root, "baseline", 1, "lambada",
             LAMBADA("\"accuracy\": 0.19, \"perplexity\": 42, "
                     BUCKETS(B_ABSENT, "{\"bucket\": \"<=32\", \"n\": 1508, \"accuracy\": 0.28}", B_MID, B_FAR)));
    char *roots[] = {root};
    RunSet rs;
    CHECK(runs_scan(roots, 1, &rs, err, sizeof err) == 0, "scan: %s", err);
    ReportOpts o = {NULL, NULL, 0, 0};
    ReportSummary sum;
    CHECK(report_write(&rs, &o, out, &sum, err, sizeof err) == 0, "report despite malformed zero-shot files: %s", err);
    CHECK(sum.analysis_errors == nbad, "every malformed file counts as an analysis error: %d of %d",
          sum.analysis_errors, nbad);
    size_t n;
    char p[800];
    snprintf(p, sizeof p, "%s/report.md", out);
    char *md = (char *)read_all(p, &n);
    for (int i = 0; i < nbad; i++) {
        char want[300];
        snprintf(want, sizeof want, "fw-124M/combo/s%d/analysis/%s", i, bad[i].why);
        CHECK(md && has(md, want), "named in Problems: %s", want);
    }
    CHECK(md && !has(md, "| 124M | combo |"), "no row from malformed files");
    CHECK(md && has(md, "| 124M | baseline | 0.1850 ± 0.0071 (2 seeds) | 41.00 ± 1.41 (2 seeds) | – | – | – | – |"),
          "Table 10 from the two well-formed files");
    CHECK(md && has(md, "| 124M | baseline | 0.0300 ± 0.0000 (2 seeds) | 0.2700 ± 0.0141 (2 seeds) | 0.2000 ± 0.0000 "
                        "(2 seeds) | – |") && has(md, "distance > 96 (n=0) |"),
          "Table 11 matches buckets by name; an empty bucket is a dash");
    free(md);
    json_object *rep = load_report(out);
    json_object *c = jget(rep, "lambada_distance.rows.0.cells.<=32");
    CHECK(c && json_object_get_int(jget(c, "n")) == 2 && fabs(json_object_get_double(jget(c, "mean")) - 0.27) < 1e-12 &&
              fabs(json_object_get_double(jget(c, "sd")) - sqrt(2e-4)) < 1e-12 &&
              json_object_get_int(jget(c, "examples")) == 1508,
          "lambada_distance: mean, SD (n - 1) and the bucket's n");
    CHECK(rep && jget(rep, "lambada_distance.rows.0.cells.>96") == NULL &&
              json_object_get_int(jget(rep, "lambada_distance.buckets.3.n")) == 0,
          "an empty bucket: no cell, n = 0");
    c = jget(rep, "zeroshot.rows.0.cells.lambada_perplexity");
    CHECK(c && fabs(json_object_get_double(jget(c, "mean")) - 41) < 1e-12 &&
              fabs(json_object_get_double(jget(c, "sd")) - sqrt(2)) < 1e-12 &&
              jget(rep, "zeroshot.rows.0.cells.hellaswag_accuracy") == NULL &&
              json_object_array_length(jget(rep, "zeroshot.rows")) == 1,
          "zeroshot: mean and SD; null where no seed has the file");
    json_object_put(rep);
    runs_free(&rs);
}

int main(void) {
    check_name = "test_report";
    if (make_tmpdir("report")) return 1;
    test_pairstat();
    test_paper();
    test_edges();
    test_throughput();
    test_zeroshot();
    rm_rf(tmpdir);
    return check_finish();
}
