/* distzo bench forward|step|classify|eval: each benchmark's options; the measuring and the
 * report are src/bench's (distzo/benchmarks.h). */
#include <stdio.h>
#include <string.h>

#include "cli/common.h"
#include "distzo/benchmarks.h"

/* The four benchmarks: their names and what each measures (its --help). */
enum { FORWARD, STEP, CLASSIFY, EVAL, N_BENCH };
static const dz_cmd_spec benches[N_BENCH] = {
    [FORWARD] = {.name = "bench forward", .usage = "--model M [--batch B --seq T --threads N]",
                 .summary = "Times whole forward passes (head on every position, as LM training does) and,\n"
                            "in the same run, OpenBLAS sgemm on the model's own GEMM shapes; prints the ratio."},
    [STEP] = {.name = "bench step",
              .usage = "--model M [--batch B --seq T --threads N] [--peft lora|prefix] [--rng v1|v2]\n"
                       "       [--perturbation gaussian|rademacher]",
              .summary = "Times, in one run, a plain forward (as eval runs it) and a full ZO step (two\n"
                         "perturbed forwards, perturbation and update), with the peak RSS after each phase;\n"
                         "with --peft lora|prefix the step trains that adapter and the forward is also timed\n"
                         "with it attached: 2 x forward / step against both;\n"
                         "in memory with f32 masters, also the step's element-wise passes (z alone, perturb,\n"
                         "update, the fused pass) at the model's size, their bytes moved per step, and this\n"
                         "machine's memory bandwidth with the same threads."},
    [CLASSIFY] = {.name = "bench classify", .usage = "[--model M] [--data FILE] [--batch B --steps N]",
                  .summary = "Times ZO steps on SST-2 prompt classification with every candidate as a full\n"
                             "sequence (MeZO) and with candidates continuing their example's shared prompt."},
    [EVAL] = {.name = "bench eval",
              .usage = "[--model M.gguf] [--data dev.tsv] [--batch B --batches N --repeat R --threads T] [--rng v1|v2]\n"
                       "       [--perturbation gaussian|rademacher] [--peft lora|prefix [--lora-rank R ...] [--keep-quantized]]",
              .summary = "Times eval forwards and ZO steps on real SST-2 batches and, in the same run, the\n"
                         "GEMMs (OpenBLAS sgemm and distzo's, the faster per shape) on exactly the batches'\n"
                         "Linear shapes: the rows needed (no padding) for the layers, the scored rows for the\n"
                         "head; prints ideal / measured. With --peft lora|prefix the steps train that adapter\n"
                         "and the eval forwards run with it attached: 2 x eval / step (issue 29: >= 0.90)."},
};

/* --rng and --perturbation of bench step and eval: the steps' z, as train's options name it. */
#define RNG_OPTION(p) {"rng", DZ_OPT_STR, p, "the steps' z: v1 (default) or v2 (docs/ZO_RNG.md section 10)"}
#define PERTURBATION_OPTION(p) {"perturbation", DZ_OPT_STR, p, "the steps' z: gaussian (default) or rademacher"}

/* The adapter's settings of bench step and eval under --peft, as train's options name them. */
#define PEFT_OPTIONS(p)                                                                                  \
    {"lora-rank", DZ_OPT_INT, &(p)->lora_rank, "lora: r (default 8)"},                                   \
    {"lora-alpha", DZ_OPT_FLOAT, &(p)->lora_alpha, "lora: the update is (alpha / r) B A (default 16)"},  \
    {"lora-targets", DZ_OPT_STR, &(p)->lora_targets, "lora: modules, q,v by default (as train's)"},      \
    {"prefix-tokens", DZ_OPT_INT, &(p)->prefix_tokens, "prefix: virtual tokens per layer (default 5)"}, \
    {"keep-quantized", DZ_OPT_FLAG, &(p)->keep_quantized,                                               \
     "with --peft: a GGUF base's blocks stay quantized (dequantized layer by layer as read)"}

/* The benchmark's status as the command's: 0, or 1 after saying why. */
static int bench_done(dz_status st, const dz_error *err) { return st == DZ_OK ? 0 : dz_cli_fail(err); }

