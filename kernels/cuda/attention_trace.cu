/* The host side of the attention kernels' phase clocks (attention_trace.h):
 * one record buffer per traced kernel, filled by its last traced launch. */
#include <string.h>

#include <vector>

#include "attention_cuda.h"
#include "attention_trace.h"

namespace {
struct Slot {
    KtraceRec *dev = nullptr;
    size_t cap = 0;       /* records the buffer holds */
    long n = 0;           /* records of the last traced launch; 0: none since tracing began */
    char name[64] = {0};  /* its kernel */
    std::vector<KtraceRec> host;
};
bool g_on;
Slot g_slot[ATTN_TRACE_KERNELS];

const char *const PHASES[ATTN_TRACE_KERNELS][KTRACE_PHASES] = {
    {"wait", "QK^T", "softmax", "PV", "barrier", "epilogue"},
    {"wait", "S^T dP^T", "P dS", "dV dK", "barrier", "epilogue"},
    {"wait", "S dP", "dS", "dQ", "barrier", "epilogue"},
};
}  // namespace

KtraceRec *attn_trace_slot(int k, long blocks, int threads, const char *name) {
    if (!g_on || k < 0 || k >= ATTN_TRACE_KERNELS) return nullptr;
    Slot &s = g_slot[k];
    const size_t n = (size_t)blocks * (size_t)(threads / 32);
    if (n > s.cap) {
        if (s.dev) {
            CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued launch may still write it */
            CUDA_CHECK(sg_free(s.dev));
        }
        s.dev = nullptr, s.cap = 0;
        if (sg_malloc(reinterpret_cast<void **>(&s.dev), n * sizeof(KtraceRec)) != cudaSuccess)
            sg_out_of_memory(n * sizeof(KtraceRec), "the attention trace's records");
        s.cap = n;
    }
    CUDA_CHECK(cudaMemsetAsync(s.dev, 0xff, n * sizeof(KtraceRec), sg_stream()));
    s.n = (long)n;
    snprintf(s.name, sizeof s.name, "%s", name);
    return s.dev;
}

/* On: every launch of a traced kernel from now writes its records, and
 * what earlier launches left is forgotten.  Off: the plain kernels again. */
extern "C" void sg_attn_trace_enable(int on) {
    g_on = on != 0;
    for (Slot &s : g_slot) s.n = 0, s.name[0] = 0;
}

/* The records kernel k's last traced launch wrote (copied to the host; *recs
 * valid until the next call), and its name; 0 when none ran traced since
 * sg_attn_trace_enable(1): another kernel ran in its place (the wgmma or
 * cuDNN paths, a head dim without a traced instantiation). */
extern "C" long sg_attn_trace_records(int k, const KtraceRec **recs, const char **name) {
    *recs = nullptr;
    if (name) *name = "";
    if (k < 0 || k >= ATTN_TRACE_KERNELS || g_slot[k].n == 0) return 0;
    Slot &s = g_slot[k];
    s.host.resize((size_t)s.n);
    CUDA_CHECK(cudaMemcpyAsync(s.host.data(), s.dev, (size_t)s.n * sizeof(KtraceRec), cudaMemcpyDeviceToHost,
                               sg_stream()));
    CUDA_CHECK(cudaStreamSynchronize(sg_stream()));
    *recs = s.host.data();
    if (name) *name = s.name;
    return s.n;
}

extern "C" const char *sg_attn_trace_kernel(int k) {
    static const char *const K[ATTN_TRACE_KERNELS] = {"forward", "dK/dV", "dQ"};
    return k >= 0 && k < ATTN_TRACE_KERNELS ? K[k] : "?";
}

extern "C" const char *const *sg_attn_trace_phases(int k) {
    return k >= 0 && k < ATTN_TRACE_KERNELS ? PHASES[k] : nullptr;
}
