/* The emulated launch (the scheduler of emu_threads.h), shared memory,
 * cudaMalloc and cudaFree, and the host side of kernels/cuda/cuda_common.h
 * (stream, handles, scratch buffers, the failure exit) for the emulated
 * CUDA ops.  (kernels/cuda/runtime.cu's memory half, op_alloc to op_free,
 * is emu_memory.cpp.)
 *
 * Thread switches.  Each stack carries a fiber, a coroutine started once
 * with makecontext and setcontext, that runs the block's thread i after
 * thread i, each launch and block, waiting in between.  Every switch,
 * starting a thread included, is _setjmp/_longjmp, which only saves and
 * restores registers.  (getcontext, setcontext and swapcontext also set the
 * signal mask, a system call each: in a thread's every switch, or only at
 * its start, that was most of the run time, or a quarter of it.  These
 * threads never touch signals.)  Jumping between stacks is what
 * _FORTIFY_SOURCE's longjmp check forbids, so it is off in this file.
 * Built with AddressSanitizer (EMU_SANITIZE=1 in tests/e2e_cuda_emu.sh),
 * every switch is announced to it
 * (__sanitizer_start_switch_fiber, __sanitizer_finish_switch_fiber), so
 * that it knows which stack is live and never takes a thread's frames for
 * the scheduler's.  There the switches call glibc's _longjmp past the
 * sanitizer's interceptor of it, which at every jump asks the kernel for
 * the signal stack (sigaltstack) and clears the shadow of the frames left
 * behind: more than half of the sanitized run's CPU time went to that,
 * and no frame is ever left behind for good here. */
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <random>
#include <unordered_map>

#include "cublasLt.h"
#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "scratch.h"

namespace emu {
Thread *cur;
emu_uint3 g_blockIdx;
dim3 g_blockDim, g_gridDim;
Barrier block_bar;
std::vector<Barrier> warp_bars;
std::vector<Barrier> wg_bars;
std::vector<std::array<uint64_t, 32>> xchg;
unsigned char *smem_lo, *smem_hi;
size_t max_smem_attr;
size_t smem_optin = SMEM_OPTIN_SM120;
void use_largest_smem() { smem_optin = SMEM_OPTIN_MAX; }
long switches;
size_t max_smem_launched;
double device_extra_ms; /* cuda_runtime.h's events */

static std::mt19937_64 rng(1);
void set_seed(unsigned long long s) { rng.seed(s); }

/* ---- the scheduler -------------------------------------------------------- */

static jmp_buf sched_jb;
#if defined(__SANITIZE_ADDRESS__)
/* glibc's own _longjmp; not noreturn to the compiler, which would put the
 * sanitizer's __asan_handle_no_return (the same sigaltstack) before it */
static void (*real_longjmp)(struct __jmp_buf_tag *, int);
__attribute__((noinline)) static void resume(jmp_buf b) {
    if (!real_longjmp) {
        /* from libc itself: RTLD_NEXT would find the interceptor first */
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc) real_longjmp = (void (*)(struct __jmp_buf_tag *, int))dlsym(libc, "_longjmp");
        if (!real_longjmp) {
            fprintf(stderr, "emu: glibc's _longjmp not found: %s\n", dlerror());
            abort();
        }
    }
    real_longjmp(b, 1);
}
#else
static inline void resume(jmp_buf b) { _longjmp(b, 1); }
#endif
static std::vector<Thread> th;    /* the block's threads */
static const size_t STACK = 256 * 1024, GUARD = 4096;
/* The fiber on stack i runs the block's thread i.  Made once; not moved
 * (a ucontext_t points into itself), so held by pointer. */
struct Fiber {
    char *stack;
    ucontext_t ctx; /* to start it, once */
    jmp_buf idle;   /* where it waits between threads */
    void *fake;     /* AddressSanitizer's fake stack while it waits */
    bool made;      /* started: later threads are a _longjmp to idle */
};
static std::vector<Fiber *> fibers;

/* The announcements to AddressSanitizer; nothing in other builds.  A
 * thread learns the scheduler's stack from its first arrival. */
static const void *sched_bottom;
static size_t sched_size;
static inline void leaving(void **fake, const void *to_bottom, size_t to_size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(fake, to_bottom, to_size);
#else
    (void)fake, (void)to_bottom, (void)to_size;
#endif
}
static inline void arrived(void *fake, const void **from_bottom, size_t *from_size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, from_bottom, from_size);
#else
    (void)fake, (void)from_bottom, (void)from_size;
