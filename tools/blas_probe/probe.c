/* Times single-precision GEMMs of the shapes a training step runs (the 10M
 * tier's QKV projection and the LM head's chunks) and prints GFLOP/s, best
 * of a few repetitions.  Built once per candidate BLAS by choose.sh so that
 * `make` links the fastest one on this machine, under this environment. */
#ifdef SG_BLAS_MKL
#include <mkl_cblas.h>
#else
#include <cblas.h>
#endif
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef SG_BLAS_BLIS
#define SET_THREADS() bli_thread_set_num_threads(omp_get_max_threads())
#else
#define SET_THREADS()
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    SET_THREADS();
    const int shapes[][3] = {{2048, 384, 1152}, {256, 384, 16384}, {2048, 1536, 384}};
    double flops = 0, secs = 0;
    for (int s = 0; s < 3; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * N * K),
              *c = malloc(sizeof(float) * M * N);
        for (long i = 0; i < (long)M * K; i++) a[i] = (float)(i % 13) * 1e-2f;
        for (long i = 0; i < (long)N * K; i++) b[i] = (float)(i % 11) * 1e-2f;
        double best = 1e30;
        for (int r = 0; r < 4; r++) {
            double t = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
            t = now() - t;
            if (r && t < best) best = t;
        }
        flops += 2.0 * M * N * K;
        secs += best;
        free(a);
        free(b);
        free(c);
    }
    printf("%.1f\n", flops / secs / 1e9);
    return 0;
}
