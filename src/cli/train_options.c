#include "cli/train_options.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"

dz_cli_train_values dz_cli_train_values_default(void) {
    return (dz_cli_train_values){.master = "f32", .perturbation = "gaussian", .rng = "v1", .schedule = "constant", .data_seed = 42};
}

/* The help lines that differ, by command: train's, then serve's. */
enum { H_TASK, H_BATCH, H_STEPS, H_Q, H_WARMUP, H_DATA_SEED, H_TRAIN_EXAMPLES, H_MASTER, N_HELP };
static const char *const help[N_HELP][2] = {
    [H_TASK] = {"sst2 (tsv), classify (jsonl), lm (text; jsonl text or prompt/completion), or a MeZO preset: rte, cb, "
                "boolq, wsc, wic, multirc, copa, record (SuperGLUE jsonl), squad, drop (docs/TASKS.md)",
                "sst2 (tsv), classify (jsonl) or lm: what the workers' data holds"},
    [H_BATCH] = {"examples per step (default 16)", "examples per slot, from the worker's own data (default 16)"},
    [H_STEPS] = {"steps (default 4000)", "rounds (default 1000)"},
    [H_Q] = {"perturbations averaged per step (default 1)",
             "slots per round, 1..64: the most contributions a round takes (default 4)"},
    [H_WARMUP] = {"linear warmup steps (default 0)", "linear warmup rounds (default 0)"},
    [H_DATA_SEED] = {"seed of the example draw and order (default 42)",
                     "seed of each worker's example draw and order (default 42)"},
    [H_TRAIN_EXAMPLES] = {"training examples drawn (default 1000)", "examples each worker draws from its file (default 1000)"},
    [H_MASTER] = {"master weights: f32 (default) or bf16 (stochastic rounding)", "master weights: f32 (default) or bf16"},
};

int dz_cli_train_options(dz_opt *out, dz_train_config *c, dz_cli_train_values *v, dz_cli_train_command cmd) {
    const int k = cmd == DZ_CLI_SERVE;
    const dz_opt opts[DZ_CLI_TRAIN_OPTS] = {
        {"task", DZ_OPT_STR, &c->data.task, help[H_TASK][k]},
        {"seq", DZ_OPT_INT, &c->data.lm_seq, "lm: tokens per training window (default: the model's maximum)"},
        {"template", DZ_OPT_STR, &c->data.template_, "prompt template with {text} (default \"" DZ_DEFAULT_TEMPLATE "\")"},
        {"label-words", DZ_OPT_STR, &c->data.label_words,
         "comma-separated label words (default " DZ_DEFAULT_LABEL_WORDS ", MeZO's)"},
        {"special-tokens", DZ_OPT_FLAG, &c->data.special_tokens,
         "special tokens written in --template (<|im_start|>) are their ids, as Hugging Face reads them "
         "(default: plain text)"},
        {"task-file", DZ_OPT_STR, &v->task_file, "JSON with template, label_words, text_key, label_key, special_tokens"},
        {"text-key", DZ_OPT_STR, &c->data.text_key, "jsonl text key (default text)"},
        {"label-key", DZ_OPT_STR, &c->data.label_key, "jsonl label key (default label)"},
        {"lr", DZ_OPT_FLOAT, &c->optim.lr, "learning rate (default 3e-5)"},
        {"eps", DZ_OPT_FLOAT, &c->optim.eps, "perturbation scale (default 1e-3)"},
        {"weight-decay", DZ_OPT_FLOAT, &v->wd, "weight decay, not on biases and norms (default 0)"},
        {"batch", DZ_OPT_INT, &c->optim.batch, help[H_BATCH][k]},
        {"steps", DZ_OPT_INT, &c->optim.steps, help[H_STEPS][k]},
        {"spsa-samples", DZ_OPT_INT, &c->optim.q, help[H_Q][k]},
        {"perturbation", DZ_OPT_STR, &v->perturbation, "gaussian (default) or rademacher"},
        {"rng", DZ_OPT_STR, &v->rng, "z's generator: v1 (default) or v2, cheaper and provisional (docs/ZO_RNG.md 10)"},
        {"schedule", DZ_OPT_STR, &v->schedule, "lr schedule: constant (default), linear, cosine"},
        {"warmup", DZ_OPT_INT, &c->optim.warmup, help[H_WARMUP][k]},
        {"seed", DZ_OPT_SEED, &v->seed, "run seed: the perturbations (default 0)"},
        {"data-seed", DZ_OPT_SEED, &v->data_seed, help[H_DATA_SEED][k]},
        {"train-examples", DZ_OPT_INT, &c->data.train_examples, help[H_TRAIN_EXAMPLES][k]},
        {"master-dtype", DZ_OPT_STR, &v->master, help[H_MASTER][k]},
    };
    memcpy(out, opts, sizeof opts);
    c->data.lm_seq = DZ_OPT_UNSET;
    return DZ_CLI_TRAIN_OPTS;
}

