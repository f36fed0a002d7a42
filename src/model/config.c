/* Hugging Face config.json <-> dz_config for OPT and the LLaMA family (llama, mistral,
 * qwen2). Anything that would change the math in a way distzo does not implement
 * (other activations, rope scaling, sliding windows, extra biases) is refused with
 * DZ_ERR_UNSUPPORTED naming the field, rather than silently loaded wrong. */
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/model.h"
#include "core/json.h"

const char *dz_arch_name(dz_arch a) {
    switch (a) {
    case DZ_ARCH_OPT: return "opt";
    case DZ_ARCH_LLAMA: return "llama";
    }
    return "?";
}

/* ---- typed field access; every error names the file and the field ---- */

typedef struct jctx {
    const char *path;
    const cJSON *root;
    dz_error *err;
} jctx;

/* The field, or NULL when absent or JSON null (both mean "use the default"). */
static const cJSON *field(const jctx *c, const char *name) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->root, name);
    return cJSON_IsNull(j) ? NULL : j;
}

static dz_status missing(const jctx *c, const char *name) {
    return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is missing", c->path, name);
}

static dz_status as_int(const jctx *c, const char *name, const cJSON *j, int *out) {
    double d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d))
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is not an integer", c->path, name);
    if (!(d >= -2147483648.0 && d <= 2147483647.0)) /* a whole number, too big for any size or id */
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is out of range: %.17g is not in -2147483648..2147483647",
                       c->path, name, d);
    *out = (int)d;
    return DZ_OK;
}

/* Absent or null: an error when required, else def. */
static dz_status get_int(const jctx *c, const char *name, int required, int def, int *out) {
    const cJSON *j = field(c, name);
    if (!j) {
        if (required) return missing(c, name);
        *out = def;
        return DZ_OK;
    }
    return as_int(c, name, j, out);
}

static dz_status get_float(const jctx *c, const char *name, int required, float def, float *out) {
    const cJSON *j = field(c, name);
    if (!j) {
        if (required) return missing(c, name);
        *out = def;
        return DZ_OK;
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is not a number", c->path, name);
    if (!(fabs(j->valuedouble) <= FLT_MAX)) /* it would be read as infinity */
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s': %g is past a float's range", c->path, name,
                       j->valuedouble);
    *out = (float)j->valuedouble;
    return DZ_OK;
}

/* An optional field of one JSON type: *j is NULL when absent; an error names the type. */
static dz_status optional(const jctx *c, const char *name, cJSON_bool (*is)(const cJSON *), const char *type,
                          const cJSON **j) {
    *j = field(c, name);
    if (*j && !is(*j)) return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is not %s", c->path, name, type);
    return DZ_OK;
}

static dz_status get_bool(const jctx *c, const char *name, int def, int *out) {
    const cJSON *j;
    dz_status st = optional(c, name, cJSON_IsBool, "true/false", &j);
    if (st == DZ_OK) *out = j ? cJSON_IsTrue(j) : def;
    return st;
}

/* The string value, def when absent; NULL + error when not a string. */
static dz_status get_str(const jctx *c, const char *name, const char *def, const char **out) {
    const cJSON *j;
    dz_status st = optional(c, name, cJSON_IsString, "a string", &j);
    if (st == DZ_OK) *out = j ? j->valuestring : def;
    return st;
}

/* Token ids: an integer, a list (first element is used: eos_token_id often lists
 * several), or null/absent (def). An empty list or null means none: -1. */
static dz_status get_token_id(const jctx *c, const char *name, int def, int *out) {
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(c->root, name);
    if (!raw) {
        *out = def;
        return DZ_OK;
    }
    const cJSON *j = cJSON_IsArray(raw) ? raw->child : raw;
    if (!j || cJSON_IsNull(j)) {
        *out = -1;
        return DZ_OK;
    }
    return as_int(c, name, j, out);
}

static dz_status unsupported(const jctx *c, const char *name, const char *why) {
    return dz_fail(c->err, DZ_ERR_UNSUPPORTED, "%s: field '%s': %s", c->path, name, why);
}

/* Fails unless string field name (default def) equals want. */
static dz_status require_str(const jctx *c, const char *name, const char *def, const char *want) {
    const char *v = NULL;
    dz_status s = get_str(c, name, def, &v);
    if (s != DZ_OK) return s;
    if (strcmp(v, want) != 0)
        return dz_fail(c->err, DZ_ERR_UNSUPPORTED, "%s: field '%s' is \"%s\"; only \"%s\" is supported",
                       c->path, name, v, want);
    return DZ_OK;
}

/* ---- architectures ---- */

