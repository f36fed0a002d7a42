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
#include "federated/byte_code.h"
#include "federated/http.h"
#include "federated/protocol.h"
#include "federated/replica.h"
#include "federated/settings.h"
#include "run/metrics.h"
#include "run/run_files.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"
#include "run/setup.h"
#include "run/trainer.h"

typedef struct machine {
    uint32_t id;                  /* 0: a free entry */
    char key[DZ_FED_KEY_CHARS + 1];
    char name[DZ_FED_MAX_NAME + 1];
    double last_seen;
    uint32_t applied;             /* records the worker says it has applied */
    int n_slots;                  /* its slots in the open round */
    uint32_t slots[DZ_FED_MAX_SLOTS];
    int submitted;
    int polling;                  /* a round request of it is waiting: it is alive */
    char addr[DZ_FED_ADDRESS_CHARS]; /* the client address it joined from */
    int proven;                   /* it has delivered a value: slots without the new workers' cap */
    uint32_t applied_asked;       /* `applied` of its latest round request as it came (applied: as it is answered,
                                   * which the linger at the end waits on) */
} machine;

typedef struct coordinator {
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* any change of the state below */
    dz_train_config train;
    dz_fed_settings fed;
    const char *run_dir;
    uint32_t q;
    uint64_t fingerprint;
    char *run_json;               /* run.json's text, sent to joining workers */
    dz_zo_setup *setup;
    dz_seedlog *log;
    dz_metrics *metrics;
    machine m[DZ_FED_MAX_MACHINES];
    uint32_t next_id;
    /* the state workers see */
    uint64_t version;             /* bumped at every change a worker may wait for */
    uint32_t round;               /* the open round, or the next one */
    int ready;                    /* 0 while the run is set up: requests get 503 (workers retry) */
    int open, finished;
    double deadline;
    uint32_t published;           /* records announced (appended and applied to the replica) */
    uint64_t checksum;            /* the replica after `published` records */
    /* the open round's contributions */
    int n_assigned, n_in;
    float g[DZ_FED_MAX_SLOTS];
    uint8_t present[DZ_FED_MAX_SLOTS];
    double loss_sum;
    int loss_n;
    /* a K-seed pool run (fed.seed_pool > 0; run/seed_pool.h) */
    uint32_t log_q;               /* values per log record: q, or 2q (g, then seed indices) in a pool run */
    dz_seed_pool pool;            /* the scalars of the records logged so far */
    dz_seed_pool_weights weights; /* the replica as a function of the pool's scalars */
    double *prob;                 /* [K] scratch of the importance draw */
    uint32_t seeds[DZ_FED_MAX_SLOTS]; /* the open round's seed of each slot */
    uint8_t *pool_state;          /* GET /v1/pool's body after `published` records */
    dz_tokenizer *tok;            /* the base model's, written into checkpoints (NULL: none found) */
    dz_trainer *eval;             /* --test: the replica set up as train's is, to evaluate it (owns setup); NULL: none */
    dz_fed_admission admission;   /* joins per client address (--max-joins-per-client) */
} coordinator;

/* ---- requests (server threads) -------------------------------------------------------- */

static void respond(dz_fed_http_response *r, int status, char *json) {
    r->status = json ? status : 500;
    r->body = json;
    r->len = json ? strlen(json) : 0;
}

static void respond_error(dz_fed_http_response *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void respond_error(dz_fed_http_response *r, int status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    respond(r, status, dz_fed_error_json(msg));
}

/* A query argument as a whole number in 0..max; -1 when absent or malformed. */
static int64_t arg_uint(const dz_fed_http_request *req, const char *key, int64_t max) {
    const char *s = dz_fed_http_arg(req, key);
    if (!s || !*s || strlen(s) > 20) return -1;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || s[0] == '-' || v > (unsigned long long)max) return -1;
    return (int64_t)v;
}

