/* The compute backend: every numeric op the model and the ZO step run goes through a
 * backend instance (its op table and its own state), chosen when a forward is created
 * (dz_forward_create_backend) and passed to every op as its first argument.
 *
 * Memory. Float and element arguments of ops (x, y, w, theta, w_plus, ...) are backend
 * buffers: memory from the table's alloc, or for weights what upload_view returned. Host
 * code reaches them only through upload/download, unless host_buffers is set (the CPU
 * backend: buffers are host memory, and upload_view returns the host pointer itself, no
 * copy). Small control arguments stay host memory and are read during the call: index
 * arrays (positions, rows, targets, sequence starts and lengths), the attention args and
 * their per-sequence pointer arrays (whose pointers are backend buffers), and a ZO update's
 * g[]. A device backend copies what it needs of them into its launch.
 *
 * Ordering. Ops may run asynchronously on a device backend, in call order; upload and
 * download are ordered with them and return only when the host memory may be reused (upload)
 * or holds the result (download); synchronize waits for every op issued.
 *
 * Determinism. For a given backend each output element's arithmetic order depends only on
 * the shapes of its own row, never on the thread count or on how many rows are in the
 * batch. The ZO ops (z_fill .. update_then_perturb_bf16) are a contract (backend/zo_ops.h):
 * every backend gives the same bits. The float ops are not: backends agree to a tolerance
 * (tests/test_backend_ops.c checks every registered backend against "ref"). */
#ifndef DZ_BACKEND_BACKEND_H
#define DZ_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "backend/zo_ops.h"

/* Causal attention over sequences whose keys live in "slots": rows indexed by absolute
 * position, n_kv_heads*head_dim floats each. Sequence b's queries are its rows of q at
 * positions start[b] .. lengths[b]-1 (rows beyond are padding); its keys at positions
 * below start[b] come from prefix_k/v[b] (its own cache, or the slot of a prompt it
 * continues), the rest from own_k/v[b]. Keys never cross into another sequence, so a
 * sequence's result does not depend on the rest of the batch. */
typedef struct dz_attn_args {
    int batch;          /* B sequences */
    int n_new;          /* query rows per sequence in q/out */
    int max_keys;       /* the longest key range, n_virtual included (scratch sizing) */
    int n_heads, n_kv_heads, head_dim;
    const int *start;   /* per sequence: position of its first query row */
    const int *lengths; /* per sequence: one past its last real position */
    const int *row0;    /* per sequence b: its rows in q/out are [row0[b], row0[b + 1]), one per
                           position from start[b] (packed); NULL: rows b * n_new + i, i < n_new.
                           Rows at or past lengths[b] (padding) get zeros. */
    const float *const *prefix_k, *const *prefix_v; /* per sequence: slots for positions < start */
    const float *const *own_k, *const *own_v;       /* per sequence: slots for positions >= start */
    /* Prefix tuning's virtual tokens: n_virtual key/value rows ([n_virtual, n_kv_heads *
     * head_dim], shared by every sequence) that every query sees before position 0. Key
     * index j < n_virtual is virtual row j, then position j - n_virtual. 0: none. */
    int n_virtual;
    const float *virtual_k, *virtual_v;
    float scale;        /* usually 1/sqrt(head_dim) */
    float *scratch;     /* dz_attn_scratch_floats() for each of scratch_threads threads */
    int scratch_threads;
} dz_attn_args;

typedef struct dz_backend dz_backend;
struct dz_gemm_perturb; /* backend/gemm.h */

/* The op table of a backend. Every op takes the instance it runs on first: its state
 * (device, streams, library handles, workspace) is be->ctx. */
