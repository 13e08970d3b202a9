/* `sgtrain analyze`: the evaluation-time experiments of the paper on one
 * trained checkpoint (Sections 4.4 and 6; Appendices C and G), written as
 * RUN/analysis/{injection,probes,exposure,telemetry,incidence}.json (docs/formats.md,
 * "Analysis outputs") for sgreport.
 *
 * Every condition is evaluated on the same validation windows (drawn with
 * the run's val_seed, which every run of a study shares) and compared with
 * the clean loss of the same model on the same tokens. */
#ifndef SG_ANALYSIS_H
#define SG_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "inject.h"

enum { AN_DO_INJECTION = 1, AN_DO_PROBES = 2, AN_DO_EXPOSURE = 4, AN_DO_TELEMETRY = 8, AN_DO_INCIDENCE = 16,
       AN_DO_ALL = 31 };
/* What the clean, measuring pass feeds. */
#define AN_DO_MEASURED (AN_DO_EXPOSURE | AN_DO_TELEMETRY | AN_DO_INCIDENCE)

/* Gate overrides (Table 8); OVR_NONE is the trained gate. */
enum { OVR_NONE, OVR_ROW_MEAN, OVR_SHUFFLED, OVR_REOPENED, OVR_KINDS };
const char *override_name(int k); /* "trained", "row_mean", "shuffled", "reopened" */

#define AN_MAX_DOSES 16
#define AN_MAX_PCT 8

typedef struct {
    const char *src;        /* run directory or checkpoint file */
    int what;               /* AN_DO_* bits */
    int what_explicit;      /* the user named the analyses: refuse ones the arm lacks */
    int batches, batch_size, seq_len; /* seq_len 0: the model's context */
    uint64_t seed;          /* junk draws and shuffles */
    int junk_mask, junk_explicit;
    int cut_mask;
    double doses[AN_MAX_DOSES];
    int ndoses;
    double probe_dose;
    int probe_junk, probe_cut;
    int top_tokens;         /* telemetry: tokens listed at each end */
    long min_count;         /* telemetry: occurrences a token needs to be listed */
    int sink_positions;     /* incidence: leading key positions counted as the sink (4) */
    double pct[AN_MAX_PCT]; /* incidence: quiet-band percentiles, ascending (10 20 30 50) */
    int npct;
    const char *data;       /* NULL: the run's data directory */
    const char *out;        /* NULL: SRC/analysis (SRC's directory for a checkpoint file) */
    const char *vocab;      /* NULL: the data manifest's vocabulary */
    int threads;
    int quiet;
} AnalysisOpts;

/* Defaults of the paper: 8 batches of 8 sequences, every junk type the arm
 * has, both cutoffs, doses 0.2 0.4 0.8 1.6, probes under structured junk at
 * eps 0.2 with the median cutoff (Table 8's eps = 0.2 column matches
 * Table 7's median-cutoff row: +0.016 for the norm gate at 124M). */
void analysis_defaults(AnalysisOpts *o);
/* The command line after `sgtrain analyze`; 0 or -1 with err. */
int analysis_parse_args(AnalysisOpts *o, int argc, char **argv, char *err, size_t errlen);
/* Runs everything asked; 0 ok, 2 bad input (err says what), 1 failure. */
int analysis_run(const AnalysisOpts *o, char *err, size_t errlen);
void analysis_usage(void);
/* Where a run's analysis files go: RUN_DIR/analysis for a run directory,
 * the checkpoint file's directory's analysis/ for a checkpoint. */
void analysis_default_out(const char *src, char *dir, size_t n);

#endif
