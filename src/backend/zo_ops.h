/* The ZO contract every backend's ZO ops implement (backend.h). The perturbation RNG is
 * counter-based, so z for any (seed, tensor, draw, element) is a pure function that any
 * thread, rank or slice computes on its own with the same bits.
 *
 * Contract (docs/ZO_RNG.md): Philox4x32-10 (Random123 constants), key = run seed
 * (k0 low, k1 high 32 bits), counter = (j, purpose, tensor, draw) where j = i / 4 is the
 * block of element i and word i % 4 of the block's output belongs to element i. Gaussians
 * come from Box-Muller on word pairs (x0, x1), (x2, x3) with our own float polynomials for
 * log and sin/cos (below): plain float ops, no FMA (-ffp-contract=off), so the scalar code,
 * every SIMD clone and the numpy reference (tools/ref_zo_rng.py) agree bit for bit.
 * Element indices must stay below 2^34 (j fits in 32 bits).
 *
 * This is the contract every backend's ZO ops implement (backend.h): the scalar definitions
 * below are the reference; a backend may vectorize them but not change a bit. */
#ifndef DZ_BACKEND_ZO_OPS_H
#define DZ_BACKEND_ZO_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The scalar definitions below are the one source of the per-element ZO arithmetic for the
 * host and the GPU: compiled by nvcc they are __host__ __device__ (src/backend/cuda, built
 * with -fmad=false so no multiply-add is contracted), in C they are plain functions. */
#if defined(__CUDACC__)
#define DZ_HD __host__ __device__
#else
#define DZ_HD
#endif

/* The distribution of z and the contract's version (docs/ZO_RNG.md: v1 sections 2-3, v2
 * section 10): bit 0 Rademacher, bit 1 ZO_RNG v2 (--rng v2). */
typedef enum dz_zdist {
    DZ_Z_GAUSSIAN = 0,
    DZ_Z_RADEMACHER = 1,
    DZ_Z_GAUSSIAN_V2 = 2,
    DZ_Z_RADEMACHER_V2 = 3,
} dz_zdist;

/* The dist of a run's options (--perturbation, --rng). */
DZ_HD static inline dz_zdist dz_zdist_of(int rademacher, int rng_v2) {
    return (dz_zdist)((rademacher ? DZ_Z_RADEMACHER : DZ_Z_GAUSSIAN) | (rng_v2 ? DZ_Z_GAUSSIAN_V2 : 0));
}

/* Counter word c1: z, stochastic rounding, LOZO's U and V (src/pipeline/structured_z.c). */
enum { DZ_PURPOSE_Z = 0, DZ_PURPOSE_SR = 1, DZ_PURPOSE_LOZO_U = 2, DZ_PURPOSE_LOZO_V = 3 };

#define DZ_PHILOX_M0 0xD2511F53u
#define DZ_PHILOX_M1 0xCD9E8D57u
#define DZ_PHILOX_W0 0x9E3779B9u
#define DZ_PHILOX_W1 0xBB67AE85u

/* One Philox4x32-R block (scalar; the bulk fills are vectorized): R = 10 for v1, 7 for v2. */
DZ_HD static inline void dz_philox4x32_r(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4], int rounds) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < rounds; r++) {
        const uint64_t p0 = (uint64_t)DZ_PHILOX_M0 * c0, p1 = (uint64_t)DZ_PHILOX_M1 * c2;
        c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        c1 = (uint32_t)p1;
        c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c3 = (uint32_t)p0;
        k0 += DZ_PHILOX_W0;
        k1 += DZ_PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

DZ_HD static inline void dz_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    dz_philox4x32_r(ctr, key, out, 10);
}

/* The block of element i (the contract's layout, scalar): counter (i / 4, purpose, tensor,
 * draw), key (seed low, seed high); element i takes word i % 4 of it. */
DZ_HD static inline void dz_philox_block_of(uint32_t x[4], uint64_t seed, uint32_t purpose, uint32_t tensor,
                                            uint32_t draw, uint64_t i) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)(i >> 2), purpose, tensor, draw};
    dz_philox4x32_10(ctr, key, x);
}

DZ_HD static inline uint32_t dz_zo_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
DZ_HD static inline float dz_zo_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* log(x) for normal finite x > 0: Cephes logf (S. Moshier). x = 2^e m with m in
 * [sqrt(1/2), sqrt(2)) by integer ops on the bits (no branch), f = m - 1 (exact), then
 *   y = ((P(f) * f) * f^2) + e * C2 + (-0.5 * f^2);  log = (f + y) + e * C1
 * with P the degree-8 Cephes polynomial (Horner, highest first) and ln2 = C1 + C2 split
 * so that e * C1 is exact. Measured over every input Box-Muller gives it (u = k 2^-24,
 * k = 1..2^24, exhaustive, vs double): max error 0.83 ulp (8.1e-8 relative), never > 0. */
