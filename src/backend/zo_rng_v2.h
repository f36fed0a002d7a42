/* ZO_RNG v2 (docs/ZO_RNG.md section 10, --rng v2): the cheaper z, scalar definitions for the
 * host and the GPU (DZ_HD), as zo_ops.h holds v1's.
 *
 * Bits: Philox4x32-7 (v1's Philox with 7 rounds instead of 10; Random123 reports 7 rounds as
 * the least that passes BigCrush) with v1's key and counter (block, purpose 0, tensor, draw).
 * Elements come in groups of 128: g = i / 128, r = i mod 128.
 * Gaussian: 16 bits per element, 8 elements per block; element i takes half r / 64 (0: the
 * low half) of word (r / 16) mod 4 of block 16 g + r mod 16, so the 16 blocks of a group
 * fill it in runs of 16 consecutive elements (one vector of blocks per run: the CPU's SIMD
 * path and a GPU half-warp write them contiguously). The half's top bit is the sign and its
 * low 15 bits index a table of |z| quantiles (zo_rng_v2_table.h):
 *     T[m] = float32(c Phi^-1(1/2 + (m + 1/2) 2^-16)),  c = 1 / sqrt(2^-15 sum_m Phi^-1(..)^2)
 * i.e. the inverse normal CDF at the midpoints of 2^16 equal cells, scaled so that the
 * 2^16 values have variance 1 exactly (E z^2 = 1 keeps SPSA unbiased). Exact quantiles, no
 * polynomial: the tails follow N(0, 1) out to the last cell (|z| up to 4.32).
 * Rademacher: one bit per element, 128 elements per block: bit r mod 32 of word r / 32 of
 * block g; bit 1 is -1.
 * Per element: 1/8 (Gaussian) or 1/128 (Rademacher) of a 7-round block and a table load,
 * against v1's 1/4 of a 10-round block and half a Box-Muller (log, sqrt, sin, cos). */
#ifndef DZ_BACKEND_ZO_RNG_V2_H
#define DZ_BACKEND_ZO_RNG_V2_H

#include "backend/zo_ops.h"
#include "backend/zo_rng_v2_table.h"

#define DZ_ZV2_ROUNDS 7
#define DZ_ZV2_GROUP 128       /* elements per group */
#define DZ_ZV2_GROUP_BLOCKS 16 /* Philox blocks per group of Gaussians (Rademacher: 1) */

#if defined(__CUDACC__)
static __device__ const uint32_t dz_zv2_table_dev[32768] = {DZ_ZV2_TABLE_DATA};
#endif
static const uint32_t dz_zv2_table_host[32768] = {DZ_ZV2_TABLE_DATA};

/* Bits of T[m], m < 2^15. */
DZ_HD static inline uint32_t dz_zv2_quantile_bits(uint32_t m) {
#if defined(__CUDA_ARCH__)
    return dz_zv2_table_dev[m];
#else
    return dz_zv2_table_host[m];
#endif
}

/* Philox4x32-7 block `block` of z (purpose 0) for (seed, tensor, draw). */
DZ_HD static inline void dz_zv2_block(uint32_t x[4], uint64_t seed, uint32_t tensor, uint32_t draw, uint32_t block) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {block, DZ_PURPOSE_Z, tensor, draw};
    dz_philox4x32_r(ctr, key, x, DZ_ZV2_ROUNDS);
}

/* The Gaussian of 16 bits h: sign from bit 15, |z| = T[h & 0x7FFF]. */
DZ_HD static inline float dz_zv2_gaussian(uint32_t h) {
    return dz_zo_u2f(dz_zv2_quantile_bits(h & 0x7FFFu) | ((h >> 15) & 1u) << 31);
}

/* Element r (= i mod 128) of a Rademacher block. */
DZ_HD static inline float dz_zv2_rademacher_of(const uint32_t x[4], unsigned r) {
    return dz_zo_u2f(0x3F800000u | ((x[r >> 5] >> (r & 31)) & 1u) << 31);
}

/* z of element i alone (i < 2^34). */
DZ_HD static inline float dz_zv2_at(uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i, int rademacher) {
    const uint32_t g = (uint32_t)(i / DZ_ZV2_GROUP), r = (uint32_t)(i % DZ_ZV2_GROUP);
    uint32_t x[4];
    if (rademacher) {
        dz_zv2_block(x, seed, tensor, draw, g);
        return dz_zv2_rademacher_of(x, r);
    }
    dz_zv2_block(x, seed, tensor, draw, g * DZ_ZV2_GROUP_BLOCKS + (r & 15));
    return dz_zv2_gaussian(x[(r >> 4) & 3] >> (16 * (r >> 6)));
}

#endif
