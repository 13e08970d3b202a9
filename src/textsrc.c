/* Files, globs and directories to documents (see textsrc.h). */
#include "textsrc.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"

static int pl_add(PathList *l, const char *p) {
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, c * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = c;
    }
    if (!(l->v[l->n] = strdup(p))) return -1;
    l->n++;
    return 0;
}

void pathlist_free(PathList *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(PathList *out, const char *path, int depth, char *err, size_t errlen);

static int add_dir(PathList *out, const char *dir, int depth, char *err, size_t errlen) {
    if (depth > 64) return sg_fail(err, errlen, "%s: directories nested over 64 deep (a symlink loop?)", dir);
    DIR *d = opendir(dir);
    if (!d) return sg_fail(err, errlen, "%s: cannot open the directory: %s", dir, strerror(errno));
    PathList names = {0};
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        size_t n = strlen(dir) + strlen(de->d_name) + 2;
        char *p = malloc(n);
        if (!p) {
            rc = sg_fail(err, errlen, "out of memory");
            break;
        }
        snprintf(p, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", de->d_name);
        rc = pl_add(&names, p);
        free(p);
        if (rc) {
            rc = sg_fail(err, errlen, "out of memory");
            break;
        }
    }
    closedir(d);
    if (names.n) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    for (size_t i = 0; !rc && i < names.n; i++) rc = add_path(out, names.v[i], depth + 1, err, errlen);
    pathlist_free(&names);
    return rc;
}

static int add_path(PathList *out, const char *path, int depth, char *err, size_t errlen) {
    if (!strcmp(path, "-")) return pl_add(out, path) ? sg_fail(err, errlen, "out of memory") : 0;
    struct stat st;
    if (stat(path, &st))
        return sg_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return add_dir(out, path, depth, err, errlen);
    if (!S_ISREG(st.st_mode)) {
        if (depth > 0) return 0; /* sockets, fifos inside a tree: not text */
        return sg_fail(err, errlen, "%s: not a regular file or directory", path);
    }
    return pl_add(out, path) ? sg_fail(err, errlen, "out of memory") : 0;
}

int textsrc_expand(char *const *args, int nargs, PathList *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < nargs; i++) {
        const char *a = args[i];
        struct stat st;
        if (strcmp(a, "-") && stat(a, &st) && strpbrk(a, "*?[")) {
            glob_t g;
            int rc = glob(a, 0, NULL, &g);
            if (rc == GLOB_NOMATCH) {
                pathlist_free(out);
                return sg_fail(err, errlen, "%s: no file matches this pattern", a);
            }
            if (rc) {
                pathlist_free(out);
                return sg_fail(err, errlen, "%s: cannot expand the pattern", a);
            }
            for (size_t k = 0; k < g.gl_pathc; k++)
                if (add_path(out, g.gl_pathv[k], 0, err, errlen)) {
                    globfree(&g);
                    pathlist_free(out);
                    return -1;
                }
            globfree(&g);
        } else if (add_path(out, a, 0, err, errlen)) {
            pathlist_free(out);
            return -1;
        }
    }
    if (out->n == 0) return sg_fail(err, errlen, "no input files (the directories given are empty)");
    /* The same file twice would silently double its text in the corpus. */
    char **real = calloc(out->n, sizeof *real);
    int rc = real ? 0 : sg_fail(err, errlen, "out of memory");
    for (size_t i = 0; !rc && i < out->n; i++) {
        real[i] = strcmp(out->v[i], "-") ? realpath(out->v[i], NULL) : strdup("-");
        if (!real[i]) rc = sg_fail(err, errlen, "%s: %s", out->v[i], strerror(errno));
    }
    if (!rc) {
        char **sorted = malloc(out->n * sizeof *sorted);
        if (!sorted) rc = sg_fail(err, errlen, "out of memory");
        else {
            memcpy(sorted, real, out->n * sizeof *sorted);
            qsort(sorted, out->n, sizeof *sorted, cmp_str);
            for (size_t i = 1; !rc && i < out->n; i++)
                if (!strcmp(sorted[i], sorted[i - 1]))
                    rc = sg_fail(err, errlen, "%s: the file is named twice among the inputs",
                                 sorted[i]);
            free(sorted);
        }
    }
    if (real)
        for (size_t i = 0; i < out->n; i++) free(real[i]);
    free(real);
    if (rc) pathlist_free(out);
    return rc;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int docreader_open(DocReader *r, const char *path, const TextOpts *o, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->path = path;
    int fd = strcmp(path, "-") ? -1 : dup(0);
    r->gz = fd >= 0 ? gzdopen(fd, "rb") : gzopen(path, "rb");
    if (!r->gz)
        return sg_fail(err, errlen, "%s: cannot open: %s", path,
                       errno ? strerror(errno) : "out of memory");
    gzbuffer(r->gz, 1 << 18);
    r->jsonl = o->format == TEXT_JSONL ||
               (o->format == TEXT_AUTO && (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz")));
    r->split = r->jsonl ? SPLIT_LINE : o->split;
    r->sep = o->sep;
    r->seplen = o->sep ? strlen(o->sep) : 0;
    if (r->split == SPLIT_SEP && r->seplen == 0) {
        docreader_close(r);
        return sg_fail(err, errlen, "%s: splitting on an empty separator", path);
    }
    r->field = o->text_field ? o->text_field : "text";
    r->cap = 1 << 20;
    r->buf = malloc(r->cap);
    if (r->jsonl && (r->tokener = json_tokener_new()))
        json_tokener_set_flags(r->tokener, JSON_TOKENER_STRICT); /* RFC 8259: no single quotes, no trailing commas */
    if (!r->buf || (r->jsonl && !r->tokener)) {
        docreader_close(r);
        return sg_fail(err, errlen, "out of memory");
    }
    return 0;
}

void docreader_close(DocReader *r) {
    if (r->gz) gzclose(r->gz);
    if (r->tokener) json_tokener_free(r->tokener);
    if (r->doc) json_object_put((json_object *)r->doc);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

uint64_t docreader_offset(DocReader *r) {
    long o = r->gz ? (long)gzoffset(r->gz) : 0;
    return o > 0 ? (uint64_t)o : 0;
}

/* Read more input after buf[end); 0 ok (possibly now at eof), -1 error. */
static int fill(DocReader *r, char *err, size_t errlen) {
    if (r->beg > 0) {
        memmove(r->buf, r->buf + r->beg, r->end - r->beg);
        r->end -= r->beg;
        r->beg = 0;
    }
    if (r->end == r->cap) {
        uint8_t *b = realloc(r->buf, 2 * r->cap);
        if (!b) return sg_fail(err, errlen, "%s: out of memory holding a document of %zu bytes", r->path, r->end);
        r->buf = b;
        r->cap *= 2;
    }
    size_t want = r->cap - r->end;
    if (want > (1u << 30)) want = 1u << 30;
    int n = gzread(r->gz, r->buf + r->end, (unsigned)want);
    if (n < 0) {
        int code;
        const char *m = gzerror(r->gz, &code);
        return sg_fail(err, errlen, "%s: read error: %s", r->path,
                       code == Z_ERRNO ? strerror(errno) : m);
    }
    if (n == 0) {
        int code;
        const char *m = gzerror(r->gz, &code);
        if (code != Z_OK && code != Z_BUF_ERROR)
            return sg_fail(err, errlen, "%s: read error: %s", r->path, m);
        if (code == Z_BUF_ERROR)
            return sg_fail(err, errlen, "%s: the gzip stream is truncated", r->path);
        r->eof = 1;
    }
    r->end += (size_t)n;
    r->bytes_read += (uint64_t)n;
    return 0;
}

/* Where the next document ends in buf[from .. end): its offset and the
 * delimiter's length, or -1 if no delimiter is there yet. */
static long find_delim(const DocReader *r, size_t from, size_t *dl) {
    const uint8_t *b = r->buf;
    switch (r->split) {
    case SPLIT_FILE:
        return -1;
    case SPLIT_LINE: {
        const uint8_t *q = memchr(b + from, '\n', r->end - from);
        *dl = 1;
        return q ? (long)(q - b) : -1;
    }
    case SPLIT_PARA:
        for (const uint8_t *q = b + from; (q = memchr(q, '\n', (size_t)(b + r->end - q)));) {
            if (q + 1 >= b + r->end) return -1;
            if (q[1] == '\n') {
                *dl = 2;
                return (long)(q - b);
            }
            q++;
        }
        return -1;
    case SPLIT_SEP: {
        const uint8_t *q = memmem(b + from, r->end - from, r->sep, r->seplen);
        *dl = r->seplen;
        return q ? (long)(q - b) : -1;
    }
    }
    return -1;
}

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int jsonl_doc(DocReader *r, const uint8_t *line, size_t n, const uint8_t **p, size_t *pn,
                     char *err, size_t errlen) {
    if (r->doc) {
        json_object_put((json_object *)r->doc);
        r->doc = NULL;
    }
    json_tokener *tk = r->tokener;
    json_tokener_reset(tk);
    if (n > INT_MAX) return sg_fail(err, errlen, "%s:%zu: a line of %zu bytes", r->path, r->line, n);
    json_object *o = json_tokener_parse_ex(tk, (const char *)line, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t used = json_tokener_get_parse_end(tk);
    if (!o && je == json_tokener_continue) {
        /* a bare number or literal waits for a terminator: give it one */
        o = json_tokener_parse_ex(tk, " ", 1);
        je = json_tokener_get_error(tk);
        used = n;
    }
    if (!o || je != json_tokener_success) {
        if (o) json_object_put(o);
        return sg_fail(err, errlen, "%s:%zu: not valid JSON (%s)", r->path, r->line,
                       je == json_tokener_continue ? "the line ends inside a value"
                                                   : json_tokener_error_desc(je));
    }
    while (used < n && is_ws(line[used])) used++;
    if (used < n) {
        json_object_put(o);
        return sg_fail(err, errlen, "%s:%zu: text after the JSON value (one object per line)", r->path, r->line);
    }
    r->doc = (char *)o;
    json_object *f;
    if (!json_object_is_type(o, json_type_object))
        return sg_fail(err, errlen, "%s:%zu: a JSON %s, expected an object with a \"%s\" field", r->path,
                       r->line, json_type_to_name(json_object_get_type(o)), r->field);
    if (!json_object_object_get_ex(o, r->field, &f))
        return sg_fail(err, errlen, "%s:%zu: no \"%s\" field (choose the field with --text-field)",
                       r->path, r->line, r->field);
    if (!json_object_is_type(f, json_type_string))
        return sg_fail(err, errlen, "%s:%zu: the \"%s\" field is a %s, expected a string", r->path,
                       r->line, r->field, json_type_to_name(json_object_get_type(f)));
    *p = (const uint8_t *)json_object_get_string(f);
    *pn = (size_t)json_object_get_string_len(f);
    return 0;
}

int docreader_next(DocReader *r, const uint8_t **p, size_t *n, char *err, size_t errlen) {
    size_t scan = r->beg;
    for (;;) {
        size_t dl = 0;
        long d = find_delim(r, scan, &dl);
        size_t ds = r->beg, de;
        if (d >= 0) {
            de = (size_t)d;
            r->beg = de + dl;
        } else if (r->eof) {
            if (r->beg == r->end) return 0;
            de = r->end;
            r->beg = r->end;
        } else {
            /* keep what was scanned: only a delimiter straddling the old end can be new */
            size_t done = r->end - r->beg;
            size_t back = r->split == SPLIT_SEP ? r->seplen : 1;
            if (fill(r, err, errlen)) return -1;
            scan = r->beg + (done > back ? done - back : 0);
            continue;
        }
        scan = r->beg;
        const uint8_t *s = r->buf + ds;
        size_t len = de - ds;
        if (r->jsonl) {
            r->line++;
            size_t k = 0;
            while (k < len && is_ws(s[k])) k++;
            if (k == len) continue; /* blank line */
            if (jsonl_doc(r, s, len, p, n, err, errlen)) return -1;
            if (*n == 0) continue;
            return 1;
        }
        switch (r->split) {
        case SPLIT_LINE:
            if (len && s[len - 1] == '\r') len--;
            break;
        case SPLIT_PARA:
            while (len && s[0] == '\n') s++, len--;
            while (len && s[len - 1] == '\n') len--;
            break;
        case SPLIT_SEP:
            while (len && is_ws(s[0])) s++, len--;
            while (len && is_ws(s[len - 1])) len--;
            break;
        case SPLIT_FILE:
            break;
        }
        if (len == 0) continue;
        *p = s;
        *n = len;
        return 1;
    }
}
