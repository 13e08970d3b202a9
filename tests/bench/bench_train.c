/* bench_train: throughput of a full training step (forward, backward,
 * grad-norm clip, AdamW) for every arm, where the time goes by op category,
 * and the matmul rate against the BLAS's own sgemm peak measured in the same
 * process.  Random tokens: data loading is not part of a step.
 *
 *   bench_train [--shape cpu-tiny|10M|all] [--steps N] [--arms a,b,...] [--json FILE]
 *
 * Timings are medians over the timed steps, each after one untimed warm-up
 * step; compare ratios within one run (absolute numbers on a shared 2-core
 * machine are noisy). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"
#include "config.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "profile.h"
#include "rng.h"
#include "bench_util.h"

#ifndef SG_BLAS_NAME
#define SG_BLAS_NAME "?"
#endif

typedef struct {
    const char *name;
    const char *tier;
    int micro_batch;
    int steps;
} Shape;

enum { TOP_SITES = 12 };

typedef struct {
    double tok_s, step_s;
    double secs[PROF_N], flops[PROF_N];
    long params;
    int n_sites; /* the op time by call site, the most first (src/profile.h) */
    struct {
        char what[64];
        double secs, gflops; /* per step; gflops 0 where the site counts no flops */
    } site[TOP_SITES];
} Result;

static Result bench_arm(const Shape *sh, const char *arm) {
    Config c;
    char err[512];
    config_from_tier(&c, sh->tier, err, sizeof err);
    snprintf(c.arm, sizeof c.arm, "%s", arm);
    c.micro_batch = sh->micro_batch;
    Model m;
    if (model_build(&m, &c, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        exit(1);
    }
    model_init(&m, 0);
    int B = c.micro_batch, T = c.block_size;
    int32_t *in = malloc(sizeof(int32_t) * B * T), *tg = malloc(sizeof(int32_t) * B * T);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)rng_below(rng_key(7, 1, (uint64_t)i), (uint64_t)c.vocab_size);
        tg[i] = (int32_t)rng_below(rng_key(7, 2, (uint64_t)i), (uint64_t)c.vocab_size);
    }
    double *times = malloc(sizeof(double) * sh->steps);
    Result r;
    memset(&r, 0, sizeof r);
    for (int s = -1; s < sh->steps; s++) {
        if (s == 0) {
            prof_reset();
            prof_on = 1;
        }
        double t0 = prof_now();
        model_zero_grad(&m);
        model_forward(&m, in, tg, B, 1, (real)(1.0 / (B * T)));
        model_backward(&m);
        optim_step(&m, s < 0 ? 0 : s, 1e-4);
        if (s >= 0) times[s] = prof_now() - t0;
    }
    prof_on = 0;
    r.step_s = bench_median(times, sh->steps);
    r.tok_s = (double)B * T / r.step_s;
    for (int k = 0; k < PROF_N; k++) {
        r.secs[k] = prof_secs[k] / sh->steps;
        r.flops[k] = prof_flops[k] / sh->steps;
    }
    ProfSite *top[TOP_SITES];
    r.n_sites = prof_top_sites(top, TOP_SITES);
    for (int i = 0; i < r.n_sites; i++) {
        prof_site_label(top[i], r.site[i].what, (int)sizeof r.site[i].what - 1);
        r.site[i].secs = top[i]->secs / sh->steps;
        r.site[i].gflops = top[i]->secs > 0 ? top[i]->flops / top[i]->secs / 1e9 : 0;
    }
    r.params = model_count_params(&m);
    free(times);
    free(in);
    free(tg);
    model_free(&m);
    return r;
}

