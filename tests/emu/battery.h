/* What the emulated op batteries share (attention_emu_test.cpp,
 * ops_emu_test.cpp): buffers with NaN guard zones, random inputs, the
 * comparison with tests/gpu/test_gpu_ops.c's tolerances, the per-case
 * digests the script compares between scheduler seeds, and the case loop.
 * Each battery is one translation unit that includes this once. */
#ifndef SG_EMU_BATTERY_H
#define SG_EMU_BATTERY_H

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "check.h"
#include "ops.h"
#include "rng.h"
}
namespace emu {
void set_seed(unsigned long long s);
extern size_t max_smem_launched;
extern long switches;
/* the H200's shared memory per block instead of the RTX 5090's, for tiles
 * built with a 4-byte bf16 (EMU_BF16_EXACT; cuda_runtime.h) */
void use_largest_smem();
}  // namespace emu

static_assert(sizeof(real) == sizeof(float), "the emulated kernels are fp32 (the CUDA build's real)");

/* ---- buffers ------------------------------------------------------------ */

static const uint32_t NAN_BITS = 0x7fc0dead; /* "not written": a quiet NaN */
inline float nan_fill() {
    float f;
    memcpy(&f, &NAN_BITS, 4);
    return f;
}

/* 256-byte-aligned storage, as cudaMalloc's */
template <class T>
struct Aligned256 {
    typedef T value_type;
    Aligned256() = default;
    template <class U>
    Aligned256(const Aligned256<U> &) {}
    T *allocate(size_t n) {
        void *p = aligned_alloc(256, (n * sizeof(T) + 255) / 256 * 256);
        if (!p) abort();
        return static_cast<T *>(p);
    }
    void deallocate(T *p, size_t) { free(p); }
    bool operator==(const Aligned256 &) const { return true; }
    bool operator!=(const Aligned256 &) const { return false; }
};

/* n floats between two guard zones of NaN (reads past either end poison the
 * result; writes there are caught by guards_ok).  The data start lead
 * floats into 256-byte-aligned storage: 64 (the default) keeps them 256-byte
 * aligned, like a cudaMalloc'ed buffer, so the kernels take their float4
 * paths; 80 leaves them 64-byte aligned only, like the model's tensors
 * (src/model.c aligns to 64 bytes). */
struct Buf {
    static constexpr size_t G = 64;
    std::vector<float, Aligned256<float>> v;
    size_t n, lead;
    explicit Buf(size_t n_, float fill = nan_fill(), size_t lead_ = G) : v(lead_ + n_ + G), n(n_), lead(lead_) {
        for (size_t i = 0; i < v.size(); i++) v[i] = i >= lead && i < lead + n ? fill : nan_fill();
    }
    float *p() { return v.data() + lead; }
    const float *p() const { return v.data() + lead; }
    float &operator[](size_t i) { return v[lead + i]; }
    float operator[](size_t i) const { return v[lead + i]; }
    bool guards_ok() const {
        for (size_t i = 0; i < lead; i++)
            if (memcmp(&v[i], &NAN_BITS, 4)) return false;
        for (size_t i = 0; i < G; i++)
            if (memcmp(&v[lead + n + i], &NAN_BITS, 4)) return false;
        return true;
    }
};

static uint64_t g_key;
static uint64_t g_ctr;
inline Buf normal(size_t n, double scale) {
    Buf b(n, 0.f);
    for (size_t i = 0; i < n; i++) b[i] = (float)(scale * rng_normal(g_key, g_ctr++));
    return b;
}
inline Buf neg_abs_normal(size_t n, double scale) {
    Buf b = normal(n, scale);
    for (size_t i = 0; i < n; i++) b[i] = -std::fabs(b[i]);
    return b;
}

/* rows x cols elements at off + r * stride + c, as a contiguous vector */
inline std::vector<double> strided(const float *x, long rows, int cols, int stride, long off) {
    std::vector<double> o;
    o.reserve((size_t)rows * cols);
    for (long r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) o.push_back(x[off + r * stride + c]);
    return o;
}
inline std::vector<double> flat(const float *x, long n) { return strided(x, 1, (int)n, 0, 0); }
inline std::vector<double> flat(const Buf &b) { return flat(b.p(), (long)b.n); }

/* ---- comparison, as test_gpu_ops's same() (tests/gpu/gpu_ops_common.c) --- */

static std::string g_tag;
static double g_worst; /* the case's worst error, as a fraction of its tolerance */

/* |got - ref| <= atol + rtol |ref| per element; scale (for atol) is the
 * output's largest magnitude unless given.  lowp: the bf16 tolerance
 * (rtol 2e-2, atol 2e-2 scale), else fp32's (rtol 1e-4, atol 1e-5 max(1, scale)). */
