#include "inject.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const junk_names[JUNK_KINDS] = {"structured", "same_context", "gaussian", "random_direction",
                                                    "own_direction"};
static const char *const cut_names[CUT_KINDS] = {"median", "q25"};

const char *junk_name(int kind) { return kind >= 0 && kind < JUNK_KINDS ? junk_names[kind] : "?"; }
const char *cutoff_name(int kind) { return kind >= 0 && kind < CUT_KINDS ? cut_names[kind] : "?"; }
double cutoff_quantile(int kind) { return kind == CUT_Q25 ? 0.25 : 0.5; }

int junk_from_name(const char *s) {
    for (int i = 0; i < JUNK_KINDS; i++)
        if (!strcmp(s, junk_names[i])) return i;
    return -1;
}

int cutoff_from_name(const char *s) {
    for (int i = 0; i < CUT_KINDS; i++)
        if (!strcmp(s, cut_names[i])) return i;
    return -1;
}

double quantile_sorted(const float *x, int n, double q) {
    if (n <= 0) return 0;
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1) return x[n - 1];
    double f = pos - lo;
    return x[lo] + f * ((double)x[lo + 1] - x[lo]);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void sort_floats(float *x, int n) {
    if (n > 0) qsort(x, (size_t)n, sizeof(float), cmp_float);
}

static double norm_of(const real *v, int d) {
    double s = 0;
    for (int k = 0; k < d; k++) s += (double)v[k] * v[k];
    return sqrt(s);
}

void read_norms(float *norms, const real *v, int vs, int B, int T, int H, int d, int first) {
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * H; bh++) {
        const int b = bh / H, h = bh % H;
        for (int t = first; t < T; t++)
            norms[(long)bh * T + t] = (float)norm_of(v + ((long)b * T + t) * vs + (long)h * d, d);
    }
}

void head_cutoff(const float *norms, int n, int kind, float *scratch, double *median, double *cut) {
    memcpy(scratch, norms, sizeof(float) * (size_t)n);
    sort_floats(scratch, n);
    *median = quantile_sorted(scratch, n, 0.5);
    *cut = quantile_sorted(scratch, n, cutoff_quantile(kind));
}

static void normalize(real *u, int d) {
    double n = norm_of(u, d);
    for (int k = 0; k < d; k++) u[k] = n > 0 ? (real)(u[k] / n) : 0;
}

void junk_vector(real *u, const real *src, int vs, int B, int T, int H, int d, int b, int h, int t,
                 const InjectSpec *s) {
    const uint64_t w = rng_key(s->key, (uint64_t)b * H + h, (uint64_t)t);
    const int n = T - s->first;
    int sb = b, st = t;
    switch (s->junk) {
    case JUNK_STRUCTURED: /* another sequence: skip b itself */
        sb = (int)rng_below(rng_mix(w + 1), (uint64_t)(B - 1));
        sb += sb >= b;
        st = s->first + (int)rng_below(rng_mix(w + 2), (uint64_t)n);
        break;
    case JUNK_SAME_CONTEXT: /* another position: skip t itself */
        st = s->first + (int)rng_below(rng_mix(w + 2), (uint64_t)(n - 1));
        st += st >= t;
        break;
    case JUNK_GAUSSIAN:
        for (int k = 0; k < d; k++) u[k] = (real)rng_normal(w, (uint64_t)k);
        normalize(u, d);
        return;
    case JUNK_RANDOM_DIR: {
        const uint64_t dk = rng_key(s->dir_key, (uint64_t)h, 0x5d);
        for (int k = 0; k < d; k++) u[k] = (real)rng_normal(dk, (uint64_t)k);
        normalize(u, d);
        return;
    }
    case JUNK_OWN_DIR:
        memcpy(u, s->own + (long)h * d, sizeof(real) * (size_t)d);
        normalize(u, d);
        return;
    }
    memcpy(u, src + ((long)sb * T + st) * vs + (long)h * d, sizeof(real) * (size_t)d);
    normalize(u, d);
}

long inject_values(real *v, int vs, int B, int T, int H, int d, const InjectSpec *s) {
    const int C = H * d, n = T - s->first;
    if (n <= 0) return 0;
    /* Transplanted reads come from the values before any corruption. */
    real *src = NULL;
    int src_vs = vs;
    if (s->junk == JUNK_STRUCTURED || s->junk == JUNK_SAME_CONTEXT) {
        src = malloc(sizeof(real) * (size_t)B * T * C);
        if (!src) abort();
        for (long r = 0; r < (long)B * T; r++) memcpy(src + r * C, v + r * vs, sizeof(real) * (size_t)C);
        src_vs = C;
    }
    float *norms = malloc(sizeof(float) * (size_t)B * H * T);
    if (!norms) abort();
    read_norms(norms, v, vs, B, T, H, d, s->first);
    long total = 0;
#pragma omp parallel reduction(+ : total)
    {
        float *scratch = malloc(sizeof(float) * (size_t)n);
        real *u = malloc(sizeof(real) * (size_t)d);
        if (!scratch || !u) abort();
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const float *nr = norms + (long)bh * T + s->first;
            double med, cut;
            head_cutoff(nr, n, s->cutoff, scratch, &med, &cut);
            const real scale = (real)(s->eps * med);
            for (int t = s->first; t < T; t++) {
                if (!(nr[t - s->first] < cut)) continue;
                junk_vector(u, src, src_vs, B, T, H, d, b, h, t, s);
                real *vr = v + ((long)b * T + t) * vs + (long)h * d;
                for (int k = 0; k < d; k++) vr[k] += scale * u[k];
                total++;
            }
        }
        free(scratch);
        free(u);
    }
    free(norms);
    free(src);
    return total;
}
