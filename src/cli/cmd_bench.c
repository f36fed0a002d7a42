/* distzo bench forward: forward-pass throughput against this machine's own sgemm speed on
 * the same GEMM shapes, measured side by side in one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

typedef struct gemm_shape {
    int M, N, K;
    double count; /* calls per forward */
} gemm_shape;

/* The GEMMs one forward runs (see src/model/forward.c), with their multiplicity. */
static int model_shapes(const dz_config *c, int B, int T, gemm_shape *s) {
    const int N = B * T, d = c->dim, f = c->hidden_dim;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const int L = c->n_layers, head_rows = N < 512 ? N : 512;
    int n = 0;
    s[n++] = (gemm_shape){N, qd, d, L};
    s[n++] = (gemm_shape){N, kvd, d, 2.0 * L};
    s[n++] = (gemm_shape){N, d, qd, L};
    s[n++] = (gemm_shape){N, f, d, (c->arch == DZ_ARCH_OPT ? 1.0 : 2.0) * L};
    s[n++] = (gemm_shape){N, d, f, L};
    s[n++] = (gemm_shape){head_rows, 4096, c->embed_dim, (double)N / head_rows * c->vocab_size / 4096.0};
    return n;
}

/* Raises best[impl][i] to the GFLOP/s measured now for shape i, OpenBLAS and distzo's
 * GEMM interleaved shape by shape so that both see the same moment of a shared machine. */
static void measure_shapes(const gemm_shape *shapes, int n, double best[2][8]) {
    for (int i = 0; i < n; i++)
        for (int impl = DZ_BENCH_GEMM_OPENBLAS; impl <= DZ_BENCH_GEMM_DISTZO; impl++) {
            const double gf = dz_bench_gemm_gflops((dz_bench_gemm)impl, shapes[i].M, shapes[i].N, shapes[i].K, 0.3);
            if (gf > best[impl][i]) best[impl][i] = gf;
        }
}

/* Time-weighted GFLOP/s over a forward's GEMMs. */
static double shapes_gflops(const gemm_shape *shapes, int n, const double *gf) {
    double flops = 0.0, secs = 0.0;
    for (int i = 0; i < n; i++) {
        const double fl = 2.0 * shapes[i].M * shapes[i].N * shapes[i].K * shapes[i].count;
        flops += fl, secs += fl / (gf[i] * 1e9);
    }
    return flops / secs / 1e9;
}

/* A random batch scored as LM training does: every position predicts the next token
 * (the last wraps to the sequence's start), so the head runs on all B*T rows. */
typedef struct lm_work {
    int N;
    int *tokens, *rows, *targets;
    float *lp;
} lm_work;

static void lm_work_free(lm_work *w) {
    free(w->tokens);
    free(w->rows);
    free(w->targets);
    free(w->lp);
}

static int lm_work_init(lm_work *w, const dz_config *c, int batch, int seq) {
    const int N = batch * seq;
    w->N = N;
    w->tokens = malloc(sizeof(int) * (size_t)N);
    w->rows = malloc(sizeof(int) * (size_t)N);
    w->targets = malloc(sizeof(int) * (size_t)N);
    w->lp = malloc(sizeof(float) * (size_t)N);
    if (!w->tokens || !w->rows || !w->targets || !w->lp) {
        lm_work_free(w);
        return dz_cli_failf("out of memory");
    }
    dz_bench_random_tokens(w->tokens, (size_t)N, 3, c->vocab_size, 1234);
    for (int i = 0; i < N; i++) {
        w->rows[i] = i;
        w->targets[i] = i % seq + 1 < seq ? w->tokens[i + 1] : w->tokens[i - seq + 1];
    }
    return 0;
}

/* One plain forward with the head on every row. */
static dz_status lm_forward(dz_forward *f, const dz_weight_source *w, lm_work *lw, int batch, int seq, dz_error *err) {
    dz_status st = dz_forward_run(f, w, lw->tokens, NULL, batch, seq, 0, err);
    return st == DZ_OK ? dz_forward_logprobs(f, w, lw->rows, lw->targets, lw->N, lw->lp, err) : st;
}

