/* The op interface as a table of function pointers, so that one test binary
 * can call the CPU reference (cpu_ops, kernels/cpu compiled with
 * cpu_names.h) and the CUDA ops (gpu_ops) side by side. */
#ifndef SG_OPTABLE_H
#define SG_OPTABLE_H

#include "ops.h"

typedef struct {
    void (*matmul_fwd)(real *, const real *, const real *, int, int, int);
    void (*matmul_bwd)(real *, real *, const real *, const real *, const real *, int, int, int);
    void (*layernorm_fwd)(real *, real *, real *, const real *, const real *, const real *, int, int);
    void (*residual_layernorm_fwd)(real *, real *, real *, real *, const real *, const real *, const real *,
                                   const real *, int, int);
    void (*layernorm_bwd)(real *, real *, real *, const real *, const real *, const real *, const real *,
                          const real *, int, int);
    void (*gelu_fwd)(real *, const real *, long);
    void (*gelu_bwd)(real *, const real *, const real *, long);
    void (*gelu_tanh_fwd)(real *, const real *, long);
    void (*gelu_tanh_bwd)(real *, const real *, const real *, long);
    void (*add)(real *, const real *, const real *, long);
    void (*bias_add)(real *, const real *, int, int);
    void (*bias_bwd)(real *, const real *, int, int);
    void (*rope)(real *, real *, int, const real *, int, int, int, int, int, int);
    void (*embed_fwd)(real *, const int32_t *, const real *, const real *, const real *, int, int, int);
    void (*embed_bwd)(real *, real *, real *, const real *, const int32_t *, int, int, int);
    void (*gate_fwd)(real *, real *, real *, const real *, int, const GateParams *, int, int, int, int);
    void (*gate_bwd)(real *, int, real *, real *, real *, const real *, const real *, const real *, int,
                     const real *, const GateParams *, int, int, int, int);
    void (*attention_fwd)(real *, real *, const real *, const real *, const real *, const AttnArgs *);
    void (*attention_bwd)(real *, real *, real *, real *, real *, const real *, const real *, const real *,
                          const real *, const real *, const real *, const AttnArgs *);
    void (*attention_gate_bwd)(real *, real *, real *, const real *, const real *, const real *, const real *,
                               const real *, const real *, const AttnArgs *, const AttnGateBwd *);
    void (*attention_probs)(real *, const real *, const real *, const AttnArgs *);
    void (*attention_apply)(real *, const real *, const real *, const AttnArgs *);
    void (*attention_decode_fwd)(real *, real *, const real *, const real *, const real *, const AttnArgs *);
    void (*attention_decode_bwd)(real *, real *, real *, real *, real *, const real *, const real *, const real *,
                                 const real *, const real *, const real *, const AttnArgs *);
    double (*classifier)(real *, real *, real *, const real *, const real *, const int32_t *, int, int, int, int,
                         real);
    void (*logits)(real *, const real *, const real *, int, int, int);
    void (*adamw)(real *, real *, real *, const real *, long, double, double, double, double, double, long, double);
    void (*adamw_multi)(real *, real *, real *, const real *, long, const AdamwSeg *, int, double, double, double,
                        double, double, long, double);
    double (*sumsq)(const real *, long);
    void *(*alloc)(size_t);
    void (*free)(void *);
    void (*upload)(void *, const void *, size_t);
    void (*download)(void *, const void *, size_t);
    const char *(*backend)(void);
} OpTable;

extern const OpTable cpu_ops, gpu_ops;

#endif
