/* A safetensors file (st_open: the 8-byte length, the JSON header, the
 * entries' dtypes, shapes and offsets), then every tensor it holds.
 *
 * Properties: every entry st_open accepts lies inside the data section,
 * holds exactly shape x element size bytes and overlaps no other; F32 and
 * F64 tensors read as `real` with the shape they declare; and writing
 * every tensor and metadata entry back out (StWriter) gives a file that
 * opens to the same names, dtypes, shapes, bytes and metadata. */
#include "fuzz.h"

#include "safetensors.h"

static real scratch_real[1 << 16];

static void check_entries(const StFile *f) {
    const uint8_t *data0 = (const uint8_t *)f->map + 8 + f->header_len;
    size_t data_len = f->map_len - 8 - f->header_len;
    for (int i = 0; i < f->n_tensors; i++) {
        const StTensor *t = &f->tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        FUZZ_REQUIRE(numel == t->numel, "%s: numel %llu, shape says %llu", t->name,
                     (unsigned long long)t->numel, (unsigned long long)numel);
        FUZZ_REQUIRE(t->begin <= t->end && t->end <= data_len, "%s: [%llu, %llu) outside %zu bytes",
                     t->name, (unsigned long long)t->begin, (unsigned long long)t->end, data_len);
        FUZZ_REQUIRE(t->end - t->begin == numel * st_dtype_size(t->dtype), "%s: size", t->name);
        FUZZ_REQUIRE((const uint8_t *)t->data == data0 + t->begin, "%s: data pointer", t->name);
        for (int j = 0; j < i; j++) {
            const StTensor *u = &f->tensors[j];
            int empty = t->begin == t->end || u->begin == u->end;
            FUZZ_REQUIRE(empty || t->end <= u->begin || u->end <= t->begin, "%s and %s overlap",
                         t->name, u->name);
        }
        if ((t->dtype == ST_F32 || t->dtype == ST_F64) && t->numel <= sizeof scratch_real / sizeof(real)) {
            char err[1024] = "";
            FUZZ_REQUIRE(!st_read_real(f, t->name, t->ndim, t->shape, scratch_real, err, sizeof err),
                         "%s does not read with its own shape: %s", t->name, err);
        }
    }
}

static void check_rewrite(const StFile *f, const char *dir) {
    char out[512], err[4096] = "";
    snprintf(out, sizeof out, "%s/rewritten.safetensors", dir);
    StWriter *w = stw_new();
    FUZZ_REQUIRE(w, "stw_new");
    for (int i = 0; i < f->n_tensors; i++) {
        const StTensor *t = &f->tensors[i];
        FUZZ_REQUIRE(!stw_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, 0, err, sizeof err),
                     "an accepted tensor cannot be written: %s", err);
    }
    for (int i = 0; i < f->n_meta; i++)
        FUZZ_REQUIRE(!stw_add_meta(w, f->meta_keys[i], f->meta_vals[i], err, sizeof err),
                     "accepted metadata cannot be written: %s", err);
    FUZZ_REQUIRE(!stw_write(w, out, err, sizeof err), "stw_write: %s", err);
    stw_free(w);
    StFile g;
    FUZZ_REQUIRE(!st_open(&g, out, err, sizeof err), "the rewritten file does not open: %s", err);
    FUZZ_REQUIRE(g.n_tensors == f->n_tensors && g.n_meta == f->n_meta, "counts changed");
    for (int i = 0; i < f->n_tensors; i++) {
        const StTensor *a = &f->tensors[i], *b = st_find(&g, a->name);
        FUZZ_REQUIRE(b, "%s lost", a->name);
        FUZZ_REQUIRE(a->dtype == b->dtype && a->ndim == b->ndim &&
                         !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]),
                     "%s: dtype or shape changed", a->name);
        FUZZ_REQUIRE(!memcmp(a->data, b->data, a->end - a->begin), "%s: bytes changed", a->name);
    }
    for (int i = 0; i < f->n_meta; i++) {
        const char *v = st_meta(&g, f->meta_keys[i]);
        FUZZ_REQUIRE(v && !strcmp(v, f->meta_vals[i]), "metadata %s changed", f->meta_keys[i]);
    }
    st_close(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch();
    char path[512], err[4096] = "";
    snprintf(path, sizeof path, "%s", fuzz_file(dir, "in.safetensors", data, size));
    StFile f;
    int rc = st_open(&f, path, err, sizeof err);
    fuzz_require_message(rc, err);
    if (rc) return 0;
    check_entries(&f);
    check_rewrite(&f, dir);
    st_close(&f);
    return 0;
}
