/* distzo serve: the federated coordinator (docs/FEDERATED.md). It owns the run folder
 * (run.json, federated.json, seeds.log, metrics.jsonl; the run lock) and a replica of the
 * weights, and runs the rounds: each assigns the q slots (draws round * q + slot) to the
 * connected workers in machine-id order, closes when every assigned slot is in, at the
 * quorum or at the deadline, and becomes the seed-log record of step = round:
 *   g[slot] = the decoded value sent for it (0 for a slot nobody delivered),
 *   lr      = lr_at(round) * q / contributions (so the update is the mean of what came).
 * The record is appended (one write: a killed coordinator loses nothing it announced)
 * before the round's end is announced, applied to the replica, and the replica's checksum
 * sent with the next state so workers can check theirs. HTTP requests run on the server's
 * threads and meet the round loop under one mutex. */
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
#include "distzo/log.h"
#include "distzo/setup.h"
#include "federated/admission.h"
#include "federated/coordinator.h"
#include "federated/http.h"
#include "federated/protocol.h"
#include "federated/replica.h"
#include "federated/settings.h"
#include "run/evaluate.h"
#include "run/metrics.h"
#include "run/run_files.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"

/* ---- the rounds (the caller's thread) -------------------------------------------------- */

/* Forgets workers silent for longer than --worker-timeout; returns how many remain. */
static int prune_machines(coordinator *c) {
    const double now = dz_now();
    int n = 0;
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++) {
        if (!c->m[i].id) continue;
        if (c->m[i].polling) c->m[i].last_seen = now;
        if (now - c->m[i].last_seen > c->fed.worker_timeout) {
            dz_log(DZ_LOG_INFO, "machine %u gone (no request for %.0f s)", c->m[i].id, now - c->m[i].last_seen);
            c->m[i].id = 0;
            pthread_cond_broadcast(&c->cv);
        } else {
            n++;
        }
    }
    return n;
}

static void wait_a_little(coordinator *c, double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    const long long ns = until.tv_nsec + (long long)(seconds * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL), until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&c->cv, &c->mu, &until);
}

/* The connected workers that may get slots (admission.h), in id order, into order;
 * returns how many. */
static int eligible_workers(const coordinator *c, int *order) {
    int n = 0, ok[DZ_FED_MAX_MACHINES];
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++)
        if (c->m[i].id) order[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort by id: n is small */
        for (int j = i; j > 0 && c->m[order[j]].id < c->m[order[j - 1]].id; j--) {
            const int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    dz_fed_candidate cand[DZ_FED_MAX_MACHINES] = {{0}};
    for (int k = 0; k < n; k++) { /* caught up: but for the record just published, which it has not heard of yet */
        const machine *m = &c->m[order[k]];
        cand[k] = (dz_fed_candidate){.addr = m->addr, .proven = m->proven,
                                     .caught_up = (uint64_t)m->applied_asked + 1 >= c->published};
    }
    dz_fed_eligible(cand, n, c->fed.max_joins_per_client, ok);
    int kept = 0;
    for (int k = 0; k < n; k++)
        if (ok[k]) order[kept++] = order[k];
    return kept;
}

/* A round that ran to its deadline: the new workers that were given slots and sent nothing
 * are forgotten (joining again is what --max-joins-per-client counts). */
static void forget_no_shows(coordinator *c) {
    if (c->n_in >= c->n_assigned || (c->fed.quorum > 0 && c->n_in >= c->fed.quorum)) return;
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++) {
        machine *m = &c->m[i];
        if (!m->id || m->proven || m->submitted || m->n_slots == 0) continue;
        dz_log(DZ_LOG_INFO, "machine %u (new, from %s) sent nothing for round %u by its deadline: forgotten", m->id,
               m->addr, c->round);
        m->id = 0;
    }
}

/* Opens round c->round: the eligible workers in id order (a rotating start when there
 * are more than slots) get samples_per_worker slots each, numbered in that order. */
