/* Checks that run the CUDA backend's ops through a CUDA seam (backend/cuda/cuda_seam.h):
 * the host implementation in the CPU suite (test_cuda_seam.c), the CUDA runtime on a GPU
 * (test_cuda_gpu.c). Each uploads its inputs, runs the op on a stream, downloads and
 * synchronizes, and compares with the CPU backend (the ZO ops, bitwise) or the reference
 * backend (the matrix product, to a tolerance). Weights hold -0, subnormals and huge
 * values but no NaN or infinity: a GPU's arithmetic returns its one canonical NaN where
 * the CPU propagates the input's (docs/CUDA.md). Header-only, for those two tests. */
#ifndef DZ_TESTS_CUDA_SEAM_OPS_H
#define DZ_TESTS_CUDA_SEAM_OPS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_seam.h"
#include "backend/cuda/cuda_zo_ops.h"
#include "cuda_seam_ok.h"

static void *seam_upload(dz_cuda_seam *s, dz_cuda_stream st, const void *host, size_t bytes) {
    void *d = NULL;
    SEAM_OK(s, s->dev_alloc(s, &d, bytes));
    SEAM_OK(s, s->memcpy_async(s, d, host, bytes, DZ_COPY_H2D, st));
    return d;
}

static void seam_download(dz_cuda_seam *s, dz_cuda_stream st, void *host, const void *d, size_t bytes) {
    SEAM_OK(s, s->memcpy_async(s, host, d, bytes, DZ_COPY_D2H, st));
    SEAM_OK(s, s->stream_synchronize(s, st));
}

/* theta ~ N(0, 0.05^2) with -0, a subnormal and a huge value among them (no NaN or inf). */
static void seam_theta(float *th, uint16_t *th_h, size_t n, uint64_t salt) {
    static const uint32_t special[] = {0x80000000u, 0x00000301u, 0x7E7FFFFFu, 0x80800000u};
    uint64_t st = salt;
    for (size_t i = 0; i < n; i++) th[i] = (float)(0.05 * dz_normal(&st));
    for (size_t k = 0; k < 4; k++)
        if (5 * k + 2 < n) th[5 * k + 2] = dz_zo_u2f(special[k]);
    for (size_t i = 0; i < n; i++) th_h[i] = (uint16_t)(dz_zo_f2u(th[i]) >> 16);
}

typedef struct seam_case {
    uint64_t seed, i0;
    uint32_t tensor, step, q;
    size_t n;
    dz_zdist dist;
    float wd;
} seam_case;

static const seam_case seam_cases[] = {
    {0, 0, 0, 0, 1, 1, DZ_Z_GAUSSIAN, 0.0f},
    {42, 3, 5, 7, 2, 1029, DZ_Z_RADEMACHER, 0.01f},
    {UINT64_MAX, 1022, UINT32_MAX, UINT32_MAX / 3 + 1, 3, 4099, DZ_Z_GAUSSIAN, -0.0f},
    {0x243F6A8885A308D3ull, (1ull << 34) - 70001, 11, 123456, 64, 70001, DZ_Z_GAUSSIAN, 0.1f},
};

/* PASS op `kind` (0 pair, 1 update, 2 fused), theta in place: on the CPU backend (s NULL)
 * or as the CUDA backend runs it (backend/cuda/cuda_zo_ops.h) through seam s on stream st. */