/* A required size, named by its key when it is not positive (the checks after parsing
 * know it by distzo's name, or by what follows from it: head_dim from hidden_size). */
static dz_status get_size(const jctx *c, const char *name, int *out) {
    dz_status s = get_int(c, name, 1, 0, out);
    if (!s && *out < 1)
        s = dz_fail(c->err, DZ_ERR_FORMAT, "%s: field '%s' is %d; a size must be positive", c->path, name, *out);
    return s;
}

/* The sizes every architecture requires, in this order; only the MLP width's key differs. */
static dz_status get_sizes(const jctx *c, const char *mlp_key, dz_config *cfg) {
    dz_status s = get_size(c, "vocab_size", &cfg->vocab_size);
    if (!s) s = get_size(c, "hidden_size", &cfg->dim);
    if (!s) s = get_size(c, mlp_key, &cfg->hidden_dim);
    if (!s) s = get_size(c, "num_hidden_layers", &cfg->n_layers);
    if (!s) s = get_size(c, "num_attention_heads", &cfg->n_heads);
    return s;
}

static dz_status parse_opt(const jctx *c, dz_config *cfg) {
    int no_final = 0, affine = 1, bias = 1;
    cfg->arch = DZ_ARCH_OPT;
    dz_status s = get_sizes(c, "ffn_dim", cfg);
    if (!s) s = get_int(c, "max_position_embeddings", 1, 0, &cfg->max_seq_len);
    if (!s) s = get_int(c, "word_embed_proj_dim", 0, cfg->dim, &cfg->embed_dim);
    if (!s) s = get_bool(c, "do_layer_norm_before", 1, &cfg->pre_norm);
    if (!s) s = get_bool(c, "_remove_final_layer_norm", 0, &no_final);
    if (!s) s = get_bool(c, "enable_bias", 1, &bias);
    if (!s) s = get_bool(c, "layer_norm_elementwise_affine", 1, &affine);
    if (!s) s = get_bool(c, "tie_word_embeddings", 1, &cfg->tied_head);
    if (!s) s = require_str(c, "activation_function", "relu", "relu");
    if (!s) s = get_token_id(c, "bos_token_id", 2, &cfg->bos_id);
    if (!s) s = get_token_id(c, "eos_token_id", 2, &cfg->eos_id);
    if (!s) s = get_token_id(c, "pad_token_id", 1, &cfg->pad_id);
    if (s) return s;
    if (!affine) return unsupported(c, "layer_norm_elementwise_affine", "norms without weights are not supported");
    cfg->n_kv_heads = cfg->n_heads;
    cfg->head_dim = cfg->n_heads > 0 ? cfg->dim / cfg->n_heads : 0;
    /* HF OPT builds the final norm only for pre-LN models. */
    cfg->final_norm = cfg->pre_norm && !no_final;
    cfg->norm_eps = 1e-5f;
    cfg->rope_theta = 0.0f;
    cfg->qkv_bias = cfg->out_bias = bias;
    cfg->pos_offset = 2;
    return DZ_OK;
}

/* rope_theta lives at the top level in older configs and in rope_parameters (with
 * rope_type) in newer transformers; any scaling changes the rotary math. */
static dz_status parse_rope(const jctx *c, float *theta) {
    const cJSON *scaling = field(c, "rope_scaling");
    if (scaling) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(scaling, "rope_type");
        if (!t) t = cJSON_GetObjectItemCaseSensitive(scaling, "type");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "default") != 0)
            return unsupported(c, "rope_scaling", "RoPE scaling is not supported");
    }
    dz_status s = get_float(c, "rope_theta", 0, 10000.0f, theta);
    const cJSON *params = field(c, "rope_parameters");
    if (s || !params) return s;
    if (!cJSON_IsObject(params))
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field 'rope_parameters' is not an object", c->path);
    const jctx pc = {c->path, params, c->err};
    s = require_str(&pc, "rope_type", "default", "default");
    if (s == DZ_ERR_UNSUPPORTED)
        return unsupported(c, "rope_parameters.rope_type", "RoPE scaling is not supported");
    if (!s) s = get_float(&pc, "rope_theta", 0, *theta, theta);
    return s;
}

/* Sliding-window attention is not implemented; a window no shorter than the context
 * never masks anything, so that case is accepted. */
static dz_status check_sliding_window(const jctx *c, const char *model_type, int max_seq) {
    int use = 1, window = 0;
    dz_status s = DZ_OK;
    if (!strcmp(model_type, "qwen2")) s = get_bool(c, "use_sliding_window", 0, &use);
    if (s || !use) return s;
    s = get_int(c, "sliding_window", 0, 0, &window);
    if (!s && window > 0 && window < max_seq)
        return unsupported(c, "sliding_window", "sliding-window attention is not supported");
    return s;
}

