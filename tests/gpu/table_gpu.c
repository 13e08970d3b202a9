#include "optable.h"
#define TABLE_NAME gpu_ops
#include "table.h"
