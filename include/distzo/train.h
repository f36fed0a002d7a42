/* distzo train: MeZO-style ZO fine-tuning for prompt classification, with a run folder
 * that survives crashes (seed log, metrics, checkpoints) and exact resume. */
#ifndef DISTZO_TRAIN_H
#define DISTZO_TRAIN_H

#include <stdint.h>

#include "distzo/dtype.h"
#include "distzo/error.h"
#include "distzo/parallel.h"
#include "distzo/task.h"
#include "distzo/zo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a run learns from: the task, its files and how examples are drawn. */
typedef struct dz_train_data {
    const char *task;         /* "sst2" (tsv), "classify" (jsonl), "lm" (text, or jsonl text / prompt+completion),
                               * or a preset (dz_task_preset_find: "rte", "copa", "squad", ...) */
    const char *train;        /* training pool: train_examples + dev_examples are drawn from it */
    const char *test;         /* reported accuracy (GLUE dev for SST-2); NULL: none */
    const char *template_, *label_words, *text_key, *label_key; /* NULL: SST-2 defaults */
    int special_tokens;       /* classification: special tokens in the template are their ids (dz_prompt_spec) */
    int train_examples, dev_examples;
    uint64_t seed;            /* the example draw and the order of every epoch */
    int lm_seq;               /* LM: tokens per training window (0: the model's maximum) */
    int share_prompts;        /* classification: each example's prompt computed once for all its candidates */
    /* What a step minimises: NULL or "ce" (cross-entropy over the candidates; token NLL of
     * the answer for generation), "accuracy" (minus the batch's accuracy) or "f1" (minus
     * the greedy answers' F1; generation tasks): a ZO step needs only a number. */
    const char *objective;
    int demos;                /* MeZO's ICL: demonstrations drawn from the training pool before each prompt */
    int gen_tokens;           /* generation: most answer tokens (0: 50) */
    /* Examples the caller holds (Python's lists, DataFrames) instead of the train / test
     * files: read in place, never written to a file. run.json keeps their fingerprints (a
     * hash of every row, set by dz_train) in place of paths, and a resume must be given
     * data with the same fingerprint. A generation task's rows need a prompt and gold
     * answers: the first answer is the training target, as the preset's file gives it.
     * NULL: the files. */
    const dz_dataset *train_set, *test_set;
    const char *train_fingerprint, *test_fingerprint; /* run.json's (16 hex digits); NULL: data from files */
} dz_train_data;

/* The ZO optimizer: MeZO's SPSA step and its learning rate. */
typedef struct dz_train_optim {
    float lr, eps, wd;
    int batch, steps;
    int q;                    /* SPSA samples per step */
    int warmup;
    dz_lr_schedule lr_schedule;
    int rademacher, fuse;     /* Rademacher +-1 instead of Gaussian z; updates fused into the next step */
    uint64_t seed;            /* run seed: the perturbations */
    int max_bad_steps;        /* stop after this many non-finite losses in a row */
    dz_zo_estimator estimator; /* MeZO (default), Sparse-MeZO, LOZO, FZOO or HiZOO (distzo/zo.h) */
    float sparse_density;     /* sparse: fraction of each row perturbed */
    int lozo_rank, lozo_nu;   /* lozo: rank of U V^T, steps between refreshes of V */
    float hizoo_smooth;       /* hizoo: the curvature's EMA weight alpha */
    int hizoo_rank;           /* hizoo: 0 diagonal H, 1 HiZOO-L (2-D tensors' H in rank-1 factors) */
    int rng_v2;               /* --rng v2: ZO_RNG v2 (docs/ZO_RNG.md section 10); 0: v1 */
    int fzoo_directions;      /* fzoo: one-sided directions per step; q must equal it, rademacher be 1 */
} dz_train_optim;

/* The engine's parameters for the run's optimizer settings. */
dz_zo_params dz_train_zo_params(const dz_train_optim *o);

/* Where the master weights live. */
typedef struct dz_train_store {
    dz_dtype master_dtype;    /* F32 or BF16 */
    const char *spec;         /* NULL or "ram": in memory; "disk:PATH": layer masters in a file */
    int max_resident_mb;      /* with a disk store: refuse to start above this many MB resident (0: no cap) */
    int stream_globals;       /* with a disk store: the global block stays in it too (also chosen when the cap
                               * needs it) */
} dz_train_store;

/* What happens between steps, every so many steps (0: never; evaluation 0: at the end). */
typedef struct dz_train_schedule {
    int eval_every, eval_batch; /* eval_batch: sequences per evaluation forward */
    int checkpoint_every;
    int keep_checkpoints;     /* numbered checkpoints kept (Hugging Face's save_total_limit; default 1) */
    int log_sync_every;       /* fsync the seed log and metrics every this many steps */
} dz_train_schedule;

/* The parallel layout (src/parallel): never saved in run.json, so a run resumes under any
 * layout. */