static void open_round(coordinator *c) {
    int order[DZ_FED_MAX_MACHINES];
    const int n = eligible_workers(c, order);
    const int per = c->fed.samples_per_worker, takers = (int)c->q / per < n ? (int)c->q / per : n;
    const int start = n > takers ? (int)(c->round % (uint32_t)n) : 0;
    int chosen[DZ_FED_MAX_MACHINES];
    for (int k = 0; k < takers; k++) chosen[k] = order[(start + k) % n];
    for (int i = 1; i < takers; i++) /* slots in machine-id order */
        for (int j = i; j > 0 && c->m[chosen[j]].id < c->m[chosen[j - 1]].id; j--) {
            const int t = chosen[j];
            chosen[j] = chosen[j - 1], chosen[j - 1] = t;
        }
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++) c->m[i].n_slots = 0, c->m[i].submitted = 0;
    uint32_t slot = 0;
    for (int k = 0; k < takers; k++) {
        machine *m = &c->m[chosen[k]];
        for (int s = 0; s < per; s++) m->slots[m->n_slots++] = slot++;
    }
    c->n_assigned = (int)slot, c->n_in = 0, c->loss_sum = 0, c->loss_n = 0;
    if (c->fed.seed_pool) /* a round opened again draws the same seeds: they depend on the log alone */
        dz_seed_pool_draw(&c->pool, (dz_seed_sampling)c->fed.seed_sampling, c->train.optim.seed, c->round, c->prob,
                          c->seeds);
    memset(c->g, 0, sizeof c->g);
    memset(c->present, 0, sizeof c->present);
    c->open = 1;
    c->deadline = dz_now() + c->fed.round_timeout;
    c->version++;
    pthread_cond_broadcast(&c->cv);
}

static int round_complete(const coordinator *c) {
    if (c->n_in >= c->n_assigned) return 1;
    if (c->fed.quorum > 0 && c->n_in >= c->fed.quorum) return 1;
    return dz_now() >= c->deadline;
}

static int connected(const coordinator *c) {
    int n = 0;
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++) n += c->m[i].id != 0;
    return n;
}

static int by_magnitude(const void *a, const void *b) {
    const float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x > y) - (x < y);
}

/* --robust-clip C: every |g| of the round at most C times the median |g| of its
 * contributions (the lower middle one for an even count), so one worker sending the
 * largest codes moves the model no more than C typical contributions would. */
static void robust_clip(const coordinator *c, float *g) {
    if (!(c->fed.robust_clip > 0)) return;
    float in[DZ_FED_MAX_SLOTS];
    int n = 0;
    for (uint32_t j = 0; j < c->q; j++)
        if (c->present[j]) in[n++] = g[j];
    if (n < 3) return; /* no majority to speak of */
    qsort(in, (size_t)n, sizeof *in, by_magnitude);
    const float bound = c->fed.robust_clip * fabsf(in[(n - 1) / 2]);
    for (uint32_t j = 0; j < c->q; j++)
        if (c->present[j] && fabsf(g[j]) > bound) g[j] = g[j] > 0 ? bound : -bound;
}

/* The replica after one more record: applied (plain), or accumulated and synced (pool). */
static dz_status advance(coordinator *c, dz_zo_engine *e, uint32_t step, float lr, const float *vals, dz_error *err) {
    if (!c->fed.seed_pool) return dz_fed_apply(e, step, lr, vals, err);
    dz_status st = dz_seed_pool_add(&c->pool, lr, vals, err);
    return st == DZ_OK ? dz_fed_pool_sync(e, &c->weights, &c->pool, err) : st;
}

/* RUN/checkpoint-N every --checkpoint-every rounds: the replica's weights in HF layout, for
 * `distzo eval` while the run goes on (a resume replays the log; it needs no checkpoint). */
static dz_status checkpoint(coordinator *c, dz_zo_engine *e, uint32_t done, dz_error *err) {
    const int every = c->train.schedule.checkpoint_every;
    if (every <= 0 || done % (uint32_t)every != 0) return DZ_OK;
    char state[128];
    snprintf(state, sizeof state, "{\"federated\": true, \"rounds_done\": %u}\n", done);
    dz_status st = dz_zo_flush(e, err);
    if (st == DZ_OK)
        st = dz_checkpoint_write(c->run_dir, "checkpoint", (int)done, dz_setup_model(c->setup), c->tok, state, NULL,
                                 c->train.schedule.keep_checkpoints, err);
    return st;
}

/* --test: the replica's test score into row (every --eval-every rounds, after the last and
 * before the first); info gets it for the progress line. */
static dz_status evaluate(coordinator *c, uint32_t done, dz_metrics_row *row, dz_fed_round_info *info, dz_error *err) {
    const int every = c->train.schedule.eval_every;
    info->test_score = NAN;
    if (!c->eval || !(done == 0 || done == (uint32_t)c->train.optim.steps || (every > 0 && done % (uint32_t)every == 0)))
        return DZ_OK;
    double dev, test;
    dz_status st = dz_evaluate_sets(&c->eval->data, &dev, &test, err);
    if (st == DZ_OK) dz_evaluate_row(&c->eval->data, dev, test, NAN, row);
    info->has_eval = st == DZ_OK, info->lm = c->eval->data.lm;
    info->test_score = c->eval->data.lm ? row->test_loss : row->test_accuracy;
    return st;
}