DZ_HD static inline float dz_logf(float x) {
    const uint32_t t = dz_zo_f2u(x) - 0x3F3504F3u; /* bits of sqrt(1/2) */
    const int32_t e = (int32_t)t >> 23;
    const float f = dz_zo_u2f((t & 0x7FFFFFu) + 0x3F3504F3u) - 1.0f;
    const float z = f * f;
    float p = 0x1.204376p-4f;
    p = p * f + -0x1.d7a370p-4f;
    p = p * f + 0x1.de4a34p-4f;
    p = p * f + -0x1.fcba9ep-4f;
    p = p * f + 0x1.23d37ep-3f;
    p = p * f + -0x1.555ca0p-3f;
    p = p * f + 0x1.999d58p-3f;
    p = p * f + -0x1.fffff8p-3f;
    p = p * f + 0x1.555554p-2f;
    const float fe = (float)e;
    float y = p * f;
    y = y * z;
    y = y + fe * -0x1.bd0106p-13f; /* C2 = -2.12194440e-4 */
    y = y + -0.5f * z;
    const float r = f + y;
    return r + fe * 0x1.63p-1f; /* C1 = 0.693359375 */
}

/* sin and cos of 2 pi u for u in [0, 1). Quarter turns n = (int)(4u + 0.5), r = 4u - n in
 * [-1/2, 1/2] (exact for u = k 2^-24), then with r2 = r * r (Horner, highest first):
 *   s = r * S(r2),  S = S7 r2^3 + S5 r2^2 + S3 r2 + S1   ~ sin(pi/2 r)
 *   c = C(r2) * r2 + 1,  C = C8 r2^3 + C6 r2^2 + C4 r2 + C2   ~ cos(pi/2 r)
 * (least-squares minimax fits on [0, 1/2] rounded to float), and n & 3 picks the quadrant
 * by swapping and negating. Measured over every u = k 2^-24 (exhaustive, vs double): max
 * error 1.7 ulp (1.3e-7 relative, 8.9e-8 absolute); exact 0 and +-1 at quarter turns. */
DZ_HD static inline void dz_sincos2pi(float u, float *sin_out, float *cos_out) {
    const float t = u * 4.0f;
    const int32_t n = (int32_t)(t + 0.5f);
    const float r = t - (float)n;
    const float r2 = r * r;
    float s = -0x1.2d9ca6p-8f;
    s = s * r2 + 0x1.465eccp-4f;
    s = s * r2 + -0x1.4abbbap-1f;
    s = s * r2 + 0x1.921fb6p+0f;
    s = s * r;
    float c = 0x1.deecdcp-11f;
    c = c * r2 + -0x1.55d63ep-6f;
    c = c * r2 + 0x1.03c1fap-2f;
    c = c * r2 + -0x1.3bd3ccp+0f;
    c = c * r2 + 1.0f;
    const int32_t q = n & 3;
    const float cq = (q & 1) ? s : c, sq = (q & 1) ? c : s;
    *cos_out = (q == 1 || q == 2) ? -cq : cq;
    *sin_out = (q & 2) ? -sq : sq;
}

/* Box-Muller on one word pair: (z0, z1) = sqrt(-2 log u1) (cos, sin)(2 pi u2), with
 * u1 = ((xa >> 8) + 1) 2^-24 in (0, 1] and u2 = (xb >> 8) 2^-24 in [0, 1). */
DZ_HD static inline void dz_box_muller(uint32_t xa, uint32_t xb, float *z0, float *z1) {
    const float u1 = (float)(int32_t)((xa >> 8) + 1) * 0x1p-24f;
    const float u2 = (float)(int32_t)(xb >> 8) * 0x1p-24f;
    const float r = sqrtf(-2.0f * dz_logf(u1));
    float s, c;
    dz_sincos2pi(u2, &s, &c);
    *z0 = r * c;
    *z1 = r * s;
}

/* Rademacher: the top bit of the word is the sign of +-1. */
DZ_HD static inline float dz_rademacher(uint32_t x) { return dz_zo_u2f(0x3F800000u | (x & 0x80000000u)); }

/* Stochastic rounding to bf16 with random word x: magnitude-wise, v moves to its upper
 * neighbour with probability equal to its fractional part (truncate bits(v) + (x & 0xFFFF)).
 * NaN and Inf round to nearest even (NaN made quiet), as dz_f32_to_bf16 does. */
DZ_HD static inline uint16_t dz_bf16_round_stochastic(float v, uint32_t x) {
    const uint32_t u = dz_zo_f2u(v), a = u & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return (uint16_t)((u >> 16) | (a > 0x7F800000u ? 0x40u : 0u));
    return (uint16_t)((u + (x & 0xFFFFu)) >> 16);
}

/* A pending SPSA update: projected gradients g[0..q-1] (host memory) of step `step`
 * (draws step*q + j), learning rate, and weight decay (0 = none; callers pass 0 for biases
 * and norm weights). The update of one element, in this order and in float:
 *   u = 0; u = u + g[j] z_j for j = 0..q-1;  v = u; v = v / q [q > 1]; v = v + wd theta [wd != 0];
 *   theta = theta - lr v
 * then, for bf16 masters (theta widened to f32 first), stochastic rounding with the
 * purpose-1 word of (tensor, element, draw step*q); the perturbed copies
 * w+- = theta +- (eps z) are f32, from the stored (rounded) theta. */
typedef struct dz_zo_update {
    const float *g;
    int q; /* >= 1 */
    float lr;
    float wd;
    uint32_t step;
    float curv; /* HiZOO (src/pipeline/hessian_z.c): the curvature step c; else unused */
} dz_zo_update;

#endif
