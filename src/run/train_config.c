/* dz_train_config's defaults: MeZO's settings (run.json, read back by run_json.c, starts
 * from them too), the check of settings on their own, and a run's settings loaded for a resume. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/data.h"
#include "distzo/log.h"
#include "distzo/train.h"
#include "core/util.h"
#include "run/peft.h"
#include "run/run_files.h"
#include "run/seedlog.h"

void dz_train_config_default(dz_train_config *c) {
    *c = (dz_train_config){
        .data = {.task = "sst2", .train_examples = 1000, .dev_examples = 500, .seed = 42, .share_prompts = 1},
        .optim = {.lr = 1e-5f, .eps = 1e-3f, .batch = 16, .steps = 4000, .q = 1, .fuse = 1,
                  .lr_schedule = DZ_LR_CONSTANT, .seed = 0, .max_bad_steps = 5, .estimator = DZ_ZO_MEZO,
                  .sparse_density = 0.25f, .lozo_rank = 2, .lozo_nu = 50,
                  .fzoo_directions = DZ_ZO_FZOO_DEFAULT_DIRECTIONS, .hizoo_smooth = 1e-6f},
        .store = {.master_dtype = DZ_F32},
        .schedule = {.eval_every = 500, .eval_batch = 64, .checkpoint_every = 1000, .keep_checkpoints = 1,
                     .log_sync_every = DZ_SEEDLOG_SYNC_EVERY_DEFAULT},
        .peft = {.lora_rank = 8, .lora_alpha = 16.0f, .lora_targets = "q,v", .prefix_tokens = 5},
    };
}

dz_zo_params dz_train_zo_params(const dz_train_optim *o) {
    return (dz_zo_params){.seed = o->seed, .eps = o->eps, .q = o->q, .rademacher = o->rademacher, .wd = o->wd,
                          .fuse = o->fuse, .estimator = o->estimator, .sparse_density = o->sparse_density,
                          .lozo_rank = o->lozo_rank, .lozo_nu = o->lozo_nu, .hizoo_smooth = o->hizoo_smooth,
                          .hizoo_rank = o->hizoo_rank,
                          .rng_v2 = o->rng_v2};
}

/* An estimator's own setting in a run of another would be ignored (the command line says so
 * itself; a --config file or a library caller's settings get this): refused unless it is
 * the default, which run.json always holds. */
static dz_status estimator_knobs_check(const dz_train_optim *o, dz_error *err) {
    dz_train_config d;
    dz_train_config_default(&d);
    const struct { const char *option, *name; dz_zo_estimator owner; int set; double value; } knobs[] = {
        {"--sparse-density", "sparse", DZ_ZO_SPARSE, o->sparse_density != d.optim.sparse_density, o->sparse_density},
        {"--lozo-rank", "lozo", DZ_ZO_LOZO, o->lozo_rank != d.optim.lozo_rank, o->lozo_rank},
        {"--lozo-nu", "lozo", DZ_ZO_LOZO, o->lozo_nu != d.optim.lozo_nu, o->lozo_nu},
        {"--hizoo-smooth", "hizoo", DZ_ZO_HIZOO, o->hizoo_smooth != d.optim.hizoo_smooth, o->hizoo_smooth},
    };
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++)
        if (knobs[k].set && o->estimator != knobs[k].owner)
            return dz_fail(err, DZ_ERR_INVALID, "%s %g without --estimator %s: it would be ignored (leave it at its "
                           "default)", knobs[k].option, knobs[k].value, knobs[k].name);
    return DZ_OK;
}

/* FZOO's settings: its directions are the step's samples (q), always Rademacher. */
static dz_status fzoo_check(const dz_train_config *c, dz_error *err) {
    const dz_train_optim *o = &c->optim;
    if (o->estimator != DZ_ZO_FZOO && o->fzoo_directions != DZ_ZO_FZOO_DEFAULT_DIRECTIONS)
        return dz_fail(err, DZ_ERR_INVALID, "--fzoo-directions %d without --estimator fzoo: it would be ignored (and a "
                       "run.json does not keep it)", o->fzoo_directions);
    if (o->estimator != DZ_ZO_FZOO) return DZ_OK;
    if (o->fzoo_directions < 2 || o->fzoo_directions > DZ_ZO_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "--fzoo-directions %d is outside 2..%d (sigma is the standard deviation of "
                       "the directions' losses)", o->fzoo_directions, DZ_ZO_MAX_Q);
    if (o->q != o->fzoo_directions)
        return dz_fail(err, DZ_ERR_INVALID, "--spsa-samples %d with --estimator fzoo: a step's samples are its "
                       "--fzoo-directions (%d); the command line sets them, a config gives spsa_samples equal to "
                       "fzoo_directions", o->q, o->fzoo_directions);
    if (!o->rademacher)
        return dz_fail(err, DZ_ERR_INVALID, "--perturbation gaussian with --estimator fzoo: FZOO's directions are "
                       "Rademacher; the command line sets it, a config gives perturbation rademacher");
    return DZ_OK;
}