/* One round, from waiting for workers to the announced record. */
static dz_status run_round(coordinator *c, dz_fed_round_info *info, dz_error *err) {
    const double t0 = dz_now();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        int order[DZ_FED_MAX_MACHINES];
        while (prune_machines(c) < c->fed.min_workers || eligible_workers(c, order) == 0) wait_a_little(c, 0.2);
        open_round(c);
        while (!round_complete(c)) wait_a_little(c, 0.05);
        c->open = 0; /* workers hear of it with the record (or the round opened again): no version of its own */
        forget_no_shows(c);
        if (c->n_in > 0) break;
        dz_log(DZ_LOG_WARN, "round %u: nothing arrived within --round-timeout %g s; opening it again", c->round,
               c->fed.round_timeout);
    }
    const dz_train_optim *o = &c->train.optim;
    const float lr = dz_lr_at(o->lr_schedule, o->lr, o->warmup, o->steps, (int)c->round);
    const float lr_log = (float)((double)lr * (double)c->q / (double)c->n_in); /* the mean of what came */
    float g[DZ_FED_MAX_SLOTS]; /* the record: the q g, then (a pool run) the q seed indices */
    double gsum = 0;
    for (uint32_t j = 0; j < c->q; j++) g[j] = c->present[j] ? c->g[j] : 0.0f;
    robust_clip(c, g);
    for (uint32_t j = 0; j < c->q; j++) gsum += g[j];
    for (uint32_t j = 0; c->fed.seed_pool && j < c->q; j++) g[c->q + j] = (float)c->seeds[j];
    const uint32_t step = c->round;
    *info = (dz_fed_round_info){.round = (int)step + 1, .rounds = o->steps, .contributions = c->n_in,
                                .slots = c->n_assigned, .workers = connected(c),
                                .loss = c->loss_n ? c->loss_sum / c->loss_n : NAN};
    dz_status st = dz_seedlog_append(c->log, step, lr_log, g, err); /* under the lock: /v1/log reads the log */
    pthread_mutex_unlock(&c->mu);
    dz_zo_engine *e = dz_setup_zo_engine(c->setup);
    uint64_t sum = 0;
    if (st == DZ_OK) st = advance(c, e, step, lr_log, g, err);
    if (st == DZ_OK) st = dz_fed_checksum(e, &sum, err);
    dz_metrics_row row = {.step = step + 1, .loss = info->loss, .g = gsum / c->n_in, .lr = lr_log,
                                .seconds = dz_now() - t0, .dev_accuracy = NAN, .test_accuracy = NAN,
                                .best_dev_accuracy = NAN, .dev_loss = NAN, .test_loss = NAN};
    if (st == DZ_OK) st = evaluate(c, step + 1, &row, info, err);
    if (st == DZ_OK) st = dz_metrics_append(c->metrics, &row, err);
    if (st == DZ_OK) st = checkpoint(c, e, step + 1, err);
    if (st != DZ_OK) return st;
    pthread_mutex_lock(&c->mu);
    c->published = step + 1, c->checksum = sum, c->round = step + 1;
    if (c->fed.seed_pool) dz_fed_pool_state_encode(c->published, c->pool.k, c->pool.acc, c->pool_state);
    c->version++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    info->seconds = dz_now() - t0;
    return DZ_OK;
}

/* Metrics row 0: the base model's scores, before the first round. */
static dz_status evaluate_base(coordinator *c, dz_fed_round_cb cb, void *user, dz_error *err) {
    dz_metrics_row row = {.step = 0, .loss = NAN, .g = NAN, .lr = NAN, .seconds = 0, .dev_accuracy = NAN,
                          .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN, .test_loss = NAN};
    dz_fed_round_info info = {.round = 0, .rounds = c->train.optim.steps, .loss = NAN};
    const double t0 = dz_now();
    dz_status st = evaluate(c, 0, &row, &info, err);
    row.seconds = info.seconds = dz_now() - t0;
    if (st == DZ_OK) st = dz_metrics_append(c->metrics, &row, err);
    if (st == DZ_OK && cb) cb(&info, user);
    return st;
}

