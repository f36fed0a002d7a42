/* Hugging Face checkpoint folders: model.safetensors, or the shards that
 * model.safetensors.index.json's weight_map names, each tensor found in the shard the index
 * says (safetensors.h). */
#include "format/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static dz_status open_shard(dz_hf_checkpoint *ck, const char *file, const char *what, dz_error *err) {
    dz_status s = dz_path_check_inside(ck->dir, file, what, err);
    if (s != DZ_OK) return s;
    char path[4096];
    if (dz_path_join(path, sizeof path, ck->dir, file) != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", ck->dir);
    s = dz_safetensors_open(path, &ck->files[ck->n_files], err);
    if (s == DZ_OK) ck->n_files++;
    return s;
}

/* Index of the shard already opened for file, or -1. */
static int shard_index(const dz_hf_checkpoint *ck, const char *file) {
    size_t dl = strlen(ck->dir);
    for (int i = 0; i < ck->n_files; i++) {
        const char *p = ck->files[i].path;
        if (!strncmp(p, ck->dir, dl) && p[dl] == '/' && !strcmp(p + dl + 1, file)) return i;
    }
    return -1;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const dz_hf_index_entry *)a)->name, ((const dz_hf_index_entry *)b)->name);
}

/* A tensor in two shards is ambiguous whatever the index says: refuse it. */
static dz_status refuse_duplicates(const dz_hf_checkpoint *ck, const char *ipath, dz_error *err) {
    for (int i = 0; i < ck->n_files; i++)
        for (int k = 0; k < ck->files[i].count; k++)
            for (int j = i + 1; j < ck->n_files; j++)
                if (dz_safetensors_find(&ck->files[j], ck->files[i].tensors[k].name))
                    return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s", ipath,
                                   ck->files[i].tensors[k].name, ck->files[i].path, ck->files[j].path);
    return DZ_OK;
}

static dz_status open_from_index(dz_hf_checkpoint *ck, const char *ipath, dz_error *err) {
    char *text = NULL;
    dz_status s = dz_read_file(ipath, &text, NULL, err);
    if (s != DZ_OK) return s;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!root) s = dz_fail(err, DZ_ERR_FORMAT, "%s: malformed JSON", ipath);
    else if (!cJSON_IsObject(wm) || !wm->child)
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'weight_map' is %s", ipath,
                    !wm ? "missing" : !cJSON_IsObject(wm) ? "not an object" : "empty");
    int cap = s == DZ_OK ? cJSON_GetArraySize(wm) : 0;
    if (s == DZ_OK && (!(ck->files = calloc((size_t)cap, sizeof *ck->files)) ||
                       !(ck->index = calloc((size_t)cap, sizeof *ck->index))))
        s = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ipath);
    /* First pass: open each distinct shard once, in order of first mention. */
    char what[320];
    for (const cJSON *e = s == DZ_OK ? wm->child : NULL; e && s == DZ_OK; e = e->next) {
        snprintf(what, sizeof what, "model.safetensors.index.json weight_map['%.256s']", e->string);
        if (!cJSON_IsString(e))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: %s is not a file name", ck->dir, what);
        else if (shard_index(ck, e->valuestring) < 0)
            s = open_shard(ck, e->valuestring, what, err);
    }
    /* Second pass: every listed tensor is where the index says, and is listed once. */
    for (const cJSON *e = s == DZ_OK ? wm->child : NULL; e && s == DZ_OK; e = e->next) {
        const int i = shard_index(ck, e->valuestring);
        if (!dz_safetensors_find(&ck->files[i], e->string))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is listed in '%s' but that file lacks it",
                        ipath, e->string, e->valuestring);
        else if (!(ck->index[ck->n_index].name = strdup(e->string)))
            s = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ipath);
        else
            ck->index[ck->n_index++].file = i;
    }
    if (s == DZ_OK) qsort(ck->index, (size_t)ck->n_index, sizeof *ck->index, entry_cmp);
    for (int k = 1; s == DZ_OK && k < ck->n_index; k++)
        if (!strcmp(ck->index[k - 1].name, ck->index[k].name))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: weight_map lists tensor '%s' twice", ipath, ck->index[k].name);
    if (s == DZ_OK) s = refuse_duplicates(ck, ipath, err);
    cJSON_Delete(root);
    return s;
}

dz_status dz_hf_checkpoint_open(const char *dir, dz_hf_checkpoint *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    char single[4096], index[4096];
    if (dz_path_join(single, sizeof single, dir, "model.safetensors") != 0 ||
        dz_path_join(index, sizeof index, dir, "model.safetensors.index.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    out->dir = strdup(dir);
    if (!out->dir) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    dz_status s;
    if (dz_file_exists(single)) {
        out->files = calloc(1, sizeof *out->files);
        s = out->files ? open_shard(out, "model.safetensors", "the checkpoint", err)
                       : dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    } else if (dz_file_exists(index)) {
        s = dz_path_check_inside(dir, "model.safetensors.index.json", "the shard index", err);
        if (s == DZ_OK) s = open_from_index(out, index, err);
    } else {
        s = dz_fail(err, DZ_ERR_NOT_FOUND,
                    "%s: neither model.safetensors nor model.safetensors.index.json is there", dir);
    }
    if (s != DZ_OK) dz_hf_checkpoint_close(out);
    return s;
}

void dz_hf_checkpoint_close(dz_hf_checkpoint *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n_files; i++) dz_safetensors_close(&ck->files[i]);
    for (int k = 0; k < ck->n_index; k++) free(ck->index[k].name);
    free(ck->index);
    free(ck->files);
    free(ck->dir);
    memset(ck, 0, sizeof *ck);
}

static int entry_key_cmp(const void *key, const void *e) {
    return strcmp(key, ((const dz_hf_index_entry *)e)->name);
}

const dz_st_tensor *dz_hf_checkpoint_find(const dz_hf_checkpoint *ck, const char *name, const char **file) {
    const dz_safetensors *from = ck->n_files > 0 ? &ck->files[0] : NULL;
    if (ck->index) { /* sharded: the index decides which shard, if any */
        const dz_hf_index_entry *e = bsearch(name, ck->index, (size_t)ck->n_index, sizeof *e, entry_key_cmp);
        from = e ? &ck->files[e->file] : NULL;
    }
    const dz_st_tensor *t = from ? dz_safetensors_find(from, name) : NULL;
    if (t && file) *file = from->path;
    return t;
}
