/* test_gpu_ops: the streaming attention, its explicit probabilities, and
 * the decode step. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops_test.h"

void test_attention(int B, int T, int H, int d, int phantom, int logbias) {
    int C = H * d, qs = 3 * C;
    long nq = (long)B * T * qs, no = (long)B * T * C, nl = (long)B * H * T;
    real *qkv = host_rand(nq, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *o = calloc(no, sizeof *o), *lse = calloc(nl, sizeof *lse), *dout = host_rand(no, 1);
    real *dqkv = calloc(nq, sizeof *dqkv), *dsink = host_rand(H, 1), *dlb = calloc(nl, sizeof *dlb);
    real *qkv_d = dev_of(qkv, nq), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl), *o_d = dev_of(o, no),
         *lse_d = dev_of(lse, nl), *dout_d = dev_of(dout, no), *dqkv_d = dev_of(dqkv, nq), *dsink_d = dev_of(dsink, H),
         *dlb_d = dev_of(dlb, nl);
    AttnArgs a = {B, T, H, d, qs, qs, qs, C, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, qs, qs, C, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    cpu_ops.attention_fwd(o, lse, qkv, qkv + C, qkv + 2 * C, &a);
    gpu_ops.attention_fwd(o_d, lse_d, qkv_d, qkv_d + C, qkv_d + 2 * C, &ad);
    char what[128], label[32];
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma", *wg = getenv("SG_ATTN_WGMMA");
    snprintf(label, sizeof label, "%s%s", tiles,
             wg && !strcmp(wg, "1") ? "+wgmma" : wg && !strcmp(wg, "2") ? "+wgmma2" : "");
    snprintf(what, sizeof what, "attention fwd B%d T%d H%d d%d phantom %d logbias %d tiles %s", B, T, H, d, phantom,
             logbias, label);
    same(what, o_d, o, no, 1);
    same("attention lse", lse_d, lse, nl, 1);
    cpu_ops.attention_bwd(dqkv, dqkv + C, dqkv + 2 * C, phantom == 2 ? dsink : NULL, logbias ? dlb : NULL, dout, qkv,
                          qkv + C, qkv + 2 * C, o, lse, &a);
    gpu_ops.attention_bwd(dqkv_d, dqkv_d + C, dqkv_d + 2 * C, phantom == 2 ? dsink_d : NULL, logbias ? dlb_d : NULL,
                          dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d, lse_d, &ad);
    snprintf(what, sizeof what, "attention dq/dk/dv B%d T%d d%d phantom %d logbias %d tiles %s", B, T, d, phantom,
             logbias, label);
    same(what, dqkv_d, dqkv, nq, 1);
    if (phantom == 2) {
        /* dsink_h += -sum_{b,i} exp(c_h - LSE_i) D_i: its terms may cancel,
         * with each other and with the value added to, so its bf16 rounding
         * error scales with the terms, not with the result (as in
         * tests/emu/attention_emu_test.cpp): the scale is the larger of
         * |dsink| and sum_{b,i} exp(c_h - LSE_i) |D_i|, D_i = dO_i . o_i. */
        double scale = 0;
        for (int h = 0; h < H; h++) {
            double t = 0;
            for (long r = 0; r < (long)B * T; r++) {
                double Di = 0;
                for (int e = 0; e < d; e++) Di += (double)dout[r * C + h * d + e] * o[r * C + h * d + e];
                const long bh = (r / T) * H + h, i = r % T;
                t += exp((double)sink[h] - lse[bh * T + i]) * fabs(Di);
            }
            if (t > scale) scale = t;
            if (fabs(dsink[h]) > scale) scale = fabs(dsink[h]);
        }
        compare("attention dsink (accumulated)", dsink_d, dsink, H, 1, scale);
    }
    /* At T = 1 without a phantom the exact dlogbias is 0 (P = 1): both sides
     * hold rounding noise of different sums, so there is nothing to compare. */
    if (logbias && !(T == 1 && !phantom)) same("attention dlogbias", dlb_d, dlb, nl, 1);
    real *dqkv2 = dev_of(dqkv, nq);
    gpu_ops.attention_bwd(dqkv2, dqkv2 + C, dqkv2 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d, lse_d,
                          &ad);
    bitwise("attention bwd", dqkv_d, dqkv2, nq);
    if (!strcmp(tiles, "mma") && d <= 64) {
        /* one 16-row m-tile a warp instead of two (SG_ATTN_WARP_ROWS,
         * kernels/cuda/attention_fwd_mma.cu): every row runs the same
         * instructions, so the bits must be the same */
        real *o16 = dev_of(o, no), *lse16 = dev_of(lse, nl), *dq16 = dev_of(dqkv, nq);
        setenv("SG_ATTN_WARP_ROWS", "16", 1);
        gpu_ops.attention_fwd(o16, lse16, qkv_d, qkv_d + C, qkv_d + 2 * C, &ad);
        gpu_ops.attention_bwd(dq16, dq16 + C, dq16 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d,
                              lse_d, &ad);
        unsetenv("SG_ATTN_WARP_ROWS");
        snprintf(what, sizeof what, "attention fwd/bwd B%d T%d d%d, 16 rows a warp against 32", B, T, d);
        real *a1 = back(o_d, no), *a2 = back(o16, no), *l1 = back(lse_d, nl), *l2 = back(lse16, nl);
        real *g1 = back(dqkv2, nq), *g2 = back(dq16, nq);
        CHECK(!memcmp(a1, a2, sizeof *a1 * (size_t)no) && !memcmp(l1, l2, sizeof *l1 * (size_t)nl) &&
                  !memcmp(g1, g2, sizeof *g1 * (size_t)nq),
              "%s: not bitwise", what);
        free(a1), free(a2), free(l1), free(l2), free(g1), free(g2);
        gpu_ops.free(o16), gpu_ops.free(lse16), gpu_ops.free(dq16);
    }
    if (!strcmp(tiles, "mma")) {
        /* dQ from the dS tiles the dK/dV kernel stored (SG_ATTN_DQ=stored,
         * kernels/cuda/attention_bwd_mma.cu): the same dS and the same order
         * of products as recomputing it.  The emulator shows the bits equal;
         * here the recomputed dS^T = K Q^T must round as S = Q K^T does,
         * which the hardware does not promise, so: within the bf16
         * tolerance, said when bitwise, and deterministic. */
        real *dqs = dev_of(dqkv, nq), *dqs2 = dev_of(dqkv, nq);
        setenv("SG_ATTN_DQ", "stored", 1);
        gpu_ops.attention_bwd(dqs, dqs + C, dqs + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C, o_d,
                              lse_d, &ad);
        gpu_ops.attention_bwd(dqs2, dqs2 + C, dqs2 + 2 * C, NULL, NULL, dout_d, qkv_d, qkv_d + C, qkv_d + 2 * C,
                              o_d, lse_d, &ad);
        unsetenv("SG_ATTN_DQ");
        real *g1 = back(dqkv2, nq), *g2 = back(dqs, nq);
        snprintf(what, sizeof what, "attention bwd B%d T%d d%d, dQ from the stored dS against recomputed", B, T, d);
        compare(what, dqs, g1, nq, 1, maxabs(g1, nq));
        printf("%s: %s\n", what, memcmp(g1, g2, sizeof *g1 * (size_t)nq) ? "within tolerance, not bitwise" : "bitwise");
        snprintf(what, sizeof what, "attention bwd B%d T%d d%d, dQ from the stored dS", B, T, d);
        bitwise(what, dqs, dqs2, nq);
        free(g1), free(g2);
        gpu_ops.free(dqs), gpu_ops.free(dqs2);
    }
    void *ds[] = {qkv_d, sink_d, lb_d, o_d, lse_d, dout_d, dqkv_d, dsink_d, dlb_d, dqkv2};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(qkv), free(sink), free(lb), free(o), free(lse), free(dout), free(dqkv), free(dsink), free(dlb);
}

