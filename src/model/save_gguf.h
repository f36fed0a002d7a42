/* A model's config and weights into a GGUF file as llama.cpp reads it (the writer of
 * format/gguf_write.h): llama metadata, llama.cpp's tensor names, Q/K rows permuted into
 * its interleaved rotary order (gguf_layout.h), so the file loads back in distzo
 * (load_gguf.c) as the same model and runs in llama.cpp. Two calls around
 * dz_gguf_writer_begin, because the tokenizer's metadata (src/tokenizer) goes in between. */
#ifndef DZ_MODEL_SAVE_GGUF_H
#define DZ_MODEL_SAVE_GGUF_H

#include "distzo/model.h"
#include "format/gguf_write.h"

/* "f32", "f16", "bf16", "q8_0" (any case) as a ggml type; -1 for anything else. */
int dz_gguf_file_type_parse(const char *s);

/* The type tensor p gets in a file of `type`: 1-D tensors (norms, biases) stay F32 as
 * llama.cpp's converter keeps them; a Q8_0 matrix whose rows are not whole blocks of 32
 * falls back to F16, as the converter does. */
uint32_t dz_gguf_tensor_type(const dz_param *p, uint32_t type);

/* Declares general.* and the architecture's keys (llama; qwen2 for q/k/v biases) and every
 * tensor of the table. An architecture llama.cpp cannot run as distzo does (OPT, biased
 * attention output / FFN) is DZ_ERR_UNSUPPORTED naming it. name: general.name (may be NULL). */
dz_status dz_model_gguf_declare(const dz_config *cfg, const dz_param_table *t, uint32_t type, const char *name,
                                dz_gguf_writer *w, dz_error *err);
/* After dz_gguf_writer_begin: every tensor's data, in table order, read through src (stream
 * 0) a whole layer tensor or up to 4096 rows of a global one at a time. */
dz_status dz_model_gguf_write(const dz_config *cfg, const dz_param_table *t, const dz_weight_source *src,
                              dz_gguf_writer *w, dz_error *err);

#endif
