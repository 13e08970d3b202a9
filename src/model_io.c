#include "model_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "errmsg.h"
#include "ops.h"

int model_load_st(Model *m, const StFile *f, const char *prefix, char *err, size_t errlen) {
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        if (st_read_real(f, name, t->ndim, shape, m->h_params + t->offset, err, errlen)) return -1;
    }
    op_upload(m->params, m->h_params, (size_t)m->n_params * sizeof(real));
    return 0;
}

int ckpt_saved_config(const CkptMeta *meta, const char *path, Config *cfg, char *err, size_t errlen) {
    char cerr[1024];
    /* a defined starting point: nothing is left as it was in *cfg */
    if (config_from_tier(cfg, "cpu-tiny", cerr, sizeof cerr) ||
        config_load_yaml_buf(cfg, meta->config_yaml, meta->config_len, path, cerr, sizeof cerr))
        return sg_fail(err, errlen, "%s: the saved config does not parse: %s", path, cerr);
    if (config_validate(cfg, cerr, sizeof cerr))
        return sg_fail(err, errlen, "%s: the saved config is not valid (%s); the checkpoint is damaged",
                       path, cerr);
    if (strcmp(meta->arm, cfg->arm))
        return sg_fail(err, errlen, "%s: the header says arm '%s', the saved config '%s'; the checkpoint "
                       "is damaged", path, meta->arm, cfg->arm);
    if (meta->seed != (uint64_t)cfg->seed)
        return sg_fail(err, errlen, "%s: the header says seed %llu, the saved config %ld; the checkpoint "
                       "is damaged", path, (unsigned long long)meta->seed, cfg->seed);
    if (meta->step > (uint64_t)cfg->iters)
        return sg_fail(err, errlen, "%s: at step %llu, beyond the saved config's iters %ld; the "
                       "checkpoint is damaged", path, (unsigned long long)meta->step, cfg->iters);
    return 0;
}

int model_from_checkpoint(Model *m, Config *cfg, long *step, const char *src, char *err,
                          size_t errlen) {
    char path[4096];
    struct stat st;
    if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/checkpoint.bin", src);
    else snprintf(path, sizeof path, "%s", src);
    CkptMeta meta;
    if (ckpt_read_meta(path, &meta, err, errlen)) return -1;
    int rc = -1;
    if (ckpt_saved_config(&meta, path, cfg, err, errlen)) goto out;
    if (model_build(m, cfg, err, errlen)) goto out;
    CkptMeta full;
    if (ckpt_load(path, &full, m->h_params, m->h_adam_m, m->h_adam_v, (uint64_t)m->n_params, err, errlen)) {
        model_free(m);
        goto out;
    }
    model_state_upload(m);
    *step = (long)full.step;
    ckpt_meta_free(&full);
    rc = 0;
out:
    ckpt_meta_free(&meta);
    return rc;
}

int export_safetensors(const char *src, const char *out, char *err, size_t errlen) {
    Model m;
    Config cfg;
    long step;
    if (model_from_checkpoint(&m, &cfg, &step, src, err, errlen)) return -1;
    StWriter *w = stw_new();
    int rc = -1;
    for (int i = 0; i < m.n_tensors; i++) {
        const TensorInfo *t = &m.tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        /* wte's padded rows follow its V real rows, so the first V*C
         * elements are exactly the unpadded matrix. */
        if (stw_add(w, t->name, st_real_dtype(), t->ndim, shape, m.h_params + t->offset, 0, err, errlen))
            goto out;
    }
    char num[64], *yaml = NULL;
    snprintf(num, sizeof num, "%ld", step);
    if (config_to_yaml_string(&cfg, &yaml)) {
        snprintf(err, errlen, "cannot serialise the config");
        goto out;
    }
    int bad = stw_add_meta(w, "format", "sinkgate", err, errlen) ||
              stw_add_meta(w, "arm", cfg.arm, err, errlen) ||
              stw_add_meta(w, "tier", cfg.tier, err, errlen) ||
              stw_add_meta(w, "step", num, err, errlen) ||
              stw_add_meta(w, "config", yaml, err, errlen);
    snprintf(num, sizeof num, "%ld", cfg.seed);
    bad = bad || stw_add_meta(w, "seed", num, err, errlen);
    free(yaml);
    if (bad) goto out;
    rc = stw_write(w, out, err, errlen);
out:
    stw_free(w);
    model_free(&m);
    return rc;
}
