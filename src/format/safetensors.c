/* safetensors reader/writer and Hugging Face checkpoint folders.
 *
 * File layout: u64 little-endian header length N, N bytes of JSON, then the data
 * section. The JSON maps tensor names to {dtype, shape, data_offsets:[begin,end]}
 * (offsets relative to the data section) plus an optional "__metadata__" object. */
#include "format/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"

/* The reference implementation refuses headers above 100 MB; so do we, which also
 * bounds what a hostile file can make us allocate before anything is validated. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define ST_MAX_JSON_INT ((double)(1ull << 53))

/* Valid safetensors dtypes that distzo does not load: named as unsupported rather
 * than malformed so the message tells the user the file itself is fine. */
static const char *const k_other_dtypes[] = {
    "F64", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "E8M0", "C64",
};

static uint64_t read_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void write_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A JSON number that is a non-negative integer small enough to be exact. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_JSON_INT)) return -1; /* also rejects NaN */
    uint64_t v = (uint64_t)d;
    if ((double)v != d) return -1;
    *out = v;
    return 0;
}

static dz_status parse_dtype(const char *path, const char *name, const cJSON *j, dz_dtype *out,
                             dz_error *err) {
    if (!cJSON_IsString(j))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': field 'dtype' is %s", path, name,
                       j ? "not a string" : "missing");
    const char *s = j->valuestring;
    /* Exact spellings only: dz_dtype_parse also accepts aliases the format does not. */
    if (!strcmp(s, "F32")) *out = DZ_F32;
    else if (!strcmp(s, "F16")) *out = DZ_F16;
    else if (!strcmp(s, "BF16")) *out = DZ_BF16;
    else {
        for (size_t i = 0; i < sizeof k_other_dtypes / sizeof *k_other_dtypes; i++)
            if (!strcmp(s, k_other_dtypes[i]))
                return dz_fail(err, DZ_ERR_UNSUPPORTED,
                               "%s: tensor '%s': dtype '%s' is not supported (only F32, F16, BF16)",
                               path, name, s);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", path, name, s);
    }
    return DZ_OK;
}

/* Fills t->ndim/shape and returns the element count in *numel. */
static dz_status parse_shape(const char *path, const char *name, const cJSON *j, dz_st_tensor *t,
                             uint64_t *numel, dz_error *err) {
    if (!cJSON_IsArray(j))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': field 'shape' is %s", path, name,
                       j ? "not an array" : "missing");
    int nd = cJSON_GetArraySize(j);
    if (nd > DZ_ST_MAX_DIMS)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: tensor '%s': shape has %d dimensions (max %d)",
                       path, name, nd, DZ_ST_MAX_DIMS);
    uint64_t n = 1;
    int d = 0;
    for (const cJSON *e = j->child; e; e = e->next, d++) {
        uint64_t v;
        if (json_uint(e, &v) != 0 || v > INT64_MAX)
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, d);
        if (__builtin_mul_overflow(n, v, &n))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': shape element count overflows",
                           path, name);
        t->shape[d] = (int64_t)v;
    }
    t->ndim = nd;
    *numel = n;
    return DZ_OK;
}

static dz_status parse_offsets(const char *path, const char *name, const cJSON *j, uint64_t *begin,
                               uint64_t *end, dz_error *err) {
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': field 'data_offsets' is %s", path, name,
                       j ? "not an array of two integers" : "missing");
    if (json_uint(j->child, begin) != 0 || json_uint(j->child->next, end) != 0)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: tensor '%s': field 'data_offsets' holds a value that is not a "
                       "non-negative integer", path, name);
    if (*begin > *end)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets begin %" PRIu64 " > end %" PRIu64, path, name,
                       *begin, *end);
    return DZ_OK;
}

