/* Hugging Face layout: config.json + model.safetensors (or shards with an index). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/log.h"
#include "model/model_internal.h"

/* Older OPT checkpoints name tensors without the "model." prefix. */
static const dz_st_tensor *find_tensor(const dz_hf_checkpoint *ck, const char *name, const char **file) {
    const dz_st_tensor *t = dz_hf_checkpoint_find(ck, name, file);
    if (!t && strncmp(name, "model.", 6) == 0) t = dz_hf_checkpoint_find(ck, name + 6, file);
    return t;
}

static dz_status check_shape(const dz_param *p, const dz_st_tensor *t, const char *file, dz_error *err) {
    int ok = p->rows == 1 ? (t->ndim == 1 && t->shape[0] == p->cols)
                          : (t->ndim == 2 && t->shape[0] == p->rows && t->shape[1] == p->cols);
    if (ok) return DZ_OK;
    char got[128] = "";
    for (int i = 0; i < t->ndim; i++) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    }
    if (p->rows == 1)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has shape [%s], config.json implies [%lld]",
                       file, p->hf_name, got, (long long)p->cols);
    return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has shape [%s], config.json implies [%lld, %lld]",
                   file, p->hf_name, got, (long long)p->rows, (long long)p->cols);
}

/* The layer a tensor name is for ("model.layers.7.mlp...", OPT's "model.decoder.layers.7..."),
 * or -1 for a tensor of no layer. */
static int layer_of(const char *name) {
    const char *at = strstr(name, "layers.");
    if (!at || (at != name && at[-1] != '.')) return -1;
    char *end;
    const long k = strtol(at + 7, &end, 10);
    return end != at + 7 && *end == '.' && k >= 0 && k < 1000000 ? (int)k : -1;
}

/* A checkpoint holding layers past config.json's count is another model's (or a config
 * edited short): its later layers would be dropped without a word. */
static dz_status check_no_extra_layers(const dz_hf_checkpoint *ck, int n_layers, const char *dir, dz_error *err) {
    for (int f = 0; f < (ck->n_index ? 1 : ck->n_files); f++) {
        const int n = ck->n_index ? ck->n_index : ck->files[f].count;
        for (int i = 0; i < n; i++) {
            const char *name = ck->n_index ? ck->index[i].name : ck->files[f].tensors[i].name;
            if (layer_of(name) >= n_layers)
                return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is for layer %d, but config.json gives %d layers "
                               "(num_hidden_layers): the checkpoint and its config disagree", dir, name,
                               layer_of(name), n_layers);
        }
    }
    return DZ_OK;
}

static int usable_in_place(const dz_st_tensor *t, dz_dtype want) {
    return t->dtype == want && ((uintptr_t)t->data % dz_dtype_size(want)) == 0;
}

dz_status dz_model_load_hf(dz_model *m, const char *dir, dz_error *err) {
    m->format = "hf-safetensors";
    char cfg_path[PATH_MAX];
    if (dz_path_join(cfg_path, sizeof cfg_path, dir, "config.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    dz_status st = dz_config_from_hf_json(cfg_path, &m->cfg, err);
    if (st == DZ_OK) st = dz_config_validate(&m->cfg, cfg_path, err);
    if (st == DZ_OK) st = dz_model_init_tables(m, err);
    if (st == DZ_OK) st = dz_hf_checkpoint_open(dir, &m->ckpt, err);
    if (st != DZ_OK) return st;

    /* First pass: find and check every tensor; size the arena for those converted. */
    const dz_st_tensor **found = calloc((size_t)m->table.count, sizeof *found);
    if (!found) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    size_t arena = 0;
    for (int i = 0; i < m->table.count && st == DZ_OK; i++) {
        const dz_param *p = &m->table.params[i];
        const char *file = NULL;
        const dz_st_tensor *t = find_tensor(&m->ckpt, p->hf_name, &file);
        if (!t) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is missing (required by config.json)", dir, p->hf_name);
            break;
        }
        st = check_shape(p, t, file, err);
        found[i] = t;
        if (!usable_in_place(t, m->dtype))
            arena += ((size_t)dz_param_numel(p) * dz_dtype_size(m->dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    }
    if (st == DZ_OK) st = check_no_extra_layers(&m->ckpt, m->cfg.n_layers, dir, err);
    if (st == DZ_OK) st = dz_model_alloc_arena(m, arena, err);
    size_t off = 0;
    for (int i = 0; i < m->table.count && st == DZ_OK; i++)
        dz_model_place(m, i, found[i]->data, found[i]->dtype, usable_in_place(found[i], m->dtype), &off);
    free(found);
    if (st == DZ_OK && m->mapped_bytes == 0) dz_hf_checkpoint_close(&m->ckpt); /* every tensor was copied */
    if (st == DZ_OK) dz_model_find_tokenizer(dir, &m->cfg, m->tokenizer, sizeof m->tokenizer);
    return st;
}
