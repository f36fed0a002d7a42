/* The CUDA backend instance (cuda_backend.h): the seam and its stream are the state every
 * op reaches through be->ctx. */
#include "backend/cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_zo_ops.h"

typedef struct cuda_ctx {
    dz_cuda_seam *seam;
    dz_cuda_stream stream; /* every op of the instance, in call order */
    int owns_seam;
    dz_cuda_attn_stage attn; /* the attention launches' sequences (cuda_attention.h) */
    int status;            /* the first error an op met (DZ_CUDA_OK: none) */
    char msg[256];
} cuda_ctx;

static cuda_ctx *ctx_of(const dz_backend *be) { return be->ctx; }

/* Keeps the first failure, with the seam's words for it. */
static void note(cuda_ctx *c, int status) {
    if (status == DZ_CUDA_OK || c->status != DZ_CUDA_OK) return;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", c->seam->last_error(c->seam));
}

static void cu_upload(const dz_backend *be, void *dst, const void *src, size_t n) {
    cuda_ctx *c = ctx_of(be); /* returns once src may be reused: the copy is waited for */
    note(c, c->seam->memcpy_async(c->seam, dst, src, n, DZ_COPY_H2D, c->stream));
    note(c, c->seam->stream_synchronize(c->seam, c->stream));
}

static const void *cu_upload_view(const dz_backend *be, void *dst, const void *src, size_t n) {
    cu_upload(be, dst, src, n);
    return dst;
}

static void cu_download(const dz_backend *be, void *dst, const void *src, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->memcpy_async(c->seam, dst, src, n, DZ_COPY_D2H, c->stream));
    note(c, c->seam->stream_synchronize(c->seam, c->stream));
}

static void cu_synchronize(const dz_backend *be) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->stream_synchronize(c->seam, c->stream));
}

/* Device memory, zero-filled as the table promises (device memory holds garbage): zeros
 * uploaded from the host. NULL when out of memory. */
static void *cu_alloc(const dz_backend *be, size_t bytes) {
    cuda_ctx *c = ctx_of(be);
    void *d = NULL, *zeros = calloc(1, bytes ? bytes : 1);
    const int st = zeros ? c->seam->dev_alloc(c->seam, &d, bytes) : DZ_CUDA_ERR_MEMORY;
    if (st == DZ_CUDA_OK) cu_upload(be, d, zeros, bytes);
    free(zeros);
    return st == DZ_CUDA_OK ? d : NULL;
}

static void cu_free(const dz_backend *be, void *buf) {
    cuda_ctx *c = ctx_of(be);
    if (buf) note(c, c->seam->dev_free(c->seam, buf));
}

static void cu_z_fill(const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                      size_t n, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_z_fill(c->seam, c->stream, z, seed, tensor, draw, i0, n, dist));
}

static void cu_philox_fill(const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor,
                           uint32_t draw, uint64_t i0, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_philox_fill(c->seam, c->stream, x, seed, purpose, tensor, draw, i0, n));
}

static void cu_perturb_pair(const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n,
                            float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_perturb_pair(c->seam, c->stream, theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0, dist));
}

static void cu_perturb_pair_bf16(const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                                 float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_perturb_pair_bf16(c->seam, c->stream, theta, w_plus, w_minus, n, eps, seed, tensor, draw, i0,
                                      dist));
}

static void cu_update_f32(const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd,
                          uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_update_f32(c->seam, c->stream, theta, n, g, q, lr, wd, seed, tensor, step, i0, dist));
}

static void cu_update_bf16(const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd,
                           uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_update_bf16(c->seam, c->stream, theta, n, g, q, lr, wd, seed, tensor, step, i0, dist));
}

static void cu_update_then_perturb_f32(const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n,
                                       const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                       uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_update_then_perturb_f32(c->seam, c->stream, theta, w_plus, w_minus, n, upd, eps, seed, tensor,
                                            next_draw, i0, dist));
}

static void cu_update_then_perturb_bf16(const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus,
                                        size_t n, const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                        uint32_t next_draw, uint64_t i0, dz_zdist dist) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_update_then_perturb_bf16(c->seam, c->stream, theta, w_plus, w_minus, n, upd, eps, seed, tensor,
                                             next_draw, i0, dist));
}

static void cu_attention(const dz_backend *be, float *out, const float *q, const dz_attn_args *a) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_attention(c->seam, c->stream, &c->attn, out, q, a));
}

static void cu_destroy(dz_backend *be) {
    cuda_ctx *c = ctx_of(be);
    dz_cuda_attn_stage_free(c->seam, &c->attn);
    c->seam->stream_destroy(c->seam, c->stream);
    if (c->owns_seam) c->seam->destroy(c->seam);
    free(c);
    free(be);
}

/* The forward's ops but attention stay NULL until the CUDA forward exists (docs/CUDA.md). */
static const dz_backend_ops cuda_ops = {
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .upload_view = cu_upload_view,
    .download = cu_download,
    .synchronize = cu_synchronize,
    .attention = cu_attention,
    .z_fill = cu_z_fill,
    .philox_fill = cu_philox_fill,
    .perturb_pair = cu_perturb_pair,
    .perturb_pair_bf16 = cu_perturb_pair_bf16,
    .update_f32 = cu_update_f32,
    .update_bf16 = cu_update_bf16,
    .update_then_perturb_f32 = cu_update_then_perturb_f32,
    .update_then_perturb_bf16 = cu_update_then_perturb_bf16,
    .destroy = cu_destroy,
};

dz_status dz_backend_cuda_create_on(dz_cuda_seam *s, int owns_seam, dz_backend **out, dz_error *err) {
    *out = NULL;
    dz_backend *be = calloc(1, sizeof *be);
    cuda_ctx *c = calloc(1, sizeof *c);
    const int st = be && c ? s->stream_create(s, &c->stream) : DZ_CUDA_ERR_MEMORY;
    if (st != DZ_CUDA_OK) {
        free(be);
        free(c);
        return dz_fail(err, DZ_ERR_NOMEM, "cuda backend: no stream (status %d): %s", st, s->last_error(s));
    }
    c->seam = s, c->owns_seam = owns_seam;
    *be = (dz_backend){.name = "cuda", .host_buffers = 0, .ops = &cuda_ops, .ctx = c};
    *out = be;
    return DZ_OK;
}

int dz_backend_cuda_status(const dz_backend *be, char *msg, size_t cap) {
    const cuda_ctx *c = ctx_of(be);
    if (msg && cap) snprintf(msg, cap, "%s", c->msg);
    return c->status;
}
