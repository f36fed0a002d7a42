/* GGUF reader: a cursor over the file's bytes that checks every length against the bytes
 * left before using it, so no count or size from the file is trusted for arithmetic; and
 * the lookups of keys and tensors by name (gguf_values.c: the typed values). */
#include "format/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"

/* Beyond any real model, small enough that counts fit in an int. */
enum { GGUF_MAX_COUNT = 1 << 24 };

typedef struct cursor {
    const char *path;
    const unsigned char *base, *p;
    size_t left;
} cursor;

static size_t at(const cursor *c) { return (size_t)(c->p - c->base); }

static int take(cursor *c, size_t n, const unsigned char **out) {
    if (n > c->left) return -1;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

static int read_u32(cursor *c, uint32_t *v) {
    const unsigned char *p;
    if (take(c, 4, &p)) return -1;
    *v = (uint32_t)dz_gguf_le(p, 4);
    return 0;
}

static int read_u64(cursor *c, uint64_t *v) {
    const unsigned char *p;
    if (take(c, 8, &p)) return -1;
    *v = dz_gguf_le(p, 8);
    return 0;
}

static dz_status truncated(const cursor *c, dz_error *err, const char *what, const char *name) {
    return dz_fail(err, DZ_ERR_FORMAT, "%s: truncated at byte %zu reading %s%s%s%s", c->path, at(c), what,
                   name ? " of '" : "", name ? name : "", name ? "'" : "");
}

static dz_status read_string(cursor *c, dz_gguf_str *s, dz_error *err, const char *what, const char *name) {
    uint64_t len;
    const unsigned char *p;
    if (read_u64(c, &len)) return truncated(c, err, what, name);
    if (len > c->left)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %s%s%s%s at byte %zu has length %" PRIu64 ", past the end of the file",
                       c->path, what, name ? " of '" : "", name ? name : "", name ? "'" : "", at(c) - 8, len);
    take(c, (size_t)len, &p);
    s->s = (const char *)p;
    s->len = len;
    return DZ_OK;
}

/* A key or tensor name: non-empty, no NUL, copied as a C string. */
static dz_status read_name(cursor *c, char **out, dz_error *err, const char *what) {
    dz_gguf_str s = {NULL, 0};
    dz_status st = read_string(c, &s, err, what, NULL);
    if (st != DZ_OK) return st;
    if (s.len == 0 || memchr(s.s, 0, (size_t)s.len))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %s at byte %zu %s", c->path, what, at(c) - (size_t)s.len,
                       s.len ? "holds a NUL byte" : "is empty");
    *out = malloc((size_t)s.len + 1);
    if (!*out) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", c->path);
    memcpy(*out, s.s, (size_t)s.len);
    (*out)[s.len] = '\0';
    return DZ_OK;
}

