#include "eval.h"

#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "sampler.h"

void split_windows(const int32_t *win, int n, int T, int32_t *inputs, int32_t *targets) {
    for (int r = 0; r < n; r++) {
        memcpy(inputs + (size_t)r * T, win + (size_t)r * (T + 1), sizeof(int32_t) * T);
        memcpy(targets + (size_t)r * T, win + (size_t)r * (T + 1) + 1, sizeof(int32_t) * T);
    }
}

double eval_loss(Model *m, const ShardSet *data, int nbatches) {
    const Config *c = &m->cfg;
    int Bm = c->micro_batch, T = m->T;
    int32_t *win = malloc(sizeof(int32_t) * (size_t)Bm * (T + 1));
    int32_t *in = malloc(sizeof(int32_t) * (size_t)Bm * T);
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)Bm * T);
    double total = 0;
    /* micro-batch i of the evaluation goes to rank i mod N; the sums meet */
    for (int b = 0; b < nbatches; b++)
        for (int k = 0; k < c->grad_accum; k++) {
            if (((long)b * c->grad_accum + k) % dist()->size != dist()->rank) continue;
            sampler_val_rows(data, (uint64_t)c->val_seed, (uint64_t)b, (uint64_t)k * Bm, Bm, win);
            split_windows(win, Bm, T, in, tg);
            total += model_forward(m, in, tg, Bm, 0, 0);
        }
    total = dist_sum_double(total);
    free(win);
    free(in);
    free(tg);
    return total / ((double)nbatches * c->grad_accum * Bm * T);
}
