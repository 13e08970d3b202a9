/* Encoding: PCRE2 pre-tokenization, then byte-pair merging per piece
 * (the algorithm and its exactness are stated in tokenizer.h). */
#include <stdlib.h>

#include "errmsg.h"
#include "tok_internal.h"

/* Unicode's White_Space property: what tiktoken's engine means by \s. */
#define WS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Letters and numbers assigned in Unicode 15.0-16.0: tiktoken's engine
 * knows them, Debian 12's PCRE2 (10.42, Unicode 14.0 tables) does not.
 * Listing them keeps the pieces identical (with a newer PCRE2 the union
 * changes nothing).  Derived by tests/tok/unicode_delta.py from tiktoken
 * itself; tests/tok/check_tiktoken.py checks every code point. */
#define TOK_L_EXTRA "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define TOK_N_EXTRA "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"

#define L_CLASS "[\\p{L}" TOK_L_EXTRA "]"
#define N_CLASS "[\\p{N}" TOK_N_EXTRA "]"

static const char GPT2_PATTERN[] =
    "'(?:[sdmt]|ll|ve|re)"
    "| ?" L_CLASS "++"
    "| ?" N_CLASS "++"
    "| ?[^" WS "\\p{L}\\p{N}" TOK_L_EXTRA TOK_N_EXTRA "]++"
    "|[" WS "]++\\z"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]";

int tok_compile_pattern(Tokenizer *t, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE off;
    t->re = pcre2_compile((PCRE2_SPTR)GPT2_PATTERN, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &off, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return sg_fail(err, errlen, "PCRE2 rejects GPT-2's pattern at offset %zu: %s",
                       (size_t)off, (char *)msg);
    }
    /* Without JIT (a PCRE2 built without it) pcre2_match interprets: same
     * pieces, slower. */
    t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

/* A per-encoder cache of pieces that needed merging (most pieces are one
 * token and are found by a single lookup; words that are not repeat). */
typedef struct {
    uint64_t h;
    uint32_t boff, toff;
    uint16_t blen, ntok;
} CacheEnt;

enum { CACHE_SLOTS = 1 << 16, CACHE_MAX_PIECE = 256, BPE_HEAP_MIN = 128 };

struct TokEncoder {
    const Tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    /* merge scratch, grown to the longest piece */
    uint32_t *pos, *rk, *tk, *nx, *pv, *stamp; /* stamp: dead flags in merge_long */
    uint64_t *heap;
    size_t cap;
    CacheEnt *cache;
    uint32_t cache_used;
    uint8_t *cbytes;
    uint32_t *ctoks;
    size_t cb_used, ct_used, cb_cap, ct_cap;
};

TokEncoder *tok_encoder_new(const Tokenizer *t, char *err, size_t errlen) {
    TokEncoder *e = calloc(1, sizeof *e);
    if (!e) {
        sg_fail(err, errlen, "out of memory");
        return NULL;
    }
    e->t = t;
    e->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    e->mctx = pcre2_match_context_create(NULL);
    /* The pattern backtracks only inside a whitespace run; 1 MiB covers
     * runs far longer than any text holds. */
    e->jit = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (e->jit && e->mctx) pcre2_jit_stack_assign(e->mctx, NULL, e->jit);
    e->cache = calloc(CACHE_SLOTS, sizeof *e->cache);
    e->cb_cap = 1 << 20;
    e->ct_cap = 1 << 18;
    e->cbytes = malloc(e->cb_cap);
    e->ctoks = malloc(e->ct_cap * sizeof *e->ctoks);
    if (!e->md || !e->mctx || !e->cache || !e->cbytes || !e->ctoks) {
        tok_encoder_free(e);
        sg_fail(err, errlen, "out of memory");
        return NULL;
    }
    return e;
}

void tok_encoder_free(TokEncoder *e) {
    if (!e) return;
    if (e->md) pcre2_match_data_free(e->md);
    if (e->mctx) pcre2_match_context_free(e->mctx);
    if (e->jit) pcre2_jit_stack_free(e->jit);
    free(e->pos);
    free(e->rk);
    free(e->tk);
    free(e->nx);
    free(e->pv);
    free(e->stamp);
    free(e->heap);
    free(e->cache);
    free(e->cbytes);
    free(e->ctoks);
    free(e);
}

static int grow(TokEncoder *e, size_t n) {
    if (n + 2 <= e->cap) return 0;
    size_t c = e->cap ? e->cap : 256;
    while (c < n + 2) c *= 2;
    uint32_t **arrs[] = {&e->pos, &e->rk, &e->tk, &e->nx, &e->pv, &e->stamp};
    for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++) {
        uint32_t *p = realloc(*arrs[i], c * sizeof **arrs[i]);
        if (!p) return -1;
        *arrs[i] = p;
    }
    uint64_t *h = realloc(e->heap, 4 * c * sizeof *h);
    if (!h) return -1;
    e->heap = h;
    e->cap = c;
    return 0;
}