#endif
}
static void *sched_fake;
static std::vector<int> runnable; /* indices into th; th[i].slot is i's place here */

static void make_runnable(int i) {
    th[i].slot = (int)runnable.size();
    runnable.push_back(i);
}
static void make_waiting(int i) {
    const int s = th[i].slot, last = runnable.back();
    runnable[s] = last;
    th[last].slot = s;
    runnable.pop_back();
    th[i].slot = -1;
}
static void yield() {
    ++switches;
    if (_setjmp(cur->jb) == 0) {
        leaving(&cur->fake, sched_bottom, sched_size);
        resume(sched_jb);
    }
    arrived(cur->fake, &sched_bottom, &sched_size);
}
/* Runs t until it waits at a barrier or ends. */
__attribute__((noinline)) static void run(Thread &t) {
    cur = &t;
    if (_setjmp(sched_jb) == 0) {
        Fiber &f = *fibers[&t - th.data()];
        leaving(&sched_fake, f.stack, STACK);
        if (t.started) resume(t.jb);
        t.started = true;
        if (f.made) resume(f.idle);
        f.made = true;
        setcontext(&f.ctx);
    }
    arrived(sched_fake, nullptr, nullptr);
}
void barrier_wait(Barrier &b) {
    const int me = (int)(cur - th.data());
    if ((int)b.waiting.size() + 1 == b.size) { /* the last to arrive: everyone goes on */
        for (int w : b.waiting) make_runnable(w);
        b.waiting.clear();
    } else {
        make_waiting(me);
        b.waiting.push_back(me);
    }
    yield();
}

static std::function<void()> *g_kernel;
/* A fiber's body: the kernel as thread i (cur), and again as the thread i
 * of each later block and launch. */
static void fiber() {
    arrived(nullptr, &sched_bottom, &sched_size);
    for (;;) {
        (*g_kernel)();
        const int i = (int)(cur - th.data());
        cur->done = true;
        make_waiting(i);
        Fiber &f = *fibers[i];
        if (_setjmp(f.idle) == 0) {
            leaving(&f.fake, sched_bottom, sched_size);
            resume(sched_jb);
        }
        arrived(f.fake, &sched_bottom, &sched_size);
    }
}

/* Dynamic shared memory: the launched size, and past it a poisoned margin
 * that must stay untouched.  Static (__shared__) variables get fixed offsets
 * in their own area, 48 KiB as on the device. */
static constexpr size_t DYN_BYTES = SMEM_OPTIN_MAX + 4096, STATIC_BYTES = 48 * 1024;
alignas(1024) static unsigned char dyn_area[DYN_BYTES];
alignas(1024) static unsigned char static_area[STATIC_BYTES];
static size_t static_used;

unsigned char *dyn_smem() { return dyn_area; }
void *static_smem(size_t bytes, size_t align) {
    static_used = (static_used + align - 1) / align * align;
    if (static_used + bytes > STATIC_BYTES) {
        fprintf(stderr, "emu: static shared memory over 48 KiB\n");
        abort();
    }
    void *p = static_area + static_used;
    static_used += bytes;
    return p;
}

/* A fiber on a new stack, ready to be started.  (Apart from launch_impl:
 * getcontext counts as a function that may return twice, which would make
 * the compiler wary of launch_impl's locals.) */
__attribute__((noinline)) static void make_fiber(Fiber &f, char *stack) {
    f.stack = stack;
    f.fake = nullptr;
    f.made = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = STACK;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber, 0);
}
/* Thread i of the block, ready to run on fiber i. */
static void start(unsigned i) {
    Thread &t = th[i];
    t.done = t.started = false;
    t.tid = {i, 0, 0};
    t.warp = (int)i / 32;
    t.lane = (int)i % 32;
    make_runnable((int)i);
}

static void fail(const char *what) {
    fprintf(stderr, "emu launch: %s\n", what);
    abort();
}

