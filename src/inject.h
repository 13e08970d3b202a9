/* Quiet reads and injected junk (paper Section 6.1 and Appendix C).
 *
 * A "read" is the head-h slice v of the value row at one position.  For every
 * head and every sequence the reads are ranked by norm; the quiet reads are
 * those strictly below the head's cutoff (its median or 25th percentile read
 * norm in that sequence), and each receives
 *     v_j += eps * m_h * u_j
 * with m_h the head's median read norm in the sequence and u_j a unit vector
 * chosen by the junk type.  Quantiles interpolate linearly between order
 * statistics (NumPy's and PyTorch's default), so with T distinct norms
 * exactly floor(T/2) reads are below the median.
 *
 * These are host functions on host buffers: the analyses copy a layer's
 * values to the host (a no-op on the CPU backend), corrupt them here, and
 * copy them back before the gate runs, so the cost does not depend on the
 * backend and neither do the draws. */
#ifndef SG_INJECT_H
#define SG_INJECT_H

#include <stdint.h>

#include "real.h"

typedef enum {
    JUNK_STRUCTURED,   /* a read from a random position of another sequence of the batch */
    JUNK_SAME_CONTEXT, /* a read from another random position of the same sequence */
    JUNK_GAUSSIAN,     /* an isotropic normal vector */
    JUNK_RANDOM_DIR,   /* one random unit vector per (layer, head), shared by every read */
    JUNK_OWN_DIR,      /* the head's projection-gate direction w_h / ||w_h|| */
    JUNK_KINDS
} JunkKind;

typedef enum { CUT_MEDIAN, CUT_Q25, CUT_KINDS } CutoffKind;

const char *junk_name(int kind);   /* "structured", "same_context", ... */
int junk_from_name(const char *s); /* -1 if unknown */
const char *cutoff_name(int kind); /* "median", "q25" */
int cutoff_from_name(const char *s);
double cutoff_quantile(int kind);  /* 0.5, 0.25 */

/* Ascending, in place. */
void sort_floats(float *x, int n);
/* The q-quantile of n ascending values, linear interpolation. */
double quantile_sorted(const float *x, int n, double q);

/* Norms of the reads at positions [first, T) of every (b,h):
 * norms[(b*H + h)*T + t]; entries t < first are left alone. */
void read_norms(float *norms, const real *v, int vs, int B, int T, int H, int d, int first);

/* One head of one sequence: the median read norm m_h and the cutoff of
 * `kind`, from the n norms (scratch: n floats). */
void head_cutoff(const float *norms, int n, int kind, float *scratch, double *median, double *cut);

typedef struct {
    int junk, cutoff;
    double eps;
    /* Draw keys.  They never involve eps or the cutoff, so every dose and
     * cutoff of one junk type sees the same u_j for the same read (common
     * random numbers: dose-response curves differ by the dose alone). */
    uint64_t key;     /* per (seed, layer, batch): positions and Gaussian draws */
    uint64_t dir_key; /* per (seed, layer): the random direction of each head */
    int first;        /* first position that is a read (1 when position 0 is a sink token) */
    const real *own;  /* [H,d] gate directions w_h (JUNK_OWN_DIR only) */
} InjectSpec;

/* Corrupts the reads of v ([B,T] rows of row stride vs, head h at h*d) in
 * place and returns how many reads were corrupted.  Junk reads are taken
 * from the values as they were before this call.  B >= 2 for structured
 * junk and T - first >= 2 for same-context junk (the caller checks). */
long inject_values(real *v, int vs, int B, int T, int H, int d, const InjectSpec *s);

/* The unit vector u (d entries) the spec gives read (b,h,t); src holds the
 * uncorrupted values.  A zero source gives u = 0. */
void junk_vector(real *u, const real *src, int vs, int B, int T, int H, int d, int b, int h, int t,
                 const InjectSpec *s);

#endif
