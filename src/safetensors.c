#include "safetensors.h"
#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian and is read in place; big-endian hosts are not supported"
#endif

/* The reference implementation refuses headers over 100 MB; so do we, which
 * also bounds what a corrupt length field can make us parse. */
#define ST_MAX_HEADER (100u * 1024 * 1024)


static const struct {
    const char *name;
    size_t size;
} DTYPES[ST_NDTYPES] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},
    [ST_I16] = {"I16", 2},   [ST_U16] = {"U16", 2}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},   [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8},
    [ST_U64] = {"U64", 8},
};

const char *st_dtype_name(StDtype dt) {
    return (unsigned)dt < ST_NDTYPES ? DTYPES[dt].name : "?";
}
size_t st_dtype_size(StDtype dt) { return (unsigned)dt < ST_NDTYPES ? DTYPES[dt].size : 0; }
int st_dtype_parse(const char *name, StDtype *out) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(name, DTYPES[i].name) == 0) {
            *out = (StDtype)i;
            return 0;
        }
    return -1;
}
StDtype st_real_dtype(void) { return sizeof(real) == 8 ? ST_F64 : ST_F32; }

/* numel of a shape, or -1 on overflow past 2^63 (used with data sizes). */
static int shape_numel(int ndim, const int64_t *shape, uint64_t *numel) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] && n > (UINT64_MAX >> 1) / (uint64_t)shape[i]) return -1;
        n *= (uint64_t)shape[i];
    }
    *numel = n;
    return 0;
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* ---- writer ------------------------------------------------------------ */

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;
    const void *data;
    void *owned; /* the copy, when copied */
} WTensor;

struct StWriter {
    WTensor *t;
    int n, cap;
    char **mkeys, **mvals;
    int nmeta, capmeta;
};

StWriter *stw_new(void) { return calloc(1, sizeof(StWriter)); }

void stw_free(StWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].owned);
    }
    for (int i = 0; i < w->nmeta; i++) {
        free(w->mkeys[i]);
        free(w->mvals[i]);
    }
    free(w->t);
    free(w->mkeys);
    free(w->mvals);
    free(w);
}

int stw_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
            const void *data, int copy, char *err, size_t errlen) {
    if (!name || !*name) return sg_fail(err, errlen, "safetensors: empty tensor name");
    if (strcmp(name, "__metadata__") == 0)
        return sg_fail(err, errlen, "safetensors: \"__metadata__\" is reserved, not a tensor name");
    if ((unsigned)dtype >= ST_NDTYPES)
        return sg_fail(err, errlen, "safetensors: tensor \"%s\": unknown dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return sg_fail(err, errlen, "safetensors: tensor \"%s\": %d dimensions, at most %d", name,
                    ndim, ST_MAX_DIMS);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return sg_fail(err, errlen, "safetensors: tensor \"%s\" added twice", name);
    uint64_t numel;
    if (shape_numel(ndim, shape, &numel) || numel > (UINT64_MAX >> 1) / st_dtype_size(dtype))
        return sg_fail(err, errlen, "safetensors: tensor \"%s\": invalid shape", name);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        WTensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return sg_fail(err, errlen, "safetensors: out of memory");
        w->t = t;
        w->cap = cap;
    }
    WTensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->nbytes = numel * st_dtype_size(dtype);
    t->data = data;
    if (!(t->name = strdup(name))) return sg_fail(err, errlen, "safetensors: out of memory");
    if (copy && t->nbytes) {
        if (!(t->owned = malloc((size_t)t->nbytes))) {
            free(t->name);
            return sg_fail(err, errlen, "safetensors: out of memory copying \"%s\"", name);
        }
        memcpy(t->owned, data, (size_t)t->nbytes);
        t->data = t->owned;
    }
    w->n++;
    return 0;
}

int stw_add_meta(StWriter *w, const char *key, const char *value, char *err, size_t errlen) {
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkeys[i], key) == 0) {
            char *v = strdup(value);
            if (!v) return sg_fail(err, errlen, "safetensors: out of memory");
            free(w->mvals[i]);
            w->mvals[i] = v;
            return 0;
        }
    if (w->nmeta == w->capmeta) {
        int cap = w->capmeta ? 2 * w->capmeta : 8;
        char **k = realloc(w->mkeys, (size_t)cap * sizeof *k);
        if (!k) return sg_fail(err, errlen, "safetensors: out of memory");
        w->mkeys = k;
        char **v = realloc(w->mvals, (size_t)cap * sizeof *v);
        if (!v) return sg_fail(err, errlen, "safetensors: out of memory");
        w->mvals = v;
        w->capmeta = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return sg_fail(err, errlen, "safetensors: out of memory");
    }
    w->mkeys[w->nmeta] = k;
    w->mvals[w->nmeta] = v;
    w->nmeta++;
    return 0;
}

