/* The training driver.  A run is a pure function of (config, seed): the
 * run directory records it (config.yaml), its trajectory (metrics.jsonl), a
 * resumable state (checkpoint.bin) and, last and atomically, result.json,
 * whose presence means the run is done.
 *
 * Resuming: `sgtrain train` with the same flags on a directory that holds a
 * checkpoint continues from it.  Nothing in a step depends on anything but
 * (params, AdamW state, seed, step), all of which the checkpoint holds, so a
 * resumed run is bitwise identical to an uninterrupted one. */
#include "train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "batch_split.h"
#include "checkpoint.h"
#include "dist.h"
#include "eval.h"
#include "fsutil.h"
#include "grad_sync.h"
#include "json_out.h"
#include "mfu.h"
#include "model.h"
#include "model_io.h"
#include "ops.h"
#include "optim.h"
#include "profile.h"
#include "progress.h"
#include "sampler.h"
#include "shard.h"

#ifndef SG_BLAS_NAME
#define SG_BLAS_NAME "unknown"
#endif

static volatile sig_atomic_t g_stop_signal = 0;
static void on_signal(int sig) { g_stop_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void path_join(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

typedef struct {
    const Config *c;
    Model m;
    ShardSet data;
    int data_open;
    char ckpt_path[CFG_PATH + 32];
    char metrics_path[CFG_PATH + 32];
    char result_path[CFG_PATH + 32];
    FILE *metrics;
    Progress prog;
    double elapsed_base; /* wall time of earlier sessions of this run */
    long last_ckpt;      /* step of the newest checkpoint on disk, -1 if none */
    int sharded;         /* ZeRO-1 over several ranks: the AdamW state is this rank's shard */
    char fail_reason[256]; /* why the run failed, for failed.json */
    long fail_step;
    BatchSplit split;    /* auto_micro_batch's choice; zero without it */
    double flop_tok;     /* model FLOPs a token (mfu.h) */
    double peak;         /* one device's dense bf16 peak, TFLOP/s; 0 unknown: no MFU */
    const char *peak_src; /* where the peak comes from */
    double steady_s;     /* this process's steps after its first (which sets up plans and buffers), */
    long steady_steps;   /* less the profiled ones */
    double prof_s;       /* profile_every's steps: their time (profile.h has the split) */
    long prof_steps;
} Run;

/* the fraction of the ranks' peak that tok_s tokens a second keep busy;
 * -1 where the peak is unknown */
static double run_mfu(const Run *r, double tok_s) {
    return r->peak > 0 ? r->flop_tok * tok_s / (r->peak * 1e12 * dist()->size) : -1;
}

/* A failed run says so in its directory (failed.json), so that sweeps and
 * reports can tell it from one that is still running or was interrupted. */
static void write_failed(const Run *r) {
    if (!dist_root()) return;
    char path[CFG_PATH + 32], buf[768], err[512];
    path_join(path, sizeof path, r->c->out, "failed.json");
    int n = snprintf(buf, sizeof buf, "{\"status\": \"failed\", \"step\": %ld, \"reason\": \"%s\", \"last_checkpoint\": %ld}\n",
                     r->fail_step, r->fail_reason[0] ? r->fail_reason : "unknown", r->last_ckpt);
    if (n > 0 && (size_t)n < sizeof buf && fs_write_atomic(path, buf, (size_t)n, err, sizeof err))
        fprintf(stderr, "sgtrain: %s\n", err);
}

static void set_failed(Run *r, const char *why, long step) {
    snprintf(r->fail_reason, sizeof r->fail_reason, "%s", why);
    r->fail_step = step;
}

static int save_checkpoint(Run *r, long step) {
    char err[512];
    char *yaml = NULL;
    if (config_to_yaml_string(r->c, &yaml)) {
        fprintf(stderr, "sgtrain: cannot serialise the config for the checkpoint\n");
        return -1;
    }
    CkptMeta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.arm, sizeof meta.arm, "%.63s", r->c->arm);
    meta.step = (uint64_t)step;
    meta.seed = (uint64_t)r->c->seed;
    meta.config_yaml = yaml;
    meta.config_len = strlen(yaml);
    meta.n = (uint64_t)r->m.n_params;
    meta.elem_size = sizeof(real);
    model_state_download(&r->m);
    Model *m = &r->m;
    real *adam_m = m->h_adam_m, *adam_v = m->h_adam_v;
    int rc = 0;
    if (r->sharded) {
        /* The file holds the whole state, as without sharding, so that any
         * number of ranks, sharded or not, resumes from it: rank 0 gathers
         * the shards into full moments for as long as it writes. */
        size_t bytes = sizeof(real) * (size_t)m->n_params;
        adam_m = dist_root() ? malloc(bytes) : NULL;
        adam_v = dist_root() ? malloc(bytes) : NULL;
        int oom = dist_root() && (!adam_m || !adam_v);
        if (oom) fprintf(stderr, "sgtrain: saving checkpoint: out of memory for the gathered AdamW state (%zu bytes)\n", 2 * bytes);
        if (dist_max_long(oom)) {
            rc = -1;
        } else {
            dist_gather_real(adam_m, m->h_adam_m, m->n_params);
            dist_gather_real(adam_v, m->h_adam_v, m->n_params);
        }
    }
    /* rank 0 writes; every rank learns whether it worked, so all stop together */
    if (!rc && dist_root()) {
        rc = ckpt_save(r->ckpt_path, &meta, m->h_params, adam_m, adam_v, err, sizeof err);
        if (rc) fprintf(stderr, "sgtrain: saving checkpoint: %s\n", err);
    }
    if (r->sharded) {
        free(adam_m);
        free(adam_v);
    }
    free(yaml);
    if (dist()->size > 1 && dist_max_long(rc ? 1 : 0)) rc = -1;
    if (!rc) r->last_ckpt = step;
    return rc;
}

/* Loads the run directory's checkpoint if there is one.  Returns the step to
 * start from (0 for a fresh run) or -1 after printing why the checkpoint
 * cannot continue this run. */
static long try_resume(Run *r) {
    if (!fs_exists(r->ckpt_path)) return 0;
    char err[1024];
    CkptMeta meta;
    if (ckpt_read_meta(r->ckpt_path, &meta, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return -1;
    }
    Config saved;
    long step = -1;
    if (ckpt_saved_config(&meta, r->ckpt_path, &saved, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto out;
    }
    if (strcmp(meta.arm, r->c->arm) != 0) {
        fprintf(stderr,
                "sgtrain: %s is a checkpoint of arm '%s', this run is arm '%s'; use another "
                "--out directory or remove the checkpoint\n",
                r->ckpt_path, meta.arm, r->c->arm);
        goto out;
    }
    char diff[2048];
    if (config_diff_run(&saved, r->c, diff, sizeof diff) > 0) {
        fprintf(stderr,
                "sgtrain: %s was written by a run with a different config (%s); resume with the "
                "same settings or use another --out directory\n",
                r->ckpt_path, diff);
        goto out;
    }
    CkptMeta full;
    Model *m = &r->m;
    real *adam_m = m->h_adam_m, *adam_v = m->h_adam_v;
    if (r->sharded) {
        /* the checkpoint holds the whole state (save_checkpoint): read it,
         * keep this rank's shard */
        size_t bytes = sizeof(real) * (size_t)m->n_params;
        adam_m = malloc(bytes);
        adam_v = malloc(bytes);
        if (!adam_m || !adam_v) {
            fprintf(stderr, "sgtrain: resuming from %s: out of memory for the full AdamW state (%zu bytes)\n",
                    r->ckpt_path, 2 * bytes);
            goto out_free;
        }
    }
    if (ckpt_load(r->ckpt_path, &full, m->h_params, adam_m, adam_v, (uint64_t)m->n_params, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto out_free;
    }
    if (r->sharded) {
        memcpy(m->h_adam_m, adam_m + m->opt_off, sizeof(real) * (size_t)m->opt_len);
        memcpy(m->h_adam_v, adam_v + m->opt_off, sizeof(real) * (size_t)m->opt_len);
    }
    model_state_upload(m);
    step = (long)full.step; /* at most iters: ckpt_saved_config */
    ckpt_meta_free(&full);
out_free:
    if (r->sharded) {
        free(adam_m);
        free(adam_v);
    }
out:
    ckpt_meta_free(&meta);
    return step;
}

/* Keeps the metrics lines of steps <= step (those the checkpoint covers), so
 * that a resumed run's metrics.jsonl reads like an uninterrupted one, and
 * returns the elapsed time recorded last. */
static int trim_metrics(Run *r, long step) {
    FILE *f = fopen(r->metrics_path, "r");
    r->elapsed_base = 0;
    if (!f) return 0;
    char *kept = NULL;
    size_t kept_len = 0;
    FILE *mem = open_memstream(&kept, &kept_len);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        long s;
        if (sscanf(line, "{\"step\":%ld", &s) != 1 || s > step) continue;
        fputs(line, mem);
        char *e = strstr(line, "\"elapsed_s\":");
        if (e) r->elapsed_base = strtod(e + 12, NULL);
    }
    free(line);
    fclose(f);
    fclose(mem);
    char err[512];
    int rc = fs_write_atomic(r->metrics_path, kept, kept_len, err, sizeof err);
    if (rc) fprintf(stderr, "sgtrain: %s\n", err);
    free(kept);
    return rc;
}

static uint32_t params_crc(Model *m) {
    uLong crc = crc32(0L, Z_NULL, 0);
    model_state_download(m);
    const unsigned char *p = (const unsigned char *)m->h_params;
    size_t n = (size_t)m->n_params * sizeof(real), chunk = 1u << 30;
    for (size_t i = 0; i < n; i += chunk) crc = crc32(crc, p + i, (uInt)(n - i < chunk ? n - i : chunk));
    return (uint32_t)crc;
}

/* ", device memory peak X GiB" where the buffers are device memory */
static const char *device_memory_note(void) {
    static char note[64];
    note[0] = 0;
    if (op_memory_peak()) snprintf(note, sizeof note, ", device memory peak %.2f GiB", op_memory_peak() / 1073741824.0);
    return note;
}

/* bytes as GiB, MiB or KiB, whichever reads best */
static const char *bytes_str(char *buf, size_t n, size_t bytes) {
    if (bytes >= (size_t)1 << 30)
        snprintf(buf, n, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= (size_t)1 << 20)
        snprintf(buf, n, "%.1f MiB", bytes / 1048576.0);
    else
        snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    return buf;
}

/* what auto_micro_batch chose, and from what */
static void log_split(const Config *c, const BatchSplit *s) {
    char a[32], b[32], d[32];
    fprintf(stderr, "sgtrain: auto_micro_batch: %d sequences a step as %d micro-batch%s of %d",
            c->micro_batch * c->grad_accum, s->grad_accum, s->grad_accum == 1 ? "" : "es", s->micro_batch);
    if (dist()->size > 1) fprintf(stderr, " (%d a rank)", s->grad_accum / dist()->size);
    if (s->measured) {
        fprintf(stderr, "; device footprint %s at micro-batch 1, %s%s a further sequence%s: %s at %d",
                bytes_str(a, sizeof a, s->at1), s->probed2 ? "" : "at most ", bytes_str(b, sizeof b, s->per_seq),
                s->probed2 ? "" : " (no probe at 2: it might not fit)", bytes_str(d, sizeof d, s->predicted),
                s->micro_batch);
        if (s->checked) fprintf(stderr, " (measured %s)", bytes_str(a, sizeof a, s->checked));
        if (s->next_predicted) fprintf(stderr, ", %s at the next size", bytes_str(a, sizeof a, s->next_predicted));
        fprintf(stderr, ", of %s less %s kept free", bytes_str(a, sizeof a, s->room),
                bytes_str(b, sizeof b, s->keep_free));
    } else if (s->room)
        fprintf(stderr, "; one sequence a rank");
    else
        fprintf(stderr, "; no device memory to fill: at most micro_batch %d", c->micro_batch);
    fputc('\n', stderr);
}

enum { PROF_TOP = 14 };

/* profile_every's split: each category's milliseconds a profiled step, and
 * the rest of the step ("other": the host's work between ops, and the
 * gradient sums over ranks, which are not bracketed) */
static void log_profile(const Run *r) {
    const double n = (double)r->prof_steps, step_ms = 1e3 * r->prof_s / n;
    double ops = 0;
    fprintf(stderr, "sgtrain: profile of %ld step%s (each op synchronised): %.2f ms a step:", r->prof_steps,
            r->prof_steps == 1 ? "" : "s", step_ms);
    for (int k = 0; k < PROF_N; k++) {
        const double ms = 1e3 * prof_secs[k] / n;
        ops += ms;
        if (prof_secs[k] > 0) fprintf(stderr, " %s %.2f (%.0f%%)", prof_name((ProfCat)k), ms, 100 * ms / step_ms);
    }
    fprintf(stderr, ", other %.2f (%.0f%%)\n", step_ms - ops, 100 * (step_ms - ops) / step_ms);
}

/* result.json's "profile": null without profile_every */
static void profile_json(const Run *r, FILE *f) {
    fputs("  \"profile\": ", f);
    if (!r->prof_steps) {
        fputs("null,\n", f);
        return;
    }
    const double n = (double)r->prof_steps, step_ms = 1e3 * r->prof_s / n;
    double ops = 0;
    fprintf(f, "{\"steps\": %ld, \"ms_per_step\": %.6f, \"categories_ms\": {", r->prof_steps, step_ms);
    for (int k = 0; k < PROF_N; k++) {
        ops += 1e3 * prof_secs[k] / n;
        fprintf(f, "%s\"%s\": %.6f", k ? ", " : "", prof_name((ProfCat)k), 1e3 * prof_secs[k] / n);
    }
    fprintf(f, "}, \"other_ms\": %.6f, \"sites\": [", step_ms - ops);
    ProfSite *top[PROF_TOP];
    const int nt = prof_top_sites(top, PROF_TOP);
    for (int i = 0; i < nt; i++) {
        fprintf(f, "%s{\"op\": ", i ? ", " : "");
        json_put_string(f, top[i]->what);
        fprintf(f, ", \"category\": \"%s\", \"ms\": %.6f, \"calls\": %.6g, \"tflops\": ", prof_name(top[i]->cat),
                1e3 * top[i]->secs / n, top[i]->calls / n);
        if (top[i]->flops > 0 && top[i]->secs > 0) fprintf(f, "%.6g}", top[i]->flops / top[i]->secs / 1e12);
        else fputs("null}", f);
    }
    fputs("]},\n", f);
}

static int write_result(Run *r, long steps, double val_loss, double wall, double tok_s) {
    const Config *c = r->c;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    long G = (long)c->micro_batch * c->grad_accum;
    fprintf(f, "{\n  \"tier\": \"%s\",\n  \"arm\": \"%s\",\n  \"arm_label\": \"%s\",\n", c->tier,
            c->arm, r->m.arm->label);
    fprintf(f, "  \"seed\": %ld,\n  \"steps\": %ld,\n  \"tokens\": %ld,\n", c->seed, steps,
            steps * G * c->block_size);
    fprintf(f, "  \"final_val_loss\": %.17g,\n  \"val_batches\": %d,\n  \"val_tokens\": %ld,\n",
            val_loss, c->val_batches_final, (long)c->val_batches_final * G * c->block_size);
    fprintf(f, "  \"params\": {\"total\": %ld, \"non_embedding\": %ld, \"arm_extra\": %ld},\n",
            model_count_params(&r->m), model_count_non_embedding(&r->m),
            model_count_arm_extra(&r->m));
    fprintf(f, "  \"params_crc32\": \"%08x\",\n", params_crc(&r->m));
    fprintf(f, "  \"wall_s\": %.3f,\n  \"tokens_per_s\": %.1f,\n", wall, tok_s);
    fprintf(f, "  \"ranks\": %d,\n", dist()->size);
    /* the training steps' own rate, without the first step's set-up, the
     * evaluations and the checkpoints that tokens_per_s averages in */
    const double steady = r->steady_s > 0 ? (double)r->steady_steps * G * c->block_size / r->steady_s : 0;
    fprintf(f, "  \"throughput\": {\"steady_tokens_per_s\": ");
    if (steady > 0) fprintf(f, "%.9g", steady);
    else fputs("null", f);
    fprintf(f, ", \"steady_steps\": %ld, \"flop_per_token\": %.17g, \"peak_tflops_per_rank\": ", r->steady_steps,
            r->flop_tok);
    if (r->peak > 0) fprintf(f, "%.17g, \"peak_source\": \"%s\"", r->peak, r->peak_src);
    else fputs("null, \"peak_source\": null", f);
    fputs(", \"mfu\": ", f);
    if (r->peak > 0 && steady > 0) fprintf(f, "%.6g", run_mfu(r, steady));
    else fputs("null", f);
    fprintf(f, "},\n");
    profile_json(r, f);
    /* the split used, and auto_micro_batch's measurements (rank 0's) */
    const BatchSplit *s = &r->split;
    fprintf(f, "  \"batch_split\": {\"micro_batch\": %d, \"grad_accum\": %d, \"auto\": %s", r->m.cfg.micro_batch,
            r->m.cfg.grad_accum, c->auto_micro_batch ? "true" : "false");
    if (s->measured)
        fprintf(f,
                ", \"footprint_at_1_bytes\": %zu, \"per_sequence_bytes\": %zu, \"predicted_bytes\": %zu, "
                "\"measured_bytes\": %zu, \"next_predicted_bytes\": %zu, \"room_bytes\": %zu, \"kept_free_bytes\": %zu, "
                "\"probed_at_2\": %s",
                s->at1, s->per_seq, s->predicted, s->checked, s->next_predicted, s->room, s->keep_free,
                s->probed2 ? "true" : "false");
    fprintf(f, "},\n");
    /* rank 0's: the device's buffers at their most (0 on the CPU, whose
     * buffers are host memory), the activations' share of them, and the
     * process's peak resident size (what a Slurm --mem must cover) */
    struct rusage ru;
    const long rss = getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_maxrss * 1024L;
    fprintf(f, "  \"memory\": {\"device_peak_bytes\": %zu, \"activation_bytes\": %zu, \"host_peak_rss_bytes\": %ld},\n",
            op_memory_peak(), sizeof(real) * (size_t)r->m.act_n, rss);
    fprintf(f, "  \"backend\": \"%s\",\n  \"blas\": \"%s\",\n  \"threads\": %d,\n", op_backend(), SG_BLAS_NAME,
            op_threads());
    fprintf(f, "  \"config\": ");
    config_write_json(c, f);
    fprintf(f, "\n}\n");
    fclose(f);
    char err[512];
    int rc = dist_root() ? fs_write_atomic(r->result_path, buf, len, err, sizeof err) : 0;
    if (rc) fprintf(stderr, "sgtrain: %s\n", err);
    free(buf);
    if (dist()->size > 1 && dist_max_long(rc ? 1 : 0)) rc = -1;
    return rc;
}

static void report_divergence(Run *r, const char *what, long step) {
    set_failed(r, what, step);
    if (!dist_root()) return;
    if (r->last_ckpt >= 0)
        fprintf(stderr, "sgtrain: %s at step %ld; stopping. The last good checkpoint (step %ld) is kept in %s\n",
                what, step, r->last_ckpt, r->ckpt_path);
    else
        fprintf(stderr, "sgtrain: %s at step %ld; stopping. No checkpoint had been written yet.\n", what, step);
}

static void log_metrics(Run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_metrics(Run *r, const char *fmt, ...) {
    if (!r->metrics) return; /* ranks other than 0 write nothing */
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->metrics, fmt, ap);
    va_end(ap);
    fputc('\n', r->metrics);
    fflush(r->metrics);
}

static int run_loop(Run *r, long start) {
    const Config *c = r->c;
    Model *m = &r->m;
    /* the split of a step's sequences (batch_split.h): m->cfg's */
    int Bm = m->cfg.micro_batch, T = c->block_size, A = m->cfg.grad_accum;
    long G = (long)Bm * A;
    int32_t *win = malloc(sizeof(int32_t) * (size_t)Bm * (T + 1));
    int32_t *in = malloc(sizeof(int32_t) * (size_t)Bm * T);
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)Bm * T);
    real dscale = (real)(1.0 / ((double)G * T));
    double t0 = now_s(), last_val = NAN;
    double step_s = 0, comm_s = 0; /* SG_DIST_TIMES: steps, and the gradient and parameter collectives in them */
    long timed_steps = 0;
    int buckets = 0, pieces = 0; /* gradient sums started during the last backward, and under ZeRO-1 the
                                  * (bucket, shard) pieces they reduced (grad_sync.h) */
    long step = start;
    int status = TRAIN_OK;
    progress_init(&r->prog, dist_root() ? stderr : NULL, c->iters);
    if (start > 0) progress_note(&r->prog, "resuming %s at step %ld", c->out, start);
    prof_reset();
    for (; step < c->iters; step++) {
        /* a profiled step starts on an idle device, so that its ops' times
         * add up to its own */
        const int profiled = c->profile_every > 0 && (step + 1) % c->profile_every == 0;
        if (profiled) op_sync();
        double ts = now_s();
        prof_on = profiled;
        model_zero_grad(m);
        double loss = 0;
        /* this rank's share of the global batch (dist.h) */
        int k0 = dist()->rank * A / dist()->size, k1 = (dist()->rank + 1) * A / dist()->size;
        /* with several ranks, the last micro-batch's backward starts the
         * gradient sums as layers finish (grad_sync.h); under ZeRO-1 they
         * are per-bucket reduces onto the shards, so that each rank ends
         * with the sum of its shard only, as dist_sum_scatter_real leaves it */
        int overlap = dist()->size > 1 && c->bucket_mb > 0;
        GradSync sync;
        for (int k = k0; k < k1; k++) {
            sampler_train_rows(&r->data, (uint64_t)c->seed, (uint64_t)step, (uint64_t)k * Bm, Bm, win);
            split_windows(win, Bm, T, in, tg);
            loss += model_forward(m, in, tg, Bm, 1, dscale);
            if (overlap && k == k1 - 1) grad_sync_begin(&sync, m, grad_sync_bucket(c->bucket_mb), r->sharded);
            model_backward(m);
        }
        double tc = now_s();
        if (overlap) {
            buckets = grad_sync_end(&sync, m);
            pieces = sync.pieces;
        } else if (r->sharded) /* each rank needs the sum of its shard only (optim.h) */
            dist_sum_scatter_real(m->grads, m->n_params);
        else if (dist()->size > 1)
            dist_sum_real(m->grads, m->n_params);
        if (dist()->size > 1) loss = dist_sum_double(loss);
        comm_s += now_s() - tc;
        loss /= (double)G * T;
        double lr = lr_at(c, step);
        if (!isfinite(loss)) {
            progress_done(&r->prog);
            report_divergence(r, isnan(loss) ? "the training loss is NaN" : "the training loss is infinite",
                              step + 1);
            status = TRAIN_FAILED;
            break;
        }
        double gnorm = optim_step(m, step, lr);
        if (r->sharded && isfinite(gnorm)) {
            tc = now_s();
            dist_allgather_real(m->params, m->n_params); /* every rank's updated shard to every rank */
            comm_s += now_s() - tc;
        }
        if (!isfinite(gnorm)) {
            progress_done(&r->prog);
            report_divergence(r, "the gradient norm is not finite", step + 1);
            status = TRAIN_FAILED;
            break;
        }
        double te = now_s(), elapsed = r->elapsed_base + (te - t0);
        step_s += te - ts;
        timed_steps++;
        if (profiled) prof_on = 0, r->prof_s += te - ts, r->prof_steps++;
        else if (timed_steps > 1) r->steady_s += te - ts, r->steady_steps++;
        double tok_s = (double)G * T / (te - ts), mfu = run_mfu(r, tok_s);
        long done = step + 1;
        char extra[48] = ""; /* the MFU where known, and a profiled step's flag */
        if (mfu >= 0) snprintf(extra, sizeof extra, ",\"mfu\":%.6g", mfu);
        if (profiled) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ",\"profiled\":true");
        log_metrics(r,
                    "{\"step\":%ld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens_per_s\":%.1f%s,"
                    "\"elapsed_s\":%.3f}",
                    done, loss, lr, gnorm, tok_s, extra, elapsed);
        progress_step(&r->prog, done, loss, lr, gnorm, tok_s, mfu, elapsed, c->log_every);
        if (c->val_every > 0 && done % c->val_every == 0 && done < c->iters) {
            last_val = eval_loss(m, &r->data, c->val_batches);
            log_metrics(r, "{\"step\":%ld,\"val_loss\":%.9g,\"val_batches\":%d,\"elapsed_s\":%.3f}",
                        done, last_val, c->val_batches, r->elapsed_base + (now_s() - t0));
            progress_note(&r->prog, "step %ld val_loss %.4f", done, last_val);
        }
        /* every rank must stop at the same step: a signal reaches ranks at
         * different moments, so they agree on the largest */
        if (dist()->size > 1) g_stop_signal = (int)dist_max_long(g_stop_signal);
        int stop_here = c->stop_at > 0 && done == c->stop_at;
        int want_ckpt = (c->ckpt_every > 0 && done % c->ckpt_every == 0) || g_stop_signal || stop_here;
        if (want_ckpt && done < c->iters) {
            if (save_checkpoint(r, done)) {
                set_failed(r, "writing the checkpoint failed", done);
                status = TRAIN_FAILED;
                step++;
                break;
            }
        }
        if ((g_stop_signal || stop_here) && done < c->iters) {
            progress_done(&r->prog);
            if (dist_root())
                fprintf(stderr,
                    "sgtrain: %s at step %ld: checkpoint saved to %s; run the same "
                    "command again to resume\n",
                    g_stop_signal == SIGTERM ? "SIGTERM received"
                    : g_stop_signal          ? "SIGUSR1 received"
                                             : "stop_at reached",
                    done, r->ckpt_path);
            status = TRAIN_INTERRUPTED;
            step++;
            break;
        }
    }
    prof_on = 0;
    progress_done(&r->prog);
    if (dist_root() && r->prof_steps) log_profile(r);
    if (status == TRAIN_OK) {
        /* The final state is checkpointed before the (long) final evaluation
         * so that a pre-emption there loses no training. */
        if (save_checkpoint(r, c->iters)) {
            set_failed(r, "writing the checkpoint failed", c->iters);
            status = TRAIN_FAILED;
        }
    }
    if (status == TRAIN_OK) {
        double val = eval_loss(m, &r->data, c->val_batches_final);
        double wall = r->elapsed_base + (now_s() - t0);
        log_metrics(r, "{\"step\":%ld,\"val_loss\":%.9g,\"val_batches\":%d,\"final\":true,\"elapsed_s\":%.3f}",
                    c->iters, val, c->val_batches_final, wall);
        double tok_s = wall > 0 ? (double)c->iters * G * T / wall : 0;
        if (!isfinite(val)) {
            fprintf(stderr, "sgtrain: the final validation loss is not finite\n");
            set_failed(r, "the final validation loss is not finite", c->iters);
            status = TRAIN_FAILED;
        } else if (write_result(r, c->iters, val, wall, tok_s)) {
            set_failed(r, "writing result.json failed", c->iters);
            status = TRAIN_FAILED;
        } else {
            if (dist_root())
                fprintf(stderr, "done: %s %s seed %ld: final val_loss %.4f (%d batches), %.0f tok/s, %.1fs%s\n",
                    c->tier, c->arm, c->seed, val, c->val_batches_final, tok_s, wall, device_memory_note());
        }
    }
    (void)last_val;
    if (dist_times_on() && dist()->size > 1 && timed_steps > 0) {
        /* each rank's own view: a slow rank waits less than the others */
        double wait_s, xfer_s;
        dist_times(&wait_s, &xfer_s);
        char overlap_note[128] = "";
        if (buckets && r->sharded)
            snprintf(overlap_note, sizeof overlap_note,
                     "; the reduce-scatter in %d bucket%s (%d shard piece%s) started during the backward", buckets,
                     buckets == 1 ? "" : "s", pieces, pieces == 1 ? "" : "s");
        else if (buckets)
            snprintf(overlap_note, sizeof overlap_note, "; the sum in %d bucket%s started during the backward",
                     buckets, buckets == 1 ? "" : "s");
        fprintf(stderr,
                "sgtrain: rank %d of %d: %ld steps, %.2f ms a step; gradient%s collectives %.2f ms a step (%.1f%%): "
                "%.2f ms waiting for the slowest rank, %.2f ms transfer (%.1f%%)%s\n",
                dist()->rank, dist()->size, timed_steps, 1e3 * step_s / timed_steps,
                r->sharded ? " and parameter" : "", 1e3 * comm_s / timed_steps, 100 * comm_s / step_s,
                1e3 * wait_s / timed_steps, 1e3 * xfer_s / timed_steps, 100 * xfer_s / step_s, overlap_note);
    }
    free(win);
    free(in);
    free(tg);
    return status;
}

