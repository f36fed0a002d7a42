/* Flash-style causal attention, per query row over tiles of keys, for the host and the GPU
 * (DZ_HD: __host__ __device__ under nvcc, plain C otherwise). The attention kernel
 * (attention_kernel.cu) runs one block per (sequence, head, tile of DZ_ATTN_QUERY_TILE
 * query rows), a thread per query row, keys and values staged through shared memory
 * DZ_ATTN_KEY_TILE at a time; the CUDA seam's host implementation (seam_host_attention.c)
 * runs the same functions in loops. No score matrix is ever stored: a row keeps its query,
 * a running max m, a running sum l and an accumulator acc[head_dim]; each tile of keys
 * moves them on (online softmax):
 *     s_j = (q . k_j) * scale            products summed over d in order, from 0
 *     m'  = max(m, s_j of the tile)      alpha = exp(m - m')   (1 when the max stays)
 *     l   = l alpha + sum_j exp(s_j - m')                       in key order
 *     acc = acc alpha + sum_j exp(s_j - m') v_j                 in key order, per d
 * and the row's output is acc / l. Float throughout, as the CPU backend: the terms are
 * probabilities (<= 1) times values, so a row of n keys carries about sqrt(n) roundings of
 * its own size plus one rescale per tile; tests/test_cuda_attention.c holds it to the
 * reference backend's double sums within 1e-5 relative for 300 keys. exp is the CPU
 * backend's dz_expf (backend/expf.h) and no multiply-add is contracted (-fmad=false,
 * -ffp-contract=off), so the GPU gives the host seam's bits (tests/test_cuda_gpu.c).
 *
 * Semantics are dz_attn_args' (backend.h): keys at positions below start come from the
 * prefix slots, the rest from the sequence's own; rows past a sequence's real queries
 * (positions at or past its length) are padding and get zeros. */
#ifndef DZ_BACKEND_CUDA_ATTENTION_ELEMENT_H
#define DZ_BACKEND_CUDA_ATTENTION_ELEMENT_H

#include <math.h>
#include <stddef.h>

#include "backend/expf.h"
#include "backend/zo_ops.h" /* DZ_HD */

#define DZ_ATTN_KEY_TILE 32       /* keys staged and scored at a time */
#define DZ_ATTN_QUERY_TILE 64     /* query rows per block, a thread each */
#define DZ_ATTN_MAX_HEAD_DIM 256  /* the kernel's largest row arrays */

#if defined(__CUDA_ARCH__) /* the device pass: the host compilers know no such pragma */
#define DZ_ATTN_UNROLL _Pragma("unroll")
#else
#define DZ_ATTN_UNROLL
#endif

/* One sequence as the kernel reads it (device memory: dz_attn_args' per-sequence arrays
 * gathered by src/backend/cuda/cuda_attention.c). */
typedef struct dz_attn_seq {
    const float *prefix_k, *prefix_v; /* slots for positions < start (unread when start is 0) */
    const float *own_k, *own_v;       /* slots for positions >= start */
    int start;                        /* position of its first query row */
    int queries;                      /* its real query rows: min(rows, length - start), >= 0 */
    int row0;                         /* its first row in q and out */
    int rows;                         /* its rows in q and out: the real ones, then padding */
    const float *virtual_k, *virtual_v; /* prefix tuning's n_virtual rows, seen before position 0 */
    int n_virtual;                    /* key index j < n_virtual is virtual row j, then position j - n_virtual */
} dz_attn_seq;

/* One launch: the kernel's argument, by value (pointers are device memory). */
typedef struct dz_attn_launch {
    float *out;              /* [total_rows, n_heads * head_dim] */
    const float *q;          /* the same shape */
    const dz_attn_seq *seqs; /* batch of them */
    int batch, n_heads, n_kv_heads, head_dim;
    int total_rows;
    int query_tiles; /* the most rows of a sequence, in query tiles (the grid's x) */
    float scale;
} dz_attn_launch;

/* What a launch's shape breaks (NULL: nothing): both seams refuse such a launch. */
static inline const char *dz_attn_launch_invalid(const dz_attn_launch *L) {
    if (L->head_dim < 1 || L->head_dim > DZ_ATTN_MAX_HEAD_DIM) return "head_dim outside 1..256";
    if (L->n_kv_heads < 1 || L->n_heads < L->n_kv_heads || L->n_heads % L->n_kv_heads)
        return "n_heads is not a multiple of n_kv_heads >= 1";
    if (L->batch < 0 || L->batch > 65535 || L->n_heads > 65535) return "batch or n_heads outside the grid (65535)";
    if (L->total_rows < 0 || L->query_tiles < 0) return "negative rows";
    if (L->batch > 0 && (!L->seqs || !L->q || !L->out)) return "NULL q, out or sequences";
    return NULL;
}

