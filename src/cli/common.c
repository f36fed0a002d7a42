#include "cli/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int dz_cli_fail(const dz_error *err) {
    fprintf(stderr, "distzo: error: %s\n", err->msg[0] ? err->msg : dz_status_name(err->code));
    return 1;
}

int dz_cli_failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("distzo: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int dz_cli_z_parse(const char *rng, const char *perturbation, int *v2, int *rademacher) {
    if (strcmp(perturbation, "gaussian") && strcmp(perturbation, "rademacher"))
        return dz_cli_failf("option --perturbation: '%s' is not gaussian or rademacher", perturbation);
    if (strcmp(rng, "v1") && strcmp(rng, "v2")) return dz_cli_failf("option --rng: '%s' is not v1 or v2", rng);
    *v2 = !strcmp(rng, "v2"), *rademacher = !strcmp(perturbation, "rademacher");
    return 0;
}

int dz_cli_parse(const dz_cmd_spec *cmd, const dz_opt *opts, int argc, char **argv, const char **pos) {
    dz_cmd_spec spec = *cmd;
    spec.opts = opts;
    for (int i = 0; i < spec.max_positional; i++) pos[i] = NULL;
    int n_pos;
    const int rc = dz_args_parse(&spec, argc, argv, pos, &n_pos);
    return rc == 0 ? -1 : rc < 0 ? 2 : 0;
}

dz_opt dz_cli_threads_option(int *threads, const char *help) {
    return (dz_opt){"threads", DZ_OPT_INT, threads, help ? help : "threads (default: $OMP_NUM_THREADS, else all cores)"};
}

dz_opt dz_cli_dtype_option(const char **dtype, const char *help) {
    return (dz_opt){"dtype", DZ_OPT_STR, dtype, help ? help : "weights in memory: f32 (default), bf16 or f16"};
}

dz_opt dz_cli_tokenizer_option(const char **tokenizer, const char *help) {
    return (dz_opt){"tokenizer", DZ_OPT_STR, tokenizer,
                    help ? help : "tokenizer file or folder (default: the model's own)"};
}

dz_opt dz_cli_keep_quantized_option(int *keep) {
    return (dz_opt){"keep-quantized", DZ_OPT_FLAG, keep,
                    "GGUF: hold the weights as the file stores them (quantized, mapped) and dequantize each layer as "
                    "the forward reads it: memory about the file's size, the same results, bit for bit"};
}

dz_opt dz_cli_backend_option(const char **backend) {
    return (dz_opt){"backend", DZ_OPT_STR, backend,
                    "cpu|cuda|ref: what the model (and a training step) runs on (default cpu; cuda: docs/CUDA.md)"};
}

dz_opt dz_cli_gpu_math_option(const char **gpu_math) {
    return (dz_opt){"gpu-math", DZ_OPT_STR, gpu_math,
                    "tf32|bf16|fp32: --backend cuda's matrix products: TF32 or BF16 tensor cores, or full fp32 "
                    "(default tf32)"};
}

void dz_cli_gpu_math_join(const char **backend, const char *gpu_math) {
    static char joined[128]; /* one command per process */
    if (!gpu_math) return;
    snprintf(joined, sizeof joined, "%.60s:%.60s", *backend ? *backend : "cpu", gpu_math);
    *backend = joined;
}

dz_opt dz_cli_gpus_option(dz_cli_gpus *g) {
    return (dz_opt){"gpus-per-node", DZ_OPT_INT, &g->per_node,
                    "--backend cuda: GPUs per machine; each rank owns GPU (its rank on the machine) mod N "
                    "(default: the GPUs the machine shows)"};
}

dz_opt dz_cli_share_gpus_option(dz_cli_gpus *g) {
    return (dz_opt){"share-gpus", DZ_OPT_FLAG, &g->share,
                    "--backend cuda: let more ranks on a machine than GPUs share them (round robin)"};
}

static int is_cuda(const char *backend) {
    return backend && strncmp(backend, "cuda", 4) == 0 && (backend[4] == '\0' || backend[4] == ':');
}

