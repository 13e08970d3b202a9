/* A sweep's training tasks: expansion of the groups, sgtrain's command
 * line, and a task's state from its run directory. */
#include "sweep.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"
#include "errmsg.h"
#include "fsutil.h"
#include "sweep_internal.h"

const char *const task_state_names[] = {"pending", "started", "interrupted", "failed", "done"};

int sweep_tasks(const Sweep *s, SweepTask **tasks, int *n, char *err, size_t errlen) {
    int total = 0;
    for (int g = 0; g < s->n_groups; g++)
        for (int a = 0; a < s->groups[g].n_arms; a++) total += s->groups[g].n_seeds[a];
    SweepTask *t = calloc((size_t)total + 1, sizeof *t);
    if (!t) return sg_fail(err, errlen, "out of memory");
    int k = 0;
    for (int g = 0; g < s->n_groups; g++) {
        const SweepGroup *G = &s->groups[g];
        int idx = 0;
        for (int a = 0; a < G->n_arms; a++)
            for (int j = 0; j < G->n_seeds[a]; j++) {
                SweepTask *x = &t[k++];
                x->group = g;
                x->arm = G->arms[a];
                x->seed = G->seeds[(size_t)a * G->max_seeds + j];
                x->index = idx++;
                snprintf(x->dir, sizeof x->dir, "%s/%s/%s-s%ld", s->out, G->name, arm_at(x->arm)->name, x->seed);
            }
    }
    *tasks = t;
    *n = total;
    return 0;
}

int push(char ***v, int *n, const char *fmt, ...) {
    char buf[SW_PATH + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nv = realloc(*v, (size_t)(*n + 2) * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    if (!(nv[*n] = strdup(buf))) return -1;
    nv[++*n] = NULL;
    return 0;
}

char **sweep_train_argv(const Sweep *s, const SweepTask *t) {
    const SweepGroup *g = &s->groups[t->group];
    char **v = NULL;
    int n = 0, bad = 0;
    bad |= push(&v, &n, "%s", s->sgtrain);
    bad |= push(&v, &n, "train");
    bad |= push(&v, &n, "--tier"), bad |= push(&v, &n, "%s", g->tier);
    bad |= push(&v, &n, "--arm"), bad |= push(&v, &n, "%s", arm_at(t->arm)->name);
    bad |= push(&v, &n, "--seed"), bad |= push(&v, &n, "%ld", t->seed);
    bad |= push(&v, &n, "--data"), bad |= push(&v, &n, "%s", g->data);
    bad |= push(&v, &n, "--out"), bad |= push(&v, &n, "%s", t->dir);
    for (int i = 0; i < s->n_set; i++) {
        int over = 0;
        for (int j = 0; j < g->n_set; j++) over |= !strcmp(g->set[j].key, s->set[i].key);
        if (over) continue;
        bad |= push(&v, &n, "--%s", s->set[i].key), bad |= push(&v, &n, "%s", s->set[i].value);
    }
    for (int j = 0; j < g->n_set; j++)
        bad |= push(&v, &n, "--%s", g->set[j].key), bad |= push(&v, &n, "%s", g->set[j].value);
    if (bad) {
        sweep_argv_free(v);
        return NULL;
    }
    return v;
}

void sweep_argv_free(char **argv) {
    for (char **p = argv; p && *p; p++) free(*p);
    free(argv);
}

static int file_in(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    return fs_exists(path);
}

TaskState sweep_task_state(const SweepTask *t, long *step) {
    char path[SW_PATH + 256];
    if (step) *step = 0;
    if (file_in(t->dir, "result.json", path, sizeof path)) {
        json_object *o = json_object_from_file(path), *v;
        int ok = o && json_object_object_get_ex(o, "final_val_loss", &v) &&
                 (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
        if (o) json_object_put(o);
        if (ok) return TS_DONE;
    }
    if (file_in(t->dir, "failed.json", path, sizeof path)) return TS_FAILED;
    if (step && file_in(t->dir, "metrics.jsonl", path, sizeof path)) {
        FILE *f = fopen(path, "rb");
        if (f) {
            char buf[4096];
            fseek(f, 0, SEEK_END);
            long size = ftell(f);
            fseek(f, size > 4095 ? size - 4095 : 0, SEEK_SET);
            size_t k = fread(buf, 1, sizeof buf - 1, f);
            buf[k] = 0;
            for (char *q = buf; (q = strstr(q, "{\"step\":")); q++) {
                long x = strtol(q + 8, NULL, 10);
                if (x > *step) *step = x;
            }
            fclose(f);
        }
    }
    if (file_in(t->dir, "checkpoint.bin", path, sizeof path)) return TS_INTERRUPTED;
    if (file_in(t->dir, "config.yaml", path, sizeof path)) return TS_STARTED;
    return TS_PENDING;
}

void shell_quote(char *dst, size_t n, const char *w) {
    size_t k = strlen(dst);
    int plain = *w != 0;
    for (const char *q = w; *q; q++)
        plain &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                 strchr("-_./=:,%@+", *q) != NULL;
    if (plain) {
        snprintf(dst + k, n > k ? n - k : 0, "%s", w);
        return;
    }
    if (k + 1 < n) dst[k++] = '\'';
    for (const char *q = w; *q && k + 5 < n; q++) {
        if (*q == '\'') {
            memcpy(dst + k, "'\\''", 4);
            k += 4;
        } else
            dst[k++] = *q;
    }
    if (k + 1 < n) dst[k++] = '\'';
    dst[k < n ? k : n - 1] = 0;
}
