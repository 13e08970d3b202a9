/* `sgtrain train`: one run, start to result.json, resumable. */
#ifndef SG_TRAIN_H
#define SG_TRAIN_H

#include "config.h"

/* Exit statuses of a run (documented in README.md). */
enum {
    TRAIN_OK = 0,          /* finished, or already finished */
    TRAIN_FAILED = 1,      /* non-finite loss, I/O failure */
    TRAIN_BAD_INPUT = 2,   /* flags, config, data or checkpoint rejected */
    TRAIN_INTERRUPTED = 75 /* SIGUSR1/SIGTERM: checkpoint saved, rerun to resume */
};

int train_run(const Config *c);

#endif
