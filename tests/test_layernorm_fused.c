/* op_residual_layernorm_fwd (res = a + b, then LayerNorm of res) against
 * op_add followed by op_layernorm_fwd: the same bits in res, out, mean and
 * rstd, for res a separate buffer and for res aliasing a or b (the model
 * writes the sum over the residual stream it read), with and without bias.
 * One case is also checked against values worked out by hand. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "rng.h"

static uint64_t g_ctr;

static real *rand_buf(long n, double scale, double shift) {
    real *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (long i = 0; i < n; i++) p[i] = (real)(shift + scale * rng_normal(0x5eed1a7e5ull, g_ctr++));
    return p;
}

static real *copy_of(const real *x, long n) {
    real *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    memcpy(p, x, (size_t)n * sizeof *p);
    return p;
}

static int same_bits(const real *x, const real *y, long n) { return !memcmp(x, y, (size_t)n * sizeof *x); }

enum { ALIAS_NONE, ALIAS_A, ALIAS_B };

/* The residual stream carries an offset (shift) so that the variance is a
 * small difference of large sums, where any change in the order of the row
 * statistics would show in the low bits. */
static void test_bitwise(int N, int C, int bias, int alias) {
    long n = (long)N * C;
    real *a = rand_buf(n, 1.5, 3), *b = rand_buf(n, 0.7, -1), *w = rand_buf(C, 0.5, 1);
    real *bs = bias ? rand_buf(C, 0.3, 0) : NULL;

    /* reference: the two ops in sequence */
    real *res_ref = malloc((size_t)n * sizeof *res_ref), *out_ref = malloc((size_t)n * sizeof *out_ref);
    real *mu_ref = malloc((size_t)N * sizeof *mu_ref), *rs_ref = malloc((size_t)N * sizeof *rs_ref);
    op_add(res_ref, a, b, n);
    op_layernorm_fwd(out_ref, mu_ref, rs_ref, res_ref, w, bs, N, C);

    /* fused, into a separate buffer or over a or b (outputs start as junk) */
    real *a2 = copy_of(a, n), *b2 = copy_of(b, n), *res = rand_buf(n, 1, 0), *out = rand_buf(n, 1, 0);
    real *mu = rand_buf(N, 1, 0), *rs = rand_buf(N, 1, 0);
    real *dst = alias == ALIAS_A ? a2 : alias == ALIAS_B ? b2 : res;
    op_residual_layernorm_fwd(dst, out, mu, rs, a2, b2, w, bs, N, C);

    const char *an = alias == ALIAS_A ? "res == a" : alias == ALIAS_B ? "res == b" : "res separate";
    CHECK(same_bits(dst, res_ref, n), "N %d C %d bias %d %s: res differs from op_add", N, C, bias, an);
    CHECK(same_bits(out, out_ref, n), "N %d C %d bias %d %s: out differs from op_layernorm_fwd", N, C, bias, an);
    CHECK(same_bits(mu, mu_ref, N), "N %d C %d bias %d %s: mean differs", N, C, bias, an);
    CHECK(same_bits(rs, rs_ref, N), "N %d C %d bias %d %s: rstd differs", N, C, bias, an);
    /* the input that res does not overwrite is left alone */
    if (alias != ALIAS_A) CHECK(same_bits(a2, a, n), "N %d C %d %s: a was written", N, C, an);
    if (alias != ALIAS_B) CHECK(same_bits(b2, b, n), "N %d C %d %s: b was written", N, C, an);

    free(a), free(b), free(w), free(bs), free(res_ref), free(out_ref), free(mu_ref), free(rs_ref);
    free(a2), free(b2), free(res), free(out), free(mu), free(rs);
}

/* a = {1,2,3,4}, b = 1: res = {2,3,4,5}, mean 3.5, biased variance
 * (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, out = (res - 3.5) / sqrt(1.25 + 1e-5)
 * with w = 1, bias = 0; and with w = 2, bias = 1, out doubled plus one. */
static void test_by_hand(void) {
    real a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, w1[4] = {1, 1, 1, 1}, z[4] = {0, 0, 0, 0};
    real w2[4] = {2, 2, 2, 2}, one[4] = {1, 1, 1, 1};
    real res[4], out[4], mu, rs;
    double r = 1 / sqrt(1.25 + 1e-5);
    op_residual_layernorm_fwd(res, out, &mu, &rs, a, b, w1, z, 1, 4);
    for (int c = 0; c < 4; c++) {
        CHECK_CLOSE(res[c], c + 2.0, 0, 0, "by hand: res");
        CHECK_CLOSE(out[c], (c + 2 - 3.5) * r, 1e-6, 0, "by hand: out");
    }
    CHECK_CLOSE(mu, 3.5, 1e-6, 0, "by hand: mean");
    CHECK_CLOSE(rs, r, 1e-6, 0, "by hand: rstd");
    op_residual_layernorm_fwd(res, out, &mu, &rs, a, b, w2, one, 1, 4);
    for (int c = 0; c < 4; c++) CHECK_CLOSE(out[c], 2 * (c + 2 - 3.5) * r + 1, 1e-6, 0, "by hand: out (w 2, bias 1)");
    /* bias NULL is bias 0 */
    real out0[4];
    op_residual_layernorm_fwd(res, out, &mu, &rs, a, b, w1, z, 1, 4);
    op_residual_layernorm_fwd(res, out0, &mu, &rs, a, b, w1, NULL, 1, 4);
    CHECK(same_bits(out, out0, 4), "by hand: bias NULL gives bias 0");
}

int main(void) {
    check_name = "test_layernorm_fused";
    test_by_hand();
    int shapes[][2] = {{1, 4}, {1, 768}, {7, 768}, {33, 768}, {129, 768}, {5, 1}, {3, 37}, {64, 64}, {9, 1024}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int bias = 0; bias <= 1; bias++)
            for (int alias = ALIAS_NONE; alias <= ALIAS_B; alias++)
                test_bitwise(shapes[s][0], shapes[s][1], bias, alias);
    return check_finish();
}
