/* What the CPU benchmarks share: medians, and the BLAS's sgemm peak
 * measured in the benchmark's own process. */
#ifndef SG_BENCH_UTIL_H
#define SG_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "profile.h"
#include "rng.h"

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0, n), n > 0; v is left as it was. */
static inline double bench_median(const double *v, int n) {
    double *s = malloc((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* The best of three n^3 sgemms after a warm-up, through the call the model
 * uses (op_matmul_fwd): the BLAS's practical peak on this machine. */
static inline double bench_sgemm_peak(int n) {
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)rng_uniform(1, (uint64_t)i);
        b[i] = (float)rng_uniform(2, (uint64_t)i);
    }
    double best = 0;
    for (int r = 0; r < 4; r++) {
        double t0 = prof_now();
        op_matmul_fwd(c, a, b, n, n, n);
        double gf = 2.0 * n * n * n / (prof_now() - t0) / 1e9;
        if (r > 0 && gf > best) best = gf;
    }
    free(a), free(b), free(c);
    return best;
}

#endif
