/* Run configuration: tiers (Table 3 plus CPU tiers), a field table that
 * drives parsing from the command line and YAML files, validation, and the
 * resolved config that is saved with every run.
 *
 * Precedence: tier defaults < --config FILE (in order given) < --key value. */
#ifndef SG_CONFIG_H
#define SG_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define CFG_STR 256
#define CFG_PATH 1024

typedef struct {
    char tier[CFG_STR];
    char arm[CFG_STR];
    /* model */
    int n_layer, n_head, n_embd, block_size, vocab_size;
    int ln_bias;        /* 0: LayerNorm without bias (paper default) */
    int linear_bias;    /* 0: linear layers without bias (paper default; GPT-2 has them) */
    int gelu_tanh;      /* 0: exact erf GELU (paper default; GPT-2 uses the tanh form) */
    double rotary_base; /* 10000 */
    int rotary_dims;    /* 0: learned absolute positions (paper default; GPT-NeoX rotates queries and keys) */
    int parallel_residual; /* 0: sequential block (paper default; GPT-NeoX runs attention and MLP side by side) */
    int tie_embeddings; /* 1: the LM head is wte (paper default; GPT-NeoX unties it) */
    /* "" (trained runs): the vocabulary is the data manifest's; 64 hex
     * digits: the tok_sha256 of the vocabulary the model's ids mean (imported
     * with its tokenizer); "unknown": imported without one */
    char vocab_sha256[CFG_STR];
    double gate_beta;   /* norm-gate sharpness, 8 */
    double init_std;    /* 0.02 */
    /* training */
    long seed;
    int micro_batch, grad_accum;
    long iters, warmup;
    double lr, lr_min, beta1, beta2, adam_eps, weight_decay, grad_clip;
    /* evaluation */
    long val_every;         /* 0: only the final evaluation */
    int val_batches;        /* during training (16) */
    int val_batches_final;  /* final value (64) */
    long val_seed;          /* shared by every run, never the run's seed */
    /* io */
    char data[CFG_PATH];    /* directory holding val.bin and train_*.bin */
    char out[CFG_PATH];     /* run directory */
    long ckpt_every;        /* 0: checkpoint only at the end and on signals */
    long log_every;
    long stop_at;           /* time-boxed jobs: checkpoint and exit 75 at this step */
    int threads;            /* 0: OpenMP's default */
    int zero;               /* ZeRO stage: 1 shards the AdamW state over MPI ranks (dist.h) */
    double bucket_mb;       /* gradient sums started during the backward, per this many MiB (grad_sync.h) */
    int auto_micro_batch;   /* the step's micro_batch x grad_accum sequences split afresh (batch_split.h) */
    double peak_tflops;     /* one device's dense bf16 peak for MFU; 0: from the device's name (mfu.h) */
    long profile_every;     /* time each op of every this-many-th step (profile.h); 0: off */
} Config;

typedef enum { CF_INT, CF_LONG, CF_DOUBLE, CF_STR, CF_PATH, CF_BOOL } ConfigType;

/* Field roles:
 *  CF_RUN  changes what is trained; a checkpoint must agree on it to resume.
 *  CF_IO   where and how often things are written; free to change on resume. */
enum { CF_RUN = 1, CF_IO = 2 };

typedef struct {
    const char *key;
    ConfigType type;
    size_t offset;
    int role;
    const char *help;
} ConfigField;

const ConfigField *config_fields(int *n);
const ConfigField *config_field(const char *key);

/* Tiers: 0 on success; on failure err names the tier and lists the known ones. */
int config_from_tier(Config *c, const char *tier, char *err, size_t errlen);
const char *config_tier_names(void);
/* One line per tier: name, layers, heads, width, context, batch, iters, warmup. */
void config_print_tiers(FILE *f);

/* Set one field from text; checks the type and range of that field. */
int config_set(Config *c, const char *key, const char *value, char *err, size_t errlen);
/* A flat YAML mapping of field: value.  Errors carry file:line:column. */
int config_load_yaml(Config *c, const char *path, char *err, size_t errlen);
/* The same from a buffer (a checkpoint's saved config); name is used in errors. */
int config_load_yaml_buf(Config *c, const char *text, size_t len, const char *name,
                         char *err, size_t errlen);
/* The whole command line of `sgtrain train`: --tier, --arm, --config FILE,
 * --KEY VALUE and --KEY=VALUE for every field.  Unknown flags are errors. */
int config_from_args(Config *c, int argc, char **argv, char *err, size_t errlen);
/* Cross-field checks (n_embd divisible by n_head, warmup < iters, ...). */
int config_validate(const Config *c, char *err, size_t errlen);

/* Resolved config as YAML (loadable with --config) and as a JSON object. */
int config_write_yaml(const Config *c, FILE *f);
int config_write_json(const Config *c, FILE *f);
int config_to_yaml_string(const Config *c, char **out); /* malloc'd */
/* Names every CF_RUN field on which a and b differ, "" if none; returns count. */
int config_diff_run(const Config *a, const Config *b, char *out, size_t outlen);

#endif
