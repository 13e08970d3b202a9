/* Every device buffer the CUDA backend holds is taken with sg_malloc and
 * given back with sg_free, so the backend knows how many bytes it holds
 * and the most it ever held at once (op_memory_peak, ops.h): the model's
 * op buffers, the scratch slots, the matmuls' kept copies and twins, the
 * weights' bf16 copies and the attention's packed operands.
 *
 * Why.  The paper trains on an RTX 5090 with 32 GB, and a researcher
 * choosing a micro-batch for a tier needs the footprint of a step on the
 * device: sgtrain records it in the run's summary, and tests/gpu/bench.sh
 * beside each tier's rate.  cudaMemGetInfo would count the CUDA context and
 * other processes too, and say nothing of a peak between two reads.
 *
 * The CUDA context, cuBLASLt's handle and the driver's own reservations
 * are not counted: they are the same for every tier and micro-batch. */
#include "cuda_common.h"

typedef struct {
    void *p;
    size_t bytes;
} Held;

static Held *g_held;
static int g_n, g_cap;
static size_t g_now, g_peak;

/* The bytes the device hands out for a request (cudaMalloc's granule). */
static size_t granted(size_t bytes) { return (bytes + 255) / 256 * 256; }

extern "C" cudaError_t sg_malloc(void **p, size_t bytes) {
    if (g_n == g_cap) {
        int cap = g_cap ? 2 * g_cap : 64;
        Held *h = (Held *)realloc(g_held, (size_t)cap * sizeof *h);
        if (!h) return cudaErrorMemoryAllocation;
        g_held = h, g_cap = cap;
    }
    const cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an out-of-memory result is the caller's to report */
        return e;
    }
    g_held[g_n].p = *p, g_held[g_n].bytes = granted(bytes ? bytes : 1);
    g_now += g_held[g_n++].bytes;
    if (g_now > g_peak) g_peak = g_now;
    return cudaSuccess;
}

extern "C" cudaError_t sg_free(void *p) {
    if (!p) return cudaSuccess;
    for (int i = g_n - 1; i >= 0; i--) /* newest first: scratch regrows are the common case */
        if (g_held[i].p == p) {
            g_now -= g_held[i].bytes;
            g_held[i] = g_held[--g_n];
            return cudaFree(p);
        }
    return cudaErrorInvalidDevicePointer; /* not ours: a bug, reported by the caller's check */
}

/* A buffer a step cannot do without could not be had (the others fall
 * back: a cast into scratch instead of a kept copy).  What was asked and
 * what is held, and what to change, then exit 1: a micro-batch too large
 * for the device is a setting, not a fault. */
extern "C" void sg_out_of_memory(size_t bytes, const char *what) {
    fprintf(stderr,
            "sgtrain: out of device memory: %s of %.3f GiB could not be had, with %.3f GiB held (at most %.3f); "
            "lower micro_batch and raise grad_accum to keep the batch\n",
            what, bytes / 1073741824.0, g_now / 1073741824.0, g_peak / 1073741824.0);
    exit(1);
}

extern "C" size_t op_memory_peak(void) { return g_peak; }
extern "C" void op_memory_peak_reset(void) { g_peak = g_now; }

extern "C" int op_memory_room(size_t *room, size_t *total) {
    size_t free_b = 0, total_b = 0;
    sg_stream(); /* the context exists before it is asked */
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    *room = free_b + g_now, *total = total_b;
    return 1;
}
