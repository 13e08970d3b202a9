/* test_gpu_ops: uploads, LayerNorm, the pointwise ops (GELU in both forms),
 * the linear-layer biases, the rotary embedding, AdamW, the embeddings and
 * the value gates. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

/* op_upload through pinned staging (kernels/cuda/upload_staging.cu): the
 * host refills one buffer between uploads, as the model refills its token
 * buffers every micro-batch, and an op reads each upload right after it
 * (op_add, as the embedding reads the tokens).  Ten small uploads cycle
 * through the staging buffers twice and more, and two are over the
 * staging size (copied and waited for).  Every upload, and every sum,
 * must hold the values the host had when it called op_upload.  (The
 * emulator also stops the program if a staging buffer is refilled before
 * its last copy was seen complete.) */
void test_uploads(void) {
    enum { UPLOADS = 12 };
    const long sizes[UPLOADS] = {7, 8192, 300000, 1, 262144, 1000, 262145, 5, 4096, 77, 100000, 33};
    real *host = malloc(sizeof(real) * 300000), *ones = malloc(sizeof(real) * 300000);
    for (long i = 0; i < 300000; i++) ones[i] = 1;
    real *one_d = dev_of(ones, 300000), *dev[UPLOADS], *sum[UPLOADS];
    for (int u = 0; u < UPLOADS; u++) {
        for (long i = 0; i < sizes[u]; i++) host[i] = (real)(1000 * u + i % 997);
        dev[u] = gpu_ops.alloc(sizeof(real) * (size_t)sizes[u]);
        sum[u] = gpu_ops.alloc(sizeof(real) * (size_t)sizes[u]);
        gpu_ops.upload(dev[u], host, sizeof(real) * (size_t)sizes[u]);
        gpu_ops.add(sum[u], dev[u], one_d, sizes[u]);
        for (long i = 0; i < sizes[u]; i++) host[i] = -1; /* reused at once */
    }
    for (int u = 0; u < UPLOADS; u++) {
        real *got = back(dev[u], sizes[u]), *s = back(sum[u], sizes[u]);
        long bad = 0, bad_sum = 0;
        for (long i = 0; i < sizes[u]; i++) {
            bad += got[i] != (real)(1000 * u + i % 997);
            bad_sum += s[i] != (real)(1000 * u + i % 997) + 1;
        }
        CHECK(!bad && !bad_sum, "upload %d (%ld elements): %ld values not the host's at the call, %ld sums wrong", u,
              sizes[u], bad, bad_sum);
        free(got), free(s);
        gpu_ops.free(dev[u]), gpu_ops.free(sum[u]);
    }
    gpu_ops.free(one_d);
    free(host), free(ones);
}

void test_layernorm(int N, int C, int bias) {
    real *x = host_rand((long)N * C, 2), *w = host_rand(C, 1), *b = bias ? host_rand(C, 1) : NULL;
    real *dy = host_rand((long)N * C, 1), *y = calloc((size_t)N * C, sizeof *y), *mu = calloc(N, sizeof *mu),
         *rs = calloc(N, sizeof *rs), *dx = host_rand((long)N * C, 1), *dw = host_rand(C, 1), *db = host_rand(C, 1);
    real *x_d = dev_of(x, (long)N * C), *w_d = dev_of(w, C), *b_d = bias ? dev_of(b, C) : NULL,
         *dy_d = dev_of(dy, (long)N * C), *y_d = dev_of(y, (long)N * C), *mu_d = dev_of(mu, N), *rs_d = dev_of(rs, N),
         *dx_d = dev_of(dx, (long)N * C), *dw_d = dev_of(dw, C), *db_d = dev_of(db, C);
    cpu_ops.layernorm_fwd(y, mu, rs, x, w, b, N, C);
    gpu_ops.layernorm_fwd(y_d, mu_d, rs_d, x_d, w_d, b_d, N, C);
    same("layernorm out", y_d, y, (long)N * C, 0);
    same("layernorm mean", mu_d, mu, N, 0);
    same("layernorm rstd", rs_d, rs, N, 0);
    cpu_ops.layernorm_bwd(dx, dw, bias ? db : NULL, dy, x, w, mu, rs, N, C);
    gpu_ops.layernorm_bwd(dx_d, dw_d, bias ? db_d : NULL, dy_d, x_d, w_d, mu_d, rs_d, N, C);
    same("layernorm dinp (accumulated)", dx_d, dx, (long)N * C, 0);
    same("layernorm dw (accumulated)", dw_d, dw, C, 0);
    if (bias) same("layernorm db (accumulated)", db_d, db, C, 0);
    void *ds[] = {x_d, w_d, b_d, dy_d, y_d, mu_d, rs_d, dx_d, dw_d, db_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w), free(b), free(dy), free(y), free(mu), free(rs), free(dx), free(dw), free(db);
}

