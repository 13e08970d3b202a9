/* Counter-based random numbers.
 *
 * Every value is a pure function of its keys: there is no generator state to
 * carry, save or advance.  That is what makes a run a pure function of
 * (config, seed): the batch drawn for (seed, step, row) and the initial value
 * of element i of a tensor do not depend on thread count, micro-batch split,
 * number of ranks, or on what was drawn before.  It also means a checkpoint's
 * "RNG state" is just (seed, step).
 *
 * The mixer is the splitmix64 finalizer, a bijection on 64-bit words with
 * full avalanche; keys are built by chaining it. */
#ifndef SG_RNG_H
#define SG_RNG_H

#include <stdint.h>

/* splitmix64 finalizer: a bijection of 64-bit words.  rng_mix(0) == 0. */
uint64_t rng_mix(uint64_t x);

/* A key from three words.  Order matters (rng_key(a,b,c) != rng_key(b,a,c)
 * in general), and for fixed other arguments each argument maps to the key
 * bijectively, so distinct rows of a batch always get distinct keys. */
uint64_t rng_key(uint64_t a, uint64_t b, uint64_t c);

/* Element i of the uniform stream `key`, in the open interval (0, 1):
 * a multiple of 2^-53 taken from the top 53 bits of a mixed word. */
double rng_uniform(uint64_t key, uint64_t i);

/* Element i of the standard normal stream `key` (Box-Muller, cosine branch,
 * from uniforms (key, 2i) and (key, 2i+1)); independent of every other i. */
double rng_normal(uint64_t key, uint64_t i);

/* A number in [0, n) from a uniform 64-bit word h (n >= 1). */
uint64_t rng_below(uint64_t h, uint64_t n);

/* A 64-bit key from a string (FNV-1a, then rng_mix), e.g. a tensor name. */
uint64_t rng_hash_str(const char *s);

#endif
