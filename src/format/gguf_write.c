/* GGUF v3 writer (gguf_write.h): metadata bytes gathered in memory, tensor data streamed
 * through one 1 MiB buffer into a temp file that is renamed into place at the end. */
#include "format/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/io.h"

enum { OUT_BUF = 1 << 20 };

typedef struct wtensor {
    char *name;
    uint32_t type;
    int ndim;
    int64_t ne[DZ_GGUF_MAX_DIMS];
    uint64_t offset, nbytes, numel;
} wtensor;

struct dz_gguf_writer {
    char *path, *tmp;
    int fd;
    uint32_t alignment;
    unsigned char *meta; /* the key/values as they go into the file */
    size_t meta_len, meta_cap;
    uint64_t n_kv;
    char **keys;
    size_t n_keys, keys_cap;
    wtensor *t;
    int n_t, t_cap;
    int cur;              /* the tensor being written */
    uint64_t cur_numel;   /* its elements written so far */
    unsigned char *buf;   /* output buffer */
    size_t buf_len;
    uint64_t file_pos;    /* bytes handed to the file (buffered included) */
    int begun, finished;
    dz_status st;         /* the first failure, returned by the next status call */
    dz_error err;
};

static void fail(dz_gguf_writer *w, dz_status code, const char *what, const char *name) {
    if (w->st != DZ_OK) return;
    w->st = dz_fail(&w->err, code, "%s: %s '%s'", w->path, what, name);
}

static dz_status sticky(const dz_gguf_writer *w, dz_error *err) {
    if (w->st == DZ_OK) return DZ_OK;
    if (err) *err = w->err;
    return w->st;
}

static void meta_put(dz_gguf_writer *w, const void *p, size_t n) {
    if (w->st != DZ_OK) return;
    if (w->meta_len + n > w->meta_cap) {
        size_t cap = w->meta_cap ? w->meta_cap : 4096;
        while (cap < w->meta_len + n) cap *= 2;
        unsigned char *np = realloc(w->meta, cap);
        if (!np) {
            w->st = dz_fail(&w->err, DZ_ERR_NOMEM, "%s: out of memory for %zu bytes of metadata", w->path, cap);
            return;
        }
        w->meta = np;
        w->meta_cap = cap;
    }
    memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
}

/* The file is little-endian, as is every host distzo builds on. */
static void meta_u32(dz_gguf_writer *w, uint32_t v) { meta_put(w, &v, 4); }
static void meta_u64(dz_gguf_writer *w, uint64_t v) { meta_put(w, &v, 8); }
static void meta_str(dz_gguf_writer *w, const char *s, size_t len) {
    meta_u64(w, len);
    meta_put(w, s, len);
}

/* Starts a key/value: checks the key, writes it and the value type. 0 when refused. */
static int kv_begin(dz_gguf_writer *w, const char *key, dz_gguf_vtype type) {
    if (w->st != DZ_OK) return 0;
    if (w->begun) return fail(w, DZ_ERR_INVALID, "metadata declared after the header was written:", key), 0;
    if (!key || !*key) return fail(w, DZ_ERR_INVALID, "empty metadata key", ""), 0;
    for (size_t i = 0; i < w->n_keys; i++)
        if (!strcmp(w->keys[i], key)) return fail(w, DZ_ERR_INVALID, "duplicate metadata key", key), 0;
    if (w->n_keys == w->keys_cap) {
        size_t cap = w->keys_cap ? 2 * w->keys_cap : 64;
        char **nk = realloc(w->keys, cap * sizeof *nk);
        if (!nk) return fail(w, DZ_ERR_NOMEM, "out of memory for key", key), 0;
        w->keys = nk;
        w->keys_cap = cap;
    }
    if (!(w->keys[w->n_keys] = strdup(key))) return fail(w, DZ_ERR_NOMEM, "out of memory for key", key), 0;
    w->n_keys++;
    w->n_kv++;
    meta_str(w, key, strlen(key));
    meta_u32(w, type);
    return w->st == DZ_OK;
}

