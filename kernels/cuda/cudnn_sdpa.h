/* The fused causal attention of cuDNN (its SDPA graphs), behind a plain
 * interface: kernels/cuda/cudnn_sdpa.cpp implements it over the cuDNN
 * frontend when the build has cuDNN (make CUDNN=auto|yes), and says why not
 * otherwise; the emulated tests link a CPU twin (tests/emu/emu_cudnn.cpp).
 * attention_cudnn.cu prepares the operands and takes the results
 * (SG_ATTN=cudnn).
 *
 * The math is op_attention_fwd's and op_attention_bwd's (ops.h) without
 * the per-key log-bias:
 *   s_ij = scale q_i . k_j (j <= i);  with a phantom, one more logit c_h
 *   (sink[h]) whose value is zero: cuDNN's "sink token";
 *   lse_i = log(exp(c_h) + sum_j exp(s_ij))  (natural log, fp32);
 *   o_i = sum_j exp(s_ij - lse_i) v_j;
 *   backward: dS = P o (dP - D), D_i = dO_i . o_i in fp32, dq = scale dS k,
 *   dk = scale dS^T q, dv = P^T dO.
 * The sink's own gradient is not asked of cuDNN: attention_bwd.cu forms it
 * in a fixed order (no atomics), as for the tile kernels.
 * q, k, v, o, dO, dq, dk, dv are bf16 with fp32 accumulation, as under
 * autocast; the backward runs cuDNN's deterministic algorithm. */
#ifndef SG_CUDNN_SDPA_H
#define SG_CUDNN_SDPA_H

#include <stddef.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A bf16 [B, H, T, d] tensor: element (b, h, t, c) at
 * p + b bs + h hs + t rs + c (strides in elements) */
typedef struct {
    void *p;
    long bs, hs, rs;
} SgSdpaTensor;

typedef struct {
    int B, H, T, d;
    float scale;       /* 1 / sqrt(d) */
    const float *sink; /* [H] phantom logits on the device, or NULL: no phantom */
    SgSdpaTensor q, k, v;
    SgSdpaTensor o;    /* written by the forward, read by the backward */
    SgSdpaTensor dout; /* backward */
    SgSdpaTensor dq, dk, dv; /* written by the backward */
    float *lse;        /* [B, H, T] fp32: written by the forward, read by the backward */
    cudaStream_t stream;
} SgSdpa;

/* 0 when the graph ran (issued on s->stream).  1: refused, with why (a
 * line, for the fallback's message) in why[0, n): no cuDNN in the build or
 * on the machine, or a shape or version cuDNN does not support; the
 * outputs are untouched, so the caller can run its own kernels instead.
 * 2: a graph that was built failed as it was issued; its outputs are
 * unknown, and the caller stops the program (why says what cuDNN said). */
int sg_cudnn_sdpa_fwd(const SgSdpa *s, char *why, size_t n);
int sg_cudnn_sdpa_bwd(const SgSdpa *s, char *why, size_t n);

/* Whether cuDNN would take s's graph (the forward's, or the backward's if
 * bwd) on a GPU it is told about rather than one it sees: the device
 * properties as cuDNN serialises them (devprops: its JSON, the attributes
 * of cudaDeviceProp it reads) and the compute capability (sm: 90 for
 * sm_90).  The very graph sg_cudnn_sdpa_fwd/bwd build goes through cuDNN's
 * validation, heuristics and support check, which need no GPU; building
 * the plan itself (loading its kernels) needs a driver and is not done.
 * The pointers in s are not read.  0: supported, with *engines the engine
 * configurations cuDNN offered and why their names, its first choice
 * first; 1:
 * refused, why says cuDNN's reason; 2: the
 * check could not be made (no cuDNN in the build or on the machine,
 * devprops not taken).  Runtime-compiled engines need a libcuda.so.1 to be
 * loadable (the toolkit's stub will do): without one they are refused. */
int sg_cudnn_sdpa_check(const SgSdpa *s, int bwd, const char *devprops, int sm, int *engines, char *why,
                        size_t n);

#ifdef __cplusplus
}
#endif

#endif
