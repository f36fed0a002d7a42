/* The CUDA backend instance (cuda_backend.h): the seam and its stream are the state every
 * op reaches through be->ctx. */
#include "backend/cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_forward_ops.h"
#include "backend/cuda/cuda_zo_ops.h"
#include "backend/cuda/sliced_upload.h"
#include "backend/stream_ops.h"

typedef struct cuda_ctx {
    dz_cuda_seam *seam;
    dz_cuda_stream stream; /* every op of the instance, in call order */
    int owns_seam;
    dz_gpu_math math;      /* the matrix products' compute type (--gpu-math; tf32 by default) */
    dz_cuda_attn_stage attn; /* the attention launches' sequences (cuda_attention.h) */
    int status;            /* the first error an op met (DZ_CUDA_OK: none) */
    char msg[256];
    dz_cuda_stream lane[2];                 /* DZ_LANE_UPLOAD, DZ_LANE_WRITEBACK (stream: COMPUTE) */
    dz_cuda_event marks[DZ_STREAM_MARKS];   /* backend/stream_ops.h's marks */
    dz_cuda_comm node_comm;                 /* DistZO2: this GPU's member of the node's group (set_node) */
    int node_rank, node_n;                  /* its rank, the node's GPUs (0: alone) */
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

/* ---- the forward (cuda_forward_ops.h) ---- */

static void cu_matmul(const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                      int K) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_matmul(c->seam, c->stream, c->math, y, x, w, bias, M, N, K));
}

static void cu_layernorm(const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows,
                         int dim, float eps) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_layernorm(c->seam, c->stream, y, x, w, b, rows, dim, eps));
}

static void cu_rmsnorm(const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_rmsnorm(c->seam, c->stream, y, x, w, rows, dim, eps));
}

static void cu_rope(const dz_backend *be, float *x, int rows, const int *pos, int n_heads, int head_dim,
                    const float *cos_sin) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_rope(c->seam, c->stream, x, rows, pos, n_heads, head_dim, cos_sin));
}

static void cu_relu(const dz_backend *be, float *x, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_relu(c->seam, c->stream, x, n));
}

static void cu_swiglu(const dz_backend *be, float *gate, const float *up, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_swiglu(c->seam, c->stream, gate, up, n));
}

static void cu_add(const dz_backend *be, float *y, const float *x, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_add(c->seam, c->stream, y, x, n));
}

static void cu_fill(const dz_backend *be, float *x, float v, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_fill(c->seam, c->stream, x, v, n));
}

static void cu_copy_rows(const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows,
                         int nrows, int cols) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_copy_rows(c->seam, c->stream, dst, dst_rows, src, src_rows, nrows, cols));
}

static void cu_logsumexp_update(const dz_backend *be, const float *logits, int rows, int n, float *m, float *s) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_logsumexp_update(c->seam, c->stream, logits, rows, n, m, s));
}

static void cu_pick_target(const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets,
                           int v0) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_pick_target(c->seam, c->stream, out, logits, rows, n, targets, v0));
}

static void cu_logprob_finish(const dz_backend *be, float *out, const float *target, const float *m, const float *s,
                              int rows) {
    cuda_ctx *c = ctx_of(be);
    note(c, dz_cuda_logprob_finish(c->seam, c->stream, out, target, m, s, rows));
}

/* ---- the ZO step (cuda_zo_ops.h) ---- */

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

/* ---- overlapped transfers (backend/stream_ops.h) ---- */

static dz_cuda_stream lane_stream(const cuda_ctx *c, dz_lane lane) {
    return lane == DZ_LANE_COMPUTE ? c->stream : c->lane[lane == DZ_LANE_UPLOAD ? 0 : 1];
}

static int cu_pin(const dz_backend *be, void *p, size_t n) {
    cuda_ctx *c = ctx_of(be); /* a failure is no op's error: the copies run unpinned */
    return c->seam->host_register(c->seam, p, n);
}

static void cu_unpin(const dz_backend *be, void *p) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->host_unregister(c->seam, p));
}

static void cu_upload_async(const dz_backend *be, void *dst, const void *src, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->memcpy_async(c->seam, dst, src, n, DZ_COPY_H2D, lane_stream(c, DZ_LANE_UPLOAD)));
}

static void cu_download_async(const dz_backend *be, void *dst, const void *src, size_t n) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->memcpy_async(c->seam, dst, src, n, DZ_COPY_D2H, lane_stream(c, DZ_LANE_WRITEBACK)));
}

static void cu_mark(const dz_backend *be, int m, dz_lane lane) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->event_record(c->seam, c->marks[m], lane_stream(c, lane)));
}

static void cu_wait(const dz_backend *be, dz_lane lane, int m) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->stream_wait_event(c->seam, lane_stream(c, lane), c->marks[m]));
}

static void cu_drain(const dz_backend *be) {
    cuda_ctx *c = ctx_of(be);
    for (int l = 0; l < DZ_LANES; l++) note(c, c->seam->stream_synchronize(c->seam, lane_stream(c, (dz_lane)l)));
}