inline void same(const char *what, const std::vector<double> &got, const std::vector<double> &ref, bool lowp,
                 double scale = -1) {
    if (scale < 0) {
        scale = 0;
        for (double x : ref) scale = std::fmax(scale, std::fabs(x));
    }
    const double atol = lowp ? 2e-2 * scale + 1e-6 : 1e-5 * (scale > 1 ? scale : 1), rtol = lowp ? 2e-2 : 1e-4;
    long worst = 0;
    const double e = check_max_err(got.data(), ref.data(), (long)got.size(), atol, rtol, &worst);
    g_worst = std::fmax(g_worst, std::isnan(e) ? INFINITY : e);
    CHECK(e <= 1, "%s: %s: worst %.3g of tolerance at %ld (emu %.7g, cpu %.7g)", g_tag.c_str(), what, e, worst,
          got.empty() ? 0. : got[worst], ref.empty() ? 0. : ref[worst]);
}

/* An output whose exact value is 0, so that both sides hold rounding noise:
 * |got - ref| <= bound per element. */
inline void noise(const char *what, const std::vector<double> &got, const std::vector<double> &ref, double bound) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double e = std::fabs(got[i] - ref[i]);
        worst = std::isnan(e) ? INFINITY : std::fmax(worst, e);
    }
    g_worst = std::fmax(g_worst, worst / bound);
    CHECK(worst <= bound, "%s: %s (exactly 0): |emu - cpu| up to %.3g, over the rounding bound %.3g", g_tag.c_str(),
          what, worst, bound);
}

/* bitwise equal, guards included */
inline bool same_bits(const Buf &a, const Buf &b) {
    return a.v.size() == b.v.size() && !memcmp(a.v.data(), b.v.data(), sizeof(float) * a.v.size());
}
inline void intact(const char *what, const Buf &b) { CHECK(b.guards_ok(), "%s: %s: written outside", g_tag.c_str(), what); }
inline void unchanged(const char *what, const Buf &now, const Buf &before) {
    CHECK(same_bits(now, before), "%s: input %s was written", g_tag.c_str(), what);
}

/* FNV-1a over the bits of every output of a case */
struct Digest {
    uint64_t h = 1469598103934665603ull;
    void add(const void *p, size_t bytes) {
        const unsigned char *c = (const unsigned char *)p;
        for (size_t i = 0; i < bytes; i++) h = (h ^ c[i]) * 1099511628211ull;
    }
    void add(const Buf &b) { add(b.v.data(), sizeof(float) * b.v.size()); }
};
static FILE *g_digests;
inline void digest_out(const Digest &d) { fprintf(g_digests, "%s %016" PRIx64 "\n", g_tag.c_str(), d.h); }

/* "--shard I/N" (I < N), an option of every battery: N processes share a
 * battery on N cores, shard I running the cases dealt to it.  The cases
 * are dealt in turn, each round of N starting one shard further on: case
 * i (from 0) goes to shard (i + i / N) mod N, so that a pattern of the
 * battery with period N (the attention cases' batch of 1 or 2 alternates)
 * is spread over the shards, not given whole to one.  The inputs are the
 * same whichever shard draws them (each case's stream follows its place
 * in the battery).  False if ARG is not this option; a malformed one ends
 * the program (exit 2). */
static unsigned g_shard = 0, g_shards = 1;
inline bool battery_shard_of(uint64_t i) { return (i + i / g_shards) % g_shards == g_shard; }
inline bool battery_shard_option(int argc, char **argv) {
    if (strcmp(argv[1], "--shard")) return false;
    unsigned i, n;
    char end;
    if (argc < 3 || sscanf(argv[2], "%u/%u%c", &i, &n, &end) != 2 || n == 0 || i >= n) {
        fprintf(stderr, "%s: --shard wants I/N with I < N, got %s\n", argv[0], argc < 3 ? "nothing" : argv[2]);
        exit(2);
    }
    g_shard = i, g_shards = n;
    return true;
}

/* A battery's command line after its own options: SEED DIGESTS [FILTER].
 * Seeds the scheduler, opens the digest file and returns the filter, or
 * NULL after a message (exit status 2). */
inline const char *battery_args(const char *name, const char *usage, int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return nullptr;
    }
    check_name = name;
    emu::set_seed(strtoull(argv[1], nullptr, 10));
    g_digests = fopen(argv[2], "w");
    if (!g_digests) {
        perror(argv[2]);
        return nullptr;
    }
    return argc > 3 ? argv[3] : "";
}

/* ---- the case loop --------------------------------------------------------- */

/* One battery's cases: each is run if its tag contains the filter, with
 * inputs drawn from a stream of its own (they depend on the battery and
 * the case, not on the scheduler's seed), and prints its worst error as a
 * fraction of its tolerance and its time. */
struct Cases {
    const char *filter;
    uint64_t battery; /* the inputs' stream */
    uint64_t n = 0;
    std::chrono::steady_clock::time_point t0;
    Cases(const char *filter_, uint64_t battery_) : filter(filter_), battery(battery_) {}
    bool begin(const std::string &tag) {
        t0 = std::chrono::steady_clock::now();
        g_key = rng_key(2026, battery, ++n);
        g_ctr = 0;
        g_tag = tag;
        g_worst = 0;
        return battery_shard_of(n - 1) && tag.find(filter) != std::string::npos;
    }
    void end() const {
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("%-66s worst %.3f of tolerance  %5.2f s\n", g_tag.c_str(), g_worst, sec);
    }
};

#endif