/* Finished (st: how): workers may fetch the last records for up to --linger seconds. */
static void linger(coordinator *c, dz_status st, double seconds, dz_fed_http_server *server) {
    pthread_mutex_lock(&c->mu);
    c->finished = st == DZ_OK;
    c->version++;
    pthread_cond_broadcast(&c->cv);
    const double until = dz_now() + seconds;
    while (st == DZ_OK && dz_now() < until) {
        int behind = 0;
        for (int i = 0; i < DZ_FED_MAX_MACHINES; i++) behind += c->m[i].id && c->m[i].applied < c->published;
        if (!behind) break;
        wait_a_little(c, 0.05);
        prune_machines(c);
    }
    pthread_mutex_unlock(&c->mu);
    dz_fed_http_stop(server);
}

static void free_coordinator(coordinator *c) {
    if (c->eval) dz_prepare_free(&c->eval->comp, &c->eval->data); /* its setup is c->setup */
    else dz_setup_free(c->setup);
    free(c->eval);
    dz_seed_pool_free(&c->pool);
    dz_seed_pool_weights_free(&c->weights);
    free(c->prob);
    free(c->pool_state);
    dz_tokenizer_free(c->tok);
    free(c->run_json);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

dz_status dz_fed_serve(const dz_fed_serve_config *cfg, dz_fed_round_cb cb, void *user, dz_error *err) {
    coordinator *c = calloc(1, sizeof *c);
    if (!c) return dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->train = cfg->train, c->fed = cfg->fed, c->run_dir = cfg->train.out_dir, c->next_id = 1;
    c->q = (uint32_t)cfg->train.optim.q;
    char token[DZ_FED_TOKEN_MAX + 1], url[320], path[4200], *strings = NULL;
    int lock_fd = -1;
    dz_fed_http_server *server = NULL;
    dz_status st = dz_fed_read_token(cfg->token_file, token, err);
    if (st == DZ_OK && !c->run_dir) st = dz_fail(err, DZ_ERR_INVALID, "serve: --out RUN_DIR is required");
    /* listening first: an address in use or a bad certificate is found before the run folder is touched */
    if (st == DZ_OK)
        st = dz_fed_http_serve(cfg->listen, token, cfg->tls_cert, cfg->tls_key, dz_fed_coord_request, c, &server, url,
                               sizeof url, err);
    if (st == DZ_OK)
        st = cfg->resume ? dz_fed_coord_resume_run(c, cfg->train.optim.steps, &lock_fd, &strings, err)
                         : dz_fed_coord_start_run(c, &lock_fd, err);
    snprintf(path, sizeof path, "%s/run.json", c->run_dir ? c->run_dir : ".");
    if (st == DZ_OK) st = dz_read_file(path, &c->run_json, NULL, err);
    if (st == DZ_OK) st = dz_fed_checksum(dz_setup_zo_engine(c->setup), &c->checksum, err);
    const uint32_t done = st == DZ_OK ? (uint32_t)dz_seedlog_count(c->log) : 0;
    c->published = c->round = done;
    snprintf(path, sizeof path, "%s/metrics.jsonl", c->run_dir ? c->run_dir : ".");
    if (st == DZ_OK)
        st = dz_metrics_open(path, done > 0 ? (int64_t)done : -1, c->train.schedule.log_sync_every, &c->metrics,
                             err); /* rows: rounds done (none yet: row 0 is written again) */
    if (st == DZ_OK) {
        pthread_mutex_lock(&c->mu);
        c->ready = 1;
        pthread_mutex_unlock(&c->mu);
        snprintf(path, sizeof path, "%s/coordinator.url", c->run_dir);
        st = dz_write_file_atomic(path, url, strlen(url), err);
    }
    if (st == DZ_OK && cb) {
        const dz_fed_round_info first = {.round = (int)done, .rounds = c->train.optim.steps, .replayed = (int)done,
                                         .url = url};
        cb(&first, user);
    }
    if (st == DZ_OK && done == 0 && c->eval) st = evaluate_base(c, cb, user, err);
    while (st == DZ_OK && c->round < (uint32_t)c->train.optim.steps) {
        dz_fed_round_info info;
        st = run_round(c, &info, err);
        if (st == DZ_OK && cb) cb(&info, user);
    }
    if (st == DZ_OK) st = dz_seedlog_sync(c->log, err);
    if (server) linger(c, st, cfg->linger, server);
    dz_status cl = dz_metrics_close(c->metrics, st == DZ_OK ? err : NULL);
    if (st == DZ_OK) st = cl;
    cl = dz_seedlog_close(c->log, st == DZ_OK ? err : NULL);
    if (st == DZ_OK) st = cl;
    if (lock_fd >= 0) dz_run_unlock(c->run_dir, lock_fd, 0, 0);
    free(strings);
    free_coordinator(c);
    return st;
}
