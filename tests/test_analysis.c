/* The analyses' building blocks against hand-computed cases, and their
 * composition with the model:
 *  - quantiles, cutoffs and junk scaling on reads whose norms are known;
 *  - every junk type's vector is what docs/analysis.md says (a unit read of
 *    another sequence, of another position, a unit normal, one direction per
 *    head, the gate's own direction), the same for every dose;
 *  - dose 0 changes nothing, bitwise, in the values and in the model's loss;
 *  - the corruption happens before the gate: the gate the model computes is
 *    the gate of the corrupted read;
 *  - the explicit attention ops reproduce the streaming op, and the trained
 *    gate through the probes' path reproduces the model's loss;
 *  - the gate overrides and the exposure/telemetry sums on a hand case.
 *
 * `test_analysis --write-ckpt DIR ARM DATA_DIR [BLOCK_SIZE]` writes a small
 * checkpoint whose parameters exercise every mechanism (tests/tiny.h), for
 * the end-to-end tests and the NumPy references (tests/e2e_analysis.sh,
 * tests/e2e_generate.sh); its context is 16 tokens unless BLOCK_SIZE says.
 * ARM+gpt2 (baseline+gpt2, combo2+gpt2) builds the arm in GPT-2's form, as
 * `sgtrain import` does: LayerNorm and linear biases, the tanh GELU; ARM+neox
 * in GPT-NeoX's (rotary positions, the parallel block, an untied head), and
 * ARM+rope the study's model with rotary positions (tiny.h, tiny_form). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_ctx.h"
#include "check.h"
#include "checkpoint.h"
#include "fsutil.h"
#include "inject.h"
#include "ops.h"
#include "rng.h"
#include "shard.h"
#include "tiny.h"

static double nrm(const real *v, int d) {
    double s = 0;
    for (int k = 0; k < d; k++) s += (double)v[k] * v[k];
    return sqrt(s);
}

static void test_quantiles(void) {
    const float a[] = {1, 2, 3, 4}, one[] = {7}, two[] = {0, 10};
    CHECK_CLOSE(quantile_sorted(a, 4, 0.5), 2.5, 0, 0, "median of 1..4");
    CHECK_CLOSE(quantile_sorted(a, 4, 0.25), 1.75, 0, 0, "q25 of 1..4");
    CHECK_CLOSE(quantile_sorted(one, 1, 0.25), 7, 0, 0, "q25 of one value");
    CHECK_CLOSE(quantile_sorted(two, 2, 0.25), 2.5, 0, 0, "q25 of 0, 10");
    float s[4];
    double med, cut;
    const float unsorted[] = {4, 1, 3, 2};
    head_cutoff(unsorted, 4, CUT_Q25, s, &med, &cut);
    CHECK(med == 2.5 && cut == 1.75, "head_cutoff: median %g q25 %g", med, cut);
    CHECK(junk_from_name("own_direction") == JUNK_OWN_DIR && junk_from_name("nope") == -1, "junk names");
    CHECK(cutoff_from_name("q25") == CUT_Q25 && cutoff_from_name("q50") == -1, "cutoff names");
}

/* Two sequences of four reads (H = 1, d = 2) with norms 1, 2, 3, 4 and
 * 2, 4, 6, 8; own-direction junk u = (3, 4) / 5. */
static void hand_values(real *v) {
    const real s0[8] = {1, 0, 0, 2, 3, 0, 0, 4};
    for (int i = 0; i < 8; i++) v[i] = s0[i], v[8 + i] = 2 * s0[i];
}

