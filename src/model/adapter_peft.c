/* A LoRA adapter as a Hugging Face PEFT folder: adapter_config.json and
 * adapter_model.safetensors with PEFT's keys (base_model.model.<module>.lora_A.weight),
 * written by distzo or by PEFT itself (docs/ADAPTERS.md). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "format/json_file.h"
#include "model/model_internal.h"

static dz_status write_config(const dz_model *m, const char *path, dz_error *err) {
    char modules[128];
    dz_lora_module_names(&m->cfg, m->lora.targets, modules, sizeof modules);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "target_modules");
    for (char *p = strtok(modules, ","); p; p = strtok(NULL, ",")) cJSON_AddItemToArray(list, cJSON_CreateString(p));
    cJSON_AddStringToObject(o, "peft_type", "LORA");
    cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
    cJSON_AddStringToObject(o, "base_model_name_or_path", m->lora_base);
    cJSON_AddNumberToObject(o, "r", m->lora.rank);
    cJSON_AddNumberToObject(o, "lora_alpha", m->lora.alpha);
    cJSON_AddNumberToObject(o, "lora_dropout", 0.0);
    cJSON_AddStringToObject(o, "bias", "none");
    cJSON_AddBoolToObject(o, "fan_in_fan_out", 0);
    cJSON_AddBoolToObject(o, "use_rslora", 0);
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    return dz_json_write_file(path, o, err);
}

dz_status dz_lora_save(const dz_model *m, const char *dir, dz_error *err) {
    if (dz_mkdirs(dir) != 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", dir, strerror(errno));
    char path[PATH_MAX];
    if (dz_path_join(path, sizeof path, dir, "adapter_config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    dz_status st = write_config(m, path, err);
    dz_st_write_tensor *ts = st == DZ_OK ? calloc((size_t)m->table.count, sizeof *ts) : NULL;
    if (st == DZ_OK && !ts) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    for (int i = 0; ts && i < m->table.count; i++) {
        const dz_param *p = &m->table.params[i];
        ts[i] = (dz_st_write_tensor){.name = p->hf_name, .dtype = DZ_F32, .data = m->data[i], .ndim = 2,
                                     .shape = {p->rows, p->cols}};
    }
    dz_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    if (st == DZ_OK) st = dz_safetensors_write(path, ts, m->table.count, err);
    free(ts);
    return st;
}

int dz_lora_is_folder(const char *dir) {
    char path[PATH_MAX];
    return dz_path_join(path, sizeof path, dir, "adapter_config.json") == 0 && dz_file_exists(path);
}

/* target_modules: a list of module names, or one string: a comma list of names, else
 * PEFT's regex (fullmatched against each module's path), which leaves *targets 0 for
 * targets_from_tensors to take them from the file. */
static dz_status read_targets(const cJSON *o, const char *path, unsigned *targets, dz_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "target_modules");
    char list[256] = "";
    if (cJSON_IsString(v) && v->valuestring[0]) {
        dz_error quiet = {0};
        if (dz_lora_parse_targets(v->valuestring, targets, &quiet) != DZ_OK) *targets = 0; /* a regex */
        return DZ_OK;
    }
    for (const cJSON *x = cJSON_IsArray(v) ? v->child : NULL; x; x = x->next) {
        if (!cJSON_IsString(x)) return dz_fail(err, DZ_ERR_FORMAT, "%s: target_modules holds a non-string", path);
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", n ? "," : "", x->valuestring);
    }
    if (!list[0]) return dz_fail(err, DZ_ERR_FORMAT, "%s: target_modules is missing or empty", path);
    dz_error why = {0}; /* its own buffer: dz_fail formats into err */
    if (dz_lora_parse_targets(list, targets, &why) != DZ_OK)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: target_modules: %s", path, why.msg);
    return DZ_OK;
}

/* A value that asks for something: not absent, null, false, [] or {}. */
static int is_set(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    return !(cJSON_IsArray(v) || cJSON_IsObject(v)) || cJSON_GetArraySize(v) > 0;
}

