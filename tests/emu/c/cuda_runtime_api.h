/* Stand-in for the CUDA runtime's C API in the emulated CUDA build of
 * sgtrain (tests/e2e_cuda_sgtrain_emu.sh), for the host code that includes it:
 * src/dist_nccl.c.  C, unlike tests/emu/cuda_runtime.h (the kernels'
 * C++ side); the same types, so that a stream or an error code means the
 * same on both sides.  Implemented in tests/emu/emu_nccl.cpp, where the
 * streams and events are described. */
#ifndef SG_EMU_C_CUDA_RUNTIME_API_H
#define SG_EMU_C_CUDA_RUNTIME_API_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
enum { cudaSuccess = 0 };
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };

/* The kernels' side defines these two inline, with C++ linkage
 * (tests/emu/cuda_runtime.h): the C side's get names of their own. */
const char *emu_cuda_error_string(cudaError_t e);
#define cudaGetErrorString emu_cuda_error_string
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t emu_stream_synchronize(cudaStream_t s);
#define cudaStreamSynchronize emu_stream_synchronize
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
