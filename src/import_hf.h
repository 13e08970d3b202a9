/* `sgtrain import`: a Hugging Face checkpoint (config.json and
 * model.safetensors, as the Hub's repositories hold them or as
 * transformers' save_pretrained writes them) of GPT-2 (gpt2 .. gpt2-xl) or
 * GPT-NeoX (the Pythia suite) into a sinkgate model file (docs/formats.md,
 * "Safetensors export"), so that analyze, zeroshot and generate take a
 * pretrained model as they take a trained arm: Appendix F's incidence
 * survey (Table 12) on the models the paper measured (docs/import.md). */
#ifndef SG_IMPORT_HF_H
#define SG_IMPORT_HF_H

#include <stddef.h>

typedef struct {
    const char *src; /* a directory with config.json and model.safetensors, or that file */
    const char *out; /* the sinkgate .safetensors to write */
    int quiet;
} ImportOpts;

void import_usage(void);
int import_parse_args(ImportOpts *o, int argc, char **argv, char *err, size_t errlen);
/* 0 done; 2 bad input (err says what; nothing written); 1 failure. */
int import_hf(const ImportOpts *o, char *err, size_t errlen);

#endif
