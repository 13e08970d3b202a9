/* Loading a BPE vocabulary (tiktoken's format, or GPT-2's encoder.json +
 * vocab.bpe), its identity hash, the rank table, and decoding. */
#include <errno.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

#include "errmsg.h"
#include "tok_internal.h"

int tokvec_push(TokVec *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t c = v->cap ? 2 * v->cap : 1024;
        uint32_t *p = realloc(v->v, c * sizeof *p);
        if (!p) return -1;
        v->v = p;
        v->cap = c;
    }
    v->v[v->n++] = x;
    return 0;
}
void tokvec_free(TokVec *v) {
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}
int bytebuf_append(ByteBuf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) return -1;
        b->p = q;
        b->cap = c;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}
void bytebuf_free(ByteBuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void tok_free(Tokenizer *t) {
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->slots);
    free(t->pair_rank);
    if (t->re) pcre2_code_free(t->re);
    free(t);
}

uint32_t tok_vocab_size(const Tokenizer *t) { return t->vocab_size; }
uint32_t tok_eot(const Tokenizer *t) { return t->n_ranks; }
const uint8_t *tok_sha256(const Tokenizer *t) { return t->sha; }
void tok_sha256_hex(const Tokenizer *t, char hex[65]) {
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", t->sha[i]);
}

int64_t tok_rank(const Tokenizer *t, const uint8_t *p, size_t n) {
    if (n == 1) return t->byte_rank[p[0]];
    return tok_rank_h(t, p, n, tok_hash(p, n));
}

const uint8_t *tok_token_bytes(const Tokenizer *t, uint32_t id, size_t *len) {
    if (id >= t->vocab_size) return NULL;
    *len = t->off[id + 1] - t->off[id];
    return t->pool + t->off[id];
}

int tok_decode(const Tokenizer *t, const uint32_t *ids, size_t n, ByteBuf *out, char *err,
               size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->vocab_size)
            return sg_fail(err, errlen, "token %zu is %u, outside the vocabulary (size %u)", i,
                           ids[i], t->vocab_size);
        uint32_t o = t->off[ids[i]];
        if (bytebuf_append(out, t->pool + o, t->off[ids[i] + 1] - o))
            return sg_fail(err, errlen, "out of memory decoding %zu tokens", n);
    }
    return 0;
}

/* Token bytes arrive in rank order as (bytes, rank) pairs; a Builder checks
 * them and lays out pool/off. */
typedef struct {
    uint8_t **bytes;
    uint32_t *len;
    uint32_t n; /* ranks 0 .. n-1 */
} Entries;

static void entries_free(Entries *e) {
    if (e->bytes)
        for (uint32_t i = 0; i < e->n; i++) free(e->bytes[i]);
    free(e->bytes);
    free(e->len);
}

/* Fill t from entries: every rank present, every single byte a token, no
 * byte string twice.  SRC names the file for messages. */
