/* The helpers every case of test_gpu_ops shares: random inputs, device
 * copies, and the comparisons with their tolerances (test_gpu_ops.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

uint64_t g_key = 12345;
long g_ctr;

real *host_rand(long n, double scale) {
    real *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (long i = 0; i < n; i++) p[i] = (real)(scale * rng_normal(g_key, (uint64_t)g_ctr++));
    return p;
}

real *dev_of(const real *h, long n) {
    real *d = gpu_ops.alloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (n > 0) gpu_ops.upload(d, h, (size_t)n * sizeof *d);
    return d;
}

real *back(const real *d, long n) {
    real *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (n > 0) gpu_ops.download(h, d, (size_t)n * sizeof *h);
    return h;
}

double maxabs(const real *x, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Compare a device result with the host reference. */
/* |dev - ref| <= widen (atol + rtol |ref|) elementwise, with atol and rtol
 * the bf16 (lowp) or fp32 rule's at the given scale */
void compare_widened(const char *what, const real *dev, const real *ref, long n, int lowp, double scale,
                     double widen) {
    real *got = back(dev, n);
    double *a = calloc((size_t)(n > 0 ? n : 1), sizeof *a), *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
    for (long i = 0; i < n; i++) a[i] = got[i], b[i] = ref[i];
    double atol = lowp ? 2e-2 * scale + 1e-6 : 1e-5 * (scale > 1 ? scale : 1), rtol = lowp ? 2e-2 : 1e-4;
    long worst = 0;
    double e = check_max_err(a, b, n, widen * atol, widen * rtol, &worst);
    CHECK(e <= 1, "%s: worst %.3g of %g x the tolerance (scale %.4g) at %ld (gpu %.7g, cpu %.7g)", what, e, widen,
          scale, worst, n ? a[worst] : 0, n ? b[worst] : 0);
    free(got), free(a), free(b);
}

void compare(const char *what, const real *dev, const real *ref, long n, int lowp, double scale) {
    compare_widened(what, dev, ref, n, lowp, scale, 1);
}

/* the scale: the reference's largest magnitude */
void same(const char *what, const real *dev, const real *ref, long n, int lowp) {
    compare(what, dev, ref, n, lowp, maxabs(ref, n));
}

void bitwise(const char *what, const real *d1, const real *d2, long n) {
    real *a = back(d1, n), *b = back(d2, n);
    CHECK(!memcmp(a, b, (size_t)n * sizeof *a), "%s: two runs differ (determinism)", what);
    free(a), free(b);
}

/* the matmuls keep bf16 copies and take twins unless SG_MATMUL_KEEP=0 */
int twins_on(void) {
    const char *e = getenv("SG_MATMUL_KEEP");
    return !(e && e[0] == '0');
}

/* two device results, bitwise; `of` names the reference in the message */
void bits_as(const char *what, const char *of, const real *d1, const real *d2, long n) {
    real *a = back(d1, n), *b = back(d2, n);
    long i = 0;
    while (i < n && !memcmp(a + i, b + i, sizeof *a)) i++;
    CHECK(i == n, "%s: not the bits of %s (first difference at %ld: %.9g vs %.9g)", what, of, i, i < n ? a[i] : 0,
          i < n ? b[i] : 0);
    free(a), free(b);
}

/* d[0, n) at a new address (download, then upload) */
real *dev_copy(const real *d, long n) {
    real *h = back(d, n), *c = dev_of(h, n);
    free(h);
    return c;
}

int emulated(void) { return strstr(gpu_ops.backend(), "emulated") != NULL; }

/* round to nearest even, as __float2bfloat16 (finite x) */
float bf16_round(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    b += 0x7fffu + ((b >> 16) & 1u);
    b &= 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}