/* One header entry into t (name included). data_size bounds the offsets. */
static dz_status parse_entry(const char *path, const cJSON *j, const unsigned char *data,
                             uint64_t data_size, dz_st_tensor *t, uint64_t range[2], dz_error *err) {
    const char *name = j->string;
    if (!cJSON_IsObject(j))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': entry is not an object", path, name);
    dz_status s = parse_dtype(path, name, cJSON_GetObjectItemCaseSensitive(j, "dtype"), &t->dtype, err);
    uint64_t numel = 0;
    if (s == DZ_OK) s = parse_shape(path, name, cJSON_GetObjectItemCaseSensitive(j, "shape"), t, &numel, err);
    if (s == DZ_OK)
        s = parse_offsets(path, name, cJSON_GetObjectItemCaseSensitive(j, "data_offsets"), &range[0],
                          &range[1], err);
    if (s != DZ_OK) return s;
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)dz_dtype_size(t->dtype), &nbytes))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s': byte size of the shape overflows", path,
                       name);
    if (nbytes != range[1] - range[0])
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: tensor '%s': shape x dtype size is %" PRIu64
                       " bytes but data_offsets span %" PRIu64, path, name, nbytes, range[1] - range[0]);
    if (range[1] > data_size)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets end %" PRIu64
                       " is beyond the data section (%" PRIu64 " bytes; file truncated?)",
                       path, name, range[1], data_size);
    t->name = strdup(name);
    if (!t->name) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    t->data = data + range[0];
    t->nbytes = (size_t)nbytes;
    return DZ_OK;
}

static dz_status check_metadata(const char *path, const cJSON *j, dz_error *err) {
    if (!cJSON_IsObject(j))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: '__metadata__' is not an object", path);
    for (const cJSON *e = j->child; e; e = e->next)
        if (!cJSON_IsString(e))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: '__metadata__' field '%s' is not a string", path,
                           e->string);
    return DZ_OK;
}

typedef struct st_range {
    uint64_t begin, end;
    int idx;
} st_range;

static int cmp_range(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const dz_st_tensor *)a)->name, ((const dz_st_tensor *)b)->name);
}

/* Nonempty ranges must not share a byte; empty ones overlap nothing. */
static dz_status check_overlaps(const char *path, const dz_st_tensor *ts, st_range *r, int n,
                                dz_error *err) {
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (r[i].begin == r[i].end) continue;
        if (prev >= 0 && r[i].begin < r[prev].end)
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s: tensors '%s' [%" PRIu64 ",%" PRIu64 ") and '%s' [%" PRIu64 ",%" PRIu64
                           ") overlap", path, ts[r[prev].idx].name, r[prev].begin, r[prev].end,
                           ts[r[i].idx].name, r[i].begin, r[i].end);
        prev = i;
    }
    return DZ_OK;
}

/* Sorts by name (find() bisects) and rejects duplicates, which JSON parsers disagree on. */
static dz_status sort_names(const char *path, dz_st_tensor *ts, int n, dz_error *err) {
    qsort(ts, (size_t)n, sizeof *ts, cmp_tensor_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(ts[i - 1].name, ts[i].name))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", path,
                           ts[i].name);
    return DZ_OK;
}

/* The header as a cJSON object, with the size checks that come before it. */
static dz_status parse_header_json(const char *path, const unsigned char *buf, size_t size,
                                   uint64_t *hlen, cJSON **out, dz_error *err) {
    if (size < 8)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length", path, size);
    uint64_t n = read_le64(buf);
    if (n > ST_MAX_HEADER)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: header length %" PRIu64 " is absurd (limit %" PRIu64 " bytes)", path, n,
                       ST_MAX_HEADER);
    if (n > size - 8)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                       path, n, size);
    /* JSON allows no raw control byte, in strings or between tokens (whitespace is space,
     * tab, LF, CR); cJSON would skip a NUL as whitespace or end a name at it. */
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char ch = buf[8 + i];
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
            return dz_fail(err, DZ_ERR_FORMAT, "%s: header holds the control byte 0x%02x at byte %" PRIu64
                           " (JSON allows none)", path, ch, i);
    }
    /* A NUL-terminated copy: cJSON must never read past the header. */
    char *text = malloc((size_t)n + 1);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory for the header", path);
    memcpy(text, buf + 8, (size_t)n);
    text[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)n, &end, 0);
    dz_status s = DZ_OK;
    if (!root) {
        size_t at = end ? (size_t)(end - text) : 0;
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: header JSON is malformed near byte %zu", path, at);
    } else if (!cJSON_IsObject(root)) {
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: header JSON is not an object", path);
    } else {
        /* Only whitespace (writers pad with spaces) may follow the object. */
        for (const char *p = end; p < text + n; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
                s = dz_fail(err, DZ_ERR_FORMAT,
                            "%s: header JSON has trailing garbage at byte %zu", path,
                            (size_t)(p - text));
                break;
            }
    }
    free(text);
    if (s != DZ_OK) {
        cJSON_Delete(root);
        return s;
    }
    *hlen = n;
    *out = root;
    return DZ_OK;
}

