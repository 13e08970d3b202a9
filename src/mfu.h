/* Model FLOPs utilisation: the training's arithmetic rate against the
 * hardware's, the figure by which a run's speed compares across GPUs,
 * tiers and codebases (PaLM, Appendix B; nanoGPT reports the same).
 *
 * FLOP/token = 6 (P_nonemb + V C) + 6 L T C
 *   - P_nonemb: every parameter but wte, wpe and an untied LM head
 *     (model_count_non_embedding); each is one multiply-add forward and two
 *     backward: 6 FLOP a token;
 *   - V C: the LM head, whose product is counted although its weight is wte
 *     when tied;
 *   - 6 L T C: attention's score and value products, 12 L T C (4 forward,
 *     8 backward, per position and channel), halved for the causal mask.
 * The sink token's extra key, the gates, LayerNorm and the softmax are not
 * counted: the convention counts the products that set the cost, so that
 * every arm of a tier does the same work by it, and tests/gpu/bench_gpu.c
 * reports MFU by the same function.
 *
 * The peak is the device's dense bf16 tensor-core rate with fp32
 * accumulation (the paper's precision), TFLOP/s, one device's. */
#ifndef SG_MFU_H
#define SG_MFU_H

#include "config.h"

double mfu_flop_per_token(const Config *c, long non_embedding_params);

/* The dense bf16 peak of a device by name (any string holding it, such as
 * op_backend()'s "cuda (NVIDIA H200, sm_90)"), TFLOP/s; 0 where the name is
 * not in the table (the CPU, an unlisted GPU): then --peak_tflops gives it.
 * *label, if label is given, names the table's entry. */
double mfu_device_peak(const char *device, const char **label);

#endif
