/* The run directories of a sweep, as reports see them.
 *
 * A run directory is one holding result.json, failed.json or config.yaml
 * (docs/formats.md); the roots given are searched recursively for them,
 * without descending into a run directory or into names starting with '.'.
 * Each run is classified:
 *   done        result.json with tier, arm, seed and a finite final_val_loss
 *               (its throughput, backend and ranks are read where present:
 *               runs of earlier versions lack the throughput)
 *   failed      failed.json (sgtrain stopped on a non-finite loss or an I/O error)
 *   unfinished  config.yaml only: running, queued or interrupted (the last
 *               step in metrics.jsonl and whether a checkpoint exists tell which)
 *   corrupt     a file above that cannot be read or lacks a field; the
 *               message names the file and what is wrong
 * Analysis outputs (RUN/analysis/{injection,probes,exposure,telemetry}.json)
 * are attached when present, and so are the numbers of the zero-shot
 * evaluations (RUN/analysis/{lambada,hellaswag,wikitext}.json,
 * docs/zeroshot.md); a malformed file is reported, not fatal. */
#ifndef SG_RUNS_H
#define SG_RUNS_H

#include <stddef.h>

#include "config.h"

#include "zeroshot.h"

typedef enum { RUN_DONE, RUN_FAILED, RUN_UNFINISHED, RUN_CORRUPT } RunStatus;

enum { AN_INJECTION, AN_PROBES, AN_EXPOSURE, AN_TELEMETRY, AN_INCIDENCE, AN_KINDS };
extern const char *const analysis_names[AN_KINDS];

/* Zero-shot evaluations (the files: zeroshot.h's tasks, named by
 * zs_task_name), and the numbers Table 10 takes from them. */
enum {
    ZS_LAMBADA_ACC, ZS_LAMBADA_PPL, ZS_HELLASWAG_ACC, ZS_HELLASWAG_ACC_NORM,
    ZS_WIKITEXT_TOKEN_PPL, ZS_WIKITEXT_WORD_PPL, ZS_VALUES
};
typedef struct {
    int task;        /* the file holding it */
    const char *key; /* its top-level field */
    int share;       /* an accuracy, in [0, 1]; else a perplexity, above 0 */
} ZeroShotField;
extern const ZeroShotField zeroshot_fields[ZS_VALUES];
/* LAMBADA's distance buckets (Table 11), as lambada.json names them */
enum { ZS_BUCKETS = 4 };
extern const char *const zeroshot_buckets[ZS_BUCKETS];

typedef struct {
    char *dir;
    RunStatus status;
    char tier[64], arm[32];
    char data[256];       /* the config's data directory (groups tiers by corpus) */
    long seed;            /* -1 when unknown (corrupt) */
    double final_loss;    /* done runs */
    double tok_s, mfu;    /* done runs: result.json's throughput (steady tokens/s, MFU); NaN when absent */
    double wall_s;        /* done runs: wall time over all sessions; NaN when absent */
    char backend[128];    /* done runs: where it ran (result.json's backend), "" when absent */
    int ranks;            /* done runs: processes that trained it (1 when absent) */
    long step, iters;     /* last step reached, steps planned (0 when unknown) */
    char why[512];        /* failed, unfinished, corrupt: what happened */
    int group;            /* index into RunSet.groups, -1 when unknown */
    /* What the run trained beyond its arm and seed: its config with arm,
     * seed, tier, data, out and every CF_IO field cleared (NULL when the
     * config was not read).  Runs of one group should share it. */
    Config *setup;
    void *analysis[AN_KINDS]; /* json_object *, NULL when absent */
    char analysis_err[AN_KINDS][256]; /* a malformed analysis file, "" when fine */
    /* Zero-shot results, only the numbers the tables use: the files' per-example
     * results run to megabytes a run, too much to hold for a whole sweep. */
    unsigned char zs_has[ZS_TASKS];   /* the file is there and well formed */
    double zs[ZS_VALUES];             /* valid where zs_has[its task] */
    long zs_size[ZS_TASKS];           /* what was evaluated: examples, or WikiText-2's tokens */
    long zs_bucket_n[ZS_BUCKETS];     /* passages per bucket (lambada.json) */
    double zs_bucket_acc[ZS_BUCKETS]; /* NaN where the bucket is empty */
    char zs_err[ZS_TASKS][256];       /* a malformed zero-shot file, "" when fine */
} RunRec;

typedef struct {
    RunRec *v;
    size_t n, cap;
    /* Tier groups in display order: a tier, or "DATA tier" when runs of one
     * tier use different data directories (TinyStories 10M vs FineWeb 10M). */
    char **groups;
    int n_groups;
} RunSet;

/* Scan ROOTS (directories; a root may itself be a run directory).  Fails
 * only when a root cannot be read; bad runs are recorded, not fatal. */
int runs_scan(char *const *roots, int nroots, RunSet *rs, char *err, size_t errlen);
void runs_free(RunSet *rs);

/* Loss curves from RUN/metrics.jsonl: training (step, loss) and validation
 * (step, val_loss) points, malloc'd.  0 ok, -1 with a message. */
int runs_read_curves(const char *dir, double **ts, double **tl, int *nt, double **vs,
                     double **vl, int *nv, char *err, size_t errlen);

#endif
