/* safetensors: round trip, exact bytes of a tiny file, and corrupt files
 * that must each give a clear error and never crash (this suite also runs
 * under ASan/UBSan). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "fsutil.h"
#include "safetensors.h"

static void test_roundtrip(void) {
    float f32[6] = {1, -2, 3.5f, 0, -0.0f, 1e-30f};
    double f64[4] = {1.0 / 3, -2e300, 0, 5};
    int32_t i32[4] = {-1, 2, INT32_MIN, INT32_MAX};
    int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
    uint16_t u16[5] = {0, 1, 50256, 65535, 7};
    float scalar = 42;
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s22[2] = {2, 2}, s3[1] = {3}, s5[1] = {5},
            s03[2] = {0, 3};
    StWriter *w = stw_new();
    int ok = 1;
    ok &= stw_add(w, "f32", ST_F32, 2, s23, f32, 1, err, sizeof err) == 0;
    ok &= stw_add(w, "f64", ST_F64, 1, s4, f64, 0, err, sizeof err) == 0;
    ok &= stw_add(w, "i32", ST_I32, 2, s22, i32, 1, err, sizeof err) == 0;
    ok &= stw_add(w, "i64", ST_I64, 1, s3, i64, 1, err, sizeof err) == 0;
    ok &= stw_add(w, "tok/u16", ST_U16, 1, s5, u16, 1, err, sizeof err) == 0;
    ok &= stw_add(w, "scalar", ST_F32, 0, NULL, &scalar, 1, err, sizeof err) == 0;
    ok &= stw_add(w, "empty", ST_F32, 2, s03, NULL, 1, err, sizeof err) == 0;
    ok &= stw_add_meta(w, "format", "pt", err, sizeof err) == 0;
    ok &= stw_add_meta(w, "arm", "old", err, sizeof err) == 0;
    ok &= stw_add_meta(w, "arm", "sink_learned \"quoted\" \\ /", err, sizeof err) == 0;
    CHECK(ok, "writer adds: %s", err);
    CHECK(stw_add(w, "f32", ST_F32, 1, s4, f32, 1, err, sizeof err) != 0 && has(err, "twice"),
          "duplicate: %s", err);
    CHECK(stw_add(w, "__metadata__", ST_F32, 1, s4, f32, 1, err, sizeof err) != 0 &&
              has(err, "reserved"), "reserved name: %s", err);
    CHECK(stw_add(w, "x", ST_F32, 9, s4, f32, 1, err, sizeof err) != 0 && has(err, "at most 8"),
          "too many dims: %s", err);
    int64_t neg[1] = {-1};
    CHECK(stw_add(w, "x", ST_F32, 1, neg, f32, 1, err, sizeof err) != 0 && has(err, "invalid shape"),
          "negative dim: %s", err);
    f32[0] = 99; /* copied: the file keeps 1 */
    int rc = stw_write(w, P("rt.safetensors"), err, sizeof err);
    CHECK(rc == 0, "stw_write: %s", err);
    stw_free(w);
    f32[0] = 1;

    StFile f;
    rc = st_open(&f, P("rt.safetensors"), err, sizeof err);
    CHECK(rc == 0, "st_open: %s", err);
    if (rc) return;
    CHECK(f.header_len % 8 == 0, "header padded to 8");
    CHECK(st_count(&f) == 7, "7 tensors");
    const char *order[7] = {"f32", "f64", "i32", "i64", "tok/u16", "scalar", "empty"};
    int inorder = 1;
    for (int i = 0; i < 7; i++) inorder &= strcmp(st_at(&f, i)->name, order[i]) == 0;
    CHECK(inorder, "iteration in insertion order");
    CHECK(st_at(&f, 7) == NULL && st_at(&f, -1) == NULL, "st_at out of range");
    const StTensor *t = st_find(&f, "f32");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
              t->numel == 6 && t->begin == 0 && t->end == 24 && memcmp(t->data, f32, 24) == 0,
          "f32 tensor");
    t = st_find(&f, "f64");
    CHECK(t && t->dtype == ST_F64 && t->begin == 24 && memcmp(t->data, f64, 32) == 0, "f64");
    t = st_find(&f, "i32");
    CHECK(t && t->dtype == ST_I32 && memcmp(t->data, i32, 16) == 0, "i32");
    t = st_find(&f, "i64");
    CHECK(t && t->dtype == ST_I64 && memcmp(t->data, i64, 24) == 0, "i64");
    t = st_find(&f, "tok/u16");
    CHECK(t && t->dtype == ST_U16 && memcmp(t->data, u16, 10) == 0, "u16, name with a slash");
    t = st_find(&f, "scalar");
    CHECK(t && t->ndim == 0 && t->numel == 1 && memcmp(t->data, &scalar, 4) == 0, "scalar");
    t = st_find(&f, "empty");
    CHECK(t && t->numel == 0 && t->begin == t->end, "zero-size tensor");
    CHECK(st_find(&f, "nope") == NULL, "absent tensor");
    CHECK(st_meta(&f, "format") && strcmp(st_meta(&f, "format"), "pt") == 0, "metadata format");
    CHECK(st_meta(&f, "arm") && strcmp(st_meta(&f, "arm"), "sink_learned \"quoted\" \\ /") == 0,
          "metadata replaced and escaped: %s", st_meta(&f, "arm"));
    CHECK(st_meta(&f, "nope") == NULL, "absent metadata");

    real r[6];
    rc = st_read_real(&f, "f32", 2, s23, r, err, sizeof err);
    int same = rc == 0;
    for (int i = 0; i < 6; i++) same &= r[i] == (real)f32[i];
    CHECK(same, "st_read_real from F32: %s", err);
    rc = st_read_real(&f, "f64", 1, s4, r, err, sizeof err);
    same = rc == 0;
    for (int i = 0; i < 4; i++) same &= r[i] == (real)f64[i];
    CHECK(same || sizeof(real) == 4, "st_read_real from F64: %s", err);
    CHECK(rc == 0 && r[0] == (real)(1.0 / 3), "F64 converted to real");
    CHECK(st_read_real(&f, "f32", 2, s22, r, err, sizeof err) != 0 &&
              has(err, "tensor \"f32\" has shape [2, 3], expected [2, 2]"), "shape check: %s", err);
    CHECK(st_read_real(&f, "f32", 1, s23, r, err, sizeof err) != 0 && has(err, "expected [2]"),
          "rank check: %s", err);
    CHECK(st_read_real(&f, "i32", 2, s22, r, err, sizeof err) != 0 &&
              has(err, "is I32, expected F32, F64, F16 or BF16"), "dtype check: %s", err);
    CHECK(st_read_real(&f, "nope", 1, s4, r, err, sizeof err) != 0 && has(err, "no tensor \"nope\""),
          "missing: %s", err);
    st_close(&f);
}

