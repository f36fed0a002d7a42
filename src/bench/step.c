/* bench step: a plain forward (as eval runs it) and full ZO steps in one run, with the
 * peak RSS after each phase; the store's I/O when the masters are in one. */
#include "distzo/benchmarks.h"

#include "bench/adapter.h"
#include "bench/losses.h"
#include "bench/passes.h"
#include "backend/backend.h"
#include "run/peft.h"
#include "run/setup.h"

typedef struct step_result {
    double fwd, fwd_adapter, step, g; /* fwd_adapter: the base's forward with the adapter attached */
    size_t rss_eval, rss_train, eval_act, train_act;
    dz_store_stats io0, io1; /* the store's counters after the warm-up step and after the last */
} step_result;

/* The adapter the step trains (dz_setup_model under --peft), else NULL. */
static const dz_model *step_adapter(const dz_zo_setup *setup) {
    return dz_model_lora(dz_setup_model(setup)) ? dz_setup_model(setup) : NULL;
}

/* The forwards timed beside the step: the base's, and with the adapter attached. */
typedef struct fwd_bench {
    dz_backend *be;
    dz_forward *f, *fa; /* fa: NULL without an adapter */
    dz_weight_source w;
} fwd_bench;

static void fwd_close(fwd_bench *fb) {
    dz_forward_free(fb->fa);
    dz_forward_free(fb->f);
    dz_backend_free(fb->be);
    *fb = (fwd_bench){0};
}

static dz_status fwd_open(const dz_zo_setup *setup, const dz_bench_step_spec *s, fwd_bench *fb, dz_error *err) {
    dz_model *m = dz_setup_base_model(setup);
    const dz_model *adapter = step_adapter(setup);
    fb->w = dz_model_weights(m);
    dz_status st = dz_backend_create(s->backend, &fb->be, err);
    if (st == DZ_OK) st = dz_forward_create_backend(m, fb->be, s->batch, s->seq, 0, 1, &fb->f, err);
    if (st == DZ_OK && adapter) st = dz_forward_create_backend(m, fb->be, s->batch, s->seq, 0, 1, &fb->fa, err);
    if (st == DZ_OK && adapter) st = dz_forward_set_adapter(fb->fa, adapter, NULL, err);
    return st;
}

/* Round r (0 warms up) of the forwards: the base's, then the adapter's, one after the other
 * so both meet the same load. */
static dz_status fwd_round(fwd_bench *fb, dz_lm_work *lw, const dz_bench_step_spec *s, int r, step_result *x,
                           dz_error *err) {
    double t0 = dz_now();
    dz_status st = dz_lm_work_forward(fb->f, &fb->w, lw, s->batch, s->seq, err);
    if (r > 0) x->fwd += (dz_now() - t0) / s->steps;
    t0 = dz_now();
    if (st == DZ_OK && fb->fa) st = dz_lm_work_forward(fb->fa, &fb->w, lw, s->batch, s->seq, err);
    if (r > 0 && fb->fa) x->fwd_adapter += (dz_now() - t0) / s->steps;
    return st;
}

/* Phase 1: the forward alone, as eval runs it (not with a store: its masters stream). With
 * --interleave only its warm-up here; the step phase times the rest between its steps. */
static dz_status forward_phase(const dz_zo_setup *setup, int in_memory, dz_lm_work *lw, const dz_bench_step_spec *s,
                               fwd_bench *fb, step_result *x, dz_error *err) {
    dz_status st = in_memory ? fwd_open(setup, s, fb, err) : DZ_OK;
    for (int r = 0; st == DZ_OK && in_memory && r <= (s->interleave ? 0 : s->steps); r++)
        st = fwd_round(fb, lw, s, r, x, err);
    x->rss_eval = dz_runtime_peak_rss();
    if (fb->f) x->eval_act = dz_forward_bytes(fb->f);
    if (!s->interleave || st != DZ_OK) fwd_close(fb);
    return st;
}

