/* test_gpu_ops: tensors stored as bf16 operands (op_bf16_operand) and the
 * attention operand (op_attention_operand). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

/* ---- bf16 operands (ops.h, op_bf16_operand) --------------------------------
 * The MLP's hidden pre-activation (fc's output), the gradient of GELU's
 * output (fc_proj's dinp) and the gradient a LayerNorm gets from qkv or fc
 * (their dinp) are promised as bf16 operands, and the CUDA backend then
 * stores them as autocast does: its matmul writes them in bf16, into the
 * tensor's first 2n bytes, and GELU or LayerNorm's backward reads them
 * there.  Shown here, for one MLP's forward and backward:
 *   - the stored bf16 is the unpromised product rounded to nearest even
 *     (bitwise in the emulator, whose cuBLASLt rounds the same fp32 result;
 *     within one bf16 ulp on a device, whose bf16 and fp32 products may be
 *     different algorithms), and the promise leaves dW's bits alone;
 *   - GELU's forward and backward on the promised tensors give the bits of
 *     the same ops on fp32 tensors holding those bf16 values, with either
 *     or both backward inputs promised, and agree with the CPU op on them;
 *   - laid out in half the reals (ops.h, op_promised_len), nothing writes
 *     past its bf16 values, where a compact layout puts the next tensor;
 *   - once the promise ends the product stores fp32 again;
 *   - with SG_BF16_OPERANDS=0 the promise changes nothing: fp32, the same bits. */
long sg_matmul_bf16_outputs(void); /* kernels/cuda/matmul.cu */

static int bf16_operands_on(void) {
    const char *e = getenv("SG_BF16_OPERANDS");
    return !(e && e[0] == '0');
}

