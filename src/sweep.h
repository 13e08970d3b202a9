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
} SweepGroup;

typedef struct {
    char path[SW_PATH], name[SW_NAME], out[SW_PATH], sgtrain[SW_PATH], log_dir[SW_PATH];
    SweepSet *set;
    int n_set;
    SweepGroup *groups;
    int n_groups;
    int signal_margin; /* seconds before the time limit that the task gets SIGUSR1 */
    Resources report_res;
    int figures, curves;
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

/* Append a shell-quoted word (for commands shown to people; nothing is run
 * through a shell). */
void shell_quote(char *dst, size_t n, const char *word);

#endif
