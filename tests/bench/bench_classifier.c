/* bench_classifier: the CPU's fused LM head (op_classifier: logits,
 * softmax, cross-entropy, dx and dwte) against its three GEMMs alone, run
 * the way the op runs them -- per chunk of rows, logits z = x wte^T, then
 * dx = z wte and dwte += z^T x -- with nothing between them.  What the op
 * takes beyond the GEMMs alone is its softmax and what the GEMMs lose to
 * it (z leaves the caches between them); what the GEMMs take beyond the
 * sgemm peak is the BLAS's rate on these shapes (inner dimension C or the
 * chunk's rows).  The shapes are bench_train's (N = micro-batch x context).
 *
 *   bench_classifier [--shape cpu-tiny|10M|all] [--reps N]
 *
 * Medians over the timed repetitions, each after one untimed; compare
 * ratios within one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cpu/blas.h"
#include "ops.h"
#include "profile.h"
#include "rng.h"
#include "bench_util.h"

#ifndef SG_BLAS_NAME
#define SG_BLAS_NAME "?"
#endif

static float *rand_buf(long n, uint64_t key, double scale) {
    float *p = malloc(sizeof *p * (size_t)n);
    for (long i = 0; i < n; i++) p[i] = (float)(scale * (rng_uniform(key, (uint64_t)i) - 0.5));
    return p;
}

/* The op's three GEMMs over N rows in chunks of `rows`, seconds per
 * product kind (logits, dx, dwte) added over the chunks. */
static void gemms_alone(double secs[3], float *z, float *dx, float *dwte, const float *x, const float *wte, int N,
                        int C, int V, int rows) {
    secs[0] = secs[1] = secs[2] = 0;
    blas_threads_sync(rows, V, C);
    for (int r0 = 0; r0 < N; r0 += rows) {
        const int n = N - r0 < rows ? N - r0 : rows;
        const float *xc = x + (size_t)r0 * C;
        double t0 = prof_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, V, C, 1, xc, C, wte, C, 0, z, V);
        double t1 = prof_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, C, V, 1, z, V, wte, C, 0, dx + (size_t)r0 * C, C);
        double t2 = prof_now();
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, n, 1, z, V, xc, C, 1, dwte, C);
        double t3 = prof_now();
        secs[0] += t1 - t0, secs[1] += t2 - t1, secs[2] += t3 - t2;
    }
}

static void bench_shape(const char *tier, int micro_batch, int reps, double peak) {
    Config c;
    char err[256];
    if (config_from_tier(&c, tier, err, sizeof err)) {
        fprintf(stderr, "bench_classifier: %s\n", err);
        exit(1);
    }
    const int N = micro_batch * c.block_size, C = c.n_embd, V = c.vocab_size;
    const double flops = 6.0 * N * C * V; /* the three products */
    float *x = rand_buf((long)N * C, 3, 2), *wte = rand_buf((long)V * C, 4, 0.2);
    float *dx = malloc(sizeof *dx * (size_t)N * C), *dwte = calloc((size_t)V * C, sizeof *dwte);
    float *losses = malloc(sizeof *losses * (size_t)N);
    int32_t *tg = malloc(sizeof *tg * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(5, 1, (uint64_t)i), (uint64_t)V);
    double *t = malloc(sizeof *t * (size_t)reps);
    printf("shape %s: N %d (micro-batch %d x %d), C %d, V %d; %.1f GFLOP a call; median of %d\n", tier, N,
           micro_batch, c.block_size, C, V, flops / 1e9, reps);
    for (int r = -1; r < reps; r++) {
        double t0 = prof_now();
        op_classifier(losses, dx, dwte, x, wte, tg, N, C, V, V, (real)(1.0 / N));
        if (r >= 0) t[r] = prof_now() - t0;
    }
    const double op = bench_median(t, reps);
    printf("  %-28s %9.1f ms %7.1f GF/s (%.0f%% of peak)\n", "op_classifier, whole", 1e3 * op, flops / op / 1e9,
           100 * flops / op / 1e9 / peak);
    int rows_max = 1;
    while (rows_max < N && rows_max < 1024) rows_max *= 2;
    float *z = malloc(sizeof *z * (size_t)rows_max * V);
    for (int rows = 128; rows <= rows_max; rows *= 2) {
        double *s[3];
        for (int k = 0; k < 3; k++) s[k] = malloc(sizeof(double) * (size_t)reps);
        for (int r = -1; r < reps; r++) {
            double secs[3];
            gemms_alone(secs, z, dx, dwte, x, wte, N, C, V, rows);
            for (int k = 0; r >= 0 && k < 3; k++) s[k][r] = secs[k];
        }
        double m[3], sum = 0;
        for (int k = 0; k < 3; k++) m[k] = bench_median(s[k], reps), sum += m[k], free(s[k]);
        char what[64];
        snprintf(what, sizeof what, "GEMMs alone, %d-row chunks", rows);
        printf("  %-28s %9.1f ms %7.1f GF/s | logits %6.1f, dx %6.1f, dwte %6.1f GF/s\n", what, 1e3 * sum,
               flops / sum / 1e9, flops / 3 / m[0] / 1e9, flops / 3 / m[1] / 1e9, flops / 3 / m[2] / 1e9);
    }
    free(z), free(t), free(x), free(wte), free(dx), free(dwte), free(losses), free(tg);
}

int main(int argc, char **argv) {
    const char *only = "all";
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_classifier [--shape cpu-tiny|10M|all] [--reps N (> 0)]\n");
            return 2;
        }
    }
    if (strcmp(only, "all") && strcmp(only, "cpu-tiny") && strcmp(only, "10M")) {
        fprintf(stderr, "bench_classifier: --shape %s: expected cpu-tiny, 10M or all\n", only);
        return 2;
    }
    double peak = bench_sgemm_peak(2048);
    printf("BLAS %s, %d threads: sgemm 2048^3 peak %.1f GFLOP/s\n", SG_BLAS_NAME, op_threads(), peak);
    if (!strcmp(only, "all") || !strcmp(only, "cpu-tiny")) bench_shape("cpu-tiny", 8, reps, peak);
    if (!strcmp(only, "all") || !strcmp(only, "10M")) bench_shape("10M", 4, reps, peak);
    return 0;
}
