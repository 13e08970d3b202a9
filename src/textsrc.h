/* Text sources for tokenization: the files named by a list of paths,
 * directories and globs, and the documents inside each file.
 *
 * Formats:
 *   text   bytes as they are (any encoding; invalid UTF-8 is kept)
 *   jsonl  one JSON object per line; the document is the string field
 *          named by text_field.  Blank lines are skipped.
 * Files ending in .gz are read through zlib (a file that is not gzip data
 * is read as it is).  Format auto: *.jsonl and *.jsonl.gz are JSONL, the
 * rest text.
 *
 * Documents in a text file (split):
 *   file   the whole file is one document, byte for byte
 *   line   each line; the '\n' (and a '\r' before it) is not part of it
 *   para   blocks separated by one or more empty lines ("\n\n"); the
 *          separating newlines are not part of either block
 *   sep    pieces between occurrences of a literal string (TinyStories'
 *          "<|endoftext|>"), with surrounding ASCII whitespace removed
 * Empty documents are skipped in every mode. */
#ifndef SG_TEXTSRC_H
#define SG_TEXTSRC_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

typedef enum { TEXT_AUTO, TEXT_PLAIN, TEXT_JSONL } TextFormat;
typedef enum { SPLIT_FILE, SPLIT_LINE, SPLIT_PARA, SPLIT_SEP } SplitMode;

typedef struct {
    TextFormat format;
    SplitMode split;
    const char *sep;        /* SPLIT_SEP */
    const char *text_field; /* JSONL */
} TextOpts;

typedef struct {
    char **v;
    size_t n, cap;
} PathList;

/* Expand ARGS into regular files: a file is taken as given, a directory
 * recursively (names starting with '.' skipped; entries in byte order), a
 * glob pattern by glob(3).  A path that does not exist, a pattern that
 * matches nothing, or a file named twice is an error naming it. */
int textsrc_expand(char *const *args, int nargs, PathList *out, char *err, size_t errlen);
void pathlist_free(PathList *l);

typedef struct {
    const char *path;
    gzFile gz;
    int jsonl;
    SplitMode split;
    const char *sep;
    size_t seplen;
    const char *field;
    uint8_t *buf; /* unconsumed input is buf[beg .. end) */
    size_t beg, end, cap;
    int eof;
    size_t line;          /* JSONL: line number of the last document */
    uint64_t bytes_read;  /* decompressed bytes read so far */
    char *doc;            /* JSONL: the decoded string of the last document */
    void *tokener;
} DocReader;

int docreader_open(DocReader *r, const char *path, const TextOpts *o, char *err, size_t errlen);
/* Next document: 1 and (*p, *n) valid until the next call; 0 at the end of
 * the file; -1 on a read error or a malformed JSONL line (the message names
 * the file and line). */
int docreader_next(DocReader *r, const uint8_t **p, size_t *n, char *err, size_t errlen);
/* Compressed bytes consumed (for progress over .gz files). */
uint64_t docreader_offset(DocReader *r);
void docreader_close(DocReader *r);

#endif
