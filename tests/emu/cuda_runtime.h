/* Stand-in for the CUDA runtime header in the emulated build
 * (tests/e2e_cuda_emu.sh): the execution model (emu_threads.h) and the
 * runtime calls the CUDA ops make.  tests/emu comes first on the include
 * path, so this file, not the toolkit's, is what kernels/cuda/cuda_common.h
 * gets.
 *
 * Device memory is host memory here, and launches run to the end before
 * they return (one stream, in issue order), so the asynchronous copies are
 * plain copies and a stream synchronisation has nothing to wait for.
 * cudaMalloc returns 256-byte-aligned memory, as the device's allocator
 * does, filled with NaN bytes (0xff), as an op must not read what it did
 * not write. */
#ifndef SG_EMU_CUDA_RUNTIME_H
#define SG_EMU_CUDA_RUNTIME_H

#include <chrono>

#include "emu_threads.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidPitchValue = 12,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidResourceHandle = 400
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

namespace emu {
/* Shared memory per block with the opt-in.  The emulated device offers
 * (smem_optin) what the least of the three targets has: the RTX 5090's
 * (sm_120) 99 KiB, the paper's GPU (the A100 has 163 KiB, the H100/H200
 * 227 KiB), so a kernel that launches here launches on all three.  A test
 * whose bf16 keeps fp32 values (EMU_BF16_EXACT: 4 bytes, tiles twice as
 * large as the device's) raises it to the largest, the H200's. */
constexpr size_t SMEM_OPTIN_SM120 = 101376, SMEM_OPTIN_MAX = 232448;
extern size_t smem_optin;
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
    /* compute capability 9.0: the warpgroup kernels (wgmma_ptx.h, emulated)
     * run where SG_ATTN_WGMMA=1 asks for them */
    if (attr == cudaDevAttrComputeCapabilityMajor || attr == cudaDevAttrComputeCapabilityMinor) {
        *v = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
        return cudaSuccess;
    }
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return 1;
    *v = (int)emu::smem_optin;
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

/* emu_runtime.cpp */
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
/* free: what EMU_DEVICE_BYTES leaves (1 TiB when it is unset) */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
template <class T>
cudaError_t cudaMalloc(T **p, size_t bytes) { /* the runtime header's typed overload */
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
/* Pinned host memory (cudaMallocHost), as op_upload's staging uses it
 * (kernels/cuda/upload_staging.cu).  A copy from pinned memory is
 * asynchronous on the device: the host may write the buffer again only
 * once it has seen that copy complete, through an event recorded after it
 * (cudaEventSynchronize) or a stream synchronisation.  Copies run at once
 * here, so a host that wrote too early would go unseen; instead a copy
 * from a pinned buffer whose previous copy was never seen complete stops
 * the program, since the host must have refilled the buffer in between. */
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
namespace emu {
void pinned_copy(const void *src, size_t bytes); /* a copy from src issued (checked) */
unsigned long pinned_copies(void);               /* how many were issued so far */
void pinned_seen(unsigned long n);               /* the first n are seen complete */
}  // namespace emu
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
    emu::pinned_seen(emu::pinned_copies());
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t = nullptr) {
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidValue;
    emu::pinned_copy(src, bytes);
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t = nullptr) {
    if (bytes) memset(dst, value, bytes);
    return cudaSuccess;
}
/* height rows of width bytes, at pitches dpitch and spitch */
inline cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                     size_t height, cudaMemcpyKind kind, cudaStream_t = nullptr) {
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidValue;
    if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
    for (size_t r = 0; r < height; r++)
        memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
}

/* Events, for timing (kernels/cuda/gemm.cu's SG_MATMUL_TUNE).  Work
 * finishes before its call returns, so recording an event reads the clock:
 * the host's, plus emu::device_extra_ms, the time the emulated device is
 * said to have spent beyond it (the emulated cuBLASLt charges each of its
 * algorithms a made-up cost there, emu_cublaslt.cpp, so that a tuner sees
 * them differ in speed).  The elapsed time between events not both recorded
 * is an error, as on the device.  (NCCL's stream-ordering events of the
 * emulated sgtrain, tests/emu/c/cuda_runtime_api.h, are another type.) */
namespace emu {
extern double device_extra_ms;
}
struct emu_timing_event {
    double ms;
    bool recorded;
    unsigned long copies; /* pinned copies issued before the record (above) */
};
typedef emu_timing_event *cudaEvent_t;
enum { cudaEventDisableTiming = 2 };
inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
    if (!e) return cudaErrorInvalidValue;
    *e = new emu_timing_event{0, false, 0};
    return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    return flags & ~(unsigned)cudaEventDisableTiming ? cudaErrorInvalidValue : cudaEventCreate(e);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
    if (!e) return cudaErrorInvalidResourceHandle;
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    e->ms = std::chrono::duration<double, std::milli>(now).count() + emu::device_extra_ms;
    e->recorded = true;
    e->copies = emu::pinned_copies();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    if (e->recorded) emu::pinned_seen(e->copies);
    return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return cudaErrorInvalidValue;
    if (!start || !end || !start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

/* The device's math functions that the host's math library lacks.  rsqrtf
 * is exact here (the device's is within 2 ulp): results agree to fp32
 * rounding, not bitwise. */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* The store intrinsics: st.global with a cache policy (.wb, the default
 * write-back) is a plain store here.  The pointer must be aligned as the
 * device requires. */
inline void __stwb(float4 *p, float4 x) {
    if ((uintptr_t)p % 16) {
        fprintf(stderr, "emu __stwb: %p not 16-byte aligned\n", (void *)p);
        abort();
    }
    *p = x;
}

#endif
