/* Resume: where the weights come from, and the steps after the checkpoint replayed from
 * the seed log, bitwise what the uninterrupted run did. World rank 0 reads the run folder
 * and tells the others, so every rank continues from the same state. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "distzo/log.h"
#include "distzo/progress.h"
#include "parallel/agree.h"
#include "parallel/comm.h"
#include "run/curvature_file.h"
#include "run/run_files.h"
#include "run/trainer.h"

/* trainer_state.json's weights_checksum: 0, 1 when it has none (an older distzo's), or
 * -1 (said) when it cannot be read or its steps_done is not the folder's checkpoint-N. */
static int written_checksum(const char *ckpt, int steps, uint64_t *sum) {
    char sp[4400], *text = NULL;
    snprintf(sp, sizeof sp, "%s/trainer_state.json", ckpt);
    dz_error e = {0};
    if (dz_read_file(sp, &text, NULL, &e) != DZ_OK) return dz_log(DZ_LOG_WARN, "%s", e.msg), -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(o)) { /* damaged, not an older distzo's: the checkpoint is not taken */
        cJSON_Delete(o);
        return dz_log(DZ_LOG_WARN, "%s: not a JSON object (the file is damaged)", sp), -1;
    }
    const cJSON *done = cJSON_GetObjectItemCaseSensitive(o, "steps_done");
    if (done && (!cJSON_IsNumber(done) || done->valuedouble != (double)steps)) {
        cJSON_Delete(o);
        return dz_log(DZ_LOG_WARN, "%s: steps_done is not %d, the folder's step (the file belongs to another checkpoint "
                      "or is damaged)", sp, steps), -1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "weights_checksum");
    char *end = NULL;
    const int rc = !v ? 1 : cJSON_IsString(v) && (*sum = strtoull(v->valuestring, &end, 16), end && !*end) ? 0 : -1;
    if (rc < 0) dz_log(DZ_LOG_WARN, "%s: weights_checksum is not a hex string", sp);
    cJSON_Delete(o);
    return rc;
}

/* Rank 0: 1 when the checkpoint's weights are as written (their checksum is
 * trainer_state.json's); 0, said with both checksums, when they are not (bit rot, a torn
 * copy) or cannot be loaded. A checkpoint from before checksums is taken, with a warning. */
static int checkpoint_intact(const dz_trainer *tr, const char *ckpt, int steps) {
    uint64_t want = 0, got = 0;
    const int rc = written_checksum(ckpt, steps, &want);
    if (rc > 0)
        dz_log(DZ_LOG_WARN, "%s: trainer_state.json has no weights_checksum (written by an older distzo): its weights "
               "are taken unchecked", ckpt);
    if (rc != 0) return rc > 0;
    dz_zo_setup *s = NULL;
    dz_error e = {0};
    dz_status st = dz_run_weights_alone(&tr->cfg, ckpt, tr->cfg.store.spec, &s, &e);
    if (st == DZ_OK) st = dz_zo_checksum_slice(dz_setup_zo_engine(s), 0, 1, &got, &e);
    dz_setup_free(s);
    if (st != DZ_OK) dz_log(DZ_LOG_WARN, "%s: the weights cannot be loaded: %s", ckpt, e.msg);
    else if (got != want)
        dz_log(DZ_LOG_WARN, "%s/%s: the weights' checksum is %016llx, trainer_state.json says %016llx: the checkpoint "
               "is damaged", ckpt, dz_lora_is_folder(ckpt) ? "adapter_model.safetensors" : "model.safetensors",
               (unsigned long long)got, (unsigned long long)want);
    return st == DZ_OK && got == want;
}