void launch_impl(dim3 grid, dim3 block, size_t smem, std::function<void()> f) {
    /* the device's launch limits (sm_80 .. sm_120) */
    if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
        fail("invalid grid");
    const unsigned nt = block.x * block.y * block.z;
    if (nt < 1 || nt > 1024) fail("invalid block size");
    if (block.y != 1 || block.z != 1 || nt % 32) fail("emulated: 1-D blocks of whole warps only");
    if (smem > 48 * 1024 && smem > max_smem_attr) fail("dynamic shared memory over 48 KiB without the opt-in attribute");
    /* the launched dynamic shared memory alone: static __shared__ variables
     * get their offsets once for the whole process here (static_smem), so
     * static_used is every kernel's, not this one's; the tile kernels have
     * none (their tiles are dynamic) */
    if (smem > smem_optin)
        fail(smem_optin == SMEM_OPTIN_SM120 ? "shared memory over the RTX 5090's (sm_120) 99 KiB per block"
                                            : "shared memory over the H200's 227 KiB per block");
    max_smem_launched = std::max(max_smem_launched, smem);

    g_gridDim = grid;
    g_blockDim = block;
    std::vector<emu_uint3> blocks;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) blocks.push_back({x, y, z});
    std::shuffle(blocks.begin(), blocks.end(), rng); /* blocks run in no fixed order */
    g_kernel = &f;
    /* 256 KiB stacks (the kernels keep fragments of 1 KiB each in locals)
     * above an inaccessible page: an overflow is a crash, not corruption */
    while (fibers.size() < nt) {
        void *m = mmap(nullptr, GUARD + STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m, GUARD, PROT_NONE)) fail("no memory for thread stacks");
        fibers.push_back(new Fiber);
        make_fiber(*fibers.back(), (char *)m + GUARD);
    }
    th.assign(nt, Thread());
    for (const emu_uint3 bi : blocks) {
        g_blockIdx = bi;
        memset(dyn_area, 0xff, std::min(DYN_BYTES, smem + 4096));
        memset(static_area, 0xff, STATIC_BYTES);
        smem_lo = dyn_area;
        smem_hi = dyn_area + smem;
        block_bar = Barrier();
        block_bar.size = (int)nt;
        warp_bars.assign(nt / 32, Barrier());
        for (auto &w : warp_bars) w.size = 32;
        wg_bars.assign(nt % 128 ? 0 : nt / 128, Barrier());
        for (auto &w : wg_bars) w.size = 128;
        xchg.assign(nt / 32, {});
        wg_in_flight = 0;
        ++wg_block_serial;
        runnable.clear();
        for (unsigned i = 0; i < nt; i++) start(i);
        while (!runnable.empty()) run(th[runnable[rng() % runnable.size()]]);
        for (const Thread &t : th)
            if (!t.done) fail("deadlock: threads wait at a barrier that not all of them reach");
        if (wg_in_flight) fail("a block ended with warpgroup products never waited for (wg_wait)");
        for (size_t b = smem; b < std::min(DYN_BYTES, smem + 4096); b++)
            if (dyn_area[b] != 0xff) fail("shared memory written past the launched size");
    }
}
}  // namespace emu

/* ---- device memory: host memory, as cudaMalloc aligned ---- */

/* A device of EMU_DEVICE_BYTES (unset: as much as the host has), so that
 * the tests can run out of device memory: the bytes held, by buffer. */
namespace emu {
static std::unordered_map<void *, size_t> held_by;
static size_t held;
static size_t capacity(void) {
    static size_t c = 0;
    if (!c) {
        const char *e = getenv("EMU_DEVICE_BYTES");
        c = e && *e ? (size_t)strtoull(e, NULL, 10) : SIZE_MAX;
    }
    return c;
}
}  // namespace emu

/* 256-byte aligned and uninitialised (NaN bytes), as the device's */
cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (!p) return cudaErrorInvalidValue;
    const size_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
    if (n > emu::capacity() - emu::held) return cudaErrorMemoryAllocation;
    *p = aligned_alloc(256, n);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, n);
    emu::held_by[*p] = n;
    emu::held += n;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    const size_t cap = std::min(emu::capacity(), (size_t)1 << 40);
    *total_bytes = cap;
    *free_bytes = cap > emu::held ? cap - emu::held : 0;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    auto it = emu::held_by.find(p);
    if (it != emu::held_by.end()) {
        emu::held -= it->second;
        emu::held_by.erase(it);
    }
    free(p);
    return cudaSuccess;
}

/* Pinned host memory (cuda_runtime.h): each buffer's last copy, numbered
 * in issue order, and how many copies the host has seen complete. */
