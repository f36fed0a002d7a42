/* bench forward: forward-pass throughput against this machine's own sgemm speed on the
 * same GEMM shapes, measured side by side in one run. */
#include "distzo/benchmarks.h"

#include "bench/losses.h"
#include "bench/shapes.h"
#include "distzo/bench.h"

typedef struct forward_result {
    int runs;
    double fwd, flops, achieved, sgemm_model, ours_model, sgemm_square;
} forward_result;

/* Forwards, after one warm-up, until at least two ran and `seconds` passed: seconds each. */
static dz_status time_forwards(dz_forward *f, dz_lm_work *lw, const dz_weight_source *w, const dz_bench_forward_spec *s,
                               int *runs, double *fwd, dz_error *err) {
    double t0 = 0.0, elapsed = 0.0;
    *runs = 0;
    for (int warm = 1; *runs < 2 || elapsed < s->seconds; warm = 0) {
        if (!warm && *runs == 0) t0 = dz_now();
        dz_status st = dz_lm_work_forward(f, w, lw, s->batch, s->seq, err);
        if (st != DZ_OK) return st;
        if (!warm) elapsed = dz_now() - t0, ++*runs;
        else t0 = dz_now();
    }
    *fwd = elapsed / *runs;
    return DZ_OK;
}

static void print_forward(const dz_bench_report *r, const dz_model *m, const dz_forward *f, const dz_bench_forward_spec *s,
                          const forward_result *x) {
    FILE *out = r->out;
    const int batch = s->batch, seq = s->seq, N = batch * seq;
    if (r->json) {
        fprintf(out, "{\"model\": ");
        dz_write_json_string(out, r->model);
        fprintf(out, ", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"dtype\": \"%s\", \"runs\": %d, "
               "\"forward_seconds\": %.4f, \"tokens_per_second\": %.1f, \"gflop_per_forward\": %.2f, "
               "\"forward_gflops\": %.2f, \"sgemm_gflops_model_shapes\": %.2f, \"sgemm_gflops_2048\": %.2f, "
               "\"distzo_gemm_gflops_model_shapes\": %.2f, \"gemm_ratio\": %.3f, \"ratio\": %.3f, \"blas_core\": \"%s\", \"isa\": \"%s\", \"gemm\": ",
               batch, seq, dz_runtime_threads(), dz_dtype_name(dz_model_dtype(m)), x->runs, x->fwd, N / x->fwd,
               x->flops / 1e9, x->achieved, x->sgemm_model, x->sgemm_square, x->ours_model, x->ours_model / x->sgemm_model,
               x->achieved / x->sgemm_model, dz_bench_reference_core(), dz_runtime_kernels());
        dz_write_json_string(out, dz_runtime_gemm());
        fprintf(out, ", \"activation_bytes\": %zu, \"peak_rss_bytes\": %zu}\n", dz_forward_bytes(f), dz_runtime_peak_rss());
        return;
    }
    fprintf(out, "forward  %s, %d x %d tokens, %d threads, %s weights\n", r->model, batch, seq, dz_runtime_threads(),
            dz_dtype_name(dz_model_dtype(m)));
    fprintf(out, "time     %.4f s per forward (%d runs), %.0f tokens/s\n", x->fwd, x->runs, N / x->fwd);
    fprintf(out, "compute  %.1f GFLOP per forward -> %.1f GFLOP/s\n", x->flops / 1e9, x->achieved);
    fprintf(out, "gemm     %s\n", dz_runtime_gemm());
    fprintf(out, "sgemm    %.1f GFLOP/s on the model's GEMM shapes, %.1f GFLOP/s on 2048^3 (OpenBLAS %s, the reference)\n",
            x->sgemm_model, x->sgemm_square, dz_bench_reference_core());
    fprintf(out, "         distzo's GEMM %.1f GFLOP/s on the same shapes = %.1f%% of OpenBLAS\n", x->ours_model,
            100.0 * x->ours_model / x->sgemm_model);
    fprintf(out, "ratio    forward / OpenBLAS sgemm = %.1f%%\n", 100.0 * x->achieved / x->sgemm_model);
    fprintf(out, "memory   activations %.1f MB, peak RSS %.1f MB\n", dz_forward_bytes(f) / 1e6, dz_runtime_peak_rss() / 1e6);
}

dz_status dz_bench_forward(dz_model *m, const dz_bench_forward_spec *s, const dz_bench_report *r, dz_error *err) {
    const dz_config *c = dz_model_config(m);
    dz_forward *f = NULL;
    dz_backend *be = NULL;
    dz_lm_work lw = {0};
    dz_status st = dz_lm_work_init(&lw, c, s->batch, s->seq, err);
    if (st == DZ_OK) st = dz_backend_create(s->backend, &be, err);
    if (st == DZ_OK) st = dz_forward_create_backend(m, be, s->batch, s->seq, 0, 1, &f, err);
    const dz_weight_source w = dz_model_weights(m);
    dz_gemm_shape shapes[DZ_BENCH_MAX_SHAPES];
    const int ns = dz_bench_model_shapes(c, s->batch, s->seq, shapes);
    double gf_best[2][DZ_BENCH_MAX_SHAPES] = {{0}};
    forward_result x = {0};
    /* sgemm on the model's shapes is measured before and after the forwards and the
     * better of the two kept, so a moment of interference on a shared machine does not
     * flatter the ratio */
    if (st == DZ_OK) dz_bench_measure_shapes(shapes, ns, gf_best);
    if (st == DZ_OK) st = time_forwards(f, &lw, &w, s, &x.runs, &x.fwd, err);
    if (st == DZ_OK) {
        dz_bench_measure_shapes(shapes, ns, gf_best);
        x.flops = dz_forward_flops(c, s->batch, s->seq, s->batch * s->seq);
        x.sgemm_model = dz_bench_shapes_gflops(shapes, ns, gf_best[DZ_BENCH_GEMM_OPENBLAS]);
        x.ours_model = dz_bench_shapes_gflops(shapes, ns, gf_best[DZ_BENCH_GEMM_DISTZO]);
        x.sgemm_square = dz_bench_gemm_gflops(DZ_BENCH_GEMM_OPENBLAS, 2048, 2048, 2048, 0.5);
        x.achieved = x.flops / x.fwd / 1e9;
        print_forward(r, m, f, s, &x);
    }
    dz_forward_free(f);
    dz_backend_free(be);
    dz_lm_work_free(&lw);
    return st;
}
