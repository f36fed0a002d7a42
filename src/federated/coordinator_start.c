/* The coordinator's start (coordinator.h): the run folder (run.json, federated.json, the
 * seed log, the lock) and the replica over the base model, new or resumed. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "distzo/federated.h"
#include "distzo/setup.h"
#include "distzo/task.h"
#include "federated/coordinator.h"
#include "federated/protocol.h"
#include "federated/replica.h"
#include "federated/settings.h"
#include "run/peft.h"
#include "run/run_files.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"
#include "run/setup.h"

/* The log's header; an adapter run's fingerprint is its layout, as train writes it, so that
 * export and resume replay it onto that adapter alone (the base is federated.json's). */
static dz_seedlog_header log_header(const coordinator *c) {
    dz_seedlog_header h = {.run_seed = c->train.optim.seed, .q = c->log_q,
                           .dist = c->train.optim.rademacher ? DZ_SEEDLOG_RADEMACHER : DZ_SEEDLOG_GAUSSIAN,
                           .rng = c->train.optim.rng_v2 ? 2 : 1,
                           .eps = c->train.optim.eps, .start_step = 0};
    char text[64];
    snprintf(text, sizeof text, "federated %016" PRIx64, c->fingerprint);
    if (c->fed.seed_pool) dz_seed_pool_log_tag(c->fed.seed_pool, text, h.fingerprint); /* export reads it as a pool run's */
    else memcpy(h.fingerprint, text, strlen(text) + 1);
    dz_lora_spec spec;
    if (c->setup && dz_train_peft_lora(&c->train, &spec))
        dz_train_log_fingerprint(&c->train, dz_model_config(dz_setup_base_model(c->setup)), h.fingerprint);
    return h;
}

/* With --test, the replica is an evaluation-only trainer's (the test set, its tokenizer, a
 * forward as large as evaluation needs): train's evaluation then scores it. */
static dz_status load_evaluator(coordinator *c, dz_error *err) {
    evaluator *ev = c->eval = calloc(1, sizeof *ev);
    if (!ev) return dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
    ev->cfg = c->train;
    ev->cfg.data.train = NULL, ev->cfg.out_dir = NULL;
    ev->cfg.layout = (dz_train_layout){.backend = c->train.layout.backend};
    dz_status st = dz_compute_begin(&ev->comp, &ev->cfg, NULL, err);
    if (st == DZ_OK) st = dz_prepare(&ev->comp, &ev->data, c->train.model, 0, err);
    c->setup = ev->comp.setup;
    return st;
}

/* --special-tokens: refused at the start, as train refuses it, where the model's tokenizer
 * reads text only (else every worker would fail on its first batch). */
static dz_status special_tokens_check(const coordinator *c, dz_error *err) {
    const dz_train_config *t = &c->train;
    char tok_path[4200];
    dz_tokenizer *tok = NULL;
    if (!c->tok && !t->tokenizer && dz_setup_base_tokenizer(t->model, tok_path, sizeof tok_path, NULL) != DZ_OK)
        return DZ_OK; /* no tokenizer beside the model: the workers name theirs */
    dz_status st = c->tok ? DZ_OK : dz_tokenizer_load(t->tokenizer ? t->tokenizer : tok_path, 0, &tok, err);
    if (st == DZ_OK) st = dz_special_tokens_check(c->tok ? c->tok : tok, err);
    dz_tokenizer_free(tok);
    return st;
}