static int bench_forward(int argc, char **argv) {
    const char *model = NULL, *dtype = "f32";
    int batch = 16, seq = 128, threads = 0, json = 0;
    float seconds = 5.0f;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model folder or .bin (make one with `distzo init --preset opt-125m -o DIR`)"},
        {"batch", DZ_OPT_INT, &batch, "sequences (default 16)"},
        {"seq", DZ_OPT_INT, &seq, "tokens per sequence (default 128)"},
        {"threads", DZ_OPT_INT, &threads, "threads (default: $OMP_NUM_THREADS, else all cores)"},
        {"seconds", DZ_OPT_FLOAT, &seconds, "minimum time to measure the forward (default 5)"},
        {"dtype", DZ_OPT_STR, &dtype, "weights in memory: f32 or bf16"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "bench forward",
        .usage = "--model M [--batch B --seq T --threads N]",
        .summary = "Times whole forward passes (head on every position, as LM training does) and,\n"
                   "in the same run, OpenBLAS sgemm on the model's own GEMM shapes; prints the ratio.",
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    if (!model) return dz_cli_failf("bench forward needs --model M");
    if (batch < 1 || seq < 2) return dz_cli_failf("--batch must be >= 1 and --seq >= 2");
    if ((rc = dz_cli_runtime(threads)) || (rc = dz_cli_blas_reference())) return rc;
    dz_model *m;
    if ((rc = dz_cli_load(model, dtype, NULL, 0, &m, NULL))) return rc;
    const dz_config *c = dz_model_config(m);
    dz_error err = {0};
    dz_forward *f = NULL;
    const int N = batch * seq;
    lm_work lw = {0};
    rc = lm_work_init(&lw, c, batch, seq);
    if (!rc && dz_forward_create(m, batch, seq, 0, &f, &err) != DZ_OK) rc = dz_cli_fail(&err);
    if (rc) goto done;
    dz_weight_source w = dz_model_weights(m);
    gemm_shape shapes[8];
    const int ns = model_shapes(c, batch, seq, shapes);
    double gf_best[2][8] = {{0}};
    /* sgemm on the model's shapes is measured before and after the forwards and the
     * better of the two kept, so a moment of interference on a shared machine does not
     * flatter the ratio */
    measure_shapes(shapes, ns, gf_best);
    int runs = 0;
    double t0 = 0.0, elapsed = 0.0;
    for (int warm = 1; rc == 0 && (runs < 2 || elapsed < seconds); warm = 0) {
        if (!warm && runs == 0) t0 = dz_now();
        if (lm_forward(f, &w, &lw, batch, seq, &err) != DZ_OK) rc = dz_cli_fail(&err);
        if (!warm) elapsed = dz_now() - t0, runs++;
        else t0 = dz_now();
    }
    if (rc) goto done;
    measure_shapes(shapes, ns, gf_best);
    const double fwd = elapsed / runs, flops = dz_forward_flops(c, batch, seq, N);
    const double sgemm_model = shapes_gflops(shapes, ns, gf_best[DZ_BENCH_GEMM_OPENBLAS]);
    const double ours_model = shapes_gflops(shapes, ns, gf_best[DZ_BENCH_GEMM_DISTZO]);
    const double sgemm_square = dz_bench_gemm_gflops(DZ_BENCH_GEMM_OPENBLAS, 2048, 2048, 2048, 0.5);
    const double achieved = flops / fwd / 1e9;
    if (json) {
        printf("{\"model\": ");
        dz_cli_json_string(stdout, model);
        printf(", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"dtype\": \"%s\", \"runs\": %d, "
               "\"forward_seconds\": %.4f, \"tokens_per_second\": %.1f, \"gflop_per_forward\": %.2f, "
               "\"forward_gflops\": %.2f, \"sgemm_gflops_model_shapes\": %.2f, \"sgemm_gflops_2048\": %.2f, "
               "\"distzo_gemm_gflops_model_shapes\": %.2f, \"gemm_ratio\": %.3f, \"ratio\": %.3f, \"blas_core\": \"%s\", \"isa\": \"%s\", \"gemm\": ",
               batch, seq, dz_runtime_threads(), dz_dtype_name(dz_model_dtype(m)), runs, fwd, N / fwd, flops / 1e9,
               achieved, sgemm_model, sgemm_square, ours_model, ours_model / sgemm_model, achieved / sgemm_model,
               dz_bench_reference_core(), dz_runtime_kernels());
        dz_cli_json_string(stdout, dz_runtime_gemm());
        printf(", \"activation_bytes\": %zu, \"peak_rss_bytes\": %zu}\n", dz_forward_bytes(f), dz_cli_peak_rss());
    } else {
        printf("forward  %s, %d x %d tokens, %d threads, %s weights\n", model, batch, seq, dz_runtime_threads(),
               dz_dtype_name(dz_model_dtype(m)));
        printf("time     %.4f s per forward (%d runs), %.0f tokens/s\n", fwd, runs, N / fwd);
        printf("compute  %.1f GFLOP per forward -> %.1f GFLOP/s\n", flops / 1e9, achieved);
        printf("gemm     %s\n", dz_runtime_gemm());
        printf("sgemm    %.1f GFLOP/s on the model's GEMM shapes, %.1f GFLOP/s on 2048^3 (OpenBLAS %s, the reference)\n",
               sgemm_model, sgemm_square, dz_bench_reference_core());
        printf("         distzo's GEMM %.1f GFLOP/s on the same shapes = %.1f%% of OpenBLAS\n", ours_model,
               100.0 * ours_model / sgemm_model);
        printf("ratio    forward / OpenBLAS sgemm = %.1f%%\n", 100.0 * achieved / sgemm_model);
        printf("memory   activations %.1f MB, peak RSS %.1f MB\n", dz_forward_bytes(f) / 1e6, dz_cli_peak_rss() / 1e6);
    }
done:
    dz_forward_free(f);
    lm_work_free(&lw);
    dz_model_free(m);
    return rc;
}

/* The ZO step's element-wise passes at the model's size (every parameter; the working
 * copy of its largest layer block), and this machine's memory bandwidth, with the same
 * threads: where the step's time beyond its two forwards goes. */
static int measure_passes(const dz_model *m, int rounds, dz_bench_zo_passes *out) {
    const dz_param_table *t = dz_model_params(m);
    const int layers = dz_model_config(m)->n_layers;
    size_t block = 0;
    for (int b = 0; b < layers; b++) {
        size_t n = 0;
        for (int i = 0; i < t->count; i++)
            if (t->params[i].block == b) n += (size_t)dz_param_numel(&t->params[i]);
        if (n > block) block = n;
    }
    dz_error err = {0};
    if (dz_bench_zo_passes_run((size_t)dz_param_table_numel(t), block, rounds, out, &err) != DZ_OK)
        return dz_cli_fail(&err);
    return 0;
}

/* ", \"passes\": {...}" for a JSON object, or the text lines; step and two_fwd (seconds)
 * put the fused pass beside what the step adds to its two forwards. */
static void print_passes(const dz_bench_zo_passes *p, double step, double two_fwd, int json) {
    const double n = p->elements;
    if (json) {
        printf(", \"passes\": {\"parameters\": %.0f, \"zgen_seconds\": %.5f, \"perturb_seconds\": %.5f, "
               "\"update_seconds\": %.5f, \"fused_seconds\": %.5f, \"perturb_bytes\": %.0f, \"update_bytes\": %.0f, "
               "\"fused_bytes\": %.0f, \"perturb_gbs\": %.3f, \"update_gbs\": %.3f, \"fused_gbs\": %.3f, "
               "\"memory_read_gbs\": %.3f, \"memory_copy_gbs\": %.3f, \"step_minus_2_forwards_seconds\": %.5f}",
               n, p->zgen_s, p->perturb_s, p->update_s, p->fused_s, p->perturb_bytes, p->update_bytes, p->fused_bytes,
               p->perturb_bytes / p->perturb_s * 1e-9, p->update_bytes / p->update_s * 1e-9,
               p->fused_bytes / p->fused_s * 1e-9, p->read_gbs, p->copy_gbs, step - two_fwd);
        return;
    }
    printf("passes   per step over %.1fM f32 parameters, the backend's ZO kernels on buffers of their own:\n", n / 1e6);
    printf("         z alone (2 per parameter)   %8.1f ms  %.2f ns per z\n", 1e3 * p->zgen_s, p->zgen_s / (2 * n) * 1e9);
    printf("         perturb (1 z, w+ and w-)    %8.1f ms  %5.1f GB/s (%.0f MB)\n", 1e3 * p->perturb_s,
           p->perturb_bytes / p->perturb_s * 1e-9, p->perturb_bytes / 1e6);
    printf("         update (1 z)                %8.1f ms  %5.1f GB/s (%.0f MB)\n", 1e3 * p->update_s,
           p->update_bytes / p->update_s * 1e-9, p->update_bytes / 1e6);
    printf("         update then perturb (2 z)   %8.1f ms  %5.1f GB/s (%.0f MB): the step's pass\n", 1e3 * p->fused_s,
           p->fused_bytes / p->fused_s * 1e-9, p->fused_bytes / 1e6);
    printf("memory   %.1f GB/s read, %.1f GB/s copy (read + written) with the same threads: the step's pass\n"
           "         moves its bytes at %.0f%% of copy; step - 2 x forward = %.1f ms\n",
           p->read_gbs, p->copy_gbs, 100 * p->fused_bytes / p->fused_s * 1e-9 / p->copy_gbs, 1e3 * (step - two_fwd));
}

/* LM loss over every position of a random batch: the work of bench forward. */
typedef struct lm_batch {
    int n;
} lm_batch;

static void mean_nll(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    (void)p_logprobs;
    const lm_batch *b = user;
    double s = 0.0;
    for (int i = 0; i < b->n; i++) s -= logprobs[i];
    out[0] = s / b->n, out[1] = 1.0;
}

static int bench_step(int argc, char **argv) {
    const char *model = NULL, *master = "f32", *store_spec = NULL;
    int batch = 16, seq = 128, threads = 0, json = 0, steps = 3, no_fuse = 0, max_resident = 0, stream_globals = 0;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model folder or .bin"},
        {"batch", DZ_OPT_INT, &batch, "sequences (default 16)"},
        {"seq", DZ_OPT_INT, &seq, "tokens per sequence (default 128)"},
        {"steps", DZ_OPT_INT, &steps, "timed steps (default 3, after one warm-up)"},
        {"threads", DZ_OPT_INT, &threads, "threads (default: $OMP_NUM_THREADS, else all cores)"},
        {"master-dtype", DZ_OPT_STR, &master, "master weights: f32 (default) or bf16"},
        {"no-fuse", DZ_OPT_FLAG, &no_fuse, "apply updates at once instead of fused into the next step"},
        {"store", DZ_OPT_STR, &store_spec,
         "disk:PATH or disk-nocache:PATH: masters in a store file (skips the forward phase)"},
        {"max-resident", DZ_OPT_INT, &max_resident, "with --store: stay under this many MB or refuse to run"},
        {"stream-globals", DZ_OPT_FLAG, &stream_globals, "with --store: the global block stays in the store too"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "bench step",
        .usage = "--model M [--batch B --seq T --threads N]",
        .summary = "Times, in one run, a plain forward (as eval runs it) and a full ZO step (two\n"
                   "perturbed forwards, perturbation and update), with the peak RSS after each phase;\n"
                   "in memory with f32 masters, also the step's element-wise passes (z alone, perturb,\n"
                   "update, the fused pass) at the model's size, their bytes moved per step, and this\n"
                   "machine's memory bandwidth with the same threads.",
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    if (!model) return dz_cli_failf("bench step needs --model M");
    if (batch < 1 || seq < 2 || steps < 1) return dz_cli_failf("--batch, --steps must be >= 1 and --seq >= 2");
    dz_dtype dt;
    if (dz_dtype_parse(master, &dt) != 0 || dt == DZ_F16) return dz_cli_failf("option --master-dtype: '%s'", master);
    if ((rc = dz_cli_runtime(threads))) return rc;
    dz_error err = {0};
    dz_zo_setup *setup = NULL;
    const dz_weights_spec ws = {.path = model, .master_dtype = dt, .store = store_spec};
    if (dz_setup_weights(&ws, &setup, &err) != DZ_OK) return dz_cli_fail(&err);
    dz_model *m = dz_setup_model(setup);
    dz_store *store = dz_setup_store(setup);
    const dz_config *c = dz_model_config(m);
    lm_work lw = {0};
    rc = lm_work_init(&lw, c, batch, seq);
    /* phase 1: the forward alone, as eval runs it */
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    double fwd = 0.0, step = 0.0;
    size_t rss_eval = 0, rss_train = 0, eval_act = 0, train_act = 0;
    if (!rc && !store && dz_forward_create(m, batch, seq, 0, &f, &err) != DZ_OK) rc = dz_cli_fail(&err);
    dz_weight_source w = dz_model_weights(m);
    for (int r = 0; !rc && !store && r <= steps; r++) {
        double t0 = dz_now();
        if (lm_forward(f, &w, &lw, batch, seq, &err) != DZ_OK) rc = dz_cli_fail(&err);
        if (r > 0) fwd += (dz_now() - t0) / steps;
    }
    rss_eval = dz_cli_peak_rss();
    if (f) eval_act = dz_forward_bytes(f);
    dz_forward_free(f);
    f = NULL;
    /* phase 2: ZO steps */
    lm_batch lb = {.n = lw.N};
    const dz_engine_spec es = {.max_batch = batch, .max_len = seq, .streams = 2,
                               .zo = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = !no_fuse},
                               .max_resident_mb = max_resident, .stream_globals = stream_globals};
    if (!rc && dz_setup_engine(setup, &es, &err) != DZ_OK) rc = dz_cli_fail(&err);
    f = dz_setup_forward(setup), e = dz_setup_zo_engine(setup);
    dz_store_stats io0 = {0};
    const dz_zo_batch zb = {.tokens = lw.tokens, .B = batch, .T = seq, .rows = lw.rows, .targets = lw.targets,
                            .n_rows = lw.N, .loss = mean_nll, .user = &lb};
    double g = 0.0;
    for (int r = 0; !rc && r <= steps; r++) {
        dz_zo_step_result res;
        double t0 = dz_now();
        if (dz_zo_step(e, (uint32_t)r, 1e-6f, &zb, &res, &err) != DZ_OK) rc = dz_cli_fail(&err);
        if (r > 0) step += (dz_now() - t0) / steps;
        if (r == 0 && store) io0 = dz_store_get_stats(store); /* after the warm-up step */
        g = res.g[0];
    }
    const dz_store_stats io1 = store ? dz_store_get_stats(store) : io0; /* the steps' I/O, before the flush */
    if (e && dz_zo_flush(e, &err) != DZ_OK && !rc) rc = dz_cli_fail(&err);
    rss_train = dz_cli_peak_rss();
    if (f) train_act = dz_forward_bytes(f) + dz_zo_engine_bytes(e);
    if (!rc && store) { /* the disk store's figures: memory, I/O per step and how much of it compute hid */
        const dz_store_stats io = io1;
        const double rd = (double)(io.bytes_read - io0.bytes_read) / steps, wr = (double)(io.bytes_written - io0.bytes_written) / steps;
        /* the I/O thread's work (transfers, and the updates it applies between them) is hidden
         * except where the step waited for it; row reads on the step's own thread never are */
        const double io_s = (io.thread_io_s - io0.thread_io_s) / steps, wait_s = (io.wait_s - io0.wait_s) / steps;
        const double busy_s = (io.thread_busy_s - io0.thread_busy_s) / steps;
        const double caller_s = (io.caller_io_s - io0.caller_io_s) / steps, all_s = busy_s + caller_s;
        const double exposed = (wait_s < busy_s ? wait_s : busy_s) + caller_s;
        const double hidden = all_s > 0 ? 1.0 - exposed / all_s : 1.0;
        if (json)
            printf("{\"model\": \"%s\", \"store\": \"%s\", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"master_dtype\": \"%s\", "
                   "\"step_seconds\": %.4f, \"peak_rss_bytes\": %zu, \"resident_weights_bytes\": %zu, "
                   "\"buffers_bytes\": %zu, \"read_bytes_per_step\": %.0f, \"written_bytes_per_step\": %.0f, "
                   "\"io_seconds_per_step\": %.4f, \"io_thread_busy_seconds_per_step\": %.4f, \"caller_io_seconds_per_step\": %.4f, "
                   "\"io_wait_seconds_per_step\": %.4f, \"io_hidden\": %.3f}\n",
                   model, store_spec, batch, seq, dz_runtime_threads(), dz_dtype_name(dt), step, rss_train,
                   dz_model_bytes_owned(m), train_act, rd, wr, io_s, busy_s, caller_s, wait_s, hidden);
        else
            printf("step     %s, %d x %d tokens, %d threads, %s master, store %s\n"
                   "time     ZO step %.4f s\n"
                   "memory   peak RSS %.1f MB: resident weights %.1f MB, buffers %.1f MB\n"
                   "io       %.1f MB read + %.1f MB written per step; I/O thread %.3f s (%.3f s transfers, the rest\n"
                   "         updates), %.3f s row reads on the step's thread, %.3f s waited: %.0f%% hidden\n",
                   model, batch, seq, dz_runtime_threads(), dz_dtype_name(dt), store_spec, step, rss_train / 1e6,
                   dz_model_bytes_owned(m) / 1e6, train_act / 1e6, rd / 1e6, wr / 1e6, busy_s, io_s, caller_s, wait_s,
                   100 * hidden);
    } else if (!rc) {
        dz_bench_zo_passes passes;
        const int with_passes = dt == DZ_F32; /* the passes time f32 masters' kernels */
        if (with_passes) rc = measure_passes(m, steps, &passes);
        if (rc) goto step_done;
        if (json)
            printf("{\"model\": \"%s\", \"batch\": %d, \"seq\": %d, \"threads\": %d, \"master_dtype\": \"%s\", "
                   "\"fused\": %s, \"forward_seconds\": %.4f, \"step_seconds\": %.4f, \"step_over_2_forwards\": %.4f, "
                   "\"peak_rss_eval_bytes\": %zu, \"peak_rss_train_bytes\": %zu, \"rss_ratio\": %.4f, "
                   "\"eval_buffers_bytes\": %zu, \"train_buffers_bytes\": %zu, \"last_g\": %.6g",
                   model, batch, seq, dz_runtime_threads(), dz_dtype_name(dt), no_fuse ? "false" : "true", fwd, step,
                   step / (2 * fwd), rss_eval, rss_train, (double)rss_train / rss_eval, eval_act, train_act, g);
        if (json && with_passes) print_passes(&passes, step, 2 * fwd, 1);
        if (json) printf("}\n");
        else {
            printf("step     %s, %d x %d tokens, %d threads, %s master, %s\n", model, batch, seq, dz_runtime_threads(),
                   dz_dtype_name(dt), no_fuse ? "unfused" : "fused updates");
            printf("gemm     %s\n", dz_runtime_gemm());
            printf("time     forward %.4f s, ZO step %.4f s: step / (2 x forward) = %.3f\n", fwd, step, step / (2 * fwd));
            printf("memory   peak RSS %.1f MB after the forward phase, %.1f MB after training (x%.3f);\n"
                   "         buffers %.1f MB (forward) vs %.1f MB (two streams + working copies)\n",
                   rss_eval / 1e6, rss_train / 1e6, (double)rss_train / rss_eval, eval_act / 1e6, train_act / 1e6);
            if (with_passes) print_passes(&passes, step, 2 * fwd, 0);
        }
    }
step_done:
    lm_work_free(&lw);
    dz_setup_free(setup);
    return rc;
}

/* ZO steps on real prompt-classification batches, each candidate as a full sequence
 * (MeZO) vs candidates continuing their example's shared prompt, side by side. */
typedef struct class_loss {
    dz_class_batch *bb;
    const int *labels;
    int n, K;
    float *scores;
} class_loss;

static void class_loss_fn(const float *lp, const float *plp, void *user, double *out) {
    class_loss *cl = user;
    dz_class_batch_scores(cl->bb, lp, plp, cl->scores);
    out[0] = dz_class_loss(cl->scores, cl->labels, cl->n, cl->K), out[1] = 1.0;
}

static int time_class_steps(dz_model *m, const dz_class_set *cs, int batch, int steps, int share, double *secs,
                            float *g) {
    dz_error err = {0};
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    dz_class_batch bb = {0};
    const int K = cs->n_labels;
    int rc = 0, *ex = malloc(sizeof(int) * (size_t)batch), *labels = malloc(sizeof(int) * (size_t)batch);
    float *scores = malloc(sizeof(float) * (size_t)batch * K);
    const dz_zo_params zp = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1};
    if (!ex || !labels || !scores) rc = dz_cli_failf("out of memory");
    if (!rc && dz_forward_create_streams(m, batch * K, cs->max_len, 0, share ? 4 : 2, &f, &err) != DZ_OK) rc = 1;
    if (!rc && dz_zo_engine_create(m, f, &zp, &e, &err) != DZ_OK) rc = 1;
    if (!rc && dz_class_batch_init(&bb, batch * K, cs->max_len, share, &err) != DZ_OK) rc = 1;
    class_loss cl = {.bb = &bb, .labels = labels, .n = batch, .K = K, .scores = scores};
    *secs = 0.0;
    for (int s = 0; !rc && s <= steps; s++) {
        for (int b = 0; b < batch; b++) {
            ex[b] = (s * batch + b) % cs->n_examples;
            labels[b] = cs->labels[ex[b]];
        }
        const double t0 = dz_now();
        dz_zo_step_result r;
        if (dz_class_batch_fill(&bb, cs, ex, batch, &err) != DZ_OK) rc = 1;
        const dz_zo_batch zb = dz_class_batch_zo(&bb, class_loss_fn, &cl);
        if (!rc && dz_zo_step(e, (uint32_t)s, 0.0f, &zb, &r, &err) != DZ_OK) rc = 1; /* lr 0: same weights for both */
        if (s > 0) *secs += (dz_now() - t0) / steps, g[s - 1] = r.g[0];
    }
    if (rc && err.msg[0]) dz_cli_fail(&err);
    dz_class_batch_free(&bb);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    free(ex);
    free(labels);
    free(scores);
    return rc;
}

