/* On a GPU (label gpu; -DDZ_CUDA=ON builds only): the ZO kernels (backend/cuda/zo_kernels.cu)
 * through the CUDA runtime seam give the CPU backend's bits for every ZO op, cuBLAS's fp32
 * GEMM in the Linear layout matches the reference backend, and every forward op of the CUDA
 * backend instance (cuda_forward_ops.h: cuBLAS in each --gpu-math mode, the kernels of
 * forward_kernels.cu; attention: the flash-style kernel of attention_kernel.cu) matches the
 * reference backend. The checks are those the CPU suite runs through the host seam
 * (tests/cuda_seam_ops.h, tests/cuda_fw_check.h, tests/cuda_attention_cases.h). And NCCL
 * behind the seam: DistZO2's sliced upload on a group of one GPU, and a node's group joined
 * through its id with the node-shared block pinned (cudaHostRegister). Where no
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

#include "backend/cuda/sliced_upload.h"
#include "cuda_fw_check.h"
#include "cuda_seam_ops.h"
#include "cuda_attention_cases.h"
#include "backend/cuda/cuda_backend.h"
#include "parallel/gpu_group.h"

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

/* The instance on the GPU's seam: attention on every case within 1e-5 relative of the
 * reference and bitwise an instance on the host seam (the same element code, dz_expf, no
 * contraction). */
static void attention_kernel_matches_the_reference(void **st) {
    (void)st;
    dz_backend *be = NULL, *host = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_cuda_create_on(gpu, 0, &be, &err), DZ_OK);
    dz_cuda_seam *hs = dz_cuda_seam_host_create();
    assert_non_null(hs);
    assert_int_equal(dz_backend_cuda_create_on(hs, 1, &host, &err), DZ_OK);
    const double worst = attn_every_case_matches_ref(be, host);
    print_message("gpu: attention's worst relative error %.3g against the reference\n", worst);
    char msg[256];
    const int status = dz_backend_cuda_status(be, msg, sizeof msg);
    if (status != DZ_CUDA_OK) fail_msg("the instance's status is %d: %s", status, msg);
    dz_backend_free(be); /* the seam stays: main destroys it */
    dz_backend_free(host);
}

/* NCCL behind the seam on this GPU (a group of one: only one-GPU machines are lent):
 * DistZO2's sliced upload, blocks of odd sizes through two rotating buffers, each read back
 * bitwise after its all-gather. */
static void sliced_upload_through_nccl(void **st) {
    (void)st;
    dz_cuda_comm_id id;
    dz_cuda_comm comm = NULL;
    dz_cuda_stream compute = NULL;
    dz_sliced_upload u;
    unsigned char *host = NULL, *back = malloc(1 << 20);
    SEAM_OK(gpu, gpu->comm_unique_id(gpu, &id));
    SEAM_OK(gpu, gpu->comm_init(gpu, &comm, 1, 0, &id));
    SEAM_OK(gpu, gpu->host_alloc(gpu, (void **)&host, 1 << 20));
    SEAM_OK(gpu, gpu->stream_create(gpu, &compute));
    SEAM_OK(gpu, dz_sliced_upload_init(&u, gpu, comm, 0, 1, 1 << 20, 2));
    static const size_t sizes[] = {1, 4099, 1 << 20, 77};
    for (uint64_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < sizes[k]; i++) host[i] = (unsigned char)(i * 131u + k);
        void *buf = NULL;
        SEAM_OK(gpu, dz_sliced_upload_node((dz_sliced_upload *const[]){&u}, 1, k, host, sizes[k]));
        SEAM_OK(gpu, dz_sliced_acquire(&u, k, compute, &buf));
        SEAM_OK(gpu, gpu->memcpy_async(gpu, back, buf, sizes[k], DZ_COPY_D2H, compute));
        SEAM_OK(gpu, dz_sliced_release(&u, k, compute));
        SEAM_OK(gpu, gpu->stream_synchronize(gpu, compute));
        assert_memory_equal(back, host, sizes[k]);
    }
    SEAM_OK(gpu, dz_sliced_upload_free(&u));
    SEAM_OK(gpu, gpu->stream_destroy(gpu, compute));
    SEAM_OK(gpu, gpu->host_free(gpu, host));
    SEAM_OK(gpu, gpu->comm_destroy(gpu, comm));
    free(back);
}

/* A node's group and its pinned block as a run makes them (parallel/gpu_group.h), in one
 * process: a group of one joined through the node's id (ncclGetUniqueId, ncclCommInitRank),
 * the node-shared block pinned with cudaHostRegister, its slice uploaded and all-gathered
 * in place, and read back bitwise. */
static void node_group_and_pinned_block(void **st) {
    (void)st;
    dz_comm *comm = NULL;
    dz_error err;
    assert_int_equal(dz_comm_init(NULL, NULL, 0, 0, &comm, &err), DZ_OK);
    dz_gpu_group g;
    if (dz_gpu_group_join(comm, gpu, &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(g.nranks, 1);
    enum { B = 4099 };
    unsigned char *block = NULL, *dev = NULL, back[B];
    assert_int_equal(dz_comm_node_alloc(comm, B, (void **)&block, &err), DZ_OK);
    for (size_t i = 0; i < B; i++) block[i] = (unsigned char)(i * 29u + 3);
    if (dz_node_block_pin(gpu, block, B, &err) != DZ_OK) fail_msg("%s", err.msg);
    SEAM_OK(gpu, gpu->dev_alloc(gpu, (void **)&dev, B));
    SEAM_OK(gpu, gpu->memcpy_async(gpu, dev, block, B, DZ_COPY_H2D, NULL));
    SEAM_OK(gpu, gpu->all_gather(gpu, g.comm, dev, dev, B, NULL));
    SEAM_OK(gpu, gpu->memcpy_async(gpu, back, dev, B, DZ_COPY_D2H, NULL));
    SEAM_OK(gpu, gpu->stream_synchronize(gpu, NULL));
    assert_memory_equal(back, block, B);
    SEAM_OK(gpu, gpu->dev_free(gpu, dev));
    if (dz_node_block_unpin(gpu, block, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (dz_gpu_group_leave(gpu, &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_comm_finalize(comm);
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
        cmocka_unit_test(attention_kernel_matches_the_reference),
        cmocka_unit_test(sliced_upload_through_nccl),
        cmocka_unit_test(node_group_and_pinned_block),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    gpu->destroy(gpu);
    return failed;
}
