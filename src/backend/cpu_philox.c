/* The CPU backend's Philox fills (the contract: backend/zo_ops.h), compiled for each level
 * of core/isa.h (AVX-512, AVX2, baseline SSE4.2) with DZ_ISA_VARIANTS and run as
 * dz_isa_active() says, so that tests can run every level on one machine and check that
 * they give the same bits.
 *
 * Philox's rounds are written with GCC vector types, one block per 64-bit lane, and the
 * 32x32->64 multiplies with pmuludq: the auto-vectorizer (GCC 12) either emulates 64x64
 * multiplies or repacks the products with cross-lane shuffles, 3x slower. Everything after the words (Box-Muller, Rademacher) is
 * one plain C body that the vectorizer handles well in each variant. */
#include "backend/cpu_zo.h"

#include "backend/cpu_simd.h"
#include "backend/zo_rng_v2.h"

#include <immintrin.h>

#define ZO_BATCH 256 /* blocks per pass over the stack buffers (1024 elements); a multiple of every W */

typedef struct zo_counter {
    uint32_t k0[10], k1[10]; /* key of each round */
    uint32_t c1, c2, c3;     /* purpose, tensor, draw */
} zo_counter;

static void zo_counter_init(zo_counter *c, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++, k0 += DZ_PHILOX_W0, k1 += DZ_PHILOX_W1) c->k0[r] = k0, c->k1[r] = k1;
    c->c1 = purpose, c->c2 = tensor, c->c3 = draw;
}

/* Words of blocks j0 .. j0 + ceil(nb / W) W - 1 into x0..x3 (one array per word; nb <=
 * ZO_BATCH). Each word sits in the low half of a 64-bit lane, W/2 blocks per vector, in
 * two vectors: the even blocks and the odd ones. MUL(a, b) multiplies the low halves of
 * the lanes into full 64-bit products (pmuludq), which ignores the high halves, so a round
 * is two multiplies, two shifts (hi = p >> 32) and two three-way xors per vector, and
 * whatever the high halves hold (lo = p as is) never matters. At the end the two vectors'
 * low halves interleave into W consecutive blocks with a mask and a shift. */
#define ZO_DEFINE_PHILOX(name, attr, W, MUL, ROUNDS)                                                  \
    typedef uint32_t name##_u32v __attribute__((vector_size(4 * (W))));                               \
    typedef uint64_t name##_u64v __attribute__((vector_size(4 * (W))));                               \
    attr static inline void name##_rounds(name##_u64v *c0, name##_u64v *c1, name##_u64v *c2,          \
                                          name##_u64v *c3, const zo_counter *ctr) {                   \
        const name##_u64v zero = {0}, m0 = zero + DZ_PHILOX_M0, m1 = zero + DZ_PHILOX_M1;            \
        for (int r = 0; r < (ROUNDS); r++) {                                                          \
            const name##_u64v p0 = (name##_u64v)MUL(*c0, m0), p1 = (name##_u64v)MUL(*c2, m1);         \
            *c0 = (p1 >> 32) ^ *c1 ^ (zero + ctr->k0[r]);                                             \
            *c1 = p1;                                                                                 \
            *c2 = (p0 >> 32) ^ *c3 ^ (zero + ctr->k1[r]);                                             \
            *c3 = p0;                                                                                 \
        }                                                                                             \
    }                                                                                                 \
    attr static inline name##_u32v name##_interleave(name##_u64v even, name##_u64v odd) {            \
        return (name##_u32v)((even & 0xFFFFFFFFull) | (odd << 32));                                   \
    }                                                                                                 \
    attr static void name##_philox(uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,           \
                                   const zo_counter *ctr, uint32_t j0, size_t nb) {                   \
        name##_u64v iota;                                                                             \
        for (int l = 0; l < (W) / 2; l++) iota[l] = 2 * (uint64_t)l;                                  \
        const name##_u64v zero = {0};                                                                 \
        for (size_t b = 0; b < nb; b += (W)) {                                                        \
            name##_u64v e0 = iota + (uint64_t)(j0 + (uint32_t)b), e1 = zero + ctr->c1,                \
                        e2 = zero + ctr->c2, e3 = zero + ctr->c3;                                     \
            name##_u64v o0 = e0 + 1, o1 = e1, o2 = e2, o3 = e3;                                       \
            name##_rounds(&e0, &e1, &e2, &e3, ctr);                                                   \
            name##_rounds(&o0, &o1, &o2, &o3, ctr);                                                   \
            const name##_u32v w0 = name##_interleave(e0, o0), w1 = name##_interleave(e1, o1);        \
            const name##_u32v w2 = name##_interleave(e2, o2), w3 = name##_interleave(e3, o3);        \
            memcpy(x0 + b, &w0, sizeof w0), memcpy(x1 + b, &w1, sizeof w1);                           \
            memcpy(x2 + b, &w2, sizeof w2), memcpy(x3 + b, &w3, sizeof w3);                           \
        }                                                                                             \
    }

