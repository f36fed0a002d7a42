/* The CUDA backend's matrix products (--gpu-math, a property of the instance): TF32 tensor
 * cores (the default), BF16 tensor cores, or full fp32; inputs and outputs are fp32 buffers
 * in every mode, the mode is cuBLAS's compute type (cuda_forward_ops.c). Header-only: the
 * registry (dz_backend, every build) parses "cuda:MODE" with it. */
#ifndef DZ_BACKEND_CUDA_GPU_MATH_H
#define DZ_BACKEND_CUDA_GPU_MATH_H

#include <string.h>

typedef enum dz_gpu_math { DZ_GPU_MATH_TF32 = 0, DZ_GPU_MATH_BF16, DZ_GPU_MATH_FP32 } dz_gpu_math;

static inline const char *dz_gpu_math_name(dz_gpu_math m) {
    return m == DZ_GPU_MATH_TF32 ? "tf32" : m == DZ_GPU_MATH_BF16 ? "bf16" : m == DZ_GPU_MATH_FP32 ? "fp32" : "?";
}

/* 0 and the mode of "tf32", "bf16" or "fp32"; -1 for anything else (NULL too). */
static inline int dz_gpu_math_parse(const char *name, dz_gpu_math *out) {
    for (int m = DZ_GPU_MATH_TF32; name && m <= DZ_GPU_MATH_FP32; m++)
        if (strcmp(name, dz_gpu_math_name((dz_gpu_math)m)) == 0) {
            *out = (dz_gpu_math)m;
            return 0;
        }
    return -1;
}

#endif
