/* distzo train: the loop around the ZO engine, from the run folder's preparation to the
 * last checkpoint. The data (train_data.c), evaluation (evaluate.c), checkpoints
 * (checkpoint.c), resume (resume.c) and the replica check (replicas.c) are beside it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/log.h"
#include "parallel/comm.h"
#include "run/run_files.h"
#include "run/setup.h"
#include "run/stop.h"
#include "run/trainer.h"

/* The parallel layout: this rank's forwards and examples, and how it updates masters it
 * shares with its node. */
static dz_status setup_layout(dz_trainer *tr, dz_error *err) {
    const dz_train_layout *l = &tr->cfg.layout;
    const int batch = tr->cfg.optim.batch;
    dz_status st = dz_layout_make(dz_comm_size(tr->comm), dz_comm_rank(tr->comm), l->pertp, l->dp, &tr->lay, err);
    if (st != DZ_OK) return st;
    if (batch < tr->lay.d)
        return dz_fail(err, DZ_ERR_INVALID, "--batch %d is smaller than the %d data-parallel groups (--dp)", batch,
                       tr->lay.d);
    tr->rank0 = tr->lay.rank == 0;
    tr->node_shared = dz_comm_node_size(tr->comm) > 1;
    return DZ_OK;
}

/* The tokenizer: --tokenizer, a checkpoint's own (llama2.c models carry tokenizer.bin),
 * else the base model's. */
static dz_status load_tokenizer(dz_trainer *tr, int from_checkpoint, dz_error *err) {
    char base_tok[4200];
    const char *tp = tr->cfg.tokenizer;
    if (!tp && from_checkpoint) tp = dz_model_tokenizer_path(tr->m);
    dz_status st = DZ_OK;
    if (!tp && (st = dz_setup_base_tokenizer(tr->cfg.model, base_tok, sizeof base_tok, err)) != DZ_OK) return st;
    tp = tp ? tp : base_tok;
    st = dz_tokenizer_load(tp, dz_model_config(tr->m)->vocab_size, &tr->tok, err);
    const int tv = st == DZ_OK ? dz_tokenizer_vocab_size(tr->tok) : 0, mv = dz_model_config(tr->m)->vocab_size;
    if (st == DZ_OK && tv > mv) /* found here, not at the first forward */
        st = dz_fail(err, DZ_ERR_INVALID, "%s: the tokenizer has %d tokens but the model %s has a vocabulary of %d", tp,
                     tv, tr->cfg.model, mv);
    return st;
}

