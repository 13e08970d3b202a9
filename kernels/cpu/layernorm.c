/* LayerNorm, eps 1e-5, biased variance (as PyTorch):
 *   xhat = (x - mean) * rstd,  rstd = 1/sqrt(var + eps),  y = xhat * w + b
 * Backward with dxhat = dy * w:
 *   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *   dw = sum_rows dy * xhat,  db = sum_rows dy
 * Row statistics are accumulated in double: at C = 1024 a float running sum
 * loses digits that the gradient check would otherwise have to tolerate. */
#include <stdlib.h>
#include <string.h>

#include "cpu_common.h"
#include "ops.h"

#define LN_EPS 1e-5

/* One row: x [C] with s = sum x (double, summed in index order, so the
 * caller may fuse it into the pass that produces x) -> y [C], mean, rstd. */
static void ln_row(real *y, real *mean, real *rstd, const real *x, double s,
                   const real *w, const real *b, int C) {
    double mu = s / C, v = 0;
    for (int c = 0; c < C; c++) {
        double dx = x[c] - mu;
        v += dx * dx;
    }
    real r = (real)(1.0 / sqrt(v / C + LN_EPS));
    real m = (real)mu;
    if (b)
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * w[c] + b[c];
    else
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * w[c];
    *mean = m;
    *rstd = r;
}

void op_layernorm_fwd(real *out, real *mean, real *rstd, const real *inp,
                      const real *w, const real *b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *x = inp + (size_t)i * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += x[c];
        ln_row(out + (size_t)i * C, mean + i, rstd + i, x, s, w, b, C);
    }
}

/* res = a + b (the float add of op_add), and its row sum taken in the same
 * pass; then the LayerNorm of op_layernorm_fwd: the same bits as the two ops
 * in sequence.  Element c of a row is read before res[c] is written, so res
 * may be a or b. */
void op_residual_layernorm_fwd(real *res, real *out, real *mean, real *rstd,
                               const real *a, const real *b, const real *w,
                               const real *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        size_t o = (size_t)i * C;
        real *x = res + o;
        double s = 0;
        for (int c = 0; c < C; c++) {
            real v = a[o + c] + b[o + c];
            x[c] = v;
            s += v;
        }
        ln_row(out + o, mean + i, rstd + i, x, s, w, bias, C);
    }
}

void op_layernorm_bwd(real *dinp, real *dw, real *db, const real *dout,
                      const real *inp, const real *w, const real *mean,
                      const real *rstd, int N, int C) {
    int nch = (N + SG_ROW_CHUNK - 1) / SG_ROW_CHUNK;
    real *part = calloc((size_t)nch * 2 * C, sizeof(real));
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < nch; ch++) {
        real *pw = part + (size_t)ch * 2 * C, *pb = pw + C;
        int i1 = (ch + 1) * SG_ROW_CHUNK < N ? (ch + 1) * SG_ROW_CHUNK : N;
        for (int i = ch * SG_ROW_CHUNK; i < i1; i++) {
            const real *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
            real *dx = dinp + (size_t)i * C;
            real m = mean[i], r = rstd[i];
            double sd = 0, sdx = 0;
            for (int c = 0; c < C; c++) {
                real xh = (x[c] - m) * r, g = dy[c] * w[c];
                sd += g;
                sdx += g * xh;
                pw[c] += dy[c] * xh;
                pb[c] += dy[c];
            }
            real md = (real)(sd / C), mdx = (real)(sdx / C);
            for (int c = 0; c < C; c++) {
                real xh = (x[c] - m) * r;
                dx[c] += r * (dy[c] * w[c] - md - xh * mdx);
            }
        }
    }
    for (int ch = 0; ch < nch; ch++) {
        const real *pw = part + (size_t)ch * 2 * C, *pb = pw + C;
        for (int c = 0; c < C; c++) dw[c] += pw[c];
        if (db)
            for (int c = 0; c < C; c++) db[c] += pb[c];
    }
    free(part);
}