/* The value gate's backward with the attention's (op_attention_gate_bwd):
 * fused into the dK/dV kernel under the mma tiles, the two ops in turn
 * otherwise.  Against the CPU (the two ops): dq, dk and the gate's dv at
 * the bf16 rule; the parameter gradients' increments at the bf16 rule
 * scaled by the largest sum of their terms' magnitudes (as
 * tests/emu/attention_emu_test.cpp).  Against the unfused ops on the
 * device: dq and dk bitwise, dv and the parameter gradients at fp32
 * tolerance; and bitwise on a second run. */
void test_attention_gate(int B, int T, int H, int d, int kind, int phantom) {
    const int C = H * d, qs = 3 * C;
    const long rows = (long)B * T, nq = rows * qs, nv = rows * C, nl = (long)B * H * T, nw = (long)H * d;
    real *qkv = host_rand(nq, 1), *sink = host_rand(H, 1), *dout = host_rand(nv, 1);
    real *tau = host_rand(H, 0.3), *w = host_rand(nw, 0.3), *bias = host_rand(H, 0.5);
    for (int h = 0; h < H; h++) tau[h] += 1;
    real *g = calloc(nl, sizeof *g), *vg = calloc(nv, sizeof *vg), *o = calloc(nv, sizeof *o),
         *lse = calloc(nl, sizeof *lse);
    const GateParams p = {kind, SLOT_VALUE, 8, tau, w, bias};
    cpu_ops.gate_fwd(g, vg, NULL, qkv + 2 * C, qs, &p, B, T, H, d);
    const AttnArgs a = {B, T, H, d, qs, qs, C, C, phantom > 0, phantom == 2 ? sink : NULL, NULL};
    cpu_ops.attention_fwd(o, lse, qkv, qkv + C, vg, &a);
    real *dq = calloc(nq, sizeof *dq), *dvg = calloc(nv, sizeof *dvg);
    real *dtau0 = host_rand(H, 0.1), *dw0 = host_rand(nw, 0.1), *db0 = host_rand(H, 0.1);
    real *dtau = malloc(sizeof *dtau * H), *dw = malloc(sizeof *dw * nw), *db = malloc(sizeof *db * H);
    memcpy(dtau, dtau0, sizeof *dtau * H), memcpy(dw, dw0, sizeof *dw * nw), memcpy(db, db0, sizeof *db * H);
    const AttnGateBwd gr = {&p, qkv + 2 * C, qs, g, dq + 2 * C, qs, dtau, dw, db, dvg};
    /* dsink (unchanged by the gate) is test_attention's */
    cpu_ops.attention_gate_bwd(dq, dq + C, NULL, dout, qkv, qkv + C, vg, o, lse, &a, &gr);

    real *qkv_d = dev_of(qkv, nq), *sink_d = dev_of(sink, H), *dout_d = dev_of(dout, nv), *g_d = dev_of(g, nl),
         *vg_d = dev_of(vg, nv), *o_d = dev_of(o, nv), *lse_d = dev_of(lse, nl), *tau_d = dev_of(tau, H),
         *w_d = dev_of(w, nw), *b_d = dev_of(bias, H);
    const GateParams pd = {kind, SLOT_VALUE, 8, tau_d, w_d, b_d};
    const AttnArgs ad = {B, T, H, d, qs, qs, C, C, phantom > 0, phantom == 2 ? sink_d : NULL, NULL};
    real *dq_d[3], *dvg_d[3], *dtau_d[3], *dw_d[3], *db_d[3]; /* the op, the op again, the two ops */
    for (int k = 0; k < 3; k++) {
        dq_d[k] = dev_of(dq, nq), dvg_d[k] = dev_of(dvg, nv);
        dtau_d[k] = dev_of(dtau0, H), dw_d[k] = dev_of(dw0, nw), db_d[k] = dev_of(db0, H);
    }
    for (int k = 0; k < 3; k++) {
        const AttnGateBwd gd = {&pd, qkv_d + 2 * C, qs, g_d, dq_d[k] + 2 * C, qs, dtau_d[k], dw_d[k], db_d[k], dvg_d[k]};
        if (k < 2)
            gpu_ops.attention_gate_bwd(dq_d[k], dq_d[k] + C, NULL, dout_d, qkv_d, qkv_d + C, vg_d, o_d, lse_d, &ad,
                                       &gd);
        else {
            gpu_ops.attention_bwd(dq_d[k], dq_d[k] + C, dvg_d[k], NULL, NULL, dout_d, qkv_d, qkv_d + C, vg_d, o_d,
                                  lse_d, &ad);
            gpu_ops.gate_bwd(dq_d[k] + 2 * C, qs, dtau_d[k], dw_d[k], db_d[k], dvg_d[k], NULL, qkv_d + 2 * C, qs, g_d,
                             &pd, B, T, H, d);
        }
    }
    char what[160];
    const char *tiles = getenv("SG_ATTN") ? getenv("SG_ATTN") : "wmma";
    snprintf(what, sizeof what, "attention+gate bwd B%d T%d H%d d%d %s phantom %d tiles %s: dq/dk/dv", B, T, H, d,
             kind == GATE_NORM ? "norm" : "proj", phantom, tiles);
    same(what, dq_d[0], dq, nq, 1);
    /* the scales: max over h of sum_j |dz_j|, over (h, k) of sum_j |dz_j v_jk| */
    double sz = 0, szv = 0;
    double *tzv = calloc((size_t)d, sizeof *tzv);
    for (int h = 0; h < H; h++) {
        double tz = 0;
        memset(tzv, 0, sizeof *tzv * (size_t)d);
        for (long r = 0; r < rows; r++) {
            const real *vr = qkv + r * qs + 2 * C + (long)h * d, *dr = dvg + r * C + (long)h * d;
            double av = 0;
            for (int k = 0; k < d; k++) av += (double)dr[k] * vr[k];
            const double gj = g[((r / T) * H + h) * T + r % T], dz = fabs(av * gj * (1 - gj));
            tz += dz;
            for (int k = 0; k < d; k++) tzv[k] += dz * fabs(vr[k]);
        }
        if (tz > sz) sz = tz;
        for (int k = 0; k < d; k++)
            if (tzv[k] > szv) szv = tzv[k];
    }
    free(tzv);
    /* increments: the accumulators minus their common start */
    real *inc[3][2];
    const real *start[3] = {dtau0, dw0, db0};
    const long len[3] = {H, nw, H};
    real **acc[3] = {dtau_d, dw_d, db_d};
    const real *cpu[3] = {dtau, dw, db};
    const double scale[3] = {8 * sz, szv, sz};
    const char *name[3] = {"dtau", "dw", "db"};
    for (int t = 0; t < 3; t++) {
        if ((kind == GATE_NORM) != (t == 0)) continue; /* norm: dtau; projection: dw and db */
        for (int side = 0; side < 2; side++) {
            inc[t][side] = side ? malloc(sizeof(real) * len[t]) : back(acc[t][0], len[t]);
            for (long i = 0; i < len[t]; i++)
                inc[t][side][i] = (side ? cpu[t][i] : inc[t][side][i]) - start[t][i];
        }
        snprintf(what, sizeof what, "attention+gate bwd B%d T%d d%d tiles %s: %s (increment)", B, T, d, tiles,
                 name[t]);
        real *inc_d = dev_of(inc[t][0], len[t]);
        compare(what, inc_d, inc[t][1], len[t], 1, scale[t]);
        /* against the unfused ops on the device, and a second run */
        real *u = back(acc[t][2], len[t]);
        snprintf(what, sizeof what, "attention+gate bwd B%d T%d d%d tiles %s: %s against the unfused ops", B, T, d,
                 tiles, name[t]);
        compare(what, acc[t][0], u, len[t], 0, maxabs(u, len[t]));
        snprintf(what, sizeof what, "attention+gate bwd B%d T%d d%d tiles %s: %s", B, T, d, tiles, name[t]);
        bitwise(what, acc[t][0], acc[t][1], len[t]);
        gpu_ops.free(inc_d), free(u), free(inc[t][0]), free(inc[t][1]);
    }
    real *u = back(dq_d[2], nq);
    snprintf(what, sizeof what, "attention+gate bwd B%d T%d d%d tiles %s: dq/dk/dv against the unfused ops", B, T, d,
             tiles);
    compare(what, dq_d[0], u, nq, 0, maxabs(u, nq));
    snprintf(what, sizeof what, "attention+gate bwd B%d T%d d%d tiles %s: dq/dk/dv", B, T, d, tiles);
    bitwise(what, dq_d[0], dq_d[1], nq);
    free(u);
    void *dd[] = {qkv_d, sink_d, dout_d, g_d, vg_d, o_d, lse_d, tau_d, w_d, b_d};
    for (size_t i = 0; i < sizeof dd / sizeof *dd; i++) gpu_ops.free(dd[i]);
    for (int k = 0; k < 3; k++) {
        void *kk[] = {dq_d[k], dvg_d[k], dtau_d[k], dw_d[k], db_d[k]};
        for (size_t i = 0; i < sizeof kk / sizeof *kk; i++) gpu_ops.free(kk[i]);
    }
    free(qkv), free(sink), free(dout), free(tau), free(w), free(bias), free(g), free(vg), free(o), free(lse);
    free(dq), free(dvg), free(dtau0), free(dw0), free(db0), free(dtau), free(dw), free(db);
}

