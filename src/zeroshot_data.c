/* The zero-shot tasks' data as token sequences (zeroshot.h; the definitions
 * are docs/zeroshot.md's). */
#include <errno.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "zeroshot.h"

static int sha256_hex(const char *p, size_t n, char hex[65]) {
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) return -1;
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

static int encode(TokEncoder *e, const char *s, size_t n, TokVec *out) {
    out->n = 0;
    return tok_encode(e, (const uint8_t *)s, n, out);
}

static long code_points(const char *s) {
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

/* ---- HellaSwag's text ----------------------------------------------------- */

/* The length in bytes of the UTF-8 white-space character at p[0..n), 0 if
 * there is none: Python's str.isspace, which the harness's str.strip and
 * str.split use (ASCII \t-\r, \x1c-\x1f and space; U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). */
static int py_space(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    if (!n) return 0;
    if (p[0] < 0x80) return p[0] == ' ' || (p[0] >= 0x09 && p[0] <= 0x0d) || (p[0] >= 0x1c && p[0] <= 0x1f);
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) return 3;
    if (p[0] == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) return 3;
    if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) return 3;
    return 0;
}

/* The length of the UTF-8 character at p[0..n) (1 for a stray byte). */
static size_t char_len(const char *s, size_t n) {
    const unsigned char c = (unsigned char)s[0];
    size_t k = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    return k > n ? 1 : k;
}

/* s[a..b) without the white space at either end (str.strip()) */
static void strip(const char *s, size_t *a, size_t *b) {
    size_t i = *a, end = *a;
    int k;
    while (i < *b && (k = py_space(s + i, *b - i))) i += (size_t)k;
    *a = end = i;
    while (i < *b) {
        if ((k = py_space(s + i, *b - i))) i += (size_t)k;
        else i += char_len(s + i, *b - i), end = i;
    }
    *b = end;
}

char *zs_capitalize(const char *s) {
    char *r = strdup(s);
    if (!r) return NULL;
    for (char *p = r; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (p == r && c >= 'a' && c <= 'z') *p = (char)(c - 32);
        else if (p != r && c >= 'A' && c <= 'Z') *p = (char)(c + 32);
    }
    return r;
}

/* lm-evaluation-harness's hellaswag preprocess, step by step:
 *   text.strip(); .replace(" [title]", ". "); re.sub("\\[.*?\\]", "", ...);
 *   .replace("  ", " ")
 * ('.' does not match a newline, so a bracket closed on a later line stays) */
char *zs_hellaswag_preprocess(const char *s) {
    size_t a = 0, n = strlen(s);
    strip(s, &a, &n);
    /* " [title]" -> ". " never lengthens the text */
    char *t = malloc(n - a + 1), *u = NULL;
    if (!t) return NULL;
    size_t k = 0;
    for (size_t i = a; i < n;) {
        if (n - i >= 8 && !memcmp(s + i, " [title]", 8)) {
            t[k++] = '.', t[k++] = ' ';
            i += 8;
        } else t[k++] = s[i++];
    }
    t[k] = 0;
    if (!(u = malloc(k + 1))) goto out;
    size_t m = 0;
    for (size_t i = 0; i < k;) {
        if (t[i] == '[') {
            size_t j = i + 1;
            while (j < k && t[j] != ']' && t[j] != '\n') j++;
            if (j < k && t[j] == ']') {
                i = j + 1;
                continue;
            }
        }
        u[m++] = t[i++];
    }
    u[m] = 0;
    /* "  " -> " ", left to right without overlap, as str.replace */
    k = 0;
    for (size_t i = 0; i < m;) {
        if (u[i] == ' ' && i + 1 < m && u[i + 1] == ' ') {
            t[k++] = ' ';
            i += 2;
        } else t[k++] = u[i++];
    }
    t[k] = 0;
out:
    free(u);
    return t;
}

/* ---- LAMBADA's distance --------------------------------------------------- */

static long last_start(const TokVec *c, const TokVec *p) {
    if (!p->n || p->n > c->n) return -1;
    for (size_t s = c->n - p->n + 1; s-- > 0;)
        if (!memcmp(c->v + s, p->v, p->n * sizeof *p->v)) return (long)s;
    return -1;
}

long zs_lambada_distance(const TokVec *ctx, const TokVec *spaced, const TokVec *bare) {
    long s1 = last_start(ctx, spaced), s2 = last_start(ctx, bare), s = s1 > s2 ? s1 : s2;
    return s < 0 ? -1 : (long)ctx->n - s;
}