typedef struct dz_train_layout {
    dz_comm *comm;            /* NULL: one process */
    int pertp, dp;            /* perturbation x data parallelism; 0: derived (all ranks data-parallel) */
    int verify_every;         /* compare replica checksums across nodes every this many steps (0: never) */
    const char *backend;      /* --backend: what the forward and the ZO ops run on (NULL: cpu); the ZO ops give
                                 every backend's bits, so a run resumes on any */
    int max_device_mb;        /* --max-device-memory: a device backend's cap (0: none); above it the layer masters
                                 stream from host memory, the same bits (so a run resumes under any cap) */
} dz_train_layout;

/* Parameter-efficient fine-tuning (docs/ADAPTERS.md): which parameters the run trains. */
typedef struct dz_train_peft {
    const char *method;       /* NULL or "none": every parameter; "lora": a LoRA adapter over the read-only base;
                               * "prefix": prefix tuning (N virtual keys and values per layer) over it */
    int lora_rank;            /* r (default 8) */
    float lora_alpha;         /* the update is (alpha / r) B A (default 16) */
    const char *lora_targets; /* module names, "q,v" by default (q k v o up gate down, or HF's q_proj ...) */
    float lora_dropout;       /* only 0: a ZO step has no dropout */
    const char *lora_init;    /* a PEFT folder the adapter starts from (NULL: PEFT's/MeZO's init from the seed) */
    const char *lora_init_fingerprint; /* lora_init's adapter_model.safetensors when the run began (run.json; set by
                               * train): a replay from lora_init refuses a changed file */
    int prefix_tokens;        /* prefix: virtual tokens per layer (default 5, MeZO's) */
    int keep_quantized;       /* the base's GGUF blocks stay quantized (DZ_LOAD_KEEP_QUANTIZED): the same bits, in
                               * about the file's memory; not in run.json (a resume may change it) */
} dz_train_peft;

typedef struct dz_train_config {
    const char *model;        /* HF folder or llama2.c .bin */
    const char *tokenizer;    /* NULL: the model's own */
    const char *out_dir;      /* the run folder */
    dz_train_data data;
    dz_train_optim optim;
    dz_train_store store;
    dz_train_schedule schedule;
    dz_train_layout layout;
    dz_train_peft peft;
    const char *model_table;  /* the base model's tensor names and shapes, hashed (run.json; set by train): export
                               * and resume refuse a base of another architecture */
} dz_train_config;

/* MeZO's defaults: eps 1e-3, batch 16, constant lr, 1000 train / 500 dev examples. */
void dz_train_config_default(dz_train_config *c);
/* The settings on their own, before anything is read or written: counts positive and
 * without overflow, lr and weight decay finite and not negative, eps positive (a warning
 * when it is so small that L+ - L- is mostly float rounding), known task and schedule.
 * DZ_ERR_INVALID naming the option. */
dz_status dz_train_config_check(const dz_train_config *c, dz_error *err);

typedef struct dz_train_progress {
    int step, steps;          /* steps done, total; step 0 (has_eval, no loss): the evaluation before training */
    double loss, g, lr, seconds;
    int steps_run;            /* training steps this process ran (a resume's replayed ones not counted) */
    double steps_per_s;       /* their rate, evaluations and checkpoints left out (0: none yet) */
    int has_eval;             /* scores: accuracy, or minus the mean NLL for LM (higher is better) */
    double dev_accuracy, test_accuracy, best_dev_accuracy;
    int replayed;             /* steps replayed from the log on resume (first callback) */
    int lm;                   /* the scores are minus mean NLLs */
} dz_train_progress;

typedef void (*dz_train_progress_cb)(const dz_train_progress *p, void *user);

typedef struct dz_train_result {
    int steps_done;
    double zero_shot_dev, zero_shot_test;
    double final_dev, final_test, best_dev, best_test;
    int best_step;            /* 0: the model before training */
    double seconds;
    int steps_run;            /* training steps this process ran, in step_seconds (evaluations left out) */
    double step_seconds;
    int lm;                   /* the scores are minus mean NLLs */
    double step_bytes;        /* payload this rank sent per training step (0 in one process) */
    int was_finished;         /* a resume found every step already done (--steps extends a run) */
    int interrupted;          /* dz_train_request_stop: stopped after steps_done of the run's steps */
} dz_train_result;

/* Asks the dz_train running in this process to stop before its next step, as a SIGINT
 * handler would: the steps done stay in the run folder as after a kill, the seed log and
 * metrics closed, and dz_train returns DZ_OK with res->interrupted; --resume continues.
 * Async-signal-safe. With several ranks every rank must see it at the same step: the caller's
 * to arrange (the command line stops a one-process run only). */
void dz_train_request_stop(void);

/* The engine's view of a batch dz_class_batch_fill made (classification or LM): a tree
 * batch when its candidates continue shared prompts. It is one example for the loss
 * (n_examples 0); a data-parallel caller sets n_examples, example0 and n_global. */
dz_zo_batch dz_class_batch_zo(const dz_class_batch *bb, dz_zo_loss_fn loss, void *user);

