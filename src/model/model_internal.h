/* The model object shared by the loaders and the forward pass. */
#ifndef DZ_MODEL_INTERNAL_H
#define DZ_MODEL_INTERNAL_H

#include <limits.h>

#include "distzo/model.h"
#include "format/safetensors.h"

enum { DZ_ROLE_MAX = (int)DZ_L_COUNT > (int)DZ_G_COUNT ? (int)DZ_L_COUNT : (int)DZ_G_COUNT };

/* A tensor held as the GGUF file stores it (DZ_LOAD_KEEP_QUANTIZED, quantized.c): its rows
 * are dequantized on each read through the model's weight source. */
typedef struct dz_model_quant {
    uint32_t type;              /* dz_ggml_type */
    const unsigned char *data;  /* inside the file mapping (map); NULL: not held quantized */
    size_t row_bytes;           /* bytes of one file row */
    int head_dim;               /* > 0: Q/K rows in llama.cpp's rotary order, undone on read */
} dz_model_quant;

struct dz_model {
    dz_config cfg;
    dz_param_table table;
    dz_dtype dtype;
    void **data;            /* per tensor id, in dtype */
    int (*ids)[DZ_ROLE_MAX]; /* [n_layers + 1][role] -> tensor id or -1 */
    void *owned;            /* converted tensors live here */
    size_t owned_bytes;
    int shared_arena;         /* owned points into memory the caller provided (a node-shared store) */
    size_t mapped_bytes;
    dz_hf_checkpoint ckpt;  /* HF: kept open while tensors point into it */
    dz_model_quant *quant;  /* per tensor id; NULL when no tensor is held quantized */
    size_t quant_bytes;     /* bytes of the tensors held quantized */
    void *map;              /* llama2.c, or a GGUF whose tensors are held quantized: the file's mapping */
    size_t map_size;
    char path[PATH_MAX];
    char tokenizer[PATH_MAX];
    const char *format;
    int is_lora;            /* an adapter (src/model/adapter.c): its table is dz_lora_table_build's */
    dz_lora_spec lora;
    char lora_base[PATH_MAX]; /* the base it adapts, as adapter_config.json names it */
};

/* Allocates data/ids for cfg and builds the table. */
dz_status dz_model_init_tables(dz_model *m, dz_error *err);
/* Allocates data/ids for the table m already holds. */
dz_status dz_model_index_table(dz_model *m, dz_error *err);
/* adapter.c: an adapter model written as a PEFT folder (dz_model_save_hf's). */
dz_status dz_lora_save(const dz_model *m, const char *dir, dz_error *err);
/* The most virtual tokens a prefix has (--prefix-tokens, a folder's num_virtual_tokens). */
enum { DZ_PREFIX_MAX_TOKENS = 4096 };
/* A prefix adapter as PEFT's PREFIX_TUNING folder (prefix_peft.c), and its reading. */
dz_status dz_prefix_save(const dz_model *m, const char *dir, dz_error *err);
int dz_prefix_is_config(const char *config_path);
/* forward_prefix.c: MeZO's init of a prefix adapter: tokens[0 .. n) through base at
 * positions 0 .. n-1, each layer's keys (after RoPE) and values into the adapter. */
dz_status dz_forward_prefix_init(const dz_model *base, const int *tokens, int n, dz_model *adapter, dz_error *err);
dz_status dz_prefix_load(const char *dir, const dz_config *cfg, dz_model **out, dz_error *err);
/* adapter.c: an adapter model of spec's table for a base of cfg, its f32 tensors zeroed. */
dz_status dz_lora_alloc(const dz_config *cfg, const dz_lora_spec *spec, const char *path, const char *base_path,
                        dz_model **out, dz_error *err);
/* Places tensor id from src, which points into a read-only file mapping: used in place
 * if src_dtype == m->dtype and in_place_ok, else converted into the owned arena at
 * *arena_off, and the source pages are released so peak memory stays near the copy. */
void dz_model_place(dz_model *m, int id, const void *src, dz_dtype src_dtype, int in_place_ok,
                    size_t *arena_off);
/* Bytes the owned arena needs for tensors not usable in place (computed by the loader). */
dz_status dz_model_alloc_arena(dz_model *m, size_t bytes, dz_error *err);

dz_status dz_model_load_hf(dz_model *m, const char *dir, dz_error *err);
dz_status dz_model_load_llama2c(dz_model *m, const char *path, dz_error *err);
/* A .gguf file (src/model/load_gguf.c): every tensor is converted and the file is not kept,
 * or, with keep_quantized, every tensor that is not F32 stays in the mapped file (m->quant). */
dz_status dz_model_load_gguf(dz_model *m, const char *path, int keep_quantized, dz_error *err);

/* Rows [row0, row0+nrows) of a tensor held quantized, as fp32 values of the model's dtype
 * (bitwise what the dequantize-at-load model holds), into dst (nrows * cols floats); returns dst. */
const float *dz_model_quant_rows(const dz_model *m, int id, int64_t row0, int64_t nrows, float *dst);
/* The first element of a tensor held quantized whose value is Inf or NaN, or -1; buf
 * (buf_floats >= its cols) is the scratch the rows are read through. */
int64_t dz_model_quant_first_non_finite(const dz_model *m, int id, float *buf, size_t buf_floats);

#endif
