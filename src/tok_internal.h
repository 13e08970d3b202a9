/* Shared between the vocabulary (tok_vocab.c) and the encoder (tok_encode.c). */
#ifndef SG_TOK_INTERNAL_H
#define SG_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include "tokenizer.h"

struct Tokenizer {
    uint32_t n_ranks;    /* ordinary tokens: ids 0 .. n_ranks-1 */
    uint32_t vocab_size; /* n_ranks + 1 (end-of-text) */
    uint8_t *pool;       /* bytes of every token, id order */
    uint32_t *off;       /* token id's bytes are pool[off[id] .. off[id+1]) */
    /* Open addressing over the byte strings: slot = (hash >> 32) << 32 | (rank + 1),
     * 0 = empty.  The upper half filters most mismatches without touching pool. */
    uint64_t *slots;
    uint64_t mask;
    uint32_t byte_rank[256];
    uint8_t sha[32];
    pcre2_code *re;
};

/* 64-bit hash of a short byte string: words folded with multiply-xorshift. */
static inline uint64_t tok_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static inline int64_t tok_rank_h(const Tokenizer *t, const uint8_t *p, size_t n, uint64_t h) {
    uint64_t tag = h >> 32 << 32;
    for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint64_t s = t->slots[i];
        if (!s) return -1;
        if ((s & 0xffffffff00000000ull) != tag) continue;
        uint32_t r = (uint32_t)s - 1;
        uint32_t o = t->off[r];
        if (t->off[r + 1] - o == n && memcmp(t->pool + o, p, n) == 0) return r;
    }
}

/* Compile GPT-2's pre-tokenization pattern into t->re. */
int tok_compile_pattern(Tokenizer *t, char *err, size_t errlen);

#endif
