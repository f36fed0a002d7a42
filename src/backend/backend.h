/* The compute backend: every numeric op the model runs goes through one of these
 * function tables (CPU now; a CUDA table later with the same signatures, pointers
 * then being device pointers). Ops are deterministic: for a given backend, each output
 * element's arithmetic order depends only on the shapes of its own row, never on the
 * thread count or on how many rows are in the batch. */
#ifndef DZ_BACKEND_BACKEND_H
#define DZ_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"

/* Causal attention over sequences whose keys live in "slots": rows indexed by absolute
 * position, n_kv_heads*head_dim floats each. Sequence b's queries are its rows of q at
 * positions start[b] .. lengths[b]-1 (rows beyond are padding); its keys at positions
 * below start[b] come from prefix_k/v[b] (its own cache, or the slot of a prompt it
 * continues), the rest from own_k/v[b]. Keys never cross into another sequence, so a
 * sequence's result does not depend on the rest of the batch. */
typedef struct dz_attn_args {
    int batch;          /* B sequences */
    int n_new;          /* query rows per sequence in q/out */
    int max_keys;       /* the longest key range (scratch sizing) */
    int n_heads, n_kv_heads, head_dim;
    const int *start;   /* per sequence: position of its first query row */
    const int *lengths; /* per sequence: one past its last real position */
    const float *const *prefix_k, *const *prefix_v; /* per sequence: slots for positions < start */
    const float *const *own_k, *const *own_v;       /* per sequence: slots for positions >= start */
    float scale;        /* usually 1/sqrt(head_dim) */
    float *scratch;     /* dz_attn_scratch_floats() for each of scratch_threads threads */
    int scratch_threads;
} dz_attn_args;

typedef struct dz_backend {
    const char *name;
    /* y[M,N] = x[M,K] . w[N,K]^T (+ bias[N] if non-NULL). Row-major, Linear layout. */
    void (*matmul)(float *y, const float *x, const float *w, const float *bias, int M, int N, int K);
    void (*layernorm)(float *y, const float *x, const float *w, const float *b, int rows, int dim, float eps);
    void (*rmsnorm)(float *y, const float *x, const float *w, int rows, int dim, float eps);
    /* Rotates x[rows, n_heads*head_dim] in place, pairs (i, i + head_dim/2) of each head
     * (the HF layout); row r is at position pos[r]. */
    void (*rope)(float *x, int rows, const int *pos, int n_heads, int head_dim, float theta);
    /* out[B*n_new, n_heads*head_dim] = causal softmax(q k^T * scale) v, q [B*n_new,
     * n_heads*head_dim]; the key/value slots already hold every position queried. */
    void (*attention)(float *out, const float *q, const dz_attn_args *a);
    void (*relu)(float *x, size_t n);
    /* gate[i] = silu(gate[i]) * up[i] */
    void (*swiglu)(float *gate, const float *up, size_t n);
    /* y[i] += x[i] */
    void (*add)(float *y, const float *x, size_t n);
    /* Online log-softmax pieces over one vocabulary chunk of logits[rows, n]:
     * running max m[r] and running sum s[r] of exp(logit - m[r]) are updated. */
    void (*logsumexp_update)(const float *logits, int rows, int n, float *m, float *s);
} dz_backend;

const dz_backend *dz_backend_cpu(void);

/* Attention scratch one thread needs. */
static inline size_t dz_attn_scratch_floats(int head_dim, int cache_len) {
    return (size_t)(head_dim + 1) * (size_t)(cache_len + 16);
}

/* Number of threads compute may use (distzo's pool, src/core/threads.h, and BLAS);
 * n <= 0: the pool's default ($OMP_NUM_THREADS, else every CPU this process may use).
 * A worker that cannot start is logged and the work runs on the threads that did. */
void dz_set_num_threads(int n);
int dz_get_num_threads(void);

#endif
