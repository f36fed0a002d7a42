/* The GEMM's blocking on the OPT-125m forward's shapes, one thread, by thread CPU time (so
 * that a loaded shared machine disturbs it less than wall time would):
 *
 *   bench_gemm_blocking [ISA] [ROUNDS]     ISA: avx2 (default), avx512, auto
 *
 * prints GFLOP/s per shape of dz_gemm_linear_serial at ISA and of OpenBLAS sgemm (one
 * thread, the core in force: OPENBLAS_CORETYPE=Haswell for an AVX2 machine's), best of
 * ROUNDS interleaved rounds, and the forward's time-weighted figure (bench/shapes.c's
 * weights: 12 layers, head 512-row x 4096-column chunks, 50272 / 4096 per 512 rows).
 * The AVX2 blocking follows the L2 size or DISTZO_GEMM_L2 (src/backend/gemm_blocking.h). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/isa.h"
#include "backend/blas.h"
#include "backend/gemm.h"

typedef struct {
    int M, N, K;
    double count;
} shape;

static const shape shapes[] = {
    {2048, 768, 768, 48}, {2048, 3072, 768, 12}, {2048, 768, 3072, 12}, {512, 4096, 768, 4 * 50272 / 4096.0}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *filled(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n && p; i++) seed = seed * 1664525u + 1013904223u, p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    return p;
}

/* GFLOP/s of one shape, best of 3 calls after a warm-up. */
static double time_shape(int blas, dz_isa isa, const shape *s, float *y, const float *x, const float *w) {
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        const double t0 = cpu_now();
        if (blas) dz_sgemm(false, true, s->M, s->N, s->K, 1.0f, x, s->K, w, s->K, 0.0f, y, s->N);
        else dz_gemm_linear_serial(isa, y, x, w, NULL, s->M, s->N, s->K);
        const double t = cpu_now() - t0;
        if (r && t < best) best = t;
    }
    return 2.0 * s->M * s->N * s->K / best / 1e9;
}

int main(int argc, char **argv) {
    dz_isa isa = DZ_ISA_AVX2;
    dz_error err;
    if (argc > 1 && (dz_isa_parse(argv[1], &isa, &err) != DZ_OK || dz_isa_force(isa, &err) != DZ_OK))
        return fprintf(stderr, "%s\n", err.msg), 1;
    if (argc <= 1) dz_isa_force(isa, NULL);
    const int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (dz_blas_init(&err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    dz_blas_set_threads(1);
    float *x = filled(2048 * 3072, 1), *w = filled(4096 * 3072, 2), *y = filled(2048 * 4096, 3);
    if (!x || !w || !y) return fprintf(stderr, "out of memory\n"), 1;
    double gf[2][N_SHAPES] = {{0}};
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N_SHAPES; i++)
            for (int blas = 0; blas < 2; blas++) {
                const double g = time_shape(blas, isa, &shapes[i], y, x, w);
                if (g > gf[blas][i]) gf[blas][i] = g;
            }
    printf("%s; OpenBLAS %s\n", dz_gemm_describe(), dz_blas_core_name());
    double secs[2] = {0}, flops = 0;
    for (int i = 0; i < N_SHAPES; i++) {
        const shape *s = &shapes[i];
        const double fl = 2.0 * s->M * s->N * s->K * s->count;
        flops += fl;
        for (int k = 0; k < 2; k++) secs[k] += fl / (gf[k][i] * 1e9);
        printf("%5d x %4d x %4d  distzo %6.1f  openblas %6.1f  (%.3f)\n", s->M, s->N, s->K, gf[0][i], gf[1][i],
               gf[0][i] / gf[1][i]);
    }
    printf("forward-weighted    distzo %6.1f  openblas %6.1f  (%.3f)\n", flops / secs[0] / 1e9, flops / secs[1] / 1e9,
           secs[1] / secs[0]);
    free(x), free(w), free(y);
    return 0;
}
