/* Random-initialized models of real shapes (for tests and benchmarks), and saving a
 * model in Hugging Face layout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/threads.h"
#include "core/rng.h"
#include "core/util.h"
#include "model/model_internal.h"

typedef struct preset {
    const char *name;
    dz_config cfg;
} preset;

#define OPT_PRESET(nm, d, f, l, h, e, pre)                                                              \
    {nm, {.arch = DZ_ARCH_OPT, .vocab_size = 50272, .dim = d, .hidden_dim = f, .n_layers = l,           \
          .n_heads = h, .n_kv_heads = h, .head_dim = (d) / (h), .max_seq_len = 2048, .embed_dim = e,     \
          .pre_norm = pre, .final_norm = pre, .norm_eps = 1e-5f, .tied_head = 1, .qkv_bias = 1,          \
          .out_bias = 1, .pos_offset = 2, .bos_id = 2, .eos_id = 2, .pad_id = 1}}
#define LLAMA_PRESET(nm, v, d, f, l, h, kv)                                                             \
    {nm, {.arch = DZ_ARCH_LLAMA, .vocab_size = v, .dim = d, .hidden_dim = f, .n_layers = l,             \
          .n_heads = h, .n_kv_heads = kv, .head_dim = (d) / (h), .max_seq_len = 2048, .embed_dim = d,    \
          .pre_norm = 1, .final_norm = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0f, .bos_id = 1,        \
          .eos_id = 2, .pad_id = -1}}

#define QWEN2_PRESET(nm, d, f, l, h, kv, seq)                                                          \
    {nm, {.arch = DZ_ARCH_LLAMA, .vocab_size = 151936, .dim = d, .hidden_dim = f, .n_layers = l,         \
          .n_heads = h, .n_kv_heads = kv, .head_dim = (d) / (h), .max_seq_len = seq, .embed_dim = d,     \
          .pre_norm = 1, .final_norm = 1, .norm_eps = 1e-6f, .rope_theta = 1000000.0f, .tied_head = 1,   \
          .qkv_bias = 1, .bos_id = -1, .eos_id = 151643, .pad_id = -1}}

/* Shapes of the published models (OPT: Zhang et al. 2022; TinyLlama 1.1B; SmolLM2-135M;
 * Qwen2.5-0.5B). The -tiny presets keep their family's vocabulary and shape rules. */
static const preset presets[] = {
    OPT_PRESET("opt-tiny", 64, 256, 2, 4, 64, 1),
    OPT_PRESET("opt-125m", 768, 3072, 12, 12, 768, 1),
    OPT_PRESET("opt-350m", 1024, 4096, 24, 16, 512, 0),
    OPT_PRESET("opt-1.3b", 2048, 8192, 24, 32, 2048, 1),
    OPT_PRESET("opt-2.7b", 2560, 10240, 32, 32, 2560, 1),
    LLAMA_PRESET("llama-tiny", 32000, 256, 688, 4, 8, 4),
    LLAMA_PRESET("llama-1.1b", 32000, 2048, 5632, 22, 32, 4),
    /* SmolLM2-135M (HuggingFaceTB): GQA 9/3, tied head, RoPE base 1e5 */
    {"smollm2-135m", {.arch = DZ_ARCH_LLAMA, .vocab_size = 49152, .dim = 576, .hidden_dim = 1536, .n_layers = 30,
                      .n_heads = 9, .n_kv_heads = 3, .head_dim = 64, .max_seq_len = 8192, .embed_dim = 576,
                      .pre_norm = 1, .final_norm = 1, .norm_eps = 1e-5f, .rope_theta = 100000.0f, .tied_head = 1,
                      .bos_id = 1, .eos_id = 2, .pad_id = -1}},
    /* Qwen2 / Qwen2.5 (Alibaba): q/k/v biases, GQA, tied head, RoPE base 1e6, no BOS */
    QWEN2_PRESET("qwen2-tiny", 64, 256, 2, 4, 2, 2048),
    QWEN2_PRESET("qwen2.5-0.5b", 896, 4864, 24, 14, 2, 32768),
};

const char *dz_preset_names(void) {
    return "opt-tiny, opt-125m, opt-350m, opt-1.3b, opt-2.7b, llama-tiny, llama-1.1b, smollm2-135m, qwen2-tiny, "
           "qwen2.5-0.5b";
}