/* The state of one query row: its running max and sum, and its query and accumulator
 * (head_dim floats each, the caller's: a GPU thread's own arrays). */
typedef struct dz_attn_row {
    float m, l;
    float *q, *acc;
} dz_attn_row;

/* Where row i of sequence s, head h, sits in q and out. */
DZ_HD static inline size_t dz_attn_offset(const dz_attn_launch *L, const dz_attn_seq *s, int i, int h) {
    return ((size_t)(s->row0 + i) * (size_t)L->n_heads + (size_t)h) * (size_t)L->head_dim;
}

/* Keys that the real rows of query tile `tile` see (0: it has none): row i sees the
 * virtual rows and positions 0 .. start + i. */
DZ_HD static inline int dz_attn_tile_keys(const dz_attn_seq *s, int tile) {
    const int first = tile * DZ_ATTN_QUERY_TILE, end = first + DZ_ATTN_QUERY_TILE;
    const int last = end < s->queries ? end : s->queries;
    return last > first ? s->n_virtual + s->start + last : 0;
}

/* Of the key tile starting at k0, the keys row i sees (0 .. DZ_ATTN_KEY_TILE). */
DZ_HD static inline int dz_attn_row_keys(const dz_attn_seq *s, int i, int k0) {
    const int n = s->n_virtual + s->start + i + 1 - k0;
    return n < 0 ? 0 : n > DZ_ATTN_KEY_TILE ? DZ_ATTN_KEY_TILE : n;
}

/* Element e (< DZ_ATTN_KEY_TILE * head_dim) of the staged tile at key k0 for kv head kvh:
 * key k0 + e / head_dim, dimension e % head_dim, of the keys (kt) and the values (vt);
 * zero for keys at or past nkeys, so a short tile's unused scores are finite and unused. */
DZ_HD static inline void dz_attn_stage(float *kt, float *vt, const dz_attn_seq *s, const dz_attn_launch *L, int kvh,
                                       int k0, int nkeys, int e) {
    const int hd = L->head_dim, j = k0 + e / hd, d = e % hd;
    if (j >= nkeys) {
        kt[e] = 0.0f, vt[e] = 0.0f;
        return;
    }
    const int p = j - s->n_virtual; /* its position (< 0: a virtual row) */
    const size_t at = ((size_t)(p < 0 ? j : p) * (size_t)L->n_kv_heads + (size_t)kvh) * (size_t)hd + (size_t)d;
    kt[e] = p < 0 ? s->virtual_k[at] : p < s->start ? s->prefix_k[at] : s->own_k[at];
    vt[e] = p < 0 ? s->virtual_v[at] : p < s->start ? s->prefix_v[at] : s->own_v[at];
}

DZ_HD static inline void dz_attn_row_begin(dz_attn_row *r, const float *q, int hd) {
    r->m = -INFINITY, r->l = 0.0f;
    for (int d = 0; d < hd; d++) r->q[d] = q[d], r->acc[d] = 0.0f;
}

/* The first n keys of a staged tile (rows of hd floats in kt, vt) into row r. */
DZ_HD static inline void dz_attn_row_tile(dz_attn_row *r, const float *kt, const float *vt, int n, int hd,
                                          float scale) {
    float s[DZ_ATTN_KEY_TILE];
    DZ_ATTN_UNROLL
    for (int j = 0; j < DZ_ATTN_KEY_TILE; j++) s[j] = 0.0f;
    for (int d = 0; d < hd; d++) { /* every key of the tile: staged zeros past n */
        const float qd = r->q[d];
        DZ_ATTN_UNROLL
        for (int j = 0; j < DZ_ATTN_KEY_TILE; j++) s[j] = s[j] + qd * kt[j * hd + d];
    }
    float m = r->m;
    DZ_ATTN_UNROLL
    for (int j = 0; j < DZ_ATTN_KEY_TILE; j++) {
        s[j] = s[j] * scale;
        if (j < n) m = fmaxf(m, s[j]);
    }
    const float alpha = m == r->m ? 1.0f : dz_expf(r->m - m); /* first tile: l and acc are 0 anyway */
    float l = r->l * alpha;
    DZ_ATTN_UNROLL
    for (int j = 0; j < DZ_ATTN_KEY_TILE; j++) {
        s[j] = j < n ? dz_expf(s[j] - m) : 0.0f;
        l = l + s[j];
    }
    r->m = m, r->l = l;
    for (int d = 0; d < hd; d++) {
        float a = r->acc[d] * alpha;
        DZ_ATTN_UNROLL
        for (int j = 0; j < DZ_ATTN_KEY_TILE; j++) a = a + s[j] * vt[j * hd + d];
        r->acc[d] = a;
    }
}

DZ_HD static inline void dz_attn_row_end(const dz_attn_row *r, float *out, int hd) {
    for (int d = 0; d < hd; d++) out[d] = r->acc[d] / r->l;
}

#endif
