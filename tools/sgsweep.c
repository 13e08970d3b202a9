/* sgsweep: run every training run of a sweep file, on this machine or as
 * Slurm array jobs, then the report (docs/sweeps.md).
 *
 *   sgsweep plan   SWEEP            the task table and the exact sbatch commands (nothing runs)
 *   sgsweep run    SWEEP --local    run the tasks here in order: skip done, resume interrupted
 *   sgsweep status SWEEP            done / running / pending / interrupted / failed per task
 *   sgsweep rerun  SWEEP [--local] [--fresh]   only the failed tasks (locally, or as arrays)
 *   sgsweep submit SWEEP            sbatch one array per group and the report job (slurm/grid.sh)
 *   sgsweep task   SWEEP --group G --index I   one array task (slurm/task.sh)
 *   sgsweep report SWEEP            sgreport on the sweep's runs
 *
 * Nothing from the sweep file goes through a shell: commands are argv
 * arrays given to execvp, and names are restricted to a safe set; the
 * commands shown by plan are shell-quoted for copying. */
#include <errno.h>
#include <fcntl.h>
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
#include "sweep.h"

static const char USAGE[] =
    "usage: sgsweep COMMAND SWEEP.yaml [options]\n"
    "  plan                      the task table and the sbatch commands it would submit (a dry run)\n"
    "  run --local               run every task on this machine, in order; finished tasks are\n"
    "                            skipped, interrupted ones resumed; then the report\n"
    "  status                    each task's state, from its run directory (and squeue when present)\n"
    "  rerun [--local] [--fresh] only the failed tasks (--fresh: move their directories aside and\n"
    "                            start over instead of resuming from the last good checkpoint)\n"
    "  submit                    sbatch one array job per group and a report job (what slurm/grid.sh runs)\n"
    "  task --group G --index I  run one task (what slurm/task.sh runs in each array task)\n"
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

/* Run ARGV, its output to the terminal and, when LOG is given, to LOG too.
 * SIGINT/SIGTERM here become SIGTERM for the child, SIGUSR1 stays SIGUSR1:
 * sgtrain checkpoints on either and exits 75.  Returns the exit status
 * (128+N for a signal), -1 if it could not start. */