static void pass_op(dz_cuda_seam *s, dz_cuda_stream st, const seam_case *c, int kind, int bf16, const float *g,
                    void *th, float *wp, float *wm) {
    const dz_backend *cpu = dz_backend_cpu();
    const uint64_t S = c->seed, i0 = c->i0;
    const uint32_t t = c->tensor, step = c->step, next = (step + 1) * c->q;
    const size_t n = c->n;
    const dz_zdist dist = c->dist;
    const float lr = 0.0625f, eps = 1e-3f, wd = c->wd;
    const int q = (int)c->q;
    const dz_zo_update upd = {.g = g, .q = q, .lr = lr, .wd = wd, .step = step};
    if (!s) {
        if (kind == 0 && bf16) cpu->ops->perturb_pair_bf16(cpu, th, wp, wm, n, eps, S, t, next, i0, dist);
        else if (kind == 0) cpu->ops->perturb_pair(cpu, th, wp, wm, n, eps, S, t, next, i0, dist);
        else if (kind == 1 && bf16) cpu->ops->update_bf16(cpu, th, n, g, q, lr, wd, S, t, step, i0, dist);
        else if (kind == 1) cpu->ops->update_f32(cpu, th, n, g, q, lr, wd, S, t, step, i0, dist);
        else if (bf16) cpu->ops->update_then_perturb_bf16(cpu, th, wp, wm, n, &upd, eps, S, t, next, i0, dist);
        else cpu->ops->update_then_perturb_f32(cpu, th, wp, wm, n, &upd, eps, S, t, next, i0, dist);
        return;
    }
    int r;
    if (kind == 0 && bf16) r = dz_cuda_perturb_pair_bf16(s, st, th, wp, wm, n, eps, S, t, next, i0, dist);
    else if (kind == 0) r = dz_cuda_perturb_pair(s, st, th, wp, wm, n, eps, S, t, next, i0, dist);
    else if (kind == 1 && bf16) r = dz_cuda_update_bf16(s, st, th, n, g, q, lr, wd, S, t, step, i0, dist);
    else if (kind == 1) r = dz_cuda_update_f32(s, st, th, n, g, q, lr, wd, S, t, step, i0, dist);
    else if (bf16) r = dz_cuda_update_then_perturb_bf16(s, st, th, wp, wm, n, &upd, eps, S, t, next, i0, dist);
    else r = dz_cuda_update_then_perturb_f32(s, st, th, wp, wm, n, &upd, eps, S, t, next, i0, dist);
    SEAM_OK(s, r);
}

/* One PASS op through the seam and on the CPU backend. */
static void seam_pass_matches_cpu(dz_cuda_seam *s, dz_cuda_stream st, const seam_case *c, int kind, int bf16,
                                  const float *g, const float *th0, const uint16_t *th0_h) {
    const size_t n = c->n, tb = n * (bf16 ? 2 : 4);
    const void *th = bf16 ? (const void *)th0_h : (const void *)th0;
    float *want = calloc(3 * n, sizeof(float)), *got = calloc(3 * n, sizeof(float)); /* theta, w+, w- */
    memcpy(want, th, tb);
    pass_op(NULL, NULL, c, kind, bf16, g, want, want + n, want + 2 * n);
    float *d_th = seam_upload(s, st, th, tb), *d_w = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&d_w, 2 * n * sizeof(float)));
    pass_op(s, st, c, kind, bf16, g, d_th, kind == 1 ? NULL : d_w, kind == 1 ? NULL : d_w + n);
    SEAM_OK(s, s->memcpy_async(s, got, d_th, tb, DZ_COPY_D2H, st));
    if (kind != 1) SEAM_OK(s, s->memcpy_async(s, got + n, d_w, 2 * n * sizeof(float), DZ_COPY_D2H, st));
    SEAM_OK(s, s->stream_synchronize(s, st));
    if (memcmp(got, want, 3 * n * sizeof(float)) != 0)
        fail_msg("%s: pass kind %d (%s) differs from the CPU backend (n %zu, q %u)", s->name, kind,
                 bf16 ? "bf16" : "f32", n, c->q);
    SEAM_OK(s, s->dev_free(s, d_th));
    SEAM_OK(s, s->dev_free(s, d_w));
    free(want), free(got);
}

/* z_fill, philox_fill (purpose 1) and the stochastic rounding through the seam. */
static void seam_fills_match_cpu(dz_cuda_seam *s, dz_cuda_stream st, const seam_case *c, const float *v) {
    const size_t n = c->n;
    const uint32_t draw = c->step * c->q;
    float *z = malloc(n * 4), *z_got = malloc(n * 4);
    uint32_t *x = malloc(n * 4), *x_got = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *h_got = malloc(n * 2);
    float *d_z = NULL, *d_v = seam_upload(s, st, v, n * 4);
    uint32_t *d_x = NULL;
    uint16_t *d_h = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&d_z, n * 4));
    SEAM_OK(s, s->dev_alloc(s, (void **)&d_x, n * 4));
    SEAM_OK(s, s->dev_alloc(s, (void **)&d_h, n * 2));
    SEAM_OK(s, dz_cuda_z_fill(s, st, d_z, c->seed, c->tensor, draw, c->i0, n, c->dist));
    SEAM_OK(s, dz_cuda_philox_fill(s, st, d_x, c->seed, DZ_PURPOSE_SR, c->tensor, draw, c->i0, n));
    SEAM_OK(s, dz_cuda_round_bf16(s, st, d_h, d_v, n, c->seed, c->tensor, draw, c->i0));
    SEAM_OK(s, s->memcpy_async(s, z_got, d_z, n * 4, DZ_COPY_D2H, st));
    SEAM_OK(s, s->memcpy_async(s, x_got, d_x, n * 4, DZ_COPY_D2H, st));
    seam_download(s, st, h_got, d_h, n * 2);
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), z, c->seed, c->tensor, draw, c->i0, n, c->dist);
    dz_backend_cpu()->ops->philox_fill(dz_backend_cpu(), x, c->seed, DZ_PURPOSE_SR, c->tensor, draw, c->i0, n);
    for (size_t i = 0; i < n; i++) h[i] = dz_bf16_round_stochastic(v[i], x[i]);
    if (memcmp(z, z_got, n * 4)) fail_msg("%s: z_fill differs from the CPU backend (n %zu)", s->name, n);
    if (memcmp(x, x_got, n * 4)) fail_msg("%s: philox_fill differs from the CPU backend (n %zu)", s->name, n);
    if (memcmp(h, h_got, n * 2)) fail_msg("%s: the stochastic rounding differs from the CPU's (n %zu)", s->name, n);
    SEAM_OK(s, s->dev_free(s, d_z));
    SEAM_OK(s, s->dev_free(s, d_x));
    SEAM_OK(s, s->dev_free(s, d_h));
    SEAM_OK(s, s->dev_free(s, d_v));
    free(z), free(z_got), free(x), free(x_got), free(h), free(h_got);
}

