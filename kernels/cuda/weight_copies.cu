/* bf16 copies of the model's weights that live from one optimizer step to
 * the next, rewritten by AdamW (ops.h, op_params).
 *
 * Why.  A matmul reads its weight in bf16, autocast's cast.  Cast in every
 * forward, a weight costs a read of 4 bytes and a write of 2 per element
 * per micro-batch: at the 124M tier, 0.74 GB a forward with the
 * classifier's padded wte, 3 GB a step of 4 micro-batches, and 49 launches
 * a forward.  Yet the weights change only in the optimizer step, and AdamW
 * holds each new value in a register as it stores it: storing its bf16 too
 * costs 2 bytes an element once a step (0.25 GB at 124M).
 *
 * How.  The model promises its parameter vector (op_params).  A weight a
 * matmul reads from inside it gets a copy here on first use, keyed by
 * (address, count) and cast then.  A copy is current while it holds
 * sg_cast_bf16 of every element of its weight, which is exactly what the
 * matmul would cast, so taking it changes no bit.  The writers keep that
 * true, in issue order on the one stream:
 *   - op_adamw_multi writes a copy in its own kernel when a segment is
 *     exactly the copy's weight (sg_weight_update), and the copy stays
 *     current;
 *   - every other write into the promised vector makes the copies it
 *     touches stale: op_upload, op_copy, op_zero, op_adamw, a segment that
 *     covers only part of a copy's weight (a ZeRO shard's edge), and
 *     op_written (a collective that wrote parameters, src/dist.c);
 *   - the next matmul that reads a stale copy casts it again.
 * A weight is then cast once at the start (and once a step under ZeRO-1,
 * for the shards other ranks updated), not in every forward.
 *
 * A copy may be longer than its weight and zero past it (sg_weight_bf16's
 * n_out): the classifier reads wte's copy as Vp rows, V of them wte's.
 *
 * SG_MATMUL_KEEP=0 turns the copies off with the other kept copies
 * (matmul.cu): every weight is cast in every forward, bitwise the same.
 * SG_MATMUL_STATS=1 prints at exit how many weight reads a copy served and
 * how many casts the copies needed. */
#include <string.h>

#include "cuda_common.h"

typedef struct {
    const float *w; /* the weight, inside the promised vector */
    long n;         /* its elements */
    long cap;       /* the copy's elements: n and zeros past it */
    __nv_bfloat16 *copy;
    int current;
} WeightCopy;

static const float *g_base; /* the promised vector (op_params); NULL: none */
static long g_len;
static WeightCopy *g_copies;
static int g_n, g_cap;
static long g_served, g_cast; /* weight reads a current copy served; casts into copies */

static void print_stats(void) {
    fprintf(stderr, "sg weights: %ld weight reads from AdamW-kept bf16 copies, %ld casts into them\n", g_served,
            g_cast);
}

extern "C" long sg_weight_reads_served(void) { return g_served; }
extern "C" long sg_weight_casts(void) { return g_cast; }

static void drop_all(void) {
    if (g_n) CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued product may still read one */
    for (int i = 0; i < g_n; i++) CUDA_CHECK(sg_free(g_copies[i].copy));
    g_n = 0;
}

extern "C" void op_params(const real *buf, long n) {
    if (buf == g_base && n == g_len) return;
    drop_all();
    g_base = buf, g_len = buf && n > 0 ? n : 0;
    static int stats;
    if (!stats && sg_env_switch("SG_MATMUL_STATS", 0) == 1) stats = 1, atexit(print_stats);
}

/* op_free(p): the promise ends with its vector */
extern "C" void sg_weights_freed(const void *p) {
    if (!p || p != (const void *)g_base) return;
    drop_all();
    g_base = NULL, g_len = 0;
}

static int overlaps(const WeightCopy *c, const char *lo, const char *hi) {
    const char *a = (const char *)c->w, *b = (const char *)(c->w + c->n);
    return a < hi && lo < b;
}

extern "C" void op_written(const void *p, size_t bytes) {
    if (!g_n || !p || !bytes) return;
    const char *lo = (const char *)p, *hi = lo + bytes;
    for (int i = 0; i < g_n; i++)
        if (overlaps(&g_copies[i], lo, hi)) g_copies[i].current = 0;
}

static int inside(const float *w, long n) { return g_base && n > 0 && w >= g_base && w + n <= g_base + g_len; }

static WeightCopy *find(const float *w, long n) {
    for (int i = 0; i < g_n; i++)
        if (g_copies[i].w == w && g_copies[i].n == n) return &g_copies[i];
    return NULL;
}

/* The copy of w[0, n), created (stale) if there is none, with room for
 * n_out elements; NULL when out of memory (the caller casts as before). */
static WeightCopy *slot(const float *w, long n, long n_out) {
    WeightCopy *c = find(w, n);
    if (!c) {
        if (g_n == g_cap) {
            const int cap = g_cap ? 2 * g_cap : 64;
            WeightCopy *t = (WeightCopy *)realloc(g_copies, (size_t)cap * sizeof *t);
            if (!t) return NULL;
            g_copies = t, g_cap = cap;
        }
        c = &g_copies[g_n];
        memset(c, 0, sizeof *c);
        c->w = w, c->n = n;
    }
    if (c->cap < n_out) {
        __nv_bfloat16 *buf = NULL;
        if (sg_malloc((void **)&buf, (size_t)n_out * sizeof *buf) != cudaSuccess) {
            cudaGetLastError(); /* out of memory: the matmul casts into scratch */
            return NULL;
        }
        if (c->copy) {
            CUDA_CHECK(cudaStreamSynchronize(sg_stream())); /* a queued product may read the old one */
            CUDA_CHECK(sg_free(c->copy));
        }
        /* the zeros past n: written once, never by the casts or AdamW */
        CUDA_CHECK(cudaMemsetAsync(buf, 0, (size_t)n_out * sizeof *buf, sg_stream()));
        c->copy = buf, c->cap = n_out, c->current = 0;
    }
    if (c == &g_copies[g_n]) g_n++;
    return c;
}

extern "C" const __nv_bfloat16 *sg_weight_bf16(const float *w, long n, long n_out) {
    if (!sg_keep_copies() || !inside(w, n) || n_out < n) return NULL;
    WeightCopy *c = slot(w, n, n_out);
    if (!c) return NULL;
    if (c->current) {
        g_served++;
        return c->copy;
    }
    sg_cast_into(c->copy, w, n);
    g_cast++;
    c->current = 1;
    return c->copy;
}

extern "C" __nv_bfloat16 *sg_weight_update(const float *p, long n) {
    if (!g_n || n <= 0) return NULL;
    const char *lo = (const char *)p, *hi = (const char *)(p + n);
    __nv_bfloat16 *exact = NULL;
    for (int i = 0; i < g_n; i++) {
        WeightCopy *c = &g_copies[i];
        if (c->w == p && c->n == n) {
            exact = c->copy;
            c->current = 1; /* from the caller's launch on, which writes all of it */
        } else if (overlaps(c, lo, hi)) {
            c->current = 0;
        }
    }
    return exact;
}
