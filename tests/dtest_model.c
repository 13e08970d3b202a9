/* Model-level properties, in double precision:
 *  - parameter counts per Table 4 at every paper tier;
 *  - the arms' limits: offbyone == sinklogit with b_h = 0 (exactly),
 *    sinklogit -> baseline as b_h -> -inf, normgate and renorm -> baseline as
 *    tau -> -inf, projgate -> baseline as its bias -> +inf;
 *  - one batch equals the same batch in micro-batches with accumulation;
 *  - the backward's gradient announcements (GradHook, for the overlapped sum
 *    over ranks) cover the vector once, in order, and each announced range
 *    already holds its final values. */
#include <math.h>

#include "check.h"
#include "tiny.h"

enum { B = 4 };

static long expected_extra(const Arm *a, int L, int H, int C, int d) {
    long per_layer = 0;
    if (a->zero == ZERO_PHANTOM_LEARNED) per_layer += H;
    if (a->filter == FILTER_NORM) per_layer += H;
    if (a->filter == FILTER_PROJ) per_layer += (long)H * (d + 1);
    return per_layer * L + (a->zero == ZERO_TOKEN ? C : 0);
}

static void test_counts(void) {
    const char *tiers[] = {"10M", "50M", "124M", "350M"};
    for (int ti = 0; ti < 4; ti++) {
        Config c;
        char err[256];
        config_from_tier(&c, tiers[ti], err, sizeof err);
        long base_total = 0;
        for (int ai = 0; ai < arm_count(); ai++) {
            const Arm *a = arm_at(ai);
            snprintf(c.arm, sizeof c.arm, "%s", a->name);
            Model m;
            model_describe(&m, &c, err, sizeof err);
            long L = c.n_layer, C = c.n_embd;
            long want_ne = L * (12 * C * C + 2 * C) + C; /* blocks + LayerNorms, no biases */
            if (ai == 0) {
                base_total = model_count_params(&m);
                CHECK(model_count_non_embedding(&m) == want_ne, "%s baseline non-embedding %ld want %ld",
                      tiers[ti], model_count_non_embedding(&m), want_ne);
                CHECK(base_total == want_ne + (long)c.vocab_size * C + (long)c.block_size * C,
                      "%s baseline total %ld", tiers[ti], base_total);
            }
            long want = expected_extra(a, c.n_layer, c.n_head, c.n_embd, c.n_embd / c.n_head);
            CHECK(model_count_arm_extra(&m) == want, "%s %s: extra params %ld, Table 4 says %ld",
                  tiers[ti], a->name, model_count_arm_extra(&m), want);
            CHECK(model_count_params(&m) == base_total + want, "%s %s total %ld", tiers[ti], a->name,
                  model_count_params(&m));
            model_free(&m);
        }
    }
    /* The paper names tiers by non-embedding size: 10M is 10.6M. */
    Config c;
    char err[256];
    config_from_tier(&c, "10M", err, sizeof err);
    Model m;
    model_describe(&m, &c, err, sizeof err);
    CHECK(fabs(model_count_non_embedding(&m) / 1e6 - 10.6) < 0.1, "10M tier non-embedding %ld",
          model_count_non_embedding(&m));
    model_free(&m);
}

/* logits of `arm` after `edit` changes its parameters, against baseline
 * with the shared tensors copied over. */
typedef void (*Edit)(Model *m, double value);

static void set_role(Model *m, TensorRole role, double value) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role == role)
            for (long j = 0; j < m->tensors[i].numel_real; j++) m->params[m->tensors[i].offset + j] = (real)value;
}

static double compare_to(const char *arm, TensorRole role, double value, const char *ref_arm) {
    char err[256];
    Config ca = tiny_config(arm, 0), cb = tiny_config(ref_arm, 0);
    Model a, b;
    model_build(&a, &ca, err, sizeof err);
    model_build(&b, &cb, err, sizeof err);
    tiny_randomize(&a, 5);
    set_role(&a, role, value);
    /* copy every tensor the reference has, by name */
    for (int i = 0; i < b.n_tensors; i++) {
        const TensorInfo *t = model_tensor(&a, b.tensors[i].name);
        memcpy(b.params + b.tensors[i].offset, a.params + t->offset, sizeof(real) * t->numel);
    }
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&a, B, 9, in, tg);
    long n = (long)B * a.T * a.V;
    real *la = malloc(sizeof(real) * n), *lb = malloc(sizeof(real) * n);
    model_logits(&a, in, B, la);
    model_logits(&b, in, B, lb);
    double worst = 0;
    for (long i = 0; i < n; i++) worst = fmax(worst, fabs(la[i] - lb[i]));
    free(la);
    free(lb);
    model_free(&a);
    model_free(&b);
    return worst;
}

static void test_limits(void) {
    double d;
    d = compare_to("sinklogit", ROLE_SINK_LOGIT, 0.0, "offbyone");
    CHECK(d == 0, "offbyone vs sinklogit(b=0): max |dlogit| %g, want exactly 0", d);
    d = compare_to("sinklogit", ROLE_SINK_LOGIT, -800.0, "baseline");
    CHECK(d < 1e-12, "sinklogit(b=-800) vs baseline: %g", d);
    d = compare_to("sinklogit", ROLE_SINK_LOGIT, -2.0, "baseline");
    CHECK(d > 1e-3, "sinklogit(b=-2) must still differ from baseline: %g", d);
    d = compare_to("normgate", ROLE_GATE_TAU, -1e3, "baseline");
    CHECK(d < 1e-12, "normgate(tau=-1e3) vs baseline: %g", d);
    d = compare_to("renorm", ROLE_GATE_TAU, -1e3, "baseline");
    CHECK(d < 1e-12, "renorm(tau=-1e3) vs baseline: %g", d);
    d = compare_to("combo", ROLE_GATE_TAU, -1e3, "sinklogit");
    CHECK(d < 1e-12, "combo(tau=-1e3) vs sinklogit: %g", d);
    d = compare_to("projgate", ROLE_GATE_BIAS, 800.0, "baseline");
    CHECK(d < 1e-12, "projgate(b=800) vs baseline: %g", d);
    d = compare_to("projgate", ROLE_GATE_BIAS, 1.0, "baseline");
    CHECK(d > 1e-3, "projgate(b=1) must still differ from baseline: %g", d);
}