static dz_status parse_llama(const jctx *c, const char *model_type, dz_config *cfg) {
    int head_dim = 0, mlp_bias = 0, attn_bias = 0;
    int qwen2 = !strcmp(model_type, "qwen2");
    cfg->arch = DZ_ARCH_LLAMA;
    dz_status s = get_sizes(c, "intermediate_size", cfg);
    if (!s) s = get_int(c, "num_key_value_heads", 0, cfg->n_heads, &cfg->n_kv_heads);
    cfg->head_dim = cfg->n_heads > 0 ? cfg->dim / cfg->n_heads : 0;
    if (!s) s = get_int(c, "head_dim", 0, cfg->head_dim, &head_dim);
    if (!s) s = get_int(c, "max_position_embeddings", 1, 0, &cfg->max_seq_len);
    if (!s) s = get_float(c, "rms_norm_eps", 0, 1e-6f, &cfg->norm_eps);
    if (!s) s = parse_rope(c, &cfg->rope_theta);
    if (!s) s = get_bool(c, "tie_word_embeddings", 0, &cfg->tied_head);
    if (!s) s = require_str(c, "hidden_act", "silu", "silu");
    if (!s) s = get_bool(c, "attention_bias", 0, &attn_bias);
    if (!s) s = get_bool(c, "mlp_bias", 0, &mlp_bias);
    if (!s) s = check_sliding_window(c, model_type, cfg->max_seq_len);
    int bos_def = qwen2 ? -1 : 1, eos_def = qwen2 ? -1 : 2; /* the HF config classes' defaults */
    if (!s) s = get_token_id(c, "bos_token_id", bos_def, &cfg->bos_id);
    if (!s) s = get_token_id(c, "eos_token_id", eos_def, &cfg->eos_id);
    if (!s) s = get_token_id(c, "pad_token_id", -1, &cfg->pad_id);
    if (s) return s;
    if (head_dim != cfg->head_dim)
        return unsupported(c, "head_dim", "head_dim must equal hidden_size / num_attention_heads");
    /* LLaMA's attention_bias also puts a bias on o_proj, which dz_config cannot express. */
    if (attn_bias && !qwen2)
        return unsupported(c, "attention_bias", "a bias on o_proj is not supported");
    if (mlp_bias) return unsupported(c, "mlp_bias", "MLP biases are not supported");
    cfg->embed_dim = cfg->dim;
    cfg->pre_norm = 1;
    cfg->final_norm = 1;
    cfg->qkv_bias = qwen2; /* Qwen2: q/k/v always biased, o_proj never */
    cfg->out_bias = 0;
    cfg->pos_offset = 0;
    return DZ_OK;
}

/* model_type, or failing that the first architectures entry, as a lowercase family. */
static dz_status model_family(const jctx *c, const char **family) {
    static const char *const types[][2] = {
        {"opt", "OPTForCausalLM"},         {"llama", "LlamaForCausalLM"},
        {"mistral", "MistralForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"},
    };
    const char *mt = NULL, *arch = NULL;
    dz_status s = get_str(c, "model_type", NULL, &mt);
    if (s) return s;
    const cJSON *archs = field(c, "architectures");
    if (archs && (!cJSON_IsArray(archs) || (archs->child && !cJSON_IsString(archs->child))))
        return dz_fail(c->err, DZ_ERR_FORMAT, "%s: field 'architectures' is not a list of strings", c->path);
    if (archs && archs->child) arch = archs->child->valuestring;
    if (!mt && !arch) return missing(c, "model_type");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if ((mt && !strcmp(mt, types[i][0])) || (!mt && !strcmp(arch, types[i][1]))) {
            *family = types[i][0];
            return DZ_OK;
        }
    return dz_fail(c->err, DZ_ERR_UNSUPPORTED,
                   "%s: field '%s' is \"%s\"; supported: opt, llama, mistral, qwen2", c->path,
                   mt ? "model_type" : "architectures", mt ? mt : arch);
}