int dz_cli_gpus_join(const char **backend, const dz_cli_gpus *g, int machine_rank, int machine_ranks) {
    static char joined[160]; /* one command per process */
    const int given = g->per_node != DZ_OPT_UNSET || g->share;
    if (given && !is_cuda(*backend))
        return dz_cli_failf("--gpus-per-node and --share-gpus apply to --backend cuda only (not %s)",
                            *backend ? *backend : "cpu");
    if (!is_cuda(*backend)) return 0;
    if (g->per_node != DZ_OPT_UNSET && g->per_node < 1)
        return dz_cli_failf("option --gpus-per-node: %d GPUs; give at least 1", g->per_node);
    const int n = g->per_node != DZ_OPT_UNSET ? g->per_node : dz_cuda_gpu_count();
    if (n == 0) return 0; /* no GPU: the backend's check says so */
    dz_error err = {0};
    int device = 0;
    if (dz_gpu_for_rank(machine_rank, machine_ranks, n, g->share, &device, &err) != DZ_OK) return dz_cli_fail(&err);
    snprintf(joined, sizeof joined, "%.120s@%d", *backend, device);
    *backend = joined;
    return 0;
}

/* A backend that cannot run here (cuda without CUDA or a GPU, an unknown name) is refused
 * at once, before the model is read. */
static int check_backend(const char *name) {
    dz_error err = {0};
    dz_backend *be = NULL;
    if (dz_backend_create(name, &be, &err) != DZ_OK) return dz_cli_fail(&err);
    dz_backend_free(be);
    return 0;
}

static int start_runtime(int threads) {
    dz_error err = {0};
    if (threads < 0 || threads > DZ_CLI_MAX_THREADS) /* 0: the default; thousands of threads only thrash */
        return dz_cli_failf("option --threads: %d is outside 0..%d (0: the default)", threads, DZ_CLI_MAX_THREADS);
    return dz_runtime_init(threads, &err) == DZ_OK ? 0 : dz_cli_fail(&err);
}

/* OpenBLAS, the reference `bench` measures distzo's GEMM against. */
static int load_blas(dz_cli_blas how) {
    dz_error err = {0};
    /* OpenBLAS's OpenMP threads would spin for milliseconds after each call, on the cores
     * the next forward or GEMM is timed on: unless the user chose, they sleep at once
     * (libgomp reads this when OpenBLAS loads; distzo's pool read its settings before) */
    const int passive = how == DZ_CLI_BLAS_PASSIVE && getenv("OMP_WAIT_POLICY") == NULL;
    if (passive) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    const dz_status st = dz_bench_reference_load(&err);
    if (passive) unsetenv("OMP_WAIT_POLICY");
    return st == DZ_OK ? 0 : dz_cli_fail(&err);
}

/* The model (dtype "f32"/"bf16"/...) and, when tok is given, its tokenizer (the override
 * path or the model's own). */
static int load_model(const dz_cli_preamble *p, dz_model **m, dz_tokenizer **tok) {
    dz_error err = {0};
    dz_dtype dt = DZ_F32;
    if (p->dtype && dz_dtype_parse(p->dtype, &dt) != 0)
        return dz_cli_failf("option --dtype: '%s' is not one of f32, bf16, f16", p->dtype);
    if (dz_model_load_flags(p->model, dt, p->keep_quantized ? DZ_LOAD_KEEP_QUANTIZED : 0, m, &err) != DZ_OK)
        return dz_cli_fail(&err);
    if (p->keep_quantized && dz_model_bytes_quantized(*m) == 0) /* an HF folder, a llama2.c file, an F32 GGUF */
        fprintf(stderr, "distzo: --keep-quantized: %s has no tensor stored quantized (or F16/BF16 in a GGUF); it is "
                        "read as without the option\n", p->model);
    if (!tok) return 0;
    *tok = NULL;
    const char *tp = p->tokenizer ? p->tokenizer : dz_model_tokenizer_path(*m);
    int rc = 0;
    if (!tp) rc = dz_cli_failf("%s: no tokenizer found beside the model; pass --tokenizer PATH", p->model);
    else if (dz_tokenizer_load(tp, dz_model_config(*m)->vocab_size, tok, &err) != DZ_OK) rc = dz_cli_fail(&err);
    const int tv = *tok ? dz_tokenizer_vocab_size(*tok) : 0, mv = dz_model_config(*m)->vocab_size;
    if (!rc && tv > mv) rc = dz_cli_failf("%s: tokenizer has %d tokens but the model's vocabulary is %d", tp, tv, mv);
    if (rc) {
        dz_tokenizer_free(*tok);
        dz_model_free(*m);
        *m = NULL;
        *tok = NULL;
    }
    return rc;
}

