/* Text sources: expanding files, directories and globs into a path list,
 * and DocReader's documents in every split mode, JSONL and gzip. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "testfs.h"
#include "textsrc.h"

#define MIB (1u << 20)
#define EOT "<|endoftext|>"

static void write_str(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }

static void mkdir_p(const char *path) { mkdir(path, 0755); }

/* ---- textsrc_expand ------------------------------------------------------- */

/* Expands ARGS; on success compares with WANT (NULL-terminated, names
 * relative to tmpdir).  Returns textsrc_expand's status. */
static int expand_eq(const char *what, const char *const *args, int nargs, const char *const *want) {
    char *a[8];
    for (int i = 0; i < nargs; i++) a[i] = strdup(P(args[i]));
    PathList l;
    err[0] = 0;
    int rc = textsrc_expand(a, nargs, &l, err, sizeof err);
    if (want) {
        CHECK(rc == 0, "%s: textsrc_expand: %s", what, err);
        size_t n = 0;
        while (want[n]) n++;
        CHECK(rc != 0 || l.n == n, "%s: %zu paths, want %zu", what, l.n, n);
        for (size_t i = 0; rc == 0 && i < n && i < l.n; i++)
            CHECK(!strcmp(l.v[i], P(want[i])), "%s: path %zu is %s, want %s", what, i, l.v[i],
                  P(want[i]));
    }
    if (rc) CHECK(l.n == 0 && l.v == NULL, "%s: the list is empty after an error", what);
    pathlist_free(&l);
    for (int i = 0; i < nargs; i++) free(a[i]);
    return rc;
}