/* The first setting that would make PEFT's forward other than one (r, alpha) on every
 * layer of the targets, or NULL: rsLoRA, DoRA, a transposed layout, a bias on B, QALoRA
 * (flags); per-module ranks and alphas, a subset of layers, replicated layers,
 * aLoRA (active only after its invocation tokens), LoRA on parameters, trained tokens,
 * saved modules, KaSA, BD-LoRA, Arrow routing, MonteCLoRA (any value but null, false or
 * empty). Not checked: VeLoRA (a backward pass only) and the initializations
 * (init_lora_weights, the loftq/eva/corda/lora_ga configs): an adapter whose init changed
 * the base (PiSSA, OLoRA, CorDA, LoftQ) goes with the base it saved, as under PEFT. */
static const char *unsupported_key(const cJSON *o) {
    static const char *const flags[] = {"use_rslora", "use_dora", "fan_in_fan_out", "lora_bias", "use_qalora"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, flags[i]))) return flags[i];
    static const char *const set[] = {"rank_pattern", "alpha_pattern", "layers_to_transform", "layer_replication",
                                      "alora_invocation_tokens", "target_parameters", "trainable_token_indices",
                                      "modules_to_save", "kasa_config", "use_bdlora", "arrow_config",
                                      "monteclora_config"};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (is_set(cJSON_GetObjectItemCaseSensitive(o, set[i]))) return set[i];
    return NULL;
}

/* The settings of adapter_config.json distzo can honour; the rest refused by name. */
static dz_status read_config(const char *path, dz_lora_spec *spec, char *base, size_t cap, dz_error *err) {
    char *text = NULL;
    dz_status st = dz_read_file(path, &text, NULL, err);
    if (st != DZ_OK) return st;
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "peft_type");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "r"), *a = cJSON_GetObjectItemCaseSensitive(o, "lora_alpha");
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(o, "bias"), *b = cJSON_GetObjectItemCaseSensitive(o, "base_model_name_or_path");
    if (!o) st = dz_fail(err, DZ_ERR_FORMAT, "%s: not JSON", path);
    else if (dz_json_repeated_key(o))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is given twice", path, dz_json_repeated_key(o));
    else if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA"))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: peft_type must be \"LORA\" or \"PREFIX_TUNING\"", path);
    else if (!cJSON_IsNumber(r) || !(r->valuedouble >= 1 && r->valuedouble <= 4096) ||
             r->valuedouble != (int)r->valuedouble)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: r must be an integer in 1..4096 (as --lora-rank)", path);
    else if (!cJSON_IsNumber(a) || !(a->valuedouble > 0 && a->valuedouble <= 1e6))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: lora_alpha must be a positive number up to 1e6 (as --lora-alpha)", path);
    else if (bias && (!cJSON_IsString(bias) || strcmp(bias->valuestring, "none")))
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: bias must be \"none\" (trained biases are not supported)", path);
    else if (unsupported_key(o))
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: %s is not supported (one r and lora_alpha on every layer of the "
                     "targets; no rsLoRA, DoRA, fan_in_fan_out or other LoRA variant)", path, unsupported_key(o));
    if (st == DZ_OK) *spec = (dz_lora_spec){.rank = (int)r->valuedouble, .alpha = (float)a->valuedouble};
    if (st == DZ_OK) st = read_targets(o, path, &spec->targets, err);
    snprintf(base, cap, "%s", cJSON_IsString(b) ? b->valuestring : "");
    cJSON_Delete(o);
    return st;
}

/* Tensor i of m from the file: its shape checked, converted to f32. */
static dz_status read_tensor(dz_model *m, int i, const dz_safetensors *sf, dz_error *err) {
    const dz_param *p = &m->table.params[i];
    const dz_st_tensor *t = dz_safetensors_find(sf, p->hf_name);
    if (!t) return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is missing (adapter_config.json targets its module, "
                           "which distzo adapts on every layer)", sf->path,
                           p->hf_name);
    if (t->ndim != 2 || t->shape[0] != p->rows || t->shape[1] != p->cols)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is not [%lld, %lld] as r and the base model imply (the "
                       "adapter's base_model_name_or_path is '%s': is this its base?)", sf->path, p->hf_name,
                       (long long)p->rows, (long long)p->cols, m->lora_base[0] ? m->lora_base : "not given");
    if (t->dtype != DZ_F32 && t->dtype != DZ_BF16 && t->dtype != DZ_F16)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s' is %s (expected F32, BF16 or F16)", sf->path,
                       p->hf_name, dz_dtype_name(t->dtype));
    const size_t n = (size_t)dz_param_numel(p), es = dz_dtype_size(t->dtype);
    char *tmp = malloc(n * es);
    if (!tmp) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    memcpy(tmp, t->data, n * es); /* another writer may leave the data unaligned */
    dz_to_f32(m->data[i], tmp, t->dtype, n);
    free(tmp);
    return DZ_OK;
}

