/* Compares sgtrain with the PyTorch twin's fixtures (tests/fixtures, made by
 * tests/twin/make_fixtures.py): logits, loss, every gradient at one batch,
 * then 10 AdamW steps (losses, pre-clip gradient norms, final parameters).
 * Included by test_twin.c (float build) and dtest_twin.c (double build),
 * which set the tolerances: the twin computes in float64, so the double
 * build must agree to ~1e-9 and the float build to fp32 rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "model.h"
#include "model_io.h"
#include "optim.h"
#include "safetensors.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures"
#endif

typedef struct {
    double logit_atol, logit_rtol, loss_rtol, grad_atol, grad_rtol, param_atol, param_rtol;
} Tol;

static const char *CASES[] = {"baseline", "offbyone", "sinklogit", "sinktoken", "normgate", "renorm",
                              "projgate", "combo",    "combo2",    "baseline_lnbias", "combo2_lnbias"};

/* max over elements of |got - want| / (atol + rtol |want|); <= 1 passes */
static double cmp(const real *got, const double *want, long n, double atol, double rtol) {
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static double *read_f64(const StFile *f, const char *name, long *n) {
    const StTensor *t = st_find(f, name);
    if (!t) return NULL;
    double *out = malloc(sizeof(double) * (t->numel ? t->numel : 1));
    real *tmp = malloc(sizeof(real) * (t->numel ? t->numel : 1));
    char err[256];
    st_read_real(f, name, t->ndim, t->shape, tmp, err, sizeof err);
    if (t->dtype == ST_F64) memcpy(out, t->data, sizeof(double) * t->numel);
    else
        for (uint64_t i = 0; i < t->numel; i++) out[i] = tmp[i];
    free(tmp);
    *n = (long)t->numel;
    return out;
}

static int32_t *read_tokens(const StFile *f, const char *name, long *n) {
    const StTensor *t = st_find(f, name);
    if (!t || t->dtype != ST_I32) return NULL;
    int32_t *out = malloc(sizeof(int32_t) * t->numel);
    memcpy(out, t->data, sizeof(int32_t) * t->numel);
    *n = (long)t->numel;
    return out;
}

static void split(const int32_t *win, int B, int T, int32_t *in, int32_t *tg) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = win[b * (T + 1) + t];
            tg[b * T + t] = win[b * (T + 1) + t + 1];
        }
}

/* Every tensor of the model in buf against the fixture's PREFIX<name>;
 * with scale_atol the absolute tolerance is relative to the tensor's largest
 * entry.  Returns the worst error in units of the tolerance. */
static double cmp_tensors(const Model *m, const StFile *f, const real *buf, const char *prefix,
                          const char *name, double atol, int scale_atol, double rtol) {
    double worst = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        char key[128];
        long n = 0;
        snprintf(key, sizeof key, "%s%s", prefix, t->name);
        double *want = read_f64(f, key, &n);
        CHECK(want && n == t->numel_real, "%s: %s missing or wrong size", name, key);
        if (!want) continue;
        double a = atol;
        if (scale_atol) {
            double mx = 0;
            for (long j = 0; j < n; j++) mx = fmax(mx, fabs(want[j]));
            a = atol * mx + 1e-300;
        }
        double e = cmp(buf + t->offset, want, n, a, rtol);
        worst = fmax(worst, e);
        CHECK(e <= 1, "%s %s: worst error %.3g x tolerance", name, key, e);
        free(want);
    }
    return worst;
}

static const char *META_KEYS[] = {"arm", "ln_bias", "n_layer", "n_head", "n_embd", "block_size",
                                  "vocab_size", "gate_beta", "lr", "lr_min", "warmup", "iters",
                                  "beta1", "beta2", "adam_eps", "weight_decay", "grad_clip"};