#define ZO_MUL_SSE(a, b) _mm_mul_epu32((__m128i)(a), (__m128i)(b))
#define ZO_MUL_AVX2(a, b) _mm256_mul_epu32((__m256i)(a), (__m256i)(b))
#define ZO_MUL_AVX512(a, b) _mm512_mul_epu32((__m512i)(a), (__m512i)(b))

ZO_DEFINE_PHILOX(sse, DZ_ISA_TARGET_BASELINE, 4, ZO_MUL_SSE, 10)
ZO_DEFINE_PHILOX(avx2, DZ_ISA_TARGET_AVX2, 8, ZO_MUL_AVX2, 10)
ZO_DEFINE_PHILOX(avx512, DZ_ISA_TARGET_AVX512, 16, ZO_MUL_AVX512, 10)
ZO_DEFINE_PHILOX(sse7, DZ_ISA_TARGET_BASELINE, 4, ZO_MUL_SSE, DZ_ZV2_ROUNDS)
ZO_DEFINE_PHILOX(avx27, DZ_ISA_TARGET_AVX2, 8, ZO_MUL_AVX2, DZ_ZV2_ROUNDS)
ZO_DEFINE_PHILOX(avx5127, DZ_ISA_TARGET_AVX512, 16, ZO_MUL_AVX512, DZ_ZV2_ROUNDS)

typedef void (*zo_philox_fn)(uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3, const zo_counter *ctr,
                             uint32_t j0, size_t nb);

/* What a block pass writes: z (the two distributions) or the raw words. */
typedef enum zo_mode { ZO_GAUSSIAN = DZ_Z_GAUSSIAN, ZO_RADEMACHER = DZ_Z_RADEMACHER, ZO_WORDS } zo_mode;

/* Blocks j0 .. j0+nb-1 into out[0 .. 4nb) (float z, or uint32 words). The Philox of the
 * variant's own width: isa is a constant in each variant, so the choice folds away. */
DZ_ISA_VARIANTS(zo_blocks, (void *out, const zo_counter *ctr, uint32_t j0, size_t nb, zo_mode mode),
                (out, ctr, j0, nb, mode)) {
    const zo_philox_fn philox_batch =
        isa == DZ_ISA_AVX512 ? avx512_philox : isa == DZ_ISA_AVX2 ? avx2_philox : sse_philox;
    uint32_t x0[ZO_BATCH], x1[ZO_BATCH], x2[ZO_BATCH], x3[ZO_BATCH];
    for (size_t done = 0; done < nb; done += ZO_BATCH) {
        const size_t m = nb - done < ZO_BATCH ? nb - done : ZO_BATCH;
        philox_batch(x0, x1, x2, x3, ctr, j0 + (uint32_t)done, m);
        if (mode == ZO_WORDS) {
            uint32_t *restrict xb = (uint32_t *)out + 4 * done;
            for (size_t b = 0; b < m; b++)
                xb[4 * b] = x0[b], xb[4 * b + 1] = x1[b], xb[4 * b + 2] = x2[b], xb[4 * b + 3] = x3[b];
        } else if (mode == ZO_RADEMACHER) {
            float *restrict zb = (float *)out + 4 * done;
            for (size_t b = 0; b < m; b++) {
                zb[4 * b + 0] = dz_rademacher(x0[b]);
                zb[4 * b + 1] = dz_rademacher(x1[b]);
                zb[4 * b + 2] = dz_rademacher(x2[b]);
                zb[4 * b + 3] = dz_rademacher(x3[b]);
            }
        } else {
            float *restrict zb = (float *)out + 4 * done;
            for (size_t b = 0; b < m; b++) {
                float a0, a1, a2, a3;
                dz_box_muller(x0[b], x1[b], &a0, &a1);
                dz_box_muller(x2[b], x3[b], &a2, &a3);
                zb[4 * b + 0] = a0, zb[4 * b + 1] = a1, zb[4 * b + 2] = a2, zb[4 * b + 3] = a3;
            }
        }
    }
}

