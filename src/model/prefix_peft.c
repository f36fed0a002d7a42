/* A prefix adapter as PEFT's PREFIX_TUNING folder (written with prefix_projection false; one
 * made with it true is read too, read_config says why): one tensor
 * prompt_embeddings [N, num_layers * 2 * token_dim], row n holding per layer l its key
 * (chunk 2l) then its value (chunk 2l + 1) of virtual token n, each token_dim = n_kv_heads *
 * head_dim floats by head: PEFT's get_prompt views it (N, layers * 2, heads, head_dim)
 * and splits it in pairs, with token_dim and num_attention_heads the key/value heads' for
 * grouped-query attention (PEFT #1901). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/util.h"
#include "format/json_file.h"
#include "model/model_internal.h"

static int64_t token_dim(const dz_config *c) { return (int64_t)c->n_kv_heads * c->head_dim; }

static dz_status write_config(const dz_model *m, const char *path, dz_error *err) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "peft_type", "PREFIX_TUNING");
    cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
    cJSON_AddStringToObject(o, "base_model_name_or_path", m->lora_base);
    cJSON_AddNumberToObject(o, "num_virtual_tokens", m->lora.prefix_tokens);
    cJSON_AddNumberToObject(o, "token_dim", (double)token_dim(&m->cfg));
    cJSON_AddNumberToObject(o, "num_layers", m->cfg.n_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", m->cfg.n_kv_heads);
    cJSON_AddNumberToObject(o, "num_transformer_submodules", 1);
    cJSON_AddNumberToObject(o, "encoder_hidden_size", (double)token_dim(&m->cfg));
    cJSON_AddBoolToObject(o, "prefix_projection", 0);
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    return dz_json_write_file(path, o, err);
}

/* Between the table's per-layer tensors and PEFT's one: to_peft 1 gathers, 0 scatters. */
static void shuffle(dz_model *m, float *peft, int to_peft) {
    const int n = m->lora.prefix_tokens;
    const size_t td = (size_t)token_dim(&m->cfg), row = (size_t)m->cfg.n_layers * 2 * td;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int k = 0; k < 2; k++) {
            float *t = m->data[m->ids[l][DZ_L_PREFIX_K + k]];
            for (int i = 0; i < n; i++) {
                float *p = peft + (size_t)i * row + (size_t)(2 * l + k) * td, *q = t + (size_t)i * td;
                memcpy(to_peft ? p : q, to_peft ? q : p, td * sizeof(float));
            }
        }
}

dz_status dz_prefix_save(const dz_model *m, const char *dir, dz_error *err) {
    if (dz_mkdirs(dir) != 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", dir, strerror(errno));
    char path[PATH_MAX];
    if (dz_path_join(path, sizeof path, dir, "adapter_config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    dz_status st = write_config(m, path, err);
    const int64_t rows = m->lora.prefix_tokens, cols = (int64_t)m->cfg.n_layers * 2 * token_dim(&m->cfg);
    float *all = st == DZ_OK ? malloc((size_t)(rows * cols) * sizeof(float)) : NULL;
    if (st == DZ_OK && !all) st = dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    if (st == DZ_OK) {
        shuffle((dz_model *)m, all, 1);
        const dz_st_write_tensor t = {.name = "prompt_embeddings", .dtype = DZ_F32, .ndim = 2, .shape = {rows, cols},
                                      .data = all};
        dz_path_join(path, sizeof path, dir, "adapter_model.safetensors");
        st = dz_safetensors_write(path, &t, 1, err);
    }
    free(all);
    return st;
}

/* The JSON of adapter_config.json (NULL: unreadable). */
static cJSON *read_json(const char *path, dz_error *err) {
    char *text = NULL;
    if (dz_read_file(path, &text, NULL, err) != DZ_OK) return NULL;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!o) dz_fail(err, DZ_ERR_FORMAT, "%s: not JSON", path);
    if (o && dz_json_repeated_key(o)) {
        dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is given twice", path, dz_json_repeated_key(o));
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int dz_prefix_is_config(const char *config_path) {
    dz_error e = {0};
    cJSON *o = read_json(config_path, &e);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "peft_type");
    const int yes = cJSON_IsString(type) && !strcmp(type->valuestring, "PREFIX_TUNING");
    cJSON_Delete(o);
    return yes;
}

static int int_field(const cJSON *o, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble) return 0;
    *out = (int)v->valuedouble;
    return 1;
}

/* The settings distzo honours, checked against the base's shape; the rest refused by name.
 * prefix_projection true is read as PEFT reads it for inference: PEFT saves the MLP's
 * output (get_prompt_embedding_to_save), the keys and values themselves, in the same
 * prompt_embeddings [N, layers * 2 * token_dim], and loads it without the MLP. */
static dz_status read_config(const char *path, const dz_config *cfg, int *n, char *base, size_t cap, dz_error *err) {
    cJSON *o = read_json(path, err);
    if (!o) return err->code ? err->code : DZ_ERR_FORMAT;
    int layers = 0, td = 0, heads = 0, subs = 1;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "base_model_name_or_path");
    dz_status st = DZ_OK;
    if (!int_field(o, "num_virtual_tokens", n) || *n < 1 || *n > DZ_PREFIX_MAX_TOKENS)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: num_virtual_tokens must be an integer in 1..%d", path, DZ_PREFIX_MAX_TOKENS);
    else if (cJSON_GetObjectItemCaseSensitive(o, "num_transformer_submodules") &&
             (!int_field(o, "num_transformer_submodules", &subs) || subs != 1))
        st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: num_transformer_submodules must be 1 (a decoder-only model)", path);
    else if (!int_field(o, "num_layers", &layers) || layers != cfg->n_layers)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: num_layers must be the base model's %d", path, cfg->n_layers);
    else if (!int_field(o, "token_dim", &td) || td != token_dim(cfg))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: token_dim must be the base model's key/value width %lld (n_kv_heads * "
                     "head_dim)", path, (long long)token_dim(cfg));
    else if (int_field(o, "num_attention_heads", &heads) && heads != cfg->n_kv_heads)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: num_attention_heads must be the base model's %d key/value heads", path,
                     cfg->n_kv_heads);
    snprintf(base, cap, "%s", cJSON_IsString(b) ? b->valuestring : "");
    cJSON_Delete(o);
    return st;
}

