/* What sgsweep's files share: the loaded sweep, its children (common.c),
 * the Slurm submission (slurm.c) and the local executor (local.c);
 * tools/sgsweep.c holds the commands and main. */
#ifndef SG_SGSWEEP_H
#define SG_SGSWEEP_H

#include <limits.h>
#include <signal.h>
#include <stdio.h>

#include "sweep.h"

/* ---- the sweep and its tasks (common.c) ----------------------------------- */

typedef struct {
    Sweep s;
    SweepTask *t; /* training tasks */
    int n;
    SweepAnTask *a; /* analysis tasks */
    int na;
} Loaded;

int load(Loaded *L, const char *path); /* 0, or the exit status after a message */
void unload(Loaded *L);

static inline const SweepTask *an_run(const Loaded *L, const SweepAnTask *a) { return &L->t[a->task]; }
static inline AnState an_state(const Loaded *L, const SweepAnTask *a) {
    return sweep_analysis_state(&L->s, an_run(L, a), a);
}
/* "GROUP/ARM-sSEED" for a run, "analyze:ENTRY/ARM-sSEED" for an analysis */
void task_id(const Loaded *L, const SweepTask *t, char *out, size_t n);
void an_id(const Loaded *L, const SweepAnTask *a, char *out, size_t n);

/* Task selections: sel[i] = task i is in one of STATES (a bitmask of
 * TaskState, or of AnState for analysis tasks); NULL when out of memory. */
unsigned char *select_states(const Loaded *L, unsigned states);
unsigned char *select_an_states(const Loaded *L, unsigned states);
#define RUNNABLE ((1u << TS_PENDING) | (1u << TS_STARTED) | (1u << TS_INTERRUPTED))
#define FAILED_ONLY (1u << TS_FAILED)
/* analyses to submit: not run yet (blocked ones are named, not submitted) */
#define AN_SUBMIT ((1u << AS_PENDING) | (1u << AS_WAITING) | (1u << AS_BLOCKED))
/* and to rerun: failed, or waiting for a failed run that is rerun too */
#define AN_RERUN ((1u << AS_FAILED) | (1u << AS_BLOCKED))

/* ---- children and messages (common.c) ------------------------------------- */

/* "sgsweep: MESSAGE" on stderr; returns CODE */
int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern char self_dir[PATH_MAX]; /* where this executable is: sgreport, slurm/ */
void find_self(void);
extern volatile sig_atomic_t got_signal; /* the last SIGINT, SIGTERM or SIGUSR1, else 0 */
void install_signals(void);
/* argv to the terminal and to LOG (NULL: none); its exit status */
int run_child(char **argv, const char *log);
/* Runs argv and captures its stdout (sbatch --parsable, squeue); QUIET
 * sends its stderr to /dev/null.  Returns the exit status. */
int capture_q(char **argv, char *out, size_t n, int quiet);
int capture(char **argv, char *out, size_t n);
void show_argv(char **argv, FILE *f); /* shell-quoted, one line */
/* Runs analysis task A (output to the terminal and LOG), recording a
 * failure in RUN/analysis/failed-ENTRY.json; returns sgtrain's status. */
int run_analysis(const Loaded *L, const SweepAnTask *a, const char *log);
/* What an analysis's exit status leaves behind: a failure is recorded
 * unless a signal stopped it; a success removes an earlier record. */
void analysis_finished(const Loaded *L, const SweepAnTask *a, char **argv, int rc, const char *log);
/* ASIDE = the first free DIR.failed-K */
void move_aside(const char *dir, char *aside, size_t n);
int run_report(Loaded *L); /* sgreport on the sweep's output */

/* ---- Slurm (slurm.c) ------------------------------------------------------- */

typedef struct {
    char **v;
    int n;
} Argv;

void add(Argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void argv_free(Argv *a);

/* squeue's view of this sweep's jobs: one entry per range of array tasks. */
typedef struct {
    char name[160]; /* the job name after "SWEEP.": a group, "analyze:ENTRY" or "report" */
    char job[32];   /* the array job id */
    int lo, hi;
    char state[32];
} QEntry;

/* The entries (*out, malloc'd); -1 where squeue is missing or failed. */
int squeue_entries(const Sweep *s, QEntry **out);
/* The squeue entry of array task INDEX of the job named NAME, or NULL. */
const QEntry *queued(const QEntry *q, int nq, const char *name, int index);
void an_job_name(const Loaded *L, const SweepAnTask *a, char *out, size_t n);

enum { JOB_TRAIN, JOB_ANALYSIS, JOB_REPORT };
typedef struct {
    int kind, group, entry, ntasks;
    char *list;           /* array task ids */
    int dep;              /* aftercorr on this earlier job of the submission; -1: none */
    char dep_queued[32];  /* or on this training array job already in the queue */
    char placeholder[96]; /* its id in plan's commands */
} Job;
typedef struct {
    Job *v;
    int n;
} Jobs;

/* The array jobs that would run the selected tasks (TSEL, ASEL), the
 * report job last; tasks already in Q are left out, and NOTES names the
 * analyses that cannot be submitted.  0, or an exit status. */
int build_jobs(const Loaded *L, const unsigned char *tsel, const unsigned char *asel, const QEntry *q, int nq,
               Jobs *J, FILE *notes);
/* The sbatch command of job K; IDS[i] is the id of earlier job i. */
void job_argv(const Loaded *L, const Jobs *J, int k, char **ids, Argv *a);
void jobs_free(Jobs *J);
/* sbatch the selected tasks, then the report job; a task already in squeue
 * is never submitted twice. */
int submit(Loaded *L, unsigned char *tsel, unsigned char *asel);

/* ---- local execution (local.c) -------------------------------------------- */

/* Where local work runs (--jobs, --gpus): SLOTS tasks at once.  With one
 * slot a task's output also goes to the terminal; with more it goes to its
 * log alone.  gpu[s], when given, is slot s's CUDA_VISIBLE_DEVICES, so a
 * GPU named twice takes two tasks at once. */
typedef struct {
    int slots;
    char **gpu;
    int threads; /* OMP_NUM_THREADS for each task; 0: the environment's */
} Places;

int parse_jobs(const char *v, Places *P); /* --jobs N; 0, or 2 after a message */
int parse_gpus(const char *v, Places *P); /* --gpus LIST */
/* Every runnable task (the failed ones when RERUN) and its run's analyses,
 * P->slots at a time; returns the exit status. */
int run_local(Loaded *L, int rerun, int fresh, const Places *P);

#endif