/* The replica over the base model, and its fingerprint. */
static dz_status load_base(coordinator *c, dz_error *err) {
    const dz_train_config *t = &c->train;
    dz_weights_spec ws = {.path = t->model, .master_dtype = t->store.master_dtype};
    dz_lora_spec lora;
    dz_train_peft_weights(t, &ws, &lora); /* --peft: the adapter over the read-only base */
    const dz_engine_spec es = {
        .max_batch = 1, .max_len = 2, .streams = 2,
        .zo = {.seed = t->optim.seed, .eps = t->optim.eps, .q = t->optim.q, .rademacher = t->optim.rademacher, .rng_v2 = t->optim.rng_v2,
               .wd = t->optim.wd, .fuse = 1},
        .backend = t->layout.backend,
    };
    /* --adapter DIR: its file's fingerprint goes to run.json (a resume checks it against run.json's) */
    dz_status st = dz_train_peft_init_fingerprint(t, NULL, c->lora_init_fp, err);
    if (st == DZ_OK && c->lora_init_fp[0]) c->train.peft.lora_init_fingerprint = c->lora_init_fp;
    if (st == DZ_OK) st = t->data.test ? load_evaluator(c, err) : dz_setup_weights(&ws, &c->setup, err);
    if (st == DZ_OK && !c->eval) st = dz_setup_engine(c->setup, &es, err);
    if (st == DZ_OK) st = dz_fed_fingerprint(c->setup, &c->fingerprint, err);
    if (st == DZ_OK) st = dz_train_base_check(t, dz_setup_base_model(c->setup), t->model, c->model_table, err);
    if (st == DZ_OK) c->train.model_table = c->model_table; /* run.json keeps it: export checks the base it is given */
    char tok_path[4200];
    if (st == DZ_OK && t->schedule.checkpoint_every > 0 && !c->tok &&
        (t->tokenizer || dz_setup_base_tokenizer(t->model, tok_path, sizeof tok_path, NULL) == DZ_OK) &&
        dz_tokenizer_load(t->tokenizer ? t->tokenizer : tok_path, 0, &c->tok, NULL) != DZ_OK)
        c->tok = NULL; /* checkpoints then hold the weights alone */
    if (st == DZ_OK && t->data.special_tokens) st = special_tokens_check(c, err);
    c->log_q = c->fed.seed_pool ? 2 * c->q : c->q;
    if (st == DZ_OK && c->fed.seed_pool) {
        if (t->optim.wd != 0)
            st = dz_fail(err, DZ_ERR_INVALID, "--seed-pool: weight decay (--wd %g) is not a sum of the pool's scalars; "
                         "use --wd 0", (double)t->optim.wd);
        if (st == DZ_OK) st = dz_seed_pool_init(&c->pool, c->fed.seed_pool, c->q, err);
        if (st == DZ_OK)
            st = dz_seed_pool_weights_init(&c->weights, dz_setup_model(c->setup), t->optim.seed, t->optim.rademacher,
                                           t->optim.rng_v2,
                                           &c->pool, err);
        c->prob = st == DZ_OK ? calloc(c->fed.seed_pool, sizeof *c->prob) : NULL;
        c->pool_state = st == DZ_OK ? calloc(1, dz_fed_pool_state_bytes(c->fed.seed_pool)) : NULL;
        if (st == DZ_OK && (!c->prob || !c->pool_state)) st = dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
        if (st == DZ_OK) dz_fed_pool_state_encode(0, c->pool.k, c->pool.acc, c->pool_state);
    }
    return st;
}

static dz_status start_files(coordinator *c, int *lock_fd, dz_status st, dz_error *err);

/* FZOO: sigma is the spread of one batch's N losses, so a round is one worker's N
 * directions (all slots); a pool's seeds are not its draws step * N + j. */
static dz_status fzoo_check(const coordinator *c, dz_error *err) {
    if (c->fed.samples_per_worker != (int)c->q)
        return dz_fail(err, DZ_ERR_INVALID, "--estimator fzoo: a round is one worker's %u directions on one batch, so "
                       "--samples-per-worker must be %u (not %d)", c->q, c->q, c->fed.samples_per_worker);
    if (c->fed.seed_pool)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--seed-pool with --estimator fzoo: FZOO's directions are the draws "
                       "round * N + j, not a pool's seeds; leave out --seed-pool");
    return DZ_OK;
}

/* A new run: the folder, its lock, run.json, federated.json, an empty seed log. A start
 * that fails before run.json exists leaves no folder it made. */
dz_status dz_fed_coord_start_run(coordinator *c, int *lock_fd, dz_error *err) {
    char path[4200];
    c->train.model_table = NULL, c->train.peft.lora_init_fingerprint = NULL; /* a new run's own, from its files */
    dz_status st = dz_train_config_check(&c->train, err);
    if (st == DZ_OK && c->train.optim.estimator == DZ_ZO_HIZOO)
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "--estimator hizoo: federated runs (serve/join) do not carry its third "
                     "forward and curvature state; train it with distzo train (one process or mpirun --node-size 1)");
    if (st == DZ_OK && c->train.optim.estimator == DZ_ZO_FZOO) st = fzoo_check(c, err);
    if (st == DZ_OK && c->fed.seed_pool && c->train.peft.method && strcmp(c->train.peft.method, "none"))
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "--seed-pool with --peft %s: a K-seed pool's scalars are kept for full "
                     "models only (docs/ADAPTERS.md); leave out --seed-pool (an adapter's log is small anyway)",
                     c->train.peft.method);
    if (st == DZ_OK) st = dz_fed_settings_check(&c->fed, (int)c->q, err);
    const int made = st == DZ_OK && !dz_is_dir(c->run_dir);
    snprintf(path, sizeof path, "%s/.lock", c->run_dir);
    const int lock_was_there = dz_file_exists(path);
    st = start_files(c, lock_fd, st, err);
    snprintf(path, sizeof path, "%s/run.json", c->run_dir);
    if (st != DZ_OK && *lock_fd >= 0 && !dz_file_exists(path)) { /* the folder as it was */
        dz_run_unlock(c->run_dir, *lock_fd, !lock_was_there, made);
        *lock_fd = -1;
    }
    return st;
}