/* Residual add + LayerNorm: against the CPU op (fp32 tolerance, as
 * LayerNorm), and bitwise against the CUDA op_add then op_layernorm_fwd,
 * whose reduction order the fused kernel keeps.  alias: 0 res separate,
 * 1 res == a, 2 res == b (on both sides). */
void test_residual_layernorm(int N, int C, int bias, int alias) {
    long n = (long)N * C;
    real *a = host_rand(n, 2), *bb = host_rand(n, 1), *w = host_rand(C, 1), *b = bias ? host_rand(C, 1) : NULL;
    real *res = calloc((size_t)n, sizeof *res), *y = calloc((size_t)n, sizeof *y), *mu = calloc(N, sizeof *mu),
         *rs = calloc(N, sizeof *rs);
    real *a_d = dev_of(a, n), *bb_d = dev_of(bb, n), *w_d = dev_of(w, C), *b_d = bias ? dev_of(b, C) : NULL,
         *res_d = dev_of(res, n), *y_d = dev_of(y, n), *mu_d = dev_of(mu, N), *rs_d = dev_of(rs, N);
    /* the composition on the device, from the untouched inputs */
    real *res2_d = dev_of(res, n), *y2_d = dev_of(y, n), *mu2_d = dev_of(mu, N), *rs2_d = dev_of(rs, N);
    gpu_ops.add(res2_d, a_d, bb_d, n);
    gpu_ops.layernorm_fwd(y2_d, mu2_d, rs2_d, res2_d, w_d, b_d, N, C);

    real *dst = alias == 1 ? a : alias == 2 ? bb : res, *dst_d = alias == 1 ? a_d : alias == 2 ? bb_d : res_d;
    cpu_ops.residual_layernorm_fwd(dst, y, mu, rs, a, bb, w, b, N, C);
    gpu_ops.residual_layernorm_fwd(dst_d, y_d, mu_d, rs_d, a_d, bb_d, w_d, b_d, N, C);
    char what[128], tag[64];
    snprintf(tag, sizeof tag, "N%d C%d bias %d %s", N, C, bias,
             alias == 1 ? "res == a" : alias == 2 ? "res == b" : "res separate");
    snprintf(what, sizeof what, "residual layernorm res %s", tag);
    same(what, dst_d, dst, n, 0);
    snprintf(what, sizeof what, "residual layernorm out %s", tag);
    same(what, y_d, y, n, 0);
    snprintf(what, sizeof what, "residual layernorm mean %s", tag);
    same(what, mu_d, mu, N, 0);
    snprintf(what, sizeof what, "residual layernorm rstd %s", tag);
    same(what, rs_d, rs, N, 0);
    const real *pairs[][2] = {{dst_d, res2_d}, {y_d, y2_d}, {mu_d, mu2_d}, {rs_d, rs2_d}};
    const long lens[] = {n, n, N, N};
    const char *names[] = {"res", "out", "mean", "rstd"};
    for (int k = 0; k < 4; k++) {
        real *f = back(pairs[k][0], lens[k]), *g = back(pairs[k][1], lens[k]);
        CHECK(!memcmp(f, g, (size_t)lens[k] * sizeof *f),
              "residual layernorm %s %s: not the bits of add then layernorm", names[k], tag);
        free(f), free(g);
    }
    void *ds[] = {a_d, bb_d, w_d, b_d, res_d, y_d, mu_d, rs_d, res2_d, y2_d, mu2_d, rs2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(a), free(bb), free(w), free(b), free(res), free(y), free(mu), free(rs);
}

void test_pointwise(long n) {
    real *x = host_rand(n, 3), *x2 = host_rand(n, 1), *dy = host_rand(n, 1), *y = calloc(n, sizeof *y),
         *dx = calloc(n, sizeof *dx);
    real *x_d = dev_of(x, n), *x2_d = dev_of(x2, n), *dy_d = dev_of(dy, n), *y_d = dev_of(y, n), *dx_d = dev_of(dx, n);
    cpu_ops.gelu_fwd(y, x, n);
    gpu_ops.gelu_fwd(y_d, x_d, n);
    same("gelu fwd", y_d, y, n, 0);
    cpu_ops.gelu_bwd(dx, x, dy, n);
    gpu_ops.gelu_bwd(dx_d, x_d, dy_d, n);
    same("gelu bwd", dx_d, dx, n, 0);
    cpu_ops.add(y, x, x2, n);
    gpu_ops.add(y_d, x_d, x2_d, n);
    same("add", y_d, y, n, 0);
    /* AdamW, step 3, with a clip factor */
    real *p = host_rand(n, 1), *m = host_rand(n, 0.1), *v = host_rand(n, 0.1), *g = host_rand(n, 1);
    for (long i = 0; i < n; i++) v[i] = v[i] * v[i];
    real *p_d = dev_of(p, n), *m_d = dev_of(m, n), *v_d = dev_of(v, n), *g_d = dev_of(g, n);
    cpu_ops.adamw(p, m, v, g, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    gpu_ops.adamw(p_d, m_d, v_d, g_d, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
    same("adamw p", p_d, p, n, 0);
    same("adamw m", m_d, m, n, 0);
    same("adamw v", v_d, v, n, 0);
    double s1 = cpu_ops.sumsq(g, n), s2 = gpu_ops.sumsq(g_d, n), s3 = gpu_ops.sumsq(g_d, n);
    CHECK(fabs(s1 - s2) <= 1e-10 * s1, "sumsq %.17g vs cpu %.17g", s2, s1);
    CHECK(s2 == s3, "sumsq twice: %.17g %.17g (determinism)", s2, s3);
    void *ds[] = {x_d, x2_d, dy_d, y_d, dx_d, p_d, m_d, v_d, g_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(x2), free(dy), free(y), free(dx), free(p), free(m), free(v), free(g);
}

/* GELU, tanh form (ops.h; kernels/cuda/elementwise.cu, which shares the erf
 * form's kernels): as test_pointwise's GELU, x ~ N(0, 3), dy ~ N(0, 1), the
 * fp32 tolerance against the CPU op; each op run twice, bitwise; and on
 * tensors one element off 16-byte alignment (the scalar kernels) the bits
 * of the aligned run (the vector path, the n % 4 left scalar). */
void test_gelu_tanh(long n) {
    real *x = host_rand(n, 3), *dy = host_rand(n, 1), *y = calloc((size_t)n, sizeof *y),
         *dx = calloc((size_t)n, sizeof *dx);
    real *x_d = dev_of(x, n), *dy_d = dev_of(dy, n), *y_d = dev_of(y, n), *dx_d = dev_of(dx, n),
         *y2_d = dev_of(y, n), *dx2_d = dev_of(dx, n);
    char what[96];
    cpu_ops.gelu_tanh_fwd(y, x, n);
    gpu_ops.gelu_tanh_fwd(y_d, x_d, n);
    gpu_ops.gelu_tanh_fwd(y2_d, x_d, n);
    snprintf(what, sizeof what, "gelu_tanh fwd (n %ld)", n);
    same(what, y_d, y, n, 0);
    bitwise(what, y_d, y2_d, n);
    cpu_ops.gelu_tanh_bwd(dx, x, dy, n);
    gpu_ops.gelu_tanh_bwd(dx_d, x_d, dy_d, n);
    gpu_ops.gelu_tanh_bwd(dx2_d, x_d, dy_d, n);
    snprintf(what, sizeof what, "gelu_tanh bwd (n %ld)", n);
    same(what, dx_d, dx, n, 0);
    bitwise(what, dx_d, dx2_d, n);
    /* the scalar kernels: x, dy and the outputs at buffer + 1 */
    real *buf[4], *d[4];
    for (int k = 0; k < 4; k++) {
        buf[k] = gpu_ops.alloc(sizeof(real) * (size_t)(n + 1));
        d[k] = buf[k] + 1;
    }
    gpu_ops.upload(d[0], x, sizeof(real) * (size_t)n);
    gpu_ops.upload(d[1], dy, sizeof(real) * (size_t)n);
    gpu_ops.gelu_tanh_fwd(d[2], d[0], n);
    gpu_ops.gelu_tanh_bwd(d[3], d[0], d[1], n);
    snprintf(what, sizeof what, "gelu_tanh fwd (n %ld), tensors off 16-byte alignment", n);
    bits_as(what, "the aligned tensors' vector path", d[2], y_d, n);
    snprintf(what, sizeof what, "gelu_tanh bwd (n %ld), tensors off 16-byte alignment", n);
    bits_as(what, "the aligned tensors' vector path", d[3], dx_d, n);
    for (int k = 0; k < 4; k++) gpu_ops.free(buf[k]);
    void *ds[] = {x_d, dy_d, y_d, dx_d, y2_d, dx2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(dy), free(y), free(dx);
}

/* Linear-layer biases (ops.h; kernels/cuda/bias.cu), M rows of N.  The add:
 * out ~ N(0, 1) plus bias ~ N(0, 1), the fp32 tolerance against the CPU op
 * and its bits (one float add an element on both).  The gradient: db
 * accumulates, from N(0, 1) on both sides, dout ~ N(0, 1) (the sums about
 * sqrt(M)); the fp32 tolerance against the CPU's sums in double; run twice
 * from the same db, bitwise (a fixed-order reduction, no atomics).  shift:
 * out and dout one element off 16-byte alignment (the add's scalar kernel
 * even when N % 4 == 0). */
void test_bias(int M, int N, int shift) {
    const long n = (long)M * N;
    real *out = host_rand(n, 1), *bias = host_rand(N, 1), *dout = host_rand(n, 1), *db = host_rand(N, 1);
    real *out_buf = gpu_ops.alloc(sizeof(real) * (size_t)(n + 1)),
         *dout_buf = gpu_ops.alloc(sizeof(real) * (size_t)(n + 1));
    real *out_d = out_buf + shift, *dout_d = dout_buf + shift;
    gpu_ops.upload(out_d, out, sizeof(real) * (size_t)n);
    gpu_ops.upload(dout_d, dout, sizeof(real) * (size_t)n);
    real *bias_d = dev_of(bias, N), *db_d = dev_of(db, N), *db2_d = dev_of(db, N);
    char what[96];
    snprintf(what, sizeof what, "bias add (M %d, N %d%s)", M, N, shift ? ", off alignment" : "");
    cpu_ops.bias_add(out, bias, M, N);
    gpu_ops.bias_add(out_d, bias_d, M, N);
    same(what, out_d, out, n, 0);
    real *got = back(out_d, n);
    CHECK(!memcmp(got, out, sizeof(real) * (size_t)n), "%s: not the CPU's bits", what);
    free(got);
    snprintf(what, sizeof what, "bias bwd db (accumulated; M %d, N %d%s)", M, N, shift ? ", off alignment" : "");
    cpu_ops.bias_bwd(db, dout, M, N);
    gpu_ops.bias_bwd(db_d, dout_d, M, N);
    gpu_ops.bias_bwd(db2_d, dout_d, M, N);
    same(what, db_d, db, N, 0);
    bitwise(what, db_d, db2_d, N);
    void *ds[] = {out_buf, dout_buf, bias_d, db_d, db2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(out), free(bias), free(dout), free(db);
}

/* Rotary position embedding (ops.h; kernels/cuda/rope.cu): q and k as
 * parts of one qkv buffer of rows ld = 3C (C = H d), q at 0 and k at C, as
 * the model calls it; qkv ~ N(0, 1); cs the model's table (src/model.c,
 * build_rope, base 10000) for positions [0, pos0 + T), passed from row
 * pos0.  The forward and the inverse (on the forward's output): the fp32
 * tolerance against the CPU op and its bits (each element two products and
 * a sum, each rounded on its own on both sides); each run twice, bitwise;
 * and the inverse of the forward gives x back within 1e-6 x max(1, largest
 * |x|).  The whole qkv is compared, so the rest of each head and v must
 * come back as they were. */
void test_rope(int B, int T, int H, int d, int rd, int pos0) {
    const int C = H * d, ld = 3 * C, h = rd / 2, rows_cs = pos0 + T;
    const long n = (long)B * T * ld;
    real *x = host_rand(n, 1), *cs = malloc(sizeof(real) * (size_t)rows_cs * rd), *y = malloc(sizeof(real) * n);
    for (int i = 0; i < h; i++) {
        const float e = (float)(2 * i) / (float)rd, inv = 1.0f / powf(10000.0f, e);
        for (int p = 0; p < rows_cs; p++) {
            const float a = (float)p * inv;
            cs[(size_t)p * rd + i] = (real)cos((double)a);
            cs[(size_t)p * rd + h + i] = (real)sin((double)a);
        }
    }
    real *cs_d = dev_of(cs, (long)rows_cs * rd), *y_d = dev_of(x, n), *y2_d = dev_of(x, n);
    const real *c = cs + (size_t)pos0 * rd, *c_d = cs_d + (size_t)pos0 * rd;
    memcpy(y, x, sizeof(real) * n);
    char what[128];
    for (int inverse = 0; inverse <= 1; inverse++) {
        cpu_ops.rope(y, y + C, ld, c, B, T, H, d, rd, inverse);
        gpu_ops.rope(y_d, y_d + C, ld, c_d, B, T, H, d, rd, inverse);
        gpu_ops.rope(y2_d, y2_d + C, ld, c_d, B, T, H, d, rd, inverse);
        snprintf(what, sizeof what, "rope %s (B %d, T %d, H %d, d %d, rd %d%s)", inverse ? "inverse" : "fwd", B, T, H,
                 d, rd, pos0 ? ", from position 3" : "");
        same(what, y_d, y, n, 0);
        real *got = back(y_d, n);
        CHECK(!memcmp(got, y, sizeof(real) * (size_t)n), "%s: not the CPU's bits", what);
        free(got);
        bitwise(what, y_d, y2_d, n);
    }
    real *got = back(y_d, n);
    double scale = 1, worst = 0;
    for (long i = 0; i < n; i++) scale = fabs(x[i]) > scale ? fabs(x[i]) : scale;
    for (long i = 0; i < n; i++) worst = fabs((double)got[i] - x[i]) > worst ? fabs((double)got[i] - x[i]) : worst;
    CHECK(worst <= 1e-6 * scale, "%s: inverse(fwd(x)) off x by up to %.3g, over %.3g", what, worst, 1e-6 * scale);
    free(got);
    void *ds[] = {cs_d, y_d, y2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(cs), free(y);
}

/* ---- op_adamw_multi: every tensor's AdamW in one launch --------------------
 * Segments of one buffer, as the model's tensors are, in every shape the
 * kernel distinguishes: aligned (the vector blocks) with a scalar tail, one
 * element off alignment (all scalar), shorter than a block, empty, and a
 * gap between segments that must stay as it was; with the moments covering
 * the whole buffer (base 0) or starting at the second segment (a ZeRO
 * shard's).  Each against one op_adamw per segment, bitwise, and against the
 * CPU's op_adamw_multi.  The kernel's work table is uploaded when the
 * segments change and reused while they do not: two calls with the same
 * segments, then other ones. */
void test_adamw_multi(long base) {
    const AdamwSeg segs[] = {{0, 1000, 1}, {1000, 3, 0}, {1003, 4097, 1}, {5100, 0, 1},
                             {5104, 777, 0}, {6000, 3077, 1}, {9100, 1, 0}};
    const int nseg = (int)(sizeof segs / sizeof *segs), shift = base ? 1 : 0;
    const long n = 9104, nm = n - base;
    real *p = host_rand(n, 1), *m = host_rand(nm, 0.1), *v = host_rand(nm, 0.1), *g = host_rand(n, 1);
    for (long i = 0; i < nm; i++) v[i] = v[i] * v[i];
    real *p_d = dev_of(p, n), *m_d = dev_of(m, nm), *v_d = dev_of(v, nm), *g_d = dev_of(g, n);
    real *pr_d = dev_of(p, n), *mr_d = dev_of(m, nm), *vr_d = dev_of(v, nm);
    char what[120];
    for (int call = 0; call < 3; call++) { /* 0, 1: the same segments; 2: all but the first (another table) */
        const AdamwSeg *sg = segs + shift + (call == 2);
        const int ns = nseg - shift - (call == 2);
        const long t = 3 + call;
        gpu_ops.adamw_multi(p_d, m_d, v_d, g_d, base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, t, 0.7);
        cpu_ops.adamw_multi(p, m, v, g, base, sg, ns, 6e-4, 0.9, 0.95, 1e-8, 0.1, t, 0.7);
        for (int i = 0; i < ns; i++)
            gpu_ops.adamw(pr_d + sg[i].off, mr_d + (sg[i].off - base), vr_d + (sg[i].off - base), g_d + sg[i].off,
                          sg[i].n, 6e-4, 0.9, 0.95, 1e-8, sg[i].decay ? 0.1 : 0.0, t, 0.7);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) p", base, call);
        bits_as(what, "one op_adamw a segment", p_d, pr_d, n);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) m", base, call);
        bits_as(what, "one op_adamw a segment", m_d, mr_d, nm);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) v", base, call);
        bits_as(what, "one op_adamw a segment", v_d, vr_d, nm);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) p, against the CPU", base, call);
        same(what, p_d, p, n, 0);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) m, against the CPU", base, call);
        same(what, m_d, m, nm, 0);
        snprintf(what, sizeof what, "adamw multi (base %ld, call %d) v, against the CPU", base, call);
        same(what, v_d, v, nm, 0);
    }
    /* the gaps (and everything before base) were never written: the CPU's
     * values there are the initial ones, compared bitwise */
    real *got = back(p_d, n);
    long touched = 0;
    for (long i = 0; i < n; i++) {
        int in = 0;
        for (int k = shift; k < nseg; k++) in |= i >= segs[k].off && i < segs[k].off + segs[k].n;
        if (!in) touched += memcmp(got + i, p + i, sizeof *got) != 0;
    }
    CHECK(touched == 0, "adamw multi (base %ld): %ld elements outside the segments changed", base, touched);
    void *ds[] = {p_d, m_d, v_d, g_d, pr_d, mr_d, vr_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(p), free(m), free(v), free(g), free(got);
}

/* GELU and AdamW take four elements a thread when their tensors are
 * 16-byte aligned, and one otherwise (kernels/cuda/elementwise.cu): the
 * same arithmetic, so the same bits.  Each op on tensors one element off
 * alignment (the scalar kernels) against the same on aligned tensors (the
 * vector path, the n % 4 left scalar), bitwise; the shifted results also
 * against the CPU. */
void test_pointwise_paths(long n) {
    enum { IN = 5, OUT = 5 };
    real *in[IN] = {host_rand(n, 3), host_rand(n, 1), host_rand(n, 1), host_rand(n, 0.1), host_rand(n, 0.1)};
    real *x = in[0], *dy = in[1], *p = in[2], *m = in[3], *v = in[4];
    for (long i = 0; i < n; i++) v[i] = v[i] * v[i];
    static const char *const names[OUT] = {"gelu fwd", "gelu bwd", "adamw p", "adamw m", "adamw v"};
    real *got[2][OUT];
    for (int shift = 0; shift <= 1; shift++) {
        real *buf[IN + 2], *d[IN + 2];
        for (int k = 0; k < IN + 2; k++) {
            buf[k] = gpu_ops.alloc(sizeof(real) * (size_t)(n + 1));
            d[k] = buf[k] + shift;
            if (k < IN) gpu_ops.upload(d[k], in[k], sizeof(real) * (size_t)n);
        }
        real *y_d = d[IN], *dx_d = d[IN + 1];
        gpu_ops.gelu_fwd(y_d, d[0], n);
        gpu_ops.gelu_bwd(dx_d, d[0], d[1], n);
        gpu_ops.adamw(d[2], d[3], d[4], d[1], n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
        real *outs[OUT] = {y_d, dx_d, d[2], d[3], d[4]};
        for (int k = 0; k < OUT; k++) got[shift][k] = back(outs[k], n);
        if (shift) {
            real *y = calloc((size_t)n, sizeof *y), *dx = calloc((size_t)n, sizeof *dx);
            cpu_ops.gelu_fwd(y, x, n);
            cpu_ops.gelu_bwd(dx, x, dy, n);
            cpu_ops.adamw(p, m, v, dy, n, 6e-4, 0.9, 0.95, 1e-8, 0.1, 3, 0.7);
            const real *ref[OUT] = {y, dx, p, m, v};
            for (int k = 0; k < OUT; k++) {
                char what[64];
                snprintf(what, sizeof what, "%s, tensors off 16-byte alignment", names[k]);
                same(what, outs[k], ref[k], n, 0);
            }
            free(y), free(dx);
        }
        for (int k = 0; k < IN + 2; k++) gpu_ops.free(buf[k]);
    }
    for (int k = 0; k < OUT; k++) {
        CHECK(!memcmp(got[0][k], got[1][k], sizeof(real) * (size_t)n),
              "%s (n %ld): the vector path's bits differ from the scalar kernel's", names[k], n);
        free(got[0][k]), free(got[1][k]);
    }
    for (int k = 0; k < IN; k++) free(in[k]);
}

/* nopos: without positional embeddings (rotary positions), wpe and dwpe
 * NULL on both sides; the forward's rows are then copies of wte's, the
 * CPU's bits. */
void test_embed(int B, int T, int C, int V, int sink, int nopos) {
    int Tp = T + (sink ? 1 : 0);
    int32_t *tok = malloc(sizeof *tok * (size_t)B * T);
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)rng_below(rng_key(g_key, 77, (uint64_t)i), (uint64_t)(i % 3 ? V : 4));
    real *wte = host_rand((long)V * C, 1), *wpe = nopos ? NULL : host_rand((long)T * C, 1),
         *st = sink ? host_rand(C, 1) : NULL;
    real *out = calloc((size_t)B * Tp * C, sizeof *out), *dout = host_rand((long)B * Tp * C, 1);
    real *dwte = host_rand((long)V * C, 1), *dwpe = nopos ? NULL : host_rand((long)T * C, 1),
         *dst = sink ? host_rand(C, 1) : NULL;
    int32_t *tok_d = gpu_ops.alloc(sizeof *tok * (size_t)B * T);
    gpu_ops.upload(tok_d, tok, sizeof *tok * (size_t)B * T);
    real *wte_d = dev_of(wte, (long)V * C), *wpe_d = nopos ? NULL : dev_of(wpe, (long)T * C),
         *st_d = sink ? dev_of(st, C) : NULL, *out_d = dev_of(out, (long)B * Tp * C),
         *dout_d = dev_of(dout, (long)B * Tp * C), *dwte_d = dev_of(dwte, (long)V * C),
         *dwpe_d = nopos ? NULL : dev_of(dwpe, (long)T * C), *dst_d = sink ? dev_of(dst, C) : NULL;
    char what[96];
    cpu_ops.embed_fwd(out, tok, wte, wpe, st, B, T, C);
    gpu_ops.embed_fwd(out_d, tok_d, wte_d, wpe_d, st_d, B, T, C);
    snprintf(what, sizeof what, "embed fwd%s%s", sink ? " (sink token)" : "", nopos ? " without wpe" : "");
    same(what, out_d, out, (long)B * Tp * C, 0);
    if (nopos) {
        real *got = back(out_d, (long)B * Tp * C);
        CHECK(!memcmp(got, out, sizeof(real) * (size_t)B * Tp * C), "%s: not the CPU's bits", what);
        free(got);
    }
    cpu_ops.embed_bwd(dwte, dwpe, dst, dout, tok, B, T, C);
    gpu_ops.embed_bwd(dwte_d, dwpe_d, dst_d, dout_d, tok_d, B, T, C);
    snprintf(what, sizeof what, "embed dwte (repeated tokens, accumulated)%s", nopos ? " without dwpe" : "");
    same(what, dwte_d, dwte, (long)V * C, 0);
    if (!nopos) same("embed dwpe (accumulated)", dwpe_d, dwpe, (long)T * C, 0);
    if (sink) same(nopos ? "embed dsink (accumulated) without dwpe" : "embed dsink (accumulated)", dst_d, dst, C, 0);
    void *ds[] = {tok_d, wte_d, wpe_d, st_d, out_d, dout_d, dwte_d, dwpe_d, dst_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(tok), free(wte), free(wpe), free(st), free(out), free(dout), free(dwte), free(dwpe), free(dst);
}

void test_gate(int kind, int slot, int B, int T, int H, int d) {
    int C = H * d, vs = 3 * C;
    long nv = (long)B * T * vs, ng = (long)B * H * T, nvg = (long)B * T * C;
    real *v = host_rand(nv, 1), *tau = host_rand(H, 0.5), *w = host_rand((long)H * d, 0.3), *b = host_rand(H, 1);
    GateParams gp = {kind, slot, 8, tau, w, b};
    real *g = calloc(ng, sizeof *g), *vg = calloc(nvg, sizeof *vg), *lb = calloc(ng, sizeof *lb);
    real *tau_d = dev_of(tau, H), *w_d = dev_of(w, (long)H * d), *b_d = dev_of(b, H), *v_d = dev_of(v, nv);
    GateParams gpd = {kind, slot, 8, tau_d, w_d, b_d};
    real *g_d = dev_of(g, ng), *vg_d = dev_of(vg, nvg), *lb_d = dev_of(lb, ng);
    cpu_ops.gate_fwd(g, vg, lb, v, vs, &gp, B, T, H, d);
    gpu_ops.gate_fwd(g_d, vg_d, lb_d, v_d, vs, &gpd, B, T, H, d);
    char what[96];
    snprintf(what, sizeof what, "gate fwd g (%s, %s)", kind == GATE_NORM ? "norm" : "proj", slot ? "routing" : "value");
    same(what, g_d, g, ng, 0);
    if (slot == SLOT_VALUE) same("gate fwd vg", vg_d, vg, nvg, 0);
    else same("gate fwd logbias", lb_d, lb, ng, 0);
    real *dv = host_rand(nv, 1), *dvg = host_rand(nvg, 1), *dlb = host_rand(ng, 1), *dtau = host_rand(H, 1),
         *dw = host_rand((long)H * d, 1), *db = host_rand(H, 1);
    real *dv_d = dev_of(dv, nv), *dvg_d = dev_of(dvg, nvg), *dlb_d = dev_of(dlb, ng), *dtau_d = dev_of(dtau, H),
         *dw_d = dev_of(dw, (long)H * d), *db_d = dev_of(db, H);
    cpu_ops.gate_bwd(dv, vs, dtau, dw, db, slot ? NULL : dvg, slot ? dlb : NULL, v, vs, g, &gp, B, T, H, d);
    gpu_ops.gate_bwd(dv_d, vs, dtau_d, dw_d, db_d, slot ? NULL : dvg_d, slot ? dlb_d : NULL, v_d, vs, g_d, &gpd, B, T,
                     H, d);
    same("gate bwd dv", dv_d, dv, nv, 0);
    if (kind == GATE_NORM) same("gate bwd dtau (accumulated)", dtau_d, dtau, H, 0);
    if (kind == GATE_PROJ) {
        same("gate bwd dw (accumulated)", dw_d, dw, (long)H * d, 0);
        same("gate bwd db (accumulated)", db_d, db, H, 0);
    }
    void *ds[] = {tau_d, w_d, b_d, v_d, g_d, vg_d, lb_d, dv_d, dvg_d, dlb_d, dtau_d, dw_d, db_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(v), free(tau), free(w), free(b), free(g), free(vg), free(lb), free(dv), free(dvg), free(dlb), free(dtau),
        free(dw), free(db);
}

/* phantom: 0 none, 1 logit 0, 2 learned logits; logbias: routing-slot bias */
