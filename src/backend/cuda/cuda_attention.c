/* The CUDA backend's attention op (cuda_attention.h): gather the sequences, stage them
 * into device memory, launch. */
#include "backend/cuda/cuda_attention.h"

#include <string.h>

/* Every slot's copy has run. */
static int stage_drain(dz_cuda_seam *s, dz_cuda_attn_stage *stage) {
    int st = DZ_CUDA_OK;
    for (int i = 0; i < DZ_ATTN_STAGE_SLOTS && st == DZ_CUDA_OK; i++)
        if (stage->copied[i]) st = s->event_synchronize(s, stage->copied[i]);
    return st;
}

void dz_cuda_attn_stage_free(dz_cuda_seam *s, dz_cuda_attn_stage *stage) {
    stage_drain(s, stage);
    for (int i = 0; i < DZ_ATTN_STAGE_SLOTS; i++)
        if (stage->copied[i]) s->event_destroy(s, stage->copied[i]);
    if (stage->host) s->host_free(s, stage->host);
    if (stage->dev) s->dev_free(s, stage->dev);
    memset(stage, 0, sizeof *stage);
}

/* Room for batch sequences in every slot (all copies drained first when it grows). */
static int stage_grow(dz_cuda_seam *s, dz_cuda_attn_stage *stage, int batch) {
    const int cap = batch > 2 * stage->cap ? batch : 2 * stage->cap;
    int st = stage_drain(s, stage);
    /* both freed whatever failed before (their pointers are dropped next); the first failure is kept */
    const int host_st = stage->host ? s->host_free(s, stage->host) : DZ_CUDA_OK;
    const int dev_st = stage->dev ? s->dev_free(s, stage->dev) : DZ_CUDA_OK; /* waits for the kernels reading it */
    if (st == DZ_CUDA_OK) st = host_st != DZ_CUDA_OK ? host_st : dev_st;
    stage->host = NULL, stage->dev = NULL, stage->cap = 0;
    const size_t slots = DZ_ATTN_STAGE_SLOTS * (size_t)cap;
    if (st == DZ_CUDA_OK) st = s->host_alloc(s, (void **)&stage->host, sizeof(dz_attn_seq) * slots);
    if (st == DZ_CUDA_OK) st = s->dev_alloc(s, (void **)&stage->dev, sizeof(dz_attn_seq) * (size_t)cap);
    if (st == DZ_CUDA_OK) stage->cap = cap;
    return st;
}

/* The next slot of the ring with room for batch sequences, free to refill (its last copy
 * has run): its index in *slot. */
static int stage_reserve(dz_cuda_seam *s, dz_cuda_attn_stage *stage, int batch, int *slot) {
    int st = DZ_CUDA_OK;
    for (int i = 0; i < DZ_ATTN_STAGE_SLOTS && st == DZ_CUDA_OK; i++)
        if (!stage->copied[i]) st = s->event_create(s, &stage->copied[i]);
    if (st == DZ_CUDA_OK && batch > stage->cap) st = stage_grow(s, stage, batch);
    *slot = stage->next;
    if (st == DZ_CUDA_OK) st = s->event_synchronize(s, stage->copied[*slot]);
    stage->next = (stage->next + 1) % DZ_ATTN_STAGE_SLOTS;
    return st;
}

/* Sequence b of a as the kernel reads it; the most rows of a sequence go to *max_rows. */
static dz_attn_seq seq_of(const dz_attn_args *a, int b, int *max_rows) {
    const int row0 = a->row0 ? a->row0[b] : b * a->n_new, rows = a->row0 ? a->row0[b + 1] - a->row0[b] : a->n_new;
    const int left = a->lengths[b] - a->start[b], queries = left < 0 ? 0 : left < rows ? left : rows;
    if (rows > *max_rows) *max_rows = rows;
    return (dz_attn_seq){.prefix_k = a->prefix_k[b], .prefix_v = a->prefix_v[b], .own_k = a->own_k[b],
                         .own_v = a->own_v[b], .start = a->start[b], .queries = queries, .row0 = row0, .rows = rows,
                         .virtual_k = a->virtual_k, .virtual_v = a->virtual_v, .n_virtual = a->n_virtual};
}

int dz_cuda_attention(dz_cuda_seam *s, dz_cuda_stream st, dz_cuda_attn_stage *stage, float *out, const float *q,
                      const dz_attn_args *a) {
    if (a->batch <= 0) return DZ_CUDA_OK;
    int slot = 0, max_rows = 0, status = stage_reserve(s, stage, a->batch, &slot);
    if (status != DZ_CUDA_OK) return status;
    dz_attn_seq *host = stage->host + (size_t)slot * (size_t)stage->cap;
    for (int b = 0; b < a->batch; b++) host[b] = seq_of(a, b, &max_rows);
    status = s->memcpy_async(s, stage->dev, host, sizeof(dz_attn_seq) * (size_t)a->batch, DZ_COPY_H2D, st);
    if (status == DZ_CUDA_OK) status = s->event_record(s, stage->copied[slot], st);
    if (status != DZ_CUDA_OK) return status;
    const dz_attn_launch L = {.out = out, .q = q, .seqs = stage->dev, .batch = a->batch, .n_heads = a->n_heads,
                              .n_kv_heads = a->n_kv_heads, .head_dim = a->head_dim,
                              .total_rows = a->row0 ? a->row0[a->batch] : a->batch * a->n_new,
                              .query_tiles = (max_rows + DZ_ATTN_QUERY_TILE - 1) / DZ_ATTN_QUERY_TILE,
                              .scale = a->scale};
    return s->attention(s, &L, st);
}
