/* AdamW exactly as torch.optim.AdamW (decoupled weight decay applied to the
 * parameter before the Adam update; bias corrections folded into the step
 * size and the denominator the way PyTorch does, so the fp32 trajectories
 * agree to rounding).  Whether a tensor decays is decided by the caller from
 * the tensor's role, never here. */
#include <math.h>

#include "cpu_common.h"
#include "ops.h"

void op_adamw(real *p, real *m, real *v, const real *g, long n, double lr,
              double b1, double b2, double eps, double wd, long t, double gscale) {
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    real step = (real)(lr / bc1), sbc2 = (real)sqrt(bc2);
    real decay = (real)(1.0 - lr * wd), rb1 = (real)b1, rb2 = (real)b2, reps = (real)eps;
    real gs = (real)gscale;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        real gi = g[i] * gs;
        real mi = rb1 * m[i] + ((real)1 - rb1) * gi;
        real vi = rb2 * v[i] + ((real)1 - rb2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (RSQRTF(vi) / sbc2 + reps);
    }
}

/* On the CPU each tensor's loop is already one parallel region at memory
 * bandwidth: nothing to gain from fusing them. */
void op_adamw_multi(real *p, real *m, real *v, const real *g, long base,
                    const AdamwSeg *segs, int nseg, double lr, double b1,
                    double b2, double eps, double wd, long t, double gscale) {
    for (int s = 0; s < nseg; s++) {
        const AdamwSeg *q = &segs[s];
        op_adamw(p + q->off, m + (q->off - base), v + (q->off - base), g + q->off, q->n, lr, b1, b2, eps,
                 q->decay ? wd : 0.0, t, gscale);
    }
}

/* Fixed chunks summed in order: the same bits for any thread count. */
double op_sumsq(const real *x, long n) {
    enum { CH = 4096 };
    long nch = (n + CH - 1) / CH;
    double total = 0;
    for (long base = 0; base < nch; base += 256) {
        double part[256];
        long cnt = nch - base < 256 ? nch - base : 256;
#pragma omp parallel for schedule(static)
        for (long c = 0; c < cnt; c++) {
            long i0 = (base + c) * CH, i1 = i0 + CH < n ? i0 + CH : n;
            /* in double across the vector lanes (a sum in index order
             * would be a chain of dependent adds, 8x slower here) */
            double s = 0;
#pragma omp simd reduction(+ : s)
            for (long i = i0; i < i1; i++) {
                const double xi = x[i];
                s += xi * xi;
            }
            part[c] = s;
        }
        for (long c = 0; c < cnt; c++) total += part[c];
    }
    return total;
}