int dz_cli_train_given(dz_train_config *c) {
    if (c->data.lm_seq == DZ_OPT_UNSET) c->data.lm_seq = 0; /* run.json's "the model's maximum" */
    else if (c->data.lm_seq < 2) return dz_cli_failf("option --seq: %d tokens; a window needs at least 2", c->data.lm_seq);
    return 0;
}

int dz_cli_train_apply(dz_train_config *c, const dz_cli_train_values *v, dz_cli_train_command cmd,
                       const char *model_path) {
    const int presets = cmd == DZ_CLI_TRAIN; /* a federated run's workers take sst2, classify and lm */
    static char model_buf[4096], abs_model[PATH_MAX], abs_tok[PATH_MAX];
    dz_train_data *d = &c->data;
    int rc;
    if (v->task_file && (rc = dz_cli_task_file(v->task_file, &d->template_, &d->label_words, &d->text_key,
                                               &d->label_key, &d->special_tokens)))
        return rc;
    const int preset = presets && dz_task_preset_find(d->task) != NULL;
    /* written into run.json, so a checkpoint's eval and a resume use the words the run used */
    if (!d->label_words && strcmp(d->task, "lm") && !preset) d->label_words = DZ_DEFAULT_LABEL_WORDS;
    if (dz_dtype_parse(v->master, &c->store.master_dtype) != 0 || c->store.master_dtype == DZ_F16)
        return dz_cli_failf("option --master-dtype: '%s' is not f32 or bf16", v->master);
    if ((rc = dz_cli_z_parse(v->rng, v->perturbation, &c->optim.rng_v2, &c->optim.rademacher))) return rc;
    if (!strcmp(v->schedule, "constant")) c->optim.lr_schedule = DZ_LR_CONSTANT;
    else if (!strcmp(v->schedule, "linear")) c->optim.lr_schedule = DZ_LR_LINEAR;
    else if (!strcmp(v->schedule, "cosine")) c->optim.lr_schedule = DZ_LR_COSINE;
    else return dz_cli_failf("option --schedule: '%s' is not constant, linear or cosine", v->schedule);
    if (strcmp(d->task, "sst2") && strcmp(d->task, "classify") && strcmp(d->task, "lm") && !preset)
        return dz_cli_failf("option --task: '%s' is not sst2, classify, lm%s", d->task,
                            presets ? " or a preset (rte, cb, boolq, wsc, wic, multirc, copa, record, squad, drop)"
                                    : " (the tasks a federated run takes)");
    c->optim.wd = v->wd, c->optim.seed = v->seed, d->seed = v->data_seed;
    c->model = model_path ? model_path : dz_cli_default_model(model_buf, sizeof model_buf);
    if (realpath(c->model, abs_model)) c->model = abs_model;
    if (c->tokenizer && realpath(c->tokenizer, abs_tok)) c->tokenizer = abs_tok;
    return 0;
}

int dz_cli_refuse_adapter_alone(const dz_train_config *c, int argc, char **argv) {
    const char *m = c->peft.method && strcmp(c->peft.method, "none") ? c->peft.method : NULL;
    static const char *const kinds[][2] = {{"--lora-", "lora"}, {"--prefix-", "prefix"}};
    for (int i = 1; i < argc; i++)
        for (int k = 0; k < 2; k++) {
            if (strncmp(argv[i], kinds[k][0], strlen(kinds[k][0])) || (m && !strcmp(m, kinds[k][1]))) continue;
            if (m && strcmp(m, "lora") && strcmp(m, "prefix")) return 0; /* refused by the settings check */
            return dz_cli_failf("option %.*s: the run trains %s (give --peft %s for that adapter)",
                                (int)strcspn(argv[i], "="), argv[i], m ? m : "every parameter", kinds[k][1]);
        }
    return 0;
}
