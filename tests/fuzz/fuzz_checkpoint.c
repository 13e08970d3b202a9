/* A checkpoint as `sgtrain analyze`, `zeroshot` and `export` read it
 * (model_from_checkpoint: header, saved config, model, arrays, CRC).
 *
 * Each input is tried twice: as it is, and with its trailing CRC-32
 * recomputed, so that mutations of the config text and of the header get
 * past the checksum to the code behind it.
 *
 * Property: a checkpoint that loads exports to safetensors
 * (export_safetensors) whose tensors load back (model_load_st) into the
 * same parameters, bit for bit (wte's padding rows past the vocabulary
 * are not parameters and are not exported). */
#include "fuzz.h"

#include <zlib.h>

#include "checkpoint.h"
#include "config.h"
#include "model.h"
#include "fsutil.h"
#include "model_io.h"

static void check_export(const char *dir, const char *ckpt, const Model *m, const Config *cfg) {
    char out[512], err[4096] = "";
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    FUZZ_REQUIRE(!export_safetensors(ckpt, out, err, sizeof err), "export: %s", err);
    StFile f;
    FUZZ_REQUIRE(!st_open(&f, out, err, sizeof err), "the export does not open: %s", err);
    Model back;
    FUZZ_REQUIRE(!model_build(&back, cfg, err, sizeof err), "model_build: %s", err);
    FUZZ_REQUIRE(!model_load_st(&back, &f, "", err, sizeof err), "the export does not load: %s", err);
    FUZZ_REQUIRE(back.n_params == m->n_params, "n_params %ld, exported %ld", m->n_params, back.n_params);
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        FUZZ_REQUIRE(!memcmp(back.h_params + t->offset, m->h_params + t->offset,
                             (size_t)t->numel_real * sizeof(real)),
                     "%s: the exported parameters differ from the checkpoint's", t->name);
    }
    model_free(&back);
    st_close(&f);
}

static void try_load(const char *dir, const uint8_t *data, size_t size) {
    const char *p = fuzz_file(dir, "checkpoint.bin", data, size);
    char path[512], err[4096] = "";
    snprintf(path, sizeof path, "%s", p);
    Model m;
    Config cfg;
    long step = -1;
    int rc = model_from_checkpoint(&m, &cfg, &step, path, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return;
    FUZZ_REQUIRE(step >= 0, "step %ld", step);
    check_export(dir, path, &m, &cfg);
    model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    try_load(dir, data, size);
    if (size >= CKPT_FIXED_BYTES + 4) {
        uint8_t *fixed = malloc(size);
        memcpy(fixed, data, size);
        uLong crc = crc32(crc32(0L, Z_NULL, 0), fixed, (uInt)(size - 4));
        put_u32le(fixed + size - 4, (uint32_t)crc);
        if (memcmp(fixed, data, size)) try_load(dir, fixed, size);
        free(fixed);
    }
    return 0;
}
