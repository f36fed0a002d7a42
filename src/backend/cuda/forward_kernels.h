/* The forward's kernels but GEMM and attention (forward_kernels.cu, -DDZ_CUDA=ON builds): a
 * launch runs the element code of backend/forward_element.h, a thread per work item or a
 * block of DZ_FW_THREADS threads per row, which the CPU suite runs on the host through the
 * CUDA seam's host implementation (tests/test_cuda_ops.c) and test_cuda_gpu.c on a GPU.
 * Reached through the CUDA seam's fw_launch (cuda_seam.h). */
#ifndef DZ_BACKEND_CUDA_FORWARD_KERNELS_H
#define DZ_BACKEND_CUDA_FORWARD_KERNELS_H

#include "backend/forward_element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches L on `stream` (a cudaStream_t); its arrays are device memory. Returns the
 * launch's cudaError_t (0: launched; errors of the kernel itself surface at a synchronize). */
int dz_cuda_fw_launch(const dz_fw_launch *L, void *stream);

#ifdef __cplusplus
}
#endif

#endif
