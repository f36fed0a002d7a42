/* safetensors files: parse (from memory, for fuzzing), open through mmap, write atomically.
 * Also the Hugging Face checkpoint folder: model.safetensors or shards listed in
 * model.safetensors.index.json. */
#ifndef DZ_FORMAT_SAFETENSORS_H
#define DZ_FORMAT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/dtype.h"
#include "distzo/error.h"

enum { DZ_ST_MAX_DIMS = 8 };

typedef struct dz_st_tensor {
    char *name;
    dz_dtype dtype;
    int ndim;
    int64_t shape[DZ_ST_MAX_DIMS];
    const void *data;      /* points into the file's mapping (or the parsed buffer) */
    size_t nbytes;
} dz_st_tensor;

typedef struct dz_safetensors {
    char *path;
    void *map;             /* mmap of the whole file; NULL when parsed from a caller's buffer */
    size_t map_size;
    int count;
    dz_st_tensor *tensors;
} dz_safetensors;

/* Parses a safetensors image in buf[0..size). path is used only in error messages.
 * Validates: header length within the file, JSON well-formed, every dtype known,
 * shape x dtype size == byte range, ranges inside the data section, no overlaps.
 * Unknown dtypes (e.g. I64) are a format error naming the tensor. */
dz_status dz_safetensors_parse(const char *path, const void *buf, size_t size,
                               dz_safetensors *out, dz_error *err);
/* mmap(PROT_READ, MAP_PRIVATE) + parse. */
dz_status dz_safetensors_open(const char *path, dz_safetensors *out, dz_error *err);
void dz_safetensors_close(dz_safetensors *st);
const dz_st_tensor *dz_safetensors_find(const dz_safetensors *st, const char *name);

/* A tensor to write: data in dtype, nbytes = numel * dtype size. */
typedef struct dz_st_write_tensor {
    const char *name;
    dz_dtype dtype;
    int ndim;
    int64_t shape[DZ_ST_MAX_DIMS];
    const void *data;
} dz_st_write_tensor;

/* Writes a safetensors file to path atomically (temp file, fsync, rename), with
 * {"__metadata__":{"format":"pt"}} so transformers loads it. */
dz_status dz_safetensors_write(const char *path, const dz_st_write_tensor *tensors, int count,
                               dz_error *err);

/* A Hugging Face checkpoint folder: one or more safetensors files. */
typedef struct dz_hf_checkpoint {
    char *dir;
    int n_files;
    dz_safetensors *files;
} dz_hf_checkpoint;

/* Opens dir/model.safetensors, or every shard named in dir/model.safetensors.index.json
 * (checking that each tensor the index lists is in the shard it names). */
dz_status dz_hf_checkpoint_open(const char *dir, dz_hf_checkpoint *out, dz_error *err);
void dz_hf_checkpoint_close(dz_hf_checkpoint *ck);
/* The tensor, and in *file the path of the shard holding it (for messages); NULL if absent. */
const dz_st_tensor *dz_hf_checkpoint_find(const dz_hf_checkpoint *ck, const char *name, const char **file);

#endif