static dz_status parse_tensors(const char *path, const cJSON *root, const unsigned char *data,
                               uint64_t data_size, dz_safetensors *out, dz_error *err) {
    int count = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0) count++;
    out->tensors = calloc(count ? (size_t)count : 1, sizeof *out->tensors);
    st_range *ranges = calloc(count ? (size_t)count : 1, sizeof *ranges);
    if (!out->tensors || !ranges) {
        free(ranges);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory for %d tensors", path, count);
    }
    dz_status s = DZ_OK;
    for (const cJSON *e = root->child; e && s == DZ_OK; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            s = check_metadata(path, e, err);
            continue;
        }
        int i = out->count;
        uint64_t r[2] = {0, 0};
        s = parse_entry(path, e, data, data_size, &out->tensors[i], r, err);
        if (out->tensors[i].name) out->count++; /* owned names get freed by close */
        ranges[i] = (st_range){r[0], r[1], i};
    }
    if (s == DZ_OK) s = check_overlaps(path, out->tensors, ranges, out->count, err);
    if (s == DZ_OK) s = sort_names(path, out->tensors, out->count, err);
    free(ranges);
    return s;
}

dz_status dz_safetensors_parse(const char *path, const void *buf, size_t size, dz_safetensors *out,
                               dz_error *err) {
    memset(out, 0, sizeof *out);
    if (!path) path = "<memory>";
    cJSON *root = NULL;
    uint64_t hlen = 0;
    dz_status s = parse_header_json(path, buf, size, &hlen, &root, err);
    if (s != DZ_OK) return s;
    out->path = strdup(path);
    if (!out->path) s = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    const unsigned char *data = (const unsigned char *)buf + 8 + hlen;
    if (s == DZ_OK) s = parse_tensors(path, root, data, size - 8 - hlen, out, err);
    cJSON_Delete(root);
    if (s != DZ_OK) dz_safetensors_close(out);
    return s;
}

dz_status dz_safetensors_open(const char *path, dz_safetensors *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    int fd = dz_open_regular(path, err);
    if (fd < 0) return err ? err->code : DZ_ERR_IO;
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        int e = errno;
        close(fd);
        return dz_fail(err, DZ_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    size_t size = (size_t)stt.st_size;
    if (size < 8) {
        close(fd);
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length", path, size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return dz_fail(err, DZ_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    dz_status s = dz_safetensors_parse(path, map, size, out, err);
    if (s != DZ_OK) {
        munmap(map, size);
        return s;
    }
    out->map = map;
    out->map_size = size;
    return DZ_OK;
}

void dz_safetensors_close(dz_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->count; i++) free(st->tensors[i].name);
    free(st->tensors);
    free(st->path);
    if (st->map) munmap(st->map, st->map_size);
    memset(st, 0, sizeof *st);
}

const dz_st_tensor *dz_safetensors_find(const dz_safetensors *st, const char *name) {
    int lo = 0, hi = st->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[mid].name, name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* ---- writing ---- */

static dz_status check_write_tensor(const char *path, const dz_st_write_tensor *t, uint64_t *nbytes,
                                    dz_error *err) {
    if (!t->name) return dz_fail(err, DZ_ERR_INVALID, "%s: a tensor has no name", path);
    if (!strcmp(t->name, "__metadata__"))
        return dz_fail(err, DZ_ERR_INVALID, "%s: '__metadata__' is reserved, not a tensor name", path);
    if (t->dtype != DZ_F32 && t->dtype != DZ_F16 && t->dtype != DZ_BF16)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': bad dtype %d", path, t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > DZ_ST_MAX_DIMS)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': ndim %d out of range", path, t->name,
                       t->ndim);
    uint64_t n = dz_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)t->shape[d], &n))
            return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': bad shape[%d] = %" PRId64, path,
                           t->name, d, t->shape[d]);
    if (n > 0 && !t->data)
        return dz_fail(err, DZ_ERR_INVALID, "%s: tensor '%s': no data", path, t->name);
    *nbytes = n;
    return DZ_OK;
}

