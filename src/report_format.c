/* Text of a report: a growing buffer, and the cells of its CSV, Markdown and JSON. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

void bprintf(Buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t c = b->cap ? b->cap : 65536;
        while (c <= b->n + (size_t)k) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
}

/* CSV field: quoted when it holds a comma, quote or newline. */
void csv_str(Buf *b, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        bprintf(b, "%s", s);
        return;
    }
    bprintf(b, "\"");
    for (; *s; s++) bprintf(b, *s == '"' ? "\"\"" : "%c", *s);
    bprintf(b, "\"");
}

void csv_num(Buf *b, double x, int present) {
    if (present && isfinite(x)) bprintf(b, "%.17g", x);
}

/* Markdown cells.  Differences: "-0.0185 ± 0.0033 (3/3)": mean ± SE over the
 * paired seeds, then how many pairs improved out of how many. */
void md_paired(Buf *b, Paired p, int sign) {
    if (p.n == 0) {
        bprintf(b, " – |");
        return;
    }
    double m = sign * p.mean;
    if (p.n == 1) bprintf(b, " %+.4f (1 seed) |", m);
    else bprintf(b, " %+.4f ± %.4f (%d/%d) |", m, p.se, sign > 0 ? p.improved : p.n - p.improved, p.n);
}

/* {"n", "mean", "se"}: a plain mean (se null for one value); NULL for none */
json_object *j_mean(Paired p) {
    if (p.n == 0) return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "n", json_object_new_int(p.n));
    json_object_object_add(o, "mean", json_object_new_double(p.mean));
    json_object_object_add(o, "se", p.n > 1 ? json_object_new_double(p.se) : NULL);
    return o;
}

/* the same for a paired difference, signed, with its count of improved seeds */
json_object *j_paired(Paired p, int sign) {
    p.mean *= sign;
    json_object *o = j_mean(p);
    if (o) json_object_object_add(o, "improved", json_object_new_int(p.improved));
    return o;
}

char *path_cat(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}
