/* How distzo's parameter table maps onto a llama.cpp GGUF file, both ways (the loader,
 * load_gguf.c, and the writer, save_gguf.c): tensor names and the rotary row order. */
#ifndef DZ_MODEL_GGUF_LAYOUT_H
#define DZ_MODEL_GGUF_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/model.h"

/* The GGUF name of a tensor of the parameter table ("blk.3.attn_q.weight", "token_embd.weight"). */
void dz_gguf_tensor_name(const dz_param *p, int n_layers, char *out, size_t cap);

/* llama.cpp's converter permutes the rows of a llama model's Q and K weights so that
 * rotary pairs are interleaved (2i, 2i+1) (convert_hf_to_gguf.py, LlamaModel.permute:
 * reshape(heads, 2, head_dim/2, dim).swapaxes(1, 2), K with the KV head count); distzo's
 * forward rotates (i, i + head_dim/2) as Hugging Face does. File row `row` of such a
 * tensor is model row dz_gguf_model_row(row): within each head, row 2i + r is model row
 * r * head_dim/2 + i. */
int64_t dz_gguf_model_row(int64_t row, int head_dim);
/* The inverse: the file row that holds model row `row`. */
int64_t dz_gguf_file_row(int64_t row, int head_dim);

/* 1 when tensor p is a Q or K weight whose rows the converter permutes (interleaved rope). */
int dz_gguf_permuted(const dz_param *p, int n_layers, int interleaved_rope);

#endif
