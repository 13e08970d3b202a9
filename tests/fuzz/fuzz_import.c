/* `sgtrain import` (import_hf): a Hugging Face GPT-2 or GPT-NeoX directory,
 * its config.json and model.safetensors.  An input is the two files in one:
 * a little-endian u32, the length of config.json, then config.json, then
 * model.safetensors (tests/fuzz/seeds.sh packs tests/fixtures/hf_gpt2 and
 * hf_neox so).
 *
 * Property: an import that succeeds writes a sinkgate model file that
 * loads (model_from_checkpoint) as the baseline arm with the families'
 * biases, at step 0, and whose parameters export again (model_write_st) to
 * the same tensors, bit for bit; one that fails says why and writes
 * nothing. */
#include "fuzz.h"

#include "config.h"
#include "fsutil.h"
#include "import_hf.h"
#include "model.h"
#include "model_io.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    if (n > size - 4) return 0;
    const char *dir = fuzz_scratch();
    fuzz_file(dir, "hf/config.json", data + 4, n);
    fuzz_file(dir, "hf/model.safetensors", data + 4 + n, size - 4 - n);
    char src[512], out[512], again[512], err[4096] = "";
    snprintf(src, sizeof src, "%s/hf", dir);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    snprintf(again, sizeof again, "%s/again.safetensors", dir);
    ImportOpts o = {src, out, 1};
    int rc = import_hf(&o, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) {
        FUZZ_REQUIRE(!fs_exists(out), "a failed import (%s) wrote %s", err, out);
        return 0;
    }
    Model m;
    Config cfg;
    long step = -1;
    FUZZ_REQUIRE(!model_from_checkpoint(&m, &cfg, &step, out, err, sizeof err), "the import does not load: %s", err);
    FUZZ_REQUIRE(step == 0 && !strcmp(cfg.arm, "baseline") && cfg.ln_bias && cfg.linear_bias,
                 "imported as step %ld, arm %s, ln_bias %d, linear_bias %d", step, cfg.arm, cfg.ln_bias,
                 cfg.linear_bias);
    FUZZ_REQUIRE(!model_write_st(&m, m.h_params, &cfg, step, NULL, again, err, sizeof err), "export: %s", err);
    StFile a, b;
    FUZZ_REQUIRE(!st_open(&a, out, err, sizeof err) && !st_open(&b, again, err, sizeof err), "reopen: %s", err);
    FUZZ_REQUIRE(st_count(&a) == st_count(&b) && st_count(&a) == m.n_tensors, "%d and %d tensors, the model %d",
                 st_count(&a), st_count(&b), m.n_tensors);
    for (int i = 0; i < st_count(&a); i++) {
        const StTensor *x = st_at(&a, i), *y = st_find(&b, x->name);
        FUZZ_REQUIRE(y && y->numel == x->numel && x->end - x->begin == y->end - y->begin &&
                         !memcmp(x->data, y->data, x->end - x->begin),
                     "%s: the export differs from the import", x->name);
    }
    st_close(&a);
    st_close(&b);
    model_free(&m);
    return 0;
}
