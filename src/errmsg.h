/* Error messages for people: every fallible function takes (err, errlen)
 * and returns -1 after formatting what went wrong into it. */
#ifndef SG_ERRMSG_H
#define SG_ERRMSG_H

#include <stddef.h>

/* vsnprintf into err (NULL or 0 length allowed); always returns -1. */
int sg_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
