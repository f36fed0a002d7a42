/* Prefix tuning as an adapter model (docs/ADAPTERS.md): per layer N virtual keys and
 * values that every sequence's attention sees before its own tokens, PEFT's prefix
 * tuning without the reparameterization MLP, as MeZO trains it. The table and MeZO's
 * init from real tokens' activations; the forward's side is forward_prefix.c. */
#include <stdio.h>
#include <stdlib.h>

#include "core/rng.h"
#include "model/model_internal.h"

dz_status dz_prefix_table_build(const dz_config *cfg, int n_tokens, dz_param_table *out, dz_error *err) {
    *out = (dz_param_table){0};
    if (n_tokens < 1 || n_tokens > DZ_PREFIX_MAX_TOKENS)
        return dz_fail(err, DZ_ERR_INVALID, "--prefix-tokens %d: expected 1..%d", n_tokens, DZ_PREFIX_MAX_TOKENS);
    out->params = calloc((size_t)cfg->n_layers * 2, sizeof *out->params);
    if (!out->params) return dz_fail(err, DZ_ERR_NOMEM, "adapter: out of memory");
    for (int l = 0; l < cfg->n_layers; l++)
        for (int k = 0; k < 2; k++) {
            dz_param *p = &out->params[out->count++];
            *p = (dz_param){.block = l, .role = DZ_L_PREFIX_K + k, .kind = DZ_PARAM_MATRIX, .rows = n_tokens,
                            .cols = (int64_t)cfg->n_kv_heads * cfg->head_dim};
            snprintf(p->hf_name, sizeof p->hf_name, "prefix.layers.%d.%s", l, k ? "value" : "key");
        }
    return DZ_OK;
}

/* Token i: uniform over the vocabulary (MeZO: torch.randint(0, vocab_size)), from a
 * counter-based draw of (seed, i). */
void dz_prefix_init_tokens(uint64_t seed, int vocab_size, int n, int *out) {
    const uint64_t key = dz_splitmix64(&(uint64_t){seed ^ 0x7072656669787475ULL}); /* "prefixtu" */
    for (int i = 0; i < n; i++) {
        uint64_t state = key + 0x9e3779b97f4a7c15ULL * (uint64_t)i;
        out[i] = (int)((dz_splitmix64(&state) >> 32) * (uint64_t)vocab_size >> 32);
    }
}

dz_status dz_prefix_create(const dz_model *base, const dz_lora_spec *spec, uint64_t seed, const char *base_path,
                           dz_model **out, dz_error *err) {
    const dz_config *cfg = &base->cfg;
    dz_status st = dz_lora_alloc(cfg, spec, "(new prefix adapter)", base_path, out, err);
    int *tokens = st == DZ_OK ? malloc(sizeof(int) * (size_t)spec->prefix_tokens) : NULL;
    if (st == DZ_OK && !tokens) st = dz_fail(err, DZ_ERR_NOMEM, "adapter: out of memory");
    if (st == DZ_OK) {
        dz_prefix_init_tokens(seed, cfg->vocab_size, spec->prefix_tokens, tokens);
        st = dz_forward_prefix_init(base, tokens, spec->prefix_tokens, *out, err);
    }
    free(tokens);
    if (st != DZ_OK && *out) {
        dz_model_free(*out);
        *out = NULL;
    }
    return st;
}