typedef void (*zo_blocks_fn)(void *out, const zo_counter *ctr, uint32_t j0, size_t nb, zo_mode mode);

/* v2's Gaussians of m groups from their 16 m Philox blocks (words x[w][b]): element
 * 128 s + 64 half + 16 w + l is half `half` of x[w][16 s + l]. The table look-ups are the
 * cost of v2 on the CPU (docs/ZO_RNG.md section 10); each level runs them its fastest way,
 * the same bits: AVX2 and AVX-512 with hardware gathers of 16 elements' halves straight
 * from the words (on a Zen 3, 0.6 ns a z against 0.7-0.8 for SSE's inserted loads);
 * baseline extracts the halves in element order, then one look-up loop. */
static void zv2_gaussians_baseline(float *restrict z, const uint32_t (*x)[ZO_BATCH], size_t m) {
    uint32_t h[DZ_ZV2_GROUP];
    for (size_t s = 0; s < m; s++) {
        for (int half = 0; half < 2; half++)
            for (int w = 0; w < 4; w++)
                for (int l = 0; l < 16; l++) h[64 * half + 16 * w + l] = x[w][16 * s + l] >> (16 * half);
        for (int k = 0; k < DZ_ZV2_GROUP; k++) z[DZ_ZV2_GROUP * s + k] = dz_zv2_gaussian(h[k]);
    }
}

/* T[v & 0x7FFF] with bit 15 of v as the sign (higher bits ignored), 8 or 16 lanes at once. */
DZ_ISA_TARGET_AVX2 static inline __m256i zv2_gather_avx2(__m256i v) {
    const __m256i t = _mm256_i32gather_epi32((const int *)dz_zv2_table_host,
                                             _mm256_and_si256(v, _mm256_set1_epi32(0x7FFF)), 4);
    return _mm256_or_si256(t, _mm256_slli_epi32(_mm256_srli_epi32(v, 15), 31));
}

DZ_ISA_TARGET_AVX2 static void zv2_gaussians_avx2(float *restrict z, const uint32_t (*x)[ZO_BATCH], size_t m) {
    for (size_t s = 0; s < m; s++)
        for (int w = 0; w < 4; w++)
            for (int l = 0; l < 16; l += 8) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(x[w] + 16 * s + l));
                float *zs = z + DZ_ZV2_GROUP * s + 16 * w + l;
                _mm256_storeu_si256((__m256i *)zs, zv2_gather_avx2(v));
                _mm256_storeu_si256((__m256i *)(zs + 64), zv2_gather_avx2(_mm256_srli_epi32(v, 16)));
            }
}

DZ_ISA_TARGET_AVX512 static inline __m512i zv2_gather_avx512(__m512i v) {
    const __m512i t = _mm512_i32gather_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0x7FFF)),
                                             (const void *)dz_zv2_table_host, 4);
    return _mm512_or_si512(t, _mm512_slli_epi32(_mm512_srli_epi32(v, 15), 31));
}

DZ_ISA_TARGET_AVX512 static void zv2_gaussians_avx512(float *restrict z, const uint32_t (*x)[ZO_BATCH], size_t m) {
    for (size_t s = 0; s < m; s++)
        for (int w = 0; w < 4; w++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x[w] + 16 * s));
            float *zs = z + DZ_ZV2_GROUP * s + 16 * w;
            _mm512_storeu_si512((void *)zs, zv2_gather_avx512(v));
            _mm512_storeu_si512((void *)(zs + 64), zv2_gather_avx512(_mm512_srli_epi32(v, 16)));
        }
}

/* v2 (zo_rng_v2.h): groups g0 .. g0+ng-1 of 128 elements into z[0 .. 128 ng): Gaussians
 * (16 Philox4x32-7 blocks a group, runs of 16 elements from one word-half of 16 consecutive
 * blocks: contiguous vectors) or Rademacher signs (one block a group, a bit an element). */
