/* A kernel that ptxas must serialise (its C7520): a warpgroup product
 * issued in a branch whose condition differs between threads, waited for
 * outside it.  tests/e2e_cuda_build.sh runs sass_mix.py --no-serial on it,
 * to show that check fails where it should; nothing builds or runs it. */
#include "wgmma_ptx.h"

__global__ void wgmma_serial_fixture_kernel(float *out, const unsigned *a, int n) {
    extern __shared__ __align__(128) unsigned char sm[];
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    uint32_t af[4] = {a[threadIdx.x], a[threadIdx.x + 1], a[threadIdx.x + 2], a[threadIdx.x + 3]};
    const uint64_t db = wg_desc((uint32_t)__cvta_generic_to_shared(sm), 128, 1024);
    bool pend = false;
    for (int k = 0; k < n; ++k) {
        wg_fence();
        if (pend) {
            wg_rs_n64<0>(d, af, db, 1);
            wg_commit();
        }
        pend = (a[k] & threadIdx.x) != 0;
        wg_wait<0>();
        wg_pin<32>(d);
    }
    for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
}
