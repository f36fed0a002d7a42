/* distzo train: the loop around the ZO engine, from the run folder's preparation to the
 * last checkpoint. Its parts (trainer.h): the compute (compute.c, replicas.c), the data
 * (train_data.c, train_decode.c), evaluation (evaluate.c), the run folder (folder.c,
 * checkpoint.c) and resume (resume.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/log.h"
#include "parallel/agree.h"
#include "parallel/comm.h"
#include "run/metrics.h"
#include "run/peft.h"
#include "run/run_files.h"
#include "run/setup.h"
#include "run/stop.h"
#include "run/trainer.h"

static dz_status setup(dz_trainer *tr, int resume, int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    char path[4200];
    int ckpt_steps = 0;
    dz_status st = dz_trainer_weights_path(tr, resume, path, sizeof path, &ckpt_steps, err);
    if (st == DZ_OK) st = dz_prepare(&tr->comp, &tr->data, path, resume && ckpt_steps > 0, err);
    const dz_model *base = st == DZ_OK ? dz_setup_base_model(tr->comp.setup) : NULL;
    if (st == DZ_OK && !resume && dz_model_lora(tr->comp.m) && c->peft.lora_targets) /* a new run's names */
        st = dz_lora_check_target_names(c->peft.lora_targets, dz_model_config(base), err);
    if (st != DZ_OK) return st;
    for (int k = 0; k < 2; k++) /* rows held in memory: run.json keeps their fingerprints (checked on resume) */
        if (tr->data.fingerprints[k][0])
            *(k ? &tr->cfg.data.test_fingerprint : &tr->cfg.data.train_fingerprint) = tr->data.fingerprints[k];
    if ((st = dz_train_base_check(c, base, c->model, tr->comp.model_table, err)) != DZ_OK) return st;
    tr->cfg.model_table = tr->comp.model_table; /* a run from before the field gets it on its next write */
    if (tr->comp.lora_init_fingerprint[0]) /* --adapter DIR: run.json keeps its file's fingerprint (checked on replay) */
        tr->cfg.peft.lora_init_fingerprint = tr->comp.lora_init_fingerprint;

    /* the seed log: new, or the source of truth past the checkpoint */
    dz_seedlog_header h;
    dz_train_log_header(c, dz_model_config(tr->comp.m), &h);
    snprintf(path, sizeof path, "%s/seeds.log", tr->folder.dir);
    *start_step = 0;
    const int sync_every = c->schedule.log_sync_every;
    /* settings, model and data checked: a new run's settings, or (once the resume has
     * succeeded: a failed one changes nothing) a resume's raised steps */
    if (!resume && tr->comp.rank0) st = dz_run_config_write(tr->folder.dir, c, err);
    if (!resume && tr->comp.rank0 && st == DZ_OK) st = dz_seedlog_create(path, &h, sync_every, &tr->folder.log, err);
    if (resume) st = dz_trainer_resume(tr, &h, path, ckpt_steps, start_step, err);
    if (resume && st == DZ_OK && tr->folder.settings_changed && tr->comp.rank0)
        st = dz_run_config_write(tr->folder.dir, c, err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->folder.dir);
    /* rows are numbered by steps done: keep those the run has state for; from step 0, none
     * (the evaluation before training is logged again) */
    const int64_t keep = *start_step > 0 ? *start_step : -1;
    if (st == DZ_OK && tr->comp.rank0) st = dz_metrics_open(path, keep, sync_every, &tr->folder.metrics, err);
    return st;
}

static void teardown(dz_trainer *tr) {
    dz_run_folder_close(&tr->folder);
    dz_prepare_free(&tr->comp, &tr->data);
}

/* An evaluation's scores into the row and the progress report. */
static void eval_fields(const dz_trainer *tr, double dev, double test, double best_dev, dz_metrics_row *row,
                        dz_train_progress *p) {
    dz_evaluate_row(&tr->data, dev, test, best_dev, row);
    p->has_eval = 1, p->dev_accuracy = dev, p->test_accuracy = test, p->best_dev_accuracy = best_dev;
}