static void test_projgate_limit(void) {
    /* w_h = 0 and b_h -> +inf: the gate is exactly 1. */
    char err[256];
    Config ca = tiny_config("projgate", 0), cb = tiny_config("baseline", 0);
    Model a, b;
    model_build(&a, &ca, err, sizeof err);
    model_build(&b, &cb, err, sizeof err);
    tiny_randomize(&a, 5);
    set_role(&a, ROLE_GATE_DIR, 0);
    set_role(&a, ROLE_GATE_BIAS, 800);
    for (int i = 0; i < b.n_tensors; i++) {
        const TensorInfo *t = model_tensor(&a, b.tensors[i].name);
        memcpy(b.params + b.tensors[i].offset, a.params + t->offset, sizeof(real) * t->numel);
    }
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&a, B, 9, in, tg);
    double la = model_forward(&a, in, tg, B, 0, 0), lb = model_forward(&b, in, tg, B, 0, 0);
    CHECK(fabs(la - lb) < 1e-12, "projgate(w=0, b=800) loss %.15g vs baseline %.15g", la, lb);
    model_free(&a);
    model_free(&b);
}

/* gradient of the mean loss over 4 sequences: once as one batch, once as
 * micro-batches of 1 and of 2 with accumulation (dscale = 1/(4T) each). */
static void test_accumulation(const char *arm) {
    char err[256];
    Config c = tiny_config(arm, 0);
    Model m;
    model_build(&m, &c, err, sizeof err);
    tiny_randomize(&m, 21);
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&m, B, 2, in, tg);
    real scale = (real)(1.0 / (B * m.T));
    model_zero_grad(&m);
    double l1 = model_forward(&m, in, tg, B, 1, scale);
    model_backward(&m);
    real *g1 = malloc(sizeof(real) * m.n_params);
    memcpy(g1, m.grads, sizeof(real) * m.n_params);
    for (int mb = 1; mb <= 2; mb++) {
        model_zero_grad(&m);
        double l2 = 0;
        for (int k = 0; k < B / mb; k++) {
            l2 += model_forward(&m, in + k * mb * m.T, tg + k * mb * m.T, mb, 1, scale);
            model_backward(&m);
        }
        double worst = 0;
        for (long i = 0; i < m.n_params; i++)
            worst = fmax(worst, fabs(g1[i] - m.grads[i]) / (1e-12 + fabs(g1[i])));
        CHECK(fabs(l1 - l2) < 1e-12 * fabs(l1), "%s loss 1x%d %.15g vs %dx%d %.15g", arm, B, l1, B / mb, mb, l2);
        CHECK(worst < 1e-9, "%s: gradients of 1x%d vs %dx%d differ by %g relative", arm, B, B / mb, mb, worst);
    }
    free(g1);
    model_free(&m);
}

typedef struct {
    const Model *m;
    real *snap; /* each range's values when it was announced */
    long next;  /* where the next range must end */
    int n, ok;
} Announced;

static void record(void *ctx, long off, long len) {
    Announced *a = ctx;
    a->ok &= off >= 0 && len > 0 && off + len == a->next;
    if (off >= 0 && off + len <= a->m->n_params) memcpy(a->snap + off, a->m->grads + off, sizeof(real) * len);
    a->next = off;
    a->n++;
}

static void test_grad_ranges(const char *arm) {
    char err[256];
    Config c = tiny_config(arm, 1);
    Model m;
    model_build(&m, &c, err, sizeof err);
    tiny_randomize(&m, 5);
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&m, B, 3, in, tg);
    Announced a = {&m, calloc((size_t)m.n_params, sizeof(real)), m.n_params, 0, 1};
    GradHook hook = {record, &a};
    model_zero_grad(&m);
    /* a first micro-batch accumulates without announcements, as training does */
    model_forward(&m, in, tg, 2, 1, (real)0.1);
    model_backward(&m);
    model_forward(&m, in + 2 * m.T, tg + 2 * m.T, 2, 1, (real)0.1);
    m.grad_hook = &hook;
    model_backward(&m);
    m.grad_hook = NULL;
    CHECK(a.ok && a.next == 0, "%s: ranges descend contiguously from %ld to 0 (reached %ld)", arm, m.n_params,
          a.next);
    CHECK(a.n == m.L + 2, "%s: %d ranges: the final LayerNorm, %d layers, the embeddings", arm, a.n, m.L);
    long differ = 0, nonzero = 0;
    for (long i = 0; i < m.n_params; i++) {
        differ += memcmp(&a.snap[i], &m.grads[i], sizeof(real)) != 0;
        nonzero += m.grads[i] != 0;
    }
    CHECK(differ == 0 && nonzero > m.n_params / 2,
          "%s: every announced range already held its final gradient (%ld of %ld differ; %ld non-zero)", arm,
          differ, m.n_params, nonzero);
    free(a.snap);
    model_free(&m);
}

int main(void) {
    check_name = "model";
    test_counts();
    test_limits();
    test_projgate_limit();
    for (int a = 0; a < arm_count(); a++) test_accumulation(arm_at(a)->name);
    for (int a = 0; a < arm_count(); a++) test_grad_ranges(arm_at(a)->name);
    return check_finish();
}
