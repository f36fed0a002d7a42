/* What every command shares: runtime setup, model and tokenizer loading, asset paths,
 * and the one way errors reach the user. */
#ifndef DZ_CLI_COMMON_H
#define DZ_CLI_COMMON_H

#include "cli/args.h"
#include "distzo/distzo.h"

/* Prints "distzo: error: <msg>" and returns 1 (the command's exit status). */
int dz_cli_fail(const dz_error *err);
int dz_cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Applies DISTZO_ISA (an error for an unknown or unrunnable level) and sets the thread
 * count (0 = all cores). */
enum { DZ_CLI_MAX_THREADS = 1024 };
int dz_cli_runtime(int threads);
/* Loads OpenBLAS, the reference `bench` measures distzo's GEMM against; 1 (after saying why)
 * when it cannot be loaded. */
int dz_cli_blas_reference(void);

/* The assets folder: $DISTZO_ASSETS, else ../shared/assets. Writes into buf. */
const char *dz_cli_assets(char *buf, size_t cap);
/* buf = assets/rel. */
const char *dz_cli_asset(const char *rel, char *buf, size_t cap);

/* Loads a model (dtype "f32"/"bf16"/...) and its tokenizer (override path or the model's own). */
int dz_cli_load(const char *model_path, const char *dtype, const char *tokenizer_path, int need_tokenizer,
                dz_model **m, dz_tokenizer **tok);

/* Peak resident set size of this process in bytes (VmHWM). */
size_t dz_cli_peak_rss(void);

/* Reads a task file (template, label_words, text_key, label_key); fields already set stay. */
int dz_cli_task_file(const char *path, const char **template_, const char **label_words, const char **text_key,
                     const char **label_key);

/* JSON string output with escapes. */
void dz_cli_json_string(FILE *out, const char *s);

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