namespace emu {
struct Pinned {
    const char *lo, *hi;
    unsigned long last; /* the number of its last copy; 0 none */
};
static std::vector<Pinned> pinned;
static unsigned long copies_issued, copies_seen;
static void pinned_fail(const char *what) {
    fprintf(stderr, "emu cudaMemcpyAsync: %s\n", what);
    abort();
}
void pinned_copy(const void *src, size_t bytes) {
    const char *p = (const char *)src;
    for (Pinned &b : pinned)
        if (p >= b.lo && p < b.hi) {
            if (p + bytes > b.hi) pinned_fail("a copy from pinned memory runs past its buffer");
            if (b.last > copies_seen)
                pinned_fail("a pinned buffer is the source of a copy while its previous copy was never seen "
                            "complete (cudaEventSynchronize or cudaStreamSynchronize): the host refilled it too "
                            "early");
            b.last = ++copies_issued;
            return;
        }
}
unsigned long pinned_copies(void) { return copies_issued; }
void pinned_seen(unsigned long n) { copies_seen = std::max(copies_seen, n); }
}  // namespace emu
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    if (!p) return cudaErrorInvalidValue;
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    emu::pinned.push_back({(const char *)*p, (const char *)*p + bytes, 0});
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    for (size_t i = 0; i < emu::pinned.size(); i++)
        if (emu::pinned[i].lo == p) {
            emu::pinned.erase(emu::pinned.begin() + (long)i);
            free(p);
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

/* ---- the host side of cuda_common.h ---- */
struct emu_cublas {};
struct emu_cublaslt {};
extern "C" {
void sg_cuda_fail(const char *file, int line, const char *call, const char *why) {
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, why);
    exit(1);
}
/* Issue order for the bf16 twins (cuda_common.h, sg_stream_seq), counted
 * as runtime.cu counts it: every hand-out of the stream or of a handle.
 * (emu_memory.cpp counts op_zero and op_alloc, which write without the
 * stream here, and not op_download, as runtime.cu.) */
static unsigned long g_seq;
unsigned long sg_stream_seq(void) { return g_seq; }

/* op_free's count (cuda_common.h); emu_memory.cpp's op_free moves it */
static unsigned long g_frees;
unsigned long sg_free_count(void) { return g_frees; }
void sg_count_free(void) { g_frees++; }
cudaStream_t sg_stream(void) {
    g_seq++;
    return nullptr;
}
/* handles that are not NULL (the emulated calls refuse NULL, as cuBLAS) */
cublasLtHandle_t sg_cublaslt(void) {
    static emu_cublaslt h;
    g_seq++;
    return &h;
}
cublasHandle_t sg_cublas(void) {
    static emu_cublas h;
    g_seq++;
    return &h;
}
/* Poisoned with NaN on every call, and a new buffer each time: a kernel
 * must write what it reads, and may not keep a pointer past the next call
 * with the same slot (the contract of cuda_common.h; runtime.cu's buffer
 * lives on while it is large enough).  256-byte aligned, as runtime.cu's
 * cudaMalloc'ed buffers. */
cudaError_t sg_malloc(void **p, size_t bytes); /* device_memory.cu: counted */
cudaError_t sg_free(void *p);
void sg_out_of_memory(size_t bytes, const char *what) __attribute__((noreturn));
void *sg_scratch(int slot, size_t bytes) {
    static void *buf[SCRATCH_SLOTS];
    static size_t held[SCRATCH_SLOTS];
    if (slot < 0 || slot >= SCRATCH_SLOTS) abort();
    /* Apart from cuBLASLt's workspace, which is the library's alone: none
     * of our kernels reads or writes it, and the emulated cuBLASLt fills
     * the part an algorithm takes with NaN itself (emu_cublaslt.cpp).  It
     * lives on while it is large enough, as runtime.cu's: 32 MiB made and
     * poisoned anew at every product were nine tenths of an emulated
     * sgtrain's page faults, and 40% of its run time. */
    if (slot == SCRATCH_LT_WORKSPACE && buf[slot] && held[slot] >= bytes) return buf[slot];
    if (buf[slot] && sg_free(buf[slot])) abort();
    buf[slot] = nullptr;
    if (sg_malloc(&buf[slot], bytes)) sg_out_of_memory(bytes, "a scratch buffer");
    held[slot] = bytes;
    return buf[slot];
}
/* runtime.cu zeroes these for initcheck's sake; here they stay poisoned, the
 * stronger check that the classifier writes every logit it reads */
void *sg_scratch_zeroed(int slot, size_t bytes) { return sg_scratch(slot, bytes); }
}