static void test_expand(void) {
    write_str(P("one.txt"), "x");
    write_str(P("two.txt"), "y");

    /* files as given, in argument order */
    expand_eq("one file", (const char *[]){"one.txt"}, 1, (const char *[]){"one.txt", NULL});
    expand_eq("two files in argument order", (const char *[]){"two.txt", "one.txt"}, 2,
              (const char *[]){"two.txt", "one.txt", NULL});

    /* a directory tree: recursive, names in byte order, dot names skipped */
    mkdir_p(P("tree"));
    mkdir_p(P("tree/sub"));
    mkdir_p(P("tree/sub/deeper"));
    mkdir_p(P("tree/.dotdir"));
    mkdir_p(P("tree/emptysub"));
    const char *files[] = {"tree/b.txt",         "tree/a.txt",     "tree/B.txt",
                           "tree/Z",             "tree/_u.txt",    "tree/a b.txt",
                           "tree/sub.txt",       "tree/sub/z.txt", "tree/sub/a.txt",
                           "tree/sub/deeper/q",  "tree/.hidden",   "tree/.dotdir/x.txt",
                           "tree/sub/.h.txt",    "tree/~tilde"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) write_str(P(files[i]), "t");
    CHECK(mkfifo(P("tree/sub/fifo"), 0644) == 0, "mkfifo");
    const char *tree_want[] = {"tree/B.txt",     "tree/Z",         "tree/_u.txt",
                               "tree/a b.txt",   "tree/a.txt",     "tree/b.txt",
                               "tree/sub/a.txt", "tree/sub/deeper/q", "tree/sub/z.txt",
                               "tree/sub.txt",   "tree/~tilde",    NULL};
    expand_eq("directory tree", (const char *[]){"tree"}, 1, tree_want);
    const char *tree_slash_want[] = {"tree/B.txt",     "tree/Z",            "tree/_u.txt",
                                     "tree/a b.txt",   "tree/a.txt",        "tree/b.txt",
                                     "tree/sub/a.txt", "tree/sub/deeper/q", "tree/sub/z.txt",
                                     "tree/sub.txt",   "tree/~tilde",       NULL};
    expand_eq("directory given with a trailing slash", (const char *[]){"tree/"}, 1,
              tree_slash_want);
    expand_eq("file then directory", (const char *[]){"one.txt", "tree/sub"}, 2,
              (const char *[]){"one.txt", "tree/sub/a.txt", "tree/sub/deeper/q", "tree/sub/z.txt",
                               NULL});

    /* a fifo named directly is refused (inside a tree it was skipped) */
    int rc = expand_eq("fifo", (const char *[]){"tree/sub/fifo"}, 1, NULL);
    CHECK(rc != 0 && has(err, "tree/sub/fifo") && has(err, "not a regular file"), "fifo: %s", err);

    /* glob patterns, as a shell would pass them when quoted */
    mkdir_p(P("g"));
    mkdir_p(P("g/dir.txt"));
    write_str(P("g/c.txt"), "c");
    write_str(P("g/a.txt"), "a");
    write_str(P("g/b.md"), "b");
    write_str(P("g/.d.txt"), "d");
    write_str(P("g/dir.txt/in"), "i");
    expand_eq("glob", (const char *[]){"g/*.txt"}, 1,
              (const char *[]){"g/a.txt", "g/c.txt", "g/dir.txt/in", NULL});
    expand_eq("glob with ? and []", (const char *[]){"g/[ab].??"}, 1,
              (const char *[]){"g/b.md", NULL});
    /* a name that exists is taken literally even if it looks like a pattern */
    write_str(P("g/lit[1].txt"), "l");
    write_str(P("g/lit1.txt"), "l");
    expand_eq("existing name with glob characters", (const char *[]){"g/lit[1].txt"}, 1,
              (const char *[]){"g/lit[1].txt", NULL});

    /* errors name the argument */
    rc = expand_eq("missing path", (const char *[]){"one.txt", "nope.txt"}, 2, NULL);
    CHECK(rc != 0 && has(err, P("nope.txt")), "missing path: %s", err);
    rc = expand_eq("glob matching nothing", (const char *[]){"g/*.zip"}, 1, NULL);
    CHECK(rc != 0 && has(err, P("g/*.zip")) && has(err, "no file matches"), "no match: %s", err);

    /* the same file twice, however it is named */
    char real_one[PATH_MAX];
    CHECK(realpath(P("one.txt"), real_one) != NULL, "realpath");
    rc = expand_eq("same file twice", (const char *[]){"one.txt", "one.txt"}, 2, NULL);
    CHECK(rc != 0 && has(err, "one.txt") && has(err, "twice"), "same file twice: %s", err);
    mkdir_p(P("d"));
    write_str(P("d/f"), "f");
    rc = expand_eq("d/f and d/./f", (const char *[]){"d/f", "d/./f"}, 2, NULL);
    CHECK(rc != 0 && has(err, "twice"), "d/./f: %s", err);
    rc = expand_eq("d/f and d/../d/f", (const char *[]){"d/f", "d/../d/f"}, 2, NULL);
    CHECK(rc != 0 && has(err, "twice"), "d/../d/f: %s", err);
    CHECK(symlink(P("one.txt"), P("link.txt")) == 0, "symlink");
    rc = expand_eq("file and a symlink to it", (const char *[]){"link.txt", "one.txt"}, 2, NULL);
    CHECK(rc != 0 && has(err, "twice") && has(err, real_one), "symlink: %s", err);
    rc = expand_eq("file and its directory", (const char *[]){"d/f", "d"}, 2, NULL);
    CHECK(rc != 0 && has(err, "twice"), "file and its directory: %s", err);
    rc = expand_eq("file and a glob matching it", (const char *[]){"g/a.txt", "g/*.txt"}, 2, NULL);
    CHECK(rc != 0 && has(err, "twice"), "file and glob: %s", err);
    /* a symlink inside a directory to a file of the same directory */
    mkdir_p(P("ld"));
    write_str(P("ld/real"), "r");
    CHECK(symlink("real", P("ld/zlink")) == 0, "symlink in dir");
    rc = expand_eq("directory holding a symlink to its own file", (const char *[]){"ld"}, 1, NULL);
    CHECK(rc != 0 && has(err, "twice"), "symlink in dir: %s", err);

    /* nothing to read */
    mkdir_p(P("empty"));
    rc = expand_eq("empty directory", (const char *[]){"empty"}, 1, NULL);
    CHECK(rc != 0 && err[0], "empty directory: %s", err);
    mkdir_p(P("dots"));
    write_str(P("dots/.a"), "a");
    mkdir_p(P("dots/sub"));
    rc = expand_eq("directory of dot files and empty dirs", (const char *[]){"dots"}, 1, NULL);
    CHECK(rc != 0 && err[0], "dot files only: %s", err);
}

/* ---- DocReader ------------------------------------------------------------ */

typedef struct {
    size_t n;
    uint8_t **p;
    size_t *len;
    size_t *line; /* r.line after each document */
    uint64_t *off;
    int rc;       /* 0 at the end, -1 on error */
    uint64_t bytes_read;
} Docs;

static void docs_free(Docs *d) {
    for (size_t i = 0; i < d->n; i++) free(d->p[i]);
    free(d->p);
    free(d->len);
    free(d->line);
    free(d->off);
    memset(d, 0, sizeof *d);
}