static void test_hand_injection(void) {
    const real w[2] = {3, 4};
    real v[16], want[16];
    InjectSpec s = {JUNK_OWN_DIR, CUT_MEDIAN, 0.5, 1, 2, 0, w};
    hand_values(v);
    hand_values(want);
    /* median 2.5 -> reads of norm 1 and 2 get 0.5 * 2.5 * (0.6, 0.8) = (0.75, 1);
     * second sequence: median 5 -> reads of norm 2 and 4 get (1.5, 2) */
    want[0] += 0.75f, want[1] += 1, want[2] += 0.75f, want[3] += 1;
    want[8] += 1.5f, want[9] += 2, want[10] += 1.5f, want[11] += 2;
    long n = inject_values(v, 2, 2, 4, 1, 2, &s);
    CHECK(n == 4, "median cutoff corrupts 2 reads per sequence (got %ld)", n);
    int same = 1;
    for (int i = 0; i < 16; i++) same &= fabs(v[i] - want[i]) < 1e-6;
    CHECK(same, "median cutoff: eps m_h u added to the quiet reads only");

    hand_values(v);
    hand_values(want);
    s.cutoff = CUT_Q25; /* q25 1.75 (3.5): only the smallest read */
    want[0] += 0.75f, want[1] += 1, want[8] += 1.5f, want[9] += 2;
    n = inject_values(v, 2, 2, 4, 1, 2, &s);
    same = 1;
    for (int i = 0; i < 16; i++) same &= fabs(v[i] - want[i]) < 1e-6;
    CHECK(n == 2 && same, "q25 cutoff: one read per sequence (got %ld)", n);

    /* A sink token at position 0 is neither ranked nor corrupted: with it
     * the reads are 2, 3, 4 (median 3): only the read of norm 2 is quiet. */
    hand_values(v);
    hand_values(want);
    s.cutoff = CUT_MEDIAN;
    s.first = 1;
    want[2] += 0.5f * 3 * 0.6f, want[3] += 0.5f * 3 * 0.8f;
    want[10] += 0.5f * 6 * 0.6f, want[11] += 0.5f * 6 * 0.8f;
    n = inject_values(v, 2, 2, 4, 1, 2, &s);
    same = 1;
    for (int i = 0; i < 16; i++) same &= fabs(v[i] - want[i]) < 1e-5;
    CHECK(n == 2 && same, "sink token excluded from ranking and corruption (got %ld)", n);
}

/* Random reads: B=3, T=9, H=2, d=5, row stride 12 (padding must survive). */
enum { RB = 3, RT = 9, RH = 2, RD = 5, RS = 12 };

static void rand_values(real *v, uint64_t key) {
    for (int i = 0; i < RB * RT * RS; i++) v[i] = (real)rng_normal(key, (uint64_t)i);
}

/* Is x (d entries) equal to a normalised read of (b', t') satisfying want? */
static int is_unit_read(const real *x, const real *v0, int h, int b, int t, int other_seq) {
    for (int bb = 0; bb < RB; bb++)
        for (int tt = 0; tt < RT; tt++) {
            if (other_seq ? bb == b : (bb != b || tt == t)) continue;
            const real *r = v0 + ((long)bb * RT + tt) * RS + h * RD;
            double n = nrm(r, RD), e = 0;
            for (int k = 0; k < RD; k++) e = fmax(e, fabs(x[k] - r[k] / n));
            if (e < 1e-5) return 1;
        }
    return 0;
}