static dz_status start_files(coordinator *c, int *lock_fd, dz_status st, dz_error *err) {
    char path[4200];
    if (st == DZ_OK && (dz_mkdirs(c->run_dir) != 0 || !dz_is_dir(c->run_dir)))
        st = dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder: %s", c->run_dir, strerror(errno));
    if (st == DZ_OK) st = dz_run_lock(c->run_dir, lock_fd, err);
    for (int k = 0; k < 2 && st == DZ_OK; k++) {
        snprintf(path, sizeof path, "%s/%s", c->run_dir, k ? "run.json" : "seeds.log");
        if (dz_file_exists(path))
            st = dz_fail(err, DZ_ERR_INVALID, "%s already holds a run (%s): use --resume, or another --out",
                         c->run_dir, k ? "run.json" : "seeds.log");
    }
    snprintf(path, sizeof path, "%s/seeds.log", c->run_dir);
    if (st == DZ_OK) st = load_base(c, err);
    if (st == DZ_OK) st = dz_run_config_write(c->run_dir, &c->train, err);
    if (st == DZ_OK) st = dz_fed_settings_write(c->run_dir, &c->fed, c->fingerprint, err);
    const dz_seedlog_header h = log_header(c);
    if (st == DZ_OK) st = dz_seedlog_create(path, &h, c->train.schedule.log_sync_every, &c->log, err);
    return st;
}

/* --resume: the folder's settings, its log replayed onto the replica. */
dz_status dz_fed_coord_resume_run(coordinator *c, int steps, int *lock_fd, char **strings, dz_error *err) {
    char path[4200];
    uint64_t fp = 0;
    const dz_train_layout layout = c->train.layout; /* where it runs: this start's, not in run.json */
    const int keep_quantized = c->train.peft.keep_quantized; /* likewise (the same bits either way) */
    snprintf(path, sizeof path, "%s/federated.json", c->run_dir);
    if (!dz_is_dir(c->run_dir))
        return dz_fail(err, DZ_ERR_NOT_FOUND, "%s: no such run folder to resume", c->run_dir);
    if (!dz_file_exists(path))
        return dz_fail(err, DZ_ERR_INVALID, "%s is not a federated run (no federated.json): a run of distzo train "
                       "continues with distzo train --out %s --resume", c->run_dir, c->run_dir);
    dz_status st = dz_run_lock(c->run_dir, lock_fd, err);
    if (st == DZ_OK) st = dz_run_config_read(c->run_dir, &c->train, strings, err);
    c->train.layout = layout;
    c->train.peft.keep_quantized = keep_quantized;
    dz_lora_spec adapter;
    if (st == DZ_OK && keep_quantized && !dz_train_peft_lora(&c->train, &adapter))
        st = dz_fail(err, DZ_ERR_INVALID, "--keep-quantized: %s trains every parameter, which a quantized base held as "
                     "loaded cannot take; leave the option out", c->run_dir);
    if (st == DZ_OK) st = dz_fed_settings_read(c->run_dir, &c->fed, &fp, err);
    c->train.out_dir = c->run_dir;
    if (st == DZ_OK && steps > c->train.optim.steps) {
        dz_run_warn_schedule_stretched(c->run_dir, &c->train.optim, steps);
        c->train.optim.steps = steps; /* --steps only grows */
        st = dz_run_config_write(c->run_dir, &c->train, err);
    }
    c->q = (uint32_t)c->train.optim.q;
    if (st == DZ_OK) st = load_base(c, err);
    if (st == DZ_OK && fp != c->fingerprint)
        st = dz_fail(err, DZ_ERR_INVALID, "%s: the base model %s has fingerprint %016" PRIx64 ", the run was started "
                     "with %016" PRIx64 " (federated.json)", c->run_dir, c->train.model, c->fingerprint, fp);
    snprintf(path, sizeof path, "%s/seeds.log", c->run_dir);
    const dz_seedlog_header h = log_header(c);
    if (st == DZ_OK) st = dz_seedlog_open(path, &h, c->train.schedule.log_sync_every, &c->log, err);
    dz_zo_engine *e = st == DZ_OK ? dz_setup_zo_engine(c->setup) : NULL;
    for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(c->log); i++) {
        const dz_seedlog_record r = dz_seedlog_get(c->log, i);
        st = c->fed.seed_pool ? dz_seed_pool_add(&c->pool, r.lr, r.g, err) : dz_fed_apply(e, r.step, r.lr, r.g, err);
    }
    if (st == DZ_OK && c->fed.seed_pool) { /* the K scalars onto the base, once */
        st = dz_fed_pool_sync(e, &c->weights, &c->pool, err);
        dz_fed_pool_state_encode((uint32_t)dz_seedlog_count(c->log), c->pool.k, c->pool.acc, c->pool_state);
    }
    return st;
}
