/* Checkpoints: bitwise round trip, every corruption gives its own error, and
 * a failed save leaves the previous checkpoint intact. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "testfs.h"
#include "checkpoint.h"
#include "fsutil.h"

enum { N = 1000 };
static real P0[N], M0[N], V0[N], P1[N], M1[N], V1[N];
static const char CONFIG[] = "model:\n  n_layer: 2\n  vocab_size: 512\narm: sink_learned\n";

static CkptMeta meta_for(uint64_t step) {
    CkptMeta m;
    memset(&m, 0, sizeof m);
    strcpy(m.arm, "sink_learned");
    m.step = step;
    m.seed = 0x1234567890abcdefull;
    m.config_yaml = (char *)CONFIG;
    m.config_len = sizeof CONFIG - 1;
    m.n = N;
    return m;
}

static void fill(real *a, int salt) {
    for (int i = 0; i < N; i++) a[i] = (real)((i * 0.37 + salt) * (i % 3 ? 1 : -1) / 7.0);
}

static int load(const char *name, uint64_t n_expected) {
    CkptMeta m;
    int rc = ckpt_load(P(name), &m, P1, M1, V1, n_expected, err, sizeof err);
    if (rc == 0) ckpt_meta_free(&m);
    return rc;
}

static void test_roundtrip(void) {
    fill(P0, 1);
    fill(M0, 2);
    fill(V0, 3);
    P0[5] = -0.0f; /* bitwise: the sign of zero must survive */
    CkptMeta m0 = meta_for(4242);
    int rc = ckpt_save(P("a.ckpt"), &m0, P0, M0, V0, err, sizeof err);
    CHECK(rc == 0, "ckpt_save: %s", err);

    CkptMeta m;
    rc = ckpt_load(P("a.ckpt"), &m, P1, M1, V1, N, err, sizeof err);
    CHECK(rc == 0, "ckpt_load: %s", err);
    if (rc) return;
    CHECK(memcmp(P0, P1, sizeof P0) == 0 && memcmp(M0, M1, sizeof M0) == 0 &&
              memcmp(V0, V1, sizeof V0) == 0, "arrays bitwise equal");
    CHECK(m.step == 4242 && m.seed == 0x1234567890abcdefull && m.n == N &&
              m.elem_size == sizeof(real) && strcmp(m.arm, "sink_learned") == 0, "meta fields");
    CHECK(m.config_len == sizeof CONFIG - 1 && strcmp(m.config_yaml, CONFIG) == 0, "config text");
    ckpt_meta_free(&m);

    rc = ckpt_read_meta(P("a.ckpt"), &m, err, sizeof err);
    CHECK(rc == 0 && m.step == 4242 && strcmp(m.config_yaml, CONFIG) == 0, "read_meta: %s", err);
    ckpt_meta_free(&m);
    CHECK(ckpt_load(P("a.ckpt"), NULL, P1, M1, V1, N, err, sizeof err) == 0, "meta NULL");

    /* layout: header fields at the documented offsets, CRC over all before it */
    size_t n;
    unsigned char *b = read_all(P("a.ckpt"), &n);
    size_t want = 112 + (sizeof CONFIG - 1) + 3 * N * sizeof(real) + 4;
    CHECK(n == want, "size %zu want %zu", n, want);
    CHECK(memcmp(b, "SGCKPT\0\0", 8) == 0 && b[8] == 1 && b[12] == sizeof(real) &&
              b[16] == (4242 & 255) && b[17] == 4242 >> 8 && b[24] == 0xef &&
              memcmp(b + 32, "sink_learned", 13) == 0 && b[96] == (N & 255) &&
              b[104] == sizeof CONFIG - 1 && memcmp(b + 112, CONFIG, sizeof CONFIG - 1) == 0,
          "header layout");
    uint32_t crc = (uint32_t)crc32(0, b, (uInt)(n - 4));
    CHECK(b[n - 4] == (crc & 255) && b[n - 1] == crc >> 24, "trailing CRC-32");
    CHECK(memcmp(b + 112 + sizeof CONFIG - 1, P0, N * sizeof(real)) == 0, "params follow config");
    free(b);

    /* an empty config is fine */
    m0.config_yaml = NULL;
    m0.config_len = 0;
    CHECK(ckpt_save(P("e.ckpt"), &m0, P0, M0, V0, err, sizeof err) == 0 &&
              ckpt_read_meta(P("e.ckpt"), &m, err, sizeof err) == 0 && m.config_len == 0 &&
              m.config_yaml && m.config_yaml[0] == 0, "empty config: %s", err);
    ckpt_meta_free(&m);
    CkptMeta bad = meta_for(1);
    memset(bad.arm, 'x', sizeof bad.arm);
    CHECK(ckpt_save(P("f.ckpt"), &bad, P0, M0, V0, err, sizeof err) != 0 && has(err, "arm name"),
          "arm too long: %s", err);
}