void dz_gguf_put_u32(dz_gguf_writer *w, const char *key, uint32_t v) {
    if (kv_begin(w, key, DZ_GGUF_U32)) meta_u32(w, v);
}
void dz_gguf_put_i32(dz_gguf_writer *w, const char *key, int32_t v) {
    if (kv_begin(w, key, DZ_GGUF_I32)) meta_put(w, &v, 4);
}
void dz_gguf_put_f32(dz_gguf_writer *w, const char *key, float v) {
    if (kv_begin(w, key, DZ_GGUF_F32)) meta_put(w, &v, 4);
}
void dz_gguf_put_bool(dz_gguf_writer *w, const char *key, int v) {
    const unsigned char b = v != 0;
    if (kv_begin(w, key, DZ_GGUF_BOOL)) meta_put(w, &b, 1);
}
void dz_gguf_put_string(dz_gguf_writer *w, const char *key, const char *s) {
    if (kv_begin(w, key, DZ_GGUF_STRING)) meta_str(w, s, strlen(s));
}

static int array_begin(dz_gguf_writer *w, const char *key, dz_gguf_vtype elem, size_t n) {
    if (!kv_begin(w, key, DZ_GGUF_ARRAY)) return 0;
    meta_u32(w, elem);
    meta_u64(w, n);
    return w->st == DZ_OK;
}

void dz_gguf_put_strings(dz_gguf_writer *w, const char *key, const char *const *s, const int *lens, size_t n) {
    if (!array_begin(w, key, DZ_GGUF_STRING, n)) return;
    for (size_t i = 0; i < n; i++) meta_str(w, s[i], lens ? (size_t)lens[i] : strlen(s[i]));
}
void dz_gguf_put_f32s(dz_gguf_writer *w, const char *key, const float *v, size_t n) {
    if (array_begin(w, key, DZ_GGUF_F32, n)) meta_put(w, v, n * 4);
}
void dz_gguf_put_i32s(dz_gguf_writer *w, const char *key, const int32_t *v, size_t n) {
    if (array_begin(w, key, DZ_GGUF_I32, n)) meta_put(w, v, n * 4);
}

void dz_gguf_add_tensor(dz_gguf_writer *w, const char *name, uint32_t type, int ndim, const int64_t *ne) {
    if (w->st != DZ_OK) return;
    if (w->begun) return fail(w, DZ_ERR_INVALID, "tensor declared after the header was written:", name);
    if (!name || !*name) return fail(w, DZ_ERR_INVALID, "empty tensor name", "");
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return fail(w, DZ_ERR_INVALID, "duplicate tensor", name);
    const dz_ggml_type_info ti = dz_ggml_type_describe(type);
    if (ti.block_bytes == 0) return fail(w, DZ_ERR_UNSUPPORTED, "distzo cannot write this ggml type for tensor", name);
    if (ndim < 1 || ndim > DZ_GGUF_MAX_DIMS) return fail(w, DZ_ERR_INVALID, "bad dimension count for tensor", name);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (ne[d] < 0 || (ne[d] > 0 && numel > (UINT64_C(1) << 56) / (uint64_t)ne[d])) return fail(w, DZ_ERR_INVALID, "bad shape for tensor", name);
        numel *= (uint64_t)ne[d];
    }
    if (ne[0] % ti.block) return fail(w, DZ_ERR_INVALID, "ne[0] is not a multiple of the type's block for tensor", name);
    if (w->n_t == w->t_cap) {
        int cap = w->t_cap ? 2 * w->t_cap : 64;
        wtensor *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return fail(w, DZ_ERR_NOMEM, "out of memory for tensor", name);
        w->t = nt;
        w->t_cap = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return fail(w, DZ_ERR_NOMEM, "out of memory for tensor", name);
    t->type = type;
    t->ndim = ndim;
    for (int d = 0; d < DZ_GGUF_MAX_DIMS; d++) t->ne[d] = d < ndim ? ne[d] : 1;
    t->numel = numel;
    t->nbytes = numel / (uint64_t)ti.block * (uint64_t)ti.block_bytes;
    w->n_t++;
}