/* Runs (or, with resume, continues) the run in cfg->out_dir. On resume cfg must hold the
 * run's own settings (dz_train_config_load) except: steps may be raised, and the store's
 * placement, checkpoint cadence and count and the log's sync may change (run.json is then
 * rewritten); any other difference is refused with DZ_ERR_INVALID naming the option. The
 * layout (cfg->layout) is always the caller's: a run resumes under any layout. */
dz_status dz_train(const dz_train_config *cfg, int resume, dz_train_progress_cb cb, void *user,
                   dz_train_result *res, dz_error *err);

/* A new run in cfg->out_dir (which must not hold one) that continues the run in old_run
 * from step `step` of its seed log (train --resume-from OLD:N): its first `step` records
 * and metrics rows are copied, replayed onto the base model, and training goes on with
 * cfg's settings. cfg must equal old_run's run.json except for how later steps are taken
 * (lr, schedule, warmup, steps, max_bad_steps, eval_every, housekeeping); any other
 * difference is refused naming the option. Collective like dz_train. */
dz_status dz_train_branch(const char *old_run, int step, const dz_train_config *cfg, dz_train_progress_cb cb,
                          void *user, dz_train_result *res, dz_error *err);

/* The settings of the run in run_dir (its run.json) into c; c's strings point into
 * *strings, which the caller frees. What a resume starts from: set c->out_dir (run.json
 * does not name its own folder) and the layout, then dz_train(c, 1, ...). Fields the library
 * computes from the run's files (model_table, the data's and the adapter's fingerprints)
 * may be left NULL in a resume's config: the run's stand. */
dz_status dz_train_config_load(const char *run_dir, dz_train_config *c, char **strings, dz_error *err);
/* train --config FILE: a JSON object of settings over c, through run.json's own field
 * table: each key is run.json's (a run's run.json restarts it) or the train option's name
 * without "--" ({"lr": 1e-5, "steps": 100, "perturbation": "rademacher", "no-fuse": true}).
 * Keys in caller_keys (NULL-terminated) are left to the caller; any other unknown key, or
 * a value of the wrong type, is refused naming path and key. c's strings point into
 * *strings, which the caller frees. */
dz_status dz_train_config_load_file(const char *path, dz_train_config *c, const char *const *caller_keys,
                                    char **strings, dz_error *err);
/* 1 when dz_train_config_load_file takes key as a setting (else it is the caller's). */
int dz_train_config_has_key(const char *key);
/* A --data folder as train reads it, one rule for the command line and the Python package:
 * a MeZO preset's release file names (the task's dz_task_preset train_file / test_file),
 * else train.tsv and dev.tsv (sst2) or train.jsonl and dev.jsonl (other tasks). train and
 * test (cap bytes each) receive the paths; test is "" when the folder has no such file.
 * DZ_ERR_INVALID when folder is no directory or a path does not fit. */
dz_status dz_train_data_folder(const char *task, const char *folder, char *train, char *test, size_t cap,
                               dz_error *err);
/* For a resume whose other settings are the command's defaults (serve --resume): each
 * setting of run_dir's run.json that defines the run and whose option is among args[0..n)
 * ("--lr", "--lr=...") must equal given's, else DZ_ERR_INVALID naming the option and both
 * values. A folder without a readable run.json is left to the resume to report. */
dz_status dz_train_config_check_given(const char *run_dir, const dz_train_config *given, char *const *args, int n,
                                      dz_error *err);

/* Replays the seed log of run_dir onto the base model of its run.json (or base, if
 * given) and writes the trained weights to out_dir in HF layout. With store_spec
 * "disk:PATH" the layers stream through a store file instead of memory. */
dz_status dz_export(const char *run_dir, const char *base, const char *out_dir, const char *store_spec,
                    dz_error *err);

typedef enum dz_export_format { DZ_EXPORT_HF = 0, DZ_EXPORT_GGUF } dz_export_format;

typedef struct dz_export_spec {
    const char *run_dir;      /* a run folder whose seed log is replayed; NULL: model as it is */
    const char *model;        /* the weights (default with run_dir: the run's base model) */
    const char *out;          /* HF: a folder; GGUF: a file (written atomically) */
    const char *store;        /* with run_dir: NULL, "disk:PATH" or "disk-nocache:PATH" */
    dz_export_format format;
    const char *gguf_type;    /* GGUF matrices: "f32", "f16" (NULL), "bf16" or "q8_0"; norms stay f32 */
    int allow_short_log;      /* export a seed log that ends before the run's LATEST or metrics (else refused) */
    int merge;                /* a LoRA run: the base with the adapter merged in (else the PEFT adapter folder) */
} dz_export_spec;

/* dz_export generalized: a run's trained weights or a model (any format dz_model_load reads)
 * written as an HF folder or a llama.cpp GGUF file (llama metadata, tokenizer.ggml.*,
 * llama.cpp's tensor names and Q/K row order). GGUF refuses architectures llama.cpp has
 * no counterpart for (OPT), naming them. The tokenizer is the run's, else the model's. */
dz_status dz_export_model(const dz_export_spec *spec, dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
