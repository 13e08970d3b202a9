/* bench_gpu: training-step throughput and MFU of the CUDA backend, and the
 * attention op's forward+backward rate per arm (`make bench-gpu`,
 * tests/gpu/bench.sh).  Needs a GPU.
 *
 *   bench_gpu [--tiers 10M,124M,350M|all] [--arms baseline,combo2|all]
 *             [--steps N] [--warmup N] [--micro-batch N] [--grad-accum N] [--peak-tflops X]
 *             [--attn-iters N] [--no-train] [--no-attn] [--matmul] [--gates] [--attn-trace]
 *             [--attn-shape B,T,H,d] [--json FILE]
 *
 * Training: for each tier (config_from_tier, the tier's micro-batch, or
 * --micro-batch's; grad_accum 1, or --grad-accum's) and arm, full steps
 * exactly as src/train.c runs them -- model_zero_grad, grad_accum times
 * model_forward(grad=1) and model_backward, then optim_step (global
 * grad-norm clip + AdamW, lr held at 6e-4) -- on random tokens made once
 * (model_forward copies the B*T tokens to the device every step, as
 * training does).  W warm-up steps (default 2), then N timed steps (default
 * 10) in one window that starts and ends with a device synchronisation (a
 * 4-byte op_download); each step also ends with one, so that the per-step
 * times (min/median) are real.  tokens/s = N * A * B * T / window (A the
 * micro-batches a step: --grad-accum 4 at micro-batch 8 is the 124M tier's
 * own step, one AdamW update per 32 sequences, where the default's steps
 * update after every 8).  Then 2
 * more steps with profiling on (src/profile.h: every op between two device
 * synchronisations) split a step's time by op category; those steps are
 * not in the window.
 *
 * MFU = achieved FLOP/s / the GPU's dense bf16 peak, with sgtrain's
 *   FLOP/token = 6 * (P_nonemb + V*C) + 6 * L * T * C
 * (src/mfu.h states the convention).  The peak comes from --peak-tflops or
 * from the device name (src/mfu.c's table: H200 / H100 SXM 989.4, H100
 * PCIe 756, A100 312, RTX 5090 209.5 TFLOP/s, ...); otherwise MFU is n/a.
 *
 * Attention: op_attention_fwd then op_attention_bwd alone, at the 124M
 * shape (B 8, T 1024, H 12, d 64, or --attn-shape's; the sink-token arm attends over T+1
 * positions as the model does), with the strides, phantom, sink logits and
 * log-biases of each arm as src/model.c's attn_args sets them.
 * TFLOP/s = (4 + 10) * B * H * (T(T+1)/2) * d / time -- the model's
 * attn_flops convention: 4 score-sized products forward (QK^T, PV), 10
 * backward (recomputed QK^T, dV, dP, dQ, dK) over the causal half.
 *
 * Phase clocks (--attn-trace): the same attention calls under the mma
 * tiles again with the kernels' own cycle counters on
 * (kernels/cuda/attention_trace.h): each call's time traced and plain, and
 * for the forward, dK/dV and dQ kernels where their warps' cycles went
 * (waiting for a tile, the two kinds of products, the elementwise part,
 * the barriers, the epilogue) and how their launch filled the SMs
 * (src/kernel_trace.h).
 *
 * Gates (--gates): op_gate_fwd and op_gate_bwd alone at the 124M shape, as
 * GB/s of the bytes they must move, next to a device-to-device copy's
 * GB/s measured in the same run (bench_gate below). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arms.h"
#include "config.h"
#include "json_out.h"
#include "kernel_trace.h"
#include "mfu.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "profile.h"
#include "rng.h"

#define MAX_TIERS 16
#define FLOP_FORMULA "FLOP/token = 6*(P_nonemb + V*C) + 6*L*T*C  (6N with the tied LM head, plus causal attention 12*L*T*C/2)"

static const double LR = 6e-4;

/* One 4-byte download: the host waits for everything queued before it. */
static void sync_dev(const void *dev) {
    float x;
    op_download(&x, dev, sizeof x);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Comma-separated list membership; "all" matches everything. */
static int listed(const char *list, const char *name) {
    if (!strcmp(list, "all")) return 1;
    char l[1024], p[128];
    snprintf(l, sizeof l, ",%s,", list);
    snprintf(p, sizeof p, ",%s,", name);
    return strstr(l, p) != NULL;
}



static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

/* ---- training steps ------------------------------------------------------ */

enum { PROFILE_STEPS = 2, TOP_SITES = 14 };

typedef struct {
    int ok;
    char err[512];
    int B, T, A; /* micro-batch, context, micro-batches a step */
    long params, nonemb;
    double flop_per_token;
    double ms_step, ms_min, ms_median, tok_s, tflops, mfu;
    double loss_first, loss_last, gnorm_last;
    double setup_s;
    size_t mem_peak;        /* device bytes held at most while the tier ran (op_memory_peak) */
    double prof_ms[PROF_N]; /* per step, from PROFILE_STEPS more steps with each op synchronised */
    int n_sites;            /* the same by call site, the most time first (src/profile.h) */
    struct {
        char what[64];
        double ms, tflops; /* per step; tflops 0 where the site counts no flops */
        int calls;         /* per step */
    } site[TOP_SITES];
} TrainResult;


static TrainResult bench_train(const char *tier, const char *arm, int mb, int accum, int warmup, int steps,
                               double peak) {
    TrainResult r;
    memset(&r, 0, sizeof r);
    /* what this tier holds at most, and what earlier tiers left held (the
     * scratch slots, which never shrink) */
    op_memory_peak_reset();
    r.mfu = NAN;
    Config c;
    double t_setup = prof_now();
    if (config_from_tier(&c, tier, r.err, sizeof r.err)) return r;
    snprintf(c.arm, sizeof c.arm, "%s", arm);
    if (mb > 0) c.micro_batch = mb;
    c.grad_accum = accum;
    if (config_validate(&c, r.err, sizeof r.err)) return r;
    Model m;
    if (model_build(&m, &c, r.err, sizeof r.err)) return r;
    model_init(&m, 0);
    int B = c.micro_batch, T = c.block_size, A = c.grad_accum;
    r.B = B, r.T = T, r.A = A;
    int32_t *in = malloc(sizeof *in * (size_t)B * T), *tg = malloc(sizeof *tg * (size_t)B * T);
    double *times = malloc(sizeof *times * (size_t)steps);
    for (long i = 0; i < (long)B * T; i++) {
        in[i] = (int32_t)rng_below(rng_key(7, 1, (uint64_t)i), (uint64_t)c.vocab_size);
        tg[i] = (int32_t)rng_below(rng_key(7, 2, (uint64_t)i), (uint64_t)c.vocab_size);
    }
    real dscale = (real)(1.0 / ((double)A * B * T));
    double window0 = 0, window = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            sync_dev(m.params);
            window0 = prof_now();
        }
        double t0 = prof_now();
        model_zero_grad(&m);
        double loss = 0;
        for (int k = 0; k < A; k++) {
            loss += model_forward(&m, in, tg, B, 1, dscale);
            model_backward(&m);
        }
        loss /= (double)A * B * T;
        double gn = optim_step(&m, s, LR);
        sync_dev(m.params);
        if (s == 0) r.setup_s = prof_now() - t_setup;
        if (s == 0) r.loss_first = loss;
        r.loss_last = loss, r.gnorm_last = gn;
        if (s >= warmup) times[s - warmup] = prof_now() - t0;
    }
    window = prof_now() - window0;
    /* where the time goes: a few more steps with every op bracketed by a
     * device sync (src/profile.h), after the timed window so they do not
     * slow it */
    prof_reset();
    prof_on = 1;
    for (int s = 0; s < PROFILE_STEPS; s++) {
        model_zero_grad(&m);
        for (int k = 0; k < A; k++) {
            model_forward(&m, in, tg, B, 1, dscale);
            model_backward(&m);
        }
        optim_step(&m, warmup + steps + s, LR);
    }
    prof_on = 0;
    for (int k = 0; k < PROF_N; k++) r.prof_ms[k] = 1e3 * prof_secs[k] / PROFILE_STEPS;
    ProfSite *top[TOP_SITES];
    r.n_sites = prof_top_sites(top, TOP_SITES);
    for (int i = 0; i < r.n_sites; i++) {
        prof_site_label(top[i], r.site[i].what, (int)sizeof r.site[i].what - 1);
        r.site[i].ms = 1e3 * top[i]->secs / PROFILE_STEPS;
        r.site[i].tflops = top[i]->secs > 0 ? top[i]->flops / top[i]->secs / 1e12 : 0;
        r.site[i].calls = (int)(top[i]->calls / PROFILE_STEPS);
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    r.ms_step = 1e3 * window / steps;
    r.ms_min = 1e3 * times[0];
    r.ms_median = 1e3 * times[steps / 2];
    r.tok_s = (double)steps * A * B * T / window;
    r.params = model_count_params(&m);
    r.nonemb = model_count_non_embedding(&m);
    r.flop_per_token = mfu_flop_per_token(&c, r.nonemb);
    r.tflops = r.flop_per_token * r.tok_s / 1e12;
    if (peak > 0) r.mfu = r.tflops / peak;
    r.ok = isfinite(r.loss_last) && isfinite(r.gnorm_last);
    if (!r.ok) snprintf(r.err, sizeof r.err, "non-finite loss %g or grad norm %g", r.loss_last, r.gnorm_last);
    r.mem_peak = op_memory_peak();
    free(times);
    free(in);
    free(tg);
    model_free(&m);
    return r;
}

