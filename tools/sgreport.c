/* sgreport: the paper's paired-difference tables and figures from a
 * sweep's run directories (complete or partial).
 *
 *   sgreport [--out DIR] [--no-figures] [--curves] [--baseline ARM] [--reference ARM]
 *            [--strict] [--quiet] ROOT...
 *
 * ROOTs are searched recursively for run directories (src/runs.h).  What is
 * written and how every number is defined: src/report.h, docs/report.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "report_plot.h"
#include "runs.h"

static const char USAGE[] =
    "usage: sgreport [options] ROOT...\n"
    "  ROOT             a sweep's output directory or run directories (searched recursively)\n"
    "  --out DIR        where to write the report (default: ROOT/report with one ROOT)\n"
    "  --no-figures     tables only\n"
    "  --curves         also a loss-curve figure per run (from metrics.jsonl)\n"
    "  --baseline ARM   the arm improvements are measured against (default: baseline)\n"
    "  --reference ARM  the arm filtering is measured against (default: sinklogit)\n"
    "  --strict         exit 1 when any run failed, is unfinished or unreadable, or runs of one tier\n"
    "                   were trained with other settings than their arm and seed\n"
    "  --quiet          no summary on stderr\n"
    "writes DIR/report.md, DIR/report.json, DIR/tables/*.csv, DIR/figures/*.{png,svg}\n"
    "exit status: 0 report written, 1 could not write it (or --strict and problems), 2 bad input\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    ReportOpts o = {NULL, NULL, 1, 0};
    const char *out = NULL;
    int strict = 0, quiet = 0, nroots = 0;
    char **roots = calloc((size_t)argc + 1, sizeof *roots);
    if (!roots) return 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(USAGE, stdout);
            free(roots);
            return 0;
        }
        if (f[0] != '-') {
            roots[nroots++] = argv[i];
            continue;
        }
        if (!strcmp(f, "--no-figures")) o.figures = 0;
        else if (!strcmp(f, "--curves")) o.curves = 1;
        else if (!strcmp(f, "--strict")) strict = 1;
        else if (!strcmp(f, "--quiet")) quiet = 1;
        else if (!strcmp(f, "--out") || !strcmp(f, "--baseline") || !strcmp(f, "--reference")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sgreport: %s needs a value\n", f);
                free(roots);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(f, "--out")) out = v;
            else if (!strcmp(f, "--baseline")) o.baseline = v;
            else o.reference = v;
        } else {
            fprintf(stderr, "sgreport: unknown option %s (see sgreport --help)\n", f);
            free(roots);
            return 2;
        }
    }
    if (!nroots) {
        fputs(USAGE, stderr);
        free(roots);
        return 2;
    }
    char outbuf[4200];
    if (!out) {
        if (nroots > 1) {
            fprintf(stderr, "sgreport: with several ROOTs, say where the report goes: --out DIR\n");
            free(roots);
            return 2;
        }
        snprintf(outbuf, sizeof outbuf, "%s/report", roots[0]);
        out = outbuf;
    }
    double t0 = now();
    char err[1024];
    RunSet rs;
    if (runs_scan(roots, nroots, &rs, err, sizeof err)) {
        fprintf(stderr, "sgreport: %s\n", err);
        free(roots);
        return 2;
    }
    if (rs.n == 0) {
        fprintf(stderr, "sgreport: no run directories (holding result.json, failed.json or config.yaml) under %s%s\n",
                roots[0], nroots > 1 ? " and the other roots" : "");
        runs_free(&rs);
        free(roots);
        return 2;
    }
    double t1 = now();
    ReportSummary sum;
    int rc = report_write(&rs, &o, out, &sum, err, sizeof err);
    double t2 = now();
    if (rc) {
        fprintf(stderr, "sgreport: %s\n", err);
        runs_free(&rs);
        free(roots);
        return strstr(err, "unknown arm") ? 2 : 1;
    }
    if (!quiet) {
        fprintf(stderr,
                "sgreport: %d runs (%d done, %d failed, %d unfinished, %d unreadable); %d missing, %d duplicate; "
                "%d figure(s)%s -> %s/report.md (%.3f s: scan %.3f, report %.3f)\n",
                sum.runs, sum.done, sum.failed, sum.unfinished, sum.corrupt, sum.missing, sum.duplicates,
                sum.figures, sum.figures_undrawn ? " (gnuplot missing: some not drawn)" : "", out, t2 - t0,
                t1 - t0, t2 - t1);
        for (size_t i = 0; i < rs.n; i++)
            if (rs.v[i].status == RUN_CORRUPT) fprintf(stderr, "sgreport: unreadable run: %s\n", rs.v[i].why);
    }
    int problems = sum.failed || sum.unfinished || sum.corrupt || sum.analysis_errors || sum.mixed_settings;
    runs_free(&rs);
    free(roots);
    return strict && problems ? 1 : 0;
}
