/* The CUDA backend's forward ops (backend/cuda/cuda_forward_ops.h) through the CUDA seam's
 * host implementation, in the style of ggml's test-backend-ops:
 *  - every forward op of the instance but attention against the reference backend over
 *    several shapes each (tests/cuda_fw_check.h), with no hazard and no error kept;
 *  - where the host seam runs the code the CPU backend runs (SwiGLU's dz_expf, RoPE's
 *    rotation), the CPU backend's bits;
 *  - the math mode (--gpu-math) reaches cuBLAS as its compute type, tf32 by default, and
 *    "cuda:MODE" names it at dz_backend_create;
 *  - what must fail fails: a leading dimension below K (DZ_CUDA_ERR_INVALID) or above it (a
 *    result the comparison rejects), rotations at the wrong positions, arrays past their
 *    buffers, a negative position, too many rows in one launch, a kernel racing another
 *    stream's upload. */
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

static dz_backend *cuda_on_host(void) {
    dz_cuda_seam *s = dz_cuda_seam_host_create();
    assert_non_null(s);
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_cuda_create_on(s, 1, &be, &err), DZ_OK);
    return be;
}

static void every_forward_op_matches_the_reference(void **st) {
    (void)st;
    dz_backend *be = cuda_on_host();
    fw_check_all(be, 1);
    assert_int_equal(dz_cuda_seam_host_hazards(dz_backend_cuda_seam(be)), 0);
    dz_backend_free(be);
}

/* SwiGLU (dz_expf) and RoPE are the CPU backend's arithmetic element for element. */
static void shared_element_code_gives_the_cpu_backends_bits(void **st) {
    (void)st;
    dz_backend *be = cuda_on_host();
    const dz_backend *cpu = dz_backend_cpu();
    enum { N = 9001, ROWS = 37, HEADS = 3, HD = 26, N_POS = 50 };
    float *g = fw_randn(N, 1, 4), *u = fw_randn(N, 2, 1), *want = malloc(sizeof(float) * N);
    float *got = malloc(sizeof(float) * N);
    memcpy(want, g, sizeof(float) * N), memcpy(got, g, sizeof(float) * N);
    cpu->ops->swiglu(cpu, want, u, N);
    fw_elementwise(be, 1, got, u, N);
    assert_memory_equal(got, want, sizeof(float) * N);
    float cs[N_POS * HD], *x = fw_randn(ROWS * HEADS * HD, 3, 1), *y = malloc(sizeof(float) * ROWS * HEADS * HD);
    int pos[ROWS];
    dz_rope_table_fill(cs, N_POS, HD, 10000.0f);
    for (int r = 0; r < ROWS; r++) pos[r] = (r * 7) % N_POS;
    memcpy(y, x, sizeof(float) * ROWS * HEADS * HD);
    cpu->ops->rope(cpu, x, ROWS, pos, HEADS, HD, cs);
    fw_rope(be, y, ROWS, pos, HEADS, HD, cs, N_POS);
    assert_memory_equal(y, x, sizeof(float) * ROWS * HEADS * HD);
    free(g), free(u), free(want), free(got), free(x), free(y);
    dz_backend_free(be);
}

/* The host seam with its gemm_ex recording the compute type it was asked for. */
static dz_gemm_compute seen_compute;
static int (*host_gemm_ex)(dz_cuda_seam *, dz_cuda_stream, dz_gemm_op, dz_gemm_op, int, int, int, float, const void *,
                           dz_cuda_dtype, int, const void *, dz_cuda_dtype, int, float, void *, dz_cuda_dtype, int,
                           dz_gemm_compute);

static int recording_gemm_ex(dz_cuda_seam *s, dz_cuda_stream st, dz_gemm_op ta, dz_gemm_op tb, int m, int n, int k,
                             float alpha, const void *A, dz_cuda_dtype at, int lda, const void *B, dz_cuda_dtype bt,
                             int ldb, float beta, void *C, dz_cuda_dtype ct, int ldc, dz_gemm_compute compute) {
    seen_compute = compute;
    return host_gemm_ex(s, st, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute);
}

