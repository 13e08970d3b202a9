/* The CPU backend's buffers are host memory (see ops.h, "memory"). */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

void *op_alloc(size_t bytes) { return calloc(1, bytes ? bytes : 1); }
void op_free(void *p) { free(p); }
void op_upload(void *dev, const void *host, size_t bytes) {
    if (dev != host && bytes) memcpy(dev, host, bytes);
}
void op_download(void *host, const void *dev, size_t bytes) {
    if (dev != host && bytes) memcpy(host, dev, bytes);
}
void op_copy(void *dst, const void *src, size_t bytes) {
    if (dst != src && bytes) memmove(dst, src, bytes);
}
void op_zero(void *p, size_t bytes) {
    if (bytes) memset(p, 0, bytes);
}
int op_host_memory(void) { return 1; }
void op_sync(void) {}
const char *op_backend(void) { return "cpu"; }
/* The CPU's matmuls read the fp32 weights themselves: nothing derived is kept. */
void op_params(const real *buf, long n) {
    (void)buf;
    (void)n;
}
void op_written(const void *p, size_t bytes) {
    (void)p;
    (void)bytes;
}
/* Host memory: what the process holds shows in its resident size instead. */
size_t op_memory_peak(void) { return 0; }
void op_memory_peak_reset(void) {}
int op_memory_room(size_t *room, size_t *total) {
    *room = *total = 0;
    return 0;
}
