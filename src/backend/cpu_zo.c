/* The CPU backend's ZO span ops (backend.h; the contract: backend/zo_ops.h). All are one
 * span walker over 1024-element chunks: per chunk, widen theta (bf16), apply the pending
 * update (z of each sample's draw, accumulated in the spec's order), store theta (stochastic
 * rounding for bf16), then write the pair for the next draw from the stored value. Unfused
 * calls are the same walker with parts switched off, so fused and unfused results are equal
 * by construction (and tested). Chunks after the first start on a Philox block boundary, so
 * no block is generated twice. The elementwise loops have no reductions, so every level's
 * variant (backend/cpu_simd.h) gives the same bits; long spans write w+ and w- with
 * streaming stores (ZO_STREAM_MIN), which changes where the bytes go, not what they are. */
#include "backend/cpu_zo.h"

#include "backend/cpu_simd.h"
#include "backend/cpu_zo_update.h"
#include "backend/zo_rng_v2.h"

#include <immintrin.h>

#define ZO_CHUNK 1024
/* Spans of at least this many elements write w+ and w- with streaming (non-temporal)
 * stores: the pipeline's working copies (a layer block, a head chunk: megabytes) outgrow
 * the caches before the forward reads them back, so ordinary stores would first read
 * every line they write (the read-for-ownership) and then evict it anyway. Stores only:
 * the values, hence the bits, are the same either way. */
#define ZO_STREAM_MIN 16384

typedef struct span_io {
    const float *in_f32;     /* theta read from here (f32 master) ... */
    const uint16_t *in_bf16; /* ... or widened from here (bf16 master) */
    float *out_f32;          /* updated theta (f32), NULL without an update */
    uint16_t *out_bf16;      /* updated theta (bf16), NULL without an update */
    float *w_plus, *w_minus; /* NULL: no pair */
} span_io;

/* h = stochastic_round(th, x); th = widen(h), the value the rest of the step sees. */
DZ_ISA_VARIANTS(round_bf16, (uint16_t *h, float *th, const uint32_t *x, size_t n), (h, th, x, n)) {
    for (size_t i = 0; i < n; i++) {
        h[i] = dz_bf16_round_stochastic(th[i], x[i]);
        th[i] = dz_zo_u2f((uint32_t)h[i] << 16);
    }
}

/* dz_zo_make_pair with streaming stores, one copy at a time (w+ and w- need not share an
 * alignment): ordinary stores up to dst's first W-float boundary and after the last,
 * STREAM (an aligned non-temporal store of W floats) in between. The same arithmetic as
 * dz_zo_make_pair, element by element. */
#define ZO_DEFINE_STREAM_PAIR(name, attr, W, STREAM)                                                       \
    typedef float name##_f32v __attribute__((vector_size(4 * (W))));                                       \
    attr static inline void name##_stream_half(float *dst, const float *th, const float *z, float eps,     \
                                               size_t n, int minus) {                                      \
        size_t i = 0;                                                                                      \
        for (; i < n && ((uintptr_t)(dst + i) & (4 * (W) - 1)); i++)                                       \
            dst[i] = minus ? th[i] - eps * z[i] : th[i] + eps * z[i];                                      \
        for (; i + (W) <= n; i += (W)) {                                                                   \
            name##_f32v t, e;                                                                              \
            memcpy(&t, th + i, sizeof t), memcpy(&e, z + i, sizeof e);                                     \
            e = eps * e;                                                                                   \
            STREAM(dst + i, minus ? t - e : t + e);                                                        \
        }                                                                                                  \
        for (; i < n; i++) dst[i] = minus ? th[i] - eps * z[i] : th[i] + eps * z[i];                       \
    }                                                                                                      \
    attr static void name##_stream_pair(float *wp, float *wm, const float *th, const float *z, float eps,  \
                                        size_t n) {                                                        \
        name##_stream_half(wp, th, z, eps, n, 0);                                                          \
        name##_stream_half(wm, th, z, eps, n, 1);                                                          \
    }

#define ZO_STREAM_SSE(p, v) _mm_stream_ps((p), (__m128)(v))
#define ZO_STREAM_AVX2(p, v) _mm256_stream_ps((p), (__m256)(v))
#define ZO_STREAM_AVX512(p, v) _mm512_stream_ps((p), (__m512)(v))

ZO_DEFINE_STREAM_PAIR(sse, DZ_ISA_TARGET_BASELINE, 4, ZO_STREAM_SSE)
ZO_DEFINE_STREAM_PAIR(avx2, DZ_ISA_TARGET_AVX2, 8, ZO_STREAM_AVX2)
ZO_DEFINE_STREAM_PAIR(avx512, DZ_ISA_TARGET_AVX512, 16, ZO_STREAM_AVX512)

