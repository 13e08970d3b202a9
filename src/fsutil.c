#include "fsutil.h"
#include "errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The directory part of PATH ("." if none), malloc'd. */
static char *parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(".");
    if (slash == path) return dup_str("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

int fs_fsync_parent(const char *path, char *err, size_t errlen) {
    char *dir = parent_dir(path);
    if (!dir) return sg_fail(err, errlen, "%s: out of memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        int e = errno;
        sg_fail(err, errlen, "%s: cannot open directory to sync it: %s", dir, strerror(e));
        free(dir);
        return -1;
    }
    /* Some file systems refuse fsync on directories (EINVAL); the rename is
     * then as durable as that file system makes it, which is not our error. */
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        int e = errno;
        rc = sg_fail(err, errlen, "%s: fsync of directory failed: %s", dir, strerror(e));
    }
    close(fd);
    free(dir);
    return rc;
}

int af_open(AtomicFile *a, const char *path, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = dup_str(path);
    a->tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp); /* not created yet: nothing to unlink */
        memset(a, 0, sizeof *a);
        return sg_fail(err, errlen, "%s: out of memory", path);
    }
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    /* mkstemp: a unique name, so two writers of the same target never share
     * a temporary file; the last rename wins with a complete file. */
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        int e = errno;
        sg_fail(err, errlen, "%s: cannot create temporary file %s: %s (check that the directory "
             "exists and is writable)", path, a->tmp, strerror(e));
        free(a->tmp);
        a->tmp = NULL; /* nothing to unlink */
        af_abort(a);
        return -1;
    }
    /* mkstemp creates 0600; give the file the usual 0666 & ~umask. */
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        int e = errno;
        close(fd);
        af_abort(a);
        return sg_fail(err, errlen, "%s: fdopen failed: %s", path, strerror(e));
    }
    return 0;
}

int af_write(AtomicFile *a, const void *p, size_t n) {
    if (!a->f) return -1;
    if (n == 0) return 0;
    errno = 0;
    if (fwrite(p, 1, n, a->f) == n) return 0;
    if (!a->write_errno) a->write_errno = errno ? errno : EIO;
    return -1;
}

void af_abort(AtomicFile *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
}

int af_commit(AtomicFile *a, char *err, size_t errlen) {
    if (!a->f) {
        af_abort(a);
        return sg_fail(err, errlen, "internal error: af_commit on a file that is not open");
    }
    /* ferror catches a failed fwrite whose errno is long gone; fflush and
     * fsync catch failures (disk full, quota, EFBIG) of buffered data. */
    int bad = ferror(a->f) || a->write_errno;
    int e = bad ? (a->write_errno ? a->write_errno : EIO) : 0;
    if (!bad && fflush(a->f) != 0) bad = 1, e = errno;
    if (!bad && fsync(fileno(a->f)) != 0) bad = 1, e = errno;
    if (fclose(a->f) != 0 && !bad) bad = 1, e = errno;
    a->f = NULL;
    if (bad) {
        sg_fail(err, errlen, "%s: write failed: %s (disk full or quota?); the previous file, "
             "if any, is unchanged", a->path, strerror(e));
        af_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        e = errno;
        sg_fail(err, errlen, "%s: cannot rename %s into place: %s", a->path, a->tmp, strerror(e));
        af_abort(a);
        return -1;
    }
    free(a->tmp);
    a->tmp = NULL; /* renamed: nothing left to unlink */
    int rc = fs_fsync_parent(a->path, err, errlen);
    af_abort(a);
    return rc;
}

int fs_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen) {
    AtomicFile a;
    if (af_open(&a, path, err, errlen) != 0) return -1;
    af_write(&a, data, n);
    return af_commit(&a, err, errlen);
}

int fs_mkdir_p(const char *dir, char *err, size_t errlen) {
    if (!dir || !*dir) return sg_fail(err, errlen, "mkdir: empty directory name");
    char *p = dup_str(dir);
    if (!p) return sg_fail(err, errlen, "%s: out of memory", dir);
    /* Create each prefix in turn; EEXIST is fine as long as it is a directory. */
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            sg_fail(err, errlen, "%s: cannot create directory %s: %s", dir, p, strerror(e));
            free(p);
            return -1;
        }
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            sg_fail(err, errlen, "%s: %s exists and is not a directory", dir, p);
            free(p);
            return -1;
        }
        *s = c;
        if (c == 0) break;
    }
    free(p);
    return 0;
}

int fs_file_size(const char *path, uint64_t *size, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return sg_fail(err, errlen, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) return sg_fail(err, errlen, "%s: not a regular file", path);
    *size = (uint64_t)st.st_size;
    return 0;
}

int fs_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *fs_read_file(const char *path, size_t max, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sg_fail(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *b = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *nb = realloc(b, cap);
            if (!nb) {
                sg_fail(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            b = nb;
        }
        size_t k = fread(b + len, 1, cap - len - 1, f);
        len += k;
        if (max && len > max) {
            sg_fail(err, errlen, "%s: more than %zu bytes", path, max);
            goto fail;
        }
        if (k == 0) break;
    }
    if (ferror(f)) {
        sg_fail(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    b[len] = 0;
    *n = len;
    return b;
fail:
    fclose(f);
    free(b);
    return NULL;
}
