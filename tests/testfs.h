/* File helpers shared by the format tests (shards, checkpoints,
 * safetensors): a scratch directory, whole-file reads and writes.
 * Include after defining _XOPEN_SOURCE 700 (nftw). */
#ifndef SG_TESTS_TESTFS_H
#define SG_TESTS_TESTFS_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];
static char err[1024];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static inline void rm_rf(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Creates tmpdir as $TMPDIR/sg_TAG_XXXXXX (or under /tmp); 0 on success. */
static inline int make_tmpdir(const char *tag) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/sg_%s_XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

/* tmpdir/name, in one of four rotating buffers (several may be live at once) */
static inline const char *P(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}
static inline int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static inline unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    b[*n] = 0; /* text files can be searched with strstr */
    fclose(f);
    return b;
}
static inline void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

#endif
