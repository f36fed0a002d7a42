/* The forward's ops of backend.h but attention, as the CUDA backend runs them: on device
 * buffers, enqueued on a stream of a CUDA seam (cuda_seam.h). Same arguments as backend.h's
 * ops of the same names, plus the seam and the stream; index arrays (positions, rows,
 * targets) are host memory and travel in the launches, DZ_FW_MAX_ROWS rows each, so
 * nothing is allocated or staged per call. The matrix product is one cuBLAS GemmEx with the
 * compute type `math` (dz_gpu_math), then the bias as a kernel; the rest are the kernels of
 * forward_kernels.cu (backend/forward_element.h). Asynchronous: results are there after the
 * stream's synchronize. Each returns a dz_cuda_status, the seam's last_error saying what.
 * Library dz_cuda_host, so the CPU suite runs them through the host seam. */
#ifndef DZ_BACKEND_CUDA_CUDA_FORWARD_OPS_H
#define DZ_BACKEND_CUDA_CUDA_FORWARD_OPS_H

#include "backend/cuda/cuda_seam.h"
#include "backend/cuda/gpu_math.h"

int dz_cuda_matmul(dz_cuda_seam *s, dz_cuda_stream st, dz_gpu_math math, float *y, const float *x, const float *w,
                   const float *bias, int M, int N, int K);
int dz_cuda_layernorm(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, const float *w, const float *b,
                      int rows, int dim, float eps);
int dz_cuda_rmsnorm(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, const float *w, int rows, int dim,
                    float eps);
int dz_cuda_rope(dz_cuda_seam *s, dz_cuda_stream st, float *x, int rows, const int *pos, int n_heads, int head_dim,
                 const float *cos_sin);
int dz_cuda_relu(dz_cuda_seam *s, dz_cuda_stream st, float *x, size_t n);
int dz_cuda_swiglu(dz_cuda_seam *s, dz_cuda_stream st, float *gate, const float *up, size_t n);
int dz_cuda_add(dz_cuda_seam *s, dz_cuda_stream st, float *y, const float *x, size_t n);
int dz_cuda_fill(dz_cuda_seam *s, dz_cuda_stream st, float *x, float v, size_t n);
int dz_cuda_copy_rows(dz_cuda_seam *s, dz_cuda_stream st, float *dst, const int *dst_rows, const float *src,
                      const int *src_rows, int nrows, int cols);
int dz_cuda_logsumexp_update(dz_cuda_seam *s, dz_cuda_stream st, const float *logits, int rows, int n, float *m,
                             float *sum);
int dz_cuda_pick_target(dz_cuda_seam *s, dz_cuda_stream st, float *out, const float *logits, int rows, int n,
                        const int *targets, int v0);
int dz_cuda_logprob_finish(dz_cuda_seam *s, dz_cuda_stream st, float *out, const float *target, const float *m,
                           const float *sum, int rows);

#endif
