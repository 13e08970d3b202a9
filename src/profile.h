/* Where a training step's time goes, by op category, for `make bench` and
 * `make bench-gpu`.  Off by default; when off, PROF costs one predictable
 * branch per op call.  When on, each op is bracketed by op_sync: on a GPU
 * the ops are queued asynchronously, and only a wait on both sides gives
 * the op's own time (at the cost of the overlap between ops). */
#ifndef SG_PROFILE_H
#define SG_PROFILE_H

#include <time.h>

#include "ops.h"

typedef enum {
    PROF_MATMUL,     /* linear layers, forward and backward (BLAS) */
    PROF_ATTENTION,  /* the fused attention op, forward and backward */
    PROF_GATE,       /* value gates, forward and backward */
    PROF_CLASSIFIER, /* LM head GEMMs + softmax + cross-entropy, fused */
    PROF_LAYERNORM,
    PROF_POINTWISE,  /* GELU, residual adds */
    PROF_EMBED,
    PROF_OPTIMIZER,  /* grad norm + AdamW */
    PROF_N
} ProfCat;

extern int prof_on;
extern double prof_secs[PROF_N];
extern double prof_flops[PROF_N];
const char *prof_name(ProfCat c);
void prof_reset(void);

/* The same split by call site: every PROF expansion owns one site, named by
 * the call's source text, so that "matmul" divides into the qkv, attn_proj,
 * fc and fc_proj products, forward and backward.  Sites register on their
 * first profiled call and are listed in that order. */
typedef struct ProfSite {
    const char *what;
    ProfCat cat;
    double secs, flops;
    long calls;
    int listed; /* in prof_sites */
    struct ProfSite *next;
} ProfSite;
extern ProfSite *prof_sites;
/* adds one call's time and flops to the site and to its category */
void prof_site_add(ProfSite *s, double secs, double flops);
/* The n sites with the most time, most first, into top[]; returns how many. */
int prof_top_sites(ProfSite **top, int n);
/* A site's name for a table: the op and its first arguments, at most
 * width characters ("op_matmul_fwd(la->qkv, la->ln1, ..." ). */
void prof_site_label(const ProfSite *s, char *buf, int width);

static inline double prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define PROF(cat, flops, call)                                             \
    do {                                                                   \
        if (prof_on) {                                                     \
            static ProfSite prof_site_ = {#call, cat, 0, 0, 0, 0, 0};      \
            op_sync();                                                     \
            double prof_t0_ = prof_now();                                  \
            call;                                                          \
            op_sync();                                                     \
            prof_site_add(&prof_site_, prof_now() - prof_t0_, (flops));   \
        } else {                                                           \
            call;                                                          \
        }                                                                  \
    } while (0)

#endif