/* ---- attention alone --------------------------------------------------- */

/* kernels/cuda/attention_trace.cu: the mma kernels' phase clocks */
void sg_attn_trace_enable(int on);
long sg_attn_trace_records(int k, const KtraceRec **recs, const char **name);
const char *sg_attn_trace_kernel(int k);
const char *const *sg_attn_trace_phases(int k);
enum { TRACE_KERNELS = 3 }; /* forward, dK/dV, dQ */

typedef struct {
    int T;
    double fwd_ms, bwd_ms, fwd_tflops, bwd_tflops, tflops;
    /* with --attn-trace: the traced kernels' times and their launches' summaries */
    double trace_fwd_ms, trace_bwd_ms;
    int traced[TRACE_KERNELS];
    char trace_name[TRACE_KERNELS][64];
    KtraceSummary trace[TRACE_KERNELS];
} AttnResult;

static real *dev_rand(long n, double scale, double offset, uint64_t key) {
    real *h = malloc(sizeof *h * (size_t)n);
    for (long i = 0; i < n; i++) h[i] = (real)(offset + scale * rng_normal(key, (uint64_t)i));
    real *d = op_alloc(sizeof *d * (size_t)n);
    if (!d) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    op_upload(d, h, sizeof *h * (size_t)n);
    free(h);
    return d;
}

/* ---- linear layers alone -------------------------------------------------
 * op_matmul_fwd and op_matmul_bwd (dinp and dW) at the 124M tier's shapes
 * (8192 rows: B 8 x T 1024), and one 8192^3 product as the library's own
 * rate: the same op, so the fp32 -> bf16 casts of its operands are in both,
 * but at 8192^3 they are a small part of the time.  TFLOP/s = 2 M K N per
 * product (forward 1, backward 2).  Each shape runs with cuBLASLt's first
 * choice, then tuned (SG_MATMUL_TUNE, kernels/cuda/gemm.cu: the fastest
 * candidate with the first choice's bits, chosen in the warm-up call);
 * SG_MATMUL_STATS=1 adds each shape's candidates and times at exit. */
void sg_matmul_set_tune(int on); /* kernels/cuda/gemm.cu */
typedef struct {
    int M, K, N;
    const char *what;
} MmShape;

static double bench_matmul(const MmShape *sh, int iters, double *bwd_tflops) {
    long M = sh->M, K = sh->K, N = sh->N;
    real *x = dev_rand(M * K, 1.0, 0.0, 21), *w = dev_rand(N * K, 0.02, 0.0, 22), *dy = dev_rand(M * N, 1.0, 0.0, 23);
    real *y = op_alloc(sizeof(real) * (size_t)(M * N)), *dx = op_alloc(sizeof(real) * (size_t)(M * K));
    real *dw = op_alloc(sizeof(real) * (size_t)(N * K));
    if (!y || !dx || !dw) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    op_matmul_fwd(y, x, w, (int)M, (int)K, (int)N);
    op_matmul_bwd(dx, dw, dy, x, w, (int)M, (int)K, (int)N);
    sync_dev(y);
    double t0 = prof_now();
    for (int i = 0; i < iters; i++) op_matmul_fwd(y, x, w, (int)M, (int)K, (int)N);
    sync_dev(y);
    double t1 = prof_now();
    for (int i = 0; i < iters; i++) op_matmul_bwd(dx, dw, dy, x, w, (int)M, (int)K, (int)N);
    sync_dev(dx);
    double t2 = prof_now(), flop = 2.0 * M * K * N;
    *bwd_tflops = 2 * flop * iters / (t2 - t1) / 1e12;
    op_free(x), op_free(w), op_free(dy), op_free(y), op_free(dx), op_free(dw);
    return flop * iters / (t1 - t0) / 1e12;
}

