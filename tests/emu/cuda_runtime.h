/* Stand-in for the CUDA runtime header in the emulated build
 * (tests/e2e_cuda_emu.sh): the execution model (emu_threads.h) and the few
 * runtime calls the attention ops make.  tests/emu comes first on the
 * include path, so this file, not the toolkit's, is what
 * kernels/cuda/cuda_common.h gets. */
#ifndef SG_EMU_CUDA_RUNTIME_H
#define SG_EMU_CUDA_RUNTIME_H

#include "emu_threads.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };

namespace emu {
/* the H200's (sm_90) shared memory per block with the opt-in: 227 KiB */
constexpr size_t SMEM_OPTIN = 232448;
extern size_t max_smem_attr; /* the last cudaFuncAttributeMaxDynamicSharedMemorySize */
}  // namespace emu

inline const char *cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int *dev) {
    *dev = 0;
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int dev) {
    (void)dev;
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return 1;
    *v = (int)emu::SMEM_OPTIN;
    return cudaSuccess;
}
/* Recorded per process, not per kernel: launch_impl checks that a launch of
 * more than 48 KiB follows an opt-in at least as large. */
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute attr, int v) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return 1;
    emu::max_smem_attr = (size_t)v;
    return cudaSuccess;
}

#endif
