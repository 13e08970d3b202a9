/* The emulated tests' cuDNN: cudnn_sdpa.h's two calls computed on the CPU,
 * so that SG_ATTN=cudnn's host side (attention_cudnn.cu: the operands,
 * strides, sink, twins, widening and the fallback) runs without a GPU.
 * It is an independent reference of the math cudnn_sdpa.h states, with
 * cuDNN's roundings: bf16 operands and outputs, fp32 scores, statistics and
 * accumulators, P and dS rounded to bf16 as operands of the next product
 * (as a flash kernel feeds its tensor cores).  Under EMU_BF16_EXACT the
 * bf16 type is a float and nothing is rounded.
 *
 * EMU_CUDNN=refuse makes every call a refusal (a machine without cuDNN,
 * or a graph it does not support); EMU_CUDNN=fail, a graph that fails as
 * it is issued. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_bf16.h"
#include "cudnn_sdpa.h"

namespace {

float ld(const SgSdpaTensor &t, int b, int h, int i, int c) {
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(t.p)[b * t.bs + h * t.hs + (long)i * t.rs + c]);
}
void st(const SgSdpaTensor &t, int b, int h, int i, int c, float x) {
    static_cast<__nv_bfloat16 *>(t.p)[b * t.bs + h * t.hs + (long)i * t.rs + c] = __float2bfloat16(x);
}
float rb(float x) { return __bfloat162float(__float2bfloat16(x)); }

int mode(char *why, size_t n) {
    const char *e = getenv("EMU_CUDNN");
    if (e && !strcmp(e, "refuse")) {
        snprintf(why, n, "the emulated cuDNN refuses every graph (EMU_CUDNN=refuse)");
        return 1;
    }
    if (e && !strcmp(e, "fail")) {
        snprintf(why, n, "the emulated cuDNN's graph failed as it was issued (EMU_CUDNN=fail)");
        return 2;
    }
    return 0;
}

/* s[j] = scale q_i . k_j for j <= i */
void scores(const SgSdpa *s, int b, int h, int i, std::vector<float> &sc) {
    for (int j = 0; j <= i; j++) {
        float x = 0.f;
        for (int c = 0; c < s->d; c++) x += ld(s->q, b, h, i, c) * ld(s->k, b, h, j, c);
        sc[j] = s->scale * x;
    }
}

} // namespace

extern "C" int sg_cudnn_sdpa_fwd(const SgSdpa *s, char *why, size_t n) {
    if (int r = mode(why, n)) return r;
    std::vector<float> sc(s->T), o(s->d);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++)
            for (int i = 0; i < s->T; i++) {
                scores(s, b, h, i, sc);
                float m = s->sink ? s->sink[h] : -INFINITY;
                for (int j = 0; j <= i; j++) m = fmaxf(m, sc[j]);
                float sum = s->sink ? expf(s->sink[h] - m) : 0.f;
                for (int j = 0; j <= i; j++) sum += expf(sc[j] - m);
                const float lse = m + logf(sum);
                s->lse[((long)b * s->H + h) * s->T + i] = lse;
                for (int c = 0; c < s->d; c++) o[c] = 0.f;
                for (int j = 0; j <= i; j++) {
                    const float p = rb(expf(sc[j] - lse));
                    for (int c = 0; c < s->d; c++) o[c] += p * ld(s->v, b, h, j, c);
                }
                for (int c = 0; c < s->d; c++) st(s->o, b, h, i, c, o[c]);
            }
    return 0;
}

extern "C" int sg_cudnn_sdpa_bwd(const SgSdpa *s, char *why, size_t n) {
    if (int r = mode(why, n)) return r;
    const int T = s->T, d = s->d;
    std::vector<float> sc(T), P((size_t)T * T), dS((size_t)T * T), acc(d);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            const float *lse = s->lse + ((long)b * s->H + h) * T;
            for (int i = 0; i < T; i++) {
                scores(s, b, h, i, sc);
                float D = 0.f;
                for (int c = 0; c < d; c++) D += ld(s->dout, b, h, i, c) * ld(s->o, b, h, i, c);
                for (int j = 0; j <= i; j++) {
                    const float p = expf(sc[j] - lse[i]);
                    float dp = 0.f;
                    for (int c = 0; c < d; c++) dp += ld(s->dout, b, h, i, c) * ld(s->v, b, h, j, c);
                    P[(size_t)i * T + j] = rb(p);
                    dS[(size_t)i * T + j] = rb(p * (dp - D));
                }
            }
            for (int i = 0; i < T; i++) { /* dq_i = scale sum_j dS_ij k_j */
                for (int c = 0; c < d; c++) acc[c] = 0.f;
                for (int j = 0; j <= i; j++)
                    for (int c = 0; c < d; c++) acc[c] += dS[(size_t)i * T + j] * ld(s->k, b, h, j, c);
                for (int c = 0; c < d; c++) st(s->dq, b, h, i, c, s->scale * acc[c]);
            }
            for (int j = 0; j < T; j++) { /* dk_j = scale sum_i dS_ij q_i,  dv_j = sum_i P_ij dO_i */
                for (int c = 0; c < d; c++) acc[c] = 0.f;
                for (int i = j; i < T; i++)
                    for (int c = 0; c < d; c++) acc[c] += dS[(size_t)i * T + j] * ld(s->q, b, h, i, c);
                for (int c = 0; c < d; c++) st(s->dk, b, h, j, c, s->scale * acc[c]);
                for (int c = 0; c < d; c++) acc[c] = 0.f;
                for (int i = j; i < T; i++)
                    for (int c = 0; c < d; c++) acc[c] += P[(size_t)i * T + j] * ld(s->dout, b, h, i, c);
                for (int c = 0; c < d; c++) st(s->dv, b, h, j, c, acc[c]);
            }
        }
    return 0;
}