dz_status dz_config_preset(const char *name, dz_config *out, dz_error *err) {
    if (!name || !out) return dz_fail(err, DZ_ERR_INVALID, "preset: no name or no config to fill given");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i].cfg;
            return DZ_OK;
        }
    return dz_fail(err, DZ_ERR_INVALID, "unknown preset '%s' (known: %s)", name, dz_preset_names());
}

typedef struct fill_job {
    dz_model *m;
    dz_dtype dtype;
    uint64_t seed;
    float std;
} fill_job;

/* Tensor i from its own generator, so tensors fill in parallel and the result does not
 * depend on the thread count. Norm weights 1, biases 0, the rest N(0, std^2). */
static void fill_tensor(void *ctx, int i, int thread) {
    const fill_job *f = ctx;
    const dz_model *m = f->m;
    const dz_param *p = &m->table.params[i];
    uint64_t state = f->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));
    int is_norm_weight = p->kind == DZ_PARAM_NORM && (p->role == DZ_L_ATTN_NORM_W || p->role == DZ_L_FFN_NORM_W ||
                                                      (p->block == m->cfg.n_layers && p->role == DZ_G_FINAL_NORM_W));
    float buf[1024];
    const size_t n = (size_t)dz_param_numel(p);
    for (size_t j = 0; j < n; j += 1024) {
        size_t k = n - j < 1024 ? n - j : 1024;
        for (size_t t = 0; t < k; t++)
            buf[t] = p->kind == DZ_PARAM_MATRIX || p->kind == DZ_PARAM_EMBEDDING ? (float)(f->std * dz_normal(&state))
                     : is_norm_weight ? 1.0f : 0.0f;
        dz_from_f32((char *)m->data[i] + j * dz_dtype_size(f->dtype), f->dtype, buf, k);
    }
}

dz_status dz_model_init_random(const dz_config *cfg, dz_dtype dtype, uint64_t seed, float std, dz_model **out,
                               dz_error *err) {
    *out = NULL;
    dz_model *m = calloc(1, sizeof *m);
    if (!m) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    m->cfg = *cfg;
    m->dtype = dtype;
    m->format = "random";
    snprintf(m->path, sizeof m->path, "(random %s, seed %llu)", dz_arch_name(cfg->arch), (unsigned long long)seed);
    dz_status st = dz_config_validate(cfg, "preset", err);
    if (st == DZ_OK) st = dz_model_init_tables(m, err);
    size_t arena = 0;
    for (int i = 0; st == DZ_OK && i < m->table.count; i++)
        arena += ((size_t)dz_param_numel(&m->table.params[i]) * dz_dtype_size(dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    if (st == DZ_OK) st = dz_model_alloc_arena(m, arena, err);
    if (st != DZ_OK) {
        dz_model_free(m);
        return st;
    }
    size_t off = 0;
    for (int i = 0; i < m->table.count; i++) {
        m->data[i] = (char *)m->owned + off;
        off += ((size_t)dz_param_numel(&m->table.params[i]) * dz_dtype_size(dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    }
    fill_job job = {m, dtype, seed, std};
    dz_parallel_for_dynamic(m->table.count, fill_tensor, &job);
    *out = m;
    return DZ_OK;
}

dz_status dz_model_save_hf(const dz_model *m, const char *dir, dz_error *err) {
    if (m->is_lora) return m->lora.prefix_tokens > 0 ? dz_prefix_save(m, dir, err) : dz_lora_save(m, dir, err);
    if (dz_mkdirs(dir) != 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", dir, strerror(errno));
    char path[PATH_MAX];
    if (dz_path_join(path, sizeof path, dir, "config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    dz_status st = dz_config_write_hf_json(&m->cfg, path, m->dtype, err);
    if (st != DZ_OK) return st;
    dz_st_write_tensor *ts = calloc((size_t)m->table.count, sizeof *ts);
    if (!ts) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->table.count; i++) {
        const dz_param *p = &m->table.params[i];
        ts[i].name = p->hf_name;
        ts[i].dtype = m->dtype;
        ts[i].data = m->data[i];
        ts[i].ndim = p->rows == 1 ? 1 : 2;
        ts[i].shape[0] = p->rows == 1 ? p->cols : p->rows;
        ts[i].shape[1] = p->cols;
    }
    dz_path_join(path, sizeof path, dir, "model.safetensors");
    st = dz_safetensors_write(path, ts, m->table.count, err);
    free(ts);
    return st;
}
