/* Every CUDA op against the CPU op (the reference), on random inputs, and
 * every CUDA op run twice for bitwise determinism.  Needs a GPU: `make
 * test-gpu` (tests/gpu/run.sh).
 *
 * Tolerances, |gpu - cpu| <= atol + rtol |cpu| per element:
 *   fp32 ops (LayerNorm, GELU in both forms, add, the biases, the rotary
 *   embedding, embeddings, gates, AdamW, the explicit attention of the
 *   analyses):  atol 1e-5 scale, rtol 1e-4 (scale: the output's largest
 *   magnitude, at least 1; the bias add, the rotary embedding and the
 *   embeddings' forward without wpe also bitwise, the CPU's float
 *   operations one for one; the rotary embedding's inverse of its forward
 *   within 1e-6 x max(1, largest |x|) of x)
 *   ops with bf16 matrix products (matmul, classifier) and attention
 *   (bf16 tensor cores where the kernel uses them): rtol 2e-2 with atol
 *   2e-2 of the output's largest magnitude -- bf16 keeps 8 significant bits,
 *   and a K-term product's error grows like sqrt(K) 2^-9 |x||w|. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long sg_attn_wgmma_calls(void); /* kernels/cuda/attention_fwd.cu */

#include "gpu_ops_test.h"

/* The streaming attention's cases under the tiles SG_ATTN (and
 * SG_ATTN_WGMMA) select. */
static void attention_battery(void) {
    int Ts[] = {1, 7, 64, 130};
    for (int ti = 0; ti < 4; ti++)
        for (int ph = 0; ph <= 2; ph++) {
            test_attention(2, Ts[ti], 2, 16, ph, 0);
            test_attention(1, Ts[ti], 2, 64, ph, ph == 0);
        }
    test_attention(1, 1024, 4, 64, 2, 0);
    /* past the paper's context; in the emulator 1,100 (a short last
     * tile), which takes a quarter of 2,048's time there */
    test_attention(1, emulated() ? 1100 : 2048, 1, 64, 2, 1);
    test_attention(1, 300, 2, 128, 2, 1);
    test_attention(2, 200, 3, 32, 1, 1);
    /* the value gates' backward with the attention's: fused under mma */
    test_attention_gate(2, 130, 2, 64, GATE_PROJ, 2);
    test_attention_gate(1, 70, 3, 64, GATE_NORM, 0);
    if (emulated()) test_attention_gate(1, 200, 2, 64, GATE_PROJ, 2);
    else test_attention_gate(2, 1024, 12, 64, GATE_PROJ, 2); /* combo2's 124M shape, two sequences */
}