/* F16 and BF16 tensors (Hugging Face checkpoints are often stored so) read
 * as the values their bits encode, by hand: F16 1, -2, 2^-24 (the smallest
 * subnormal), 65504 (the largest finite), 2^-14 (the smallest normal),
 * -0, inf; BF16 1, 3.140625, -2^-126, 1.5 * 2^100. */
static void test_half_types(void) {
    char err[512];
    const uint16_t f16[7] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x0400, 0x8000, 0x7C00};
    const uint16_t bf16[4] = {0x3F80, 0x4049, 0x8080, 0x71C0};
    StWriter *w = stw_new();
    int64_t s7[1] = {7}, s4[1] = {4};
    int rc = stw_add(w, "h", ST_F16, 1, s7, f16, 1, err, sizeof err) ||
             stw_add(w, "b", ST_BF16, 1, s4, bf16, 1, err, sizeof err) || stw_write(w, P("half.safetensors"), err, sizeof err);
    stw_free(w);
    CHECK(rc == 0, "write F16/BF16: %s", err);
    StFile f;
    if (st_open(&f, P("half.safetensors"), err, sizeof err)) {
        CHECK(0, "open: %s", err);
        return;
    }
    real r[7];
    const double want_h[7] = {1, -2, 5.9604644775390625e-08, 65504, 6.103515625e-05, 0, INFINITY};
    rc = st_read_real(&f, "h", 1, s7, r, err, sizeof err);
    int same = rc == 0;
    for (int i = 0; i < 7; i++) same &= (double)r[i] == want_h[i];
    CHECK(same && signbit(r[5]), "F16: %s %g %g %g %g %g %g %g", err, r[0], r[1], r[2], r[3], r[4], r[5], r[6]);
    const double want_b[4] = {1, 3.140625, -1.1754943508222875e-38, 1.901475900342344e+30};
    rc = st_read_real(&f, "b", 1, s4, r, err, sizeof err);
    same = rc == 0;
    for (int i = 0; i < 4; i++) same &= (double)r[i] == want_b[i];
    CHECK(same, "BF16: %s %g %g %g %g", err, r[0], r[1], r[2], r[3]);
    st_close(&f);
}

/* The exact bytes of a tiny file: what safetensors.torch.load_file reads.
 * Header: compact JSON, __metadata__ first, tensors contiguous from 0,
 * padded with spaces so that 8 + N is a multiple of 8. */