static void test_junk_types(void) {
    real v0[RB * RT * RS], v[RB * RT * RS], w[RH * RD];
    rand_values(v0, 99);
    for (int i = 0; i < RH * RD; i++) w[i] = (real)rng_normal(7, (uint64_t)i);
    for (int junk = 0; junk < JUNK_KINDS; junk++) {
        real dir[RH][RD];
        int dir_set[RH] = {0, 0}, ok = 1, units = 1, shared = 1, padding = 1;
        long corrupted = 0;
        for (int e = 0; e < 2; e++) { /* two doses: the same u for every read */
            const double eps = e ? 1.3 : 0.7;
            InjectSpec s = {junk, CUT_MEDIAN, eps, rng_key(5, 6, 7), rng_key(8, 9, 10), 0, w};
            memcpy(v, v0, sizeof v);
            corrupted = inject_values(v, RS, RB, RT, RH, RD, &s);
            for (int b = 0; b < RB; b++)
                for (int h = 0; h < RH; h++) {
                    float norms[RT], sc[RT];
                    for (int t = 0; t < RT; t++) norms[t] = (float)nrm(v0 + ((long)b * RT + t) * RS + h * RD, RD);
                    double med, cut;
                    head_cutoff(norms, RT, CUT_MEDIAN, sc, &med, &cut);
                    for (int t = 0; t < RT; t++) {
                        const long o = ((long)b * RT + t) * RS + h * RD;
                        real u[RD];
                        for (int k = 0; k < RD; k++) u[k] = (real)((v[o + k] - v0[o + k]) / (eps * med));
                        if (!(norms[t] < cut)) {
                            for (int k = 0; k < RD; k++) ok &= v[o + k] == v0[o + k];
                            continue;
                        }
                        units &= fabs(nrm(u, RD) - 1) < 1e-4;
                        if (junk == JUNK_STRUCTURED) ok &= is_unit_read(u, v0, h, b, t, 1);
                        if (junk == JUNK_SAME_CONTEXT) ok &= is_unit_read(u, v0, h, b, t, 0);
                        if (junk == JUNK_OWN_DIR)
                            for (int k = 0; k < RD; k++) ok &= fabs(u[k] - w[h * RD + k] / nrm(w + h * RD, RD)) < 1e-5;
                        if (junk == JUNK_RANDOM_DIR) {
                            if (!dir_set[h]) memcpy(dir[h], u, sizeof u), dir_set[h] = 1;
                            for (int k = 0; k < RD; k++) shared &= fabs(u[k] - dir[h][k]) < 1e-4;
                        }
                    }
                    for (int t = 0; t < RT; t++)
                        for (int k = RH * RD; k < RS; k++) padding &= v[(b * RT + t) * RS + k] == v0[(b * RT + t) * RS + k];
                }
        }
        CHECK(corrupted == RB * RH * (RT / 2), "%s: %ld reads below the median (want %d)", junk_name(junk), corrupted,
              RB * RH * (RT / 2));
        CHECK(ok, "%s: junk vectors as specified, other reads untouched", junk_name(junk));
        CHECK(units, "%s: unit junk scaled by eps m_h", junk_name(junk));
        CHECK(shared, "%s: one direction per head", junk_name(junk));
        CHECK(padding, "%s: row padding untouched", junk_name(junk));
        if (junk == JUNK_RANDOM_DIR) {
            double dot = 0;
            for (int k = 0; k < RD; k++) dot += dir[0][k] * dir[1][k];
            CHECK(fabs(dot) < 0.999, "random direction differs between heads");
        }
        /* dose 0: bitwise nothing */
        InjectSpec z = {junk, CUT_Q25, 0, 3, 4, 0, w};
        memcpy(v, v0, sizeof v);
        inject_values(v, RS, RB, RT, RH, RD, &z);
        CHECK(!memcmp(v, v0, sizeof v), "%s: dose 0 leaves the values bitwise unchanged", junk_name(junk));
        /* reproducible with the same keys, different with others */
        real v2[RB * RT * RS];
        InjectSpec a = {junk, CUT_Q25, 0.9, 11, 12, 0, w}, b2 = a;
        b2.key = 13, b2.dir_key = 14;
        memcpy(v, v0, sizeof v);
        memcpy(v2, v0, sizeof v);
        inject_values(v, RS, RB, RT, RH, RD, &a);
        inject_values(v2, RS, RB, RT, RH, RD, &a);
        CHECK(!memcmp(v, v2, sizeof v), "%s: same keys, same corruption", junk_name(junk));
        memcpy(v2, v0, sizeof v);
        inject_values(v2, RS, RB, RT, RH, RD, &b2);
        CHECK((junk == JUNK_OWN_DIR) == !memcmp(v, v2, sizeof v), "%s: other keys, other draws", junk_name(junk));
    }
}

/* ---- explicit attention ---------------------------------------------------- */