int dz_cli_start(const dz_cli_preamble *p, dz_model **m, dz_tokenizer **tok) {
    int rc = start_runtime(p->threads);
    if (!rc) rc = check_backend(p->backend);
    if (!rc && p->blas != DZ_CLI_NO_BLAS) rc = load_blas(p->blas);
    if (rc || !p->model) return rc;
    char buf[4200];
    const dz_cli_preamble here = {.model = dz_cli_model_arg(p->model, buf, sizeof buf, &rc), .dtype = p->dtype,
                                  .tokenizer = p->tokenizer, .keep_quantized = p->keep_quantized};
    return rc ? rc : load_model(&here, m, tok);
}

const char *dz_cli_model_arg(const char *path, char *buf, size_t cap, int *rc) {
    char probe[4200];
    *rc = 0;
    snprintf(probe, sizeof probe, "%s/run.json", path);
    if (!dz_is_dir(path) || !dz_file_exists(probe)) return path;
    snprintf(probe, sizeof probe, "%s/config.json", path);
    if (dz_file_exists(probe)) return path; /* a model folder that also holds a run.json */
    snprintf(buf, cap, "%s/best", path);
    if (!dz_is_dir(buf)) { /* the newest checkpoint, as LATEST names it, is what to suggest */
        char latest[64] = "checkpoint-N", *text = NULL;
        dz_error err = {0};
        snprintf(probe, sizeof probe, "%s/LATEST", path);
        if (dz_read_file(probe, &text, NULL, &err) == DZ_OK && strncmp(text, "checkpoint-", 11) == 0)
            snprintf(latest, sizeof latest, "%.*s", (int)strcspn(text, "\r\n"), text);
        free(text);
        *rc = dz_cli_failf("%s is a run folder with no best/ checkpoint yet: name one of its checkpoints "
                           "(%s/%s), or write the weights with `distzo export --run %s -o DIR`", path, path, latest,
                           path);
        return path;
    }
    fprintf(stderr, "distzo: %s is a run folder: using its best checkpoint, %s\n", path, buf);
    return buf;
}

const char *dz_cli_default_model(char *buf, size_t cap) {
    return dz_cli_asset("stories260K/stories260K.bin", buf, cap);
}

const char *dz_cli_assets(char *buf, size_t cap) {
    const char *env = getenv("DISTZO_ASSETS");
    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return buf;
    }
    /* ../shared/assets from the working directory (the repository root), else beside the
     * repository that holds this binary (build/distzo -> ../../shared/assets) */
    snprintf(buf, cap, "../shared/assets");
    if (dz_is_dir(buf)) return buf;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[4200];
            snprintf(cand, sizeof cand, "%s/../../shared/assets", exe);
            if (dz_is_dir(cand) && strlen(cand) < cap) memcpy(buf, cand, strlen(cand) + 1);
        }
    }
    return buf;
}

const char *dz_cli_asset(const char *rel, char *buf, size_t cap) {
    char dir[4096];
    snprintf(buf, cap, "%s/%s", dz_cli_assets(dir, sizeof dir), rel);
    return buf;
}

int dz_cli_option_given(int argc, char **argv, const char *name) {
    const size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, n) && (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
            return 1;
    return 0;
}
