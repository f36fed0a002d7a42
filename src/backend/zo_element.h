/* The ZO ops of backend.h one Philox block at a time, for the host and the GPU: the CUDA
 * kernels (src/backend/cuda/zo_kernels.cu) run one block per thread through these
 * functions, the CUDA seam's host implementation (src/backend/cuda/seam_host.c) runs the
 * same functions in a loop, and tests/test_zo_element.c holds them bitwise to the CPU
 * backend's ops and the reference backend's. The arithmetic is the contract's
 * (docs/ZO_RNG.md, the scalar definitions of backend/zo_ops.h, which are DZ_HD too), in
 * the contract's order: the update accumulates u = 0; u = u + g_j z_j; then u / q [q > 1],
 * + wd theta [wd != 0], theta - lr u; bf16 masters round stochastically with the purpose-1
 * word of draw step * q; the pair is theta +- (eps z) from the stored theta.
 *
 * A span is elements i0 .. i0+n-1 of one tensor; its arrays are indexed from i0 (element i
 * at [i - i0]). Block b of a span is Philox block (i0 / 4) + b, holding the span's elements
 * of [4j, 4j + 4): a thread per block generates each block once, whatever the alignment. */
#ifndef DZ_BACKEND_ZO_ELEMENT_H
#define DZ_BACKEND_ZO_ELEMENT_H

#include "backend/zo_ops.h"
#include "backend/zo_rng_v2.h"

/* The most SPSA samples a span's update carries (--spsa-samples: DZ_ZO_MAX_Q). */
#define DZ_ZO_SPAN_MAX_Q 64

typedef enum dz_zo_span_mode {
    DZ_SPAN_Z,     /* z[] = z of draw `draw` (purpose 0): the z_fill op */
    DZ_SPAN_WORDS, /* words[] = raw Philox words of (purpose, draw): the philox_fill op */
    DZ_SPAN_PASS,  /* update theta (has_update), then w+- of draw `draw` (w_plus != NULL) */
    DZ_SPAN_ROUND, /* out_bf16[] = SR(in_f32[], purpose-1 word of draw `draw`) */
} dz_zo_span_mode;

/* One ZO op over a span, passed by value (a kernel argument: pointers are device memory
 * there, host memory on the host). */
typedef struct dz_zo_span {
    dz_zo_span_mode mode;
    uint64_t seed;
    uint32_t tensor;
    uint32_t draw;    /* Z, WORDS, ROUND: the draw; PASS: the pair's draw (next_draw) */
    uint32_t purpose; /* WORDS only */
    dz_zdist dist;
    uint64_t i0, n;
    float *z;
    uint32_t *words;
    const float *in_f32;     /* theta (f32 master) or the values to round (ROUND) ... */
    const uint16_t *in_bf16; /* ... or theta widened from a bf16 master */
    float *out_f32;          /* updated theta (f32; may be in_f32) */
    uint16_t *out_bf16;      /* updated theta (bf16; may be in_bf16), the rounded values (ROUND) */
    float *w_plus, *w_minus; /* NULL: no pair */
    float eps;
    /* the pending update (PASS with has_update): step's draws step * q + j */
    int has_update, q;
    float lr, wd;
    uint32_t step;
    float g[DZ_ZO_SPAN_MAX_Q];
} dz_zo_span;

DZ_HD static inline float dz_bf16_widen(uint16_t h) { return dz_zo_u2f((uint32_t)h << 16); }

/* v2: z of elements 4j .. 4j+3: one Rademacher block, or four Gaussian blocks (a group's
 * blocks hold runs of 16 elements; a kernel that wants v2's saving takes whole groups). */
DZ_HD static inline void dz_z_block_v2(float z[4], uint64_t seed, uint32_t tensor, uint32_t draw, uint32_t j,
                                       int rademacher) {
    const uint64_t i = (uint64_t)j << 2;
    if (!rademacher) {
        for (unsigned k = 0; k < 4; k++) z[k] = dz_zv2_at(seed, tensor, draw, i + k, 0);
        return;
    }
    uint32_t x[4];
    dz_zv2_block(x, seed, tensor, draw, (uint32_t)(i / DZ_ZV2_GROUP));
    for (unsigned k = 0; k < 4; k++) z[k] = dz_zv2_rademacher_of(x, (unsigned)(i % DZ_ZV2_GROUP) + k);
}

/* z of the four elements of Philox block j (purpose 0). */
DZ_HD static inline void dz_z_block(float z[4], uint64_t seed, uint32_t tensor, uint32_t draw, uint32_t j,
                                    dz_zdist dist) {
    if (dist & DZ_Z_GAUSSIAN_V2) {
        dz_z_block_v2(z, seed, tensor, draw, j, dist & DZ_Z_RADEMACHER);
        return;
    }
    uint32_t x[4];
    dz_philox_block_of(x, seed, DZ_PURPOSE_Z, tensor, draw, (uint64_t)j << 2);
    if (dist == DZ_Z_RADEMACHER) {
        for (int k = 0; k < 4; k++) z[k] = dz_rademacher(x[k]);
    } else {
        dz_box_muller(x[0], x[1], &z[0], &z[1]);
        dz_box_muller(x[2], x[3], &z[2], &z[3]);
    }
}

/* z of element i alone. */
DZ_HD static inline float dz_z_at(uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i, dz_zdist dist) {
    float z[4];
    dz_z_block(z, seed, tensor, draw, (uint32_t)(i >> 2), dist);
    return z[i & 3];
}

/* theta after the update, from u = sum_j g_j z_j accumulated from +0.0f in sample order. */
DZ_HD static inline float dz_zo_updated(float theta, float u, int q, float lr, float wd) {
    if (q > 1) u = u / (float)q;
    if (wd != 0.0f) u = u + wd * theta;
    return theta - lr * u;
}

