/* Fused LM head + softmax + cross-entropy (+ its backward).
 *
 * The logits of all N rows over a 50k vocabulary would be N x 50257 floats
 * (6.6 GB at the 10M tier's 64 x 512 batch), so rows go through in chunks:
 * a chunk's logits are computed, turned into dlogits in place, and consumed
 * by two GEMMs (dx = dlogits wte, dwte += dlogits^T x) before the next chunk.
 * Only the V real classes are ever computed: the padded rows of wte (Vp > V,
 * kept for the GPU's alignment) never enter the softmax or the loss.
 *   loss_i   = logsumexp(z_i) - z_i[y_i]
 *   dz_ij    = dscale (softmax(z_i)_j - [j == y_i])  */
#include <math.h>
#include <stdlib.h>

#include "blas.h"
#include "cpu_common.h"
#include "ops.h"
#include "vexp.h"

#ifdef SG_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* Rows per chunk: the smallest power of two >= C within [128, 1024].  The
 * LM head's GEMMs have inner dimension C (logits, dwte) or rows (dwte), so
 * wider models want more rows per chunk; measured on the cpu-tiny (C = 128)
 * and 10M (C = 384) shapes, where 128 and 512 rows are the fastest. */
static int chunk_rows(int C) {
    int r = 128;
    while (r < C && r < 1024) r *= 2;
    return r;
}

enum { SUM_BLOCK = 256 };

double op_classifier(real *losses, real *dx, real *dwte, const real *x,
                     const real *wte, const int32_t *targets, int N, int C,
                     int V, int Vp, real dscale) {
    (void)Vp;
    const int chunk = chunk_rows(C);
    blas_threads_sync(N < chunk ? N : chunk, V, C);
    int rows = N < chunk ? N : chunk;
    real *z = malloc((size_t)rows * V * sizeof(real));
    double total = 0;
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        const real *xc = x + (size_t)r0 * C;
        GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, V, C, 1, xc, C, wte, C, 0, z, V);
        double chunk = 0;
#pragma omp parallel for schedule(static) reduction(+ : chunk)
        for (int i = 0; i < n; i++) {
            real *zi = z + (size_t)i * V;
            int y = targets[r0 + i];
            real mx = zi[0];
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < V; j++) mx = zi[j] > mx ? zi[j] : mx;
            double zy = (double)zi[y], s = 0;
            /* Exponentials are computed once and kept for the gradient.  The
             * sum runs in blocks of SUM_BLOCK, each summed in real across the
             * vector lanes and added to s in double: gcc 12 cannot vectorize a
             * float-to-double reduction, and with s summed directly the loop
             * ran scalar, at 4 ns an element (6x the blocked loop, 22% of the
             * classifier at cpu-tiny).  A block's sum adds at most SUM_BLOCK / 8
             * terms a lane (32 on 8-lane vectors, 16 with AVX-512), all
             * positive, so its relative error is at most about 2e-6. */
            for (int j0 = 0; j0 < V; j0 += SUM_BLOCK) {
                const int j1 = V - j0 < SUM_BLOCK ? V : j0 + SUM_BLOCK;
                real bs = 0;
#pragma omp simd reduction(+ : bs)
                for (int j = j0; j < j1; j++) {
                    real e = AVEXP(zi[j] - mx);
                    zi[j] = e;
                    bs += e;
                }
                s += (double)bs;
            }
            double li = (double)mx + log(s) - zy;
            if (losses) losses[r0 + i] = (real)li;
            chunk += li;
            if (dx || dwte) {
                real f = (real)(dscale / s);
#pragma omp simd
                for (int j = 0; j < V; j++) zi[j] *= f;
                zi[y] -= dscale;
            }
        }
        /* OpenMP's reduction order is fixed for a fixed thread count, but to
         * stay independent of it the per-row losses are re-summed in order
         * when they are kept. */
        if (losses) {
            chunk = 0;
            for (int i = 0; i < n; i++) chunk += losses[r0 + i];
        }
        total += chunk;
        if (dx) GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, C, V, 1, z, V, wte, C, 0, dx + (size_t)r0 * C, C);
        if (dwte) GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, n, 1, z, V, xc, C, 1, dwte, C);
    }
    free(z);
    return total;
}

void op_logits(real *logits, const real *x, const real *wte, int N, int C, int Vp) {
    blas_threads_sync(N, Vp, C);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, N, Vp, C, 1, x, C, wte, C, 0, logits, Vp);
}
