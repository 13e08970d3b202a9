#include "checkpoint.h"
#include "errmsg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fsutil.h"

/* The arrays are raw host-order `real`; the documented layout is
 * little-endian IEEE-754. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sinkgate checkpoints store little-endian reals; big-endian hosts are not supported"
#endif

/* Field offsets (docs/formats.md, "Checkpoint"). */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_ELEM = 12,
    OFF_STEP = 16,
    OFF_SEED = 24,
    OFF_ARM = 32,
    OFF_N = 96,
    OFF_CONFIG_LEN = 104,
};
_Static_assert(OFF_CONFIG_LEN + 8 == CKPT_FIXED_BYTES, "header layout");


static const char *precision_name(uint32_t elem) {
    return elem == 4 ? "float32" : elem == 8 ? "float64" : "unknown";
}

/* zlib's crc32 takes a 32-bit length; feed big arrays in pieces. */
static uLong crc_update(uLong crc, const void *p, size_t n) {
    const Bytef *b = p;
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, b, k);
        b += k;
        n -= k;
    }
    return crc;
}

static void crc_write(AtomicFile *a, uLong *crc, const void *p, size_t n) {
    *crc = crc_update(*crc, p, n);
    af_write(a, p, n);
}

int ckpt_save(const char *path, const CkptMeta *meta, const real *params, const real *m,
              const real *v, char *err, size_t errlen) {
    size_t arm_len = strnlen(meta->arm, sizeof meta->arm);
    if (arm_len >= sizeof meta->arm)
        return sg_fail(err, errlen, "%s: arm name longer than 63 characters", path);
    if (meta->config_len && !meta->config_yaml)
        return sg_fail(err, errlen, "%s: config_len %zu but no config text", path, meta->config_len);
    uint8_t h[CKPT_FIXED_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h + OFF_MAGIC, CKPT_MAGIC, 8);
    put_u32le(h + OFF_VERSION, CKPT_VERSION);
    put_u32le(h + OFF_ELEM, (uint32_t)sizeof(real));
    put_u64le(h + OFF_STEP, meta->step);
    put_u64le(h + OFF_SEED, meta->seed);
    memcpy(h + OFF_ARM, meta->arm, arm_len); /* rest stays zero */
    put_u64le(h + OFF_N, meta->n);
    put_u64le(h + OFF_CONFIG_LEN, (uint64_t)meta->config_len);

    AtomicFile a;
    if (af_open(&a, path, err, errlen)) return -1;
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t bytes = (size_t)meta->n * sizeof(real);
    crc_write(&a, &crc, h, sizeof h);
    if (meta->config_len) crc_write(&a, &crc, meta->config_yaml, meta->config_len);
    crc_write(&a, &crc, params, bytes);
    crc_write(&a, &crc, m, bytes);
    crc_write(&a, &crc, v, bytes);
    uint8_t c4[4];
    put_u32le(c4, (uint32_t)crc);
    af_write(&a, c4, 4);
    return af_commit(&a, err, errlen);
}

void ckpt_meta_free(CkptMeta *meta) {
    if (!meta) return;
    free(meta->config_yaml);
    memset(meta, 0, sizeof *meta);
}

/* Open PATH, read and check the fixed header and the total size, and fill
 * meta (without the config).  Returns the open file positioned after the
 * fixed header, or NULL with a message. */
static FILE *open_checked(const char *path, CkptMeta *meta, uint8_t h[CKPT_FIXED_BYTES],
                          char *err, size_t errlen) {
    memset(meta, 0, sizeof *meta);
    uint64_t size;
    if (fs_file_size(path, &size, err, errlen)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        sg_fail(err, errlen, "%s: cannot open checkpoint: %s", path, strerror(e));
        return NULL;
    }
    const uint64_t min_size = CKPT_FIXED_BYTES + 4;
    size_t got = fread(h, 1, CKPT_FIXED_BYTES, f);
    if (got >= 8 && memcmp(h + OFF_MAGIC, CKPT_MAGIC, 8) != 0) {
        sg_fail(err, errlen, "%s: not a sinkgate checkpoint (it does not start with \"SGCKPT\")",
             path);
        goto bad;
    }
    if (size < min_size || got < CKPT_FIXED_BYTES) {
        sg_fail(err, errlen, "%s: truncated: %llu of at least %llu bytes; the checkpoint is damaged, "
             "resume from an earlier one", path, (unsigned long long)size,
             (unsigned long long)min_size);
        goto bad;
    }
    uint32_t version = get_u32le(h + OFF_VERSION);
    if (version != CKPT_VERSION) {
        sg_fail(err, errlen, "%s: checkpoint format version %u, this build reads %u; use the "
             "sinkgate build that wrote it", path, version, CKPT_VERSION);
        goto bad;
    }
    meta->elem_size = get_u32le(h + OFF_ELEM);
    if (meta->elem_size != 4 && meta->elem_size != 8) {
        sg_fail(err, errlen, "%s: elem_size %u is neither 4 (float32) nor 8 (float64); the header "
             "is corrupt", path, meta->elem_size);
        goto bad;
    }
    meta->step = get_u64le(h + OFF_STEP);
    if (meta->step > (uint64_t)INT64_MAX) {
        sg_fail(err, errlen, "%s: step %llu is impossible; the header is corrupt", path,
                (unsigned long long)meta->step);
        goto bad;
    }
    meta->seed = get_u64le(h + OFF_SEED);
    memcpy(meta->arm, h + OFF_ARM, 64);
    if (!memchr(meta->arm, 0, 64)) {
        sg_fail(err, errlen, "%s: the arm name is not NUL-terminated; the header is corrupt", path);
        goto bad;
    }
    meta->n = get_u64le(h + OFF_N);
    uint64_t clen = get_u64le(h + OFF_CONFIG_LEN);
    /* 128-bit so that a corrupt n or config_len cannot wrap the sum. */
    unsigned __int128 want = (unsigned __int128)CKPT_FIXED_BYTES + clen +
                             (unsigned __int128)3 * meta->n * meta->elem_size + 4;
    if (want != size) {
        if (want > size && want < ((unsigned __int128)1 << 63))
            sg_fail(err, errlen, "%s: truncated: %llu of %llu bytes; the checkpoint is damaged, "
                 "resume from an earlier one", path, (unsigned long long)size,
                 (unsigned long long)want);
        else if (want > size)
            sg_fail(err, errlen, "%s: header declares an impossible size (n %llu, config_len %llu); "
                 "the header is corrupt", path, (unsigned long long)meta->n,
                 (unsigned long long)clen);
        else
            sg_fail(err, errlen, "%s: %llu bytes, but the header declares %llu: trailing bytes after "
                 "the checksum; the file is corrupt", path, (unsigned long long)size,
                 (unsigned long long)want);
        goto bad;
    }
    meta->config_len = (size_t)clen;
    return f;
bad:
    fclose(f);
    memset(meta, 0, sizeof *meta);
    return NULL;
}

