/* auto_micro_batch's choice (src/batch_split.h) on hand-computed cases: the
 * largest divisor of a rank's share whose predicted footprint fits, and the
 * check that the step's sequences split over the ranks. */
#include <string.h>

#include "batch_split.h"
#include "check.h"

static void test_choose(void) {
    const size_t G = (size_t)1 << 30;
    /* 124M-like: 3 GiB at micro-batch 1 (state, fixed scratch and one
     * sequence), 0.4 GiB a further sequence; 32 sequences a rank.  In 30
     * GiB (a 32 GB card less a sixteenth) P(32) = 3 + 31 x 0.4 = 15.4 GiB
     * fits; in 12 GiB P(32) does not, and P(16) = 3 + 15 x 0.4 = 9 does */
    CHECK(batch_split_choose(32, 32, 3 * G, 4 * G / 10, 30 * G) == 32, "32 fit in 30 GiB");
    CHECK(batch_split_choose(32, 32, 3 * G, 4 * G / 10, 12 * G) == 16, "16 in 12 GiB: %ld",
          batch_split_choose(32, 32, 3 * G, 4 * G / 10, 12 * G));
    /* P(8) = 5.8, P(4) = 4.2: 5 GiB holds 4 */
    CHECK(batch_split_choose(32, 32, 3 * G, 4 * G / 10, 5 * G) == 4, "4 in 5 GiB");
    /* the bound is inclusive: P(2) = 100 + 7 = 107 exactly */
    CHECK(batch_split_choose(2, 2, 100, 7, 107) == 2, "P(d) equal to the budget fits");
    CHECK(batch_split_choose(2, 2, 100, 7, 106) == 1, "one byte short: 1");
    /* divisors only: a share of 12 at P(d) = d bytes and a budget of 5
     * gives 4 (5 does not divide 12), of 7 gives 6 */
    CHECK(batch_split_choose(12, 12, 1, 1, 5) == 4, "12 by 5: %ld", batch_split_choose(12, 12, 1, 1, 5));
    CHECK(batch_split_choose(12, 12, 1, 1, 7) == 6, "12 by 7: %ld", batch_split_choose(12, 12, 1, 1, 7));
    CHECK(batch_split_choose(7, 7, 1, 1, 6) == 1, "a prime share above the budget: 1");
    CHECK(batch_split_choose(7, 7, 1, 1, 7) == 7, "a prime share within it: 7");
    /* nothing fits, not even 1: still 1 (the run says so when it runs out) */
    CHECK(batch_split_choose(8, 8, 10 * G, G, G) == 1, "nothing fits: 1");
    CHECK(batch_split_choose(1, 1, 0, 0, 0) == 1, "a share of one: 1");
    /* a limit: the largest divisor at or below it (the CPU's rule, and a
     * choice measured over budget giving way) */
    CHECK(batch_split_choose(32, 31, 3 * G, 4 * G / 10, 30 * G) == 16, "below 32: 16");
    CHECK(batch_split_choose(12, 4, 0, 0, 0) == 4, "12 at most 4: 4");
    CHECK(batch_split_choose(6, 4, 0, 0, 0) == 3, "6 at most 4: 3");
    CHECK(batch_split_choose(6, 100, 0, 0, 0) == 6, "a limit above the share: the share");
    /* no per-sequence cost: the whole share */
    CHECK(batch_split_choose(64, 64, G, 0, G) == 64, "a flat footprint: the whole share");
}

static void test_check(void) {
    Config c;
    char err[512];
    CHECK(config_from_tier(&c, "124M", err, sizeof err) == 0, "124M tier");
    c.auto_micro_batch = 1;
    for (int ranks = 1; ranks <= 32; ranks *= 2) /* 8 x 4 = 32 sequences */
        CHECK(batch_split_check(&c, ranks, err, sizeof err) == 0, "32 sequences over %d ranks", ranks);
    err[0] = 0;
    CHECK(batch_split_check(&c, 3, err, sizeof err) == -1, "32 sequences over 3 ranks refused");
    CHECK(strstr(err, "the 32 sequences of a step (micro_batch 8 x grad_accum 4) do not split evenly over 3 ranks") != NULL,
          "why: %s", err);
    CHECK(batch_split_check(&c, 64, err, sizeof err) == -1, "32 sequences over 64 ranks refused");
    /* without auto_micro_batch the micro-batches are shared: 4 over 1, 2
     * and 4 ranks, not over 8 */
    c.auto_micro_batch = 0;
    for (int ranks = 1; ranks <= 4; ranks *= 2)
        CHECK(batch_split_check(&c, ranks, err, sizeof err) == 0, "4 micro-batches over %d ranks", ranks);
    CHECK(batch_split_check(&c, 8, err, sizeof err) == -1, "4 micro-batches over 8 ranks refused");
    CHECK(strstr(err, "grad_accum 4 is not a multiple of the 8 ranks: each rank takes an equal share") != NULL,
          "why: %s", err);
}

int main(void) {
    check_name = "test_batch_split";
    test_choose();
    test_check();
    return check_finish();
}
