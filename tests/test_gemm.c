/* distzo's Linear GEMM (src/backend/gemm.c) against the order it promises, written here as
 * plain loops: y[i][n] = fmaf chain over k = 0..K-1 from +0, then + bias[n]. Every kernel
 * path this machine can execute must give exactly those bits, on shapes that exercise
 * edge tiles, several K blocks and the copied-rows path; and a row's bits must not depend
 * on M, its place in the call or the thread count. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/threads.h"
#include "core/rng.h"
#include "backend/backend.h"
#include "backend/gemm.h"

static float *randn(size_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = (float)dz_normal(&seed);
    return x;
}

/* The promised order, independently of gemm.c. */
static void reference_chain(float *y, const float *x, const float *w, const float *bias, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(x[(size_t)i * K + k], w[(size_t)n * K + k], acc);
            y[(size_t)i * N + n] = bias ? acc + bias[n] : acc;
        }
}

/* Shapes: 1 x 1 x 1, edge rows and columns for every MR/NR, K past one block (768) with a
 * ragged end, K a multiple of 512 (rows copied), the model widths; and M of NR/2 .. NR rows
 * (the few-rows path: 25, 29, 31 and 20 rows on AVX-512, 12, 13 and 10 on AVX2, 5, 7 and 6 on
 * the baseline), with K past a block and K a multiple of 512 among them. */
static const int shapes[][3] = {{1, 1, 1},      {3, 5, 7},      {13, 33, 17},  {25, 65, 64},   {7, 100, 513},
                                {12, 32, 768},  {29, 47, 769},  {5, 49, 1600}, {37, 96, 3072}, {31, 192, 576},
                                {64, 1536, 40}, {2, 3, 0},      {20, 70, 1024}, {10, 9, 512},  {6, 19, 2048}};

static void every_path_gives_the_promised_chain(void **s) {
    (void)s;
    int paths = 0;
    for (int isa = DZ_ISA_BASELINE; isa <= (int)dz_isa_best(); isa++, paths++)
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
            const int M = shapes[c][0], N = shapes[c][1], K = shapes[c][2];
            float *x = randn((size_t)M * K, 1 + c), *w = randn((size_t)N * K, 2 + c), *b = randn(N, 3 + c);
            float *want = malloc(sizeof(float) * M * N), *got = malloc(sizeof(float) * M * N);
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                reference_chain(want, x, w, with_bias ? b : NULL, M, N, K);
                memset(got, 0xff, sizeof(float) * M * N); /* NaNs: every element must be written */
                dz_gemm_linear_serial((dz_isa)isa, got, x, w, with_bias ? b : NULL, M, N, K);
                if (memcmp(got, want, sizeof(float) * M * N))
                    fail_msg("%s: %d x %d x %d (bias %d) differs from the k-order FMA chain", dz_isa_name((dz_isa)isa),
                             M, N, K, with_bias);
            }
            free(x), free(w), free(b), free(want), free(got);
        }
    print_message("kernel paths checked: %d (best here: %s)\n", paths, dz_isa_name(dz_isa_best()));
}

/* Row r of a 2048-row product, computed in calls of other M at other offsets, on every
 * path, with 1, 2 and 3 threads through dz_gemm_linear. */
static void rows_do_not_depend_on_m_offset_or_threads(void **s) {
    (void)s;
    const int full = 300, N = 200, K = 800; /* K: two blocks */
    float *x = randn((size_t)full * K, 7), *w = randn((size_t)N * K, 8), *b = randn(N, 9);
    float *want = malloc(sizeof(float) * full * N), *got = malloc(sizeof(float) * full * N);
    reference_chain(want, x, w, b, full, N, K);
    const int ms[] = {1, 3, 16, 100, 299};
    for (int isa = DZ_ISA_BASELINE; isa <= (int)dz_isa_best(); isa++) {
        assert_int_equal(dz_isa_force((dz_isa)isa, NULL), DZ_OK);
        for (int threads = 1; threads <= 3; threads++) {
            dz_set_num_threads(threads);
            for (size_t m = 0; m < sizeof ms / sizeof ms[0]; m++)
                for (int off = 0; off + ms[m] <= full; off += ms[m] * 7 + 1) {
                    dz_gemm_linear(got, x + (size_t)off * K, w, b, ms[m], N, K);
                    if (memcmp(got, want + (size_t)off * N, sizeof(float) * ms[m] * N))
                        fail_msg("%s, %d threads: rows %d..%d computed as M = %d differ", dz_isa_name((dz_isa)isa),
                                 threads, off, off + ms[m] - 1, ms[m]);
                }
        }
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    dz_set_num_threads(2);
    free(x), free(w), free(b), free(want), free(got);
}

/* The chain is a good product too: within fp32 rounding of a double-precision sum. */
static void close_to_the_exact_product(void **s) {
    (void)s;
    const int M = 20, N = 70, K = 3000;
    float *x = randn((size_t)M * K, 11), *w = randn((size_t)N * K, 12), *y = malloc(sizeof(float) * M * N);
    dz_gemm_linear(y, x, w, NULL, M, N, K);
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int n = 0; n < N; n++) {
            double acc = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                const double p = (double)x[(size_t)i * K + k] * w[(size_t)n * K + k];
                acc += p, mag += fabs(p);
            }
            worst = fmax(worst, fabs(y[(size_t)i * N + n] - acc) / mag);
        }
    assert_true(worst < K * 6e-8);
    free(x), free(w), free(y);
}

