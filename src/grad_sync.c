/* Bucketed gradient sums during the backward (grad_sync.h). */
#include "grad_sync.h"

#include <stdio.h>

#include "dist.h"

static void ready(void *ctx, long off, long len) {
    GradSync *s = ctx;
    if (off < 0 || len < 0 || off + len != s->next) {
        char why[160];
        snprintf(why, sizeof why, "internal error: gradient range [%ld, %ld) announced where [.., %ld) was due",
                 off, off + len, s->next);
        dist_abort(1, why);
    }
    s->next = off;
    if (s->hi - off >= s->bucket || (off == 0 && s->hi > 0)) {
        if (s->scatter)
            s->pieces += dist_isum_scatter_real(s->grads, s->n, off, s->hi);
        else
            dist_isum_real(s->grads + off, s->hi - off);
        s->hi = off;
        s->buckets++;
    }
    dist_isum_progress();
}

long grad_sync_bucket(double bucket_mb) {
    double n = bucket_mb * 1048576.0 / sizeof(real);
    return n < 1 ? 1 : n > 1e15 ? (long)1e15 : (long)n;
}

void grad_sync_begin(GradSync *s, Model *m, long bucket, int scatter) {
    s->grads = m->grads;
    s->n = m->n_params;
    s->bucket = bucket > 0 ? bucket : 1;
    s->next = s->hi = m->n_params;
    s->buckets = 0;
    s->scatter = scatter;
    s->pieces = 0;
    s->hook.ready = ready;
    s->hook.ctx = s;
    m->grad_hook = &s->hook;
}

int grad_sync_end(GradSync *s, Model *m) {
    m->grad_hook = NULL;
    if (s->next != 0 || s->hi != 0) {
        char why[160];
        snprintf(why, sizeof why, "internal error: the backward announced gradients down to %ld of %ld", s->next,
                 s->n);
        dist_abort(1, why);
    }
    dist_isum_wait();
    return s->buckets;
}