/* Explicit attention (analyses): probabilities and their apply, as
 * test_attention's arms.  p and out start as junk on both sides, so every
 * entry the op owns must be written; out has a padded row stride whose
 * padding must survive.  apply is checked on the reference's p and on a
 * dense random p (entries above the diagonal and in the phantom column:
 * the first count, the second must not). */
void test_attention_probs(int B, int T, int H, int d, int phantom, int logbias) {
    int C = H * d, qs = 3 * C, os = C + 8;
    long nq = (long)B * T * qs, no = (long)B * T * os, nl = (long)B * H * T, np = (long)B * H * T * (T + 1);
    real *qkv = host_rand(nq, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *p = host_rand(np, 1), *dense = host_rand(np, 0.1), *o0 = host_rand(no, 1);
    real *o = malloc(sizeof *o * (size_t)no);
    memcpy(o, o0, sizeof *o * (size_t)no);
    real *qkv_d = dev_of(qkv, nq), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl), *p_d = dev_of(p, np),
         *p2_d = dev_of(p, np), *o_d = dev_of(o0, no), *o2_d = dev_of(o0, no);
    AttnArgs a = {B, T, H, d, qs, qs, qs, os, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, qs, qs, os, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    char what[160], tag[96];
    snprintf(tag, sizeof tag, "B%d T%d H%d d%d phantom %d logbias %d", B, T, H, d, phantom, logbias);

    cpu_ops.attention_probs(p, qkv, qkv + C, &a);
    gpu_ops.attention_probs(p_d, qkv_d, qkv_d + C, &ad);
    snprintf(what, sizeof what, "attention probs %s", tag);
    same(what, p_d, p, np, 0);
    /* the device's own rows: sum to one, exact zeros above the diagonal and
     * (without a phantom) in the phantom column */
    real *g = back(p_d, np);
    long badsum = -1, badzero = -1;
    double worst = 0; /* the largest |row sum - 1| */
    for (long r = 0; r < (long)B * H * T; r++) {
        const real *row = g + r * (T + 1);
        int i = (int)(r % T);
        double s = 0;
        for (int j = 0; j <= T; j++) s += row[j];
        if (fabs(s - 1) > worst) worst = fabs(s - 1);
        if (fabs(s - 1) > 1e-5 && badsum < 0) badsum = r;
        for (int j = i + 1; j < T; j++)
            if (row[j] != 0 && badzero < 0) badzero = r;
        if (!phantom && row[T] != 0 && badzero < 0) badzero = r;
    }
    CHECK(badsum < 0, "attention probs %s: row %ld does not sum to 1 within 1e-5 (worst |sum - 1| %.3g)", tag,
          badsum, worst);
    CHECK(badzero < 0, "attention probs %s: row %ld has a nonzero entry above the diagonal%s", tag, badzero,
          phantom ? "" : " or in the phantom column");
    free(g);
    gpu_ops.attention_probs(p2_d, qkv_d, qkv_d + C, &ad);
    snprintf(what, sizeof what, "attention probs %s", tag);
    bitwise(what, p_d, p2_d, np);

    /* apply, on the reference's p (uploaded over the device's) */
    gpu_ops.upload(p_d, p, sizeof *p * (size_t)np);
    cpu_ops.attention_apply(o, p, qkv + 2 * C, &a);
    gpu_ops.attention_apply(o_d, p_d, qkv_d + 2 * C, &ad);
    snprintf(what, sizeof what, "attention apply %s", tag);
    same(what, o_d, o, no, 0);
    gpu_ops.attention_apply(o2_d, p_d, qkv_d + 2 * C, &ad);
    bitwise(what, o_d, o2_d, no);
    /* apply, on a dense p */
    gpu_ops.upload(p_d, dense, sizeof *dense * (size_t)np);
    cpu_ops.attention_apply(o, dense, qkv + 2 * C, &a);
    gpu_ops.attention_apply(o_d, p_d, qkv_d + 2 * C, &ad);
    snprintf(what, sizeof what, "attention apply (dense p) %s", tag);
    same(what, o_d, o, no, 0);

    void *ds[] = {qkv_d, sink_d, lb_d, p_d, p2_d, o_d, o2_d};
    for (size_t i = 0; i < sizeof ds / sizeof *ds; i++) gpu_ops.free(ds[i]);
    free(qkv), free(sink), free(lb), free(p), free(dense), free(o0), free(o);
}

/* Decode attention (one query per sequence), as test_attention's arms, with
 * a shared query (q_stride 0) or one per sequence (q_stride H*d).  K and V
 * are interleaved rows (stride 2C), out has a padded row stride whose
 * padding must survive, and every overwritten output starts as the same
 * junk on both sides.  Everything is fp32 (fp32 tolerance); the second GPU
 * run, from the same starting buffers, must give the same bits. */
void test_attention_decode(int B, int T, int H, int d, int phantom, int logbias, int qshared) {
    int C = H * d, kvs = 2 * C, os = C + 8, qs = qshared ? 0 : C;
    long nq = qshared ? C : (long)B * C, nkv = (long)B * T * kvs, no = (long)B * os, nbh = (long)B * H,
         nl = nbh * T, ndq = (long)B * C;
    real *q = host_rand(nq, 1), *kv = host_rand(nkv, 1), *sink = host_rand(H, 1), *lb = host_rand(nl, 0.5);
    for (long i = 0; i < nl; i++) lb[i] = -fabs(lb[i]);
    real *o = host_rand(no, 1), *lse = host_rand(nbh, 1), *dout = host_rand(no, 1);
    real *dq = host_rand(ndq, 1), *dkv = host_rand(nkv, 1), *dlb = host_rand(nl, 1), *dsink = host_rand(H, 1);
    real *q_d = dev_of(q, nq), *kv_d = dev_of(kv, nkv), *sink_d = dev_of(sink, H), *lb_d = dev_of(lb, nl);
    real *o_d = dev_of(o, no), *o2_d = dev_of(o, no), *lse_d = dev_of(lse, nbh), *lse2_d = dev_of(lse, nbh),
         *dout_d = dev_of(dout, no);
    real *dq_d = dev_of(dq, ndq), *dq2_d = dev_of(dq, ndq), *dkv_d = dev_of(dkv, nkv), *dkv2_d = dev_of(dkv, nkv),
         *dlb_d = dev_of(dlb, nl), *dlb2_d = dev_of(dlb, nl), *dsink_d = dev_of(dsink, H),
         *dsink2_d = dev_of(dsink, H);
    AttnArgs a = {B, T, H, d, qs, kvs, kvs, os, phantom > 0, phantom == 2 ? sink : NULL, logbias ? lb : NULL};
    AttnArgs ad = {B, T, H, d, qs, kvs, kvs, os, phantom > 0, phantom == 2 ? sink_d : NULL, logbias ? lb_d : NULL};
    char what[160], tag[112];
    snprintf(tag, sizeof tag, "B%d T%d H%d d%d phantom %d logbias %d q_stride %d", B, T, H, d, phantom, logbias, qs);

    cpu_ops.attention_decode_fwd(o, lse, q, kv, kv + C, &a);
    gpu_ops.attention_decode_fwd(o_d, lse_d, q_d, kv_d, kv_d + C, &ad);
    snprintf(what, sizeof what, "attention decode out %s", tag);
    same(what, o_d, o, no, 0);
    snprintf(what, sizeof what, "attention decode lse %s", tag);
    same(what, lse_d, lse, nbh, 0);
    gpu_ops.attention_decode_fwd(o2_d, lse2_d, q_d, kv_d, kv_d + C, &ad);
    snprintf(what, sizeof what, "attention decode fwd %s", tag);
    bitwise(what, o_d, o2_d, no);
    bitwise(what, lse_d, lse2_d, nbh);

    /* the backward from the reference's forward on both sides */
    gpu_ops.upload(o_d, o, sizeof *o * (size_t)no);
    gpu_ops.upload(lse_d, lse, sizeof *lse * (size_t)nbh);
    real *ds = phantom == 2 ? dsink : NULL, *ds_d = phantom == 2 ? dsink_d : NULL;
    real *ds2_d = phantom == 2 ? dsink2_d : NULL;
    cpu_ops.attention_decode_bwd(dq, dkv, dkv + C, ds, logbias ? dlb : NULL, dout, q, kv, kv + C, o, lse, &a);
    gpu_ops.attention_decode_bwd(dq_d, dkv_d, dkv_d + C, ds_d, logbias ? dlb_d : NULL, dout_d, q_d, kv_d, kv_d + C, o_d,
                                 lse_d, &ad);
    /* At T = 1 without a phantom the exact dS is 0 (p = 1, dO . v = D), so dq,
     * dk and dlogbias are rounding noise on both sides; in fp32 that is
     * ~1e-6 (the error of a d-term dot product), under the 1e-5 absolute
     * tolerance, so they are compared as everywhere else. */
    snprintf(what, sizeof what, "attention decode dq %s", tag);
    same(what, dq_d, dq, ndq, 0);
    snprintf(what, sizeof what, "attention decode dk/dv %s", tag);
    same(what, dkv_d, dkv, nkv, 0);
    if (phantom == 2) {
        snprintf(what, sizeof what, "attention decode dsink (accumulated) %s", tag);
        same(what, dsink_d, dsink, H, 0);
    }
    if (logbias) {
        snprintf(what, sizeof what, "attention decode dlogbias %s", tag);
        same(what, dlb_d, dlb, nl, 0);
    }
    gpu_ops.attention_decode_bwd(dq2_d, dkv2_d, dkv2_d + C, ds2_d, logbias ? dlb2_d : NULL, dout_d, q_d, kv_d,
                                 kv_d + C, o_d, lse_d, &ad);
    snprintf(what, sizeof what, "attention decode bwd %s", tag);
    bitwise(what, dq_d, dq2_d, ndq);
    bitwise(what, dkv_d, dkv2_d, nkv);
    bitwise(what, dlb_d, dlb2_d, nl);
    bitwise(what, dsink_d, dsink2_d, H);

    void *dd[] = {q_d, kv_d, sink_d, lb_d, o_d, o2_d, lse_d, lse2_d, dout_d, dq_d, dq2_d, dkv_d, dkv2_d, dlb_d, dlb2_d,
                  dsink_d, dsink2_d};
    for (size_t i = 0; i < sizeof dd / sizeof *dd; i++) gpu_ops.free(dd[i]);
    free(q), free(kv), free(sink), free(lb), free(o), free(lse), free(dout), free(dq), free(dkv), free(dlb),
        free(dsink);
}
