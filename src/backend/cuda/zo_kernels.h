/* The ZO kernels (zo_kernels.cu, -DDZ_CUDA=ON builds): one launch per span, one thread per
 * Philox block of it, running the element code of backend/zo_element.h, so that the GPU
 * gives the CPU backend's bits (tests/test_zo_element.c holds that code to the CPU on the
 * host; tests/test_cuda_gpu.c holds the kernels to it on a GPU). Reached through the CUDA
 * seam's zo_span (cuda_seam.h). */
#ifndef DZ_BACKEND_CUDA_ZO_KERNELS_H
#define DZ_BACKEND_CUDA_ZO_KERNELS_H

#include "backend/zo_element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches span's op on `stream` (a cudaStream_t); its arrays are device memory. Returns the
 * launch's cudaError_t (0: launched; errors of the kernel itself surface at a synchronize). */
int dz_cuda_zo_launch(const dz_zo_span *span, void *stream);

#ifdef __cplusplus
}
#endif

#endif