static int build(Tokenizer *t, const Entries *e, const char *src, char *err, size_t errlen) {
    size_t total = 0;
    for (uint32_t r = 0; r < e->n; r++) {
        if (!e->bytes[r])
            return sg_fail(err, errlen, "%s: rank %u is missing (ranks must be 0..%u, each once)",
                           src, r, e->n - 1);
        total += e->len[r];
    }
    t->n_ranks = e->n;
    t->vocab_size = e->n + 1;
    size_t eotn = strlen(TOK_EOT_TEXT);
    t->pool = malloc(total + eotn);
    t->off = malloc((t->vocab_size + 1) * sizeof *t->off);
    uint64_t cap = 1024;
    while (cap < 4ull * e->n) cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    t->pair_rank = malloc(65536 * sizeof *t->pair_rank);
    if (!t->pool || !t->off || !t->slots || !t->pair_rank) return sg_fail(err, errlen, "out of memory");
    memset(t->pair_rank, 0xff, 65536 * sizeof *t->pair_rank);
    size_t o = 0;
    for (uint32_t r = 0; r < e->n; r++) {
        t->off[r] = (uint32_t)o;
        memcpy(t->pool + o, e->bytes[r], e->len[r]);
        o += e->len[r];
    }
    t->off[e->n] = (uint32_t)o;
    memcpy(t->pool + o, TOK_EOT_TEXT, eotn);
    t->off[e->n + 1] = (uint32_t)(o + eotn);
    for (int b = 0; b < 256; b++) t->byte_rank[b] = UINT32_MAX;
    for (uint32_t r = 0; r < e->n; r++) {
        const uint8_t *p = t->pool + t->off[r];
        size_t n = e->len[r];
        if (tok_rank_h(t, p, n, tok_hash(p, n)) >= 0)
            return sg_fail(err, errlen, "%s: ranks %lld and %u are the same byte string", src,
                           (long long)tok_rank_h(t, p, n, tok_hash(p, n)), r);
        uint64_t h = tok_hash(p, n);
        uint64_t i = h & t->mask;
        while (t->slots[i]) i = (i + 1) & t->mask;
        t->slots[i] = tok_tag(h) | (r + 1);
        if (n == 1) t->byte_rank[p[0]] = r;
        if (n == 2) t->pair_rank[p[0] << 8 | p[1]] = r;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_rank[b] == UINT32_MAX)
            return sg_fail(err, errlen,
                           "%s: byte 0x%02x is not a token; a byte-level vocabulary must hold all "
                           "256 single bytes",
                           src, b);
    /* Identity: the vocabulary written in tiktoken's format, hashed. */
    size_t cap_txt = 4 * (total / 3 + e->n) + 16 * (size_t)e->n + 16, m = 0;
    unsigned char *txt = malloc(cap_txt);
    if (!txt) return sg_fail(err, errlen, "out of memory");
    for (uint32_t r = 0; r < e->n; r++) {
        m += (size_t)EVP_EncodeBlock(txt + m, t->pool + t->off[r], (int)e->len[r]);
        m += (size_t)sprintf((char *)txt + m, " %u\n", r);
    }
    unsigned int mdlen = 0;
    int ok = EVP_Digest(txt, m, t->sha, &mdlen, EVP_sha256(), NULL);
    free(txt);
    if (!ok || mdlen != 32) return sg_fail(err, errlen, "SHA-256 failed (OpenSSL)");
    return tok_compile_pattern(t, err, errlen);
}

static char *read_all(const char *path, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sg_fail(err, errlen, "%s: cannot open the vocabulary: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) break;
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf || rerr) {
        free(buf);
        sg_fail(err, errlen, "%s: cannot read the vocabulary: %s", path,
                rerr ? "read error" : "out of memory");
        return NULL;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

static int entries_put(Entries *e, uint32_t rank, const uint8_t *p, size_t n, const char *src,
                       size_t line, char *err, size_t errlen) {
    if (rank >= e->n)
        return sg_fail(err, errlen, "%s:%zu: rank %u is beyond the %u entries of the file", src,
                       line, rank, e->n);
    if (e->bytes[rank])
        return sg_fail(err, errlen, "%s:%zu: rank %u appears twice", src, line, rank);
    if (n == 0) return sg_fail(err, errlen, "%s:%zu: an empty token", src, line);
    e->bytes[rank] = malloc(n);
    if (!e->bytes[rank]) return sg_fail(err, errlen, "out of memory");
    memcpy(e->bytes[rank], p, n);
    e->len[rank] = (uint32_t)n;
    return 0;
}

static int entries_alloc(Entries *e, size_t n, char *err, size_t errlen) {
    if (n == 0 || n > TOK_MAX_RANKS)
        return sg_fail(err, errlen, "a vocabulary of %zu tokens (this build reads up to %u)", n, TOK_MAX_RANKS);
    e->n = (uint32_t)n;
    e->bytes = calloc(n, sizeof *e->bytes);
    e->len = calloc(n, sizeof *e->len);
    return e->bytes && e->len ? 0 : sg_fail(err, errlen, "out of memory");
}

Tokenizer *tok_load_tiktoken(const char *path, char *err, size_t errlen) {
    size_t n;
    char *buf = read_all(path, &n, err, errlen);
    if (!buf) return NULL;
    Tokenizer *t = calloc(1, sizeof *t);
    Entries e = {0};
    size_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    if (n && buf[n - 1] != '\n') lines++;
    int rc = -1;
    if (!t) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    if (lines == 0) {
        sg_fail(err, errlen, "%s: the vocabulary file is empty", path);
        goto out;
    }
    if (entries_alloc(&e, lines, err, errlen)) goto out;
    uint8_t tokbuf[1024];
    char *p = buf, *end = buf + n;
    for (size_t line = 1; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        char *sp = memchr(p, ' ', (size_t)(le - p));
        char *rank_end = NULL;
        unsigned long long rank = 0;
        if (sp) {
            errno = 0;
            rank = strtoull(sp + 1, &rank_end, 10);
        }
        size_t b64n = sp ? (size_t)(sp - p) : 0;
        if (!sp || rank_end != le || sp + 1 == le || sp[1] < '0' || sp[1] > '9' || errno ||
            rank >= UINT32_MAX / 2 || b64n == 0 || b64n % 4 ||
            b64n / 4 * 3 > sizeof tokbuf) {
            sg_fail(err, errlen,
                    "%s:%zu: expected \"BASE64 RANK\" (tiktoken's vocabulary format); the file "
                    "is corrupt or not a .tiktoken vocabulary",
                    path, line);
            goto out;
        }
        int dn = EVP_DecodeBlock(tokbuf, (const unsigned char *)p, (int)b64n);
        if (dn < 0) {
            sg_fail(err, errlen, "%s:%zu: invalid base64 token \"%.*s\"", path, line,
                    (int)(b64n > 40 ? 40 : b64n), p);
            goto out;
        }
        /* EVP_DecodeBlock counts the padding as zero bytes. */
        dn -= (p[b64n - 1] == '=') + (p[b64n - 2] == '=');
        if (entries_put(&e, (uint32_t)rank, tokbuf, (size_t)dn, path, line, err, errlen))
            goto out;
        p = le + (nl != NULL);
    }
    rc = build(t, &e, path, err, errlen);
out:
    entries_free(&e);
    free(buf);
    if (rc) {
        tok_free(t);
        return NULL;
    }
    return t;
}

/* GPT-2's byte-to-unicode map: bytes that are printable (and not space)
 * stand for themselves, the other 68 become code points 256, 257, ... in
 * byte order.  The single-byte tokens take ranks in the same order:
 * printable bytes first, then the rest. */
static void gpt2_byte_maps(uint32_t cp_of_byte[256], uint8_t rank_to_byte[256]) {
    int n = 0, k = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        if (printable) {
            cp_of_byte[b] = (uint32_t)b;
            rank_to_byte[k++] = (uint8_t)b;
        }
    }
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        if (!printable) {
            cp_of_byte[b] = 256u + (uint32_t)n++;
            rank_to_byte[k++] = (uint8_t)b;
        }
    }
}