static void test_explicit_ops(void) {
    enum { B = 2, T = 37, H = 3, d = 8, C = H * d };
    real *qkv = malloc(sizeof(real) * B * T * 3 * C), *o = malloc(sizeof(real) * B * T * C),
         *o2 = malloc(sizeof(real) * B * T * C), *lse = malloc(sizeof(real) * B * H * T),
         *p = malloc(sizeof(real) * B * H * T * (T + 1)), lb[B * H * T], sink[H] = {0.7f, -1.5f, 2.5f};
    for (int i = 0; i < B * T * 3 * C; i++) qkv[i] = (real)(1.5 * rng_normal(31, (uint64_t)i));
    for (int i = 0; i < B * H * T; i++) lb[i] = (real)(-2 * rng_uniform(32, (uint64_t)i));
    for (int ph = 0; ph < 3; ph++)
        for (int withlb = 0; withlb < 2; withlb++) {
            AttnArgs a = {B, T, H, d, 3 * C, 3 * C, 3 * C, C, ph > 0, ph == 2 ? sink : NULL, withlb ? lb : NULL};
            op_attention_fwd(o, lse, qkv, qkv + C, qkv + 2 * C, &a);
            op_attention_probs(p, qkv, qkv + C, &a);
            op_attention_apply(o2, p, qkv + 2 * C, &a);
            double err = 0, rows = 0, upper = 0;
            for (int i = 0; i < B * T * C; i++) err = fmax(err, fabs(o[i] - o2[i]));
            for (int r = 0; r < B * H * T; r++) {
                const real *row = p + (long)r * (T + 1);
                double s = 0;
                for (int j = 0; j <= T; j++) s += row[j];
                rows = fmax(rows, fabs(s - 1));
                for (int j = r % T + 1; j < T; j++) upper = fmax(upper, fabs(row[j]));
                if (!ph) upper = fmax(upper, fabs(row[T]));
                /* the phantom's share is exp(c - LSE) */
                if (ph) rows = fmax(rows, fabs(row[T] - exp((ph == 2 ? sink[(r / T) % H] : 0) - lse[r])));
            }
            CHECK(err < 2e-6, "explicit attention == streaming op (phantom %d, logbias %d): %.3g", ph, withlb, err);
            CHECK(rows < 1e-5, "probability rows sum to 1, phantom = exp(c - LSE) (phantom %d): %.3g", ph, rows);
            CHECK(upper == 0, "nothing above the diagonal (and no phantom mass without one)");
        }
    free(qkv), free(o), free(o2), free(lse), free(p);
}

/* ---- gate overrides on a hand case ------------------------------------------ */

static void test_overrides(void) {
    const real g[3] = {0.2f, 0.9f, 0.6f};
    const real P0[12] = {1, 0, 0, 0, 0.4f, 0.6f, 0, 0, 0.2f, 0.3f, 0.5f, 0};
    real P[12];
    int perm[3];
    memcpy(P, P0, sizeof P);
    an_override_head(P, g, 3, 0, OVR_ROW_MEAN, 1, perm);
    /* row 1: gbar = 0.4*0.2 + 0.6*0.9 = 0.62; row 2: 0.04 + 0.27 + 0.3 = 0.61 */
    CHECK_CLOSE(P[4], 0.4 * 0.62, 1e-7, 0, "row mean, row 1, read 0");
    CHECK_CLOSE(P[5], 0.6 * 0.62, 1e-7, 0, "row mean, row 1, read 1");
    CHECK_CLOSE(P[10], 0.5 * 0.61, 1e-7, 0, "row mean, row 2, read 2");
    CHECK_CLOSE(P[0], 0.2, 1e-7, 0, "row mean, row 0: its only gate");
    memcpy(P, P0, sizeof P);
    an_override_head(P, g, 3, 0, OVR_REOPENED, 1, perm);
    CHECK_CLOSE(P[8], 0.2, 1e-7, 0, "reopened: g 0.2 -> 1");
    CHECK_CLOSE(P[9], 0.3 * 0.9, 1e-7, 0, "reopened: g 0.9 kept");
    CHECK_CLOSE(P[10], 0.5 * 0.6, 1e-7, 0, "reopened: g 0.6 kept");
    memcpy(P, P0, sizeof P);
    an_override_head(P, g, 3, 0, OVR_NONE, 1, perm);
    CHECK_CLOSE(P[9], 0.3 * 0.9, 1e-7, 0, "trained: p g");
    /* shuffled: each row's multipliers are a permutation of its gates */
    int perm_ok = 1, moved = 0;
    for (uint64_t key = 0; key < 40; key++) {
        memcpy(P, P0, sizeof P);
        an_override_head(P, g, 3, 0, OVR_SHUFFLED, key, perm);
        real m[3] = {P[8] / P0[8], P[9] / P0[9], P[10] / P0[10]};
        int used[3] = {0, 0, 0};
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                if (!used[k] && fabs(m[j] - g[k]) < 1e-6) {
                    used[k] = 1;
                    break;
                }
        perm_ok &= used[0] && used[1] && used[2];
        moved += fabs(m[0] - g[0]) > 1e-6;
    }
    CHECK(perm_ok, "shuffled: the row's gates, permuted");
    CHECK(moved > 10 && moved < 40, "shuffled: the permutation varies with the key (%d of 40 moved read 0)", moved);
    /* routing slot: renormalised with the phantom, p = (0.3, 0.3 | 0.4) */
    const real R0[6] = {0.6f, 0, 0.4f, 0.3f, 0.3f, 0.4f};
    real R[6];
    memcpy(R, R0, sizeof R);
    an_override_head(R, g, 2, 1, OVR_REOPENED, 1, perm);
    CHECK_CLOSE(R[3], 0.3 / 0.97, 1e-6, 0, "routing reopened: 0.3 / (0.4 + 0.3 + 0.27)");
    CHECK_CLOSE(R[4], 0.27 / 0.97, 1e-6, 0, "routing reopened: 0.27 / 0.97");
    memcpy(R, R0, sizeof R);
    an_override_head(R, g, 2, 1, OVR_ROW_MEAN, 1, perm);
    /* trained weights a = (0.3*0.2, 0.3*0.9): gbar = (0.012 + 0.243) / 0.33 */
    const double gb = (0.3 * 0.2 * 0.2 + 0.3 * 0.9 * 0.9) / (0.3 * 0.2 + 0.3 * 0.9);
    CHECK_CLOSE(R[3], 0.3 * gb / (0.4 + 0.6 * gb), 1e-6, 0, "routing row mean");
}