/* Phase 2: ZO steps, after one warm-up; with --interleave each followed by fb's forwards. */
static dz_status step_phase(dz_zo_setup *setup, dz_lm_work *lw, const dz_bench_step_spec *s, fwd_bench *fb,
                            step_result *x, dz_error *err) {
    dz_store *store = dz_setup_store(setup);
    const dz_engine_spec es = {.max_batch = s->batch, .max_len = s->seq, .streams = 2,
                               .zo = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = s->fuse, .rng_v2 = s->rng_v2, .rademacher = s->rademacher,
                                      .max_device_bytes = (size_t)s->max_device_mb << 20},
                               .max_resident_mb = s->max_resident_mb, .stream_globals = s->stream_globals,
                               .backend = s->backend};
    dz_status st = dz_setup_engine(setup, &es, err);
    dz_forward *f = dz_setup_forward(setup);
    dz_zo_engine *e = dz_setup_zo_engine(setup);
    const dz_zo_batch zb = dz_lm_work_zo(lw, s->batch, s->seq);
    for (int r = 0; st == DZ_OK && r <= s->steps; r++) {
        dz_zo_step_result res;
        double t0 = dz_now();
        st = dz_zo_step(e, (uint32_t)r, 1e-6f, &zb, &res, err);
        if (r > 0) x->step += (dz_now() - t0) / s->steps;
        if (st == DZ_OK && r > 0 && fb->f) st = fwd_round(fb, lw, s, r, x, err); /* --interleave */
        if (r == 0 && store) x->io0 = dz_store_get_stats(store); /* after the warm-up step */
        x->g = res.g[0];
    }
    x->io1 = store ? dz_store_get_stats(store) : x->io0; /* the steps' I/O, before the flush */
    if (e) {
        dz_error flush_err = {0};
        if (dz_zo_flush(e, &flush_err) != DZ_OK && st == DZ_OK) st = dz_fail(err, flush_err.code, "%s", flush_err.msg);
    }
    x->rss_train = dz_runtime_peak_rss();
    if (f && e) x->train_act = dz_forward_bytes(f) + dz_zo_engine_bytes(e); /* e is NULL when the engine was refused */
    return st;
}

/* The disk store's figures: memory, I/O per step and how much of it compute hid. */
static void print_store(const dz_bench_report *r, const dz_bench_step_spec *s, const dz_model *m, const step_result *x) {
    const dz_store_stats io = x->io1, io0 = x->io0;
    const int steps = s->steps;
    const double rd = (double)(io.bytes_read - io0.bytes_read) / steps, wr = (double)(io.bytes_written - io0.bytes_written) / steps;
    /* the I/O thread's work (transfers, and the updates it applies between them) is hidden
     * except where the step waited for it; row reads on the step's own thread never are */
    const double io_s = (io.thread_io_s - io0.thread_io_s) / steps, wait_s = (io.wait_s - io0.wait_s) / steps;
    const double busy_s = (io.thread_busy_s - io0.thread_busy_s) / steps;
    const double caller_s = (io.caller_io_s - io0.caller_io_s) / steps, all_s = busy_s + caller_s;
    const double exposed = (wait_s < busy_s ? wait_s : busy_s) + caller_s;
    const double hidden = all_s > 0 ? 1.0 - exposed / all_s : 1.0;
    if (r->json)
    {
        fputs("{\"model\": ", r->out); /* paths escaped: a quote or backslash in one broke the JSON */
        dz_write_json_string(r->out, r->model);
        fputs(", \"store\": ", r->out);
        dz_write_json_string(r->out, s->store);
        fprintf(r->out, ", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"master_dtype\": \"%s\", "
               "\"step_seconds\": %.4f, \"peak_rss_bytes\": %zu, \"resident_weights_bytes\": %zu, "
               "\"buffers_bytes\": %zu, \"read_bytes_per_step\": %.0f, \"written_bytes_per_step\": %.0f, "
               "\"io_seconds_per_step\": %.4f, \"io_thread_busy_seconds_per_step\": %.4f, \"caller_io_seconds_per_step\": %.4f, "
               "\"io_wait_seconds_per_step\": %.4f, \"io_hidden\": %.3f}\n",
               s->batch, s->seq, dz_runtime_threads(), dz_dtype_name(s->master), x->step, x->rss_train,
               dz_model_bytes_owned(m), x->train_act, rd, wr, io_s, busy_s, caller_s, wait_s, hidden);
    } else
        fprintf(r->out, "step     %s, %d x %d tokens, %d threads, %s master, store %s\n"
               "time     ZO step %.4f s\n"
               "memory   peak RSS %.1f MB: resident weights %.1f MB, buffers %.1f MB\n"
               "io       %.1f MB read + %.1f MB written per step; I/O thread %.3f s (%.3f s transfers, the rest\n"
               "         updates), %.3f s row reads on the step's thread, %.3f s waited: %.0f%% hidden\n",
               r->model, s->batch, s->seq, dz_runtime_threads(), dz_dtype_name(s->master), s->store, x->step,
               x->rss_train / 1e6, dz_model_bytes_owned(m) / 1e6, x->train_act / 1e6, rd / 1e6, wr / 1e6, busy_s, io_s,
               caller_s, wait_s, 100 * hidden);
}

