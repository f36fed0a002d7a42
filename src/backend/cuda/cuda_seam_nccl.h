/* The CUDA seam's collectives over NCCL (cuda_seam_nccl.cu; -DDZ_CUDA=ON builds), filled
 * into the runtime seam's table by cuda_seam_runtime.cu. */
#ifndef DZ_BACKEND_CUDA_CUDA_SEAM_NCCL_H
#define DZ_BACKEND_CUDA_CUDA_SEAM_NCCL_H

#include "backend/cuda/cuda_seam.h"

#ifdef __cplusplus
extern "C" {
#endif

/* comm_unique_id, comm_init, comm_destroy, group_start, group_end, all_gather. */
void dz_cuda_seam_nccl_api(dz_cuda_seam *s);
/* The runtime seam's last_error() text becomes "what: detail"; returns status. */
int dz_cuda_seam_runtime_fail(dz_cuda_seam *s, int status, const char *what, const char *detail);

#ifdef __cplusplus
}
#endif

#endif
