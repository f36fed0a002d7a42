/* bench classify: ZO steps on real prompt-classification batches, each candidate as a full
 * sequence (MeZO) vs candidates continuing their example's shared prompt, side by side. */
#include "distzo/benchmarks.h"

#include <stdlib.h>
#include <string.h>

#include "bench/losses.h"

/* Seconds per step over `steps` steps after one warm-up (lr 0: the same weights for both
 * layouts), and each timed step's g. */
static dz_status time_class_steps(dz_model *m, const char *backend, const dz_class_set *cs, int batch, int steps,
                                  int share, double *secs, float *g, dz_error *err) {
    dz_backend *be = NULL;
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    dz_class_batch bb = {0};
    const int K = cs->n_labels;
    int *ex = malloc(sizeof(int) * (size_t)batch), *labels = malloc(sizeof(int) * (size_t)batch);
    float *scores = malloc(sizeof(float) * (size_t)batch * K);
    const dz_zo_params zp = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1};
    dz_status st = ex && labels && scores ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    if (st == DZ_OK) st = dz_backend_create(backend, &be, err);
    if (st == DZ_OK) st = dz_forward_create_backend(m, be, batch * K, cs->max_len, 0, share ? 4 : 2, &f, err);
    if (st == DZ_OK) st = dz_zo_engine_create(m, f, &zp, &e, err);
    if (st == DZ_OK) st = dz_class_batch_init(&bb, batch * K, cs->max_len, share, err);
    dz_bench_class_loss cl = {.bb = &bb, .labels = labels, .n = batch, .K = K, .scores = scores};
    *secs = 0.0;
    for (int s = 0; st == DZ_OK && s <= steps; s++) {
        for (int b = 0; b < batch; b++) {
            ex[b] = (s * batch + b) % cs->n_examples;
            labels[b] = cs->labels[ex[b]];
        }
        const double t0 = dz_now();
        dz_zo_step_result r;
        st = dz_class_batch_fill(&bb, cs, ex, batch, err);
        const dz_zo_batch zb = dz_class_batch_zo(&bb, dz_bench_class_loss_fn, &cl);
        if (st == DZ_OK) st = dz_zo_step(e, (uint32_t)s, 0.0f, &zb, &r, err);
        if (st == DZ_OK && s > 0) *secs += (dz_now() - t0) / steps, g[s - 1] = r.g[0];
    }
    dz_class_batch_free(&bb);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_backend_free(be);
    free(ex);
    free(labels);
    free(scores);
    return st;
}

static void print_classify(const dz_bench_report *r, const dz_bench_classify_spec *s, double t_flat, double t_shared,
                           int same) {
    if (r->json) {
        fputs("{\"model\": ", r->out); /* escaped: a quote or backslash in the path broke the JSON */
        dz_write_json_string(r->out, r->model);
        fprintf(r->out, ", \"batch\": %d, \"steps\": %d, \"threads\": %d, \"step_seconds_full_sequences\": %.5f, "
               "\"step_seconds_shared_prompts\": %.5f, \"speedup\": %.3f, \"same_g\": %s, \"isa\": \"%s\"}\n",
               s->batch, s->steps, dz_runtime_threads(), t_flat, t_shared, t_flat / t_shared, same ? "true" : "false",
               dz_runtime_kernels());
    } else {
        fprintf(r->out, "classify %s, SST-2 batch %d, %d threads\n"
               "gemm     %s\n"
               "step     %.2f ms with every candidate a full sequence, %.2f ms with shared prompts: %.2fx\n"
               "g        %s in both layouts\n",
               r->model, s->batch, dz_runtime_threads(), dz_runtime_gemm(), 1e3 * t_flat, 1e3 * t_shared,
               t_flat / t_shared, same ? "bitwise the same" : "differs");
    }
}

dz_status dz_bench_classify(dz_model *m, const dz_tokenizer *tok, const dz_bench_classify_spec *s,
                            const dz_bench_report *r, dz_error *err) {
    const int batch = s->batch, steps = s->steps;
    dz_dataset ds = {0}, sample = {0};
    dz_class_set cs = {0};
    dz_prompt_spec ps;
    dz_prompt_spec_default_sst2(&ps);
    dz_status st = dz_model_make_owned(m, err);
    if (st == DZ_OK) st = dz_prompt_spec_set_labels(&ps, s->label_words, err);
    if (st == DZ_OK) st = dz_dataset_load_sst2(s->data, &ds, err);
    if (st == DZ_OK) st = dz_dataset_sample(&ds, batch * (steps + 1), 42, &sample, err);
    if (st == DZ_OK) st = dz_class_set_build(&sample, &ps, tok, dz_model_config(m)->max_seq_len, &cs, err);
    double t_flat = 0, t_shared = 0;
    float *g = malloc(sizeof(float) * 2 * (size_t)steps);
    if (st == DZ_OK && !g) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    if (st == DZ_OK) st = time_class_steps(m, s->backend, &cs, batch, steps, 0, &t_flat, g, err);
    if (st == DZ_OK) st = time_class_steps(m, s->backend, &cs, batch, steps, 1, &t_shared, g + steps, err);
    if (st == DZ_OK) print_classify(r, s, t_flat, t_shared, memcmp(g, g + steps, sizeof(float) * (size_t)steps) == 0);
    free(g);
    dz_class_set_free(&cs);
    dz_dataset_free(&sample);
    dz_dataset_free(&ds);
    return st;
}
