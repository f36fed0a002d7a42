/* The CUDA seam's host implementation (backend/cuda/cuda_seam.h, seam_host*.c), which the
 * CPU suite runs the CUDA backend's host logic through:
 *  - the ops through it equal the CPU backend (every ZO op, bitwise) and the reference
 *    backend (the Linear-layout matmul mapped onto column-major GEMM);
 *  - GEMM is cuBLAS's: column-major, all four transposes, leading dimensions above the rows,
 *    bf16 inputs, beta = 0 not reading C, against an independent row-major expectation;
 *  - spans it cannot run (q outside 1..64, two thetas, half a pair) are refused;
 *  - the CUDA backend instance over it (cuda_backend.h): zeroed buffers, the fused pass
 *    bitwise the CPU backend's, a seam error inside an op kept and said;
 *  - the mistakes it exists to catch fail: a download read before its synchronize (poison),
 *    an upload's source changed before it, two streams touching a buffer without an event
 *    between them (both orders), a ZO2-style three-stream pipeline missing one wait, an
 *    upload of host memory racing a download into it (ordered by an event it reads the
 *    downloaded bytes), a
 *    leading dimension cuBLAS rejects or one that runs past the buffer, and overruns of
 *    copies, kernels and pinned buffers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda_seam_ops.h"
#include "backend/cuda/cuda_backend.h"

static dz_cuda_seam *seam(void) {
    dz_cuda_seam *s = dz_cuda_seam_host_create();
    assert_non_null(s);
    return s;
}

static void zo_ops_match_the_cpu_backend(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    seam_zo_ops_match_cpu(s);
    assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
    s->destroy(s);
}

static void linear_matmul_matches_the_reference(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    seam_matmul_matches_ref(s, 1e-5f);
    s->destroy(s);
}

/* C (m x n) = op(A) op(B) by cuBLAS's definition, from row-major logical matrices. */
static void gemm_is_column_major_with_cublas_transposes(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    enum { M = 5, N = 3, K = 4, PAD = 2 };
    float a[M][K], b[K][N], want[M][N];
    for (int i = 0; i < M; i++)
        for (int l = 0; l < K; l++) a[i][l] = (float)(i * 10 + l);
    for (int l = 0; l < K; l++)
        for (int j = 0; j < N; j++) b[l][j] = (float)(l - 2 * j) * 0.5f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            want[i][j] = 0.0f;
            for (int l = 0; l < K; l++) want[i][j] += a[i][l] * b[l][j];
        }
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* stored column-major: op N stores a (M x K, ld M+PAD); op T stores a^T (K x M, ld K+PAD) */
            const int lda = (ta ? K : M) + PAD, ldb = (tb ? N : K) + PAD, ldc = M + PAD;
            float A[(M + PAD) * (K + PAD)], B[(K + PAD) * (N + PAD)], C[(M + PAD) * N];
            memset(A, 0, sizeof A), memset(B, 0, sizeof B);
            for (int i = 0; i < M; i++)
                for (int l = 0; l < K; l++) A[ta ? i * lda + l : l * lda + i] = a[i][l];
            for (int l = 0; l < K; l++)
                for (int j = 0; j < N; j++) B[tb ? l * ldb + j : j * ldb + l] = b[l][j];
            float *dA = seam_upload(s, NULL, A, sizeof A), *dB = seam_upload(s, NULL, B, sizeof B), *dC = NULL;
            SEAM_OK(s, s->dev_alloc(s, (void **)&dC, sizeof C)); /* NaN garbage: beta = 0 must not read it */
            SEAM_OK(s, s->sgemm(s, NULL, ta ? DZ_GEMM_T : DZ_GEMM_N, tb ? DZ_GEMM_T : DZ_GEMM_N, M, N, K, 1.0f, dA, lda,
                                dB, ldb, 0.0f, dC, ldc));
            seam_download(s, NULL, C, dC, sizeof C);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) assert_float_equal(C[j * ldc + i], want[i][j], 0.0f);
            s->dev_free(s, dA), s->dev_free(s, dB), s->dev_free(s, dC);
        }
    s->destroy(s);
}

