/* Every forward op of a CUDA backend instance but attention (backend/cuda/cuda_backend.h),
 * in the style of ggml's test-backend-ops, against the reference backend over several
 * shapes each: odd sizes, one row, K not a multiple of 4, rows past one 256-row launch and
 * one 256-thread row block, with and without bias. Both backends run through their own
 * buffers (alloc, upload, op, download); results are compared as relative errors
 * |got - want| / (1 + |want|) (data moves bitwise). For the CPU suite through the host seam
 * (test_cuda_ops.c) and for a GPU through the runtime seam (test_cuda_gpu.c).
 * Header-only, for those two tests. */
#ifndef DZ_TESTS_CUDA_FW_CHECK_H
#define DZ_TESTS_CUDA_FW_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_seam_ok.h"

static float *fw_randn(size_t n, uint64_t seed, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * dz_normal(&seed));
    return x;
}

/* A buffer of be holding host[0 .. n) (NULL: zeros). */
static float *fw_buf(const dz_backend *be, const float *host, size_t n) {
    float *buf = be->ops->alloc(be, sizeof(float) * (n ? n : 1));
    assert_non_null(buf);
    if (host && n) be->ops->upload(be, buf, host, sizeof(float) * n);
    return buf;
}

/* host[0 .. n) = the buffer's floats; the buffer is freed. */
static void fw_get(const dz_backend *be, float *host, float *buf, size_t n) {
    be->ops->synchronize(be);
    if (n) be->ops->download(be, host, buf, sizeof(float) * n);
    be->ops->free(be, buf);
}

static void fw_free(const dz_backend *be, float *const *bufs, int n) {
    for (int i = 0; i < n; i++) be->ops->free(be, bufs[i]);
}

/* The largest relative error of got against want (NaN counts as infinite), its index in *at. */
static double fw_error(const float *got, const float *want, size_t n, size_t *at) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e, *at = i;
    }
    return worst;
}

static void fw_expect_close(const float *got, const float *want, size_t n, double tol, const char *what) {
    size_t at = 0;
    const double e = fw_error(got, want, n, &at);
    if (!(e <= tol))
        fail_msg("%s: element %zu is %.9g, the reference gives %.9g (relative error %.2e > %.2e)", what, at,
                 n ? got[at] : 0.0f, n ? want[at] : 0.0f, e, tol);
}

/* ---- one op on backend be, host in, host out ---- */

static void fw_matmul(const dz_backend *be, float *y, const float *x, const float *w, const float *bias, int M, int N,
                      int K) {
    float *d[4] = {fw_buf(be, x, (size_t)M * K), fw_buf(be, w, (size_t)N * K), bias ? fw_buf(be, bias, N) : NULL,
                   fw_buf(be, NULL, (size_t)M * N)};
    be->ops->matmul(be, d[3], d[0], d[1], d[2], M, N, K);
    fw_get(be, y, d[3], (size_t)M * N);
    fw_free(be, d, 3);
}

/* layernorm (b may be NULL) or, with rms, rmsnorm. */
static void fw_norm(const dz_backend *be, int rms, float *y, const float *x, const float *w, const float *b, int rows,
                    int dim, float eps) {
    const size_t n = (size_t)rows * dim;
    float *d[4] = {fw_buf(be, x, n), fw_buf(be, w, dim), b ? fw_buf(be, b, dim) : NULL, fw_buf(be, NULL, n)};
    if (rms) be->ops->rmsnorm(be, d[3], d[0], d[1], rows, dim, eps);
    else be->ops->layernorm(be, d[3], d[0], d[1], d[2], rows, dim, eps);
    fw_get(be, y, d[3], n);
    fw_free(be, d, 3);
}

static void fw_rope(const dz_backend *be, float *x, int rows, const int *pos, int heads, int hd, const float *cs,
                    int n_pos) {
    const size_t n = (size_t)rows * heads * hd;
    float *d[2] = {fw_buf(be, x, n), fw_buf(be, cs, (size_t)n_pos * hd)};
    be->ops->rope(be, d[0], rows, pos, heads, hd, d[1]);
    fw_get(be, x, d[0], n);
    fw_free(be, d + 1, 1);
}

