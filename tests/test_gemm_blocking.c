/* The GEMM's blocking per level (src/backend/gemm_blocking.c) under DISTZO_GEMM_L2, set here
 * before the first GEMM as a user would set it to run a Zen 2's blocking (512 KiB L2)
 * elsewhere: AVX2's block of x rows fills half of that L2 (84 rows of 768 floats, a
 * multiple of its 6-row tile), AVX-512 keeps its own blocking, and the GEMM under that
 * blocking still gives the k-order FMA chain, bit for bit, on shapes with several row
 * blocks, a ragged last one, and several K blocks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/rng.h"
#include "backend/gemm.h"
#include "backend/gemm_blocking.h"

static const dz_gemm_blocking max = {240, 768, 768};

static void avx2_rows_fill_half_the_l2(void **s) {
    (void)s;
    assert_int_equal(dz_gemm_blocking_l2(), 512 << 10);
    const dz_gemm_blocking b = dz_gemm_blocking_for(DZ_ISA_AVX2, 6, max);
    assert_int_equal(b.mc, 84); /* 256 KiB / (768 x 4 B) = 85.3 rows, down to 6-row tiles */
    assert_int_equal(b.kc, 768);
    assert_int_equal(b.nc, 768);
    const dz_gemm_blocking w = dz_gemm_blocking_for(DZ_ISA_AVX512, 12, max);
    assert_true(w.mc == 240 && w.kc == 768 && w.nc == 768);
    assert_non_null(strstr(dz_gemm_describe(), "(L2 512 KiB)"));
}

static float *randn(size_t n, uint64_t seed) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)dz_normal(&seed);
    return x;
}

static void small_l2_blocking_keeps_the_chain(void **s) {
    (void)s;
    static const int shapes[][3] = {{200, 40, 900}, {257, 33, 1536}, {90, 70, 768}};
    for (int isa = DZ_ISA_BASELINE; isa <= (int)dz_isa_best(); isa++)
        for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
            const int M = shapes[c][0], N = shapes[c][1], K = shapes[c][2];
            float *x = randn((size_t)M * K, 10 + c), *w = randn((size_t)N * K, 20 + c), *b = randn(N, 30 + c);
            float *got = malloc(sizeof(float) * M * N);
            dz_gemm_linear_serial((dz_isa)isa, got, x, w, b, M, N, K);
            for (int i = 0; i < M; i++)
                for (int n = 0; n < N; n++) {
                    float acc = 0.0f;
                    for (int k = 0; k < K; k++) acc = fmaf(x[(size_t)i * K + k], w[(size_t)n * K + k], acc);
                    if (memcmp(&got[(size_t)i * N + n], &(float){acc + b[n]}, sizeof(float)))
                        fail_msg("%s: %d x %d x %d, y[%d][%d] is not the k-order chain", dz_isa_name((dz_isa)isa), M,
                                 N, K, i, n);
                }
            free(x), free(w), free(b), free(got);
        }
}

int main(void) {
    setenv("DISTZO_GEMM_L2", "512K", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(avx2_rows_fill_half_the_l2),
        cmocka_unit_test(small_l2_blocking_keeps_the_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