static void gemm_ex_bf16_inputs_and_beta(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    const uint16_t A[2] = {0x3F80, 0x4000}, B[2] = {0x4040, 0xBF80}; /* 1, 2 and 3, -1 */
    const float C0[1] = {10.0f};
    float C[1];
    void *dA = seam_upload(s, NULL, A, 4), *dB = seam_upload(s, NULL, B, 4), *dC = seam_upload(s, NULL, C0, 4);
    /* C = 2 * (1 * 3 + 2 * -1) + 0.5 * 10 = 7, A 1 x 2, B 2 x 1 */
    SEAM_OK(s, s->gemm_ex(s, NULL, DZ_GEMM_N, DZ_GEMM_N, 1, 1, 2, 2.0f, dA, DZ_CUDA_R_16BF, 1, dB, DZ_CUDA_R_16BF, 2,
                          0.5f, dC, DZ_CUDA_R_32F, 1, DZ_GEMM_COMPUTE_32F_BF16));
    seam_download(s, NULL, C, dC, 4);
    assert_float_equal(C[0], 7.0f, 0.0f);
    s->destroy(s);
}

/* The download's destination holds poison until the stream is synchronized. */
static void reading_a_download_before_its_synchronize_fails(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    dz_cuda_stream q = NULL;
    dz_cuda_event ev = NULL;
    SEAM_OK(s, s->stream_create(s, &q));
    SEAM_OK(s, s->event_create(s, &ev));
    const float src[4] = {1, 2, 3, 4};
    float dst[4] = {0};
    void *d = seam_upload(s, q, src, sizeof src);
    SEAM_OK(s, s->memcpy_async(s, dst, d, sizeof dst, DZ_COPY_D2H, q));
    assert_true(dz_cuda_seam_host_pending(s, dst + 2, 4));
    assert_true(isnan(dst[0]) && memcmp(dst, src, sizeof dst) != 0); /* what host logic reading now would see */
    SEAM_OK(s, s->event_record(s, ev, q));
    SEAM_OK(s, s->event_synchronize(s, ev)); /* an event wait is as good as the stream's synchronize */
    assert_false(dz_cuda_seam_host_pending(s, dst, sizeof dst));
    assert_memory_equal(dst, src, sizeof dst);
    s->destroy(s);
}

static void changing_an_upload_source_before_its_synchronize_fails(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    float src[4] = {1, 2, 3, 4};
    void *d = seam_upload(s, NULL, src, sizeof src);
    src[1] = 5; /* reused before the stream got to it */
    assert_int_equal(s->stream_synchronize(s, NULL), DZ_CUDA_ERR_HAZARD);
    assert_non_null(strstr(s->last_error(s), "changed"));
    src[1] = 2; /* after the synchronize the host may reuse it */
    SEAM_OK(s, s->memcpy_async(s, d, src, sizeof src, DZ_COPY_H2D, NULL));
    SEAM_OK(s, s->stream_synchronize(s, NULL));
    src[1] = 7;
    SEAM_OK(s, s->device_synchronize(s));
    assert_int_equal(dz_cuda_seam_host_hazards(s), 1);
    s->destroy(s);
}

/* Upload on one stream, GEMM on another: a race without an event, fine with one; and the
 * reverse (overwriting what another stream still reads). */
static void streams_need_an_event_between_them(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    dz_cuda_stream up = NULL, comp = NULL;
    dz_cuda_event ev = NULL;
    SEAM_OK(s, s->stream_create(s, &up));
    SEAM_OK(s, s->stream_create(s, &comp));
    SEAM_OK(s, s->event_create(s, &ev));
    const float a[4] = {1, 2, 3, 4};
    float *dA = seam_upload(s, up, a, sizeof a), *dC = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&dC, 4 * sizeof(float)));
    assert_int_equal(s->sgemm(s, comp, DZ_GEMM_N, DZ_GEMM_N, 2, 2, 1, 1.0f, dA, 2, dA, 1, 0.0f, dC, 2),
                     DZ_CUDA_ERR_HAZARD);
    SEAM_OK(s, s->event_record(s, ev, up));
    SEAM_OK(s, s->stream_wait_event(s, comp, ev));
    SEAM_OK(s, s->sgemm(s, comp, DZ_GEMM_N, DZ_GEMM_N, 2, 2, 1, 1.0f, dA, 2, dA, 1, 0.0f, dC, 2));
    /* write-after-read: the next upload into dA while comp may still read it */
    assert_int_equal(s->memcpy_async(s, dA, a, sizeof a, DZ_COPY_H2D, up), DZ_CUDA_ERR_HAZARD);
    SEAM_OK(s, s->event_record(s, ev, comp));
    SEAM_OK(s, s->stream_wait_event(s, up, ev));
    SEAM_OK(s, s->memcpy_async(s, dA, a, sizeof a, DZ_COPY_H2D, up));
    SEAM_OK(s, s->device_synchronize(s));
    assert_int_equal(dz_cuda_seam_host_hazards(s), 2);
    s->destroy(s);
}

