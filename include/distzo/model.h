/* Models: architecture config, the parameter table, loading, and the forward pass.
 *
 * A model is a list of blocks. Block 0..n_layers-1 are the transformer layers; the
 * last block (DZ_BLOCK_GLOBAL == n_layers) holds what every step uses: embeddings,
 * final norm, head, OPT's projections. Each tensor has a role within its block; the
 * parameter table maps (block, role) to shape and Hugging Face name, and is the one
 * place that knows which tensors an architecture has. Loaders, writers, the store
 * and the perturbation RNG (tensor id = position in the table) all walk it. */
#ifndef DISTZO_MODEL_H
#define DISTZO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/dtype.h"
#include "distzo/error.h"

typedef enum dz_arch { DZ_ARCH_OPT = 0, DZ_ARCH_LLAMA } dz_arch;

typedef struct dz_config {
    dz_arch arch;
    int vocab_size;
    int dim;              /* hidden size */
    int hidden_dim;       /* FFN inner size */
    int n_layers;
    int n_heads;
    int n_kv_heads;       /* == n_heads without grouped-query attention */
    int head_dim;         /* dim / n_heads */
    int max_seq_len;      /* max_position_embeddings */
    int embed_dim;        /* OPT word_embed_proj_dim; == dim unless project_in/out exist */
    int pre_norm;         /* OPT do_layer_norm_before; always 1 for LLaMA */
    int final_norm;       /* a final norm before the head exists */
    float norm_eps;
    float rope_theta;
    int rope_interleaved; /* 1: rotate pairs (2i,2i+1) (Meta/llama2.c layout); 0: (i, i+hd/2) (HF) */
    int tied_head;        /* lm_head shares the token embedding */
    int qkv_bias;         /* q/k/v projections have biases (OPT; Qwen2) */
    int out_bias;         /* attention output and FFN linears have biases (OPT) */
    int pos_offset;       /* learned-position offset (OPT: 2); 0 for rotary models */
    int bos_id, eos_id, pad_id; /* -1 when absent */
} dz_config;

enum { DZ_MAX_LAYERS = 256 };

/* Tensor roles inside a layer block. */
typedef enum dz_layer_role {
    DZ_L_ATTN_NORM_W, DZ_L_ATTN_NORM_B,
    DZ_L_WQ, DZ_L_BQ, DZ_L_WK, DZ_L_BK, DZ_L_WV, DZ_L_BV, DZ_L_WO, DZ_L_BO,
    DZ_L_FFN_NORM_W, DZ_L_FFN_NORM_B,
    DZ_L_W_UP, DZ_L_B_UP,   /* OPT fc1; LLaMA up_proj */
    DZ_L_W_GATE,            /* LLaMA gate_proj */
    DZ_L_W_DOWN, DZ_L_B_DOWN, /* OPT fc2; LLaMA down_proj */
    DZ_L_COUNT
} dz_layer_role;

/* Tensor roles inside the global block. */
typedef enum dz_global_role {
    DZ_G_TOK_EMB, DZ_G_POS_EMB, DZ_G_PROJ_IN, DZ_G_PROJ_OUT,
    DZ_G_FINAL_NORM_W, DZ_G_FINAL_NORM_B, DZ_G_LM_HEAD,
    DZ_G_COUNT
} dz_global_role;

typedef enum dz_param_kind { DZ_PARAM_MATRIX, DZ_PARAM_BIAS, DZ_PARAM_NORM, DZ_PARAM_EMBEDDING } dz_param_kind;

typedef struct dz_param {
    int block;            /* layer index, or n_layers for the global block */
    int role;             /* dz_layer_role or dz_global_role */
    int64_t rows, cols;   /* a vector has rows == 1 */
    dz_param_kind kind;   /* weight decay skips biases and norms */
    char hf_name[96];     /* e.g. "model.decoder.layers.3.fc1.weight" */
} dz_param;

typedef struct dz_param_table {
    int count;
    dz_param *params;     /* ordered by block, then role; index = tensor id */
} dz_param_table;

/* Builds the table for cfg. Tensors that cfg says do not exist are absent. */
dz_status dz_param_table_build(const dz_config *cfg, dz_param_table *out, dz_error *err);
void dz_param_table_free(dz_param_table *t);
/* Index of (block, role) in the table, or -1. */
int dz_param_find(const dz_param_table *t, int block, int role);
int64_t dz_param_numel(const dz_param *p);
/* Number of parameters; tied heads count once. */
int64_t dz_param_table_numel(const dz_param_table *t);

/* Reads a Hugging Face config.json (OPTForCausalLM, LlamaForCausalLM and relatives). */
dz_status dz_config_from_hf_json(const char *path, dz_config *cfg, dz_error *err);
/* Writes cfg as a Hugging Face config.json (atomic). */
dz_status dz_config_write_hf_json(const dz_config *cfg, const char *path, dz_dtype dtype, dz_error *err);
/* Checks internal consistency (positive sizes, divisibility). file names the source. */
dz_status dz_config_validate(const dz_config *cfg, const char *file, dz_error *err);
const char *dz_arch_name(dz_arch a);

#endif