/* Copy a.ckpt with its first `len` bytes, and `flip` XORed into byte `at`
 * (at < 0: none). */
static void variant(const char *name, size_t len, long at, unsigned flip) {
    size_t n;
    unsigned char *b = read_all(P("a.ckpt"), &n);
    if (at >= 0) b[at] ^= (unsigned char)flip;
    write_bytes(P(name), b, len);
    free(b);
}

/* A complete, self-consistent checkpoint with chosen header fields. */
static void forge(const char *name, uint32_t version, uint32_t elem, uint64_t n) {
    size_t total = 112 + 3 * (size_t)n * elem + 4;
    unsigned char *b = calloc(total, 1);
    memcpy(b, "SGCKPT\0\0", 8);
    put_u32le(b + 8, version);
    put_u32le(b + 12, elem);
    memcpy(b + 32, "arm", 3);
    put_u64le(b + 96, n);
    put_u32le(b + total - 4, (uint32_t)crc32(0, b, (uInt)(total - 4)));
    write_bytes(P(name), b, total);
    free(b);
}

static void test_corruption(void) {
    size_t size;
    free(read_all(P("a.ckpt"), &size));
    const size_t cuts[] = {0, 7, 50, 111, 112, 130, 112 + sizeof CONFIG + 100, size / 2, size - 5,
                           size - 1};
    for (int i = 0; i < (int)(sizeof cuts / sizeof *cuts); i++) {
        variant("t.ckpt", cuts[i], -1, 0);
        int rc = load("t.ckpt", N);
        CHECK(rc != 0 && has(err, "t.ckpt") && has(err, "truncated"), "cut at %zu: %s", cuts[i],
              err);
        CkptMeta m;
        CHECK(ckpt_read_meta(P("t.ckpt"), &m, err, sizeof err) != 0 && has(err, "truncated"),
              "read_meta, cut at %zu: %s", cuts[i], err);
    }
    char want[128];
    snprintf(want, sizeof want, "truncated: %zu of %zu bytes", size - 1, size);
    variant("t.ckpt", size - 1, -1, 0);
    CHECK(load("t.ckpt", N) != 0 && has(err, want), "exact sizes: %s", err);

    /* trailing bytes */
    size_t n;
    unsigned char *b = read_all(P("a.ckpt"), &n);
    unsigned char *b2 = calloc(n + 3, 1);
    memcpy(b2, b, n);
    write_bytes(P("t.ckpt"), b2, n + 3);
    free(b);
    free(b2);
    CHECK(load("t.ckpt", N) != 0 && has(err, "trailing bytes"), "trailing: %s", err);

    const long flips[] = {120 /* config */, 112 + sizeof CONFIG + 17 /* params */,
                          (long)size - 100 /* adam_v */, (long)size - 2 /* the CRC */,
                          20 /* step */};
    for (int i = 0; i < (int)(sizeof flips / sizeof *flips); i++) {
        variant("c.ckpt", size, flips[i], 0x10);
        CHECK(load("c.ckpt", N) != 0 && has(err, "c.ckpt: checksum mismatch: the file is corrupt"),
              "flip at %ld: %s", flips[i], err);
    }
    variant("c.ckpt", size, 0, 'X' ^ 'S');
    CHECK(load("c.ckpt", N) != 0 && has(err, "not a sinkgate checkpoint"), "magic: %s", err);
    variant("c.ckpt", size, 8, 3);
    CHECK(load("c.ckpt", N) != 0 && has(err, "version 2, this build reads 1"), "version: %s", err);
    variant("c.ckpt", size, 12, 0xff);
    CHECK(load("c.ckpt", N) != 0 && has(err, "elem_size"), "garbage elem_size: %s", err);
    variant("c.ckpt", size, 103, 0x80); /* top byte of n */
    CHECK(load("c.ckpt", N) != 0 && has(err, "corrupt"), "huge n: %s", err);
    /* a step no signed 64-bit counter holds (the fuzzer's, tests/fuzz),
     * even with the checksum made to match */
    {
        size_t len;
        unsigned char *h = read_all(P("a.ckpt"), &len);
        h[23] |= 0x80; /* top byte of step */
        put_u32le(h + len - 4, (uint32_t)crc32(0, h, (uInt)(len - 4)));
        write_bytes(P("s.ckpt"), h, len);
        free(h);
        CkptMeta sm;
        CHECK(load("s.ckpt", N) != 0 && has(err, "s.ckpt: step ") && has(err, "is impossible; the header is corrupt"),
              "step past 2^63: %s", err);
        CHECK(ckpt_read_meta(P("s.ckpt"), &sm, err, sizeof err) != 0 && has(err, "is impossible"),
              "read_meta, step past 2^63: %s", err);
    }

    /* a complete checkpoint from the other precision */
    uint32_t other = sizeof(real) == 4 ? 8 : 4;
    forge("o.ckpt", 1, other, N);
    CHECK(load("o.ckpt", N) != 0 && has(err, sizeof(real) == 4 ? "written by a float64 build"
                                                               : "written by a float32 build"),
          "other precision: %s", err);
    CkptMeta m;
    CHECK(ckpt_read_meta(P("o.ckpt"), &m, err, sizeof err) == 0 && m.elem_size == other,
          "read_meta reads either precision: %s", err);
    ckpt_meta_free(&m);
    forge("o.ckpt", 1, sizeof(real), N);
    CHECK(load("o.ckpt", N) == 0, "forged checkpoint is valid: %s", err);

    /* a model of another size */
    CHECK(load("a.ckpt", N + 1) != 0 && has(err, "holds 1000 parameters, the model has 1001"),
          "wrong n: %s", err);
    CHECK(load("missing.ckpt", N) != 0 && has(err, "missing.ckpt"), "missing: %s", err);
}

