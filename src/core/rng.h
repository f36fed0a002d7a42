/* Small sequential random numbers for sampling data, tokens and initial weights.
 * (The perturbation RNG of the ZO estimator is counter-based and lives elsewhere.)
 * splitmix64 (Steele, Lea, Flood 2014): its output for a seed is fixed by definition,
 * so results reproduce on any machine. */
#ifndef DZ_CORE_RNG_H
#define DZ_CORE_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t dz_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double dz_uniform01(uint64_t *state) {
    return (double)(dz_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in [0, bound) without modulo bias: draws below 2^64 mod bound are rejected. */
static inline uint64_t dz_uniform_below(uint64_t *state, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = dz_splitmix64(state);
        if (r >= threshold) return r % bound;
    }
}

/* Standard normal by Box-Muller (one value per call; the partner is dropped for simplicity). */
static inline double dz_normal(uint64_t *state) {
    double u1 = 1.0 - dz_uniform01(state); /* (0, 1]: log is finite */
    double u2 = dz_uniform01(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
