/* What every command shares: the one preamble (the command line, --threads, the runtime,
 * the assets, the model and its tokenizer) and the one way errors reach the user. */
#ifndef DZ_CLI_COMMON_H
#define DZ_CLI_COMMON_H

#include "cli/args.h"
#include "distzo/distzo.h"

/* Prints "distzo: error: <msg>" and returns 1 (the command's exit status). */
int dz_cli_fail(const dz_error *err);
int dz_cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether --name (name without the dashes) is on the command line, as --name or --name=V
 * (an option's default value cannot tell). */
int dz_cli_option_given(int argc, char **argv, const char *name);

/* Parses the command line by what the command is (cmd: its name, usage, summary and
 * positional arguments, usually a file-scope constant) and its option table: -1 to go on,
 * with pos[0..cmd->max_positional) the positional arguments (NULL where absent; pos may be
 * NULL when the command takes none), else the command's exit status (0 after --help, 2
 * after a usage error, said on stderr). */
int dz_cli_parse(const dz_cmd_spec *cmd, const dz_opt *opts, int argc, char **argv, const char **pos);

/* --threads N, the one option every command that computes takes; help NULL: the common
 * words (0 or absent: $OMP_NUM_THREADS, else all cores). */
enum { DZ_CLI_MAX_THREADS = 1024 };
dz_opt dz_cli_threads_option(int *threads, const char *help);
/* --dtype (the weights in memory) and --tokenizer (instead of the model's own),
 * which the preamble also reads; help NULL: the common words. */
dz_opt dz_cli_dtype_option(const char **dtype, const char *help);
dz_opt dz_cli_tokenizer_option(const char **tokenizer, const char *help);
/* --keep-quantized: a GGUF base held as its file stores it, dequantized layer by layer as
 * the forward reads it (read-only uses: eval, generate). */
dz_opt dz_cli_keep_quantized_option(int *keep);
/* --rng v1|v2 and --perturbation gaussian|rademacher (train, bench step and eval): *v2 and
 * *rademacher from their values; 0, or 1 after saying which value is not known. */
int dz_cli_z_parse(const char *rng, const char *perturbation, int *v2, int *rademacher);
/* --backend cpu|cuda|ref: what the forward and the ZO ops run on (NULL: cpu). */
dz_opt dz_cli_backend_option(const char **backend);
/* --gpu-math tf32|bf16|fp32: the CUDA backend's matrix products. dz_cli_gpu_math_join,
 * called after parsing, writes it into the backend's name ("cuda:fp32"), which
 * dz_backend_create (the preamble's check) refuses for a backend other than cuda or a mode
 * it does not know; NULL leaves the name as it is. */
dz_opt dz_cli_gpu_math_option(const char **gpu_math);
void dz_cli_gpu_math_join(const char **backend, const char *gpu_math);
/* --gpus-per-node N and --share-gpus (train, serve, join): the GPU this process owns, its
 * machine-local rank mod N (dz_gpu_for_rank; N absent: the GPUs the machine shows), joined
 * into the backend's name ("cuda@D", "cuda:fp32@D") after the process group is known.
 * Refused, saying why, for a backend other than cuda, and for more ranks on a machine
 * than GPUs without --share-gpus. Returns 0 or the exit status. */
typedef struct dz_cli_gpus {
    int per_node; /* --gpus-per-node: DZ_OPT_UNSET when absent, so a typed 0 is refused, not the default */
    int share;    /* --share-gpus */
} dz_cli_gpus;
#define DZ_CLI_GPUS_UNSET ((dz_cli_gpus){.per_node = DZ_OPT_UNSET})
dz_opt dz_cli_gpus_option(dz_cli_gpus *g);
dz_opt dz_cli_share_gpus_option(dz_cli_gpus *g);
int dz_cli_gpus_join(const char **backend, const dz_cli_gpus *g, int machine_rank, int machine_ranks);

/* What a command sets up before its work, in this order: the runtime (DISTZO_ISA, an
 * error for an unknown or unrunnable level; the threads), the backend's check, OpenBLAS (bench's reference),
 * the model and its tokenizer. */
typedef enum dz_cli_blas { DZ_CLI_NO_BLAS, DZ_CLI_BLAS, DZ_CLI_BLAS_PASSIVE } dz_cli_blas;
typedef struct dz_cli_preamble {
    int threads;            /* --threads: 0 the default */
    dz_cli_blas blas;       /* PASSIVE: its OpenMP threads sleep at once unless OMP_WAIT_POLICY says */
    const char *model;      /* NULL: none to load (a run folder: its best/, dz_cli_model_arg) */
    const char *dtype;      /* --dtype; NULL: f32 */
    const char *tokenizer;  /* --tokenizer; NULL: the model's own (loaded when tok is given) */
    const char *backend;    /* --backend: refused here, before any work, when it cannot run */
    int keep_quantized;     /* --keep-quantized: DZ_LOAD_KEEP_QUANTIZED */
} dz_cli_preamble;
/* Returns 0, or the exit status after saying why; *m (and *tok when tok is non-NULL: an
 * error when there is none) are the caller's to free. */
int dz_cli_start(const dz_cli_preamble *p, dz_model **m, dz_tokenizer **tok);

/* A model argument that names a run folder (run.json, no config.json) stands for its
 * best/ checkpoint: said on stderr, its path written into buf. An error (exit status in
 * *rc) when the run has no best/ yet. Anything else is returned as it is. */
const char *dz_cli_model_arg(const char *path, char *buf, size_t cap, int *rc);
/* The model a command uses when none is given: stories260K from the assets. */
const char *dz_cli_default_model(char *buf, size_t cap);

/* The assets folder: $DISTZO_ASSETS, else ../shared/assets. Writes into buf. */
const char *dz_cli_assets(char *buf, size_t cap);
/* buf = assets/rel. */
const char *dz_cli_asset(const char *rel, char *buf, size_t cap);

/* Peak resident set size of this process in bytes (VmHWM). */
static inline size_t dz_cli_peak_rss(void) { return dz_runtime_peak_rss(); }

/* Reads a task file (template, label_words, text_key, label_key, special_tokens); fields
 * already set stay. */
int dz_cli_task_file(const char *path, const char **template_, const char **label_words, const char **text_key,
                     const char **label_key, int *special_tokens);
/* A resumed or branched run keeps its prompt: each field the task file gives (and the
 * command line, in given, does not) must be the run's (run: its run.json's settings),
 * else the refusal naming the file, the field and both values. */
int dz_cli_task_file_matches_run(const char *path, const dz_train_data *run, const dz_train_data *given,
                                 const char *run_dir);

/* JSON string output with escapes. */
static inline void dz_cli_json_string(FILE *out, const char *s) { dz_write_json_string(out, s); }

int dz_cmd_info(int argc, char **argv);
int dz_cmd_generate(int argc, char **argv);
int dz_cmd_eval(int argc, char **argv);
int dz_cmd_init(int argc, char **argv);
int dz_cmd_bench(int argc, char **argv);
int dz_cmd_train(int argc, char **argv);
int dz_cmd_export(int argc, char **argv);
int dz_cmd_plot(int argc, char **argv);
int dz_cmd_plan(int argc, char **argv);
int dz_cmd_serve(int argc, char **argv);
int dz_cmd_join(int argc, char **argv);

#endif