/* op 0 relu, 1 swiglu, 2 add, 3 fill (-1.5) over y (in place) with x. */
static void fw_elementwise(const dz_backend *be, int op, float *y, const float *x, size_t n) {
    float *d[2] = {fw_buf(be, y, n), fw_buf(be, x, n)};
    if (op == 0) be->ops->relu(be, d[0], n);
    else if (op == 1) be->ops->swiglu(be, d[0], d[1], n);
    else if (op == 2) be->ops->add(be, d[0], d[1], n);
    else be->ops->fill(be, d[0], -1.5f, n);
    fw_get(be, y, d[0], n);
    fw_free(be, d + 1, 1);
}

/* src's rows scattered into dst (dst_rows) and gathered back (src_rows) into dst's tail. */
static void fw_copy_rows(const dz_backend *be, float *dst, int dst_total, const float *src, int nrows, int cols,
                         const int *dst_rows, const int *src_rows) {
    const size_t n = (size_t)(dst_total + nrows) * cols;
    float *d[2] = {fw_buf(be, dst, n), fw_buf(be, src, (size_t)nrows * cols)};
    be->ops->copy_rows(be, d[0], dst_rows, d[1], NULL, nrows, cols);
    be->ops->copy_rows(be, d[0] + (size_t)dst_total * cols, NULL, d[1], src_rows, nrows, cols);
    fw_get(be, dst, d[0], n);
    fw_free(be, d + 1, 1);
}

/* The head over vocabulary chunks of widths w[0 .. nc): out = m, s, target logit, log p. */
static void fw_logprob(const dz_backend *be, float *out, const float *logits, int rows, const int *w, int nc,
                       const int *targets) {
    float *d = fw_buf(be, NULL, 4 * (size_t)rows), *m = d, *s = d + rows, *tgt = d + 2 * rows, *lp = d + 3 * rows;
    be->ops->fill(be, m, -INFINITY, rows);
    be->ops->fill(be, tgt, 7.0f, rows);
    for (int c = 0, v0 = 0; c < nc; v0 += w[c++]) {
        float *chunk = malloc(sizeof(float) * rows * w[c] + 4);
        for (int r = 0; r < rows; r++) memcpy(chunk + (size_t)r * w[c], logits + (size_t)r * 9000 + v0, 4 * w[c]);
        float *dc = fw_buf(be, chunk, (size_t)rows * w[c]);
        be->ops->logsumexp_update(be, dc, rows, w[c], m, s);
        be->ops->pick_target(be, tgt, dc, rows, w[c], targets, v0);
        be->ops->synchronize(be);
        be->ops->free(be, dc);
        free(chunk);
    }
    be->ops->logprob_finish(be, lp, tgt, m, s, rows);
    fw_get(be, out, d, 4 * (size_t)rows);
}

/* ---- the cases: each op on cuda and on ref, compared ---- */

/* Matrix products' tolerance per math mode on a GPU times sqrt(K): TF32 and BF16 keep 10 and
 * 7 fraction bits of each input, perhaps truncated, so a product is off by up to 2^-9 or
 * 2^-6 and the K of them add as a random walk (the units below leave about 7 standard
 * deviations); the host seam computes exactly in every mode. The layout is the fp32
 * mode's, held to 1e-5. */
static double fw_matmul_tol(const dz_backend *cuda, int exact, int K) {
    const dz_gpu_math m = dz_backend_cuda_math(cuda);
    const double unit = exact || m == DZ_GPU_MATH_FP32 ? 1e-5 : m == DZ_GPU_MATH_TF32 ? 1.0 / 128 : 1.0 / 16;
    return unit * sqrt(K > 1 ? K : 1);
}

