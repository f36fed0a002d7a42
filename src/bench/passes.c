#include "bench/passes.h"

dz_status dz_bench_model_passes(const dz_model *m, int rounds, int rademacher, dz_bench_zo_passes *out, dz_error *err) {
    const dz_param_table *t = dz_model_params(m);
    const int layers = dz_model_config(m)->n_layers;
    size_t block = 0;
    for (int b = 0; b < layers; b++) {
        size_t n = 0;
        for (int i = 0; i < t->count; i++)
            if (t->params[i].block == b) n += (size_t)dz_param_numel(&t->params[i]);
        if (n > block) block = n;
    }
    return dz_bench_zo_passes_run((size_t)dz_param_table_numel(t), block, rounds, rademacher, out, err);
}

/* The step under each ZO_RNG version: the one timed, and the other's as the timed step with
 * the other version's pass in place of its own. */
static void steps_by_version(const dz_bench_zo_passes *p, double step, int step_v2, double *v1, double *v2) {
    *v1 = step_v2 ? step - p->fused_v2_s + p->fused_s : step;
    *v2 = step_v2 ? step : step - p->fused_s + p->fused_v2_s;
}

/* The step's pass (z, perturbation and update) as a share of the step under each ZO_RNG
 * version, and the ceiling it sets: 2 x forward / step with nothing beside the two forwards
 * but the pass. */
static void print_shares(FILE *out, const dz_bench_zo_passes *p, double step_v1, double step_v2, double two_fwd) {
    fprintf(out, "share    z (%s), perturbation and update (the step's pass): v1 %.0f%% of the step (z %.0f%%),\n"
            "         v2 %.0f%% (z %.0f%%) of the step with v2's pass; ceiling 2 x forward / step: v1 %.3f, v2 %.3f\n",
            p->rademacher ? "Rademacher" : "Gaussian", 100 * p->fused_s / step_v1, 100 * p->zgen_s / step_v1,
            100 * p->fused_v2_s / step_v2, 100 * p->zgen_v2_s / step_v2,
            two_fwd / (two_fwd + p->fused_s), two_fwd / (two_fwd + p->fused_v2_s));
}

void dz_bench_print_passes(FILE *out, const dz_bench_zo_passes *p, double step, double two_fwd, int step_v2, int json) {
    const double n = p->elements;
    double step1, step2;
    steps_by_version(p, step, step_v2, &step1, &step2);
    if (json) {
        fprintf(out, ", \"passes\": {\"parameters\": %.0f, \"zgen_seconds\": %.5f, \"perturb_seconds\": %.5f, "
               "\"update_seconds\": %.5f, \"fused_seconds\": %.5f, \"perturb_bytes\": %.0f, \"update_bytes\": %.0f, "
               "\"fused_bytes\": %.0f, \"perturb_gbs\": %.3f, \"update_gbs\": %.3f, \"fused_gbs\": %.3f, "
               "\"memory_read_gbs\": %.3f, \"memory_copy_gbs\": %.3f, \"step_minus_2_forwards_seconds\": %.5f, "
               "\"zgen_v2_seconds\": %.5f, \"fused_v2_seconds\": %.5f, \"pass_share_of_step\": %.4f, "
               "\"pass_share_of_step_v2\": %.4f, \"perturbation\": \"%s\"}",
               n, p->zgen_s, p->perturb_s, p->update_s, p->fused_s, p->perturb_bytes, p->update_bytes, p->fused_bytes,
               p->perturb_bytes / p->perturb_s * 1e-9, p->update_bytes / p->update_s * 1e-9,
               p->fused_bytes / p->fused_s * 1e-9, p->read_gbs, p->copy_gbs, step - two_fwd, p->zgen_v2_s,
               p->fused_v2_s, p->fused_s / step1, p->fused_v2_s / step2,
               p->rademacher ? "rademacher" : "gaussian");
        return;
    }
    fprintf(out, "passes   per step over %.1fM f32 parameters, %s z, the backend's ZO kernels on buffers of their\n"
            "         own:\n", n / 1e6, p->rademacher ? "Rademacher" : "Gaussian");
    fprintf(out, "         z alone (2 per parameter)   %8.1f ms  %.2f ns per z\n", 1e3 * p->zgen_s, p->zgen_s / (2 * n) * 1e9);
    fprintf(out, "         perturb (1 z, w+ and w-)    %8.1f ms  %5.1f GB/s (%.0f MB)\n", 1e3 * p->perturb_s,
           p->perturb_bytes / p->perturb_s * 1e-9, p->perturb_bytes / 1e6);
    fprintf(out, "         update (1 z)                %8.1f ms  %5.1f GB/s (%.0f MB)\n", 1e3 * p->update_s,
           p->update_bytes / p->update_s * 1e-9, p->update_bytes / 1e6);
    fprintf(out, "         update then perturb (2 z)   %8.1f ms  %5.1f GB/s (%.0f MB): the step's pass\n", 1e3 * p->fused_s,
           p->fused_bytes / p->fused_s * 1e-9, p->fused_bytes / 1e6);
    fprintf(out, "         ZO_RNG v2 (--rng v2): z alone %.1f ms, %.2f ns per z (v1 / v2 = %.1f); update then perturb\n"
            "         %.1f ms (v1 / v2 = %.2f)\n", 1e3 * p->zgen_v2_s, p->zgen_v2_s / (2 * n) * 1e9,
            p->zgen_s / p->zgen_v2_s, 1e3 * p->fused_v2_s, p->fused_s / p->fused_v2_s);
    print_shares(out, p, step1, step2, two_fwd);
    fprintf(out, "memory   %.1f GB/s read, %.1f GB/s copy (read + written) with the same threads: the step's pass\n"
           "         moves its bytes at %.0f%% of copy; step - 2 x forward = %.1f ms\n",
           p->read_gbs, p->copy_gbs, 100 * p->fused_bytes / p->fused_s * 1e-9 / p->copy_gbs, 1e3 * (step - two_fwd));
}
