/* Stand-in for cublasLt.h in the emulated build: only the handle type, which
 * kernels/cuda/cuda_common.h names in a declaration.  No cuBLASLt call is
 * emulated (the attention kernels make none; the matmuls are not built). */
#ifndef SG_EMU_CUBLASLT_H
#define SG_EMU_CUBLASLT_H

#include "cublas_v2.h"

typedef struct emu_cublaslt *cublasLtHandle_t;

#endif
