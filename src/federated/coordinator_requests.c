/* The coordinator's side of the workers' requests (coordinator.h), on the HTTP server's
 * threads: the run, joining (admission), round polls, submissions, the log and the pool. */
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
#include "federated/admission.h"
#include "federated/byte_code.h"
#include "federated/coordinator.h"
#include "federated/http.h"
#include "federated/protocol.h"
#include "federated/settings.h"
#include "run/seedlog.h"

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
    const char *wait_text = dz_fed_http_arg(req, "wait_ms"), *key = dz_fed_http_arg(req, "key");
    if (wait_text && wait_ms < 0) /* a bad one was read as "no wait" */
        return respond_error(r, 400, "round request: 'wait_ms' must be a count of milliseconds in 0..%d",
                             DZ_FED_MAX_WAIT_MS);
    if (version && (strlen(version) != 16 || strspn(version, "0123456789abcdef") != 16))
        return respond_error(r, 400, "round request: 'version' must be 16 lowercase hex digits");
    if (key && (strlen(key) != DZ_FED_KEY_CHARS || strspn(key, "0123456789abcdef") != DZ_FED_KEY_CHARS))
        return respond_error(r, 400, "round request: 'key' must be %d lowercase hex digits", DZ_FED_KEY_CHARS);
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

void dz_fed_coord_request(void *user, const dz_fed_http_request *req, dz_fed_http_response *r) {
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