static void fw_check_matmul(const dz_backend *cuda, int exact) {
    static const int shapes[][3] = {{1, 1, 1}, {1, 7, 5}, {3, 5, 7}, {5, 300, 3}, {17, 33, 65}, {37, 29, 70},
                                    {130, 7, 301}, {2, 3, 0}};
    for (int mode = 0; mode < 3; mode++) {
        dz_backend_cuda_set_math((dz_backend *)cuda, (dz_gpu_math)mode);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const int M = shapes[k][0], N = shapes[k][1], K = shapes[k][2];
                float *x = fw_randn((size_t)M * K, 1 + k, 1), *w = fw_randn((size_t)N * K, 2 + k, 1);
                float *b = with_bias ? fw_randn(N, 3 + k, 1) : NULL;
                float *got = malloc(sizeof(float) * M * N), *want = malloc(sizeof(float) * M * N);
                fw_matmul(dz_backend_ref(), want, x, w, b, M, N, K);
                fw_matmul(cuda, got, x, w, b, M, N, K);
                char what[96];
                snprintf(what, sizeof what, "matmul %dx%dx%d %s bias, %s", M, N, K, b ? "with" : "no",
                         dz_gpu_math_name((dz_gpu_math)mode));
                fw_expect_close(got, want, (size_t)M * N, fw_matmul_tol(cuda, exact, K), what);
                free(x), free(w), free(b), free(got), free(want);
            }
    }
    dz_backend_cuda_set_math((dz_backend *)cuda, DZ_GPU_MATH_TF32);
}

static void fw_check_norms(const dz_backend *cuda) {
    static const int shapes[][2] = {{1, 1}, {1, 7}, {3, 77}, {37, 300}, {5, 1027}, {2, 4099}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int op = 0; op < 3; op++) { /* layernorm with bias, without, rmsnorm */
            const int rows = shapes[k][0], dim = shapes[k][1];
            const size_t n = (size_t)rows * dim;
            float *x = fw_randn(n, 10 + k, 3), *w = fw_randn(dim, 11 + k, 1), *b = fw_randn(dim, 12 + k, 1);
            for (size_t i = 0; i < n; i++) x[i] += 0.5f; /* a mean to take out */
            float *got = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * n);
            const float eps = op == 2 ? 1e-6f : 1e-5f;
            fw_norm(dz_backend_ref(), op == 2, want, x, w, op == 0 ? b : NULL, rows, dim, eps);
            fw_norm(cuda, op == 2, got, x, w, op == 0 ? b : NULL, rows, dim, eps);
            char what[64];
            snprintf(what, sizeof what, "%s %dx%d", op == 2 ? "rmsnorm" : op ? "layernorm (no bias)" : "layernorm",
                     rows, dim);
            fw_expect_close(got, want, n, 1e-5, what);
            free(x), free(w), free(b), free(got), free(want);
        }
}

static void fw_check_rope(const dz_backend *cuda) {
    static const int shapes[][3] = {{1, 1, 2}, {37, 3, 26}, {300, 2, 8}, {5, 4, 64}}; /* rows, heads, head_dim */
    enum { N_POS = 613 };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int rows = shapes[k][0], heads = shapes[k][1], hd = shapes[k][2];
        const size_t n = (size_t)rows * heads * hd;
        float *cs = malloc(sizeof(float) * N_POS * hd), *got = fw_randn(n, 20 + k, 1);
        float *want = malloc(sizeof(float) * n);
        int *pos = malloc(sizeof(int) * rows);
        dz_rope_table_fill(cs, N_POS, hd, 10000.0f);
        for (int r = 0; r < rows; r++) pos[r] = (r * 7 + 3) % N_POS;
        memcpy(want, got, sizeof(float) * n);
        fw_rope(dz_backend_ref(), want, rows, pos, heads, hd, cs, N_POS);
        fw_rope(cuda, got, rows, pos, heads, hd, cs, N_POS);
        char what[64];
        snprintf(what, sizeof what, "rope %d rows x %d heads of %d", rows, heads, hd);
        fw_expect_close(got, want, n, 1e-6, what);
        free(cs), free(got), free(want), free(pos);
    }
}