dz_status dz_trainer_setup_compute(dz_trainer *tr, const char *weights, int from_checkpoint, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    dz_status st = setup_layout(tr, err);
    const char *const inputs[] = {c->data.train, c->data.test, c->tokenizer};
    const dz_weights_spec ws = {.path = weights, .master_dtype = c->store.master_dtype, .store = c->store.spec,
                                .comm = tr->comm, .inputs = inputs, .n_inputs = 3};
    if (st == DZ_OK) st = dz_setup_weights(&ws, &tr->setup, err);
    if (st != DZ_OK) return st;
    tr->m = dz_setup_model(tr->setup), tr->store = dz_setup_store(tr->setup);
    if ((st = load_tokenizer(tr, from_checkpoint, err)) != DZ_OK) return st;

    tr->lm = !strcmp(c->data.task, "lm");
    tr->preset = dz_task_preset_find(c->data.task);
    tr->gen = tr->preset && tr->preset->generation;
    const char *obj = c->data.objective ? c->data.objective : "ce";
    tr->objective = !strcmp(obj, "accuracy") ? DZ_OBJ_ACCURACY : !strcmp(obj, "f1") ? DZ_OBJ_F1 : DZ_OBJ_CE;
    if (tr->preset && (c->data.template_ || c->data.label_words))
        return dz_fail(err, DZ_ERR_INVALID, "--task %s: the preset has its own template and words (--template and "
                       "--label-words are for sst2 and classify)", tr->preset->name);
    dz_prompt_spec_default_sst2(&tr->spec);
    if (tr->preset) dz_prompt_spec_preset(&tr->spec);
    if (c->data.template_ && (st = dz_prompt_spec_set_template(&tr->spec, c->data.template_, err)) != DZ_OK)
        return st;
    if (c->data.label_words && (st = dz_prompt_spec_set_labels(&tr->spec, c->data.label_words, err)) != DZ_OK)
        return st;
    if ((st = dz_trainer_load_data(tr, err)) != DZ_OK) return st;
    if ((st = dz_trainer_check_agreement(tr, err)) != DZ_OK) return st;

    const int batch = c->optim.batch, eval_batch = c->schedule.eval_batch;
    const int K = tr->train.n_examples ? tr->train.n_labels : tr->testset.n_labels; /* evaluation only: the test's */
    const int local = (batch + tr->lay.d - 1) / tr->lay.d; /* the largest share */
    int max_len = tr->train.max_len;
    if (tr->dev.max_len > max_len) max_len = tr->dev.max_len;
    if (tr->testset.max_len > max_len) max_len = tr->testset.max_len;
    if (tr->gen) max_len = dz_model_config(tr->m)->max_seq_len; /* prompts and their greedy answers */
    const int share = !tr->lm && !tr->gen && c->data.share_prompts; /* candidates continue their example's prompt */
    const dz_engine_spec es = {
        .max_batch = local * K > eval_batch ? local * K : eval_batch,
        .max_len = max_len,
        .streams = share ? 4 : 2,
        .zo = dz_train_zo_params(&c->optim),
        .max_resident_mb = c->store.max_resident_mb,
        .stream_globals = c->store.stream_globals,
        .signs = tr->lay.signs,
    };
    st = dz_setup_engine(tr->setup, &es, err);
    tr->f = dz_setup_forward(tr->setup), tr->e = dz_setup_zo_engine(tr->setup);
    if (st == DZ_OK) st = dz_class_batch_init(&tr->bb, local * K, max_len, share, err); /* the forward's positions */
    if (st == DZ_OK && tr->objective == DZ_OBJ_F1) st = dz_trainer_decode_init(tr, local, err);
    int n_eval = tr->dev.n_examples > tr->testset.n_examples ? tr->dev.n_examples : tr->testset.n_examples;
    if (tr->dev_qa.n_examples > n_eval) n_eval = tr->dev_qa.n_examples;
    if (tr->test_qa.n_examples > n_eval) n_eval = tr->test_qa.n_examples;
    tr->order = malloc(sizeof(int) * (size_t)(tr->train.n_examples > 0 ? tr->train.n_examples : 1));
    tr->batch_ex = malloc(sizeof(int) * (size_t)batch);
    tr->batch_labels = malloc(sizeof(int) * (size_t)batch);
    tr->scores = malloc(sizeof(float) * (size_t)local * K);
    tr->eval_pairs = malloc(sizeof(double) * 2 * (size_t)(n_eval > 0 ? n_eval : 1));
    tr->eval_preds = malloc(sizeof(int) * (size_t)(n_eval > 0 ? n_eval : 1));
    tr->order_epoch = -1;
    if (st == DZ_OK && (!tr->order || !tr->batch_ex || !tr->batch_labels || !tr->scores || !tr->eval_pairs ||
                        !tr->eval_preds))
        st = dz_fail(err, DZ_ERR_NOMEM, "train: out of memory");
    return st;
}