char *stw_header(const StWriter *w, size_t *len, char *err, size_t errlen) {
    /* json-c keeps object keys in insertion order, so the header lists
     * __metadata__ first and then the tensors in the order they were added. */
    json_object *root = json_object_new_object();
    if (w->nmeta) {
        json_object *meta = json_object_new_object();
        for (int i = 0; i < w->nmeta; i++)
            json_object_object_add(meta, w->mkeys[i], json_object_new_string(w->mvals[i]));
        json_object_object_add(root, "__metadata__", meta);
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const WTensor *t = &w->t[i];
        json_object *e = json_object_new_object(), *shape = json_object_new_array(),
                    *offs = json_object_new_array();
        for (int d = 0; d < t->ndim; d++) json_object_array_add(shape, json_object_new_int64(t->shape[d]));
        json_object_array_add(offs, json_object_new_int64((int64_t)off));
        json_object_array_add(offs, json_object_new_int64((int64_t)(off + t->nbytes)));
        json_object_object_add(e, "dtype", json_object_new_string(st_dtype_name(t->dtype)));
        json_object_object_add(e, "shape", shape);
        json_object_object_add(e, "data_offsets", offs);
        json_object_object_add(root, t->name, e);
        off += t->nbytes;
    }
    const char *s = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    /* Space padding to a multiple of 8 puts the data section (and so every
     * F32/F64 tensor when all tensors are of one dtype) at an aligned offset. */
    size_t padded = (n + 7) & ~(size_t)7;
    char *out = malloc(padded + 1);
    if (!out) {
        json_object_put(root);
        sg_fail(err, errlen, "safetensors: out of memory");
        return NULL;
    }
    memcpy(out, s, n);
    memset(out + n, ' ', padded - n);
    out[padded] = 0;
    json_object_put(root);
    *len = padded;
    return out;
}

int stw_write(const StWriter *w, const char *path, char *err, size_t errlen) {
    size_t hlen;
    char *h = stw_header(w, &hlen, err, errlen);
    if (!h) return -1;
    AtomicFile a;
    if (af_open(&a, path, err, errlen)) {
        free(h);
        return -1;
    }
    uint8_t n8[8];
    put_u64le(n8, (uint64_t)hlen);
    af_write(&a, n8, 8);
    af_write(&a, h, hlen);
    free(h);
    for (int i = 0; i < w->n; i++) af_write(&a, w->t[i].data, (size_t)w->t[i].nbytes);
    return af_commit(&a, err, errlen);
}

/* ---- reader ------------------------------------------------------------ */

void st_close(StFile *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_vals);
    if (f->map) munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* A non-negative JSON integer, or -1 with a message. */
static int get_uint(json_object *o, uint64_t *v) {
    if (!o || json_object_get_type(o) != json_type_int) return -1;
    errno = 0;
    int64_t x = json_object_get_int64(o);
    if (x < 0 || errno) return -1;
    *v = (uint64_t)x;
    return 0;
}

