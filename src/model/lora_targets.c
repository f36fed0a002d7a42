/* The projections a LoRA adapter may target and their names: the short ones, Hugging
 * Face's module names of the LLaMA family and of OPT. Strings only (no model state), so
 * the settings check and the run.json fuzz target use it alone. */
#include <stdio.h>
#include <string.h>

#include "distzo/model.h"

static const char *const SHORT[DZ_LORA_N_TARGETS] = {"q", "k", "v", "o", "up", "gate", "down"};
static const char *const LLAMA_NAMES[DZ_LORA_N_TARGETS] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                           "up_proj", "gate_proj", "down_proj"};
static const char *const OPT_NAMES[DZ_LORA_N_TARGETS] = {"q_proj", "k_proj", "v_proj", "out_proj",
                                                         "fc1", NULL, "fc2"};
static const int BASE_ROLE[DZ_LORA_N_TARGETS] = {DZ_L_WQ, DZ_L_WK, DZ_L_WV, DZ_L_WO,
                                                 DZ_L_W_UP, DZ_L_W_GATE, DZ_L_W_DOWN};

int dz_lora_base_role(int target) { return target >= 0 && target < DZ_LORA_N_TARGETS ? BASE_ROLE[target] : -1; }

static int target_of(const char *name, size_t n) {
    for (int t = 0; t < DZ_LORA_N_TARGETS; t++) {
        const char *names[3] = {SHORT[t], LLAMA_NAMES[t], OPT_NAMES[t]};
        for (int k = 0; k < 3; k++)
            if (names[k] && strlen(names[k]) == n && !strncmp(names[k], name, n)) return t;
    }
    return -1;
}

dz_status dz_lora_parse_targets(const char *list, unsigned *out, dz_error *err) {
    *out = 0;
    for (const char *p = list; p && *p;) {
        const size_t n = strcspn(p, ",");
        const int t = target_of(p, n);
        if (t < 0)
            return dz_fail(err, DZ_ERR_INVALID, "--lora-targets: unknown module '%.*s' (known: q k v o up gate down, "
                           "or q_proj k_proj v_proj o_proj up_proj gate_proj down_proj, OPT's out_proj fc1 fc2)",
                           (int)n, p);
        *out |= 1u << t;
        p += n + (p[n] == ',');
    }
    if (!*out) return dz_fail(err, DZ_ERR_INVALID, "--lora-targets: no module named");
    return DZ_OK;
}

static void join_names(const char *const *names, unsigned targets, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int t = 0; t < DZ_LORA_N_TARGETS && used < cap; t++)
        if (targets & (1u << t)) used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? "," : "", names[t]);
}

void dz_lora_targets_string(unsigned targets, char *out, size_t cap) { join_names(SHORT, targets, out, cap); }

const char *dz_lora_target_name(int target) {
    return target >= 0 && target < DZ_LORA_N_TARGETS ? LLAMA_NAMES[target] : "?";
}

void dz_lora_module_names(const dz_config *cfg, unsigned targets, char *out, size_t cap) {
    join_names(cfg->arch == DZ_ARCH_OPT ? OPT_NAMES : LLAMA_NAMES, targets, out, cap);
}

dz_status dz_lora_check_target_names(const char *list, const dz_config *cfg, dz_error *err) {
    const int opt = cfg->arch == DZ_ARCH_OPT;
    const char *const *own = opt ? OPT_NAMES : LLAMA_NAMES, *const *other = opt ? LLAMA_NAMES : OPT_NAMES;
    const char *family = opt ? "an OPT" : "a LLaMA-family"; /* strings only here (the fuzz targets link this file alone) */
    for (const char *p = list; p && *p;) {
        const size_t n = strcspn(p, ",");
        for (int t = 0; t < DZ_LORA_N_TARGETS; t++) {
            const int named = other[t] && strlen(other[t]) == n && !strncmp(other[t], p, n);
            if (!named || (own[t] && !strcmp(own[t], other[t]))) continue; /* q_proj k_proj v_proj: both */
            if (!own[t])
                return dz_fail(err, DZ_ERR_INVALID, "--lora-targets: %s model has no module '%.*s'", family, (int)n, p);
            return dz_fail(err, DZ_ERR_INVALID, "--lora-targets: %s model has no module '%.*s' (%s's name): give %s, "
                           "or %s", family, (int)n, p, opt ? "LLaMA" : "OPT", own[t], SHORT[t]);
        }
        p += n + (p[n] == ',');
    }
    return DZ_OK;
}