typedef struct dz_backend_ops {
    /* ---- buffers ---- */
    /* bytes of backend memory, zero-filled and 64-byte aligned (NULL when out of memory);
     * free(NULL) is a no-op. */
    void *(*alloc)(const dz_backend *be, size_t bytes);
    void (*free)(const dz_backend *be, void *buf);
    /* Copies n host bytes at src into the buffer dst; src == dst (a host_buffers backend's
     * staging is the buffer itself) copies nothing. */
    void (*upload)(const dz_backend *be, void *dst, const void *src, size_t n);
    /* Makes n host bytes at src readable by ops and returns where: dst (a buffer of at
     * least n bytes) after copying, or, on a host_buffers backend, src itself (zero-copy:
     * src must then stay valid and unchanged while ops read it). For weights that the
     * weight source (model.h) hands out as host fp32 rows. */
    const void *(*upload_view)(const dz_backend *be, void *dst, const void *src, size_t n);
    /* Copies n bytes of the buffer src into host memory dst. */
    void (*download)(const dz_backend *be, void *dst, const void *src, size_t n);
    void (*synchronize)(const dz_backend *be);

    /* ---- the forward ---- */
    /* y[M,N] = x[M,K] . w[N,K]^T (+ bias[N] if non-NULL). Row-major, Linear layout. */
    void (*matmul)(const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                   int K);
    /* Both signs of a ZO step's matrix from its masters theta[N,K]: y[s][M[s],N] = x[s] . w_s^T
     * (+ bias[s]) with w_0 = theta + eps z, w_1 = theta - eps z, theta first given pt's
     * pending update in place; the same bits as update_then_perturb_f32 into working copies
     * and matmul on each (backend/gemm.h, dz_gemm_linear_pair). Optional: NULL on a backend
     * whose forward reads the working copies (ref, cuda). */
    void (*matmul_pair)(const dz_backend *be, float *const y[2], const float *const x[2], const int M[2], float *theta,
                        const float *const bias[2], int N, int K, const struct dz_gemm_perturb *pt);
    void (*layernorm)(const dz_backend *be, float *y, const float *x, const float *w, const float *b, int rows,
                      int dim, float eps);
    void (*rmsnorm)(const dz_backend *be, float *y, const float *x, const float *w, int rows, int dim, float eps);
    /* Rotates x[rows, n_heads*head_dim] in place, pairs (i, i + head_dim/2) of each head
     * (the HF layout); row r is at position pos[r], whose angles' cosines and sines are row
     * pos[r] of cos_sin (a buffer filled by dz_rope_table_fill). */
    void (*rope)(const dz_backend *be, float *x, int rows, const int *pos, int n_heads, int head_dim,
                 const float *cos_sin);
    /* out[B*n_new, n_heads*head_dim] = causal softmax(q k^T * scale) v, q [B*n_new,
     * n_heads*head_dim]; the key/value slots already hold every position queried. */
    void (*attention)(const dz_backend *be, float *out, const float *q, const dz_attn_args *a);
    void (*relu)(const dz_backend *be, float *x, size_t n);
    /* gate[i] = silu(gate[i]) * up[i] */
    void (*swiglu)(const dz_backend *be, float *gate, const float *up, size_t n);
    /* y[i] += x[i] (the residual adds, and the position embeddings onto the token rows) */
    void (*add)(const dz_backend *be, float *y, const float *x, size_t n);
    /* x[i] = v */
    void (*fill)(const dz_backend *be, float *x, float v, size_t n);
    /* Row dst_rows[i] of dst[., cols] = row src_rows[i] of src[., cols] for i < nrows; a NULL
     * index array is the identity. Gathers (the head's rows) and scatters (keys and values
     * into their slots by position). Rows do not overlap. */
    void (*copy_rows)(const dz_backend *be, float *dst, const int *dst_rows, const float *src, const int *src_rows,
                      int nrows, int cols);
    /* Online log-softmax pieces over one vocabulary chunk of logits[rows, n]:
     * running max m[r] and running sum s[r] of exp(logit - m[r]) are updated. */
    void (*logsumexp_update)(const dz_backend *be, const float *logits, int rows, int n, float *m, float *s);
    /* The chunk logits[rows, n] holds vocabulary entries v0 .. v0+n-1: for each row whose
     * targets[r] falls among them, out[r] = its logit; other rows keep out[r]. */
    void (*pick_target)(const dz_backend *be, float *out, const float *logits, int rows, int n, const int *targets,
                        int v0);
    /* out[r] = target[r] - m[r] - log(s[r]): log p(target) from the online pieces; out may
     * alias target. */
    void (*logprob_finish)(const dz_backend *be, float *out, const float *target, const float *m, const float *s,
                           int rows);

    /* ---- the ZO step (contract: backend/zo_ops.h) ----
     * Each works on elements i0 .. i0+n-1 of one tensor (`tensor` = its id), deriving z from
     * (seed, tensor, draw, element index) alone, so any slicing of a tensor into spans gives
     * the bits of one call. Single-threaded per call, allocation-free: callers parallelize
     * over spans. A draw index is d = step * q + sample (uint32, wrapping). bf16 masters
     * (uint16_t) are widened, updated in f32 and stochastically rounded back; w+- are f32. */
    /* z_i (purpose 0). */
    void (*z_fill)(const dz_backend *be, float *z, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0,
                   size_t n, dz_zdist dist);
    /* Raw words: x_i = word i % 4 of block i / 4 with counter (i / 4, purpose, tensor, draw). */
    void (*philox_fill)(const dz_backend *be, uint32_t *x, uint64_t seed, uint32_t purpose, uint32_t tensor,
                        uint32_t draw, uint64_t i0, size_t n);
    /* w_plus = theta + eps z, w_minus = theta - eps z with z of draw `draw`. */
    void (*perturb_pair)(const dz_backend *be, const float *theta, float *w_plus, float *w_minus, size_t n, float eps,
                         uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);
    void (*perturb_pair_bf16)(const dz_backend *be, const uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                              float eps, uint64_t seed, uint32_t tensor, uint32_t draw, uint64_t i0, dz_zdist dist);
    /* theta -= lr * (mean_j g[j] z_j + wd theta), z_j of draw step*q + j (g: host memory). */
    void (*update_f32)(const dz_backend *be, float *theta, size_t n, const float *g, int q, float lr, float wd,
                       uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
    void (*update_bf16)(const dz_backend *be, uint16_t *theta, size_t n, const float *g, int q, float lr, float wd,
                        uint64_t seed, uint32_t tensor, uint32_t step, uint64_t i0, dz_zdist dist);
    /* One pass: apply the pending update `upd` (NULL = none) to theta in place, then write
     * the pair for draw `next_draw` from the updated theta (w_plus = w_minus = NULL: update
     * only). Bitwise equal to update_* followed by perturb_pair*. */
    void (*update_then_perturb_f32)(const dz_backend *be, float *theta, float *w_plus, float *w_minus, size_t n,
                                    const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                    uint32_t next_draw, uint64_t i0, dz_zdist dist);
    void (*update_then_perturb_bf16)(const dz_backend *be, uint16_t *theta, float *w_plus, float *w_minus, size_t n,
                                     const dz_zo_update *upd, float eps, uint64_t seed, uint32_t tensor,
                                     uint32_t next_draw, uint64_t i0, dz_zdist dist);

    /* Frees the instance and its state (dz_backend_free); NULL: a static instance. */
    void (*destroy)(dz_backend *be);
} dz_backend_ops;

/* A backend instance: the op table and the state its ops share. Ops are called as
 * be->ops->matmul(be, ...). */
struct dz_backend {
    const char *name;
    /* Backend buffers are host memory that host code may read and write directly. */
    int host_buffers;
    const dz_backend_ops *ops;
    void *ctx; /* the instance's state (NULL: cpu and ref have none) */
    /* Overlapped transfers on lanes ordered by marks (backend/stream_ops.h): the CUDA
     * instance's; NULL elsewhere. */
    const struct dz_stream_ops *streams;
};

/* distzo's optimized CPU backend (host_buffers; threads: dz_set_num_threads, core/threads.h). */
const dz_backend *dz_backend_cpu(void);
/* The reference: straightforward loops, double accumulation, one thread, plain
 * malloc'ed memory. It declares host_buffers 0 so that whatever runs on it (a forward)
 * takes the upload/download path a device backend needs; tests may still hand it host
 * pointers. Slow: for tests. */
const dz_backend *dz_backend_ref(void);

/* A device stand-in for tests: inner's ops on buffers that host code cannot touch (an
 * arena mapped PROT_NONE except while one of its ops runs: a stray host access is a
 * SIGSEGV), host_buffers 0. --backend ref is this over dz_backend_ref() (guard_backend.c). */
dz_status dz_backend_guarded_create(const dz_backend *inner, dz_backend **out, dz_error *err);

/* The registry: every backend whose ops all run here, "cpu" first (their stateless
 * instances; the tests go through them all). */
int dz_backend_count(void);
const dz_backend *dz_backend_at(int i); /* NULL outside 0 .. count-1 */
const dz_backend *dz_backend_by_name(const char *name); /* NULL if none */
/* A run's instance by name (--backend cpu|ref|cuda), and its end; also public
 * (include/distzo/model.h says what each refuses). */
dz_status dz_backend_create(const char *name, dz_backend **out, dz_error *err);
void dz_backend_free(dz_backend *be);
int dz_cuda_gpu_count(void);

/* The rotary angles' cosines and sines for positions 0 .. n_pos-1 (host memory, a row of
 * head_dim floats per position: cos_sin[p * head_dim + i] = cos(a), cos_sin[p * head_dim +
 * head_dim/2 + i] = sin(a) for i < head_dim/2), with the angle a = p * theta^(-2i/head_dim)
 * in double as Hugging Face and llama2.c compute it, each value rounded to float once. A forward fills its
 * table once; the rows of every layer and sequence look their angles up there. */
void dz_rope_table_fill(float *cos_sin, int n_pos, int head_dim, float theta);

/* Attention scratch one thread needs. */
static inline size_t dz_attn_scratch_floats(int head_dim, int cache_len) {
    return (size_t)(head_dim + 4) * (size_t)(cache_len + 16); /* keys transposed, 4 query rows' scores */
}

#endif
