/* The traced kernels' summary (src/kernel_trace.h) on hand-made records
 * whose shares, busy times, residency, tail and clock are worked out below. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "kernel_trace.h"

static KtraceRec rec(uint32_t sm, uint64_t a, uint64_t b, uint32_t tiles, uint32_t p0, uint32_t p1, uint32_t p5) {
    KtraceRec r;
    memset(&r, 0, sizeof r);
    r.sm = sm, r.start_ns = a, r.end_ns = b, r.tiles = tiles;
    r.phase[0] = p0, r.phase[1] = p1, r.phase[5] = p5;
    r.cycles = (uint64_t)p0 + p1 + p5;
    return r;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1); }

static void test_summary(void) {
    /* SM 3: warps on [100, 300] and [200, 400] overlap (busy 300 ns, 400
     * warp-ns), then [600, 700] after a gap (busy 100, 100 warp-ns).
     * SM 7: [150, 250] (busy 100, 100 warp-ns); it is the first SM done, at
     * 250, and the launch ends at 700: tail 450.  Span 100 .. 700 = 600 ns;
     * busy (300 + 100 + 100) / (600 x 2 SMs) = 5/12; resident 600 / 500. */
    KtraceRec r[6];
    r[0] = rec(3, 100, 300, 4, 10, 30, 0);
    r[1] = rec(3, 200, 400, 4, 20, 20, 0);
    r[2] = rec(7, 150, 250, 2, 0, 40, 20);
    r[3] = rec(3, 600, 700, 2, 10, 10, 40);
    memset(&r[4], 0xff, sizeof r[4]); /* never written */
    r[5] = rec(7, 150, 250, 0, 5, 0, 0);
    r[5].cycles = 6; /* phases 5, cycles 6: inconsistent, still counted */
    KtraceSummary s;
    CHECK(ktrace_summarize(r, 6, &s) == 0, "summarize");
    CHECK(s.warps == 6 && s.missing == 1 && s.bad == 1 && s.sms == 2, "counts %ld %ld %ld %d", s.warps, s.missing,
          s.bad, s.sms);
    /* cycles 40 + 40 + 60 + 60 + 6 = 206; phase 0: 10 + 20 + 0 + 10 + 5 = 45,
     * phase 1: 30 + 20 + 40 + 10 = 100, phase 5: 60; tiles 12 */
    CHECK(s.cycles == 206 && s.tiles == 12, "cycles %g tiles %g", s.cycles, s.tiles);
    CHECK(near(s.phase_share[0], 45.0 / 206) && near(s.phase_share[1], 100.0 / 206) &&
              near(s.phase_share[5], 60.0 / 206) && s.phase_share[2] == 0,
          "shares %g %g %g", s.phase_share[0], s.phase_share[1], s.phase_share[5]);
    CHECK(near(s.phase_per_tile[1], 100.0 / 12) && near(s.phase_per_tile[5], 5.0), "per tile %g %g",
          s.phase_per_tile[1], s.phase_per_tile[5]);
    CHECK(near(s.warp_cycles_mean, 206.0 / 5) && s.warp_cycles_max == 60, "warp cycles %g %g", s.warp_cycles_mean,
          s.warp_cycles_max);
    /* the clock from the consistent records alone: (40 + 40 + 60 + 60)
     * cycles over (200 + 200 + 100 + 100) ns; r[5] is left out */
    CHECK(near(s.clock_ghz, 200.0 / 600), "clock %g GHz", s.clock_ghz);
    /* SM 7 holds r[2] and r[5], both [150, 250]: busy 100, warp-ns 200.
     * Busy (300 + 100 + 100) / 1200; resident (400 + 100 + 200) / 500. */
    CHECK(s.span_ns == 600 && near(s.busy, 500.0 / 1200) && near(s.resident, 700.0 / 500) && s.tail_ns == 450,
          "span %g busy %g resident %g tail %g", s.span_ns, s.busy, s.resident, s.tail_ns);

    /* a warp inside another's interval adds warp time, not busy time */
    KtraceRec q[2] = {rec(0, 0, 1000, 1, 1, 0, 0), rec(0, 100, 200, 1, 1, 0, 0)};
    CHECK(ktrace_summarize(q, 2, &s) == 0 && s.busy == 1 && near(s.resident, 1.1) && s.tail_ns == 0,
          "nested: busy %g resident %g tail %g", s.busy, s.resident, s.tail_ns);

    /* nothing written: -1, with the counts */
    memset(q, 0xff, sizeof q);
    CHECK(ktrace_summarize(q, 2, &s) == -1 && s.warps == 2 && s.missing == 2, "empty");
    CHECK(ktrace_summarize(q, 0, &s) == -1 && s.warps == 0, "none");
}

static void test_print(void) {
    KtraceRec r[1] = {rec(1, 0, 2000, 2, 30, 50, 20)};
    KtraceSummary s;
    CHECK(ktrace_summarize(r, 1, &s) == 0, "summarize");
    char buf[2048] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    const char *names[KTRACE_PHASES] = {"wait", "QK^T", "softmax", "PV", "barrier", "epilogue"};
    ktrace_print(f, &s, names, "  ");
    fclose(f);
    CHECK(strstr(buf, "  wait             30.0%           15\n") != NULL, "wait line:\n%s", buf);
    CHECK(strstr(buf, "  QK^T             50.0%           25\n") != NULL, "QK^T line:\n%s", buf);
    CHECK(strstr(buf, "span 2.0 us; SMs busy 100.0% of it, 1.00 warps resident while busy; tail 0.0 us") != NULL,
          "timeline:\n%s", buf);
    CHECK(strstr(buf, "a warp 100 cycles (mean), 100 (max); clock 0.050 GHz\n") != NULL, "warps line:\n%s", buf);
    CHECK(strstr(buf, "unwritten") == NULL, "no warning:\n%s", buf);
}

int main(void) {
    test_summary();
    test_print();
    return check_finish();
}
