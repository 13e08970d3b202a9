/* JSON written by hand (result.json, the benchmarks' reports): the one
 * piece that needs care, a string with its escapes (RFC 8259, 7). */
#ifndef SG_JSON_OUT_H
#define SG_JSON_OUT_H

#include <stdio.h>

/* s as a quoted JSON string: " and \ escaped, control characters as \n,
 * \t ... or \u00XX; bytes from 0x80 up pass as they are (UTF-8). */
void json_put_string(FILE *f, const char *s);

#endif
