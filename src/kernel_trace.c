#include "kernel_trace.h"

#include <stdlib.h>
#include <string.h>

static int written(const KtraceRec *r) { return r->sm != UINT32_MAX; }

static int by_sm_start(const void *a, const void *b) {
    const KtraceRec *x = *(const KtraceRec *const *)a, *y = *(const KtraceRec *const *)b;
    if (x->sm != y->sm) return x->sm < y->sm ? -1 : 1;
    if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
    return 0;
}

int ktrace_summarize(const KtraceRec *r, long n, KtraceSummary *s) {
    memset(s, 0, sizeof *s);
    const KtraceRec **w = malloc(sizeof *w * (size_t)(n > 0 ? n : 1));
    if (!w) {
        fprintf(stderr, "ktrace_summarize: out of host memory\n");
        exit(1);
    }
    long m = 0;
    double phase[KTRACE_PHASES] = {0};
    double good_cycles = 0, good_ns = 0; /* the consistent records' */
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (long i = 0; i < n; i++) {
        if (!written(&r[i])) {
            s->missing++;
            continue;
        }
        const KtraceRec *x = &r[i];
        uint32_t sum = 0;
        for (int p = 0; p < KTRACE_PHASES; p++) sum += x->phase[p], phase[p] += x->phase[p];
        if (sum != (uint32_t)x->cycles || x->end_ns < x->start_ns) s->bad++;
        else good_cycles += (double)x->cycles, good_ns += (double)(x->end_ns - x->start_ns);
        s->cycles += (double)x->cycles;
        s->tiles += x->tiles;
        if ((double)x->cycles > s->warp_cycles_max) s->warp_cycles_max = (double)x->cycles;
        if (x->start_ns < t0) t0 = x->start_ns;
        if (x->end_ns > t1) t1 = x->end_ns;
        w[m++] = x;
    }
    s->warps = n;
    if (m == 0) {
        free(w);
        return -1;
    }
    s->warp_cycles_mean = s->cycles / (double)m;
    s->clock_ghz = good_ns > 0 ? good_cycles / good_ns : 0;
    for (int p = 0; p < KTRACE_PHASES; p++) {
        s->phase_share[p] = s->cycles > 0 ? phase[p] / s->cycles : 0;
        s->phase_per_tile[p] = s->tiles > 0 ? phase[p] / s->tiles : 0;
    }
    s->span_ns = (double)(t1 - t0);

    /* each SM's warps by start: the union of their intervals is its busy
     * time, their summed lengths over it the warps it held meanwhile */
    qsort(w, (size_t)m, sizeof *w, by_sm_start);
    double busy = 0, warp_ns = 0;
    uint64_t first_done = UINT64_MAX; /* the earliest time an SM saw its last warp end */
    for (long i = 0; i < m;) {
        const uint32_t sm = w[i]->sm;
        uint64_t a = w[i]->start_ns, b = w[i]->end_ns, last = 0;
        double sm_busy = 0;
        for (; i < m && w[i]->sm == sm; i++) {
            const KtraceRec *x = w[i];
            warp_ns += (double)(x->end_ns - x->start_ns);
            if (x->end_ns > last) last = x->end_ns;
            if (x->start_ns > b) { /* a gap: the run so far is closed */
                sm_busy += (double)(b - a);
                a = x->start_ns, b = x->end_ns;
            } else if (x->end_ns > b) {
                b = x->end_ns;
            }
        }
        sm_busy += (double)(b - a);
        busy += sm_busy;
        s->sms++;
        if (last < first_done) first_done = last;
    }
    s->busy = s->span_ns > 0 ? busy / (s->span_ns * s->sms) : 1;
    s->resident = busy > 0 ? warp_ns / busy : 0;
    s->tail_ns = (double)(t1 - first_done);
    free(w);
    return 0;
}

void ktrace_print(FILE *f, const KtraceSummary *s, const char *const names[KTRACE_PHASES], const char *indent) {
    fprintf(f, "%s%-14s %7s %12s\n", indent, "phase", "share", "cycles/tile");
    for (int p = 0; p < KTRACE_PHASES; p++)
        fprintf(f, "%s%-14s %6.1f%% %12.0f\n", indent, names[p], 100 * s->phase_share[p], s->phase_per_tile[p]);
    fprintf(f, "%s%ld warps on %d SMs, %.0f tiles; a warp %.0f cycles (mean), %.0f (max); clock %.3f GHz\n", indent,
            s->warps, s->sms, s->tiles, s->warp_cycles_mean, s->warp_cycles_max, s->clock_ghz);
    fprintf(f, "%sspan %.1f us; SMs busy %.1f%% of it, %.2f warps resident while busy; tail %.1f us\n", indent,
            s->span_ns / 1e3, 100 * s->busy, s->resident, s->tail_ns / 1e3);
    if (s->missing || s->bad)
        fprintf(f, "%s%ld records unwritten, %ld inconsistent\n", indent, s->missing, s->bad);
}
