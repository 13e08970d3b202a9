/* Private to the analyses: one `sgtrain analyze` invocation's state, and
 * the JSON files and summary it writes (analysis_out.c). */
#ifndef SG_ANALYSIS_OUT_H
#define SG_ANALYSIS_OUT_H

#include <stdio.h>

#include "analysis.h"
#include "analysis_ctx.h"
#include "config.h"
#include "model.h"
#include "shard.h"
#include "tokenizer.h"

/* One evaluated condition: a gate override (OVR_NONE: the trained gate)
 * under junk (-1: none) at a cutoff and dose. */
typedef struct {
    int override, junk, cut;
    double eps;
    int in_battery;  /* an injection.json entry */
    double *loss;    /* [batches] mean token loss */
    double seconds;
    long corrupted, reads;
} AnCond;

typedef struct {
    const AnalysisOpts *o;
    Config cfg;
    Model m;
    int model_ok;
    long step;
    ShardSet data;
    int data_ok;
    char data_dir[1024], out_dir[1024];
    int what, junk_mask;
    AnCond *cond;    /* cond[0] is the clean, measuring pass */
    int ncond;
    AnStats stats;
    Tokenizer *tok;
    char vocab_path[1024];
    real *qkv0;      /* layer 0's clean values of the current batch (op buffer) */
    double seconds;
    int nonfinite;
} AnRun;

/* The vocabulary for decoding the telemetry's tokens: --vocab, else the
 * data manifest's (a missing manifest or vocabulary leaves ids only). */
int an_load_vocab(AnRun *r, char *err, size_t errlen);
/* Every file asked for, each written atomically. */
int an_write_all(AnRun *r, char *err, size_t errlen);
void an_print_summary(const AnRun *r, FILE *f);
void an_run_free(AnRun *r);

#endif
