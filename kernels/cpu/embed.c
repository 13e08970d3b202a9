/* Token + position embedding, with the optional sink token of the
 * `sinktoken` arm prepended at position 0 (it has no positional embedding;
 * real tokens keep positions 0..T-1).  Without wpe (rotary positions) the
 * rows are the token embeddings alone.
 *
 * The backward scatters rows into dwte by token id.  Several rows can hit the
 * same token, so threads split the *columns* and every column is summed over
 * rows in row order: no atomics and the same bits for any thread count. */
#include <omp.h>

#include "ops.h"

void op_embed_fwd(real *out, const int32_t *tokens, const real *wte,
                  const real *wpe, const real *sink, int B, int T, int C) {
    int Tp = sink ? T + 1 : T, off = sink ? 1 : 0;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        real *o = out + (size_t)b * Tp * C;
        if (sink)
            for (int c = 0; c < C; c++) o[c] = sink[c];
        for (int t = 0; t < T; t++) {
            const real *e = wte + (size_t)tokens[b * T + t] * C;
            real *y = o + (size_t)(t + off) * C;
            if (!wpe) {
                for (int c = 0; c < C; c++) y[c] = e[c];
                continue;
            }
            const real *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) y[c] = e[c] + p[c];
        }
    }
}

void op_embed_bwd(real *dwte, real *dwpe, real *dsink, const real *dout,
                  const int32_t *tokens, int B, int T, int C) {
    int Tp = dsink ? T + 1 : T, off = dsink ? 1 : 0;
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int c0 = (int)((long)C * id / nt), c1 = (int)((long)C * (id + 1) / nt);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                const real *g = dout + ((size_t)b * Tp + t + off) * C;
                real *e = dwte + (size_t)tokens[b * T + t] * C;
                for (int c = c0; c < c1; c++) e[c] += g[c];
            }
    }
    if (dwpe) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            real *p = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const real *g = dout + ((size_t)b * Tp + t + off) * C;
                for (int c = 0; c < C; c++) p[c] += g[c];
            }
        }
    }
    if (dsink)
        for (int b = 0; b < B; b++) {
            const real *g = dout + (size_t)b * Tp * C;
            for (int c = 0; c < C; c++) dsink[c] += g[c];
        }
}
