/* `sgtrain generate`: text from a trained model, sampled token by token
 * through the key-value cache (kvcache.h) with the choices of next_token.h
 * (docs/generate.md). */
#ifndef SG_GENERATE_H
#define SG_GENERATE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *src;          /* run directory or checkpoint file */
    const char *prompt;       /* the text to continue, or NULL */
    const char *prompt_file;  /* ... read from this file, or NULL */
    const char *vocab;        /* NULL: the run's data manifest's */
    const char *json;         /* also write the samples here, or NULL */
    long tokens;              /* new tokens a sample at most; 0: the default */
    int samples;
    double temperature, top_p;
    int top_k;
    uint64_t seed;
    int ignore_eot;
    int telemetry;            /* record each draw's attention on row 0 and the phantom, and its gate */
    int threads;
    int quiet;
} GenOpts;

void gen_defaults(GenOpts *o);
void gen_usage(void);
int gen_parse_args(GenOpts *o, int argc, char **argv, char *err, size_t errlen);
/* 0 done; 2 bad input (err says what; nothing written); 1 failure. */
int gen_run(const GenOpts *o, char *err, size_t errlen);

#endif
