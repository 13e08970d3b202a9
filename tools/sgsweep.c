/* sgsweep: run every training run of a sweep file and the analyses of the
 * finished ones, on this machine or as Slurm array jobs, then the report
 * (docs/sweeps.md).
 *
 *   sgsweep plan   SWEEP            the task table, the sgtrain analyze and sbatch commands (nothing runs)
 *   sgsweep run    SWEEP --local [--jobs N | --gpus LIST]
 *                                   run the tasks here in order, one at a time or several at once:
 *                                   skip done, resume interrupted; each run's analyses right after it
 *   sgsweep status SWEEP            each task's state
 *   sgsweep rerun  SWEEP [--local] [--fresh]   only the failed tasks (locally, or as arrays)
 *   sgsweep submit SWEEP            sbatch one array per group, one per analyses entry (each task
 *                                   after its training task: aftercorr) and the report job (slurm/grid.sh)
 *   sgsweep task   SWEEP --group G --index I      one training array task (slurm/task.sh)
 *   sgsweep task   SWEEP --analysis A --index I   one analysis array task (slurm/analysis.sh)
 *   sgsweep report SWEEP            sgreport on the sweep's runs
 *
 * Nothing from the sweep file goes through a shell: commands are argv
 * arrays given to execvp, and names are restricted to a safe set; the
 * commands shown by plan are shell-quoted for copying. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arms.h"
#include "fsutil.h"
#include "proc.h"
#include "sweep.h"

static const char USAGE[] =
    "usage: sgsweep COMMAND SWEEP.yaml [options]\n"
    "  plan                      the task table, the sgtrain analyze commands and the sbatch commands\n"
    "                            it would submit (a dry run)\n"
    "  run --local               run every task on this machine, in order, each run's analyses right\n"
    "                            after it; finished tasks are skipped, interrupted ones resumed; then\n"
    "                            the report\n"
    "      --jobs N              N tasks at once, each with its share of the cores (OMP_NUM_THREADS);\n"
    "                            their output goes to their logs alone\n"
    "      --gpus LIST           one task at a time on each GPU of LIST (0,1,2,3 or GPU UUIDs; a GPU\n"
    "                            named twice takes two), through CUDA_VISIBLE_DEVICES\n"
    "  status                    each task's state, from its run directory (and squeue when present)\n"
    "  rerun [--local] [--fresh] only the failed tasks, and the analyses of failed runs (--fresh: move\n"
    "                            failed run directories aside and start over instead of resuming from\n"
    "                            the last good checkpoint; --local takes --jobs and --gpus too)\n"
    "  submit                    sbatch one array job per group, one per analyses entry (each task after\n"
    "                            its training task) and a report job (what slurm/grid.sh runs)\n"
    "  task --group G --index I  run one training task (what slurm/task.sh runs in each array task)\n"
    "  task --analysis A --index I\n"
    "                            run one analysis task (slurm/analysis.sh; I is its run's index in the group)\n"
    "  report                    sgreport on the sweep's output directory\n"
    "exit status: 0 all done, 1 a task failed, 2 bad input, 75 interrupted (run again to resume)\n";

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sgsweep: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

/* Tools next to this executable (sgreport), and the slurm/ scripts. */
static char self_dir[PATH_MAX];
static void find_self(void) {
    ssize_t n = readlink("/proc/self/exe", self_dir, sizeof self_dir - 1);
    if (n <= 0) {
        snprintf(self_dir, sizeof self_dir, "build");
        return;
    }
    self_dir[n] = 0;
    char *s = strrchr(self_dir, '/');
    if (s) *s = 0;
}

static volatile sig_atomic_t got_signal;
static void on_signal(int s) { got_signal = s; }

static int run_child(char **argv, const char *log) { return proc_run_tee(argv, log, NULL, &got_signal); }

/* Run argv and capture its stdout (for sbatch --parsable and squeue);
 * QUIET sends its stderr to /dev/null. */
