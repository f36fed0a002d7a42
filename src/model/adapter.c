/* LoRA adapters as models of their own: the adapter's parameter table (A and B of each targeted projection, per layer), its initialization
 * as PEFT does it, and the merge into a base. The adapter is what a LoRA run trains: the
 * ZO engine walks its table exactly as it walks a full model's, and the base stays as
 * loaded (docs/ADAPTERS.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/util.h"
#include "model/model_internal.h"

/* Appends A [r, in] and B [out, r] of base tensor p (target t) to the table. */
static dz_status add_pair(dz_param_table *t, const dz_param *p, int target, int rank, dz_error *err) {
    dz_param *grown = realloc(t->params, (size_t)(t->count + 2) * sizeof *grown);
    if (!grown) return dz_fail(err, DZ_ERR_NOMEM, "adapter: out of memory");
    t->params = grown;
    const size_t stem = strlen(p->hf_name) - strlen(".weight");
    for (int k = 0; k < 2; k++) {
        dz_param *a = &t->params[t->count++];
        *a = (dz_param){.block = p->block, .role = dz_lora_a_role(target) + k, .kind = DZ_PARAM_MATRIX,
                        .rows = k ? p->rows : rank, .cols = k ? rank : p->cols};
        snprintf(a->hf_name, sizeof a->hf_name, "base_model.model.%.*s.lora_%c.weight", (int)stem, p->hf_name,
                 k ? 'B' : 'A');
    }
    return DZ_OK;
}

dz_status dz_lora_table_build(const dz_config *cfg, const dz_lora_spec *spec, dz_param_table *out, dz_error *err) {
    *out = (dz_param_table){0};
    if (spec->rank < 1 || spec->rank > 4096)
        return dz_fail(err, DZ_ERR_INVALID, "--lora-rank %d: expected 1..4096", spec->rank);
    if (!(spec->alpha > 0.0f) || !isfinite(spec->alpha))
        return dz_fail(err, DZ_ERR_INVALID, "--lora-alpha %g: expected a positive number", (double)spec->alpha);
    dz_param_table base;
    dz_status st = dz_param_table_build(cfg, &base, err);
    for (int l = 0; st == DZ_OK && l < cfg->n_layers; l++)
        for (int t = 0; st == DZ_OK && t < DZ_LORA_N_TARGETS; t++) {
            if (!(spec->targets & (1u << t))) continue;
            const int id = dz_param_find(&base, l, dz_lora_base_role(t));
            if (id < 0)
                st = dz_fail(err, DZ_ERR_INVALID, "--lora-targets: a %s model has no %s projection", dz_arch_name(cfg->arch),
                             dz_lora_target_name(t));
            else st = add_pair(out, &base.params[id], t, spec->rank, err);
        }
    if (st == DZ_OK && out->count == 0) st = dz_fail(err, DZ_ERR_INVALID, "--lora-targets: no module named");
    dz_param_table_free(&base);
    if (st != DZ_OK) dz_param_table_free(out);
    return st;
}

/* An adapter model of spec's table with zeroed f32 tensors. */
dz_status dz_lora_alloc(const dz_config *cfg, const dz_lora_spec *spec, const char *path, const char *base_path,
                               dz_model **out, dz_error *err) {
    *out = NULL;
    dz_model *m = calloc(1, sizeof *m);
    if (!m) return dz_fail(err, DZ_ERR_NOMEM, "adapter: out of memory");
    const int prefix = spec->prefix_tokens > 0;
    m->cfg = *cfg, m->dtype = DZ_F32, m->format = prefix ? "peft-prefix" : "peft-lora", m->is_lora = 1, m->lora = *spec;
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->lora_base, sizeof m->lora_base, "%s", base_path ? base_path : "");
    dz_status st = prefix ? dz_prefix_table_build(cfg, spec->prefix_tokens, &m->table, err)
                          : dz_lora_table_build(cfg, spec, &m->table, err);
    if (st == DZ_OK) st = dz_model_index_table(m, err);
    const size_t bytes = st == DZ_OK ? dz_param_table_bytes(&m->table, DZ_F32, -1) : 0;
    if (st == DZ_OK) st = dz_model_alloc_arena(m, bytes, err);
    if (st != DZ_OK) {
        dz_model_free(m);
        return st;
    }
    memset(m->owned, 0, bytes);
    size_t off = 0;
    for (int i = 0; i < m->table.count; i++) {
        m->data[i] = (char *)m->owned + off;
        off += ((size_t)dz_param_numel(&m->table.params[i]) * sizeof(float) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    }
    *out = m;
    return DZ_OK;
}

