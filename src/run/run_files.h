/* The run folder's files: run.json, the settings (run_json.c); the lock, checkpoint-N/
 * folders with CHECKPOINTS and LATEST, best/ (checkpoint_files.c). */
#ifndef DZ_RUN_RUN_FILES_H
#define DZ_RUN_RUN_FILES_H

#include "distzo/model.h"
#include "distzo/setup.h"
#include "distzo/tokenizer.h"
#include "distzo/train.h"

/* dz_train_config_check without its warnings (a resume checks run.json's own values first,
 * then the merged settings, which warn once). */
dz_status dz_train_config_check_quiet(const dz_train_config *c, dz_error *err);
/* A resume raising a linear or cosine run's steps to steps stretches its schedule (it spans
 * --steps): said, with the lr at the old last step under each, as a warning. */
void dz_run_warn_schedule_stretched(const char *run_dir, const dz_train_optim *o, int steps);

/* run.json: every setting of cfg, written atomically. Strings in the loaded config point
 * into *strings (free it after use). */
dz_status dz_run_config_write(const char *run_dir, const dz_train_config *cfg, dz_error *err);
dz_status dz_run_config_read(const char *run_dir, dz_train_config *cfg, char **strings, dz_error *err);
/* The same from run.json's text (len bytes; path names it in errors): a federated worker
 * gets its run's settings from the coordinator (src/federated). */
dz_status dz_run_config_parse(const char *text, size_t len, const char *path, dz_train_config *cfg, char **strings,
                              dz_error *err);
/* A settings file (train --config): a JSON object applied over cfg (not reset first).
 * Each key is run.json's (so a run's own run.json restarts it) or the train option's name
 * without "--" ("lr", "weight-decay", "perturbation": "rademacher", "no-fuse": true); every
 * key is optional. Keys in caller_keys (NULL-terminated; NULL: none) are skipped, left to
 * the caller (the command line's own options); any other key is refused (DZ_ERR_FORMAT
 * naming path and key), as is a value of the wrong type. Strings point into *strings. */
dz_status dz_run_config_apply(const char *path, dz_train_config *cfg, const char *const *caller_keys, char **strings,
                              dz_error *err);
/* 1 when dz_run_config_apply takes key as a setting. */
int dz_run_config_has_key(const char *key);
/* Resume: `given` (the command line over run.json's settings) against `run` (run.json's).
 * A setting that defines the run must be equal (DZ_ERR_INVALID naming its option and both
 * values); steps may only be raised; housekeeping (store placement, checkpoint cadence and
 * count, log sync) may change. Changes are copied into run, and *changed says whether
 * run.json needs rewriting. */
dz_status dz_run_config_resume(const char *run_dir, dz_train_config *run, const dz_train_config *given,
                               int *changed, dz_error *err);
/* A resume whose command line's other settings are its defaults, not run.json's (serve
 * --resume): each setting that defines the run and whose option is among args[0..n) (as
 * "--lr" or "--lr=...") must equal run's, else DZ_ERR_INVALID as dz_run_config_resume says. */
dz_status dz_run_config_check_given(const char *run_dir, const dz_train_config *run, const dz_train_config *given,
                                    char *const *args, int n, dz_error *err);

/* train --resume-from: `given`, a new run's settings, against `old`, those of the run
 * whose seed log it continues. Only how later steps are taken may differ (lr, schedule,
 * warmup, steps, max_bad_steps, eval_every, housekeeping); else DZ_ERR_INVALID naming
 * the option and both values. */
dz_status dz_run_config_branch(const char *old_dir, const dz_train_config *old, const dz_train_config *given,
                               dz_error *err);

/* The run folder's exclusive lock (run_dir/.lock, flock): one distzo run writes a folder
 * at a time, taken before the first write. unlock closes it; a fresh start that failed
 * before run.json removes the lock file it created (remove_lock) and the folder it made
 * (remove_folder, only if then empty), leaving the folder as it was. Locked, the folder's
 * unfinished checkpoint writes are removed (dz_run_clean_temporaries). */
dz_status dz_run_lock(const char *run_dir, int *fd, dz_error *err);
/* Removes what an unfinished checkpoint write left (.tmp-checkpoint-N/, .tmp-best/; an
 * .old-best/ becomes best/ again when best/ is missing): dz_run_lock does it once the
 * folder is ours, and a failed write removes its own. */
dz_status dz_run_clean_temporaries(const char *run_dir, dz_error *err);
void dz_run_unlock(const char *run_dir, int fd, int remove_lock, int remove_folder);

/* Writes run_dir/checkpoint-<steps_done>/ (HF layout: config.json, model.safetensors,
 * tokenizer files, trainer_state.json) through a temporary folder and a rename, then
 * points run_dir/LATEST at it and keeps the newest `keep` numbered checkpoints this run
 * wrote (listed in run_dir/CHECKPOINTS; nothing else in the folder is ever removed).
 * name = "checkpoint" or "best" (best/ is replaced, not numbered; keep is unused). */
dz_status dz_checkpoint_write(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                              const dz_tokenizer *tok, const char *state_json, const char *weights_file, int keep,
                              dz_error *err);
/* The same with one more file of the run's state (HiZOO's curvature): extra->write(ctx,
 * dir) writes it into the temporary folder dir before the rename (extra NULL: none). */
typedef struct dz_checkpoint_extra {
    dz_status (*write)(void *ctx, const char *dir, dz_error *err);
    void *ctx;
} dz_checkpoint_extra;
dz_status dz_checkpoint_write_extra(const char *run_dir, const char *name, int steps_done, const dz_model *m,
                                    const dz_tokenizer *tok, const char *state_json, const char *weights_file,
                                    int keep, const dz_checkpoint_extra *extra, dz_error *err);
/* The newest complete checkpoint: its folder in path (cap bytes) and steps_done; returns
 * DZ_ERR_NOT_FOUND when the run has none (*steps_done 0: resume starts from the base model),
 * or when LATEST names one that is gone or has no trainer_state.json (*steps_done its N,
 * path its folder, said in err: resume rebuilds it from the base model and the seed log). */
dz_status dz_checkpoint_latest(const char *run_dir, char *path, size_t cap, int *steps_done, dz_error *err);

/* export.c: weights (a model or a checkpoint) as a run with settings c holds them, with
 * an engine that only applies updates (no forward batches): export's replay, and resume's
 * check of a checkpoint's checksum. store: NULL or a --store spec. Free *out with
 * dz_setup_free, also on failure. */
dz_status dz_run_weights_alone(const dz_train_config *c, const char *weights, const char *store, dz_zo_setup **out,
                               dz_error *err);

/* How far the run's own files say it got: the step of LATEST's checkpoint and of
 * metrics.jsonl's last row (0 where there is none), for a seed log to be checked against. */
typedef struct dz_run_reached {
    int64_t checkpoint, metrics;
} dz_run_reached;
dz_status dz_run_reached_read(const char *run_dir, dz_run_reached *r, dz_error *err);

#endif