/* ---- gates alone ----------------------------------------------------------
 * op_gate_fwd then op_gate_bwd at the 124M shape (B 8, T 1024, H 12, d 64;
 * v is the value third of the qkv rows, row stride 3C, and dv the same
 * third of dqkv, as src/model.c passes them), for each gate kind and slot.
 * GB/s = the bytes the op must move / its time, 4 bytes an element, with
 * N = B T rows and C = H d:
 *   forward   value slot:   v read, vg written (N C each), g written (N H)
 *             routing slot: v read (N C), g and logbias written (N H each)
 *   backward  value slot:   v and dvg read, dv written (N C each), g read
 *             routing slot: v read and dv read and written (N C each), g and
 *             dlogbias read (N H each)
 * (the gate parameters and their gradients, a few KB, are not counted).
 * The reference is op_copy (cudaMemcpyAsync, device to device) of 2 N C
 * floats, counted as read + write: what the device moves for a plain copy
 * of about the gates' size. */
typedef struct {
    double fwd_ms, bwd_ms, fwd_gbs, bwd_gbs, gbs;
} GateResult;

static double bench_copy_gbs(long n, int iters) {
    real *a = dev_rand(n, 1.0, 0.0, 31), *b = op_alloc(sizeof(real) * (size_t)n);
    if (!b) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    op_copy(b, a, sizeof(real) * (size_t)n);
    sync_dev(b);
    double t0 = prof_now();
    for (int i = 0; i < iters; i++) op_copy(b, a, sizeof(real) * (size_t)n);
    sync_dev(b);
    double t = prof_now() - t0;
    op_free(a), op_free(b);
    return 2.0 * sizeof(real) * n * iters / t / 1e9;
}

static GateResult bench_gate(int kind, int slot, int B, int T, int H, int d, int iters) {
    const int C = H * d;
    const long N = (long)B * T, BHT = (long)B * H * T;
    real *qkv = dev_rand(N * 3 * C, 1.0, 0.0, 41), *dvg = dev_rand(N * C, 1.0, 0.0, 42);
    real *dlogbias = dev_rand(BHT, 0.1, 0.0, 43), *tau = dev_rand(H, 0.0, -0.5, 44);
    real *w = dev_rand((long)H * d, 0.1, 0.0, 45), *b = dev_rand(H, 0.5, 0.0, 46);
    real *dqkv = dev_rand(N * 3 * C, 1.0, 0.0, 47);
    real *g = op_alloc(sizeof(real) * (size_t)BHT), *vg = op_alloc(sizeof(real) * (size_t)N * C);
    real *logbias = op_alloc(sizeof(real) * (size_t)BHT), *dtau = op_alloc(sizeof(real) * (size_t)H);
    real *dw = op_alloc(sizeof(real) * (size_t)H * d), *db = op_alloc(sizeof(real) * (size_t)H);
    if (!g || !vg || !logbias || !dtau || !dw || !db) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    const GateParams gp = {kind, slot, 8, tau, w, b};
    const int route = slot == SLOT_ROUTING;
    real *vgo = route ? NULL : vg, *lbo = route ? logbias : NULL;
    const real *dvgi = route ? NULL : dvg, *dlbi = route ? dlogbias : NULL;
    for (int i = 0; i < 3; i++) { /* warm-up */
        op_gate_fwd(g, vgo, lbo, qkv + 2 * C, 3 * C, &gp, B, T, H, d);
        op_gate_bwd(dqkv + 2 * C, 3 * C, dtau, dw, db, dvgi, dlbi, qkv + 2 * C, 3 * C, g, &gp, B, T, H, d);
    }
    sync_dev(g);
    double t0 = prof_now();
    for (int i = 0; i < iters; i++) op_gate_fwd(g, vgo, lbo, qkv + 2 * C, 3 * C, &gp, B, T, H, d);
    sync_dev(g);
    double t1 = prof_now();
    for (int i = 0; i < iters; i++)
        op_gate_bwd(dqkv + 2 * C, 3 * C, dtau, dw, db, dvgi, dlbi, qkv + 2 * C, 3 * C, g, &gp, B, T, H, d);
    sync_dev(dw);
    double t2 = prof_now();
    const double e = sizeof(real), nc = (double)N * C, nh = (double)N * H;
    const double fwd_bytes = e * (route ? nc + 2 * nh : 2 * nc + nh), bwd_bytes = e * (3 * nc + (route ? 2 : 1) * nh);
    GateResult r;
    r.fwd_ms = 1e3 * (t1 - t0) / iters;
    r.bwd_ms = 1e3 * (t2 - t1) / iters;
    r.fwd_gbs = fwd_bytes / (r.fwd_ms * 1e-3) / 1e9;
    r.bwd_gbs = bwd_bytes / (r.bwd_ms * 1e-3) / 1e9;
    r.gbs = (fwd_bytes + bwd_bytes) / ((r.fwd_ms + r.bwd_ms) * 1e-3) / 1e9;
    real *bufs[] = {qkv, dvg, dlogbias, tau, w, b, dqkv, g, vg, logbias, dtau, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) op_free(bufs[i]);
    return r;
}

/* The value gate's backward with the attention's at the same shape, with
 * combo2's learned sink: op_attention_bwd into dvg then op_gate_bwd (the
 * two ops, as before op_attention_gate_bwd) against op_attention_gate_bwd,
 * which under the mma tiles fuses the gate into the dK/dV kernel and never
 * stores dvg.  ms per call in *unfused and *fused. */