dz_status dz_trainer_weights_path(dz_trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps,
                                  dz_error *err) {
    dz_status st = DZ_OK;
    *ckpt_steps = 0;
    snprintf(path, cap, "%s", tr->cfg.model);
    if (resume && tr->comp.rank0) {
        st = dz_checkpoint_latest(tr->folder.dir, path, cap, ckpt_steps, err);
        if (st == DZ_ERR_NOT_FOUND && *ckpt_steps > 0) { /* removed, or its state file: as damage */
            dz_log(DZ_LOG_WARN, "%s (LATEST's) is gone or has no trainer_state.json: rebuilding the weights from the base "
                   "model %s and the seed log", path, tr->cfg.model);
        } else if (st == DZ_OK && !checkpoint_intact(tr, path, *ckpt_steps)) { /* export's path: the log onto the base model */
            dz_log(DZ_LOG_WARN, "rebuilding the weights of %s from the base model %s and the seed log", path,
                   tr->cfg.model);
            st = DZ_ERR_NOT_FOUND;
        }
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

/* Rank 0: the log holds the steps up to the checkpoint (and none missing before it), said
 * in the steps a user sees (checkpoint-N, metrics.jsonl): the log's records count from 0. */
static dz_status log_reaches(const dz_trainer *tr, const dz_seedlog *log, int ckpt_steps, dz_error *err) {
    const int64_t first = (int64_t)dz_seedlog_get_header(log)->start_step + 1, logged = dz_seedlog_next_step(log);
    if (ckpt_steps < first - 1)
        return dz_fail(err, DZ_ERR_INVALID, "%s/seeds.log starts at step %lld, after checkpoint-%d: it cannot "
                       "continue that checkpoint", tr->folder.dir, (long long)first, ckpt_steps);
    if (ckpt_steps > logged)
        return dz_fail(err, DZ_ERR_FORMAT, "%s/seeds.log ends after step %lld but the checkpoint is checkpoint-%d: "
                       "steps %lld..%d are missing (the log must be synced before a checkpoint); train --resume-from "
                       "%s:%lld --out NEW recomputes them", tr->folder.dir, (long long)logged, ckpt_steps,
                       (long long)logged + 1, ckpt_steps, tr->folder.dir, (long long)logged);
    return DZ_OK;
}

/* Rank 0: the run's seed log, read and checked to reach the checkpoint before it is opened
 * for writing. Missing, it is made anew only for a run killed before it
 * existed (no checkpoint, no step in metrics.jsonl); a run that got further cannot be
 * replayed without it, and nothing is written. *made: the log was created here. */
static dz_status open_log(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps, int *made,
                          dz_error *err) {
    const int sync_every = tr->cfg.schedule.log_sync_every;
    dz_seedlog *peek = NULL; /* read first: the writer's open cuts a torn tail, and a refused resume writes nothing */
    dz_status st = dz_seedlog_peek(log_path, h, &peek, err);
    if (st == DZ_OK) st = log_reaches(tr, peek, ckpt_steps, err);
    dz_seedlog_close(peek, NULL);
    if (st == DZ_OK) st = dz_seedlog_open(log_path, h, sync_every, &tr->folder.log, err);
    if (st == DZ_OK || dz_file_exists(log_path)) return st;
    dz_run_reached r;
    if ((st = dz_run_reached_read(tr->folder.dir, &r, err)) != DZ_OK) return st;
    if (ckpt_steps > 0 || r.metrics > 0)
        return dz_fail(err, DZ_ERR_NOT_FOUND, "%s is missing, but the run reached step %lld (%s): its steps cannot be "
                       "replayed without it; restore the file, or start a new run (--out)", log_path,
                       (long long)(ckpt_steps > r.metrics ? ckpt_steps : r.metrics),
                       ckpt_steps >= r.metrics ? "LATEST" : "metrics.jsonl");
    *made = 1; /* killed before the log existed */
    return dz_seedlog_create(log_path, h, sync_every, &tr->folder.log, err);
}

/* The steps 1..n whose src[] is which, as "3-8, 12", in buf. */
static void ranges(const unsigned char *src, int64_t n, unsigned char which, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t a = 1; a <= n && used + 48 < cap; a++) {
        if (src[a] != which) continue;
        int64_t b = a;
        while (b + 1 <= n && src[b + 1] == which) b++;
        used += (size_t)snprintf(buf + used, cap - used, a == b ? "%s%lld" : "%s%lld-%lld", used ? ", " : "",
                                 (long long)a, (long long)b);
        a = b;
    }
}

static int by_step(const void *a, const void *b) {
    const int64_t x = ((const dz_metrics_row *)a)->step, y = ((const dz_metrics_row *)b)->step;
    return (x > y) - (x < y);
}

enum { ROW_GONE, ROW_KEPT, ROW_FROM_CSV, ROW_FROM_LOG }; /* where a rebuilt metrics.jsonl row comes from */

/* rows[0..n) whose step 0..last has no row yet (src[step] == ROW_GONE) into all[*m], as from. */
static size_t take_rows(const dz_metrics_row *rows, size_t n, int64_t last, unsigned char from, unsigned char *src,
                        dz_metrics_row *all, size_t *m) {
    size_t taken = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].step >= 0 && rows[i].step <= last && src[rows[i].step] == ROW_GONE)
            src[rows[i].step] = from, all[(*m)++] = rows[i], taken++;
    return taken;
}