/* Read every document of PATH; err holds the message when d->rc < 0. */
static Docs read_docs(const char *path, TextFormat fmt, SplitMode split, const char *sep,
                      const char *field) {
    Docs d = {0};
    TextOpts o = {fmt, split, sep, field};
    DocReader r;
    err[0] = 0;
    if (docreader_open(&r, path, &o, err, sizeof err)) {
        d.rc = -2;
        return d;
    }
    size_t cap = 0;
    for (;;) {
        const uint8_t *p;
        size_t n;
        int rc = docreader_next(&r, &p, &n, err, sizeof err);
        if (rc <= 0) {
            d.rc = rc;
            break;
        }
        if (d.n == cap) {
            cap = cap ? 2 * cap : 16;
            d.p = realloc(d.p, cap * sizeof *d.p);
            d.len = realloc(d.len, cap * sizeof *d.len);
            d.line = realloc(d.line, cap * sizeof *d.line);
            d.off = realloc(d.off, cap * sizeof *d.off);
        }
        d.p[d.n] = malloc(n ? n : 1);
        memcpy(d.p[d.n], p, n);
        d.len[d.n] = n;
        d.line[d.n] = r.line;
        d.off[d.n] = docreader_offset(&r);
        d.n++;
    }
    d.bytes_read = r.bytes_read;
    docreader_close(&r);
    return d;
}

/* Documents equal WANT (n strings, lengths from strlen unless wlen). */
static void docs_eq(const char *what, const Docs *d, const char *const *want, const size_t *wlen,
                    size_t n) {
    CHECK(d->rc == 0, "%s: reader failed (%d): %s", what, d->rc, err);
    CHECK(d->n == n, "%s: %zu documents, want %zu", what, d->n, n);
    /* one check for all the documents: the first that differs */
    size_t bad = n;
    for (size_t i = 0; i < n && i < d->n && bad == n; i++) {
        size_t wl = wlen ? wlen[i] : strlen(want[i]);
        if (d->len[i] != wl || memcmp(d->p[i], want[i], wl) != 0) bad = i;
    }
    if (bad < n) {
        size_t wl = wlen ? wlen[bad] : strlen(want[bad]);
        CHECK(0, "%s: document %zu is %zu bytes \"%.*s\", want %zu bytes \"%.*s\"", what, bad,
              d->len[bad], (int)(d->len[bad] < 80 ? d->len[bad] : 80), (const char *)d->p[bad], wl,
              (int)(wl < 80 ? wl : 80), want[bad]);
    } else if (n) {
        CHECK(1, "documents");
    }
}

static void expect_docs(const char *what, const char *content, SplitMode split, const char *sep,
                        const char *const *want, size_t n) {
    write_str(P("doc.txt"), content);
    Docs d = read_docs(P("doc.txt"), TEXT_PLAIN, split, sep, NULL);
    docs_eq(what, &d, want, NULL, n);
    CHECK(d.bytes_read == strlen(content), "%s: bytes_read %llu, want %zu", what,
          (unsigned long long)d.bytes_read, strlen(content));
    docs_free(&d);
}