static dz_status setup(dz_trainer *tr, int resume, int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    char path[4200];
    int ckpt_steps = 0;
    dz_status st = dz_trainer_weights_path(tr, resume, path, sizeof path, &ckpt_steps, err);
    if (st == DZ_OK) st = dz_trainer_setup_compute(tr, path, resume && ckpt_steps > 0, err);
    if (st != DZ_OK) return st;

    /* the seed log: new, or the source of truth past the checkpoint */
    dz_seedlog_header h = {.run_seed = c->optim.seed, .q = (uint32_t)c->optim.q,
                           .dist = c->optim.rademacher ? DZ_SEEDLOG_RADEMACHER : DZ_SEEDLOG_GAUSSIAN,
                           .eps = c->optim.eps, .start_step = 0};
    snprintf((char *)h.fingerprint, sizeof h.fingerprint, "%s", c->model);
    snprintf(path, sizeof path, "%s/seeds.log", tr->run_dir);
    *start_step = 0;
    const int sync_every = c->schedule.log_sync_every;
    /* settings, model and data checked: a new run's settings, or (once the resume has
     * succeeded: a failed one changes nothing) a resume's raised steps */
    if (!resume && tr->rank0) st = dz_run_config_write(tr->run_dir, c, err);
    if (!resume && tr->rank0 && st == DZ_OK) st = dz_seedlog_create(path, &h, sync_every, &tr->log, err);
    if (resume) st = dz_trainer_resume(tr, &h, path, ckpt_steps, start_step, err);
    if (resume && st == DZ_OK && tr->settings_changed && tr->rank0) st = dz_run_config_write(tr->run_dir, c, err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->run_dir);
    /* rows are numbered by steps done: keep those the run has state for; from step 0, none
     * (the evaluation before training is logged again) */
    const int64_t keep = *start_step > 0 ? *start_step : -1;
    if (st == DZ_OK && tr->rank0) st = dz_metrics_open(path, keep, sync_every, &tr->metrics, err);
    return st;
}

void dz_trainer_teardown(dz_trainer *tr) {
    dz_metrics_close(tr->metrics, NULL);
    dz_seedlog_close(tr->log, NULL);
    dz_setup_free(tr->setup);
    dz_class_batch_free(&tr->bb);
    dz_class_set_free(&tr->train);
    dz_class_set_free(&tr->dev);
    dz_class_set_free(&tr->testset);
    dz_qa_set_free(&tr->dev_qa);
    dz_qa_set_free(&tr->train_qa);
    dz_trainer_decode_free(tr);
    dz_qa_set_free(&tr->test_qa);
    dz_dataset_free(&tr->pool);
    dz_dataset_free(&tr->test);
    dz_tokenizer_free(tr->tok);
    free(tr->order);
    free(tr->batch_ex);
    free(tr->batch_labels);
    free(tr->scores);
    free(tr->eval_pairs);
    free(tr->eval_preds);
    dz_run_unlock(tr->run_dir, tr->lock_fd, tr->failed_before_write && !tr->lock_was_there,
                  tr->made_run_dir && tr->failed_before_write);
    dz_comm_finalize(tr->own_comm);
}

/* An evaluation's scores into the row and the progress report. */
static void eval_fields(const dz_trainer *tr, double dev, double test, double best_dev, dz_metrics_row *row,
                        dz_train_progress *p) {
    dz_trainer_eval_row(tr, dev, test, best_dev, row);
    p->has_eval = 1, p->dev_accuracy = dev, p->test_accuracy = test, p->best_dev_accuracy = best_dev;
}

/* The evaluation before training: metrics row 0 (no loss). */
static dz_status zero_shot(dz_trainer *tr, int resume, dz_best *best, dz_train_progress_cb cb, void *user,
                           dz_train_result *res, dz_error *err) {
    dz_status st = dz_trainer_evaluate_sets(tr, &res->zero_shot_dev, &res->zero_shot_test, err);
    if (st != DZ_OK) return st;
    if (!resume) best->dev = isfinite(res->zero_shot_dev) ? res->zero_shot_dev : -INFINITY, best->test = res->zero_shot_test;
    dz_metrics_row row = {.step = 0, .loss = NAN, .g = NAN, .lr = NAN, .seconds = dz_now() - tr->t0,
                          .dev_accuracy = NAN, .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN,
                          .test_loss = NAN};
    dz_train_progress p = {.step = 0, .steps = tr->cfg.optim.steps, .loss = NAN, .g = NAN, .lr = NAN,
                           .seconds = row.seconds, .lm = tr->lm};
    eval_fields(tr, res->zero_shot_dev, res->zero_shot_test, best->dev, &row, &p);
    if (tr->rank0) st = dz_metrics_append(tr->metrics, &row, err);
    if (st == DZ_OK && cb) cb(&p, user);
    return st;
}