/* Every tensor of the file is one the table knows: nothing PEFT saved is silently dropped. */
static dz_status check_no_extra(const dz_model *m, const dz_safetensors *sf, dz_error *err) {
    for (int k = 0; k < sf->count; k++) {
        int known = 0;
        for (int i = 0; i < m->table.count && !known; i++) known = !strcmp(sf->tensors[k].name, m->table.params[i].hf_name);
        if (!known)
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s' is not a LoRA A/B of the targets adapter_config.json "
                           "names for this base model of %d layers (modules_to_save and other extras are not supported; "
                           "the adapter's base_model_name_or_path is '%s': is this its base?)", sf->path,
                           sf->tensors[k].name, m->cfg.n_layers, m->lora_base[0] ? m->lora_base : "not given");
    }
    return DZ_OK;
}

/* The targets of a regex target_modules: the modules whose A the file holds
 * (base_model.model.<path>.<module>.lora_A.weight); read_tensor and check_no_extra then
 * require both tensors of each on every layer, as for a list. */
static dz_status targets_from_tensors(const dz_safetensors *sf, unsigned *targets, dz_error *err) {
    static const char suffix[] = ".lora_A.weight";
    const size_t ns = sizeof suffix - 1;
    for (int k = 0; k < sf->count; k++) {
        const char *name = sf->tensors[k].name;
        const size_t n = strlen(name);
        if (n <= ns || strcmp(name + n - ns, suffix)) continue;
        const char *dot = name + n - ns, *start = dot;
        while (start > name && start[-1] != '.') start--;
        char module[64];
        snprintf(module, sizeof module, "%.*s", (int)(dot - start), start);
        unsigned one;
        dz_error quiet = {0};
        if (dz_lora_parse_targets(module, &one, &quiet) != DZ_OK)
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s': module '%s' is not one distzo can target (q k v o "
                           "up gate down, OPT's out_proj fc1 fc2)", sf->path, name, module);
        *targets |= one;
    }
    return *targets ? DZ_OK : dz_fail(err, DZ_ERR_FORMAT, "%s: no lora_A tensor for target_modules' pattern", sf->path);
}

dz_status dz_lora_load(const char *dir, const dz_config *cfg, dz_model **out, dz_error *err) {
    *out = NULL;
    char path[PATH_MAX], base[PATH_MAX];
    dz_lora_spec spec;
    if (dz_path_join(path, sizeof path, dir, "adapter_config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    if (!dz_file_exists(path)) return dz_fail(err, DZ_ERR_NOT_FOUND, "%s: not a PEFT adapter (no adapter_config.json)", dir);
    if (dz_prefix_is_config(path)) return dz_prefix_load(dir, cfg, out, err);
    dz_status st = read_config(path, &spec, base, sizeof base, err);
    if (st != DZ_OK) return st;
    dz_safetensors sf;
    dz_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    if ((st = dz_safetensors_open(path, &sf, err)) != DZ_OK) return st;
    if (!spec.targets) st = targets_from_tensors(&sf, &spec.targets, err);
    if (st == DZ_OK) st = dz_lora_alloc(cfg, &spec, dir, base, out, err);
    if (st == DZ_OK) st = check_no_extra(*out, &sf, err);
    for (int i = 0; st == DZ_OK && i < (*out)->table.count; i++) st = read_tensor(*out, i, &sf, err);
    dz_safetensors_close(&sf);
    if (st != DZ_OK) {
        dz_model_free(*out);
        *out = NULL;
    }
    return st;
}
