/* One layer's matrices, both signs, the two ways a step can make them (README.md, "The
 * perturbation in the packing"), interleaved repetitions, medians and their ratio:
 *   old: the pass (update then perturb, w+ and w- of every matrix written to memory, 32768-
 *        element spans over the threads), then each matrix's two GEMMs on w+ and w-;
 *   new: each matrix's dz_gemm_linear_pair on theta, the update applied in its packing;
 *   gemms: the two GEMMs alone on ready w+ / w- (what neither way can go below).
 * Checks that old and new give the same bits. SmolLM2-135M's layer shapes.
 * usage: bench_gemm_pair [ROWS [REPS [THREADS [rademacher]]]]   e.g. 640 9 2
 * (rademacher: the cheaper z of the contract's other distribution, to see the share of z) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/gemm.h"
#include "core/threads.h"
#include "distzo/util.h"

enum { N_MAT = 7, SPAN = 32768, MAX_REPS = 64 };
static const int shape[N_MAT][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}};

typedef struct layer {
    float *theta[N_MAT], *wp[N_MAT], *wm[N_MAT];
    float *x, *y[2][N_MAT];
    int rows;
    dz_zdist dist;
    float g;
} layer;

static void span_task(void *ctx, int k, int thread) {
    (void)thread;
    layer *L = ctx;
    int m = 0;
    size_t i0 = (size_t)k * SPAN;
    for (; m < N_MAT; m++) { /* span k's matrix and offset */
        const size_t n = (size_t)shape[m][0] * shape[m][1], spans = (n + SPAN - 1) / SPAN;
        if (i0 < spans * SPAN) break;
        i0 -= spans * SPAN;
    }
    const size_t n = (size_t)shape[m][0] * shape[m][1], len = n - i0 < SPAN ? n - i0 : SPAN;
    const dz_backend *be = dz_backend_cpu();
    const dz_zo_update u = {.g = &L->g, .q = 1, .lr = 1e-7f, .step = 3};
    be->ops->update_then_perturb_f32(be, L->theta[m] + i0, L->wp[m] + i0, L->wm[m] + i0, len, &u, 1e-3f, 1, m, 7, i0,
                                     L->dist);
}

static int n_spans(void) {
    int s = 0;
    for (int m = 0; m < N_MAT; m++) s += (int)(((size_t)shape[m][0] * shape[m][1] + SPAN - 1) / SPAN);
    return s;
}

/* Process CPU time: with one thread, what the machine's load does not inflate. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double run(layer *L, int way, double *cpu) {
    const double t0 = dz_now(), c0 = cpu_now();
    if (way == 0) dz_parallel_for_dynamic(n_spans(), span_task, L);
    for (int m = 0; m < N_MAT; m++) {
        const int N = shape[m][0], K = shape[m][1];
        if (way == 1) {
            const dz_zo_update u = {.g = &L->g, .q = 1, .lr = 1e-7f, .step = 3};
            const dz_gemm_perturb pt = {.eps = 1e-3f, .seed = 1, .tensor = (uint32_t)m, .draw = 7, .dist = L->dist,
                                        .upd = &u};
            const float *x[2] = {L->x, L->x}, *b[2] = {NULL, NULL};
            const int M[2] = {L->rows, L->rows};
            float *y[2] = {L->y[0][m], L->y[1][m]};
            dz_gemm_linear_pair(y, x, M, L->theta[m], b, N, K, &pt);
            continue;
        }
        dz_gemm_linear(L->y[0][m], L->x, L->wp[m], NULL, L->rows, N, K);
        dz_gemm_linear(L->y[1][m], L->x, L->wm[m], NULL, L->rows, N, K);
    }
    *cpu = cpu_now() - c0;
    return dz_now() - t0;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *filled(size_t n, unsigned seed) {
    float *p = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) seed = seed * 1664525u + 1013904223u, p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    return p;
}

/* old and new from the same theta: the same bits in both signs' outputs */
static int same_bits(layer *L, float *const *theta0) {
    float *y_old[2][N_MAT];
    for (int w = 0; w < 2; w++) {
        for (int m = 0; m < N_MAT; m++) memcpy(L->theta[m], theta0[m], sizeof(float) * shape[m][0] * shape[m][1]);
        double cpu;
        run(L, w, &cpu);
        for (int m = 0; m < N_MAT && w == 0; m++)
            for (int s = 0; s < 2; s++) {
                const size_t n = sizeof(float) * L->rows * shape[m][0];
                y_old[s][m] = malloc(n);
                memcpy(y_old[s][m], L->y[s][m], n);
            }
    }
    int same = 1;
    for (int m = 0; m < N_MAT; m++)
        for (int s = 0; s < 2; s++) {
            same &= !memcmp(y_old[s][m], L->y[s][m], sizeof(float) * L->rows * shape[m][0]);
            free(y_old[s][m]);
        }
    return same;
}

int main(int argc, char **argv) {
    layer L = {.rows = argc > 1 ? atoi(argv[1]) : 640, .g = 0.5f};
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (reps > MAX_REPS) reps = MAX_REPS;
    dz_set_num_threads(argc > 3 ? atoi(argv[3]) : 2);
    L.dist = argc > 4 && !strcmp(argv[4], "rademacher") ? DZ_Z_RADEMACHER : DZ_Z_GAUSSIAN;
    float *theta0[N_MAT];
    for (int m = 0; m < N_MAT; m++) {
        const size_t n = (size_t)shape[m][0] * shape[m][1];
        theta0[m] = filled(n, 1 + m), L.theta[m] = malloc(sizeof(float) * n);
        L.wp[m] = malloc(sizeof(float) * n), L.wm[m] = malloc(sizeof(float) * n);
        for (int s = 0; s < 2; s++) L.y[s][m] = malloc(sizeof(float) * L.rows * shape[m][0]);
    }
    L.x = filled((size_t)L.rows * 1536, 99);
    const int same = same_bits(&L, theta0);
    double f[2][3][MAX_REPS]; /* [wall, cpu][way][rep] */
    for (int r = 0; r < reps; r++) /* the ways interleaved, which goes first rotating */
        for (int w = 0; w < 3; w++) {
            const int way = (w + r) % 3;
            f[0][way][r] = run(&L, way, &f[1][way][r]);
        }
    printf("layer of SmolLM2-135M, %d rows, both signs, %s z, %d reps, medians:\n", L.rows,
           L.dist == DZ_Z_RADEMACHER ? "rademacher" : "gaussian", reps);
    for (int c = 0; c < 2; c++) {
        for (int w = 0; w < 3; w++) qsort(f[c][w], (size_t)reps, sizeof(double), by_value);
        const double old = f[c][0][reps / 2], nw = f[c][1][reps / 2], gm = f[c][2][reps / 2];
        printf("%s ms: old %.1f  new %.1f  gemms alone %.1f   new / old %.3f   gemms / old %.3f   gemms / new %.3f\n",
               c ? "cpu " : "wall", old * 1e3, nw * 1e3, gm * 1e3, nw / old, gm / old, gm / nw);
    }
    printf("same bits: %s\n", same ? "yes" : "NO");
    return same ? 0 : 1;
}
