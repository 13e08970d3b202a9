/* The channel-blind superposition task of the paper's Appendix E (Figure 3):
 * one attention head with a single learned query reads T items whose
 * values are features of a dictionary in superposition, and a linear
 * readout reports which relevant features were present.  docs/toy.md
 * defines the task, the arms and the task error.
 *
 * The attention, the gates, the projections and the optimizer are the
 * trainer's ops (kernels/ops.h): the toy adds the data, the gathers and the
 * binary cross-entropy, and runs on the CPU backend. */
#ifndef SG_TOY_H
#define SG_TOY_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"

enum { TOY_BASELINE, TOY_NORMGATE, TOY_OFFBYONE, TOY_RENORM, TOY_ORACLE, TOY_ARMS };
enum { TOY_BLIND, TOY_VISIBLE, TOY_CONDS };

const char *toy_arm_name(int a);  /* "baseline", "normgate", "offbyone", "renorm", "oracle" */
const char *toy_arm_label(int a); /* as the figure's legend prints it */
int toy_arm_from_name(const char *s);
const char *toy_cond_name(int c); /* "blind", "visible" */
int toy_cond_from_name(const char *s);

typedef struct {
    int d;             /* item and head dimension (64) */
    int n_features;    /* N: the dictionary; load = N / d */
    int n_relevant;    /* the first R features are relevant (16) */
    int T;             /* items per sequence (64) */
    double p_relevant; /* an item is relevant with this probability (0.15) */
    int n_tags;        /* channel-blind keys: a pool of random unit tags (4096) */
    int arm, cond;
    double beta;       /* gate sharpness (8) */
    int steps, batch;  /* 4000, 256 */
    double lr;         /* Adam, 1e-3 */
    uint64_t seed;     /* dictionary, tags, initialisation and data */
    int eval_seqs;     /* held-out sequences for the task error (4096) */
} ToyConfig;

void toy_defaults(ToyConfig *c);

typedef struct {
    double error;      /* held-out task error (docs/toy.md) */
    double bce;        /* held-out binary cross-entropy per label */
    double train_bce;  /* mean over the last 100 steps */
    double first_bce;  /* the first step's */
    /* where the trained head looks, on the held-out set (means over sequences) */
    double relevant_mass; /* attention on relevant items */
    double top_weight;    /* the largest single item's attention */
} ToyResult;

/* Train one configuration and evaluate it.  0, or -1 with err. */
int toy_run(const ToyConfig *c, ToyResult *r, char *err, size_t errlen);

/* ---- pieces, for the tests ---------------------------------------------------- */

/* N unit vectors in R^d ([N, d]); orthonormal when N <= d. */
void toy_dictionary(real *D, int N, int d, uint64_t seed);
/* Item t of sequence b of batch `step` (step < 0: the held-out set): its
 * feature and its tag index. */
void toy_item(const ToyConfig *c, long step, int b, int t, int *feature, int *tag);

#endif
