/* `sgtrain analyze`: options, the evaluation loop over conditions, and the
 * JSON files (analysis_out.c).
 *
 * Cost.  Each condition is one forward pass over the evaluation batches, so
 * the loop runs batch by batch and every condition of a batch reuses the
 * clean pass: its layer-0 values (layer 0's embedding, LayerNorm and QKV
 * projection are the same under every condition, since corruption acts after
 * them), and its loss where a condition is the clean model itself (the
 * probes' trained gate at eps = 0) or a battery entry (the trained gate under
 * the probes' junk). */
#include "analysis.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "analysis_ctx.h"
#include "analysis_out.h"
#include "cli_parse.h"
#include "eval.h"
#include "fsutil.h"
#include "model_io.h"
#include "ops.h"
#include "sampler.h"
#include "shard.h"

static const char *const ovr_names[OVR_KINDS] = {"trained", "row_mean", "shuffled", "reopened"};
const char *override_name(int k) { return k >= 0 && k < OVR_KINDS ? ovr_names[k] : "?"; }

void analysis_defaults(AnalysisOpts *o) {
    memset(o, 0, sizeof *o);
    o->what = AN_DO_ALL;
    o->batches = 8;
    o->batch_size = 8;
    o->seed = 1;
    o->junk_mask = (1 << JUNK_KINDS) - 1;
    o->cut_mask = (1 << CUT_KINDS) - 1;
    const double doses[] = {0.2, 0.4, 0.8, 1.6};
    memcpy(o->doses, doses, sizeof doses);
    o->ndoses = 4;
    o->probe_dose = 0.2;
    o->probe_junk = JUNK_STRUCTURED;
    o->probe_cut = CUT_MEDIAN;
    o->top_tokens = 10;
    o->min_count = 20;
    o->sink_positions = 4;
    const double pct[] = {10, 20, 30, 50};
    memcpy(o->pct, pct, sizeof pct);
    o->npct = 4;
}

void analysis_usage(void) {
    printf("sgtrain analyze RUN_DIR|CHECKPOINT [flags]: the evaluation-time experiments of the paper\n"
           "(injection battery, gate-override probes, exposure, telemetry, incidence)\n"
           "-> RUN_DIR/analysis/*.json\n\n"
           "  --what LIST         injection,probes,exposure,telemetry,incidence or all\n"
           "                      (default all the arm has)\n"
           "  --batches N         evaluation batches (8)\n"
           "  --batch-size N      sequences per batch (8)\n"
           "  --seq-len N         tokens per sequence (default and maximum: the model's context)\n"
           "  --seed N            junk draws and shuffles (1); the tokens come from the run's val_seed\n"
           "  --junk LIST         structured,same_context,gaussian,random_direction,own_direction or all\n"
           "                      (default all the arm has: own_direction needs a projection gate)\n"
           "  --cutoffs LIST      median,q25 (both)\n"
           "  --doses LIST        eps values (0.2,0.4,0.8,1.6)\n"
           "  --probe-dose X      the probes' corrupted condition (0.2)\n"
           "  --probe-junk NAME   its junk type (structured)\n"
           "  --probe-cutoff NAME its cutoff (median)\n"
           "  --top-tokens N      telemetry: tokens listed at each end of the mean-gate ranking (10)\n"
           "  --min-count N       telemetry: occurrences a token needs to be ranked (20)\n"
           "  --sink-positions N  incidence: leading key positions counted as the sink (4)\n"
           "  --percentiles LIST  incidence: quiet-band percentiles of the read norms (10,20,30,50)\n"
           "  --data DIR          data directory (default: the run's)\n"
           "  --vocab FILE        vocabulary for decoding tokens (default: the data manifest's)\n"
           "  --out DIR           where the JSON files go (default RUN_DIR/analysis)\n"
           "  --threads N         CPU threads (default OpenMP's)\n"
           "  --quiet             no progress lines\n");
}

