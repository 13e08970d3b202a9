/* The key-value cache (src/kvcache.c) against the full forward, every arm,
 * in double precision: the paper's claim that every arm is compatible with
 * the cache (Table 4), shown by the logits.
 *
 * Three sequences share a prompt of P tokens and then go different ways.
 * The cache enters the prompt once (kv_prefill) and each sequence's own
 * tokens one step at a time (kv_step); model_logits runs each whole
 * sequence through the training forward.  The logits that follow every
 * position from the prompt's last on must agree to rounding, for every
 * prompt length P from 1 to the context, the context filled to its last
 * position.  The parameters are tiny.h's, which spread the gates over
 * (0, 1) and give the phantom weight, so no arm's mechanism is inert. */
#include <math.h>

#include "check.h"
#include "kvcache.h"
#include "tiny.h"

enum { NSEQ = 3, T = 9 };

/* max |a - b| over the row, relative to the row's largest |b| */
static double compare(const real *a, const real *b, int n) {
    double diff = 0, scale = 0;
    for (int i = 0; i < n; i++) diff = fmax(diff, fabs(a[i] - b[i])), scale = fmax(scale, fabs(b[i]));
    return diff / scale;
}

static void test_arm(const char *arm, int form) {
    char err[256];
    Config c = tiny_config(arm, 1);
    c.block_size = T;
    tiny_form(&c, form); /* GPT-2's or GPT-NeoX's form, as `sgtrain import` builds them */
    Model m;
    CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s%s: %s", arm, tiny_form_name[form], err);
    tiny_randomize(&m, 31);
    const int V = m.V;
    int32_t seq[NSEQ * T];
    for (int b = 0; b < NSEQ; b++)
        for (int t = 0; t < T; t++) seq[b * T + t] = (int32_t)rng_below(rng_key(7, (uint64_t)b, (uint64_t)t), (uint64_t)V);
    real *full = malloc(sizeof(real) * NSEQ * T * V), *got = malloc(sizeof(real) * NSEQ * V);
    int32_t step[NSEQ];
    for (int P = 1; P <= T; P++) {
        /* the prompt is sequence 0's first P tokens, shared by all */
        for (int b = 1; b < NSEQ; b++)
            for (int t = 0; t < P; t++) seq[b * T + t] = seq[t];
        model_logits(&m, seq, NSEQ, full);
        KvCache kv;
        CHECK(kv_init(&kv, &m, NSEQ, err, sizeof err) == 0, "%s%s: %s", arm, tiny_form_name[form], err);
        kv_prefill(&kv, seq, P, got);
        double worst = compare(got, full + (size_t)(P - 1) * V, V);
        for (int t = P; t < T; t++) {
            for (int b = 0; b < NSEQ; b++) step[b] = seq[b * T + t];
            kv_step(&kv, step, got);
            for (int b = 0; b < NSEQ; b++)
                worst = fmax(worst, compare(got + (size_t)b * V, full + ((size_t)b * T + t) * V, V));
        }
        CHECK(kv.ntok == T && kv.len == m.Tp, "%s%s P=%d: %d tokens in %d rows, want %d in %d", arm, tiny_form_name[form], P, kv.ntok,
              kv.len, T, m.Tp);
        CHECK(worst < 1e-13, "%s%s, prompt of %d: cached logits differ from the full forward by %g relative", arm, tiny_form_name[form], P,
              worst);
        kv_free(&kv);
    }
    free(full);
    free(got);
    model_free(&m);
}

int main(void) {
    check_name = "dtest_kvcache";
    for (int i = 0; i < arm_count(); i++) test_arm(arm_at(i)->name, 0);
    for (int i = 0; i < arm_count(); i++) test_arm(arm_at(i)->name, TINY_GPT2);
    for (int i = 0; i < arm_count(); i++) test_arm(arm_at(i)->name, TINY_NEOX);
    for (int i = 0; i < arm_count(); i++) test_arm(arm_at(i)->name, TINY_ROPE);
    return check_finish();
}