/* Decode a GPT-2 token string (UTF-8 of mapped code points) into bytes.
 * Returns the byte count, or -1 if a character is not in the map. */
static long gpt2_unmap(const char *s, size_t n, const int byte_of_cp[324], uint8_t *out,
                       size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xe0) == 0xc0 && i + 1 < n) {
            cp = (c & 0x1fu) << 6 | ((unsigned char)s[i + 1] & 0x3fu);
            i += 2;
        } else
            return -1;
        if (cp >= 324 || byte_of_cp[cp] < 0 || o >= cap) return -1;
        out[o++] = (uint8_t)byte_of_cp[cp];
    }
    return (long)o;
}

Tokenizer *tok_load_gpt2_files(const char *encoder_json, const char *vocab_bpe, char *err,
                               size_t errlen) {
    uint32_t cp_of_byte[256];
    uint8_t rank_to_byte[256];
    int byte_of_cp[324];
    gpt2_byte_maps(cp_of_byte, rank_to_byte);
    for (int i = 0; i < 324; i++) byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of_byte[b]] = b;

    Tokenizer *t = calloc(1, sizeof *t);
    Entries e = {0};
    char *bpe = NULL;
    json_object *root = NULL;
    int rc = -1;
    uint8_t tb[1024], tb2[1024];
    if (!t) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    size_t bn;
    bpe = read_all(vocab_bpe, &bn, err, errlen);
    if (!bpe) goto out;
    root = json_object_from_file(encoder_json);
    if (!root || !json_object_is_type(root, json_type_object)) {
        sg_fail(err, errlen, "%s: not a JSON object of token -> id (%s)", encoder_json,
                root ? "wrong type" : json_util_get_last_err());
        goto out;
    }
    int64_t eot = -1;
    size_t n_ord = 0;
    json_object_object_foreach(root, key, val) {
        if (!json_object_is_type(val, json_type_int)) {
            sg_fail(err, errlen, "%s: the id of \"%.40s\" is not an integer", encoder_json, key);
            goto out;
        }
        if (key[0] == '<' && key[1] == '|') {
            if (!strcmp(key, TOK_EOT_TEXT)) eot = json_object_get_int64(val);
            continue;
        }
        n_ord++;
    }
    if (entries_alloc(&e, n_ord, err, errlen)) goto out;
    json_object_object_foreach(root, key2, val2) {
        if (key2[0] == '<' && key2[1] == '|') continue;
        int64_t id = json_object_get_int64(val2);
        long m = gpt2_unmap(key2, strlen(key2), byte_of_cp, tb, sizeof tb);
        if (m <= 0 || id < 0) {
            sg_fail(err, errlen, "%s: token \"%.40s\" (id %lld) is not in GPT-2's byte encoding",
                    encoder_json, key2, (long long)id);
            goto out;
        }
        if (entries_put(&e, (uint32_t)(id > UINT32_MAX ? UINT32_MAX : id), tb, (size_t)m,
                        encoder_json, 0, err, errlen))
            goto out;
    }
    if (eot != (int64_t)n_ord) {
        sg_fail(err, errlen, "%s: <|endoftext|> has id %lld, expected %zu (after the ordinary tokens)",
                encoder_json, (long long)eot, n_ord);
        goto out;
    }
    for (int r = 0; r < 256 && (size_t)r < e.n; r++)
        if (!e.bytes[r] || e.len[r] != 1 || e.bytes[r][0] != rank_to_byte[r]) {
            sg_fail(err, errlen, "%s: id %d should be the single byte 0x%02x (GPT-2's byte order)",
                    encoder_json, r, rank_to_byte[r]);
            goto out;
        }
    /* vocab.bpe: "#version" line, then merge i = "A B" makes token 256 + i. */
    size_t merges = 0, line = 0;
    for (char *p = bpe, *end = bpe + bn; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        line++;
        size_t len = (size_t)(le - p);
        if (len && p[len - 1] == '\r') len--;
        if (line == 1 && len >= 8 && !memcmp(p, "#version", 8)) goto next;
        if (len == 0) goto next;
        char *sp = memchr(p, ' ', len);
        long a = sp ? gpt2_unmap(p, (size_t)(sp - p), byte_of_cp, tb, sizeof tb) : -1;
        long b = sp ? gpt2_unmap(sp + 1, len - (size_t)(sp - p) - 1, byte_of_cp, tb2, sizeof tb2)
                    : -1;
        uint32_t id = 256 + (uint32_t)merges;
        if (a <= 0 || b <= 0 || (size_t)(a + b) > sizeof tb) {
            sg_fail(err, errlen, "%s:%zu: expected a merge \"A B\" in GPT-2's byte encoding",
                    vocab_bpe, line);
            goto out;
        }
        memcpy(tb + a, tb2, (size_t)b);
        if (id >= e.n || !e.bytes[id] || e.len[id] != (uint32_t)(a + b) ||
            memcmp(e.bytes[id], tb, (size_t)(a + b))) {
            sg_fail(err, errlen,
                    "%s:%zu: merge %zu does not make token %u of %s; the two files are not one "
                    "vocabulary",
                    vocab_bpe, line, merges, id, encoder_json);
            goto out;
        }
        merges++;
    next:
        p = le + (nl != NULL);
    }
    if (256 + merges != e.n) {
        sg_fail(err, errlen, "%s: %zu merges, but %s has %u tokens (expected 256 + merges)",
                vocab_bpe, merges, encoder_json, e.n);
        goto out;
    }
    rc = build(t, &e, encoder_json, err, errlen);
