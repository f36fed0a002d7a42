/* federated.json (settings.h). */
#include "federated/settings.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distzo/util.h"
#include "federated/admission.h"
#include "federated/protocol.h"
#include "format/json_file.h"
#include "run/seed_pool.h"

void dz_fed_settings_default(dz_fed_settings *s) {
    *s = (dz_fed_settings){.samples_per_worker = 1, .quorum = 0, .round_timeout = 30.0, .min_workers = 1,
                           .worker_timeout = 10.0, .code = DZ_FED_CODE_BYTE, .g_clip = 64.0f,
                           .max_joins_per_client = DZ_FED_MAX_JOINS_DEFAULT};
}

/* Both timeouts: positive and at most a day. */
static dz_status check_timeout(const char *option, double seconds, dz_error *err) {
    if (seconds > 0 && seconds <= 86400) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "%s %g: must be in (0, 86400] seconds", option, seconds);
}

dz_status dz_fed_settings_check(const dz_fed_settings *s, int q, dz_error *err) {
    if (s->samples_per_worker < 1 || s->samples_per_worker > q)
        return dz_fail(err, DZ_ERR_INVALID, "--samples-per-worker %d: must be 1..%d (--spsa-samples, the slots of a round)",
                       s->samples_per_worker, q);
    if (s->quorum < 0 || s->quorum > q)
        return dz_fail(err, DZ_ERR_INVALID, "--quorum %d: must be 0 (every assigned slot) .. %d", s->quorum, q);
    dz_status st;
    if ((st = check_timeout("--round-timeout", s->round_timeout, err)) != DZ_OK) return st;
    if (s->min_workers < 1 || s->min_workers > DZ_FED_MAX_MACHINES)
        return dz_fail(err, DZ_ERR_INVALID, "--min-workers %d: must be 1..%d", s->min_workers, DZ_FED_MAX_MACHINES);
    if ((st = check_timeout("--worker-timeout", s->worker_timeout, err)) != DZ_OK) return st;
    if (!(s->robust_clip == 0 || (s->robust_clip >= 1 && isfinite(s->robust_clip))))
        return dz_fail(err, DZ_ERR_INVALID, "--robust-clip %g: must be 0 (off) or at least 1", (double)s->robust_clip);
    if (!(s->g_clip > 0 && isfinite(s->g_clip)))
        return dz_fail(err, DZ_ERR_INVALID, "--g-clip %g: must be a positive number", (double)s->g_clip);
    if (s->seed_pool > DZ_SEED_POOL_MAX)
        return dz_fail(err, DZ_ERR_INVALID, "--seed-pool %u: must be 1..%u seeds", s->seed_pool, DZ_SEED_POOL_MAX);
    if (s->seed_pool && 2 * q > DZ_FED_MAX_SLOTS) /* a pool record holds q g and q seed indices */
        return dz_fail(err, DZ_ERR_INVALID, "--seed-pool: at most %d slots per round (--spsa-samples %d)",
                       DZ_FED_MAX_SLOTS / 2, q);
    if (s->seed_sampling != DZ_SEED_UNIFORM && s->seed_sampling != DZ_SEED_IMPORTANCE)
        return dz_fail(err, DZ_ERR_INVALID, "--seed-sampling: must be uniform or importance");
    if (s->max_joins_per_client < 1 || s->max_joins_per_client > DZ_FED_MAX_MACHINES)
        return dz_fail(err, DZ_ERR_INVALID, "--max-joins-per-client %d: must be 1..%d joins per address and minute",
                       s->max_joins_per_client, DZ_FED_MAX_MACHINES);
    return DZ_OK;
}