/* ZO2's schedule on three streams over two device buffers: upload block k+1, update block
 * k, write block k-1 back; the uploads wait for the write-back of the buffer they reuse.
 * With every wait the masters end bitwise the CPU backend's; without the last one the
 * upload of block 2 races the write-back of block 0. */
static int zo2_pipeline(dz_cuda_seam *s, int skip_reuse_wait, float *masters, int blocks, size_t n) {
    dz_cuda_stream up = NULL, comp = NULL, back = NULL;
    dz_cuda_event uploaded[8], updated[8], written[8];
    void *buf[2] = {NULL, NULL};
    SEAM_OK(s, s->stream_create(s, &up));
    SEAM_OK(s, s->stream_create(s, &comp));
    SEAM_OK(s, s->stream_create(s, &back));
    for (int k = 0; k < blocks; k++) {
        SEAM_OK(s, s->event_create(s, &uploaded[k]));
        SEAM_OK(s, s->event_create(s, &updated[k]));
        SEAM_OK(s, s->event_create(s, &written[k]));
    }
    for (int b = 0; b < 2; b++) SEAM_OK(s, s->dev_alloc(s, &buf[b], n * sizeof(float)));
    int status = DZ_CUDA_OK;
    for (int k = 0; k < blocks && status == DZ_CUDA_OK; k++) {
        float *d = buf[k % 2], *host = masters + (size_t)k * n;
        if (k >= 2 && !skip_reuse_wait) SEAM_OK(s, s->stream_wait_event(s, up, written[k - 2]));
        status = s->memcpy_async(s, d, host, n * sizeof(float), DZ_COPY_H2D, up);
        if (status != DZ_CUDA_OK) break;
        SEAM_OK(s, s->event_record(s, uploaded[k], up));
        SEAM_OK(s, s->stream_wait_event(s, comp, uploaded[k]));
        dz_zo_span sp = {.mode = DZ_SPAN_PASS, .seed = 5, .tensor = (uint32_t)k, .n = n, .in_f32 = d, .out_f32 = d,
                         .has_update = 1, .q = 1, .lr = 0.5f, .step = 3, .g = {1.5f}};
        SEAM_OK(s, s->zo_span(s, &sp, comp));
        SEAM_OK(s, s->event_record(s, updated[k], comp));
        SEAM_OK(s, s->stream_wait_event(s, back, updated[k]));
        SEAM_OK(s, s->memcpy_async(s, host, d, n * sizeof(float), DZ_COPY_D2H, back));
        SEAM_OK(s, s->event_record(s, written[k], back));
    }
    SEAM_OK(s, s->device_synchronize(s));
    return status;
}

static void zo2_streaming_schedule_needs_every_wait(void **st) {
    (void)st;
    enum { BLOCKS = 5 };
    const size_t n = 1000;
    float *masters = malloc(sizeof(float) * BLOCKS * n), *want = malloc(sizeof(float) * BLOCKS * n);
    uint16_t *unused = malloc(2 * n);
    for (int k = 0; k < BLOCKS; k++) seam_theta(masters + k * n, unused, n, (uint64_t)k);
    memcpy(want, masters, sizeof(float) * BLOCKS * n);
    const float g = 1.5f;
    for (int k = 0; k < BLOCKS; k++)
        dz_backend_cpu()->ops->update_f32(dz_backend_cpu(), want + k * n, n, &g, 1, 0.5f, 0.0f, 5, (uint32_t)k, 3, 0,
                                          DZ_Z_GAUSSIAN);
    dz_cuda_seam *s = seam();
    assert_int_equal(zo2_pipeline(s, 0, masters, BLOCKS, n), DZ_CUDA_OK);
    assert_memory_equal(masters, want, sizeof(float) * BLOCKS * n);
    s->destroy(s);
    s = seam();
    assert_int_equal(zo2_pipeline(s, 1, masters, BLOCKS, n), DZ_CUDA_ERR_HAZARD);
    assert_non_null(strstr(s->last_error(s), "race"));
    s->destroy(s);
    free(masters), free(want), free(unused);
}