static int run_child(char **argv, const char *log) {
    int pfd[2] = {-1, -1};
    if (log && pipe(pfd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C reaches the parent, which asks the child to checkpoint */
        if (log) {
            dup2(pfd[1], 1);
            dup2(pfd[1], 2);
            close(pfd[0]);
            close(pfd[1]);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "sgsweep: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    FILE *lf = NULL;
    if (log) {
        close(pfd[1]);
        lf = fopen(log, "a");
    }
    int forwarded = 0;
    char buf[8192];
    for (;;) {
        if (got_signal && !forwarded) {
            kill(pid, got_signal == SIGUSR1 ? SIGUSR1 : SIGTERM);
            forwarded = 1;
        }
        if (log) {
            ssize_t k = read(pfd[0], buf, sizeof buf);
            if (k > 0) {
                fwrite(buf, 1, (size_t)k, stderr);
                if (lf) fwrite(buf, 1, (size_t)k, lf);
                continue;
            }
            if (k < 0 && errno == EINTR) continue;
            close(pfd[0]);
            log = NULL; /* EOF: the child closed its output; now wait for it */
        }
        int st;
        pid_t w = waitpid(pid, &st, 0);
        if (w < 0 && errno == EINTR) continue;
        if (lf) fclose(lf);
        if (w < 0) return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

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
    SweepTask *t;
    int n;
} Loaded;

static int load(Loaded *L, const char *path) {
    char err[1024];
    if (sweep_load(&L->s, path, err, sizeof err)) return die(2, "%s", err);
    if (sweep_tasks(&L->s, &L->t, &L->n, err, sizeof err)) {
        sweep_free(&L->s);
        return die(1, "%s", err);
    }
    return 0;
}

static void unload(Loaded *L) {
    free(L->t);
    sweep_free(&L->s);
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
    const char *sweep_abs = jp.sweep, *script = jp.script, *logs = jp.logs, *cwd = jp.cwd;
    add(a, "sbatch");
    add(a, "--parsable");
    add(a, "--job-name=%s.%s", s->name, G->name);
    if (G->throttle) add(a, "--array=%s%%%d", indices, G->throttle);
    else add(a, "--array=%s", indices);
    add(a, "--requeue");
    add(a, "--signal=B:USR1@%d", s->signal_margin);
    add(a, "--output=%s/%s-%%A_%%a.out", logs, G->name);
    add(a, "--open-mode=append"); /* a requeued task adds to its log instead of erasing it */
    add(a, "--chdir=%s", cwd);
    add(a, "--export=ALL,SG_SGSWEEP=%s/sgsweep", self_dir);
    add_resources(a, &G->res);
    add(a, "%s", script);
    add(a, "%s", sweep_abs);
    add(a, "%s", G->name);
}

static void report_sbatch(const Loaded *L, const char *deps, Argv *a) {
    const Sweep *s = &L->s;
    JobPaths jp;
    job_paths(s, "report.sh", &jp);
    const char *sweep_abs = jp.sweep, *script = jp.script, *logs = jp.logs, *cwd = jp.cwd;
    add(a, "sbatch");
    add(a, "--parsable");
    add(a, "--job-name=%s.report", s->name);
    /* afterany: the report runs on whatever finished; a failed task does
     * not hold it back, and it names the failure */
    if (deps && *deps) add(a, "--dependency=afterany:%s", deps);
    add(a, "--kill-on-invalid-dep=yes");
    add(a, "--output=%s/report-%%j.out", logs);
    add(a, "--chdir=%s", cwd);
    add(a, "--export=ALL,SG_SGSWEEP=%s/sgsweep", self_dir);
    Resources r = s->report_res;
    if (!r.cpus_per_task) r.cpus_per_task = 1;
    add_resources(a, &r);
    add(a, "%s", script);
    add(a, "%s", sweep_abs);
}

/* Slurm list ("0-3,7") of the group's selected tasks; returns how many. */
static int index_list(const Loaded *L, int g, const unsigned char *sel, char *out, size_t n) {
    out[0] = 0;
    int count = 0, start = -1, prev = -2;
    size_t k = 0;
    for (int i = 0; i <= L->n; i++) {
        int idx = i < L->n && L->t[i].group == g && sel[i] ? L->t[i].index : -1;
        if (idx >= 0 && idx == prev + 1) {
            prev = idx;
            count++;
            continue;
        }
        if (start >= 0 && k < n) {
            k += (size_t)snprintf(out + k, n - k, k ? ",%d" : "%d", start);
            if (prev > start && k < n) k += (size_t)snprintf(out + k, n - k, "-%d", prev);
        }
        if (idx >= 0) {
            start = prev = idx;
            count++;
        } else
            start = -1, prev = -2;
    }
    return count;
}

/* sel[i] = task i is in one of STATES (bitmask of TaskState). */
static unsigned char *select_states(const Loaded *L, unsigned states) {
    unsigned char *sel = calloc((size_t)L->n + 1, 1);
    for (int i = 0; sel && i < L->n; i++) sel[i] = (states >> sweep_task_state(&L->t[i], NULL)) & 1;
    return sel;
}

#define RUNNABLE ((1u << TS_PENDING) | (1u << TS_STARTED) | (1u << TS_INTERRUPTED))
#define FAILED_ONLY (1u << TS_FAILED)

/* ---- commands ---------------------------------------------------------------------------- */

static void res_text(const Resources *r, char *out, size_t n) {
    snprintf(out, n, "%dx%dgpu %dcpu%s%s%s%s", r->nodes ? r->nodes : 1, r->gpus_per_node,
             r->cpus_per_task ? r->cpus_per_task : 1, r->mem[0] ? " " : "", r->mem, r->time[0] ? " " : "", r->time);
}

static int cmd_plan(Loaded *L) {
    const Sweep *s = &L->s;
    int counts[5] = {0};
    printf("sweep %s: %d training tasks in %d groups -> %s\n\n", s->name, L->n, s->n_groups, s->out);
    printf("%-32s %-6s %-6s %-10s %5s %6s  %-24s %-12s %s\n", "id", "kind", "tier", "arm", "seed", "array",
           "resources", "depends on", "status");
    for (int i = 0; i < L->n; i++) {
        const SweepTask *t = &L->t[i];
        const SweepGroup *G = &s->groups[t->group];
        char id[256], res[128];
        snprintf(id, sizeof id, "%s/%s-s%ld", G->name, arm_at(t->arm)->name, t->seed);
        res_text(&G->res, res, sizeof res);
        long step;
        TaskState st = sweep_task_state(t, &step);
        counts[st]++;
        printf("%-32s %-6s %-6s %-10s %5ld %6d  %-24s %-12s %s", id, "train", G->tier, arm_at(t->arm)->name, t->seed,
               t->index, res, "-", task_state_names[st]);
        if (st == TS_INTERRUPTED || st == TS_STARTED) printf(" (step %ld)", step);
        putchar('\n');
    }
    printf("%-32s %-6s %-6s %-10s %5s %6s  %-24s %-12s %s\n", "report", "report", "-", "-", "-", "-", "1x0gpu 1cpu",
           "all training", "-");
    printf("\n%d done, %d failed, %d interrupted, %d started, %d pending\n", counts[TS_DONE], counts[TS_FAILED],
           counts[TS_INTERRUPTED], counts[TS_STARTED], counts[TS_PENDING]);
    printf("\nsbatch commands (sgsweep submit; finished and failed tasks are left out):\n");
    char deps[4096] = "";
    unsigned char *sel = select_states(L, RUNNABLE);
    for (int g = 0; sel && g < s->n_groups; g++) {
        char list[65536];
        if (!index_list(L, g, sel, list, sizeof list)) {
            printf("# %s: nothing to run\n", s->groups[g].name);
            continue;
        }
        Argv a = {0};
        group_sbatch(L, g, list, &a);
        show_argv(a.v, stdout);
        argv_free(&a);
        size_t k = strlen(deps);
        snprintf(deps + k, sizeof deps - k, "%sJOBID_OF_%s", k ? ":" : "", s->groups[g].name);
    }
    free(sel);
    Argv a = {0};
    report_sbatch(L, deps, &a);
    show_argv(a.v, stdout);
    argv_free(&a);
    return 0;
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

/* Local execution: every task in STATES, in order. */
static int run_local(Loaded *L, unsigned states, int fresh) {
    const Sweep *s = &L->s;
    char logdir[SW_PATH * 2], err[512];
    snprintf(logdir, sizeof logdir, "%s/%s", s->out, s->log_dir);
    if (fs_mkdir_p(logdir, err, sizeof err)) return die(1, "%s", err);
    install_signals();
    int todo = 0, done = 0, failed = 0, skipped = 0;
    for (int i = 0; i < L->n; i++) todo += (states >> sweep_task_state(&L->t[i], NULL)) & 1;
    int k = 0;
    for (int i = 0; i < L->n; i++) {
        const SweepTask *t = &L->t[i];
        const SweepGroup *G = &s->groups[t->group];
        TaskState st = sweep_task_state(t, NULL);
        if (!((states >> st) & 1)) {
            skipped += st == TS_DONE;
            failed += st == TS_FAILED && !(states & FAILED_ONLY);
            continue;
        }
        k++;
        if (fresh && st == TS_FAILED) {
            char aside[sizeof t->dir + 32];
            for (int n = 1;; n++) {
                snprintf(aside, sizeof aside, "%s.failed-%d", t->dir, n);
                if (!fs_exists(aside)) break;
            }
            if (rename(t->dir, aside)) return die(1, "%s: cannot move aside to %s: %s", t->dir, aside, strerror(errno));
            fprintf(stderr, "sgsweep: moved %s aside to %s\n", t->dir, aside);
        }
        fprintf(stderr, "sgsweep: [%d/%d] %s %s seed %ld (%s)\n", k, todo, G->name, arm_at(t->arm)->name, t->seed,
                st == TS_PENDING ? "new" : st == TS_FAILED ? "rerun of a failed run" : "resuming");
        char **argv = sweep_train_argv(s, t);
        char log[SW_PATH * 3];
        snprintf(log, sizeof log, "%s/%s-%s-s%ld.log", logdir, G->name, arm_at(t->arm)->name, t->seed);
        int rc = argv ? run_child(argv, log) : -1;
        sweep_argv_free(argv);
        if (rc == 0) done++;
        else if (rc == 75 || got_signal) {
            fprintf(stderr, "sgsweep: interrupted; %s checkpointed. Run the same command again to resume.\n", t->dir);
            return 75;
        } else {
            failed++;
            fprintf(stderr, "sgsweep: %s %s seed %ld failed (exit %d); log %s\n", G->name, arm_at(t->arm)->name,
                    t->seed, rc, log);
        }
    }
    fprintf(stderr, "sgsweep: %d run now, %d already done, %d failed\n", done, skipped, failed);
    int rr = run_report(L);
    if (failed) fprintf(stderr, "sgsweep: rerun the failed tasks with: sgsweep rerun %s --local\n", s->path);
    return failed ? 1 : rr;
}

/* squeue's view: state of array task (group, index), or NULL. */
typedef struct {
    char name[160];
    int lo, hi;
    char state[32];
} QEntry;

static int squeue_entries(const Sweep *s, QEntry **out) {
    *out = NULL;
    char *argv[] = {"squeue", "-h", "-o", "%j|%K|%T", NULL};
    static char buf[1 << 20];
    if (capture_q(argv, buf, sizeof buf, 1) != 0) return -1; /* no cluster here: directories only */
    int n = 0, cap = 0;
    size_t plen = strlen(s->name);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *b1 = strchr(line, '|'), *b2 = b1 ? strchr(b1 + 1, '|') : NULL;
        if (!b2 || strncmp(line, s->name, plen) || line[plen] != '.') continue;
        *b1 = *b2 = 0;
        /* %K: "3", "0-5%2", "1,4-6" or "N/A" */
        char *pct = strchr(b1 + 1, '%');
        if (pct) *pct = 0;
        for (char *r = b1 + 1; r && *r;) {
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
                snprintf((*out)[n].name, sizeof (*out)[n].name, "%s", line + plen + 1);
                (*out)[n].lo = lo;
                (*out)[n].hi = hi;
                snprintf((*out)[n].state, sizeof (*out)[n].state, "%s", b2 + 1);
                n++;
            }
            r = comma ? comma + 1 : NULL;
        }
    }
    return n;
}

static int cmd_status(Loaded *L) {
    const Sweep *s = &L->s;
    QEntry *q = NULL;
    int nq = squeue_entries(s, &q);
    int counts[7] = {0};
    printf("%-32s %-12s %8s  %s\n", "id", "state", "step", "run directory");
    for (int i = 0; i < L->n; i++) {
        const SweepTask *t = &L->t[i];
        const SweepGroup *G = &s->groups[t->group];
        long step;
        TaskState st = sweep_task_state(t, &step);
        const char *name = task_state_names[st];
        int c = st;
        if (st != TS_DONE)
            for (int k = 0; k < nq; k++)
                if (!strcmp(q[k].name, G->name) && t->index >= q[k].lo && t->index <= q[k].hi) {
                    name = !strcmp(q[k].state, "RUNNING") ? "running" : "queued";
                    c = !strcmp(q[k].state, "RUNNING") ? 5 : 6;
                }
        counts[c]++;
        char id[256];
        snprintf(id, sizeof id, "%s/%s-s%ld", G->name, arm_at(t->arm)->name, t->seed);
        printf("%-32s %-12s %8ld  %s\n", id, name, step, t->dir);
    }
    printf("\n%d done, %d running, %d queued, %d interrupted, %d started, %d failed, %d pending%s\n", counts[TS_DONE],
           counts[5], counts[6], counts[TS_INTERRUPTED], counts[TS_STARTED], counts[TS_FAILED], counts[TS_PENDING],
           nq < 0 ? " (no squeue: states from the run directories only)" : "");
    free(q);
    return counts[TS_FAILED] ? 1 : 0;
}

/* A task already in squeue (queued or running) is never submitted twice. */
static void drop_queued(const Loaded *L, unsigned char *sel) {
    QEntry *q = NULL;
    int nq = squeue_entries(&L->s, &q);
    for (int i = 0; i < L->n; i++)
        for (int k = 0; k < nq; k++)
            if (!strcmp(q[k].name, L->s.groups[L->t[i].group].name) && L->t[i].index >= q[k].lo &&
                L->t[i].index <= q[k].hi)
                sel[i] = 0;
    free(q);
}

static int submit(Loaded *L, unsigned char *sel) {
    const Sweep *s = &L->s;
    char logdir[SW_PATH * 2], err[512];
    snprintf(logdir, sizeof logdir, "%s/%s", s->out, s->log_dir);
    if (fs_mkdir_p(logdir, err, sizeof err)) return die(1, "%s", err);
    drop_queued(L, sel);
    char deps[8192] = "";
    int jobs = 0;
    for (int g = 0; g < s->n_groups; g++) {
        char list[65536];
        int n = index_list(L, g, sel, list, sizeof list);
        if (!n) continue;
        Argv a = {0};
        group_sbatch(L, g, list, &a);
        char out[512];
        int rc = capture(a.v, out, sizeof out);
        if (rc != 0) {
            show_argv(a.v, stderr);
            argv_free(&a);
            return die(1, "sbatch failed for group %s (exit %d)", s->groups[g].name, rc);
        }
        argv_free(&a);
        char *semi = strpbrk(out, ";\n");
        if (semi) *semi = 0;
        printf("%s: array job %s (%d tasks)\n", s->groups[g].name, out, n);
        size_t k = strlen(deps);
        snprintf(deps + k, sizeof deps - k, "%s%s", k ? ":" : "", out);
        jobs++;
    }
    Argv a = {0};
    report_sbatch(L, deps, &a);
    char out[512];
    int rc = capture(a.v, out, sizeof out);
    if (rc != 0) {
        show_argv(a.v, stderr);
        argv_free(&a);
        return die(1, "sbatch failed for the report job (exit %d)", rc);
    }
    argv_free(&a);
    char *semi = strpbrk(out, ";\n");
    if (semi) *semi = 0;
    printf("report: job %s%s\n", out, jobs ? " (after the arrays)" : " (nothing left to train)");
    fflush(stdout);
    return 0;
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

int main(int argc, char **argv) {
    find_self();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1], *path = NULL, *group = NULL;
    int local = 0, fresh = 0;
    long index = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--local")) local = 1;
        else if (!strcmp(argv[i], "--fresh")) fresh = 1;
        else if (!strcmp(argv[i], "--group") && i + 1 < argc) group = argv[++i];
        else if (!strcmp(argv[i], "--index") && i + 1 < argc) {
            char *end;
            index = strtol(argv[++i], &end, 10);
            if (*end || index < 0) return die(2, "--index: expected a non-negative integer, got \"%s\"", argv[i]);
        } else if (argv[i][0] == '-') return die(2, "unknown option %s (see sgsweep --help)", argv[i]);
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
    if (!strcmp(cmd, "task") && (!group || index < 0)) return die(2, "task needs --group NAME --index N");
    Loaded L;
    int rc = load(&L, path);
    if (rc) return rc;
    if (!strcmp(cmd, "plan")) rc = cmd_plan(&L);
    else if (!strcmp(cmd, "run")) rc = run_local(&L, RUNNABLE, 0);
    else if (!strcmp(cmd, "status")) rc = cmd_status(&L);
    else if (!strcmp(cmd, "rerun")) {
        int nf = 0;
        for (int i = 0; i < L.n; i++) nf += sweep_task_state(&L.t[i], NULL) == TS_FAILED;
        if (!nf) {
            printf("sgsweep: no failed task\n");
            rc = 0;
        } else if (local) rc = run_local(&L, FAILED_ONLY, fresh);
        else {
            unsigned char *sel = select_states(&L, FAILED_ONLY);
            for (int i = 0; fresh && sel && i < L.n && !rc; i++) {
                const SweepTask *t = &L.t[i];
                if (!sel[i]) continue;
                char aside[sizeof t->dir + 32];
                for (int n = 1;; n++) {
                    snprintf(aside, sizeof aside, "%s.failed-%d", t->dir, n);
                    if (!fs_exists(aside)) break;
                }
                if (rename(t->dir, aside)) rc = die(1, "%s: cannot move aside: %s", t->dir, strerror(errno));
            }
            if (!rc) rc = sel ? submit(&L, sel) : die(1, "out of memory");
            free(sel);
        }
    } else if (!strcmp(cmd, "submit")) {
        unsigned char *sel = select_states(&L, RUNNABLE);
        rc = sel ? submit(&L, sel) : die(1, "out of memory");
        free(sel);
    }
    else if (!strcmp(cmd, "task")) rc = cmd_task(&L, group, index);
    else rc = run_report(&L);
    unload(&L);
    return rc;
}
