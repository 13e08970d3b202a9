/* rng: pinned values (so a refactor cannot silently change every run's
 * initialisation and batches), distribution moments, and rng_below. */
#include <inttypes.h>
#include <string.h>

#include "check.h"
#include "rng.h"

/* Pinned outputs of this implementation (hex floats are exact). */
#define PIN_KEY 0xd0734750fde362b3ull
#define PIN_HASH 0x719abb75a856034bull
#define PIN_U0 0x1.31367e26140c7p-1
#define PIN_U1 0x1.d1e594e0f0bfep-2
#define PIN_N0 -0x1.12ce2e86f41a7p+0 /* -1.0734585837818515 */
#define PIN_B0 814u

static void test_pinned(void) {
    /* External anchors: splitmix64 seeded with 0 first returns
     * mix(0x9e3779b97f4a7c15) = 0xe220a8397b1dcdaf, and FNV-1a 64 of "a" is
     * 0xaf63dc4c8601ec8c (both published reference values). */
    CHECK(rng_mix(0) == 0, "rng_mix(0) = %" PRIx64, rng_mix(0));
    CHECK(rng_mix(0x9e3779b97f4a7c15ull) == 0xe220a8397b1dcdafull, "splitmix64 reference value");
    CHECK(rng_hash_str("a") == rng_mix(0xaf63dc4c8601ec8cull), "FNV-1a reference value");
    CHECK(rng_hash_str("") == rng_mix(0xcbf29ce484222325ull), "FNV-1a of the empty string");

    /* Our own outputs, pinned: changing any of these changes every run. */
    CHECK(rng_key(1, 2, 3) == PIN_KEY, "rng_key(1,2,3) = 0x%016" PRIx64, rng_key(1, 2, 3));
    CHECK(rng_hash_str("h.0.attn.w_qkv") == PIN_HASH, "rng_hash_str = 0x%016" PRIx64,
          rng_hash_str("h.0.attn.w_qkv"));
    CHECK(rng_uniform(42, 0) == PIN_U0, "rng_uniform(42,0) = %.17g", rng_uniform(42, 0));
    CHECK(rng_uniform(42, 123456789) == PIN_U1, "rng_uniform(42,123456789) = %.17g",
          rng_uniform(42, 123456789));
    /* log and cos come from libm, which may differ in the last bit between
     * versions; everything else above is exact integer arithmetic. */
    CHECK_CLOSE(rng_normal(7, 3), PIN_N0, 0, 1e-15, "rng_normal(7,3)");
    CHECK(rng_below(rng_key(1, 2, 3), 1000) == PIN_B0, "rng_below = %" PRIu64,
          rng_below(rng_key(1, 2, 3), 1000));
}

static void test_key_order(void) {
    uint64_t k[6] = {rng_key(1, 2, 3), rng_key(1, 3, 2), rng_key(2, 1, 3),
                     rng_key(2, 3, 1), rng_key(3, 1, 2), rng_key(3, 2, 1)};
    int distinct = 1;
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++) distinct &= k[i] != k[j];
    CHECK(distinct, "rng_key differs for every argument order");
    CHECK(rng_key(0, 0, 0) != 0, "rng_key(0,0,0) is not the mixer's fixed point");
    /* rows of one step must never share a key */
    int same = 0;
    for (uint64_t r = 1; r < 10000; r++) same += rng_key(5, 9, r) == rng_key(5, 9, r - 1);
    CHECK(same == 0, "adjacent rows share a key %d times", same);
}

static void test_uniform(void) {
    const long N = 1000000;
    double s = 0, s2 = 0, lo = 1, hi = 0;
    for (long i = 0; i < N; i++) {
        double u = rng_uniform(rng_key(11, 0, 0), (uint64_t)i);
        s += u;
        s2 += (u - 0.5) * (u - 0.5);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    double mean = s / N, var = s2 / N;
    /* 4 sigma: sd of the mean is sqrt(1/12/N); sd of the variance estimate
     * is sqrt((1/80 - 1/144)/N) = sqrt(1/180/N). */
    CHECK_CLOSE(mean, 0.5, 4 * sqrt(1.0 / 12 / N), 0, "uniform mean");
    CHECK_CLOSE(var, 1.0 / 12, 4 * sqrt(1.0 / 180 / N), 0, "uniform variance");
    CHECK(lo > 0 && hi < 1, "uniform in the open interval: min %g max %g", lo, hi);
    /* the extremes of the mapping itself */
    CHECK(rng_uniform(0, 0) > 0 && rng_uniform(0, 0) < 1, "uniform(0,0) in (0,1)");
    CHECK((double)(0x1fffffffffffffull) * 0x1p-53 < 1.0, "largest uniform is below 1");
}

static void test_normal(void) {
    const long N = 1000000;
    double s = 0, s2 = 0, s4 = 0;
    uint64_t key = rng_hash_str("test.normal");
    for (long i = 0; i < N; i++) {
        double z = rng_normal(key, (uint64_t)i);
        s += z;
        s2 += z * z;
        s4 += z * z * z * z;
    }
    double mean = s / N, var = s2 / N, kurt = s4 / N;
    /* sd: mean 1/sqrt(N); variance sqrt(2/N); E[z^4] sqrt((105-9)/N) */
    CHECK_CLOSE(mean, 0, 4 / sqrt((double)N), 0, "normal mean");
    CHECK_CLOSE(var, 1, 4 * sqrt(2.0 / N), 0, "normal variance");
    CHECK_CLOSE(kurt, 3, 4 * sqrt(96.0 / N), 0, "normal kurtosis");
    /* element i does not depend on which other elements are drawn */
    CHECK(rng_normal(key, 5) == rng_normal(key, 5), "pure function");
}

static void test_below(void) {
    CHECK(rng_below(0, 10) == 0, "below(0, 10) = 0");
    CHECK(rng_below(UINT64_MAX, 10) == 9, "below(max, 10) = 9");
    CHECK(rng_below(UINT64_MAX, 1) == 0, "below(max, 1) = 0");
    CHECK(rng_below(UINT64_MAX, UINT64_MAX) == UINT64_MAX - 1, "below(max, max)");
    int inb = 1;
    const uint64_t ns[] = {1, 2, 7, 1000, 1ull << 40, UINT64_MAX};
    for (int k = 0; k < 6; k++)
        for (uint64_t i = 0; i < 10000; i++) inb &= rng_below(rng_key(3, i, 0), ns[k]) < ns[k];
    CHECK(inb, "rng_below in bounds");

    /* chi-square, 10 buckets, 9 degrees of freedom: the 0.999 quantile is 27.88 */
    const long N = 1000000;
    long cnt[10] = {0};
    for (long i = 0; i < N; i++) cnt[rng_below(rng_key(77, (uint64_t)i, 1), 10)]++;
    double chi = 0, e = N / 10.0;
    for (int b = 0; b < 10; b++) chi += (cnt[b] - e) * (cnt[b] - e) / e;
    CHECK(chi < 27.88, "chi-square %.2f over 10 buckets", chi);
}

int main(void) {
    check_name = "test_rng";
    test_pinned();
    test_key_order();
    test_uniform();
    test_normal();
    test_below();
    return check_finish();
}