static void bench_gate_fused(int kind, int B, int T, int H, int d, int iters, double *unfused, double *fused) {
    const int C = H * d;
    const long N = (long)B * T, BHT = (long)B * H * T;
    real *qkv = dev_rand(N * 3 * C, 1.0, 0.0, 51), *dout = dev_rand(N * C, 1.0, 0.0, 52);
    real *sink = dev_rand(H, 0.5, 0.0, 53), *tau = dev_rand(H, 0.0, -0.5, 54);
    real *w = dev_rand((long)H * d, 0.1, 0.0, 55), *b = dev_rand(H, 0.5, 0.0, 56);
    real *g = op_alloc(sizeof(real) * (size_t)BHT), *vg = op_alloc(sizeof(real) * (size_t)N * C);
    real *out = op_alloc(sizeof(real) * (size_t)N * C), *lse = op_alloc(sizeof(real) * (size_t)BHT);
    real *dqkv = op_alloc(sizeof(real) * (size_t)N * 3 * C), *dvg = op_alloc(sizeof(real) * (size_t)N * C);
    real *dsink = op_alloc(sizeof(real) * (size_t)H), *dtau = op_alloc(sizeof(real) * (size_t)H);
    real *dw = op_alloc(sizeof(real) * (size_t)H * d), *db = op_alloc(sizeof(real) * (size_t)H);
    if (!g || !vg || !out || !lse || !dqkv || !dvg || !dsink || !dtau || !dw || !db) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    const GateParams gp = {kind, SLOT_VALUE, 8, tau, w, b};
    const AttnArgs aa = {B, T, H, d, 3 * C, 3 * C, C, C, 1, sink, NULL};
    op_gate_fwd(g, vg, NULL, qkv + 2 * C, 3 * C, &gp, B, T, H, d);
    op_attention_fwd(out, lse, qkv, qkv + C, vg, &aa);
    const AttnGateBwd gb = {&gp, qkv + 2 * C, 3 * C, g, dqkv + 2 * C, 3 * C, dtau, dw, db, dvg};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = -2; i < iters; i++) { /* two warm-up calls */
            if (i == 0) sync_dev(dqkv);
            if (i == 0) *(pass ? fused : unfused) = prof_now();
            if (pass) {
                op_attention_gate_bwd(dqkv, dqkv + C, dsink, dout, qkv, qkv + C, vg, out, lse, &aa, &gb);
            } else {
                op_attention_bwd(dqkv, dqkv + C, dvg, dsink, NULL, dout, qkv, qkv + C, vg, out, lse, &aa);
                op_gate_bwd(dqkv + 2 * C, 3 * C, dtau, dw, db, dvg, NULL, qkv + 2 * C, 3 * C, g, &gp, B, T, H, d);
            }
        }
        sync_dev(dqkv);
        double *r = pass ? fused : unfused;
        *r = 1e3 * (prof_now() - *r) / iters;
    }
    real *bufs[] = {qkv, dout, sink, tau, w, b, g, vg, out, lse, dqkv, dvg, dsink, dtau, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) op_free(bufs[i]);
}

/* The same calls again with the phase clocks on (attention_trace.h): their
 * times, and each kernel's records from its last launch, summarised */
static void trace_attention(AttnResult *r, int iters, void (*fwd)(void *), void (*bwd)(void *), void *ctx,
                            const void *dev) {
    sg_attn_trace_enable(1);
    fwd(ctx), bwd(ctx); /* the record buffers are allocated here */
    sync_dev(dev);
    double t0 = prof_now();
    for (int i = 0; i < iters; i++) fwd(ctx);
    sync_dev(dev);
    double t1 = prof_now();
    for (int i = 0; i < iters; i++) bwd(ctx);
    sync_dev(dev);
    double t2 = prof_now();
    r->trace_fwd_ms = 1e3 * (t1 - t0) / iters;
    r->trace_bwd_ms = 1e3 * (t2 - t1) / iters;
    for (int k = 0; k < TRACE_KERNELS; k++) {
        const KtraceRec *recs = NULL;
        const char *name = NULL;
        const long n = sg_attn_trace_records(k, &recs, &name);
        snprintf(r->trace_name[k], sizeof r->trace_name[k], "%s", name ? name : "");
        r->traced[k] = n > 0 && ktrace_summarize(recs, n, &r->trace[k]) == 0;
    }
    sg_attn_trace_enable(0);
}

typedef struct {
    real *out, *lse, *qkv, *v, *dqkv, *dv, *ds, *dlb, *dout;
    const AttnArgs *aa;
    int C;
} AttnCall;
static void attn_call_fwd(void *p) {
    AttnCall *c = p;
    op_attention_fwd(c->out, c->lse, c->qkv, c->qkv + c->C, c->v, c->aa);
}
static void attn_call_bwd(void *p) {
    AttnCall *c = p;
    op_attention_bwd(c->dqkv, c->dqkv + c->C, c->dv, c->ds, c->dlb, c->dout, c->qkv, c->qkv + c->C, c->v, c->out,
                     c->lse, c->aa);
}

static AttnResult bench_attention(const Arm *arm, int B, int T0, int H, int d, int iters, int trace) {
    int C = H * d, T = T0 + (arm_has_sink_token(arm) ? 1 : 0);
    long N = (long)B * T, BHT = (long)B * H * T;
    int gated = arm->filter != FILTER_NONE && arm->slot == FSLOT_VALUE;
    int routing = arm->filter != FILTER_NONE && arm->slot == FSLOT_ROUTING;
    real *qkv = dev_rand(N * 3 * C, 1.0, 0.0, 11), *vg = dev_rand(N * C, 1.0, 0.0, 12);
    real *dout = dev_rand(N * C, 1.0, 0.0, 13);
    real *sink = dev_rand(H, 0.5, 0.0, 14), *logbias = dev_rand(BHT, 0.01, -0.02, 15);
    real *out = op_alloc(sizeof(real) * (size_t)N * C), *lse = op_alloc(sizeof(real) * (size_t)BHT);
    real *dqkv = op_alloc(sizeof(real) * (size_t)N * 3 * C), *dvg = op_alloc(sizeof(real) * (size_t)N * C);
    real *dsink = op_alloc(sizeof(real) * (size_t)H), *dlogbias = op_alloc(sizeof(real) * (size_t)BHT);
    if (!out || !lse || !dqkv || !dvg || !dsink || !dlogbias) {
        fprintf(stderr, "bench_gpu: out of device memory\n");
        exit(1);
    }
    /* as src/model.c attn_args: q, k in the qkv rows; v there too, or the
     * gated copy vg [N, C] for the value-slot filters */
    const real *v = gated ? vg : qkv + 2 * C;
    real *dv = gated ? dvg : dqkv + 2 * C;
    AttnArgs aa = {B, T, H, d, 3 * C, 3 * C, gated ? C : 3 * C, C, arm_has_phantom(arm),
                   arm_has_sink_logit(arm) ? sink : NULL, routing ? logbias : NULL};
    real *ds = aa.sink ? dsink : NULL, *dlb = aa.logbias ? dlogbias : NULL;
    for (int i = 0; i < 2; i++) { /* warm-up */
        op_attention_fwd(out, lse, qkv, qkv + C, v, &aa);
        op_attention_bwd(dqkv, dqkv + C, dv, ds, dlb, dout, qkv, qkv + C, v, out, lse, &aa);
    }
    sync_dev(out);
    double t0 = prof_now();
    for (int i = 0; i < iters; i++) op_attention_fwd(out, lse, qkv, qkv + C, v, &aa);
    sync_dev(out);
    double t1 = prof_now();
    for (int i = 0; i < iters; i++)
        op_attention_bwd(dqkv, dqkv + C, dv, ds, dlb, dout, qkv, qkv + C, v, out, lse, &aa);
    sync_dev(dqkv);
    double t2 = prof_now();
    double half = (double)B * H * ((double)T * (T + 1) / 2) * d; /* one score-sized product, / 2 */
    AttnResult r;
    memset(&r, 0, sizeof r);
    r.T = T;
    r.fwd_ms = 1e3 * (t1 - t0) / iters;
    r.bwd_ms = 1e3 * (t2 - t1) / iters;
    r.fwd_tflops = 4 * half / (r.fwd_ms * 1e-3) / 1e12;
    r.bwd_tflops = 10 * half / (r.bwd_ms * 1e-3) / 1e12;
    r.tflops = 14 * half / ((r.fwd_ms + r.bwd_ms) * 1e-3) / 1e12;
    if (trace) {
        AttnCall call = {out, lse, qkv, (real *)v, dqkv, dv, ds, dlb, dout, &aa, C};
        trace_attention(&r, iters, attn_call_fwd, attn_call_bwd, &call, dqkv);
    }
    real *bufs[] = {qkv, vg, dout, sink, logbias, out, lse, dqkv, dvg, dsink, dlogbias};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) op_free(bufs[i]);
    return r;
}