static float bf16_widen(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* What a promised tensor holds, as fp32: its bf16 values widened (or its
 * fp32 values, SG_BF16_OPERANDS=0). */
static real *operand_values(const real *d, long n) {
    real *h = back(d, n);
    if (!bf16_operands_on()) return h;
    real *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    const uint16_t *b = (const uint16_t *)h;
    for (long i = 0; i < n; i++) v[i] = bf16_widen(b[i]);
    free(h);
    return v;
}

/* the promised tensor's values against the unpromised product's */
static void operand_check(const char *what, const real *v, const real *ref_d, long n) {
    real *r = back(ref_d, n);
    long off = 0, far = 0;
    for (long i = 0; i < n; i++) {
        if (!bf16_operands_on()) {
            off += memcmp(v + i, r + i, sizeof *v) != 0;
            continue;
        }
        off += v[i] != bf16_round(r[i]);
        far += fabs((double)v[i] - r[i]) > ldexp(fabs((double)r[i]), -7) + 1e-30;
    }
    if (!bf16_operands_on() || emulated())
        CHECK(off == 0, "%s: %ld of %ld elements not the unpromised product's %s", what, off, n,
              bf16_operands_on() ? "rounded to bf16" : "bits");
    else
        CHECK(far == 0, "%s: %ld of %ld elements further than one bf16 ulp from the unpromised product (%ld not "
              "its rounding)", what, far, n, off);
    free(r);
}

/* A compact layout (ops.h, op_promised_len) puts the next tensor right
 * after a promised tensor's bf16 values.  tail_fill writes a sentinel into
 * the reals of the tensor's n past its layout's length; tail_check wants
 * the length to be half of n exactly when the promise is taken, and every
 * sentinel still there: nothing the promise allows writes past the bf16
 * values. */
static const real TAIL_SENTINEL = (real)-1234.5;
static void tail_fill(real *d, int kind, long n) {
    const long len = op_promised_len(kind, n);
    if (len >= n) return;
    real *h = malloc(sizeof *h * (size_t)(n - len));
    for (long i = 0; i < n - len; i++) h[i] = TAIL_SENTINEL;
    gpu_ops.upload(d + len, h, sizeof *h * (size_t)(n - len));
    free(h);
}
static void tail_check(const char *what, const real *d, int kind, long n, int taken) {
    const long len = op_promised_len(kind, n);
    CHECK(len == (taken ? (n + 1) / 2 : n), "%s: laid out in %ld reals for %ld elements (promise %s)", what, len, n,
          taken ? "taken" : "not taken");
    if (len >= n) return;
    real *h = back(d, n);
    long bad = 0;
    for (long i = len; i < n; i++) bad += h[i] != TAIL_SENTINEL;
    CHECK(bad == 0, "%s: %ld of the %ld reals past its bf16 values (the next tensor of a compact layout) written",
          what, bad, n - len);
    free(h);
}

static void test_bf16_operand(int M, int K, int F) {
    const long nx = (long)M * K, n = (long)M * F;
    real *x = host_rand(nx, 1), *w1 = host_rand((long)F * K, 0.3), *w2 = host_rand((long)K * F, 0.1);
    real *dy = host_rand(nx, 1), *dw = host_rand((long)K * F, 0.01);
    real *x_d = dev_of(x, nx), *w1_d = dev_of(w1, (long)F * K), *w2_d = dev_of(w2, (long)K * F),
         *dy_d = dev_of(dy, nx);
    real *h_p = gpu_ops.alloc(sizeof(real) * n), *h_r = gpu_ops.alloc(sizeof(real) * n),
         *dg_p = gpu_ops.alloc(sizeof(real) * n), *dg_r = gpu_ops.alloc(sizeof(real) * n),
         *g_p = gpu_ops.alloc(sizeof(real) * n), *g_r = gpu_ops.alloc(sizeof(real) * n),
         *dw_p = dev_of(dw, (long)K * F), *dw_r = dev_of(dw, (long)K * F);
    char what[160], part[256];
    snprintf(what, sizeof what, "bf16 operand, mlp %dx%dx%d%s", M, K, F, bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    op_bf16_operand(h_p, n);
    op_bf16_operand(dg_p, n);
    tail_fill(h_p, OP_PROMISE_BF16, n);
    tail_fill(dg_p, OP_PROMISE_BF16, n);
    const long b0 = sg_matmul_bf16_outputs();
    /* the forward: h = x W1^T, g = gelu(h) */
    gpu_ops.matmul_fwd(h_p, x_d, w1_d, M, K, F);
    gpu_ops.matmul_fwd(h_r, x_d, w1_d, M, K, F);
    real *hv = operand_values(h_p, n);
    snprintf(part, sizeof part, "%s, fc output", what);
    operand_check(part, hv, h_r, n);
    real *hv_d = dev_of(hv, n); /* fp32 tensor of the stored values: the reference's input */
    gpu_ops.gelu_fwd(g_p, h_p, n);
    gpu_ops.gelu_fwd(g_r, hv_d, n);
    snprintf(part, sizeof part, "%s, gelu forward on the stored values", what);
    bits_as(part, "the reference on fp32 tensors", g_p, g_r, n);
    real *g = calloc((size_t)n, sizeof *g);
    cpu_ops.gelu_fwd(g, hv, n);
    snprintf(part, sizeof part, "%s, gelu forward against the CPU op", what);
    same(part, g_p, g, n, 0);
    /* the backward: dg = dy W2 (promised), dW2 += dy^T g, dh = gelu'(h) dg */
    gpu_ops.matmul_bwd(dg_p, dw_p, dy_d, g_r, w2_d, M, F, K);
    gpu_ops.matmul_bwd(dg_r, dw_r, dy_d, g_r, w2_d, M, F, K);
    real *dgv = operand_values(dg_p, n);
    snprintf(part, sizeof part, "%s, fc_proj dinp", what);
    operand_check(part, dgv, dg_r, n);
    snprintf(part, sizeof part, "%s, fc_proj dw beside a promised dinp", what);
    bits_as(part, "the unpromised product", dw_p, dw_r, (long)K * F);
    real *dgv_d = dev_of(dgv, n), *dh[4], *dh_ref = gpu_ops.alloc(sizeof(real) * n);
    gpu_ops.gelu_bwd(dh_ref, hv_d, dgv_d, n);
    for (int c = 0; c < 4; c++) { /* c & 1: inp promised; c & 2: dout promised */
        dh[c] = gpu_ops.alloc(sizeof(real) * n);
        gpu_ops.gelu_bwd(dh[c], c & 1 ? h_p : hv_d, c & 2 ? dg_p : dgv_d, n);
        snprintf(part, sizeof part, "%s, gelu backward (inp %s, dout %s)", what, c & 1 ? "promised" : "fp32",
                 c & 2 ? "promised" : "fp32");
        bits_as(part, "the reference on fp32 tensors", dh[c], dh_ref, n);
    }
    real *dh_cpu = calloc((size_t)n, sizeof *dh_cpu);
    cpu_ops.gelu_bwd(dh_cpu, hv, dgv, n);
    snprintf(part, sizeof part, "%s, gelu backward against the CPU op", what);
    same(part, dh[3], dh_cpu, n, 0);
    const long stored = sg_matmul_bf16_outputs() - b0;
    CHECK(stored == 2 * bf16_operands_on(), "%s: %ld outputs stored in bf16, want %d", what, stored, 2 * bf16_operands_on());
    snprintf(part, sizeof part, "%s, fc output", what);
    tail_check(part, h_p, OP_PROMISE_BF16, n, bf16_operands_on());
    snprintf(part, sizeof part, "%s, gelu output gradient", what);
    tail_check(part, dg_p, OP_PROMISE_BF16, n, bf16_operands_on());
    /* once the promise ends, the product stores fp32 again */
    op_matmul_only_end(h_p, sizeof(real) * (size_t)n);
    const long b1 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_fwd(h_p, x_d, w1_d, M, K, F);
    CHECK(sg_matmul_bf16_outputs() == b1, "%s: an output stored in bf16 after the promise ended", what);
    snprintf(part, sizeof part, "%s, fc output after the promise ended", what);
    bits_as(part, "the unpromised product", h_p, h_r, n);
    op_matmul_only_end(dg_p, sizeof(real) * (size_t)n);
    void *ds[] = {x_d, w1_d, w2_d, dy_d, h_p, h_r, dg_p, dg_r, g_p, g_r, dw_p, dw_r, hv_d, dgv_d, dh_ref,
                  dh[0], dh[1], dh[2], dh[3]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(x), free(w1), free(w2), free(dy), free(dw), free(hv), free(g), free(dgv), free(dh_cpu);
}

/* `test_gpu_ops broken-promise bf16`: a matmul reads a bf16 operand as its
 * x.  It holds bf16 values, so the matmul must stop the program (exit 1, a
 * message naming op_bf16_operand); with SG_BF16_OPERANDS=0 it goes on. */
int broken_bf16_promise(void) {
    int M = 64, K = 32, F = 48;
    real *x = host_rand((long)M * K, 1), *w1 = host_rand((long)F * K, 0.1), *w2 = host_rand((long)K * F, 0.1);
    real *x_d = dev_of(x, (long)M * K), *w1_d = dev_of(w1, (long)F * K), *w2_d = dev_of(w2, (long)K * F);
    real *h_d = gpu_ops.alloc(sizeof(real) * M * F), *o_d = gpu_ops.alloc(sizeof(real) * M * K);
    op_bf16_operand(h_d, (long)M * F);
    gpu_ops.matmul_fwd(h_d, x_d, w1_d, M, K, F);
    gpu_ops.matmul_fwd(o_d, h_d, w2_d, M, F, K);
    op_sync();
    printf("broken promise (bf16): the matmul went on, %ld outputs were stored in bf16\n", sg_matmul_bf16_outputs());
    return 0;
}

/* LayerNorm's backward with its dy promised: dy = g W (a qkv or fc
 * backward's dinp, stored in bf16), then dx (accumulated), dw and db against
 * the same op on an fp32 dy holding the stored values, bitwise, and against
 * the CPU op.  C a multiple of 4 up to 1024 takes the register path, other
 * widths the scalar kernels; both read bf16. */
static void test_bf16_layernorm(int M, int C, int N, int bias) {
    const long n = (long)M * C;
    real *g = host_rand((long)M * N, 1), *w = host_rand((long)N * C, 0.1), *x = host_rand(n, 2);
    real *lw = host_rand(C, 1), *lb = host_rand(C, 1), *dx0 = host_rand(n, 1), *dw0 = host_rand(C, 1),
         *db0 = host_rand(C, 1);
    real *g_d = dev_of(g, (long)M * N), *w_d = dev_of(w, (long)N * C), *x_d = dev_of(x, n), *lw_d = dev_of(lw, C),
         *lb_d = dev_of(lb, C);
    real *dy_p = gpu_ops.alloc(sizeof(real) * n), *dy_r = gpu_ops.alloc(sizeof(real) * n),
         *y_d = gpu_ops.alloc(sizeof(real) * n), *mu_d = gpu_ops.alloc(sizeof(real) * M),
         *rs_d = gpu_ops.alloc(sizeof(real) * M);
    char what[160], part[256];
    snprintf(what, sizeof what, "bf16 operand, layernorm backward M%d C%d%s%s", M, C, bias ? " bias" : "",
             bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    gpu_ops.layernorm_fwd(y_d, mu_d, rs_d, x_d, lw_d, bias ? lb_d : NULL, M, C);
    op_bf16_operand(dy_p, n);
    const long b0 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_bwd(dy_p, NULL, g_d, NULL, w_d, M, C, N);
    gpu_ops.matmul_bwd(dy_r, NULL, g_d, NULL, w_d, M, C, N);
    real *dyv = operand_values(dy_p, n);
    snprintf(part, sizeof part, "%s, dinp", what);
    operand_check(part, dyv, dy_r, n);
    real *dyv_d = dev_of(dyv, n), *dx[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) { /* k 0: dy promised; 1: an fp32 dy of the same values */
        dx[k] = dev_of(dx0, n), dw[k] = dev_of(dw0, C), db[k] = dev_of(db0, C);
        gpu_ops.layernorm_bwd(dx[k], dw[k], bias ? db[k] : NULL, k ? dyv_d : dy_p, x_d, lw_d, mu_d, rs_d, M, C);
    }
    static const char *const out[3] = {"dx", "dw", "db"};
    real *const *got[3] = {dx, dw, db};
    const long len[3] = {n, C, C};
    for (int o = 0; o < 2 + bias; o++) {
        snprintf(part, sizeof part, "%s, %s", what, out[o]);
        bits_as(part, "the op on an fp32 dy", got[o][0], got[o][1], len[o]);
    }
    real *mu = back(mu_d, M), *rs = back(rs_d, M);
    cpu_ops.layernorm_bwd(dx0, dw0, bias ? db0 : NULL, dyv, x, lw, mu, rs, M, C);
    const real *ref[3] = {dx0, dw0, db0};
    for (int o = 0; o < 2 + bias; o++) {
        snprintf(part, sizeof part, "%s, %s against the CPU op", what, out[o]);
        same(part, got[o][0], ref[o], len[o], 0);
    }
    const long stored = sg_matmul_bf16_outputs() - b0;
    CHECK(stored == bf16_operands_on(), "%s: %ld outputs stored in bf16, want %d", what, stored, bf16_operands_on());
    op_matmul_only_end(dy_p, sizeof(real) * (size_t)n);
    void *ds[] = {g_d, w_d, x_d, lw_d, lb_d, dy_p, dy_r, y_d, mu_d, rs_d, dyv_d, dx[0], dx[1], dw[0], dw[1],
                  db[0], db[1]};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(g), free(w), free(x), free(lw), free(lb), free(dx0), free(dw0), free(db0), free(dyv), free(mu), free(rs);
}

/* ---- the attention operand (ops.h, op_attention_operand) -------------------
 * Each layer's qkv is promised to its attention and gate alone.  Under the
 * mma tiles the CUDA backend stores it in bf16, as autocast stores the qkv
 * projection; the attention's packing then copies the bf16 q, k and v
 * instead of rounding fp32, or, where d is a padded head size (16, 32, 64,
 * 128), the kernels read them in place and nothing is packed; the gates
 * read v's bf16 and compute in fp32.
 * Shown for one layer's qkv product, attention and gate, forward and
 * backward:
 *   - the stored bf16 is the unpromised product rounded to nearest even
 *     (operand_check: bitwise in the emulator, within one bf16 ulp on a
 *     device), and nothing writes past its bf16 values (tail_check);
 *   - the attention's out, lse and dq/dk/dv and the gate's g, vg or
 *     logbias, dv and parameter gradients are the bits of the same ops on an
 *     fp32 qkv holding the stored values: rounding a bf16 value to bf16
 *     keeps it, and widening it is exact, on any device;
 *   - the attention agrees with the CPU op on those values;
 *   - under the wmma tiles, which read fp32, and with SG_BF16_OPERANDS=0,
 *     the promise is not taken: the product stores fp32, the same bits. */
void op_attention_operand(const real *buf, long n);
long sg_attn_inplace_reads(void); /* kernels/cuda/attention_pack.cu */
const void *sg_bf16_inside(const real *p); /* kernels/cuda/matmul.cu: the bf16 of element p, or NULL */

static void test_attention_operand(int B, int T, int H, int d, int kind, int slot) {
    const int C = H * d, qs = 3 * C;
    const long N = (long)B * T, nq = N * qs, no = N * C, nl = (long)B * H * T;
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma";
    const int taken = bf16_operands_on() && !strcmp(tiles, "mma");
    real *x = host_rand(N * C, 1), *w = host_rand((long)qs * C, 1.0 / sqrt((double)C)), *sink = host_rand(H, 1);
    real *tau = host_rand(H, 0.5), *gw = host_rand((long)H * d, 0.3), *gb = host_rand(H, 1);
    real *dout = host_rand(no, 1), *dvg = host_rand(no, 1), *dlb = host_rand(nl, 1);
    real *x_d = dev_of(x, N * C), *w_d = dev_of(w, (long)qs * C), *sink_d = dev_of(sink, H), *dout_d = dev_of(dout, no);
    real *tau_d = dev_of(tau, H), *gw_d = dev_of(gw, (long)H * d), *gb_d = dev_of(gb, H);
    real *qkv_p = gpu_ops.alloc(sizeof(real) * nq), *qkv_r = gpu_ops.alloc(sizeof(real) * nq);
    char what[160], part[256];
    snprintf(what, sizeof what, "attention operand B%d T%d H%d d%d %s gate, %s slot, tiles %s%s", B, T, H, d,
             kind == GATE_NORM ? "norm" : "proj", slot ? "routing" : "value", tiles,
             bf16_operands_on() ? "" : ", SG_BF16_OPERANDS=0");
    op_attention_operand(qkv_p, nq);
    tail_fill(qkv_p, OP_PROMISE_ATTENTION, nq);
    const long b0 = sg_matmul_bf16_outputs();
    gpu_ops.matmul_fwd(qkv_p, x_d, w_d, (int)N, C, qs);
    gpu_ops.matmul_fwd(qkv_r, x_d, w_d, (int)N, C, qs);
    CHECK(sg_matmul_bf16_outputs() - b0 == taken, "%s: %ld outputs stored in bf16, want %d", what,
          sg_matmul_bf16_outputs() - b0, taken);
    real *qv;
    if (taken) {
        qv = operand_values(qkv_p, nq);
        snprintf(part, sizeof part, "%s, qkv", what);
        operand_check(part, qv, qkv_r, nq);

    } else {
        snprintf(part, sizeof part, "%s, qkv not taken", what);
        bits_as(part, "the unpromised product", qkv_p, qkv_r, nq);
        qv = back(qkv_r, nq);
    }
    real *qv_d = dev_of(qv, nq); /* an fp32 qkv of the stored values: the reference's input */
    real *src[2] = {qkv_p, qv_d};

    /* the gate on v */
    GateParams gp = {kind, slot, 8, tau, gw, gb}, gpd = {kind, slot, 8, tau_d, gw_d, gb_d};
    real *g_d[2], *vg_d[2], *lb_d[2], *dv_d[2], *dtau_d[2], *dw_d[2], *db_d[2];
    real *dv0 = host_rand(nq, 1), *dz = calloc((size_t)(H * d + 1), sizeof *dz);
    for (int k = 0; k < 2; k++) {
        g_d[k] = gpu_ops.alloc(sizeof(real) * nl), vg_d[k] = gpu_ops.alloc(sizeof(real) * no);
        lb_d[k] = gpu_ops.alloc(sizeof(real) * nl);
        dv_d[k] = dev_of(dv0, nq), dtau_d[k] = dev_of(dz, H), dw_d[k] = dev_of(dz, (long)H * d), db_d[k] = dev_of(dz, H);
        gpu_ops.gate_fwd(g_d[k], vg_d[k], lb_d[k], src[k] + 2 * C, qs, &gpd, B, T, H, d);
    }
    real *dvg_d = dev_of(dvg, no), *dlb_d = dev_of(dlb, nl);
    for (int k = 0; k < 2; k++)
        gpu_ops.gate_bwd(dv_d[k] + 2 * C, qs, dtau_d[k], dw_d[k], db_d[k], slot ? NULL : dvg_d, slot ? dlb_d : NULL,
                         src[k] + 2 * C, qs, g_d[k], &gpd, B, T, H, d);
    static const char *const gname[] = {"gate g", "gate vg", "gate logbias", "gate dv", "gate dtau", "gate dw",
                                        "gate db"};
    real **gout[] = {g_d, vg_d, lb_d, dv_d, dtau_d, dw_d, db_d};
    const long glen[] = {nl, no, nl, nq, H, (long)H * d, H};
    for (int o = 0; o < 7; o++) {
        if ((o == 1 && slot) || (o == 2 && !slot) || (o == 4 && kind != GATE_NORM) || (o >= 5 && kind != GATE_PROJ))
            continue;
        snprintf(part, sizeof part, "%s, %s", what, gname[o]);
        bits_as(part, "the op on an fp32 qkv", gout[o][0], gout[o][1], glen[o]);
    }
    real *g = calloc((size_t)nl, sizeof *g), *vg = calloc((size_t)no, sizeof *vg), *lbh = calloc((size_t)nl, sizeof *lbh);
    cpu_ops.gate_fwd(g, vg, lbh, qv + 2 * C, qs, &gp, B, T, H, d);
    snprintf(part, sizeof part, "%s, gate g against the CPU op", what);
    same(part, g_d[0], g, nl, 0);

    /* the attention: the routing slot's log-bias as its per-key bias */
    real *lbk = back(lb_d[1], nl);
    real *lbk_d = dev_of(lbk, nl);
    AttnArgs ad = {B, T, H, d, qs, qs, qs, C, 1, sink_d, slot ? lbk_d : NULL};
    AttnArgs a = {B, T, H, d, qs, qs, qs, C, 1, sink, slot ? lbk : NULL};
    real *o_d[2], *lse_d[2], *dq_d[2], *ds_d[2];
    real *zero = calloc((size_t)nq, sizeof *zero);
    const long r0 = sg_attn_inplace_reads();
    for (int k = 0; k < 2; k++) {
        o_d[k] = gpu_ops.alloc(sizeof(real) * no), lse_d[k] = gpu_ops.alloc(sizeof(real) * nl);
        dq_d[k] = dev_of(zero, nq), ds_d[k] = dev_of(zero, H);
        gpu_ops.attention_fwd(o_d[k], lse_d[k], src[k], src[k] + C, src[k] + 2 * C, &ad);
        gpu_ops.attention_bwd(dq_d[k], dq_d[k] + C, dq_d[k] + 2 * C, ds_d[k], NULL, dout_d, src[k], src[k] + C,
                              src[k] + 2 * C, o_d[k], lse_d[k], &ad);
    }
    const int dp = d == 16 || d == 32 || d == 64 || d == 128, want_ip = taken && dp ? 6 : 0;
    CHECK(sg_attn_inplace_reads() - r0 == want_ip, "%s: %ld operands read in place, want %d", what,
          sg_attn_inplace_reads() - r0, want_ip);
    if (slot == SLOT_VALUE) {
        /* vg promised as an attention operand too: the gate stores g v
         * rounded to bf16 (the fp32 vg's rounding, bitwise: the same
         * kernel's arithmetic), and the attention on it gives the bits of
         * the attention on the fp32 vg, reading it in place */
        real *vg_p = gpu_ops.alloc(sizeof(real) * no), *gq_d = gpu_ops.alloc(sizeof(real) * nl);
        op_attention_operand(vg_p, no);
        tail_fill(vg_p, OP_PROMISE_ATTENTION, no);
        const long b1 = sg_matmul_bf16_outputs();
        gpu_ops.gate_fwd(gq_d, vg_p, NULL, qkv_p + 2 * C, qs, &gpd, B, T, H, d);
        CHECK(sg_matmul_bf16_outputs() - b1 == taken, "%s: vg promised: %ld outputs stored in bf16, want %d", what,
              sg_matmul_bf16_outputs() - b1, taken);
        snprintf(part, sizeof part, "%s, gate g with vg promised", what);
        bits_as(part, "the op with vg unpromised", gq_d, g_d[0], nl);
        real *vgv = NULL;
        if (taken) {
            vgv = operand_values(vg_p, no);
            real *ref = back(vg_d[1], no);
            long off = 0;
            for (long i = 0; i < no; i++) off += vgv[i] != bf16_round(ref[i]);
            CHECK(off == 0, "%s: %ld of %ld elements of the bf16 vg not the fp32 vg rounded", what, off, no);
            free(ref);
        } else {
            snprintf(part, sizeof part, "%s, vg not taken", what);
            bits_as(part, "the unpromised gate", vg_p, vg_d[0], no);
            vgv = back(vg_p, no);
        }
        real *vgv_d = dev_of(vgv, no), *vsrc[2] = {vg_p, vgv_d}, *o2[2], *l2[2], *dq2[2], *dv2[2], *ds2[2];
        AttnArgs av = ad;
        av.v_stride = C;
        const long r1 = sg_attn_inplace_reads();
        for (int k = 0; k < 2; k++) {
            o2[k] = gpu_ops.alloc(sizeof(real) * no), l2[k] = gpu_ops.alloc(sizeof(real) * nl);
            dq2[k] = dev_of(zero, nq), dv2[k] = dev_of(zero, no), ds2[k] = dev_of(zero, H);
            gpu_ops.attention_fwd(o2[k], l2[k], src[k], src[k] + C, vsrc[k], &av);
            gpu_ops.attention_bwd(dq2[k], dq2[k] + C, dv2[k], ds2[k], NULL, dout_d, src[k], src[k] + C, vsrc[k], o2[k],
                                  l2[k], &av);
        }
        CHECK(sg_attn_inplace_reads() - r1 == (taken && dp ? 6 : 0), "%s: vg promised: %ld operands read in place, "
              "want %d", what, sg_attn_inplace_reads() - r1, taken && dp ? 6 : 0);
        static const char *const vname[] = {"attention out on vg", "attention lse on vg", "attention dq/dk on vg",
                                            "attention dvg", "attention dsink on vg"};
        real **vout[] = {o2, l2, dq2, dv2, ds2};
        const long vlen[] = {no, nl, nq, no, H};
        for (int o = 0; o < 5; o++) {
            snprintf(part, sizeof part, "%s, %s", what, vname[o]);
            bits_as(part, "the op on an fp32 vg", vout[o][0], vout[o][1], vlen[o]);
        }
        snprintf(part, sizeof part, "%s, vg", what);
        tail_check(part, vg_p, OP_PROMISE_ATTENTION, no, taken);
        op_matmul_only_end(vg_p, sizeof(real) * (size_t)no);
        void *dv_free[] = {vg_p, gq_d, vgv_d};
        for (size_t i = 0; i < sizeof dv_free / sizeof *dv_free; i++) gpu_ops.free(dv_free[i]);
        for (int k = 0; k < 2; k++) {
            void *dk[] = {o2[k], l2[k], dq2[k], dv2[k], ds2[k]};
            for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) gpu_ops.free(dk[i]);
        }
        free(vgv);
    }
    static const char *const aname[] = {"attention out", "attention lse", "attention dq/dk/dv", "attention dsink"};
    real **aout[] = {o_d, lse_d, dq_d, ds_d};
    const long alen[] = {no, nl, nq, H};
    for (int o = 0; o < 4; o++) {
        snprintf(part, sizeof part, "%s, %s", what, aname[o]);
        bits_as(part, "the op on an fp32 qkv", aout[o][0], aout[o][1], alen[o]);
    }
    real *oh = calloc((size_t)no, sizeof *oh), *lse = calloc((size_t)nl, sizeof *lse);
    cpu_ops.attention_fwd(oh, lse, qv, qv + C, qv + 2 * C, &a);
    snprintf(part, sizeof part, "%s, attention out against the CPU op", what);
    same(part, o_d[0], oh, no, 1);

    snprintf(part, sizeof part, "%s, qkv", what);
    tail_check(part, qkv_p, OP_PROMISE_ATTENTION, nq, taken);
    op_matmul_only_end(qkv_p, sizeof(real) * (size_t)nq);
    CHECK(!sg_bf16_inside(qkv_p + C), "%s: k still found in bf16 after the promise ended", what);
    void *ds[] = {x_d, w_d, sink_d, dout_d, tau_d, gw_d, gb_d, qkv_p, qkv_r, qv_d, dvg_d, dlb_d, lbk_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    for (int k = 0; k < 2; k++) {
        void *dk[] = {g_d[k], vg_d[k], lb_d[k], dv_d[k], dtau_d[k], dw_d[k], db_d[k], o_d[k], lse_d[k], dq_d[k], ds_d[k]};
        for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) gpu_ops.free(dk[i]);
    }
    free(x), free(w), free(sink), free(tau), free(gw), free(gb), free(dout), free(dvg), free(dlb), free(qv), free(dv0);
    free(dz), free(g), free(vg), free(lbh), free(lbk), free(zero), free(oh), free(lse);
}

void test_attention_operands(void) {
    static const char *const tiles[] = {"mma", "wmma"};
    for (int ki = 0; ki < 2; ki++) {
        setenv("SG_ATTN", tiles[ki], 1);
        for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
            for (int slot = 0; slot < 2; slot++) test_attention_operand(2, 70, 2, 64, kind, slot); /* vector paths */
        test_attention_operand(1, 33, 3, 30, GATE_PROJ, SLOT_VALUE); /* d 30: the scalar paths */
        test_attention_operand(1, 40, 2, 36, GATE_NORM, SLOT_VALUE); /* d 36: the pack's scalar path, gate's vector */
        test_attention_operand(2, 130, 2, 32, GATE_PROJ, SLOT_ROUTING); /* read in place: 3 tiles, the last short */
        test_attention_operand(1, 200, 4, 16, GATE_NORM, SLOT_ROUTING);
        test_attention_operand(1, 64, 1, 128, GATE_PROJ, SLOT_VALUE);
    }
    setenv("SG_ATTN", "wmma", 1);
}

/* `test_gpu_ops broken-promise attention`: under SG_ATTN=mma the analyses'
 * explicit attention (op_attention_probs, which reads fp32) is given a q and
 * k stored in bf16.  It must stop the program (exit 1, a message naming
 * op_attention_operand); under wmma the promise is not taken and it goes on. */
int broken_attention_promise(void) {
    const int B = 1, T = 16, H = 2, d = 16, C = H * d;
    real *x = host_rand((long)B * T * C, 1), *w = host_rand(3L * C * C, 0.2);
    real *x_d = dev_of(x, (long)B * T * C), *w_d = dev_of(w, 3L * C * C);
    real *qkv_d = gpu_ops.alloc(sizeof(real) * B * T * 3 * C), *p_d = gpu_ops.alloc(sizeof(real) * B * H * T * (T + 1));
    op_attention_operand(qkv_d, (long)B * T * 3 * C);
    gpu_ops.matmul_fwd(qkv_d, x_d, w_d, B * T, C, 3 * C);
    AttnArgs a = {B, T, H, d, 3 * C, 3 * C, 3 * C, C, 0, NULL, NULL};
    gpu_ops.attention_probs(p_d, qkv_d, qkv_d + C, &a);
    op_sync();
    printf("broken promise (attention): the probabilities went on, %ld outputs were stored in bf16\n",
           sg_matmul_bf16_outputs());
    return 0;
}

void test_bf16_operands(void) {
    test_bf16_operand(130, 64, 96);
    test_bf16_operand(67, 48, 98); /* n % 4 = 2: GELU's scalar tail reads bf16 too */
    test_bf16_operand(128, 384, 1536);
    test_bf16_layernorm(130, 768, 2304, 0); /* the register path */
    test_bf16_layernorm(70, 98, 392, 1);    /* the scalar kernels */
}