static dz_status run(dz_trainer *tr, int start, int resume, dz_train_progress_cb cb, void *user, dz_train_result *res,
                     dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    const dz_train_optim *o = &c->optim;
    const dz_train_schedule *every = &c->schedule;
    dz_best best = {.dev = -INFINITY, .test = NAN, .step = 0};
    int bad = 0, steps_run = 0;
    uint64_t step_bytes = 0;
    double step_seconds = 0.0; /* in training steps only: the rate and ETA leave evaluations out */
    dz_status st = DZ_OK;
    res->zero_shot_dev = res->zero_shot_test = res->final_dev = res->final_test = NAN;
    if (resume) res->zero_shot_dev = tr->before_dev, res->zero_shot_test = tr->before_test; /* step 0 re-evaluates */
    res->was_finished = resume && start >= o->steps; /* nothing to do: say so rather than report a fresh result */
    if (resume) best = tr->best; /* as the uninterrupted run had it */
    if (start == 0 && (st = zero_shot(tr, resume, &best, cb, user, res, err)) != DZ_OK) return st;
    res->steps_done = start;
    for (int step = start; step < o->steps && st == DZ_OK; step++) {
        if ((res->interrupted = dz_trainer_take_stop())) break; /* Ctrl-C: the run folder is as after a kill */
        const double t_step = dz_now();
        dz_trainer_draw_batch(tr, step);
        dz_layout_share(o->batch, tr->lay.d, tr->lay.group, &tr->lo, &tr->hi); /* this group's share */
        st = dz_class_batch_fill(&tr->bb, &tr->train, tr->batch_ex + tr->lo, tr->hi - tr->lo, err);
        if (st != DZ_OK) break;
        dz_zo_batch zb = dz_class_batch_zo(&tr->bb, dz_trainer_loss, tr);
        zb.n_examples = tr->hi - tr->lo, zb.example0 = tr->lo, zb.n_global = o->batch;
        const float lr = dz_lr_at(o->lr_schedule, o->lr, o->warmup, o->steps, step);
        dz_zo_step_result r;
        const uint64_t sent = dz_comm_bytes_sent(tr->comm);
        if (tr->objective == DZ_OBJ_F1) { /* minus the F1 of the greedy answers under each perturbation */
            const dz_zo_decode zd = dz_trainer_decode_batch(tr);
            st = dz_zo_step_decode(tr->e, (uint32_t)step, lr, &zd, &r, err);
        } else {
            st = dz_zo_step(tr->e, (uint32_t)step, lr, &zb, &r, err);
        }
        if (st != DZ_OK) break;
        const uint64_t this_bytes = dz_comm_bytes_sent(tr->comm) - sent;
        step_bytes += this_bytes, steps_run++;
        float g_log[DZ_ZO_MAX_Q];
        double loss = 0.0, gmean = 0.0;
        for (int j = 0; j < o->q; j++) {
            g_log[j] = r.finite ? r.g[j] : NAN; /* NaN in the log marks a skipped step */
            loss += 0.5 * (r.loss_plus[j] + r.loss_minus[j]) / o->q;
            gmean += (double)r.g[j] / o->q;
        }
        if (tr->rank0 && (st = dz_seedlog_append(tr->log, (uint32_t)step, lr, g_log, err)) != DZ_OK) break;
        step_seconds += dz_now() - t_step;
        const int done = step + 1;
        if (!r.finite) {
            bad++;
            dz_log(DZ_LOG_WARN, "step %d: non-finite loss (L+ %g, L- %g): step skipped (%d in a row)", done,
                   r.loss_plus[0], r.loss_minus[0], bad);
        } else {
            bad = 0;
        }
        const double rate = step_seconds > 0 ? steps_run / step_seconds : 0.0;
        dz_metrics_row row = {.step = done, .loss = loss, .g = gmean, .lr = lr, .seconds = dz_now() - tr->t0,
                              .dev_accuracy = NAN, .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN,
                              .test_loss = NAN, .steps_per_s = rate, .step_bytes = (double)this_bytes};
        dz_train_progress p = {.step = done, .steps = o->steps, .loss = loss, .g = gmean, .lr = lr,
                               .seconds = row.seconds, .lm = tr->lm, .steps_run = steps_run, .steps_per_s = rate};
        /* every eval_every steps and after the last (eval_every 0: only then) */
        const int stop = bad >= o->max_bad_steps; /* diverged: its row, and no checkpoint */
        if (!stop && (done == o->steps || (every->eval_every > 0 && done % every->eval_every == 0))) {
            double dev, test;
            if ((st = dz_trainer_evaluate_sets(tr, &dev, &test, err)) != DZ_OK) break;
            if (isfinite(dev) && dev > best.dev) { /* a non-finite score never becomes best/ */
                best = (dz_best){.dev = dev, .test = test, .step = done};
                st = dz_trainer_checkpoint(tr, "best", done, &best, err);
            }
            eval_fields(tr, dev, test, best.dev, &row, &p);
            res->final_dev = dev, res->final_test = test;
        }
        if (st == DZ_OK && tr->rank0) st = dz_metrics_append(tr->metrics, &row, err);
        if (st == DZ_OK && stop) {
            st = dz_trainer_diverged(tr, done, bad, err);
            break;
        }
        if (st == DZ_OK && every->checkpoint_every > 0 && (done % every->checkpoint_every == 0 || done == o->steps))
            st = bad ? dz_trainer_checkpoint_skipped(tr, done) : dz_trainer_checkpoint(tr, "checkpoint", done, &best, err);
        if (st == DZ_OK && c->layout.verify_every > 0 && done % c->layout.verify_every == 0)
            st = dz_trainer_verify_replicas(tr, done, err);
        if (cb) cb(&p, user);
        res->steps_done = done;
    }
    if (st == DZ_OK) st = dz_zo_flush(tr->e, err);
    if (st == DZ_OK && start >= o->steps && tr->ckpt_steps < o->steps && every->checkpoint_every > 0)
        st = dz_trainer_checkpoint(tr, "checkpoint", o->steps, &best, err); /* killed before the last one */
    res->best_dev = best.dev, res->best_test = best.test, res->best_step = best.step, res->lm = tr->lm;
    res->step_bytes = steps_run ? (double)step_bytes / steps_run : 0.0;
    res->steps_run = steps_run, res->step_seconds = step_seconds;
    return st;
}