size_t dz_gguf_scalar_size(uint32_t t) {
    switch (t) {
    case DZ_GGUF_U8: case DZ_GGUF_I8: case DZ_GGUF_BOOL: return 1;
    case DZ_GGUF_U16: case DZ_GGUF_I16: return 2;
    case DZ_GGUF_U32: case DZ_GGUF_I32: case DZ_GGUF_F32: return 4;
    case DZ_GGUF_U64: case DZ_GGUF_I64: case DZ_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *dz_gguf_vtype_name(dz_gguf_vtype t) {
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                        "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static dz_status read_value(cursor *c, dz_gguf_kv *kv, dz_error *err) {
    uint32_t t;
    if (read_u32(c, &t)) return truncated(c, err, "the value type", kv->key);
    kv->type = (dz_gguf_vtype)t;
    kv->count = 1;
    kv->data = c->p;
    if (t == DZ_GGUF_STRING) return read_string(c, &kv->str, err, "the string value", kv->key);
    if (t != DZ_GGUF_ARRAY) {
        const size_t n = dz_gguf_scalar_size(t);
        if (n == 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' has unknown value type %u", c->path, kv->key, t);
        const unsigned char *p;
        return take(c, n, &p) ? truncated(c, err, "the value", kv->key) : DZ_OK;
    }
    uint32_t et;
    uint64_t count;
    if (read_u32(c, &et) || read_u64(c, &count)) return truncated(c, err, "the array header", kv->key);
    kv->elem_type = (dz_gguf_vtype)et;
    kv->count = count;
    kv->data = c->p;
    if (et == DZ_GGUF_ARRAY)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: key '%s' is an array of arrays, which distzo does not read",
                       c->path, kv->key);
    if (et == DZ_GGUF_STRING) {
        if (count > c->left / 8) /* each string needs at least its 8-byte length */
            return dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s': array of %" PRIu64 " strings cannot fit in the %zu bytes left",
                           c->path, kv->key, count, c->left);
        for (uint64_t i = 0; i < count; i++) {
            dz_gguf_str s = {NULL, 0};
            dz_status st = read_string(c, &s, err, "an array string", kv->key);
            if (st != DZ_OK) return st;
        }
        return DZ_OK;
    }
    const size_t n = dz_gguf_scalar_size(et);
    if (n == 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' is an array of unknown type %u", c->path, kv->key, et);
    if (count > c->left / n)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s': array of %" PRIu64 " %s runs past the end of the file",
                       c->path, kv->key, count, dz_gguf_vtype_name(kv->elem_type));
    const unsigned char *p;
    take(c, (size_t)(count * n), &p);
    return DZ_OK;
}

static dz_status read_tensor_info(cursor *c, dz_gguf_tensor *t, uint64_t *offset, dz_error *err) {
    dz_status st = read_name(c, &t->name, err, "a tensor name");
    if (st != DZ_OK) return st;
    uint32_t nd;
    if (read_u32(c, &nd)) return truncated(c, err, "the dimension count", t->name);
    if (nd < 1 || nd > DZ_GGUF_MAX_DIMS)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' has %u dimensions (1 to %d allowed)", c->path, t->name, nd,
                       DZ_GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    for (int d = 0; d < DZ_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->ndim && read_u64(c, &ne)) return truncated(c, err, "the dimensions", t->name);
        if (ne > (uint64_t)INT64_MAX)
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': dimension %d is %" PRIu64, c->path, t->name, d, ne);
        t->ne[d] = (int64_t)ne;
    }
    /* The element count as ggml forms it (ne[0] * ne[1] * ..., each step checked, so a later
     * zero does not hide an overflow) and the row count on its own (ne[0] may be 0). */
    uint64_t prefix = 1;
    for (int d = 0; d < DZ_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && prefix > (uint64_t)INT64_MAX / (uint64_t)t->ne[d])
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': dimensions overflow 64 bits", c->path, t->name);
        prefix *= (uint64_t)t->ne[d];
    }
    uint64_t rows = 1;
    for (int d = 1; d < DZ_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && rows > (uint64_t)INT64_MAX / (uint64_t)t->ne[d])
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': dimensions overflow 64 bits", c->path, t->name);
        rows *= (uint64_t)t->ne[d];
    }
    t->nrows = (int64_t)rows;
    uint32_t type;
    if (read_u32(c, &type) || read_u64(c, offset)) return truncated(c, err, "the type and offset", t->name);
    t->type = type;
    const dz_ggml_type_info ti = dz_ggml_type_describe(type);
    if (ti.block_bytes == 0)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s' has ggml type %s (%u), whose layout distzo does not know",
                       c->path, t->name, ti.name, type);
    if (t->ne[0] % ti.block != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': row length %" PRId64 " is not a multiple of %s's block of %d",
                       c->path, t->name, t->ne[0], ti.name, ti.block);
    const uint64_t blocks = (uint64_t)t->ne[0] / (uint64_t)ti.block;
    if (blocks > SIZE_MAX / (uint64_t)ti.block_bytes)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->path, t->name);
    const uint64_t row_bytes = blocks * (uint64_t)ti.block_bytes;
    if (row_bytes && (uint64_t)t->nrows > SIZE_MAX / row_bytes)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->path, t->name);
    t->row_bytes = (size_t)row_bytes;
    t->nbytes = (size_t)(row_bytes * (uint64_t)t->nrows);
    return DZ_OK;
}

static int cmp_kv(const void *a, const void *b) {
    return strcmp((*(const dz_gguf_kv *const *)a)->key, (*(const dz_gguf_kv *const *)b)->key);
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp((*(const dz_gguf_tensor *const *)a)->name, (*(const dz_gguf_tensor *const *)b)->name);
}

/* qsorts n entries of size bytes with cmp: the position of the first entry equal to the one
 * before it, or 0 when all differ (the lookups' indexes hold no name twice). */
static int sort_unique(void *base, int n, size_t size, int (*cmp)(const void *, const void *)) {
    char *b = base;
    qsort(b, (size_t)n, size, cmp);
    for (int i = 1; i < n; i++)
        if (cmp(b + (size_t)(i - 1) * size, b + (size_t)i * size) == 0) return i;
    return 0;
}