/* ---- exposure and telemetry sums on a hand case ----------------------------- */

static void test_stats_hand(void) {
    /* H = 1, d = 1, T = 4 reads with norms 4, 1, 3, 2: median 2.5 (quiet: t1,
     * t3), q25 1.75 (quiet: t1); gates 0.9, 0.2, 0.5, 0.7. */
    const real v[4] = {4, -1, 3, 2}, g[4] = {0.9f, 0.2f, 0.5f, 0.7f};
    const real P[20] = {0.6f, 0, 0, 0, 0.4f, 0.2f, 0.5f, 0, 0, 0.3f, 0.1f, 0.2f, 0.3f, 0, 0.4f,
                        0.1f, 0.1f, 0.2f, 0.4f, 0.2f};
    const int32_t tokens[4] = {5, 6, 5, 7};
    AnStats s;
    CHECK(an_stats_alloc(&s, 1, 1, 1, 10) == 0, "stats alloc");
    AnalysisOpts o;
    analysis_defaults(&o);
    AnCtx c;
    memset(&c, 0, sizeof c);
    c.o = &o, c.Tp = 4, c.first = 0, c.C = 1, c.H = 1, c.d = 1, c.L = 1, c.inputs = tokens, c.stats = &s;
    an_stats_sequence(&c, 0, 0, P, v, 1, g);
    CHECK_CLOSE(s.rows[0], 4, 0, 0, "rows");
    CHECK_CLOSE(s.quiet_med[0] / 4, (0 + 0.5 + 0.2 + 0.5) / 4, 1e-7, 0, "quiet mass, median cutoff");
    CHECK_CLOSE(s.quiet_q25[0] / 4, (0 + 0.5 + 0.2 + 0.1) / 4, 1e-7, 0, "quiet mass, q25 cutoff");
    CHECK_CLOSE(s.phantom[0] / 4, 1.3 / 4, 1e-7, 0, "phantom mass");
    CHECK_CLOSE(s.pos0[0] / 4, 1.0 / 4, 1e-7, 0, "position-0 mass");
    /* gbar per row: 0.9, 0.4, 0.46667, 0.6125; SD 0, 0.31623, 0.23570, 0.19645 */
    CHECK_CLOSE(s.gate_mean[0] / 4, (0.9 + 0.4 + 0.4666666667 + 0.6125) / 4, 1e-6, 0, "gate mean");
    CHECK_CLOSE(s.gate_sd[0] / 4, (0 + 0.3162277660 + 0.2357022604 + 0.1964529206) / 4, 1e-6, 0, "within-row SD");
    CHECK_CLOSE(s.r0[0] / s.rmed[0], 4.0 / 2.0, 1e-7, 0, "position-0 norm ratio: 4 / median(1, 3, 2)");
    const double n = s.tokens[0], m1 = s.mom[0] / n, m2 = s.mom[1] / n - m1 * m1,
                 m4 = s.mom[3] / n - 4 * m1 * s.mom[2] / n + 6 * m1 * m1 * s.mom[1] / n - 3 * m1 * m1 * m1 * m1;
    /* values 4, -1, 3, 2: mean 2, deviations 2, -3, 1, 0: m2 = 3.5, m4 = 24.5 */
    CHECK_CLOSE(m4 / (m2 * m2) - 3, 24.5 / 12.25 - 3, 1e-9, 0, "excess kurtosis from the power sums");
    CHECK_CLOSE(s.tok_gate[5] / s.tok_n[5], (0.9 + 0.5) / 2, 1e-7, 0, "mean gate of token 5");
    CHECK_CLOSE(s.tok_n[7], 1, 0, 0, "token 7 seen once");
    an_stats_free(&s);
}

