#include "next_token.h"

#include <math.h>
#include <stdlib.h>

int pick_scratch_init(PickScratch *s, int V) {
    s->V = V;
    s->idx = malloc(sizeof *s->idx * (size_t)V);
    s->w = malloc(sizeof *s->w * (size_t)V);
    if (s->idx && s->w) return 0;
    pick_scratch_free(s);
    return -1;
}

void pick_scratch_free(PickScratch *s) {
    free(s->idx), free(s->w);
    s->idx = NULL, s->w = NULL;
}

/* qsort has no context argument: the weights being ranked */
static _Thread_local const double *rank_w;

static int by_weight(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (rank_w[i] != rank_w[j]) return rank_w[i] > rank_w[j] ? -1 : 1;
    return (i > j) - (i < j);
}

int pick_token(const real *logits, int V, const PickOpts *o, double u, PickScratch *s, double *logprob) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    const double zmax = logits[best];
    int tok = best;
    if (o->temperature > 0) {
        double *w = s->w;
        int *idx = s->idx, n = V;
        for (int i = 0; i < V; i++) w[i] = exp(((double)logits[i] - zmax) / o->temperature), idx[i] = i;
        const int truncate = (o->top_k > 0 && o->top_k < V) || o->top_p < 1;
        if (truncate) {
            rank_w = w;
            qsort(idx, (size_t)V, sizeof *idx, by_weight);
            if (o->top_k > 0 && o->top_k < V) n = o->top_k;
        }
        double mass = 0;
        for (int r = 0; r < n; r++) mass += w[idx[r]];
        if (o->top_p < 1) {
            double cum = 0;
            int keep = 0;
            while (keep < n && cum < o->top_p * mass) cum += w[idx[keep++]];
            n = keep > 0 ? keep : 1;
            mass = cum > 0 ? cum : w[idx[0]];
        }
        const double target = u * mass;
        double cum = 0;
        tok = idx[n - 1];
        for (int r = 0; r < n; r++) {
            cum += w[idx[r]];
            if (cum > target) {
                tok = idx[r];
                break;
            }
        }
    }
    if (logprob) {
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp((double)logits[i] - zmax);
        *logprob = (double)logits[tok] - zmax - log(sum);
    }
    return tok;
}