/* prompt_embeddings: [N, layers * 2 * token_dim], f32, bf16 or f16, and nothing else. */
static dz_status read_tensor(dz_model *m, const dz_safetensors *sf, dz_error *err) {
    const int64_t rows = m->lora.prefix_tokens, cols = (int64_t)m->cfg.n_layers * 2 * token_dim(&m->cfg);
    const dz_st_tensor *t = dz_safetensors_find(sf, "prompt_embeddings");
    if (!t) return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor 'prompt_embeddings' is missing", sf->path);
    if (sf->count != 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: holds %d tensors; a prefix adapter holds prompt_embeddings alone",
                       sf->path, sf->count);
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor 'prompt_embeddings' is not [%lld, %lld] as num_virtual_tokens "
                       "and the base model imply", sf->path, (long long)rows, (long long)cols);
    if (t->dtype != DZ_F32 && t->dtype != DZ_BF16 && t->dtype != DZ_F16)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor 'prompt_embeddings' is %s (expected F32, BF16 or F16)",
                       sf->path, dz_dtype_name(t->dtype));
    const size_t n = (size_t)(rows * cols), es = dz_dtype_size(t->dtype);
    char *tmp = malloc(n * es);
    float *all = malloc(n * sizeof(float));
    if (tmp && all) {
        memcpy(tmp, t->data, n * es); /* another writer may leave the data unaligned */
        dz_to_f32(all, tmp, t->dtype, n);
        shuffle(m, all, 0);
    }
    free(tmp), free(all);
    return tmp && all ? DZ_OK : dz_fail(err, DZ_ERR_NOMEM, "out of memory");
}

dz_status dz_prefix_load(const char *dir, const dz_config *cfg, dz_model **out, dz_error *err) {
    *out = NULL;
    char path[PATH_MAX], base[PATH_MAX];
    int n = 0;
    if (dz_path_join(path, sizeof path, dir, "adapter_config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    dz_status st = read_config(path, cfg, &n, base, sizeof base, err);
    const dz_lora_spec spec = {.prefix_tokens = n};
    if (st == DZ_OK) st = dz_lora_alloc(cfg, &spec, dir, base, out, err);
    dz_safetensors sf;
    dz_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    if (st == DZ_OK && (st = dz_safetensors_open(path, &sf, err)) == DZ_OK) {
        st = read_tensor(*out, &sf, err);
        dz_safetensors_close(&sf);
    }
    if (st != DZ_OK) {
        dz_model_free(*out);
        *out = NULL;
    }
    return st;
}
