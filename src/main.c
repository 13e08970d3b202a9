/* sgtrain: the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "arms.h"
#include "config.h"
#include "mfu.h"
#include "model.h"
#include "model_io.h"
#include "dist.h"
#include "eval.h"
#include "generate.h"
#include "import_hf.h"
#include "ops.h"
#include "safetensors.h"
#include "sampler.h"
#include "shard.h"
#include "toy_cli.h"
#include "zeroshot.h"
#include "train.h"

#define SG_VERSION "0.1.0"

static void usage(FILE *f) {
    fprintf(f,
            "sgtrain " SG_VERSION ": GPT-2-style models with the nine attention arms of the study\n"
            "\n"
            "usage:\n"
            "  sgtrain train [--tier NAME] [--arm NAME] [--seed N] [--config FILE]... [--KEY VALUE]...\n"
            "                --data DIR --out RUN_DIR\n"
            "  sgtrain info  [the same flags]     resolved config and parameter counts, as JSON\n"
            "  sgtrain export RUN_DIR|CHECKPOINT [-o FILE.safetensors]\n"
            "  sgtrain analyze RUN_DIR|CHECKPOINT [flags]\n"
            "                                     injection battery, gate-override probes, exposure,\n"
            "                                     telemetry and incidence -> RUN_DIR/analysis/*.json\n"
            "                                     (--help: the flags)\n"
            "  sgtrain zeroshot RUN_DIR|CHECKPOINT --task lambada|hellaswag|wikitext --file FILE [flags]\n"
            "                                     zero-shot evaluation (Tables 10-11) -> RUN_DIR/analysis/TASK.json\n"
            "  sgtrain generate RUN_DIR|CHECKPOINT [--prompt TEXT] [flags]\n"
            "                                     text sampled from the model with a key-value cache\n"
            "  sgtrain import HF_DIR --out FILE.safetensors\n"
            "                                     a Hugging Face GPT-2 checkpoint as a sinkgate model file,\n"
            "                                     for analyze, zeroshot and generate (Table 12's survey)\n"
            "  sgtrain grads [the train flags] -o FILE.safetensors\n"
            "                                     the gradients of step 0's first micro-batch and its loss\n"
            "                                     (compares backends: tests/gpu/run.sh)\n"
            "  sgtrain toy [flags]                the superposition task of Appendix E (Figure 3)\n"
            "  sgtrain tiers                      the tiers and their settings\n"
            "  sgtrain arms  [--tier NAME]        the arms and their parameter cost (Table 4)\n"
            "  sgtrain help | --help | --version\n"
            "\n"
            "CHECKPOINT: a checkpoint file, or a model file in sinkgate's safetensors layout (what\n"
            "export and import write).\n"
            "`sgtrain train --help` lists every KEY.  Exit status of train: 0 done (or already\n"
            "done), 1 failed (non-finite loss, I/O), 2 bad input, 75 interrupted by\n"
            "SIGUSR1/SIGTERM with a checkpoint saved (rerun the same command to resume).\n");
}

static void train_help(void) {
    printf("sgtrain train: flags (tier defaults < --config files < flags; `-` and `_` are the same)\n\n"
           "  --tier NAME     one of: %s (default cpu-tiny)\n"
           "  --config FILE   a YAML mapping of KEY: VALUE (may set tier: first)\n",
           config_tier_names());
    int n;
    const ConfigField *f = config_fields(&n);
    for (int i = 0; i < n; i++) {
        if (!strcmp(f[i].key, "tier")) continue;
        printf("  --%-16s %s\n", f[i].key, f[i].help);
    }
    printf("\narms: %s\n", arm_names());
}

static int want_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

static int resolve(Config *c, int argc, char **argv) {
    char err[2048];
    if (config_from_args(c, argc, argv, err, sizeof err) || config_validate(c, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return -1;
    }
    return 0;
}

static int cmd_info(int argc, char **argv) {
    Config c;
    if (resolve(&c, argc, argv)) return 2;
    Model m;
    char err[512];
    if (model_describe(&m, &c, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return 2;
    }
    /* what a run of this config computes (mfu.h), for sizing jobs: its
     * GPU-hours at a given MFU are train_flop / (MFU x peak) */
    const double fpt = mfu_flop_per_token(&c, model_count_non_embedding(&m));
    const double tokens = (double)c.iters * c.micro_batch * c.grad_accum * c.block_size;
    printf("{\"tier\": \"%s\", \"arm\": \"%s\", \"params\": %ld, \"non_embedding\": %ld, "
           "\"arm_extra\": %ld, \"flop_per_token\": %.17g, \"train_tokens\": %.17g, \"train_flop\": %.17g, "
           "\"tensors\": [",
           c.tier, c.arm, model_count_params(&m), model_count_non_embedding(&m), model_count_arm_extra(&m), fpt,
           tokens, fpt * tokens);
    for (int i = 0; i < m.n_tensors; i++) {
        const TensorInfo *t = &m.tensors[i];
        printf("%s{\"name\": \"%s\", \"shape\": [%d%s", i ? ", " : "", t->name, t->shape[0],
               t->ndim == 2 ? ", " : "");
        if (t->ndim == 2) printf("%d", t->shape[1]);
        printf("], \"decay\": %s}", t->decay ? "true" : "false");
    }
    printf("], \"config\": ");
    config_write_json(&c, stdout);
    printf("}\n");
    model_free(&m);
    return 0;
}

