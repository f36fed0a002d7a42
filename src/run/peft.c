/* The run's parameter-efficient settings (peft.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/hash.h"
#include "run/peft.h"

int dz_train_peft_lora(const dz_train_config *c, dz_lora_spec *spec) {
    if (!c->peft.method || strcmp(c->peft.method, "lora")) return 0;
    *spec = (dz_lora_spec){.rank = c->peft.lora_rank, .alpha = c->peft.lora_alpha};
    dz_error e = {0};
    if (dz_lora_parse_targets(c->peft.lora_targets, &spec->targets, &e) != DZ_OK) spec->targets = 0; /* checked before */
    return 1;
}

dz_status dz_train_peft_check(const dz_train_config *c, dz_error *err) {
    const dz_train_peft *p = &c->peft;
    if ((!p->method || !strcmp(p->method, "none")) && p->lora_init)
        return dz_fail(err, DZ_ERR_INVALID, "--adapter %s: the run trains every parameter (give --peft lora to "
                       "train the adapter on)", p->lora_init);
    if (!p->method || !strcmp(p->method, "none")) return DZ_OK;
    if (!strcmp(p->method, "prefix"))
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "--peft prefix: prefix tuning is not built yet (docs/ADAPTERS.md); "
                       "--peft lora is");
    if (strcmp(p->method, "lora"))
        return dz_fail(err, DZ_ERR_INVALID, "--peft '%s': expected none or lora", p->method);
    if (p->lora_dropout != 0.0f)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-dropout %g: a ZO step has no dropout (both perturbed forwards must "
                       "see the same network); use 0", (double)p->lora_dropout);
    if (p->lora_rank < 1 || p->lora_rank > 4096)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-rank %d: expected 1..4096", p->lora_rank);
    if (!(p->lora_alpha > 0.0f) || p->lora_alpha > 1e6f)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-alpha %g: expected a positive number", (double)p->lora_alpha);
    unsigned targets;
    return dz_lora_parse_targets(p->lora_targets, &targets, err);
}

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
    if (dz_lora_table_build(cfg, &spec, &t, &e) == DZ_OK) {
        for (int i = 0; i < t.count; i++)
            h = dz_hash_u64(dz_hash_u64(dz_hash_str(h, t.params[i].hf_name), (uint64_t)t.params[i].rows),
                            (uint64_t)t.params[i].cols);
        dz_param_table_free(&t);
    }
    char targets[64];
    dz_lora_targets_string(spec.targets, targets, sizeof targets);
    snprintf(text, sizeof text, "lora r=%d alpha=%g %016" PRIx64 " %s", spec.rank, (double)spec.alpha, h, targets);
    memcpy(out, text, strlen(text) < 63 ? strlen(text) : 63);
}

dz_status dz_train_log_matches(const dz_train_config *c, const dz_config *cfg, const uint8_t got[64], const char *path,
                               dz_error *err) {
    uint8_t want[64];
    dz_train_log_fingerprint(c, cfg, want);
    const int lora_log = !strncmp((const char *)got, "lora ", 5), lora_run = !strncmp((const char *)want, "lora ", 5);
    if (lora_log == lora_run && (!lora_run || !memcmp(got, want, 64))) return DZ_OK;
    return dz_fail(err, DZ_ERR_INVALID, "%s: the log was written for \"%.64s\", but run.json's settings give \"%.64s\": "
                   "a log is never replayed onto another layout", path, (const char *)got, (const char *)want);
}

void dz_train_peft_weights(const dz_train_config *c, dz_weights_spec *ws, dz_lora_spec *spec) {
    if (!dz_train_peft_lora(c, spec)) return;
    ws->lora = spec;
    ws->base = c->model;
    ws->lora_seed = c->optim.seed;
    ws->lora_init = c->peft.lora_init;
}