/* Both signs of one matrix from theta (dz_gemm_linear_pair): bitwise the plain chain on
 * the w+ and w- that the backend's update_then_perturb_f32 writes to memory, and the same
 * updated theta, on every path, every shape above, with and without a pending update (two
 * samples, decay), signs of different M (one empty), an element offset that is not a
 * Philox block boundary, both z distributions, 1-4 threads (splits that share columns). */
static void pair_check(dz_isa isa, int threads, int M, int N, int K, uint64_t c, dz_zdist dist) {
    const int Ms[2] = {M, (int)(c % 3 == 2 ? 0 : M + (int)c % 5)};
    const float g[2] = {0.5f, -0.25f};
    const dz_zo_update upd = {.g = g, .q = 2, .lr = 1e-2f, .wd = 0.1f, .step = 4};
    const dz_gemm_perturb pt = {.eps = 1e-3f, .seed = 77 + c, .tensor = 5, .draw = 9, .i0 = 3 + c, .dist = dist,
                                .upd = c % 4 < 2 ? &upd : NULL};
    float *theta = randn((size_t)N * K, 20 + c), *th_want = malloc(sizeof(float) * (N * K + 1)),
          *wp = malloc(sizeof(float) * (N * K + 1)), *wm = malloc(sizeof(float) * (N * K + 1));
    memcpy(th_want, theta, sizeof(float) * N * K);
    dz_backend_cpu()->ops->update_then_perturb_f32(dz_backend_cpu(), th_want, wp, wm, (size_t)N * K, pt.upd, pt.eps,
                                                   pt.seed, pt.tensor, pt.draw, pt.i0, dist);
    float *x[2], *b[2], *want[2], *got[2];
    for (int s = 0; s < 2; s++) {
        x[s] = randn((size_t)Ms[s] * K, 30 + c + s), b[s] = s ? NULL : randn(N, 40 + c);
        want[s] = malloc(sizeof(float) * (Ms[s] * N + 1)), got[s] = malloc(sizeof(float) * (Ms[s] * N + 1));
        reference_chain(want[s], x[s], s ? wm : wp, b[s], Ms[s], N, K);
        memset(got[s], 0xff, sizeof(float) * Ms[s] * N);
    }
    if (threads == 0)
        dz_gemm_linear_pair_serial(isa, got, (const float *const *)x, Ms, theta, (const float *const *)b, N, K, &pt);
    else
        dz_gemm_linear_pair(got, (const float *const *)x, Ms, theta, (const float *const *)b, N, K, &pt);
    for (int s = 0; s < 2; s++) {
        if (memcmp(got[s], want[s], sizeof(float) * Ms[s] * N))
            fail_msg("%s, %d threads: pair %d x %d x %d sign %d differs from perturb_pair + the chain",
                     dz_isa_name(isa), threads, Ms[s], N, K, s);
        free(x[s]), free(b[s]), free(want[s]), free(got[s]);
    }
    if (memcmp(theta, th_want, sizeof(float) * N * K))
        fail_msg("%s, %d threads: pair %d x %d updated theta differs", dz_isa_name(isa), threads, N, K);
    free(theta), free(th_want), free(wp), free(wm);
}

static void pair_packs_the_perturbed_weights(void **s) {
    (void)s;
    for (int isa = DZ_ISA_BASELINE; isa <= (int)dz_isa_best(); isa++) {
        assert_int_equal(dz_isa_force((dz_isa)isa, NULL), DZ_OK);
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
            for (int threads = 0; threads <= 3; threads++) {
                dz_set_num_threads(threads ? threads : 1);
                pair_check((dz_isa)isa, threads, shapes[c][0], shapes[c][1], shapes[c][2], c,
                           c % 2 ? DZ_Z_RADEMACHER : DZ_Z_GAUSSIAN);
            }
        dz_set_num_threads(3); /* a model's widths, several N blocks, fewer panels than threads */
        pair_check((dz_isa)isa, 3, 70, 1600, 576, 16, DZ_Z_GAUSSIAN);
        pair_check((dz_isa)isa, 3, 40, 40, 1536, 17, DZ_Z_GAUSSIAN);
        dz_set_num_threads(4);
        pair_check((dz_isa)isa, 4, 40, 40, 1536, 20, DZ_Z_GAUSSIAN);
        pair_check((dz_isa)isa, 4, 0, 72, 800, 21, DZ_Z_RADEMACHER); /* no rows: theta updated all the same */
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    dz_set_num_threads(2);
}

static void forcing_a_path_the_cpu_lacks_fails(void **s) {
    (void)s;
    dz_error err = {0};
    dz_isa parsed;
    assert_int_equal(dz_isa_parse("avx2", &parsed, &err), DZ_OK);
    assert_int_equal(parsed, DZ_ISA_AVX2);
    assert_int_equal(dz_isa_parse("sse9", &parsed, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "sse9"));
    if (dz_isa_best() < DZ_ISA_AVX512) {
        assert_int_equal(dz_isa_force(DZ_ISA_AVX512, &err), DZ_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "avx512"));
    }
    assert_int_equal(dz_isa_force(DZ_ISA_BASELINE, &err), DZ_OK);
    assert_int_equal(dz_isa_active(), DZ_ISA_BASELINE);
    assert_non_null(strstr(dz_gemm_describe(), "baseline"));
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, &err), DZ_OK);
    assert_int_equal(dz_isa_active(), dz_isa_best());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_path_gives_the_promised_chain),
        cmocka_unit_test(rows_do_not_depend_on_m_offset_or_threads),
        cmocka_unit_test(close_to_the_exact_product),
        cmocka_unit_test(pair_packs_the_perturbed_weights),
        cmocka_unit_test(forcing_a_path_the_cpu_lacks_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
