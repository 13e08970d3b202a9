#include "arms.h"

#include <string.h>

/* Table 4 of the paper. */
static const Arm ARMS[] = {
    {"baseline",  "baseline",        ZERO_NONE,            FILTER_NONE, FSLOT_VALUE},
    {"offbyone",  "off-by-one",      ZERO_PHANTOM_FIXED,   FILTER_NONE, FSLOT_VALUE},
    {"sinklogit", "sink logit",      ZERO_PHANTOM_LEARNED, FILTER_NONE, FSLOT_VALUE},
    {"sinktoken", "sink token",      ZERO_TOKEN,           FILTER_NONE, FSLOT_VALUE},
    {"normgate",  "norm gate",       ZERO_NONE,            FILTER_NORM, FSLOT_VALUE},
    {"renorm",    "renorm twin",     ZERO_NONE,            FILTER_NORM, FSLOT_ROUTING},
    {"projgate",  "projection gate", ZERO_NONE,            FILTER_PROJ, FSLOT_VALUE},
    {"combo",     "combo",           ZERO_PHANTOM_LEARNED, FILTER_NORM, FSLOT_VALUE},
    {"combo2",    "combo2",          ZERO_PHANTOM_LEARNED, FILTER_PROJ, FSLOT_VALUE},
};

int arm_count(void) { return (int)(sizeof ARMS / sizeof ARMS[0]); }
const Arm *arm_at(int i) { return (i >= 0 && i < arm_count()) ? &ARMS[i] : NULL; }

const Arm *arm_find(const char *name) {
    for (int i = 0; i < arm_count(); i++)
        if (strcmp(ARMS[i].name, name) == 0) return &ARMS[i];
    return NULL;
}

const char *arm_names(void) {
    return "baseline, offbyone, sinklogit, sinktoken, normgate, renorm, projgate, combo, combo2";
}