dz_status dz_fed_settings_write(const char *run_dir, const dz_fed_settings *s, uint64_t fingerprint, dz_error *err) {
    char path[4200], fp[17];
    snprintf(path, sizeof path, "%s/federated.json", run_dir);
    snprintf(fp, sizeof fp, "%016" PRIx64, fingerprint);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "samples_per_worker", s->samples_per_worker);
    cJSON_AddNumberToObject(o, "quorum", s->quorum);
    cJSON_AddNumberToObject(o, "round_timeout", s->round_timeout);
    cJSON_AddNumberToObject(o, "min_workers", s->min_workers);
    cJSON_AddNumberToObject(o, "worker_timeout", s->worker_timeout);
    cJSON_AddStringToObject(o, "code", dz_fed_code_name(s->code));
    cJSON_AddNumberToObject(o, "g_clip", s->g_clip);
    cJSON_AddNumberToObject(o, "robust_clip", s->robust_clip);
    cJSON_AddNumberToObject(o, "max_joins_per_client", s->max_joins_per_client);
    if (s->seed_pool) {
        cJSON_AddNumberToObject(o, "seed_pool", s->seed_pool);
        cJSON_AddStringToObject(o, "seed_sampling", dz_seed_sampling_name((dz_seed_sampling)s->seed_sampling));
    }
    cJSON_AddStringToObject(o, "base_fingerprint", fp);
    return dz_json_write_file(path, o, err);
}

static dz_status number(const cJSON *o, const char *key, const char *path, double *out, dz_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || !cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field '%s' is missing or not a number", path, key);
    *out = v->valuedouble;
    return DZ_OK;
}

dz_status dz_fed_settings_read(const char *run_dir, dz_fed_settings *s, uint64_t *fingerprint, dz_error *err) {
    char path[4200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/federated.json", run_dir);
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a JSON object", path);
    }
    dz_fed_settings_default(s);
    double v[6] = {0};
    const char *keys[6] = {"samples_per_worker", "quorum", "round_timeout", "min_workers", "worker_timeout", "g_clip"};
    for (int i = 0; st == DZ_OK && i < 6; i++) st = number(o, keys[i], path, &v[i], err);
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(o, "code");
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(o, "base_fingerprint");
    if (st == DZ_OK && (!cJSON_IsString(code) || dz_fed_code_parse(code->valuestring, &s->code) != 0))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'code' must be \"byte\" or \"f32\"", path);
    if (st == DZ_OK && (!cJSON_IsString(fp) || strlen(fp->valuestring) != 16))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'base_fingerprint' must be 16 hex digits", path);
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(o, "robust_clip"); /* optional: off when absent */
    if (st == DZ_OK && rc && (!cJSON_IsNumber(rc) || !isfinite(rc->valuedouble)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'robust_clip' must be a number", path);
    if (st == DZ_OK && rc) s->robust_clip = (float)rc->valuedouble;
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(o, "max_joins_per_client"); /* optional: the default when absent */
    if (st == DZ_OK && mj && (!cJSON_IsNumber(mj) || !(mj->valuedouble >= 1 && mj->valuedouble <= DZ_FED_MAX_MACHINES) ||
                              mj->valuedouble != floor(mj->valuedouble)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'max_joins_per_client' must be a whole number 1..%d", path,
                     DZ_FED_MAX_MACHINES);
    if (st == DZ_OK && mj) s->max_joins_per_client = (int)mj->valuedouble;
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(o, "seed_pool"); /* optional: off when absent */
    const cJSON *sampling = cJSON_GetObjectItemCaseSensitive(o, "seed_sampling");
    dz_seed_sampling mode = DZ_SEED_UNIFORM;
    if (st == DZ_OK && pool && (!cJSON_IsNumber(pool) || !(pool->valuedouble >= 1 && pool->valuedouble <= DZ_SEED_POOL_MAX) ||
                                pool->valuedouble != floor(pool->valuedouble)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'seed_pool' must be a whole number 1..%u", path, DZ_SEED_POOL_MAX);
    if (st == DZ_OK && pool && (!cJSON_IsString(sampling) || dz_seed_sampling_parse(sampling->valuestring, &mode) != 0))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'seed_sampling' must be \"uniform\" or \"importance\"", path);
    if (st == DZ_OK && pool) s->seed_pool = (uint32_t)pool->valuedouble, s->seed_sampling = (int)mode;
    if (st == DZ_OK) {
        *fingerprint = strtoull(fp->valuestring, NULL, 16);
        s->samples_per_worker = (int)v[0], s->quorum = (int)v[1], s->round_timeout = v[2];
        s->min_workers = (int)v[3], s->worker_timeout = v[4], s->g_clip = (float)v[5];
    }
    cJSON_Delete(o);
    return st;
}
