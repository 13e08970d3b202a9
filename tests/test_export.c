/* Checkpoint -> `sgtrain export` safetensors -> loaded back by name: the
 * same parameters bit for bit, the documented names and shapes, and the
 * run's identity in the metadata; a bad source is an error, not a crash. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "model_io.h"
#include "tiny.h"

int main(void) {
    check_name = "export";
    char dir[] = "/tmp/sgexportXXXXXX";
    if (!mkdtemp(dir)) return 1;
    char ckpt[256], out[256], err[1024];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.bin", dir);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    const char *arms[] = {"combo2", "sinktoken", "renorm"};
    for (int a = 0; a < 3; a++) {
        Config c = tiny_config(arms[a], a == 0);
        Model m, back;
        model_build(&m, &c, err, sizeof err);
        model_init(&m, 3);
        tiny_randomize(&m, 4);
        char *yaml = NULL;
        config_to_yaml_string(&c, &yaml);
        CkptMeta meta = {{0}, 12, (uint64_t)c.seed, yaml, strlen(yaml), (uint64_t)m.n_params, sizeof(real)};
        snprintf(meta.arm, sizeof meta.arm, "%s", arms[a]);
        CHECK(ckpt_save(ckpt, &meta, m.params, m.adam_m, m.adam_v, err, sizeof err) == 0, "save: %s", err);
        CHECK(export_safetensors(dir, out, err, sizeof err) == 0, "export: %s", err);
        StFile f;
        CHECK(st_open(&f, out, err, sizeof err) == 0, "open: %s", err);
        CHECK(st_count(&f) == m.n_tensors, "%s: %d tensors exported, model has %d", arms[a], st_count(&f), m.n_tensors);
        const StTensor *wte = st_find(&f, "wte");
        CHECK(wte && wte->dtype == ST_F32 && wte->ndim == 2 && wte->shape[0] == c.vocab_size &&
                  wte->shape[1] == c.n_embd, "wte is [V, C] float32, unpadded");
        CHECK(st_meta(&f, "arm") && !strcmp(st_meta(&f, "arm"), arms[a]), "metadata arm");
        CHECK(st_meta(&f, "step") && !strcmp(st_meta(&f, "step"), "12"), "metadata step");
        CHECK(st_meta(&f, "format") && !strcmp(st_meta(&f, "format"), "sinkgate"), "metadata format");
        model_build(&back, &c, err, sizeof err);
        CHECK(model_load_st(&back, &f, "", err, sizeof err) == 0, "load back: %s", err);
        int same = 1;
        for (int i = 0; i < m.n_tensors; i++) {
            const TensorInfo *t = &m.tensors[i];
            same &= !memcmp(m.params + t->offset, back.params + t->offset, sizeof(real) * t->numel_real);
        }
        CHECK(same, "%s: exported parameters load back bitwise", arms[a]);
        st_close(&f);
        free(yaml);
        model_free(&m);
        model_free(&back);
    }
    /* A header that disagrees with its own config, or a config that is not
     * valid, is a damaged checkpoint: refused before a model is built from
     * it (the fuzzer's checkpoint target found a step past 2^63 taken as a
     * negative step). */
    {
        Config c = tiny_config("combo2", 0);
        c.iters = 50;
        Model m;
        model_build(&m, &c, err, sizeof err);
        char *good = NULL;
        config_to_yaml_string(&c, &good);
        /* each key valid alone, the whole not: warmup must stay below iters */
        char *bad_warmup = malloc(strlen(good) + 32), *w = strstr(good, "\nwarmup: ");
        sprintf(bad_warmup, "%.*s\nwarmup: 999%s", (int)(w - good), good, strchr(w + 1, '\n'));
        struct {
            const char *arm, *yaml, *want;
            uint64_t step, seed;
        } bad[] = {
            {"combo2", good, "the header says seed 7, the saved config 0", 10, 7},
            {"baseline", good, "the header says arm 'baseline', the saved config 'combo2'", 10, 0},
            {"combo2", good, "at step 51, beyond the saved config's iters 50", 51, 0},
            {"combo2", bad_warmup, "the saved config is not valid (warmup 999 must be less than iters 50)", 10, 0},
            {"combo2", "lr: [1]\n", "the saved config does not parse", 10, 0},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            CkptMeta meta = {{0}, bad[i].step, bad[i].seed, (char *)bad[i].yaml, strlen(bad[i].yaml),
                             (uint64_t)m.n_params, sizeof(real)};
            snprintf(meta.arm, sizeof meta.arm, "%s", bad[i].arm);
            unlink(out);
            CHECK(ckpt_save(ckpt, &meta, m.params, m.adam_m, m.adam_v, err, sizeof err) == 0, "save: %s", err);
            err[0] = 0;
            CHECK(export_safetensors(dir, out, err, sizeof err) != 0 && strstr(err, bad[i].want) &&
                      strstr(err, ckpt) && access(out, F_OK) != 0,
                  "damaged checkpoint %zu refused, nothing written: %s", i, err);
        }
        free(bad_warmup);
        free(good);
        model_free(&m);
    }
    CHECK(export_safetensors("/nonexistent/run", out, err, sizeof err) != 0 && strstr(err, "/nonexistent/run"),
          "a missing run names the path: %s", err);
    unlink(ckpt);
    unlink(out);
    rmdir(dir);
    return check_finish();
}
