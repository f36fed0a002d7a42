/* GGUF files (llama.cpp, ollama, LM Studio): parse (from memory, for fuzzing) or open
 * through mmap, look up metadata by key, find tensors by name.
 *
 * Layout (little-endian): "GGUF", u32 version (2 or 3), u64 tensor count, u64 key/value
 * count; the key/values (string key, u32 value type, value); the tensor infos (string
 * name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset); padding to
 * general.alignment (default 32); the tensor data, each at its offset from there.
 * A string is u64 length + bytes (no NUL); an array is u32 element type, u64 count, the
 * elements. ne[0] is the innermost dimension: a matrix of R rows of C is ne = {C, R}. */
#ifndef DZ_FORMAT_GGUF_H
#define DZ_FORMAT_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "format/ggml_quant.h"

enum { DZ_GGUF_MAX_DIMS = 4, DZ_GGUF_DEFAULT_ALIGNMENT = 32 };

typedef enum dz_gguf_vtype {
    DZ_GGUF_U8 = 0, DZ_GGUF_I8 = 1, DZ_GGUF_U16 = 2, DZ_GGUF_I16 = 3, DZ_GGUF_U32 = 4,
    DZ_GGUF_I32 = 5, DZ_GGUF_F32 = 6, DZ_GGUF_BOOL = 7, DZ_GGUF_STRING = 8, DZ_GGUF_ARRAY = 9,
    DZ_GGUF_U64 = 10, DZ_GGUF_I64 = 11, DZ_GGUF_F64 = 12,
} dz_gguf_vtype;

/* A string inside the file: not NUL-terminated, may hold any bytes. */
typedef struct dz_gguf_str {
    const char *s;
    uint64_t len;
} dz_gguf_str;

typedef struct dz_gguf_kv {
    char *key;
    dz_gguf_vtype type;
    dz_gguf_vtype elem_type;    /* arrays: the elements' type (never an array) */
    uint64_t count;             /* arrays: number of elements; 1 otherwise */
    const unsigned char *data;  /* scalars: the value's bytes; arrays: the first element
                                   (strings: its u64 length); inside the file, maybe unaligned */
    dz_gguf_str str;            /* DZ_GGUF_STRING */
} dz_gguf_kv;

typedef struct dz_gguf_tensor {
    char *name;
    uint32_t type;              /* dz_ggml_type */
    int ndim;
    int64_t ne[DZ_GGUF_MAX_DIMS]; /* ggml order; unused dims are 1 */
    int64_t nrows;              /* ne[1] * ne[2] * ne[3] */
    size_t row_bytes;           /* bytes of one row of ne[0] elements */
    const void *data;           /* inside the file, aligned to general.alignment from its start */
    size_t nbytes;
} dz_gguf_tensor;

typedef struct dz_gguf {
    char *path;
    void *map;                  /* mmap of the whole file; NULL when parsed from a caller's buffer */
    size_t map_size;
    uint32_t version;
    uint32_t alignment;
    size_t data_offset;         /* where tensor data begins */
    int n_kv;
    dz_gguf_kv *kv;             /* file order */
    int n_tensors;
    dz_gguf_tensor *tensors;    /* file order */
    const dz_gguf_kv **kv_sorted;         /* by key, for lookup */
    const dz_gguf_tensor **tensors_sorted; /* by name, for lookup */
} dz_gguf;

/* Parses a GGUF image in buf[0..size), which must outlive *out. path is used only in error
 * messages (NULL: "<memory>"). Validates: magic; version 2 or 3 (1 and big-endian files
 * refused by name); counts against the bytes left before allocating; every string and
 * array inside the file, arrays of arrays refused; keys and names non-empty, without NUL,
 * unique; general.alignment a u32 power of two; 1..4 dims, each >= 0, their product and
 * byte size without overflow, ne[0] a multiple of the type's block; a type whose layout is
 * known; offsets aligned, data inside the file, tensors not overlapping. Errors name the
 * file and the key or tensor: DZ_ERR_FORMAT for a malformed file, DZ_ERR_UNSUPPORTED for a
 * valid one distzo cannot read (version 1, a tensor type of unknown layout). On failure
 * *out is left empty. */
dz_status dz_gguf_parse(const char *path, const void *buf, size_t size, dz_gguf *out, dz_error *err);
/* mmap(PROT_READ, MAP_PRIVATE) + parse; the mapping lives until close. */
dz_status dz_gguf_open(const char *path, dz_gguf *out, dz_error *err);
void dz_gguf_close(dz_gguf *g);

const dz_gguf_kv *dz_gguf_find_kv(const dz_gguf *g, const char *key);
const dz_gguf_tensor *dz_gguf_find_tensor(const dz_gguf *g, const char *name);
const char *dz_gguf_vtype_name(dz_gguf_vtype t);
/* Bytes of one value of scalar type t (0 for a string, an array or an unknown type). */
size_t dz_gguf_scalar_size(uint32_t t);

/* GGUF's numbers are little-endian: the n bytes at p as an unsigned integer. */
static inline uint64_t dz_gguf_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Typed lookups. A missing key is DZ_ERR_NOT_FOUND; a value of another type, or an integer
 * out of the asked range, DZ_ERR_FORMAT; both name the file and the key. Integers accept
 * any integer type whose value fits; f32 accepts F32 and F64. */
dz_status dz_gguf_get_u32(const dz_gguf *g, const char *key, uint32_t *out, dz_error *err);
dz_status dz_gguf_get_i32(const dz_gguf *g, const char *key, int32_t *out, dz_error *err);
dz_status dz_gguf_get_f32(const dz_gguf *g, const char *key, float *out, dz_error *err);
dz_status dz_gguf_get_bool(const dz_gguf *g, const char *key, int *out, dz_error *err);
dz_status dz_gguf_get_string(const dz_gguf *g, const char *key, dz_gguf_str *out, dz_error *err);
/* An array whose elements have type elem (or any type when elem < 0). */
dz_status dz_gguf_get_array(const dz_gguf *g, const char *key, int elem, const dz_gguf_kv **out, dz_error *err);
/* The strings of a string array (kv->count of them) into out. */
void dz_gguf_array_strings(const dz_gguf_kv *kv, dz_gguf_str *out);
/* Element i of a numeric array, converted (integers exactly up to 2^53). */
double dz_gguf_array_number(const dz_gguf_kv *kv, uint64_t i);

#endif