/* ---- the files ------------------------------------------------------------ */

static int field_str(json_object *o, const char *k, const char **v) {
    json_object *x;
    if (!json_object_object_get_ex(o, k, &x) || !json_object_is_type(x, json_type_string)) return -1;
    *v = json_object_get_string(x);
    return 0;
}

/* a label 0..3, as an integer or a string holding one */
static int field_label(json_object *o, int *label) {
    json_object *x;
    if (!json_object_object_get_ex(o, "label", &x)) return -1;
    long v;
    if (json_object_is_type(x, json_type_int)) v = (long)json_object_get_int64(x);
    else if (json_object_is_type(x, json_type_string)) {
        const char *s = json_object_get_string(x);
        char *end;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end) return -1;
    } else return -1;
    if (v < 0 || v >= ZS_CHOICES) return -1;
    *label = (int)v;
    return 0;
}

static int lambada_example(ZsExample *e, json_object *o, TokEncoder *enc, const char *path,
                           long line, char *err, size_t errlen) {
    const char *text;
    if (field_str(o, "text", &text)) {
        snprintf(err, errlen, "%s:%ld: expected an object with a string \"text\"", path, line);
        return -1;
    }
    const char *sp = strrchr(text, ' ');
    if (!sp || !sp[1] || sp == text) {
        snprintf(err, errlen, "%s:%ld: %s", path, line,
                 !sp ? "no space: the passage has no context before its target word"
                     : !sp[1] ? "the passage ends in a space, so it has no target word"
                              : "nothing before the target word");
        return -1;
    }
    TokVec bare = {0};
    e->ncont = 1;
    int rc = -1;
    if (encode(enc, text, (size_t)(sp - text), &e->ctx) || encode(enc, sp, strlen(sp), &e->cont[0]) ||
        encode(enc, sp + 1, strlen(sp + 1), &bare)) {
        snprintf(err, errlen, "%s:%ld: out of memory tokenizing", path, line);
        goto out;
    }
    e->distance = zs_lambada_distance(&e->ctx, &e->cont[0], &bare);
    rc = 0;
out:
    tokvec_free(&bare);
    return rc;
}

static int hellaswag_example(ZsExample *e, json_object *o, TokEncoder *enc, const char *path,
                             long line, char *err, size_t errlen) {
    const char *al, *ca, *cb;
    json_object *ends;
    if (field_str(o, "activity_label", &al) || field_str(o, "ctx_a", &ca) || field_str(o, "ctx_b", &cb) ||
        !json_object_object_get_ex(o, "endings", &ends) || !json_object_is_type(ends, json_type_array) ||
        json_object_array_length(ends) != ZS_CHOICES || field_label(o, &e->label)) {
        snprintf(err, errlen, "%s:%ld: expected strings \"activity_label\", \"ctx_a\" and \"ctx_b\", \"endings\" "
                              "(4 strings) and a \"label\" 0..3", path, line);
        return -1;
    }
    for (int k = 0; k < ZS_CHOICES; k++)
        if (!json_object_is_type(json_object_array_get_idx(ends, k), json_type_string)) {
            snprintf(err, errlen, "%s:%ld: ending %d is not a string", path, line, k);
            return -1;
        }
    int rc = -1;
    char *cap = zs_capitalize(cb), *raw = NULL, *query = NULL, *choice = NULL, *spaced = NULL;
    if (!cap) goto oom;
    size_t n = strlen(al) + strlen(ca) + strlen(cap) + 4;
    if (!(raw = malloc(n))) goto oom;
    snprintf(raw, n, "%s: %s %s", al, ca, cap);
    if (!(query = zs_hellaswag_preprocess(raw))) goto oom;
    if (encode(enc, query, strlen(query), &e->ctx)) goto oom;
    e->ncont = ZS_CHOICES;
    for (int k = 0; k < ZS_CHOICES; k++) {
        free(choice), free(spaced);
        spaced = NULL;
        if (!(choice = zs_hellaswag_preprocess(json_object_get_string(json_object_array_get_idx(ends, k))))) goto oom;
        size_t cn = strlen(choice);
        if (!(spaced = malloc(cn + 2))) goto oom;
        spaced[0] = ' ';
        memcpy(spaced + 1, choice, cn + 1);
        e->chars[k] = code_points(choice);
        if (!e->chars[k]) {
            snprintf(err, errlen, "%s:%ld: ending %d is empty after clean-up", path, line, k);
            goto out;
        }
        if (encode(enc, spaced, cn + 1, &e->cont[k])) goto oom;
    }
    if (!e->ctx.n) {
        snprintf(err, errlen, "%s:%ld: the query is empty", path, line);
        goto out;
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "%s:%ld: out of memory", path, line);
out:
    free(cap), free(raw), free(query), free(choice), free(spaced);
    return rc;
}