static int parse_dose(const char *flag, const char *v, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < 0 || x > 1e6) {
        snprintf(err, errlen, "%s: expected a dose eps >= 0, got '%s'", flag, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A comma list of percentiles in (0, 100), kept ascending. */
static int parse_percentiles(const char *v, AnalysisOpts *o, char *err, size_t errlen) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        const double x = strtod(t, &end);
        if (errno || end == t || *end || !(x > 0 && x < 100)) {
            snprintf(err, errlen, "--percentiles: expected percentiles between 0 and 100 (exclusive), got '%s'", t);
            return -1;
        }
        if (n == AN_MAX_PCT) {
            snprintf(err, errlen, "--percentiles: at most %d percentiles", AN_MAX_PCT);
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (o->pct[k] == x) {
                snprintf(err, errlen, "--percentiles: %s is listed twice", t);
                return -1;
            }
        o->pct[n++] = x;
    }
    if (!n) {
        snprintf(err, errlen, "--percentiles: empty list");
        return -1;
    }
    qsort(o->pct, (size_t)n, sizeof *o->pct, cmp_double);
    o->npct = n;
    return 0;
}

static int what_from(const char *s) {
    static const char *const n[] = {"injection", "probes", "exposure", "telemetry", "incidence"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, n[i])) return i;
    return -1;
}

int analysis_parse_args(AnalysisOpts *o, int argc, char **argv, char *err, size_t errlen) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        char flag[64];
        const char *v;
        int r = cli_run_arg(argc, argv, &i, &o->src, &o->quiet, flag, sizeof flag, &v, err, errlen);
        if (r < 0) return -1;
        if (r) continue;
        long x;
        if (!strcmp(flag, "--what")) {
            if (cli_name_mask(flag, v, what_from, 5, "injection, probes, exposure, telemetry, incidence", &o->what,
                              err, errlen))
                return -1;
            o->what_explicit = strcmp(v, "all") != 0;
        } else if (!strcmp(flag, "--batches")) {
            if (cli_long(flag, v, 1, 100000, &x, err, errlen)) return -1;
            o->batches = (int)x;
        } else if (!strcmp(flag, "--batch-size")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->batch_size = (int)x;
        } else if (!strcmp(flag, "--seq-len")) {
            if (cli_long(flag, v, 2, 1 << 20, &x, err, errlen)) return -1;
            o->seq_len = (int)x;
        } else if (!strcmp(flag, "--seed")) {
            if (cli_long(flag, v, 0, 0x7fffffffffffffffL, &x, err, errlen)) return -1;
            o->seed = (uint64_t)x;
        } else if (!strcmp(flag, "--junk")) {
            if (cli_name_mask(flag, v, junk_from_name, JUNK_KINDS,
                            "structured, same_context, gaussian, random_direction, own_direction", &o->junk_mask, err,
                            errlen))
                return -1;
            o->junk_explicit = strcmp(v, "all") != 0;
        } else if (!strcmp(flag, "--cutoffs")) {
            if (cli_name_mask(flag, v, cutoff_from_name, CUT_KINDS, "median, q25", &o->cut_mask, err, errlen)) return -1;
        } else if (!strcmp(flag, "--doses")) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", v);
            o->ndoses = 0;
            for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->ndoses == AN_MAX_DOSES) {
                    snprintf(err, errlen, "--doses: at most %d doses", AN_MAX_DOSES);
                    return -1;
                }
                if (parse_dose(flag, t, &o->doses[o->ndoses], err, errlen)) return -1;
                for (int k = 0; k < o->ndoses; k++)
                    if (o->doses[k] == o->doses[o->ndoses]) {
                        snprintf(err, errlen, "--doses: %s is listed twice", t);
                        return -1;
                    }
                o->ndoses++;
            }
            if (!o->ndoses) {
                snprintf(err, errlen, "--doses: empty list");
                return -1;
            }
        } else if (!strcmp(flag, "--probe-dose")) {
            if (parse_dose(flag, v, &o->probe_dose, err, errlen)) return -1;
        } else if (!strcmp(flag, "--probe-junk")) {
            if ((o->probe_junk = junk_from_name(v)) < 0) {
                snprintf(err, errlen, "--probe-junk: unknown '%s' (expected structured, same_context, gaussian, "
                                      "random_direction or own_direction)", v);
                return -1;
            }
        } else if (!strcmp(flag, "--probe-cutoff")) {
            if ((o->probe_cut = cutoff_from_name(v)) < 0) {
                snprintf(err, errlen, "--probe-cutoff: unknown '%s' (expected median or q25)", v);
                return -1;
            }
        } else if (!strcmp(flag, "--top-tokens")) {
            if (cli_long(flag, v, 0, 10000, &x, err, errlen)) return -1;
            o->top_tokens = (int)x;
        } else if (!strcmp(flag, "--min-count")) {
            if (cli_long(flag, v, 1, 1L << 40, &x, err, errlen)) return -1;
            o->min_count = x;
        } else if (!strcmp(flag, "--sink-positions")) {
            if (cli_long(flag, v, 0, 1 << 20, &x, err, errlen)) return -1;
            o->sink_positions = (int)x;
        } else if (!strcmp(flag, "--percentiles")) {
            if (parse_percentiles(v, o, err, errlen)) return -1;
        } else if (!strcmp(flag, "--threads")) {
            if (cli_long(flag, v, 1, 4096, &x, err, errlen)) return -1;
            o->threads = (int)x;
        } else if (!strcmp(flag, "--data")) o->data = v;
        else if (!strcmp(flag, "--out")) o->out = v;
        else if (!strcmp(flag, "--vocab")) o->vocab = v;
        else {
            snprintf(err, errlen, "unknown flag '%s' (sgtrain analyze --help lists them)", a);
            return -1;
        }
    }
    if (!o->src) {
        snprintf(err, errlen, "which run? usage: sgtrain analyze RUN_DIR|CHECKPOINT [flags]");
        return -1;
    }
    return 0;
}