/* Rows metrics.jsonl lost, said: from metrics.csv (whole), or from the log's records. */
static void say_rebuilt(const char *path, const unsigned char *src, int64_t last, size_t csv, size_t lost) {
    char steps[512];
    if (csv) ranges(src, last, ROW_FROM_CSV, steps, sizeof steps);
    if (csv)
        dz_log(DZ_LOG_WARN, "%s: the rows of steps %s are gone (the file was cut or removed): restored from "
               "metrics.csv", path, steps);
    if (lost) ranges(src, last, ROW_FROM_LOG, steps, sizeof steps);
    if (lost)
        dz_log(DZ_LOG_WARN, "%s: the rows of steps %s are gone (the file was cut or removed): rebuilt from the seed "
               "log with their step, lr and g, in metrics.jsonl, metrics.csv and the TensorBoard events; their loss "
               "and evaluations are lost", path, steps);
}

/* Rank 0, once the log is settled: rows of metrics.jsonl the log holds steps for but the
 * file lost (cut, or removed) are said and rebuilt: whole from metrics.csv (its rows have
 * jsonl's digits) where it has them, else from the log's records (step, lr, g; the loss
 * and evaluations are gone for good). A torn tail is dropped (said once, here). */
static dz_status rebuild_metrics(dz_trainer *tr, dz_error *err) {
    char path[4400], csv_path[4400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->folder.dir);
    snprintf(csv_path, sizeof csv_path, "%s/metrics.csv", tr->folder.dir);
    const size_t nlog = dz_seedlog_count(tr->folder.log);
    const int64_t last = dz_seedlog_next_step(tr->folder.log); /* rows 1..last: the steps the log holds */
    dz_metrics_row *rows = NULL, *csv = NULL;
    size_t n = 0, ncsv = 0;
    dz_metrics_torn torn = {0};
    dz_status st = dz_file_exists(path) ? dz_metrics_read_quiet(path, &rows, &n, &torn, err) : DZ_OK;
    if (st == DZ_OK && dz_file_exists(csv_path)) st = dz_metrics_csv_read(csv_path, &csv, &ncsv, err);
    unsigned char *src = st == DZ_OK ? calloc((size_t)last + 1, 1) : NULL;
    dz_metrics_row *all = src ? malloc(sizeof *all * (n + ncsv + nlog + 1)) : NULL;
    if (st == DZ_OK && !all) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    size_t m = 0, from_csv = 0, lost = 0;
    if (st == DZ_OK) take_rows(rows, n, last, ROW_KEPT, src, all, &m);
    if (st == DZ_OK) from_csv = take_rows(csv, ncsv, last, ROW_FROM_CSV, src, all, &m);
    for (size_t i = 0; st == DZ_OK && i < nlog; i++) {
        const dz_seedlog_record r = dz_seedlog_get(tr->folder.log, i);
        const int64_t step = (int64_t)r.step + 1;
        if (step > last || src[step] != ROW_GONE) continue;
        double g = 0.0;
        for (int j = 0; j < tr->cfg.optim.q; j++) g += (double)r.g[j] / tr->cfg.optim.q;
        src[step] = ROW_FROM_LOG, lost++;
        all[m++] = (dz_metrics_row){.step = step, .loss = NAN, .g = g, .lr = r.lr, .seconds = NAN};
    }
    if (st == DZ_OK) dz_metrics_say_torn(path, &torn); /* once, here, where the file is rewritten without it */
    if (st == DZ_OK) say_rebuilt(path, src, last, from_csv, lost);
    if (st == DZ_OK && (from_csv || lost || torn.bytes)) {
        qsort(all, m, sizeof *all, by_step);
        st = dz_metrics_write_rows(path, all, m, err);
    }
    if (st == DZ_OK && src && src[0] == ROW_GONE && (lost || from_csv || n))
        dz_log(DZ_LOG_WARN, "%s: row 0 (the scores before training) is gone: it cannot be rebuilt", path);
    free(rows), free(csv), free(src), free(all);
    return st;
}