static void twin_case(const char *name, const Tol *tol) {
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/%s.safetensors", FIXTURE_DIR, name);
    StFile f;
    if (st_open(&f, path, err, sizeof err)) {
        CHECK(0, "%s", err);
        return;
    }
    Config c;
    config_from_tier(&c, "test", err, sizeof err);
    for (size_t k = 0; k < sizeof META_KEYS / sizeof *META_KEYS; k++) {
        const char *v = st_meta(&f, META_KEYS[k]);
        CHECK(v && config_set(&c, META_KEYS[k], v, err, sizeof err) == 0, "%s: metadata %s: %s", name,
              META_KEYS[k], v ? err : "missing");
    }
    int B = atoi(st_meta(&f, "B") ? st_meta(&f, "B") : "0");
    Model m;
    if (model_build(&m, &c, err, sizeof err) || model_load_st(&m, &f, "param.", err, sizeof err)) {
        CHECK(0, "%s: %s", name, err);
        st_close(&f);
        return;
    }
    int T = m.T, V = m.V;
    long n;
    int32_t *win = read_tokens(&f, "tokens", &n);
    int32_t *in = malloc(sizeof(int32_t) * B * T), *tg = malloc(sizeof(int32_t) * B * T);
    split(win, B, T, in, tg);

    /* logits and loss */
    real *logits = malloc(sizeof(real) * (size_t)B * T * V);
    model_logits(&m, in, B, logits);
    double *want = read_f64(&f, "logits", &n);
    double e = cmp(logits, want, n, tol->logit_atol, tol->logit_rtol);
    CHECK(e <= 1, "%s logits: worst error %.3g x tolerance", name, e);
    free(want);
    model_zero_grad(&m);
    double loss = model_forward(&m, in, tg, B, 1, (real)(1.0 / (B * T))) / (B * T);
    model_backward(&m);
    want = read_f64(&f, "loss", &n);
    CHECK(fabs(loss - want[0]) <= tol->loss_rtol * fabs(want[0]), "%s loss %.12g twin %.12g", name, loss, want[0]);
    free(want);

    /* every gradient; tolerance relative to the tensor's largest entry */
    double worst_g = cmp_tensors(&m, &f, m.grads, "grad.", name, tol->grad_atol, 1, tol->grad_rtol);

    /* 10 AdamW steps from the same start */
    model_load_st(&m, &f, "param.", err, sizeof err);
    memset(m.adam_m, 0, sizeof(real) * m.n_params);
    memset(m.adam_v, 0, sizeof(real) * m.n_params);
    int32_t *steps = read_tokens(&f, "train.tokens", &n);
    double *wl = read_f64(&f, "train.losses", &n), *wg = read_f64(&f, "train.gradnorm", &n);
    double worst_l = 0;
    for (int s = 0; s < c.iters; s++) {
        split(steps + (size_t)s * B * (T + 1), B, T, in, tg);
        model_zero_grad(&m);
        double l = model_forward(&m, in, tg, B, 1, (real)(1.0 / (B * T))) / (B * T);
        model_backward(&m);
        double gn = optim_step(&m, s, lr_at(&c, s));
        worst_l = fmax(worst_l, fabs(l - wl[s]) / fabs(wl[s]));
        CHECK(fabs(l - wl[s]) <= tol->loss_rtol * fabs(wl[s]), "%s step %d loss %.12g twin %.12g", name, s, l, wl[s]);
        CHECK(fabs(gn - wg[s]) <= tol->grad_rtol * fabs(wg[s]), "%s step %d grad norm %.12g twin %.12g", name, s, gn, wg[s]);
    }
    double worst_p = cmp_tensors(&m, &f, m.params, "train.final.", name, tol->param_atol, 0, tol->param_rtol);
    printf("twin %-16s loss %.10f  grads %.2g  10-step losses max rel %.2g  params %.2g (x tolerance)\n",
           name, loss, worst_g, worst_l, worst_p);
    free(steps);
    free(wl);
    free(wg);
    free(win);
    free(in);
    free(tg);
    free(logits);
    model_free(&m);
    st_close(&f);
}

static int twin_main(const char *label, const Tol *tol) {
    check_name = label;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) twin_case(CASES[i], tol);
    return check_finish();
}
