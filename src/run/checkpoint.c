/* The run folder's checkpoints (checkpoint-N/, best/: checkpoint_files.c writes the folders) and
 * the best-so-far they carry, restored on resume. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "distzo/log.h"
#include "parallel/comm.h"
#include "run/curvature_file.h"
#include "run/folder.h"
#include "run/run_files.h"
#include "run/setup.h"
#include "store/store.h"

/* trainer_state.json: what a resume needs beyond the weights and the log. Scores are the
 * selection scores (accuracy, or minus the mean NLL for LM); %.17g round-trips doubles.
 * weights_checksum: the replicas' checksum of these weights, checked on resume. */
static void state_json(char *buf, size_t cap, int steps_done, const dz_best *b, uint64_t checksum,
                       const float *curvature, size_t n_curvature) {
    char curv[64] = ""; /* HiZOO: curvature.bin's data, checked on resume */
    if (curvature)
        snprintf(curv, sizeof curv, ", \"curvature_checksum\": \"%08x\"",
                 (unsigned)dz_curvature_checksum(curvature, n_curvature));
    snprintf(buf, cap, "{\"steps_done\": %d, \"best_dev\": %.17g, \"best_step\": %d, \"best_test\": %.17g, "
             "\"weights_checksum\": \"%016llx\"%s}\n", steps_done, isfinite(b->dev) ? b->dev : -1e300, b->step,
             isfinite(b->test) ? b->test : -1e300, (unsigned long long)checksum, curv);
}

/* HiZOO's curvature into a checkpoint's folder (dz_checkpoint_extra). */
static dz_status write_curvature(void *ctx, const char *dir, dz_error *err) {
    const dz_compute *c = ctx;
    size_t n = 0;
    const float *h = dz_zo_curvature(c->e, &n);
    return dz_curvature_save(dir, h, n, dz_compute_table_hash(dz_model_params(c->m)), c->cfg->optim.hizoo_rank, err);
}

dz_status dz_run_folder_checkpoint(dz_run_folder *rf, const dz_compute *c, const char *name, int steps_done,
                                   const dz_best *best, dz_error *err) {
    uint64_t sum = 0;
    dz_status st = dz_zo_flush(c->e, err); /* every rank: with shared masters the flush is collective */
    if (st == DZ_OK) st = dz_compute_weights_checksum(c, &sum, err); /* so is a node's checksum */
    if (st != DZ_OK || !c->rank0) return st;
    st = dz_seedlog_sync(rf->log, err); /* the log must reach the checkpoint */
    if (st != DZ_OK) return st;
    size_t n_curv = 0;
    const float *h = dz_zo_curvature(c->e, &n_curv);
    char js[384];
    state_json(js, sizeof js, steps_done, best, sum, h, n_curv);
    const int keep = c->cfg->schedule.keep_checkpoints;
    const dz_checkpoint_extra curv = {.write = write_curvature, .ctx = (void *)c};
    const dz_checkpoint_extra *extra = h ? &curv : NULL;
    if (!c->store)
        return dz_checkpoint_write_extra(rf->dir, name, steps_done, c->m, c->tok, js, NULL, keep, extra, err);
    if (dz_model_lora(c->m)) { /* an adapter's masters in a store: its PEFT folder from a copy */
        dz_model *copy = NULL;
        st = dz_setup_adapter_from_store(c->m, c->store, &copy, err);
        if (st == DZ_OK) st = dz_checkpoint_write_extra(rf->dir, name, steps_done, copy, c->tok, js, NULL, keep, extra, err);
        dz_model_free(copy);
        return st;
    }
    st = dz_store_save_resident(c->store, c->m, err);
    if (st == DZ_OK)
        st = dz_checkpoint_write_extra(rf->dir, name, steps_done, c->m, c->tok, js, dz_store_path(c->store), keep,
                                       extra, err);
    return st;
}

dz_status dz_run_folder_checkpoint_skipped(const dz_compute *c, int done) {
    if (c->rank0)
        dz_log(DZ_LOG_WARN, "step %d: no checkpoint-%d: the loss is not finite, and a checkpoint of diverged weights "
               "could rotate the last good one away", done, done);
    return DZ_OK;
}

dz_status dz_run_folder_diverged(const dz_run_folder *rf, const dz_compute *c, int done, int bad, dz_error *err) {
    char last[4400] = "", hint[4600] = "";
    int steps = 0; /* the suggested step: the last checkpoint's (rank 0 reads the folder) */
    if (c->rank0 && dz_checkpoint_latest(rf->dir, last, sizeof last, &steps, NULL) != DZ_OK) steps = 0;
    if (steps > 0) snprintf(hint, sizeof hint, "the last good checkpoint is %s; ", last);
    return dz_fail(err, DZ_ERR_INVALID,
                   "training stopped at step %d: %d non-finite losses in a row (--max-bad-steps %d), and no checkpoint "
                   "is written from diverged weights; %s--resume would diverge again. Go on from an earlier step with a "
                   "lower learning rate in a new run folder: distzo train --resume-from %s:%d --lr <lower> --out <new> "
                   "(any step of the log; metrics.jsonl shows where the loss grew)", done, bad,
                   c->cfg->optim.max_bad_steps, hint, rf->dir, steps);
}

