/* safetensors files: the export format PyTorch users load with
 * safetensors.torch.load_file (docs/formats.md, "Safetensors export").
 *
 *   8 bytes   N, little-endian u64
 *   N bytes   JSON header, padded with spaces to a multiple of 8:
 *             {"__metadata__": {"k": "v", ...},
 *              "name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
 *   rest      raw little-endian tensor data; offsets are relative to its start
 *
 * The writer lays tensors out back to back in insertion order, which is the
 * contiguous layout the reference implementation insists on.  The reader
 * memory-maps the file and validates every entry before handing out
 * pointers. */
#ifndef SG_SAFETENSORS_H
#define SG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "real.h"

typedef enum {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_F64,
    ST_I64,
    ST_U64,
    ST_NDTYPES
} StDtype;

#define ST_MAX_DIMS 8

const char *st_dtype_name(StDtype dt);      /* "F32", ... */
size_t st_dtype_size(StDtype dt);           /* bytes per element */
int st_dtype_parse(const char *name, StDtype *out); /* 0 ok, -1 unknown */
StDtype st_real_dtype(void);                /* ST_F32, or ST_F64 in the double build */

/* ---- writer ------------------------------------------------------------ */

typedef struct StWriter StWriter;

StWriter *stw_new(void);
/* Add a tensor of ndim (0..ST_MAX_DIMS) dimensions.  copy != 0 copies the
 * data now; copy == 0 keeps the pointer, which must stay valid until
 * stw_write.  Names must be non-empty, unique and not "__metadata__". */
int stw_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
            const void *data, int copy, char *err, size_t errlen);
/* String metadata (the "__metadata__" object); a repeated key replaces. */
int stw_add_meta(StWriter *w, const char *key, const char *value, char *err, size_t errlen);
/* The padded JSON header exactly as stw_write writes it (malloc'd, NUL-
 * terminated; *len excludes the NUL and is a multiple of 8). */
char *stw_header(const StWriter *w, size_t *len, char *err, size_t errlen);
/* Write the file atomically (temporary file, fsync, rename). */
int stw_write(const StWriter *w, const char *path, char *err, size_t errlen);
void stw_free(StWriter *w);

/* ---- reader ------------------------------------------------------------ */

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; /* data_offsets, relative to the data section */
    /* Inside the mapping.  Not necessarily aligned for the dtype (files from
     * elsewhere may pack a U16 before an F32): read with memcpy or use
     * st_read_real. */
    const void *data;
} StTensor;

typedef struct {
    char *path;
    void *map;
    size_t map_len;
    uint64_t header_len; /* N */
    StTensor *tensors;   /* in header order */
    int n_tensors;
    char **meta_keys, **meta_vals;
    int n_meta;
} StFile;

/* Map and validate PATH: header length sane, JSON an object, every entry's
 * dtype known, shape * element size == end - begin, offsets inside the data
 * section and not overlapping, metadata values strings.  On error *f is
 * left closed. */
int st_open(StFile *f, const char *path, char *err, size_t errlen);
void st_close(StFile *f);

const StTensor *st_find(const StFile *f, const char *name); /* NULL if absent */
int st_count(const StFile *f);
const StTensor *st_at(const StFile *f, int i);
const char *st_meta(const StFile *f, const char *key);      /* NULL if absent */

/* Copy tensor NAME into out as `real`, converting from F32 or F64, after
 * checking that its shape is exactly shape[0..ndim). */
int st_read_real(const StFile *f, const char *name, int ndim, const int64_t *shape, real *out,
                 char *err, size_t errlen);

#endif