/* ---- conditions ----------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int add_cond(AnRun *r, int ovr, int junk, int cut, double eps, int in_battery) {
    for (int i = 0; i < r->ncond; i++) {
        AnCond *c = &r->cond[i];
        if (c->override == ovr && c->junk == junk && c->cut == cut && c->eps == eps) {
            c->in_battery |= in_battery;
            return i;
        }
    }
    AnCond *n = realloc(r->cond, sizeof *n * (size_t)(r->ncond + 1));
    if (!n) abort();
    r->cond = n;
    AnCond *c = &r->cond[r->ncond];
    memset(c, 0, sizeof *c);
    c->override = ovr, c->junk = junk, c->cut = cut, c->eps = eps, c->in_battery = in_battery;
    c->loss = calloc((size_t)r->o->batches, sizeof(double));
    if (!c->loss) abort();
    return r->ncond++;
}

/* Which analyses and junk types apply to this arm; refusals for what the
 * user asked by name and the arm lacks. */
static int plan(AnRun *r, char *err, size_t errlen) {
    const AnalysisOpts *o = r->o;
    const Arm *arm = r->m.arm;
    const int gated = arm->filter != FILTER_NONE, proj = arm->filter == FILTER_PROJ;
    r->what = o->what;
    if ((r->what & AN_DO_PROBES) && !gated) {
        if (o->what_explicit) {
            snprintf(err, errlen, "gate-override probes need a gated arm (normgate, renorm, projgate, combo, combo2); "
                                  "%s is %s, which has no gate", o->src, arm->name);
            return -1;
        }
        r->what &= ~AN_DO_PROBES;
    }
    r->junk_mask = o->junk_mask;
    if (!proj && (o->junk_mask & (1 << JUNK_OWN_DIR))) {
        if (o->junk_explicit) {
            snprintf(err, errlen, "own_direction junk is the gate's own direction w_h, which only projection-gate arms "
                                  "(projgate, combo2) have; %s is %s", o->src, arm->name);
            return -1;
        }
        r->junk_mask &= ~(1 << JUNK_OWN_DIR);
    }
    if ((r->what & AN_DO_PROBES) && o->probe_junk == JUNK_OWN_DIR && !proj && o->probe_dose > 0) {
        snprintf(err, errlen, "--probe-junk own_direction needs a projection-gate arm; %s is %s", o->src, arm->name);
        return -1;
    }
    const int uses_struct = ((r->what & AN_DO_INJECTION) && (r->junk_mask & (1 << JUNK_STRUCTURED))) ||
                            ((r->what & AN_DO_PROBES) && o->probe_dose > 0 && o->probe_junk == JUNK_STRUCTURED);
    if (uses_struct && o->batch_size < 2) {
        snprintf(err, errlen, "structured junk is a read from another sequence of the batch: --batch-size must be "
                              "at least 2");
        return -1;
    }
    if ((r->what & AN_DO_INCIDENCE) && r->m.T - o->sink_positions < 2) {
        if (o->what_explicit) {
            snprintf(err, errlen, "incidence needs at least 2 reads past the %d sink positions; sequences of %d tokens "
                                  "have %d (lower --sink-positions or raise --seq-len)", o->sink_positions, r->m.T,
                     r->m.T - o->sink_positions > 0 ? r->m.T - o->sink_positions : 0);
            return -1;
        }
        r->what &= ~AN_DO_INCIDENCE;
    }
    if (!r->what) {
        snprintf(err, errlen, "nothing to do for %s (%s)", o->src, arm->name);
        return -1;
    }
    add_cond(r, OVR_NONE, -1, 0, 0, 0); /* 0: the clean, measuring pass */
    if (r->what & AN_DO_INJECTION)
        for (int j = 0; j < JUNK_KINDS; j++)
            for (int c = 0; c < CUT_KINDS; c++)
                for (int k = 0; k < o->ndoses; k++)
                    if ((r->junk_mask >> j & 1) && (o->cut_mask >> c & 1)) add_cond(r, OVR_NONE, j, c, o->doses[k], 1);
    if (r->what & AN_DO_PROBES)
        for (int v = 0; v < OVR_KINDS; v++) {
            add_cond(r, v, -1, 0, 0, 0);
            if (o->probe_dose > 0) add_cond(r, v, o->probe_junk, o->probe_cut, o->probe_dose, 0);
        }
    return 0;
}