typedef struct st_order {
    size_t esize;
    int idx;
} st_order;

/* Larger elements first, then input order: every tensor then starts at a multiple
 * of its element size (as the reference writer does), with no gaps between tensors,
 * which the reference reader requires. */
static int cmp_order(const void *a, const void *b) {
    const st_order *x = a, *y = b;
    if (x->esize != y->esize) return x->esize > y->esize ? -1 : 1;
    return x->idx - y->idx;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static dz_status check_unique_names(const char *path, const dz_st_write_tensor *ts, int count,
                                    dz_error *err) {
    const char **names = malloc((count > 0 ? (size_t)count : 1) * sizeof *names);
    if (!names) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < count; i++) names[i] = ts[i].name;
    qsort(names, (size_t)count, sizeof *names, cmp_str_ptr);
    dz_status s = DZ_OK;
    for (int i = 1; i < count && s == DZ_OK; i++)
        if (!strcmp(names[i - 1], names[i]))
            s = dz_fail(err, DZ_ERR_INVALID, "%s: tensor name '%s' given twice", path, names[i]);
    free(names);
    return s;
}

/* Builds the header text (padded with spaces to a multiple of 8) and the write order. */
static dz_status build_header(const char *path, const dz_st_write_tensor *ts, int count,
                              st_order *order, char **text, size_t *len, dz_error *err) {
    uint64_t *nbytes = calloc(count ? (size_t)count : 1, sizeof *nbytes);
    if (!nbytes) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    dz_status s = DZ_OK;
    for (int i = 0; i < count && s == DZ_OK; i++) {
        s = check_write_tensor(path, &ts[i], &nbytes[i], err);
        order[i] = (st_order){dz_dtype_size(ts[i].dtype), i};
    }
    if (s == DZ_OK) s = check_unique_names(path, ts, count, err);
    if (s != DZ_OK) {
        free(nbytes);
        return s;
    }
    qsort(order, (size_t)count, sizeof *order, cmp_order);
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    int ok = root && meta && cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (int k = 0; k < count && ok; k++) {
        const dz_st_write_tensor *t = &ts[order[k].idx];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = e ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        ok = e && shape && offs && cJSON_AddStringToObject(e, "dtype", dz_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim && ok; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += nbytes[order[k].idx];
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        if (off > (uint64_t)ST_MAX_JSON_INT) {
            cJSON_Delete(root);
            free(nbytes);
            return dz_fail(err, DZ_ERR_INVALID, "%s: data too large for JSON offsets", path);
        }
    }
    free(nbytes);
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory building the header", path);
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    char *buf = malloc(8 + padded);
    if (!buf) {
        free(json);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory building the header", path);
    }
    write_le64((unsigned char *)buf, padded);
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', padded - n);
    free(json);
    *text = buf;
    *len = 8 + padded;
    return DZ_OK;
}

/* Streams header then tensor data straight from the caller's buffers, so a
 * multi-GB model is never copied in memory. */
dz_status dz_safetensors_write(const char *path, const dz_st_write_tensor *tensors, int count,
                               dz_error *err) {
    return dz_safetensors_write_releasing(path, tensors, count, NULL, err);
}

dz_status dz_safetensors_write_releasing(const char *path, const dz_st_write_tensor *tensors, int count,
                                         const unsigned char *release, dz_error *err) {
    return dz_safetensors_write_converted(path, tensors, count, release, NULL, err);
}

dz_status dz_safetensors_write_converted(const char *path, const dz_st_write_tensor *tensors, int count,
                                         const unsigned char *release, const dz_dtype *from, dz_error *err) {
    if (count < 0 || (count > 0 && !tensors))
        return dz_fail(err, DZ_ERR_INVALID, "%s: bad tensor list", path);
    st_order *order = calloc(count ? (size_t)count : 1, sizeof *order);
    if (!order) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    char *header = NULL;
    size_t hlen = 0;
    dz_status s = build_header(path, tensors, count, order, &header, &hlen, err);
    if (s != DZ_OK) {
        free(order);
        return s;
    }
    char tmp[4096];
    int fd = -1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp) {
        s = dz_fail(err, DZ_ERR_INVALID, "%s: path too long", path);
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        s = dz_fail(err, DZ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    int bad = dz_io_write_all(fd, header, hlen);
    for (int k = 0; k < count && !bad; k++) {
        const dz_st_write_tensor *t = &tensors[order[k].idx];
        size_t n = dz_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d]; /* checked in build_header */
        const void *src = t->data;
        size_t src_bytes = n;
        if (from && from[order[k].idx] != t->dtype) {
            const dz_dtype fdt = from[order[k].idx];
            const size_t count_el = n / dz_dtype_size(t->dtype), fsz = dz_dtype_size(fdt);
            src_bytes = count_el * fsz;
            float wide[4096];
            unsigned char out[4096 * 8];
            for (size_t i = 0; i < count_el && !bad; i += 4096) {
                const size_t c = count_el - i < 4096 ? count_el - i : 4096;
                dz_to_f32(wide, (const char *)src + i * fsz, fdt, c);
                dz_from_f32(out, t->dtype, wide, c);
                bad = dz_io_write_all(fd, out, c * dz_dtype_size(t->dtype));
            }
        } else {
            bad = dz_io_write_all(fd, t->data, n);
        }
        if (release && release[order[k].idx]) { /* keeps the peak near one tensor when copying a mapped model */
            const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)src;
            const uintptr_t lo = (a + page - 1) / page * page, hi = (a + src_bytes) / page * page;
            if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        }
    }
    if (bad || dz_io_fsync(fd) != 0) {
        s = dz_fail(err, DZ_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    if (close(fd) != 0) {
        s = dz_fail(err, DZ_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        s = dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    s = dz_io_fsync_parent(path, err);
out:
    free(header);
    free(order);
    return s;
}

/* ---- Hugging Face checkpoint folders ---- */

static dz_status open_shard(dz_hf_checkpoint *ck, const char *file, const char *what, dz_error *err) {
    dz_status s = dz_path_check_inside(ck->dir, file, what, err);
    if (s != DZ_OK) return s;
    char path[4096];
    if (dz_path_join(path, sizeof path, ck->dir, file) != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", ck->dir);
    s = dz_safetensors_open(path, &ck->files[ck->n_files], err);
    if (s == DZ_OK) ck->n_files++;
    return s;
}

/* Index of the shard already opened for file, or -1. */
static int shard_index(const dz_hf_checkpoint *ck, const char *file) {
    size_t dl = strlen(ck->dir);
    for (int i = 0; i < ck->n_files; i++) {
        const char *p = ck->files[i].path;
        if (!strncmp(p, ck->dir, dl) && p[dl] == '/' && !strcmp(p + dl + 1, file)) return i;
    }
    return -1;
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const dz_hf_index_entry *)a)->name, ((const dz_hf_index_entry *)b)->name);
}

/* A tensor in two shards is ambiguous whatever the index says: refuse it. */
static dz_status refuse_duplicates(const dz_hf_checkpoint *ck, const char *ipath, dz_error *err) {
    for (int i = 0; i < ck->n_files; i++)
        for (int k = 0; k < ck->files[i].count; k++)
            for (int j = i + 1; j < ck->n_files; j++)
                if (dz_safetensors_find(&ck->files[j], ck->files[i].tensors[k].name))
                    return dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is in two shards, %s and %s", ipath,
                                   ck->files[i].tensors[k].name, ck->files[i].path, ck->files[j].path);
    return DZ_OK;
}

static dz_status open_from_index(dz_hf_checkpoint *ck, const char *ipath, dz_error *err) {
    char *text = NULL;
    dz_status s = dz_read_file(ipath, &text, NULL, err);
    if (s != DZ_OK) return s;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!root) s = dz_fail(err, DZ_ERR_FORMAT, "%s: malformed JSON", ipath);
    else if (!cJSON_IsObject(wm) || !wm->child)
        s = dz_fail(err, DZ_ERR_FORMAT, "%s: field 'weight_map' is %s", ipath,
                    !wm ? "missing" : !cJSON_IsObject(wm) ? "not an object" : "empty");
    int cap = s == DZ_OK ? cJSON_GetArraySize(wm) : 0;
    if (s == DZ_OK && (!(ck->files = calloc((size_t)cap, sizeof *ck->files)) ||
                       !(ck->index = calloc((size_t)cap, sizeof *ck->index))))
        s = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ipath);
    /* First pass: open each distinct shard once, in order of first mention. */
    char what[320];
    for (const cJSON *e = s == DZ_OK ? wm->child : NULL; e && s == DZ_OK; e = e->next) {
        snprintf(what, sizeof what, "model.safetensors.index.json weight_map['%.256s']", e->string);
        if (!cJSON_IsString(e))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: %s is not a file name", ck->dir, what);
        else if (shard_index(ck, e->valuestring) < 0)
            s = open_shard(ck, e->valuestring, what, err);
    }
    /* Second pass: every listed tensor is where the index says, and is listed once. */
    for (const cJSON *e = s == DZ_OK ? wm->child : NULL; e && s == DZ_OK; e = e->next) {
        const int i = shard_index(ck, e->valuestring);
        if (!dz_safetensors_find(&ck->files[i], e->string))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: tensor '%s' is listed in '%s' but that file lacks it",
                        ipath, e->string, e->valuestring);
        else if (!(ck->index[ck->n_index].name = strdup(e->string)))
            s = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ipath);
        else
            ck->index[ck->n_index++].file = i;
    }
    if (s == DZ_OK) qsort(ck->index, (size_t)ck->n_index, sizeof *ck->index, entry_cmp);
    for (int k = 1; s == DZ_OK && k < ck->n_index; k++)
        if (!strcmp(ck->index[k - 1].name, ck->index[k].name))
            s = dz_fail(err, DZ_ERR_FORMAT, "%s: weight_map lists tensor '%s' twice", ipath, ck->index[k].name);
    if (s == DZ_OK) s = refuse_duplicates(ck, ipath, err);
    cJSON_Delete(root);
    return s;
}

