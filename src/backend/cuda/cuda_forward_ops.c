/* The CUDA backend's forward ops (cuda_forward_ops.h): each fills dz_fw_launch and hands it
 * to the seam's fw_launch; the matrix product maps the Linear layout onto column-major
 * cuBLAS. */
#include "backend/cuda/cuda_forward_ops.h"

static dz_gemm_compute compute_of(dz_gpu_math m) {
    return m == DZ_GPU_MATH_FP32 ? DZ_GEMM_COMPUTE_32F
           : m == DZ_GPU_MATH_BF16 ? DZ_GEMM_COMPUTE_32F_BF16
                                   : DZ_GEMM_COMPUTE_32F_TF32;
}

/* y[M,N] = x[M,K] w[N,K]^T is, column-major, y^T (N x M, ld N) = op_T(w^T stored K x N, ld
 * K) op_N(x^T stored K x M, ld K); then y += bias row by row. */
int dz_cuda_matmul(dz_cuda_seam *s, dz_cuda_stream st, dz_gpu_math math, float *y, const float *x, const float *w,
                   const float *bias, int M, int N, int K) {
    if (M == 0 || N == 0) return DZ_CUDA_OK;
    int status = K == 0 /* an empty sum: zeros, without asking cuBLAS what k = 0 means */
                     ? dz_cuda_fill(s, st, y, 0.0f, (size_t)M * N)
                     : s->gemm_ex(s, st, DZ_GEMM_T, DZ_GEMM_N, N, M, K, 1.0f, w, DZ_CUDA_R_32F, K, x, DZ_CUDA_R_32F,
                                  K, 0.0f, y, DZ_CUDA_R_32F, N, compute_of(math));
    if (status != DZ_CUDA_OK || !bias) return status;
    const dz_fw_launch L = {.mode = DZ_FW_BIAS, .y = y, .x = bias, .rows = M, .cols = N};
    return s->fw_launch(s, &L, st);
}

static int row_op(dz_cuda_seam *s, dz_cuda_stream st, dz_fw_mode mode, float *y, const float *x, const float *w,
                  const float *b, int rows, int dim, float eps) {
    const dz_fw_launch L = {.mode = mode, .y = y, .x = x, .w = w, .b = b, .rows = rows, .cols = dim, .eps = eps};
    return s->fw_launch(s, &L, st);
}

int dz_cuda_layernorm(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, const float *w, const float *b,
                      int rows, int dim, float eps) {
    return row_op(s, st, DZ_FW_LAYERNORM, y, x, w, b, rows, dim, eps);
}

int dz_cuda_rmsnorm(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, const float *w, int rows, int dim,
                    float eps) {
    return row_op(s, st, DZ_FW_RMSNORM, y, x, w, NULL, rows, dim, eps);
}

/* Row i of idx[k] of a launch over rows r0 .. r0+nr-1: the host's index, or r0 + i where
 * the array is NULL (the identity). */
static void fill_idx(dz_fw_launch *L, int k, const int *rows, int r0, int nr) {
    for (int i = 0; i < nr; i++) L->idx[k][i] = rows ? rows[r0 + i] : r0 + i;
}

static int chunk_rows(int rows, int r0) { return rows - r0 < DZ_FW_MAX_ROWS ? rows - r0 : DZ_FW_MAX_ROWS; }

int dz_cuda_rope(dz_cuda_seam *s, dz_cuda_stream st, float *x, int rows, const int *pos, int n_heads, int head_dim,
                 const float *cos_sin) {
    int status = DZ_CUDA_OK;
    for (int r0 = 0; r0 < rows && status == DZ_CUDA_OK; r0 += DZ_FW_MAX_ROWS) {
        dz_fw_launch L = {.mode = DZ_FW_ROPE, .y = x + (size_t)r0 * n_heads * head_dim, .x = cos_sin,
                          .rows = chunk_rows(rows, r0), .cols = head_dim, .heads = n_heads};
        fill_idx(&L, 0, pos, r0, L.rows);
        status = s->fw_launch(s, &L, st);
    }
    return status;
}

static int elementwise(dz_cuda_seam *s, dz_cuda_stream st, dz_fw_mode mode, float *y, const float *x, float v,
                       size_t n) {
    const dz_fw_launch L = {.mode = mode, .y = y, .x = x, .v = v, .n = n};
    return s->fw_launch(s, &L, st);
}

int dz_cuda_relu(dz_cuda_seam *s, dz_cuda_stream st, float *x, size_t n) {
    return elementwise(s, st, DZ_FW_RELU, x, NULL, 0.0f, n);
}
int dz_cuda_swiglu(dz_cuda_seam *s, dz_cuda_stream st, float *gate, const float *up, size_t n) {
    return elementwise(s, st, DZ_FW_SWIGLU, gate, up, 0.0f, n);
}
int dz_cuda_add(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, size_t n) {
    return elementwise(s, st, DZ_FW_ADD, y, x, 0.0f, n);
}
int dz_cuda_fill(dz_cuda_seam *s, dz_cuda_stream st, float *x, float v, size_t n) {
    return elementwise(s, st, DZ_FW_FILL, x, NULL, v, n);
}

int dz_cuda_copy_rows(dz_cuda_seam *s, dz_cuda_stream st, float *dst, const int *dst_rows, const float *src,
                      const int *src_rows, int nrows, int cols) {
    int status = DZ_CUDA_OK;
    for (int r0 = 0; r0 < nrows && status == DZ_CUDA_OK; r0 += DZ_FW_MAX_ROWS) {
        dz_fw_launch L = {.mode = DZ_FW_COPY_ROWS, .y = dst, .x = src, .rows = chunk_rows(nrows, r0), .cols = cols};
        fill_idx(&L, 0, dst_rows, r0, L.rows);
        fill_idx(&L, 1, src_rows, r0, L.rows);
        status = s->fw_launch(s, &L, st);
    }
    return status;
}

int dz_cuda_logsumexp_update(dz_cuda_seam *s, dz_cuda_stream st, const float *logits, int rows, int n, float *m,
                             float *sum) {
    const dz_fw_launch L = {.mode = DZ_FW_LOGSUMEXP, .x = logits, .m = m, .s = sum, .rows = rows, .cols = n};
    return s->fw_launch(s, &L, st);
}

int dz_cuda_pick_target(dz_cuda_seam *s, dz_cuda_stream st, float *out, const float *logits, int rows, int n,
                        const int *targets, int v0) {
    int status = DZ_CUDA_OK;
    for (int r0 = 0; r0 < rows && status == DZ_CUDA_OK; r0 += DZ_FW_MAX_ROWS) {
        dz_fw_launch L = {.mode = DZ_FW_PICK, .y = out + r0, .x = logits + (size_t)r0 * n, .rows = chunk_rows(rows, r0),
                          .cols = n, .v0 = v0};
        fill_idx(&L, 0, targets + r0, 0, L.rows);
        status = s->fw_launch(s, &L, st);
    }
    return status;
}

int dz_cuda_logprob_finish(dz_cuda_seam *s, dz_cuda_stream st, float *out, const float *target, const float *m,
                           const float *sum, int rows) {
    const dz_fw_launch L = {.mode = DZ_FW_LOGPROB, .y = out, .x = target, .m = (float *)m, .s = (float *)sum,
                            .rows = rows};
    return s->fw_launch(s, &L, st);
}
