/* The run folder (folder.h): its settings and lock at the start, closed at the end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "run/folder.h"
#include "run/run_files.h"
#include "run/setup.h"

void dz_run_folder_init(dz_run_folder *rf, const char *dir) {
    snprintf(rf->dir, sizeof rf->dir, "%s", dir);
    rf->lock_fd = -1;
}

/* A new run's settings: cfg_in's, but what identifies another run's base and starting
 * adapter (settings read from its run.json) is this run's own, taken when it loads them. */
static void new_run(dz_train_config *cfg, const dz_train_config *cfg_in) {
    *cfg = *cfg_in;
    cfg->model_table = NULL, cfg->peft.lora_init_fingerprint = NULL;
}

/* --max-resident and --stream-globals shape a disk store: a new run without one (a --config
 * file's or a library caller's settings; the command line says so itself) would ignore
 * them and record them in run.json. A resume that moves a run to --store ram drops them. */
static int disk_store(const dz_train_store *s) { return s->spec && !strncmp(s->spec, "disk", 4); }

static dz_status new_run_store_check(const dz_train_config *cfg, dz_error *err) {
    const dz_train_store *s = &cfg->store;
    if (disk_store(s) || (!s->max_resident_mb && !s->stream_globals)) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "%s (%s) without a disk store (--store disk:PATH; here %s): it would be "
                   "ignored", s->max_resident_mb ? "--max-resident" : "--stream-globals",
                   s->max_resident_mb ? "max_resident_mb" : "stream_globals", s->spec ? s->spec : "ram");
}

void dz_run_warn_schedule_stretched(const char *run_dir, const dz_train_optim *o, int steps) {
    if (o->lr_schedule == DZ_LR_CONSTANT || steps <= o->steps) return;
    const float was = dz_lr_at(o->lr_schedule, o->lr, o->warmup, o->steps, o->steps - 1);
    const float now = dz_lr_at(o->lr_schedule, o->lr, o->warmup, steps, o->steps - 1);
    dz_log(DZ_LOG_WARN, "%s: --steps %d stretches the run's decaying schedule (it spans --steps): at step %d the %d-step "
           "schedule's lr is %.3g, the %d-step one's %.3g, so the steps to come take a larger lr than the run was "
           "decaying to (the result is neither the %d-step run's nor a %d-step run's from the start; a constant "
           "schedule, or --resume-from with a new --schedule, avoids it)", run_dir, steps, o->steps, o->steps,
           (double)was, steps, (double)now, o->steps, steps);
}

/* The settings of this run: a new run's, written to run.json by rank 0 (which owns the
 * run folder), or on resume run.json's, with what the command line may change. */
dz_status dz_run_folder_settings(dz_run_folder *rf, dz_train_config *cfg, const dz_train_config *cfg_in,
                                 int resume, int rank0, char **strings, dz_error *err) {
    dz_status st = DZ_OK;
    if (resume) {
        char fed[4200];
        snprintf(fed, sizeof fed, "%s/federated.json", rf->dir);
        if (dz_file_exists(fed)) /* its rounds come from workers' data, which train does not have */
            return dz_fail(err, DZ_ERR_INVALID, "%s is a federated run (federated.json): continue it with distzo serve "
                           "--out %s --resume", rf->dir, rf->dir);
        if (rank0) st = dz_run_lock(rf->dir, &rf->lock_fd, err);
        if (st == DZ_OK) st = dz_run_config_read(rf->dir, cfg, strings, err);
        const char *run_store = st == DZ_OK ? cfg->store.spec : NULL; /* run.json's (in *strings) */
        dz_error bad = {0}; /* run.json's own values, before the command line's: an edited file names itself */
        if (st == DZ_OK && dz_train_config_check_quiet(cfg, &bad) != DZ_OK)
            st = dz_fail(err, bad.code, "%s/run.json: %s (a value train refuses: was the file edited?)", rf->dir,
                         bad.msg);
        const dz_train_optim before = cfg->optim;
        if (st == DZ_OK) st = dz_run_config_resume(rf->dir, cfg, cfg_in, &rf->settings_changed, err);
        if (st == DZ_OK && rf->settings_changed) st = dz_train_config_check(cfg, err);
        if (st == DZ_OK && !disk_store(&cfg->store))
            cfg->store.max_resident_mb = 0, cfg->store.stream_globals = 0; /* nothing to shape (run.json says so) */
        if (st == DZ_OK && rank0) dz_run_warn_schedule_stretched(rf->dir, &before, cfg->optim.steps);
        /* this start's store is run.json's: one written before stores were marked is the run's own */
        if (st == DZ_OK && rank0 && run_store && cfg->store.spec && !strcmp(run_store, cfg->store.spec))
            st = dz_setup_adopt_store(run_store, err);
        cfg->out_dir = cfg_in->out_dir;
        cfg->layout = cfg_in->layout; /* the layout is the command line's: a run resumes under any layout */
        cfg->peft.keep_quantized = cfg_in->peft.keep_quantized; /* likewise: memory, not bits (not in run.json) */
        cfg->data.train_set = cfg_in->data.train_set, cfg->data.test_set = cfg_in->data.test_set; /* the caller's rows,
                                                                   * checked against run.json's fingerprints */
    } else if (rank0) {
        new_run(cfg, cfg_in);
        st = dz_train_config_check(cfg, err); /* before anything is written */
        if (st == DZ_OK) st = new_run_store_check(cfg, err);
        rf->made_run_dir = st == DZ_OK && !dz_is_dir(rf->dir);
        if (st == DZ_OK && (dz_mkdirs(rf->dir) != 0 || !dz_is_dir(rf->dir)))
            st = dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder: %s", rf->dir, strerror(errno));
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/.lock", rf->dir);
        rf->lock_was_there = dz_file_exists(probe);
        if (st == DZ_OK) st = dz_run_lock(rf->dir, &rf->lock_fd, err);
        for (int k = 0; k < 2 && st == DZ_OK; k++) { /* run.json is written once everything else checked out */
            snprintf(probe, sizeof probe, "%s/%s", rf->dir, k ? "run.json" : "seeds.log");
            if (dz_file_exists(probe))
                st = dz_fail(err, DZ_ERR_INVALID, "%s already holds a run (%s): use --resume, or another --out",
                             rf->dir, k ? "run.json" : "seeds.log");
        }
    } else {
        new_run(cfg, cfg_in);
    }
    return st;
}

void dz_run_folder_close(dz_run_folder *rf) {
    dz_metrics_close(rf->metrics, NULL);
    dz_seedlog_close(rf->log, NULL);
    rf->metrics = NULL, rf->log = NULL;
    dz_run_unlock(rf->dir, rf->lock_fd, rf->failed_before_write && !rf->lock_was_there,
                  rf->made_run_dir && rf->failed_before_write);
    rf->lock_fd = -1;
}
