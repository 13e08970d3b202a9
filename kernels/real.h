/* The scalar type of every host-side tensor.
 *
 * Training builds use float (fp32, as the paper's gate math and AdamW state).
 * The gradient-check build defines SG_DOUBLE so that the same source is
 * compiled in double precision: finite differences are then accurate to ~1e-8
 * and any disagreement is a real bug, not rounding. */
#ifndef SG_REAL_H
#define SG_REAL_H

#ifdef SG_DOUBLE
typedef double real;
#define REAL_NAME "float64"
#define REAL_EPS 2.220446049250313e-16
#else
typedef float real;
#define REAL_NAME "float32"
#define REAL_EPS 1.1920929e-07f
#endif

#endif
