/* The federated protocol's messages: JSON in and out, every field checked (protocol.h). */
#include "federated/protocol.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/io.h"
#include "core/json.h"
#include "distzo/util.h"
#include "run/seedlog.h"

/* ---- reading fields ---------------------------------------------------------------- */

static dz_status parse_object(const char *body, size_t len, const char *what, cJSON **out, dz_error *err) {
    *out = NULL;
    if (len > DZ_FED_MAX_RESPONSE) return dz_fail(err, DZ_ERR_FORMAT, "%s: %zu bytes is too long", what, len);
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object", what);
    }
    while (end && end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    const char *twice = dz_json_repeated_key(o); /* which one counts would be a guess */
    if ((end && end < body + len) || twice) {
        dz_status st = twice ? dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is given twice", what, twice)
                             : dz_fail(err, DZ_ERR_FORMAT, "%s: text after the JSON object", what);
        cJSON_Delete(o);
        return st;
    }
    *out = o;
    return DZ_OK;
}

static const cJSON *need(const cJSON *o, const char *key, const char *what, dz_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' is missing", what, key);
    return v;
}

/* A whole number in lo..hi. */
static dz_status number_in(const cJSON *v, const char *key, const char *what, double lo, double hi, double *x,
                           dz_error *err) {
    if (!cJSON_IsNumber(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be a number", what, key);
    const double d = v->valuedouble;
    if (!(d >= lo && d <= hi) || d != floor(d))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': %g is not a whole number in %.0f..%.0f", what, key, d, lo,
                       hi);
    *x = d;
    return DZ_OK;
}

static dz_status get_u32(const cJSON *o, const char *key, const char *what, uint32_t lo, uint32_t hi, uint32_t *out,
                         dz_error *err) {
    const cJSON *v = need(o, key, what, err);
    double d = 0;
    if (!v) return DZ_ERR_FORMAT;
    dz_status st = number_in(v, key, what, lo, hi, &d, err);
    if (st == DZ_OK) *out = (uint32_t)d;
    return st;
}

static dz_status get_bool(const cJSON *o, const char *key, const char *what, int *out, dz_error *err) {
    const cJSON *v = need(o, key, what, err);
    if (!v) return DZ_ERR_FORMAT;
    if (!cJSON_IsBool(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return DZ_OK;
}

/* A string of at most max bytes (exactly max with hex = 1: lowercase hex digits). */
static dz_status get_text(const cJSON *o, const char *key, const char *what, size_t max, int hex, char *out,
                          dz_error *err) {
    const cJSON *v = need(o, key, what, err);
    if (!v) return DZ_ERR_FORMAT;
    if (!cJSON_IsString(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be a string", what, key);
    const size_t n = strlen(v->valuestring);
    if (n > max || (hex && n != max))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' has %zu characters, %s %zu", what, key, n,
                       hex ? "expected" : "at most", max);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)v->valuestring[i];
        if (hex ? !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) : (c < 0x20 || c == 0x7F))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s': character %zu is not %s", what, key, i + 1,
                           hex ? "a lowercase hex digit" : "printable");
    }
    memcpy(out, v->valuestring, n + 1);
    return DZ_OK;
}

static dz_status get_hex64(const cJSON *o, const char *key, const char *what, uint64_t *out, dz_error *err) {
    char text[17];
    dz_status st = get_text(o, key, what, 16, 1, text, err);
    if (st == DZ_OK) *out = strtoull(text, NULL, 16);
    return st;
}

/* An array of at most max whole numbers in lo..hi. */
static dz_status get_u32_array(const cJSON *o, const char *key, const char *what, int max, uint32_t lo, uint32_t hi,
                               uint32_t *out, int *n, dz_error *err) {
    const cJSON *v = need(o, key, what, err);
    if (!v) return DZ_ERR_FORMAT;
    if (!cJSON_IsArray(v)) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' must be an array", what, key);
    const int count = cJSON_GetArraySize(v);
    if (count > max) return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' has %d values, at most %d", what, key, count, max);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        double d = 0;
        char name[64];
        snprintf(name, sizeof name, "%s[%d]", key, i);
        dz_status st = number_in(x, name, what, lo, hi, &d, err);
        if (st != DZ_OK) return st;
        out[i++] = (uint32_t)d;
    }
    *n = count;
    return DZ_OK;
}

