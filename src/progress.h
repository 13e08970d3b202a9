/* Training progress: a one-line bar on a terminal, plain log lines
 * otherwise (Slurm logs, pipes). */
#ifndef SG_PROGRESS_H
#define SG_PROGRESS_H

#include <stdio.h>

typedef struct {
    FILE *f;
    int tty;
    long total;
    int dirty; /* a bar is on the current line */
} Progress;

void progress_init(Progress *p, FILE *f, long total_steps);
/* Called every step; prints a bar on a tty, a line every log_every otherwise.
 * mfu: a fraction, or negative where the device's peak is unknown (mfu.h). */
void progress_step(Progress *p, long step, double loss, double lr, double gnorm, double tok_s, double mfu,
                   double elapsed, long log_every);
/* A line that must not be overwritten by the bar (validation, checkpoints). */
void progress_note(Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void progress_done(Progress *p);

#endif