/* Incidence on a hand case: H = 1, d = 1, T = 6, sink positions 2 (keys 0
 * and 1); the reads past the sink, j = 2..5, have norms 3, 2, 5, 1.5, so the
 * 50th percentile is 2.5 (quiet: j3, j5) and the 25th 1.875 (quiet: j5). */
static void test_incidence_hand(void) {
    const real v[6] = {4, -1, 3, -2, 5, 1.5f}, g[6] = {0.9f, 0.2f, 0.5f, 0.7f, 0.4f, 0.8f};
    const real P[42] = {1,    0,    0,    0,    0,    0,    0,    /* row i: keys 0..5, then the phantom */
                        0.5f, 0.5f, 0,    0,    0,    0,    0,    /**/
                        0.2f, 0.3f, 0.5f, 0,    0,    0,    0,    /**/
                        0.1f, 0.1f, 0.4f, 0.2f, 0,    0,    0.2f, /**/
                        0.1f, 0.2f, 0.1f, 0.3f, 0.2f, 0,    0.1f, /**/
                        0.1f, 0.1f, 0.2f, 0.1f, 0.1f, 0.3f, 0.1f};
    const int32_t tokens[6] = {1, 2, 3, 4, 5, 6};
    const double pct[2] = {25, 50};
    for (int gated = 0; gated < 2; gated++) {
        AnStats s;
        CHECK(an_stats_alloc(&s, 1, 1, 1, 10) == 0 && an_incidence_alloc(&s, 2, pct, 2) == 0, "stats alloc");
        AnalysisOpts o;
        analysis_defaults(&o);
        Model m;
        memset(&m, 0, sizeof m);
        m.arm = arm_find(gated ? "normgate" : "baseline");
        AnCtx c;
        memset(&c, 0, sizeof c);
        c.m = &m, c.o = &o, c.Tp = 6, c.first = 0, c.C = 1, c.H = 1, c.d = 1, c.L = 1, c.inputs = tokens, c.stats = &s;
        an_stats_sequence(&c, 0, 0, P, v, 1, gated ? g : NULL);
        CHECK_CLOSE(s.inc_rows[0], 6, 0, 0, "incidence rows");
        CHECK_CLOSE(s.inc_sink[0] / 6, (1 + 1 + 0.5 + 0.2 + 0.3 + 0.2) / 6, 1e-7, 0, "sink mass: rows' mass on keys 0, 1");
        /* mass on the reads past the sink, rows 2..5: 0.5 + 0.6 + 0.6 + 0.7 */
        CHECK_CLOSE(s.inc_mass[0], 2.4, 1e-6, 0, "mass past the sink");
        CHECK_CLOSE(s.inc_qmass[1] / s.inc_mass[0] / 0.5, (0.2 + 0.3 + 0.4) / 2.4 / 0.5, 1e-6, 0,
                    "blind-mass ratio at 50: 0.75");
        CHECK_CLOSE(s.inc_qmass[0] / s.inc_mass[0] / 0.25, 0.3 / 2.4 / 0.25, 1e-6, 0, "blind-mass ratio at 25: 0.5");
        if (!gated) { /* c_j = r_j = 3, 2, 5, 1.5: K = 1.5 + 1.6 + 1.9 + 1.75 */
            CHECK_CLOSE(s.inc_content[0], 6.75, 1e-6, 0, "content past the sink");
            CHECK_CLOSE(s.inc_qcontent[1] / s.inc_content[0], (0.4 + 0.6 + 0.65) / 6.75, 1e-6, 0,
                        "content share at 50");
            CHECK_CLOSE(s.inc_qcontent[0] / s.inc_content[0], 0.45 / 6.75, 1e-6, 0, "content share at 25");
        } else { /* value slot: c_j = g_j r_j = 1.5, 1.4, 2, 1.2: K = 0.75 + 0.88 + 0.97 + 1 */
            CHECK_CLOSE(s.inc_content[0], 3.6, 1e-6, 0, "gated content past the sink");
            CHECK_CLOSE(s.inc_qcontent[1] / s.inc_content[0], (0.28 + 0.42 + 0.5) / 3.6, 1e-6, 0,
                        "gated content share at 50: 1/3");
            CHECK_CLOSE(s.inc_qcontent[0] / s.inc_content[0], 0.36 / 3.6, 1e-6, 0, "gated content share at 25: 0.1");
        }
        an_stats_free(&s);
    }
}

