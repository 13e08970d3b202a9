/* Rotary position embedding (ops.h, op_rope): a rotation of each pair
 * (x_i, x_{i+h}) of a head's first rd dims by the position's angle, read
 * from the caller's cos/sin table. */
#include "cpu_common.h"
#include "ops.h"

void op_rope(real *q, real *k, int ld, const real *cs, int B, int T, int H, int d, int rd, int inverse) {
    const int h = rd / 2;
    const real sg = inverse ? -1 : 1;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)B * T; r++) {
        const real *c = cs + (size_t)(r % T) * rd, *s = c + h;
        for (int which = 0; which < 2; which++) {
            real *row = (which ? k : q) + (size_t)r * ld;
            for (int j = 0; j < H; j++) {
                real *x = row + (size_t)j * d;
#pragma omp simd
                for (int i = 0; i < h; i++) {
                    const real a = x[i], b = x[i + h], sn = sg * s[i];
                    x[i] = a * c[i] - b * sn;
                    x[i + h] = b * c[i] + a * sn;
                }
            }
        }
    }
}