/* Read the config text that follows the fixed header into meta. */
static int read_config(FILE *f, const char *path, CkptMeta *meta, char *err, size_t errlen) {
    meta->config_yaml = malloc(meta->config_len + 1);
    if (!meta->config_yaml)
        return sg_fail(err, errlen, "%s: out of memory for %zu bytes of config", path,
                    meta->config_len);
    if (fread(meta->config_yaml, 1, meta->config_len, f) != meta->config_len)
        return sg_fail(err, errlen, "%s: read error in the config text", path);
    meta->config_yaml[meta->config_len] = 0;
    return 0;
}

int ckpt_read_meta(const char *path, CkptMeta *meta, char *err, size_t errlen) {
    uint8_t h[CKPT_FIXED_BYTES];
    FILE *f = open_checked(path, meta, h, err, errlen);
    if (!f) return -1;
    int rc = read_config(f, path, meta, err, errlen);
    fclose(f);
    if (rc) ckpt_meta_free(meta);
    return rc;
}

int ckpt_load(const char *path, CkptMeta *meta_out, real *params, real *m, real *v,
              uint64_t n_expected, char *err, size_t errlen) {
    CkptMeta meta;
    uint8_t h[CKPT_FIXED_BYTES];
    /* The size was checked against the file's own elem_size and n, so a
     * complete checkpoint from the other precision or another model passes
     * it and gets the specific message below. */
    FILE *f = open_checked(path, &meta, h, err, errlen);
    if (!f) return -1;
    int rc = -1;
    if (meta.elem_size != sizeof(real)) {
        sg_fail(err, errlen, "%s: written by a %s build (%u-byte reals), this is a %s build; load "
             "it with the %s build of sgtrain", path, precision_name(meta.elem_size),
             meta.elem_size, REAL_NAME, precision_name(meta.elem_size));
        goto done;
    }
    if (meta.n != n_expected) {
        sg_fail(err, errlen, "%s: holds %llu parameters, the model has %llu; the checkpoint was "
             "written for a different model shape (check the config)", path,
             (unsigned long long)meta.n, (unsigned long long)n_expected);
        goto done;
    }
    if (read_config(f, path, &meta, err, errlen)) goto done;
    uLong crc = crc_update(crc32(0L, Z_NULL, 0), h, sizeof h);
    crc = crc_update(crc, meta.config_yaml, meta.config_len);
    real *arrays[3] = {params, m, v};
    size_t n = (size_t)meta.n;
    for (int i = 0; i < 3; i++) {
        if (fread(arrays[i], sizeof(real), n, f) != n) {
            sg_fail(err, errlen, "%s: read error in the parameter data", path);
            goto done;
        }
        crc = crc_update(crc, arrays[i], n * sizeof(real));
    }
    uint8_t c4[4];
    if (fread(c4, 1, 4, f) != 4) {
        sg_fail(err, errlen, "%s: read error at the checksum", path);
        goto done;
    }
    if (get_u32le(c4) != (uint32_t)crc) {
        sg_fail(err, errlen, "%s: checksum mismatch: the file is corrupt; resume from an earlier "
             "checkpoint", path);
        goto done;
    }
    rc = 0;
done:
    fclose(f);
    if (rc == 0 && meta_out)
        *meta_out = meta;
    else
        ckpt_meta_free(&meta);
    return rc;
}