static int parse_tensor(StFile *f, const char *name, json_object *e, uint64_t data_len,
                        char *err, size_t errlen) {
    const char *path = f->path;
    json_object *jd, *js, *jo;
    if (json_object_get_type(e) != json_type_object)
        return sg_fail(err, errlen, "%s: entry \"%s\" is not an object", path, name);
    if (!json_object_object_get_ex(e, "dtype", &jd) || json_object_get_type(jd) != json_type_string)
        return sg_fail(err, errlen, "%s: tensor \"%s\" has no \"dtype\" string", path, name);
    if (!json_object_object_get_ex(e, "shape", &js) || json_object_get_type(js) != json_type_array)
        return sg_fail(err, errlen, "%s: tensor \"%s\" has no \"shape\" array", path, name);
    if (!json_object_object_get_ex(e, "data_offsets", &jo) ||
        json_object_get_type(jo) != json_type_array || json_object_array_length(jo) != 2)
        return sg_fail(err, errlen, "%s: tensor \"%s\" has no \"data_offsets\" [begin, end] pair",
                    path, name);
    StTensor *t = &f->tensors[f->n_tensors];
    memset(t, 0, sizeof *t);
    if (st_dtype_parse(json_object_get_string(jd), &t->dtype))
        return sg_fail(err, errlen, "%s: tensor \"%s\" has unknown dtype \"%s\" (known: BOOL U8 I8 "
                    "I16 U16 F16 BF16 I32 U32 F32 F64 I64 U64)", path, name,
                    json_object_get_string(jd));
    size_t nd = json_object_array_length(js);
    if (nd > ST_MAX_DIMS)
        return sg_fail(err, errlen, "%s: tensor \"%s\" has %zu dimensions, this reader handles at "
                    "most %d", path, name, nd, ST_MAX_DIMS);
    t->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        uint64_t v;
        if (get_uint(json_object_array_get_idx(js, d), &v) || v > (uint64_t)INT64_MAX)
            return sg_fail(err, errlen, "%s: tensor \"%s\": shape entry %zu is not a non-negative "
                        "integer", path, name, d);
        t->shape[d] = (int64_t)v;
    }
    if (get_uint(json_object_array_get_idx(jo, 0), &t->begin) ||
        get_uint(json_object_array_get_idx(jo, 1), &t->end))
        return sg_fail(err, errlen, "%s: tensor \"%s\": data_offsets are not non-negative integers",
                    path, name);
    if (t->begin > t->end)
        return sg_fail(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before they "
                    "begin", path, name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_len)
        return sg_fail(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the end "
                    "of the data section (%llu bytes); the file is truncated or corrupt", path,
                    name, (unsigned long long)t->begin, (unsigned long long)t->end,
                    (unsigned long long)data_len);
    char sh[160];
    shape_str(t->ndim, t->shape, sh, sizeof sh);
    size_t es = st_dtype_size(t->dtype);
    int huge = shape_numel(t->ndim, t->shape, &t->numel) || t->numel > UINT64_MAX / es;
    if (huge || t->numel * es != t->end - t->begin) {
        char need[48];
        if (huge)
            snprintf(need, sizeof need, "more than 2^63");
        else
            snprintf(need, sizeof need, "%llu", (unsigned long long)(t->numel * es));
        return sg_fail(err, errlen, "%s: tensor \"%s\": shape %s of %s needs %s bytes but "
                    "data_offsets [%llu, %llu] span %llu", path, name, sh,
                    st_dtype_name(t->dtype), need, (unsigned long long)t->begin,
                    (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
    }
    if (!(t->name = strdup(name))) return sg_fail(err, errlen, "%s: out of memory", path);
    f->n_tensors++;
    return 0;
}

static int parse_meta(StFile *f, json_object *m, char *err, size_t errlen) {
    if (json_object_get_type(m) != json_type_object)
        return sg_fail(err, errlen, "%s: \"__metadata__\" is not an object", f->path);
    int n = json_object_object_length(m);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_vals = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) return sg_fail(err, errlen, "%s: out of memory", f->path);
    json_object_object_foreach(m, key, val) {
        if (json_object_get_type(val) != json_type_string)
            return sg_fail(err, errlen, "%s: metadata \"%s\" is not a string (safetensors metadata "
                        "values are strings)", f->path, key);
        f->meta_keys[f->n_meta] = strdup(key);
        f->meta_vals[f->n_meta] = strdup(json_object_get_string(val));
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1])
            return sg_fail(err, errlen, "%s: out of memory", f->path);
    }
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Everything after the file is mapped: header length, JSON, entries, overlaps. */
static int parse(StFile *f, char *err, size_t errlen) {
    const char *path = f->path;
    const uint8_t *p = f->map;
    uint64_t size = f->map_len;
    uint64_t n = get_u64le(p);
    if (n > size - 8)
        return sg_fail(err, errlen, "%s: header length %llu runs past the end of the file (%llu "
                    "bytes); the file is truncated or not a safetensors file", path,
                    (unsigned long long)n, (unsigned long long)size);
    if (n > ST_MAX_HEADER)
        return sg_fail(err, errlen, "%s: header length %llu is over the 100 MB limit; this is not a "
                    "safetensors file", path, (unsigned long long)n);
    if (n < 2 || p[8] != '{')
        return sg_fail(err, errlen, "%s: the header does not start with a JSON object ('{'); this "
                    "is not a safetensors file", path);
    f->header_len = n;
    const char *h = (const char *)p + 8;
    /* JSON text cannot hold a raw NUL; refusing it early also keeps the
     * tokenizer from treating it as the end of input. */
    if (memchr(h, 0, (size_t)n))
        return sg_fail(err, errlen, "%s: the header contains a NUL byte; the file is corrupt", path);

    json_tokener *tok = json_tokener_new();
    if (!tok) return sg_fail(err, errlen, "%s: out of memory", path);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = json_tokener_parse_ex(tok, h, (int)n);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root) {
        if (jerr == json_tokener_continue)
            return sg_fail(err, errlen, "%s: the JSON header ends in the middle of a value; the file "
                        "is corrupt", path);
        return sg_fail(err, errlen, "%s: the header is not valid JSON (%s, near byte %zu of %llu)",
                    path, json_tokener_error_desc(jerr), 8 + end, (unsigned long long)(8 + n));
    }
    int rc = 0;
    for (size_t i = end; i < n && !rc; i++)
        if (h[i] != ' ' && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
            rc = sg_fail(err, errlen, "%s: unexpected bytes after the JSON header (at byte %zu)",
                      path, 8 + i);
    if (!rc && json_object_get_type(root) != json_type_object)
        rc = sg_fail(err, errlen, "%s: the header is JSON but not an object", path);
    if (rc) {
        json_object_put(root);
        return rc;
    }
    uint64_t data_len = size - 8 - n;
    f->tensors = calloc((size_t)json_object_object_length(root) + 1, sizeof *f->tensors);
    if (!f->tensors) rc = sg_fail(err, errlen, "%s: out of memory", path);
    json_object_object_foreach(root, key, val) {
        if (rc) break;
        if (strcmp(key, "__metadata__") == 0)
            rc = parse_meta(f, val, err, errlen);
        else
            rc = parse_tensor(f, key, val, data_len, err, errlen);
    }
    json_object_put(root);
    if (rc) return rc;

    /* Overlap check on a sorted view, so header order stays as written. */
    const StTensor **by = malloc((size_t)(f->n_tensors + 1) * sizeof *by);
    if (!by) return sg_fail(err, errlen, "%s: out of memory", path);
    for (int i = 0; i < f->n_tensors; i++) by[i] = &f->tensors[i];
    qsort(by, (size_t)f->n_tensors, sizeof *by, cmp_begin);
    for (int i = 1; i < f->n_tensors && !rc; i++)
        if (by[i]->begin < by[i - 1]->end)
            rc = sg_fail(err, errlen, "%s: tensors \"%s\" [%llu, %llu] and \"%s\" [%llu, %llu] "
                      "overlap; the file is corrupt", path, by[i - 1]->name,
                      (unsigned long long)by[i - 1]->begin, (unsigned long long)by[i - 1]->end,
                      by[i]->name, (unsigned long long)by[i]->begin,
                      (unsigned long long)by[i]->end);
    free(by);
    if (rc) return rc;
    const uint8_t *data = p + 8 + n;
    for (int i = 0; i < f->n_tensors; i++) f->tensors[i].data = data + f->tensors[i].begin;
    return 0;
}

