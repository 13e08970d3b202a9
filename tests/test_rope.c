/* Rotary positions (ops.h, op_rope; config rotary_dims): the model's angle
 * table by hand, the op against the rotation written out in double, its
 * inverse, the dims it must leave alone, and the property the rotation is
 * for: a query at position m and a key at n score the same as at m + s and
 * n + s. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "config.h"
#include "model.h"
#include "rng.h"

/* head dim 8, rotary on its first rd; base 10000 */
static int build(Model *m, int rd, int T) {
    Config c;
    char err[256];
    config_from_tier(&c, "test", err, sizeof err);
    c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = T, c.vocab_size = 11, c.rotary_dims = rd;
    if (model_build(m, &c, err, sizeof err)) {
        CHECK(0, "model_build: %s", err);
        return -1;
    }
    return 0;
}

static void table_by_hand(void) {
    Model m;
    if (build(&m, 4, 7)) return;
    CHECK(m.rope_rows == 8, "T + 1 rows (a sink token's included), got %d", m.rope_rows);
    CHECK(model_tensor(&m, "wpe") == NULL, "no learned positions with rotary_dims");
    /* rd = 4: pair 0 turns by p, pair 1 by p / 10000^(1/2) = p / 100 */
    const double inv[2] = {1, 0.01f};
    for (int p = 0; p < m.rope_rows; p++)
        for (int i = 0; i < 2; i++) {
            const double a = (float)((float)p * (float)inv[i]);
            const real *row = m.rope_cs + p * 4;
            CHECK(fabs(row[i] - cos(a)) < 1e-7 && fabs(row[2 + i] - sin(a)) < 1e-7,
                  "position %d pair %d: cos %.9g sin %.9g, want %.9g %.9g", p, i, row[i], row[2 + i], cos(a), sin(a));
        }
    CHECK(fabs(m.rope_cs[1 * 4 + 0] - 0.5403023058681398) < 1e-7 && fabs(m.rope_cs[1 * 4 + 2] - 0.8414709848078965) < 1e-7,
          "position 1, pair 0: cos 1 and sin 1");
    model_free(&m);
}

/* the op on rows of stride 3C (q | k | v), against double */
static void op_vs_double(int rd) {
    enum { B = 2, T = 6, H = 2, d = 8, C = H * d };
    Model m;
    if (build(&m, rd, T)) return;
    static real qkv[B * T * 3 * C], orig[B * T * 3 * C];
    for (int i = 0; i < B * T * 3 * C; i++) orig[i] = qkv[i] = (real)rng_normal(rng_key(5, rd, 1), (uint64_t)i);
    model_rope(&m, qkv, B, T, 0, 0);
    double worst = 0;
    int untouched = 1;
    const int h = rd / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                for (int j = 0; j < H; j++) {
                    const size_t at = ((size_t)(b * T + t) * 3 + part) * C + (size_t)j * d;
                    for (int e = 0; e < d; e++) {
                        double want = orig[at + e];
                        if (part < 2 && e < rd) {
                            const int i = e % h;
                            const double inv = 1.0f / powf(10000.0f, (float)(2 * i) / (float)rd);
                            const double a = (float)((float)t * (float)inv);
                            want = e < h ? orig[at + e] * cos(a) - orig[at + e + h] * sin(a)
                                         : orig[at + e] * cos(a) + orig[at + e - h] * sin(a);
                            worst = fmax(worst, fabs(qkv[at + e] - want));
                        } else if (qkv[at + e] != orig[at + e]) {
                            untouched = 0;
                        }
                    }
                }
    CHECK(worst < 1e-6, "rd %d: op_rope off the double rotation by %g", rd, worst);
    CHECK(untouched, "rd %d: v and the dims past rd are left as they were", rd);
    model_rope(&m, qkv, B, T, 0, 1);
    double back = 0;
    for (int i = 0; i < B * T * 3 * C; i++) back = fmax(back, fabs(qkv[i] - orig[i]));
    CHECK(back < 1e-6, "rd %d: the inverse undoes the rotation (off by %g)", rd, back);
    /* a first position other than 0: one row at position 4 turns as row 4 did */
    for (int i = 0; i < 3 * C; i++) qkv[i] = orig[4 * 3 * C + i];
    model_rope(&m, qkv, 1, 1, 4, 0);
    static real ref[T * 3 * C];
    for (int i = 0; i < T * 3 * C; i++) ref[i] = orig[i];
    model_rope(&m, ref, 1, T, 0, 0);
    int same = 1;
    for (int i = 0; i < 3 * C; i++) same &= qkv[i] == ref[4 * 3 * C + i];
    CHECK(same, "rd %d: a row at pos0 = 4 matches row 4 of a forward", rd);
    printf("  op_rope rd %d: %.2g off double, inverse %.2g\n", rd, worst, back);
    model_free(&m);
}

/* score(q at m, k at n) = score(q at m + s, k at n + s) with every dim rotated */
static void relative(void) {
    enum { T = 9, H = 2, d = 8, C = H * d };
    Model m;
    if (build(&m, d, T)) return;
    real a[T * 3 * C];
    double worst = 0;
    for (int mpos = 0; mpos < 4; mpos++)
        for (int npos = 0; npos <= mpos; npos++)
            for (int s = 1; s + mpos < T; s++) {
                /* q in row mpos and mpos + s, k in rows npos and npos + s */
                for (int i = 0; i < T * 3 * C; i++) a[i] = 0;
                for (int e = 0; e < C; e++) {
                    const real q = (real)rng_normal(rng_key(9, 1, 0), (uint64_t)e), k = (real)rng_normal(rng_key(9, 2, 0), (uint64_t)e);
                    a[mpos * 3 * C + e] = a[(mpos + s) * 3 * C + e] = q;
                    a[npos * 3 * C + C + e] = k;
                    a[(npos + s) * 3 * C + C + e] = k;
                }
                model_rope(&m, a, 1, T, 0, 0);
                for (int j = 0; j < H; j++) {
                    double s0 = 0, s1 = 0;
                    for (int e = 0; e < d; e++) {
                        s0 += (double)a[mpos * 3 * C + j * d + e] * a[npos * 3 * C + C + j * d + e];
                        s1 += (double)a[(mpos + s) * 3 * C + j * d + e] * a[(npos + s) * 3 * C + C + j * d + e];
                    }
                    worst = fmax(worst, fabs(s0 - s1) / (1 + fabs(s0)));
                }
            }
    CHECK(worst < 2e-6, "scores depend on m - n alone: off by %g", worst);
    printf("  relative positions: scores shifted by s differ by %.2g\n", worst);
    model_free(&m);
}

int main(void) {
    check_name = "rope";
    table_by_hand();
    op_vs_double(8);
    op_vs_double(2);
    op_vs_double(4);
    relative();
    return check_finish();
}