/* A's element e of tensor i: U(-b, b) with b = 1/sqrt(in), from a counter-based draw
 * (splitmix64 of a key of (seed, i) advanced e + 1 times in one step), 24 bits exact. */
static void init_a(const dz_model *m, int i, uint64_t seed) {
    const dz_param *p = &m->table.params[i];
    const float bound = 1.0f / sqrtf((float)p->cols);
    const uint64_t key = dz_splitmix64(&(uint64_t){seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(i + 1))});
    float *a = m->data[i];
    for (int64_t e = 0; e < dz_param_numel(p); e++) {
        uint64_t state = key + 0x9e3779b97f4a7c15ULL * (uint64_t)e;
        const float u = (float)(dz_splitmix64(&state) >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
        a[e] = (2.0f * u - 1.0f) * bound;
    }
}

dz_status dz_lora_create(const dz_config *cfg, const dz_lora_spec *spec, uint64_t seed, const char *base_path,
                         dz_model **out, dz_error *err) {
    dz_status st = dz_lora_alloc(cfg, spec, "(new LoRA adapter)", base_path, out, err);
    for (int i = 0; st == DZ_OK && i < (*out)->table.count; i++)
        if (((*out)->table.params[i].role - DZ_L_LORA_FIRST) % 2 == 0) init_a(*out, i, seed);
    return st;
}

dz_status dz_lora_alloc_like(const dz_model *adapter, dz_model **out, dz_error *err) {
    if (!adapter->is_lora) return dz_fail(err, DZ_ERR_INVALID, "adapter copy: %s is not an adapter", adapter->path);
    return dz_lora_alloc(&adapter->cfg, &adapter->lora, adapter->path, adapter->lora_base, out, err);
}

const dz_lora_spec *dz_model_lora(const dz_model *m) { return m->is_lora ? &m->lora : NULL; }

/* W[o, :] += s * sum_k B[o, k] A[k, :], in double per element, rounded once. */
static void merge_one(float *w, const float *a, const float *b, int64_t out, int64_t in, int r, double s) {
    for (int64_t o = 0; o < out; o++)
        for (int64_t j = 0; j < in; j++) {
            double acc = 0.0;
            for (int k = 0; k < r; k++) acc += (double)b[o * r + k] * a[k * in + j];
            w[o * in + j] = (float)(w[o * in + j] + s * acc);
        }
}

dz_status dz_lora_merge(dz_model *base, const dz_model *adapter, dz_error *err) {
    if (!adapter->is_lora || base->dtype != DZ_F32 || base->mapped_bytes > 0)
        return dz_fail(err, DZ_ERR_INVALID, "adapter merge: needs an adapter and an owned f32 base");
    if (adapter->lora.prefix_tokens > 0) /* virtual keys and values are no weight change */
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "adapter merge: a prefix-tuning adapter has no weights to merge into "
                       "the base (export its PEFT folder instead)");
    const double s = (double)adapter->lora.alpha / adapter->lora.rank;
    for (int i = 0; i < adapter->table.count; i += 2) {
        const dz_param *a = &adapter->table.params[i];
        const int target = (a->role - DZ_L_LORA_FIRST) / 2;
        const int id = dz_param_find(&base->table, a->block, dz_lora_base_role(target));
        if (id < 0) return dz_fail(err, DZ_ERR_INVALID, "adapter merge: the base has no tensor for %s", a->hf_name);
        const dz_param *w = &base->table.params[id];
        merge_one(base->data[id], adapter->data[i], adapter->data[i + 1], w->rows, w->cols, adapter->lora.rank, s);
    }
    return DZ_OK;
}
