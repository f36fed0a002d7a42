/* train --resume-from OLD:N: a new run folder that continues another run from step N of
 * its seed log with new settings for the steps after it (a lower lr after a divergence).
 * The new folder gets OLD's first N log records and metrics rows and its own run.json;
 * then it is resumed as any run without a checkpoint is: the N records replayed onto the
 * base model, training from step N. Its seed log thus holds the whole trajectory, and
 * `distzo export` of it gives its weights. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "distzo/log.h"
#include "parallel/agree.h"
#include "parallel/comm.h"
#include "run/metrics.h"
#include "run/run_files.h"
#include "run/seedlog.h"

/* The new folder's seeds.log: the old header, and the old records before step. */
static dz_status copy_log(const char *old_dir, const char *new_dir, int step, int sync_every, dz_error *err) {
    char path[4200];
    dz_seedlog *old = NULL, *log = NULL;
    snprintf(path, sizeof path, "%s/seeds.log", old_dir);
    dz_status st = dz_seedlog_open_read(path, NULL, &old, err);
    const uint32_t first = st == DZ_OK ? dz_seedlog_get_header(old)->start_step : 0;
    if (st == DZ_OK && ((int64_t)dz_seedlog_next_step(old) < step || (int64_t)first > step))
        st = dz_fail(err, DZ_ERR_INVALID, "--resume-from %s:%d: %s holds steps %u to %u only", old_dir, step, path,
                     first, dz_seedlog_next_step(old));
    snprintf(path, sizeof path, "%s/seeds.log", new_dir);
    if (st == DZ_OK) st = dz_seedlog_create(path, dz_seedlog_get_header(old), sync_every, &log, err);
    for (size_t i = 0; st == DZ_OK && i < dz_seedlog_count(old); i++) {
        const dz_seedlog_record r = dz_seedlog_get(old, i);
        if ((int64_t)r.step < step) st = dz_seedlog_append(log, r.step, r.lr, r.g, err);
    }
    const dz_status cl = dz_seedlog_close(log, err);
    dz_seedlog_close(old, NULL);
    return st == DZ_OK ? cl : st;
}

/* The new folder's metrics: the old rows up to step (step 0: the scores before training). */
static dz_status copy_metrics(const char *old_dir, const char *new_dir, int step, dz_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", old_dir);
    if (!dz_file_exists(path)) return DZ_OK;
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    dz_metrics *m = NULL;
    dz_status st = dz_metrics_read(path, &rows, &n, err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", new_dir);
    if (st == DZ_OK) st = dz_metrics_open(path, -1, 0, &m, err);
    for (size_t i = 0; st == DZ_OK && i < n; i++)
        if (rows[i].step <= step) st = dz_metrics_append(m, &rows[i], err);
    const dz_status cl = dz_metrics_close(m, err);
    free(rows);
    return st == DZ_OK ? cl : st;
}

/* What the new folder must not be, and what the old run must be. */
static dz_status check_branch(const char *old_dir, int step, const dz_train_config *cfg, dz_train_config *old,
                              char **strings, dz_error *err) {
    char a[4200], b[4200];
    if (dz_path_resolve(old_dir, a, sizeof a) == 0 && dz_path_resolve(cfg->out_dir, b, sizeof b) == 0 && !strcmp(a, b))
        return dz_fail(err, DZ_ERR_INVALID, "--resume-from %s:%d starts a new run: give it another --out", old_dir, step);
    snprintf(a, sizeof a, "%s/federated.json", old_dir);
    if (dz_file_exists(a))
        return dz_fail(err, DZ_ERR_INVALID, "--resume-from: %s is a federated run: its log is the coordinator's", old_dir);
    if (step < 0 || step >= cfg->optim.steps)
        return dz_fail(err, DZ_ERR_INVALID, "--resume-from %s:%d: the step must be from 0 to --steps - 1 (%d)", old_dir,
                       step, cfg->optim.steps - 1);
    for (int k = 0; k < 2; k++) {
        snprintf(b, sizeof b, "%s/%s", cfg->out_dir, k ? "run.json" : "seeds.log");
        if (dz_file_exists(b))
            return dz_fail(err, DZ_ERR_INVALID, "%s already holds a run (%s): --resume-from starts a new one; choose "
                           "another --out", cfg->out_dir, k ? "run.json" : "seeds.log");
    }
    dz_status st = dz_train_config_load(old_dir, old, strings, err);
    if (st == DZ_OK) st = dz_run_config_branch(old_dir, old, cfg, err);
    return st == DZ_OK ? dz_train_config_check_quiet(cfg, err) : st; /* before the new folder is made */
}

/* Rank 0: the new run folder, written last by its run.json; on failure nothing of it stays. */
static dz_status prepare(const char *old_dir, int step, const dz_train_config *cfg, dz_error *err) {
    dz_train_config old;
    char *strings = NULL, path[4200];
    dz_status st = check_branch(old_dir, step, cfg, &old, &strings, err);
    free(strings);
    if (st != DZ_OK) return st;
    const int made = !dz_is_dir(cfg->out_dir);
    if (dz_mkdirs(cfg->out_dir) != 0 || !dz_is_dir(cfg->out_dir))
        return dz_fail(err, DZ_ERR_IO, "%s: cannot create the run folder: %s", cfg->out_dir, strerror(errno));
    int fd = -1;
    st = dz_run_lock(cfg->out_dir, &fd, err);
    if (st == DZ_OK) st = copy_log(old_dir, cfg->out_dir, step, cfg->schedule.log_sync_every, err);
    if (st == DZ_OK) st = copy_metrics(old_dir, cfg->out_dir, step, err);
    if (st == DZ_OK) st = dz_run_config_write(cfg->out_dir, cfg, err);
    for (int k = 0; st != DZ_OK && k < 3; k++) { /* the run.json-less start is removed, not left half made */
        snprintf(path, sizeof path, "%s/%s", cfg->out_dir, k == 0 ? "seeds.log" : k == 1 ? "metrics.jsonl" : "metrics.csv");
        unlink(path);
    }
    dz_run_unlock(cfg->out_dir, fd, st != DZ_OK, st != DZ_OK && made);
    if (st == DZ_OK)
        dz_log(DZ_LOG_INFO, "%s: a new run from step %d of %s (its log's first %d steps, replayed onto the base model)",
               cfg->out_dir, step, old_dir, step);
    return st;
}

dz_status dz_train_branch(const char *old_run, int step, const dz_train_config *cfg, dz_train_progress_cb cb,
                          void *user, dz_train_result *res, dz_error *err) {
    if (!old_run || !cfg || !res || !cfg->out_dir)
        return dz_fail(err, DZ_ERR_INVALID, "train from another run: no run, config, result or run folder given (NULL)");
    memset(res, 0, sizeof *res);
    dz_comm *comm = cfg->layout.comm;
    dz_status st = !comm || dz_comm_rank(comm) == 0 ? prepare(old_run, step, cfg, err) : DZ_OK;
    st = dz_comm_share_outcome(comm, st, 0, err); /* every rank stops if rank 0 could not make the folder */
    return st == DZ_OK ? dz_train(cfg, 1, cb, user, res, err) : st;
}