/* The environment that selects a tile set of --attn-tiles (SG_ATTN and its
 * variants, kernels/cuda/attention_cuda.h): mma16 one m-tile a warp,
 * mma-dqs dQ from the stored dS, mma-bp the backward's strips pipelined
 * (SG_ATTN_BWD_PIPE=1), wgmma and wgmma2 the forward and the dK/dV
 * kernel on Hopper's warpgroup products (attention_fwd_wgmma.cu; wgmma2 the
 * pipelined forward); NULL: all unset, the defaults */
static void attn_tiles_env(const char *tn) {
    if (tn) setenv("SG_ATTN", !strcmp(tn, "wmma") ? "wmma" : !strcmp(tn, "cudnn") ? "cudnn" : "mma", 1);
    else unsetenv("SG_ATTN");
    if (tn && !strcmp(tn, "mma16")) setenv("SG_ATTN_WARP_ROWS", "16", 1);
    else unsetenv("SG_ATTN_WARP_ROWS");
    if (tn && !strcmp(tn, "mma-dqs")) setenv("SG_ATTN_DQ", "stored", 1);
    else unsetenv("SG_ATTN_DQ");
    if (tn && !strcmp(tn, "mma-bp")) setenv("SG_ATTN_BWD_PIPE", "1", 1);
    else unsetenv("SG_ATTN_BWD_PIPE");
    if (tn && !strncmp(tn, "wgmma", 5)) setenv("SG_ATTN_WGMMA", tn[5] == '2' ? "2" : "1", 1);
    else unsetenv("SG_ATTN_WGMMA");
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_gpu [--tiers 10M,124M,350M|all] [--arms baseline,combo2|all] [--steps N] [--warmup N]\n"
            "                 [--micro-batch N] [--grad-accum N] [--peak-tflops X] [--attn-iters N] [--no-train]\n"
            "                 [--no-attn] [--matmul] [--gates]\n"
            "                 [--attn-tiles mma,mma-bp,wgmma2,wgmma,cudnn,mma-dqs,mma16,wmma] [--attn-trace]\n"
            "                 [--attn-shape B,T,H,d] [--json FILE]\n");
}