static int cmd_arms(int argc, char **argv) {
    const char *tier = "10M";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--tier") && i + 1 < argc) tier = argv[++i];
        else if (!strncmp(argv[i], "--tier=", 7)) tier = argv[i] + 7;
        else {
            fprintf(stderr, "sgtrain arms: unknown argument '%s' (only --tier NAME)\n", argv[i]);
            return 2;
        }
    }
    Config c;
    char err[512];
    if (config_from_tier(&c, tier, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        return 2;
    }
    static const char *zero[] = {"none", "phantom, fixed", "phantom, learned", "token, approximate"};
    static const char *filt[] = {"none", "norm threshold", "learned direction"};
    printf("%-10s %-18s %-18s %-8s %12s %14s\n", "arm", "zero option", "filter", "slot",
           "extra params", "total params");
    for (int i = 0; i < arm_count(); i++) {
        const Arm *a = arm_at(i);
        snprintf(c.arm, sizeof c.arm, "%s", a->name);
        Model m;
        if (model_describe(&m, &c, err, sizeof err)) {
            fprintf(stderr, "sgtrain: %s\n", err);
            return 2;
        }
        printf("%-10s %-18s %-18s %-8s %12ld %14ld\n", a->name, zero[a->zero], filt[a->filter],
               a->filter == FILTER_NONE ? "-" : (a->slot == FSLOT_VALUE ? "value" : "routing"),
               model_count_arm_extra(&m), model_count_params(&m));
        model_free(&m);
    }
    return 0;
}

/* One forward/backward on the first micro-batch of step 0, exactly as
 * training draws it; the gradients (named as the parameters) and the loss
 * go to a safetensors file.  Two backends given the same flags must agree
 * to the tolerance of their arithmetic. */