static void put_hex64(cJSON *o, const char *key, uint64_t v) {
    char text[17];
    snprintf(text, sizeof text, "%016" PRIx64, v);
    cJSON_AddStringToObject(o, key, text);
}

static void put_u32_array(cJSON *o, const char *key, const uint32_t *v, int n) {
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
}

static char *finish(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* ---- the messages ------------------------------------------------------------------- */

const char *dz_fed_code_name(dz_fed_code c) { return c == DZ_FED_CODE_F32 ? "f32" : "byte"; }

int dz_fed_code_parse(const char *name, dz_fed_code *c) {
    if (!strcmp(name, "byte")) *c = DZ_FED_CODE_BYTE;
    else if (!strcmp(name, "f32")) *c = DZ_FED_CODE_F32;
    else return -1;
    return 0;
}

char *dz_fed_join_req_json(const dz_fed_join_req *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "protocol", m->protocol);
    put_hex64(o, "fingerprint", m->fingerprint);
    cJSON_AddStringToObject(o, "name", m->name);
    return finish(o);
}

dz_status dz_fed_join_req_parse(const char *body, size_t len, dz_fed_join_req *m, dz_error *err) {
    const char *what = "join request";
    cJSON *o;
    memset(m, 0, sizeof *m);
    dz_status st = parse_object(body, len, what, &o, err);
    uint32_t protocol = 0;
    if (st == DZ_OK) st = get_u32(o, "protocol", what, 1, 1000000, &protocol, err);
    if (st == DZ_OK && protocol != DZ_FED_PROTOCOL && protocol != DZ_FED_PROTOCOL_POOL)
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: protocol %u; this coordinator speaks protocols %d and %d", what,
                     protocol, DZ_FED_PROTOCOL, DZ_FED_PROTOCOL_POOL);
    if (st == DZ_OK) st = get_hex64(o, "fingerprint", what, &m->fingerprint, err);
    if (st == DZ_OK) st = get_text(o, "name", what, DZ_FED_MAX_NAME, 0, m->name, err);
    m->protocol = (int)protocol;
    cJSON_Delete(o);
    return st;
}

char *dz_fed_run_info_json(const dz_fed_run_info *m) {
    cJSON *o = cJSON_CreateObject(), *run = cJSON_Parse(m->run_json);
    if (!run) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "protocol", m->seed_pool ? DZ_FED_PROTOCOL_POOL : DZ_FED_PROTOCOL);
    put_hex64(o, "fingerprint", m->fingerprint);
    cJSON_AddNumberToObject(o, "q", m->q);
    cJSON_AddStringToObject(o, "code", dz_fed_code_name(m->code));
    cJSON_AddNumberToObject(o, "g_clip", m->g_clip);
    if (m->seed_pool) {
        cJSON_AddNumberToObject(o, "seed_pool", m->seed_pool);
        cJSON_AddStringToObject(o, "seed_sampling", m->seed_sampling ? "importance" : "uniform");
    }
    cJSON_AddItemToObject(o, "run", run);
    return finish(o);
}

