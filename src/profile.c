#include "profile.h"

#include <string.h>

int prof_on = 0;
double prof_secs[PROF_N];
double prof_flops[PROF_N];

const char *prof_name(ProfCat c) {
    static const char *names[PROF_N] = {"matmul", "attention", "gate", "classifier",
                                        "layernorm", "pointwise", "embed", "optimizer"};
    return c < PROF_N ? names[c] : "?";
}

void prof_reset(void) {
    memset(prof_secs, 0, sizeof prof_secs);
    memset(prof_flops, 0, sizeof prof_flops);
}