out:
    if (root) json_object_put(root);
    free(bpe);
    entries_free(&e);
    if (rc) {
        tok_free(t);
        return NULL;
    }
    return t;
}

/* The identity of a Hugging Face tokenizer.json's byte-level BPE vocabulary
 * (tokenizer.h).  id_to_token as the tokenizers library answers it: an added
 * token's content, else the model's vocabulary entry. */
int tok_hf_vocab_sha256(const char *path, int max_ids, char hex[65], char *err, size_t errlen) {
    uint32_t cp_of_byte[256];
    uint8_t rank_to_byte[256], tb[1024];
    int byte_of_cp[324];
    gpt2_byte_maps(cp_of_byte, rank_to_byte);
    for (int i = 0; i < 324; i++) byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of_byte[b]] = b;
    json_object *root = json_object_from_file(path), *model, *vocab, *type, *added = NULL;
    const char **str = NULL;
    unsigned char *is_added = NULL, *txt = NULL;
    int rc = -1;
    if (!root || !json_object_is_type(root, json_type_object)) {
        sg_fail(err, errlen, "%s: not a JSON object (%s)", path, root ? "wrong type" : json_util_get_last_err());
        goto out;
    }
    if (!json_object_object_get_ex(root, "model", &model) || !json_object_is_type(model, json_type_object) ||
        !json_object_object_get_ex(model, "vocab", &vocab) || !json_object_is_type(vocab, json_type_object)) {
        sg_fail(err, errlen, "%s: no \"model\" with a \"vocab\" object: not a Hugging Face tokenizer.json", path);
        goto out;
    }
    if (!json_object_object_get_ex(model, "type", &type) || !json_object_is_type(type, json_type_string) ||
        strcmp(json_object_get_string(type), "BPE")) {
        sg_fail(err, errlen, "%s: its model is not BPE: only byte-level BPE vocabularies have a byte form", path);
        goto out;
    }
    if (json_object_object_get_ex(root, "added_tokens", &added) && !json_object_is_type(added, json_type_array))
        added = NULL;
    /* ids: the vocabulary's and the added tokens', each below max_ids */
    int n = 0;
    json_object_object_foreach(vocab, k0, v0) {
        (void)k0;
        int64_t id = json_object_is_type(v0, json_type_int) ? json_object_get_int64(v0) : -1;
        if (id < 0 || id >= max_ids) {
            sg_fail(err, errlen, "%s: token \"%.40s\" has id %s, outside the model's %d", path, k0,
                    json_object_get_string(v0), max_ids);
            goto out;
        }
        if (id + 1 > n) n = (int)id + 1;
    }
    const size_t na = added ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < na; i++) {
        json_object *a = json_object_array_get_idx(added, i), *id, *content;
        if (!json_object_object_get_ex(a, "id", &id) || !json_object_is_type(id, json_type_int) ||
            !json_object_object_get_ex(a, "content", &content) || !json_object_is_type(content, json_type_string) ||
            json_object_get_int64(id) < 0 || json_object_get_int64(id) >= max_ids) {
            sg_fail(err, errlen, "%s: added token %zu has no id below %d or no content", path, i, max_ids);
            goto out;
        }
        if (json_object_get_int64(id) + 1 > n) n = (int)json_object_get_int64(id) + 1;
    }
    str = calloc((size_t)n + 1, sizeof *str);
    is_added = calloc((size_t)n + 1, 1); /* 1 added, 2 added and special */
    if (!str || !is_added) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    json_object_object_foreach(vocab, k1, v1) str[json_object_get_int64(v1)] = k1;
    for (size_t i = 0; i < na; i++) {
        json_object *a = json_object_array_get_idx(added, i), *id, *content, *special;
        json_object_object_get_ex(a, "id", &id);
        json_object_object_get_ex(a, "content", &content);
        const int64_t k = json_object_get_int64(id);
        str[k] = json_object_get_string(content);
        is_added[k] = json_object_object_get_ex(a, "special", &special) && json_object_get_boolean(special) ? 2 : 1;
    }
    size_t cap = 64 * (size_t)n + 64, m = 0;
    if (!(txt = malloc(cap))) {
        sg_fail(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (!str[i] || is_added[i] == 2) continue;
        const size_t sn = strlen(str[i]);
        long b = gpt2_unmap(str[i], sn, byte_of_cp, tb, sizeof tb);
        const uint8_t *bytes = tb;
        if (b < 0 && is_added[i] && sn <= sizeof tb) { /* an added token's text is its UTF-8 */
            bytes = (const uint8_t *)str[i];
            b = (long)sn;
        }
        if (b < 0) {
            sg_fail(err, errlen, "%s: token %d (\"%.40s\") is outside GPT-2's byte-to-unicode alphabet: not a "
                    "byte-level BPE vocabulary", path, i, str[i]);
            goto out;
        }
        if (m + 4 * ((size_t)b / 3 + 1) + 16 > cap) {
            unsigned char *g = realloc(txt, cap *= 2);
            if (!g) {
                sg_fail(err, errlen, "out of memory");
                goto out;
            }
            txt = g;
        }
        m += (size_t)EVP_EncodeBlock(txt + m, bytes, (int)b);
        m += (size_t)sprintf((char *)txt + m, " %d\n", i);
    }
    uint8_t sha[32];
    unsigned int mdlen = 0;
    if (!EVP_Digest(txt, m, sha, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
        sg_fail(err, errlen, "SHA-256 failed (OpenSSL)");
        goto out;
    }
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", sha[i]);
    rc = 0;
out:
    json_object_put(root);
    free(str);
    free(is_added);
    free(txt);
    return rc;
}
