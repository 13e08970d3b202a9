/* test_gpu_ops (tests/gpu/test_gpu_ops.c): what its files share, the
 * helpers of gpu_ops_common.c and each file's cases. */
#ifndef SG_GPU_OPS_TEST_H
#define SG_GPU_OPS_TEST_H

#include <stdint.h>

#include "check.h"
#include "optable.h"
#include "rng.h"

/* gpu_ops_common.c.  Every random input is drawn at the next value of one
 * counter, g_ctr: a case that must not move the later cases' inputs puts it
 * back (test_matmul_tuned). */
extern uint64_t g_key;
extern long g_ctr;
real *host_rand(long n, double scale);
real *dev_of(const real *h, long n);
real *back(const real *d, long n);
real *dev_copy(const real *d, long n);
double maxabs(const real *x, long n);
void compare(const char *what, const real *dev, const real *ref, long n, int lowp, double scale);
void compare_widened(const char *what, const real *dev, const real *ref, long n, int lowp, double scale,
                     double widen);
void same(const char *what, const real *dev, const real *ref, long n, int lowp);
void bitwise(const char *what, const real *d1, const real *d2, long n);
void bits_as(const char *what, const char *of, const real *d1, const real *d2, long n);
int twins_on(void);
int emulated(void);
float bf16_round(float x);

/* gpu_ops_matmul.c */
void test_matmul(int M, int K, int N);
void test_tuning(void);
/* gpu_ops_twins.c */
void test_twins(void);
int broken_promise(const char *how);
/* gpu_ops_weights.c */
void test_weight_copies(int M, int K, int N, int shift);
/* gpu_ops_bf16.c */
void test_bf16_operands(void);
void test_attention_operands(void);
int broken_bf16_promise(void);
int broken_attention_promise(void);
/* gpu_ops_pointwise.c */
void test_uploads(void);
void test_layernorm(int N, int C, int bias);
void test_residual_layernorm(int N, int C, int bias, int alias);
void test_pointwise(long n);
void test_gelu_tanh(long n);
void test_bias(int M, int N, int shift);
void test_rope(int B, int T, int H, int d, int rd, int pos0);
void test_adamw_multi(long base);
void test_pointwise_paths(long n);
void test_embed(int B, int T, int C, int V, int sink, int nopos);
void test_gate(int kind, int slot, int B, int T, int H, int d);
/* gpu_ops_attention.c */
void test_attention(int B, int T, int H, int d, int phantom, int logbias);
void test_attention_gate(int B, int T, int H, int d, int kind, int phantom);
void test_attention_probs(int B, int T, int H, int d, int phantom, int logbias);
void test_attention_decode(int B, int T, int H, int d, int phantom, int logbias, int qshared);
/* gpu_ops_classifier.c */
void test_classifier(int N, int C, int V, int Vp, double wscale, double widen);
void test_classifier_chunks(int N, int C, int V, int Vp, int chunk);

#endif