/* The level's streaming dz_zo_make_pair: isa is a constant in each variant. */
DZ_ISA_VARIANTS(make_pair_streaming, (float *wp, float *wm, const float *th, const float *z, float eps, size_t n),
                (wp, wm, th, z, eps, n)) {
    if (isa == DZ_ISA_AVX512) avx512_stream_pair(wp, wm, th, z, eps, n);
    else if (isa == DZ_ISA_AVX2) avx2_stream_pair(wp, wm, th, z, eps, n);
    else sse_stream_pair(wp, wm, th, z, eps, n);
}

/* Elements i .. i+m-1 (m <= ZO_CHUNK), at offset off into the io arrays. The CPU backend
 * has no state: its fills run on no instance (NULL). */
static void chunk(const span_io *io, size_t off, size_t m, const dz_zo_update *upd, float eps, uint64_t seed,
                  uint32_t tensor, uint32_t next_draw, uint64_t i, dz_zdist dist, int streaming) {
    float buf[ZO_CHUNK], z[ZO_CHUNK];
    const float *th = io->in_f32 ? io->in_f32 + off : buf;
    if (!io->in_f32) dz_zo_widen_bf16(buf, io->in_bf16 + off, m);
    if (upd) {
        float u[ZO_CHUNK];
        const uint32_t d0 = upd->step * (uint32_t)upd->q;
        for (int j = 0; j < upd->q; j++) {
            dz_cpu_z_fill(NULL, z, seed, tensor, d0 + (uint32_t)j, i, m, dist);
            dz_zo_add_scaled(u, upd->g[j], z, m, j == 0);
        }
        if (io->out_f32) {
            dz_zo_apply_update(io->out_f32 + off, th, u, m, upd->q, upd->lr, upd->wd);
            th = io->out_f32 + off;
        } else {
            uint32_t x[ZO_CHUNK];
            dz_zo_apply_update(buf, buf, u, m, upd->q, upd->lr, upd->wd);
            dz_cpu_philox_fill(NULL, x, seed, DZ_PURPOSE_SR, tensor, d0, i, m);
            round_bf16(io->out_bf16 + off, buf, x, m);
        }
    }
    if (io->w_plus) {
        dz_cpu_z_fill(NULL, z, seed, tensor, next_draw, i, m, dist);
        if (streaming) make_pair_streaming(io->w_plus + off, io->w_minus + off, th, z, eps, m);
        else dz_zo_make_pair(io->w_plus + off, io->w_minus + off, th, z, eps, m);
    }
}

static void run_span(const span_io *io, size_t n, const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                     uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    const int streaming = io->w_plus && n >= ZO_STREAM_MIN;
    /* chunks end on whole fill units, so no unit is generated twice: Philox blocks (v1) or
     * v2's groups of 128 (ZO_CHUNK is a multiple of both) */
    const uint64_t unit = (dist & DZ_Z_GAUSSIAN_V2) ? DZ_ZV2_GROUP : 4;
    for (size_t done = 0; done < n;) {
        const uint64_t i = i0 + done;
        size_t m = ZO_CHUNK - (size_t)(i % unit);
        if (m > n - done) m = n - done;
        chunk(io, done, m, upd, eps, seed, tensor, next_draw, i, dist, streaming);
        done += m;
    }
    if (streaming) _mm_sfence(); /* streaming stores are weakly ordered: done before any thread reads them */
}

void dz_cpu_perturb_pair(const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n, float eps,
                         uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    const span_io io = {.in_f32 = theta, .w_plus = w_plus, .w_minus = w_minus};
    run_span(&io, n, NULL, eps, seed, tensor, draw, i0, dist);
}

void dz_cpu_perturb_pair_bf16(const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                              float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    const span_io io = {.in_bf16 = theta, .w_plus = w_plus, .w_minus = w_minus};
    run_span(&io, n, NULL, eps, seed, tensor, draw, i0, dist);
}

void dz_cpu_update_f32(const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd,
                       uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    dz_cpu_update_then_perturb_f32(be, theta, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

void dz_cpu_update_bf16(const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd,
                        uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    dz_cpu_update_then_perturb_bf16(be, theta, NULL, NULL, n, &upd, 0.0f, seed, tensor, 0, i0, dist);
}

void dz_cpu_update_then_perturb_f32(const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n,
                                    const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                    uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    const span_io io = {.in_f32 = theta, .out_f32 = upd ? theta : NULL, .w_plus = w_plus, .w_minus = w_minus};
    run_span(&io, n, upd, eps, seed, tensor, next_draw, i0, dist);
}

void dz_cpu_update_then_perturb_bf16(const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                                     const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                     uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    const span_io io = {.in_bf16 = theta, .out_bf16 = upd ? theta : NULL, .w_plus = w_plus, .w_minus = w_minus};
    run_span(&io, n, upd, eps, seed, tensor, next_draw, i0, dist);
}
