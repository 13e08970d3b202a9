/* The paper's tables and figures from a set of run directories.
 *
 * Written into OUT:
 *   report.md            every table in Markdown, the figures, and the problems:
 *                        missing runs, failed and unfinished runs, unreadable files
 *   report.json          the same numbers, structured
 *   tables/NAME.csv      one long-format CSV per table
 *   figures/NAME.png, .svg, .dat, .gp   gnuplot figures (report_plot.h)
 *
 * Tables (docs/report.md states every definition):
 *   table1  baseline loss per tier; each arm's paired improvement over the
 *           baseline; each gated arm's over the reference (the sink logit)
 *   table2  the two-by-two decomposition per gate form and tier: sink, gate,
 *           both, overlap = sink + gate - both, filter = paired(both arm vs sink arm)
 *   table5  every run's final loss per seed and the mean
 *   injection, probes, exposure, telemetry   from analysis files, when present
 *   zeroshot, lambada_distance   Tables 10 and 11 from the zero-shot files
 *           (docs/zeroshot.md), when present: mean ± SD over seeds, not SE
 * Arms play their roles by capability (src/arms.h), never by name: the
 * baseline has no zero option and no filter, the reference has the learned
 * sink logit and no filter, a form's gate arm has its filter in the value
 * slot and no zero option, its combined arm the filter and the sink logit. */
#ifndef SG_REPORT_H
#define SG_REPORT_H

#include <stddef.h>

#include "runs.h"

typedef struct {
    const char *baseline;  /* arm name, NULL: by capability (baseline) */
    const char *reference; /* arm name, NULL: by capability (sinklogit) */
    int figures;           /* draw the figures (gnuplot) */
    int curves;            /* also one loss-curve figure per run */
} ReportOpts;

typedef struct {
    int runs, done, failed, unfinished, corrupt, missing, duplicates, analysis_errors;
    int mixed_settings;           /* runs whose settings differ from their group's first run's */
    int figures, figures_undrawn; /* drawn; written as .dat/.gp only (no gnuplot) */
} ReportSummary;

/* 0 written; -1 with a message (bad option, or a file could not be written:
 * files already written stay complete, each is replaced atomically). */
int report_write(const RunSet *rs, const ReportOpts *o, const char *outdir, ReportSummary *sum,
                 char *err, size_t errlen);

#endif
