/* distzo join: a federated worker (docs/FEDERATED.md). It gets the run's settings from
 * the coordinator, loads its own copy of the base model and its own data (never sent),
 * checks that the base model is the run's (fingerprint), replays the coordinator's log,
 * then, round after round: computes the projected gradient of each slot it was given
 * (draw round * q + slot, its own batch; under FZOO all q slots of the round on one batch,
 * l0 and q one-sided forwards), sends one byte per slot, and applies the round's record
 * once the coordinator has logged it. Its replica is a function of the log
 * alone, so it equals the coordinator's and every other worker's bitwise; the checksum
 * the coordinator sends is compared after each catch-up, and a difference means a resync
 * (the base model reloaded, the log replayed). The coordinator unreachable: retried with
 * backoff for --retry-for seconds; restarted (the worker's id unknown): joined again. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "distzo/federated.h"
#include "distzo/log.h"
#include "federated/byte_code.h"
#include "federated/http.h"
#include "federated/protocol.h"
#include "federated/replica.h"
#include "run/peft.h"
#include "run/prepare.h"
#include "run/run_files.h"
#include "run/seed_pool.h"
#include "run/seedlog.h"

typedef struct worker {
    const dz_fed_join_config *cfg;
    dz_fed_join_cb cb;
    void *user;
    dz_fed_http_client *http;
    dz_fed_run_info info;          /* the run, as the coordinator described it */
    dz_train_config run_cfg;       /* the run's settings with this machine's model and data */
    dz_compute comp;               /* the replica and the engine */
    dz_run_data data;              /* this machine's examples */
    int have_tr;
    char *run_strings;
    uint64_t fingerprint;          /* of the base model here */
    uint32_t machine;
    char key[DZ_FED_KEY_CHARS + 1];
    uint32_t applied;              /* records of the log applied to the replica */
    int64_t verified;              /* the record count at which the checksum last matched the coordinator's (-1: never) */
    uint64_t version;              /* of the last state seen */
    uint64_t computed_version;     /* the state whose slots were last computed (a round opened again has a new one) */
    int computed;
    dz_fed_join_result *res;
    double last_answer;            /* when the coordinator last answered */
    /* a K-seed pool run (info.seed_pool > 0) */
    dz_seed_pool pool;             /* the scalars of the `applied` records */
    dz_seed_pool_weights weights;  /* the replica as a function of the pool's scalars */
} worker;

static void event(worker *w, int kind, int round, int slots) {
    if (!w->cb) return;
    const dz_fed_join_event ev = {.kind = kind, .machine = w->machine, .round = round, .slots = slots};
    w->cb(&ev, w->user);
}