static int capture_q(char **argv, char *out, size_t n, int quiet) {
    int pfd[2];
    if (pipe(pfd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (quiet) {
            int dn = open("/dev/null", O_WRONLY);
            if (dn >= 0) dup2(dn, 2);
        }
        execvp(argv[0], argv);
        if (!quiet) fprintf(stderr, "sgsweep: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    size_t k = 0;
    ssize_t r;
    while ((r = read(pfd[0], out + k, n - 1 - k)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0) k += (size_t)r;
    out[k] = 0;
    close(pfd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
static int capture(char **argv, char *out, size_t n) { return capture_q(argv, out, n, 0); }

static void show_argv(char **argv, FILE *f) {
    for (char **a = argv; *a; a++) {
        char q[4096] = "";
        shell_quote(q, sizeof q, *a);
        fprintf(f, "%s%s", a == argv ? "" : " ", q);
    }
    fputc('\n', f);
}

typedef struct {
    Sweep s;
    SweepTask *t; /* training tasks */
    int n;
    SweepAnTask *a; /* analysis tasks */
    int na;
} Loaded;

static int load(Loaded *L, const char *path) {
    char err[1024];
    if (sweep_load(&L->s, path, err, sizeof err)) return die(2, "%s", err);
    if (sweep_tasks(&L->s, &L->t, &L->n, err, sizeof err)) {
        sweep_free(&L->s);
        return die(1, "%s", err);
    }
    if (sweep_analysis_tasks(&L->s, L->t, L->n, &L->a, &L->na, err, sizeof err)) {
        free(L->t);
        sweep_free(&L->s);
        return die(1, "%s", err);
    }
    return 0;
}

static void unload(Loaded *L) {
    free(L->a);
    free(L->t);
    sweep_free(&L->s);
}

static const SweepTask *an_run(const Loaded *L, const SweepAnTask *a) { return &L->t[a->task]; }
static AnState an_state(const Loaded *L, const SweepAnTask *a) { return sweep_analysis_state(&L->s, an_run(L, a), a); }

/* "GROUP/ARM-sSEED" for a run, "analyze:ENTRY/ARM-sSEED" for an analysis */
static void task_id(const Loaded *L, const SweepTask *t, char *out, size_t n) {
    snprintf(out, n, "%s/%s-s%ld", L->s.groups[t->group].name, arm_at(t->arm)->name, t->seed);
}
static void an_id(const Loaded *L, const SweepAnTask *a, char *out, size_t n) {
    const SweepTask *t = an_run(L, a);
    snprintf(out, n, "analyze:%s/%s-s%ld", L->s.analyses[a->entry].name, arm_at(t->arm)->name, t->seed);
}

/* ---- sbatch command lines -------------------------------------------------------- */

typedef struct {
    char **v;
    int n;
} Argv;

static void add(Argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Argv *a, const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    a->v = realloc(a->v, (size_t)(a->n + 2) * sizeof *a->v);
    a->v[a->n++] = strdup(buf);
    a->v[a->n] = NULL;
}

static void argv_free(Argv *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    a->v = NULL;
    a->n = 0;
}

static void add_resources(Argv *a, const Resources *r) {
    int tasks_per_node = r->gpus_per_node > 0 ? r->gpus_per_node : 1;
    if (r->nodes) add(a, "--nodes=%d", r->nodes);
    add(a, "--ntasks-per-node=%d", tasks_per_node);
    if (r->gpus_per_node) add(a, "--gpus-per-node=%d", r->gpus_per_node);
    if (r->cpus_per_task) add(a, "--cpus-per-task=%d", r->cpus_per_task);
    if (r->mem[0]) add(a, "--mem=%s", r->mem);
    if (r->time[0]) add(a, "--time=%s", r->time);
    if (r->partition[0]) add(a, "--partition=%s", r->partition);
    if (r->account[0]) add(a, "--account=%s", r->account);
    if (r->qos[0]) add(a, "--qos=%s", r->qos);
    for (int i = 0; i < r->n_sbatch; i++) add(a, "%s", r->sbatch[i]);
}

static void abs_path(const char *p, char *out, size_t n) {
    if (p[0] == '/') {
        snprintf(out, n, "%s", p);
        return;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    size_t a = strnlen(cwd, n - 1), b = strlen(p);
    memcpy(out, cwd, a);
    if (a + 1 < n) out[a++] = '/';
    if (b > n - 1 - a) b = n - 1 - a;
    memcpy(out + a, p, b);
    out[a + b] = 0;
}

static const char *slurm_dir(void) {
    const char *d = getenv("SG_SLURM_DIR");
    return d && *d ? d : "slurm";
}

/* Absolute paths a job needs: it runs elsewhere, maybe on another node. */
typedef struct {
    char sweep[PATH_MAX + 8], script[PATH_MAX + 64], logs[PATH_MAX + 8], cwd[PATH_MAX];
} JobPaths;

static void job_paths(const Sweep *s, const char *script_name, JobPaths *p) {
    char rel[PATH_MAX];
    abs_path(s->path, p->sweep, sizeof p->sweep);
    snprintf(rel, sizeof rel, "%s/%s", slurm_dir(), script_name);
    abs_path(rel, p->script, sizeof p->script);
    snprintf(rel, sizeof rel, "%s/%s", s->out, s->log_dir);
    abs_path(rel, p->logs, sizeof p->logs);
    if (!getcwd(p->cwd, sizeof p->cwd)) snprintf(p->cwd, sizeof p->cwd, ".");
}

/* The array job of group G over INDICES (a Slurm list such as "0-3,7"). */
static void group_sbatch(const Loaded *L, int g, const char *indices, Argv *a) {
    const Sweep *s = &L->s;
    const SweepGroup *G = &s->groups[g];
    JobPaths jp;
    job_paths(s, "task.sh", &jp);
    add(a, "sbatch");
    add(a, "--parsable");
    add(a, "--job-name=%s.%s", s->name, G->name);
    if (G->throttle) add(a, "--array=%s%%%d", indices, G->throttle);
    else add(a, "--array=%s", indices);
    add(a, "--requeue");
    add(a, "--signal=B:USR1@%d", s->signal_margin);
    add(a, "--output=%s/%s-%%A_%%a.out", jp.logs, G->name);
    add(a, "--open-mode=append"); /* a requeued task adds to its log instead of erasing it */
    add(a, "--chdir=%s", jp.cwd);
    add(a, "--export=ALL,SG_SGSWEEP=%s/sgsweep", self_dir);
    add_resources(a, &G->res);
    add(a, "%s", jp.script);
    add(a, "%s", jp.sweep);
    add(a, "%s", G->name);
}

/* The array job of analyses entry E over INDICES, the array task ids of
 * their runs' training tasks: with DEP (a training array job), task k waits
 * for task k of DEP and is cancelled if that one fails. */
static void analysis_sbatch(const Loaded *L, int e, const char *indices, const char *dep, Argv *a) {
    const Sweep *s = &L->s;
    const SweepAnalysis *E = &s->analyses[e];
    JobPaths jp;
    job_paths(s, "analysis.sh", &jp);
    add(a, "sbatch");
    add(a, "--parsable");
    add(a, "--job-name=%s.analyze:%s", s->name, E->name);
    if (E->throttle) add(a, "--array=%s%%%d", indices, E->throttle);
    else add(a, "--array=%s", indices);
    if (dep && *dep) {
        add(a, "--dependency=aftercorr:%s", dep);
        add(a, "--kill-on-invalid-dep=yes");
    }
    add(a, "--requeue");
    add(a, "--output=%s/analysis/%s-%%A_%%a.out", jp.logs, E->name);
    add(a, "--open-mode=append");
    add(a, "--chdir=%s", jp.cwd);
    add(a, "--export=ALL,SG_SGSWEEP=%s/sgsweep", self_dir);
    add_resources(a, &E->res);
    add(a, "%s", jp.script);
    add(a, "%s", jp.sweep);
    add(a, "%s", E->name);
}

static void report_sbatch(const Loaded *L, const char *deps, Argv *a) {
    const Sweep *s = &L->s;
    JobPaths jp;
    job_paths(s, "report.sh", &jp);
    add(a, "sbatch");
    add(a, "--parsable");
    add(a, "--job-name=%s.report", s->name);
    /* afterany: the report runs on whatever finished; a failed task does
     * not hold it back, and it names the failure */
    if (deps && *deps) add(a, "--dependency=afterany:%s", deps);
    add(a, "--kill-on-invalid-dep=yes");
    add(a, "--output=%s/report-%%j.out", jp.logs);
    add(a, "--chdir=%s", jp.cwd);
    add(a, "--export=ALL,SG_SGSWEEP=%s/sgsweep", self_dir);
    Resources r = s->report_res;
    if (!r.cpus_per_task) r.cpus_per_task = 1;
    add_resources(a, &r);
    add(a, "%s", jp.script);
    add(a, "%s", jp.sweep);
}

/* Slurm list ("0-3,7") of N ascending indices. */
static void index_list(const int *idx, int n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < cap;) {
        int j = i;
        while (j + 1 < n && idx[j + 1] == idx[j] + 1) j++;
        k += (size_t)snprintf(out + k, cap - k, "%s%d", k ? "," : "", idx[i]);
        if (j > i && k < cap) k += (size_t)snprintf(out + k, cap - k, "-%d", idx[j]);
        i = j + 1;
    }
}

/* sel[i] = training task i is in one of STATES (bitmask of TaskState). */
static unsigned char *select_states(const Loaded *L, unsigned states) {
    unsigned char *sel = calloc((size_t)L->n + 1, 1);
    for (int i = 0; sel && i < L->n; i++) sel[i] = (states >> sweep_task_state(&L->t[i], NULL)) & 1;
    return sel;
}

/* The same for analysis tasks (bitmask of AnState). */
static unsigned char *select_an_states(const Loaded *L, unsigned states) {
    unsigned char *sel = calloc((size_t)L->na + 1, 1);
    for (int j = 0; sel && j < L->na; j++) sel[j] = (states >> an_state(L, &L->a[j])) & 1;
    return sel;
}

#define RUNNABLE ((1u << TS_PENDING) | (1u << TS_STARTED) | (1u << TS_INTERRUPTED))
#define FAILED_ONLY (1u << TS_FAILED)
/* analyses to submit: not run yet (blocked ones are named, not submitted) */
#define AN_SUBMIT ((1u << AS_PENDING) | (1u << AS_WAITING) | (1u << AS_BLOCKED))
/* and to rerun: failed, or waiting for a failed run that is rerun too */
#define AN_RERUN ((1u << AS_FAILED) | (1u << AS_BLOCKED))

/* ---- squeue ------------------------------------------------------------------------------ */

/* squeue's view of this sweep's jobs: one entry per range of array tasks. */
typedef struct {
    char name[160]; /* the job name after "SWEEP.": a group, "analyze:ENTRY" or "report" */
    char job[32];   /* the array job id */
    int lo, hi;
    char state[32];
} QEntry;

static int squeue_entries(const Sweep *s, QEntry **out) {
    *out = NULL;
    char *argv[] = {"squeue", "-h", "-o", "%j|%F|%K|%T", NULL};
    static char buf[1 << 20];
    if (capture_q(argv, buf, sizeof buf, 1) != 0) return -1; /* no cluster here: directories only */
    int n = 0, cap = 0;
    size_t plen = strlen(s->name);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *b1 = strchr(line, '|'), *b2 = b1 ? strchr(b1 + 1, '|') : NULL, *b3 = b2 ? strchr(b2 + 1, '|') : NULL;
        if (!b3 || strncmp(line, s->name, plen) || line[plen] != '.') continue;
        *b1 = *b2 = *b3 = 0;
        /* %K: "3", "0-5%2", "1,4-6" or "N/A" */
        char *pct = strchr(b2 + 1, '%');
        if (pct) *pct = 0;
        for (char *r = b2 + 1; r && *r;) {
            char *comma = strchr(r, ',');
            if (comma) *comma = 0;
            int lo, hi;
            int ok = sscanf(r, "%d-%d", &lo, &hi) == 2 || (sscanf(r, "%d", &lo) == 1 && (hi = lo, 1));
            if (ok) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 64;
                    QEntry *nq = realloc(*out, (size_t)cap * sizeof *nq);
                    if (!nq) return n;
                    *out = nq;
                }
                QEntry *e = &(*out)[n++];
                snprintf(e->name, sizeof e->name, "%s", line + plen + 1);
                snprintf(e->job, sizeof e->job, "%s", b1 + 1);
                e->lo = lo;
                e->hi = hi;
                snprintf(e->state, sizeof e->state, "%s", b3 + 1);
            }
            r = comma ? comma + 1 : NULL;
        }
    }
    return n;
}

/* The squeue entry of array task INDEX of the job named NAME, or NULL. */
static const QEntry *queued(const QEntry *q, int nq, const char *name, int index) {
    for (int k = 0; k < nq; k++)
        if (!strcmp(q[k].name, name) && index >= q[k].lo && index <= q[k].hi) return &q[k];
    return NULL;
}

static void an_job_name(const Loaded *L, const SweepAnTask *a, char *out, size_t n) {
    snprintf(out, n, "analyze:%s", L->s.analyses[a->entry].name);
}

/* ---- the jobs of a submission --------------------------------------------------------------- */

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

static Job *job_add(Jobs *J, int kind, const int *idx, int n) {
    Job *nv = realloc(J->v, (size_t)(J->n + 1) * sizeof *nv);
    if (!nv) return NULL;
    J->v = nv;
    Job *j = &nv[J->n];
    memset(j, 0, sizeof *j);
    j->kind = kind;
    j->dep = -1;
    j->ntasks = n;
    size_t cap = (size_t)n * 12 + 16;
    if (!(j->list = malloc(cap))) return NULL;
    index_list(idx, n, j->list, cap);
    J->n++;
    return j;
}

static void jobs_free(Jobs *J) {
    for (int k = 0; k < J->n; k++) free(J->v[k].list);
    free(J->v);
    J->v = NULL;
    J->n = 0;
}

/* One array job per group over its selected training tasks (TSEL); then per
 * analyses entry, its selected analysis tasks (ASEL) in one array job per
 * training job they wait for: task k of the analysis array waits for task k
 * of the training array (the analysis of a run has its run's array task id),
 * so one aftercorr dependency covers the array.  Analyses of finished runs
 * wait for nothing; those of runs queued by an earlier submission wait for
 * that job (from Q).  Analyses whose run failed, or is neither done nor
 * submitted nor queued, are not submitted: NOTES names them.  Last, the
 * report job. */
static int build_jobs(const Loaded *L, const unsigned char *tsel, const unsigned char *asel, const QEntry *q, int nq,
                      Jobs *J, FILE *notes) {
    const Sweep *s = &L->s;
    int *idx = malloc(((size_t)L->n + (size_t)L->na + 1) * sizeof *idx);
    int *gjob = malloc(((size_t)s->n_groups + 1) * sizeof *gjob);
    int *key = malloc(((size_t)L->na + 1) * sizeof *key);
    if (!idx || !gjob || !key) goto oom;
    for (int g = 0; g < s->n_groups; g++) {
        int n = 0;
        for (int i = 0; i < L->n; i++)
            if (L->t[i].group == g && tsel[i]) idx[n++] = L->t[i].index;
        gjob[g] = -1;
        if (!n) {
            if (notes) fprintf(notes, "# %s: nothing to run\n", s->groups[g].name);
            continue;
        }
        Job *j = job_add(J, JOB_TRAIN, idx, n);
        if (!j) goto oom;
        j->group = g;
        snprintf(j->placeholder, sizeof j->placeholder, "JOBID_OF_%s", s->groups[g].name);
        gjob[g] = J->n - 1;
    }
    for (int e = 0; e < s->n_analyses; e++) {
        /* key[j]: what analysis task j waits for: -2 not submitted, -1 nothing,
         * a job of this submission, or 1000000 + the squeue entry of a queued one */
        int any = 0;
        for (int j = 0; j < L->na; j++) {
            key[j] = -2;
            const SweepAnTask *a = &L->a[j];
            if (a->entry != e || !asel[j]) continue;
            const SweepTask *t = an_run(L, a);
            TaskState ts = sweep_task_state(t, NULL);
            const QEntry *qe;
            char id[256];
            if (ts == TS_DONE) key[j] = -1;
            else if (tsel[a->task]) key[j] = gjob[t->group];
            else if ((qe = queued(q, nq, s->groups[t->group].name, t->index))) key[j] = 1000000 + (int)(qe - q);
            else if (notes) {
                an_id(L, a, id, sizeof id);
                if (ts == TS_FAILED)
                    fprintf(notes, "# %s: not submitted: its training run failed (sgsweep rerun submits both)\n", id);
                else
                    fprintf(notes, "# %s: not submitted: its training run is %s and not in the queue\n", id,
                            task_state_names[ts]);
            }
            any |= key[j] != -2;
        }
        int part = 0;
        while (any) {
            /* the first key not yet submitted, then every task with that key */
            int k0 = -2, n = 0;
            for (int j = 0; j < L->na; j++)
                if (key[j] != -2) {
                    if (k0 == -2) k0 = key[j];
                    if (key[j] == k0) {
                        idx[n++] = L->a[j].index;
                        key[j] = -2;
                    }
                }
            if (!n) break;
            Job *jb = job_add(J, JOB_ANALYSIS, idx, n);
            if (!jb) goto oom;
            jb->entry = e;
            if (k0 >= 1000000) snprintf(jb->dep_queued, sizeof jb->dep_queued, "%s", q[k0 - 1000000].job);
            else jb->dep = k0;
            snprintf(jb->placeholder, sizeof jb->placeholder, "JOBID_OF_analysis-%s%s", s->analyses[e].name,
                     part ? (part == 1 ? "-2" : "-n") : "");
            part++;
        }
    }
    if (!job_add(J, JOB_REPORT, idx, 0)) goto oom;
    free(idx), free(gjob), free(key);
    return 0;
oom:
    free(idx), free(gjob), free(key);
    return die(1, "out of memory");
}

/* The sbatch command of job K; IDS[i] is the id of earlier job i. */
static void job_argv(const Loaded *L, const Jobs *J, int k, char **ids, Argv *a) {
    const Job *j = &J->v[k];
    if (j->kind == JOB_TRAIN) group_sbatch(L, j->group, j->list, a);
    else if (j->kind == JOB_ANALYSIS)
        analysis_sbatch(L, j->entry, j->list, j->dep >= 0 ? ids[j->dep] : j->dep_queued, a);
    else {
        size_t cap = 64;
        for (int i = 0; i < k; i++) cap += strlen(ids[i]) + 1;
        char *deps = calloc(cap, 1);
        for (int i = 0; deps && i < k; i++) {
            size_t len = strlen(deps);
            snprintf(deps + len, cap - len, "%s%s", len ? ":" : "", ids[i]);
        }
        report_sbatch(L, deps ? deps : "", a);
        free(deps);
    }
}

/* ---- commands ---------------------------------------------------------------------------- */

static void res_text(const Resources *r, char *out, size_t n) {
    snprintf(out, n, "%dx%dgpu %dcpu%s%s%s%s", r->nodes ? r->nodes : 1, r->gpus_per_node,
             r->cpus_per_task ? r->cpus_per_task : 1, r->mem[0] ? " " : "", r->mem, r->time[0] ? " " : "", r->time);
}

static int cmd_plan(Loaded *L) {
    const Sweep *s = &L->s;
    int counts[5] = {0}, acounts[5] = {0};
    printf("sweep %s: %d training tasks in %d groups", s->name, L->n, s->n_groups);
    if (s->n_analyses) printf(", %d analysis tasks in %d analyses", L->na, s->n_analyses);
    printf(" -> %s\n\n", s->out);
    printf("%-34s %-7s %-6s %-10s %5s %6s  %-26s %-24s %s\n", "id", "kind", "tier", "arm", "seed", "array",
           "resources", "depends on", "status");
    for (int i = 0; i < L->n; i++) {
        const SweepTask *t = &L->t[i];
        const SweepGroup *G = &s->groups[t->group];
        char id[256], res[128];
        task_id(L, t, id, sizeof id);
        res_text(&G->res, res, sizeof res);
        long step;
        TaskState st = sweep_task_state(t, &step);
        counts[st]++;
        printf("%-34s %-7s %-6s %-10s %5ld %6d  %-26s %-24s %s", id, "train", G->tier, arm_at(t->arm)->name, t->seed,
               t->index, res, "-", task_state_names[st]);
        if (st == TS_INTERRUPTED || st == TS_STARTED) printf(" (step %ld)", step);
        putchar('\n');
    }
    for (int j = 0; j < L->na; j++) {
        const SweepAnTask *a = &L->a[j];
        const SweepTask *t = an_run(L, a);
        char id[256], dep[256], res[128];
        an_id(L, a, id, sizeof id);
        task_id(L, t, dep, sizeof dep);
        res_text(&s->analyses[a->entry].res, res, sizeof res);
        AnState st = an_state(L, a);
        acounts[st]++;
        printf("%-34s %-7s %-6s %-10s %5ld %6d  %-26s %-24s %s\n", id, "analyze", s->groups[t->group].tier,
               arm_at(t->arm)->name, t->seed, a->index, res, dep, an_state_names[st]);
    }
    printf("%-34s %-7s %-6s %-10s %5s %6s  %-26s %-24s %s\n", "report", "report", "-", "-", "-", "-", "1x0gpu 1cpu",
           L->na ? "all training, analyses" : "all training", "-");
    printf("\n%d done, %d failed, %d interrupted, %d started, %d pending\n", counts[TS_DONE], counts[TS_FAILED],
           counts[TS_INTERRUPTED], counts[TS_STARTED], counts[TS_PENDING]);
    if (L->na) {
        printf("analyses: %d done, %d failed, %d pending, %d waiting for their run, %d blocked (their run failed)\n",
               acounts[AS_DONE], acounts[AS_FAILED], acounts[AS_PENDING], acounts[AS_WAITING], acounts[AS_BLOCKED]);
        printf("\nsgtrain analyze and zeroshot commands (each after its training run; finished ones are left out):\n");
        for (int j = 0; j < L->na; j++) {
            if (an_state(L, &L->a[j]) == AS_DONE) continue;
            char **argv = sweep_analyze_argv(s, an_run(L, &L->a[j]), &L->a[j]);
            if (argv) show_argv(argv, stdout);
            sweep_argv_free(argv);
        }
    }
    printf("\nsbatch commands (sgsweep submit; finished and failed tasks are left out):\n");
    unsigned char *tsel = select_states(L, RUNNABLE), *asel = select_an_states(L, AN_SUBMIT);
    Jobs J = {0};
    int rc = tsel && asel ? build_jobs(L, tsel, asel, NULL, 0, &J, stdout) : die(1, "out of memory");
    char **ids = calloc((size_t)J.n + 1, sizeof *ids);
    for (int k = 0; !rc && ids && k < J.n; k++) {
        ids[k] = J.v[k].placeholder;
        Argv a = {0};
        job_argv(L, &J, k, ids, &a);
        show_argv(a.v, stdout);
        argv_free(&a);
    }
    free(ids);
    jobs_free(&J);
    free(tsel), free(asel);
    return rc;
}

static int run_report(Loaded *L) {
    char sgreport[PATH_MAX + 16];
    snprintf(sgreport, sizeof sgreport, "%s/sgreport", self_dir);
    char *argv[8];
    int k = 0;
    argv[k++] = sgreport;
    if (!L->s.figures) argv[k++] = "--no-figures";
    if (L->s.curves) argv[k++] = "--curves";
    argv[k++] = L->s.out;
    argv[k] = NULL;
    int rc = run_child(argv, NULL);
    return rc == 0 ? 0 : die(1, "the report failed (sgreport exit %d)", rc);
}

static void install_signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* RUN/analysis/failed-ENTRY.json: what failed, for status, rerun and people. */
static void record_failure(const Loaded *L, const SweepAnTask *a, char **argv, int rc, const char *log) {
    const SweepTask *t = an_run(L, a);
    char path[SW_PATH * 2], dir[SW_PATH * 2], err[512], cmd[8192] = "", when[64] = "";
    snprintf(dir, sizeof dir, "%s/analysis", t->dir);
    sweep_analysis_failed_path(&L->s, t, a, path, sizeof path);
    for (char **p = argv; *p; p++) {
        if (p != argv) strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
        shell_quote(cmd, sizeof cmd, *p);
    }
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "analysis", json_object_new_string(L->s.analyses[a->entry].name));
    json_object_object_add(o, "run", json_object_new_string(t->dir));
    json_object_object_add(o, "exit", json_object_new_int(rc));
    json_object_object_add(o, "command", json_object_new_string(cmd));
    if (log) json_object_object_add(o, "log", json_object_new_string(log));
    const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID");
    if (aj && at) {
        char job[96];
        snprintf(job, sizeof job, "%s_%s", aj, at);
        json_object_object_add(o, "slurm_job", json_object_new_string(job));
    }
    json_object_object_add(o, "time", json_object_new_string(when));
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    char buf[16384];
    int n = snprintf(buf, sizeof buf, "%s\n", text);
    json_object_put(o);
    if (n < 0 || (size_t)n >= sizeof buf) n = (int)strlen(buf);
    if (fs_mkdir_p(dir, err, sizeof err) || fs_write_atomic(path, buf, (size_t)n, err, sizeof err))
        fprintf(stderr, "sgsweep: cannot record the failure: %s\n", err);
}

/* What an analysis's exit status leaves behind: a failure is recorded
 * (RUN/analysis/failed-ENTRY.json) unless a signal stopped it; a success
 * removes an earlier record. */
static void analysis_finished(const Loaded *L, const SweepAnTask *a, char **argv, int rc, const char *log) {
    char path[SW_PATH * 2];
    sweep_analysis_failed_path(&L->s, an_run(L, a), a, path, sizeof path);
    if (rc == 0) unlink(path);
    else if (!got_signal) record_failure(L, a, argv, rc, log);
}

/* Run analysis task A (output to the terminal and LOG).  Returns sgtrain's
 * exit status. */
static int run_analysis(const Loaded *L, const SweepAnTask *a, const char *log) {
    char **argv = sweep_analyze_argv(&L->s, an_run(L, a), a);
    if (!argv) return die(1, "out of memory");
    int rc = run_child(argv, log);
    analysis_finished(L, a, argv, rc, log);
    sweep_argv_free(argv);
    return rc;
}

static void move_aside(const char *dir, char *aside, size_t n) {
    for (int k = 1;; k++) {
        snprintf(aside, n, "%s.failed-%d", dir, k);
        if (!fs_exists(aside)) break;
    }
}

/* ---- local execution ---------------------------------------------------------------------- */

/* Where local work runs (--jobs, --gpus): SLOTS tasks at once.  With one
 * slot a task's output also goes to the terminal; with more it goes to its
 * log alone.  gpu[s], when given, is slot s's CUDA_VISIBLE_DEVICES, so a
 * GPU named twice takes two tasks at once. */
typedef struct {
    int slots;
    char **gpu;
    int threads; /* OMP_NUM_THREADS for each task; 0: the environment's */
} Places;

/* A slot works through one run at a time: its training task (when that is
 * to run), then the run's analyses in entry order, each started when the
 * one before it has ended, so an analysis always follows its run. */
typedef struct {
    int idx;
    pid_t pid;   /* the running child, 0 when none */
    int task;    /* the run whose work this slot does, -1 when none */
    int an;      /* the running analysis (index into L->a), -1: the training task */
    int next_an; /* the next analysis to consider */
    char **argv;
    char log[SW_PATH * 3];
    char *env[3];
    char env_gpu[96], env_threads[40];
    time_t t0;
    int forwarded; /* the signal has been passed on to the child */
} Slot;

typedef struct {
    Loaded *L;
    const Places *P;
    unsigned states, an_want;
    int fresh;
    AnState *ast; /* the analyses' states when the sweep started */
    int next_task, k, todo, stop, rc;
    int done, failed, skipped, an_done, an_failed, an_skipped, an_blocked;
    char logdir[SW_PATH * 2], anlogdir[SW_PATH * 2 + 16];
} Exec;

/* " on GPU 1: log PATH" for a task of several at once; "" for one at a time */
static const char *slot_where(const Exec *X, const Slot *sl, char *buf, size_t n) {
    if (X->P->slots == 1) return "";
    if (X->P->gpu) snprintf(buf, n, " on GPU %s: log %s", X->P->gpu[sl->idx], sl->log);
    else snprintf(buf, n, ": log %s", sl->log);
    return buf;
}

/* The next piece of work for slot SL: 1 with SL's argv, log and kind set
 * (and the start announced), 0 when the sweep has none left to give. */
static int next_work(Exec *X, Slot *sl) {
    const Loaded *L = X->L;
    const Sweep *s = &L->s;
    char where[SW_PATH * 4];
    for (;;) {
        for (; sl->task >= 0 && sl->next_an < L->na; sl->next_an++) {
            const int j = sl->next_an;
            const SweepAnTask *a = &L->a[j];
            if (a->task != sl->task) continue;
            char id[256];
            an_id(L, a, id, sizeof id);
            if (!(X->an_want >> X->ast[j] & 1)) {
                X->an_skipped += X->ast[j] == AS_DONE;
                X->an_failed += X->ast[j] == AS_FAILED;
                continue;
            }
            AnState now = an_state(L, a);
            if (now == AS_BLOCKED || now == AS_WAITING) {
                X->an_blocked++;
                fprintf(stderr, "sgsweep: %s skipped: its training run %s\n", id,
                        now == AS_BLOCKED ? "failed" : "is not done");
                continue;
            }
            if (now == AS_DONE) {
                X->an_skipped++;
                continue;
            }
            const SweepTask *t = an_run(L, a);
            snprintf(sl->log, sizeof sl->log, "%s/%s-%s-s%ld.log", X->anlogdir, s->analyses[a->entry].name,
                     arm_at(t->arm)->name, t->seed);
            sl->argv = sweep_analyze_argv(s, t, a);
            sl->an = j;
            sl->next_an = j + 1;
            fprintf(stderr, "sgsweep: [%d/%d] %s (%s)%s\n", ++X->k, X->todo, id,
                    now == AS_FAILED ? "rerun of a failed analysis" : "new", slot_where(X, sl, where, sizeof where));
            return 1;
        }
        if (X->next_task >= L->n) return 0;
        const int i = X->next_task++;
        const SweepTask *t = &L->t[i];
        const SweepGroup *G = &s->groups[t->group];
        sl->task = i;
        sl->next_an = 0;
        TaskState st = sweep_task_state(t, NULL);
        if (!((X->states >> st) & 1)) {
            X->skipped += st == TS_DONE;
            X->failed += st == TS_FAILED && !(X->states & FAILED_ONLY);
            continue;
        }
        if (X->fresh && st == TS_FAILED) {
            char aside[sizeof t->dir + 32];
            move_aside(t->dir, aside, sizeof aside);
            if (rename(t->dir, aside)) {
                X->rc = die(1, "%s: cannot move aside to %s: %s", t->dir, aside, strerror(errno));
                X->stop = 1;
                return 0;
            }
            fprintf(stderr, "sgsweep: moved %s aside to %s\n", t->dir, aside);
        }
        snprintf(sl->log, sizeof sl->log, "%s/%s-%s-s%ld.log", X->logdir, G->name, arm_at(t->arm)->name, t->seed);
        sl->argv = sweep_train_argv(s, t);
        sl->an = -1;
        fprintf(stderr, "sgsweep: [%d/%d] %s %s seed %ld (%s)%s\n", ++X->k, X->todo, G->name, arm_at(t->arm)->name,
                t->seed, st == TS_PENDING ? "new" : st == TS_FAILED ? "rerun of a failed run" : "resuming",
                slot_where(X, sl, where, sizeof where));
        return 1;
    }
}

/* The end of slot SL's child, with exit status R (-1: it did not start). */
static void work_ended(Exec *X, Slot *sl, int r) {
    const Loaded *L = X->L;
    const int several = X->P->slots > 1;
    const long secs = (long)(time(NULL) - sl->t0);
    char id[256];
    if (sl->an >= 0) {
        const SweepAnTask *a = &L->a[sl->an];
        an_id(L, a, id, sizeof id);
        if (sl->argv) analysis_finished(L, a, sl->argv, r, sl->log);
        if (r == 0) {
            X->an_done++;
            if (several) fprintf(stderr, "sgsweep: %s done in %ld s\n", id, secs);
        } else if (got_signal) {
            fprintf(stderr, "sgsweep: interrupted; %s is not done. Run the same command again to redo it.\n", id);
            X->rc = 75;
        } else {
            X->an_failed++;
            fprintf(stderr, "sgsweep: %s failed (exit %d); log %s\n", id, r, sl->log);
        }
    } else {
        const SweepTask *t = &L->t[sl->task];
        task_id(L, t, id, sizeof id);
        if (r == 0) {
            X->done++;
            if (several) fprintf(stderr, "sgsweep: %s done in %ld s\n", id, secs);
        } else if (r == 75 || got_signal) {
            fprintf(stderr, "sgsweep: interrupted; %s checkpointed. Run the same command again to resume.\n", t->dir);
            X->rc = 75;
            X->stop = 1;
            sl->task = -1; /* an interrupted run's analyses wait for the next sweep */
        } else {
            X->failed++;
            fprintf(stderr, "sgsweep: %s %s seed %ld failed (exit %d); log %s\n", L->s.groups[t->group].name,
                    arm_at(t->arm)->name, t->seed, r, sl->log);
        }
    }
    if (got_signal) X->stop = 1;
    sweep_argv_free(sl->argv);
    sl->argv = NULL;
    sl->pid = 0;
}

/* Start SL's work: run it here and now with one slot, else in the
 * background.  Returns 1 when a child is left running. */
static int start_work(Exec *X, Slot *sl) {
    int k = 0;
    if (X->P->gpu) {
        snprintf(sl->env_gpu, sizeof sl->env_gpu, "CUDA_VISIBLE_DEVICES=%s", X->P->gpu[sl->idx]);
        sl->env[k++] = sl->env_gpu;
    }
    if (X->P->threads) {
        snprintf(sl->env_threads, sizeof sl->env_threads, "OMP_NUM_THREADS=%d", X->P->threads);
        sl->env[k++] = sl->env_threads;
    }
    sl->env[k] = NULL;
    sl->t0 = time(NULL);
    sl->forwarded = 0;
    if (X->P->slots == 1) {
        work_ended(X, sl, sl->argv ? proc_run_tee(sl->argv, sl->log, sl->env, &got_signal) : -1);
        return 0;
    }
    pid_t pid = sl->argv ? proc_spawn(sl->argv, sl->log, sl->env) : -1;
    if (pid < 0) {
        work_ended(X, sl, -1);
        return 0;
    }
    sl->pid = pid;
    return 1;
}

/* Local execution: every training task in STATES (failed ones when
 * RERUN), each followed by its run's analyses (those not run yet; when
 * RERUN, the failed ones and those of failed runs), in task order, P->slots
 * at a time.  Ctrl-C asks every running task to checkpoint. */
static int run_local(Loaded *L, int rerun, int fresh, const Places *P) {
    const Sweep *s = &L->s;
    Exec X = {.L = L, .P = P, .fresh = fresh};
    X.states = rerun ? FAILED_ONLY : RUNNABLE;
    X.an_want = rerun ? AN_RERUN : AN_SUBMIT;
    char err[512];
    snprintf(X.logdir, sizeof X.logdir, "%s/%s", s->out, s->log_dir);
    snprintf(X.anlogdir, sizeof X.anlogdir, "%s/analysis", X.logdir);
    if (fs_mkdir_p(X.logdir, err, sizeof err) || (L->na && fs_mkdir_p(X.anlogdir, err, sizeof err)))
        return die(1, "%s", err);
    install_signals();
    X.ast = calloc((size_t)L->na + 1, sizeof *X.ast);
    Slot *slots = calloc((size_t)P->slots, sizeof *slots);
    if (!X.ast || !slots) {
        free(X.ast), free(slots);
        return die(1, "out of memory");
    }
    for (int i = 0; i < L->n; i++) X.todo += (X.states >> sweep_task_state(&L->t[i], NULL)) & 1;
    for (int j = 0; j < L->na; j++) {
        X.ast[j] = an_state(L, &L->a[j]);
        X.todo += (X.an_want >> X.ast[j] & 1) && (rerun || X.ast[j] != AS_BLOCKED);
    }
    for (int i = 0; i < P->slots; i++) slots[i] = (Slot){.idx = i, .task = -1};
    int running = 0;
    for (;;) {
        for (int i = 0; i < P->slots; i++)
            while (!slots[i].pid && !X.stop && !got_signal && next_work(&X, &slots[i]))
                running += start_work(&X, &slots[i]);
        if (!running) break;
        /* Several children: poll, so that a signal that lands between the
         * check and the wait is still passed on within 50 ms. */
        for (int i = 0; got_signal && i < P->slots; i++)
            if (slots[i].pid && !slots[i].forwarded) {
                kill(slots[i].pid, got_signal == SIGUSR1 ? SIGUSR1 : SIGTERM);
                slots[i].forwarded = 1;
            }
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w == 0 || (w < 0 && errno == EINTR)) {
            nanosleep(&(struct timespec){0, 50000000}, NULL);
            continue;
        }
        if (w < 0) break; /* no child left: cannot happen while running > 0 */
        for (int i = 0; i < P->slots; i++)
            if (slots[i].pid == w) {
                running--;
                work_ended(&X, &slots[i], proc_exit_code(st));
            }
    }
    free(slots);
    free(X.ast);
    if (!X.rc && got_signal) { /* every running task ended on its own: the rest never started */
        fprintf(stderr, "sgsweep: interrupted. Run the same command again to go on.\n");
        X.rc = 75;
    }
    if (X.rc) return X.rc;
    fprintf(stderr, "sgsweep: %d run now, %d already done, %d failed\n", X.done, X.skipped, X.failed);
    if (L->na)
        fprintf(stderr, "sgsweep: analyses: %d run now, %d already done, %d failed, %d skipped (their run failed)\n",
                X.an_done, X.an_skipped, X.an_failed, X.an_blocked);
    int rr = run_report(L);
    int bad = X.failed || X.an_failed || X.an_blocked;
    if (bad) fprintf(stderr, "sgsweep: rerun the failed tasks with: sgsweep rerun %s --local\n", s->path);
    return bad ? 1 : rr;
}

static int cmd_status(Loaded *L) {
    const Sweep *s = &L->s;
    QEntry *q = NULL;
    int nq = squeue_entries(s, &q);
    int counts[7] = {0}, acounts[7] = {0};
    printf("%-34s %-12s %8s  %s\n", "id", "state", "step", "run directory");
    for (int i = 0; i < L->n; i++) {
        const SweepTask *t = &L->t[i];
        long step;
        TaskState st = sweep_task_state(t, &step);
        const char *name = task_state_names[st];
        int c = st;
        const QEntry *qe = st != TS_DONE ? queued(q, nq, s->groups[t->group].name, t->index) : NULL;
        if (qe) {
            int running = !strcmp(qe->state, "RUNNING");
            name = running ? "running" : "queued";
            c = running ? 5 : 6;
        }
        counts[c]++;
        char id[256];
        task_id(L, t, id, sizeof id);
        printf("%-34s %-12s %8ld  %s\n", id, name, step, t->dir);
    }
    for (int j = 0; j < L->na; j++) {
        const SweepAnTask *a = &L->a[j];
        AnState st = an_state(L, a);
        const char *name = an_state_names[st];
        int c = st;
        char jn[160], id[256];
        an_job_name(L, a, jn, sizeof jn);
        const QEntry *qe = st != AS_DONE ? queued(q, nq, jn, a->index) : NULL;
        if (qe) {
            int running = !strcmp(qe->state, "RUNNING");
            name = running ? "running" : "queued";
            c = running ? 5 : 6;
        }
        acounts[c]++;
        an_id(L, a, id, sizeof id);
        printf("%-34s %-12s %8s  %s\n", id, name, "-", an_run(L, a)->dir);
    }
    printf("\n%d done, %d running, %d queued, %d interrupted, %d started, %d failed, %d pending%s\n", counts[TS_DONE],
           counts[5], counts[6], counts[TS_INTERRUPTED], counts[TS_STARTED], counts[TS_FAILED], counts[TS_PENDING],
           nq < 0 ? " (no squeue: states from the run directories only)" : "");
    if (L->na)
        printf("analyses: %d done, %d running, %d queued, %d failed, %d pending, %d waiting for their run, "
               "%d blocked (their run failed)\n",
               acounts[AS_DONE], acounts[5], acounts[6], acounts[AS_FAILED], acounts[AS_PENDING], acounts[AS_WAITING],
               acounts[AS_BLOCKED]);
    free(q);
    return counts[TS_FAILED] || acounts[AS_FAILED] ? 1 : 0;
}

/* sbatch the selected training tasks (TSEL) and analysis tasks (ASEL), then
 * the report job.  A task already in squeue (queued or running) is never
 * submitted twice. */
static int submit(Loaded *L, unsigned char *tsel, unsigned char *asel) {
    const Sweep *s = &L->s;
    char logdir[SW_PATH * 2], anlogdir[SW_PATH * 2 + 16], err[512];
    snprintf(logdir, sizeof logdir, "%s/%s", s->out, s->log_dir);
    snprintf(anlogdir, sizeof anlogdir, "%s/analysis", logdir);
    if (fs_mkdir_p(logdir, err, sizeof err) || (L->na && fs_mkdir_p(anlogdir, err, sizeof err))) return die(1, "%s", err);
    QEntry *q = NULL;
    int nq = squeue_entries(s, &q);
    for (int i = 0; i < L->n; i++)
        if (queued(q, nq, s->groups[L->t[i].group].name, L->t[i].index)) tsel[i] = 0;
    for (int j = 0; j < L->na; j++) {
        char jn[160];
        an_job_name(L, &L->a[j], jn, sizeof jn);
        if (queued(q, nq, jn, L->a[j].index)) asel[j] = 0;
    }
    Jobs J = {0};
    int rc = build_jobs(L, tsel, asel, q, nq < 0 ? 0 : nq, &J, stdout);
    free(q);
    char **ids = calloc((size_t)J.n + 1, sizeof *ids);
    if (!rc && !ids) rc = die(1, "out of memory");
    int arrays = 0;
    for (int k = 0; !rc && k < J.n; k++) {
        const Job *j = &J.v[k];
        Argv a = {0};
        job_argv(L, &J, k, ids, &a);
        char out[512];
        int r = capture(a.v, out, sizeof out);
        if (r != 0) {
            show_argv(a.v, stderr);
            argv_free(&a);
            rc = die(1, "sbatch failed for %s%s (exit %d)",
                     j->kind == JOB_TRAIN ? "group " : j->kind == JOB_ANALYSIS ? "analysis " : "the report job",
                     j->kind == JOB_TRAIN ? s->groups[j->group].name
                                          : j->kind == JOB_ANALYSIS ? s->analyses[j->entry].name : "",
                     r);
            break;
        }
        argv_free(&a);
        char *semi = strpbrk(out, ";\n");
        if (semi) *semi = 0;
        ids[k] = strdup(out);
        if (!ids[k]) {
            rc = die(1, "out of memory");
            break;
        }
        if (j->kind == JOB_TRAIN) printf("%s: array job %s (%d tasks)\n", s->groups[j->group].name, out, j->ntasks);
        else if (j->kind == JOB_ANALYSIS) {
            printf("analyze:%s: array job %s (%d tasks", s->analyses[j->entry].name, out, j->ntasks);
            if (j->dep >= 0) printf(", each after its training task in job %s)\n", ids[j->dep]);
            else if (j->dep_queued[0]) printf(", each after its training task in queued job %s)\n", j->dep_queued);
            else printf(", their runs are done)\n");
        } else
            printf("report: job %s%s\n", out, arrays ? " (after the arrays)" : " (nothing left to run)");
        arrays += j->kind != JOB_REPORT;
        fflush(stdout);
    }
    for (int k = 0; ids && k < J.n; k++) free(ids[k]);
    free(ids);
    jobs_free(&J);
    return rc;
}

static int cmd_task(Loaded *L, const char *group, long index) {
    const Sweep *s = &L->s;
    const SweepTask *t = NULL;
    for (int i = 0; i < L->n; i++)
        if (!strcmp(s->groups[L->t[i].group].name, group) && L->t[i].index == index) t = &L->t[i];
    if (!t) return die(2, "no task %ld in group %s", index, group);
    TaskState st = sweep_task_state(t, NULL);
    if (st == TS_DONE) {
        printf("sgsweep: %s is done (valid result.json): nothing to do\n", t->dir);
        return 0;
    }
    const SweepGroup *G = &s->groups[t->group];
    char **train = sweep_train_argv(s, t);
    if (!train) return die(1, "out of memory");
    Argv a = {0};
    int ntasks = (G->res.nodes ? G->res.nodes : 1) * (G->res.gpus_per_node > 0 ? G->res.gpus_per_node : 1);
    if (ntasks > 1 && getenv("SLURM_JOB_ID")) {
        /* one rank per GPU, started by Slurm (Debian's Open MPI speaks PMIx) */
        add(&a, "srun");
        add(&a, "--mpi=pmix");
        add(&a, "--ntasks=%d", ntasks);
    }
    for (char **p = train; *p; p++) add(&a, "%s", *p);
    sweep_argv_free(train);
    printf("sgsweep: %s %s seed %ld (restart %s): ", G->name, arm_at(t->arm)->name, t->seed,
           getenv("SLURM_RESTART_COUNT") ? getenv("SLURM_RESTART_COUNT") : "0");
    show_argv(a.v, stdout);
    fflush(stdout);
    install_signals();
    int rc = run_child(a.v, NULL);
    argv_free(&a);
    if (rc == 75 && getenv("SLURM_JOB_ID")) {
        /* checkpointed at the warning signal: put this task back in the queue */
        char job[128];
        const char *aj = getenv("SLURM_ARRAY_JOB_ID"), *at = getenv("SLURM_ARRAY_TASK_ID");
        if (aj && at) snprintf(job, sizeof job, "%s_%s", aj, at);
        else snprintf(job, sizeof job, "%s", getenv("SLURM_JOB_ID"));
        printf("sgsweep: checkpointed; requeueing %s\n", job);
        fflush(stdout);
        char *req[] = {"scontrol", "requeue", job, NULL};
        int r = run_child(req, NULL);
        if (r != 0) return die(1, "scontrol requeue %s failed (exit %d); run the sweep again to resume", job, r);
        return 0;
    }
    return rc;
}

/* One analysis task: analyses entry ENTRY on the run with array task id INDEX. */
static int cmd_task_analysis(Loaded *L, const char *entry, long index) {
    const Sweep *s = &L->s;
    int e = -1;
    for (int i = 0; i < s->n_analyses; i++)
        if (!strcmp(s->analyses[i].name, entry)) e = i;
    if (e < 0) {
        char known[1024] = "";
        for (int i = 0; i < s->n_analyses; i++) {
            size_t len = strlen(known);
            snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", s->analyses[i].name);
        }
        return die(2, "no analysis named %s in %s (analyses: %s)", entry, s->path, known[0] ? known : "none");
    }
    const SweepAnTask *a = NULL;
    for (int j = 0; j < L->na; j++)
        if (L->a[j].entry == e && L->a[j].index == index) a = &L->a[j];
    if (!a) return die(2, "no task %ld in analysis %s", index, entry);
    const SweepTask *t = an_run(L, a);
    char id[256];
    an_id(L, a, id, sizeof id);
    AnState st = an_state(L, a);
    if (st == AS_DONE) {
        printf("sgsweep: %s is done (its files in %s/analysis are newer than the checkpoint): nothing to do\n", id,
               t->dir);
        return 0;
    }
    if (st == AS_BLOCKED || st == AS_WAITING)
        return die(1, "%s: its training run %s is %s, not done: nothing to analyse yet", id, t->dir,
                   task_state_names[sweep_task_state(t, NULL)]);
    char **argv = sweep_analyze_argv(s, t, a);
    if (!argv) return die(1, "out of memory");
    printf("sgsweep: %s (restart %s): ", id, getenv("SLURM_RESTART_COUNT") ? getenv("SLURM_RESTART_COUNT") : "0");
    show_argv(argv, stdout);
    fflush(stdout);
    sweep_argv_free(argv);
    install_signals();
    return run_analysis(L, a, NULL);
}

/* --jobs N: N tasks at once, 1 to SLOTS_MAX */
enum { SLOTS_MAX = 256 };
static int parse_jobs(const char *v, Places *P) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 1 || n > SLOTS_MAX)
        return die(2, "--jobs: expected a whole number of tasks at once, 1 to %d, got \"%s\"", SLOTS_MAX, v), 1;
    P->slots = (int)n;
    return 0;
}

