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
 * it is issued.  EMU_CUDNN_LOG=FILE appends each distinct graph asked for
 * (refused or not) as a line of tests/cudnn/sdpa_line.h, for
 * tests/cudnn/plan_check.cpp to put to the real cuDNN. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../cudnn/sdpa_line.h"
#include "cuda_bf16.h"
#include "cudnn_sdpa.h"

namespace {

/* one write(2) per line on an O_APPEND file: concurrent runs may share it */
void log_call(const SgSdpa *s, int bwd) {
    const char *path = getenv("EMU_CUDNN_LOG");
    if (!path || !*path) return;
    char line[1024];
    if (sdpa_line_write(line, sizeof line - 1, s, bwd)) return;
    static std::mutex mu;
    static std::set<std::string> said;
    std::lock_guard<std::mutex> lock(mu);
    if (!said.insert(line).second) return;
    strcat(line, "\n");
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
        fprintf(stderr, "emu_cudnn: cannot append to EMU_CUDNN_LOG=%s\n", path);
        exit(1);
    }
    close(fd);
}

/* one (b, h) slice of t as T x d floats (the bf16 values, widened) */
void slice(const SgSdpaTensor &t, int b, int h, int T, int d, std::vector<float> &x) {
    const __nv_bfloat16 *p = static_cast<const __nv_bfloat16 *>(t.p) + b * t.bs + h * t.hs;
    x.resize((size_t)T * d);
    for (int i = 0; i < T; i++)
        for (int c = 0; c < d; c++) x[(size_t)i * d + c] = __bfloat162float(p[(long)i * t.rs + c]);
}
void put(const SgSdpaTensor &t, int b, int h, int T, int d, const std::vector<float> &x) {
    __nv_bfloat16 *p = static_cast<__nv_bfloat16 *>(t.p) + b * t.bs + h * t.hs;
    for (int i = 0; i < T; i++)
        for (int c = 0; c < d; c++) p[(long)i * t.rs + c] = __float2bfloat16(x[(size_t)i * d + c]);
}
float rb(float x) { return __bfloat162float(__float2bfloat16(x)); }
float dot(const float *a, const float *b, int d) {
    float x = 0.f;
    for (int c = 0; c < d; c++) x += a[c] * b[c];
    return x;
}

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

} // namespace

extern "C" int sg_cudnn_sdpa_fwd(const SgSdpa *s, char *why, size_t n) {
    log_call(s, 0);
    if (int r = mode(why, n)) return r;
    const int T = s->T, d = s->d;
    std::vector<float> q, k, v, o((size_t)T * d), sc(T);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            slice(s->q, b, h, T, d, q), slice(s->k, b, h, T, d, k), slice(s->v, b, h, T, d, v);
            for (int i = 0; i < T; i++) {
                for (int j = 0; j <= i; j++) sc[j] = s->scale * dot(&q[(size_t)i * d], &k[(size_t)j * d], d);
                float m = s->sink ? s->sink[h] : -INFINITY;
                for (int j = 0; j <= i; j++) m = fmaxf(m, sc[j]);
                float sum = s->sink ? expf(s->sink[h] - m) : 0.f;
                for (int j = 0; j <= i; j++) sum += expf(sc[j] - m);
                const float lse = m + logf(sum);
                s->lse[((long)b * s->H + h) * T + i] = lse;
                float *oi = &o[(size_t)i * d];
                for (int c = 0; c < d; c++) oi[c] = 0.f;
                for (int j = 0; j <= i; j++) {
                    const float p = rb(expf(sc[j] - lse));
                    for (int c = 0; c < d; c++) oi[c] += p * v[(size_t)j * d + c];
                }
            }
            put(s->o, b, h, T, d, o);
        }
    return 0;
}

extern "C" int sg_cudnn_sdpa_bwd(const SgSdpa *s, char *why, size_t n) {
    log_call(s, 1);
    if (int r = mode(why, n)) return r;
    const int T = s->T, d = s->d;
    std::vector<float> q, k, v, o, g, P((size_t)T * T), dS((size_t)T * T);
    std::vector<float> dq((size_t)T * d), dk((size_t)T * d), dv((size_t)T * d);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++) {
            slice(s->q, b, h, T, d, q), slice(s->k, b, h, T, d, k), slice(s->v, b, h, T, d, v);
            slice(s->o, b, h, T, d, o), slice(s->dout, b, h, T, d, g);
            const float *lse = s->lse + ((long)b * s->H + h) * T;
            for (int i = 0; i < T; i++) {
                const float *qi = &q[(size_t)i * d], *gi = &g[(size_t)i * d];
                const float D = dot(gi, &o[(size_t)i * d], d);
                for (int j = 0; j <= i; j++) {
                    const float p = expf(s->scale * dot(qi, &k[(size_t)j * d], d) - lse[i]);
                    P[(size_t)i * T + j] = rb(p);
                    dS[(size_t)i * T + j] = rb(p * (dot(gi, &v[(size_t)j * d], d) - D));
                }
            }
            /* dq_i = scale sum_j dS_ij k_j;  dk_j = scale sum_i dS_ij q_i;  dv_j = sum_i P_ij dO_i */
            for (size_t e = 0; e < dq.size(); e++) dq[e] = dk[e] = dv[e] = 0.f;
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    const float ds = dS[(size_t)i * T + j], p = P[(size_t)i * T + j];
                    for (int c = 0; c < d; c++) {
                        dq[(size_t)i * d + c] += ds * k[(size_t)j * d + c];
                        dk[(size_t)j * d + c] += ds * q[(size_t)i * d + c];
                        dv[(size_t)j * d + c] += p * g[(size_t)i * d + c];
                    }
                }
            for (size_t e = 0; e < dq.size(); e++) dq[e] *= s->scale, dk[e] *= s->scale;
            put(s->dq, b, h, T, d, dq), put(s->dk, b, h, T, d, dk), put(s->dv, b, h, T, d, dv);
        }
    return 0;
}
