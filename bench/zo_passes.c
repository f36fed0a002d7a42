/* The ZO passes of each estimator, side by side in one run: the update pass alone (z of
 * the step and theta -= lr g z over every parameter: what replay and the unfused step do),
 * and a whole fused step on a 1 x 2-token batch (the update fused into the perturbation
 * pass, w+- of every block, the two forwards at their cheapest). Repetitions interleave
 * the estimators, so machine load hits them alike; the median of each is printed, with its
 * ratio to MeZO's (full-rank Gaussian z).
 * usage: bench_zo_passes PRESET [LAYERS [REPS [THREADS]]]   e.g. smollm2-135m 30 7 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/distzo.h"

static void nll(const float *lp, const float *plp, void *user, double *out) {
    (void)plp, (void)user;
    out[0] = -lp[0], out[1] = 1.0;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, by_value);
    return x[n / 2];
}

enum { N_EST = 6, MAX_REPS = 64 };

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PRESET [LAYERS [REPS [THREADS]]]\n", argv[0]);
        return 2;
    }
    const int layers = argc > 2 ? atoi(argv[2]) : 0, reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps < 1 || reps > MAX_REPS) return fprintf(stderr, "REPS: 1..%d\n", MAX_REPS), 2;
    dz_error err = {0};
    if (dz_runtime_init(argc > 4 ? atoi(argv[4]) : 0, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    dz_config cfg;
    if (dz_config_preset(argv[1], &cfg, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    if (layers > 0) cfg.n_layers = layers;
    const struct { const char *name; dz_zo_params p; } est[N_EST] = {
        {"mezo (Gaussian, full rank)", {.estimator = DZ_ZO_MEZO}},
        {"sparse (density 0.25)", {.estimator = DZ_ZO_SPARSE, .sparse_density = 0.25f}},
        {"lozo (rank 2)", {.estimator = DZ_ZO_LOZO, .lozo_rank = 2, .lozo_nu = 50}},
        {"lozo (rank 8)", {.estimator = DZ_ZO_LOZO, .lozo_rank = 8, .lozo_nu = 50}},
        {"hizoo (diagonal H, 3 forwards)", {.estimator = DZ_ZO_HIZOO, .hizoo_smooth = 1e-6f}},
        {"hizoo-l (--hizoo-rank 1, 3 forwards)", {.estimator = DZ_ZO_HIZOO, .hizoo_smooth = 1e-6f, .hizoo_rank = 1}},
    };
    dz_model *m[N_EST];
    dz_forward *f[N_EST];
    dz_zo_engine *e[N_EST];
    for (int k = 0; k < N_EST; k++) {
        dz_zo_params p = est[k].p;
        p.seed = 1, p.eps = 1e-3f, p.q = 1, p.fuse = 1;
        if (dz_model_init_random(&cfg, DZ_F32, 7, 0.02f, &m[k], &err) != DZ_OK ||
            dz_forward_create_streams(m[k], 1, 2, 0, 2, &f[k], &err) != DZ_OK ||
            dz_zo_engine_create(m[k], f[k], &p, &e[k], &err) != DZ_OK)
            return fprintf(stderr, "%s: %s\n", est[k].name, err.msg), 1;
    }
    const double params = (double)dz_param_table_numel(dz_model_params(m[0]));
    int tokens[2] = {5, 9}, lengths[1] = {2}, rows[1] = {0}, targets[1] = {7};
    const dz_zo_batch b = {.tokens = tokens, .lengths = lengths, .B = 1, .T = 2, .rows = rows, .targets = targets,
                           .n_rows = 1, .loss = nll};
    double upd[N_EST][MAX_REPS], step[N_EST][MAX_REPS];
    const float g[2] = {0.5f, 1e-6f}; /* g, and HiZOO's curvature step c (read after the q values) */
    for (int r = 0; r <= reps; r++) /* r = 0 warms up */
        for (int k = 0; k < N_EST; k++) {
            double t0 = dz_now();
            if (dz_zo_apply(e[k], (uint32_t)r, 1e-6f, g, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
            const double t1 = dz_now();
            dz_zo_step_result res;
            if (dz_zo_step(e[k], (uint32_t)r, 1e-6f, &b, &res, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
            const double t2 = dz_now();
            if (dz_zo_flush(e[k], &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), 1;
            if (r > 0) upd[k][r - 1] = t1 - t0, step[k][r - 1] = t2 - t1;
        }
    printf("%s, %d layers, %.1fM parameters, %d threads, median of %d\n", argv[1], cfg.n_layers, params / 1e6,
           dz_runtime_threads(), reps);
    printf("| estimator | update pass (s) | x MeZO | fused step, 1 x 2 tokens (s) | x MeZO |\n|---|---|---|---|---|\n");
    double u0 = 0, s0 = 0;
    for (int k = 0; k < N_EST; k++) {
        const double u = median(upd[k], reps), s = median(step[k], reps);
        if (k == 0) u0 = u, s0 = s;
        printf("| %s | %.4f | %.2f | %.4f | %.2f |\n", est[k].name, u, u / u0, s, s / s0);
    }
    for (int k = 0; k < N_EST; k++) {
        dz_zo_engine_free(e[k]);
        dz_forward_free(f[k]);
        dz_model_free(m[k]);
    }
    return 0;
}
