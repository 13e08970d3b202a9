/* Atomic file writing and directory helpers.
 *
 * A file that matters (checkpoint, shard, export, result.json) is written to
 * a temporary file in the same directory, flushed and fsync'd, then renamed
 * over the target, and the directory is fsync'd so the rename itself is
 * durable.  rename() within one file system is atomic, so a reader (or a
 * crash) sees either the old complete file or the new complete file, never
 * a half-written one.
 *
 * Every function that can fail takes (err, errlen) and writes a message for
 * people there: it names the file and the reason. */
#ifndef SG_FSUTIL_H
#define SG_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;    /* write here (fwrite/fprintf); NULL once committed or aborted */
    char *path; /* final path */
    char *tmp;  /* temporary path in the same directory */
    int write_errno; /* errno of the first failed af_write, reported at commit */
} AtomicFile;

/* Create PATH.tmp.XXXXXX next to PATH and open it for writing. */
int af_open(AtomicFile *a, const char *path, char *err, size_t errlen);
/* fwrite that reports failure (0 ok, -1 error; the reason is read at commit). */
int af_write(AtomicFile *a, const void *p, size_t n);
/* Flush, fsync, close, rename over the final path, fsync the directory.
 * On any failure the temporary file is removed and the old file at PATH, if
 * any, is untouched.  The AtomicFile is released either way. */
int af_commit(AtomicFile *a, char *err, size_t errlen);
/* Give up: close and remove the temporary file.  Safe to call twice. */
void af_abort(AtomicFile *a);

/* Write a whole buffer to PATH atomically. */
int fs_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* fsync the directory that holds PATH (so a rename or create in it is durable). */
int fs_fsync_parent(const char *path, char *err, size_t errlen);

/* mkdir -p with mode 0777 (less umask).  Existing directories are fine. */
int fs_mkdir_p(const char *dir, char *err, size_t errlen);

/* Size of a regular file in bytes; -1 with a message if it can't be stat'd. */
int fs_file_size(const char *path, uint64_t *size, char *err, size_t errlen);

/* The whole of PATH (a file, or anything fopen reads: a pipe), malloc'd and
 * NUL-terminated, its length in *n; more than MAX bytes (0: no limit) is an
 * error.  NULL with "PATH: reason" in err. */
char *fs_read_file(const char *path, size_t max, size_t *n, char *err, size_t errlen);

/* 1 if PATH exists (any type), else 0. */
int fs_exists(const char *path);

/* Little-endian field access for the binary formats (docs/formats.md).
 * Byte-wise, so they are correct on any host and at any alignment. */
static inline void put_u32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_u64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t get_u32le(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t get_u64le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
