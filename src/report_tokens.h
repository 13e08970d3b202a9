/* sgreport's "What the filter removes" (paper Appendix G): the tokens a
 * trained gate attenuates most and least, from the `tokens` lists of
 * telemetry.json (docs/formats.md), one row per tier and gated arm. */
#ifndef SG_REPORT_TOKENS_H
#define SG_REPORT_TOKENS_H

#include <json-c/json.h>
#include <stdio.h>

/* A candidate row: a done run of a gated arm with telemetry.json. */
typedef struct {
    const char *tier, *arm, *label; /* group, arm name, arm label */
    long seed;
    const char *dir;                /* the run directory, for Problems */
    json_object *telemetry;         /* the parsed file */
} TokenRun;

/* Candidates come grouped by (tier, arm), seeds ascending; each group's
 * first run whose lists are well formed gives the row.  A run whose
 * `tokens` is malformed is named in PROBLEMS (a Markdown list item) and
 * counted in *bad; a run without `tokens` (an ungated arm, --top-tokens 0)
 * is passed over.  Writes the section to MD, the lines of tables/tokens.csv
 * to CSV (header included), and the rows to JS (an array).  Returns the
 * rows written. */
int report_tokens(const TokenRun *runs, int n, FILE *md, FILE *csv, json_object *js, FILE *problems, int *bad);

#endif
