/* Private to the toy task and its tests: the model's buffers and steps
 * (src/toy.c). */
#ifndef SG_TOY_INTERNAL_H
#define SG_TOY_INTERNAL_H

#include "toy.h"

typedef struct {
    ToyConfig c;
    int N, R, d, T, B, gated, routing;
    long np, off_wk, off_wv, off_tau, off_wr, off_br;
    real *p, *g, *m, *v;            /* parameters, gradients, Adam moments */
    real *D, *tags;                 /* [N,d], [n_tags,d] */
    real *Vd, *gd, *vgd, *lbd;      /* per feature: values, gates, gated values, log-gates */
    real *dVd, *dvgd, *dlbd;
    real *u, *du;                   /* [d] the shared query W_k^T q and its gradient */
    real *K, *V, *LB, *o, *lse, *z; /* per item [B*T,d] [B*T,d] [B*T]; per sequence [B,d] [B] [B,R] */
    real *dz, *dout, *dq, *dK, *dV, *dLB;
    int *feat, *tag;
    unsigned char *y;               /* [B,R] labels */
} Toy;

/* Allocates, draws the dictionary and tags, initialises the parameters;
 * -1 when out of memory (toy_free still needed). */
int toy_init(Toy *t, const ToyConfig *c);
void toy_free(Toy *t);
/* Forward on B <= batch sequences of batch `step` (< 0: held out): the mean
 * binary cross-entropy per label; logits in z, labels in y, gathered reads
 * in V. */
double toy_forward(Toy *t, long step, int B);
/* Gradients of that loss into g (overwritten). */
void toy_backward(Toy *t, int B);
/* Adds each of the last forward's B sequences' attention on relevant items
 * to *relevant and its largest item weight to *top. */
void toy_attention_stats(const Toy *t, int B, double *relevant, double *top);

#endif
