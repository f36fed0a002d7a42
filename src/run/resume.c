/* Resume: where the weights come from, and the steps after the checkpoint replayed from
 * the seed log, bitwise what the uninterrupted run did. World rank 0 reads the run folder
 * and tells the others, so every rank continues from the same state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/log.h"
#include "distzo/progress.h"
#include "parallel/comm.h"
#include "run/run_files.h"
#include "run/trainer.h"

dz_status dz_trainer_weights_path(dz_trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps,
                                  dz_error *err) {
    dz_status st = DZ_OK;
    *ckpt_steps = 0;
    snprintf(path, cap, "%s", tr->cfg.model);
    if (resume && tr->comp.rank0) {
        st = dz_checkpoint_latest(tr->folder.dir, path, cap, ckpt_steps, err);
        if (st == DZ_ERR_NOT_FOUND) {
            snprintf(path, cap, "%s", tr->cfg.model);
            *ckpt_steps = 0;
            st = DZ_OK;
        }
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, ckpt_steps, sizeof *ckpt_steps, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, path, cap, 0, err);
    return st;
}

/* A replay record as rank 0 sends it to the others. */
typedef struct replay_rec {
    uint32_t step;
    float lr, g[DZ_ZO_MAX_Q];
} replay_rec;

dz_status dz_trainer_resume(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps,
                            int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    double base_dev = NAN, base_test = NAN;
    dz_status st = DZ_OK;
    if (ckpt_steps == 0) { /* the base model's scores start the best-so-far: every rank evaluates */
        st = dz_evaluate(&tr->data, &tr->data.dev, &base_dev, err);
        if (st == DZ_OK) st = dz_evaluate(&tr->data, &tr->data.testset, &base_test, err);
    }
    uint64_t count = 0;
    size_t first = 0, n = 0;
    replay_rec *recs = NULL;
    const int sync_every = c->schedule.log_sync_every;
    if (st == DZ_OK && tr->comp.rank0) {
        st = dz_seedlog_open(log_path, h, sync_every, &tr->folder.log, err);
        if (st == DZ_ERR_NOT_FOUND || (st == DZ_ERR_IO && !dz_file_exists(log_path) && ckpt_steps == 0))
            st = dz_seedlog_create(log_path, h, sync_every, &tr->folder.log, err); /* killed before the log existed */
        tr->folder.ckpt_steps = ckpt_steps;
        if (st == DZ_OK) st = dz_run_folder_restore_best(&tr->folder, tr->data.lm, base_dev, base_test, err);
        if (st == DZ_OK) st = dz_seedlog_replay_range(tr->folder.log, (int64_t)ckpt_steps - 1, &first, &n, err);
        if (st == DZ_OK) *start_step = (int)dz_seedlog_next_step(tr->folder.log);
        count = n;
    }
    tr->folder.ckpt_steps = ckpt_steps;
    double best[3] = {tr->folder.best.dev, tr->folder.best.test, tr->folder.best.step};
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, &count, sizeof count, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, start_step, sizeof *start_step, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, best, sizeof best, 0, err);
    if (st == DZ_OK && !(recs = malloc(sizeof *recs * (count ? count : 1))))
        st = dz_fail(err, DZ_ERR_NOMEM, "resume: out of memory");
    for (size_t i = 0; st == DZ_OK && tr->comp.rank0 && i < count; i++) {
        const dz_seedlog_record r = dz_seedlog_get(tr->folder.log, first + i);
        recs[i].step = r.step, recs[i].lr = r.lr;
        memcpy(recs[i].g, r.g, sizeof(float) * (size_t)c->optim.q);
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, recs, sizeof *recs * count, 0, err);
    tr->folder.best = (dz_best){.dev = best[0], .test = best[1], .step = (int)best[2]};
    dz_progress prog;
    dz_progress_begin(&prog, "replaying the seed log", "steps", (int64_t)count);
    for (size_t i = 0; st == DZ_OK && i < count; i++) {
        if (isfinite(recs[i].g[0])) /* NaN: a skipped step */
            st = dz_zo_apply(tr->comp.e, recs[i].step, recs[i].lr, recs[i].g, err);
        dz_progress_add(1);
    }
    dz_progress_end(&prog);
    free(recs);
    if (st == DZ_OK && tr->comp.rank0)
        dz_log(DZ_LOG_INFO, "resumed %s: checkpoint after %d steps, %llu steps replayed from the seed log",
               tr->folder.dir, ckpt_steps, (unsigned long long)count);
    return st;
}