static void the_math_mode_is_the_gemm_compute_type(void **st) {
    (void)st;
    dz_backend *be = cuda_on_host();
    dz_cuda_seam *s = dz_backend_cuda_seam(be);
    host_gemm_ex = s->gemm_ex, s->gemm_ex = recording_gemm_ex;
    const float x[6] = {1, 2, 3, 4, 5, 6}, w[3] = {1, -1, 2};
    float y[2];
    static const dz_gemm_compute want[] = {DZ_GEMM_COMPUTE_32F_TF32, DZ_GEMM_COMPUTE_32F_BF16, DZ_GEMM_COMPUTE_32F};
    assert_int_equal(dz_backend_cuda_math(be), DZ_GPU_MATH_TF32); /* the default */
    for (int m = 0; m < 3; m++) {
        dz_gpu_math parsed = DZ_GPU_MATH_TF32;
        assert_int_equal(dz_gpu_math_parse(dz_gpu_math_name((dz_gpu_math)m), &parsed), 0);
        dz_backend_cuda_set_math(be, parsed);
        seen_compute = (dz_gemm_compute)-1;
        fw_matmul(be, y, x, w, NULL, 2, 1, 3);
        assert_int_equal(seen_compute, want[m]);
        assert_true(y[0] == 5.0f && y[1] == 11.0f);
    }
    dz_gpu_math parsed;
    assert_int_equal(dz_gpu_math_parse("fp16", &parsed), -1);
    assert_int_equal(dz_gpu_math_parse(NULL, &parsed), -1);
    dz_backend_free(be);
    /* by name: the mode is checked before the backend is looked for */
    dz_backend *named = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_create("cuda:fp16", &named, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "option --gpu-math: 'fp16' is not one of tf32, bf16, fp32"));
    assert_int_equal(dz_backend_create("cpu:fp32", &named, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--gpu-math applies to --backend cuda only"));
    assert_int_equal(dz_backend_create("cuda:bf16", &named, &err), DZ_ERR_UNSUPPORTED);
    assert_null(named);
}

/* The Linear layout with leading dimension ld for x and w: K is right; below K cuBLAS
 * refuses, above K it reads the wrong elements and the comparison must see it. */
static void wrong_leading_dimensions_are_caught(void **st) {
    (void)st;
    dz_cuda_seam *s = dz_cuda_seam_host_create();
    enum { M = 7, N = 5, K = 9 };
    float *x = fw_randn(M * (K + 1), 1, 1), *w = fw_randn(N * (K + 1), 2, 1), want[M * N], got[M * N];
    dz_backend_ref()->ops->matmul(dz_backend_ref(), want, x, w, NULL, M, N, K);
    float *dx = NULL, *dw = NULL, *dy = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&dx, sizeof(float) * M * (K + 1)));
    SEAM_OK(s, s->dev_alloc(s, (void **)&dw, sizeof(float) * N * (K + 1)));
    SEAM_OK(s, s->dev_alloc(s, (void **)&dy, sizeof(float) * M * N));
    SEAM_OK(s, s->memcpy_async(s, dx, x, sizeof(float) * M * (K + 1), DZ_COPY_H2D, NULL));
    SEAM_OK(s, s->memcpy_async(s, dw, w, sizeof(float) * N * (K + 1), DZ_COPY_H2D, NULL));
    for (int ld = K - 1; ld <= K + 1; ld++) {
        const int r = s->gemm_ex(s, NULL, DZ_GEMM_T, DZ_GEMM_N, N, M, K, 1.0f, dw, DZ_CUDA_R_32F, ld, dx,
                                 DZ_CUDA_R_32F, ld, 0.0f, dy, DZ_CUDA_R_32F, N, DZ_GEMM_COMPUTE_32F_TF32);
        if (ld < K) {
            assert_int_equal(r, DZ_CUDA_ERR_INVALID);
            assert_non_null(strstr(s->last_error(s), "ldA"));
            continue;
        }
        SEAM_OK(s, r);
        SEAM_OK(s, s->memcpy_async(s, got, dy, sizeof got, DZ_COPY_D2H, NULL));
        SEAM_OK(s, s->stream_synchronize(s, NULL));
        size_t at = 0;
        const double e = fw_error(got, want, M * N, &at);
        if (ld == K) assert_true(e < 1e-5);
        else assert_true(e > 1e-2); /* a wrong layout is far outside the tolerance */
    }
    s->destroy(s);
    free(x), free(w);
}

/* RoPE at positions one off: a result the comparison rejects. */
static void rotations_at_wrong_positions_are_caught(void **st) {
    (void)st;
    dz_backend *be = cuda_on_host();
    enum { ROWS = 6, HEADS = 2, HD = 8, N_POS = 9 };
    float cs[N_POS * HD], *x = fw_randn(ROWS * HEADS * HD, 5, 1), *y = malloc(sizeof(float) * ROWS * HEADS * HD);
    int pos[ROWS], off[ROWS];
    dz_rope_table_fill(cs, N_POS, HD, 10000.0f);
    for (int r = 0; r < ROWS; r++) pos[r] = r + 1, off[r] = r;
    memcpy(y, x, sizeof(float) * ROWS * HEADS * HD);
    fw_rope(dz_backend_ref(), x, ROWS, pos, HEADS, HD, cs, N_POS);
    fw_rope(be, y, ROWS, off, HEADS, HD, cs, N_POS);
    size_t at = 0;
    assert_true(fw_error(y, x, ROWS * HEADS * HD, &at) > 1e-3);
    free(x), free(y);
    dz_backend_free(be);
}

