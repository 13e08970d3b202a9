/* What the emulated warpgroup products (tests/emu/wgmma_ptx.h) make of
 * code that breaks their asynchrony (tests/e2e_cuda_emu.sh).  One
 * warpgroup forms D = A B, 64 x 64 x 16, A and B all ones, so every
 * accumulator ends at 16; MODE says what the kernel does wrong:
 *   ok        nothing: D is 16
 *   early     reads D between the product and its wait: NaN
 *   smem      rewrites B with twos between the product and its wait: the
 *             product reads them (32), as the device may
 *   pipe      two groups, wg_wait<1> then <0>: the first lands at the
 *             first wait (16) while the second is still NaN, then 16
 *   areg      writes the A fragment's registers before the wait: stops
 *   nowait    never waits: stops as the block ends
 *   nofence   no wg_fence before the product: stops
 * usage: wgmma_async_probe MODE; prints "probe MODE: v1 v2" */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda_runtime.h"
#include "mma_ptx.h"
#include "wgmma_ptx.h"

__global__ void wgmma_async_probe_kernel(float *out, int mode) {
    extern __shared__ __align__(128) unsigned char sm[];
    __nv_bfloat16 *b = reinterpret_cast<__nv_bfloat16 *>(sm);
    for (int i = threadIdx.x; i < 1024; i += 128) b[i] = __float2bfloat16(1.f);
    __syncthreads();
    constexpr uint32_t ES = sizeof(__nv_bfloat16);
    const uint64_t db = wg_desc_core((uint32_t)__cvta_generic_to_shared(sm), 64 * ES, 128 * ES, 0, 0);
    tc_reg a[4];
    for (int j = 0; j < 4; ++j) a[j] = tc_pack(1.f, 1.f);
    float d[32], e[32];
    if (mode != 6) wg_fence();
    wg_rs_n64<0>(d, a, db, 0);
    wg_commit();
    float early = 0.f, mid = 0.f;
    if (mode == 1) early = d[0];
    if (mode == 2) {
        __syncthreads();
        for (int i = threadIdx.x; i < 1024; i += 128) b[i] = __float2bfloat16(2.f);
        __syncthreads();
    }
    if (mode == 3) {
        wg_rs_n64<0>(e, a, db, 0);
        wg_commit();
        wg_wait<1>();
        mid = e[0];
    }
    if (mode == 4) a[1] = tc_pack(3.f, 3.f);
    if (mode != 5) wg_wait<0>();
    if (threadIdx.x == 0) {
        out[0] = mode == 1 ? early : d[0];
        out[1] = mode == 3 ? mid : d[31];
        out[2] = mode == 3 ? e[0] : 0.f;
    }
}

int main(int argc, char **argv) {
    static const char *const modes[] = {"ok", "early", "smem", "pipe", "areg", "nowait", "nofence"};
    int mode = -1;
    for (int m = 0; m < 7; ++m)
        if (argc > 1 && !strcmp(argv[1], modes[m])) mode = m;
    if (mode < 0) {
        fprintf(stderr, "usage: wgmma_async_probe ok|early|smem|pipe|areg|nowait|nofence\n");
        return 2;
    }
    float *o;
    if (cudaMalloc((void **)&o, 3 * sizeof(float)) != cudaSuccess) return 1;
    wgmma_async_probe_kernel<<<1, 128, 1024 * sizeof(__nv_bfloat16)>>>(o, mode);
    cudaStreamSynchronize(nullptr);
    float h[3];
    cudaMemcpyAsync(h, o, sizeof h, cudaMemcpyDeviceToHost, nullptr);
    cudaStreamSynchronize(nullptr);
    cudaFree(o);
    printf("probe %s: %g %g %g\n", modes[mode], h[0], h[1], h[2]);
    return 0;
}
