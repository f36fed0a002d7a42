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
#include "parallel/comm.h"
#include "run/run_files.h"
#include "run/trainer.h"

/* trainer_state.json's weights_checksum: 0, 1 when it has none (an older distzo's), or
 * -1 (said) when it cannot be read. */
static int written_checksum(const char *ckpt, uint64_t *sum) {
    char sp[4400], *text = NULL;
    snprintf(sp, sizeof sp, "%s/trainer_state.json", ckpt);
    dz_error e = {0};
    if (dz_read_file(sp, &text, NULL, &e) != DZ_OK) return dz_log(DZ_LOG_WARN, "%s", e.msg), -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
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
static int checkpoint_intact(const dz_trainer *tr, const char *ckpt) {
    uint64_t want = 0, got = 0;
    const int rc = written_checksum(ckpt, &want);
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
        dz_log(DZ_LOG_WARN, "%s/model.safetensors: the weights' checksum is %016llx, trainer_state.json says %016llx: "
               "the checkpoint is damaged", ckpt, (unsigned long long)got, (unsigned long long)want);
    return st == DZ_OK && got == want;
}

dz_status dz_trainer_weights_path(dz_trainer *tr, int resume, char *path, size_t cap, int *ckpt_steps,
                                  dz_error *err) {
    dz_status st = DZ_OK;
    *ckpt_steps = 0;
    snprintf(path, cap, "%s", tr->cfg.model);
    if (resume && tr->comp.rank0) {
        st = dz_checkpoint_latest(tr->folder.dir, path, cap, ckpt_steps, err);
        if (st == DZ_OK && !checkpoint_intact(tr, path)) { /* export's path: the log onto the base model */
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

/* Rank 0: the run's seed log. Missing, it is made anew only for a run killed before it
 * existed (no checkpoint, no step in metrics.jsonl); a run that got further cannot be
 * replayed without it, and nothing is written. *made: the log was created here. */
static dz_status open_log(dz_trainer *tr, const dz_seedlog_header *h, const char *log_path, int ckpt_steps, int *made,
                          dz_error *err) {
    const int sync_every = tr->cfg.schedule.log_sync_every;
    dz_status st = dz_seedlog_open(log_path, h, sync_every, &tr->folder.log, err);
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

/* The steps 1..n whose have[] is 0, as "3-8, 12", in buf. */
static void ranges(const unsigned char *have, int64_t n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t a = 1; a <= n && used + 48 < cap; a++) {
        if (have[a]) continue;
        int64_t b = a;
        while (b + 1 <= n && !have[b + 1]) b++;
        used += (size_t)snprintf(buf + used, cap - used, a == b ? "%s%lld" : "%s%lld-%lld", used ? ", " : "",
                                 (long long)a, (long long)b);
        a = b;
    }
}

static int by_step(const void *a, const void *b) {
    const int64_t x = ((const dz_metrics_row *)a)->step, y = ((const dz_metrics_row *)b)->step;
    return (x > y) - (x < y);
}

/* Rank 0, once the log is settled: rows of metrics.jsonl the log holds steps for but the
 * file lost (cut, or removed) are said and rebuilt from the log's records (step, lr, g;
 * the loss and evaluations are gone for good). */
static dz_status rebuild_metrics(dz_trainer *tr, dz_error *err) {
    char path[4400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->folder.dir);
    const size_t nlog = dz_seedlog_count(tr->folder.log);
    const int64_t last = dz_seedlog_next_step(tr->folder.log); /* rows 1..last: the steps the log holds */
    dz_metrics_row *rows = NULL;
    size_t n = 0;
    dz_status st = dz_file_exists(path) ? dz_metrics_read(path, &rows, &n, err) : DZ_OK;
    unsigned char *have = st == DZ_OK ? calloc((size_t)last + 1, 1) : NULL;
    dz_metrics_row *all = have ? malloc(sizeof *all * (n + nlog + 1)) : NULL;
    if (st == DZ_OK && !all) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    size_t m = 0, lost = 0;
    for (size_t i = 0; st == DZ_OK && i < n; i++)
        if (rows[i].step >= 0 && rows[i].step <= last && !have[rows[i].step]) have[rows[i].step] = 1, all[m++] = rows[i];
    for (size_t i = 0; st == DZ_OK && i < nlog; i++) {
        const dz_seedlog_record r = dz_seedlog_get(tr->folder.log, i);
        const int64_t step = (int64_t)r.step + 1;
        if (step > last || have[step]) continue;
        double g = 0.0;
        for (int j = 0; j < tr->cfg.optim.q; j++) g += (double)r.g[j] / tr->cfg.optim.q;
        all[m++] = (dz_metrics_row){.step = step, .loss = NAN, .g = g, .lr = r.lr, .seconds = NAN}, lost++;
    }
    if (st == DZ_OK && lost) {
        char gone[512];
        ranges(have, last, gone, sizeof gone);
        dz_log(DZ_LOG_WARN, "%s: the rows of steps %s are gone (the file was cut or removed): rebuilt from the seed "
               "log with their step, lr and g; their loss and evaluations are lost", path, gone);
        qsort(all, m, sizeof *all, by_step);
        st = dz_metrics_write_rows(path, all, m, err);
    }
    if (st == DZ_OK && have && !have[0] && (lost || n))
        dz_log(DZ_LOG_WARN, "%s: row 0 (the scores before training) is gone: it cannot be rebuilt", path);
    free(rows), free(have), free(all);
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
    int made_log = 0;
    if (st == DZ_OK && tr->comp.rank0) {
        st = open_log(tr, h, log_path, ckpt_steps, &made_log, err);
        tr->folder.ckpt_steps = ckpt_steps;
        if (st == DZ_OK) st = dz_run_folder_restore_best(&tr->folder, tr->data.lm, base_dev, base_test, err);
        if (st == DZ_OK) st = dz_seedlog_replay_range(tr->folder.log, (int64_t)ckpt_steps - 1, &first, &n, err);
        if (st == DZ_OK) *start_step = (int)dz_seedlog_next_step(tr->folder.log);
        if (st == DZ_OK) st = rebuild_metrics(tr, err);
        count = n;
        if (st != DZ_OK && made_log) { /* a failed resume leaves the folder as it found it */
            dz_seedlog_close(tr->folder.log, NULL);
            tr->folder.log = NULL;
            unlink(log_path);
        }
    }
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
        memcpy(recs[i].g, r.g, sizeof(float) * (size_t)c->optim.q);
    }
    if (st == DZ_OK) st = dz_comm_bcast(tr->comp.comm, recs, sizeof *recs * count, 0, err);
    tr->folder.best = (dz_best){.dev = best[0], .test = best[1], .step = (int)best[2]};
    tr->folder.before_dev = best[3], tr->folder.before_test = best[4];
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