int main(int argc, char **argv) {
    const char *tiers_arg = "10M,124M,350M", *arms_arg = "baseline,combo2", *json_path = NULL;
    const char *tiles_arg = "mma,mma-bp,wgmma2,wgmma,cudnn,mma-dqs,mma16,wmma";
    int steps = 10, warmup = 2, mb = 0, accum = 1, attn_iters = 50, do_train = 1, do_attn = 1, do_mm = 0,
        do_gates = 0;
    int do_trace = 0;
    int aB = 8, aT = 1024, aH = 12, ad = 64; /* the attention's shape: the 124M tier's micro-batch */
    double peak = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tiers") && v) tiers_arg = v, i++;
        else if (!strcmp(a, "--arms") && v) arms_arg = v, i++;
        else if (!strcmp(a, "--steps") && v) steps = atoi(v), i++;
        else if (!strcmp(a, "--warmup") && v) warmup = atoi(v), i++;
        else if (!strcmp(a, "--micro-batch") && v) mb = atoi(v), i++;
        else if (!strcmp(a, "--grad-accum") && v) accum = atoi(v), i++;
        else if (!strcmp(a, "--peak-tflops") && v) peak = atof(v), i++;
        else if (!strcmp(a, "--attn-iters") && v) attn_iters = atoi(v), i++;
        else if (!strcmp(a, "--json") && v) json_path = v, i++;
        else if (!strcmp(a, "--attn-tiles") && v) tiles_arg = v, i++;
        else if (!strcmp(a, "--no-train")) do_train = 0;
        else if (!strcmp(a, "--no-attn")) do_attn = 0;
        else if (!strcmp(a, "--matmul")) do_mm = 1;
        else if (!strcmp(a, "--gates")) do_gates = 1;
        else if (!strcmp(a, "--attn-trace")) do_trace = 1;
        else if (!strcmp(a, "--attn-shape") && v) {
            char tail;
            if (sscanf(v, "%d,%d,%d,%d%c", &aB, &aT, &aH, &ad, &tail) != 4 || aB < 1 || aT < 1 || aH < 1 || ad < 1 ||
                ad > 128) {
                fprintf(stderr, "bench_gpu: --attn-shape %s: want B,T,H,d (positive, d at most 128)\n", v);
                return 2;
            }
            i++;
        }
        else {
            usage();
            return 2;
        }
    }
    if (steps < 1 || warmup < 0 || mb < 0 || accum < 1 || attn_iters < 1) {
        usage();
        return 2;
    }
    {
        char tl[256];
        snprintf(tl, sizeof tl, "%s", tiles_arg);
        for (char *t = strtok(tl, ","); t; t = strtok(NULL, ","))
            if (!listed("wmma,mma,mma16,mma-dqs,mma-bp,cudnn,wgmma,wgmma2", t)) {
                fprintf(stderr, "bench_gpu: --attn-tiles: unknown tiles '%s'\n", t);
                return 2;
            }
    }
    int n_arms = 0; /* every named arm must exist, and one at least be chosen */
    char al[1024];
    snprintf(al, sizeof al, "%s", arms_arg);
    for (char *t = strtok(al, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, "all") && !arm_find(t)) {
            fprintf(stderr, "bench_gpu: unknown arm '%s' (known: %s, or all)\n", t, arm_names());
            return 2;
        }
    for (int ai = 0; ai < arm_count(); ai++) n_arms += listed(arms_arg, arm_at(ai)->name);
    if (!n_arms) {
        fprintf(stderr, "bench_gpu: no arm selected\n");
        return 2;
    }
    const char *tiers[MAX_TIERS];
    int n_tiers = 0;
    char tl[1024];
    snprintf(tl, sizeof tl, "%s", strcmp(tiers_arg, "all") ? tiers_arg : "10M,124M,350M");
    for (char *t = strtok(tl, ","); t && n_tiers < MAX_TIERS; t = strtok(NULL, ",")) tiers[n_tiers++] = t;

    const char *dev = op_backend(); /* finds the device (or exits with why) */
    const char *peak_src = "--peak-tflops";
    if (peak <= 0) peak = mfu_device_peak(dev, NULL), peak_src = "device-name table";
    printf("bench_gpu on %s; ", dev);
    if (peak > 0) printf("dense bf16 peak %.1f TFLOP/s (%s)\n", peak, peak_src);
    else printf("dense bf16 peak unknown (MFU n/a; give --peak-tflops)\n");
    printf("MFU: %s\n\n", FLOP_FORMULA);
    fflush(stdout);

    FILE *js = NULL;
    if (json_path && !(js = fopen(json_path, "w"))) {
        perror(json_path);
        return 1;
    }
    if (js) {
        fprintf(js, "{\"backend\": ");
        json_put_string(js, dev);
        fprintf(js, ", \"peak_tflops\": ");
        json_num(js, peak > 0 ? peak : NAN);
        fprintf(js, ", \"flop_formula\": ");
        json_put_string(js, FLOP_FORMULA);
        fprintf(js, ", \"steps\": %d, \"warmup_steps\": %d, \"train\": {", steps, warmup);
    }
    int failed = 0;
    if (do_train) {
        printf("training steps: %d warm-up + %d timed, lr %.0e, random tokens", warmup, steps, LR);
        if (accum > 1) printf("; %d micro-batches of B a step, one AdamW update", accum);
        printf("\n");
        printf("%-6s %-10s %4s %5s %9s %9s %9s %11s %8s %7s %8s %7s %7s %7s\n", "tier", "arm", "B", "T", "ms/step",
               "(min", "median)", "tokens/s", "vs base", "TFLOP/s", "MFU", "loss", "setup s", "mem GiB");
        fflush(stdout);
        for (int ti = 0; ti < n_tiers; ti++) {
            double base = 0;
            int first_arm = 1;
            if (js) {
                fprintf(js, "%s", ti ? ", " : "");
                json_put_string(js, tiers[ti]);
                fprintf(js, ": {");
            }
            for (int ai = 0; ai < arm_count(); ai++) {
                const char *arm = arm_at(ai)->name;
                if (!listed(arms_arg, arm)) continue;
                TrainResult r = bench_train(tiers[ti], arm, mb, accum, warmup, steps, peak);
                if (js) {
                    fprintf(js, "%s\"%s\": {\"ok\": %s", first_arm ? "" : ", ", arm, r.ok ? "true" : "false");
                    if (r.err[0]) {
                        fprintf(js, ", \"error\": ");
                        json_put_string(js, r.err);
                    }
                    if (r.B)
                        fprintf(js,
                                ", \"micro_batch\": %d, \"grad_accum\": %d, \"block_size\": %d, \"params\": %ld, "
                                "\"non_embedding\": %ld, "
                                "\"flop_per_token\": %.6g, \"ms_per_step\": %.4f, \"step_ms_min\": %.4f, "
                                "\"step_ms_median\": %.4f, \"tokens_per_s\": %.1f, \"tflops\": %.3f, \"mfu\": ",
                                r.B, r.A, r.T, r.params, r.nonemb, r.flop_per_token, r.ms_step, r.ms_min, r.ms_median,
                                r.tok_s, r.tflops);
                    if (r.B) {
                        json_num(js, r.mfu);
                        fprintf(js, ", \"loss_first\": ");
                        json_num(js, r.loss_first);
                        fprintf(js, ", \"loss_last\": ");
                        json_num(js, r.loss_last);
                        fprintf(js, ", \"grad_norm_last\": ");
                        json_num(js, r.gnorm_last);
                        fprintf(js, ", \"setup_s\": %.2f, \"device_peak_bytes\": %zu, \"profile_ms\": {", r.setup_s,
                                r.mem_peak);
                        for (int k = 0; k < PROF_N; k++)
                            fprintf(js, "%s\"%s\": %.4f", k ? ", " : "", prof_name(k), r.prof_ms[k]);
                        fprintf(js, "}, \"profile_sites\": [");
                        for (int i = 0; i < r.n_sites; i++) {
                            fprintf(js, "%s{\"site\": ", i ? ", " : "");
                            json_put_string(js, r.site[i].what);
                            fprintf(js, ", \"ms\": %.4f, \"calls\": %d, \"tflops\": %.3f}", r.site[i].ms,
                                    r.site[i].calls, r.site[i].tflops);
                        }
                        fprintf(js, "]");
                    }
                    fprintf(js, "}");
                    fflush(js);
                }
                first_arm = 0;
                if (!r.B) {
                    printf("%-6s %-10s error: %s\n", tiers[ti], arm, r.err);
                    failed = 1;
                    continue;
                }
                if (!base && r.ok) base = r.tok_s;
                char mfu[32] = "n/a", vs[32] = "";
                if (isfinite(r.mfu)) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * r.mfu);
                if (base) snprintf(vs, sizeof vs, "%+.1f%%", 100 * (r.tok_s / base - 1));
                printf("%-6s %-10s %4d %5d %9.2f %9.2f %9.2f %11.0f %8s %7.1f %8s %7.3f %7.1f %7.2f%s%s\n", tiers[ti], arm,
                       r.B, r.T, r.ms_step, r.ms_min, r.ms_median, r.tok_s, vs, r.tflops, mfu, r.loss_last, r.setup_s,
                       r.mem_peak / 1073741824.0, r.ok ? "" : "  FAILED: ", r.ok ? "" : r.err);
                double tot = 0;
                for (int k = 0; k < PROF_N; k++) tot += r.prof_ms[k];
                printf("%-17s synchronised ops %.2f ms a step:", "", tot);
                for (int k = 0; k < PROF_N; k++)
                    if (r.prof_ms[k] > 0) printf(" %s %.2f (%.0f%%)", prof_name(k), r.prof_ms[k], 100 * r.prof_ms[k] / tot);
                printf("\n");
                for (int i = 0; i < r.n_sites; i++) {
                    char tf[24] = "";
                    if (r.site[i].tflops > 0) snprintf(tf, sizeof tf, "%7.1f TFLOP/s", r.site[i].tflops);
                    printf("%-17s %7.3f ms %4.1f%% %3dx %-62s %s\n", "", r.site[i].ms, 100 * r.site[i].ms / tot,
                           r.site[i].calls, r.site[i].what, tf);
                }
                fflush(stdout);
                if (!r.ok) failed = 1;
            }
            if (js) fprintf(js, "}");
        }
        printf("(tokens/s over the timed window; vs base: against the first arm listed; setup: build, init and\n"
               " the first step)\n\n");
    }
    if (js) fprintf(js, "}, \"matmul\": {");
    if (do_mm) {
        static const MmShape shapes[] = {{8192, 768, 2304, "qkv"},     {8192, 768, 768, "attn proj"},
                                         {8192, 768, 3072, "mlp fc"},  {8192, 3072, 768, "mlp proj"},
                                         {8192, 8192, 8192, "8192^3"}};
        printf("linear layers alone (op_matmul_fwd, op_matmul_bwd), TFLOP/s = 2MKN per product; "
               "tuned: SG_MATMUL_TUNE=1\n");
        printf("%-10s %6s %6s %6s %10s %10s %10s %10s\n", "shape", "M", "K", "N", "fwd TF/s", "tuned", "bwd TF/s",
               "tuned");
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            const int iters = shapes[i].K == 8192 ? 5 : 30;
            double bt, btt;
            sg_matmul_set_tune(0);
            const double ft = bench_matmul(&shapes[i], iters, &bt);
            sg_matmul_set_tune(1);
            const double ftt = bench_matmul(&shapes[i], iters, &btt);
            printf("%-10s %6d %6d %6d %10.1f %10.1f %10.1f %10.1f\n", shapes[i].what, shapes[i].M, shapes[i].K,
                   shapes[i].N, ft, ftt, bt, btt);
            fflush(stdout);
            if (js)
                fprintf(js,
                        "%s\"%s\": {\"M\": %d, \"K\": %d, \"N\": %d, \"fwd_tflops\": %.2f, \"bwd_tflops\": %.2f, "
                        "\"fwd_tflops_tuned\": %.2f, \"bwd_tflops_tuned\": %.2f}",
                        i ? ", " : "", shapes[i].what, shapes[i].M, shapes[i].K, shapes[i].N, ft, bt, ftt, btt);
        }
        const char *e = getenv("SG_MATMUL_TUNE");
        sg_matmul_set_tune(e && !strcmp(e, "1"));
        printf("\n");
    }
    if (js) fprintf(js, "}, \"gates\": {");
    if (do_gates) {
        const int B = 8, T = 1024, H = 12, d = 64, iters = 100, L = 12;
        const double copy_gbs = bench_copy_gbs(2L * B * T * H * d, iters);
        printf("gates alone (op_gate_fwd, op_gate_bwd), B %d T %d H %d d %d, v and dv in the qkv rows (stride 3C),\n"
               "%d iterations each; GB/s = the bytes the op must move / time\n",
               B, T, H, d, iters);
        printf("device-to-device copy (op_copy, read + write): %.0f GB/s\n", copy_gbs);
        printf("%-6s %-8s %8s %9s %8s %9s %9s %8s %14s\n", "gate", "slot", "fwd ms", "fwd GB/s", "bwd ms",
               "bwd GB/s", "GB/s", "of copy", "x12 layers ms");
        fflush(stdout);
        if (js)
            fprintf(js, "\"B\": %d, \"T\": %d, \"H\": %d, \"d\": %d, \"iters\": %d, \"copy_gbs\": %.1f", B, T, H, d,
                    iters, copy_gbs);
        static const char *const kinds[] = {"", "norm", "proj"}, *const slots[] = {"value", "routing"};
        for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
            for (int slot = SLOT_VALUE; slot <= SLOT_ROUTING; slot++) {
                GateResult r = bench_gate(kind, slot, B, T, H, d, iters);
                printf("%-6s %-8s %8.4f %9.0f %8.4f %9.0f %9.0f %7.0f%% %14.3f\n", kinds[kind], slots[slot], r.fwd_ms,
                       r.fwd_gbs, r.bwd_ms, r.bwd_gbs, r.gbs, 100 * r.gbs / copy_gbs, L * (r.fwd_ms + r.bwd_ms));
                fflush(stdout);
                if (js)
                    fprintf(js,
                            ", \"%s_%s\": {\"fwd_ms\": %.5f, \"bwd_ms\": %.5f, \"fwd_gbs\": %.1f, \"bwd_gbs\": %.1f, "
                            "\"gbs\": %.1f}",
                            kinds[kind], slots[slot], r.fwd_ms, r.bwd_ms, r.fwd_gbs, r.bwd_gbs, r.gbs);
            }
        printf("(x12 layers: forward + backward of one 124M step's gates; combo2 is proj/value)\n");
        printf("the value gates' backward with the attention's (learned sink), ms a call: the two ops\n"
               "(op_attention_bwd, op_gate_bwd) against op_attention_gate_bwd (fused under SG_ATTN=mma)\n");
        for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++) {
            double un = 0, fu = 0;
            bench_gate_fused(kind, B, T, H, d, iters / 4 > 0 ? iters / 4 : 1, &un, &fu);
            printf("%-6s two ops %8.4f  one op %8.4f  x12 layers saves %.3f ms\n", kinds[kind], un, fu, L * (un - fu));
            fflush(stdout);
            if (js) fprintf(js, ", \"%s_fused\": {\"two_ops_ms\": %.5f, \"one_op_ms\": %.5f}", kinds[kind], un, fu);
        }
        printf("\n");
    }
    if (js) fprintf(js, "}, \"attention\": {");
    if (do_attn) {
        const int B = aB, T = aT, H = aH, d = ad;
        printf("attention op alone (forward + backward), B %d T %d H %d d %d, %d iterations each\n", B, T, H, d,
               attn_iters);
        printf("TFLOP/s = (4 fwd + 10 bwd) * B*H*(T(T+1)/2)*d / time\n");
        printf("%-15s %5s %9s %9s %9s %9s %9s\n", "arm/tiles", "T", "fwd ms", "bwd ms", "fwd TF/s", "bwd TF/s", "TF/s");
        fflush(stdout);
        if (js) fprintf(js, "\"B\": %d, \"T\": %d, \"H\": %d, \"d\": %d, \"iters\": %d", B, T, H, d, attn_iters);
        /* both tile kernels (SG_ATTN, kernels/cuda/attention_cuda.h): "arms"
         * holds the default's figures, "arms_mma" the register-resident ones
         * (two m-tiles a warp at d 64), "arms_mma16" those with one
         * (SG_ATTN_WARP_ROWS=16), "arms_mma_dqs" those with dQ from the
         * stored dS (SG_ATTN_DQ=stored), "arms_mma_bp" those with the
         * backward's strips pipelined (SG_ATTN_BWD_PIPE=1), "arms_cudnn"
         * cuDNN's fused attention (SG_ATTN=cudnn; the mma tiles where it
         * refuses) */
        static const char *const tiles[] = {"wmma", "mma", "mma16", "mma-dqs", "mma-bp", "cudnn", "wgmma", "wgmma2"};
        static const char *const keys[] = {"arms",        "arms_mma",   "arms_mma16", "arms_mma_dqs",
                                           "arms_mma_bp", "arms_cudnn", "arms_wgmma", "arms_wgmma2"};
        /* in the order --attn-tiles lists them, so that a run cut short by
         * its time limit keeps the first */
        char order[256];
        snprintf(order, sizeof order, "%s", tiles_arg);
        for (char *tn = strtok(order, ","); tn; tn = strtok(NULL, ",")) {
            int ki = 0;
            while (strcmp(tiles[ki], tn)) ki++;
            attn_tiles_env(tn);
            if (js) fprintf(js, ", \"%s\": {", keys[ki]);
            int first = 1;
            for (int ai = 0; ai < arm_count(); ai++) {
                const Arm *arm = arm_at(ai);
                if (!listed(arms_arg, arm->name)) continue;
                AttnResult r = bench_attention(arm, B, T, H, d, attn_iters, 0);
                char label[64];
                snprintf(label, sizeof label, "%s/%s", arm->name, tiles[ki]);
                printf("%-15s %5d %9.3f %9.3f %9.1f %9.1f %9.1f\n", label, r.T, r.fwd_ms, r.bwd_ms, r.fwd_tflops,
                       r.bwd_tflops, r.tflops);
                fflush(stdout);
                if (js)
                    fprintf(js,
                            "%s\"%s\": {\"T\": %d, \"fwd_ms\": %.5f, \"bwd_ms\": %.5f, \"fwd_tflops\": %.3f, "
                            "\"bwd_tflops\": %.3f, \"tflops\": %.3f}",
                            first ? "" : ", ", arm->name, r.T, r.fwd_ms, r.bwd_ms, r.fwd_tflops, r.bwd_tflops,
                            r.tflops);
                first = 0;
            }
            if (js) fprintf(js, "}");
        }
        attn_tiles_env(NULL);
        printf("\n");
    }
    if (do_trace) {
        /* Where the mma kernels' cycles go (attention_trace.h): the same
         * shape under the default tiles, each arm's calls timed plain and
         * traced, then each kernel's phases and its launch's timeline */
        const int B = aB, T = aT, H = aH, d = ad;
        printf("attention phase clocks (--attn-trace), B %d T %d H %d d %d; cycles of every warp, by phase\n", B, T, H,
               d);
        if (js) fprintf(js, "%s\"trace\": {", do_attn ? ", " : "");
        int first = 1;
        /* the tile sets of --attn-tiles that have traced kernels: the mma
         * kernels, and under SG_ATTN_WGMMA the warpgroup forwards */
        char order[256];
        snprintf(order, sizeof order, "%s", tiles_arg);
        for (char *tn = strtok(order, ","); tn; tn = strtok(NULL, ",")) {
            if (!strcmp(tn, "wmma") || !strcmp(tn, "cudnn")) {
                printf("%s: no phase clocks\n", tn);
                continue;
            }
            if (!strcmp(tn, "mma-bp")) { /* the laps would undo the overlap it is there for */
                printf("%s: no phase clocks (the pipelined strips have none; mma's are the plain strips')\n", tn);
                continue;
            }
            attn_tiles_env(tn);
            for (int ai = 0; ai < arm_count(); ai++) {
                const Arm *arm = arm_at(ai);
                if (!listed(arms_arg, arm->name)) continue;
                AttnResult r = bench_attention(arm, B, T, H, d, attn_iters, 1);
                char label[64];
                snprintf(label, sizeof label, "%s/%s", arm->name, tn);
                printf("%s: forward %.3f ms traced (%.3f plain), backward %.3f ms traced (%.3f plain)\n", label,
                       r.trace_fwd_ms, r.fwd_ms, r.trace_bwd_ms, r.bwd_ms);
                if (js)
                    fprintf(js,
                            "%s\"%s\": {\"fwd_ms\": %.5f, \"bwd_ms\": %.5f, \"traced_fwd_ms\": %.5f, "
                            "\"traced_bwd_ms\": %.5f, \"kernels\": {",
                            first ? "" : ", ", label, r.fwd_ms, r.bwd_ms, r.trace_fwd_ms, r.trace_bwd_ms);
                first = 0;
                int kfirst = 1;
                for (int k = 0; k < TRACE_KERNELS; k++) {
                    const char *const *names = sg_attn_trace_phases(k);
                    if (!r.traced[k]) {
                        printf("  %s: not traced (it ran on a kernel without phase clocks)\n",
                               sg_attn_trace_kernel(k));
                        continue;
                    }
                    const KtraceSummary *t = &r.trace[k];
                    printf("  %s: %s\n", sg_attn_trace_kernel(k), r.trace_name[k]);
                    ktrace_print(stdout, t, names, "    ");
                    if (!js) continue;
                    fprintf(js, "%s\"%s\": {\"kernel\": ", kfirst ? "" : ", ", sg_attn_trace_kernel(k));
                    kfirst = 0;
                    json_put_string(js, r.trace_name[k]);
                    fprintf(js, ", \"phases\": {");
                    for (int p = 0; p < KTRACE_PHASES; p++)
                        fprintf(js, "%s\"%s\": {\"share\": %.5f, \"cycles_per_tile\": %.1f}", p ? ", " : "", names[p],
                                t->phase_share[p], t->phase_per_tile[p]);
                    fprintf(js,
                            "}, \"warps\": %ld, \"sms\": %d, \"tiles\": %.0f, \"warp_cycles_mean\": %.0f, "
                            "\"clock_ghz\": %.6g, \"span_us\": %.3f, \"busy\": %.5f, \"resident\": %.3f, "
                            "\"tail_us\": %.3f, \"missing\": %ld, \"inconsistent\": %ld}",
                            t->warps, t->sms, t->tiles, t->warp_cycles_mean, t->clock_ghz, t->span_ns / 1e3, t->busy,
                            t->resident, t->tail_ns / 1e3, t->missing, t->bad);
                }
                if (js) fprintf(js, "}}");
                fflush(stdout);
            }
        }
        if (js) fprintf(js, "}");
        attn_tiles_env(NULL);
        printf("\n");
    }
    if (js) {
        fprintf(js, "}}\n");
        fclose(js);
    }
    return failed;
}
