/* Sweep files: one YAML file names every run of a study (docs/sweeps.md).
 *
 *   name: paper                      # safe name: [A-Za-z0-9._-], used in job names
 *   out: runs/paper                  # run directories: OUT/GROUP/ARM-sSEED
 *   sgtrain: build/sgtrain           # optional
 *   data: {fineweb: data/fineweb-edu-10BT, tinystories: data/tinystories}
 *   set: {val_batches_final: 64}     # sgtrain config fields for every run
 *   groups:
 *     fineweb-50M:                   # a group: one tier on one corpus
 *       tier: 50M
 *       data: fineweb
 *       set: {...}                   # overrides for this group
 *       arms: [baseline, sinklogit, combo]
 *       seeds: 3                     # 0, 1, 2; or a list [0, 1, 2]
 *       seeds_per_arm: {sinklogit: 5, combo: [0, 1, 2, 3, 4]}
 *       resources: {nodes: 1, gpus_per_node: 1, cpus_per_task: 8, mem: 64G,
 *                   time: "12:00:00", partition: gpu, account: a, qos: q,
 *                   sbatch: ["--constraint=h100"]}
 *       throttle: 8                  # at most this many array tasks at once
 *   analyses:                        # sgtrain analyze on finished runs (docs/sweeps.md)
 *     fineweb-124M:                  # an entry: its name is used in job and log names
 *       group: fineweb-124M          # default: the entry's own name
 *       arms: [combo2]               # default: every arm of the group
 *       seeds: [0]                   # default [0]; a count, a list, or all
 *       flags: {batches: 8, junk: [structured, gaussian], doses: [0.2, 0.4]}
 *       resources: {...}             # default: the group's, one node, at most one GPU
 *       throttle: 4
 *   slurm: {signal_margin: 300, log_dir: logs, resources: {...}}   # resources of the report job
 *   report: {figures: true, curves: false}
 *
 * Relative paths are taken from the directory sgsweep runs in (jobs run
 * there too).  Every error names file:line:column and what was expected;
 * unknown keys are errors. */
#ifndef SG_SWEEP_H
#define SG_SWEEP_H

#include <stddef.h>

#define SW_NAME 64
#define SW_PATH 1024

typedef struct {
    char key[64], value[SW_PATH];
} SweepSet;

typedef struct {
    int nodes, gpus_per_node, cpus_per_task;
    char mem[32], time[32], partition[64], account[64], qos[64];
    char **sbatch; /* extra sbatch arguments, each one argument */
    int n_sbatch;
} Resources;

typedef struct {
    char name[SW_NAME], tier[SW_NAME], data[SW_PATH];
    SweepSet *set;
    int n_set;
    int arms[16], n_arms;        /* indices into the arm table (src/arms.h), file order */
    long *seeds;                 /* per arm: seeds[a * max_seeds + k], n_seeds[a] of them */
    int n_seeds[16], max_seeds;
    Resources res;
    int throttle;
    int block_size, threads;     /* of the resolved config: analyses' seq_len bound and default threads */
} SweepGroup;

/* The files an analysis writes, RUN/analysis/NAME.json: bits 1 << AN_K_*.
 * sgtrain analyze writes the first AN_K_ANALYZE, sgtrain zeroshot one of
 * the others (its --task). */
enum { AN_K_INJECTION, AN_K_PROBES, AN_K_EXPOSURE, AN_K_TELEMETRY, AN_K_INCIDENCE, AN_K_ANALYZE,
       AN_K_LAMBADA = AN_K_ANALYZE, AN_K_HELLASWAG, AN_K_WIKITEXT, AN_K_COUNT };
extern const char *const sweep_analysis_kinds[AN_K_COUNT]; /* "injection", "probes", ..., "lambada", ... */

typedef struct {
    char flag[16];       /* an sgtrain analyze or zeroshot flag without its "--", e.g. "batch-size" */
    char value[SW_PATH]; /* its value as sgtrain takes it, e.g. "0.2,0.4" */
} SweepFlag;

