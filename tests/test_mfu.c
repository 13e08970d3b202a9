/* MFU's FLOP count and peak table (src/mfu.h) on hand-computed cases. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "mfu.h"

static void test_flops(void) {
    Config c;
    char err[256];
    CHECK(config_from_tier(&c, "124M", err, sizeof err) == 0, "124M tier: %s", err);
    /* GPT-2 small without biases, LayerNorm weights only: a layer holds
     * qkv 768 x 2304, proj 768 x 768, fc 768 x 3072, proj 3072 x 768 and
     * two LayerNorms of 768, i.e. 7,079,424; twelve of them and ln_f */
    const long nonemb = 12L * (768 * 2304 + 768 * 768 + 2 * 768 * 3072 + 2 * 768) + 768;
    CHECK(nonemb == 84953856, "hand count %ld", nonemb);
    /* 6 (84,953,856 + 50,257 x 768) + 6 x 12 x 1024 x 768 / ... written out:
     * 6 x 123,551,232 = 741,307,392; attention 6 x 12 x 1024 x 768 = 56,623,104 */
    const double f = mfu_flop_per_token(&c, nonemb);
    CHECK(f == 797930496.0, "124M: %.17g FLOP a token", f);
    /* H200 run 3 (docs/cuda.md): the baseline's 256,683 tokens/s was 20.7% of 989.4 */
    const double mfu = f * 256683 / 989.4e12;
    CHECK(fabs(mfu - 0.2070) < 5e-4, "run 3's MFU %.4f", mfu);
    /* the attention term follows T: halving the context halves it */
    c.block_size = 512;
    CHECK(mfu_flop_per_token(&c, nonemb) == 741307392.0 + 56623104.0 / 2, "T 512");
}

static void test_peaks(void) {
    static const struct {
        const char *name;
        double tflops;
    } cases[] = {
        {"cuda (NVIDIA H200, sm_90)", 989.4},          {"cuda (NVIDIA H100 80GB HBM3, sm_90)", 989.4},
        {"cuda (NVIDIA H100 PCIe, sm_90)", 756.0},     {"cuda (NVIDIA H100 NVL, sm_90)", 835.5},
        {"cuda (NVIDIA GH200 480GB, sm_90)", 989.4},   {"cuda (NVIDIA A100-SXM4-80GB, sm_80)", 312.0},
        {"cuda (NVIDIA A100 80GB PCIe, sm_80)", 312.0}, {"cuda (NVIDIA GeForce RTX 5090, sm_120)", 209.5},
        {"cuda (NVIDIA GeForce RTX 4090, sm_89)", 165.2}, {"cuda (NVIDIA B200, sm_100)", 2250.0},
        {"cuda (NVIDIA L40S, sm_89)", 362.1},
        /* not in the table: no MFU unless --peak_tflops gives the peak */
        {"cuda (NVIDIA A10, sm_86)", 0},               {"cpu", 0},
        {"cuda (emulated on the host, tests/emu)", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *label = "unset";
        const double p = mfu_device_peak(cases[i].name, &label);
        CHECK(p == cases[i].tflops, "%s: %g TFLOP/s", cases[i].name, p);
        CHECK((p > 0) == (label != NULL), "%s: label %s", cases[i].name, label ? label : "(none)");
    }
    const char *label = "unset";
    CHECK(mfu_device_peak(NULL, &label) == 0 && label == NULL, "no name");
    CHECK(mfu_device_peak("cuda (NVIDIA H100 PCIe, sm_90)", NULL) == 756.0, "no label asked");
    mfu_device_peak("cuda (NVIDIA GeForce RTX 5090, sm_120)", &label);
    CHECK(label && strcmp(label, "GeForce RTX 5090") == 0, "label %s", label ? label : "(none)");
}

int main(void) {
    check_name = "test_mfu";
    test_flops();
    test_peaks();
    return check_finish();
}