int train_run(const Config *c) {
    char err[1024];
    if (config_validate(c, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return TRAIN_BAD_INPUT;
    }
    if (!c->out[0]) {
        fprintf(stderr, "sgtrain: no run directory: pass --out DIR\n");
        return TRAIN_BAD_INPUT;
    }
    Run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    path_join(r.ckpt_path, sizeof r.ckpt_path, c->out, "checkpoint.bin");
    path_join(r.metrics_path, sizeof r.metrics_path, c->out, "metrics.jsonl");
    path_join(r.result_path, sizeof r.result_path, c->out, "result.json");
    if (fs_exists(r.result_path)) {
        fprintf(stderr, "sgtrain: %s exists: this run is already complete (remove it to rerun)\n",
                r.result_path);
        return TRAIN_OK;
    }
    if (c->threads > 0) omp_set_num_threads(c->threads);
    if (shardset_open(&r.data, c->data, (uint32_t)c->vocab_size, c->block_size, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return TRAIN_BAD_INPUT;
    }
    int status = TRAIN_BAD_INPUT;
    if (model_build(&r.m, c, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto done;
    }
    if (batch_split_check(c, dist()->size, err, sizeof err)) {
        if (dist_root()) fprintf(stderr, "sgtrain: %s\n", err);
        goto done;
    }
    if (c->zero && dist()->size > 1) {
        /* identical on every rank, so every rank refuses alike */
        if (r.m.n_params > INT_MAX) {
            if (dist_root())
                fprintf(stderr, "sgtrain: zero 1: %ld parameters are more than MPI's int counts address "
                                "(%d); set --zero 0\n",
                        r.m.n_params, INT_MAX);
            goto done;
        }
        long off, len;
        dist_part(r.m.n_params, dist()->rank, &off, &len);
        /* padded for NCCL's equal parts; MPI ignores the tail */
        int bad = model_shard_optim(&r.m, off, len, dist_padded(r.m.n_params), err, sizeof err) != 0;
        if (bad) fprintf(stderr, "sgtrain: rank %d: %s\n", dist()->rank, err);
        if (dist_max_long(bad)) goto done; /* all stop, or the others would wait in a collective */
        r.sharded = 1;
    }
    if (dist_root() && fs_mkdir_p(c->out, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        if (dist()->size == 1) goto done;
    }
    r.last_ckpt = -1;
    long start = try_resume(&r);
    /* every rank read the same checkpoint, or none starts */
    if (dist()->size > 1 && (dist_max_long(start) != -dist_max_long(-start) || !fs_exists(c->out))) start = -1;
    if (start > 0) r.last_ckpt = start;
    if (start < 0) goto done;
    if (start == 0) model_init(&r.m, (uint64_t)c->seed);
    status = TRAIN_FAILED;
    int setup_bad = 0;
    if (dist_root()) { /* rank 0 owns the run directory's files */
        if (trim_metrics(&r, start)) setup_bad = 1;
        char *yaml = NULL;
        char cfg_path[CFG_PATH + 32];
        path_join(cfg_path, sizeof cfg_path, c->out, "config.yaml");
        if (!setup_bad && (config_to_yaml_string(c, &yaml) ||
                           fs_write_atomic(cfg_path, yaml, strlen(yaml), err, sizeof err))) {
            fprintf(stderr, "sgtrain: writing %s: %s\n", cfg_path, err);
            setup_bad = 1;
        }
        free(yaml);
        if (!setup_bad && !(r.metrics = fopen(r.metrics_path, "a"))) {
            fprintf(stderr, "sgtrain: %s: %s\n", r.metrics_path, strerror(errno));
            setup_bad = 1;
        }
    }
    if (dist()->size > 1) setup_bad = (int)dist_max_long(setup_bad);
    if (setup_bad) goto done;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (c->auto_micro_batch) {
        batch_split_plan(&r.m, c, dist()->size, &r.split);
        if (dist_root()) log_split(c, &r.split);
    }
    r.flop_tok = mfu_flop_per_token(c, model_count_non_embedding(&r.m));
    r.peak = c->peak_tflops, r.peak_src = "--peak_tflops";
    if (r.peak <= 0) r.peak = mfu_device_peak(op_backend(), &r.peak_src);
    if (dist_root()) {
        if (r.peak > 0)
            fprintf(stderr, "sgtrain: MFU against %.4g TFLOP/s a rank (%s), %.4g GFLOP a token\n", r.peak,
                    r.peak_src, r.flop_tok / 1e9);
        fprintf(stderr, "sgtrain: %s arm %s seed %ld: %ld params (%ld non-embedding, %ld for the arm), "
                        "%d threads, BLAS %s",
                c->tier, c->arm, c->seed, model_count_params(&r.m), model_count_non_embedding(&r.m),
                model_count_arm_extra(&r.m), op_threads(), SG_BLAS_NAME);
        if (dist()->size > 1) fprintf(stderr, ", %d ranks", dist()->size);
        if (r.sharded) /* rank 0's shard is the largest */
            fprintf(stderr, ", ZeRO-1: AdamW state %.1f MiB per rank instead of %.1f",
                    2.0 * sizeof(real) * (double)r.m.opt_len / 1048576,
                    2.0 * sizeof(real) * (double)r.m.n_params / 1048576);
        fputc('\n', stderr);
        char fpath[CFG_PATH + 32];
        path_join(fpath, sizeof fpath, c->out, "failed.json");
        unlink(fpath); /* an earlier attempt's; this one decides anew */
    }
    status = run_loop(&r, start);
    if (status == TRAIN_FAILED) write_failed(&r);
done:
    if (r.metrics) fclose(r.metrics);
    model_free(&r.m);
    shardset_close(&r.data);
    return status;
}