/* curvature.bin's data against trainer_state.json's curvature_checksum (absent: an older
 * distzo's checkpoint, taken as before): a file of another checkpoint is refused. */
static dz_status curvature_of_checkpoint(const char *dir, const float *h, size_t n, dz_error *err) {
    char sp[4400], *text = NULL;
    snprintf(sp, sizeof sp, "%s/trainer_state.json", dir);
    dz_status st = dz_read_file(sp, &text, NULL, err);
    if (st != DZ_OK) return st;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "curvature_checksum");
    char *end = NULL;
    const unsigned long want = cJSON_IsString(v) ? strtoul(v->valuestring, &end, 16) : 0;
    const uint32_t got = dz_curvature_checksum(h, n);
    if (v && !(cJSON_IsString(v) && end && !*end && end != v->valuestring))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field curvature_checksum is not a hex string", sp);
    else if (v && want != got)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s/%s: field curvature_checksum: its data's checksum is %08x, but "
                     "trainer_state.json says %08lx: the file belongs to another checkpoint or is damaged (the seed log "
                     "rebuilds it: distzo train --resume-from RUN:STEP --out NEW)", dir, DZ_CURVATURE_FILE, (unsigned)got,
                     want);
    cJSON_Delete(o);
    return st;
}

/* HiZOO: the checkpoint's curvature state, before the log's records are replayed onto
 * it (every rank reads it, as it read the weights). */
static dz_status restore_curvature(dz_trainer *tr, int ckpt_steps, dz_error *err) {
    size_t n = 0;
    float *h = dz_zo_curvature(tr->comp.e, &n);
    if (!h || ckpt_steps <= 0) return DZ_OK;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoint-%d", tr->folder.dir, ckpt_steps);
    dz_status st = dz_curvature_load(dir, h, n, dz_compute_table_hash(dz_model_params(tr->comp.m)),
                                     tr->cfg.optim.hizoo_rank, err);
    return st == DZ_OK ? curvature_of_checkpoint(dir, h, n, err) : st;
}

/* The base model's scores, which start the best-so-far of a resume without a checkpoint:
 * metrics.jsonl's row 0 when rank 0 finds them there (*logged), else every rank evaluates
 * (a large model's evaluation is minutes: not repeated when the run already logged it). */
static dz_status base_scores(dz_trainer *tr, double *dev, double *test, int *logged, dz_error *err) {
    int found = 0;
    dz_status st = tr->comp.rank0 ? dz_run_folder_base_scores(&tr->folder, tr->data.lm, dev, test, &found, err)
                                  : DZ_OK;
    if ((st = dz_comm_share_outcome(tr->comp.comm, st, 0, err)) != DZ_OK) return st; /* metrics.jsonl unreadable */
    double row0[3] = {found, *dev, *test}; /* rank 0's: found, and the scores */
    if ((st = dz_comm_bcast(tr->comp.comm, row0, sizeof row0, 0, err)) != DZ_OK) return st;
    *logged = row0[0] != 0;
    if (*logged)
        *dev = row0[1], *test = row0[2];
    else if ((st = dz_evaluate_sets(&tr->data, dev, test, err)) != DZ_OK) /* as row 0 was made (F1 for generation) */
        return st;
    tr->base_known = 1, tr->base_dev = *dev, tr->base_test = *test;
    return DZ_OK;
}

