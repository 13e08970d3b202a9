/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c, docs/fuzzing.md).
 *
 * Each target defines LLVMFuzzerTestOneInput and, where it needs setup,
 * LLVMFuzzerInitialize.  The same object links two ways: with clang's
 * libFuzzer (`make fuzz`: coverage-guided search) and with replay.c under
 * gcc's ASan/UBSan (`make test`: every input in tests/fuzz/corpus/TARGET
 * runs once, so each input that ever broke a parser stays a regression
 * test).
 *
 * The readers under test take paths, so an input reaches them as a file
 * in a scratch directory made once per process.  A property that does not
 * hold calls FUZZ_REQUIRE, which prints it and aborts: libFuzzer then saves
 * the input as a crash, and replay fails. */
#ifndef SG_TESTS_FUZZ_H
#define SG_TESTS_FUZZ_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_REQUIRE(cond, ...)                                                   \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: property does not hold: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            abort();                                                              \
        }                                                                         \
    } while (0)

static char fuzz_dir[256];

static int fuzz_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static void fuzz_cleanup(void) {
    if (fuzz_dir[0]) nftw(fuzz_dir, fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
/* Empties the scratch directory (made on first use) and returns it. */
static inline const char *fuzz_scratch(void) {
    if (!fuzz_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/sg_fuzz_XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup);
        return fuzz_dir;
    }
    fuzz_cleanup();
    if (mkdir(fuzz_dir, 0700)) {
        perror(fuzz_dir);
        abort();
    }
    return fuzz_dir;
}
/* Writes data to DIR/name (name may hold one level of subdirectory) and
 * returns the path, in a static buffer. */
static inline const char *fuzz_file(const char *dir, const char *name, const void *data, size_t n) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *slash = strrchr(path + strlen(dir) + 1, '/');
    if (slash) {
        *slash = 0;
        mkdir(path, 0700);
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
        perror(path);
        abort();
    }
    return path;
}
/* An error message must say something: every reader promises one. */
static inline void fuzz_require_message(int rc, const char *err) {
    FUZZ_REQUIRE(rc == 0 || err[0], "a failure with an empty message");
}

#endif