typedef struct span {
    size_t begin, end;
    int index;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* The magic, the version and the two counts, each count checked against the bytes left. */
static dz_status read_header(cursor *c, dz_gguf *g, uint64_t *n_tensors, uint64_t *n_kv, dz_error *err) {
    const unsigned char *magic;
    if (take(c, 4, &magic)) return truncated(c, err, "the magic", NULL);
    if (memcmp(magic, "GGUF", 4) != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a GGUF file (magic is not \"GGUF\")", c->path);
    if (read_u32(c, &g->version)) return truncated(c, err, "the version", NULL);
    if (g->version == 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: GGUF version 1 (32-bit counts, 2023) is not supported; "
                       "convert it again with a current llama.cpp", c->path);
    if (g->version != 2 && g->version != 3) {
        const uint32_t swapped = __builtin_bswap32(g->version);
        if (swapped >= 1 && swapped <= 3)
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: big-endian GGUF (version %u) is not supported", c->path, swapped);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: unknown GGUF version %u (2 and 3 are read)", c->path, g->version);
    }
    if (read_u64(c, n_tensors) || read_u64(c, n_kv)) return truncated(c, err, "the counts", NULL);
    /* A key/value takes at least 13 bytes (8 length, 1 key byte, 4 type) + 1 value byte;
     * a tensor info at least 8 + 1 + 4 + 8 + 4 + 8 = 33. */
    if (*n_kv > GGUF_MAX_COUNT || *n_kv > c->left / 14)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %" PRIu64 " key/values cannot fit in the %zu bytes left", c->path, *n_kv, c->left);
    if (*n_tensors > GGUF_MAX_COUNT || *n_tensors > c->left / 33)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %" PRIu64 " tensors cannot fit in the %zu bytes left", c->path, *n_tensors,
                       c->left);
    return DZ_OK;
}

/* The n_kv key/values, then the index sorted by key (lookups), no key twice. */
static dz_status read_metadata(cursor *c, dz_gguf *g, uint64_t n_kv, dz_error *err) {
    dz_status st = DZ_OK;
    for (uint64_t i = 0; i < n_kv && st == DZ_OK; i++) {
        dz_gguf_kv *kv = &g->kv[g->n_kv];
        st = read_name(c, &kv->key, err, "a metadata key");
        if (kv->key) g->n_kv++;
        if (st == DZ_OK) st = read_value(c, kv, err);
    }
    for (int i = 0; i < g->n_kv; i++) g->kv_sorted[i] = &g->kv[i];
    const int twice = st == DZ_OK ? sort_unique(g->kv_sorted, g->n_kv, sizeof *g->kv_sorted, cmp_kv) : 0;
    if (twice) st = dz_fail(err, DZ_ERR_FORMAT, "%s: key '%s' appears twice", c->path, g->kv_sorted[twice]->key);
    return st;
}

/* general.alignment when present: a u32 power of two (else the default stays). */
static dz_status read_alignment(const cursor *c, dz_gguf *g, dz_error *err) {
    const dz_gguf_kv *al = dz_gguf_find_kv(g, "general.alignment");
    if (!al) return DZ_OK;
    if (al->type != DZ_GGUF_U32)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: key 'general.alignment' is a %s, expected u32", c->path,
                       dz_gguf_vtype_name(al->type));
    if ((g->alignment = (uint32_t)dz_gguf_le(al->data, 4)) == 0 || (g->alignment & (g->alignment - 1)))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: key 'general.alignment' = %u is not a power of two", c->path,
                       g->alignment);
    return DZ_OK;
}

/* The n_tensors tensor infos (offsets[i]: tensor i's offset in the data), then the index
 * sorted by name (lookups), no name twice. */
static dz_status read_tensor_infos(cursor *c, dz_gguf *g, uint64_t n_tensors, uint64_t *offsets, dz_error *err) {
    dz_status st = DZ_OK;
    for (uint64_t i = 0; i < n_tensors && st == DZ_OK; i++) {
        dz_gguf_tensor *t = &g->tensors[g->n_tensors];
        st = read_tensor_info(c, t, &offsets[g->n_tensors], err);
        if (t->name) g->n_tensors++;
    }
    for (int i = 0; i < g->n_tensors; i++) g->tensors_sorted[i] = &g->tensors[i];
    const int twice =
        st == DZ_OK ? sort_unique(g->tensors_sorted, g->n_tensors, sizeof *g->tensors_sorted, cmp_tensor) : 0;
    if (twice)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' appears twice", c->path, g->tensors_sorted[twice]->name);
    return st;
}

/* The data starts at the next multiple of the alignment; every tensor's bytes lie inside
 * it at an aligned offset, and no two overlap (spans: scratch of n_tensors). */