void analysis_default_out(const char *src, char *dir, size_t n) {
    struct stat st;
    if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(dir, n, "%s/analysis", src);
    else {
        const char *slash = strrchr(src, '/');
        if (slash) snprintf(dir, n, "%.*s/analysis", (int)(slash - src), src);
        else snprintf(dir, n, "analysis");
    }
}

static int setup(AnRun *r, char *err, size_t errlen) {
    const AnalysisOpts *o = r->o;
    long step;
    if (model_from_checkpoint(&r->m, &r->cfg, &step, o->src, err, errlen)) return -1;
    r->model_ok = 1;
    r->step = step;
    Model *m = &r->m;
    if (o->seq_len > m->T) {
        snprintf(err, errlen, "--seq-len %d exceeds the model's context of %d tokens", o->seq_len, m->T);
        return -1;
    }
    const int T = o->seq_len ? o->seq_len : m->T;
    const int first = arm_has_sink_token(m->arm) ? 1 : 0;
    m->T = T; /* positions past T are never read: wpe rows [0, T) only */
    m->Tp = T + first;
    const char *data = o->data ? o->data : r->cfg.data;
    if (shardset_open_val(&r->data, data, (uint32_t)r->cfg.vocab_size, T, err, errlen)) return -1;
    r->data_ok = 1;
    /* an imported model knows its vocabulary: shards cut by another are
     * other tokens under the same ids (synthetic shards carry no identity) */
    char hex[65];
    static const uint8_t none[32];
    shard_sha_hex(r->data.vocab_sha256, hex);
    if (strlen(r->cfg.vocab_sha256) == 64 && memcmp(r->data.vocab_sha256, none, 32) &&
        strcmp(hex, r->cfg.vocab_sha256)) {
        snprintf(err, errlen, "%s: its tokens were cut with another vocabulary (SHA-256 %.16s...) than the one the "
                 "model's ids mean (%.16s...); prepare the shards with the model's tokenizer (docs/import.md)",
                 data, hex, r->cfg.vocab_sha256);
        return -1;
    }
    snprintf(r->data_dir, sizeof r->data_dir, "%s", data);
    if (o->out) snprintf(r->out_dir, sizeof r->out_dir, "%s", o->out);
    else analysis_default_out(o->src, r->out_dir, sizeof r->out_dir);
    if (plan(r, err, errlen)) return -1;
    if (fs_mkdir_p(r->out_dir, err, errlen)) return -1;
    if ((r->what & AN_DO_TELEMETRY) && m->arm->filter != FILTER_NONE && o->top_tokens > 0 &&
        an_load_vocab(r, err, errlen))
        return -1;
    return 0;
}

