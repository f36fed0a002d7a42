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
/* Largest integer a JSON number (a double in cJSON) holds exactly: shapes and offsets
 * above it are refused, read or written. */
#define DZ_ST_MAX_JSON_INT ((double)(1ull << 53))

typedef struct dz_st_tensor {
    char *name;
    dz_dtype dtype;
    int ndim;
    int64_t shape[DZ_ST_MAX_DIMS];
    const void *data;      /* points into the file's mapping (or the parsed buffer); aligned to
                              the element size in files from distzo or the reference writer
                              (8-byte padded header, larger dtypes first), but other writers
                              may leave it unaligned: read 16/32-bit values with memcpy */
    size_t nbytes;
} dz_st_tensor;

typedef struct dz_safetensors {
    char *path;
    void *map;             /* mmap of the whole file; NULL when parsed from a caller's buffer */
    size_t map_size;
    int count;
    dz_st_tensor *tensors; /* sorted by name (dz_safetensors_find bisects), not file order */
} dz_safetensors;

/* Parses a safetensors image in buf[0..size), which must outlive *out (tensor data points
 * into it). path is used only in error messages (NULL: "<memory>").
 * Validates: header length within the file (and at most 100 MB), JSON well-formed and an
 * object, every field present and typed, shape x dtype size == byte range (no overflow),
 * ranges inside the data section, no overlapping ranges, no duplicate names.
 * Gaps between tensors and bytes after the last one are allowed; zero-size tensors too.
 * Errors name the file and the tensor/field: DZ_ERR_FORMAT for a malformed file,
 * DZ_ERR_UNSUPPORTED for a valid dtype distzo does not load (I64, F64, U8, ...) or more
 * than DZ_ST_MAX_DIMS dimensions. On failure *out is left empty. */
dz_status dz_safetensors_parse(const char *path, const void *buf, size_t size,
                               dz_safetensors *out, dz_error *err);
/* mmap(PROT_READ, MAP_PRIVATE) + parse; the mapping lives until close. */
dz_status dz_safetensors_open(const char *path, dz_safetensors *out, dz_error *err);
void dz_safetensors_close(dz_safetensors *st);
const dz_st_tensor *dz_safetensors_find(const dz_safetensors *st, const char *name);

/* A tensor to write: data in dtype, nbytes = numel * dtype size; ndim 0 is a scalar. */
typedef struct dz_st_write_tensor {
    const char *name;
    dz_dtype dtype;
    int ndim;
    int64_t shape[DZ_ST_MAX_DIMS];
    const void *data;
} dz_st_write_tensor;

/* Writes a safetensors file to path atomically (temp file, fsync, rename), with
 * {"__metadata__":{"format":"pt"}} so transformers loads it. The header is padded with
 * spaces to a multiple of 8 and data is laid out contiguously, larger dtypes first, so
 * every tensor is aligned to its element size. Data is streamed from the caller's
 * buffers (no second in-memory copy). Names must be unique and not "__metadata__". */
dz_status dz_safetensors_write(const char *path, const dz_st_write_tensor *tensors, int count,
                               dz_error *err);
/* The same; tensors with release[i] set lie in a read-only file mapping whose pages are
 * dropped once written, so copying a mapped model peaks near one tensor (release may be NULL). */
dz_status dz_safetensors_write_releasing(const char *path, const dz_st_write_tensor *tensors, int count,
                                         const unsigned char *release, dz_error *err);
/* The same; tensor i's data is in from[i] (from may be NULL: all as their dtype) and is
 * converted to its dtype slice by slice as it is written, so no converted copy exists. */
dz_status dz_safetensors_write_converted(const char *path, const dz_st_write_tensor *tensors, int count,
                                         const unsigned char *release, const dz_dtype *from, dz_error *err);

/* A Hugging Face checkpoint folder: one or more safetensors files. */
typedef struct dz_hf_index_entry {
    char *name;
    int file;              /* index into files */
} dz_hf_index_entry;

typedef struct dz_hf_checkpoint {
    char *dir;
    int n_files;
    dz_safetensors *files;
    int n_index;           /* sharded: the weight map, sorted by name; 0 for one file */
    dz_hf_index_entry *index;
} dz_hf_checkpoint;

/* Opens dir/model.safetensors, or every shard named in dir/model.safetensors.index.json
 * {"weight_map": {tensor: file}}, each distinct shard once. The index is honoured
 * exactly: a tensor is read from the shard it names (which must hold it), a tensor the
 * index does not list is absent, and a tensor in two shards is refused. Every file must
 * resolve inside dir (dz_path_check_inside). DZ_ERR_NOT_FOUND when neither file exists. */
dz_status dz_hf_checkpoint_open(const char *dir, dz_hf_checkpoint *out, dz_error *err);
void dz_hf_checkpoint_close(dz_hf_checkpoint *ck);
/* The tensor, and in *file the path of the shard holding it (for messages); NULL if absent. */
const dz_st_tensor *dz_hf_checkpoint_find(const dz_hf_checkpoint *ck, const char *name, const char **file);

#endif