dz_status dz_fed_run_info_parse(const char *body, size_t len, dz_fed_run_info *m, dz_error *err) {
    const char *what = "run answer";
    cJSON *o;
    char code[8];
    uint32_t protocol = 0;
    memset(m, 0, sizeof *m);
    dz_status st = parse_object(body, len, what, &o, err);
    if (st == DZ_OK) st = get_u32(o, "protocol", what, 1, 1000000, &protocol, err);
    if (st == DZ_OK && protocol != DZ_FED_PROTOCOL && protocol != DZ_FED_PROTOCOL_POOL)
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: the coordinator speaks protocol %u, this worker %d and %d", what,
                     protocol, DZ_FED_PROTOCOL, DZ_FED_PROTOCOL_POOL);
    if (st == DZ_OK) st = get_hex64(o, "fingerprint", what, &m->fingerprint, err);
    if (st == DZ_OK) st = get_u32(o, "q", what, 1, DZ_FED_MAX_SLOTS, &m->q, err);
    if (st == DZ_OK) st = get_text(o, "code", what, 4, 0, code, err);
    if (st == DZ_OK && dz_fed_code_parse(code, &m->code) != 0)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'code': '%s' is not byte or f32", what, code);
    const cJSON *clip = st == DZ_OK ? need(o, "g_clip", what, err) : NULL;
    if (st == DZ_OK && (!clip || !cJSON_IsNumber(clip) || !(clip->valuedouble > 0) || !(clip->valuedouble <= 1e30)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'g_clip' must be a positive number", what);
    if (st == DZ_OK) m->g_clip = (float)clip->valuedouble;
    const int pool = cJSON_GetObjectItemCaseSensitive(o, "seed_pool") != NULL;
    if (st == DZ_OK && pool != (protocol == DZ_FED_PROTOCOL_POOL))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: protocol %u %s field 'seed_pool'", what, protocol,
                     pool ? "has no" : "needs the");
    if (st == DZ_OK && pool) { /* a pool run */
        char sampling[12];
        st = get_u32(o, "seed_pool", what, 1, DZ_FED_MAX_POOL, &m->seed_pool, err);
        if (st == DZ_OK && 2 * m->q > DZ_FED_MAX_SLOTS)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: a seed-pool run has at most %d slots, not %u", what,
                         DZ_FED_MAX_SLOTS / 2, m->q);
        if (st == DZ_OK) st = get_text(o, "seed_sampling", what, 10, 0, sampling, err);
        if (st == DZ_OK && strcmp(sampling, "uniform") && strcmp(sampling, "importance"))
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'seed_sampling': '%s' is not uniform or importance", what,
                         sampling);
        m->seed_sampling = st == DZ_OK && !strcmp(sampling, "importance");
    }
    const cJSON *run = st == DZ_OK ? need(o, "run", what, err) : NULL;
    if (st == DZ_OK && (!run || !cJSON_IsObject(run)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'run' must be an object (the run's run.json)", what);
    if (st == DZ_OK && !(m->run_json = cJSON_PrintUnformatted(run)))
        st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", what);
    cJSON_Delete(o);
    return st;
}

char *dz_fed_join_resp_json(const dz_fed_join_resp *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "machine", m->machine);
    cJSON_AddStringToObject(o, "key", m->key);
    return finish(o);
}

dz_status dz_fed_join_resp_parse(const char *body, size_t len, dz_fed_join_resp *m, dz_error *err) {
    const char *what = "join answer";
    cJSON *o;
    memset(m, 0, sizeof *m);
    dz_status st = parse_object(body, len, what, &o, err);
    if (st == DZ_OK) st = get_u32(o, "machine", what, 1, INT32_MAX, &m->machine, err);
    if (st == DZ_OK) st = get_text(o, "key", what, DZ_FED_KEY_CHARS, 1, m->key, err);
    cJSON_Delete(o);
    return st;
}

char *dz_fed_round_json(const dz_fed_round *m) {
    cJSON *o = cJSON_CreateObject();
    put_hex64(o, "version", m->version);
    cJSON_AddNumberToObject(o, "round", m->round);
    cJSON_AddNumberToObject(o, "log_count", m->log_count);
    cJSON_AddBoolToObject(o, "open", m->open);
    cJSON_AddBoolToObject(o, "finished", m->finished);
    put_hex64(o, "checksum", m->checksum);
    put_u32_array(o, "slots", m->slots, m->n_slots);
    if (m->pool) put_u32_array(o, "seeds", m->seeds, m->n_slots);
    cJSON_AddNumberToObject(o, "deadline_ms", m->deadline_ms);
    return finish(o);
}

dz_status dz_fed_round_parse(const char *body, size_t len, uint32_t q, uint32_t pool, dz_fed_round *m, dz_error *err) {
    const char *what = "round answer";
    cJSON *o;
    memset(m, 0, sizeof *m);
    dz_status st = parse_object(body, len, what, &o, err);
    if (st == DZ_OK) st = get_hex64(o, "version", what, &m->version, err);
    if (st == DZ_OK) st = get_u32(o, "round", what, 0, INT32_MAX, &m->round, err);
    if (st == DZ_OK) st = get_u32(o, "log_count", what, 0, INT32_MAX, &m->log_count, err);
    if (st == DZ_OK) st = get_bool(o, "open", what, &m->open, err);
    if (st == DZ_OK) st = get_bool(o, "finished", what, &m->finished, err);
    if (st == DZ_OK) st = get_hex64(o, "checksum", what, &m->checksum, err);
    if (st == DZ_OK) st = get_u32_array(o, "slots", what, (int)q, 0, q - 1, m->slots, &m->n_slots, err);
    if (st == DZ_OK && !pool && cJSON_GetObjectItemCaseSensitive(o, "seeds"))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'seeds' in a run without a seed pool", what);
    if (st == DZ_OK && pool) {
        int n_seeds = 0;
        st = get_u32_array(o, "seeds", what, (int)q, 0, pool - 1, m->seeds, &n_seeds, err);
        if (st == DZ_OK && n_seeds != m->n_slots)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: %d slots but %d seeds", what, m->n_slots, n_seeds);
        m->pool = pool;
    }
    if (st == DZ_OK) st = get_u32(o, "deadline_ms", what, 0, INT32_MAX, &m->deadline_ms, err);
    cJSON_Delete(o);
    return st;
}

char *dz_fed_submit_json(const dz_fed_submit *m, dz_fed_code code) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "machine", m->machine);
    cJSON_AddStringToObject(o, "key", m->key);
    cJSON_AddNumberToObject(o, "round", m->round);
    put_u32_array(o, "slots", m->slots, m->n);
    put_u32_array(o, code == DZ_FED_CODE_BYTE ? "codes" : "g_bits", m->values, m->n);
    if (isfinite(m->loss)) cJSON_AddNumberToObject(o, "loss", m->loss);
    else cJSON_AddNullToObject(o, "loss");
    return finish(o);
}

