/* Paired per-seed differences: the statistic every comparison of the
 * paper uses.  For arms A and B and the seeds s trained (and finished) for
 * both, d_s = loss_A(s) - loss_B(s);
 *   mean = (1/n) sum d_s,   se = sd / sqrt(n),  sd = sqrt(sum (d_s - mean)^2 / (n - 1)),
 * improved = #{s : d_s < 0} (A better).  n = 1 gives se = -1 (no error
 * bar: a single seed); n = 0 means no pair. */
#ifndef SG_PAIRSTAT_H
#define SG_PAIRSTAT_H

typedef struct {
    int n, improved;
    double mean, se;
} Paired;

/* a[i], b[i] for i < nseeds; has_a/has_b say which are present. */
Paired paired_diff(const double *a, const unsigned char *has_a, const double *b,
                   const unsigned char *has_b, int nseeds);

/* Mean and standard error of the present values (se = -1 for n = 1). */
Paired plain_mean(const double *a, const unsigned char *has, int n);

#endif
