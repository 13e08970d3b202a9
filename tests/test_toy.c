/* The superposition task (src/toy.c):
 *  - decode attention equals the last row of the streaming op, forward and
 *    backward, for every zero option, with and without a log-bias, and with
 *    a query shared by every sequence;
 *  - the construction: an orthonormal dictionary when N <= d and unit
 *    features otherwise, items relevant with probability p and uniform
 *    within each set, labels that say which relevant features occur, the
 *    oracle's irrelevant reads exactly zero, keys that are tags or items;
 *  - a short training run learns, and runs are reproducible. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "rng.h"
#include "toy.h"
#include "toy_internal.h"

static void fill(real *x, long n, uint64_t key, double sd) {
    for (long i = 0; i < n; i++) x[i] = (real)(sd * rng_normal(key, (uint64_t)i));
}

static double maxdiff(const real *a, const real *b, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_decode(int B, int T, int H, int d, int phantom, int with_lb, int shared) {
    const int C = H * d;
    const long N = (long)B * T;
    real *qs = malloc(sizeof(real) * N * C), *k = malloc(sizeof(real) * N * C), *v = malloc(sizeof(real) * N * C);
    real *lb = malloc(sizeof(real) * B * H * T), sink[8];
    real *o = calloc((size_t)N * C, sizeof(real)), *lse = malloc(sizeof(real) * B * H * T);
    real *dout = calloc((size_t)N * C, sizeof(real)), *dq = malloc(sizeof(real) * N * C);
    real *dk = malloc(sizeof(real) * N * C), *dv = malloc(sizeof(real) * N * C), *dlb = malloc(sizeof(real) * B * H * T);
    real *qd = malloc(sizeof(real) * B * C), *od = malloc(sizeof(real) * B * C), *lsed = malloc(sizeof(real) * B * H);
    real *g = malloc(sizeof(real) * B * C), *dqd = malloc(sizeof(real) * B * C), *dkd = malloc(sizeof(real) * N * C);
    real *dvd = malloc(sizeof(real) * N * C), *dlbd = malloc(sizeof(real) * B * H * T);
    real ds1[8] = {0}, ds2[8] = {0};
    fill(qs, N * C, 1, 1.2), fill(k, N * C, 2, 1.2), fill(v, N * C, 3, 1), fill(qd, (long)B * C, 4, 1.2);
    fill(g, (long)B * C, 5, 1), fill(sink, 8, 6, 1);
    for (long i = 0; i < (long)B * H * T; i++) lb[i] = (real)(-3 * rng_uniform(7, (uint64_t)i));
    /* the decode query is the last row of each sequence for the streaming op */
    for (int b = 0; b < B; b++) {
        memcpy(qs + ((long)b * T + T - 1) * C, qd + (shared ? 0 : (long)b * C), sizeof(real) * C);
        memcpy(dout + ((long)b * T + T - 1) * C, g + (long)b * C, sizeof(real) * C);
    }
    real *sk = phantom == 2 ? sink : NULL, *l = with_lb ? lb : NULL;
    AttnArgs a = {B, T, H, d, C, C, C, C, phantom > 0, sk, l};
    AttnArgs ad = {B, T, H, d, shared ? 0 : C, C, C, C, phantom > 0, sk, l};
    op_attention_fwd(o, lse, qs, k, v, &a);
    op_attention_bwd(dq, dk, dv, sk ? ds1 : NULL, l ? dlb : NULL, dout, qs, k, v, o, lse, &a);
    op_attention_decode_fwd(od, lsed, qd, k, v, &ad);
    op_attention_decode_bwd(dqd, dkd, dvd, sk ? ds2 : NULL, l ? dlbd : NULL, g, qd, k, v, od, lsed, &ad);
    double eo = 0, el = 0, eq = 0;
    for (int b = 0; b < B; b++) {
        eo = fmax(eo, maxdiff(od + (long)b * C, o + ((long)b * T + T - 1) * C, C));
        eq = fmax(eq, maxdiff(dqd + (long)b * C, dq + ((long)b * T + T - 1) * C, C));
        for (int h = 0; h < H; h++) el = fmax(el, fabs(lsed[b * H + h] - lse[((long)b * H + h) * T + T - 1]));
    }
    const double tol = 2e-5;
    CHECK(eo < tol && el < tol, "decode fwd == last streaming row (B%d T%d H%d d%d ph%d lb%d shared%d): %.2g %.2g", B, T, H,
          d, phantom, with_lb, shared, eo, el);
    CHECK(eq < tol && maxdiff(dkd, dk, N * C) < tol && maxdiff(dvd, dv, N * C) < tol,
          "decode bwd dq/dk/dv == streaming with one row's dO (ph%d lb%d shared%d): %.2g %.2g %.2g", phantom, with_lb,
          shared, eq, maxdiff(dkd, dk, N * C), maxdiff(dvd, dv, N * C));
    if (l) CHECK(maxdiff(dlbd, dlb, (long)B * H * T) < tol, "decode dlogbias == streaming");
    if (sk) CHECK(maxdiff(ds2, ds1, H) < tol, "decode dsink == streaming: %.2g", maxdiff(ds2, ds1, H));
    free(qs), free(k), free(v), free(lb), free(o), free(lse), free(dout), free(dq), free(dk), free(dv), free(dlb);
    free(qd), free(od), free(lsed), free(g), free(dqd), free(dkd), free(dvd), free(dlbd);
}

