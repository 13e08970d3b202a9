/* test_gpu_ops: the fused classifier, whole and in chunks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

/* x ~ N(0, 1) and wte ~ N(0, wscale): logits of standard deviation
 * wscale sqrt(C).  The device rounds the logits to bf16 (autocast's
 * precision, classifier.cu), which moves each softmax entry by up to
 * 2^-9 |z| relative: under 2e-2, the bf16 rule, while |z| stays under 10,
 * as a trained model's logits do.  `widen` multiplies the rule for dx and
 * dwte where the logits are larger: at wscale 0.3 and C 384 they reach
 * about 30, 6% (an H200 measured dx at 1.13 of the plain rule, 2026-12-04). */
void test_classifier(int N, int C, int V, int Vp, double wscale, double widen) {
    real *x = host_rand((long)N * C, 1), *wte = host_rand((long)Vp * C, wscale);
    int32_t *tg = malloc(sizeof *tg * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 91, (uint64_t)i), (uint64_t)V);
    real *loss = calloc(N, sizeof *loss), *dx = calloc((size_t)N * C, sizeof *dx), *dwte = host_rand((long)Vp * C, 0.1);
    real *x_d = dev_of(x, (long)N * C), *wte_d = dev_of(wte, (long)Vp * C), *loss_d = dev_of(loss, N),
         *dx_d = dev_of(dx, (long)N * C), *dwte_d = dev_of(dwte, (long)Vp * C);
    int32_t *tg_d = gpu_ops.alloc(sizeof *tg * (size_t)N);
    gpu_ops.upload(tg_d, tg, sizeof *tg * (size_t)N);
    double l1 = cpu_ops.classifier(loss, dx, dwte, x, wte, tg, N, C, V, Vp, (real)(1.0 / N));
    double l2 = gpu_ops.classifier(loss_d, dx_d, dwte_d, x_d, wte_d, tg_d, N, C, V, Vp, (real)(1.0 / N));
    CHECK(fabs(l1 - l2) <= 2e-3 * fabs(l1), "classifier loss sum %.6f vs cpu %.6f", l2, l1);
    same("classifier row losses", loss_d, loss, N, 1);
    compare_widened("classifier dx", dx_d, dx, (long)N * C, 1, maxabs(dx, (long)N * C), widen);
    compare_widened("classifier dwte (accumulated)", dwte_d, dwte, (long)Vp * C, 1, maxabs(dwte, (long)Vp * C), widen);
    double l3 = gpu_ops.classifier(NULL, NULL, NULL, x_d, wte_d, tg_d, N, C, V, Vp, 1);
    CHECK(l3 == l2, "classifier: evaluation gives the training loss bitwise (%.17g, %.17g)", l3, l2);
    void *ds[] = {x_d, wte_d, loss_d, dx_d, dwte_d, tg_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(wte), free(tg), free(loss), free(dx), free(dwte);
}

/* The classifier's rows in chunks of `chunk` (sg_classifier_set_chunk)
 * against one chunk, the default for rows this few: the same loss, row
 * losses and dx (bitwise in the emulator, whose GEMMs do not depend on the
 * chunk; within tolerance on a device, where cuBLAS may choose another
 * algorithm for another row count), and dwte, which accumulates chunk by
 * chunk, within tolerance; and against the CPU. */
void sg_classifier_set_chunk(int rows); /* kernels/cuda/classifier.cu */

void test_classifier_chunks(int N, int C, int V, int Vp, int chunk) {
    real *x = host_rand((long)N * C, 1), *wte = host_rand((long)Vp * C, 0.3), *dwte = host_rand((long)Vp * C, 0.1);
    int32_t *tg = malloc(sizeof *tg * (size_t)N);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)rng_below(rng_key(g_key, 92, (uint64_t)i), (uint64_t)V);
    real *x_d = dev_of(x, (long)N * C), *wte_d = dev_of(wte, (long)Vp * C);
    int32_t *tg_d = gpu_ops.alloc(sizeof *tg * (size_t)N);
    gpu_ops.upload(tg_d, tg, sizeof *tg * (size_t)N);
    real *loss_d[2], *dx_d[2], *dwte_d[2];
    double l[2];
    for (int k = 0; k < 2; k++) { /* k 0: one chunk; 1: chunks of `chunk` rows */
        loss_d[k] = gpu_ops.alloc(sizeof(real) * N), dx_d[k] = gpu_ops.alloc(sizeof(real) * N * C);
        dwte_d[k] = dev_of(dwte, (long)Vp * C);
        sg_classifier_set_chunk(k ? chunk : 0);
        l[k] = gpu_ops.classifier(loss_d[k], dx_d[k], dwte_d[k], x_d, wte_d, tg_d, N, C, V, Vp, (real)(1.0 / N));
    }
    sg_classifier_set_chunk(0);
    char what[160];
    real *loss = calloc((size_t)N, sizeof *loss), *dx = calloc((size_t)N * C, sizeof *dx);
    const double l0 = cpu_ops.classifier(loss, dx, dwte, x, wte, tg, N, C, V, Vp, (real)(1.0 / N));
    CHECK(fabs(l[1] - l0) <= 2e-3 * fabs(l0), "classifier in chunks of %d: loss sum %.6f vs cpu %.6f", chunk, l[1], l0);
    snprintf(what, sizeof what, "classifier N %d in chunks of %d, dwte against the CPU", N, chunk);
    same(what, dwte_d[1], dwte, (long)Vp * C, 1);
    real *one = back(dwte_d[0], (long)Vp * C);
    snprintf(what, sizeof what, "classifier N %d in chunks of %d, dwte against one chunk", N, chunk);
    same(what, dwte_d[1], one, (long)Vp * C, 1);
    free(one);
    if (emulated()) {
        CHECK(l[0] == l[1], "classifier in chunks of %d: loss sum %.17g, one chunk %.17g (want the same bits)", chunk,
              l[1], l[0]);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, row losses against one chunk", N, chunk);
        bits_as(what, "one chunk", loss_d[1], loss_d[0], N);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, dx against one chunk", N, chunk);
        bits_as(what, "one chunk", dx_d[1], dx_d[0], (long)N * C);
    } else {
        CHECK(fabs(l[0] - l[1]) <= 1e-5 * fabs(l[0]), "classifier in chunks of %d: loss sum %.9g, one chunk %.9g",
              chunk, l[1], l[0]);
        real *h = back(loss_d[0], N);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, row losses against one chunk", N, chunk);
        same(what, loss_d[1], h, N, 1);
        free(h);
        h = back(dx_d[0], (long)N * C);
        snprintf(what, sizeof what, "classifier N %d in chunks of %d, dx against one chunk", N, chunk);
        same(what, dx_d[1], h, (long)N * C, 1);
        free(h);
    }
    void *ds[] = {x_d, wte_d, tg_d, loss_d[0], loss_d[1], dx_d[0], dx_d[1], dwte_d[0], dwte_d[1]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(wte), free(dwte), free(tg), free(loss), free(dx);
}