static void run_batch(AnRun *r, AnCtx *ctx, int bi, int32_t *win, int32_t *in, int32_t *tg) {
    Model *m = &r->m;
    const AnalysisOpts *o = r->o;
    const int B = o->batch_size, T = m->T;
    sampler_val_rows(&r->data, (uint64_t)r->cfg.val_seed, (uint64_t)bi, 0, B, win);
    split_windows(win, B, T, in, tg);
    ctx->inputs = in;
    ctx->batch = (uint64_t)bi;
    const double ntok = (double)B * T;
    ForwardHooks hk = {ctx, an_hook_values, an_hook_attention, NULL};
    m->hooks = &hk;
    for (int k = 0; k < r->ncond; k++) {
        AnCond *c = &r->cond[k];
        if (k > 0 && c->override == OVR_NONE && !c->in_battery && c->junk < 0) continue;
        InjectSpec spec = {.junk = c->junk, .cutoff = c->cut, .eps = c->eps}; /* keys: an_hook_values */
        ctx->inject = c->junk >= 0 ? &spec : NULL;
        ctx->override = c->override;
        ctx->stats = k == 0 && (r->what & AN_DO_MEASURED) ? &r->stats : NULL;
        ctx->corrupted = ctx->reads = 0;
        hk.layer0_qkv = k == 0 ? NULL : r->qkv0;
        double t0 = now();
        c->loss[bi] = model_forward(m, in, tg, B, 0, 0) / ntok;
        c->seconds += now() - t0;
        c->corrupted += ctx->corrupted;
        c->reads += ctx->reads;
        if (k == 0) op_copy(r->qkv0, m->a.layer[0].qkv, sizeof(real) * (size_t)B * m->Tp * 3 * m->C);
    }
    m->hooks = NULL;
}

int analysis_run(const AnalysisOpts *o, char *err, size_t errlen) {
    AnRun r;
    memset(&r, 0, sizeof r);
    r.o = o;
    int rc = 2;
    if (o->threads > 0) omp_set_num_threads(o->threads);
    double t_start = now();
    if (setup(&r, err, errlen)) goto out;
    rc = 1;
    Model *m = &r.m;
    const int B = o->batch_size, T = m->T, Tp = m->Tp, C = m->C, H = m->H;
    if ((r.what & AN_DO_MEASURED) &&
        (an_stats_alloc(&r.stats, m->L, H, C, m->V) ||
         ((r.what & AN_DO_INCIDENCE) && an_incidence_alloc(&r.stats, o->sink_positions, o->pct, o->npct)))) {
        snprintf(err, errlen, "out of memory for the telemetry accumulators");
        goto out;
    }
    const size_t nqkv = (size_t)B * Tp * 3 * C, np = (size_t)H * Tp * (Tp + 1);
    r.qkv0 = op_alloc(sizeof(real) * nqkv);
    AnCtx ctx = {.m = m, .o = o, .Tp = Tp, .first = Tp - T, .C = C, .H = H, .d = m->d, .L = m->L, .override = OVR_NONE};
    ctx.d_p = op_alloc(sizeof(real) * np);
    if (!op_host_memory()) {
        ctx.h_qkv = malloc(sizeof(real) * nqkv);
        ctx.h_gate = malloc(sizeof(real) * (size_t)B * H * Tp);
        ctx.h_p = malloc(sizeof(real) * np);
    }
    int32_t *win = malloc(sizeof(int32_t) * (size_t)B * (T + 1)), *in = malloc(sizeof(int32_t) * (size_t)B * T),
            *tg = malloc(sizeof(int32_t) * (size_t)B * T);
    if (!r.qkv0 || !ctx.d_p || !win || !in || !tg ||
        (!op_host_memory() && (!ctx.h_qkv || !ctx.h_gate || !ctx.h_p))) {
        snprintf(err, errlen, "out of memory for the analysis buffers (%.1f MB of attention probabilities per "
                              "sequence)", sizeof(real) * (double)np / 1e6);
        goto buffers;
    }
    if (!o->quiet)
        fprintf(stderr, "analyze %s (%s, step %ld): %d conditions x %d batches of %d x %d tokens, %s\n", o->src,
                m->arm->name, r.step, r.ncond, o->batches, B, T, op_backend());
    for (int bi = 0; bi < o->batches; bi++) {
        double t0 = now();
        run_batch(&r, &ctx, bi, win, in, tg);
        if (!o->quiet)
            fprintf(stderr, "  batch %d/%d: clean loss %.4f (%.1f s)\n", bi + 1, o->batches, r.cond[0].loss[bi],
                    now() - t0);
    }
    for (int k = 0; k < r.ncond; k++)
        for (int bi = 0; bi < o->batches; bi++)
            if (!isfinite(r.cond[k].loss[bi])) r.nonfinite++;
    r.seconds = now() - t_start;
    rc = an_write_all(&r, err, errlen) ? 1 : 0;
    if (!rc && !o->quiet) an_print_summary(&r, stdout);
buffers:
    free(win), free(in), free(tg);
    free(ctx.h_qkv), free(ctx.h_gate), free(ctx.h_p);
    op_free(ctx.d_p);
out:
    op_free(r.qkv0);
    an_run_free(&r);
    return rc;
}