dz_status dz_config_from_hf_json(const char *path, dz_config *cfg, dz_error *err) {
    memset(cfg, 0, sizeof *cfg);
    char *text = NULL;
    size_t len = 0;
    dz_status s = dz_read_file(path, &text, &len, err);
    if (s) return s;
    const char *end = NULL;
    /* len + 1 takes in the NUL dz_read_file adds, so trailing garbage is an error. */
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!root || !cJSON_IsObject(root)) {
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: %s", path,
                    root ? "not a JSON object" : "malformed JSON");
        if (!root && end) /* cJSON points at where parsing stopped */
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: malformed JSON near byte %zu", path,
                        (size_t)(end - text));
    }
    free(text);
    if (!s && dz_json_repeated_key(root)) /* cJSON would read the first, transformers the last */
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is given twice", path, dz_json_repeated_key(root));
    const jctx c = {path, root, err};
    const char *family = NULL;
    if (!s) s = model_family(&c, &family);
    if (!s) s = !strcmp(family, "opt") ? parse_opt(&c, cfg) : parse_llama(&c, family, cfg);
    cJSON_Delete(root);
    if (!s) s = dz_config_validate(cfg, path, err);
    return s;
}

/* ---- validation ---- */

dz_status dz_config_validate(const dz_config *cfg, const char *file, dz_error *err) {
    const struct { const char *name; int v; } sizes[] = {
        {"vocab_size", cfg->vocab_size}, {"dim", cfg->dim}, {"hidden_dim", cfg->hidden_dim},
        {"n_layers", cfg->n_layers}, {"n_heads", cfg->n_heads}, {"n_kv_heads", cfg->n_kv_heads},
        {"head_dim", cfg->head_dim}, {"max_seq_len", cfg->max_seq_len}, {"embed_dim", cfg->embed_dim},
    };
    if (!file) file = "<config>";
    if (cfg->arch != DZ_ARCH_OPT && cfg->arch != DZ_ARCH_LLAMA)
        return dz_fail(err, DZ_ERR_INVALID, "%s: unknown architecture %d", file, (int)cfg->arch);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i].v <= 0)
            return dz_fail(err, DZ_ERR_INVALID, "%s: %s = %d must be positive", file, sizes[i].name,
                           sizes[i].v);
    if (cfg->dim % cfg->n_heads != 0 || cfg->head_dim != cfg->dim / cfg->n_heads)
        return dz_fail(err, DZ_ERR_INVALID, "%s: dim %d is not n_heads %d x head_dim %d", file,
                       cfg->dim, cfg->n_heads, cfg->head_dim);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: n_heads %d is not a multiple of n_kv_heads %d", file,
                       cfg->n_heads, cfg->n_kv_heads);
    /* Every tensor's element count and byte size are then far inside int64 and size_t. */
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i].v > DZ_MAX_DIM)
            return dz_fail(err, DZ_ERR_INVALID, "%s: %s = %d exceeds the limit %d", file, sizes[i].name,
                           sizes[i].v, DZ_MAX_DIM);
    if (cfg->pos_offset > DZ_MAX_POS_OFFSET)
        return dz_fail(err, DZ_ERR_INVALID, "%s: pos_offset %d exceeds the limit %d", file, cfg->pos_offset,
                       DZ_MAX_POS_OFFSET);
    if (cfg->n_layers > DZ_MAX_LAYERS)
        return dz_fail(err, DZ_ERR_INVALID, "%s: n_layers %d exceeds the limit %d", file,
                       cfg->n_layers, DZ_MAX_LAYERS);
    if (!(cfg->norm_eps > 0.0f) || !isfinite(cfg->norm_eps))
        return dz_fail(err, DZ_ERR_INVALID, "%s: norm_eps must be positive", file);
    if (cfg->arch == DZ_ARCH_LLAMA &&
        (!(cfg->rope_theta > 0.0f) || !isfinite(cfg->rope_theta) || cfg->head_dim % 2 != 0))
        return dz_fail(err, DZ_ERR_INVALID, "%s: rotary embeddings need rope_theta > 0 and an even head_dim",
                       file);
    if (cfg->pos_offset < 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: pos_offset %d is negative", file, cfg->pos_offset);
    const struct { const char *name; int v; } ids[] = {
        {"bos_id", cfg->bos_id}, {"eos_id", cfg->eos_id}, {"pad_id", cfg->pad_id}};
    for (size_t i = 0; i < 3; i++)
        if (ids[i].v < -1 || ids[i].v >= cfg->vocab_size)
            return dz_fail(err, DZ_ERR_INVALID, "%s: %s %d is outside the vocabulary (%d)", file,
                           ids[i].name, ids[i].v, cfg->vocab_size);
    return DZ_OK;
}

/* ---- writing ---- */

static const char *torch_dtype_name(dz_dtype t) {
    return t == DZ_BF16 ? "bfloat16" : t == DZ_F16 ? "float16" : "float32";
}

/* The shortest decimal that reads back as the same float, so 1e-5f is written as
 * 1e-05 rather than the double 9.9999997473787516e-06. */
static void add_float(cJSON *o, const char *name, float v) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(o, name, buf);
}