static void test_exact_bytes(void) {
    static const char expect[] =
        "\x58\0\0\0\0\0\0\0" /* N = 88 */
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
        "   "                                 /* 85 bytes of JSON + 3 spaces */
        "\x00\x00\x80\x3f\x00\x00\x00\x40";   /* 1.0f, 2.0f */
    float a[2] = {1, 2};
    int64_t s2[1] = {2};
    StWriter *w = stw_new();
    stw_add(w, "a", ST_F32, 1, s2, a, 0, err, sizeof err);
    stw_add_meta(w, "format", "pt", err, sizeof err);
    int rc = stw_write(w, P("tiny.safetensors"), err, sizeof err);
    stw_free(w);
    CHECK(rc == 0, "write: %s", err);
    size_t n;
    unsigned char *b = read_all(P("tiny.safetensors"), &n);
    CHECK(n == sizeof expect - 1 && memcmp(b, expect, n) == 0, "exact bytes (%zu vs %zu): %.*s",
          n, sizeof expect - 1, (int)n - 8, (const char *)b + 8);
    free(b);

    /* no metadata: no __metadata__ key at all */
    w = stw_new();
    stw_add(w, "a", ST_F32, 1, s2, a, 0, err, sizeof err);
    size_t hl;
    char *h = stw_header(w, &hl, err, sizeof err);
    CHECK(h && strcmp(h, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
                         "  ") == 0 && hl == 56, "header without metadata: [%s]", h);
    free(h);
    stw_free(w);
}

/* A raw file: 8-byte length hlen, then `json` (padded with spaces to hlen
 * if it is shorter), then `ndata` bytes of data. */
static void raw(const char *name, const char *json, uint64_t hlen, size_t ndata) {
    size_t jl = strlen(json);
    size_t total = 8 + (jl > hlen ? jl : (size_t)hlen) + ndata;
    unsigned char *b = malloc(total);
    put_u64le(b, hlen);
    memset(b + 8, ' ', total - 8);
    memcpy(b + 8, json, jl);
    for (size_t i = 0; i < ndata; i++) b[total - ndata + i] = (unsigned char)i;
    write_bytes(P(name), b, total);
    free(b);
}

static int open_raw(const char *json, size_t ndata) {
    raw("bad.safetensors", json, strlen(json), ndata);
    StFile f;
    int rc = st_open(&f, P("bad.safetensors"), err, sizeof err);
    if (rc == 0) st_close(&f);
    return rc;
}

#define OK1 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"

