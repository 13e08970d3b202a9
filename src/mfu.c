#include "mfu.h"

#include <string.h>

double mfu_flop_per_token(const Config *c, long non_embedding_params) {
    return 6.0 * ((double)non_embedding_params + (double)c->vocab_size * c->n_embd) +
           6.0 * c->n_layer * (double)c->block_size * c->n_embd;
}

/* Vendors' dense (no sparsity) bf16 rates with fp32 accumulation.  A name
 * that holds another's (H100 NVL, H100 PCIe in H100; GH200 in H200) comes
 * first.  The GeForce cards accumulate fp32 at half their fp16-accumulate
 * rate, which is the figure their sheets lead with. */
static const struct {
    const char *pat, *label;
    double tflops;
} PEAKS[] = {
    {"H200", "H200 (SXM)", 989.4},       {"H100 NVL", "H100 NVL", 835.5},
    {"H100 PCIe", "H100 PCIe", 756.0},   {"H100", "H100 SXM", 989.4},
    {"B200", "B200", 2250.0},            {"A100", "A100", 312.0},
    {"L40S", "L40S", 362.1},             {"RTX 5090", "GeForce RTX 5090", 209.5},
    {"RTX 4090", "GeForce RTX 4090", 165.2},
};

double mfu_device_peak(const char *device, const char **label) {
    for (size_t i = 0; device && i < sizeof PEAKS / sizeof *PEAKS; i++)
        if (strstr(device, PEAKS[i].pat)) {
            if (label) *label = PEAKS[i].label;
            return PEAKS[i].tflops;
        }
    if (label) *label = NULL;
    return 0;
}