/* A write-back into host memory on one stream, then an upload of that memory on another
 * ordered after it by an event (ZO2's next step uploading a block it wrote back): the
 * upload reads the written-back bytes, no hazard, though the download had not run when the
 * upload was issued (its destination held poison then). Without the event it is a race. */
static void an_upload_ordered_after_a_download_of_its_source_reads_it(void **st) {
    (void)st;
    for (int ordered = 1; ordered >= 0; ordered--) {
        dz_cuda_seam *s = seam();
        dz_cuda_stream back = NULL, up = NULL;
        dz_cuda_event ev = NULL;
        SEAM_OK(s, s->stream_create(s, &back));
        SEAM_OK(s, s->stream_create(s, &up));
        SEAM_OK(s, s->event_create(s, &ev));
        const float want[4] = {1, 2, 3, 4};
        float host[4] = {0}, got[4] = {0};
        void *d = seam_upload(s, back, want, sizeof want), *d2 = NULL;
        SEAM_OK(s, s->dev_alloc(s, &d2, sizeof want));
        SEAM_OK(s, s->memcpy_async(s, host, d, sizeof host, DZ_COPY_D2H, back));
        SEAM_OK(s, s->event_record(s, ev, back));
        if (ordered) SEAM_OK(s, s->stream_wait_event(s, up, ev));
        const int status = s->memcpy_async(s, d2, host, sizeof host, DZ_COPY_H2D, up);
        if (!ordered) {
            assert_int_equal(status, DZ_CUDA_ERR_HAZARD);
            s->destroy(s);
            continue;
        }
        SEAM_OK(s, status);
        SEAM_OK(s, s->memcpy_async(s, got, d2, sizeof got, DZ_COPY_D2H, up));
        SEAM_OK(s, s->device_synchronize(s));
        assert_memory_equal(got, want, sizeof want);
        assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
        s->destroy(s);
    }
}

/* C (4 x 2) = op(A) op(B) with k = 3 over tight buffers: A 12 floats, B 6, C 8. */
static int gemm_4x2x3(dz_cuda_seam *s, float *const d[3], dz_gemm_op ta, dz_gemm_op tb, int lda, int ldb, int ldc) {
    return s->sgemm(s, NULL, ta, tb, 4, 2, 3, 1.0f, d[0], lda, d[1], ldb, 0.0f, d[2], ldc);
}

