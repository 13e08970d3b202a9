/* Choosing the next token (src/next_token.c): hand-computed cases of
 * greedy, temperature, top-k and top-p, and the empirical distribution of
 * many draws against the probabilities the definition gives. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "next_token.h"
#include "rng.h"

static PickScratch S;

static int pick(const real *z, int V, double tau, int k, double p, double u) {
    PickOpts o = {tau, k, p};
    return pick_token(z, V, &o, u, &S, NULL);
}

static void test_greedy(void) {
    const real z[] = {1, 3, 2, 3, 0};
    for (double u = 0.01; u < 1; u += 0.1) CHECK(pick(z, 5, 0, 0, 1, u) == 1, "greedy: the first largest logit, id 1");
    CHECK(pick(z, 5, 0, 2, 0.5, 0.9) == 1, "greedy ignores top-k and top-p");
    double lp;
    PickOpts o = {0, 0, 1};
    pick_token(z, 5, &o, 0.5, &S, &lp);
    const double want = 3 - log(exp(1.0) + 2 * exp(3.0) + exp(2.0) + 1);
    CHECK_CLOSE(lp, want, 1e-6, 0, "log-probability of the greedy token");
}

/* z = (0, ln 4): probabilities 1/5, 4/5 at temperature 1, and with
 * temperature 2 the logits halve: (0, ln 2), probabilities 1/3, 2/3. */
static void test_temperature(void) {
    const real z[] = {0, (real)log(4.0)};
    CHECK(pick(z, 2, 1, 0, 1, 0.19) == 0 && pick(z, 2, 1, 0, 1, 0.21) == 1, "tau 1: the cut at 1/5");
    CHECK(pick(z, 2, 2, 0, 1, 0.32) == 0 && pick(z, 2, 2, 0, 1, 0.34) == 1, "tau 2: the cut at 1/3");
    CHECK(pick(z, 2, 0.5, 0, 1, 1.0 / 17 - 1e-3) == 0 && pick(z, 2, 0.5, 0, 1, 1.0 / 17 + 1e-3) == 1,
          "tau 1/2: logits doubled, probabilities 1/17, 16/17");
    double lp;
    PickOpts o = {2, 0, 1};
    CHECK(pick_token(z, 2, &o, 0.1, &S, &lp) == 0, "tau 2, u 0.1");
    CHECK_CLOSE(lp, log(0.2), 1e-6, 0, "log-probability under the model, not at the temperature");
}

/* z = (1, 3, 2, 0): ranked 1, 2, 0, 3 with weights e^3, e^2, e^1, e^0. */
static void test_truncation(void) {
    const real z[] = {1, 3, 2, 0};
    const double e3 = exp(3.0), e2 = exp(2.0), e1 = exp(1.0), e0 = 1, all = e3 + e2 + e1 + e0;
    for (double u = 0.001; u < 1; u += 0.05) CHECK(pick(z, 4, 1, 1, 1, u) == 1, "top-k 1 is greedy (u %.3f)", u);
    const double cut2 = e3 / (e3 + e2); /* 0.731 */
    CHECK(pick(z, 4, 1, 2, 1, cut2 - 1e-3) == 1 && pick(z, 4, 1, 2, 1, cut2 + 1e-3) == 2, "top-k 2: the cut at %.4f",
          cut2);
    CHECK(pick(z, 4, 1, 2, 1, 0.999999) == 2, "top-k 2 never draws the third");
    CHECK(pick(z, 4, 1, 4, 1, 1 - 1e-9) == 3 && pick(z, 4, 1, 9, 1, 1 - 1e-9) == 3, "top-k >= V keeps every token");
    /* probabilities e3/all = 0.644, then 0.237, 0.087, 0.032 */
    for (double u = 0.001; u < 1; u += 0.05) CHECK(pick(z, 4, 1, 0, 0.6, u) == 1, "top-p 0.6 keeps the first alone");
    CHECK(pick(z, 4, 1, 0, e3 / all, 0.999) == 1, "top-p equal to the first's mass keeps it alone");
    CHECK(pick(z, 4, 1, 0, 0.8, cut2 - 1e-3) == 1 && pick(z, 4, 1, 0, 0.8, cut2 + 1e-3) == 2 &&
              pick(z, 4, 1, 0, 0.8, 0.999999) == 2,
          "top-p 0.8 keeps two (0.881), renormalised");
    const double cut3 = (e3 + e2) / (e3 + e2 + e1);
    CHECK(pick(z, 4, 1, 0, 0.9, cut3 - 1e-3) == 2 && pick(z, 4, 1, 0, 0.9, cut3 + 1e-3) == 0 &&
              pick(z, 4, 1, 0, 0.9, 0.999999) == 0,
          "top-p 0.9 keeps three (0.968)");
    /* top-k first, then top-p of what it kept: k 2 leaves masses 0.731, 0.269 */
    CHECK(pick(z, 4, 1, 2, 0.7, 0.999) == 1, "top-k 2 then top-p 0.7: the first alone");
    CHECK(pick(z, 4, 1, 2, 0.75, 0.999) == 2, "top-k 2 then top-p 0.75: both");
    const real tie[] = {2, 2, 1};
    CHECK(pick(tie, 3, 1, 1, 1, 0.9) == 0, "ties rank the lower id first");
}

/* 200,000 draws at tau 0.7, top-k 4, top-p 0.85 from fixed logits: each
 * token's frequency within 5 standard errors of the definition's
 * probability, and the tokens the definition drops never drawn. */
static void test_distribution(void) {
    enum { V = 6, N = 200000 };
    const real z[V] = {0.3f, 1.2f, -0.5f, 0.9f, 1.0f, 0.2f};
    const double tau = 0.7, p = 0.85;
    /* ranked: 1 (1.2), 4 (1.0), 3 (0.9), 0 (0.3); top-k 4 drops 5 and 2 */
    const int order[4] = {1, 4, 3, 0};
    double w[4], mass = 0;
    for (int r = 0; r < 4; r++) mass += w[r] = exp((z[order[r]] - 1.2) / tau);
    double want[V] = {0}, cum = 0, kept = 0;
    int n = 0;
    while (n < 4 && cum < p * mass) cum += w[n++];
    for (int r = 0; r < n; r++) kept += w[r];
    for (int r = 0; r < n; r++) want[order[r]] = w[r] / kept;
    long count[V] = {0};
    const uint64_t key = rng_key(11, 0, 0);
    for (long i = 0; i < N; i++) count[pick(z, V, tau, 4, p, rng_uniform(key, (uint64_t)i))]++;
    CHECK(n == 3, "the nucleus holds 3 tokens (got %d)", n);
    for (int i = 0; i < V; i++) {
        const double f = (double)count[i] / N, se = sqrt(want[i] * (1 - want[i]) / N);
        if (want[i] == 0) CHECK(count[i] == 0, "token %d is outside the nucleus but was drawn %ld times", i, count[i]);
        else CHECK(fabs(f - want[i]) < 5 * se, "token %d: frequency %.5f, probability %.5f (se %.5f)", i, f, want[i], se);
    }
}

int main(void) {
    check_name = "test_next_token";
    CHECK(pick_scratch_init(&S, 16) == 0, "scratch");
    test_greedy();
    test_temperature();
    test_truncation();
    test_distribution();
    pick_scratch_free(&S);
    return check_finish();
}
