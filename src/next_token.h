/* Choosing the next token from a model's logits: greedy, or a draw from the
 * softmax at a temperature, restricted to the K most likely tokens (top-k)
 * and then to the most likely tokens that hold a share P of what is left
 * (nucleus, top-p), as Hugging Face's generate and nanoGPT's sample do.
 * Computed in double on the host. */
#ifndef SG_NEXT_TOKEN_H
#define SG_NEXT_TOKEN_H

#include "real.h"

typedef struct {
    double temperature; /* 0: greedy (the first of the largest logits) */
    int top_k;          /* 0: every token */
    double top_p;       /* in (0, 1]; 1: every token left by top-k */
} PickOpts;

/* Work space for V tokens, reused from call to call. */
typedef struct {
    int V;
    int *idx;
    double *w;
} PickScratch;

int pick_scratch_init(PickScratch *s, int V);
void pick_scratch_free(PickScratch *s);

/* The token drawn from logits[0 .. V) with the uniform number u in (0, 1).
 * With temperature tau, candidates are ranked by logit (ties: the lower
 * id first); the first top_k are kept, then the shortest prefix of those
 * whose probability mass exp(z/tau), normalised over the kept top_k, reaches
 * top_p.  The draw is the first candidate, in that order, at which the
 * cumulative mass exceeds u times the kept mass.  Without top-k or top-p the
 * order is the ids' and no sort is done.  *logprob (may be NULL) receives
 * the token's log-probability under the model itself: log softmax(z), at
 * temperature 1 and without truncation. */
int pick_token(const real *logits, int V, const PickOpts *o, double u, PickScratch *s, double *logprob);

#endif
