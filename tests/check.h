/* Minimal test harness: every test binary links tests/check.c, registers
 * nothing, and calls CHECK and check_finish from main.  Each failed check prints
 * file:line and the values; the binary's exit status is the failure count
 * (capped), and it prints one line "name: N passed, N failed" that the
 * suite runner (tests/run.sh) adds up. */
#ifndef SG_CHECK_H
#define SG_CHECK_H

#include <math.h>
#include <stdio.h>

extern int check_passed, check_failed;
extern const char *check_name;

void check_report(int ok, const char *file, int line, const char *fmt, ...);
/* |a-b| <= atol + rtol*|b| */
int check_close_impl(double a, double b, double atol, double rtol);
/* Max over i of |a_i - b_i| / (atol + rtol*|b_i|); <= 1 means close. */
double check_max_err(const double *a, const double *b, long n, double atol, double rtol,
                     long *worst);
int check_finish(void);

#define CHECK(cond, ...) check_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_CLOSE(a, b, atol, rtol, what)                                        \
    do {                                                                           \
        double check_a_ = (double)(a), check_b_ = (double)(b);                     \
        check_report(check_close_impl(check_a_, check_b_, (atol), (rtol)),         \
                     __FILE__, __LINE__, "%s: got %.10g want %.10g (atol %g rtol %g)", \
                     (what), check_a_, check_b_, (double)(atol), (double)(rtol));   \
    } while (0)

#endif
