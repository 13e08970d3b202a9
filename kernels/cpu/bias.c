/* Linear-layer biases (config linear_bias): the row broadcast and its
 * gradient, the column sums of dout. */
#include "cpu_common.h"
#include "ops.h"

void op_bias_add(real *out, const real *bias, int M, int N) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        real *o = out + (size_t)i * N;
#pragma omp simd
        for (int j = 0; j < N; j++) o[j] += bias[j];
    }
}

/* Each thread owns a strip of BIAS_COLS columns and walks every row in
 * order, summing in double: the result is the same for any number of
 * threads, and a strip's accumulators stay in registers or L1 while the
 * rows stream past. */
#define BIAS_COLS 64

void op_bias_bwd(real *db, const real *dout, int M, int N) {
    const int strips = (N + BIAS_COLS - 1) / BIAS_COLS;
#pragma omp parallel for schedule(static)
    for (int s = 0; s < strips; s++) {
        const int j0 = s * BIAS_COLS, nj = N - j0 < BIAS_COLS ? N - j0 : BIAS_COLS;
        double acc[BIAS_COLS] = {0};
        for (int i = 0; i < M; i++) {
            const real *d = dout + (size_t)i * N + j0;
#pragma omp simd
            for (int j = 0; j < nj; j++) acc[j] += d[j];
        }
        for (int j = 0; j < nj; j++) db[j0 + j] += (real)acc[j];
    }
}
