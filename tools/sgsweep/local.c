/* sgsweep's local executor: a sweep's tasks on this machine, one or
 * several at a time (sgsweep.h, docs/sweeps.md). */
#include <errno.h>
#include <signal.h>
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
int run_local(Loaded *L, int rerun, int fresh, const Places *P) {
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

/* --jobs N: N tasks at once, 1 to SLOTS_MAX */
enum { SLOTS_MAX = 256 };
int parse_jobs(const char *v, Places *P) {
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
int parse_gpus(const char *v, Places *P) {
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
