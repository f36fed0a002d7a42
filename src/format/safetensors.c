/* safetensors reader (the writer: safetensors_write.c; Hugging Face checkpoint folders:
 * hf_checkpoint.c).
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

/* A JSON number that is a non-negative integer small enough to be exact. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= DZ_ST_MAX_JSON_INT)) return -1; /* also rejects NaN */
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
    void *map;
    size_t size;
    dz_status s = dz_map_file(path, 8, &map, &size, err);
    if (s == DZ_ERR_FORMAT)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length", path, size);
    if (s != DZ_OK) return s;
    s = dz_safetensors_parse(path, map, size, out, err);
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