/* The perturbed pair of one element. */
DZ_HD static inline void dz_zo_pair(float theta, float z, float eps, float *w_plus, float *w_minus) {
    const float e = eps * z;
    *w_plus = theta + e;
    *w_minus = theta - e;
}

/* Philox blocks a span touches (threads of a kernel). */
DZ_HD static inline uint64_t dz_zo_span_blocks(const dz_zo_span *s) {
    return s->n == 0 ? 0 : ((s->i0 + s->n - 1) >> 2) - (s->i0 >> 2) + 1;
}

/* Block b of span s: its Philox block j and the span's elements [*lo, *hi) in it. */
DZ_HD static inline uint32_t dz_zo_span_block_range(const dz_zo_span *s, uint64_t b, uint64_t *lo, uint64_t *hi) {
    const uint64_t j = (s->i0 >> 2) + b, first = j << 2, end = s->i0 + s->n;
    *lo = first > s->i0 ? first : s->i0;
    *hi = first + 4 < end ? first + 4 : end;
    return (uint32_t)j;
}

/* DZ_SPAN_Z and DZ_SPAN_WORDS: the fills. */
DZ_HD static inline void dz_zo_fill_block(const dz_zo_span *s, uint64_t b) {
    uint64_t lo, hi;
    const uint32_t j = dz_zo_span_block_range(s, b, &lo, &hi);
    if (s->mode == DZ_SPAN_WORDS) {
        uint32_t x[4];
        dz_philox_block_of(x, s->seed, s->purpose, s->tensor, s->draw, (uint64_t)j << 2);
        for (uint64_t i = lo; i < hi; i++) s->words[i - s->i0] = x[i & 3];
    } else {
        float z[4];
        dz_z_block(z, s->seed, s->tensor, s->draw, j, s->dist);
        for (uint64_t i = lo; i < hi; i++) s->z[i - s->i0] = z[i & 3];
    }
}

/* theta of the block's elements after the span's update (stored, bf16 rounded and widened). */
DZ_HD static inline void dz_zo_update_block(const dz_zo_span *s, uint32_t j, uint64_t lo, uint64_t hi, float th[4]) {
    float u[4] = {0.0f, 0.0f, 0.0f, 0.0f}, z[4];
    const uint32_t d0 = s->step * (uint32_t)s->q;
    for (int k = 0; k < s->q; k++) {
        dz_z_block(z, s->seed, s->tensor, d0 + (uint32_t)k, j, s->dist);
        for (uint64_t i = lo; i < hi; i++) u[i & 3] = u[i & 3] + s->g[k] * z[i & 3];
    }
    for (uint64_t i = lo; i < hi; i++) th[i & 3] = dz_zo_updated(th[i & 3], u[i & 3], s->q, s->lr, s->wd);
    if (s->out_f32) {
        for (uint64_t i = lo; i < hi; i++) s->out_f32[i - s->i0] = th[i & 3];
        return;
    }
    uint32_t x[4];
    dz_philox_block_of(x, s->seed, DZ_PURPOSE_SR, s->tensor, d0, (uint64_t)j << 2);
    for (uint64_t i = lo; i < hi; i++) {
        const uint16_t h = dz_bf16_round_stochastic(th[i & 3], x[i & 3]);
        s->out_bf16[i - s->i0] = h;
        th[i & 3] = dz_bf16_widen(h);
    }
}

/* DZ_SPAN_PASS: perturb_pair*, update_*, update_then_perturb_*. */
DZ_HD static inline void dz_zo_pass_block(const dz_zo_span *s, uint64_t b) {
    uint64_t lo, hi;
    const uint32_t j = dz_zo_span_block_range(s, b, &lo, &hi);
    float th[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint64_t i = lo; i < hi; i++)
        th[i & 3] = s->in_f32 ? s->in_f32[i - s->i0] : dz_bf16_widen(s->in_bf16[i - s->i0]);
    if (s->has_update) dz_zo_update_block(s, j, lo, hi, th);
    if (!s->w_plus) return;
    float z[4];
    dz_z_block(z, s->seed, s->tensor, s->draw, j, s->dist);
    for (uint64_t i = lo; i < hi; i++)
        dz_zo_pair(th[i & 3], z[i & 3], s->eps, &s->w_plus[i - s->i0], &s->w_minus[i - s->i0]);
}

/* DZ_SPAN_ROUND: stochastic rounding of f32 values with the purpose-1 words of `draw`. */
DZ_HD static inline void dz_zo_round_block(const dz_zo_span *s, uint64_t b) {
    uint64_t lo, hi;
    const uint32_t j = dz_zo_span_block_range(s, b, &lo, &hi);
    uint32_t x[4];
    dz_philox_block_of(x, s->seed, DZ_PURPOSE_SR, s->tensor, s->draw, (uint64_t)j << 2);
    for (uint64_t i = lo; i < hi; i++)
        s->out_bf16[i - s->i0] = dz_bf16_round_stochastic(s->in_f32[i - s->i0], x[i & 3]);
}

DZ_HD static inline void dz_zo_span_block(const dz_zo_span *s, uint64_t b) {
    if (s->mode == DZ_SPAN_PASS) dz_zo_pass_block(s, b);
    else if (s->mode == DZ_SPAN_ROUND) dz_zo_round_block(s, b);
    else dz_zo_fill_block(s, b);
}

/* The whole span on the host, block after block (what a kernel does with a thread each). */
static inline void dz_zo_span_run_host(const dz_zo_span *s) {
    const uint64_t nb = dz_zo_span_blocks(s);
    for (uint64_t b = 0; b < nb; b++) dz_zo_span_block(s, b);
}

#endif