int main(int argc, char **argv) {
    Shape shapes[] = {{"cpu-tiny", "cpu-tiny", 8, 5}, {"10M", "10M", 4, 3}};
    const char *only = "all", *arms_arg = NULL, *json_path = NULL;
    int steps = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arms") && i + 1 < argc) arms_arg = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else {
            fprintf(stderr, "usage: bench_train [--shape cpu-tiny|10M|all] [--steps N] [--arms a,b] [--json FILE]\n");
            return 2;
        }
    }
    FILE *js = json_path ? fopen(json_path, "w") : NULL;
    double peak = bench_sgemm_peak(2048);
    printf("BLAS %s, %d threads: sgemm 2048^3 peak %.1f GFLOP/s\n\n", SG_BLAS_NAME, op_threads(), peak);
    if (js) fprintf(js, "{\"blas\": \"%s\", \"threads\": %d, \"sgemm_peak_gflops\": %.2f, \"shapes\": {", SG_BLAS_NAME, op_threads(), peak);
    int first_shape = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        Shape *sh = &shapes[si];
        if (strcmp(only, "all") && strcmp(only, sh->name)) continue;
        if (steps > 0) sh->steps = steps;
        printf("shape %s (micro-batch %d), median of %d steps\n", sh->name, sh->micro_batch, sh->steps);
        printf("%-10s %10s %8s %9s | %6s %6s %6s %6s %6s | %9s %9s\n", "arm", "tok/s", "vs base", "ms/step",
               "matmul", "attn", "gate", "class", "rest", "mm GF/s", "attn GF/s");
        if (js) fprintf(js, "%s\"%s\": {\"micro_batch\": %d, \"steps\": %d, \"arms\": {", first_shape ? "" : ", ", sh->name, sh->micro_batch, sh->steps);
        first_shape = 0;
        double base = 0;
        int first_arm = 1;
        Result first = {0};
        for (int ai = 0; ai < arm_count(); ai++) {
            const char *arm = arm_at(ai)->name;
            if (arms_arg) {
                char pat[64];
                snprintf(pat, sizeof pat, ",%s,", arm);
                char list[512];
                snprintf(list, sizeof list, ",%s,", arms_arg);
                if (!strstr(list, pat)) continue;
            }
            Result r = bench_arm(sh, arm);
            if (!base) base = r.tok_s, first = r;
            double tot = 0;
            for (int k = 0; k < PROF_N; k++) tot += r.secs[k];
            double rest = tot - r.secs[PROF_MATMUL] - r.secs[PROF_ATTENTION] - r.secs[PROF_GATE] - r.secs[PROF_CLASSIFIER];
            double mm_gf = (r.flops[PROF_MATMUL] + r.flops[PROF_CLASSIFIER]) /
                           (r.secs[PROF_MATMUL] + r.secs[PROF_CLASSIFIER]) / 1e9;
            double at_gf = r.flops[PROF_ATTENTION] / r.secs[PROF_ATTENTION] / 1e9;
            printf("%-10s %10.0f %7.1f%% %9.1f | %5.1f%% %5.1f%% %5.1f%% %5.1f%% %5.1f%% | %9.1f %9.1f\n", arm,
                   r.tok_s, 100 * (r.tok_s / base - 1), 1e3 * r.step_s, 100 * r.secs[PROF_MATMUL] / tot,
                   100 * r.secs[PROF_ATTENTION] / tot, 100 * r.secs[PROF_GATE] / tot,
                   100 * r.secs[PROF_CLASSIFIER] / tot, 100 * rest / tot, mm_gf, at_gf);
            fflush(stdout);
            if (js) {
                fprintf(js, "%s\"%s\": {\"tokens_per_s\": %.1f, \"ms_per_step\": %.2f, \"params\": %ld, \"secs\": {", first_arm ? "" : ", ", arm, r.tok_s, 1e3 * r.step_s, r.params);
                for (int k = 0; k < PROF_N; k++) fprintf(js, "%s\"%s\": %.6f", k ? ", " : "", prof_name(k), r.secs[k]);
                fprintf(js, "}, \"matmul_gflops\": %.2f, \"attention_gflops\": %.2f}", mm_gf, at_gf);
            }
            first_arm = 0;
        }
        if (js) fprintf(js, "}}");
        printf("(shares of profiled op time; matmul GF/s counts linear layers and the LM head; sgemm peak %.1f)\n", peak);
        double tot = 0;
        for (int k = 0; k < PROF_N; k++) tot += first.secs[k];
        if (first.n_sites) printf("the first arm's step by call site (ms, share of profiled op time):\n");
        for (int i = 0; i < first.n_sites; i++) {
            char gf[24] = "";
            if (first.site[i].gflops > 0) snprintf(gf, sizeof gf, "%7.1f GF/s", first.site[i].gflops);
            printf("  %8.2f %5.1f%%  %-62s %s\n", 1e3 * first.site[i].secs, 100 * first.site[i].secs / tot,
                   first.site[i].what, gf);
        }
        printf("\n");
    }
    if (js) {
        fprintf(js, "}}\n");
        fclose(js);
    }
    return 0;
}
