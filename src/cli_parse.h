/* Command-line values shared by the subcommands (analyze, zeroshot, toy). */
#ifndef SG_CLI_PARSE_H
#define SG_CLI_PARSE_H

#include <stddef.h>

/* A comma-separated list of names -> a bit mask (bit from(name)); "all" sets
 * the n low bits.  An unknown or empty entry fails with a message naming
 * FLAG and listing KNOWN.  0, or -1 with err. */
int cli_name_mask(const char *flag, const char *v, int (*from)(const char *), int n, const char *known, int *mask,
                  char *err, size_t errlen);

/* The flag argv[*i] with its value: "--key=value", or "--key" followed by
 * the value in the next argument (then *i advances).  flag receives the key
 * with '_' spelled '-' (flaglen bytes); a missing value fails with a message.
 * 0, or -1 with err. */
int cli_flag_value(int argc, char **argv, int *i, char *flag, size_t flaglen, const char **value, char *err,
                   size_t errlen);

/* An integer in [lo, hi], or a message naming FLAG.  0, or -1 with err. */
int cli_long(const char *flag, const char *v, long lo, long hi, long *out, char *err, size_t errlen);

/* A finite number in [lo, hi], or a message naming FLAG.  0, or -1 with err. */
int cli_double(const char *flag, const char *v, double lo, double hi, double *out, char *err, size_t errlen);

/* One argument of a subcommand that takes RUN_DIR|CHECKPOINT, --quiet and
 * flags with values (analyze, zeroshot): a positional argument becomes
 * *src (a second one fails), --quiet sets *quiet; for these it returns 1.
 * Any other argument is a flag, read as cli_flag_value reads it: returns 0
 * with its key in flag and its value in *value.  -1 with err. */
int cli_run_arg(int argc, char **argv, int *i, const char **src, int *quiet, char *flag, size_t flaglen,
                const char **value, char *err, size_t errlen);

#endif
