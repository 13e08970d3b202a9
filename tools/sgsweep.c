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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arms.h"
#include "sgsweep/sgsweep.h"

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
