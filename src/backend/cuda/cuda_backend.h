/* The CUDA backend as a dz_backend instance over a CUDA seam (cuda_seam.h): its state is
 * the seam, one non-blocking stream and the matrix products' math mode. What exists:
 * buffers (device memory), upload, upload_view, download, synchronize, the forward's ops
 * (cuda_forward_ops.h, attention: cuda_attention.h) and the ten ZO ops (cuda_zo_ops.h);
 * be->streams: overlapped transfers (backend/stream_ops.h) on two more streams, an upload
 * and a write-back lane beside the ops' stream, ordered by the seam's events, and pinning
 * through host_register.
 * The pipeline does not run on device buffers yet, so dz_backend_create refuses "cuda"
 * (registry.c) and this is reached by the tests only, through the host seam
 * (tests/test_cuda_seam.c, tests/test_cuda_ops.c, tests/test_cuda_attention.c).
 * Library dz_cuda_host. */
#ifndef DZ_BACKEND_CUDA_CUDA_BACKEND_H
#define DZ_BACKEND_CUDA_CUDA_BACKEND_H

#include "backend/backend.h"
#include "backend/cuda/cuda_forward_ops.h"
#include "backend/cuda/cuda_seam.h"

/* An instance on seam s (which the instance destroys on dz_backend_free when owns_seam). */
dz_status dz_backend_cuda_create_on(dz_cuda_seam *s, int owns_seam, dz_backend **out, dz_error *err);
/* The ops return nothing, so the first seam error an op met is kept: DZ_CUDA_OK or that
 * status, with the seam's words in msg (cap bytes). */
int dz_backend_cuda_status(const dz_backend *be, char *msg, size_t cap);
/* The matrix products' math mode (--gpu-math): DZ_GPU_MATH_TF32 from create_on. */
void dz_backend_cuda_set_math(dz_backend *be, dz_gpu_math math);
dz_gpu_math dz_backend_cuda_math(const dz_backend *be);
/* The seam the instance runs on. */
dz_cuda_seam *dz_backend_cuda_seam(const dz_backend *be);

#endif
