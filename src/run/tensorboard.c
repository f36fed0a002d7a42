/* TensorBoard event files: TFRecord framing and the Event/Summary protobuf by hand (the
 * format is in tensorboard.h). */
#include "run/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/io.h"
#include "distzo/util.h"

#define TB_BUF 8192 /* queued records: a step's few scalars fit many times over */

struct dz_tb_writer {
    char *path;
    int fd;
    size_t used;
    uint8_t buf[TB_BUF];
};

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t dz_crc32c(const void *data, size_t n) {
    static int ready; /* the table is the same whoever builds it first: a race writes equal values */
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        crc_init();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t dz_crc32c_masked(const void *data, size_t n) {
    const uint32_t c = dz_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- protobuf, the few wire types used ---- */

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static size_t put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

/* Event{wall_time, step, and file_version or summary{value{tag, simple_value}}} into p
 * (room: 64 + the strings' lengths); returns its size. */
static size_t put_event(uint8_t *p, double wall_time, int64_t step, const char *file_version, const char *tag,
                        float value) {
    size_t n = 0;
    uint64_t bits;
    memcpy(&bits, &wall_time, sizeof bits);
    p[n++] = 0x09; /* 1: wall_time, fixed64 */
    n += put_le(p + n, bits, 8);
    p[n++] = 0x10; /* 2: step, varint (two's complement for a negative one) */
    n += put_varint(p + n, (uint64_t)step);
    if (file_version) {
        const size_t len = strlen(file_version);
        p[n++] = 0x1a; /* 3: file_version, string */
        n += put_varint(p + n, len);
        memcpy(p + n, file_version, len);
        return n + len;
    }
    const size_t tag_len = strlen(tag);
    uint8_t val[256]; /* Value: 1 tag, 2 simple_value */
    size_t v = 0;
    val[v++] = 0x0a;
    v += put_varint(val + v, tag_len);
    memcpy(val + v, tag, tag_len);
    v += tag_len;
    uint32_t fbits;
    memcpy(&fbits, &value, sizeof fbits);
    val[v++] = 0x15;
    v += put_le(val + v, fbits, 4);
    uint8_t hdr[8]; /* Summary: 1 value */
    size_t h = 0;
    hdr[h++] = 0x0a;
    h += put_varint(hdr + h, v);
    p[n++] = 0x2a; /* 5: summary */
    n += put_varint(p + n, h + v);
    memcpy(p + n, hdr, h);
    memcpy(p + n + h, val, v);
    return n + h + v;
}

/* TFRecord framing around an event of `len` bytes already at rec + 12. */
static size_t frame(uint8_t *rec, size_t len) {
    put_le(rec, len, 8);
    put_le(rec + 8, dz_crc32c_masked(rec, 8), 4);
    put_le(rec + 12 + len, dz_crc32c_masked(rec + 12, len), 4);
    return 12 + len + 4;
}

static size_t event_record(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *file_version,
                           const char *tag, float value) {
    const size_t strings = file_version ? strlen(file_version) : strlen(tag);
    if (strings > 200 || cap < 16 + 64 + strings) return 0;
    return frame(buf, put_event(buf + 12, wall_time, step, file_version, tag, value));
}

size_t dz_tb_scalar_record(uint8_t *buf, size_t cap, double wall_time, int64_t step, const char *tag, float value) {
    return event_record(buf, cap, wall_time, step, NULL, tag, value);
}

/* ---- the writer ---- */

double dz_tb_wall_time(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

dz_status dz_tb_open(const char *path, double wall_time, dz_tb_writer **out, dz_error *err) {
    *out = NULL;
    dz_tb_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    const size_t n = event_record(w->buf, sizeof w->buf, wall_time, 0, "brain.Event:2", NULL, 0.0f);
    dz_status st = dz_write_file_atomic(path, w->buf, n, err); /* created whole, with a durable entry */
    if (st == DZ_OK && (w->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    if (st != DZ_OK) {
        free(w->path);
        free(w);
        return st;
    }
    *out = w;
    return DZ_OK;
}

dz_status dz_tb_open_in(const char *dir, dz_tb_writer **out, dz_error *err) {
    char host[64] = "localhost", name[160], path[PATH_MAX];
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    const double now = dz_tb_wall_time();
    snprintf(name, sizeof name, "events.out.tfevents.%lld.%s.%ld", (long long)now, host, (long)getpid());
    if (dz_path_join(path, sizeof path, dir, name) != 0) return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    return dz_tb_open(path, now, out, err);
}

dz_status dz_tb_flush(dz_tb_writer *w, int sync, dz_error *err) {
    if (w->used && dz_io_write_all(w->fd, w->buf, w->used) != 0) {
        w->used = 0; /* dropped: the file keeps whole records up to here at worst */
        return dz_fail(err, DZ_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    w->used = 0;
    if (sync && dz_io_fsync(w->fd) != 0) return dz_fail(err, DZ_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
    return DZ_OK;
}

dz_status dz_tb_scalar(dz_tb_writer *w, double wall_time, int64_t step, const char *tag, float value,
                       dz_error *err) {
    size_t n = dz_tb_scalar_record(w->buf + w->used, sizeof w->buf - w->used, wall_time, step, tag, value);
    if (n == 0 && w->used) { /* full: write what is queued, then queue this one */
        dz_status st = dz_tb_flush(w, 0, err);
        if (st != DZ_OK) return st;
        n = dz_tb_scalar_record(w->buf, sizeof w->buf, wall_time, step, tag, value);
    }
    if (n == 0) return dz_fail(err, DZ_ERR_INVALID, "%s: tag '%.40s...' is too long", w->path, tag);
    w->used += n;
    return DZ_OK;
}

dz_status dz_tb_close(dz_tb_writer *w, dz_error *err) {
    if (!w) return DZ_OK;
    dz_status st = dz_tb_flush(w, 1, err);
    close(w->fd);
    free(w->path);
    free(w);
    return st;
}
