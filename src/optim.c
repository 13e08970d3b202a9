#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"
#include "ops.h"
#include "profile.h"

double lr_at(const Config *c, long step) {
    if (step < c->warmup) return c->lr * (double)(step + 1) / (double)c->warmup;
    long span = c->iters - 1 - c->warmup;
    double progress = span > 0 ? (double)(step - c->warmup) / (double)span : 1.0;
    if (progress > 1) progress = 1;
    return c->lr_min + 0.5 * (c->lr - c->lr_min) * (1.0 + cos(M_PI * progress));
}

double optim_step(Model *m, long step, double lr) {
    const Config *c = &m->cfg;
    if (prof_on) op_sync();
    double t0 = prof_on ? prof_now() : 0;
    long lo = m->opt_off, hi = m->opt_off + m->opt_len;
    /* ||g||^2 is a sum over elements: the shards' sums of squares add up to
     * the whole vector's (in another order, so to rounding).  Every rank
     * joins the sum, even one whose shard is empty or everything. */
    double sumsq = op_sumsq(m->grads + lo, m->opt_len);
    if (m->opt_sharded) sumsq = dist_sum_double(sumsq);
    double norm = sqrt(sumsq);
    double scale = 1.0;
    if (c->grad_clip > 0) {
        scale = c->grad_clip / (norm + 1e-6);
        if (scale > 1.0) scale = 1.0;
    }
    /* AdamW is elementwise: each tensor's part inside [lo, hi) is updated as
     * the whole tensor would be there, with the tensor's decay flag (a shard
     * boundary may cut through a tensor); all of them in one op */
    AdamwSeg *segs = malloc(sizeof *segs * (size_t)(m->n_tensors > 0 ? m->n_tensors : 1));
    if (!segs) {
        fprintf(stderr, "sgtrain: out of host memory for the optimizer step\n");
        exit(1);
    }
    int nseg = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        long a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        segs[nseg++] = (AdamwSeg){a, b - a, t->decay};
    }
    op_adamw_multi(m->params, m->adam_m, m->adam_v, m->grads, lo, segs, nseg, lr, c->beta1, c->beta2, c->adam_eps,
                   c->weight_decay, step + 1, scale);
    free(segs);
    if (prof_on) {
        static ProfSite site = {"optim_step: op_sumsq, op_adamw_multi", PROF_OPTIMIZER, 0, 0, 0, 0, 0};
        op_sync();
        prof_site_add(&site, prof_now() - t0, 0);
    }
    return norm;
}