static dz_status check(const dz_train_config *c, int warn, dz_error *err);

dz_status dz_train_config_check(const dz_train_config *c, dz_error *err) { return check(c, 1, err); }

dz_status dz_train_config_check_quiet(const dz_train_config *c, dz_error *err) { return check(c, 0, err); }

static dz_status check(const dz_train_config *c, int warn, dz_error *err) {
    const dz_train_optim *o = &c->optim;
    dz_status st;
    const dz_train_data *d = &c->data;
    if (o->steps < 1) return dz_fail(err, DZ_ERR_INVALID, "--steps %d: train at least 1 step", o->steps);
    if (o->batch < 1) return dz_fail(err, DZ_ERR_INVALID, "--batch %d: must be at least 1", o->batch);
    if (d->train_examples < 1)
        return dz_fail(err, DZ_ERR_INVALID, "--train-examples %d: must be at least 1", d->train_examples);
    if (d->dev_examples < 0) return dz_fail(err, DZ_ERR_INVALID, "--dev-examples %d is negative", d->dev_examples);
    if ((int64_t)d->train_examples + d->dev_examples > INT_MAX)
        return dz_fail(err, DZ_ERR_INVALID, "--train-examples %d + --dev-examples %d is more than %d examples",
                       d->train_examples, d->dev_examples, INT_MAX);
    if (o->batch > d->train_examples)
        return dz_fail(err, DZ_ERR_INVALID, "--batch %d is larger than the %d training examples (--train-examples)",
                       o->batch, d->train_examples);
    if (!isfinite(o->lr) || o->lr < 0) return dz_fail(err, DZ_ERR_INVALID, "--lr %g: must be finite and >= 0", o->lr);
    if (!isfinite(o->wd) || o->wd < 0)
        return dz_fail(err, DZ_ERR_INVALID, "--weight-decay %g: must be finite and >= 0", o->wd);
    if (!isfinite(o->eps) || !(o->eps > 0)) return dz_fail(err, DZ_ERR_INVALID, "--eps %g: must be positive", o->eps);
    if (o->warmup < 0) return dz_fail(err, DZ_ERR_INVALID, "--warmup %d is negative", o->warmup);
    if ((st = fzoo_check(c, err)) != DZ_OK) return st; /* first: its directions set q */
    if ((st = estimator_knobs_check(o, err)) != DZ_OK) return st;
    if (o->q < 1 || o->q > DZ_ZO_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "--spsa-samples %d is outside 1..%d", o->q, DZ_ZO_MAX_Q);
    if (!(o->sparse_density > 0.0f && o->sparse_density <= 1.0f))
        return dz_fail(err, DZ_ERR_INVALID, "--sparse-density %g is outside (0, 1]", o->sparse_density);
    if (o->lozo_rank < 1 || o->lozo_rank > DZ_ZO_LOZO_MAX_RANK)
        return dz_fail(err, DZ_ERR_INVALID, "--lozo-rank %d is outside 1..%d", o->lozo_rank, DZ_ZO_LOZO_MAX_RANK);
    if (o->lozo_nu < 1) return dz_fail(err, DZ_ERR_INVALID, "--lozo-nu %d: must be at least 1", o->lozo_nu);
    if (!(o->hizoo_smooth > 0.0f && o->hizoo_smooth < 1.0f))
        return dz_fail(err, DZ_ERR_INVALID, "--hizoo-smooth %g is outside (0, 1)", o->hizoo_smooth);
    if (o->hizoo_rank != 0 && (o->hizoo_rank != 1 || o->estimator != DZ_ZO_HIZOO))
        return dz_fail(err, DZ_ERR_INVALID, "--hizoo-rank %d: %s", o->hizoo_rank,
                       o->hizoo_rank == 1 ? "HiZOO-L needs --estimator hizoo" : "0 (HiZOO) or 1 (HiZOO-L)");
    if (o->estimator == DZ_ZO_HIZOO && o->q != 1)
        return dz_fail(err, DZ_ERR_INVALID, "--estimator hizoo takes one direction per step: --spsa-samples %d must "
                       "be 1", o->q);
    if (o->max_bad_steps < 1)
        return dz_fail(err, DZ_ERR_INVALID, "--max-bad-steps %d: must be at least 1", o->max_bad_steps);
    const dz_train_schedule *s = &c->schedule;
    const struct { const char *option; int value; } counts[] = { /* 0 means never (evaluation: at the end) */
        {"--eval-every", s->eval_every}, {"--checkpoint-every", s->checkpoint_every},
        {"--log-sync-every", s->log_sync_every}, {"--seq", d->lm_seq}, {"--max-resident", c->store.max_resident_mb},
        {"--verify-every", c->layout.verify_every}, {"--max-device-memory", c->layout.max_device_mb},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (counts[i].value < 0)
            return dz_fail(err, DZ_ERR_INVALID, "%s %d is negative", counts[i].option, counts[i].value);
    if (s->keep_checkpoints < 1)
        return dz_fail(err, DZ_ERR_INVALID, "--keep-checkpoints %d: keep at least 1", s->keep_checkpoints);
    if (s->eval_batch < 1) return dz_fail(err, DZ_ERR_INVALID, "eval batch %d: must be at least 1", s->eval_batch);
    if (d->lm_seq == 1) return dz_fail(err, DZ_ERR_INVALID, "--seq 1: a window needs at least 2 tokens");
    const dz_task_preset *preset = d->task ? dz_task_preset_find(d->task) : NULL;
    if (!d->task || (!preset && strcmp(d->task, "sst2") && strcmp(d->task, "classify") && strcmp(d->task, "lm")))
        return dz_fail(err, DZ_ERR_INVALID, "--task '%s': not sst2, classify, lm or a MeZO preset (docs/TASKS.md)",
                       d->task ? d->task : "");
    const int gen = preset && preset->generation, lm = !strcmp(d->task, "lm");
    const char *obj = d->objective ? d->objective : "ce";
    if (strcmp(obj, "ce") && strcmp(obj, "accuracy") && strcmp(obj, "f1"))
        return dz_fail(err, DZ_ERR_INVALID, "--objective '%s': not ce, accuracy or f1", obj);
    if ((!strcmp(obj, "accuracy") && (gen || lm)) || (!strcmp(obj, "f1") && !gen))
        return dz_fail(err, DZ_ERR_INVALID, "--objective %s does not apply to the task %s (accuracy: classification; "
                       "f1: squad, drop)", obj, d->task);
    if (d->demos < 0 || d->demos > 32) return dz_fail(err, DZ_ERR_INVALID, "--demos %d is outside 0..32", d->demos);
    if (d->demos > 0 && lm) return dz_fail(err, DZ_ERR_INVALID, "--demos does not apply to the lm task");
    if (d->gen_tokens < 0) return dz_fail(err, DZ_ERR_INVALID, "--gen-tokens %d is negative", d->gen_tokens);
    if (!strcmp(d->task, "sst2") || !strcmp(d->task, "classify")) { /* the prompt, before any data is read */
        dz_prompt_spec spec; /* (serve has no data: a run it started could never take a round) */
        dz_prompt_spec_default_sst2(&spec);
        if (d->template_ && (st = dz_prompt_spec_set_template(&spec, d->template_, err)) != DZ_OK) return st;
        if (d->label_words && (st = dz_prompt_spec_set_labels(&spec, d->label_words, err)) != DZ_OK) return st;
    }
    st = dz_train_peft_check(c, err);
    if (st != DZ_OK) return st;
    if (!warn) return DZ_OK;
    if (o->warmup > o->steps)
        dz_log(DZ_LOG_WARN, "--warmup %d is longer than the run's %d steps: the learning rate never reaches --lr",
               o->warmup, o->steps);
    if (o->eps < 1e-5f) /* fp32 forwards: L+ - L- is then mostly rounding, and often exactly 0 */
        dz_log(DZ_LOG_WARN, "--eps %g is very small: L+ - L- will be mostly float rounding (g often exactly 0); MeZO "
               "uses 1e-3", o->eps);
    return DZ_OK;
}

dz_status dz_train_config_load(const char *run_dir, dz_train_config *c, char **strings, dz_error *err) {
    if (!dz_is_dir(run_dir)) return dz_fail(err, DZ_ERR_NOT_FOUND, "%s: no such run folder to resume", run_dir);
    return dz_run_config_read(run_dir, c, strings, err);
}

dz_status dz_train_config_load_file(const char *path, dz_train_config *c, const char *const *caller_keys,
                                    char **strings, dz_error *err) {
    return dz_run_config_apply(path, c, caller_keys, strings, err);
}

int dz_train_config_has_key(const char *key) { return dz_run_config_has_key(key); }

dz_status dz_train_config_check_given(const char *run_dir, const dz_train_config *given, char *const *args, int n,
                                      dz_error *err) {
    dz_train_config run;
    char *strings = NULL;
    if (dz_run_config_read(run_dir, &run, &strings, NULL) != DZ_OK) return DZ_OK;
    const dz_status st = dz_run_config_check_given(run_dir, &run, given, args, n, err);
    free(strings);
    return st;
}
