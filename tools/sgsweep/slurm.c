/* sgsweep on Slurm: sbatch command lines, squeue, the array jobs of a
 * submission (sgsweep.h, docs/sweeps.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "sgsweep.h"

/* ---- sbatch command lines -------------------------------------------------------- */

void add(Argv *a, const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    a->v = realloc(a->v, (size_t)(a->n + 2) * sizeof *a->v);
    a->v[a->n++] = strdup(buf);
    a->v[a->n] = NULL;
}

void argv_free(Argv *a) {
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
unsigned char *select_states(const Loaded *L, unsigned states) {
    unsigned char *sel = calloc((size_t)L->n + 1, 1);
    for (int i = 0; sel && i < L->n; i++) sel[i] = (states >> sweep_task_state(&L->t[i], NULL)) & 1;
    return sel;
}

/* The same for analysis tasks (bitmask of AnState). */
unsigned char *select_an_states(const Loaded *L, unsigned states) {
    unsigned char *sel = calloc((size_t)L->na + 1, 1);
    for (int j = 0; sel && j < L->na; j++) sel[j] = (states >> an_state(L, &L->a[j])) & 1;
    return sel;
}

/* ---- squeue ------------------------------------------------------------------------------ */

int squeue_entries(const Sweep *s, QEntry **out) {
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

const QEntry *queued(const QEntry *q, int nq, const char *name, int index) {
    for (int k = 0; k < nq; k++)
        if (!strcmp(q[k].name, name) && index >= q[k].lo && index <= q[k].hi) return &q[k];
    return NULL;
}

void an_job_name(const Loaded *L, const SweepAnTask *a, char *out, size_t n) {
    snprintf(out, n, "analyze:%s", L->s.analyses[a->entry].name);
}

/* ---- the jobs of a submission --------------------------------------------------------------- */

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

void jobs_free(Jobs *J) {
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
int build_jobs(const Loaded *L, const unsigned char *tsel, const unsigned char *asel, const QEntry *q, int nq,
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

void job_argv(const Loaded *L, const Jobs *J, int k, char **ids, Argv *a) {
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

int submit(Loaded *L, unsigned char *tsel, unsigned char *asel) {
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