#define NONE UINT32_MAX

static inline uint32_t rank_of(const Tokenizer *t, const uint8_t *p, size_t n) {
    if (n == 2) return t->pair_rank[p[0] << 8 | p[1]];
    int64_t r = tok_rank_h(t, p, n, tok_hash(p, n));
    return r < 0 ? NONE : (uint32_t)r;
}

/* tiktoken's merge loop on a short piece: segments start at pos[0..m),
 * pos[m] = n; rk[i] is the rank of segments i and i+1 joined; each step
 * joins the lowest rank, leftmost on ties.  O(n^2), fastest for the short
 * pieces text is made of. */
static int merge_small(TokEncoder *e, const uint8_t *p, size_t n, TokVec *out) {
    const Tokenizer *t = e->t;
    uint32_t *pos = e->pos, *rk = e->rk, *tk = e->tk;
    size_t m = n;
    for (size_t i = 0; i <= n; i++) pos[i] = (uint32_t)i;
    for (size_t i = 0; i < n; i++) tk[i] = t->byte_rank[p[i]];
    for (size_t i = 0; i + 1 < n; i++) rk[i] = rank_of(t, p + i, 2);
    rk[n - 1] = NONE;
    for (;;) {
        uint32_t best = NONE;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rk[i] < best) {
                best = rk[i];
                bi = i;
            }
        if (best == NONE) break;
        tk[bi] = best;
        memmove(pos + bi + 1, pos + bi + 2, (m - bi - 1) * sizeof *pos);
        memmove(tk + bi + 1, tk + bi + 2, (m - bi - 2) * sizeof *tk);
        memmove(rk + bi + 1, rk + bi + 2, (m - bi - 2) * sizeof *rk);
        m--;
        rk[bi] = bi + 1 < m ? rank_of(t, p + pos[bi], pos[bi + 2] - pos[bi]) : NONE;
        if (bi > 0) rk[bi - 1] = rank_of(t, p + pos[bi - 1], pos[bi + 1] - pos[bi - 1]);
    }
    for (size_t i = 0; i < m; i++)
        if (tokvec_push(out, tk[i])) return -1;
    return 0;
}

/* Binary min-heap of (rank << 32 | segment start): popping gives the lowest
 * rank, and on ties the lowest start, which is the leftmost pair. */
static void heap_push(uint64_t *h, size_t *n, uint64_t x) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}
static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

/* The same merges in O(n log n) for long pieces (runs of digits, symbols or
 * spaces): segments form a linked list indexed by their first byte, and
 * the heap holds candidate pairs.  An entry (r, i) is stale when segment i
 * was absorbed by its left neighbour, or when i's right neighbour changed
 * since the push; the latter is detected exactly by looking up the rank of
 * i's current pair again, because a rank names one byte string and the
 * pair's string starts at i, so an equal rank means the same pair. */
static int merge_long(TokEncoder *e, const uint8_t *p, size_t n, TokVec *out) {
    const Tokenizer *t = e->t;
    uint32_t *nx = e->nx, *pv = e->pv, *tk = e->tk, *dead = e->stamp;
    uint64_t *h = e->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        nx[i] = (uint32_t)(i + 1);
        pv[i] = i ? (uint32_t)(i - 1) : NONE;
        tk[i] = t->byte_rank[p[i]];
        dead[i] = 0;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = rank_of(t, p + i, 2);
        if (r != NONE) heap_push(h, &hn, (uint64_t)r << 32 | i);
    }
    while (hn) {
        uint64_t top = heap_pop(h, &hn);
        uint32_t r = (uint32_t)(top >> 32), i = (uint32_t)top;
        if (dead[i] || nx[i] >= n) continue;
        uint32_t j = nx[i], end = nx[j];
        if (rank_of(t, p + i, end - i) != r) continue;
        tk[i] = r;
        nx[i] = end;
        if (end < n) pv[end] = i;
        dead[j] = 1;
        if (end < n) {
            uint32_t r2 = rank_of(t, p + i, nx[end] - i);
            if (r2 != NONE) heap_push(h, &hn, (uint64_t)r2 << 32 | i);
        }
        if (pv[i] != NONE) {
            uint32_t q = pv[i];
            uint32_t r3 = rank_of(t, p + q, end - q);
            if (r3 != NONE) heap_push(h, &hn, (uint64_t)r3 << 32 | q);
        }
    }
    for (uint32_t i = 0; i < n; i = nx[i])
        if (tokvec_push(out, tk[i])) return -1;
    return 0;
}