/* The evaluation before training: metrics row 0 (no loss). */
static dz_status zero_shot(dz_trainer *tr, int resume, dz_best *best, dz_train_progress_cb cb, void *user,
                           dz_train_result *res, dz_error *err) {
    dz_status st = DZ_OK;
    if (tr->base_known) /* the resume has them (metrics.jsonl's row 0, or its own evaluation) */
        res->zero_shot_dev = tr->base_dev, res->zero_shot_test = tr->base_test;
    else
        st = dz_evaluate_sets(&tr->data, &res->zero_shot_dev, &res->zero_shot_test, err);
    if (st != DZ_OK) return st;
    if (!resume) /* scores as metrics.jsonl holds them, so a resume rebuilds the same best */
        best->dev = isfinite(res->zero_shot_dev) ? dz_metrics_value(res->zero_shot_dev) : -INFINITY,
        best->test = dz_metrics_value(res->zero_shot_test);
    dz_metrics_row row = {.step = 0, .loss = NAN, .g = NAN, .lr = NAN, .seconds = dz_now() - tr->t0,
                          .dev_accuracy = NAN, .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN,
                          .test_loss = NAN};
    dz_train_progress p = {.step = 0, .steps = tr->cfg.optim.steps, .loss = NAN, .g = NAN, .lr = NAN,
                           .seconds = row.seconds, .lm = tr->data.lm};
    eval_fields(tr, res->zero_shot_dev, res->zero_shot_test, best->dev, &row, &p);
    if (tr->comp.rank0) st = dz_metrics_append(tr->folder.metrics, &row, err);
    if (st == DZ_OK && cb) cb(&p, user);
    return st;
}

/* The step's batch through the engine: r and the bytes this rank sent for it. */
static dz_status step_once(dz_trainer *tr, int step, float lr, dz_zo_step_result *r, uint64_t *bytes,
                           dz_error *err) {
    const dz_train_optim *o = &tr->cfg.optim;
    dz_run_data *d = &tr->data;
    dz_run_data_draw_batch(d, step);
    dz_layout_share(o->batch, tr->comp.lay.d, tr->comp.lay.group, &d->lo, &d->hi); /* this group's share */
    dz_status st = dz_class_batch_fill(&d->bb, &d->train, d->batch_ex + d->lo, d->hi - d->lo, err);
    if (st != DZ_OK) return st;
    dz_zo_batch zb = dz_class_batch_zo(&d->bb, dz_run_data_loss, d);
    zb.n_examples = d->hi - d->lo, zb.example0 = d->lo, zb.n_global = o->batch;
    const uint64_t sent = dz_comm_bytes_sent(tr->comp.comm);
    if (d->objective == DZ_OBJ_F1) { /* minus the F1 of the greedy answers under each perturbation */
        const dz_zo_decode zd = dz_train_decode_batch(d);
        st = dz_zo_step_decode(tr->comp.e, (uint32_t)step, lr, &zd, r, err);
    } else {
        st = dz_zo_step(tr->comp.e, (uint32_t)step, lr, &zb, r, err);
    }
    *bytes = dz_comm_bytes_sent(tr->comp.comm) - sent;
    return st;
}

/* The loop's running state: the best-so-far, the skipped steps in a row, the rate. */
typedef struct loop_state {
    dz_best best;
    int bad, steps_run;
    uint64_t step_bytes;
    double step_seconds; /* in training steps only: the rate and ETA leave evaluations out */
} loop_state;

/* A non-finite step is skipped (and counted: --max-bad-steps of them in a row stop the run). */
static void count_bad(const dz_zo_step_result *r, int fzoo, int done, loop_state *ls) {
    if (r->finite) {
        ls->bad = 0;
        return;
    }
    ls->bad++;
    if (fzoo) /* its result holds l_j in loss_plus, l0 in loss_minus */
        dz_log(DZ_LOG_WARN, "step %d: non-finite loss (l0 %g, l_1 %g) or spread: step skipped (%d in a row)", done,
               r->loss_minus[0], r->loss_plus[0], ls->bad);
    else
        dz_log(DZ_LOG_WARN, "step %d: non-finite loss (L+ %g, L- %g): step skipped (%d in a row)", done,
               r->loss_plus[0], r->loss_minus[0], ls->bad);
}

/* After step done: the evaluation (every eval_every steps and after the last; eval_every
 * 0: only then), best/, the metrics row, the checkpoint and the replica check. *report:
 * the step is reported even when what follows the evaluation failed. */
