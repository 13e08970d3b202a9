#include "optim.h"

#include <math.h>

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
    double t0 = prof_on ? prof_now() : 0;
    double norm = sqrt(op_sumsq(m->grads, m->n_params));
    double scale = 1.0;
    if (c->grad_clip > 0) {
        scale = c->grad_clip / (norm + 1e-6);
        if (scale > 1.0) scale = 1.0;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        op_adamw(m->params + t->offset, m->adam_m + t->offset, m->adam_v + t->offset,
                 m->grads + t->offset, t->numel, lr, c->beta1, c->beta2, c->adam_eps,
                 t->decay ? c->weight_decay : 0.0, step + 1, scale);
    }
    if (prof_on) prof_secs[PROF_OPTIMIZER] += prof_now() - t0;
    return norm;
}