static void wrong_leading_dimensions_fail(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    float *d[3] = {NULL, NULL, NULL};
    SEAM_OK(s, s->dev_alloc(s, (void **)&d[0], 12 * sizeof(float)));
    SEAM_OK(s, s->dev_alloc(s, (void **)&d[1], 6 * sizeof(float)));
    SEAM_OK(s, s->dev_alloc(s, (void **)&d[2], 8 * sizeof(float)));
    SEAM_OK(s, gemm_4x2x3(s, d, DZ_GEMM_N, DZ_GEMM_N, 4, 3, 4));
    /* below the stored rows: cuBLAS's CUBLAS_STATUS_INVALID_VALUE */
    assert_int_equal(gemm_4x2x3(s, d, DZ_GEMM_N, DZ_GEMM_N, 3, 3, 4), DZ_CUDA_ERR_INVALID);
    assert_int_equal(gemm_4x2x3(s, d, DZ_GEMM_T, DZ_GEMM_N, 2, 3, 4), DZ_CUDA_ERR_INVALID); /* A^T stored 3 x 4 */
    assert_int_equal(gemm_4x2x3(s, d, DZ_GEMM_N, DZ_GEMM_N, 4, 3, 3), DZ_CUDA_ERR_INVALID);
    /* legal but too large for the buffer: the last column runs past it */
    assert_int_equal(gemm_4x2x3(s, d, DZ_GEMM_N, DZ_GEMM_N, 5, 3, 4), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(gemm_4x2x3(s, d, DZ_GEMM_N, DZ_GEMM_T, 4, 3, 4), DZ_CUDA_ERR_OVERRUN); /* B^T 2 x 3, ld 3 */
    assert_non_null(strstr(s->last_error(s), "overrun"));
    s->destroy(s);
}

static void overruns_fail(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    float host[9] = {0}, *d = NULL, *pinned = NULL;
    SEAM_OK(s, s->dev_alloc(s, (void **)&d, 8 * sizeof(float)));
    SEAM_OK(s, s->host_alloc(s, (void **)&pinned, 8 * sizeof(float)));
    assert_int_equal(s->memcpy_async(s, d, host, 9 * sizeof(float), DZ_COPY_H2D, NULL), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(s->memcpy_async(s, d + 1, host, 8 * sizeof(float), DZ_COPY_H2D, NULL), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(s->memcpy_async(s, d, pinned + 1, 8 * sizeof(float), DZ_COPY_H2D, NULL), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(s->memcpy_async(s, pinned, d, 9 * sizeof(float), DZ_COPY_D2H, NULL), DZ_CUDA_ERR_OVERRUN);
    assert_int_equal(s->memcpy_async(s, host, host, 4, DZ_COPY_D2H, NULL), DZ_CUDA_ERR_MEMORY); /* not device memory */
    dz_zo_span sp = {.mode = DZ_SPAN_Z, .n = 9, .z = d};
    assert_int_equal(s->zo_span(s, &sp, NULL), DZ_CUDA_ERR_OVERRUN);
    sp.n = 8;
    SEAM_OK(s, s->zo_span(s, &sp, NULL));
    dz_zo_span pass = {.mode = DZ_SPAN_PASS, .n = 4, .in_f32 = d, .w_plus = d + 4, .w_minus = d + 5};
    assert_int_equal(s->zo_span(s, &pass, NULL), DZ_CUDA_ERR_OVERRUN); /* w_minus: 4 floats from 5 of 8 */
    assert_int_equal(s->stream_synchronize(s, NULL), DZ_CUDA_OK);
    assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
    s->destroy(s);
}

static void invalid_spans_are_refused(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    float *d = NULL, g[DZ_ZO_SPAN_MAX_Q + 1] = {0};
    SEAM_OK(s, s->dev_alloc(s, (void **)&d, 16 * sizeof(float)));
    for (int q = 0; q <= DZ_ZO_SPAN_MAX_Q + 1; q += DZ_ZO_SPAN_MAX_Q + 1) {
        assert_int_equal(dz_cuda_update_f32(s, NULL, d, 16, g, q, 0.1f, 0.0f, 1, 2, 3, 0, DZ_Z_GAUSSIAN),
                         DZ_CUDA_ERR_INVALID);
        assert_non_null(strstr(s->last_error(s), "q ="));
    }
    dz_zo_span both = {.mode = DZ_SPAN_PASS, .n = 4, .in_f32 = d, .in_bf16 = (uint16_t *)(d + 8)};
    assert_int_equal(s->zo_span(s, &both, NULL), DZ_CUDA_ERR_INVALID);
    dz_zo_span half_pair = {.mode = DZ_SPAN_PASS, .n = 4, .in_f32 = d, .w_plus = d + 4};
    assert_int_equal(s->zo_span(s, &half_pair, NULL), DZ_CUDA_ERR_INVALID);
    s->destroy(s);
}

/* The fused pass (bf16 or f32 masters, q draws) on backend be: theta in place, the pair into
 * w (2n floats); through be's own buffers and copies when it has no host buffers. */
static void backend_pass(const dz_backend *be, const seam_case *c, int bf16, const float *g, void *th, float *w) {
    const size_t n = c->n, tb = n * (bf16 ? 2 : 4);
    const dz_zo_update upd = {.g = g, .q = (int)c->q, .lr = 0.0625f, .wd = c->wd, .step = c->step};
    const uint32_t next = (c->step + 1) * c->q;
    void *d_th = be->host_buffers ? th : be->ops->alloc(be, tb);
    float *d_w = be->host_buffers ? w : be->ops->alloc(be, 2 * n * sizeof(float));
    assert_true(d_th && d_w);
    if (!be->host_buffers) be->ops->upload(be, d_th, th, tb);
    if (bf16) be->ops->update_then_perturb_bf16(be, d_th, d_w, d_w + n, n, &upd, 1e-3f, c->seed, c->tensor, next, c->i0,
                                                c->dist);
    else be->ops->update_then_perturb_f32(be, d_th, d_w, d_w + n, n, &upd, 1e-3f, c->seed, c->tensor, next, c->i0,
                                          c->dist);
    be->ops->synchronize(be);
    if (be->host_buffers) return;
    be->ops->download(be, th, d_th, tb);
    be->ops->download(be, w, d_w, 2 * n * sizeof(float));
    be->ops->free(be, d_th);
    be->ops->free(be, d_w);
}

/* The CUDA backend as an instance (cuda_backend.h) over the host seam: its buffers start at
 * zero (the seam's fresh memory is NaN), its fused pass gives the CPU backend's bits, and a
 * seam error inside a void op is kept and said. */
static void the_cuda_backend_instance_runs_the_zo_ops(void **st) {
    (void)st;
    dz_cuda_seam *s = seam();
    dz_backend *be = NULL;
    dz_error err = {0};
    assert_int_equal(dz_backend_cuda_create_on(s, 1, &be, &err), DZ_OK);
    assert_string_equal(be->name, "cuda");
    assert_non_null(be->ops->attention); /* the forward: test_cuda_ops.c, test_cuda_attention.c */
    float *d = be->ops->alloc(be, 64 * sizeof(float)), back[64];
    be->ops->download(be, back, d, sizeof back);
    for (int i = 0; i < 64; i++) assert_true(back[i] == 0.0f);
    be->ops->free(be, d);
    for (size_t k = 0; k < sizeof seam_cases / sizeof seam_cases[0]; k++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            const seam_case *c = &seam_cases[k];
            const size_t n = c->n;
            float g[64], *th = malloc(n * 4), *want_w = calloc(2 * n, 4), *got_w = calloc(2 * n, 4);
            uint16_t *th_h = malloc(n * 2);
            for (uint32_t j = 0; j < c->q; j++) g[j] = 0.25f * (float)j - 1.5f;
            seam_theta(th, th_h, n, 17 + k);
            void *want = malloc(n * 4), *got = malloc(n * 4);
            memcpy(want, bf16 ? (void *)th_h : (void *)th, n * (bf16 ? 2 : 4));
            memcpy(got, want, n * (bf16 ? 2 : 4));
            backend_pass(dz_backend_cpu(), c, bf16, g, want, want_w);
            backend_pass(be, c, bf16, g, got, got_w);
            if (memcmp(want, got, n * (bf16 ? 2 : 4)) || memcmp(want_w, got_w, 2 * n * 4))
                fail_msg("case %zu (%s): the cuda instance differs from the CPU backend", k, bf16 ? "bf16" : "f32");
            free(th), free(th_h), free(want), free(got), free(want_w), free(got_w);
        }
    char msg[256];
    assert_int_equal(dz_backend_cuda_status(be, msg, sizeof msg), DZ_CUDA_OK);
    float *small = be->ops->alloc(be, 8 * sizeof(float));
    be->ops->z_fill(be, small, 1, 2, 3, 0, 9, DZ_Z_GAUSSIAN); /* one element past the buffer */
    be->ops->synchronize(be);
    assert_int_equal(dz_backend_cuda_status(be, msg, sizeof msg), DZ_CUDA_ERR_OVERRUN);
    assert_true(msg[0] != 0);
    be->ops->free(be, small);
    assert_int_equal(dz_cuda_seam_host_hazards(s), 0);
    dz_backend_free(be); /* and the seam it owns */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zo_ops_match_the_cpu_backend),
        cmocka_unit_test(linear_matmul_matches_the_reference),
        cmocka_unit_test(gemm_is_column_major_with_cublas_transposes),
        cmocka_unit_test(gemm_ex_bf16_inputs_and_beta),
        cmocka_unit_test(reading_a_download_before_its_synchronize_fails),
        cmocka_unit_test(changing_an_upload_source_before_its_synchronize_fails),
        cmocka_unit_test(streams_need_an_event_between_them),
        cmocka_unit_test(zo2_streaming_schedule_needs_every_wait),
        cmocka_unit_test(an_upload_ordered_after_a_download_of_its_source_reads_it),
        cmocka_unit_test(wrong_leading_dimensions_fail),
        cmocka_unit_test(overruns_fail),
        cmocka_unit_test(invalid_spans_are_refused),
        cmocka_unit_test(the_cuda_backend_instance_runs_the_zo_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