dz_status dz_gguf_writer_create(const char *path, uint32_t alignment, dz_gguf_writer **out, dz_error *err) {
    *out = NULL;
    if (!alignment) alignment = DZ_GGUF_DEFAULT_ALIGNMENT;
    if (alignment & (alignment - 1)) return dz_fail(err, DZ_ERR_INVALID, "%s: alignment %u is not a power of two", path, alignment);
    dz_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->alignment = alignment;
    size_t n = strlen(path) + 32;
    w->path = strdup(path);
    w->tmp = malloc(n);
    w->buf = malloc(OUT_BUF);
    if (!w->path || !w->tmp || !w->buf) {
        dz_gguf_writer_free(w);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(w->tmp, n, "%s.tmp.%d", path, (int)getpid());
    if (alignment != DZ_GGUF_DEFAULT_ALIGNMENT) dz_gguf_put_u32(w, "general.alignment", alignment);
    *out = w;
    return DZ_OK;
}

void dz_gguf_writer_free(dz_gguf_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->begun && !w->finished) unlink(w->tmp);
    for (size_t i = 0; i < w->n_keys; i++) free(w->keys[i]);
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->keys);
    free(w->t);
    free(w->meta);
    free(w->buf);
    free(w->tmp);
    free(w->path);
    free(w);
}

static void flush_buf(dz_gguf_writer *w) {
    if (w->st != DZ_OK || !w->buf_len) return;
    if (dz_io_write_all(w->fd, w->buf, w->buf_len) != 0) {
        w->st = dz_fail(&w->err, DZ_ERR_IO, "%s: write failed: %s", w->tmp, strerror(errno));
        return;
    }
    w->buf_len = 0;
}

static void out_put(dz_gguf_writer *w, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n && w->st == DZ_OK) {
        if (w->buf_len == OUT_BUF) flush_buf(w);
        size_t k = OUT_BUF - w->buf_len < n ? OUT_BUF - w->buf_len : n;
        memcpy(w->buf + w->buf_len, s, k);
        w->buf_len += k;
        w->file_pos += k;
        s += k;
        n -= k;
    }
}

static void out_pad(dz_gguf_writer *w) {
    static const unsigned char zeros[256];
    while (w->file_pos % w->alignment && w->st == DZ_OK) {
        size_t k = (size_t)(w->alignment - w->file_pos % w->alignment);
        out_put(w, zeros, k < sizeof zeros ? k : sizeof zeros);
    }
}

