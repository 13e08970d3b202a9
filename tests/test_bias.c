/* The linear-layer bias ops (config linear_bias) against a direct double
 * computation: the row broadcast, and the column sums of its gradient,
 * accumulated into what db held, the same bits for any number of threads
 * (the strips walk the rows in order whatever the thread count). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "rng.h"

static void shape(int M, int N) {
    real *out = malloc(sizeof(real) * (size_t)M * N), *x = malloc(sizeof(real) * (size_t)M * N);
    real *b = malloc(sizeof(real) * N), *db1 = malloc(sizeof(real) * N), *db2 = malloc(sizeof(real) * N);
    for (long i = 0; i < (long)M * N; i++) x[i] = (real)rng_normal(rng_key(1, (uint64_t)M, (uint64_t)N), (uint64_t)i);
    for (int j = 0; j < N; j++) b[j] = (real)rng_normal(rng_key(2, (uint64_t)M, (uint64_t)N), (uint64_t)j);
    memcpy(out, x, sizeof(real) * (size_t)M * N);
    op_bias_add(out, b, M, N);
    int exact = 1;
    for (long i = 0; i < (long)M * N; i++) exact &= out[i] == x[i] + b[i % N];
    CHECK(exact, "op_bias_add %dx%d: every element x + b, rounded once", M, N);
    double worst = 0;
    for (int threads = 1; threads <= 2; threads++) {
        real *db = threads == 1 ? db1 : db2;
        for (int j = 0; j < N; j++) db[j] = (real)(0.5 * j); /* accumulated into */
        omp_set_num_threads(threads);
        op_bias_bwd(db, x, M, N);
        for (int j = 0; j < N; j++) {
            double sum = 0;
            for (int i = 0; i < M; i++) sum += x[(size_t)i * N + j];
            /* the sum in double, one rounding to real, then the add into db:
             * at most one unit of rounding of |db| + |sum| in all */
            worst = fmax(worst, fabs(db[j] - (0.5 * j + sum)) / ((0.5 * j + fabs(sum)) * REAL_EPS + 1e-300));
        }
    }
    omp_set_num_threads(2);
    CHECK(worst <= 1, "op_bias_bwd %dx%d: within %.2f eps of the exact column sums plus db (bound 1)", M, N, worst);
    CHECK(!memcmp(db1, db2, sizeof(real) * N), "op_bias_bwd %dx%d: the same bits on 1 and 2 threads", M, N);
    free(out), free(x), free(b), free(db1), free(db2);
}

int main(void) {
    check_name = "test_bias";
    shape(1, 1);
    shape(3, 7);
    shape(1000, 200);   /* 200 = 3 strips of 64 and 8 */
    shape(64, 2304);    /* qkv's width at 124M */
    shape(4097, 65);
    return check_finish();
}
