/* checkpoint-N/curvature.bin: HiZOO's curvature state beside the weights (the format is
 * curvature_file.h's). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/io.h"
#include "run/curvature_file.h"
#include "run/seedlog.h"

enum { HEADER_V1 = 32, HEADER_V2 = 40, MAX_VERSION = 2 };
static const char MAGIC[8] = {'D', 'Z', 'C', 'U', 'R', 'V', 0, 1};

static const char *layout_name(uint32_t layout) {
    return layout == 0 ? "diagonal, --hizoo-rank 0" : layout == 1 ? "rank-1 factors, --hizoo-rank 1" : "unknown";
}

/* The header of a layout's file into b; its size. */
static size_t header_of(unsigned char *b, size_t n, uint64_t fp, int layout) {
    const uint32_t version = layout ? 2 : 1, dtype = 0, lay = (uint32_t)layout, reserved = 0;
    const uint64_t count = n;
    memcpy(b, MAGIC, 8);
    memcpy(b + 8, &version, 4);
    memcpy(b + 12, &dtype, 4);
    memcpy(b + 16, &count, 8);
    memcpy(b + 24, &fp, 8);
    if (!layout) return HEADER_V1;
    memcpy(b + 32, &lay, 4);
    memcpy(b + 36, &reserved, 4);
    return HEADER_V2;
}

static dz_status write_to(int fd, const char *path, const float *h, size_t n, uint64_t fp, int layout, dz_error *err) {
    unsigned char head[HEADER_V2];
    const size_t hn = header_of(head, n, fp, layout);
    uint32_t crc = dz_crc32(dz_crc32(0, head, hn), h, n * sizeof(float));
    if (dz_io_write_all(fd, head, hn) != 0 || dz_io_write_all(fd, h, n * sizeof(float)) != 0 ||
        dz_io_write_all(fd, &crc, 4) != 0 || dz_io_fsync(fd) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return DZ_OK;
}

dz_status dz_curvature_save(const char *dir, const float *h, size_t n, uint64_t table_fp, int layout,
                            dz_error *err) {
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/%s", dir, DZ_CURVATURE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return dz_fail(err, DZ_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    dz_status st = write_to(fd, tmp, h, n, table_fp, layout, err);
    if (close(fd) != 0 && st == DZ_OK) st = dz_fail(err, DZ_ERR_IO, "%s: cannot close: %s", tmp, strerror(errno));
    if (st == DZ_OK && rename(tmp, path) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
    if (st != DZ_OK) unlink(tmp);
    return st;
}

/* All n bytes or the reason: 0, or -1 (errno; 0 at the end of the file). */
static int read_all(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        const ssize_t r = dz_io_read(fd, (char *)buf + got, n - got);
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* The first 32 bytes: magic, version, dtype (the layout is read after them). */
static dz_status check_kind(const char *path, const unsigned char *b, uint32_t *version, dz_error *err) {
    uint32_t dtype;
    memcpy(version, b + 8, 4), memcpy(&dtype, b + 12, 4);
    if (memcmp(b, MAGIC, 8) != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field magic: not a distzo curvature file", path);
    if (*version < 1 || *version > MAX_VERSION)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field version is %" PRIu32 ", this distzo reads 1 and 2", path,
                       *version);
    if (dtype != 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: field dtype is %" PRIu32 ", expected 0 (f32)", path, dtype);
    return DZ_OK;
}

/* Layout, count and fingerprint against the run's. */
static dz_status check_shape(const char *path, const unsigned char *b, uint32_t version, size_t n, uint64_t fp,
                             int layout, dz_error *err) {
    uint32_t file_layout = 0;
    uint64_t count, file_fp;
    memcpy(&count, b + 16, 8), memcpy(&file_fp, b + 24, 8);
    if (version == 2) memcpy(&file_layout, b + 32, 4);
    if (file_layout != (uint32_t)layout)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field layout is %" PRIu32 " (%s), this run keeps %d (%s)", path,
                       file_layout, layout_name(file_layout), layout, layout_name((uint32_t)layout));
    if (count != n)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field n_floats is %" PRIu64 ", the trained parameters' state is %zu: "
                       "the curvature of another model", path, count, n);
    if (file_fp != fp)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field table_fingerprint is %016" PRIx64 ", the trained tensors' is "
                       "%016" PRIx64 ": the curvature of another model", path, file_fp, fp);
    return DZ_OK;
}

/* The header (its size into *hn) read and checked. */
static dz_status read_header(int fd, const char *path, unsigned char *head, size_t *hn, size_t n, uint64_t fp,
                             int layout, dz_error *err) {
    uint32_t version = 0;
    *hn = HEADER_V1;
    if (read_all(fd, head, HEADER_V1) != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: field header: the file is shorter than its %d bytes", path, HEADER_V1);
    dz_status st = check_kind(path, head, &version, err);
    if (st == DZ_OK && version == 2 && read_all(fd, head + HEADER_V1, HEADER_V2 - HEADER_V1) != 0)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field layout: the file is shorter than its %d-byte header", path,
                     HEADER_V2);
    if (version == 2) *hn = HEADER_V2;
    return st == DZ_OK ? check_shape(path, head, version, n, fp, layout, err) : st;
}

dz_status dz_curvature_load(const char *dir, float *h, size_t n, uint64_t table_fp, int layout, dz_error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, DZ_CURVATURE_FILE);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: cannot open the checkpoint's curvature state (--estimator hizoo): %s",
                       path, strerror(errno));
    unsigned char head[HEADER_V2], extra;
    size_t hn = HEADER_V1;
    uint32_t crc = 0;
    dz_status st = read_header(fd, path, head, &hn, n, table_fp, layout, err);
    if (st == DZ_OK && (read_all(fd, h, n * sizeof(float)) != 0 || read_all(fd, &crc, 4) != 0))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field data: the file ends before its %zu floats and CRC", path, n);
    if (st == DZ_OK && dz_io_read(fd, &extra, 1) != 0)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field crc32: bytes follow it (the file is longer than its header says)",
                     path);
    if (st == DZ_OK && crc != dz_crc32(dz_crc32(0, head, hn), h, n * sizeof(float)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: field crc32 does not match the data: the file is damaged", path);
    close(fd);
    return st;
}

uint32_t dz_curvature_checksum(const float *h, size_t n) { return dz_crc32(0, h, n * sizeof(float)); }