/* An analyses entry: sgtrain analyze, or sgtrain zeroshot, on some runs of
 * one group. */
typedef struct {
    char name[SW_NAME];
    int zeroshot;                /* the command is sgtrain zeroshot (flags: --task, --file...) */
    int group;                   /* index into groups */
    int arms[16], n_arms;        /* arm table indices, file order */
    long *seeds;                 /* the selected seeds (every selected arm has each) */
    int n_seeds, all_seeds;      /* all_seeds: every seed of each arm */
    int what;                    /* bits 1 << AN_K_*; 0: everything the arm has (sgtrain's default) */
    SweepFlag flags[24];         /* in the command's --help order */
    int n_flags;
    Resources res;
    int throttle;
} SweepAnalysis;

typedef struct {
    char path[SW_PATH], name[SW_NAME], out[SW_PATH], sgtrain[SW_PATH], log_dir[SW_PATH];
    SweepSet *set;
    int n_set;
    SweepGroup *groups;
    int n_groups;
    int signal_margin; /* seconds before the time limit that the task gets SIGUSR1 */
    Resources report_res;
    int figures, curves;
    SweepAnalysis *analyses;
    int n_analyses;
} Sweep;

/* One training run of the sweep. */
typedef struct {
    int group, arm;  /* group index, arm table index */
    long seed;
    int index;       /* within its group: the Slurm array task id */
    char dir[SW_PATH + 2 * SW_NAME + 40];
} SweepTask;

int sweep_load(Sweep *s, const char *path, char *err, size_t errlen);
void sweep_free(Sweep *s);

/* Every training task: groups in file order, then arms in file order, then
 * seeds ascending.  malloc'd. */
int sweep_tasks(const Sweep *s, SweepTask **tasks, int *n, char *err, size_t errlen);

/* The sgtrain command line of a task (argv, NULL-terminated, malloc'd
 * strings; free with sweep_argv_free). */
char **sweep_train_argv(const Sweep *s, const SweepTask *t);
void sweep_argv_free(char **argv);

/* State of a task from its run directory. */
typedef enum { TS_PENDING, TS_STARTED, TS_INTERRUPTED, TS_FAILED, TS_DONE } TaskState;
extern const char *const task_state_names[];
TaskState sweep_task_state(const SweepTask *t, long *step);

/* One analysis task: an analyses entry on one training run. */
typedef struct {
    int entry;  /* index into analyses */
    int task;   /* index into sweep_tasks' array: the run it analyses */
    int index;  /* that run's index in its group: the analysis array's task id too */
    int kinds;  /* the files it writes, bits 1 << AN_K_* */
} SweepAnTask;

/* Every analysis task: entries in file order, then runs in task order.
 * malloc'd (possibly empty). */
int sweep_analysis_tasks(const Sweep *s, const SweepTask *tasks, int ntasks, SweepAnTask **an, int *n, char *err,
                         size_t errlen);

/* The sgtrain analyze command line of an analysis task (like sweep_train_argv). */
char **sweep_analyze_argv(const Sweep *s, const SweepTask *run, const SweepAnTask *a);

/* State of an analysis task:
 *   waiting  its training run is not done (nor failed)
 *   blocked  its training run failed
 *   pending  not run yet (or its files are older than the run's checkpoint)
 *   failed   sgsweep's failure record RUN/analysis/failed-ENTRY.json
 *   done     every file it writes is present and not older than checkpoint.bin */
typedef enum { AS_WAITING, AS_BLOCKED, AS_PENDING, AS_FAILED, AS_DONE } AnState;
extern const char *const an_state_names[];
AnState sweep_analysis_state(const Sweep *s, const SweepTask *run, const SweepAnTask *a);
/* RUN/analysis/failed-ENTRY.json: written by sgsweep when sgtrain analyze fails. */
void sweep_analysis_failed_path(const Sweep *s, const SweepTask *run, const SweepAnTask *a, char *path, size_t n);

/* Append a shell-quoted word (for commands shown to people; nothing is run
 * through a shell). */
void shell_quote(char *dst, size_t n, const char *word);

#endif
