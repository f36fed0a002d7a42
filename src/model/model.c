/* Model object: tables, tensor placement, accessors and the model's own weight source. */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util.h"
#include "model/model_internal.h"

dz_status dz_model_init_tables(dz_model *m, dz_error *err) {
    dz_status st = dz_param_table_build(&m->cfg, &m->table, err);
    return st == DZ_OK ? dz_model_index_table(m, err) : st;
}

dz_status dz_model_index_table(dz_model *m, dz_error *err) {
    const int nb = m->cfg.n_layers + 1;
    m->data = calloc((size_t)m->table.count, sizeof *m->data);
    m->ids = malloc((size_t)nb * sizeof *m->ids);
    if (!m->data || !m->ids) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", m->path);
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < DZ_ROLE_MAX; r++) m->ids[b][r] = -1;
    for (int i = 0; i < m->table.count; i++) m->ids[m->table.params[i].block][m->table.params[i].role] = i;
    return DZ_OK;
}

dz_status dz_model_alloc_arena(dz_model *m, size_t bytes, dz_error *err) {
    if (bytes == 0) return DZ_OK;
    m->owned = dz_alloc(bytes);
    if (!m->owned) return dz_fail(err, DZ_ERR_NOMEM, "%s: cannot allocate %zu bytes for weights", m->path, bytes);
    m->owned_bytes = bytes;
    return DZ_OK;
}

/* Drops the whole pages inside [p, p+len) of a file mapping; they are re-read if touched. */
static void release_pages(const void *p, size_t len) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + len) / page * page;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* n elements from src (src_dtype) into dst (dst_dtype), through fp32 in slices so no
 * full fp32 copy is needed. */
static void convert(void *dst, dz_dtype dst_dtype, const void *src, dz_dtype src_dtype, size_t n) {
    if (src_dtype == dst_dtype) {
        memcpy(dst, src, n * dz_dtype_size(src_dtype));
    } else if (dst_dtype == DZ_F32) {
        dz_to_f32((float *)dst, src, src_dtype, n);
    } else {
        float tmp[4096];
        for (size_t i = 0; i < n; i += 4096) {
            size_t k = n - i < 4096 ? n - i : 4096;
            dz_to_f32(tmp, (const char *)src + i * dz_dtype_size(src_dtype), src_dtype, k);
            dz_from_f32((char *)dst + i * dz_dtype_size(dst_dtype), dst_dtype, tmp, k);
        }
    }
}

