/* `sgtrain zeroshot`: LAMBADA, HellaSwag and WikiText-2 zero-shot on one
 * trained model (the paper's Tables 10 and 11), written as
 * RUN/analysis/TASK.json for sgreport.  The tasks' definitions are in
 * docs/zeroshot.md; this header is the split between reading the data
 * (zeroshot_data.c: the examples as token sequences) and scoring them with
 * the model (zeroshot.c). */
#ifndef SG_ZEROSHOT_H
#define SG_ZEROSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef enum { ZS_LAMBADA, ZS_HELLASWAG, ZS_WIKITEXT, ZS_TASKS } ZsTask;
const char *zs_task_name(ZsTask t);

typedef struct {
    const char *src;   /* run directory or checkpoint file */
    int task;          /* ZsTask, -1 until given */
    const char *file;  /* the task's data */
    const char *vocab; /* NULL: the run's data manifest's */
    const char *out;   /* NULL: SRC/analysis */
    int batch_size;
    int stride;        /* WikiText-2; 0: half the context */
    long limit;        /* LAMBADA, HellaSwag: the first N examples; 0: all */
    int threads;
    int quiet;
} ZsOpts;

void zs_defaults(ZsOpts *o);
int zs_parse_args(ZsOpts *o, int argc, char **argv, char *err, size_t errlen);
/* 0 done; 2 bad input (err says what; nothing written); 1 failure. */
int zs_run(const ZsOpts *o, char *err, size_t errlen);
void zs_usage(void);

/* ---- the data (zeroshot_data.c) ----------------------------------------- */

#define ZS_CHOICES 4

/* One LAMBADA passage or HellaSwag example: the context's tokens and each
 * continuation's.  LAMBADA has one continuation (" " + the target word). */
typedef struct {
    long line;                 /* 1-based line of the file */
    TokVec ctx;
    TokVec cont[ZS_CHOICES];
    int ncont;
    long chars[ZS_CHOICES];    /* HellaSwag: each choice's length in code points */
    int label;                 /* HellaSwag: the gold ending */
    long distance;             /* LAMBADA: tokens back to the target's last earlier occurrence; -1 none */
} ZsExample;

typedef struct {
    ZsExample *ex;
    long n;
    TokVec text;               /* WikiText-2: the file's tokens */
    long words, bytes;         /* WikiText-2 */
    char sha256[65];           /* of the file */
} ZsData;

/* Reads and tokenizes TASK's file (at most LIMIT examples; 0: all).  Bad
 * data fails with the file and line in err.  0, or -1 with err. */
int zs_load(ZsData *d, ZsTask task, const char *path, long limit, const Tokenizer *tok, char *err, size_t errlen);
void zs_data_free(ZsData *d);

/* The pieces of the definitions, for the unit tests: HellaSwag's text
 * clean-up (lm-evaluation-harness's preprocess) and capitalisation, both
 * into a new string; and LAMBADA's distance. */
char *zs_hellaswag_preprocess(const char *s);
char *zs_capitalize(const char *s);
long zs_lambada_distance(const TokVec *ctx, const TokVec *spaced, const TokVec *bare);

#endif