static void test_split_small(void) {
    /* file: the whole file, byte for byte */
    expect_docs("file", "hello\nworld\n", SPLIT_FILE, NULL, (const char *[]){"hello\nworld\n"}, 1);
    expect_docs("file of whitespace", "  \n\n", SPLIT_FILE, NULL, (const char *[]){"  \n\n"}, 1);
    expect_docs("empty file", "", SPLIT_FILE, NULL, NULL, 0);
    {
        const char bin[] = "a\0b\xff\xfe\r\n\x80z";
        write_bytes(P("bin.txt"), bin, sizeof bin - 1);
        Docs d = read_docs(P("bin.txt"), TEXT_AUTO, SPLIT_FILE, NULL, NULL);
        docs_eq("file with NUL and invalid UTF-8", &d, (const char *[]){bin},
                (size_t[]){sizeof bin - 1}, 1);
        docs_free(&d);
    }

    /* line */
    expect_docs("line", "a\nbb\r\n\n\r\nccc", SPLIT_LINE, NULL, (const char *[]){"a", "bb", "ccc"},
                3);
    expect_docs("line with trailing newline", "one\ntwo\n", SPLIT_LINE, NULL,
                (const char *[]){"one", "two"}, 2);
    expect_docs("line: only newlines", "\n\n\r\n\n", SPLIT_LINE, NULL, NULL, 0);
    expect_docs("line: empty file", "", SPLIT_LINE, NULL, NULL, 0);
    expect_docs("line: a lone \\r inside a line is kept", "a\rb\nc\r\r\n", SPLIT_LINE, NULL,
                (const char *[]){"a\rb", "c\r"}, 2);
    expect_docs("line: leading empty lines", "\n\nx", SPLIT_LINE, NULL, (const char *[]){"x"}, 1);

    /* para */
    expect_docs("para", "\n\npara one\nline2\n\n\n\npara two\n\nthree\n\n\n", SPLIT_PARA, NULL,
                (const char *[]){"para one\nline2", "para two", "three"}, 3);
    expect_docs("para: one block with a trailing newline", "a\nb\n", SPLIT_PARA, NULL,
                (const char *[]){"a\nb"}, 1);
    expect_docs("para: no trailing newline", "a\n\nb", SPLIT_PARA, NULL,
                (const char *[]){"a", "b"}, 2);
    expect_docs("para: leading newline", "\nfirst\n\nsecond\n", SPLIT_PARA, NULL,
                (const char *[]){"first", "second"}, 2);
    expect_docs("para: three newlines between", "x\n\n\ny", SPLIT_PARA, NULL,
                (const char *[]){"x", "y"}, 2);
    expect_docs("para: only newlines", "\n\n\n\n\n", SPLIT_PARA, NULL, NULL, 0);

    /* sep */
    expect_docs("sep", "  first story.\n" EOT "\nsecond" EOT EOT "third  \n", SPLIT_SEP, EOT,
                (const char *[]){"first story.", "second", "third"}, 3);
    expect_docs("sep at start and end", EOT "a b" EOT, SPLIT_SEP, EOT, (const char *[]){"a b"}, 1);
    expect_docs("sep: whitespace-only pieces skipped", EOT " \n\t" EOT "\r\n x \n" EOT "\n",
                SPLIT_SEP, EOT, (const char *[]){"x"}, 1);
    expect_docs("sep: inner whitespace kept", "a\n\n b\n" EOT "c", SPLIT_SEP, EOT,
                (const char *[]){"a\n\n b", "c"}, 2);
    expect_docs("sep: partial separator is text", "a <|endoftext| b" EOT "c<|end", SPLIT_SEP, EOT,
                (const char *[]){"a <|endoftext| b", "c<|end"}, 2);
    expect_docs("sep: no separator", "just text\n", SPLIT_SEP, EOT, (const char *[]){"just text"},
                1);
    expect_docs("sep: only separators", EOT EOT EOT, SPLIT_SEP, EOT, NULL, 0);
    expect_docs("sep: one-byte separator", "a|b||c|", SPLIT_SEP, "|",
                (const char *[]){"a", "b", "c"}, 3);
    expect_docs("sep: overlapping candidates", "xaaby", SPLIT_SEP, "ab",
                (const char *[]){"xa", "y"}, 2);
}

/* A deterministic non-whitespace byte that is not '<' or '\n'. */
static uint8_t fill_byte(size_t i) { return (uint8_t)('a' + (i * 7 + i / 26) % 26); }

static uint8_t *pattern(size_t n, size_t seed) {
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) b[i] = fill_byte(i + seed);
    return b;
}

/* Concatenate pieces into a file. */
static void write_pieces(const char *path, const uint8_t *const *p, const size_t *n, size_t k) {
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < k; i++) fwrite(p[i], 1, n[i], f);
    fclose(f);
}

