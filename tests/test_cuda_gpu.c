/* On a GPU (label gpu; -DDZ_CUDA=ON builds only): the ZO kernels (backend/cuda/zo_kernels.cu)
 * through the CUDA runtime seam give the CPU backend's bits for every ZO op, cuBLAS's fp32
 * GEMM in the Linear layout matches the reference backend, and every forward op of the CUDA
 * backend instance but attention (cuda_forward_ops.h: cuBLAS in each --gpu-math mode, the
 * kernels of forward_kernels.cu) matches the reference backend. The checks are those the CPU
 * suite runs through the host seam (tests/cuda_seam_ops.h, tests/cuda_fw_check.h). Where no
 * GPU is found the test exits 77, which CTest reports as skipped (never as passed). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda_fw_check.h"
#include "cuda_seam_ops.h"

static dz_cuda_seam *gpu;

static void zo_kernels_match_the_cpu_backend(void **st) {
    (void)st;
    seam_zo_ops_match_cpu(gpu);
}

/* cuBLAS in full fp32 (its default math mode): the reference's double sums to 1e-5. */
static void cublas_linear_matmul_matches_the_reference(void **st) {
    (void)st;
    seam_matmul_matches_ref(gpu, 1e-5f);
}

/* The instance on the GPU's seam: matrix products within each math mode's rounding (TF32,
 * BF16 inputs), the kernels within the reference's tolerance, no error kept. */
static void forward_ops_match_the_reference(void **st) {
    (void)st;
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_cuda_create_on(gpu, 0, &be, &err), DZ_OK);
    fw_check_all(be, 0);
    dz_backend_free(be); /* the seam stays: main destroys it */
}

int main(void) {
    int status = DZ_CUDA_OK;
    gpu = dz_cuda_seam_runtime_create(0, &status);
    if (!gpu) {
        printf("test_cuda_gpu: skipped: %s (status %d)\n",
               status == DZ_CUDA_ERR_NO_DEVICE ? "no CUDA GPU found" : "the CUDA runtime did not start", status);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zo_kernels_match_the_cpu_backend),
        cmocka_unit_test(cublas_linear_matmul_matches_the_reference),
        cmocka_unit_test(forward_ops_match_the_reference),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    gpu->destroy(gpu);
    return failed;
}
