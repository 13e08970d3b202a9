/* compiled with -include tests/gpu/cpu_names.h: these are the cpu_op_ functions */
#include "optable.h"
#define TABLE_NAME cpu_ops
#include "table.h"
