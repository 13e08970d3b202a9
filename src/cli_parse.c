#include "cli_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_long(const char *flag, const char *v, long lo, long hi, long *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        snprintf(err, errlen, "%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_double(const char *flag, const char *v, double lo, double hi, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_name_mask(const char *flag, const char *v, int (*from)(const char *), int n, const char *known, int *mask,
                  char *err, size_t errlen) {
    if (!strcmp(v, "all")) {
        *mask = (1 << n) - 1;
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    *mask = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = from(t);
        if (k < 0) {
            snprintf(err, errlen, "%s: unknown '%s' (expected %s, or all)", flag, t, known);
            return -1;
        }
        *mask |= 1 << k;
    }
    if (!*mask) {
        snprintf(err, errlen, "%s: empty list (expected %s, or all)", flag, known);
        return -1;
    }
    return 0;
}

int cli_flag_value(int argc, char **argv, int *i, char *flag, size_t flaglen, const char **value, char *err,
                   size_t errlen) {
    const char *a = argv[*i], *eq = strchr(a, '=');
    if (eq) {
        snprintf(flag, flaglen, "%.*s", (int)(eq - a), a);
        *value = eq + 1;
    } else {
        snprintf(flag, flaglen, "%s", a);
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "%s needs a value", flag);
            return -1;
        }
        *value = argv[++*i];
    }
    for (char *p = flag + (strncmp(flag, "--", 2) ? 0 : 2); *p; p++) *p = *p == '_' ? '-' : *p;
    return 0;
}

int cli_run_arg(int argc, char **argv, int *i, const char **src, int *quiet, char *flag, size_t flaglen,
                const char **value, char *err, size_t errlen) {
    const char *a = argv[*i];
    if (a[0] != '-' || !a[1]) {
        if (*src) {
            snprintf(err, errlen, "one run or checkpoint only (got '%s' and '%s')", *src, a);
            return -1;
        }
        *src = a;
        return 1;
    }
    if (!strcmp(a, "--quiet")) {
        *quiet = 1;
        return 1;
    }
    return cli_flag_value(argc, argv, i, flag, flaglen, value, err, errlen);
}