static int cmd_grads(int argc, char **argv) {
    const char *out = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nr = 0;
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) out = argv[++i];
        else rest[nr++] = argv[i];
    }
    Config c;
    int rc = 2;
    Model m;
    ShardSet data;
    int m_ok = 0, d_ok = 0;
    int32_t *win = NULL, *in = NULL, *tg = NULL;
    StWriter *w = NULL;
    char err[1024];
    if (!out) {
        fprintf(stderr, "sgtrain grads: say where: -o FILE.safetensors\n");
        goto done;
    }
    if (resolve(&c, nr, rest)) goto done;
    if (shardset_open(&data, c.data, (uint32_t)c.vocab_size, c.block_size, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto done;
    }
    d_ok = 1;
    if (model_build(&m, &c, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto done;
    }
    m_ok = 1;
    rc = 1;
    model_init(&m, (uint64_t)c.seed);
    int Bm = c.micro_batch, T = c.block_size;
    win = malloc(sizeof *win * (size_t)Bm * (T + 1));
    in = malloc(sizeof *in * (size_t)Bm * T);
    tg = malloc(sizeof *tg * (size_t)Bm * T);
    sampler_train_rows(&data, (uint64_t)c.seed, 0, 0, Bm, win);
    split_windows(win, Bm, T, in, tg);
    model_zero_grad(&m);
    double loss = model_forward(&m, in, tg, Bm, 1, (real)(1.0 / ((double)Bm * T))) / ((double)Bm * T);
    model_backward(&m);
    real *g = malloc(sizeof *g * (size_t)m.n_params);
    op_download(g, m.grads, sizeof *g * (size_t)m.n_params);
    w = stw_new();
    for (int i = 0; i < m.n_tensors; i++) {
        const TensorInfo *t = &m.tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        if (stw_add(w, t->name, st_real_dtype(), t->ndim, shape, g + t->offset, 1, err, sizeof err)) break;
    }
    free(g);
    char num[64];
    snprintf(num, sizeof num, "%.17g", loss);
    if (stw_add_meta(w, "loss", num, err, sizeof err) || stw_add_meta(w, "backend", op_backend(), err, sizeof err) ||
        stw_write(w, out, err, sizeof err)) {
        fprintf(stderr, "sgtrain: %s\n", err);
        goto done;
    }
    printf("loss %.9f; gradients of %d tensors -> %s (%s)\n", loss, m.n_tensors, out, op_backend());
    rc = 0;
done:
    if (w) stw_free(w);
    free(win), free(in), free(tg), free(rest);
    if (m_ok) model_free(&m);
    if (d_ok) shardset_close(&data);
    return rc;
}

static int cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "sgtrain export: unknown flag '%s'\n", argv[i]);
            return 2;
        } else if (!src) src = argv[i];
        else {
            fprintf(stderr, "sgtrain export: one source only (got '%s' and '%s')\n", src, argv[i]);
            return 2;
        }
    }
    if (!src) {
        fprintf(stderr, "sgtrain export: which run? usage: sgtrain export RUN_DIR|CHECKPOINT [-o FILE]\n");
        return 2;
    }
    char def[4096];
    if (!out) {
        snprintf(def, sizeof def, "%s/model.safetensors", src);
        out = def;
    }
    char err[2048];
    if (export_safetensors(src, out, err, sizeof err)) {
        fprintf(stderr, "sgtrain export: %s\n", err);
        return 2;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

static int cmd_import(int argc, char **argv) {
    if (want_help(argc, argv)) {
        import_usage();
        return 0;
    }
    ImportOpts o;
    char err[2048];
    if (import_parse_args(&o, argc, argv, err, sizeof err)) {
        fprintf(stderr, "sgtrain import: %s\n", err);
        return 2;
    }
    int rc = import_hf(&o, err, sizeof err);
    if (rc) fprintf(stderr, "sgtrain import: %s\n", err);
    return rc;
}

static int cmd_zeroshot(int argc, char **argv) {
    if (want_help(argc, argv)) {
        zs_usage();
        return 0;
    }
    ZsOpts o;
    zs_defaults(&o);
    char err[2560];
    if (zs_parse_args(&o, argc, argv, err, sizeof err)) {
        fprintf(stderr, "sgtrain zeroshot: %s\n", err);
        return 2;
    }
    int rc = zs_run(&o, err, sizeof err);
    if (rc) fprintf(stderr, "sgtrain zeroshot: %s\n", err);
    return rc;
}

static int cmd_generate(int argc, char **argv) {
    if (want_help(argc, argv)) {
        gen_usage();
        return 0;
    }
    GenOpts o;
    gen_defaults(&o);
    char err[2560];
    if (gen_parse_args(&o, argc, argv, err, sizeof err)) {
        fprintf(stderr, "sgtrain generate: %s\n", err);
        return 2;
    }
    int rc = gen_run(&o, err, sizeof err);
    if (rc) fprintf(stderr, "sgtrain generate: %s\n", err);
    return rc;
}

static int cmd_analyze(int argc, char **argv) {
    if (want_help(argc, argv)) {
        analysis_usage();
        return 0;
    }
    AnalysisOpts o;
    analysis_defaults(&o);
    char err[2048];
    if (analysis_parse_args(&o, argc, argv, err, sizeof err)) {
        fprintf(stderr, "sgtrain analyze: %s\n", err);
        return 2;
    }
    int rc = analysis_run(&o, err, sizeof err);
    if (rc) fprintf(stderr, "sgtrain analyze: %s\n", err);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    int sub_argc = argc - 2;
    char **sub_argv = argv + 2;
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("sgtrain " SG_VERSION "\n");
        return 0;
    }
    if (!strcmp(cmd, "train") || !strcmp(cmd, "info")) {
        if (want_help(sub_argc, sub_argv)) {
            train_help();
            return 0;
        }
        if (!strcmp(cmd, "info")) return cmd_info(sub_argc, sub_argv);
        Config c;
        if (resolve(&c, sub_argc, sub_argv)) return 2;
        if (dist_init(&argc, &argv)) return 2;
        int rc = train_run(&c);
        dist_finalize();
        return rc;
    }
    if (!strcmp(cmd, "export")) return cmd_export(sub_argc, sub_argv);
    if (!strcmp(cmd, "import")) return cmd_import(sub_argc, sub_argv);
    if (!strcmp(cmd, "analyze")) return cmd_analyze(sub_argc, sub_argv);
    if (!strcmp(cmd, "zeroshot")) return cmd_zeroshot(sub_argc, sub_argv);
    if (!strcmp(cmd, "generate")) return cmd_generate(sub_argc, sub_argv);
    if (!strcmp(cmd, "toy")) {
        if (want_help(sub_argc, sub_argv)) {
            toy_usage();
            return 0;
        }
        return toy_main(sub_argc, sub_argv);
    }
    if (!strcmp(cmd, "grads")) return cmd_grads(sub_argc, sub_argv);
    if (!strcmp(cmd, "tiers")) {
        config_print_tiers(stdout);
        return 0;
    }
    if (!strcmp(cmd, "arms")) return cmd_arms(sub_argc, sub_argv);
    fprintf(stderr, "sgtrain: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