static void test_split_big(void) {
    const size_t sl = strlen(EOT);
    char what[160];

    /* a separator at or around the 1 MiB read boundary */
    const size_t ks[] = {0, 1, 2, 6, 12, 13, 14};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        size_t la = MIB - ks[t], lb = 1000;
        uint8_t *a = pattern(la, 1), *b = pattern(lb, 2);
        const uint8_t *pieces[] = {a, (const uint8_t *)EOT, b, (const uint8_t *)EOT,
                                   (const uint8_t *)"end"};
        size_t lens[] = {la, sl, lb, sl, 3};
        write_pieces(P("big.txt"), pieces, lens, 5);
        Docs d = read_docs(P("big.txt"), TEXT_PLAIN, SPLIT_SEP, EOT, NULL);
        snprintf(what, sizeof what, "separator starting at 1 MiB - %zu", ks[t]);
        docs_eq(what, &d, (const char *[]){(char *)a, (char *)b, "end"}, (size_t[]){la, lb, 3}, 3);
        CHECK(d.bytes_read == la + lb + 2 * sl + 3, "%s: bytes_read %llu", what,
              (unsigned long long)d.bytes_read);
        docs_free(&d);
        free(a);
        free(b);
    }

    /* many documents over several MiB: separators fall across every refill */
    {
        size_t ndoc = 40000, total = 0;
        uint8_t **docs = malloc(ndoc * sizeof *docs);
        size_t *dl = malloc(ndoc * sizeof *dl);
        FILE *f = fopen(P("many.txt"), "wb");
        for (size_t i = 0; i < ndoc; i++) {
            dl[i] = 1 + (i * 7919) % 173;
            docs[i] = pattern(dl[i], i);
            const char *ws = i % 3 == 0 ? "\n" : i % 3 == 1 ? "" : " \n\n";
            fputs(ws, f);
            fwrite(docs[i], 1, dl[i], f);
            fputs(ws, f);
            fputs(EOT, f);
            total += 2 * strlen(ws) + dl[i] + sl;
        }
        fclose(f);
        CHECK(total > 3 * MIB, "many.txt is %zu bytes", total);
        Docs d = read_docs(P("many.txt"), TEXT_AUTO, SPLIT_SEP, EOT, NULL);
        docs_eq("many documents", &d, (const char *const *)docs, dl, ndoc);
        CHECK(d.bytes_read == total, "many: bytes_read %llu want %zu",
              (unsigned long long)d.bytes_read, total);
        docs_free(&d);

        /* the same through gzip: same documents, bytes_read the decompressed size */
        size_t n;
        unsigned char *raw = read_all(P("many.txt"), &n);
        gzFile gz = gzopen(P("many.txt.gz"), "wb");
        CHECK(gz && gzwrite(gz, raw, (unsigned)n) == (int)n, "gzwrite");
        gzclose(gz);
        d = read_docs(P("many.txt.gz"), TEXT_AUTO, SPLIT_SEP, EOT, NULL);
        docs_eq("many documents, gzip", &d, (const char *const *)docs, dl, ndoc);
        CHECK(d.bytes_read == total, "many.gz: bytes_read %llu want %zu",
              (unsigned long long)d.bytes_read, total);
        struct stat st;
        stat(P("many.txt.gz"), &st);
        int mono = 1;
        for (size_t i = 1; i < d.n; i++) mono &= d.off[i] >= d.off[i - 1];
        CHECK(d.n == ndoc && mono && d.off[d.n - 1] > d.off[0] && d.off[0] > 0 &&
                  d.off[d.n - 1] <= (uint64_t)st.st_size,
              "docreader_offset grows: first %llu last %llu, file %lld",
              (unsigned long long)(d.n ? d.off[0] : 0),
              (unsigned long long)(d.n ? d.off[d.n - 1] : 0), (long long)st.st_size);
        CHECK(d.n == ndoc && d.off[d.n - 1] < total, "gzip offset counts compressed bytes");
        docs_free(&d);
        free(raw);
        for (size_t i = 0; i < ndoc; i++) free(docs[i]);
        free(docs);
        free(dl);
    }

    /* documents longer than the 1 MiB buffer */
    {
        size_t la = 3 * MIB + 17;
        uint8_t *a = pattern(la, 5);
        a[100] = '\n';
        a[MIB] = '\n';
        a[2 * MIB + 1] = '\0';
        write_bytes(P("huge.txt"), a, la);
        Docs d = read_docs(P("huge.txt"), TEXT_PLAIN, SPLIT_FILE, NULL, NULL);
        docs_eq("file of 3 MiB", &d, (const char *[]){(char *)a}, (size_t[]){la}, 1);
        docs_free(&d);

        size_t lb = MIB + MIB / 2;
        const uint8_t *pieces[] = {(const uint8_t *)"x", (const uint8_t *)EOT, a + 200,
                                   (const uint8_t *)EOT, (const uint8_t *)"y"};
        size_t lens[] = {1, sl, lb, sl, 1};
        write_pieces(P("huge.txt"), pieces, lens, 5);
        d = read_docs(P("huge.txt"), TEXT_PLAIN, SPLIT_SEP, EOT, NULL);
        docs_eq("sep: a 1.5 MiB document", &d, (const char *[]){"x", (char *)a + 200, "y"},
                (size_t[]){1, lb, 1}, 3);
        docs_free(&d);

        /* a line of 2.5 MiB between short ones */
        uint8_t *c = pattern(5 * MIB / 2, 9);
        pieces[0] = (const uint8_t *)"first\n";
        lens[0] = 6;
        pieces[1] = c;
        lens[1] = 5 * MIB / 2;
        pieces[2] = (const uint8_t *)"\r\nlast";
        lens[2] = 6;
        write_pieces(P("huge.txt"), pieces, lens, 3);
        d = read_docs(P("huge.txt"), TEXT_PLAIN, SPLIT_LINE, NULL, NULL);
        docs_eq("line: a 2.5 MiB line", &d, (const char *[]){"first", (char *)c, "last"},
                (size_t[]){5, 5 * MIB / 2, 4}, 3);
        docs_free(&d);
        free(c);
        free(a);
    }

    /* line: "\r\n" straddling the boundary; para: "\n\n" straddling it */
    {
        uint8_t *a = pattern(MIB + 10, 3);
        a[MIB - 1] = '\r';
        a[MIB] = '\n';
        write_bytes(P("edge.txt"), a, MIB + 10);
        Docs d = read_docs(P("edge.txt"), TEXT_PLAIN, SPLIT_LINE, NULL, NULL);
        docs_eq("line: \\r\\n across 1 MiB", &d, (const char *[]){(char *)a, (char *)a + MIB + 1},
                (size_t[]){MIB - 1, 9}, 2);
        docs_free(&d);

        a[MIB - 1] = '\n';
        write_bytes(P("edge.txt"), a, MIB + 10);
        d = read_docs(P("edge.txt"), TEXT_PLAIN, SPLIT_PARA, NULL, NULL);
        docs_eq("para: \\n\\n across 1 MiB", &d, (const char *[]){(char *)a, (char *)a + MIB + 1},
                (size_t[]){MIB - 1, 9}, 2);
        docs_free(&d);

        /* a single '\n' exactly at the boundary is not a paragraph break */
        a[MIB - 1] = 'q';
        write_bytes(P("edge.txt"), a, MIB + 10);
        d = read_docs(P("edge.txt"), TEXT_PLAIN, SPLIT_PARA, NULL, NULL);
        docs_eq("para: lone \\n at 1 MiB", &d, (const char *[]){(char *)a}, (size_t[]){MIB + 10},
                1);
        docs_free(&d);

        /* "\n" ending the first MiB and "\n" starting the second */
        a[MIB] = 'q';
        a[MIB - 1] = '\n';
        a[MIB] = '\n';
        a[MIB + 1] = '\n';
        write_bytes(P("edge.txt"), a, MIB + 10);
        d = read_docs(P("edge.txt"), TEXT_PLAIN, SPLIT_PARA, NULL, NULL);
        docs_eq("para: three newlines across 1 MiB", &d,
                (const char *[]){(char *)a, (char *)a + MIB + 2}, (size_t[]){MIB - 1, 8}, 2);
        docs_free(&d);
        free(a);
    }
}