/* ---- with the model ------------------------------------------------------------ */

static double forward_loss(Model *m, AnCtx *c, const int32_t *in, const int32_t *tg, int B) {
    ForwardHooks hk = {c, an_hook_values, an_hook_attention, NULL};
    m->hooks = &hk;
    c->inputs = in;
    double l = model_forward(m, in, tg, B, 0, 0);
    m->hooks = NULL;
    return l;
}

static void test_model(const char *arm) {
    enum { B = 3 };
    Config cfg = tiny_config(arm, 0);
    cfg.block_size = 9;
    Model m;
    char err[256];
    if (model_build(&m, &cfg, err, sizeof err)) {
        CHECK(0, "model_build %s: %s", arm, err);
        return;
    }
    tiny_randomize(&m, 4242);
    const int T = m.T, Tp = m.Tp, C = m.C, H = m.H;
    int32_t in[B * 9], tg[B * 9];
    tiny_batch(&m, B, 17, in, tg);
    AnalysisOpts o;
    analysis_defaults(&o);
    AnCtx c;
    memset(&c, 0, sizeof c);
    c.m = &m, c.o = &o, c.Tp = Tp, c.first = Tp - T, c.C = C, c.H = H, c.d = m.d, c.L = m.L;
    c.d_p = malloc(sizeof(real) * H * Tp * (Tp + 1));
    const double clean = model_forward(&m, in, tg, B, 0, 0);
    real *qkv0 = malloc(sizeof(real) * B * Tp * 3 * C);
    memcpy(qkv0, m.a.layer[0].qkv, sizeof(real) * B * Tp * 3 * C);

    /* dose 0 through the whole pipeline, with layer 0 reused: bitwise */
    ForwardHooks hk = {&c, an_hook_values, an_hook_attention, qkv0};
    for (int j = 0; j < JUNK_KINDS; j++) {
        if (j == JUNK_OWN_DIR && m.arm->filter != FILTER_PROJ) continue;
        InjectSpec s = {j, CUT_MEDIAN, 0, 0, 0, 0, NULL};
        c.inject = &s;
        m.hooks = &hk;
        c.inputs = in;
        double l = model_forward(&m, in, tg, B, 0, 0);
        m.hooks = NULL;
        CHECK(l == clean, "%s, %s at dose 0 (layer 0 reused): loss %.17g == clean %.17g", arm, junk_name(j), l, clean);
    }
    c.inject = NULL;

    /* the corruption reaches the gate */
    if (m.arm->filter != FILTER_NONE) {
        real *g_clean = malloc(sizeof(real) * B * H * Tp);
        memcpy(g_clean, m.a.layer[1].gate, sizeof(real) * B * H * Tp); /* from the clean forward above */
        model_forward(&m, in, tg, B, 0, 0);
        memcpy(g_clean, m.a.layer[1].gate, sizeof(real) * B * H * Tp);
        InjectSpec s = {JUNK_GAUSSIAN, CUT_MEDIAN, 1.5, 0, 0, 0, NULL};
        c.inject = &s;
        c.corrupted = 0;
        double l = forward_loss(&m, &c, in, tg, B);
        c.inject = NULL;
        CHECK(c.corrupted > 0 && l != clean, "%s: gaussian junk at 1.5 changes the loss", arm);
        const LayerActs *la = &m.a.layer[1];
        const real *tau = m.p.layer[1].tau, *w = m.p.layer[1].gate_w, *bias = m.p.layer[1].gate_b;
        double err_g = 0;
        int changed = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < Tp; t++) {
                    const real *v = la->qkv + ((long)b * Tp + t) * 3 * C + 2 * C + h * m.d;
                    double z;
                    if (m.arm->filter == FILTER_NORM) z = cfg.gate_beta * (nrm(v, m.d) / sqrt(m.d) - tau[h]);
                    else {
                        z = bias[h];
                        for (int k = 0; k < m.d; k++) z += (double)w[h * m.d + k] * v[k];
                    }
                    const long gi = ((long)b * H + h) * Tp + t;
                    err_g = fmax(err_g, fabs(la->gate[gi] - 1 / (1 + exp(-z))));
                    changed += fabs(la->gate[gi] - g_clean[gi]) > 1e-6;
                }
        CHECK(err_g < 1e-5, "%s: the gate is the gate of the corrupted read (%.3g)", arm, err_g);
        CHECK(changed > 0, "%s: corrupted reads changed %d gates", arm, changed);
        free(g_clean);

        /* the trained gate through the explicit path reproduces the model */
        c.explicit_path = 1;
        c.override = OVR_NONE;
        double le = forward_loss(&m, &c, in, tg, B);
        c.explicit_path = 0;
        CHECK(fabs(le - clean) <= 1e-5 * fabs(clean), "%s: explicit trained-gate path %.9g == model %.9g", arm, le,
              clean);
        for (int v = OVR_ROW_MEAN; v < OVR_KINDS; v++) {
            c.override = v;
            double lv = forward_loss(&m, &c, in, tg, B);
            CHECK(isfinite(lv) && lv != clean, "%s: override %s changes the loss (%.6g vs %.6g)", arm, override_name(v),
                  lv / (B * T), clean / (B * T));
        }
        c.override = OVR_NONE;
    }
    free(qkv0);
    free(c.d_p);
    model_free(&m);
}

