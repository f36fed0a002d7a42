/* The forward's ops but the matrix product and attention (backend.h) as per-element and
 * per-row code for the host and the GPU: the CUDA kernels (src/backend/cuda/
 * forward_kernels.cu) run these functions one work item per thread (a row op: one row per
 * thread block of DZ_FW_THREADS threads), and the CUDA seam's host implementation
 * (seam_host_forward.c) runs the same functions in loops (dz_fw_run_host), so the CPU suite
 * checks the code the GPU runs (tests/test_cuda_ops.c).
 *
 * Arithmetic: the CPU backend's (cpu_backend.c) element by element: the norms sum in double
 * and apply in float as it does, SwiGLU and the log-sum-exp use its dz_expf, RoPE rotates
 * the HF pairs (i, i + head_dim/2). What differs is the summation order of a row: thread t
 * of a row sums elements t, t + DZ_FW_THREADS, ... and the DZ_FW_THREADS partial sums are
 * added pairwise (part[k] += part[k + w], w = T/2 .. 1), on the host as on the GPU, so
 * the two give the same bits, and the CPU's results agree to rounding (test_cuda_ops.c). */
#ifndef DZ_BACKEND_FORWARD_ELEMENT_H
#define DZ_BACKEND_FORWARD_ELEMENT_H

#include <math.h>
#include <stdint.h>

#include "backend/expf.h"

#define DZ_FW_THREADS 256  /* threads of a row op's block, partial sums of a row */
#define DZ_FW_MAX_ROWS 256 /* rows of one launch of an op that takes host indices */

typedef enum dz_fw_mode {
    DZ_FW_BIAS,      /* y[r, j] += x[j]: rows x cols (the matmul's bias) */
    DZ_FW_LAYERNORM, /* y[r] = (x[r] - mean) * rstd * w + b (b may be NULL): rows x cols, eps */
    DZ_FW_RMSNORM,   /* y[r] = w * (x[r] * rstd) */
    DZ_FW_ROPE,      /* y[rows, heads * cols] rotated in place; row r at position idx[0][r], x = cos_sin */
    DZ_FW_RELU,      /* y[i] = max(y[i], 0), i < n */
    DZ_FW_SWIGLU,    /* y[i] = silu(y[i]) * x[i] */
    DZ_FW_ADD,       /* y[i] += x[i] */
    DZ_FW_FILL,      /* y[i] = v */
    DZ_FW_COPY_ROWS, /* row idx[0][i] of y[., cols] = row idx[1][i] of x, i < rows */
    DZ_FW_LOGSUMEXP, /* m[r], s[r] folded over x[r, 0 .. cols) (online log-softmax) */
    DZ_FW_PICK,      /* y[r] = x[r, idx[0][r] - v0] where that is in 0 .. cols-1 */
    DZ_FW_LOGPROB,   /* y[r] = x[r] - m[r] - logf(s[r]), i < rows (y may be x) */
} dz_fw_mode;

/* One launch, passed by value (a kernel argument: pointers are device memory there, host
 * memory on the host). The host's index arrays travel in idx, DZ_FW_MAX_ROWS rows at a
 * time: no device memory to stage them in, nothing to order with the next launch. */
typedef struct dz_fw_launch {
    dz_fw_mode mode;
    float *y;
    const float *x, *w, *b;
    float *m, *s;
    uint64_t n;
    int rows, cols, heads, v0;
    float eps, v;
    int idx[2][DZ_FW_MAX_ROWS];
} dz_fw_launch;

/* Row ops run a block per row; the others a thread per work item. */
DZ_HD static inline int dz_fw_is_row_op(dz_fw_mode m) {
    return m == DZ_FW_LAYERNORM || m == DZ_FW_RMSNORM || m == DZ_FW_LOGSUMEXP;
}

/* Work items of an item op: elements, (row, head, pair) of RoPE, (row, column) of a copy, rows. */
DZ_HD static inline uint64_t dz_fw_items(const dz_fw_launch *L) {
    switch (L->mode) {
    case DZ_FW_BIAS:
    case DZ_FW_COPY_ROWS: return (uint64_t)L->rows * (uint64_t)L->cols;
    case DZ_FW_ROPE: return (uint64_t)L->rows * (uint64_t)L->heads * (uint64_t)(L->cols / 2);
    case DZ_FW_PICK:
    case DZ_FW_LOGPROB: return (uint64_t)L->rows;
    default: return L->n;
    }
}

/* SiLU(g) * u as the CPU backend computes it. */
DZ_HD static inline float dz_fw_swiglu(float g, float u) { return g / (1.0f + dz_expf(-g)) * u; }

/* Item t of RoPE: pair i of head h of row r. */
DZ_HD static inline void dz_fw_rope_item(const dz_fw_launch *L, uint64_t t) {
    const int half = L->cols / 2, i = (int)(t % (uint64_t)half);
    const uint64_t rh = t / (uint64_t)half;
    const int r = (int)(rh / (uint64_t)L->heads);
    const float *c = L->x + (size_t)L->idx[0][r] * (size_t)L->cols, *s = c + half;
    float *v = L->y + rh * (uint64_t)L->cols;
    const float x0 = v[i], x1 = v[i + half];
    v[i] = x0 * c[i] - x1 * s[i];
    v[i + half] = x0 * s[i] + x1 * c[i];
}

