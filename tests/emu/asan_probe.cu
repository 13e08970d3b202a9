/* A canary for the sanitized emulator (tests/e2e_cuda_emu.sh, EMU_SANITIZE=1):
 * a kernel whose thread 0 reads FAR floats past the end of a cudaMalloc
 * buffer of N after its block's threads have switched stacks at two
 * barriers.  FAR 0 reads nothing past it and must pass; FAR 30 must be
 * stopped with AddressSanitizer's heap-buffer-overflow report.  It shows
 * that the emulator's thread switches (emu_runtime.cpp) leave the
 * sanitizer able to see a kernel's reads on every thread stack.
 * usage: asan_probe FAR */
#include <cstdio>
#include <cstdlib>

#include "cuda_runtime.h"

__global__ void probe_kernel(float *p, int n, int far) {
    __shared__ float s[64];
    s[threadIdx.x] = p[blockIdx.x * 64 + threadIdx.x];
    __syncthreads();
    float v = s[(threadIdx.x + 1) % 64];
    __syncthreads();
    if (threadIdx.x == 0 && far > 0) v += p[n - 1 + far];
    p[blockIdx.x * 64 + threadIdx.x] = v;
}

int main(int argc, char **argv) {
    const int n = 1000, far = argc > 1 ? atoi(argv[1]) : 0;
    float *p;
    if (cudaMalloc((void **)&p, n * sizeof(float)) != cudaSuccess) return 1;
    cudaMemsetAsync(p, 0, n * sizeof(float));
    probe_kernel<<<n / 64, 64>>>(p, n, far);
    cudaStreamSynchronize(nullptr);
    cudaFree(p);
    printf("asan_probe: done\n");
    return 0;
}