static int load_jsonl(ZsData *d, ZsTask task, const char *path, char *buf, size_t n, long limit,
                      TokEncoder *enc, char *err, size_t errlen) {
    long line = 0, cap = 0;
    for (size_t i = 0; i < n && (!limit || d->n < limit);) {
        size_t j = i;
        while (j < n && buf[j] != '\n') j++;
        line++;
        size_t a = i, b = j;
        i = j + 1;
        strip(buf, &a, &b);
        if (a == b) continue; /* blank: white space only */
        json_tokener *jt = json_tokener_new();
        if (!jt) {
            snprintf(err, errlen, "%s: out of memory", path);
            return -1;
        }
        json_object *o = json_tokener_parse_ex(jt, buf + a, (int)(b - a));
        int bad = !o || json_tokener_get_error(jt) != json_tokener_success || json_tokener_get_parse_end(jt) != b - a ||
                  !json_object_is_type(o, json_type_object);
        if (bad) {
            snprintf(err, errlen, "%s:%ld: not a JSON object%s%s", path, line, o ? "" : ": ",
                     o ? "" : json_tokener_error_desc(json_tokener_get_error(jt)));
            json_object_put(o);
            json_tokener_free(jt);
            return -1;
        }
        json_tokener_free(jt);
        if (d->n == cap) {
            cap = cap ? 2 * cap : 1024;
            ZsExample *ne = realloc(d->ex, (size_t)cap * sizeof *ne);
            if (!ne) {
                json_object_put(o);
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            d->ex = ne;
        }
        ZsExample *e = &d->ex[d->n++];
        memset(e, 0, sizeof *e);
        e->line = line;
        e->distance = -1;
        int rc = task == ZS_LAMBADA ? lambada_example(e, o, enc, path, line, err, errlen)
                                    : hellaswag_example(e, o, enc, path, line, err, errlen);
        json_object_put(o);
        if (rc) return -1;
    }
    if (!d->n) {
        snprintf(err, errlen, "%s: no examples", path);
        return -1;
    }
    return 0;
}

int zs_load(ZsData *d, ZsTask task, const char *path, long limit, const Tokenizer *tok, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    size_t n;
    char *buf = fs_read_file(path, 0, &n, err, errlen);
    if (!buf) return -1;
    int rc = -1;
    TokEncoder *enc = tok_encoder_new(tok, err, errlen);
    if (!enc) goto out;
    if (sha256_hex(buf, n, d->sha256)) {
        snprintf(err, errlen, "%s: SHA-256 failed", path);
        goto out;
    }
    if (task == ZS_WIKITEXT) {
        if (!n) {
            snprintf(err, errlen, "%s: empty file", path);
            goto out;
        }
        /* the end-of-text token gives the first token its context */
        if (tokvec_push(&d->text, tok_eot(tok)) || tok_encode(enc, (const uint8_t *)buf, n, &d->text)) {
            snprintf(err, errlen, "%s: out of memory tokenizing", path);
            goto out;
        }
        d->bytes = (long)n;
        for (size_t i = 0; i < n;) { /* Python's str.split(): runs of white space separate */
            int k;
            while (i < n && (k = py_space(buf + i, n - i))) i += (size_t)k;
            if (i < n) d->words++;
            while (i < n && !py_space(buf + i, n - i)) i += char_len(buf + i, n - i);
        }
        rc = 0;
    } else rc = load_jsonl(d, task, path, buf, n, limit, enc, err, errlen);
out:
    tok_encoder_free(enc);
    free(buf);
    if (rc) zs_data_free(d);
    return rc;
}

void zs_data_free(ZsData *d) {
    for (long i = 0; i < d->n; i++) {
        tokvec_free(&d->ex[i].ctx);
        for (int k = 0; k < ZS_CHOICES; k++) tokvec_free(&d->ex[i].cont[k]);
    }
    free(d->ex);
    tokvec_free(&d->text);
    memset(d, 0, sizeof *d);
}