/* --gpus LIST: comma-separated CUDA device names (indices, or GPU-/MIG-
 * UUIDs), one task at a time on each entry; they become
 * CUDA_VISIBLE_DEVICES, so only letters, digits, '-' and ':' pass. */
static int parse_gpus(const char *v, Places *P) {
    int n = 1;
    for (const char *c = v; *c; c++) n += *c == ',';
    if (n > SLOTS_MAX) return die(2, "--gpus: %d entries; at most %d tasks run at once", n, SLOTS_MAX), 1;
    size_t len = strlen(v);
    char **g = malloc(sizeof *g * (size_t)n + len + 1);
    if (!g) return die(1, "out of memory"), 1;
    char *text = memcpy((char *)(g + n), v, len + 1);
    int k = 0;
    for (char *tok = text, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = 0;
        size_t span = strspn(tok, "0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-:");
        if (!*tok || tok[span] || span > 80) {
            free(g);
            return die(2, "--gpus: expected CUDA device numbers or UUIDs separated by commas (such as 0,1,2,3), got "
                          "\"%s\"",
                       v),
                   1;
        }
        g[k++] = tok;
    }
    P->gpu = g;
    P->slots = k;
    return 0;
}

int main(int argc, char **argv) {
    find_self();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1], *path = NULL, *group = NULL, *analysis = NULL, *jobs = NULL, *gpus = NULL;
    int local = 0, fresh = 0;
    long index = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--local")) local = 1;
        else if (!strcmp(argv[i], "--fresh")) fresh = 1;
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) jobs = argv[++i];
        else if (!strcmp(argv[i], "--gpus") && i + 1 < argc) gpus = argv[++i];
        else if (!strcmp(argv[i], "--group") && i + 1 < argc) group = argv[++i];
        else if (!strcmp(argv[i], "--analysis") && i + 1 < argc) analysis = argv[++i];
        else if (!strcmp(argv[i], "--index") && i + 1 < argc) {
            char *end;
            index = strtol(argv[++i], &end, 10);
            if (*end || index < 0) return die(2, "--index: expected a non-negative integer, got \"%s\"", argv[i]);
        } else if (i + 1 == argc && (!strcmp(argv[i], "--group") || !strcmp(argv[i], "--analysis") ||
                                     !strcmp(argv[i], "--index") || !strcmp(argv[i], "--jobs") ||
                                     !strcmp(argv[i], "--gpus")))
            return die(2, "%s needs a value (see sgsweep --help)", argv[i]);
        else if (argv[i][0] == '-') return die(2, "unknown option %s (see sgsweep --help)", argv[i]);
        else if (!path) path = argv[i];
        else return die(2, "one sweep file at a time (got %s and %s)", path, argv[i]);
    }
    static const char *cmds[] = {"plan", "run", "status", "rerun", "submit", "task", "report"};
    int known = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) known |= !strcmp(cmd, cmds[i]);
    if (!known) return die(2, "unknown command \"%s\" (plan, run, status, rerun, submit, task, report)", cmd);
    if (!path) return die(2, "%s: which sweep file? (sgsweep %s SWEEP.yaml)", cmd, cmd);
    if (!strcmp(cmd, "run") && !local)
        return die(2, "run: say where: --local runs here; on a cluster use sbatch slurm/grid.sh %s", path);
    Places places = {.slots = 1};
    if ((jobs || gpus) && !((!strcmp(cmd, "run") || !strcmp(cmd, "rerun")) && local))
        return die(2, "--jobs and --gpus are for run --local and rerun --local (on a cluster, Slurm places the tasks)");
    if (jobs && gpus)
        return die(2, "--jobs or --gpus, not both: with --gpus one task runs on each GPU listed (name a GPU twice "
                      "to run two tasks on it)");
    if (jobs && parse_jobs(jobs, &places)) return 2;
    if (gpus && parse_gpus(gpus, &places)) return 2;
    if (places.slots > 1 && !getenv("OMP_NUM_THREADS")) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        places.threads = cores / places.slots > 1 ? (int)(cores / places.slots) : 1;
    }
    if (!strcmp(cmd, "task") && (!group == !analysis || index < 0))
        return die(2, "task needs --group NAME --index N (a training task) or --analysis NAME --index N (an analysis)");
    Loaded L;
    int rc = load(&L, path);
    if (rc) return rc;
    if (!strcmp(cmd, "plan")) rc = cmd_plan(&L);
    else if (!strcmp(cmd, "run")) rc = run_local(&L, 0, 0, &places);
    else if (!strcmp(cmd, "status")) rc = cmd_status(&L);
    else if (!strcmp(cmd, "rerun")) {
        int nf = 0;
        for (int i = 0; i < L.n; i++) nf += sweep_task_state(&L.t[i], NULL) == TS_FAILED;
        for (int j = 0; j < L.na; j++) nf += an_state(&L, &L.a[j]) == AS_FAILED;
        if (!nf) {
            printf("sgsweep: no failed task\n");
            rc = 0;
        } else if (local) rc = run_local(&L, 1, fresh, &places);
        else {
            unsigned char *tsel = select_states(&L, FAILED_ONLY), *asel = select_an_states(&L, AN_RERUN);
            if (!tsel || !asel) rc = die(1, "out of memory");
            for (int i = 0; fresh && !rc && i < L.n; i++) {
                const SweepTask *t = &L.t[i];
                if (!tsel[i]) continue;
                char aside[sizeof t->dir + 32];
                move_aside(t->dir, aside, sizeof aside);
                if (rename(t->dir, aside)) rc = die(1, "%s: cannot move aside: %s", t->dir, strerror(errno));
                else printf("sgsweep: moved %s aside to %s\n", t->dir, aside);
            }
            if (!rc) rc = submit(&L, tsel, asel);
            free(tsel), free(asel);
        }
    } else if (!strcmp(cmd, "submit")) {
        unsigned char *tsel = select_states(&L, RUNNABLE), *asel = select_an_states(&L, AN_SUBMIT);
        rc = tsel && asel ? submit(&L, tsel, asel) : die(1, "out of memory");
        free(tsel), free(asel);
    } else if (!strcmp(cmd, "task")) rc = group ? cmd_task(&L, group, index) : cmd_task_analysis(&L, analysis, index);
    else rc = run_report(&L);
    unload(&L);
    free(places.gpu);
    return rc;
}
