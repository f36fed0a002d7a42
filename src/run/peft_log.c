/* The seed log's identity of a run (peft.h): its header's settings, the fingerprint of what
 * it trains (the base model's path for a full run, the adapter's layout for a LoRA run),
 * the check that a log is this run's, and that the adapter a replay starts from is the run's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "run/compute.h"
#include "run/peft.h"

void dz_train_log_fingerprint(const dz_train_config *c, const dz_config *cfg, uint8_t out[64]) {
    dz_lora_spec spec;
    char text[160];
    memset(out, 0, 64);
    if (!dz_train_peft_lora(c, &spec)) {
        snprintf((char *)out, 64, "%s", c->model);
        return;
    }
    dz_param_table t;
    uint64_t h = DZ_HASH_START;
    dz_error e = {0};
    const dz_status built = spec.prefix_tokens > 0 ? dz_prefix_table_build(cfg, spec.prefix_tokens, &t, &e)
                                                   : dz_lora_table_build(cfg, &spec, &t, &e);
    if (built == DZ_OK) {
        for (int i = 0; i < t.count; i++)
            h = dz_hash_u64(dz_hash_u64(dz_hash_str(h, t.params[i].hf_name), (uint64_t)t.params[i].rows),
                            (uint64_t)t.params[i].cols);
        dz_param_table_free(&t);
    }
    if (spec.prefix_tokens > 0) {
        snprintf(text, sizeof text, "prefix n=%d %016" PRIx64, spec.prefix_tokens, h);
        memcpy(out, text, strlen(text) < 63 ? strlen(text) : 63);
        return;
    }
    char targets[64];
    dz_lora_targets_string(spec.targets, targets, sizeof targets);
    snprintf(text, sizeof text, "lora r=%d alpha=%g %016" PRIx64 " %s", spec.rank, (double)spec.alpha, h, targets);
    memcpy(out, text, strlen(text) < 63 ? strlen(text) : 63);
}

void dz_train_log_header(const dz_train_config *c, const dz_config *cfg, dz_seedlog_header *h) {
    const dz_zo_params zp = dz_train_zo_params(&c->optim);
    *h = (dz_seedlog_header){.run_seed = c->optim.seed, .q = (uint32_t)dz_zo_log_values(&zp),
                             .dist = c->optim.rademacher ? DZ_SEEDLOG_RADEMACHER : DZ_SEEDLOG_GAUSSIAN,
                             .rng = c->optim.rng_v2 ? 2 : 1, .eps = c->optim.eps, .start_step = 0};
    if (cfg) dz_train_log_fingerprint(c, cfg, h->fingerprint);
}

/* An adapter's layout (LoRA's or a prefix's), not a base model's path. */
static int is_adapter_log(const uint8_t fp[64]) {
    return !strncmp((const char *)fp, "lora ", 5) || !strncmp((const char *)fp, "prefix ", 7);
}

dz_status dz_train_log_matches(const dz_train_config *c, const dz_config *cfg, const uint8_t got[64], const char *path,
                               dz_error *err) {
    uint8_t want[64];
    dz_train_log_fingerprint(c, cfg, want);
    const int lora_log = is_adapter_log(got), lora_run = is_adapter_log(want);
    if (lora_log == lora_run && (!lora_run || !memcmp(got, want, 64))) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "%s: the log was written for \"%.64s\", but run.json's settings give \"%.64s\": "
                   "a log is never replayed onto another layout", path, (const char *)got, (const char *)want);
}


dz_status dz_train_peft_init_fingerprint(const dz_train_config *c, const char *weights, char hex[17], dz_error *err) {
    hex[0] = 0;
    dz_lora_spec spec;
    if (!c->peft.lora_init || !dz_train_peft_lora(c, &spec) || (weights && dz_lora_is_folder(weights))) return DZ_OK;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", c->peft.lora_init);
    FILE *f = fopen(path, "rb");
    if (!f) return DZ_OK; /* the adapter's loader names what is missing */
    enum { CHUNK = 1 << 16 };
    unsigned char *buf = malloc(CHUNK);
    uint64_t h = DZ_HASH_START;
    size_t n = 0;
    while (buf && (n = fread(buf, 1, CHUNK, f)) > 0) h = dz_hash_bytes(h, buf, n);
    const int failed = !buf || ferror(f);
    free(buf);
    fclose(f);
    if (failed) return dz_fail(err, DZ_ERR_IO, "%s: cannot read it", path);
    snprintf(hex, 17, "%016" PRIx64, h);
    const char *want = c->peft.lora_init_fingerprint;
    if (want && strcmp(want, hex))
        return dz_fail(err, DZ_ERR_INVALID, "%s: the file has changed since the run started from it, or is another "
                       "adapter's (fingerprint %s, run.json's lora_init_fingerprint %s): replaying the seed log onto it "
                       "would give other weights; give the adapter the run started from", path, hex, want);
    return DZ_OK;
}

dz_status dz_train_base_check(const dz_train_config *c, const dz_model *base, const char *path, char hex[17],
                              dz_error *err) {
    snprintf(hex, 17, "%016" PRIx64, dz_compute_table_hash(dz_model_params(base)));
    if (!c->model_table || !strcmp(c->model_table, hex)) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "%s: its tensors (names and shapes) are not those of the model the run was trained "
                   "from (run.json's model_table %s, this model's %s): a seed log replays only onto its own base", path,
                   c->model_table, hex);
}
