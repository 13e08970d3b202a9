#include "check.h"

#include <stdarg.h>
#include <stdlib.h>

int check_passed = 0, check_failed = 0;
const char *check_name = "test";

void check_report(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        check_passed++;
        return;
    }
    check_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int check_close_impl(double a, double b, double atol, double rtol) {
    if (isnan(a) || isnan(b)) return 0;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

double check_max_err(const double *a, const double *b, long n, double atol, double rtol,
                     long *worst) {
    double m = 0;
    long w = 0;
    for (long i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (isnan(e)) e = INFINITY;
        if (e > m) {
            m = e;
            w = i;
        }
    }
    if (worst) *worst = w;
    return m;
}

int check_finish(void) {
    printf("%s: %d passed, %d failed\n", check_name, check_passed, check_failed);
    return check_failed > 100 ? 100 : check_failed;
}