static void cache_reset(TokEncoder *e) {
    memset(e->cache, 0, CACHE_SLOTS * sizeof *e->cache);
    e->cache_used = 0;
    e->cb_used = e->ct_used = 0;
}

static int piece(TokEncoder *e, const uint8_t *p, size_t n, TokVec *out) {
    const Tokenizer *t = e->t;
    if (n == 1) return tokvec_push(out, t->byte_rank[p[0]]);
    if (n == 2) {
        uint32_t r2 = t->pair_rank[p[0] << 8 | p[1]];
        if (r2 != NONE) return tokvec_push(out, r2);
        return tokvec_push(out, t->byte_rank[p[0]]) || tokvec_push(out, t->byte_rank[p[1]]);
    }
    uint64_t h = tok_hash(p, n);
    int64_t r = tok_rank_h(t, p, n, h);
    if (r >= 0) return tokvec_push(out, (uint32_t)r);
    if (grow(e, n)) return -1;
    if (n >= BPE_HEAP_MIN) return merge_long(e, p, n, out);
    /* h | 1: a zero hash marks an empty slot */
    uint64_t key = h | 1;
    size_t i = key & (CACHE_SLOTS - 1);
    for (; e->cache[i].h; i = (i + 1) & (CACHE_SLOTS - 1)) {
        CacheEnt *c = &e->cache[i];
        if (c->h == key && c->blen == n && !memcmp(e->cbytes + c->boff, p, n)) {
            for (uint32_t k = 0; k < c->ntok; k++)
                if (tokvec_push(out, e->ctoks[c->toff + k])) return -1;
            return 0;
        }
    }
    size_t before = out->n;
    if (merge_small(e, p, n, out)) return -1;
    size_t nt = out->n - before;
    if (e->cache_used >= CACHE_SLOTS / 2 || e->cb_used + n > e->cb_cap ||
        e->ct_used + nt > e->ct_cap) {
        cache_reset(e);
        i = key & (CACHE_SLOTS - 1);
    }
    CacheEnt *c = &e->cache[i];
    c->h = key;
    c->boff = (uint32_t)e->cb_used;
    c->blen = (uint16_t)n;
    c->toff = (uint32_t)e->ct_used;
    c->ntok = (uint16_t)nt;
    memcpy(e->cbytes + e->cb_used, p, n);
    memcpy(e->ctoks + e->ct_used, out->v + before, nt * sizeof *out->v);
    e->cb_used += n;
    e->ct_used += nt;
    e->cache_used++;
    return 0;
}

int tok_encode(TokEncoder *e, const uint8_t *text, size_t n, TokVec *out) {
    const Tokenizer *t = e->t;
    size_t s = 0;
    while (s < n) {
        int rc = t->jit ? pcre2_jit_match(t->re, text, n, s, 0, e->md, e->mctx)
                        : pcre2_match(t->re, text, n, s, 0, e->md, e->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) /* only invalid UTF-8 is left */
            return piece(e, text + s, n - s, out);
        if (rc < 0) return -1;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        if (ov[0] > s && piece(e, text + s, ov[0] - s, out)) return -1; /* invalid UTF-8 */
        if (piece(e, text + ov[0], ov[1] - ov[0], out)) return -1;
        s = ov[1];
    }
    return 0;
}

size_t tok_cut_point(const uint8_t *text, size_t n, size_t from) {
    if (from < 2) from = 2;
    while (from < n) {
        const uint8_t *q = memchr(text + from - 1, '\n', n - from);
        if (!q) return n;
        size_t p = (size_t)(q - text) + 1;
        if (p < n && text[p - 2] > 0x20 && text[p - 2] < 0x7f && text[p] > 0x20 && text[p] < 0x7f)
            return p;
        from = p + 1;
    }
    return n;
}