static void test_jsonl(void) {
    const char *jl = "{\"text\": \"hello\\nworld\", \"id\": 1}\n"  /* 1 */
                     "\n"                                         /* 2 blank */
                     "   \t \n"                                   /* 3 blank */
                     "{\"text\":\"caf\\u00e9 \\ud83d\\ude00\"}\n" /* 4 */
                     "{\"text\":\"a\\u0000b\"}\n"                 /* 5 */
                     "{\"text\":\"\"}\n"                          /* 6 empty: skipped */
                     "{\"text\":\"tab\\t\\\"q\\\"\\\\ \\/\"}\n"   /* 7 */
                     "  {\"meta\": {\"text\": 1}, \"text\": \"crlf\"}  \r\n" /* 8 */
                     "{\"text\":\"last\"}";                       /* 9, no newline */
    const char *want[] = {"hello\nworld", "caf\xc3\xa9 \xf0\x9f\x98\x80", "a\0b", "tab\t\"q\"\\ /",
                          "crlf", "last"};
    const size_t wlen[] = {11, 10, 3, 10, 4, 4};
    const size_t wline[] = {1, 4, 5, 7, 8, 9};
    write_str(P("a.jsonl"), jl);
    Docs d = read_docs(P("a.jsonl"), TEXT_AUTO, SPLIT_FILE, NULL, NULL);
    docs_eq("jsonl", &d, want, wlen, 6);
    int lines_ok = d.n == 6;
    for (size_t i = 0; i < 6 && i < d.n; i++) lines_ok &= d.line[i] == wline[i];
    CHECK(lines_ok, "jsonl: documents on lines %zu %zu %zu %zu %zu %zu, want 1 4 5 7 8 9",
          d.n > 0 ? d.line[0] : 0, d.n > 1 ? d.line[1] : 0, d.n > 2 ? d.line[2] : 0,
          d.n > 3 ? d.line[3] : 0, d.n > 4 ? d.line[4] : 0, d.n > 5 ? d.line[5] : 0);
    CHECK(d.bytes_read == strlen(jl), "jsonl bytes_read %llu", (unsigned long long)d.bytes_read);
    docs_free(&d);

    /* format by extension: the same bytes as .txt are lines of text */
    write_str(P("a.txt"), jl);
    d = read_docs(P("a.txt"), TEXT_AUTO, SPLIT_LINE, NULL, NULL);
    CHECK(d.rc == 0 && d.n == 8 && d.len[0] == 33 && !memcmp(d.p[0], "{\"text\": \"hello", 15),
          "auto: .txt read as text lines (%zu docs)", d.n);
    docs_free(&d);
    d = read_docs(P("a.txt"), TEXT_JSONL, SPLIT_FILE, NULL, NULL);
    docs_eq("forced jsonl on a .txt", &d, want, wlen, 6);
    docs_free(&d);
    d = read_docs(P("a.jsonl"), TEXT_PLAIN, SPLIT_FILE, NULL, NULL);
    CHECK(d.rc == 0 && d.n == 1 && d.len[0] == strlen(jl), "forced text on a .jsonl");
    docs_free(&d);

    /* .jsonl.gz: JSONL through zlib */
    gzFile gz = gzopen(P("a.jsonl.gz"), "wb");
    gzwrite(gz, jl, (unsigned)strlen(jl));
    gzclose(gz);
    d = read_docs(P("a.jsonl.gz"), TEXT_AUTO, SPLIT_FILE, NULL, NULL);
    docs_eq("jsonl.gz", &d, want, wlen, 6);
    CHECK(d.bytes_read == strlen(jl), "jsonl.gz bytes_read %llu", (unsigned long long)d.bytes_read);
    docs_free(&d);
    /* a .gz that is not gzip data is read as it is */
    write_str(P("plain.jsonl.gz"), jl);
    d = read_docs(P("plain.jsonl.gz"), TEXT_AUTO, SPLIT_FILE, NULL, NULL);
    docs_eq("plain bytes named .jsonl.gz", &d, want, wlen, 6);
    docs_free(&d);

    /* another field */
    write_str(P("b.jsonl"), "{\"body\":\"x\",\"text\":\"y\"}\n{\"text\":\"z\",\"body\":\"w\"}\n");
    d = read_docs(P("b.jsonl"), TEXT_AUTO, SPLIT_FILE, NULL, "body");
    docs_eq("text_field body", &d, (const char *[]){"x", "w"}, NULL, 2);
    docs_free(&d);

    /* errors name FILE:LINE */
    struct {
        const char *content, *field, *msg;
        size_t good, line;
    } bad[] = {
        {"{\"text\":\"ok\"}\n\n{\"text\": \"abc\"\n{\"text\":\"never\"}\n", NULL, "not valid JSON", 1, 3},
        {"{\"text\":\"ok\"}\n{\"other\":\"x\"}\n", NULL, "no \"text\" field", 1, 2},
        {"{\"body\":\"x\"}\n{\"text\":\"y\"}\n", "body", "no \"body\" field", 1, 2},
        {"{\"text\": 5}\n", NULL, "expected a string", 0, 1},
        {"{\"text\": null}\n", NULL, "expected a string", 0, 1},
        {"{\"text\": [\"a\"]}\n", NULL, "expected a string", 0, 1},
        {"\n\n[\"text\", \"x\"]\n", NULL, "array", 0, 3},
        /* json-c's strict mode reports trailing text itself */
        {"{\"text\":\"a\"} x\n", NULL, "JSON", 0, 1},
        {"{\"text\":\"a\"}{\"text\":\"b\"}\n", NULL, "JSON", 0, 1},
        {"{\"text\":\"a\"}\r\n{\"text\":\"b\"} ,\r\n", NULL, "JSON", 1, 2},
        {"{\"text\":\"a\",}\n", NULL, "not valid JSON", 0, 1},
        {"{'text':'a'}\n", NULL, "not valid JSON", 0, 1},
        {"{\"text\":\"a\"}\n42\n", NULL, "a JSON int, expected an object", 1, 2},
        {"{\"text\":\"bad \\x escape\"}\n", NULL, "not valid JSON", 0, 1},
        {"{\"text\":\"unterminated}\n{\"text\":\"b\"}\n", NULL, "", 0, 1},
        {"\"just a string\"\n", NULL, "expected an object", 0, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_str(P("bad.jsonl"), bad[i].content);
        d = read_docs(P("bad.jsonl"), TEXT_AUTO, SPLIT_FILE, NULL, bad[i].field);
        char where[600];
        snprintf(where, sizeof where, "%s:%zu:", P("bad.jsonl"), bad[i].line);
        CHECK(d.rc == -1 && d.n == bad[i].good && has(err, where) && has(err, bad[i].msg),
              "bad jsonl %zu: rc %d, %zu docs, err \"%s\" (want \"%s\" and \"%s\")", i, d.rc, d.n,
              err, where, bad[i].msg);
        docs_free(&d);
    }

    /* a long JSONL line across the read buffer */
    {
        size_t n = 2 * MIB + 5;
        uint8_t *s = pattern(n, 4);
        FILE *f = fopen(P("long.jsonl"), "wb");
        fputs("{\"text\":\"", f);
        fwrite(s, 1, n, f);
        fputs("\"}\n{\"text\":\"short\"}\n", f);
        fclose(f);
        d = read_docs(P("long.jsonl"), TEXT_AUTO, SPLIT_FILE, NULL, NULL);
        docs_eq("jsonl: 2 MiB string", &d, (const char *[]){(char *)s, "short"},
                (size_t[]){n, 5}, 2);
        docs_free(&d);
        free(s);
    }
}

static void test_gzip(void) {
    const char *text = "alpha\n\nbeta gamma\n\n\ndelta\n";
    write_str(P("p.txt"), text);
    gzFile gz = gzopen(P("p.txt.gz"), "wb");
    gzwrite(gz, text, (unsigned)strlen(text));
    gzclose(gz);
    Docs a = read_docs(P("p.txt"), TEXT_AUTO, SPLIT_PARA, NULL, NULL);
    Docs b = read_docs(P("p.txt.gz"), TEXT_AUTO, SPLIT_PARA, NULL, NULL);
    const char *want[] = {"alpha", "beta gamma", "delta"};
    docs_eq("para plain", &a, want, NULL, 3);
    docs_eq("para gzip", &b, want, NULL, 3);
    CHECK(b.bytes_read == strlen(text), "gzip bytes_read %llu", (unsigned long long)b.bytes_read);
    docs_free(&a);
    docs_free(&b);

    /* truncated gzip: an error naming the file, never a silent short read */
    size_t n = 300000;
    uint8_t *s = pattern(n, 11);
    for (size_t i = 0; i < n; i += 97) s[i] = '\n';
    gz = gzopen(P("t.txt.gz"), "wb");
    gzwrite(gz, s, (unsigned)n);
    gzclose(gz);
    size_t gn;
    unsigned char *g = read_all(P("t.txt.gz"), &gn);
    Docs full = read_docs(P("t.txt.gz"), TEXT_AUTO, SPLIT_LINE, NULL, NULL);
    CHECK(full.rc == 0 && full.bytes_read == n, "complete gzip reads (%d, %llu): %s", full.rc,
          (unsigned long long)full.bytes_read, err);
    docs_free(&full);
    const size_t cut[] = {gn / 2, gn - 8, gn - 1, 11};
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        write_bytes(P("t.txt.gz"), g, cut[i]);
        Docs d = read_docs(P("t.txt.gz"), TEXT_AUTO, SPLIT_LINE, NULL, NULL);
        CHECK(d.rc == -1 && has(err, P("t.txt.gz")),
              "gzip cut to %zu of %zu bytes: rc %d after %zu docs, err \"%s\"", cut[i], gn, d.rc,
              d.n, err);
        docs_free(&d);
    }
    free(g);
    free(s);

    /* a missing file */
    Docs d = read_docs(P("missing.txt"), TEXT_AUTO, SPLIT_LINE, NULL, NULL);
    CHECK(d.rc == -2 && has(err, P("missing.txt")), "missing file: %s", err);
    docs_free(&d);
}

int main(void) {
    check_name = "test_textsrc";
    if (make_tmpdir("textsrc")) return 1;
    test_expand();
    test_split_small();
    test_split_big();
    test_jsonl();
    test_gzip();
    rm_rf(tmpdir);
    return check_finish();
}