/* Under --peft: the adapter, its forward beside the base's, and two forwards / step against
 * each (issue 29: a step should be two forwards). JSON: fields of the open object. */
static void print_adapter(const dz_bench_report *r, const dz_bench_step_spec *s, const step_result *x,
                          const dz_model *adapter) {
    const double n = (double)dz_param_table_numel(dz_model_params(adapter));
    const double fwd = x->fwd, fwd_a = x->fwd_adapter, step = x->step;
    if (r->json) {
        fprintf(r->out, ", \"peft\": \"%s\", \"keep_quantized\": %s, \"adapter_parameters\": %.0f, "
               "\"adapter_forward_seconds\": %.4f, \"step_over_2_adapter_forwards\": %.4f, "
               "\"two_forwards_over_step\": %.4f, \"two_adapter_forwards_over_step\": %.4f",
               s->peft.method, s->peft.keep_quantized ? "true" : "false", n, fwd_a, step / (2 * fwd_a),
               2 * fwd / step, 2 * fwd_a / step);
        return;
    }
    fprintf(r->out, "adapter  %s, %.0f parameters%s: forward with the adapter %.4f s (x%.3f the base's)\n",
            s->peft.method, n, s->peft.keep_quantized ? ", base kept quantized" : "", fwd_a, fwd_a / fwd);
    fprintf(r->out, "ratio    2 x forward / step = %.3f (the base's forward), %.3f (with the adapter)\n", 2 * fwd / step,
            2 * fwd_a / step);
}

