/* Run directories as `sgreport` reads them (runs_scan, runs_read_curves,
 * report_write without figures).
 *
 * The input is an archive of files, each starting at a line
 * "=== RUN/NAME" where RUN is one of a..d and NAME one of the files a run
 * directory holds (result.json, failed.json, config.yaml, metrics.jsonl,
 * checkpoint.bin, analysis/{injection,probes,exposure,telemetry,incidence,
 * lambada,hellaswag,wikitext}.json); the lines up to the next header are
 * its content.
 *
 * Properties: a bad file is reported, never fatal: the scan succeeds, a
 * run it calls done has a finite final loss and a seed, every other run
 * says why, and the report is written with a report.json that parses. */
#include "fuzz.h"

#include <json-c/json.h>
#include <math.h>

#include "report.h"
#include "runs.h"

static const char *const names[] = {
    "result.json", "failed.json", "config.yaml", "metrics.jsonl", "checkpoint.bin",
    "analysis/injection.json", "analysis/probes.json", "analysis/exposure.json",
    "analysis/telemetry.json", "analysis/incidence.json", "analysis/lambada.json",
    "analysis/hellaswag.json", "analysis/wikitext.json",
};

/* The file a header line names, or NULL. */
static const char *header(const char *line, size_t n, char *rel, size_t reln) {
    if (n < 7 || memcmp(line, "=== ", 4) || line[4] < 'a' || line[4] > 'd' || line[5] != '/') return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (n - 6 == strlen(names[i]) && !memcmp(line + 6, names[i], n - 6)) {
            snprintf(rel, reln, "runs/%c/%s", line[4], names[i]);
            return rel;
        }
    return NULL;
}

static void unpack(const char *dir, const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *end = text + size, *body = NULL;
    char rel[128] = "", cur[128] = "";
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n = (size_t)((nl ? nl : end) - line);
        const char *next = nl ? nl + 1 : end;
        if (header(line, n, rel, sizeof rel)) {
            if (body) fuzz_file(dir, cur, body, (size_t)(line - body));
            snprintf(cur, sizeof cur, "%s", rel);
            body = next;
        }
        line = next;
    }
    if (body) fuzz_file(dir, cur, body, (size_t)(end - body));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    char root[512], out[512], err[4096] = "";
    snprintf(root, sizeof root, "%s/runs", dir);
    snprintf(out, sizeof out, "%s/report", dir);
    mkdir(root, 0700);
    for (char c = 'a'; c <= 'd'; c++) {
        char d[600];
        snprintf(d, sizeof d, "%s/%c", root, c);
        mkdir(d, 0700);
    }
    unpack(dir, data, size);

    RunSet rs;
    char *roots[] = {root};
    FUZZ_REQUIRE(!runs_scan(roots, 1, &rs, err, sizeof err), "the scan failed: %s", err);
    for (size_t i = 0; i < rs.n; i++) {
        const RunRec *r = &rs.v[i];
        if (r->status == RUN_DONE)
            FUZZ_REQUIRE(isfinite(r->final_loss) && r->seed >= 0, "%s: done without a loss or seed", r->dir);
        else
            FUZZ_REQUIRE(r->why[0], "%s: not done, and no reason", r->dir);
        double *ts = NULL, *tl = NULL, *vs = NULL, *vl = NULL;
        int nt = 0, nv = 0;
        if (!runs_read_curves(r->dir, &ts, &tl, &nt, &vs, &vl, &nv, err, sizeof err))
            FUZZ_REQUIRE(nt >= 0 && nv >= 0, "negative point counts");
        free(ts), free(tl), free(vs), free(vl);
    }
    ReportOpts o = {0};
    ReportSummary sum;
    err[0] = 0;
    FUZZ_REQUIRE(!report_write(&rs, &o, out, &sum, err, sizeof err), "report_write: %s", err);
    char rj[600];
    snprintf(rj, sizeof rj, "%s/report.json", out);
    json_object *j = json_object_from_file(rj);
    FUZZ_REQUIRE(j, "report.json does not parse: %s", json_util_get_last_err());
    json_object_put(j);
    FUZZ_REQUIRE(sum.runs == (int)rs.n, "the summary counts %d runs of %zu", sum.runs, rs.n);
    runs_free(&rs);
    return 0;
}
