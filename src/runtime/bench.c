/* distzo/bench.h: the OpenBLAS reference and distzo's GEMM, timed the same way. */
#include "distzo/bench.h"

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/blas.h"
#include "backend/gemm.h"
#include "core/rng.h"
#include "core/util.h"

dz_status dz_bench_reference_load(dz_error *err) {
    dz_status st = dz_blas_init(err);
    if (st == DZ_OK) dz_blas_set_threads(dz_get_num_threads()); /* the same thread count as distzo's GEMM */
    return st;
}

const char *dz_bench_reference_core(void) { return dz_blas_core_name(); }

double dz_bench_gemm_gflops(dz_bench_gemm which, int M, int N, int K, double min_seconds) {
    float *x = malloc(sizeof(float) * (size_t)M * K), *w = malloc(sizeof(float) * (size_t)N * K);
    float *y = malloc(sizeof(float) * (size_t)M * N);
    double gflops = -1.0;
    if (x && w && y) {
        uint64_t state = 99;
        for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)dz_uniform01(&state) - 0.5f;
        for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)dz_uniform01(&state) - 0.5f;
        int calls = -1; /* the first call warms up pages, threads and caches */
        double t0 = 0.0, dt = 0.0;
        do {
            if (which == DZ_BENCH_GEMM_OPENBLAS) dz_sgemm(false, true, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
            else dz_gemm_linear(y, x, w, NULL, M, N, K);
            if (++calls == 0) t0 = dz_now();
            dt = dz_now() - t0;
        } while (calls < 2 || dt < min_seconds);
        gflops = 2.0 * M * N * (double)K * calls / dt * 1e-9;
    }
    free(x), free(w), free(y);
    return gflops;
}

void dz_bench_random_tokens(int *tokens, size_t n, int lo, int hi, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) tokens[i] = lo + (int)dz_uniform_below(&state, (uint64_t)(hi - lo));
}
