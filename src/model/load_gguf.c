/* GGUF models (llama.cpp's format): the architecture's metadata keys give the config, the
 * tensors are dequantized row slice by row slice into the model's arena in its dtype (the
 * mapped file is never copied whole), and the mapping is closed once every tensor is in;
 * or, keeping the base quantized (DZ_LOAD_KEEP_QUANTIZED), every tensor not stored as F32
 * stays in the mapping as the file holds it and is dequantized when read (quantized.c).
 *
 * A llama model's Q and K rows were permuted by llama.cpp's converter (gguf_layout.h); they
 * are put back at load, as for llama2.c. Qwen2 is converted without it (NEOX rotary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util.h"
#include "format/gguf.h"
#include "model/gguf_layout.h"
#include "model/model_internal.h"

typedef struct gguf_arch {
    const char *name;     /* general.architecture, also the prefix of its keys */
    int interleaved_rope; /* Q/K rows were permuted by the converter */
    int qkv_bias;
} gguf_arch;

/* llama.cpp's converter writes Mistral (MistralForCausalLM) as "llama", so it loads as one. */
static const gguf_arch k_archs[] = {
    {"llama", 1, 0},
    {"qwen2", 0, 1},
};

static dz_status arch_of(const dz_gguf *g, const gguf_arch **out, dz_error *err) {
    dz_gguf_str s;
    dz_status st = dz_gguf_get_string(g, "general.architecture", &s, err);
    if (st != DZ_OK) return st;
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (s.len == strlen(k_archs[i].name) && memcmp(s.s, k_archs[i].name, (size_t)s.len) == 0) {
            *out = &k_archs[i];
            return DZ_OK;
        }
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: key 'general.architecture' is \"%.*s\"; supported: llama (also Mistral), qwen2",
                   g->path, (int)(s.len < 64 ? s.len : 64), s.s);
}

/* "<arch>.<suffix>" */
static const char *arch_key(char *buf, size_t cap, const gguf_arch *a, const char *suffix) {
    snprintf(buf, cap, "%s.%s", a->name, suffix);
    return buf;
}

/* A positive size under key, or def (when def > 0) if the key is absent. */
static dz_status get_size(const dz_gguf *g, const gguf_arch *a, const char *suffix, int def, int *out, dz_error *err) {
    char key[128];
    arch_key(key, sizeof key, a, suffix);
    if (def > 0 && !dz_gguf_find_kv(g, key)) {
        *out = def;
        return DZ_OK;
    }
    uint32_t v;
    dz_status st = dz_gguf_get_u32(g, key, &v, err);
    if (st != DZ_OK) return st;
    if (v == 0 || v > DZ_MAX_DIM)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: metadata key '%s' = %u is not a sane size", g->path, key, v);
    *out = (int)v;
    return DZ_OK;
}

static dz_status get_token_id(const dz_gguf *g, const char *key, int *out, dz_error *err) {
    *out = -1;
    if (!dz_gguf_find_kv(g, key)) return DZ_OK;
    int32_t v;
    dz_status st = dz_gguf_get_i32(g, key, &v, err);
    if (st == DZ_OK) *out = v;
    return st;
}

static dz_status unsupported_key(const dz_gguf *g, const char *key, const char *why, dz_error *err) {
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: metadata key '%s': %s", g->path, key, why);
}