/* The settings of this run: a new run's, written to run.json by rank 0 (which owns the
 * run folder), or on resume run.json's, with what the command line may change. */
static dz_status run_settings(dz_trainer *tr, const dz_train_config *cfg_in, int resume, char **strings,
                              dz_error *err) {
    dz_status st = DZ_OK;
    if (resume) {
        char fed[4200];
        snprintf(fed, sizeof fed, "%s/federated.json", tr->run_dir);
        if (dz_file_exists(fed)) /* its rounds come from workers' data, which train does not have */
            return dz_fail(err, DZ_ERR_INVALID, "%s is a federated run (federated.json): continue it with distzo serve "
                           "--out %s --resume", tr->run_dir, tr->run_dir);
        if (tr->rank0) st = dz_run_lock(tr->run_dir, &tr->lock_fd, err);
        if (st == DZ_OK) st = dz_run_config_read(tr->run_dir, &tr->cfg, strings, err);
        if (st == DZ_OK) st = dz_run_config_resume(tr->run_dir, &tr->cfg, cfg_in, &tr->settings_changed, err);
        if (st == DZ_OK && tr->settings_changed) st = dz_train_config_check(&tr->cfg, err);
        tr->cfg.out_dir = cfg_in->out_dir;
        tr->cfg.layout = cfg_in->layout; /* the layout is the command line's: a run resumes under any layout */
        tr->cfg.data.train_set = cfg_in->data.train_set, tr->cfg.data.test_set = cfg_in->data.test_set; /* checked
                                                                   * against run.json's fingerprints as they load */
    } else if (tr->rank0) {
        tr->cfg = *cfg_in;
        st = dz_train_config_check(&tr->cfg, err); /* before anything is written */
        tr->made_run_dir = st == DZ_OK && !dz_is_dir(tr->run_dir);
        if (st == DZ_OK && (dz_mkdirs(tr->run_dir) != 0 || !dz_is_dir(tr->run_dir)))
            st = dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder: %s", tr->run_dir, strerror(errno));
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/.lock", tr->run_dir);
        tr->lock_was_there = dz_file_exists(probe);
        if (st == DZ_OK) st = dz_run_lock(tr->run_dir, &tr->lock_fd, err);
        for (int k = 0; k < 2 && st == DZ_OK; k++) { /* run.json is written once everything else checked out */
            snprintf(probe, sizeof probe, "%s/%s", tr->run_dir, k ? "run.json" : "seeds.log");
            if (dz_file_exists(probe))
                st = dz_fail(err, DZ_ERR_INVALID, "%s already holds a run (%s): use --resume, or another --out",
                             tr->run_dir, k ? "run.json" : "seeds.log");
        }
    } else {
        tr->cfg = *cfg_in;
    }
    return st;
}