/* Every ZO op of backend.h, as a CUDA backend will run it, bitwise the CPU backend's. */
static void seam_zo_ops_match_cpu(dz_cuda_seam *s) {
    dz_cuda_stream st = NULL;
    SEAM_OK(s, s->stream_create(s, &st));
    for (size_t k = 0; k < sizeof seam_cases / sizeof seam_cases[0]; k++) {
        const seam_case *c = &seam_cases[k];
        float *th = malloc(c->n * 4), g[DZ_ZO_SPAN_MAX_Q];
        uint16_t *th_h = malloc(c->n * 2);
        seam_theta(th, th_h, c->n, 100 + k);
        uint64_t r = 7 + k;
        for (uint32_t j = 0; j < c->q; j++) g[j] = (float)(2.0 * dz_normal(&r));
        for (int kind = 0; kind < 3; kind++)
            for (int bf16 = 0; bf16 < 2; bf16++) seam_pass_matches_cpu(s, st, c, kind, bf16, g, th, th_h);
        seam_fills_match_cpu(s, st, c, th);
        free(th), free(th_h);
    }
    SEAM_OK(s, s->stream_destroy(s, st));
}

/* The Linear layout y[M,N] = x[M,K] w[N,K]^T (+ bias) as the CUDA backend maps it onto
 * column-major cuBLAS: y^T (N x M, ld N) = op_T(w as K x N, ld K) op_N(x^T as K x M, ld K). */
static int seam_linear(dz_cuda_seam *s, dz_cuda_stream st, float *d_y, const float *d_x, const float *d_w, int M, int N,
                       int K) {
    return s->sgemm(s, st, DZ_GEMM_T, DZ_GEMM_N, N, M, K, 1.0f, d_w, K, d_x, K, 0.0f, d_y, N);
}

static void seam_matmul_matches_ref(dz_cuda_seam *s, float tol) {
    const int M = 37, N = 29, K = 70;
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *want = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
    uint64_t r = 3;
    for (int i = 0; i < M * K; i++) x[i] = (float)dz_normal(&r);
    for (int i = 0; i < N * K; i++) w[i] = (float)(0.1 * dz_normal(&r));
    dz_backend_ref()->ops->matmul(dz_backend_ref(), want, x, w, NULL, M, N, K);
    dz_cuda_stream st = NULL;
    SEAM_OK(s, s->stream_create(s, &st));
    float *d_x = seam_upload(s, st, x, sizeof(float) * M * K), *d_w = seam_upload(s, st, w, sizeof(float) * N * K);
    float *d_y = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&d_y, sizeof(float) * M * N));
    SEAM_OK(s, seam_linear(s, st, d_y, d_x, d_w, M, N, K));
    seam_download(s, st, got, d_y, sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
            fail_msg("%s: matmul element %d: %g, the reference %g", s->name, i, got[i], want[i]);
    SEAM_OK(s, s->dev_free(s, d_x));
    SEAM_OK(s, s->dev_free(s, d_w));
    SEAM_OK(s, s->dev_free(s, d_y));
    SEAM_OK(s, s->stream_destroy(s, st));
    free(x), free(w), free(want), free(got);
}

#endif