static void test_dictionary(void) {
    enum { d = 16 };
    for (int N = 4; N <= 64; N *= 4) {
        real *D = malloc(sizeof(real) * N * d);
        toy_dictionary(D, N, d, 9);
        double worst_norm = 0, worst_dot = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int k = 0; k < d; k++) s += (double)D[i * d + k] * D[j * d + k];
                if (i == j) worst_norm = fmax(worst_norm, fabs(s - 1));
                else worst_dot = fmax(worst_dot, fabs(s));
            }
        CHECK(worst_norm < 1e-6, "N=%d: unit features (%.2g)", N, worst_norm);
        if (N <= d) CHECK(worst_dot < 1e-6, "N=%d <= d: orthonormal (%.2g)", N, worst_dot);
        else CHECK(worst_dot > 0.3, "N=%d > d: in superposition (max overlap %.2f)", N, worst_dot);
        free(D);
    }
}

static void test_items(void) {
    ToyConfig c;
    toy_defaults(&c);
    c.n_features = 256;
    long rel = 0, n = 0, hist_rel[16] = {0}, bad = 0, irr_lo = 0, irr_hi = 0, tags_hi = 0;
    for (long s = 0; s < 40; s++)
        for (int b = 0; b < 64; b++)
            for (int t = 0; t < c.T; t++) {
                int f, tag;
                toy_item(&c, s, b, t, &f, &tag);
                n++;
                bad += f < 0 || f >= c.n_features || tag < 0 || tag >= c.n_tags;
                tags_hi += tag >= c.n_tags / 2;
                if (f < c.n_relevant) rel++, hist_rel[f]++;
                else if (f < (c.n_relevant + c.n_features) / 2) irr_lo++;
                else irr_hi++;
            }
    const double p = (double)rel / n, sd = sqrt(0.15 * 0.85 / n);
    CHECK(!bad, "features and tags in range");
    CHECK(fabs(p - 0.15) < 4 * sd, "relevant with probability 0.15: %.4f over %ld items", p, n);
    long mn = hist_rel[0], mx = hist_rel[0];
    for (int k = 1; k < 16; k++) mn = hist_rel[k] < mn ? hist_rel[k] : mn, mx = hist_rel[k] > mx ? hist_rel[k] : mx;
    CHECK(mn > 0.8 * rel / 16 && mx < 1.2 * rel / 16, "relevant features uniform (%ld..%ld of %ld)", mn, mx, rel);
    CHECK(fabs((double)irr_lo / (irr_lo + irr_hi) - 0.5) < 0.02, "irrelevant features uniform");
    CHECK(fabs((double)tags_hi / n - 0.5) < 0.02, "tags uniform");
    int f1, t1, f2, t2;
    toy_item(&c, 3, 4, 5, &f1, &t1);
    toy_item(&c, -1, 4, 5, &f2, &t2);
    long same = 0;
    for (int t = 0; t < c.T; t++) {
        toy_item(&c, 0, 0, t, &f1, &t1);
        toy_item(&c, -1, 0, t, &f2, &t2);
        same += f1 == f2;
    }
    CHECK(same < c.T / 2, "the held-out set is not the training data (%ld of %d items equal)", same, c.T);
}