static dz_status after_step(dz_trainer *tr, int done, loop_state *ls, dz_metrics_row *row, dz_train_progress *p,
                            dz_train_result *res, int *report, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    const dz_train_schedule *every = &c->schedule;
    dz_status st = DZ_OK;
    const int stop = ls->bad >= c->optim.max_bad_steps; /* diverged: its row, and no checkpoint */
    if (!stop && (done == c->optim.steps || (every->eval_every > 0 && done % every->eval_every == 0))) {
        double dev, test;
        *report = 0;
        if ((st = dz_evaluate_sets(&tr->data, &dev, &test, err)) != DZ_OK) return st;
        *report = 1;
        /* a non-finite score never becomes best/; scores as metrics.jsonl holds them (resume rebuilds from it) */
        if (isfinite(dev) && dz_metrics_value(dev) > ls->best.dev) {
            ls->best = (dz_best){.dev = dz_metrics_value(dev), .test = dz_metrics_value(test), .step = done};
            st = dz_run_folder_checkpoint(&tr->folder, &tr->comp, "best", done, &ls->best, err);
        }
        eval_fields(tr, dev, test, ls->best.dev, row, p);
        res->final_dev = dev, res->final_test = test;
    }
    if (st == DZ_OK && tr->comp.rank0) st = dz_metrics_append(tr->folder.metrics, row, err);
    if (st == DZ_OK && stop) {
        *report = 0; /* the loop ends here, unreported */
        return dz_run_folder_diverged(&tr->folder, &tr->comp, done, ls->bad, err);
    }
    if (st == DZ_OK && every->checkpoint_every > 0 && (done % every->checkpoint_every == 0 || done == c->optim.steps))
        st = ls->bad ? dz_run_folder_checkpoint_skipped(&tr->comp, done)
                     : dz_run_folder_checkpoint(&tr->folder, &tr->comp, "checkpoint", done, &ls->best, err);
    if (st == DZ_OK && c->layout.verify_every > 0 && done % c->layout.verify_every == 0)
        st = dz_compute_verify_replicas(&tr->comp, done, err);
    return st;
}

/* One training step, logged, and what follows it. */
static dz_status train_step(dz_trainer *tr, int step, loop_state *ls, dz_train_progress_cb cb, void *user,
                            dz_train_result *res, dz_error *err) {
    const dz_train_optim *o = &tr->cfg.optim;
    const double t_step = dz_now();
    const float lr = dz_lr_at(o->lr_schedule, o->lr, o->warmup, o->steps, step);
    dz_zo_step_result r;
    uint64_t this_bytes = 0;
    dz_status st = step_once(tr, step, lr, &r, &this_bytes, err);
    if (st != DZ_OK) return st;
    ls->step_bytes += this_bytes, ls->steps_run++;
    float g_log[DZ_ZO_MAX_Q + 1];
    g_log[o->q] = r.g[o->q]; /* HiZOO's curvature step (the log holds it only with --estimator hizoo) */
    double loss = 0.0, gmean = 0.0;
    for (int j = 0; j < o->q; j++) {
        g_log[j] = r.finite ? r.g[j] : NAN; /* NaN in the log marks a skipped step */
        /* FZOO: loss_minus is l0, the batch's loss at the weights themselves */
        loss += (o->estimator == DZ_ZO_FZOO ? r.loss_minus[j] : 0.5 * (r.loss_plus[j] + r.loss_minus[j])) / o->q;
        gmean += (double)r.g[j] / o->q;
    }
    if (!r.finite) gmean = NAN; /* a skipped step: g null in its row, whatever the estimator computed */
    if (tr->comp.rank0 && (st = dz_seedlog_append(tr->folder.log, (uint32_t)step, lr, g_log, err)) != DZ_OK) return st;
    ls->step_seconds += dz_now() - t_step;
    const int done = step + 1;
    count_bad(&r, o->estimator == DZ_ZO_FZOO, done, ls);
    const double rate = ls->step_seconds > 0 ? ls->steps_run / ls->step_seconds : 0.0;
    dz_metrics_row row = {.step = done, .loss = loss, .g = gmean, .lr = lr, .seconds = dz_now() - tr->t0,
                          .dev_accuracy = NAN, .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN,
                          .test_loss = NAN, .steps_per_s = rate, .step_bytes = (double)this_bytes};
    dz_train_progress p = {.step = done, .steps = o->steps, .loss = loss, .g = gmean, .lr = lr,
                           .seconds = row.seconds, .lm = tr->data.lm, .steps_run = ls->steps_run, .steps_per_s = rate};
    int report = 1;
    st = after_step(tr, done, ls, &row, &p, res, &report, err);
    if (!report) return st;
    if (cb) cb(&p, user);
    res->steps_done = done;
    return st;
}

