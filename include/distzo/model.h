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

#ifdef __cplusplus
extern "C" {
#endif

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
    float rope_theta;     /* rotary pairs are (i, i + head_dim/2), the HF layout */
    int tied_head;        /* lm_head shares the token embedding */
    int qkv_bias;         /* q/k/v projections have biases (OPT; Qwen2) */
    int out_bias;         /* attention output and FFN linears have biases (OPT) */
    int pos_offset;       /* learned-position offset (OPT: 2); 0 for rotary models */
    int bos_id, eos_id, pad_id; /* -1 when absent */
} dz_config;

enum { DZ_MAX_LAYERS = 256 };
/* Bounds on every size a config may give (vocabulary, widths, heads, positions), so
 * tensor element counts and byte sizes cannot overflow. */
enum { DZ_MAX_DIM = 1 << 24, DZ_MAX_POS_OFFSET = 1024 };

/* Tensor roles inside a layer block. */
typedef enum dz_layer_role {
    DZ_L_ATTN_NORM_W, DZ_L_ATTN_NORM_B,
    DZ_L_WQ, DZ_L_BQ, DZ_L_WK, DZ_L_BK, DZ_L_WV, DZ_L_BV, DZ_L_WO, DZ_L_BO,
    DZ_L_FFN_NORM_W, DZ_L_FFN_NORM_B,
    DZ_L_W_UP, DZ_L_B_UP,   /* OPT fc1; LLaMA up_proj */
    DZ_L_W_GATE,            /* LLaMA gate_proj */
    DZ_L_W_DOWN, DZ_L_B_DOWN, /* OPT fc2; LLaMA down_proj */
    /* LoRA adapter tensors (an adapter's table only, src/model/adapter.c): A [r, in] and
     * B [out, r] of each target, in dz_lora_target order */
    DZ_L_LORA_FIRST,
    /* prefix tuning (src/model/prefix.c): the layer's N virtual keys and values [N, kv_dim] */
    DZ_L_PREFIX_K = DZ_L_LORA_FIRST + 14, DZ_L_PREFIX_V,
    DZ_L_LORA_END, /* one past every adapter role, LoRA's and the prefix's */
    DZ_L_COUNT = DZ_L_LORA_END
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
/* Bytes the tensors of block `block` (-1: all) take in dtype in a model's arena (each
 * tensor 64-byte aligned): what dz_model_arena_bytes allocates, from the table alone. */
size_t dz_param_table_bytes(const dz_param_table *t, dz_dtype dtype, int block);

/* The config of a model path as dz_model_load reads it (a Hugging Face folder's
 * config.json, a .gguf file's metadata, or a llama2.c .bin header), without touching the weights. */
dz_status dz_config_load(const char *path, dz_config *cfg, dz_error *err);
dz_status dz_config_from_llama2c(const char *path, dz_config *cfg, dz_error *err);
/* A GGUF file's metadata (general.architecture llama, which Mistral models use too, or qwen2) as a config. */
dz_status dz_config_from_gguf(const char *path, dz_config *cfg, dz_error *err);
/* Reads a Hugging Face config.json (OPTForCausalLM, LlamaForCausalLM and relatives). */
dz_status dz_config_from_hf_json(const char *path, dz_config *cfg, dz_error *err);
/* Writes cfg as a Hugging Face config.json (atomic). */
dz_status dz_config_write_hf_json(const dz_config *cfg, const char *path, dz_dtype dtype, dz_error *err);
/* Checks internal consistency (positive sizes, divisibility). file names the source. */
dz_status dz_config_validate(const dz_config *cfg, const char *file, dz_error *err);
const char *dz_arch_name(dz_arch a);




/* ---- Loaded models ---------------------------------------------------------------- */

typedef struct dz_model dz_model;

/* Loads a Hugging Face folder (config.json + safetensors, sharded or not) or a llama2.c
 * .bin checkpoint, holding weights as dtype (F32 or BF16; F16 also accepted). Tensors whose
 * file dtype equals dtype are used in place through mmap; others are converted once. */
dz_status dz_model_load(const char *path, dz_dtype dtype, dz_model **out, dz_error *err);
/* Flags of dz_model_load_flags. DZ_LOAD_KEEP_QUANTIZED: a GGUF file's tensors that are not
 * F32 (the quantized blocks, F16, BF16) stay in the file's read-only mapping as stored, and
 * the model's weight source (dz_model_weights) dequantizes the rows the forward reads (a
 * layer block into the forward's block scratch, token rows, head chunks) on every read,
 * bitwise into the values the dequantize-at-load model holds: memory about the file's size
 * instead of dtype's size of every parameter. Such a model is read-only: dz_model_tensor is
 * NULL for those tensors, and dz_model_make_owned, dz_model_keep_for_store and
 * dz_model_move_to refuse it (full-parameter training). No effect on other formats. */
enum { DZ_LOAD_KEEP_QUANTIZED = 1 };
dz_status dz_model_load_flags(const char *path, dz_dtype dtype, unsigned flags, dz_model **out, dz_error *err);
/* 1 when tensor id is held quantized (DZ_LOAD_KEEP_QUANTIZED): read it through dz_model_weights. */
int dz_model_tensor_quantized(const dz_model *m, int id);
/* Bytes of the tensors held quantized (in the file's mapping; 0 when none is). */
size_t dz_model_bytes_quantized(const dz_model *m);
/* Tensor id's bytes as the model holds them, *nbytes their count: the quantized blocks of a
 * tensor held quantized, else its data in the model's dtype (NULL, 0: let go of). For
 * fingerprints of a read-only base (the same file and flags give the same bytes). */
const void *dz_model_tensor_stored(const dz_model *m, int id, size_t *nbytes);
void dz_model_free(dz_model *m);
const dz_config *dz_model_config(const dz_model *m);
const dz_param_table *dz_model_params(const dz_model *m);
dz_dtype dz_model_dtype(const dz_model *m);
const char *dz_model_path(const dz_model *m);
const char *dz_model_format(const dz_model *m); /* "hf-safetensors" or "llama2c" */
/* Data of tensor id (in the model dtype); NULL for a tensor held quantized or let go of. */
void *dz_model_tensor(const dz_model *m, int id);
/* Copies every tensor still mapped from a file into owned memory, so the weights can be
 * written (the ZO trainer's master weights). */
dz_status dz_model_make_owned(dz_model *m, dz_error *err);
/* 1 if tensor id is read in place from a file mapping (not a converted or owned copy). */
int dz_model_tensor_mapped(const dz_model *m, int id);
/* For a trainer whose weights live in a store: keeps only the global block (embeddings,
 * final norm, head; keep_globals) or nothing in owned memory, converted to dtype (the
 * model's dtype from then on), and lets go of every other tensor (its data becomes NULL). */
dz_status dz_model_keep_for_store(dz_model *m, int keep_globals, dz_dtype dtype, dz_error *err);
/* Bytes of weights resident in memory (converted copies) and mapped from files. */
size_t dz_model_bytes_owned(const dz_model *m);
/* Bytes an arena holding every tensor needs (for dz_model_move_to). */
size_t dz_model_arena_bytes(const dz_model *m);
/* Moves every tensor into arena (dz_model_arena_bytes of it, 64-byte aligned, owned by the
 * caller, e.g. memory shared by the processes of a node), copying the weights in only when
 * copy is set (the processes that share it copy once). */
dz_status dz_model_move_to(dz_model *m, void *arena, int copy, dz_error *err);
size_t dz_model_bytes_mapped(const dz_model *m);
/* The tokenizer that ships with the model: the folder itself for HF layouts, or
 * tokenizer.bin / tok<vocab>.bin beside a llama2.c file. NULL if none found. */
const char *dz_model_tokenizer_path(const dz_model *m);
/* The same for a model not loaded (path, and its config from dz_config_load): fills out
 * and returns 1, or returns 0 if none is found. */
int dz_model_find_tokenizer(const char *path, const dz_config *cfg, char *out, size_t cap);

/* Shapes of published models by name ("opt-125m", "opt-1.3b", "llama-tiny", ...). */
dz_status dz_config_preset(const char *name, dz_config *out, dz_error *err);
const char *dz_preset_names(void);
/* A model of cfg's shape with seeded random weights: matrices and embeddings N(0, std^2),
 * norm weights 1, biases 0. The same seed gives the same weights whatever the threads. */
dz_status dz_model_init_random(const dz_config *cfg, dz_dtype dtype, uint64_t seed, float std, dz_model **out,
                               dz_error *err);
/* Writes config.json + model.safetensors into dir (created if needed), each atomically;
 * an adapter (dz_lora_create/load): adapter_config.json + adapter_model.safetensors. */
dz_status dz_model_save_hf(const dz_model *m, const char *dir, dz_error *err);

/* ---- LoRA adapters (src/model/adapter.c, docs/ADAPTERS.md) ----------------------- */

/* The linear layers an adapter may target, in PEFT's module names (OPT: out_proj, fc1, fc2). */
typedef enum dz_lora_target {
    DZ_LORA_Q, DZ_LORA_K, DZ_LORA_V, DZ_LORA_O, DZ_LORA_UP, DZ_LORA_GATE, DZ_LORA_DOWN, DZ_LORA_N_TARGETS
} dz_lora_target;

typedef struct dz_lora_spec {
    int rank;          /* r */
    float alpha;       /* the update is (alpha / r) B A */
    unsigned targets;  /* bit t: target t (dz_lora_target) */
    int prefix_tokens; /* > 0: prefix tuning, N virtual tokens per layer (rank, alpha, targets unused) */
} dz_lora_spec;

/* The base role of target t (DZ_L_WQ, ...), and its adapter roles (B is A + 1). */
int dz_lora_base_role(int target);
static inline int dz_lora_a_role(int target) { return DZ_L_LORA_FIRST + 2 * target; }
/* "q,v", "q_proj,v_proj", ... (q k v o up gate down, or the HF module names of either
 * family) into a target mask; DZ_ERR_INVALID naming the unknown name. */
dz_status dz_lora_parse_targets(const char *list, unsigned *out, dz_error *err);
/* The mask as the short names ("q,v"), or as cfg's module names ("q_proj,v_proj"). */
void dz_lora_targets_string(unsigned targets, char *out, size_t cap);
void dz_lora_module_names(const dz_config *cfg, unsigned targets, char *out, size_t cap);
/* DZ_ERR_INVALID when list names a module of the other family (OPT's out_proj, fc1, fc2
 * on a LLaMA-family base, LLaMA's o_proj, up_proj, gate_proj, down_proj on OPT): PEFT
 * refuses them, and the short names (o, up, down) serve both. */
dz_status dz_lora_check_target_names(const char *list, const dz_config *cfg, dz_error *err);
/* Target t's LLaMA-family module name ("q_proj", ...). */
const char *dz_lora_target_name(int target);
/* The adapter's table for a base of cfg: per layer, A then B of each target, named with
 * PEFT's keys (base_model.model.<base name>.lora_A.weight). */
dz_status dz_lora_table_build(const dz_config *cfg, const dz_lora_spec *spec, dz_param_table *out, dz_error *err);
/* An adapter as a model (f32, owned, the base's config): A ~ U(-1/sqrt(in), 1/sqrt(in))
 * (PEFT's Kaiming-uniform, a = sqrt(5)), element e of tensor i from a counter-based
 * draw of (seed, i, e), so the same seed rebuilds it; B = 0. base_path: the base model, for
 * adapter_config.json. */
dz_status dz_lora_create(const dz_config *cfg, const dz_lora_spec *spec, uint64_t seed, const char *base_path,
                         dz_model **out, dz_error *err);
/* Prefix tuning (spec->prefix_tokens = N): per layer N key and value rows that every
 * sequence's attention sees before its own tokens, which sit at positions N, N+1, ...
 * (as under Hugging Face's past_key_values). Initialized as MeZO does (init_by_real_act):
 * N token ids drawn from seed run through base at positions 0 .. N-1, each layer's keys
 * (after RoPE) and values taken. */
dz_status dz_prefix_create(const dz_model *base, const dz_lora_spec *spec, uint64_t seed, const char *base_path,
                           dz_model **out, dz_error *err);
/* The table of a prefix of N tokens: per layer its keys, then its values, [N, kv_dim]. */
dz_status dz_prefix_table_build(const dz_config *cfg, int n_tokens, dz_param_table *out, dz_error *err);
/* The token ids the init of dz_prefix_create runs (uniform over the vocabulary). */
void dz_prefix_init_tokens(uint64_t seed, int vocab_size, int n, int *out);
/* A PEFT adapter folder (LORA or PREFIX_TUNING: adapter_config.json +
 * adapter_model.safetensors) for a base of cfg. */
dz_status dz_lora_load(const char *dir, const dz_config *cfg, dz_model **out, dz_error *err);
/* 1 when dir holds adapter_config.json. */
int dz_lora_is_folder(const char *dir);
/* A new adapter of adapter's layout (spec, table, base path), its tensors zero (f32, owned):
 * where an adapter's masters live in a disk store, the copy a PEFT folder is written from. */
dz_status dz_lora_alloc_like(const dz_model *adapter, dz_model **out, dz_error *err);
/* An adapter model's spec (NULL for a model that is not an adapter). */
const dz_lora_spec *dz_model_lora(const dz_model *m);
/* W += (alpha / r) B A for every target, into base (f32, owned). */
dz_status dz_lora_merge(dz_model *base, const dz_model *adapter, dz_error *err);

/* ---- Weights as the forward pass sees them ---------------------------------------- */

/* Rows [row0, row0+nrows) of tensor id as fp32, as forward stream `stream` sees them:
 * either a pointer into fp32 storage or scratch (nrows*cols floats), filled. The model's
 * own source reads the stored weights for every stream; the ZO trainer's source gives
 * stream 0 theta + eps*z and stream 1 theta - eps*z. view (optional, may be NULL) gives
 * the same rows without a copy when the source already holds them (the trainer's -eps
 * rows, made with the +eps ones), read-only and valid until the source's next call; NULL
 * when it does not. */
typedef struct dz_weight_source {
    const float *(*rows)(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch);
    const void *self;
    const float *(*view)(const void *self, int stream, int id, int64_t row0, int64_t nrows);
    /* 1 when rows do not depend on the stream (the model's own source): the forward then
     * fetches a layer block or a head chunk once for all the streams it runs (a source
     * that converts or dequantizes does that work once); 0 (the default): per stream. */
    int same_for_streams;
    /* 0: rows are host memory (scratch is host memory). 1: rows and view hand out buffers of
     * the forward's backend, and scratch is one: a ZO trainer's source whose masters are
     * resident on a device, read with no host copy and no upload. */
    int backend_rows;
} dz_weight_source;

dz_weight_source dz_model_weights(const dz_model *m);

/* ---- The forward pass ------------------------------------------------------------- */

typedef struct dz_forward dz_forward;

/* Activation buffers for up to max_batch sequences of max_seq tokens. With kv_cache, keys
 * and values of every layer are kept so a later call can continue at pos0 > 0
 * (generation, shared prompts); without, one layer's worth is reused. One stream. */
dz_status dz_forward_create(const dz_model *m, int max_batch, int max_seq, int kv_cache,
                            dz_forward **out, dz_error *err);
/* The same with n_streams activation streams sharing the workspace (the ZO trainer's
 * dual forward: stream 0 at theta + eps z, stream 1 at theta - eps z). */
dz_status dz_forward_create_streams(const dz_model *m, int max_batch, int max_seq, int kv_cache, int n_streams,
                                   dz_forward **out, dz_error *err);
/* The compute backend a forward runs every op on (src/backend/backend.h: dz_backend_cpu(),
 * dz_backend_by_name("ref"), ...): an instance, holding its own state (a device backend's
 * device, streams, library handles, workspace), passed to every op. */
typedef struct dz_backend dz_backend;
/* The instance of backend `name` (NULL: "cpu"; "cpu", "ref" or "cuda"; --backend).
 * "ref" is the reference's ops on buffers host code cannot touch (a device stand-in for
 * tests: a stray host access faults). "cuda" is the CUDA backend, or DZ_ERR_UNSUPPORTED
 * saying why: a build without CUDA, no GPU (or not that one) on this machine. "cuda" may
 * carry its math mode and its GPU: "cuda:MODE" (--gpu-math), "cuda@D" or "cuda:MODE@D"
 * (GPU D of this machine, the rank's by --gpus-per-node; default 0). DZ_ERR_INVALID for an
 * unknown name. */
dz_status dz_backend_create(const char *name, dz_backend **out, dz_error *err);
/* GPUs the CUDA runtime shows this process (0 in a build without CUDA or without a GPU). */
int dz_cuda_gpu_count(void);
/* Frees what create made (cpu: one shared stateless instance, left). NULL is fine. */
void dz_backend_free(dz_backend *be);
/* The general form: n_streams streams on `backend` (NULL: the CPU backend), which
 * allocates every activation buffer and must outlive the forward; the forwards above are
 * this with NULL. */
dz_status dz_forward_create_backend(const dz_model *m, const dz_backend *backend, int max_batch, int max_seq,
                                    int kv_cache, int n_streams, dz_forward **out, dz_error *err);
const dz_backend *dz_forward_backend(const dz_forward *f);
void dz_forward_free(dz_forward *f);
size_t dz_forward_bytes(const dz_forward *f);
const dz_model *dz_forward_model(const dz_forward *f);
int dz_forward_max_seq(const dz_forward *f);
int dz_forward_max_batch(const dz_forward *f);
/* Floats of the scratch a weight source may be handed for a row request (the largest request). */
size_t dz_forward_row_floats(const dz_forward *f);
/* What dz_forward_bytes reports for a forward of these arguments on the CPU backend once it
 * has run a whole model (the block scratch included), computed from the config alone (the
 * planner).
 * threads <= 0: this process's thread count, as create uses. row_floats (if non-NULL):
 * what dz_forward_row_floats would report. */
size_t dz_forward_bytes_for(const dz_config *c, int max_batch, int max_seq, int kv_cache, int n_streams, int threads,
                            size_t *row_floats);

/* Runs the transformer body on tokens[B, n_new] (row-major, right-padded) at positions
 * pos0.., lengths[b] = real tokens of sequence b counted from position 0 (NULL: all real).
 * Keeps the final hidden states for dz_forward_logits / dz_forward_logprobs. */
dz_status dz_forward_run(dz_forward *f, const dz_weight_source *w, const int *tokens,
                         const int *lengths, int B, int n_new, int pos0, dz_error *err);

/* The pieces of dz_forward_run, for callers that drive blocks themselves: embed tokens
 * into stream s, then run layer l on stream s with the layer's tensors t[dz_layer_role]
 * given as fp32 buffers of the forward's backend (host memory on the CPU backend; NULL for
 * roles the architecture lacks), which the caller may rewrite once the call returns. */
dz_status dz_forward_embed(dz_forward *f, int s, const dz_weight_source *w, const int *tokens, const int *lengths,
                           int B, int n_new, int pos0, dz_error *err);
/* The general form: sequence b's rows sit at positions start[b] .. start[b]+n_new-1 and it
 * has lengths[b] real positions in all (NULL: start + n_new). With parent_stream >= 0, the
 * positions before start[b] are prompt parent[b] of that stream (whose length must be
 * start[b]): its keys and values are read from there, so prompts shared by several
 * continuations are computed once. The parent must run each layer before this stream. */
dz_status dz_forward_embed_tree(dz_forward *f, int s, const dz_weight_source *w, const int *tokens,
                                const int *lengths, int B, int n_new, const int *start, int parent_stream,
                                const int *parent, dz_error *err);
void dz_forward_layer(dz_forward *f, int s, int layer, const float *const *t);
/* Layer l's tensors as fp32 through w (stream s) into t[DZ_L_COUNT] (the block scratch):
 * the base's, and with an adapter attached its tensors from the adapter's source. */
dz_status dz_forward_layer_weights(dz_forward *f, const dz_weight_source *w, int s, int layer, const float **t,
                                   dz_error *err);
/* Attaches a LoRA adapter (an adapter model, dz_lora_create/load) whose tensors are read
 * through src (a copy is kept; NULL: the adapter's own): every targeted projection then
 * adds (alpha / r) (x A^T) B^T. Its tensors come in t[] of dz_forward_layer at the
 * adapter roles. On any backend (without host buffers the (alpha/r) scale is applied on a
 * host copy). */
dz_status dz_forward_set_adapter(dz_forward *f, const dz_model *adapter, const dz_weight_source *src, dz_error *err);

/* Logits of the given rows (indices into the B*n_new positions of the last run):
 * logits[nrows, vocab]. */
dz_status dz_forward_logits(dz_forward *f, const dz_weight_source *w, const int *rows, int nrows,
                            float *logits, dz_error *err);
/* The same for stream `stream` (dz_forward_logits is stream 0). */
dz_status dz_forward_logits_stream(dz_forward *f, const dz_weight_source *w, int stream, const int *rows, int nrows,
                                   float *logits, dz_error *err);
/* log p(targets[i] | row rows[i]) for each i: the head is streamed over the vocabulary
 * in chunks, so no [rows x vocab] buffer exists. */
dz_status dz_forward_logprobs(dz_forward *f, const dz_weight_source *w, const int *rows,
                              const int *targets, int nrows, float *logprobs, dz_error *err);

/* log-probs for the listed streams (same rows and targets; logprobs[k][i] for streams[k]);
 * the head's vocabulary chunks are visited once, each for every listed stream in order. */
dz_status dz_forward_logprobs_streams(dz_forward *f, const dz_weight_source *w, int n_streams, const int *streams,
                                      const int *rows, const int *targets, int nrows, float *const *logprobs,
                                      dz_error *err);
/* The head's rows of one stream: log p(targets[i] | row rows[i]) into logprobs[i]. */
typedef struct dz_head_rows {
    int stream;
    const int *rows, *targets;
    int nrows;
    float *logprobs;
} dz_head_rows;
/* log-probs for several streams, each with its own rows (distinct streams): the head's
 * vocabulary chunks are visited once, each for every set in order, so a weight source
 * that perturbs (the ZO step's) makes each chunk once for all the sets that see it. */
dz_status dz_forward_logprobs_sets(dz_forward *f, const dz_weight_source *w, int n_sets, const dz_head_rows *sets,
                                   dz_error *err);
/* Runs every layer on the listed (already embedded) streams, layer by layer, streams in
 * the order given (a stream continuing a prompt must come after the prompt's stream). */
dz_status dz_forward_layers(dz_forward *f, const dz_weight_source *w, int n_streams, const int *streams, dz_error *err);
int dz_forward_n_streams(const dz_forward *f);

/* FLOPs of one forward over B x T tokens (GEMMs and attention), with head rows computed. */
double dz_forward_flops(const dz_config *cfg, int B, int T, int head_rows);

#ifdef __cplusplus
}
#endif

#endif
