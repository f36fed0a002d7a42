/* The training settings `distzo train` and `distzo serve` both take: one table of options
 * (each command says in its own words what a step, a batch, a worker's data are) and one
 * place that turns their values into a dz_train_config. */
#ifndef DZ_CLI_TRAIN_OPTIONS_H
#define DZ_CLI_TRAIN_OPTIONS_H

#include "cli/args.h"
#include "distzo/distzo.h"

/* The option values that are not dz_train_config fields as they are (names, or other types). */
typedef struct dz_cli_train_values {
    const char *master, *perturbation, *rng, *schedule, *task_file;
    uint64_t seed, data_seed; /* 0..2^63-1 */
    float wd;
} dz_cli_train_values;

/* The command the options are for: their help says what a step and its data are there,
 * and only train takes MeZO's task presets. */
typedef enum dz_cli_train_command { DZ_CLI_TRAIN, DZ_CLI_SERVE } dz_cli_train_command;

enum { DZ_CLI_TRAIN_OPTS = 22 }; /* the entries dz_cli_train_options writes */

/* The adapter's options (docs/ADAPTERS.md), train's and serve's alike, bound to c: a
 * federated run's workers build the adapter its run.json names. */
#define DZ_CLI_PEFT_OPTIONS(c)                                                                                       \
    {"peft", DZ_OPT_STR, &(c)->peft.method, "none (default: every parameter), lora (a LoRA adapter) or prefix "      \
     "(prefix tuning): train an adapter over the read-only base (docs/ADAPTERS.md)"},                               \
    {"prefix-tokens", DZ_OPT_INT, &(c)->peft.prefix_tokens, "prefix: virtual tokens per layer (default 5, MeZO's), " \
     "initialized from the keys and values of real tokens drawn from the seed"},                                    \
    {"lora-rank", DZ_OPT_INT, &(c)->peft.lora_rank, "lora: r (default 8)"},                                         \
    {"lora-alpha", DZ_OPT_FLOAT, &(c)->peft.lora_alpha, "lora: the update is (alpha / r) B A (default 16)"},       \
    {"lora-targets", DZ_OPT_STR, &(c)->peft.lora_targets, "lora: modules, q,v by default (q k v o up gate down, or " \
     "q_proj k_proj v_proj o_proj up_proj gate_proj down_proj)"},                                                   \
    {"lora-dropout", DZ_OPT_FLOAT, &(c)->peft.lora_dropout, "lora: only 0 (a ZO step has no dropout)"}

/* A --lora-* or --prefix-* option among argv when the run trains no such adapter (it would
 * be ignored): 0, or the exit status after naming it. */
int dz_cli_refuse_adapter_alone(const dz_train_config *c, int argc, char **argv);

/* The defaults of the values (f32, gaussian, constant, seed 0, data seed 42, no weight decay). */
dz_cli_train_values dz_cli_train_values_default(void);
/* Writes the shared options (task, prompt, optimiser, seeds, master dtype) into out
 * (DZ_CLI_TRAIN_OPTS entries), bound to c and v. Returns the count written. The settings
 * whose 0 stands for a default (--seq: the model's maximum) are set to DZ_OPT_UNSET:
 * dz_cli_train_given, right after the command line is parsed, refuses a given 0 and sets
 * the rest to 0. */
int dz_cli_train_options(dz_opt *out, dz_train_config *c, dz_cli_train_values *v, dz_cli_train_command cmd);
/* Returns 0, or the exit status after saying which option is out of range. */
int dz_cli_train_given(dz_train_config *c);
/* v into c: the task file read, names to enums (an unknown one is an error naming its
 * option), the default label words, seeds and weight decay. Then the model (model_path, default the assets' stories260K) and
 * tokenizer as absolute paths (run.json keeps them). Returns 0, or the exit status. */
int dz_cli_train_apply(dz_train_config *c, const dz_cli_train_values *v, dz_cli_train_command cmd,
                       const char *model_path);

/* The task options as the command line alone gave them: dz_train_config.data right after
 * parsing (before run.json or --config fill it in; DZ_OPT_UNSET where not given), and
 * whether --no-share-prompt and --task-file were there. */
typedef struct dz_cli_train_cmdline {
    dz_train_data data;
    int no_share;
    const char *task_file;
} dz_cli_train_cmdline;
/* An option the task cannot honour is refused, never ignored: --task-file, --template,
 * --label-words (sst2 and classify only), --text-key, --label-key (classify), --seq (lm),
 * --gen-tokens (squad, drop), --no-share-prompt (classification). Counted: what cmdline
 * gave, and for a new run (not resume) what c holds from --task-file and --config; a
 * resumed run's own settings (run.json) never are. Call after the settings are resolved
 * (c's task known, share_prompts set). Returns 0, or the exit status after naming the
 * option, where it came from and the task. */
int dz_cli_train_refuse_unused(const dz_train_config *c, const dz_cli_train_cmdline *cmdline, const char *task_file,
                               const char *config, int resume);

#endif
