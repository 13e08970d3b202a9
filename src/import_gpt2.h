/* `sgtrain import`: a Hugging Face GPT-2 checkpoint (config.json and
 * model.safetensors, as the gpt2, gpt2-medium, gpt2-large and gpt2-xl
 * repositories hold them or as transformers' save_pretrained writes them)
 * into a sinkgate model file (docs/formats.md, "Safetensors export"), so
 * that analyze, zeroshot and generate take pretrained GPT-2 as they take a
 * trained arm: Appendix F's incidence survey (Table 12) on the models the
 * paper measured (docs/import.md). */
#ifndef SG_IMPORT_GPT2_H
#define SG_IMPORT_GPT2_H

#include <stddef.h>

typedef struct {
    const char *src; /* a directory with config.json and model.safetensors, or that file */
    const char *out; /* the sinkgate .safetensors to write */
    int quiet;
} ImportOpts;

void import_usage(void);
int import_parse_args(ImportOpts *o, int argc, char **argv, char *err, size_t errlen);
/* 0 done; 2 bad input (err says what; nothing written); 1 failure. */
int import_gpt2(const ImportOpts *o, char *err, size_t errlen);

#endif