static void fw_check_elementwise(const dz_backend *cuda) {
    static const size_t sizes[] = {1, 7, 1000, 9001, 70001};
    static const char *const names[] = {"relu", "swiglu", "add", "fill"};
    static const double tols[] = {0, 1e-6, 0, 0}; /* add: one float add, exact in double too */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int op = 0; op < 4; op++) {
            const size_t n = sizes[k];
            float *x = fw_randn(n, 30 + k, 1), *got = fw_randn(n, 31 + k, 4), *want = malloc(sizeof(float) * n);
            memcpy(want, got, sizeof(float) * n);
            fw_elementwise(dz_backend_ref(), op, want, x, n);
            fw_elementwise(cuda, op, got, x, n);
            char what[64];
            snprintf(what, sizeof what, "%s n=%zu", names[op], n);
            fw_expect_close(got, want, n, tols[op], what);
            free(x), free(got), free(want);
        }
}

static void fw_check_copy_rows(const dz_backend *cuda) {
    static const int shapes[][2] = {{1, 1}, {37, 77}, {300, 5}}; /* rows, cols */
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int rows = shapes[k][0], cols = shapes[k][1], total = 2 * rows + 3;
        const size_t n = (size_t)(total + rows) * cols;
        int *scatter = malloc(sizeof(int) * rows), *gather = malloc(sizeof(int) * rows);
        for (int r = 0; r < rows; r++) scatter[r] = (r * 2 + 3) % total, gather[r] = (r * 5) % rows;
        float *src = fw_randn((size_t)rows * cols, 40 + k, 1), *got = fw_randn(n, 41 + k, 1);
        float *want = malloc(sizeof(float) * n);
        memcpy(want, got, sizeof(float) * n);
        fw_copy_rows(dz_backend_ref(), want, total, src, rows, cols, scatter, gather);
        fw_copy_rows(cuda, got, total, src, rows, cols, scatter, gather);
        char what[64];
        snprintf(what, sizeof what, "copy_rows %d rows of %d", rows, cols);
        fw_expect_close(got, want, n, 0, what);
        free(scatter), free(gather), free(src), free(got), free(want);
    }
}

/* logsumexp_update over chunks, pick_target, logprob_finish: rows of a 9000-wide vocabulary. */
static void fw_check_logprob(const dz_backend *cuda) {
    static const int rows_of[] = {1, 37, 300};
    static const int widths[][3] = {{9000, 0, 0}, {300, 413, 8287}, {5000, 7, 3993}};
    for (int k = 0; k < 3; k++) {
        const int rows = rows_of[k], nc = widths[k][1] ? 3 : 1;
        float *logits = fw_randn((size_t)rows * 9000, 50 + k, 5), got[4 * 300], want[4 * 300];
        int targets[300];
        for (int r = 0; r < rows; r++) targets[r] = (r * 97 + 11) % 9000;
        fw_logprob(dz_backend_ref(), want, logits, rows, widths[k], nc, targets);
        fw_logprob(cuda, got, logits, rows, widths[k], nc, targets);
        char what[64];
        snprintf(what, sizeof what, "log-softmax pieces, %d rows in %d chunks", rows, nc);
        fw_expect_close(got, want, 4 * (size_t)rows, 1e-5, what);
        free(logits);
    }
}

/* Every forward op of the instance but attention; exact: the GEMM is the host seam's. */
static void fw_check_all(const dz_backend *cuda, int exact) {
    fw_check_matmul(cuda, exact);
    fw_check_norms(cuda);
    fw_check_rope(cuda);
    fw_check_elementwise(cuda);
    fw_check_copy_rows(cuda);
    fw_check_logprob(cuda);
    char msg[256];
    if (dz_backend_cuda_status(cuda, msg, sizeof msg) != DZ_CUDA_OK) fail_msg("the cuda instance met: %s", msg);
}

#endif