static void cu_settle(const dz_backend *be, int m) {
    cuda_ctx *c = ctx_of(be);
    note(c, c->seam->event_synchronize(c->seam, c->marks[m]));
}

static void *cu_seam(const dz_backend *be) { return ctx_of(be)->seam; }

static void cu_set_node(const dz_backend *be, void *comm, int rank, int n) {
    cuda_ctx *c = ctx_of(be);
    c->node_comm = comm, c->node_rank = rank, c->node_n = n;
}

static int cu_node_gpus(const dz_backend *be, int *rank) {
    const cuda_ctx *c = ctx_of(be);
    *rank = c->node_n > 1 ? c->node_rank : 0;
    return c->node_n > 1 ? c->node_n : 1;
}

static void cu_upload_node(const dz_backend *be, void *dst, const void *src, size_t n) {
    cuda_ctx *c = ctx_of(be);
    int rank = 0;
    const int gpus = cu_node_gpus(be, &rank);
    note(c, dz_sliced_upload_on(c->seam, c->node_comm, rank, gpus, dst, src, n, lane_stream(c, DZ_LANE_UPLOAD)));
}

static const dz_stream_ops cuda_stream_ops = {
    .seam = cu_seam,
    .set_node = cu_set_node,
    .node_gpus = cu_node_gpus,
    .upload_node = cu_upload_node,
    .pin = cu_pin,
    .unpin = cu_unpin,
    .upload_async = cu_upload_async,
    .download_async = cu_download_async,
    .mark = cu_mark,
    .wait = cu_wait,
    .drain = cu_drain,
    .settle = cu_settle,
};

/* The transfer lanes and the marks: DZ_CUDA_OK, or the first failure. */
static int lanes_create(cuda_ctx *c) {
    int st = DZ_CUDA_OK;
    for (int i = 0; i < 2 && st == DZ_CUDA_OK; i++) st = c->seam->stream_create(c->seam, &c->lane[i]);
    for (int m = 0; m < DZ_STREAM_MARKS && st == DZ_CUDA_OK; m++) st = c->seam->event_create(c->seam, &c->marks[m]);
    return st;
}

static void lanes_destroy(cuda_ctx *c) {
    for (int m = 0; m < DZ_STREAM_MARKS; m++)
        if (c->marks[m]) c->seam->event_destroy(c->seam, c->marks[m]);
    for (int i = 0; i < 2; i++)
        if (c->lane[i]) c->seam->stream_destroy(c->seam, c->lane[i]);
}

static void cu_destroy(dz_backend *be) {
    cuda_ctx *c = ctx_of(be);
    dz_cuda_attn_stage_free(c->seam, &c->attn);
    lanes_destroy(c);
    c->seam->stream_destroy(c->seam, c->stream);
    if (c->owns_seam) c->seam->destroy(c->seam);
    free(c);
    free(be);
}

/* Every op of the table. */
static const dz_backend_ops cuda_ops = {
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .upload_view = cu_upload_view,
    .download = cu_download,
    .synchronize = cu_synchronize,
    .matmul = cu_matmul,
    .layernorm = cu_layernorm,
    .rmsnorm = cu_rmsnorm,
    .rope = cu_rope,
    .relu = cu_relu,
    .swiglu = cu_swiglu,
    .add = cu_add,
    .fill = cu_fill,
    .copy_rows = cu_copy_rows,
    .logsumexp_update = cu_logsumexp_update,
    .pick_target = cu_pick_target,
    .logprob_finish = cu_logprob_finish,
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
    int st = be && c ? s->stream_create(s, &c->stream) : DZ_CUDA_ERR_MEMORY;
    if (st == DZ_CUDA_OK) c->seam = s, st = lanes_create(c);
    if (st != DZ_CUDA_OK) {
        if (c && c->stream) lanes_destroy(c), s->stream_destroy(s, c->stream);
        free(be);
        free(c);
        return dz_fail(err, DZ_ERR_NOMEM, "cuda backend: no stream or event (status %d): %s", st, s->last_error(s));
    }
    c->owns_seam = owns_seam;
    *be = (dz_backend){.name = "cuda", .host_buffers = 0, .ops = &cuda_ops, .ctx = c, .streams = &cuda_stream_ops};
    *out = be;
    return DZ_OK;
}

int dz_backend_cuda_status(const dz_backend *be, char *msg, size_t cap) {
    const cuda_ctx *c = ctx_of(be);
    if (msg && cap) snprintf(msg, cap, "%s", c->msg);
    return c->status;
}

void dz_backend_cuda_set_math(dz_backend *be, dz_gpu_math math) { ctx_of(be)->math = math; }

dz_gpu_math dz_backend_cuda_math(const dz_backend *be) { return ctx_of(be)->math; }

dz_cuda_seam *dz_backend_cuda_seam(const dz_backend *be) { return ctx_of(be)->seam; }