int main(int argc, char **argv) {
    /* The batteries name their tile kernels: unset, SG_ATTN means wmma here,
     * as it did when wmma was the default (the default itself, mma, is
     * checked against SG_ATTN=mma at the sgtrain level) */
    if (!getenv("SG_ATTN")) setenv("SG_ATTN", "wmma", 1);
    check_name = "test_gpu_ops";
    printf("CPU reference: %s; GPU: %s\n", cpu_ops.backend(), gpu_ops.backend());
    if (argc > 2 && !strcmp(argv[1], "broken-promise"))
        return !strcmp(argv[2], "bf16")        ? broken_bf16_promise()
               : !strcmp(argv[2], "attention") ? broken_attention_promise()
                                               : broken_promise(argv[2]);
    if (argc > 1 && !strcmp(argv[1], "bf16-operands")) { /* the bf16 operand cases alone */
        test_bf16_operands();
        test_attention_operands();
        return check_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "twins")) { /* the twin cases alone (tests/e2e_cuda_sgtrain_emu.sh) */
        test_twins();
        return check_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "wgmma")) {
        /* the attention's cases with the forward and the dK/dV kernel on
         * Hopper's warpgroup products (SG_ATTN_WGMMA=1 under the mma tiles;
         * kernels/cuda/attention_fwd_wgmma.cu), then with the pipelined
         * forward (=2), apart from the rest so that tests/gpu/run.sh can
         * give them a time limit of their own */
        setenv("SG_ATTN", "mma", 1);
        for (int mode = 1; mode <= 2; mode++) {
            setenv("SG_ATTN_WGMMA", mode == 1 ? "1" : "2", 1);
            const long w0 = sg_attn_wgmma_calls();
            attention_battery();
            CHECK(sg_attn_wgmma_calls() > w0, "SG_ATTN_WGMMA=%d: no attention ran on the warpgroup products (%s)",
                  mode, gpu_ops.backend());
            printf("SG_ATTN_WGMMA=%d: %ld attention kernels on the warpgroup products\n", mode,
                   sg_attn_wgmma_calls() - w0);
        }
        return check_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "tune")) { /* the SG_MATMUL_TUNE cases alone */
        test_tuning();
        return check_finish();
    }
    test_uploads();
    test_matmul(64, 32, 96);
    test_matmul(130, 64, 192);
    test_matmul(512, 384, 1152);
    test_tuning();
    test_twins();
    test_bf16_operands();
    test_attention_operands();
    test_layernorm(50, 64, 1);
    test_layernorm(300, 768, 0);
    for (int alias = 0; alias <= 2; alias++) {
        test_residual_layernorm(50, 64, 1, alias);
        test_residual_layernorm(301, 768, 0, alias);
    }
    test_residual_layernorm(7, 100, 1, 0);
    test_pointwise(100003);
    test_pointwise_paths(4099);
    test_pointwise_paths(4096);
    /* GELU's tanh form: a scalar tail of 3, and of 0 */
    test_gelu_tanh(100003);
    test_gelu_tanh(4096);
    /* the biases: qkv's 3C at C = 256 over 130 rows (the float4 add, 3 row
     * chunks, the last of 2 rows); N = 77, a multiple of neither 4 nor 64,
     * over 2,100 rows (33 chunks); out and dout off alignment; 17,000 rows
     * (more than 64 x 256: 254 chunks of 67 rows); and fc's 4C at 768 over
     * a micro-batch of 8 x 1024 rows (in the emulator 1,100 rows, an
     * eighth of the time) */
    test_bias(130, 768, 0);
    test_bias(2100, 77, 0);
    test_bias(50, 64, 1);
    test_bias(17000, 3, 0);
    test_bias(emulated() ? 1100 : 8192, 3072, 0);
    test_adamw_multi(0);
    test_adamw_multi(1000);
    test_embed(2, 16, 32, 100, 0, 0);
    test_embed(3, 9, 32, 50, 1, 0);
    for (int kind = GATE_NORM; kind <= GATE_PROJ; kind++)
        for (int slot = 0; slot < 2; slot++) test_gate(kind, slot, 2, 17, 2, 16);
    test_gate(GATE_PROJ, SLOT_VALUE, 2, 64, 6, 64);
    /* the streaming attention under both tile kernels and cuDNN's fused
     * attention (SG_ATTN, kernels/cuda/attention_cuda.h; under cudnn the
     * log-bias cases run the mma tiles) */
    static const char *const tiles[] = {"wmma", "mma", "cudnn"};
    for (int ki = 0; ki < 3; ki++) {
        setenv("SG_ATTN", tiles[ki], 1);
        attention_battery();
    }
    setenv("SG_ATTN", "wmma", 1);
    int pshape[][4] = {{2, 7, 3, 16}, {1, 1, 2, 16}, {1, 130, 2, 64}, {1, 512, 4, 64}};
    for (int si = 0; si < 4; si++)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++)
                test_attention_probs(pshape[si][0], pshape[si][1], pshape[si][2], pshape[si][3], ph, lb);
    int dshape[][4] = {{3, 7, 2, 16}, {256, 64, 1, 64}, {2, 1000, 4, 64}, {3, 1, 2, 16}};
    for (int si = 0; si < 4; si++)
        for (int ph = 0; ph <= 2; ph++)
            for (int lb = 0; lb <= 1; lb++)
                for (int qsh = 0; qsh <= 1; qsh++)
                    test_attention_decode(dshape[si][0], dshape[si][1], dshape[si][2], dshape[si][3], ph, lb, qsh);
    /* logits of a model's size (standard deviation 1), then of 6 (up to
     * about 30), where bf16 logits widen dx's and dwte's tolerance 3x
     * (gpu_ops_classifier.c) */
    test_classifier(37, 32, 100, 128, 0.3, 1);
    test_classifier(37, 32, 97, 100, 0.3, 1); /* Vp % 8 != 0 */
    test_classifier(256, 384, 50257, 50304, 0.05, 1);
    test_classifier(256, 384, 50257, 50304, 0.3, 3);
    test_classifier_chunks(2100, 32, 100, 128, 1000); /* three chunks, the last short */
    test_classifier_chunks(300, 64, 1031, 1088, 64);
    /* last, so that the cases before keep their inputs.  The rotary
     * embedding: Pythia's 25% (d 64, rd 16), the whole head (rd 64), d 128
     * with rd 32, the 25% again from position 3 of the table; 12 heads of
     * rd 64 over 70 rows (768 pairs a row, three blocks across); and, on a
     * GPU, 66,000 rows, past gridDim.y's 65,535 (the kernel's loop over
     * rows; the emulated battery, tests/emu/ops_emu_test.cpp, runs it too) */
    test_rope(2, 5, 3, 64, 16, 0);
    test_rope(2, 5, 3, 64, 64, 0);
    test_rope(2, 5, 3, 128, 32, 0);
    test_rope(2, 5, 3, 64, 16, 3);
    test_rope(1, 70, 12, 64, 64, 0);
    if (!emulated()) test_rope(1, 66000, 1, 4, 2, 0);
    /* the embeddings without positions (wpe and dwpe NULL: rotary), with
     * and without the sink token */
    test_embed(2, 16, 32, 100, 0, 1);
    test_embed(3, 9, 32, 50, 1, 1);
    return check_finish();
}
