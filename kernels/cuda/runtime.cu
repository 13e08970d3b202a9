/* The CUDA backend's runtime: one stream, one cuBLASLt handle, scratch
 * buffers, and the memory half of the op interface (ops.h, "memory"). */
#include <string.h>

#include "cuda_common.h"

static cudaStream_t g_stream;
static cublasLtHandle_t g_lt;
static void *g_scratch[SCRATCH_SLOTS];
static size_t g_scratch_bytes[SCRATCH_SLOTS];
static char g_name[300];

extern "C" void sg_cuda_fail(const char *file, int line, const char *call, const char *why) {
    fprintf(stderr, "sgtrain: CUDA error at %s:%d: %s: %s\n", file, line, call, why);
    exit(1);
}

/* The first use finds the device, so a machine without one gets a clear
 * message instead of an error from deep inside the first op. */
static void find_device(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fprintf(stderr,
                "sgtrain: no CUDA device (%s): this is the CUDA build; on a machine without a GPU use "
                "the CPU build, build/sgtrain\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        exit(1);
    }
}

/* The stream, without counting: for the paths that only wait or read back. */
static cudaStream_t stream(void) {
    if (!g_stream) {
        find_device();
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    }
    return g_stream;
}

/* Issue order (cuda_common.h, sg_stream_seq): every call that hands out the
 * op stream or a handle bound to it counts one, so a write issued after a
 * twin's producer cannot go unseen.  Over-counting (a caller that then only
 * reads) costs a twin, never a wrong result. */
static unsigned long g_seq;
extern "C" unsigned long sg_stream_seq(void) { return g_seq; }

extern "C" cudaStream_t sg_stream(void) {
    g_seq++;
    return stream();
}

/* Plain cuBLAS for the fp32 and mixed GEMMs cuBLASLt is not used for (the
 * classifier, the explicit attention); default math mode, so fp32 products
 * never drop to TF32. */
static cublasHandle_t g_blas;
extern "C" cublasHandle_t sg_cublas(void) {
    g_seq++; /* its calls run on the op stream without naming it */
    if (!g_blas) {
        CUBLAS_CHECK(cublasCreate(&g_blas));
        CUBLAS_CHECK(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH));
        CUBLAS_CHECK(cublasSetStream(g_blas, sg_stream()));
    }
    return g_blas;
}

extern "C" cublasLtHandle_t sg_cublaslt(void) {
    g_seq++;
    if (!g_lt) CUBLAS_CHECK(cublasLtCreate(&g_lt));
    return g_lt;
}

static void *scratch_get(int slot, size_t bytes, bool zero_new) {
    if (bytes <= g_scratch_bytes[slot]) return g_scratch[slot];
    if (g_scratch[slot]) {
        /* the stream may still be reading the old buffer */
        CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
        CUDA_CHECK(sg_free(g_scratch[slot]));
    }
    size_t want = bytes + bytes / 4; /* grow with headroom: shapes repeat every step */
    g_scratch[slot] = NULL, g_scratch_bytes[slot] = 0;
    if (sg_malloc(&g_scratch[slot], want) != cudaSuccess) sg_out_of_memory(want, "a scratch buffer");
    g_scratch_bytes[slot] = want;
    if (zero_new) CUDA_CHECK(cudaMemsetAsync(g_scratch[slot], 0, want, sg_stream()));
    return g_scratch[slot];
}

extern "C" void *sg_scratch(int slot, size_t bytes) { return scratch_get(slot, bytes, false); }
extern "C" void *sg_scratch_zeroed(int slot, size_t bytes) { return scratch_get(slot, bytes, true); }

extern "C" void *op_alloc(size_t bytes) {
    void *p = NULL;
    sg_stream();
    if (sg_malloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* clear the error: the caller reports out of memory */
        return NULL;
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, sg_stream()));
    return p;
}

static unsigned long g_frees;
extern "C" unsigned long sg_free_count(void) { return g_frees; }
extern "C" void sg_count_free(void) { g_frees++; }

extern "C" void op_free(void *p) {
    if (!p) return;
    CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    CUDA_CHECK(sg_free(p));
    /* the address may come back for another buffer */
    sg_matmul_forget();
    sg_weights_freed(p);
    sg_count_free();
}

/* Small copies through pinned staging, without a wait (upload_staging.cu);
 * the others from the caller's pageable memory, waited for: the host may
 * reuse its buffer at once.  Ordering on the stream keeps them after the
 * ops issued before. */
extern "C" void op_upload(void *dev, const void *host, size_t bytes) {
    if (!bytes) return;
    if (!sg_upload_staged(dev, host, bytes)) {
        CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, sg_stream()));
        CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    }
    op_written(dev, bytes);
}

/* writes host memory only: not counted (sg_stream_seq) */
extern "C" void op_download(void *host, const void *dev, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
}

extern "C" void op_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, sg_stream()));
    op_written(dst, bytes);
}

extern "C" void op_zero(void *p, size_t bytes) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, sg_stream()));
    op_written(p, bytes);
}

extern "C" int op_host_memory(void) { return 0; }
/* a wait, not counted: profiling (src/profile.h) brackets every op with it,
 * and must not cost the twins their use */
extern "C" void op_sync(void) { CUDA_CHECK(cudaStreamSynchronize(stream())); }

extern "C" const char *op_backend(void) {
    if (!g_name[0]) {
        sg_stream();
        int dev = 0;
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
        snprintf(g_name, sizeof g_name, "cuda (%s, sm_%d%d)", prop.name, prop.major, prop.minor);
    }
    return g_name;
}

/* One stream, one device: "threads" of the CPU backend have no meaning here. */
extern "C" int op_threads(void) { return 1; }