static void test_corrupt(void) {
    StFile f;
    CHECK(open_raw(OK1, 8) == 0, "the base file is valid: %s", err);
    CHECK(open_raw(OK1, 7) != 0 && has(err, "bad.safetensors") &&
              has(err, "run past the end of the data section (7 bytes)"),
          "truncated data: %s", err);
    write_bytes(P("bad.safetensors"), "\x10\0\0", 3);
    CHECK(st_open(&f, P("bad.safetensors"), err, sizeof err) != 0 && has(err, "3 bytes, too short"),
          "shorter than 8 bytes: %s", err);
    raw("bad.safetensors", OK1, 1000, 0);
    CHECK(st_open(&f, P("bad.safetensors"), err, sizeof err) == 0 ? (st_close(&f), 0) : 1,
          "spaces padding is fine but no data: %s", err);
    CHECK(has(err, "run past the end"), "padding case error: %s", err);
    {
        /* header length beyond the file */
        unsigned char b[16] = {0};
        put_u64le(b, 1000);
        memcpy(b + 8, "{}      ", 8);
        write_bytes(P("bad.safetensors"), b, 16);
        CHECK(st_open(&f, P("bad.safetensors"), err, sizeof err) != 0 &&
                  has(err, "header length 1000 runs past the end of the file (16 bytes)"),
              "header length beyond file: %s", err);
        put_u64le(b, UINT64_MAX);
        write_bytes(P("bad.safetensors"), b, 16);
        CHECK(st_open(&f, P("bad.safetensors"), err, sizeof err) != 0 && has(err, "runs past"),
              "header length 2^64-1: %s", err);
    }
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8) != 0 &&
              has(err, "ends in the middle"), "unterminated JSON: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\" \"shape\":[2],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "not valid JSON"), "bad JSON: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":'F32',\"shape\":[2],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "not valid JSON"), "single quotes (strict JSON): %s", err);
    CHECK(open_raw(OK1 "}", 8) != 0 &&
              (has(err, "not valid JSON") || has(err, "unexpected bytes after the JSON")),
          "trailing junk: %s", err);
    CHECK(open_raw("[1,2]", 0) != 0 && has(err, "does not start with a JSON object"),
          "array header: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "tensor \"a\" has unknown dtype \"F17\""), "bad dtype: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "no \"dtype\" string"), "dtype not a string: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", 8) != 0 &&
              has(err, "data_offsets [0, 800] run past the end"), "offsets out of range: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8) != 0 &&
              has(err, "end before they begin"), "reversed offsets: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8) != 0 &&
              has(err, "[begin, end] pair"), "one offset: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8) != 0 &&
              has(err, "not non-negative integers"), "negative offset: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12) != 0 &&
              has(err, "shape [3] of F32 needs 12 bytes but data_offsets "
                       "[0, 8] span 8"), "shape/size mismatch: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                   "\"data_offsets\":[0,8]}}", 8) != 0 && has(err, "needs more than 2^63 bytes"),
          "shape overflow: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "shape entry 0"), "negative dim: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8) != 0 &&
              has(err, "shape entry 0"), "float dim: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,4]}}", 4) != 0 && has(err, "9 dimensions"),
          "too many dims: %s", err);
    CHECK(open_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12) != 0 &&
              has(err, "tensors \"a\" [0, 8] and \"b\" [4, 12] overlap"), "overlap: %s", err);
    CHECK(open_raw("{\"a\":[1]}", 0) != 0 && has(err, "entry \"a\" is not an object"),
          "entry not an object: %s", err);
    CHECK(open_raw("{\"__metadata__\":{\"k\":1}}", 0) != 0 && has(err, "metadata \"k\" is not a "
                                                                        "string"),
          "metadata value not a string: %s", err);
    CHECK(open_raw("{\"__metadata__\":[]}", 0) != 0 && has(err, "\"__metadata__\" is not an object"),
          "metadata not an object: %s", err);
    {
        char j[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
        raw("bad.safetensors", j, sizeof j - 1, 8);
        size_t n;
        unsigned char *b = read_all(P("bad.safetensors"), &n);
        b[8 + 3] = 0;
        write_bytes(P("bad.safetensors"), b, n);
        free(b);
        CHECK(st_open(&f, P("bad.safetensors"), err, sizeof err) != 0 && has(err, "NUL byte"),
              "NUL in header: %s", err);
    }
    CHECK(open_raw("{}", 0) == 0, "an empty file is valid: %s", err);
    CHECK(st_open(&f, P("none.safetensors"), err, sizeof err) != 0 && has(err, "none.safetensors"),
          "missing file: %s", err);
}

/* Every prefix of a valid file, and every single-byte change to its header,
 * must be rejected or accepted cleanly: never a crash or an ASan report. */
static void test_fuzz(void) {
    size_t n;
    unsigned char *b = read_all(P("rt.safetensors"), &n);
    if (!b) return;
    int accepted_prefix = 0;
    for (size_t len = 0; len < n; len++) {
        write_bytes(P("fz.safetensors"), b, len);
        StFile f;
        if (st_open(&f, P("fz.safetensors"), err, sizeof err) == 0) {
            accepted_prefix++;
            st_close(&f);
        }
    }
    CHECK(accepted_prefix == 0, "%d truncated files were accepted", accepted_prefix);
    uint64_t hl = get_u64le(b);
    const unsigned char vals[] = {0, ' ', '"', '{', '}', ',', '9', 'x', 0xff};
    long opened = 0;
    for (size_t i = 0; i < 8 + hl; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            unsigned char keep = b[i];
            b[i] = vals[v];
            write_bytes(P("fz.safetensors"), b, n);
            b[i] = keep;
            StFile f;
            if (st_open(&f, P("fz.safetensors"), err, sizeof err) == 0) {
                /* anything accepted must still describe in-bounds data */
                int inb = 1;
                for (int k = 0; k < f.n_tensors; k++)
                    inb &= (const unsigned char *)f.tensors[k].data + (f.tensors[k].end -
                                                                       f.tensors[k].begin) <=
                           (const unsigned char *)f.map + f.map_len;
                if (!inb) CHECK(0, "mutation at %zu accepted with out-of-bounds data", i);
                opened++;
                st_close(&f);
            }
        }
    CHECK(1, "fuzzed header (%ld mutants accepted)", opened);
    free(b);
}

int main(void) {
    check_name = "test_safetensors";
    if (make_tmpdir("st")) return 1;
    test_roundtrip();
    test_exact_bytes();
    test_half_types();
    test_corrupt();
    test_fuzz();
    rm_rf(tmpdir);
    return check_finish();
}
