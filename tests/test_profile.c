/* The op-time profile by call site (src/profile.h): two training steps of a
 * tiny model with profiling on.  Each site's time and flops must add up,
 * category by category, to what the category split reports; each site's
 * call count must be what the model issues (one per layer per step for the
 * per-layer ops); the top-n list must be sorted and complete; a reset must
 * zero the sites without listing them twice; labels must be cut to width. */
#include <string.h>

#include "check.h"
#include "optim.h"
#include "profile.h"
#include "tiny.h"

enum { STEPS = 2, B = 3 };

static int count_sites(void) {
    int n = 0;
    for (ProfSite *s = prof_sites; s; s = s->next) n++;
    return n;
}

static const ProfSite *find_site(const char *prefix) {
    for (ProfSite *s = prof_sites; s; s = s->next)
        if (!strncmp(s->what, prefix, strlen(prefix))) return s;
    return NULL;
}

static void run_steps(Model *m, const int32_t *in, const int32_t *tg) {
    for (int s = 0; s < STEPS; s++) {
        model_zero_grad(m);
        model_forward(m, in, tg, B, 1, (real)(1.0 / (B * m->T)));
        model_backward(m);
        optim_step(m, s, 1e-3);
    }
}

int main(void) {
    check_name = "test_profile";
    Config c = tiny_config("combo2", 1);
    char err[256];
    Model m;
    CHECK(!model_build(&m, &c, err, sizeof err), "model_build: %s", err);
    tiny_randomize(&m, 3);
    int32_t in[B * 5], tg[B * 5];
    tiny_batch(&m, B, 9, in, tg);

    /* off: nothing is recorded */
    prof_reset();
    run_steps(&m, in, tg);
    CHECK(prof_sites == NULL, "profiling off: no call site was recorded");

    prof_on = 1;
    run_steps(&m, in, tg);
    prof_on = 0;
    int listed = count_sites();
    CHECK(listed >= 20, "%d call sites listed, want every profiled op of the step (>= 20)", listed);
    double secs[PROF_N] = {0}, flops[PROF_N] = {0};
    for (ProfSite *s = prof_sites; s; s = s->next) secs[s->cat] += s->secs, flops[s->cat] += s->flops;
    for (int k = 0; k < PROF_N; k++) {
        CHECK(fabs(secs[k] - prof_secs[k]) <= 1e-9 * (prof_secs[k] + 1e-9),
              "%s: the sites' time %.9g s, the category's %.9g s", prof_name(k), secs[k], prof_secs[k]);
        CHECK(fabs(flops[k] - prof_flops[k]) <= 1e-9 * prof_flops[k], "%s: the sites' flops %.6g, the category's %.6g",
              prof_name(k), flops[k], prof_flops[k]);
    }
    CHECK(prof_secs[PROF_MATMUL] > 0 && prof_secs[PROF_OPTIMIZER] > 0 && prof_secs[PROF_GATE] > 0,
          "matmul, optimizer and gate time recorded (%g %g %g)", prof_secs[PROF_MATMUL], prof_secs[PROF_OPTIMIZER],
          prof_secs[PROF_GATE]);

    /* per-layer ops: one call per layer per step; the optimizer once per step */
    /* combo2's value gate: its backward is the attention's (op_attention_gate_bwd) */
    const char *per_layer[] = {"op_gelu_fwd(", "op_gelu_bwd(", "op_gate_fwd(", "op_attention_gate_bwd(",
                               "op_matmul_fwd(la->qkv"};
    for (size_t i = 0; i < sizeof per_layer / sizeof *per_layer; i++) {
        const ProfSite *s = find_site(per_layer[i]);
        CHECK(s && s->calls == (long)STEPS * c.n_layer, "site %s...: %ld calls, want %d", per_layer[i],
              s ? s->calls : -1L, STEPS * c.n_layer);
    }
    const ProfSite *opt = find_site("optim_step");
    CHECK(opt && opt->calls == STEPS && opt->cat == PROF_OPTIMIZER, "the optimizer's site: %ld calls, want %d",
          opt ? opt->calls : -1L, STEPS);
    const ProfSite *fc = find_site("op_matmul_fwd(la->fch");
    CHECK(fc && fabs(fc->flops - (double)STEPS * c.n_layer * 2.0 * B * m.Tp * c.n_embd * 4 * c.n_embd) <= 1,
          "the fc forward's flops %.6g, want 2 N C 4C per layer per step", fc ? fc->flops : -1.0);

    /* the top n: sorted, n at most, and every site when n is large */
    ProfSite *top[64];
    int n3 = prof_top_sites(top, 3);
    CHECK(n3 == 3 && top[0]->secs >= top[1]->secs && top[1]->secs >= top[2]->secs, "top 3 sorted (%d sites)", n3);
    for (ProfSite *s = prof_sites; s; s = s->next)
        CHECK(s == top[0] || s == top[1] || s == top[2] || s->secs <= top[2]->secs,
              "site %s (%.3g s) is not in the top 3 but beats its last (%.3g s)", s->what, s->secs, top[2]->secs);
    int all = prof_top_sites(top, 64);
    CHECK(all == listed, "top 64 lists %d sites, want all %d", all, listed);
    for (int i = 1; i < all; i++) CHECK(top[i - 1]->secs >= top[i]->secs, "top list out of order at %d", i);

    /* a reset zeroes the sites and lists none twice */
    prof_reset();
    for (ProfSite *s = prof_sites; s; s = s->next)
        CHECK(s->secs == 0 && s->flops == 0 && s->calls == 0, "site %s not zeroed by prof_reset", s->what);
    CHECK(prof_top_sites(top, 64) == 0, "after a reset no site has calls");
    prof_on = 1;
    run_steps(&m, in, tg);
    prof_on = 0;
    CHECK(count_sites() == listed, "%d sites after a reset and two more steps, want %d", count_sites(), listed);
    CHECK(find_site("op_gelu_fwd(")->calls == (long)STEPS * c.n_layer, "calls counted afresh after a reset");

    /* labels */
    char buf[64];
    ProfSite lab = {"op_matmul_fwd(la->qkv, la->ln1, lt->attn_w, N, C, 3 * C)", PROF_MATMUL, 0, 0, 0, 0, 0};
    prof_site_label(&lab, buf, 20);
    CHECK(strlen(buf) == 20 && !strcmp(buf, "op_matmul_fwd(la-..."), "a long label cut to 20: \"%s\"", buf);
    prof_site_label(&lab, buf, 63);
    CHECK(!strcmp(buf, lab.what), "a label that fits is whole: \"%s\"", buf);

    model_free(&m);
    return check_finish();
}
