/* op_upload without a wait for the device: small copies go through pinned
 * staging buffers.
 *
 * Why.  op_upload lets its caller reuse the host buffer at once (ops.h).
 * A cudaMemcpyAsync from pageable memory does not promise that the driver
 * is done reading the buffer when it returns, so op_upload waited for the
 * stream to drain.  The model uploads a micro-batch's tokens and targets
 * (src/model.c), so each wait came after a whole forward, or after a whole
 * backward, had been queued: the device then sat idle until the host had
 * made the copy and issued the next kernel, twice a micro-batch.
 *
 * How.  The host copies the bytes into one of STAGES pinned buffers, and
 * the device copies from there.  From pinned memory cudaMemcpyAsync is
 * truly asynchronous, and the stream orders the copy before the kernels
 * issued after it.  A buffer is written again only once the event
 * recorded behind its last copy has completed: with STAGES buffers that
 * copy was issued STAGES - 1 uploads ago, so the wait normally finds it
 * long done.
 *
 * Uploads larger than STAGE_BYTES (a checkpoint's parameters, an analysis
 * hook's activations), and every upload once pinned memory could not be
 * had, take the old way: the caller copies and waits. */
#include <string.h>

#include "cuda_common.h"

enum { STAGES = 4 };
static const size_t STAGE_BYTES = 1u << 20;

typedef struct {
    void *buf;         /* pinned, STAGE_BYTES */
    cudaEvent_t done;  /* recorded behind the buffer's last copy */
    int pending;       /* a copy from buf was issued, and done recorded behind it */
} Stage;

static Stage g_stages[STAGES];
static int g_next;
static int g_state; /* 0 not yet set up, 1 ready, -1 unavailable */

static int setup(void) {
    int i = 0;
    for (; i < STAGES; i++) {
        Stage *s = &g_stages[i];
        if (cudaMallocHost(&s->buf, STAGE_BYTES) != cudaSuccess) break;
        if (cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming) != cudaSuccess) {
            cudaFreeHost(s->buf);
            break;
        }
    }
    if (i == STAGES) return 1;
    cudaGetLastError(); /* no pinned memory: every upload waits, as before */
    while (i-- > 0) cudaFreeHost(g_stages[i].buf), cudaEventDestroy(g_stages[i].done);
    return -1;
}

extern "C" int sg_upload_staged(void *dev, const void *host, size_t bytes) {
    if (bytes > STAGE_BYTES) return 0;
    if (!g_state) g_state = setup();
    if (g_state < 0) return 0;
    Stage *s = &g_stages[g_next];
    g_next = (g_next + 1) % STAGES;
    if (s->pending) CUDA_CHECK(cudaEventSynchronize(s->done)); /* its last copy has read it */
    memcpy(s->buf, host, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dev, s->buf, bytes, cudaMemcpyHostToDevice, sg_stream()));
    CUDA_CHECK(cudaEventRecord(s->done, sg_stream()));
    s->pending = 1;
    return 1;
}