/* labels, the oracle's masking, the keys of both conditions */
static void test_batch(void) {
    for (int cond = 0; cond < TOY_CONDS; cond++)
        for (int arm = 0; arm < TOY_ARMS; arm++) {
            ToyConfig c;
            toy_defaults(&c);
            c.d = 8, c.n_features = 32, c.n_relevant = 4, c.T = 12, c.batch = 6, c.n_tags = 50, c.arm = arm, c.cond = cond;
            Toy t;
            CHECK(toy_init(&t, &c) == 0, "toy_init");
            toy_forward(&t, 2, c.batch);
            int labels_ok = 1, mask_ok = 1, keys_ok = 1;
            for (int b = 0; b < c.batch; b++) {
                for (int k = 0; k < c.n_relevant; k++) {
                    int has = 0;
                    for (int j = 0; j < c.T; j++) has |= t.feat[b * c.T + j] == k;
                    labels_ok &= has == t.y[b * c.n_relevant + k];
                }
                for (int j = 0; j < c.T; j++) {
                    const long i = (long)b * c.T + j;
                    const int f = t.feat[i];
                    double vn = 0;
                    for (int e = 0; e < c.d; e++) vn += fabs(t.V[i * c.d + e]);
                    if (arm == TOY_ORACLE) mask_ok &= f < c.n_relevant ? vn > 0 : vn == 0;
                    else mask_ok &= vn > 0;
                    const real *want = cond == TOY_BLIND ? t.tags + (long)t.tag[i] * c.d : t.D + (long)f * c.d;
                    keys_ok &= !memcmp(t.K + i * c.d, want, sizeof(real) * c.d);
                }
            }
            CHECK(labels_ok, "%s %s: labels are the relevant features present", toy_cond_name(cond), toy_arm_name(arm));
            CHECK(mask_ok, "%s %s: %s", toy_cond_name(cond), toy_arm_name(arm),
                  arm == TOY_ORACLE ? "the oracle reads zero for every irrelevant item" : "every read is there");
            CHECK(keys_ok, "%s %s: keys are %s", toy_cond_name(cond), toy_arm_name(arm),
                  cond == TOY_BLIND ? "the items' tags" : "the items");
            toy_free(&t);
        }
}

static void test_learns(void) {
    ToyConfig c;
    toy_defaults(&c);
    c.n_features = 128, c.steps = 400, c.batch = 64, c.eval_seqs = 512, c.cond = TOY_VISIBLE, c.lr = 3e-3;
    ToyResult r, r2;
    char err[256];
    CHECK(toy_run(&c, &r, err, sizeof err) == 0, "toy_run: %s", err);
    CHECK(r.train_bce < 0.8 * r.first_bce, "training lowers the loss: %.4f -> %.4f", r.first_bce, r.train_bce);
    CHECK(r.error < 0.3, "routing-visible baseline learns: held-out error %.4f", r.error);
    CHECK(toy_run(&c, &r2, err, sizeof err) == 0 && r2.error == r.error && r2.bce == r.bce, "reproducible");
    CHECK(r.relevant_mass > 0.3 && r.relevant_mass <= 1, "routing that sees the items moves attention onto the "
          "relevant ones: %.3f of the mass (0.15 of the items)", r.relevant_mass);
    ToyConfig z = c;
    z.steps = 0; /* the initial query is small: attention is nearly uniform */
    CHECK(toy_run(&z, &r2, err, sizeof err) == 0 && fabs(r2.relevant_mass - 0.15) < 0.01 &&
              r2.top_weight > 1.0 / 64 && r2.top_weight < 0.03,
          "untrained attention: relevant mass %.4f (~0.15), top weight %.4f (~1/64)", r2.relevant_mass, r2.top_weight);
    c.seed = 1;
    CHECK(toy_run(&c, &r2, err, sizeof err) == 0 && r2.bce != r.bce, "another seed, another run");
    c.n_features = c.n_relevant;
    CHECK(toy_run(&c, &r2, err, sizeof err) == -1 && strstr(err, "n_features"), "no irrelevant features: refused (%s)",
          err);
}

int main(void) {
    check_name = "test_toy";
    for (int ph = 0; ph < 3; ph++)
        for (int lb = 0; lb < 2; lb++) {
            test_decode(3, 9, 2, 8, ph, lb, 0);
            test_decode(4, 64, 1, 64, ph, lb, 1);
        }
    test_decode(2, 1, 1, 16, 1, 0, 0);
    test_dictionary();
    test_items();
    test_batch();
    test_learns();
    return check_finish();
}
