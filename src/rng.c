#include "rng.h"

#include <math.h>

/* 2^64 / golden ratio: the splitmix64 increment.  Adding it before mixing
 * keeps small inputs (0, 1, 2, ...) away from the mixer's fixed point at 0. */
#define GAMMA 0x9e3779b97f4a7c15ull

uint64_t rng_mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t rng_key(uint64_t a, uint64_t b, uint64_t c) {
    /* Each step is a bijection of its new argument (xor, add, mix), so
     * changing any one argument always changes the key. */
    uint64_t h = rng_mix(a + GAMMA);
    h = rng_mix((h ^ b) + GAMMA);
    return rng_mix((h ^ c) + GAMMA);
}

double rng_uniform(uint64_t key, uint64_t i) {
    /* rng_mix(key) + (i+1)*GAMMA is the splitmix64 state after i+1 steps
     * from seed rng_mix(key); mixing the key first keeps the streams of
     * related keys (k and k + GAMMA) from being shifted copies of each other. */
    uint64_t bits = rng_mix(rng_mix(key) + (i + 1) * GAMMA);
    uint64_t k = bits >> 11; /* top 53 bits: every value exact in a double */
    /* k * 2^-53 lies in [0, 1 - 2^-53]; the single zero is moved to 2^-54 so
     * log(u) is always finite.  (Adding 0.5 to every k instead would round
     * the largest value up to exactly 1.0.) */
    return k ? (double)k * 0x1p-53 : 0x1p-54;
}

double rng_normal(uint64_t key, uint64_t i) {
    double u1 = rng_uniform(key, 2 * i);
    double u2 = rng_uniform(key, 2 * i + 1);
    /* Only the cosine branch: the sine branch would tie element i to a
     * neighbour and make the value depend on how elements are paired. */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

uint64_t rng_below(uint64_t h, uint64_t n) {
    /* Lemire's multiply-shift without the rejection step: each result in
     * [0, n) is hit by floor(2^64/n) or ceil(2^64/n) values of h, so the
     * probability of any outcome is off by a relative amount below
     * n / 2^64 (< 1e-10 for any n up to 10^9).  No rejection keeps the
     * result a single pure function of h. */
    return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

uint64_t rng_hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull; /* FNV-1a 64 prime */
    }
    /* FNV alone has weak high bits for short, similar names ("h.0.w" vs
     * "h.1.w"); the mixer spreads every input bit over the word. */
    return rng_mix(h);
}
