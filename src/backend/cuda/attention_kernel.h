/* The attention kernel (attention_kernel.cu, -DDZ_CUDA=ON builds): flash-style causal
 * attention, one block per (sequence, head, query tile), running the element code of
 * attention_element.h. Reached through the CUDA seam's attention entry (cuda_seam.h). */
#ifndef DZ_BACKEND_CUDA_ATTENTION_KERNEL_H
#define DZ_BACKEND_CUDA_ATTENTION_KERNEL_H

#include "backend/cuda/attention_element.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launches L on `stream` (a cudaStream_t); L's arrays are device memory and L is valid
 * (dz_attn_launch_invalid). Returns the launch's cudaError_t (0: launched; errors of the
 * kernel itself surface at a synchronize). */
int dz_cuda_attention_launch(const dz_attn_launch *L, void *stream);

#ifdef __cplusplus
}
#endif

#endif
