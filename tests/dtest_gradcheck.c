/* Finite-difference gradient check, in double precision, of every parameter
 * tensor of every arm (sink logits, thresholds, gate directions, the sink
 * token included) through the whole model: embeddings, every op, the fused
 * classifier.  Central differences with h = 1e-6 have truncation error
 * ~h^2 and rounding ~eps |L| / h: each of the two losses is rounded to
 * about an ulp of L, 1.3e-9 of the difference at L = 6.  So a component
 * agrees to 1e-6 relative or to 4 eps |L| / h absolute, whichever is
 * larger (the rounding bound alone took one BLAS's order of sums to 1.05
 * of an absolute 1e-9, 2026-12-04); a missing or wrong term shows up as an
 * O(1) error.  Every arm again as GPT-2
 * is built (imported models): LayerNorm and linear-layer biases and the tanh
 * GELU; and again as GPT-NeoX is (Pythia): rotary positions on half of each
 * head, attention and MLP in parallel, an untied LM head; and a few arms
 * with rotary positions on every dim of the study's model. */
#include <float.h>
#include <math.h>

#include "check.h"
#include "tiny.h"

enum { B = 3, PER_TENSOR = 24 };

static double loss_at(Model *m, const int32_t *in, const int32_t *tg) {
    return model_forward(m, in, tg, B, 0, 0) / (B * m->T);
}

static void check_arm(const char *arm, int ln_bias, int form) {
    Config c = tiny_config(arm, ln_bias);
    tiny_form(&c, form);
    Model m;
    char err[256];
    if (model_build(&m, &c, err, sizeof err)) {
        CHECK(0, "%s: %s", arm, err);
        return;
    }
    tiny_randomize(&m, 11);
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&m, B, 5, in, tg);
    model_zero_grad(&m);
    model_forward(&m, in, tg, B, 1, 1.0 / (B * m.T));
    model_backward(&m);
    const double h = 1e-6, atol = 4 * DBL_EPSILON * fabs(loss_at(&m, in, tg)) / h;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < m.n_tensors; i++) {
        const TensorInfo *t = &m.tensors[i];
        long n = t->numel_real;
        int k = n <= PER_TENSOR ? (int)n : PER_TENSOR;
        double terr = 0;
        for (int s = 0; s < k; s++) {
            long j = n <= PER_TENSOR ? s : (long)rng_below(rng_key(3, (uint64_t)i, (uint64_t)s), (uint64_t)n);
            real *p = m.params + t->offset + j;
            real keep = *p;
            *p = keep + h;
            double fp = loss_at(&m, in, tg);
            *p = keep - h;
            double fm = loss_at(&m, in, tg);
            *p = keep;
            double fd = (fp - fm) / (2 * h), an = m.grads[t->offset + j];
            double e = fabs(fd - an) / (atol + 1e-6 * fabs(fd));
            if (e > terr) terr = e;
            CHECK(e <= 1, "%s%s%s %s[%ld]: analytic %.12g finite difference %.12g", arm,
                  ln_bias ? "+ln_bias" : "", tiny_form_name[form], t->name, j, an, fd);
        }
        if (terr > worst) {
            worst = terr;
            worst_name = t->name;
        }
    }
    printf("gradcheck %-10s ln_bias=%d %-5s: %d tensors, worst error %.3g of tolerance (%s)\n", arm,
           c.ln_bias, tiny_form_name[form], m.n_tensors, worst, worst_name);
    model_free(&m);
}

int main(void) {
    check_name = "gradcheck";
    for (int a = 0; a < arm_count(); a++) check_arm(arm_at(a)->name, 0, 0);
    check_arm("baseline", 1, 0);
    check_arm("combo2", 1, 0);
    check_arm("sinktoken", 1, 0);
    for (int a = 0; a < arm_count(); a++) check_arm(arm_at(a)->name, 1, TINY_GPT2);
    for (int a = 0; a < arm_count(); a++) check_arm(arm_at(a)->name, 1, TINY_NEOX);
    check_arm("baseline", 0, TINY_ROPE);
    check_arm("sinktoken", 0, TINY_ROPE);
    check_arm("combo2", 0, TINY_ROPE);
    return check_finish();
}