static int count_tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) k++;
    closedir(d);
    return k;
}

static void test_atomic(void) {
    /* A save that fails part-way (the file size limit stands in for a full
     * disk or a crash) must leave the old checkpoint loadable and unchanged. */
    size_t size;
    free(read_all(P("a.ckpt"), &size));
    real p2[N], m2[N], v2[N];
    fill(p2, 7);
    fill(m2, 8);
    fill(v2, 9);
    CkptMeta m1 = meta_for(5000);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit lim = old;
    lim.rlim_cur = size / 2;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* get EFBIG, not a signal */
    int set = setrlimit(RLIMIT_FSIZE, &lim) == 0;
    int rc = ckpt_save(P("a.ckpt"), &m1, p2, m2, v2, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(set, "setrlimit");
    CHECK(rc != 0 && has(err, "a.ckpt: write failed") && has(err, "unchanged"),
          "interrupted save fails: %s", err);
    CkptMeta m;
    rc = ckpt_load(P("a.ckpt"), &m, P1, M1, V1, N, err, sizeof err);
    CHECK(rc == 0 && m.step == 4242 && memcmp(P0, P1, sizeof P0) == 0,
          "old checkpoint intact after a failed save: %s", err);
    if (rc == 0) ckpt_meta_free(&m);
    CHECK(count_tmp_files() == 0, "no temporary file left behind");

    /* the temporary file cannot be created */
    rc = ckpt_save(P("nodir/a.ckpt"), &m1, p2, m2, v2, err, sizeof err);
    CHECK(rc != 0 && has(err, "cannot create temporary file"), "no directory: %s", err);

    /* a successful save replaces the old one */
    rc = ckpt_save(P("a.ckpt"), &m1, p2, m2, v2, err, sizeof err);
    CHECK(rc == 0 && ckpt_load(P("a.ckpt"), &m, P1, M1, V1, N, err, sizeof err) == 0 &&
              m.step == 5000 && memcmp(p2, P1, sizeof p2) == 0, "overwrite: %s", err);
    ckpt_meta_free(&m);
    CHECK(count_tmp_files() == 0, "no temporary file after success");
}

static void test_fsutil(void) {
    char d[512];
    snprintf(d, sizeof d, "%s/x/y/z/", tmpdir);
    CHECK(fs_mkdir_p(d, err, sizeof err) == 0 && fs_exists(d), "mkdir -p: %s", err);
    CHECK(fs_mkdir_p(d, err, sizeof err) == 0, "mkdir -p twice: %s", err);
    CHECK(fs_write_atomic(P("x/f"), "hello", 5, err, sizeof err) == 0, "write_atomic: %s", err);
    snprintf(d, sizeof d, "%s/x/f/sub", tmpdir);
    CHECK(fs_mkdir_p(d, err, sizeof err) != 0 && has(err, "not a directory"), "mkdir over a file: %s",
          err);
    uint64_t sz;
    CHECK(fs_file_size(P("x/f"), &sz, err, sizeof err) == 0 && sz == 5, "file size");
    AtomicFile a;
    CHECK(af_open(&a, P("x/g"), err, sizeof err) == 0, "af_open");
    af_write(&a, "abc", 3);
    af_abort(&a);
    CHECK(!fs_exists(P("x/g")), "aborted file does not appear");
}

int main(void) {
    check_name = "test_checkpoint";
    if (make_tmpdir("ckpt")) return 1;
    test_roundtrip();
    test_corruption();
    test_atomic();
    test_fsutil();
    rm_rf(tmpdir);
    return check_finish();
}