static int bench_classify(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *labels = DZ_DEFAULT_LABEL_WORDS;
    int batch = 16, steps = 20, threads = 0, json = 0;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model (default: stories260K from the assets)"},
        {"data", DZ_OPT_STR, &data, "SST-2 tsv (default: the assets' train.tsv)"},
        {"label-words", DZ_OPT_STR, &labels, "label words (default " DZ_DEFAULT_LABEL_WORDS ")"},
        {"batch", DZ_OPT_INT, &batch, "examples per step (default 16)"},
        {"steps", DZ_OPT_INT, &steps, "timed steps (default 20, after one warm-up)"},
        {"threads", DZ_OPT_INT, &threads, "threads (default: $OMP_NUM_THREADS, else all cores)"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "bench classify",
        .usage = "[--model M] [--data FILE] [--batch B --steps N]",
        .summary = "Times ZO steps on SST-2 prompt classification with every candidate as a full\n"
                   "sequence (MeZO) and with candidates continuing their example's shared prompt.",
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    if (batch < 1 || steps < 1) return dz_cli_failf("--batch and --steps must be >= 1");
    char mbuf[4096], dbuf[4096];
    if (!model) model = dz_cli_asset("stories260K/stories260K.bin", mbuf, sizeof mbuf);
    if (!data) data = dz_cli_asset("sst2/train.tsv", dbuf, sizeof dbuf);
    if ((rc = dz_cli_runtime(threads))) return rc;
    dz_model *m;
    dz_tokenizer *tok;
    if ((rc = dz_cli_load(model, "f32", NULL, 1, &m, &tok))) return rc;
    dz_error err = {0};
    dz_dataset ds = {0}, sample = {0};
    dz_class_set cs = {0};
    dz_prompt_spec ps;
    dz_prompt_spec_default_sst2(&ps);
    if (dz_model_make_owned(m, &err) != DZ_OK || dz_prompt_spec_set_labels(&ps, labels, &err) != DZ_OK ||
        dz_dataset_load_sst2(data, &ds, &err) != DZ_OK || dz_dataset_sample(&ds, batch * (steps + 1), 42, &sample, &err) != DZ_OK ||
        dz_class_set_build(&sample, &ps, tok, dz_model_config(m)->max_seq_len, &cs, &err) != DZ_OK)
        rc = dz_cli_fail(&err);
    double t_flat = 0, t_shared = 0;
    float *g = malloc(sizeof(float) * 2 * (size_t)steps);
    if (!rc && !g) rc = dz_cli_failf("out of memory");
    if (!rc) rc = time_class_steps(m, &cs, batch, steps, 0, &t_flat, g);
    if (!rc) rc = time_class_steps(m, &cs, batch, steps, 1, &t_shared, g + steps);
    if (!rc) {
        const int same = memcmp(g, g + steps, sizeof(float) * (size_t)steps) == 0;
        if (json)
            printf("{\"model\": \"%s\", \"batch\": %d, \"steps\": %d, \"threads\": %d, \"step_seconds_full_sequences\": %.5f, "
                   "\"step_seconds_shared_prompts\": %.5f, \"speedup\": %.3f, \"same_g\": %s, \"isa\": \"%s\"}\n",
                   model, batch, steps, dz_runtime_threads(), t_flat, t_shared, t_flat / t_shared, same ? "true" : "false",
                   dz_runtime_kernels());
        else
            printf("classify %s, SST-2 batch %d, %d threads\n"
                   "gemm     %s\n"
                   "step     %.2f ms with every candidate a full sequence, %.2f ms with shared prompts: %.2fx\n"
                   "g        %s in both layouts\n",
                   model, batch, dz_runtime_threads(), dz_runtime_gemm(), 1e3 * t_flat, 1e3 * t_shared,
                   t_flat / t_shared, same ? "bitwise the same" : "differs");
    }
    free(g);
    dz_class_set_free(&cs);
    dz_dataset_free(&sample);
    dz_dataset_free(&ds);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}

/* distzo bench eval: SST-2 prompt classification on a real model, eval forwards and ZO
 * steps against the GEMM work they cannot avoid. The ideal of a batch is the GEMMs timed
 * in the same run on exactly its Linear shapes, the faster of OpenBLAS sgemm and distzo's
 * GEMM shape by shape: M = the rows the batch needs (no padding; each example's context
 * once, each candidate's tokens but the last) for the layers, M = the scored rows for the
 * head over the whole vocabulary. */
typedef struct eval_batch_work {
    dz_class_batch bb;
    int ex0, real_tokens, padded_tokens, head_rows;
    double t_eval, t_step, t_ideal[3]; /* best seconds seen; the ideal: OpenBLAS, distzo's GEMM, the faster per shape */
    dz_zo_step_time step_time;         /* the phases of the fastest step */
} eval_batch_work;

/* The Linear shapes of one forward over M tokens and H head rows (src/model/forward.c). */
static int batch_shapes(const dz_config *c, int M, int H, gemm_shape *s) {
    const int d = c->dim, f = c->hidden_dim, L = c->n_layers;
    const int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    int n = 0;
    s[n++] = (gemm_shape){M, qd, d, L};
    s[n++] = (gemm_shape){M, kvd, d, 2.0 * L};
    s[n++] = (gemm_shape){M, d, qd, L};
    s[n++] = (gemm_shape){M, f, d, (c->arch == DZ_ARCH_OPT ? 1.0 : 2.0) * L};
    s[n++] = (gemm_shape){M, d, f, L};
    s[n++] = (gemm_shape){H, c->vocab_size, c->embed_dim, 1.0};
    return n;
}

/* Seconds of one forward's GEMMs at the speed measured now: out[impl] per implementation,
 * out[2] the faster of the two shape by shape (the ideal the ratios use). */
static void ideal_seconds(const dz_config *c, const eval_batch_work *b, double out[3]) {
    gemm_shape s[8];
    const int n = batch_shapes(c, b->real_tokens, b->head_rows, s);
    out[0] = out[1] = out[2] = 0.0;
    for (int i = 0; i < n; i++) {
        double t[2];
        for (int impl = DZ_BENCH_GEMM_OPENBLAS; impl <= DZ_BENCH_GEMM_DISTZO; impl++) {
            const double gf = dz_bench_gemm_gflops((dz_bench_gemm)impl, s[i].M, s[i].N, s[i].K, 0.05);
            t[impl] = 2.0 * s[i].M * s[i].N * s[i].K * s[i].count / (gf * 1e9);
            out[impl] += t[impl];
        }
        out[2] += t[0] < t[1] ? t[0] : t[1];
    }
}

/* The rows a forward of the batch cannot do without: each example's context once (its
 * candidates share it), then each candidate's tokens but the last (which predicts
 * nothing); and the padded rows the layout has. */
static void eval_batch_tokens(eval_batch_work *b, const dz_class_set *cs, int n) {
    const dz_class_batch *bb = &b->bb;
    const int K = cs->n_labels;
    b->real_tokens = 0;
    for (int e = b->ex0; e < b->ex0 + n; e++) {
        const dz_cand_seq *q = &cs->seqs[(size_t)e * K];
        int ctx = q[0].len - q[0].cand_len;
        for (int k = 1; k < K; k++) ctx = q[k].len - q[k].cand_len < ctx ? q[k].len - q[k].cand_len : ctx;
        b->real_tokens += ctx;
        for (int k = 0; k < K; k++) b->real_tokens += q[k].len - 1 - ctx;
    }
    b->padded_tokens = bb->n_seqs * bb->T + (bb->tree ? bb->n_prompts * bb->PT : 0);
    b->head_rows = bb->n_rows + bb->n_p_rows;
}

static int bench_eval(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *labels = NULL;
    int batch = 16, batches = 4, repeat = 3, threads = 0, json = 0, flat = 0;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model: .gguf, HF folder or .bin (default: the assets' SmolLM2-135M GGUF)"},
        {"data", DZ_OPT_STR, &data, "SST-2 tsv (default: the assets' sst2/dev.tsv); its first batch x batches examples"},
        {"label-words", DZ_OPT_STR, &labels, "label words (default " DZ_DEFAULT_LABEL_WORDS ")"},
        {"batch", DZ_OPT_INT, &batch, "examples per batch (default 16)"},
        {"batches", DZ_OPT_INT, &batches, "batches (default 4)"},
        {"repeat", DZ_OPT_INT, &repeat, "rounds over the batches, the best of each kept (default 3, after a warm-up)"},
        {"threads", DZ_OPT_INT, &threads, "threads (default: $OMP_NUM_THREADS, else all cores)"},
        {"flat", DZ_OPT_FLAG, &flat, "every candidate a full sequence (MeZO) instead of continuing a shared prompt"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    const dz_cmd_spec spec = {
        .name = "bench eval",
        .usage = "[--model M.gguf] [--data dev.tsv] [--batch B --batches N --repeat R --threads T]",
        .summary = "Times eval forwards and ZO steps on real SST-2 batches and, in the same run, the\n"
                   "GEMMs (OpenBLAS sgemm and distzo's, the faster per shape) on exactly the batches'\n"
                   "Linear shapes: the rows needed (no padding) for the layers, the scored rows for the\n"
                   "head; prints ideal / measured.",
        .min_positional = 0,
        .max_positional = 0,
        .opts = opts,
    };
    const char *pos[1];
    int npos, rc = dz_args_parse(&spec, argc, argv, pos, &npos);
    if (rc) return rc < 0 ? 2 : 0;
    if (batch < 1 || batches < 1 || repeat < 1) return dz_cli_failf("--batch, --batches and --repeat must be >= 1");
    char mbuf[4096], dbuf[4096];
    if (!model) model = dz_cli_asset("smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf", mbuf, sizeof mbuf);
    if (!data) data = dz_cli_asset("sst2/dev.tsv", dbuf, sizeof dbuf);
    if ((rc = dz_cli_runtime(threads))) return rc;
    /* OpenBLAS's OpenMP threads would spin for milliseconds after each call, on the cores
     * the next forward or GEMM is timed on: unless the user chose, they sleep at once
     * (libgomp reads this when OpenBLAS loads; distzo's pool read its settings above) */
    const int passive = getenv("OMP_WAIT_POLICY") == NULL;
    if (passive) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    rc = dz_cli_blas_reference();
    if (passive) unsetenv("OMP_WAIT_POLICY");
    if (rc) return rc;
    dz_model *m;
    dz_tokenizer *tok;
    if ((rc = dz_cli_load(model, "f32", NULL, 1, &m, &tok))) return rc;
    const dz_config *c = dz_model_config(m);
    dz_error err = {0};
    dz_dataset ds = {0};
    dz_class_set cs = {0};
    dz_prompt_spec ps;
    dz_prompt_spec_default_sst2(&ps);
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    eval_batch_work *bw = calloc((size_t)batches, sizeof *bw);
    const int K = 2;
    float *lp = NULL, *plp = NULL, *scores = NULL;
    int *ex = NULL, *lab = NULL;
    if (!bw) rc = dz_cli_failf("out of memory");
    if (!rc && (dz_model_make_owned(m, &err) != DZ_OK || (labels && dz_prompt_spec_set_labels(&ps, labels, &err) != DZ_OK) ||
                dz_dataset_load_sst2(data, &ds, &err) != DZ_OK))
        rc = dz_cli_fail(&err);
    if (!rc && ds.count < batch * batches)
        rc = dz_cli_failf("%s: %d examples, fewer than --batch %d x --batches %d", data, ds.count, batch, batches);
    if (!rc) {
        dz_dataset first = ds; /* the first examples, in file order (as eval reads them) */
        first.count = batch * batches;
        if (dz_class_set_build(&first, &ps, tok, c->max_seq_len, &cs, &err) != DZ_OK) rc = dz_cli_fail(&err);
    }
    if (!rc && cs.n_labels != K) rc = dz_cli_failf("bench eval scores %d label words, not %d", K, cs.n_labels);
    const dz_zo_params zp = {.seed = 1, .eps = 1e-3f, .q = 1, .fuse = 1};
    if (!rc && (dz_forward_create_streams(m, batch * K, cs.max_len, 0, flat ? 2 : 4, &f, &err) != DZ_OK ||
                dz_zo_engine_create(m, f, &zp, &e, &err) != DZ_OK))
        rc = dz_cli_fail(&err);
    const size_t rows_cap = (size_t)batch * K * cs.max_len;
    if (!rc) {
        lp = malloc(sizeof(float) * rows_cap), plp = malloc(sizeof(float) * rows_cap);
        scores = malloc(sizeof(float) * (size_t)batch * K);
        ex = malloc(sizeof(int) * (size_t)batch), lab = malloc(sizeof(int) * (size_t)batch);
        if (!lp || !plp || !scores || !ex || !lab) rc = dz_cli_failf("out of memory");
    }
    for (int i = 0; !rc && i < batches; i++) {
        eval_batch_work *b = &bw[i];
        b->ex0 = i * batch;
        b->t_eval = b->t_step = b->t_ideal[0] = b->t_ideal[1] = b->t_ideal[2] = 1e30;
        for (int j = 0; j < batch; j++) ex[j] = b->ex0 + j;
        if (dz_class_batch_init(&b->bb, batch * K, cs.max_len, !flat, &err) != DZ_OK ||
            dz_class_batch_fill(&b->bb, &cs, ex, batch, &err) != DZ_OK)
            rc = dz_cli_fail(&err);
        else eval_batch_tokens(b, &cs, batch);
    }
    const dz_weight_source w = dz_model_weights(m);
    double g_sum = 0.0;
    /* round 0 warms up; each round interleaves, batch by batch, the eval forward, the ZO
     * step and the GEMMs of the ideal, so all three see the same moments of a shared machine */
    for (int r = 0; !rc && r <= repeat; r++)
        for (int i = 0; !rc && i < batches; i++) {
            eval_batch_work *b = &bw[i];
            double t0 = dz_now();
            if (dz_class_batch_forward(f, &w, &b->bb, lp, plp, &err) != DZ_OK) {
                rc = dz_cli_fail(&err);
                break;
            }
            double dt = dz_now() - t0;
            if (r > 0 && dt < b->t_eval) b->t_eval = dt;
            for (int j = 0; j < batch; j++) lab[j] = cs.labels[b->ex0 + j];
            class_loss cl = {.bb = &b->bb, .labels = lab, .n = batch, .K = K, .scores = scores};
            const dz_zo_batch zb = dz_class_batch_zo(&b->bb, class_loss_fn, &cl);
            dz_zo_step_result res;
            t0 = dz_now();
            if (dz_zo_step(e, (uint32_t)(r * batches + i), 0.0f, &zb, &res, &err) != DZ_OK) {
                rc = dz_cli_fail(&err);
                break;
            }
            dt = dz_now() - t0;
            if (r > 0 && dt < b->t_step) b->t_step = dt, b->step_time = res.time;
            if (r > 0) g_sum += res.g[0];
            if (r == 0) continue;
            double ideal[3];
            ideal_seconds(c, b, ideal);
            for (int k = 0; k < 3; k++)
                if (ideal[k] < b->t_ideal[k]) b->t_ideal[k] = ideal[k];
        }
    dz_bench_zo_passes passes;
    if (!rc) rc = measure_passes(m, repeat, &passes);
    if (!rc) {
        double te = 0, ts = 0, ti[3] = {0, 0, 0};
        dz_zo_step_time ph = {0};
        long real = 0, padded = 0, head = 0;
        for (int i = 0; i < batches; i++) {
            te += bw[i].t_eval, ts += bw[i].t_step, ti[0] += bw[i].t_ideal[0], ti[1] += bw[i].t_ideal[1], ti[2] += bw[i].t_ideal[2];
            ph.begin += bw[i].step_time.begin / batches, ph.pass += bw[i].step_time.pass / batches;
            ph.layers += bw[i].step_time.layers / batches, ph.head += bw[i].step_time.head / batches;
            real += bw[i].real_tokens, padded += bw[i].padded_tokens, head += bw[i].head_rows;
        }
        te /= batches, ts /= batches, ti[0] /= batches, ti[1] /= batches, ti[2] /= batches;
        const double ideal = ti[2];
        /* what a step would take if its forwards ran at the ideal's speed and it added only
         * the z it must draw (2 per parameter, docs/ZO_RNG.md): the most 2 x ideal / step can be */
        const double ceiling = 2 * ideal / (2 * ideal + passes.zgen_s);
        if (json) {
            printf("{\"model\": ");
            dz_cli_json_string(stdout, model);
            printf(", \"batch\": %d, \"batches\": %d, \"repeat\": %d, \"threads\": %d, \"layout\": \"%s\", "
                   "\"real_tokens_per_batch\": %.1f, \"padded_tokens_per_batch\": %.1f, \"head_rows_per_batch\": %.1f, "
                   "\"ideal_seconds\": %.5f, \"openblas_ideal_seconds\": %.5f, \"distzo_gemm_ideal_seconds\": %.5f, \"eval_seconds\": %.5f, "
                   "\"step_seconds\": %.5f, \"eval_ratio\": %.4f, \"step_ratio\": %.4f, \"step_over_2_evals\": %.4f, "
                   "\"g_sum\": %.17g, \"blas_core\": \"%s\", \"isa\": \"%s\", \"step_phases_seconds\": {\"begin\": %.5f, "
                   "\"pass\": %.5f, \"layers\": %.5f, \"head\": %.5f}, \"step_ceiling\": %.4f",
                   batch, batches, repeat, dz_runtime_threads(), flat ? "flat" : "shared prompts", (double)real / batches,
                   (double)padded / batches, (double)head / batches, ideal, ti[0], ti[1], te, ts, ideal / te, 2 * ideal / ts,
                   ts / (2 * te), g_sum, dz_bench_reference_core(), dz_runtime_kernels(), ph.begin, ph.pass, ph.layers,
                   ph.head, ceiling);
            print_passes(&passes, ts, 2 * te, 1);
            printf("}\n");
        } else {
            printf("eval     %s, SST-2 %d batches of %d, %s, %d threads\n", model, batches, batch,
                   flat ? "every candidate a full sequence" : "candidates continue shared prompts", dz_runtime_threads());
            printf("gemm     %s\n", dz_runtime_gemm());
            printf("tokens   %.1f needed per batch (the batch layout pads to %.1f), head on %.1f rows\n",
                   (double)real / batches, (double)padded / batches, (double)head / batches);
            printf("ideal    %.2f ms: the Linear GEMMs on the real shapes, the faster of OpenBLAS %s sgemm\n"
                   "         (%.2f ms) and distzo's GEMM (%.2f ms) shape by shape\n",
                   1e3 * ideal, dz_bench_reference_core(), 1e3 * ti[0], 1e3 * ti[1]);
            printf("eval     %.2f ms per batch forward: ideal / eval = %.1f%%\n", 1e3 * te, 100 * ideal / te);
            printf("step     %.2f ms per ZO step: 2 x ideal / step = %.1f%%, step / (2 x eval) = %.3f\n", 1e3 * ts,
                   200 * ideal / ts, ts / (2 * te));
            printf("         the fastest steps' phases: the layers' forwards %.1f ms (both signs), the blocks' pass\n"
                   "         (update, then w+ / w-) %.1f, the head %.1f, the global block's update and the embeddings %.1f\n",
                   1e3 * ph.layers, 1e3 * ph.pass, 1e3 * ph.head, 1e3 * ph.begin);
            printf("ceiling  2 x ideal / (2 x ideal + z alone) = %.1f%%: a step whose forwards ran at the ideal's speed\n"
                   "         and that added only the z it must draw (passes below)\n", 100 * ceiling);
            printf("g        sum of the timed steps %.17g (compare it across builds, --threads, DISTZO_ISA)\n", g_sum);
            print_passes(&passes, ts, 2 * te, 0);
        }
    }
    for (int i = 0; bw && i < batches; i++) dz_class_batch_free(&bw[i].bb);
    free(bw), free(lp), free(plp), free(scores), free(ex), free(lab);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_class_set_free(&cs);
    dz_dataset_free(&ds);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}

int dz_cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "forward")) return bench_forward(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "step")) return bench_step(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "classify")) return bench_classify(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "eval")) return bench_eval(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: distzo bench forward|step|classify|eval [options]  (`distzo bench forward --help`)\n");
        return 0;
    }
    return dz_cli_failf("bench needs a benchmark: forward, step, classify or eval");
}
