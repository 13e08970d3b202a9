/* Finite-difference gradient check, in double precision, of the toy task's
 * model (src/toy.c) for every arm and both routing conditions: every
 * parameter (the query, W_k, W_v, the gate threshold, the readout) through
 * the two rearrangements toy.c makes (values per dictionary row, scores
 * through u = W_k^T q) and the ops it shares with the trainer.  Central
 * differences with h = 1e-6: agreement to ~1e-6 relative is expected, and a
 * missing or wrong term is an O(1) error. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "toy_internal.h"

static void check(int arm, int cond) {
    ToyConfig c;
    toy_defaults(&c);
    c.d = 6, c.n_features = 14, c.n_relevant = 3, c.T = 7, c.batch = 4, c.n_tags = 9, c.arm = arm, c.cond = cond;
    c.seed = 5;
    Toy t;
    if (toy_init(&t, &c)) {
        CHECK(0, "toy_init");
        toy_free(&t);
        return;
    }
    /* move the threshold to where gates spread over (0, 1) and the phantom
     * and readout matter */
    t.p[t.off_tau] = 0.3;
    for (long i = t.off_wr; i < t.np; i++) t.p[i] *= 3;
    toy_forward(&t, 1, c.batch);
    toy_backward(&t, c.batch);
    double *an = malloc(sizeof(double) * (size_t)t.np);
    for (long i = 0; i < t.np; i++) an[i] = t.g[i];
    double worst = 0;
    long worst_i = 0;
    int tested = 0;
    for (long i = 0; i < t.np; i++) {
        if (i == t.off_tau && !t.gated) continue; /* no gate: tau is not a parameter of the loss */
        const real keep = t.p[i], h = 1e-6;
        t.p[i] = keep + h;
        const double fp = toy_forward(&t, 1, c.batch);
        t.p[i] = keep - h;
        const double fm = toy_forward(&t, 1, c.batch);
        t.p[i] = keep;
        const double fd = (fp - fm) / (2 * h), e = fabs(fd - an[i]) / (1e-9 + 1e-6 * fabs(fd));
        if (e > worst) worst = e, worst_i = i;
        tested++;
    }
    CHECK(worst <= 1, "%s %s: %d gradients match central differences (worst %.3g of tolerance at parameter %ld)",
          toy_cond_name(cond), toy_arm_name(arm), tested, worst, worst_i);
    double gn = 0;
    if (t.gated) gn = fabs(an[t.off_tau]);
    CHECK(!t.gated || gn > 1e-6, "%s %s: the gate threshold gets a gradient (%.3g)", toy_cond_name(cond),
          toy_arm_name(arm), gn);
    free(an);
    toy_free(&t);
}

int main(void) {
    check_name = "dtest_toy";
    for (int cond = 0; cond < TOY_CONDS; cond++)
        for (int arm = 0; arm < TOY_ARMS; arm++) check(arm, cond);
    return check_finish();
}