/* The instance keeps the first error an op met; a fresh instance for each case. */
static int first_error_of(void (*run)(const dz_backend *be, float *small, float *big)) {
    dz_backend *be = cuda_on_host();
    float *small = be->ops->alloc(be, 8 * sizeof(float)), *big = be->ops->alloc(be, 64 * sizeof(float));
    run(be, small, big);
    be->ops->synchronize(be);
    char msg[256];
    const int status = dz_backend_cuda_status(be, msg, sizeof msg);
    if (status != DZ_CUDA_OK) assert_true(msg[0] != 0);
    be->ops->free(be, small), be->ops->free(be, big);
    dz_backend_free(be);
    return status;
}

static void norm_past_its_buffer(const dz_backend *be, float *small, float *big) {
    be->ops->rmsnorm(be, small, big, big, 3, 3, 1e-6f); /* 9 floats into an 8-float buffer */
}
static void bias_past_its_buffer(const dz_backend *be, float *small, float *big) {
    be->ops->matmul(be, big + 32, big, big + 8, small, 3, 9, 2); /* a bias of 9 */
}
static void scatter_past_its_buffer(const dz_backend *be, float *small, float *big) {
    const int dst[2] = {0, 2};
    be->ops->copy_rows(be, small, dst, big, NULL, 2, 3); /* row 2: floats 6 .. 8 */
}
static void logsumexp_past_its_buffer(const dz_backend *be, float *small, float *big) {
    be->ops->logsumexp_update(be, big, 9, 4, small, big); /* m of 9 rows */
}
static void negative_position(const dz_backend *be, float *small, float *big) {
    const int pos[2] = {1, -1};
    be->ops->rope(be, big, 2, pos, 1, 4, big);
}
static void a_fine_op(const dz_backend *be, float *small, float *big) {
    const int pos[2] = {1, 0}, rows[2] = {1, 0};
    be->ops->rope(be, big, 2, pos, 1, 4, small);
    be->ops->copy_rows(be, small, rows, big, rows, 2, 4);
    be->ops->layernorm(be, big, big, small, NULL, 8, 8, 1e-5f);
}

static void ops_past_their_buffers_are_caught(void **st) {
    (void)st;
    assert_int_equal(first_error_of(a_fine_op), DZ_CUDA_OK);
    assert_int_equal(first_error_of(norm_past_its_buffer), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(first_error_of(bias_past_its_buffer), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(first_error_of(scatter_past_its_buffer), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(first_error_of(logsumexp_past_its_buffer), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(first_error_of(negative_position), DZ_CUDA_ERR_INVALID);
}

/* One launch carries at most DZ_FW_MAX_ROWS host indices (the ops split longer ones), and
 * a kernel reading what another stream uploads needs an event between them. */
static void launches_are_checked(void **st) {
    (void)st;
    dz_cuda_seam *s = dz_cuda_seam_host_create();
    float *d = NULL, host[4] = {1, 2, 3, 4};
    SEAM_OK(s, s->dev_alloc(s, (void **)&d, sizeof(float) * 4 * (DZ_FW_MAX_ROWS + 1)));
    dz_fw_launch L = {.mode = DZ_FW_COPY_ROWS, .y = d, .x = d, .rows = DZ_FW_MAX_ROWS + 1, .cols = 1};
    assert_int_equal(s->fw_launch(s, &L, NULL), DZ_CUDA_ERR_INVALID);
    dz_cuda_stream up = NULL, comp = NULL;
    SEAM_OK(s, s->stream_create(s, &up));
    SEAM_OK(s, s->stream_create(s, &comp));
    SEAM_OK(s, s->memcpy_async(s, d, host, sizeof host, DZ_COPY_H2D, up));
    assert_int_equal(dz_cuda_add(s, comp, d + 4, d, 4), DZ_CUDA_ERR_HAZARD);
    assert_non_null(strstr(s->last_error(s), "forward kernel"));
    SEAM_OK(s, s->stream_synchronize(s, up));
    SEAM_OK(s, dz_cuda_add(s, comp, d + 4, d, 4)); /* the host saw the upload finish: ordered */
    SEAM_OK(s, s->device_synchronize(s));
    s->destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_forward_op_matches_the_reference),
        cmocka_unit_test(shared_element_code_gives_the_cpu_backends_bits),
        cmocka_unit_test(the_math_mode_is_the_gemm_compute_type),
        cmocka_unit_test(wrong_leading_dimensions_are_caught),
        cmocka_unit_test(rotations_at_wrong_positions_are_caught),
        cmocka_unit_test(ops_past_their_buffers_are_caught),
        cmocka_unit_test(launches_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
