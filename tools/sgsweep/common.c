/* sgsweep's children, messages and analysis bookkeeping (sgsweep.h). */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arms.h"
#include "fsutil.h"
#include "proc.h"
#include "sgsweep.h"

int die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("sgsweep: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

/* Tools next to this executable (sgreport), and the slurm/ scripts. */
char self_dir[PATH_MAX];
void find_self(void) {
    ssize_t n = readlink("/proc/self/exe", self_dir, sizeof self_dir - 1);
    if (n <= 0) {
        snprintf(self_dir, sizeof self_dir, "build");
        return;
    }
    self_dir[n] = 0;
    char *s = strrchr(self_dir, '/');
    if (s) *s = 0;
}

volatile sig_atomic_t got_signal;
static void on_signal(int s) { got_signal = s; }

int run_child(char **argv, const char *log) { return proc_run_tee(argv, log, NULL, &got_signal); }

/* Run argv and capture its stdout (for sbatch --parsable and squeue);
 * QUIET sends its stderr to /dev/null. */
int capture_q(char **argv, char *out, size_t n, int quiet) {
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
int capture(char **argv, char *out, size_t n) { return capture_q(argv, out, n, 0); }

void show_argv(char **argv, FILE *f) {
    for (char **a = argv; *a; a++) {
        char q[4096] = "";
        shell_quote(q, sizeof q, *a);
        fprintf(f, "%s%s", a == argv ? "" : " ", q);
    }
    fputc('\n', f);
}

int load(Loaded *L, const char *path) {
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

void unload(Loaded *L) {
    free(L->a);
    free(L->t);
    sweep_free(&L->s);
}

void task_id(const Loaded *L, const SweepTask *t, char *out, size_t n) {
    snprintf(out, n, "%s/%s-s%ld", L->s.groups[t->group].name, arm_at(t->arm)->name, t->seed);
}
void an_id(const Loaded *L, const SweepAnTask *a, char *out, size_t n) {
    const SweepTask *t = an_run(L, a);
    snprintf(out, n, "analyze:%s/%s-s%ld", L->s.analyses[a->entry].name, arm_at(t->arm)->name, t->seed);
}

int run_report(Loaded *L) {
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

void install_signals(void) {
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
void analysis_finished(const Loaded *L, const SweepAnTask *a, char **argv, int rc, const char *log) {
    char path[SW_PATH * 2];
    sweep_analysis_failed_path(&L->s, an_run(L, a), a, path, sizeof path);
    if (rc == 0) unlink(path);
    else if (!got_signal) record_failure(L, a, argv, rc, log);
}

/* Run analysis task A (output to the terminal and LOG).  Returns sgtrain's
 * exit status. */
int run_analysis(const Loaded *L, const SweepAnTask *a, const char *log) {
    char **argv = sweep_analyze_argv(&L->s, an_run(L, a), a);
    if (!argv) return die(1, "out of memory");
    int rc = run_child(argv, log);
    analysis_finished(L, a, argv, rc, log);
    sweep_argv_free(argv);
    return rc;
}

void move_aside(const char *dir, char *aside, size_t n) {
    for (int k = 1;; k++) {
        snprintf(aside, n, "%s.failed-%d", dir, k);
        if (!fs_exists(aside)) break;
    }
}
