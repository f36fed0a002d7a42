/* Model -> GGUF (save_gguf.h). */
#include "model/save_gguf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_layout.h"

enum { GLOBAL_CHUNK_ROWS = 4096 };

int dz_gguf_file_type_parse(const char *s) {
    static const struct { const char *name; int type; } k[] = {
        {"f32", DZ_GGML_F32}, {"f16", DZ_GGML_F16}, {"bf16", DZ_GGML_BF16}, {"q8_0", DZ_GGML_Q8_0}};
    char low[16];
    size_t n = s ? strlen(s) : 0;
    if (!n || n >= sizeof low) return -1;
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)s[i]);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(low, k[i].name)) return k[i].type;
    return -1;
}

uint32_t dz_gguf_tensor_type(const dz_param *p, uint32_t type) {
    if (p->rows == 1) return DZ_GGML_F32;
    if (type == DZ_GGML_Q8_0 && p->cols % 32) return DZ_GGML_F16;
    return type;
}

/* llama.cpp's llama_ftype of a file whose matrices are `type` (general.file_type). */
static uint32_t file_type_of(uint32_t type) {
    switch (type) {
    case DZ_GGML_F16: return 1;   /* LLAMA_FTYPE_MOSTLY_F16 */
    case DZ_GGML_Q8_0: return 7;  /* LLAMA_FTYPE_MOSTLY_Q8_0 */
    case DZ_GGML_BF16: return 32; /* LLAMA_FTYPE_MOSTLY_BF16 */
    default: return 0;            /* LLAMA_FTYPE_ALL_F32 */
    }
}

static const char *arch_of(const dz_config *c) { return c->qkv_bias ? "qwen2" : "llama"; }

dz_status dz_model_gguf_declare(const dz_config *c, const dz_param_table *t, uint32_t type, const char *name,
                                dz_gguf_writer *w, dz_error *err) {
    if (c->arch != DZ_ARCH_LLAMA)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "GGUF export: architecture %s has no llama.cpp counterpart (llama.cpp has no OPT architecture); "
                       "export it with --format hf", dz_arch_name(c->arch));
    if (c->out_bias)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "GGUF export: a LLaMA-family model with attention-output/FFN biases has no llama.cpp architecture");
    if (!dz_ggml_quantizable(type))
        return dz_fail(err, DZ_ERR_INVALID, "GGUF export: tensor type %s cannot be written (f32, f16, bf16, q8_0)",
                       dz_ggml_type_describe(type).name);
    const char *arch = arch_of(c);
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    dz_gguf_put_string(w, "general.architecture", arch);
    if (name && *name) dz_gguf_put_string(w, "general.name", name);
    dz_gguf_put_u32(w, "general.file_type", file_type_of(type));
    dz_gguf_put_u32(w, "general.quantization_version", 2); /* GGML_QNT_VERSION, as llama.cpp's writer adds */
    dz_gguf_put_u32(w, KEY("vocab_size"), (uint32_t)c->vocab_size);
    dz_gguf_put_u32(w, KEY("context_length"), (uint32_t)c->max_seq_len);
    dz_gguf_put_u32(w, KEY("embedding_length"), (uint32_t)c->dim);
    dz_gguf_put_u32(w, KEY("block_count"), (uint32_t)c->n_layers);
    dz_gguf_put_u32(w, KEY("feed_forward_length"), (uint32_t)c->hidden_dim);
    dz_gguf_put_u32(w, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    dz_gguf_put_u32(w, KEY("attention.head_count"), (uint32_t)c->n_heads);
    dz_gguf_put_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    dz_gguf_put_f32(w, KEY("rope.freq_base"), c->rope_theta);
    dz_gguf_put_f32(w, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
#undef KEY
    char tname[128];
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        const int64_t ne[2] = {p->cols, p->rows};
        dz_gguf_tensor_name(p, c->n_layers, tname, sizeof tname);
        dz_gguf_add_tensor(w, tname, dz_gguf_tensor_type(p, type), p->rows == 1 ? 1 : 2, ne);
    }
    return DZ_OK; /* the writer keeps any failure for begin */
}

dz_status dz_model_gguf_write(const dz_config *c, const dz_param_table *t, const dz_weight_source *src,
                              dz_gguf_writer *w, dz_error *err) {
    size_t cap = 1;
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        const int64_t rows = p->block < c->n_layers || p->rows < GLOBAL_CHUNK_ROWS ? p->rows : GLOBAL_CHUNK_ROWS;
        if ((size_t)(rows * p->cols) > cap) cap = (size_t)(rows * p->cols);
    }
    float *scratch = malloc(cap * sizeof *scratch);
    if (!scratch) return dz_fail(err, DZ_ERR_NOMEM, "GGUF export: out of memory for %zu floats", cap);
    const int interleaved = !c->qkv_bias; /* llama: the converter's permutation; qwen2: NEOX, none */
    dz_status st = DZ_OK;
    for (int i = 0; st == DZ_OK && i < t->count; i++) {
        const dz_param *p = &t->params[i];
        if (dz_gguf_permuted(p, c->n_layers, interleaved)) {
            const float *x = src->rows(src->self, 0, i, 0, p->rows, scratch);
            for (int64_t r = 0; st == DZ_OK && r < p->rows; r++)
                st = dz_gguf_write_f32(w, x + (size_t)dz_gguf_model_row(r, c->head_dim) * (size_t)p->cols,
                                       (size_t)p->cols, err);
            continue;
        }
        const int64_t chunk = p->block < c->n_layers ? p->rows : GLOBAL_CHUNK_ROWS;
        for (int64_t r0 = 0; st == DZ_OK && r0 < p->rows; r0 += chunk) {
            const int64_t n = p->rows - r0 < chunk ? p->rows - r0 : chunk;
            const float *x = src->rows(src->self, 0, i, r0, n, scratch);
            st = dz_gguf_write_f32(w, x, (size_t)(n * p->cols), err);
        }
    }
    free(scratch);
    return st;
}