int st_open(StFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        int e = errno;
        return sg_fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sg_fail(err, errlen, "%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return sg_fail(err, errlen, "%s: %lld bytes, too short for a safetensors file (the 8-byte "
                    "header length is missing)", path, (long long)st.st_size);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return sg_fail(err, errlen, "%s: mmap failed: %s", path, strerror(e));
    f->map = map;
    f->map_len = (size_t)st.st_size;
    if (!(f->path = strdup(path))) {
        st_close(f);
        return sg_fail(err, errlen, "%s: out of memory", path);
    }
    if (parse(f, err, errlen)) {
        st_close(f);
        return -1;
    }
    return 0;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

int st_count(const StFile *f) { return f->n_tensors; }

const StTensor *st_at(const StFile *f, int i) {
    return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

/* IEEE half precision to float, exactly (every half is a float): the
 * exponent rebased from 15 to 127, subnormals scaled, inf and NaN kept. */
static float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, frac = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)frac, -24); /* zero and subnormals: frac * 2^-24 */
    else if (e == 31) v = frac ? NAN : INFINITY;
    else {
        uint32_t bits = ((e + 112) << 23) | (frac << 13);
        memcpy(&v, &bits, 4);
    }
    uint32_t b;
    memcpy(&b, &v, 4);
    b |= sign;
    memcpy(&v, &b, 4);
    return v;
}

int st_read_real(const StFile *f, const char *name, int ndim, const int64_t *shape, real *out,
                 char *err, size_t errlen) {
    const StTensor *t = st_find(f, name);
    if (!t) return sg_fail(err, errlen, "%s: no tensor \"%s\"", f->path, name);
    if (t->dtype != ST_F32 && t->dtype != ST_F64 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return sg_fail(err, errlen, "%s: tensor \"%s\" is %s, expected F32, F64, F16 or BF16", f->path, name,
                    st_dtype_name(t->dtype));
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char got[160], want[160];
        shape_str(t->ndim, t->shape, got, sizeof got);
        shape_str(ndim, shape, want, sizeof want);
        return sg_fail(err, errlen, "%s: tensor \"%s\" has shape %s, expected %s (was it exported "
                    "from a model with another config?)", f->path, name, got, want);
    }
    /* memcpy per element: the data need not be aligned for its dtype. */
    const unsigned char *src = t->data;
    for (uint64_t i = 0; i < t->numel; i++) {
        if (t->dtype == ST_F32) {
            float x;
            memcpy(&x, src + 4 * i, 4);
            out[i] = (real)x;
        } else if (t->dtype == ST_F64) {
            double x;
            memcpy(&x, src + 8 * i, 8);
            out[i] = (real)x;
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            if (t->dtype == ST_F16) out[i] = (real)half_to_float(h);
            else { /* bf16: the high half of a float */
                uint32_t b = (uint32_t)h << 16;
                float x;
                memcpy(&x, &b, 4);
                out[i] = (real)x;
            }
        }
    }
    return 0;
}
