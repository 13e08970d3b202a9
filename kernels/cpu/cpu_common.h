/* Private helpers of the CPU backend. */
#ifndef SG_CPU_COMMON_H
#define SG_CPU_COMMON_H

#include <math.h>

#include "real.h"

#ifdef SG_DOUBLE
#define RSQRT(x) (1.0 / sqrt(x))
#define REXP exp
#define RLOG log
#define RSQRTF sqrt
#define RERF erf
#else
#define RSQRT(x) (1.0f / sqrtf(x))
#define REXP expf
#define RLOG logf
#define RSQRTF sqrtf
#define RERF erff
#endif

/* Row reductions (LayerNorm weight gradients, embedding position gradients)
 * sum fixed chunks of this many rows into partials that are then added in
 * chunk order, so the result does not depend on the number of threads. */
#define SG_ROW_CHUNK 64

#endif