static int bench_forward(int argc, char **argv) {
    const char *gpu_math = NULL;
    const char *model = NULL, *dtype = "f32";
    int threads = 0, json = 0;
    dz_bench_forward_spec s = {.batch = 16, .seq = 128, .seconds = 5.0f};
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model folder or .bin (make one with `distzo init --preset opt-125m -o DIR`)"},
        {"batch", DZ_OPT_INT, &s.batch, "sequences (default 16)"},
        {"seq", DZ_OPT_INT, &s.seq, "tokens per sequence (default 128)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&s.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"seconds", DZ_OPT_FLOAT, &s.seconds, "minimum time to measure the forward (default 5)"},
        dz_cli_dtype_option(&dtype, NULL),
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    int rc = dz_cli_parse(&benches[FORWARD], opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    dz_cli_gpu_math_join(&s.backend, gpu_math);
    if (!model) return dz_cli_failf("bench forward needs --model M");
    if (s.batch < 1 || s.seq < 2) return dz_cli_failf("--batch must be >= 1 and --seq >= 2");
    if (!(s.seconds > 0.0f)) return dz_cli_failf("option --seconds: %g; give a positive time to measure", (double)s.seconds);
    dz_model *m;
    const dz_cli_preamble p = {
        .threads = threads, .backend = s.backend, .blas = DZ_CLI_BLAS, .model = model, .dtype = dtype};
    if ((rc = dz_cli_start(&p, &m, NULL))) return rc;
    dz_error err = {0};
    rc = bench_done(dz_bench_forward(m, &s, &(dz_bench_report){stdout, json, model}, &err), &err);
    dz_model_free(m);
    return rc;
}

static int bench_step(int argc, char **argv) {
    const char *gpu_math = NULL;
    const char *master = "f32";
    const char *rng = "v1", *perturbation = "gaussian";
    int threads = 0, json = 0, no_fuse = 0;
    dz_bench_step_spec s = {.batch = 16, .seq = 128, .steps = 3};
    dz_train_config d; /* train's adapter defaults (r 8, alpha 16, q,v; 5 prefix tokens) */
    dz_train_config_default(&d);
    s.peft = d.peft;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &s.model, "model folder or .bin"},
        {"batch", DZ_OPT_INT, &s.batch, "sequences (default 16)"},
        {"seq", DZ_OPT_INT, &s.seq, "tokens per sequence (default 128)"},
        {"steps", DZ_OPT_INT, &s.steps, "timed steps (default 3, after one warm-up)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&s.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"master-dtype", DZ_OPT_STR, &master, "master weights: f32 (default) or bf16"},
        {"no-fuse", DZ_OPT_FLAG, &no_fuse, "apply updates at once instead of fused into the next step"},
        {"store", DZ_OPT_STR, &s.store, "disk:PATH or disk-nocache:PATH: masters in a store file (skips the forward phase)"},
        {"max-resident", DZ_OPT_INT, &s.max_resident_mb, "with --store: keep what the step allocates under this many MB (the process adds 10-20 MB) or refuse"},
        {"stream-globals", DZ_OPT_FLAG, &s.stream_globals, "with --store: the global block stays in the store too"},
        {"max-device-memory", DZ_OPT_INT, &s.max_device_mb,
         "with a device backend: at most this many MB of its memory (the layer masters streamed if needed)"},
        {"peft", DZ_OPT_STR, &s.peft.method, "lora or prefix: the step trains that adapter over the read-only base, "
         "and the base's forward is also timed with it attached (default: every parameter)"},
        PEFT_OPTIONS(&s.peft),
        RNG_OPTION(&rng),
        PERTURBATION_OPTION(&perturbation),
        {"interleave", DZ_OPT_FLAG, &s.interleave, "time the forwards between the steps, round by round (the same load "
         "for both on a busy machine; the forward phase's RSS is then the forwards' before the engine's)"},
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    int rc = dz_cli_parse(&benches[STEP], opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    dz_cli_gpu_math_join(&s.backend, gpu_math);
    if (!s.model) return dz_cli_failf("bench step needs --model M");
    if (s.batch < 1 || s.seq < 2 || s.steps < 1) return dz_cli_failf("--batch, --steps must be >= 1 and --seq >= 2");
    if (dz_dtype_parse(master, &s.master) != 0 || s.master == DZ_F16)
        return dz_cli_failf("option --master-dtype: '%s' is not f32 or bf16 (the masters' types)", master);
    if (s.max_resident_mb < 0) return dz_cli_failf("option --max-resident: %d MB is negative", s.max_resident_mb);
    if ((s.max_resident_mb > 0 || s.stream_globals) && (!s.store || strncmp(s.store, "disk", 4)))
        return dz_cli_failf("option %s: without --store disk:PATH it would be ignored",
                            s.max_resident_mb > 0 ? "--max-resident" : "--stream-globals");
    s.fuse = !no_fuse;
    if (dz_cli_z_parse(rng, perturbation, &s.rng_v2, &s.rademacher)) return 1;
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads, .backend = s.backend}, NULL, NULL))) return rc;
    dz_error err = {0};
    return bench_done(dz_bench_step(&s, &(dz_bench_report){stdout, json, s.model}, &err), &err);
}