dz_status dz_trainer_begin(dz_trainer *tr, dz_comm *comm, dz_error *err) {
    tr->t0 = dz_now();
    tr->lock_fd = -1;
    tr->comm = comm;
    if (!comm) {
        dz_status st = dz_comm_init(NULL, NULL, 0, 0, &tr->own_comm, err);
        if (st != DZ_OK) return st;
        tr->comm = tr->own_comm;
    }
    tr->rank0 = dz_comm_rank(tr->comm) == 0;
    return DZ_OK;
}

dz_status dz_train(const dz_train_config *cfg_in, int resume, dz_train_progress_cb cb, void *user,
                   dz_train_result *res, dz_error *err) {
    dz_trainer tr;
    memset(&tr, 0, sizeof tr);
    memset(res, 0, sizeof *res);
    dz_status st = dz_trainer_begin(&tr, cfg_in->layout.comm, err);
    if (st != DZ_OK) return st;
    snprintf(tr.run_dir, sizeof tr.run_dir, "%s", cfg_in->out_dir);
    char *strings = NULL;
    st = run_settings(&tr, cfg_in, resume, &strings, err);
    int ok = st == DZ_OK; /* every rank stops if rank 0 could not set up the run folder */
    if (dz_comm_bcast(tr.comm, &ok, sizeof ok, 0, err) == DZ_OK && !ok && st == DZ_OK)
        st = dz_fail(err, DZ_ERR_INVALID, "%s: rank 0 could not set up the run folder (its error is above)",
                     tr.run_dir);
    int start = 0;
    if (st == DZ_OK) st = setup(&tr, resume, &start, err);
    if (st == DZ_OK && cb) {
        dz_train_progress p = {.step = start, .steps = tr.cfg.optim.steps, .replayed = start};
        cb(&p, user);
    }
    if (st == DZ_OK) st = run(&tr, start, resume, cb, user, res, err);
    res->seconds = dz_now() - tr.t0;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/run.json", tr.run_dir);
    tr.failed_before_write = st != DZ_OK && !resume && !dz_file_exists(probe);
    dz_trainer_teardown(&tr);
    free(strings);
    return st;
}