/* The selection score an evaluation row of metrics.jsonl carries (NaN if none), as the
 * float32 the run kept (the text "0.4977064" reads back as another double). */
static double row_score(int lm, const dz_metrics_row *r) {
    if (!r->has_eval) return NAN;
    return dz_metrics_value(lm ? -r->dev_loss : r->dev_accuracy);
}

static double row_test_score(int lm, const dz_metrics_row *r) {
    if (!r->has_eval) return NAN;
    return dz_metrics_value(lm ? -r->test_loss : r->test_accuracy);
}

dz_status dz_run_folder_base_scores(const dz_run_folder *rf, int lm, double *base_dev, double *base_test, int *found,
                                    dz_error *err) {
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", rf->dir);
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    dz_metrics_torn torn; /* said by dz_run_folder_restore_best, which reads the file next */
    *found = 0;
    if (!dz_file_exists(mp)) return DZ_OK;
    dz_status st = dz_metrics_read_quiet(mp, &rows, &n, &torn, err);
    for (size_t i = 0; st == DZ_OK && i < n && !*found; i++)
        if (rows[i].step == 0 && rows[i].has_eval)
            *base_dev = row_score(lm, &rows[i]), *base_test = row_test_score(lm, &rows[i]), *found = 1;
    free(rows);
    return st;
}

/* The checkpoint's trainer_state.json (or the base model's score, before any replay),
 * then evaluations logged after the checkpoint. */
dz_status dz_run_folder_restore_best(dz_run_folder *rf, int lm, double base_dev, double base_test, dz_error *err) {
    rf->best = (dz_best){.dev = -INFINITY, .test = NAN, .step = 0};
    dz_status st = DZ_OK;
    if (rf->ckpt_steps > 0) {
        char sp[4400], *text = NULL;
        snprintf(sp, sizeof sp, "%s/checkpoint-%d/trainer_state.json", rf->dir, rf->ckpt_steps);
        if ((st = dz_read_file(sp, &text, NULL, err)) != DZ_OK) return st;
        cJSON *o = cJSON_Parse(text);
        free(text);
        const cJSON *bd = cJSON_GetObjectItemCaseSensitive(o, "best_dev");
        const cJSON *bt = cJSON_GetObjectItemCaseSensitive(o, "best_test");
        const cJSON *bs = cJSON_GetObjectItemCaseSensitive(o, "best_step");
        if (!cJSON_IsObject(o)) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object (the file is damaged)", sp);
        } else if (!cJSON_IsNumber(bd) || !cJSON_IsNumber(bs)) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: best_dev/best_step missing", sp);
        } else {
            /* -1e300 is how state_json writes "none yet" (JSON has no -inf) */
            /* an older distzo wrote unrounded scores: rounded as this run's are */
            rf->best.dev = bd->valuedouble <= -1e300 ? -INFINITY : dz_metrics_value(bd->valuedouble);
            rf->best.step = bs->valueint;
            rf->best.test = cJSON_IsNumber(bt) && bt->valuedouble > -1e300 ? dz_metrics_value(bt->valuedouble) : NAN;
        }
        cJSON_Delete(o);
    } else {
        rf->best.dev = isfinite(base_dev) ? dz_metrics_value(base_dev) : -INFINITY;
        rf->best.test = dz_metrics_value(base_test);
    }
    char mp[4400];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", rf->dir);
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    int64_t last = 0; /* rows count steps done; row 0 is the evaluation before training */
    dz_metrics_torn torn; /* said where resume rewrites the file */
    if (st == DZ_OK && dz_file_exists(mp)) st = dz_metrics_read_quiet(mp, &rows, &n, &torn, err);
    rf->before_dev = base_dev, rf->before_test = base_test;
    for (size_t i = 0; st == DZ_OK && i < n; i++) {
        last = rows[i].step > last ? rows[i].step : last;
        if (rows[i].step == 0 && rows[i].has_eval) /* the scores before training, for the summary */
            rf->before_dev = row_score(lm, &rows[i]), rf->before_test = row_test_score(lm, &rows[i]);
        const double score = row_score(lm, &rows[i]);
        if (rows[i].step > rf->ckpt_steps && score > rf->best.dev) {
            rf->best.dev = score, rf->best.step = (int)rows[i].step;
            rf->best.test = row_test_score(lm, &rows[i]);
        }
    }
    free(rows);
    /* steps logged without their metrics row (killed while evaluating or writing best/):
     * the seed log keeps step indices 0..keep */
    const int64_t keep = (last > (int64_t)rf->ckpt_steps ? last : (int64_t)rf->ckpt_steps) - 1;
    if (st == DZ_OK && (int64_t)dz_seedlog_next_step(rf->log) - 1 > keep)
        st = dz_seedlog_truncate_after(rf->log, keep, err);
    return st;
}
