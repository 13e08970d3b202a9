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
    /* Open addressing over the byte strings, 32-bit slots so that GPT-2's
     * table (128 Ki slots, load 0.38) is 512 KiB and stays in a core's L2:
     * slot = tag << 20 | (rank + 1), 0 = empty, tag = 12 bits of the hash
     * that filter most mismatches without touching pool. */
    uint32_t *slots;
    uint64_t mask;
    uint32_t byte_rank[256];
    uint32_t *pair_rank; /* [a << 8 | b]: rank of the two bytes a b, or UINT32_MAX */
    uint8_t sha[32];
    pcre2_code *re;
    int jit; /* the pattern is JIT-compiled: match with pcre2_jit_match */
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

#define TOK_MAX_RANKS ((1u << 20) - 1)
static inline uint32_t tok_tag(uint64_t h) { return (uint32_t)(h >> 52) << 20; }

static inline int64_t tok_rank_h(const Tokenizer *t, const uint8_t *p, size_t n, uint64_t h) {
    uint32_t tag = tok_tag(h);
    for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint32_t s = t->slots[i];
        if (!s) return -1;
        if ((s & 0xfff00000u) != tag) continue;
        uint32_t r = (s & 0xfffffu) - 1;
        uint32_t o = t->off[r];
        if (t->off[r + 1] - o == n && memcmp(t->pool + o, p, n) == 0) return r;
    }
}

/* Compile GPT-2's pre-tokenization pattern into t->re. */
int tok_compile_pattern(Tokenizer *t, char *err, size_t errlen);

#endif