dz_status dz_fed_submit_parse(const char *body, size_t len, uint32_t q, dz_fed_code code, dz_fed_submit *m,
                              dz_error *err) {
    const char *what = "submission";
    cJSON *o;
    int n_values = 0;
    memset(m, 0, sizeof *m);
    m->loss = NAN;
    dz_status st = parse_object(body, len, what, &o, err);
    if (st == DZ_OK) st = get_u32(o, "machine", what, 1, INT32_MAX, &m->machine, err);
    if (st == DZ_OK) st = get_text(o, "key", what, DZ_FED_KEY_CHARS, 1, m->key, err);
    if (st == DZ_OK) st = get_u32(o, "round", what, 0, INT32_MAX, &m->round, err);
    if (st == DZ_OK) st = get_u32_array(o, "slots", what, (int)q, 0, q - 1, m->slots, &m->n, err);
    if (st == DZ_OK) {
        const int byte = code == DZ_FED_CODE_BYTE;
        st = get_u32_array(o, byte ? "codes" : "g_bits", what, (int)q, 0, byte ? 255 : UINT32_MAX, m->values, &n_values,
                           err);
        if (st == DZ_OK && n_values != m->n)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: %d slots but %d values", what, m->n, n_values);
    }
    for (int i = 0; st == DZ_OK && i < m->n; i++)
        for (int j = 0; j < i; j++)
            if (m->slots[i] == m->slots[j])
                st = dz_fail(err, DZ_ERR_FORMAT, "%s: slot %u is given twice", what, m->slots[i]);
    const cJSON *loss = st == DZ_OK ? cJSON_GetObjectItemCaseSensitive(o, "loss") : NULL;
    if (loss && !cJSON_IsNull(loss)) {
        if (!cJSON_IsNumber(loss) || !isfinite(loss->valuedouble) || fabs(loss->valuedouble) > 1e30)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'loss' must be a finite number or null", what);
        else
            m->loss = loss->valuedouble;
    }
    cJSON_Delete(o);
    return st;
}