dz_status dz_gguf_writer_begin(dz_gguf_writer *w, dz_error *err) {
    if (w->st == DZ_OK && w->begun) fail(w, DZ_ERR_INVALID, "header written twice for", w->path);
    if (w->st != DZ_OK) return sticky(w, err);
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off += (w->t[i].nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create: %s", w->tmp, strerror(errno));
    w->begun = 1;
    const uint32_t version = 3;
    const uint64_t counts[2] = {(uint64_t)w->n_t, w->n_kv};
    out_put(w, "GGUF", 4);
    out_put(w, &version, 4);
    out_put(w, counts, sizeof counts);
    out_put(w, w->meta, w->meta_len);
    for (int i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        const uint64_t len = strlen(t->name);
        const uint32_t nd = (uint32_t)t->ndim;
        out_put(w, &len, 8);
        out_put(w, t->name, len);
        out_put(w, &nd, 4);
        for (int d = 0; d < t->ndim; d++) out_put(w, &t->ne[d], 8);
        out_put(w, &t->type, 4);
        out_put(w, &t->offset, 8);
    }
    out_pad(w);
    w->file_pos = 0; /* from here: offsets within the data section (it starts aligned) */
    return sticky(w, err);
}

/* Moves past complete tensors (a zero-size one is complete at once). */
static void skip_complete(dz_gguf_writer *w) {
    while (w->cur < w->n_t && w->cur_numel == w->t[w->cur].numel) {
        out_pad(w);
        w->cur++;
        w->cur_numel = 0;
    }
}

/* The tensor the next data belongs to, or NULL (the writer's error then in *err). */
static wtensor *current_tensor(dz_gguf_writer *w, dz_error *err) {
    if (w->st == DZ_OK && !w->begun) fail(w, DZ_ERR_INVALID, "tensor data before the header in", w->path);
    skip_complete(w);
    if (w->st == DZ_OK && w->cur >= w->n_t) fail(w, DZ_ERR_INVALID, "more tensor data than declared in", w->path);
    if (w->st == DZ_OK) return &w->t[w->cur];
    sticky(w, err);
    return NULL;
}

dz_status dz_gguf_write_f32(dz_gguf_writer *w, const float *src, size_t n, dz_error *err) {
    wtensor *t = current_tensor(w, err);
    if (!t) return w->st;
    const dz_ggml_type_info ti = dz_ggml_type_describe(t->type);
    if (!dz_ggml_quantizable(t->type))
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s': distzo cannot convert fp32 into %s (write its encoded "
                       "blocks)", w->path, t->name, ti.name);
    if (n % (size_t)ti.block || n > t->numel - w->cur_numel)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': %zu elements do not fit what is left (%llu) in whole blocks",
                       w->path, t->name, n, (unsigned long long)(t->numel - w->cur_numel));
    /* Converted in slices that fit the output buffer (whole blocks, 4096 elements at most). */
    for (size_t i = 0; i < n && w->st == DZ_OK;) {
        size_t k = n - i < 4096 ? n - i : 4096;
        k -= k % (size_t)ti.block;
        const size_t bytes = k / (size_t)ti.block * (size_t)ti.block_bytes;
        if (OUT_BUF - w->buf_len < bytes) flush_buf(w);
        if (w->st != DZ_OK) break;
        dz_ggml_quantize(t->type, src + i, w->buf + w->buf_len, k);
        w->buf_len += bytes;
        w->file_pos += bytes;
        i += k;
    }
    w->cur_numel += n;
    skip_complete(w);
    return sticky(w, err);
}

dz_status dz_gguf_write_blocks(dz_gguf_writer *w, const void *blocks, size_t nblocks, dz_error *err) {
    const wtensor *t = current_tensor(w, err);
    if (!t) return w->st;
    const dz_ggml_type_info ti = dz_ggml_type_describe(t->type);
    const uint64_t left = (t->numel - w->cur_numel) / (uint64_t)ti.block;
    if (nblocks > left)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': %zu blocks do not fit the %llu left", w->path, t->name,
                       nblocks, (unsigned long long)left);
    out_put(w, blocks, nblocks * (size_t)ti.block_bytes);
    w->cur_numel += nblocks * (uint64_t)ti.block;
    skip_complete(w);
    return sticky(w, err);
}

dz_status dz_gguf_writer_finish(dz_gguf_writer *w, dz_error *err) {
    if (w->st == DZ_OK && !w->begun) fail(w, DZ_ERR_INVALID, "finished before the header was written:", w->path);
    skip_complete(w);
    if (w->st == DZ_OK && w->cur < w->n_t) fail(w, DZ_ERR_INVALID, "not all data written for tensor", w->t[w->cur].name);
    flush_buf(w);
    if (w->st != DZ_OK) return sticky(w, err);
    if (dz_io_fsync(w->fd) != 0) return dz_fail(err, DZ_ERR_IO, "%s: fsync failed: %s", w->tmp, strerror(errno));
    const int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) return dz_fail(err, DZ_ERR_IO, "%s: close failed: %s", w->tmp, strerror(errno));
    if (rename(w->tmp, w->path) != 0) return dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", w->path, strerror(errno));
    w->finished = 1;
    return dz_io_fsync_parent(w->path, err);
}