/* The machine the request names, with its key; NULL (and the answer written) otherwise. */
static machine *find_machine(coordinator *c, uint32_t id, const char *key, dz_fed_http_response *r) {
    for (int i = 0; i < DZ_FED_MAX_MACHINES; i++)
        if (c->m[i].id == id && id != 0) {
            if (key && dz_fed_secret_equal(key, c->m[i].key)) return &c->m[i];
            break;
        }
    respond_error(r, 410, "machine %u is not connected (the coordinator restarted, or it was gone for longer than "
                  "--worker-timeout): join again", id);
    return NULL;
}

static void handle_run(coordinator *c, dz_fed_http_response *r) {
    const dz_fed_run_info info = {.fingerprint = c->fingerprint, .q = c->q, .code = c->fed.code,
                                  .g_clip = c->fed.g_clip, .run_json = c->run_json, .seed_pool = c->fed.seed_pool,
                                  .seed_sampling = c->fed.seed_sampling};
    respond(r, 200, dz_fed_run_info_json(&info));
}

static void handle_join(coordinator *c, const dz_fed_http_request *req, dz_fed_http_response *r) {
    dz_fed_join_req j;
    dz_error e = {0};
    if (dz_fed_join_req_parse(req->body, req->body_len, &j, &e) != DZ_OK) return respond_error(r, 400, "%s", e.msg);
    if (c->fed.seed_pool && j.protocol != DZ_FED_PROTOCOL_POOL)
        return respond_error(r, 400, "this run has a K-seed pool: it needs a worker of protocol %d (this one speaks %d)",
                             DZ_FED_PROTOCOL_POOL, j.protocol);
    if (j.fingerprint != c->fingerprint)
        return respond_error(r, 403, "the worker's base model (fingerprint %016" PRIx64 ") is not this run's "
                             "(%016" PRIx64 "): join with the run's base model (--model)", j.fingerprint,
                             c->fingerprint);
    char addr[DZ_FED_ADDRESS_CHARS];
    dz_fed_http_peer(req, addr, sizeof addr);
    pthread_mutex_lock(&c->mu);
    const double wait = dz_fed_admit_join(&c->admission, addr, dz_now(), c->fed.max_joins_per_client);
    machine *m = NULL;
    for (int i = 0; i < DZ_FED_MAX_MACHINES && !m && wait <= 0; i++)
        if (c->m[i].id == 0) m = &c->m[i];
    dz_fed_join_resp out = {0};
    int no_key = 0;
    if (m) {
        memset(m, 0, sizeof *m);
        snprintf(m->addr, sizeof m->addr, "%s", addr);
        no_key = dz_fed_new_key(m->key) != 0;
        if (!no_key) {
            m->id = c->next_id++;
            m->last_seen = dz_now();
            snprintf(m->name, sizeof m->name, "%s", j.name);
            out.machine = m->id;
            memcpy(out.key, m->key, sizeof out.key);
            pthread_cond_broadcast(&c->cv); /* a round may be waiting for workers */
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (wait > 0)
        return respond_error(r, 429, "%s: %d joins within a minute, the most --max-joins-per-client allows: try again in "
                             "%.0f s", addr, c->fed.max_joins_per_client, ceil(wait));
    if (!m) return respond_error(r, 503, "the coordinator has %d workers connected, its maximum", DZ_FED_MAX_MACHINES);
    if (no_key) return respond_error(r, 500, "cannot read /dev/urandom for a key");
    dz_log(DZ_LOG_INFO, "machine %u%s%s%s joined from %s", out.machine, *j.name ? " (" : "", j.name, *j.name ? ")" : "",
           addr);
    respond(r, 200, dz_fed_join_resp_json(&out));
}

static void handle_round(coordinator *c, const dz_fed_http_request *req, dz_fed_http_response *r) {
    const int64_t id = arg_uint(req, "machine", INT32_MAX), applied = arg_uint(req, "applied", INT32_MAX);
    const int64_t wait_ms = arg_uint(req, "wait_ms", DZ_FED_MAX_WAIT_MS);
    const char *version = dz_fed_http_arg(req, "version");
    if (id < 1 || applied < 0)
        return respond_error(r, 400, "round request: 'machine' (1..2^31-1) and 'applied' (a count) are required");
    pthread_mutex_lock(&c->mu);
    machine *m = find_machine(c, (uint32_t)id, dz_fed_http_arg(req, "key"), r);
    if (m) m->applied_asked = (uint32_t)applied; /* caught up (or not) already while it waits */
    if (m && version && wait_ms > 0) { /* long poll: wait for news, still counting as seen */
        const uint64_t known = strtoull(version, NULL, 16);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        const long long ns = until.tv_nsec + wait_ms * 1000000LL;
        until.tv_sec += (time_t)(ns / 1000000000LL), until.tv_nsec = (long)(ns % 1000000000LL);
        m->polling++;
        while (c->version == known)
            if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) break;
        if (m->id == (uint32_t)id) m->polling--;
        else m = find_machine(c, (uint32_t)id, NULL, r); /* forgotten meanwhile (its entry may be another's): 410 */
    }
    if (m) {
        m->last_seen = dz_now();
        m->applied = (uint32_t)applied;
        dz_fed_round s = {.version = c->version, .round = c->round, .log_count = c->published, .open = c->open,
                          .finished = c->finished, .checksum = c->checksum};
        s.pool = c->fed.seed_pool;
        if (c->open && !m->submitted) {
            s.n_slots = m->n_slots;
            memcpy(s.slots, m->slots, sizeof s.slots);
            for (int k = 0; k < m->n_slots; k++) s.seeds[k] = c->seeds[m->slots[k]];
            const double left = c->deadline - dz_now();
            s.deadline_ms = left > 0 ? (uint32_t)(left * 1000.0) : 0;
        }
        respond(r, 200, dz_fed_round_json(&s));
    }
    pthread_mutex_unlock(&c->mu);
}

/* The value of a submitted slot: decoded (byte) or as sent (f32), clipped to g_clip;
 * NaN: no value. */
static float slot_value(const coordinator *c, uint32_t v) {
    if (c->fed.code == DZ_FED_CODE_BYTE) return dz_fed_byte_decode((uint8_t)v, c->fed.g_clip);
    float g;
    memcpy(&g, &v, sizeof g);
    if (!isfinite(g)) return NAN;
    return g > c->fed.g_clip ? c->fed.g_clip : g < -c->fed.g_clip ? -c->fed.g_clip : g;
}

static void handle_submit(coordinator *c, const dz_fed_http_request *req, dz_fed_http_response *r) {
    dz_fed_submit s;
    dz_error e = {0};
    if (dz_fed_submit_parse(req->body, req->body_len, c->q, c->fed.code, &s, &e) != DZ_OK)
        return respond_error(r, 400, "%s", e.msg);
    pthread_mutex_lock(&c->mu);
    machine *m = find_machine(c, s.machine, s.key, r);
    if (!m) goto out;
    m->last_seen = dz_now();
    if (!c->open || s.round != c->round) {
        respond_error(r, 409, "round %u is closed (the open round is %s%u)", s.round, c->open ? "" : "none; next ",
                      c->round);
        goto out;
    }
    if (m->submitted) {
        respond_error(r, 409, "machine %u already submitted for round %u", m->id, s.round);
        goto out;
    }
    for (int i = 0; i < s.n; i++) {
        int mine = 0;
        for (int k = 0; k < m->n_slots; k++) mine |= m->slots[k] == s.slots[i];
        if (!mine) {
            /* 409, not 403: a round opened again (nothing came by its deadline) may have moved the slot */
            respond_error(r, 409, "slot %u of round %u is not (or no longer) assigned to machine %u", s.slots[i],
                          s.round, m->id);
            goto out;
        }
    }
    int accepted = 0;
    for (int i = 0; i < s.n; i++) {
        const float g = slot_value(c, s.values[i]);
        if (!isfinite(g)) continue; /* a non-finite g on the worker: the slot stays empty */
        c->g[s.slots[i]] = g, c->present[s.slots[i]] = 1;
        accepted++;
    }
    c->n_in += accepted;
    if (isfinite(s.loss) && accepted > 0) c->loss_sum += s.loss * accepted, c->loss_n += accepted;
    m->submitted = 1;
    m->proven |= accepted > 0;
    pthread_cond_broadcast(&c->cv);
    char body[64];
    snprintf(body, sizeof body, "{\"accepted\":%d}", accepted);
    respond(r, 200, strdup(body));
out:
    pthread_mutex_unlock(&c->mu);
}

static void handle_log(coordinator *c, const dz_fed_http_request *req, dz_fed_http_response *r) {
    const int64_t from = arg_uint(req, "from", INT32_MAX), max = arg_uint(req, "max", DZ_FED_MAX_LOG_PAGE);
    if (from < 0 || max < 1)
        return respond_error(r, 400, "log request: 'from' (a record index) and 'max' (1..%d) are required",
                             DZ_FED_MAX_LOG_PAGE);
    pthread_mutex_lock(&c->mu);
    const uint32_t count = c->published;
    const uint32_t n = (uint32_t)from >= count ? 0 : (uint32_t)(count - from < max ? count - from : max);
    const size_t rb = dz_seedlog_record_bytes(c->log_q);
    uint8_t *buf = malloc(n * rb + 1);
    for (uint32_t i = 0; buf && i < n; i++) {
        const dz_seedlog_record rec = dz_seedlog_get(c->log, (size_t)from + i);
        dz_seedlog_encode_record(c->log_q, rec.step, rec.lr, rec.g, buf + i * rb);
    }
    pthread_mutex_unlock(&c->mu);
    r->status = buf ? 200 : 500, r->body = (char *)buf, r->len = buf ? n * rb : 0;
    r->content_type = "application/octet-stream";
}

/* A pool run's K scalars after the published records: what a joining worker downloads. */
static void handle_pool(coordinator *c, dz_fed_http_response *r) {
    if (!c->fed.seed_pool) return respond_error(r, 404, "this run has no seed pool (GET /v1/log is its state)");
    const size_t n = dz_fed_pool_state_bytes(c->fed.seed_pool);
    uint8_t *buf = malloc(n);
    pthread_mutex_lock(&c->mu);
    if (buf) memcpy(buf, c->pool_state, n);
    pthread_mutex_unlock(&c->mu);
    r->status = buf ? 200 : 500, r->body = (char *)buf, r->len = buf ? n : 0;
    r->content_type = "application/octet-stream";
}

static void on_request(void *user, const dz_fed_http_request *req, dz_fed_http_response *r) {
    coordinator *c = user;
    const int get = !strcmp(req->method, "GET");
    pthread_mutex_lock(&c->mu);
    const int ready = c->ready;
    pthread_mutex_unlock(&c->mu);
    if (!ready) return respond_error(r, 503, "the coordinator is starting (loading the model, replaying its log)");
    if (get && !strcmp(req->path, "/v1/run")) return handle_run(c, r);
    if (!get && !strcmp(req->path, "/v1/join")) return handle_join(c, req, r);
    if (get && !strcmp(req->path, "/v1/round")) return handle_round(c, req, r);
    if (!get && !strcmp(req->path, "/v1/submit")) return handle_submit(c, req, r);
    if (get && !strcmp(req->path, "/v1/log")) return handle_log(c, req, r);
    if (get && !strcmp(req->path, "/v1/pool")) return handle_pool(c, r);
    respond_error(r, 404, "no %s %s (see docs/FEDERATED.md)", req->method, req->path);
}

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
    dz_status st = dz_trainer_evaluate_sets(c->eval, &dev, &test, err);
    if (st == DZ_OK) dz_trainer_eval_row(c->eval, dev, test, NAN, row);
    info->has_eval = st == DZ_OK, info->lm = c->eval->lm;
    info->test_score = c->eval->lm ? row->test_loss : row->test_accuracy;
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

/* ---- the run folder -------------------------------------------------------------------- */

static dz_seedlog_header log_header(const coordinator *c) {
    dz_seedlog_header h = {.run_seed = c->train.optim.seed, .q = c->log_q,
                           .dist = c->train.optim.rademacher ? DZ_SEEDLOG_RADEMACHER : DZ_SEEDLOG_GAUSSIAN,
                           .eps = c->train.optim.eps, .start_step = 0};
    char text[64];
    snprintf(text, sizeof text, "federated %016" PRIx64, c->fingerprint);
    if (c->fed.seed_pool) dz_seed_pool_log_tag(c->fed.seed_pool, text, h.fingerprint); /* export reads it as a pool run's */
    else memcpy(h.fingerprint, text, strlen(text) + 1);
    return h;
}

/* With --test, the replica is an evaluation-only trainer's (the test set, its tokenizer, a
 * forward as large as evaluation needs): train's evaluation then scores it. */
static dz_status load_evaluator(coordinator *c, dz_error *err) {
    dz_trainer *tr = c->eval = calloc(1, sizeof *tr);
    if (!tr) return dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
    tr->cfg = c->train;
    tr->cfg.data.train = NULL, tr->cfg.out_dir = NULL;
    tr->cfg.layout = (dz_train_layout){.backend = c->train.layout.backend};
    dz_status st = dz_trainer_begin(tr, NULL, err);
    if (st == DZ_OK) st = dz_trainer_setup_compute(tr, c->train.model, 0, err);
    c->setup = tr->setup;
    return st;
}

/* The replica over the base model, and its fingerprint. */
static dz_status load_base(coordinator *c, dz_error *err) {
    const dz_train_config *t = &c->train;
    const dz_weights_spec ws = {.path = t->model, .master_dtype = t->store.master_dtype};
    const dz_engine_spec es = {
        .max_batch = 1, .max_len = 2, .streams = 2,
        .zo = {.seed = t->optim.seed, .eps = t->optim.eps, .q = t->optim.q, .rademacher = t->optim.rademacher,
               .wd = t->optim.wd, .fuse = 1},
        .backend = t->layout.backend,
    };
    dz_status st = t->data.test ? load_evaluator(c, err) : dz_setup_weights(&ws, &c->setup, err);
    if (st == DZ_OK && !c->eval) st = dz_setup_engine(c->setup, &es, err);
    if (st == DZ_OK) st = dz_fed_fingerprint(dz_setup_model(c->setup), dz_setup_zo_engine(c->setup), &c->fingerprint, err);
    char tok_path[4200];
    if (st == DZ_OK && t->schedule.checkpoint_every > 0 && !c->tok &&
        (t->tokenizer || dz_setup_base_tokenizer(t->model, tok_path, sizeof tok_path, NULL) == DZ_OK) &&
        dz_tokenizer_load(t->tokenizer ? t->tokenizer : tok_path, 0, &c->tok, NULL) != DZ_OK)
        c->tok = NULL; /* checkpoints then hold the weights alone */
    c->log_q = c->fed.seed_pool ? 2 * c->q : c->q;
    if (st == DZ_OK && c->fed.seed_pool) {
        if (t->optim.wd != 0)
            st = dz_fail(err, DZ_ERR_INVALID, "--seed-pool: weight decay (--wd %g) is not a sum of the pool's scalars; "
                         "use --wd 0", (double)t->optim.wd);
        if (st == DZ_OK) st = dz_seed_pool_init(&c->pool, c->fed.seed_pool, c->q, err);
        if (st == DZ_OK)
            st = dz_seed_pool_weights_init(&c->weights, dz_setup_model(c->setup), t->optim.seed, t->optim.rademacher,
                                           &c->pool, err);
        c->prob = st == DZ_OK ? calloc(c->fed.seed_pool, sizeof *c->prob) : NULL;
        c->pool_state = st == DZ_OK ? calloc(1, dz_fed_pool_state_bytes(c->fed.seed_pool)) : NULL;
        if (st == DZ_OK && (!c->prob || !c->pool_state)) st = dz_fail(err, DZ_ERR_NOMEM, "serve: out of memory");
        if (st == DZ_OK) dz_fed_pool_state_encode(0, c->pool.k, c->pool.acc, c->pool_state);
    }
    return st;
}

static dz_status start_files(coordinator *c, int *lock_fd, dz_status st, dz_error *err);

/* A new run: the folder, its lock, run.json, federated.json, an empty seed log. A start
 * that fails before run.json exists leaves no folder it made. */
static dz_status start_run(coordinator *c, int *lock_fd, dz_error *err) {
    char path[4200];
    dz_status st = dz_train_config_check(&c->train, err);
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
static dz_status resume_run(coordinator *c, int steps, int *lock_fd, char **strings, dz_error *err) {
    char path[4200];
    uint64_t fp = 0;
    const dz_train_layout layout = c->train.layout; /* where it runs: this start's, not in run.json */
    dz_status st = dz_run_lock(c->run_dir, lock_fd, err);
    if (st == DZ_OK) st = dz_run_config_read(c->run_dir, &c->train, strings, err);
    c->train.layout = layout;
    if (st == DZ_OK) st = dz_fed_settings_read(c->run_dir, &c->fed, &fp, err);
    c->train.out_dir = c->run_dir;
    if (st == DZ_OK && steps > c->train.optim.steps) {
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
    if (st == DZ_OK) st = dz_fed_http_serve(cfg->listen, token, cfg->tls_cert, cfg->tls_key, on_request, c, &server, url,
                                             sizeof url, err);
    if (st == DZ_OK)
        st = cfg->resume ? resume_run(c, cfg->train.optim.steps, &lock_fd, &strings, err) : start_run(c, &lock_fd, err);
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
    if (st == DZ_OK && done == 0 && c->eval) { /* row 0: the base model, before the first round */
        dz_metrics_row row = {.step = 0, .loss = NAN, .g = NAN, .lr = NAN, .seconds = 0, .dev_accuracy = NAN,
                              .test_accuracy = NAN, .best_dev_accuracy = NAN, .dev_loss = NAN, .test_loss = NAN};
        dz_fed_round_info info = {.round = 0, .rounds = c->train.optim.steps, .loss = NAN};
        const double t0 = dz_now();
        st = evaluate(c, 0, &row, &info, err);
        row.seconds = info.seconds = dz_now() - t0;
        if (st == DZ_OK) st = dz_metrics_append(c->metrics, &row, err);
        if (st == DZ_OK && cb) cb(&info, user);
    }
    while (st == DZ_OK && c->round < (uint32_t)c->train.optim.steps) {
        dz_fed_round_info info;
        st = run_round(c, &info, err);
        if (st == DZ_OK && cb) cb(&info, user);
    }
    if (st == DZ_OK) st = dz_seedlog_sync(c->log, err);
    if (server) { /* finished: workers may fetch the last records for up to --linger seconds */
        pthread_mutex_lock(&c->mu);
        c->finished = st == DZ_OK;
        c->version++;
        pthread_cond_broadcast(&c->cv);
        const double until = dz_now() + cfg->linger;
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
    dz_status cl = dz_metrics_close(c->metrics, st == DZ_OK ? err : NULL);
    if (st == DZ_OK) st = cl;
    cl = dz_seedlog_close(c->log, st == DZ_OK ? err : NULL);
    if (st == DZ_OK) st = cl;
    if (c->eval) dz_trainer_teardown(c->eval); /* its setup is c->setup */
    else dz_setup_free(c->setup);
    free(c->eval);
    dz_seed_pool_free(&c->pool);
    dz_seed_pool_weights_free(&c->weights);
    free(c->prob);
    free(c->pool_state);
    dz_tokenizer_free(c->tok);
    if (lock_fd >= 0) dz_run_unlock(c->run_dir, lock_fd, 0, 0);
    free(c->run_json);
    free(strings);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return st;
}
