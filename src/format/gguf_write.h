/* Writing GGUF v3 files (the layout gguf.h describes), streamed: the metadata and the
 * tensor infos are declared first, then the header is written and each tensor's data is
 * appended in declaration order, converted from fp32 rows as it comes, so no copy of the
 * whole model exists. The file is written to PATH.tmp.PID, fsync'd and renamed over PATH
 * by dz_gguf_writer_finish; freeing an unfinished writer removes the temp file.
 *
 * Errors are sticky: a failed declaration (a duplicate key, out of memory) is kept and
 * returned by the next call that returns a status (begin, write, finish), naming the file
 * and the key or tensor. */
#ifndef DZ_FORMAT_GGUF_WRITE_H
#define DZ_FORMAT_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "format/gguf.h"

typedef struct dz_gguf_writer dz_gguf_writer;

/* alignment: of every tensor's data (a power of two; 0: DZ_GGUF_DEFAULT_ALIGNMENT, and
 * general.alignment is written only when it differs from the default). */
dz_status dz_gguf_writer_create(const char *path, uint32_t alignment, dz_gguf_writer **out, dz_error *err);
void dz_gguf_writer_free(dz_gguf_writer *w);

/* Metadata, written in the order declared. Keys must be unique and non-empty. */
void dz_gguf_put_u32(dz_gguf_writer *w, const char *key, uint32_t v);
void dz_gguf_put_i32(dz_gguf_writer *w, const char *key, int32_t v);
void dz_gguf_put_f32(dz_gguf_writer *w, const char *key, float v);
void dz_gguf_put_bool(dz_gguf_writer *w, const char *key, int v);
void dz_gguf_put_string(dz_gguf_writer *w, const char *key, const char *s);
/* Arrays: strings (s[i] with lens[i] bytes, or NUL-terminated when lens is NULL), f32, i32. */
void dz_gguf_put_strings(dz_gguf_writer *w, const char *key, const char *const *s, const int *lens, size_t n);
void dz_gguf_put_f32s(dz_gguf_writer *w, const char *key, const float *v, size_t n);
void dz_gguf_put_i32s(dz_gguf_writer *w, const char *key, const int32_t *v, size_t n);

/* A tensor of type (any dz_ggml_type of known layout) with ggml dims ne[0..ndim) (ne[0]
 * innermost, a multiple of the type's block). Its data comes from dz_gguf_write_f32 when
 * dz_ggml_quantize writes the type, else as encoded blocks (dz_gguf_write_blocks). */
void dz_gguf_add_tensor(dz_gguf_writer *w, const char *name, uint32_t type, int ndim, const int64_t *ne);

/* Writes the header, the metadata and the tensor infos (nothing may be declared after). */
dz_status dz_gguf_writer_begin(dz_gguf_writer *w, dz_error *err);
/* Appends n elements of the current tensor (the first declared one not yet complete),
 * converted from fp32; n a multiple of the type's block. A call may span part of a tensor
 * but not run past its end. */
dz_status dz_gguf_write_f32(dz_gguf_writer *w, const float *src, size_t n, dz_error *err);
/* Appends nblocks blocks of the current tensor as they are (already encoded in its type:
 * a quantized tensor copied from another file, or test data). */
dz_status dz_gguf_write_blocks(dz_gguf_writer *w, const void *blocks, size_t nblocks, dz_error *err);
/* Checks every tensor is complete, fsyncs, renames over the path, fsyncs the folder. */
dz_status dz_gguf_writer_finish(dz_gguf_writer *w, dz_error *err);

#endif
