/* The CBLAS header of the BLAS being linked, and its thread count.
 *
 * BLIS, unlike OpenBLAS's OpenMP build, does not follow OpenMP's thread
 * count: it runs single-threaded unless told, and when told it forks for
 * every GEMM however small.  Before each GEMM its thread count is set from
 * OpenMP's and the GEMM's size: below ~2 MFLOP one thread is faster than a
 * fork (the tiny test models are all such GEMMs).  BLIS splits the M and N
 * loops among threads, never K, so the result does not depend on the count. */
#ifndef SG_CPU_BLAS_H
#define SG_CPU_BLAS_H

#if defined(SG_BLAS_MKL)
#include <mkl_cblas.h> /* MKL's GNU threading layer follows OpenMP already */
#else
#include <cblas.h>
#endif

#ifdef SG_BLAS_BLIS
#include <blis.h>
#include <omp.h>
static inline void blas_threads_sync(double m, double n, double k) {
    static int set = 0;
    int want = 2.0 * m * n * k < 2e6 ? 1 : omp_get_max_threads();
    if (want != set) {
        bli_thread_set_num_threads(want);
        set = want;
    }
}
#else
static inline void blas_threads_sync(double m, double n, double k) {
    (void)m, (void)n, (void)k;
}
#endif

#endif
