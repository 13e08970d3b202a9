/* Training checkpoints: everything needed to resume bitwise (byte layout:
 * docs/formats.md, "Checkpoint").
 *
 * Parameters and both AdamW moments are stored as raw `real`; the step and
 * seed fully determine every future batch (the sampler is counter-based), so
 * they are the whole RNG state.  A zlib CRC-32 over every byte catches
 * corruption, and saving is atomic: an interrupted save leaves the previous
 * checkpoint as it was. */
#ifndef SG_CHECKPOINT_H
#define SG_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"

#define CKPT_MAGIC "SGCKPT\0\0"
#define CKPT_VERSION 1u
#define CKPT_FIXED_BYTES 112u /* header before the config text */

typedef struct {
    char arm[64];       /* NUL-terminated, at most 63 characters */
    uint64_t step;      /* optimizer steps completed */
    uint64_t seed;
    char *config_yaml;  /* resolved config; on read: malloc'd, NUL-terminated */
    size_t config_len;  /* bytes, without the NUL */
    uint64_t n;         /* elements in each of params, adam_m, adam_v */
    uint32_t elem_size; /* sizeof(real) of the build that wrote it */
} CkptMeta;

/* Write atomically.  meta->elem_size is ignored (sizeof(real) is written). */
int ckpt_save(const char *path, const CkptMeta *meta, const real *params, const real *m,
              const real *v, char *err, size_t errlen);

/* Header and config only (cheap, for resume logic and tools); checks that
 * the file size matches what the header declares, not the checksum.  Reads
 * checkpoints of either precision. */
int ckpt_read_meta(const char *path, CkptMeta *meta, char *err, size_t errlen);

/* Full load into caller arrays of n_expected elements each, verifying magic,
 * version, elem_size == sizeof(real), n == n_expected, exact file size and
 * the CRC.  meta may be NULL; otherwise free it with ckpt_meta_free.  On
 * error the arrays' contents are unspecified and meta holds nothing. */
int ckpt_load(const char *path, CkptMeta *meta, real *params, real *m, real *v,
              uint64_t n_expected, char *err, size_t errlen);

void ckpt_meta_free(CkptMeta *meta);

#endif
