#include <omp.h>

#include "ops.h"

int op_threads(void) { return omp_get_max_threads(); }