static void sleep_s(double s) {
    struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* One request, retried with backoff (0.1 s doubling to 2 s) while no answer comes or the
 * coordinator answers 5xx, for up to --retry-for seconds since its last answer; and for as
 * long as it answers 429 (this address's joins are spent for the minute: an answer, so
 * --retry-for does not run out while the window passes). */
static dz_status call(worker *w, const char *method, const char *path, const char *body, int *status, char **resp,
                      size_t *len, dz_error *err) {
    double backoff = 0.1;
    for (;;) {
        dz_error e = {0};
        dz_status st = dz_fed_http_call(w->http, method, path, body, body ? strlen(body) : 0,
                                        DZ_FED_MAX_WAIT_MS + 10000L, status, resp, len, &e);
        if (st == DZ_OK && *status < 500 && *status != 429) {
            w->last_answer = dz_now();
            return DZ_OK;
        }
        if (st != DZ_OK && st != DZ_ERR_IO) return dz_fail(err, st, "%s", e.msg);
        char why[1100];
        if (st == DZ_OK) {
            dz_fed_error_message(*resp, *len, why, sizeof why);
            free(*resp);
            *resp = NULL;
            if (*status == 429 && backoff == 0.1) dz_log(DZ_LOG_INFO, "%s %s: waiting (%s)", method, path, why);
            if (*status == 429) w->last_answer = dz_now();
        } else {
            snprintf(why, sizeof why, "%s", e.msg);
        }
        if (dz_now() - w->last_answer > w->cfg->retry_for)
            return dz_fail(err, DZ_ERR_IO, "the coordinator at %s did not answer for %.0f s (--retry-for): %s",
                           w->cfg->url, w->cfg->retry_for, why);
        sleep_s(backoff);
        backoff = backoff * 2 > 2.0 ? 2.0 : backoff * 2;
    }
}

/* An answer that is not 200: the coordinator's message as the error. */
static dz_status refused(worker *w, const char *what, int status, const char *resp, size_t len, dz_error *err) {
    char msg[600];
    dz_fed_error_message(resp, len, msg, sizeof msg);
    if (status == 401)
        return dz_fail(err, DZ_ERR_INVALID, "the coordinator at %s refused the token (%s): check --token-file",
                       w->cfg->url, msg);
    return dz_fail(err, DZ_ERR_INVALID, "%s: the coordinator answered %d: %s", what, status, msg);
}

/* The replica: the run's settings with this machine's model and data, and nothing of the
 * run folder. */
static dz_status load_replica(worker *w, dz_error *err) {
    if (w->have_tr) dz_prepare_free(&w->comp, &w->data);
    dz_seed_pool_free(&w->pool);
    dz_seed_pool_weights_free(&w->weights);
    free(w->run_strings);
    w->run_strings = NULL;
    memset(&w->run_cfg, 0, sizeof w->run_cfg);
    w->have_tr = 1;
    dz_status st = dz_compute_begin(&w->comp, &w->run_cfg, NULL, err);
    if (st != DZ_OK) return st;
    st = dz_run_config_parse(w->info.run_json, strlen(w->info.run_json), "the coordinator's run.json",
                                       &w->run_cfg, &w->run_strings, err);
    if (st != DZ_OK) return st;
    dz_train_config *c = &w->run_cfg;
    if (w->cfg->model) c->model = w->cfg->model;
    if (w->cfg->tokenizer) c->tokenizer = w->cfg->tokenizer;
    dz_lora_spec adapter;
    if (w->cfg->adapter && !dz_train_peft_lora(c, &adapter))
        return dz_fail(err, DZ_ERR_INVALID, "--adapter %s: the coordinator's run trains every parameter, not an adapter; "
                       "leave the option out", w->cfg->adapter);
    if (w->cfg->adapter && !c->peft.lora_init)
        return dz_fail(err, DZ_ERR_INVALID, "--adapter %s: the coordinator's %s starts from its seed (PEFT's init), not "
                       "from a folder; leave the option out", w->cfg->adapter, c->peft.method);
    if (w->cfg->adapter) c->peft.lora_init = w->cfg->adapter; /* checked against run.json's lora_init_fingerprint */
    c->data.train = w->cfg->data, c->data.test = NULL, c->data.dev_examples = 0;
    c->store.spec = NULL, c->out_dir = NULL, c->layout = (dz_train_layout){.backend = w->cfg->backend};
    if ((uint32_t)c->optim.q != w->info.q)
        return dz_fail(err, DZ_ERR_FORMAT, "the coordinator's run has %d samples per step but %u slots per round",
                       c->optim.q, w->info.q);
    if ((st = dz_train_config_check(c, err)) != DZ_OK) return st;
    if (w->cfg->keep_quantized && !dz_train_peft_lora(c, &adapter))
        return dz_fail(err, DZ_ERR_INVALID, "--keep-quantized: the coordinator's run trains every parameter, which a "
                       "quantized base held as loaded cannot take; leave the option out");
    c->peft.keep_quantized = w->cfg->keep_quantized; /* the same bits: a choice of memory, not in run.json */
    if (c->optim.estimator == DZ_ZO_HIZOO) /* a coordinator refuses it first: this is an older or foreign one */
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--estimator hizoo is not supported by federated runs (its third "
                       "forward and curvature state are not in the protocol): join a mezo run");
    if ((st = dz_prepare(&w->comp, &w->data, c->model, 0, err)) != DZ_OK) return st;
    if (w->data.objective == DZ_OBJ_F1) /* a slot is one dual forward: no decoding under the perturbations */
        return dz_fail(err, DZ_ERR_INVALID, "--objective f1 is not supported by federated workers (ce or accuracy are)");
    if ((st = dz_fed_fingerprint(w->comp.setup, &w->fingerprint, err)) != DZ_OK) return st;
    if (w->fingerprint != w->info.fingerprint)
        return c->peft.lora_init
                   ? dz_fail(err, DZ_ERR_INVALID, "the base model %s with the adapter %s (fingerprint %016" PRIx64 ") is "
                             "not the run's (%016" PRIx64 "): pass --model and --adapter with the model and adapter the "
                             "coordinator serves (%s master weights)", c->model, c->peft.lora_init, w->fingerprint,
                             w->info.fingerprint, dz_dtype_name(c->store.master_dtype))
                   : dz_fail(err, DZ_ERR_INVALID, "the base model %s (fingerprint %016" PRIx64 ") is not the run's (%016"
                             PRIx64 "): pass --model with the model the coordinator serves (%s master weights)", c->model,
                             w->fingerprint, w->info.fingerprint, dz_dtype_name(c->store.master_dtype));
    if (w->info.seed_pool && (st = dz_seed_pool_init(&w->pool, w->info.seed_pool, w->info.q, err)) != DZ_OK) return st;
    if (w->info.seed_pool && (st = dz_seed_pool_weights_init(&w->weights, w->comp.m, c->optim.seed, c->optim.rademacher,
                                                             c->optim.rng_v2,
                                                             &w->pool, err)) != DZ_OK)
        return st;
    w->applied = 0, w->verified = -1;
    return DZ_OK;
}

/* GET /v1/run and POST /v1/join; the first time also the replica. A rejoin must find the
 * same run. */
static dz_status join(worker *w, dz_error *err) {
    int status;
    char *resp = NULL;
    size_t len;
    dz_fed_run_info info;
    dz_status st = call(w, "GET", "/v1/run", NULL, &status, &resp, &len, err);
    if (st == DZ_OK && status != 200) st = refused(w, "GET /v1/run", status, resp, len, err);
    if (st == DZ_OK) st = dz_fed_run_info_parse(resp, len, &info, err);
    free(resp);
    if (st != DZ_OK) return st;
    if (w->info.run_json) {
        const int same = info.fingerprint == w->info.fingerprint && info.q == w->info.q &&
                         info.code == w->info.code && info.seed_pool == w->info.seed_pool &&
                         !strcmp(info.run_json, w->info.run_json);
        free(info.run_json);
        if (!same) return dz_fail(err, DZ_ERR_INVALID, "the coordinator at %s now serves another run", w->cfg->url);
    } else {
        w->info = info;
        if ((st = load_replica(w, err)) != DZ_OK) return st;
    }
    dz_fed_join_req req = {.protocol = w->info.seed_pool ? DZ_FED_PROTOCOL_POOL : DZ_FED_PROTOCOL,
                           .fingerprint = w->fingerprint};
    snprintf(req.name, sizeof req.name, "%s", w->cfg->name ? w->cfg->name : "");
    char *body = dz_fed_join_req_json(&req);
    if (!body) return dz_fail(err, DZ_ERR_NOMEM, "join: out of memory");
    st = call(w, "POST", "/v1/join", body, &status, &resp, &len, err);
    free(body);
    dz_fed_join_resp jr;
    if (st == DZ_OK && status != 200) st = refused(w, "join", status, resp, len, err);
    if (st == DZ_OK) st = dz_fed_join_resp_parse(resp, len, &jr, err);
    free(resp);
    if (st != DZ_OK) return st;
    w->machine = jr.machine;
    memcpy(w->key, jr.key, sizeof w->key);
    w->version = 0, w->computed = 0, w->verified = -1; /* a coordinator restarted: its checksum again */
    event(w, DZ_FED_JOINED, (int)w->applied, 0);
    return DZ_OK;
}

/* A pool run's replica from scratch: GET /v1/pool, the K scalars of the first N records
 * (instead of N records of the log). */
static dz_status download_pool(worker *w, dz_error *err) {
    char *resp = NULL;
    int status;
    size_t len;
    dz_status st = call(w, "GET", "/v1/pool", NULL, &status, &resp, &len, err);
    if (st == DZ_OK && status != 200) st = refused(w, "GET /v1/pool", status, resp, len, err);
    uint32_t count = 0;
    if (st == DZ_OK) st = dz_fed_pool_state_decode((const uint8_t *)resp, len, w->pool.k, &count, w->pool.acc, err);
    free(resp);
    if (st == DZ_OK) w->applied = count;
    if (st == DZ_OK)
        dz_log(DZ_LOG_INFO, "machine %u: the pool's %u scalars (%zu bytes) in place of %u records of the log",
               w->machine, w->pool.k, len, count);
    return st;
}

/* Applies the log's records from w->applied up to count (GET /v1/log pages). A pool run's
 * replica starts from the K scalars when it has nothing yet, accumulates the records
 * after them, then brings its weights to the scalars once. */
static dz_status catch_up(worker *w, uint32_t count, dz_error *err) {
    const int pool = w->info.seed_pool != 0;
    const uint32_t q = pool ? 2 * w->info.q : w->info.q;
    const size_t rb = dz_seedlog_record_bytes(q);
    float g[DZ_FED_MAX_SLOTS];
    if (pool && w->applied == 0) {
        dz_status st = download_pool(w, err);
        if (st != DZ_OK) return st;
    }
    while (w->applied < count) {
        char path[128], *resp = NULL;
        int status;
        size_t len;
        snprintf(path, sizeof path, "/v1/log?from=%u&max=%d", w->applied, DZ_FED_MAX_LOG_PAGE);
        dz_status st = call(w, "GET", path, NULL, &status, &resp, &len, err);
        if (st == DZ_OK && status != 200) st = refused(w, "GET /v1/log", status, resp, len, err);
        if (st == DZ_OK && (len % rb != 0 || len == 0))
            st = dz_fail(err, DZ_ERR_FORMAT, "GET /v1/log: %zu bytes is not a whole number of %zu-byte records", len, rb);
        for (size_t i = 0; st == DZ_OK && i < len / rb && w->applied < count; i++) {
            uint32_t step;
            float lr;
            if (dz_seedlog_decode_record(q, (const uint8_t *)resp + i * rb, &step, &lr, g) != 0)
                st = dz_fail(err, DZ_ERR_FORMAT, "GET /v1/log: record %u fails its CRC check", w->applied);
            else if (step != w->applied)
                st = dz_fail(err, DZ_ERR_FORMAT, "GET /v1/log: record %u has step %u", w->applied, step);
            if (st == DZ_OK)
                st = pool ? dz_seed_pool_add(&w->pool, lr, g, err) : dz_fed_apply(w->comp.e, step, lr, g, err);
            if (st == DZ_OK) w->applied++;
        }
        free(resp);
        if (st != DZ_OK) return st;
    }
    if (pool) {
        dz_status st = dz_fed_pool_sync(w->comp.e, &w->weights, &w->pool, err);
        if (st != DZ_OK) return st;
    }
    event(w, DZ_FED_APPLIED, (int)w->applied, 0);
    return DZ_OK;
}

/* Tests only: DISTZO_TEST_CORRUPT_REPLICA=N flips one bit of the first tensor once this
 * replica has applied N records, so that the checksum comparison and the resync can be
 * shown to work. */
static void test_fault(worker *w) {
    static int done;
    const char *at = getenv("DISTZO_TEST_CORRUPT_REPLICA");
    if (done || !at || atoi(at) != (int)w->applied) return;
    unsigned char *mem = dz_model_tensor(w->comp.m, 0);
    if (!mem) return;
    const dz_param_table *t = dz_model_params(w->comp.m);
    mem[(size_t)dz_param_numel(&t->params[0]) / 2 * dz_dtype_size(dz_model_dtype(w->comp.m))] ^= 1;
    dz_log(DZ_LOG_INFO, "test fault: flipped a bit of %s after %u records", t->params[0].hf_name, w->applied);
    done = 1;
}

/* The replica against the coordinator's checksum after `count` records (the replica has
 * applied exactly those): a difference means a resync, twice means an error. */
static dz_status verify(worker *w, const dz_fed_round *s, dz_error *err) {
    uint64_t sum = 0;
    test_fault(w);
    dz_status st = dz_fed_checksum(w->comp.e, &sum, err);
    if (st != DZ_OK || sum == s->checksum) return st;
    dz_log(DZ_LOG_WARN, "machine %u: replica checksum %016" PRIx64 " after %u records differs from the "
           "coordinator's %016" PRIx64 ": reloading the base model and replaying the log", w->machine, sum,
           s->log_count, s->checksum);
    event(w, DZ_FED_RESYNC, (int)s->log_count, 0);
    w->res->resyncs++;
    if ((st = load_replica(w, err)) != DZ_OK || (st = catch_up(w, s->log_count, err)) != DZ_OK) return st;
    if (w->applied != s->log_count) return DZ_OK; /* a pool state past s: checked with the next state */
    if ((st = dz_fed_checksum(w->comp.e, &sum, err)) != DZ_OK) return st;
    if (sum != s->checksum)
        return dz_fail(err, DZ_ERR_INVALID, "machine %u: after a full replay of %u records the replica's checksum "
                       "%016" PRIx64 " still differs from the coordinator's %016" PRIx64, w->machine, s->log_count,
                       sum, s->checksum);
    return DZ_OK;
}

/* The batch of draw `draw`: the worker's own endless shuffle, indexed by the draw. */
static dz_status draw_batch(worker *w, uint32_t draw, dz_zo_batch *zb, dz_error *err) {
    dz_run_data *d = &w->data;
    const int batch = w->run_cfg.optim.batch;
    dz_run_data_draw_batch(d, (int)draw);
    d->lo = 0, d->hi = batch;
    dz_status st = dz_class_batch_fill(&d->bb, &d->train, d->batch_ex, batch, err);
    if (st != DZ_OK) return st;
    *zb = dz_class_batch_zo(&d->bb, dz_run_data_loss, d);
    zb->n_examples = batch, zb->example0 = 0, zb->n_global = batch;
    return DZ_OK;
}

/* A slot's value as it travels: its one-byte code, or the float's bits. */
static uint32_t slot_value(const worker *w, float g) {
    if (w->info.code == DZ_FED_CODE_BYTE) return dz_fed_byte_encode(g, w->info.g_clip);
    uint32_t bits;
    memcpy(&bits, &g, sizeof bits);
    return bits;
}

/* MeZO: each slot its own batch (the draw's) and both forwards. */
static dz_status mezo_slots(worker *w, const dz_fed_round *s, dz_fed_submit *sub, double *loss, int *finite,
                            dz_error *err) {
    for (int i = 0; i < s->n_slots; i++) {
        uint32_t draw = s->round * w->info.q + s->slots[i];
        dz_zo_batch zb;
        dz_status st = draw_batch(w, draw, &zb, err);
        if (w->info.seed_pool) draw = s->seeds[i]; /* a pool run: seed k is the run seed's draw k */
        dz_zo_step_result r;
        if (st != DZ_OK || (st = dz_zo_estimate(w->comp.e, draw, &zb, &r, err)) != DZ_OK) return st;
        sub->slots[i] = s->slots[i], sub->values[i] = slot_value(w, r.finite ? r.g[0] : NAN);
        if (r.finite) *loss += 0.5 * (r.loss_plus[0] + r.loss_minus[0]), ++*finite;
    }
    return DZ_OK;
}

/* FZOO: a round is one worker's, its N slots the step's directions on one batch (the
 * round's first draw's): l0 and N one-sided forwards, sigma over them (dz_zo_fzoo_coefficients). */
static dz_status fzoo_slots(worker *w, const dz_fed_round *s, dz_fed_submit *sub, double *loss, int *finite,
                            dz_error *err) {
    int in_order = s->n_slots == (int)w->info.q;
    for (int i = 0; in_order && i < s->n_slots; i++) in_order = s->slots[i] == (uint32_t)i;
    if (!in_order)
        return dz_fail(err, DZ_ERR_FORMAT, "round %u: an FZOO round gives one worker all %u slots in order; this "
                       "coordinator gave %d", s->round, w->info.q, s->n_slots);
    dz_zo_batch zb;
    dz_zo_step_result r;
    dz_status st = draw_batch(w, s->round * w->info.q, &zb, err);
    if (st != DZ_OK || (st = dz_zo_fzoo_coefficients(w->comp.e, s->round, &zb, &r, err)) != DZ_OK) return st;
    for (int i = 0; i < s->n_slots; i++)
        sub->slots[i] = (uint32_t)i, sub->values[i] = slot_value(w, r.finite ? r.g[i] : NAN);
    if (r.finite) *loss = r.loss_minus[0], *finite = 1; /* l0 */
    return DZ_OK;
}

/* This machine's slots of round r, computed on its own data. */
static dz_status contribute(worker *w, const dz_fed_round *s, dz_error *err) {
    dz_fed_submit sub = {.machine = w->machine, .round = s->round, .n = s->n_slots};
    memcpy(sub.key, w->key, sizeof sub.key);
    double loss = 0;
    int finite = 0;
    dz_status st = w->run_cfg.optim.estimator == DZ_ZO_FZOO ? fzoo_slots(w, s, &sub, &loss, &finite, err)
                                                            : mezo_slots(w, s, &sub, &loss, &finite, err);
    if (st != DZ_OK) return st;
    sub.loss = finite ? loss / finite : NAN;
    event(w, DZ_FED_COMPUTED, (int)s->round, s->n_slots);
    char *body = dz_fed_submit_json(&sub, w->info.code), *resp = NULL;
    if (!body) return dz_fail(err, DZ_ERR_NOMEM, "submit: out of memory");
    int status;
    size_t len;
    st = call(w, "POST", "/v1/submit", body, &status, &resp, &len, err);
    free(body);
    dz_log(DZ_LOG_DEBUG, "machine %u: round %u submitted: %d %.*s", w->machine, s->round, status,
           resp ? (int)len : 0, resp ? resp : "");
    if (st == DZ_OK && status == 200) {
        w->res->contributions += s->n_slots;
        event(w, DZ_FED_SUBMITTED, (int)s->round, s->n_slots);
    } else if (st == DZ_OK && status != 409 && status != 410) { /* 409: closed meanwhile; 410: see the next poll */
        st = refused(w, "submit", status, resp, len, err);
    }
    free(resp);
    w->computed_version = s->version, w->computed = 1;
    return st;
}

/* --save: the replica's weights in HF layout with the tokenizer this worker loaded, as
 * `distzo export` writes them, so `distzo eval` reads the folder as it is. */
static dz_status save(worker *w, dz_error *err) {
    dz_status st = dz_zo_flush(w->comp.e, err);
    if (st == DZ_OK && w->cfg->save) st = dz_model_save_hf(w->comp.m, w->cfg->save, err);
    if (st == DZ_OK && w->cfg->save && w->comp.tok) st = dz_tokenizer_save_hf(w->comp.tok, w->cfg->save, err);
    return st;
}

dz_status dz_fed_join(const dz_fed_join_config *cfg, dz_fed_join_cb cb, void *user, dz_fed_join_result *res,
                      dz_error *err) {
    memset(res, 0, sizeof *res);
    worker *w = calloc(1, sizeof *w);
    if (!w) return dz_fail(err, DZ_ERR_NOMEM, "join: out of memory");
    w->cfg = cfg, w->cb = cb, w->user = user, w->res = res, w->last_answer = dz_now();
    char token[DZ_FED_TOKEN_MAX + 1];
    dz_status st = cfg->data ? DZ_OK : dz_fail(err, DZ_ERR_INVALID, "join: --data FILE (this machine's examples) is required");
    if (st == DZ_OK) st = dz_fed_read_token(cfg->token_file, token, err);
    if (st == DZ_OK) st = dz_fed_http_client_create(cfg->url, token, cfg->ca_file, &w->http, err);
    if (st == DZ_OK) st = join(w, err);
    while (st == DZ_OK) {
        char path[256], *resp = NULL;
        int status;
        size_t len;
        snprintf(path, sizeof path, "/v1/round?machine=%u&key=%s&applied=%u&version=%016" PRIx64 "&wait_ms=%d",
                 w->machine, w->key, w->applied, w->version, DZ_FED_MAX_WAIT_MS);
        st = call(w, "GET", path, NULL, &status, &resp, &len, err);
        if (st == DZ_OK && status == 410) { /* the coordinator does not know this machine (any more) */
            free(resp);
            res->rejoins++;
            st = join(w, err);
            continue;
        }
        dz_fed_round s;
        if (st == DZ_OK && status != 200) st = refused(w, "GET /v1/round", status, resp, len, err);
        if (st == DZ_OK) st = dz_fed_round_parse(resp, len, w->info.q, w->info.seed_pool, &s, err);
        free(resp);
        if (st != DZ_OK) break;
        w->version = s.version;
        dz_log(DZ_LOG_DEBUG, "machine %u: state %" PRIx64 ": round %u, %u records, open %d, %d slots; %u applied",
               w->machine, s.version, s.round, s.log_count, s.open, s.n_slots, w->applied);
        if (s.log_count < w->applied) { /* the coordinator lost records (a crash of its machine): start over */
            dz_log(DZ_LOG_WARN, "machine %u: the coordinator's log has %u records, this replica applied %u: "
                   "reloading the base model", w->machine, s.log_count, w->applied);
            res->resyncs++;
            if ((st = load_replica(w, err)) != DZ_OK) break;
        }
        if (s.log_count > w->applied && (st = catch_up(w, s.log_count, err)) != DZ_OK) break;
        /* after a catch-up, a join, a rejoin; a pool state newer than s is checked with the next state */
        if (w->verified != (int64_t)w->applied && w->applied == s.log_count) {
            if ((st = verify(w, &s, err)) != DZ_OK) break;
            w->verified = w->applied;
        }
        if (s.finished) { /* tell the coordinator this replica is complete, then stop */
            snprintf(path, sizeof path, "/v1/round?machine=%u&key=%s&applied=%u", w->machine, w->key, w->applied);
            /* once, not retried: the coordinator stops once no worker is behind, and the last one's
             * word may come after that (with call() it waited --retry-for seconds for nothing) */
            dz_error ignored = {0};
            if (dz_fed_http_call(w->http, "GET", path, NULL, 0, 2000L, &status, &resp, &len, &ignored) == DZ_OK)
                free(resp);
            break;
        }
        if (s.open && s.n_slots > 0 && s.round == w->applied && !(w->computed && s.version == w->computed_version))
            st = contribute(w, &s, err);
    }
    if (st == DZ_OK) st = save(w, err);
    if (st == DZ_OK) st = dz_fed_checksum(w->comp.e, &res->checksum, err);
    res->rounds_applied = (int)w->applied;
    if (w->http) dz_fed_http_bytes(w->http, &res->bytes_sent, &res->bytes_received);
    if (w->have_tr) dz_prepare_free(&w->comp, &w->data);
    dz_seed_pool_free(&w->pool);
    dz_seed_pool_weights_free(&w->weights);
    dz_fed_http_client_free(w->http);
    free(w->run_strings);
    free(w->info.run_json);
    free(w);
    return st;
}