void dz_model_place(dz_model *m, int id, const void *src, dz_dtype src_dtype, int in_place_ok,
                    size_t *arena_off) {
    const size_t n = (size_t)dz_param_numel(&m->table.params[id]);
    if (src_dtype == m->dtype && in_place_ok) {
        m->data[id] = (void *)src;
        m->mapped_bytes += n * dz_dtype_size(src_dtype);
        return;
    }
    char *dst = (char *)m->owned + *arena_off;
    *arena_off += (n * dz_dtype_size(m->dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    convert(dst, m->dtype, src, src_dtype, n);
    m->data[id] = dst;
    release_pages(src, n * dz_dtype_size(src_dtype));
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

dz_status dz_config_load(const char *path, dz_config *cfg, dz_error *err) {
    if (!path || !cfg) return dz_fail(err, DZ_ERR_INVALID, "config: no path or no config to fill given");
    if (dz_is_dir(path)) {
        char cfg_path[PATH_MAX];
        if (dz_path_join(cfg_path, sizeof cfg_path, path, "config.json") != 0)
            return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", path);
        dz_status st = dz_config_from_hf_json(cfg_path, cfg, err);
        return st == DZ_OK ? dz_config_validate(cfg, cfg_path, err) : st;
    }
    if (ends_with(path, ".bin")) return dz_config_from_llama2c(path, cfg, err);
    if (ends_with(path, ".gguf")) return dz_config_from_gguf(path, cfg, err);
    if (!dz_file_exists(path)) return dz_fail(err, DZ_ERR_IO, "%s: no such file or folder", path);
    return dz_fail(err, DZ_ERR_UNSUPPORTED,
                   "%s: not a model: expected a Hugging Face folder (config.json + safetensors), a .gguf file "
                   "or a llama2.c .bin checkpoint", path);
}

int dz_model_find_tokenizer(const char *path, const dz_config *cfg, char *out, size_t cap) {
    char cand[PATH_MAX];
    out[0] = '\0';
    if (dz_is_dir(path)) { /* an HF folder holds its tokenizer's files (SentencePiece: tokenizer.model alone) */
        static const char *markers[] = {"tokenizer.json", "vocab.json", "encoder.json", "tokenizer.model"};
        for (int i = 0; i < 4; i++)
            if (dz_path_join(cand, sizeof cand, path, markers[i]) == 0 && dz_file_exists(cand)) {
                snprintf(out, cap, "%s", path);
                return 1;
            }
        /* a checkpoint of a llama2.c model keeps the llama2.c tokenizer beside its weights */
        if (dz_path_join(cand, sizeof cand, path, "tokenizer.bin") != 0 || !dz_file_exists(cand)) return 0;
        snprintf(out, cap, "%s", cand);
        return 1;
    }
    if (ends_with(path, ".gguf")) { /* a GGUF file carries its tokenizer (tokenizer.ggml.*) */
        snprintf(out, cap, "%s", path);
        return 1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    const char *d = dirname(dir);
    snprintf(cand, sizeof cand, "%s/tokenizer.bin", d);
    if (!dz_file_exists(cand)) snprintf(cand, sizeof cand, "%s/tok%d.bin", d, cfg->vocab_size);
    if (!dz_file_exists(cand)) return 0;
    snprintf(out, cap, "%s", cand);
    return 1;
}

/* Index of the first element of x (n values of dtype t) that is Inf or NaN, or -1. */
static int64_t first_non_finite(const void *x, dz_dtype t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (t == DZ_F32) {
            uint32_t u;
            memcpy(&u, (const char *)x + 4 * i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return (int64_t)i;
        } else {
            uint16_t h;
            memcpy(&h, (const char *)x + 2 * i, 2);
            const uint16_t exp_mask = t == DZ_BF16 ? 0x7f80u : 0x7c00u;
            if ((h & exp_mask) == exp_mask) return (int64_t)i;
        }
    }
    return -1;
}

/* A checkpoint with an Inf or NaN weight would train on garbage: refuse it at load. A
 * tensor still mapped from the file is read in slices whose pages are dropped again, so
 * the check does not make the file resident (a store is written from the mapping
 * tensor by tensor to keep the peak low). */
static dz_status check_finite(const dz_model *m, dz_error *err) {
    enum { SLICE = 1 << 22 };
    const size_t esz = dz_dtype_size(m->dtype);
    size_t qfloats = 1 << 18; /* tensors held quantized are checked as they read, 1 MB of rows (or one) at a time */
    for (int id = 0; id < m->table.count; id++)
        if ((size_t)m->table.params[id].cols > qfloats) qfloats = (size_t)m->table.params[id].cols;
    float *qbuf = m->quant_bytes ? malloc(qfloats * sizeof *qbuf) : NULL;
    if (m->quant_bytes && !qbuf) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", m->path);
    for (int id = 0; id < m->table.count; id++) {
        const dz_param *p = &m->table.params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const int mapped = dz_model_tensor_mapped(m, id);
        int64_t at = dz_model_tensor_quantized(m, id) ? dz_model_quant_first_non_finite(m, id, qbuf, qfloats) : -1;
        for (size_t i = 0; i < n && at < 0 && !dz_model_tensor_quantized(m, id); i += SLICE) {
            const size_t k = n - i < SLICE ? n - i : SLICE;
            const char *x = (const char *)m->data[id] + i * esz;
            const int64_t j = first_non_finite(x, m->dtype, k);
            if (j >= 0) at = (int64_t)i + j;
            if (mapped) release_pages(x, k * esz);
        }
        if (at >= 0) {
            free(qbuf);
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has a non-finite value at element %lld (row %lld)",
                           m->path, p->hf_name, (long long)at, (long long)(at / p->cols));
        }
    }
    free(qbuf);
    return DZ_OK;
}

dz_status dz_model_load(const char *path, dz_dtype dtype, dz_model **out, dz_error *err) {
    return dz_model_load_flags(path, dtype, 0, out, err);
}

dz_status dz_model_load_flags(const char *path, dz_dtype dtype, unsigned flags, dz_model **out, dz_error *err) {
    if (!out) return dz_fail(err, DZ_ERR_INVALID, "model: no place for the model given (out is NULL)");
    *out = NULL;
    if (!path) return dz_fail(err, DZ_ERR_INVALID, "model: no path given");
    if (dtype != DZ_F32 && dtype != DZ_F16 && dtype != DZ_BF16)
        return dz_fail(err, DZ_ERR_INVALID, "%s: dtype %d is not DZ_F32, DZ_F16 or DZ_BF16", path, (int)dtype);
    dz_model *m = calloc(1, sizeof *m);
    if (!m) return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    m->dtype = dtype;
    snprintf(m->path, sizeof m->path, "%s", path);
    dz_status st;
    char cfg_json[PATH_MAX];
    const int adapter_alone = dz_is_dir(path) && dz_lora_is_folder(path) &&
                              !(dz_path_join(cfg_json, sizeof cfg_json, path, "config.json") == 0 && dz_file_exists(cfg_json));
    if (adapter_alone) { /* a PEFT folder (a LoRA run's checkpoint-N, an export) holds no base */
        st = dz_fail(err, DZ_ERR_INVALID, "%s: a PEFT adapter folder, not a model: give its base model as the model and "
                     "this folder as --adapter (eval RUN/checkpoint-N takes the run's base itself)", path);
    } else if (dz_is_dir(path)) {
        st = dz_model_load_hf(m, path, err);
    } else if (ends_with(path, ".bin")) {
        st = dz_model_load_llama2c(m, path, err);
    } else if (ends_with(path, ".gguf")) {
        st = dz_model_load_gguf(m, path, (flags & DZ_LOAD_KEEP_QUANTIZED) != 0, err);
    } else if (!dz_file_exists(path)) {
        st = dz_fail(err, DZ_ERR_IO, "%s: no such file or folder", path);
    } else {
        st = dz_fail(err, DZ_ERR_UNSUPPORTED,
                     "%s: not a model: expected a Hugging Face folder (config.json + safetensors), "
                     "a .gguf file or a llama2.c .bin checkpoint", path);
    }
    if (st == DZ_OK) st = check_finite(m, err);
    if (st != DZ_OK) {
        dz_model_free(m);
        return st;
    }
    *out = m;
    return DZ_OK;
}

void dz_model_free(dz_model *m) {
    if (!m) return;
    dz_hf_checkpoint_close(&m->ckpt);
    if (m->map) munmap(m->map, m->map_size);
    if (!m->shared_arena) dz_free(m->owned);
    free(m->quant);
    free(m->data);
    free(m->ids);
    dz_param_table_free(&m->table);
    free(m);
}

static int in_range(const void *p, const void *base, size_t size) {
    return base && (const char *)p >= (const char *)base && (const char *)p < (const char *)base + size;
}

int dz_model_tensor_mapped(const dz_model *m, int id) {
    const void *p = m->data[id];
    if (!p || in_range(p, m->owned, m->owned_bytes)) return 0;
    if (in_range(p, m->map, m->map_size)) return 1;
    for (int i = 0; i < m->ckpt.n_files; i++)
        if (in_range(p, m->ckpt.files[i].map, m->ckpt.files[i].map_size)) return 1;
    return 0;
}

size_t dz_param_table_bytes(const dz_param_table *t, dz_dtype dtype, int block) {
    const size_t esz = dz_dtype_size(dtype);
    size_t bytes = 0;
    for (int i = 0; i < t->count; i++)
        if (block < 0 || t->params[i].block == block)
            bytes += ((size_t)dz_param_numel(&t->params[i]) * esz + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    return bytes;
}

typedef enum { KEEP_ALL, KEEP_GLOBALS, KEEP_NONE } keep_mode;

static int kept(const dz_model *m, int id, keep_mode keep) {
    return keep == KEEP_ALL || (keep == KEEP_GLOBALS && m->table.params[id].block == m->cfg.n_layers);
}

/* Moves the kept tensors into one arena as dtype (an owned one, or the caller's shared
 * one, converting the weights in only when copy is set), drops the others (NULL), and
 * lets go of the file mappings; the model's dtype is dtype from then on. */
static dz_status place_tensors(dz_model *m, keep_mode keep, dz_dtype dtype, char *shared, int copy, dz_error *err) {
    if (m->quant_bytes) /* what would be written (trained, moved, stored) is only read, block by block */
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "%s: the model is held quantized (--keep-quantized), which only reads it; training every "
                       "parameter needs it dequantized at load (leave --keep-quantized out)", m->path);
    const size_t esz = dz_dtype_size(dtype);
    size_t bytes = 0;
    for (int i = 0; i < m->table.count; i++)
        if (kept(m, i, keep))
            bytes += ((size_t)dz_param_numel(&m->table.params[i]) * esz + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    char *arena = shared ? shared : bytes ? dz_alloc(bytes) : NULL;
    if (bytes && !arena) return dz_fail(err, DZ_ERR_NOMEM, "%s: cannot allocate %zu bytes for the weights", m->path, bytes);
    size_t off = 0;
    for (int i = 0; i < m->table.count; i++) {
        if (!kept(m, i, keep)) {
            m->data[i] = NULL;
            continue;
        }
        const size_t numel = (size_t)dz_param_numel(&m->table.params[i]), n = numel * esz;
        if (copy) convert(arena + off, dtype, m->data[i], m->dtype, numel);
        if (dz_model_tensor_mapped(m, i)) /* a mapped source is not needed twice */
            release_pages(m->data[i], numel * dz_dtype_size(m->dtype));
        m->data[i] = arena + off;
        off += (n + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
    }
    if (!m->shared_arena) dz_free(m->owned);
    m->dtype = dtype;
    m->owned = arena;
    m->owned_bytes = bytes;
    m->shared_arena = shared != NULL;
    m->mapped_bytes = 0;
    dz_hf_checkpoint_close(&m->ckpt);
    if (m->map) munmap(m->map, m->map_size);
    m->map = NULL;
    return DZ_OK;
}

dz_status dz_model_make_owned(dz_model *m, dz_error *err) {
    return m->mapped_bytes == 0 && m->quant_bytes == 0 ? DZ_OK : place_tensors(m, KEEP_ALL, m->dtype, NULL, 1, err);
}

dz_status dz_model_keep_for_store(dz_model *m, int keep_globals, dz_dtype dtype, dz_error *err) {
    return place_tensors(m, keep_globals ? KEEP_GLOBALS : KEEP_NONE, dtype, NULL, 1, err);
}

size_t dz_model_arena_bytes(const dz_model *m) { return dz_param_table_bytes(&m->table, m->dtype, -1); }

dz_status dz_model_move_to(dz_model *m, void *arena, int copy, dz_error *err) {
    return place_tensors(m, KEEP_ALL, m->dtype, arena, copy, err);
}

const dz_config *dz_model_config(const dz_model *m) { return &m->cfg; }
const dz_param_table *dz_model_params(const dz_model *m) { return &m->table; }
dz_dtype dz_model_dtype(const dz_model *m) { return m->dtype; }
const char *dz_model_path(const dz_model *m) { return m->path; }
const char *dz_model_format(const dz_model *m) { return m->format; }
void *dz_model_tensor(const dz_model *m, int id) { return id >= 0 && id < m->table.count ? m->data[id] : NULL; }
size_t dz_model_bytes_owned(const dz_model *m) { return m->owned_bytes; }
size_t dz_model_bytes_mapped(const dz_model *m) { return m->mapped_bytes; }
const char *dz_model_tokenizer_path(const dz_model *m) { return m->tokenizer[0] ? m->tokenizer : NULL; }

static const float *model_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    (void)stream;
    const dz_model *m = self;
    if (m->quant && m->quant[id].data) return dz_model_quant_rows(m, id, row0, nrows, scratch);
    const int64_t cols = m->table.params[id].cols;
    const char *base = (const char *)m->data[id] + (size_t)(row0 * cols) * dz_dtype_size(m->dtype);
    if (m->dtype == DZ_F32) return (const float *)base;
    dz_to_f32(scratch, base, m->dtype, (size_t)(nrows * cols));
    return scratch;
}

dz_weight_source dz_model_weights(const dz_model *m) {
    return (dz_weight_source){.rows = model_rows, .self = m, .same_for_streams = 1};
}