static dz_status gguf_to_config(const dz_gguf *g, dz_config *c, const gguf_arch **arch, dz_error *err) {
    memset(c, 0, sizeof *c);
    const gguf_arch *a = NULL;
    char key[128], key2[128];
    dz_status st = arch_of(g, &a, err);
    *arch = a;
    c->arch = DZ_ARCH_LLAMA;
    if (!st) st = get_size(g, a, "block_count", 0, &c->n_layers, err);
    if (!st) st = get_size(g, a, "embedding_length", 0, &c->dim, err);
    if (!st) st = get_size(g, a, "feed_forward_length", 0, &c->hidden_dim, err);
    if (!st) st = get_size(g, a, "attention.head_count", 0, &c->n_heads, err);
    if (!st) st = get_size(g, a, "attention.head_count_kv", c->n_heads, &c->n_kv_heads, err);
    if (!st) st = get_size(g, a, "context_length", 0, &c->max_seq_len, err);
    if (st) return st;
    if (c->dim % c->n_heads) /* else head_dim would round down and every later check name another key */
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %s %d is not a multiple of %s %d", g->path,
                       arch_key(key, sizeof key, a, "embedding_length"), c->dim,
                       arch_key(key2, sizeof key2, a, "attention.head_count"), c->n_heads);
    c->head_dim = c->dim / c->n_heads;
    int key_length = 0, rope_dims = 0;
    if (!st) st = get_size(g, a, "attention.key_length", c->head_dim, &key_length, err);
    if (!st && key_length != c->head_dim)
        return unsupported_key(g, arch_key(key, sizeof key, a, "attention.key_length"),
                               "a head size other than embedding_length / head_count is not supported", err);
    if (!st) st = get_size(g, a, "rope.dimension_count", c->head_dim, &rope_dims, err);
    if (!st && rope_dims != c->head_dim)
        return unsupported_key(g, arch_key(key, sizeof key, a, "rope.dimension_count"),
                               "partial rotary embeddings are not supported", err);
    if (st) return st;
    arch_key(key, sizeof key, a, "rope.scaling.type");
    dz_gguf_str scaling;
    if (dz_gguf_find_kv(g, key)) {
        if ((st = dz_gguf_get_string(g, key, &scaling, err)) != DZ_OK) return st;
        if (!(scaling.len == 4 && memcmp(scaling.s, "none", 4) == 0))
            return unsupported_key(g, key, "rotary scaling is not supported", err);
    }
    c->rope_theta = 10000.0f;
    if (dz_gguf_find_kv(g, arch_key(key, sizeof key, a, "rope.freq_base")))
        st = dz_gguf_get_f32(g, key, &c->rope_theta, err);
    if (!st) st = dz_gguf_get_f32(g, arch_key(key, sizeof key, a, "attention.layer_norm_rms_epsilon"), &c->norm_eps, err);
    if (!st) st = get_token_id(g, "tokenizer.ggml.bos_token_id", &c->bos_id, err);
    if (!st) st = get_token_id(g, "tokenizer.ggml.eos_token_id", &c->eos_id, err);
    if (!st) st = get_token_id(g, "tokenizer.ggml.padding_token_id", &c->pad_id, err);
    if (st) return st;

    /* The vocabulary: the embedding's rows (the tensor is what the forward indexes), which
     * a tokens list, when present, must not exceed. */
    const dz_gguf_tensor *emb = dz_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing", g->path);
    if (emb->ndim != 2 || emb->ne[1] <= 0 || emb->ne[1] > DZ_MAX_DIM)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor 'token_embd.weight' is not a [vocab, %d] matrix", g->path, c->dim);
    c->vocab_size = (int)emb->ne[1];
    int said = 0; /* <arch>.vocab_size, optional: when given, the embedding's */
    if (dz_gguf_find_kv(g, arch_key(key, sizeof key, a, "vocab_size"))) {
        if ((st = get_size(g, a, "vocab_size", 0, &said, err)) != DZ_OK) return st;
        if (said != c->vocab_size)
            return dz_fail(err, DZ_ERR_FORMAT, "%s: metadata key '%s' = %d but token_embd.weight has %d rows", g->path,
                           key, said, c->vocab_size);
    }
    const dz_gguf_kv *tokens = dz_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (tokens && tokens->type == DZ_GGUF_ARRAY && tokens->count > (uint64_t)c->vocab_size)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tokenizer.ggml.tokens lists %llu tokens but token_embd.weight has %d rows",
                       g->path, (unsigned long long)tokens->count, c->vocab_size);
    c->tied_head = dz_gguf_find_tensor(g, "output.weight") == NULL;
    c->embed_dim = c->dim;
    c->pre_norm = 1;
    c->final_norm = 1;
    c->qkv_bias = a->qkv_bias;
    return dz_config_validate(c, g->path, err);
}

dz_status dz_config_from_gguf(const char *path, dz_config *cfg, dz_error *err) {
    dz_gguf g;
    dz_status st = dz_gguf_open(path, &g, err);
    if (st != DZ_OK) return st;
    const gguf_arch *a;
    st = gguf_to_config(&g, cfg, &a, err);
    dz_gguf_close(&g);
    return st;
}

static dz_status check_tensor(const dz_gguf *g, const dz_param *p, const char *name, const dz_gguf_tensor *t,
                              dz_error *err) {
    if (!t) return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is missing", g->path, name);
    const int ok = p->rows == 1 ? (t->ndim == 1 && t->ne[0] == p->cols)
                                : (t->ndim == 2 && t->ne[0] == p->cols && t->ne[1] == p->rows);
    if (!ok) {
        if (p->rows == 1)
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has ne [%lld, %lld], the metadata implies [%lld]", g->path,
                           name, (long long)t->ne[0], (long long)t->ne[1], (long long)p->cols);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has ne [%lld, %lld] (%d dims), the metadata implies [%lld, %lld]",
                       g->path, name, (long long)t->ne[0], (long long)t->ne[1], t->ndim, (long long)p->cols,
                       (long long)p->rows);
    }
    const dz_ggml_type_info ti = dz_ggml_type_describe(t->type);
    if (!ti.dequantizable)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has type %s, which distzo does not dequantize (F32, F16, BF16, Q4_0, Q4_1, "
                       "Q5_0, Q5_1, Q8_0, Q2_K..Q6_K are read)", g->path, name, ti.name);
    return DZ_OK;
}