/* In memory: the forward beside the step, the memory of each phase, the passes (f32 masters). */
static void print_memory(const dz_bench_report *r, const dz_bench_step_spec *s, const step_result *x,
                         const dz_model *adapter, const dz_bench_zo_passes *passes) {
    FILE *out = r->out;
    const double fwd = x->fwd, step = x->step;
    if (r->json) {
        fputs("{\"model\": ", out);
        dz_write_json_string(out, r->model);
        fprintf(out, ", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"master_dtype\": \"%s\", "
               "\"fused\": %s, \"forward_seconds\": %.4f, \"step_seconds\": %.4f, \"step_over_2_forwards\": %.4f, "
               "\"peak_rss_eval_bytes\": %zu, \"peak_rss_train_bytes\": %zu, \"rss_ratio\": %.4f, "
               "\"eval_buffers_bytes\": %zu, \"train_buffers_bytes\": %zu, \"last_g\": %.6g, \"rng\": \"%s\", \"perturbation\": \"%s\"",
               s->batch, s->seq, dz_runtime_threads(), dz_dtype_name(s->master), s->fuse ? "true" : "false", fwd,
               step, step / (2 * fwd), x->rss_eval, x->rss_train, (double)x->rss_train / x->rss_eval, x->eval_act,
               x->train_act, x->g, s->rng_v2 ? "v2" : "v1", s->rademacher ? "rademacher" : "gaussian");
        if (adapter) print_adapter(r, s, x, adapter);
        if (passes) dz_bench_print_passes(out, passes, step, 2 * fwd, s->rng_v2, 1);
        fprintf(out, "}\n");
        return;
    }
    fprintf(out, "step     %s, %d x %d tokens, %d threads, %s master, %s, ZO_RNG %s, %s z\n", r->model, s->batch, s->seq,
            dz_runtime_threads(), dz_dtype_name(s->master), s->fuse ? "fused updates" : "unfused", s->rng_v2 ? "v2" : "v1",
            s->rademacher ? "Rademacher" : "Gaussian");
    fprintf(out, "gemm     %s\n", dz_runtime_gemm());
    fprintf(out, "time     forward %.4f s, ZO step %.4f s: step / (2 x forward) = %.3f\n", fwd, step, step / (2 * fwd));
    fprintf(out, "memory   peak RSS %.1f MB after the forward phase, %.1f MB after training (x%.3f);\n"
           "         buffers %.1f MB (forward) vs %.1f MB (two streams + working copies)\n",
           x->rss_eval / 1e6, x->rss_train / 1e6, (double)x->rss_train / x->rss_eval, x->eval_act / 1e6, x->train_act / 1e6);
    if (adapter) print_adapter(r, s, x, adapter);
    if (passes) dz_bench_print_passes(out, passes, step, 2 * fwd, s->rng_v2, 0);
}

/* The weights spec: every parameter, or under --peft the adapter over the read-only base
 * (checked as train checks it; the adapter's init from seed 1, the step's). */
static dz_status step_weights(const dz_bench_step_spec *s, dz_weights_spec *ws, dz_lora_spec *lora, dz_error *err) {
    *ws = (dz_weights_spec){.path = s->model, .master_dtype = s->master, .store = s->store};
    dz_train_config c;
    dz_status st = dz_bench_adapter_config(s->model, &s->peft, &c, err);
    if (st == DZ_OK) dz_train_peft_weights(&c, ws, lora);
    return st;
}

dz_status dz_bench_step(const dz_bench_step_spec *s, const dz_bench_report *r, dz_error *err) {
    dz_zo_setup *setup = NULL;
    dz_weights_spec ws;
    dz_lora_spec lora;
    dz_status st = DZ_OK;
    if (s->max_device_mb < 0) st = dz_fail(err, DZ_ERR_INVALID, "--max-device-memory %d is negative", s->max_device_mb);
    if (st == DZ_OK) st = step_weights(s, &ws, &lora, err);
    if (st == DZ_OK) st = dz_setup_weights(&ws, &setup, err);
    if (st != DZ_OK) return st;
    dz_model *m = dz_setup_model(setup);
    const int in_memory = dz_setup_store(setup) == NULL;
    dz_lm_work lw = {0};
    step_result x = {0};
    st = dz_lm_work_init(&lw, dz_model_config(m), s->batch, s->seq, err);
    fwd_bench fb = {0};
    if (st == DZ_OK) st = forward_phase(setup, in_memory, &lw, s, &fb, &x, err);
    if (st == DZ_OK) st = step_phase(setup, &lw, s, &fb, &x, err);
    fwd_close(&fb);
    if (st == DZ_OK && !in_memory) print_store(r, s, m, &x);
    if (st == DZ_OK && in_memory) {
        dz_bench_zo_passes passes;
        const int with_passes = s->master == DZ_F32; /* the passes time f32 masters' kernels (the adapter's, under one) */
        if (with_passes) st = dz_bench_model_passes(m, s->steps, s->rademacher, &passes, err);
        if (st == DZ_OK) print_memory(r, s, &x, step_adapter(setup), with_passes ? &passes : NULL);
    }
    dz_lm_work_free(&lw);
    dz_setup_free(setup);
    return st;
}
