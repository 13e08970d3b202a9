/* Moving a model's parameters in and out of safetensors files, by the
 * tensor names of docs/formats.md (the names PyTorch users load). */
#ifndef SG_MODEL_IO_H
#define SG_MODEL_IO_H

#include <stddef.h>

#include "checkpoint.h"
#include "model.h"
#include "safetensors.h"

/* Every tensor of the model from `prefix` + name (e.g. "param."); shapes
 * must match; a missing tensor is an error. */
int model_load_st(Model *m, const StFile *f, const char *prefix, char *err, size_t errlen);

/* The config a checkpoint was saved with (META from ckpt_read_meta of
 * PATH), checked before anything is built from it: it parses, passes
 * config_validate, and agrees with the header on the arm and the seed,
 * with the header's step no later than its iters.  Keys it lacks keep
 * their tier's values (it names its tier first, as config.yaml does). */
int ckpt_saved_config(const CkptMeta *meta, const char *path, Config *cfg, char *err, size_t errlen);

/* Builds the model a checkpoint (a file, or a run directory holding
 * checkpoint.bin) describes and loads its parameters.  cfg receives the
 * checkpoint's config, step its step.  A file that is not a checkpoint may
 * be a safetensors file in sinkgate's layout (`sgtrain export`, `sgtrain
 * import`): its metadata's config, then exactly its tensors; AdamW's
 * moments are zero then. */
int model_from_checkpoint(Model *m, Config *cfg, long *step, const char *src, char *err,
                          size_t errlen);

/* Writes m's tensors (values h_params, laid out as m's table: m may come
 * from model_describe) as a safetensors file with sinkgate's metadata:
 * format, arm, tier, step, seed, the resolved config, and source when not
 * NULL.  Atomic. */
int model_write_st(const Model *m, const real *h_params, const Config *cfg, long step, const char *source,
                   const char *out, char *err, size_t errlen);

/* `sgtrain export`: checkpoint -> safetensors (float32, wte unpadded), with
 * the resolved config, arm, tier, seed and step in __metadata__. */
int export_safetensors(const char *src, const char *out, char *err, size_t errlen);

#endif