dz_status dz_hf_checkpoint_open(const char *dir, dz_hf_checkpoint *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    char single[4096], index[4096];
    if (dz_path_join(single, sizeof single, dir, "model.safetensors") != 0 ||
        dz_path_join(index, sizeof index, dir, "model.safetensors.index.json") != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    out->dir = strdup(dir);
    if (!out->dir) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    dz_status s;
    if (dz_file_exists(single)) {
        out->files = calloc(1, sizeof *out->files);
        s = out->files ? open_shard(out, "model.safetensors", "the checkpoint", err)
                       : dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    } else if (dz_file_exists(index)) {
        s = dz_path_check_inside(dir, "model.safetensors.index.json", "the shard index", err);
        if (s == DZ_OK) s = open_from_index(out, index, err);
    } else {
        s = dz_fail(err, DZ_ERR_NOT_FOUND,
                    "%s: neither model.safetensors nor model.safetensors.index.json is there", dir);
    }
    if (s != DZ_OK) dz_hf_checkpoint_close(out);
    return s;
}

void dz_hf_checkpoint_close(dz_hf_checkpoint *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n_files; i++) dz_safetensors_close(&ck->files[i]);
    for (int k = 0; k < ck->n_index; k++) free(ck->index[k].name);
    free(ck->index);
    free(ck->files);
    free(ck->dir);
    memset(ck, 0, sizeof *ck);
}

static int entry_key_cmp(const void *key, const void *e) {
    return strcmp(key, ((const dz_hf_index_entry *)e)->name);
}

const dz_st_tensor *dz_hf_checkpoint_find(const dz_hf_checkpoint *ck, const char *name, const char **file) {
    const dz_safetensors *from = ck->n_files > 0 ? &ck->files[0] : NULL;
    if (ck->index) { /* sharded: the index decides which shard, if any */
        const dz_hf_index_entry *e = bsearch(name, ck->index, (size_t)ck->n_index, sizeof *e, entry_key_cmp);
        from = e ? &ck->files[e->file] : NULL;
    }
    const dz_st_tensor *t = from ? dz_safetensors_find(from, name) : NULL;
    if (t && file) *file = from->path;
    return t;
}