/* Drops the whole pages inside [p, p+len) of the file mapping once a tensor is converted. */
static void release_pages(const void *p, size_t len) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) / page * page, b = ((uintptr_t)p + len) / page * page;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Dequantizes t row by row (through one fp32 row) into dst, in dtype. */
static void place_rows(const dz_gguf_tensor *t, void *dst, dz_dtype dtype, int interleaved, int head_dim, float *row) {
    const size_t cols = (size_t)t->ne[0], esz = dz_dtype_size(dtype);
    for (int64_t r = 0; r < t->nrows; r++) {
        dz_ggml_dequantize(t->type, (const char *)t->data + (size_t)r * t->row_bytes, row, cols);
        dz_from_f32((char *)dst + (size_t)(interleaved ? dz_gguf_model_row(r, head_dim) : r) * cols * esz, dtype, row, cols);
    }
}

/* Tensor i, held as the file stores it: its rows are dequantized when read (quantized.c). */
static void hold_quantized(dz_model *m, int i, const dz_gguf_tensor *t, int interleaved) {
    m->quant[i] = (dz_model_quant){.type = t->type, .data = t->data, .row_bytes = t->row_bytes,
                                   .head_dim = interleaved ? m->cfg.head_dim : 0};
    m->data[i] = NULL;
    m->quant_bytes += t->nbytes;
}

/* Held quantized (keep): every tensor not stored as F32. F32 ones (norms, biases) are
 * small and read as they are stored; F16/BF16 ones are converted on read like the blocks. */
static int held(const dz_gguf_tensor *t, int keep) { return keep && t->type != DZ_GGML_F32; }

/* Each tensor into the arena, converted, or (keep) held in the file; max_cols: the widest row. */
static dz_status place_all(dz_model *m, const dz_gguf *g, const gguf_arch *a, const dz_gguf_tensor **found, int keep,
                           size_t max_cols, dz_error *err) {
    float *row = malloc(max_cols * sizeof *row);
    if (!row) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", g->path);
    size_t off = 0;
    for (int i = 0; i < m->table.count; i++) {
        const dz_param *p = &m->table.params[i];
        const int interleaved = dz_gguf_permuted(p, m->cfg.n_layers, a->interleaved_rope);
        if (held(found[i], keep)) {
            hold_quantized(m, i, found[i], interleaved);
            continue;
        }
        void *dst = (char *)m->owned + off;
        off += ((size_t)dz_param_numel(p) * dz_dtype_size(m->dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
        place_rows(found[i], dst, m->dtype, interleaved, m->cfg.head_dim, row);
        m->data[i] = dst;
        release_pages(found[i]->data, found[i]->nbytes);
    }
    free(row);
    return DZ_OK;
}

dz_status dz_model_load_gguf(dz_model *m, const char *path, int keep, dz_error *err) {
    m->format = "gguf";
    dz_gguf g;
    dz_status st = dz_gguf_open(path, &g, err);
    if (st != DZ_OK) return st;
    const gguf_arch *a = NULL;
    st = gguf_to_config(&g, &m->cfg, &a, err);
    if (st == DZ_OK) st = dz_model_init_tables(m, err);
    const dz_gguf_tensor **found = NULL;
    unsigned char *used = NULL;
    if (st == DZ_OK) {
        found = calloc((size_t)m->table.count, sizeof *found);
        used = calloc((size_t)g.n_tensors + 1, 1);
        m->quant = keep ? calloc((size_t)m->table.count, sizeof *m->quant) : NULL;
        if (!found || !used || (keep && !m->quant)) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t arena = 0, max_cols = 1;
    char name[128];
    for (int i = 0; st == DZ_OK && i < m->table.count; i++) {
        const dz_param *p = &m->table.params[i];
        dz_gguf_tensor_name(p, m->cfg.n_layers, name, sizeof name);
        found[i] = dz_gguf_find_tensor(&g, name);
        st = check_tensor(&g, p, name, found[i], err);
        if (st != DZ_OK) break;
        used[found[i] - g.tensors] = 1;
        if (!held(found[i], keep))
            arena += ((size_t)dz_param_numel(p) * dz_dtype_size(m->dtype) + DZ_ALIGN - 1) / DZ_ALIGN * DZ_ALIGN;
        if ((size_t)p->cols > max_cols) max_cols = (size_t)p->cols;
    }
    /* A tensor the model does not consume would be silently dropped; a known one (such as
     * rope_freqs, llama 3's rotary scaling) changes the math. Either way: say so. */
    for (int i = 0; st == DZ_OK && i < g.n_tensors; i++)
        if (!used[i])
            st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s' is not part of a %s model as distzo runs it", path,
                         g.tensors[i].name, a->name);
    if (st == DZ_OK) st = dz_model_alloc_arena(m, arena, err);
    if (st == DZ_OK) st = place_all(m, &g, a, found, keep, max_cols, err);
    free(found);
    free(used);
    if (st == DZ_OK && m->quant_bytes > 0) { /* the model reads its blocks from the mapping from now on */
        m->map = g.map;
        m->map_size = g.map_size;
        g.map = NULL;
    } else {
        free(m->quant);
        m->quant = NULL;
    }
    dz_gguf_close(&g);
    if (st == DZ_OK) dz_model_find_tokenizer(path, &m->cfg, m->tokenizer, sizeof m->tokenizer);
    return st;
}