/* -1 ("none") is written as null. */
static void add_id(cJSON *o, const char *name, int id) {
    if (id < 0) cJSON_AddNullToObject(o, name);
    else cJSON_AddNumberToObject(o, name, id);
}

/* Fields only OPT has. HF OPT cannot express a post-LN model with a final norm, or
 * q/k/v biases without the others. */
static dz_status add_opt(const dz_config *cfg, const char *path, cJSON *o, dz_error *err) {
    if (cfg->qkv_bias != cfg->out_bias || (!cfg->pre_norm && cfg->final_norm) ||
        cfg->n_kv_heads != cfg->n_heads || cfg->pos_offset != 2)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "%s: this OPT variant (biases/final norm/kv heads/pos offset) has no HF config",
                       path);
    cJSON_AddStringToObject(o, "activation_function", "relu");
    cJSON_AddNumberToObject(o, "ffn_dim", cfg->hidden_dim);
    cJSON_AddNumberToObject(o, "word_embed_proj_dim", cfg->embed_dim);
    cJSON_AddBoolToObject(o, "do_layer_norm_before", cfg->pre_norm);
    cJSON_AddBoolToObject(o, "_remove_final_layer_norm", cfg->pre_norm && !cfg->final_norm);
    cJSON_AddBoolToObject(o, "enable_bias", cfg->qkv_bias);
    cJSON_AddBoolToObject(o, "layer_norm_elementwise_affine", 1);
    return DZ_OK;
}

/* Fields of the LLaMA family. q/k/v biases without an o_proj bias is exactly Qwen2,
 * so such configs are written as Qwen2 and everything else as LLaMA. */
static dz_status add_llama(const dz_config *cfg, const char *path, cJSON *o, dz_error *err) {
    if (cfg->out_bias || !cfg->pre_norm || !cfg->final_norm || cfg->pos_offset != 0 ||
        cfg->embed_dim != cfg->dim)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "%s: this LLaMA variant (biases/norms/pos offset/embed dim) has no HF config", path);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "intermediate_size", cfg->hidden_dim);
    cJSON_AddNumberToObject(o, "num_key_value_heads", cfg->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", cfg->head_dim);
    add_float(o, "rms_norm_eps", cfg->norm_eps);
    add_float(o, "rope_theta", cfg->rope_theta);
    cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
    if (rp) {
        cJSON_AddStringToObject(rp, "rope_type", "default");
        add_float(rp, "rope_theta", cfg->rope_theta);
    }
    if (cfg->qkv_bias) {
        cJSON_AddBoolToObject(o, "use_sliding_window", 0);
        cJSON_AddNullToObject(o, "sliding_window");
    } else {
        cJSON_AddBoolToObject(o, "attention_bias", 0);
        cJSON_AddBoolToObject(o, "mlp_bias", 0);
    }
    return DZ_OK;
}

dz_status dz_config_write_hf_json(const dz_config *cfg, const char *path, dz_dtype dtype, dz_error *err) {
    dz_status s = dz_config_validate(cfg, path, err);
    if (s) return s;
    int opt = cfg->arch == DZ_ARCH_OPT, qwen2 = !opt && cfg->qkv_bias;
    const char *mt = opt ? "opt" : qwen2 ? "qwen2" : "llama";
    const char *cls = opt ? "OPTForCausalLM" : qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
    cJSON *o = cJSON_CreateObject();
    if (!o) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    cJSON *archs = cJSON_AddArrayToObject(o, "architectures");
    if (archs) cJSON_AddItemToArray(archs, cJSON_CreateString(cls));
    cJSON_AddStringToObject(o, "model_type", mt);
    cJSON_AddNumberToObject(o, "vocab_size", cfg->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", cfg->dim);
    cJSON_AddNumberToObject(o, "num_hidden_layers", cfg->n_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", cfg->n_heads);
    cJSON_AddNumberToObject(o, "max_position_embeddings", cfg->max_seq_len);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", cfg->tied_head);
    add_id(o, "bos_token_id", cfg->bos_id);
    add_id(o, "eos_token_id", cfg->eos_id);
    add_id(o, "pad_token_id", cfg->pad_id);
    /* transformers 5 reads "dtype"; 4.x reads "torch_dtype". */
    cJSON_AddStringToObject(o, "torch_dtype", torch_dtype_name(dtype));
    cJSON_AddStringToObject(o, "dtype", torch_dtype_name(dtype));
    s = opt ? add_opt(cfg, path, o, err) : add_llama(cfg, path, o, err);
    char *text = s ? NULL : cJSON_Print(o);
    cJSON_Delete(o);
    if (s) return s;
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    s = dz_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return s;
}
