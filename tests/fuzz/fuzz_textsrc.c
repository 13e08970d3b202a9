/* Documents from a text source (docreader_open/next: what `sgtok` reads).
 *
 * The first input byte chooses the reading: bits 0-1 the split (file,
 * line, para, sep), bit 2 JSONL, bit 3 the rest gzip-compressed first; with
 * sep, the second byte is the separator's length (1-8) and its bytes
 * follow.  The rest is the file.
 *
 * Property: plain text splits into exactly the documents the split's
 * documented rule gives, computed here on the whole text at once (the
 * reader works through a buffer that it refills), compressed or not.
 * JSONL must read or fail with a message naming the line. */
#include "fuzz.h"

#include <zlib.h>

#include "textsrc.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} Piece;

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* textsrc.h's rule for SPLIT, on the whole text */
static size_t reference(const uint8_t *t, size_t n, SplitMode split, const char *sep, Piece *out) {
    size_t k = 0, seplen = sep ? strlen(sep) : 0;
    if (split == SPLIT_FILE) {
        if (n) out[k++] = (Piece){t, n};
        return k;
    }
    size_t beg = 0;
    while (beg <= n) {
        size_t end = n, next = n + 1;
        for (size_t i = beg; i < n; i++) {
            if (split == SPLIT_LINE && t[i] == '\n') {
                end = i, next = i + 1;
                break;
            }
            if (split == SPLIT_PARA && i + 1 < n && t[i] == '\n' && t[i + 1] == '\n') {
                end = i, next = i + 2;
                break;
            }
            if (split == SPLIT_SEP && i + seplen <= n && !memcmp(t + i, sep, seplen)) {
                end = i, next = i + seplen;
                break;
            }
        }
        const uint8_t *s = t + beg;
        size_t len = end - beg;
        if (split == SPLIT_LINE && len && s[len - 1] == '\r') len--;
        if (split == SPLIT_PARA) {
            while (len && s[0] == '\n') s++, len--;
            while (len && s[len - 1] == '\n') len--;
        }
        if (split == SPLIT_SEP) {
            while (len && is_ws(s[0])) s++, len--;
            while (len && is_ws(s[len - 1])) len--;
        }
        if (len) out[k++] = (Piece){s, len};
        beg = next;
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const SplitMode splits[] = {SPLIT_FILE, SPLIT_LINE, SPLIT_PARA, SPLIT_SEP};
    TextOpts o = {.format = data[0] & 4 ? TEXT_JSONL : TEXT_PLAIN, .split = splits[data[0] & 3]};
    int gz = data[0] & 8;
    char sep[9] = "";
    size_t at = 1;
    if (o.split == SPLIT_SEP) {
        if (size < 2) return 0;
        size_t k = 1 + data[1] % 8;
        if (size < 2 + k || memchr(data + 2, 0, k)) return 0;
        memcpy(sep, data + 2, k);
        sep[k] = 0;
        o.sep = sep;
        at = 2 + k;
    }
    const uint8_t *text = data + at;
    size_t n = size - at;

    const char *dir = fuzz_scratch();
    char path[512];
    snprintf(path, sizeof path, "%s/in.txt%s", dir, gz ? ".gz" : "");
    if (gz) {
        gzFile g = gzopen(path, "wb");
        FUZZ_REQUIRE(g && (n == 0 || gzwrite(g, text, (unsigned)n) == (int)n) && gzclose(g) == Z_OK,
                     "gzip");
    } else {
        fuzz_file(dir, "in.txt", text, n);
    }
    DocReader r;
    char err[4096] = "";
    FUZZ_REQUIRE(!docreader_open(&r, path, &o, err, sizeof err), "open: %s", err);
    Piece *want = malloc((n + 1) * sizeof *want);
    size_t nwant = o.format == TEXT_PLAIN ? reference(text, n, o.split, o.sep, want) : 0, got = 0;
    const uint8_t *p;
    size_t len;
    int rc;
    while ((rc = docreader_next(&r, &p, &len, err, sizeof err)) == 1) {
        FUZZ_REQUIRE(len > 0, "an empty document");
        if (o.format == TEXT_PLAIN) {
            FUZZ_REQUIRE(got < nwant, "more documents than the rule gives (%zu)", nwant);
            FUZZ_REQUIRE(len == want[got].n && !memcmp(p, want[got].p, len),
                         "document %zu differs from the rule's", got);
        }
        got++;
    }
    if (o.format == TEXT_PLAIN) {
        FUZZ_REQUIRE(rc == 0, "plain text failed: %s", err);
        FUZZ_REQUIRE(got == nwant, "%zu documents, the rule gives %zu", got, nwant);
    } else if (rc < 0) {
        FUZZ_REQUIRE(strstr(err, "in.txt") && strchr(err, ':'), "a JSONL error that names no line: %s", err);
    }
    docreader_close(&r);
    free(want);
    return 0;
}
