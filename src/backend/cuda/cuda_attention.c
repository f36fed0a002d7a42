/* The CUDA backend's attention op (cuda_attention.h): gather the sequences, stage them
 * into device memory, launch. */
#include "backend/cuda/cuda_attention.h"

#include <string.h>

void dz_cuda_attn_stage_free(dz_cuda_seam *s, dz_cuda_attn_stage *stage) {
    if (stage->copied) {
        s->event_synchronize(s, stage->copied);
        s->event_destroy(s, stage->copied);
    }
    if (stage->host) s->host_free(s, stage->host);
    if (stage->dev) s->dev_free(s, stage->dev);
    memset(stage, 0, sizeof *stage);
}

/* Room for batch sequences, and the host array free to refill (its last copy has run). */
static int stage_reserve(dz_cuda_seam *s, dz_cuda_attn_stage *stage, int batch) {
    int st = stage->copied ? s->event_synchronize(s, stage->copied) : s->event_create(s, &stage->copied);
    if (st != DZ_CUDA_OK || batch <= stage->cap) return st;
    const int cap = batch > 2 * stage->cap ? batch : 2 * stage->cap;
    if (stage->host) st = s->host_free(s, stage->host);
    if (st == DZ_CUDA_OK && stage->dev) st = s->dev_free(s, stage->dev); /* waits for the kernels reading it */
    stage->host = NULL, stage->dev = NULL, stage->cap = 0;
    if (st == DZ_CUDA_OK) st = s->host_alloc(s, (void **)&stage->host, sizeof(dz_attn_seq) * (size_t)cap);
    if (st == DZ_CUDA_OK) st = s->dev_alloc(s, (void **)&stage->dev, sizeof(dz_attn_seq) * (size_t)cap);
    if (st == DZ_CUDA_OK) stage->cap = cap;
    return st;
}

/* Sequence b of a as the kernel reads it; the most rows of a sequence go to *max_rows. */
static dz_attn_seq seq_of(const dz_attn_args *a, int b, int *max_rows) {
    const int row0 = a->row0 ? a->row0[b] : b * a->n_new, rows = a->row0 ? a->row0[b + 1] - a->row0[b] : a->n_new;
    const int left = a->lengths[b] - a->start[b], queries = left < 0 ? 0 : left < rows ? left : rows;
    if (rows > *max_rows) *max_rows = rows;
    return (dz_attn_seq){.prefix_k = a->prefix_k[b], .prefix_v = a->prefix_v[b], .own_k = a->own_k[b],
                         .own_v = a->own_v[b], .start = a->start[b], .queries = queries, .row0 = row0, .rows = rows};
}

int dz_cuda_attention(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_attn_stage *stage, float *out, const float *q,
                      const dz_attn_args *a) {
    if (a->batch <= 0) return DZ_CUDA_OK;
    int status = stage_reserve(s, stage, a->batch), max_rows = 0;
    if (status != DZ_CUDA_OK) return status;
    for (int b = 0; b < a->batch; b++) stage->host[b] = seq_of(a, b, &max_rows);
    const size_t bytes = sizeof(dz_attn_seq) * (size_t)a->batch;
    status = s->memcpy_async(s, stage->dev, stage->host, bytes, DZ_COPY_H2D, st);
    if (status == DZ_CUDA_OK) status = s->event_record(s, stage->copied, st);
    if (status != DZ_CUDA_OK) return status;
    const dz_attn_launch L = {.out = out, .q = q, .seqs = stage->dev, .batch = a->batch, .n_heads = a->n_heads,
                              .n_kv_heads = a->n_kv_heads, .head_dim = a->head_dim,
                              .total_rows = a->row0 ? a->row0[a->batch] : a->batch * a->n_new,
                              .query_tiles = (max_rows + DZ_ATTN_QUERY_TILE - 1) / DZ_ATTN_QUERY_TILE,
                              .scale = a->scale};
    return s->attention(s, &L, st);
}
