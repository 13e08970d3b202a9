/* Arms are data: one table row per arm says which zero option and which
 * filter it has.  Code asks for capabilities, never compares arm names. */
#ifndef SG_ARMS_H
#define SG_ARMS_H

typedef enum {
    ZERO_NONE = 0,        /* rows of attention sum to one */
    ZERO_PHANTOM_FIXED,   /* phantom key, logit 0, value 0 (off-by-one) */
    ZERO_PHANTOM_LEARNED, /* phantom key, learned logit b_h, value 0 */
    ZERO_TOKEN            /* learned d_model token prepended to the input */
} ZeroOption;

typedef enum { FILTER_NONE = 0, FILTER_NORM, FILTER_PROJ } FilterKind;
typedef enum { FSLOT_VALUE = 0, FSLOT_ROUTING } FilterSlot;

typedef struct {
    const char *name;   /* CLI / file name */
    const char *label;  /* as the paper's tables print it */
    ZeroOption zero;
    FilterKind filter;
    FilterSlot slot;
} Arm;

/* NULL if unknown */
const Arm *arm_find(const char *name);
int arm_count(void);
const Arm *arm_at(int i);
/* comma-separated list of every arm name, for error messages */
const char *arm_names(void);

static inline int arm_has_phantom(const Arm *a) {
    return a->zero == ZERO_PHANTOM_FIXED || a->zero == ZERO_PHANTOM_LEARNED;
}
static inline int arm_has_sink_logit(const Arm *a) { return a->zero == ZERO_PHANTOM_LEARNED; }
static inline int arm_has_sink_token(const Arm *a) { return a->zero == ZERO_TOKEN; }

#endif