static dz_status run(dz_trainer *tr, int start, int resume, dz_train_progress_cb cb, void *user, dz_train_result *res,
                     dz_error *err) {
    const dz_train_optim *o = &tr->cfg.optim;
    loop_state ls = {.best = {.dev = -INFINITY, .test = NAN, .step = 0}};
    dz_status st = DZ_OK;
    res->zero_shot_dev = res->zero_shot_test = res->final_dev = res->final_test = NAN;
    if (resume) /* step 0 re-evaluates */
        res->zero_shot_dev = tr->folder.before_dev, res->zero_shot_test = tr->folder.before_test;
    res->was_finished = resume && start >= o->steps; /* nothing to do: say so rather than report a fresh result */
    if (resume) ls.best = tr->folder.best; /* as the uninterrupted run had it */
    if (start == 0 && (st = zero_shot(tr, resume, &ls.best, cb, user, res, err)) != DZ_OK) return st;
    res->steps_done = start;
    for (int step = start; step < o->steps && st == DZ_OK; step++) {
        if ((res->interrupted = dz_trainer_take_stop())) break; /* Ctrl-C: the run folder is as after a kill */
        st = train_step(tr, step, &ls, cb, user, res, err);
    }
    if (st == DZ_OK) st = dz_zo_flush(tr->comp.e, err);
    if (st == DZ_OK && start >= o->steps && tr->folder.ckpt_steps < o->steps && tr->cfg.schedule.checkpoint_every > 0)
        st = dz_run_folder_checkpoint(&tr->folder, &tr->comp, "checkpoint", o->steps, &ls.best,
                                      err); /* killed before the last one */
    res->best_dev = ls.best.dev, res->best_test = ls.best.test, res->best_step = ls.best.step, res->lm = tr->data.lm;
    double *scores[] = {&res->zero_shot_dev, &res->zero_shot_test, &res->final_dev, &res->final_test, &res->best_dev,
                        &res->best_test};
    for (size_t i = 0; i < sizeof scores / sizeof scores[0]; i++) /* as metrics.jsonl holds them, so a resume's */
        *scores[i] = dz_metrics_value(*scores[i]);                  /* (read back from it) are a straight run's */
    res->step_bytes = ls.steps_run ? (double)ls.step_bytes / ls.steps_run : 0.0;
    res->steps_run = ls.steps_run, res->step_seconds = ls.step_seconds;
    return st;
}

dz_status dz_train(const dz_train_config *cfg_in, int resume, dz_train_progress_cb cb, void *user,
                   dz_train_result *res, dz_error *err) {
    if (!cfg_in || !res || !cfg_in->out_dir)
        return dz_fail(err, DZ_ERR_INVALID, "train: no config, no result or no run folder given (the config's out_dir "
                       "is NULL; dz_train_config_load leaves it to the caller)");
    dz_trainer tr;
    memset(&tr, 0, sizeof tr);
    memset(res, 0, sizeof *res);
    tr.t0 = dz_now();
    dz_run_folder_init(&tr.folder, cfg_in->out_dir);
    dz_status st = dz_compute_begin(&tr.comp, &tr.cfg, cfg_in->layout.comm, err);
    if (st != DZ_OK) return st;
    char *strings = NULL;
    st = dz_run_folder_settings(&tr.folder, &tr.cfg, cfg_in, resume, tr.comp.rank0, &strings, err);
    st = dz_comm_share_outcome(tr.comp.comm, st, 0, err); /* every rank stops if rank 0 could not set up the folder */
    int start = 0;
    if (st == DZ_OK) st = setup(&tr, resume, &start, err);
    if (st != DZ_OK) dz_setup_discard_store(tr.comp.setup); /* refused before a step: no store file left behind */
    if (st == DZ_OK && cb) {
        dz_train_progress p = {.step = start, .steps = tr.cfg.optim.steps, .replayed = start};
        cb(&p, user);
    }
    if (st == DZ_OK) st = run(&tr, start, resume, cb, user, res, err);
    res->seconds = dz_now() - tr.t0;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/run.json", tr.folder.dir);
    tr.folder.failed_before_write = st != DZ_OK && !resume && !dz_file_exists(probe);
    teardown(&tr);
    free(strings);
    return st;
}