/* ---- a checkpoint for the end-to-end test ----------------------------------- */

static int write_ckpt(const char *dir, const char *arm_arg, const char *data, int block_size) {
    char err[1024], arm[64];
    snprintf(arm, sizeof arm, "%s", arm_arg);
    /* ARM+gpt2, ARM+neox, ARM+rope: the arm in that form (tiny.h) */
    char *plus = strchr(arm, '+');
    int form = TINY_STUDY;
    for (int f = 1; plus && f < TINY_FORMS; f++)
        if (!strcmp(plus, tiny_form_name[f])) form = f;
    if (plus && form == TINY_STUDY) {
        fprintf(stderr, "unknown form '%s'\n", plus);
        return 1;
    }
    if (plus) *plus = 0;
    ShardSet ds;
    if (shardset_open(&ds, data, 0, 16, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    Config cfg = tiny_config(arm, form != TINY_STUDY);
    cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.block_size = block_size;
    tiny_form(&cfg, form);
    cfg.vocab_size = (int)ds.vocab_size;
    cfg.iters = 100; /* the header's step below: a checkpoint's step is at most its iters */
    shardset_close(&ds);
    snprintf(cfg.data, sizeof cfg.data, "%s", data);
    snprintf(cfg.out, sizeof cfg.out, "%s", dir);
    Model m;
    if (model_build(&m, &cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tiny_randomize(&m, rng_hash_str(arm_arg));
    char *yaml = NULL, path[2048];
    config_to_yaml_string(&cfg, &yaml);
    CkptMeta meta = {{0}, 100, (uint64_t)cfg.seed, yaml, strlen(yaml), (uint64_t)m.n_params, sizeof(real)};
    snprintf(meta.arm, sizeof meta.arm, "%s", arm);
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    int rc = fs_mkdir_p(dir, err, sizeof err) || ckpt_save(path, &meta, m.params, m.adam_m, m.adam_v, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    free(yaml);
    model_free(&m);
    return rc;
}

int main(int argc, char **argv) {
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "--write-ckpt"))
        return write_ckpt(argv[2], argv[3], argv[4], argc == 6 ? atoi(argv[5]) : 16);
    check_name = "test_analysis";
    test_quantiles();
    test_hand_injection();
    test_junk_types();
    test_explicit_ops();
    test_overrides();
    test_stats_hand();
    test_incidence_hand();
    const char *arms[] = {"baseline", "sinklogit", "sinktoken", "normgate", "renorm", "projgate", "combo", "combo2"};
    for (size_t i = 0; i < sizeof arms / sizeof *arms; i++) test_model(arms[i]);
    return check_finish();
}
