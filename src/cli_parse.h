/* Command-line values shared by the subcommands (analyze, toy). */
#ifndef SG_CLI_PARSE_H
#define SG_CLI_PARSE_H

#include <stddef.h>

/* A comma-separated list of names -> a bit mask (bit from(name)); "all" sets
 * the n low bits.  An unknown or empty entry fails with a message naming
 * FLAG and listing KNOWN.  0, or -1 with err. */
int cli_name_mask(const char *flag, const char *v, int (*from)(const char *), int n, const char *known, int *mask,
                  char *err, size_t errlen);

#endif
