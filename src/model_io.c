#include "model_io.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "cli_parse.h"
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

/* A safetensors file in sinkgate's own layout (`sgtrain export`, `sgtrain
 * import`): the config from its metadata, checked as a checkpoint's is, and
 * exactly the model's tensors.  AdamW's moments start at zero. */
static int model_from_st(Model *m, Config *cfg, long *step, const char *path, char *err, size_t errlen) {
    StFile f;
    char serr[1024];
    if (st_open(&f, path, serr, sizeof serr))
        return sg_fail(err, errlen, "%s: not a sinkgate checkpoint (no SGCKPT magic) nor a safetensors file (%s)",
                       path, serr);
    int rc = -1, built = 0;
    const char *fmt = st_meta(&f, "format"), *yaml = st_meta(&f, "config"), *arm = st_meta(&f, "arm"),
               *seed = st_meta(&f, "seed"), *stp = st_meta(&f, "step");
    if (!fmt || strcmp(fmt, "sinkgate")) {
        sg_fail(err, errlen, "%s: a safetensors file without sinkgate's metadata (format: sinkgate); a "
                "Hugging Face GPT-2 model is converted first with `sgtrain import`", path);
        goto out;
    }
    if (!yaml || !arm || !seed || !stp) {
        sg_fail(err, errlen, "%s: sinkgate metadata without its %s", path,
                !yaml ? "config" : !arm ? "arm" : !seed ? "seed" : "step");
        goto out;
    }
    long sd, st;
    char nerr[512];
    if (cli_long("metadata seed", seed, 0, LONG_MAX, &sd, nerr, sizeof nerr) ||
        cli_long("metadata step", stp, 0, LONG_MAX, &st, nerr, sizeof nerr)) {
        sg_fail(err, errlen, "%s: %s", path, nerr);
        goto out;
    }
    CkptMeta meta = {.seed = (uint64_t)sd, .step = (uint64_t)st, .config_yaml = (char *)yaml, .config_len = strlen(yaml)};
    snprintf(meta.arm, sizeof meta.arm, "%s", arm);
    if (strlen(arm) >= sizeof meta.arm) {
        sg_fail(err, errlen, "%s: metadata arm '%.40s...' is too long", path, arm);
        goto out;
    }
    if (ckpt_saved_config(&meta, path, cfg, err, errlen)) goto out;
    if (model_build(m, cfg, err, errlen)) goto out;
    built = 1;
    /* every model tensor is read below; one the model lacks means another model */
    for (int i = 0; i < st_count(&f); i++)
        if (!model_tensor(m, st_at(&f, i)->name)) {
            sg_fail(err, errlen, "%s: tensor '%s' is not part of the model its config describes", path,
                    st_at(&f, i)->name);
            goto out;
        }
    if (model_load_st(m, &f, "", err, errlen)) goto out;
    *step = st;
    rc = 0;
out:
    if (rc && built) model_free(m);
    st_close(&f);
    return rc;
}

int model_from_checkpoint(Model *m, Config *cfg, long *step, const char *src, char *err,
                          size_t errlen) {
    char path[4096];
    struct stat st;
    if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/checkpoint.bin", src);
    else snprintf(path, sizeof path, "%s", src);
    /* a checkpoint starts with its magic; a regular file of 8 bytes or more
     * without it may be safetensors (shorter ones and the rest get the
     * checkpoint reader's message) */
    FILE *fp = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "rb") : NULL;
    if (fp) {
        char magic[8];
        size_t got = fread(magic, 1, sizeof magic, fp);
        fclose(fp);
        if (got == sizeof magic && memcmp(magic, CKPT_MAGIC, sizeof magic))
            return model_from_st(m, cfg, step, path, err, errlen);
    }
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

int model_write_st(const Model *m, const real *h_params, const Config *cfg, long step, const char *source,
                   const char *out, char *err, size_t errlen) {
    StWriter *w = stw_new();
    int rc = -1;
    for (int i = 0; i < m->n_tensors; i++) {
        const TensorInfo *t = &m->tensors[i];
        int64_t shape[2] = {t->shape[0], t->shape[1]};
        /* wte's padded rows follow its V real rows, so the first V*C
         * elements are exactly the unpadded matrix. */
        if (stw_add(w, t->name, st_real_dtype(), t->ndim, shape, h_params + t->offset, 0, err, errlen))
            goto out;
    }
    char num[64], *yaml = NULL;
    snprintf(num, sizeof num, "%ld", step);
    if (config_to_yaml_string(cfg, &yaml)) {
        snprintf(err, errlen, "cannot serialise the config");
        goto out;
    }
    int bad = stw_add_meta(w, "format", "sinkgate", err, errlen) ||
              stw_add_meta(w, "arm", cfg->arm, err, errlen) ||
              stw_add_meta(w, "tier", cfg->tier, err, errlen) ||
              stw_add_meta(w, "step", num, err, errlen) ||
              stw_add_meta(w, "config", yaml, err, errlen) ||
              (source && stw_add_meta(w, "source", source, err, errlen));
    snprintf(num, sizeof num, "%ld", cfg->seed);
    bad = bad || stw_add_meta(w, "seed", num, err, errlen);
    free(yaml);
    if (bad) goto out;
    rc = stw_write(w, out, err, errlen);
out:
    stw_free(w);
    return rc;
}

int export_safetensors(const char *src, const char *out, char *err, size_t errlen) {
    Model m;
    Config cfg;
    long step;
    if (model_from_checkpoint(&m, &cfg, &step, src, err, errlen)) return -1;
    int rc = model_write_st(&m, m.h_params, &cfg, step, NULL, out, err, errlen);
    model_free(&m);
    return rc;
}
