/* distzo/bench.h: the OpenBLAS reference and distzo's GEMM, timed the same way. */
#include "distzo/bench.h"

#include <stdlib.h>

#include "backend/backend.h"
#include "backend/blas.h"
#include "backend/gemm.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/util.h"

#include <string.h>

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

/* ---- The ZO step's element-wise passes and the memory bandwidth ---------------------- */

enum { PASS_SPAN = 32768, COPY_FLOATS = 1 << 26 }; /* PASS_SPAN: the pipeline's span (src/pipeline) */

typedef enum pass_kind { PASS_ZGEN, PASS_PERTURB, PASS_UPDATE, PASS_FUSED, PASS_READ, PASS_COPY } pass_kind;

typedef struct pass_job {
    const dz_backend *be;
    pass_kind kind;
    float *theta, *wp, *wm, *z, *dst; /* z: PASS_SPAN floats per thread */
    size_t n, block_spans;            /* the working copy holds block_spans spans */
    const dz_zo_update *upd;
    dz_zdist dist;                    /* v1 or v2, Gaussian or Rademacher */
    uint32_t *sums;                   /* PASS_READ: one per task, so the reads cannot be dropped */
} pass_job;

static void pass_task(void *ctx, int k, int thread) {
    const pass_job *j = ctx;
    const size_t i0 = (size_t)k * PASS_SPAN, len = j->n - i0 < PASS_SPAN ? j->n - i0 : PASS_SPAN;
    const size_t w = (size_t)k % j->block_spans * PASS_SPAN;
    float *th = j->theta + i0;
    switch (j->kind) {
    case PASS_ZGEN:
        for (uint32_t d = 0; d < 2; d++)
            j->be->ops->z_fill(j->be, j->z + (size_t)thread * PASS_SPAN, 1, 0, d, i0, len, j->dist);
        break;
    case PASS_PERTURB:
        j->be->ops->perturb_pair(j->be, th, j->wp + w, j->wm + w, len, 1e-3f, 1, 0, 1, i0, j->dist);
        break;
    case PASS_UPDATE:
        j->be->ops->update_f32(j->be, th, len, j->upd->g, 1, 0.0f, 0.0f, 1, 0, 0, i0, j->dist);
        break;
    case PASS_FUSED:
        j->be->ops->update_then_perturb_f32(j->be, th, j->wp + w, j->wm + w, len, j->upd, 1e-3f, 1, 0, 1, i0,
                                            j->dist);
        break;
    case PASS_READ: {
        const uint32_t *u = (const uint32_t *)th;
        uint32_t s = 0;
        for (size_t i = 0; i < len; i++) s += u[i];
        j->sums[k] = s;
        break;
    }
    case PASS_COPY:
        memcpy(j->dst + i0, th, len * sizeof(float));
        break;
    }
}

static double pass_seconds(pass_job *j, pass_kind kind, size_t n, int rounds) {
    j->kind = kind, j->n = n;
    const int tasks = (int)((n + PASS_SPAN - 1) / PASS_SPAN);
    double best = 1e30;
    for (int r = 0; r <= rounds; r++) { /* round 0 warms up pages, caches and threads */
        const double t0 = dz_now();
        dz_parallel_for_dynamic(tasks, pass_task, j);
        const double dt = dz_now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return best;
}

dz_status dz_bench_zo_passes_run(size_t n, size_t block, int rounds, int rademacher, dz_bench_zo_passes *out,
                                 dz_error *err) {
    memset(out, 0, sizeof *out);
    const size_t block_spans = block / PASS_SPAN + 1, nt = n > COPY_FLOATS ? n : COPY_FLOATS;
    const float g = 1.0f;
    const dz_zo_update upd = {.g = &g, .q = 1, .lr = 0.0f, .wd = 0.0f, .step = 0};
    const dz_zdist v1 = dz_zdist_of(rademacher, 0), v2 = dz_zdist_of(rademacher, 1);
    pass_job j = {.be = dz_backend_cpu(), .block_spans = block_spans, .upd = &upd, .dist = v1};
    j.theta = dz_alloc(nt * sizeof(float));
    j.wp = dz_alloc(block_spans * PASS_SPAN * sizeof(float));
    j.wm = dz_alloc(block_spans * PASS_SPAN * sizeof(float));
    j.z = dz_alloc((size_t)dz_parallel_threads() * PASS_SPAN * sizeof(float));
    j.dst = dz_alloc((size_t)COPY_FLOATS * sizeof(float));
    j.sums = dz_alloc((nt / PASS_SPAN + 1) * sizeof(uint32_t));
    dz_status st = DZ_OK;
    if (!j.theta || !j.wp || !j.wm || !j.z || !j.dst || !j.sums) {
        st = dz_fail(err, DZ_ERR_NOMEM, "bench: no memory for the ZO passes over %zu parameters", n);
    } else {
        for (size_t i = 0; i < nt; i++) j.theta[i] = 1e-3f * (float)(i % 1000) - 0.5f;
        out->elements = (double)n, out->rademacher = rademacher != 0;
        out->zgen_s = pass_seconds(&j, PASS_ZGEN, n, rounds);
        out->perturb_s = pass_seconds(&j, PASS_PERTURB, n, rounds);
        out->update_s = pass_seconds(&j, PASS_UPDATE, n, rounds);
        out->fused_s = pass_seconds(&j, PASS_FUSED, n, rounds);
        j.dist = v2;
        out->zgen_v2_s = pass_seconds(&j, PASS_ZGEN, n, rounds);
        out->fused_v2_s = pass_seconds(&j, PASS_FUSED, n, rounds);
        j.dist = v1;
        out->perturb_bytes = 12.0 * (double)n, out->update_bytes = 8.0 * (double)n, out->fused_bytes = 16.0 * (double)n;
        out->read_gbs = 4.0 * (double)nt / pass_seconds(&j, PASS_READ, nt, rounds) * 1e-9;
        out->copy_gbs = 8.0 * COPY_FLOATS / pass_seconds(&j, PASS_COPY, COPY_FLOATS, rounds) * 1e-9;
    }
    dz_free(j.theta), dz_free(j.wp), dz_free(j.wm), dz_free(j.z), dz_free(j.dst), dz_free(j.sums);
    return st;
}
