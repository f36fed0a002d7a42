/* safetensors writer: the header built from the tensor list, then the data streamed from
 * the caller's buffers into a temp file that is renamed over the target (safetensors.h). */
#include "format/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/io.h"

static void write_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

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
        if (off > (uint64_t)DZ_ST_MAX_JSON_INT) {
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