DZ_ISA_VARIANTS(zo_groups_v2, (float *z, const zo_counter *ctr, uint32_t g0, size_t ng, int rademacher),
                (z, ctr, g0, ng, rademacher)) {
    const zo_philox_fn philox_batch =
        isa == DZ_ISA_AVX512 ? avx5127_philox : isa == DZ_ISA_AVX2 ? avx27_philox : sse7_philox;
    void (*const gaussians)(float *restrict, const uint32_t (*)[ZO_BATCH], size_t) =
        isa == DZ_ISA_AVX512 ? zv2_gaussians_avx512 : isa == DZ_ISA_AVX2 ? zv2_gaussians_avx2 : zv2_gaussians_baseline;
    const size_t per_batch = rademacher ? ZO_BATCH : ZO_BATCH / DZ_ZV2_GROUP_BLOCKS; /* groups */
    uint32_t x[4][ZO_BATCH];
    for (size_t done = 0; done < ng; done += per_batch) {
        const size_t m = ng - done < per_batch ? ng - done : per_batch;
        float *restrict zb = z + DZ_ZV2_GROUP * done;
        if (rademacher) {
            philox_batch(x[0], x[1], x[2], x[3], ctr, g0 + (uint32_t)done, m);
            for (size_t b = 0; b < m; b++)
                for (int w = 0; w < 4; w++)
                    for (int k = 0; k < 32; k++)
                        zb[128 * b + 32 * w + k] = dz_zo_u2f(0x3F800000u | ((x[w][b] >> k) & 1u) << 31);
            continue;
        }
        philox_batch(x[0], x[1], x[2], x[3], ctr, (g0 + (uint32_t)done) * DZ_ZV2_GROUP_BLOCKS, DZ_ZV2_GROUP_BLOCKS * m);
        gaussians(zb, (const uint32_t (*)[ZO_BATCH])x, m);
    }
}

/* v2 elements i0 .. i0+n-1: whole groups in place, partial ones through a group buffer. */
static void fill_v2(float *z, const zo_counter *ctr, uint64_t i0, size_t n, int rademacher) {
    while (n > 0) {
        const uint32_t g = (uint32_t)(i0 / DZ_ZV2_GROUP);
        const size_t off = (size_t)(i0 % DZ_ZV2_GROUP);
        size_t m;
        if (off == 0 && n >= DZ_ZV2_GROUP) {
            m = n - n % DZ_ZV2_GROUP;
            zo_groups_v2(z, ctr, g, m / DZ_ZV2_GROUP, rademacher);
        } else {
            float tmp[DZ_ZV2_GROUP];
            m = DZ_ZV2_GROUP - off < n ? DZ_ZV2_GROUP - off : n;
            zo_groups_v2(tmp, ctr, g, 1, rademacher);
            memcpy(z, tmp + off, 4 * m);
        }
        z += m, i0 += m, n -= m;
    }
}

/* Elements i0 .. i0+n-1 (4-byte values) as: whole blocks written in place, partial blocks
 * at either end through a 4-element buffer with the same kernel. */
static void fill(void *out, const zo_counter *ctr, uint64_t i0, size_t n, zo_mode mode) {
    const zo_blocks_fn blocks = zo_blocks_variants[dz_isa_active()]; /* one look-up per fill */
    char *o = out;
    while (n > 0) {
        const uint32_t j = (uint32_t)(i0 >> 2);
        const size_t off = (size_t)(i0 & 3);
        size_t m;
        if (off == 0 && n >= 4) {
            m = n & ~(size_t)3;
            blocks(o, ctr, j, m / 4, mode);
        } else {
            uint32_t tmp[4];
            m = 4 - off < n ? 4 - off : n;
            blocks(tmp, ctr, j, 1, mode);
            memcpy(o, tmp + off, 4 * m);
        }
        o += 4 * m, i0 += m, n -= m;
    }
}

void dz_cpu_z_fill(const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                   size_t n, dz_zdist dist) {
    zo_counter ctr;
    zo_counter_init(&ctr, seed, DZ_PURPOSE_Z, tensor, draw);
    if (dist & DZ_Z_GAUSSIAN_V2) fill_v2(z, &ctr, i0, n, dist & DZ_Z_RADEMACHER);
    else fill(z, &ctr, i0, n, (zo_mode)dist);
}

void dz_cpu_philox_fill(const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor,
                        uint32_t draw, uint64_t i0, size_t n) {
    zo_counter ctr;
    zo_counter_init(&ctr, seed, purpose, tensor, draw);
    fill(x, &ctr, i0, n, ZO_WORDS);
}
