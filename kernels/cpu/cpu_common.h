/* Private helpers of the CPU backend. */
#ifndef SG_CPU_COMMON_H
#define SG_CPU_COMMON_H

#include <math.h>

#include "real.h"

#ifdef SG_DOUBLE
#define RSQRTF sqrt
#else
#define RSQRTF sqrtf
#endif

/* Row reductions (LayerNorm weight gradients, embedding position gradients)
 * sum fixed chunks of this many rows into partials that are then added in
 * chunk order, so the result does not depend on the number of threads. */
#define SG_ROW_CHUNK 64

#endif
