/* The memory half of the op interface (ops.h, "memory") as
 * kernels/cuda/runtime.cu implements it, over the emulated device memory
 * (cudaMalloc in emu_runtime.cpp: host memory, 256-byte aligned, taken
 * through device_memory.cu's counted sg_malloc as runtime.cu takes it).  What
 * the tests depend on is kept: op_alloc zeroes, and op_free makes the
 * matmuls forget the bf16 copies their forwards kept (matmul.cu), as an
 * address may come back for another buffer, and the writes make the
 * weight copies they touch stale (weight_copies.cu).  Built with the CUDA ops'
 * names (cuda_op_free, ...) next to the CPU ops' own. */
#include <string.h>

#include "cuda_common.h"

/* runtime.cu's op_alloc, op_zero, op_upload and op_copy are issued on the
 * op stream, so they move the count the bf16 twins are checked with
 * (cuda_common.h, sg_stream_seq); here the two that write with memset call
 * sg_stream() for it.  op_download reads and does not count, as there. */
extern "C" void *op_alloc(size_t bytes) {
    void *p = NULL;
    if (sg_malloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    sg_stream();
    memset(p, 0, bytes ? bytes : 1);
    return p;
}
extern "C" void op_free(void *p) {
    if (!p) return;
    CUDA_CHECK(sg_free(p));
    sg_matmul_forget();
    sg_weights_freed(p);
    sg_count_free();
}
extern "C" void op_upload(void *dev, const void *host, size_t bytes) {
    if (!bytes) return;
    if (!sg_upload_staged(dev, host, bytes)) {
        CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, sg_stream()));
        CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
    op_written(dev, bytes);
}
extern "C" void op_download(void *host, const void *dev, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, nullptr)); /* the op stream */
}
extern "C" void op_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, sg_stream()));
    op_written(dst, bytes);
}
extern "C" void op_zero(void *p, size_t bytes) {
    if (!bytes) return;
    sg_stream();
    memset(p, 0, bytes);
    op_written(p, bytes);
}
extern "C" int op_host_memory(void) { return 0; }
extern "C" void op_sync(void) {}
extern "C" const char *op_backend(void) { return "cuda (emulated on the host, tests/emu)"; }
extern "C" int op_threads(void) { return 1; }