size_t dz_fed_pool_state_bytes(uint32_t k) { return DZ_FED_POOL_HEADER + 4 * (size_t)k + 4; }

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void dz_fed_pool_state_encode(uint32_t log_count, uint32_t k, const float *acc, uint8_t *out) {
    memcpy(out, "DZKSEED1", 8);
    put_le32(out + 8, log_count);
    put_le32(out + 12, k);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t bits;
        memcpy(&bits, &acc[i], 4);
        put_le32(out + DZ_FED_POOL_HEADER + 4 * (size_t)i, bits);
    }
    const size_t n = DZ_FED_POOL_HEADER + 4 * (size_t)k;
    put_le32(out + n, dz_crc32(0, out, n));
}

dz_status dz_fed_pool_state_decode(const uint8_t *in, size_t len, uint32_t k, uint32_t *log_count, float *acc,
                                   dz_error *err) {
    const char *what = "GET /v1/pool";
    if (len < DZ_FED_POOL_HEADER + 4 || memcmp(in, "DZKSEED1", 8) != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %zu bytes that do not start with DZKSEED1", what, len);
    if (get_le32(in + 12) != k)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: a pool of %u seeds, the run has %u", what, get_le32(in + 12), k);
    if (len != dz_fed_pool_state_bytes(k))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %zu bytes, expected %zu for %u seeds", what, len,
                       dz_fed_pool_state_bytes(k), k);
    const size_t n = DZ_FED_POOL_HEADER + 4 * (size_t)k;
    if (dz_crc32(0, in, n) != get_le32(in + n)) return dz_fail(err, DZ_ERR_FORMAT, "%s: the CRC does not match", what);
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t bits = get_le32(in + DZ_FED_POOL_HEADER + 4 * (size_t)i);
        memcpy(&acc[i], &bits, 4);
        if (!isfinite(acc[i])) return dz_fail(err, DZ_ERR_FORMAT, "%s: seed %u's scalar is not finite", what, i);
    }
    *log_count = get_le32(in + 8);
    if (*log_count > INT32_MAX) return dz_fail(err, DZ_ERR_FORMAT, "%s: log_count %u is too large", what, *log_count);
    return DZ_OK;
}

char *dz_fed_error_json(const char *message) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", message);
    return finish(o);
}

void dz_fed_error_message(const char *body, size_t len, char *msg, size_t cap) {
    cJSON *o = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *e = o ? cJSON_GetObjectItemCaseSensitive(o, "error") : NULL;
    if (e && cJSON_IsString(e)) snprintf(msg, cap, "%s", e->valuestring);
    else snprintf(msg, cap, "%.*s", (int)(len < 200 ? len : 200), body ? body : "");
    cJSON_Delete(o);
}

int dz_fed_new_key(char key[DZ_FED_KEY_CHARS + 1]) {
    unsigned char raw[DZ_FED_KEY_CHARS / 2];
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < sizeof raw) {
        const ssize_t r = dz_io_read(fd, raw + got, sizeof raw - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got < sizeof raw) return -1;
    for (size_t i = 0; i < sizeof raw; i++) snprintf(key + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

dz_status dz_fed_read_token(const char *path, char out[DZ_FED_TOKEN_MAX + 1], dz_error *err) {
    char *text = NULL;
    size_t len = 0;
    if (!path) return dz_fail(err, DZ_ERR_INVALID, "--token-file is required: every request is authenticated");
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    size_t n = 0;
    while (n < len && text[n] != '\n' && text[n] != '\r') n++;
    for (size_t i = 0; st == DZ_OK && i < n; i++)
        if ((unsigned char)text[i] <= 0x20 || (unsigned char)text[i] >= 0x7F)
            st = dz_fail(err, DZ_ERR_INVALID, "%s: the token has a space or an unprintable byte at byte %zu", path, i + 1);
    if (st == DZ_OK && (n < 16 || n > DZ_FED_TOKEN_MAX))
        st = dz_fail(err, DZ_ERR_INVALID, "%s: the token (first line) has %zu bytes; it needs 16..%d", path, n,
                     DZ_FED_TOKEN_MAX);
    if (st == DZ_OK) {
        memcpy(out, text, n);
        out[n] = '\0';
    }
    free(text);
    return st;
}

int dz_fed_secret_equal(const char *a, const char *b) {
    const size_t na = strlen(a), nb = strlen(b);
    unsigned diff = na != nb;
    for (size_t i = 0; i < na && i < nb; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}