/* A replay record as rank 0 sends it to the others. */
typedef struct replay_rec {
    uint32_t step;
    float lr, g[DZ_ZO_MAX_Q + 1]; /* + HiZOO's curvature step */
} replay_rec;

dz_status dz_trainer_resume(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps,
                            int *start_step, dz_error *err) {
    const dz_train_config *c = &tr->cfg;
    const dz_zo_params zp = dz_train_zo_params(&c->optim);
    double base_dev = NAN, base_test = NAN;
    int scores_logged = 0;
    dz_status st = ckpt_steps == 0 ? base_scores(tr, &base_dev, &base_test, &scores_logged, err) : DZ_OK;
    uint64_t count = 0;
    size_t first = 0, n = 0;
    replay_rec *recs = NULL;
    int made_log = 0;
    if (st == DZ_OK && tr->comp.rank0) {
        st = open_log(tr, h, log_path, ckpt_steps, &made_log, err);
        tr->folder.ckpt_steps = ckpt_steps;
        if (st == DZ_OK) st = dz_run_folder_restore_best(&tr->folder, tr->data.lm, base_dev, base_test, err);
        if (st == DZ_OK) st = log_reaches(tr, tr->folder.log, ckpt_steps, err);
        if (st == DZ_OK) st = dz_seedlog_replay_range(tr->folder.log, (int64_t)ckpt_steps - 1, &first, &n, err);
        if (st == DZ_OK) *start_step = (int)dz_seedlog_next_step(tr->folder.log);
        if (st == DZ_OK) st = rebuild_metrics(tr, err);
        if (st == DZ_OK && isnan(tr->folder.before_dev) && isnan(tr->folder.before_test)) {
            int found = 0; /* row 0 restored by the rebuild (from metrics.csv): the summary's scores before training */
            double dev = NAN, test = NAN;
            st = dz_run_folder_base_scores(&tr->folder, tr->data.lm, &dev, &test, &found, err);
            if (found) tr->folder.before_dev = dev, tr->folder.before_test = test;
        }
        count = n;
        if (st != DZ_OK && made_log) { /* a failed resume leaves the folder as it found it */
            dz_seedlog_close(tr->folder.log, NULL);
            tr->folder.log = NULL;
            unlink(log_path);
        }
    }
    st = dz_comm_share_outcome(tr->comp.comm, st, 0, err); /* rank 0's refusal ends every rank with its message */
    tr->folder.ckpt_steps = ckpt_steps;
    const dz_run_folder *rf = &tr->folder;
    double best[5] = {rf->best.dev, rf->best.test, rf->best.step, rf->before_dev, rf->before_test};
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, &count, sizeof count, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, start_step, sizeof *start_step, 0, err);
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, best, sizeof best, 0, err);
    if (st == DZ_OK && !(recs = malloc(sizeof *recs * (count ? count : 1))))
        st = dz_fail(err, DZ_ERR_NOMEM, "resume: out of memory");
    for (size_t i = 0; st == DZ_OK && tr->comp.rank0 && i < count; i++) {
        const dz_seedlog_record r = dz_seedlog_get(tr->folder.log, first + i);
        recs[i].step = r.step, recs[i].lr = r.lr;
        memcpy(recs[i].g, r.g, sizeof(float) * (size_t)dz_zo_log_values(&zp));
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, recs, sizeof *recs * count, 0, err);
    tr->folder.best = (dz_best){.dev = best[0], .test = best[1], .step = (int)best[2]};
    tr->folder.before_dev = best[3], tr->folder.before_test = best[4];
    if (st == DZ_OK) st = restore_curvature(tr, ckpt_steps, err);
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
        dz_log(DZ_LOG_INFO, "resumed %s: checkpoint after %d steps, %llu steps replayed from the seed log%s",
               tr->folder.dir, ckpt_steps, (unsigned long long)count,
               ckpt_steps > 0 ? "" : scores_logged ? ", the base model's scores from metrics.jsonl"
                                                   : ", the base model evaluated again (no scores at step 0 in metrics.jsonl)");
    return st;
}