static int bench_classify(int argc, char **argv) {
    const char *gpu_math = NULL;
    const char *model = NULL;
    int threads = 0, json = 0;
    dz_bench_classify_spec s = {.label_words = DZ_DEFAULT_LABEL_WORDS, .batch = 16, .steps = 20};
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model (default: stories260K from the assets)"},
        {"data", DZ_OPT_STR, &s.data, "SST-2 tsv (default: the assets' train.tsv)"},
        {"label-words", DZ_OPT_STR, &s.label_words, "label words (default " DZ_DEFAULT_LABEL_WORDS ")"},
        {"batch", DZ_OPT_INT, &s.batch, "examples per step (default 16)"},
        {"steps", DZ_OPT_INT, &s.steps, "timed steps (default 20, after one warm-up)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&s.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    int rc = dz_cli_parse(&benches[CLASSIFY], opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    dz_cli_gpu_math_join(&s.backend, gpu_math);
    if (s.batch < 1 || s.steps < 1) return dz_cli_failf("--batch and --steps must be >= 1");
    char mbuf[4096], dbuf[4096];
    if (!model) model = dz_cli_default_model(mbuf, sizeof mbuf);
    if (!s.data) s.data = dz_cli_asset("sst2/train.tsv", dbuf, sizeof dbuf);
    dz_model *m;
    dz_tokenizer *tok;
    if ((rc = dz_cli_start(&(dz_cli_preamble){.threads = threads, .backend = s.backend, .model = model, .dtype = "f32"},
                           &m, &tok)))
        return rc;
    dz_error err = {0};
    rc = bench_done(dz_bench_classify(m, tok, &s, &(dz_bench_report){stdout, json, model}, &err), &err);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}

static int bench_eval(int argc, char **argv) {
    const char *gpu_math = NULL;
    const char *model = NULL;
    const char *rng = "v1", *perturbation = "gaussian";
    int threads = 0, json = 0;
    dz_bench_eval_spec s = {.batch = 16, .batches = 4, .repeat = 3};
    dz_train_config d; /* train's adapter defaults (r 8, alpha 16, q,v; 5 prefix tokens) */
    dz_train_config_default(&d);
    s.peft = d.peft;
    const dz_opt opts[] = {
        {"model", DZ_OPT_STR, &model, "model: .gguf, HF folder or .bin (default: the assets' SmolLM2-135M GGUF)"},
        {"data", DZ_OPT_STR, &s.data, "SST-2 tsv (default: the assets' sst2/dev.tsv); its first batch x batches examples"},
        {"label-words", DZ_OPT_STR, &s.label_words, "label words (default " DZ_DEFAULT_LABEL_WORDS ")"},
        {"batch", DZ_OPT_INT, &s.batch, "examples per batch (default 16)"},
        {"batches", DZ_OPT_INT, &s.batches, "batches (default 4)"},
        {"repeat", DZ_OPT_INT, &s.repeat, "rounds over the batches, the best of each kept (default 3, after a warm-up)"},
        dz_cli_threads_option(&threads, NULL),
        dz_cli_backend_option(&s.backend),
        dz_cli_gpu_math_option(&gpu_math),
        {"flat", DZ_OPT_FLAG, &s.flat, "every candidate a full sequence (MeZO) instead of continuing a shared prompt"},
        RNG_OPTION(&rng),
        PERTURBATION_OPTION(&perturbation),
        {"peft", DZ_OPT_STR, &s.peft.method, "lora or prefix: the steps train that adapter over the read-only base "
         "and the eval forwards run with it attached (default: every parameter)"},
        PEFT_OPTIONS(&s.peft),
        {"json", DZ_OPT_FLAG, &json, "print JSON"},
        {0},
    };
    int rc = dz_cli_parse(&benches[EVAL], opts, argc, argv, NULL);
    if (rc >= 0) return rc;
    dz_cli_gpu_math_join(&s.backend, gpu_math);
    if (s.batch < 1 || s.batches < 1 || s.repeat < 1) return dz_cli_failf("--batch, --batches and --repeat must be >= 1");
    if (dz_cli_z_parse(rng, perturbation, &s.rng_v2, &s.rademacher)) return 1;
    char mbuf[4096], dbuf[4096];
    if (!model) model = dz_cli_asset("smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf", mbuf, sizeof mbuf);
    if (!s.data) s.data = dz_cli_asset("sst2/dev.tsv", dbuf, sizeof dbuf);
    dz_model *m;
    dz_tokenizer *tok;
    s.model = model;
    const dz_cli_preamble p = {.threads = threads, .backend = s.backend, .blas = DZ_CLI_BLAS_PASSIVE, .model = model,
                               .dtype = "f32", .keep_quantized = s.peft.keep_quantized};
    if ((rc = dz_cli_start(&p, &m, &tok))) return rc;
    dz_error err = {0};
    rc = bench_done(dz_bench_eval(m, tok, &s, &(dz_bench_report){stdout, json, model}, &err), &err);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    return rc;
}

int dz_cmd_bench(int argc, char **argv) {
    int (*const run[N_BENCH])(int, char **) = {bench_forward, bench_step, bench_classify, bench_eval};
    for (int b = 0; argc >= 2 && b < N_BENCH; b++)
        if (!strcmp(argv[1], benches[b].name + strlen("bench "))) return run[b](argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: distzo bench forward|step|classify|eval [options]  (`distzo bench forward --help`)\n");
        return 0;
    }
    return dz_cli_failf("bench needs a benchmark: forward, step, classify or eval");
}