/* Work item t of an item op. */
DZ_HD static inline void dz_fw_item(const dz_fw_launch *L, uint64_t t) {
    switch (L->mode) {
    case DZ_FW_BIAS: L->y[t] += L->x[t % (uint64_t)L->cols]; break;
    case DZ_FW_RELU: L->y[t] = L->y[t] > 0.0f ? L->y[t] : 0.0f; break;
    case DZ_FW_SWIGLU: L->y[t] = dz_fw_swiglu(L->y[t], L->x[t]); break;
    case DZ_FW_ADD: L->y[t] += L->x[t]; break;
    case DZ_FW_FILL: L->y[t] = L->v; break;
    case DZ_FW_ROPE: dz_fw_rope_item(L, t); break;
    case DZ_FW_COPY_ROWS: {
        const uint64_t i = t / (uint64_t)L->cols, c = t % (uint64_t)L->cols;
        L->y[(uint64_t)L->idx[0][i] * (uint64_t)L->cols + c] = L->x[(uint64_t)L->idx[1][i] * (uint64_t)L->cols + c];
        break;
    }
    case DZ_FW_PICK: {
        const int k = L->idx[0][t] - L->v0;
        if (k >= 0 && k < L->cols) L->y[t] = L->x[t * (uint64_t)L->cols + (uint64_t)k];
        break;
    }
    case DZ_FW_LOGPROB: L->y[t] = L->x[t] - L->m[t] - logf(L->s[t]); break;
    default: break;
    }
}

/* ---- row ops: thread t's part of row x[0 .. n), then the row's result ---- */

DZ_HD static inline double dz_fw_part_sum(const float *x, int n, int t) {
    double acc = 0.0;
    for (int i = t; i < n; i += DZ_FW_THREADS) acc += x[i];
    return acc;
}

/* sum of (x - mean)^2 in double; mean 0 gives the sum of squares (RMSNorm). */
DZ_HD static inline double dz_fw_part_sq(const float *x, int n, int t, double mean) {
    double acc = 0.0;
    for (int i = t; i < n; i += DZ_FW_THREADS) {
        const double d = x[i] - mean;
        acc += d * d;
    }
    return acc;
}

DZ_HD static inline float dz_fw_part_max(const float *x, int n, int t) {
    float mx = -INFINITY;
    for (int i = t; i < n; i += DZ_FW_THREADS) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

DZ_HD static inline float dz_fw_part_sumexp(const float *x, int n, int t, float mx) {
    float acc = 0.0f;
    for (int i = t; i < n; i += DZ_FW_THREADS) acc += dz_expf(x[i] - mx);
    return acc;
}

DZ_HD static inline float dz_fw_rstd(double sq, int n, float eps) { return (float)(1.0 / sqrt(sq / n + eps)); }

/* Thread t's elements of row r of a norm, from the row's mean and rstd. */
DZ_HD static inline void dz_fw_norm_apply(const dz_fw_launch *L, int r, float mean, float rstd, int t) {
    const float *x = L->x + (size_t)r * (size_t)L->cols;
    float *y = L->y + (size_t)r * (size_t)L->cols;
    for (int i = t; i < L->cols; i += DZ_FW_THREADS)
        y[i] = L->mode == DZ_FW_RMSNORM ? L->w[i] * (x[i] * rstd)
                                        : (x[i] - mean) * rstd * L->w[i] + (L->b ? L->b[i] : 0.0f);
}

/* The log-sum-exp's fold of one row: the chunk's max mx over the old m, its sum of exp. */
DZ_HD static inline void dz_fw_lse_fold(float *m, float *s, float mx, float sum) {
    const float acc = *m == -INFINITY ? 0.0f : *s * dz_expf(*m - mx);
    *m = mx;
    *s = acc + sum;
}

/* ---- the host's loops (the CUDA seam's host implementation) ---- */

#ifndef __CUDACC__
static inline double dz_fw_tree_sum(double *part) {
    for (int w = DZ_FW_THREADS / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) part[k] += part[k + w];
    return part[0];
}

static inline float dz_fw_tree_sumf(float *part) {
    for (int w = DZ_FW_THREADS / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) part[k] += part[k + w];
    return part[0];
}

/* Row r of a row op, thread after thread, as a block of the kernel runs it. */
static inline void dz_fw_row_host(const dz_fw_launch *L, int r) {
    const float *x = L->x + (size_t)r * (size_t)L->cols;
    double part[DZ_FW_THREADS];
    float partf[DZ_FW_THREADS];
    if (L->mode == DZ_FW_LOGSUMEXP) {
        float mx = L->m[r];
        for (int t = 0; t < DZ_FW_THREADS; t++) {
            const float pm = dz_fw_part_max(x, L->cols, t);
            mx = pm > mx ? pm : mx;
        }
        for (int t = 0; t < DZ_FW_THREADS; t++) partf[t] = dz_fw_part_sumexp(x, L->cols, t, mx);
        dz_fw_lse_fold(&L->m[r], &L->s[r], mx, dz_fw_tree_sumf(partf));
        return;
    }
    double mean = 0.0;
    if (L->mode == DZ_FW_LAYERNORM) {
        for (int t = 0; t < DZ_FW_THREADS; t++) part[t] = dz_fw_part_sum(x, L->cols, t);
        mean = dz_fw_tree_sum(part) / L->cols;
    }
    for (int t = 0; t < DZ_FW_THREADS; t++) part[t] = dz_fw_part_sq(x, L->cols, t, mean);
    const float rstd = dz_fw_rstd(dz_fw_tree_sum(part), L->cols, L->eps);
    for (int t = 0; t < DZ_FW_THREADS; t++) dz_fw_norm_apply(L, r, (float)mean, rstd, t);
}

static inline void dz_fw_run_host(const dz_fw_launch *L) {
    if (dz_fw_is_row_op(L->mode)) {
        for (int r = 0; r < L->rows; r++) dz_fw_row_host(L, r);
        return;
    }
    const uint64_t n = dz_fw_items(L);
    for (uint64_t t = 0; t < n; t++) dz_fw_item(L, t);
}
#endif

#endif