static dz_status place_tensors(const cursor *c, dz_gguf *g, const uint64_t *offsets, span *spans, dz_error *err) {
    dz_status st = DZ_OK;
    const size_t end = at(c), pad = (g->alignment - end % g->alignment) % g->alignment;
    if (g->n_tensors > 0 && pad > c->left)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: file ends inside the padding before the tensor data", c->path);
    g->data_offset = end + (pad <= c->left ? pad : c->left);
    const size_t size = at(c) + c->left, data_size = size - (g->data_offset <= size ? g->data_offset : size);
    for (int i = 0; i < g->n_tensors && st == DZ_OK; i++) {
        dz_gguf_tensor *t = &g->tensors[i];
        const uint64_t off = offsets[i];
        if (off % g->alignment != 0)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %u",
                         c->path, t->name, off, g->alignment);
        else if (off > data_size || t->nbytes > data_size - off)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': bytes [%" PRIu64 ", +%zu) run past the end of the data "
                         "(%zu bytes)", c->path, t->name, off, t->nbytes, data_size);
        else {
            t->data = c->base + g->data_offset + off;
            spans[i] = (span){(size_t)off, (size_t)off + t->nbytes, i};
        }
    }
    if (st == DZ_OK) {
        qsort(spans, (size_t)g->n_tensors, sizeof *spans, cmp_span);
        for (int i = 1; i < g->n_tensors && st == DZ_OK; i++)
            if (spans[i].begin < spans[i - 1].end && spans[i].end > spans[i].begin)
                st = dz_fail(err, DZ_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", c->path,
                             g->tensors[spans[i - 1].index].name, g->tensors[spans[i].index].name);
    }
    return st;
}

static dz_status parse_body(cursor *c, dz_gguf *g, dz_error *err) {
    uint64_t n_tensors = 0, n_kv = 0;
    dz_status st = read_header(c, g, &n_tensors, &n_kv, err);
    if (st != DZ_OK) return st;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    g->kv_sorted = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv_sorted);
    g->tensors_sorted = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors_sorted);
    uint64_t *offsets = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *offsets);
    span *spans = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *spans);
    g->alignment = DZ_GGUF_DEFAULT_ALIGNMENT;
    if (!g->kv || !g->tensors || !g->kv_sorted || !g->tensors_sorted || !offsets || !spans)
        st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", c->path);
    if (st == DZ_OK) st = read_metadata(c, g, n_kv, err);
    if (st == DZ_OK) st = read_alignment(c, g, err);
    if (st == DZ_OK) st = read_tensor_infos(c, g, n_tensors, offsets, err);
    if (st == DZ_OK) st = place_tensors(c, g, offsets, spans, err);
    free(offsets);
    free(spans);
    return st;
}

dz_status dz_gguf_parse(const char *path, const void *buf, size_t size, dz_gguf *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    const char *p = path ? path : "<memory>";
    cursor c = {p, buf, buf, size};
    dz_status st = (out->path = strdup(p)) ? parse_body(&c, out, err)
                                              : dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", p);
    if (st != DZ_OK) dz_gguf_close(out);
    return st;
}

dz_status dz_gguf_open(const char *path, dz_gguf *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    void *map;
    size_t size;
    dz_status st = dz_map_file(path, 24, &map, &size, err);
    if (st == DZ_ERR_FORMAT)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: file is %zu bytes, too short for a GGUF header", path, size);
    if (st != DZ_OK) return st;
    st = dz_gguf_parse(path, map, size, out, err);
    if (st != DZ_OK) {
        munmap(map, size);
        return st;
    }
    out->map = map;
    out->map_size = size;
    return DZ_OK;
}

void dz_gguf_close(dz_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    for (int i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_sorted);
    free(g->tensors_sorted);
    free(g->path);
    if (g->map) munmap(g->map, g->map_size);
    memset(g, 0, sizeof *g);
}

/* Lookups search the sorted indexes with the comparators that sorted them (no name twice). */
const dz_gguf_kv *dz_gguf_find_kv(const dz_gguf *g, const char *key) {
    const dz_gguf_kv probe = {.key = (char *)key}, *p = &probe;
    const dz_gguf_kv **hit = g->n_kv ? bsearch(&p, g->kv_sorted, (size_t)g->n_kv, sizeof p, cmp_kv) : NULL;
    return hit ? *hit : NULL;
}

const dz_gguf_tensor *dz_gguf_find_tensor(const dz_gguf *g, const char *name) {
    const dz_gguf_tensor probe = {.name = (char *)name}, *p = &probe;
    const dz_gguf_tensor **hit =
        g->n_tensors ? bsearch(&p, g->tensors_sorted, (size_t)g->n_tensors, sizeof p, cmp_tensor) : NULL;
    return hit ? *hit : NULL;
}
