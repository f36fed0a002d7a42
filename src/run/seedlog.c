/* The seed log (format and crash rules in seedlog.h). */
#include "run/seedlog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/io.h"
#include "core/util.h"
#include "distzo/log.h"

static const char MAGIC[8] = {'D', 'Z', 'S', 'E', 'E', 'D', 'L', 'G'};
enum { HEADER_CRC_AT = DZ_SEEDLOG_HEADER_BYTES - 4 };

struct dz_seedlog {
    char *path;
    int fd;
    dz_seedlog_header h;
    size_t rec_bytes;
    uint8_t *rec;         /* one encoded record */
    float *lr, *g;        /* lr[i], g[i * q + j] */
    size_t n, cap;
    off_t size;           /* header + the n records */
    int sync_every, unsynced;
    int readonly;         /* dz_seedlog_open_read: never written */
    int quiet_tail;       /* dz_seedlog_peek: a torn tail unsaid (the writer's open says it) */
};

/* Reflected CRC-32, polynomial 0xEDB88320, four bits at a time. */
uint32_t dz_crc32(uint32_t crc, const void *data, size_t len) {
    static const uint32_t nibble[16] = {
        0x00000000, 0x1DB71064, 0x3B6E20C8, 0x26D930AC, 0x76DC4190, 0x6B6B51F4, 0x4DB26158, 0x5005713C,
        0xEDB88320, 0xF00F9344, 0xD6D6A3E8, 0xCB61B38C, 0x9B64C2B0, 0x86D3D2D4, 0xA00AE278, 0xBDBDF21C,
    };
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ nibble[crc & 15];
        crc = (crc >> 4) ^ nibble[crc & 15];
    }
    return ~crc;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_f32(uint8_t *p, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(p, u);
}

static float get_f32(const uint8_t *p) {
    uint32_t u = get_u32(p);
    float v;
    memcpy(&v, &u, 4);
    return v;
}

size_t dz_seedlog_record_bytes(uint32_t q) { return 12 + 4 * (size_t)q; }

void dz_seedlog_encode_record(uint32_t q, uint32_t step, float lr, const float *g, uint8_t *out) {
    put_u32(out, step);
    put_f32(out + 4, lr);
    for (uint32_t j = 0; j < q; j++) put_f32(out + 8 + 4 * j, g[j]);
    put_u32(out + 8 + 4 * q, dz_crc32(0, out, 8 + 4 * (size_t)q));
}

int dz_seedlog_decode_record(uint32_t q, const uint8_t *in, uint32_t *step, float *lr, float *g) {
    if (get_u32(in + 8 + 4 * q) != dz_crc32(0, in, 8 + 4 * (size_t)q)) return -1;
    *step = get_u32(in);
    *lr = get_f32(in + 4);
    for (uint32_t j = 0; j < q; j++) g[j] = get_f32(in + 8 + 4 * j);
    return 0;
}

static uint32_t rng_version(const dz_seedlog_header *h) { return h->rng == 0 ? 1 : h->rng; }

static void encode_header(const dz_seedlog_header *h, uint8_t out[DZ_SEEDLOG_HEADER_BYTES]) {
    memcpy(out, MAGIC, 8);
    put_u32(out + 8, DZ_SEEDLOG_VERSION);
    put_u32(out + 12, h->q);
    put_u32(out + 16, (uint32_t)h->run_seed);
    put_u32(out + 20, (uint32_t)(h->run_seed >> 32));
    put_u32(out + 24, h->dist | (rng_version(h) - 1) << 16);
    put_f32(out + 28, h->eps);
    put_u32(out + 32, h->start_step);
    memcpy(out + 36, h->fingerprint, 64);
    put_u32(out + HEADER_CRC_AT, dz_crc32(0, out, HEADER_CRC_AT));
}

static dz_status check_fields(const char *path, const dz_seedlog_header *h, dz_status code, dz_error *err) {
    if (h->q < 1 || h->q > DZ_SEEDLOG_MAX_Q)
        return dz_fail(err, code, "%s: q (samples per step) %" PRIu32 " is not in 1..%u", path, h->q,
                       DZ_SEEDLOG_MAX_Q);
    if (h->dist > DZ_SEEDLOG_GAUSSIAN)
        return dz_fail(err, code, "%s: perturbation distribution %" PRIu32 " is not 0 (Rademacher) or 1 (Gaussian)",
                       path, h->dist);
    if (rng_version(h) > 2)
        return dz_fail(err, code, "%s: ZO_RNG version %" PRIu32 " is not 1 or 2 (--rng v1|v2)", path, h->rng);
    if (!isfinite(h->eps) || h->eps <= 0)
        return dz_fail(err, code, "%s: eps %g is not a positive finite number", path, (double)h->eps);
    return DZ_OK;
}

static dz_status decode_header(const char *path, const uint8_t *buf, size_t len, dz_seedlog_header *h,
                               dz_error *err) {
    if (len < 8 || memcmp(buf, MAGIC, 8) != 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: not a distzo seed log (no \"DZSEEDLG\" magic at byte 0)", path);
    if (len < DZ_SEEDLOG_HEADER_BYTES)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: truncated header: %zu bytes, need %d", path, len,
                       DZ_SEEDLOG_HEADER_BYTES);
    uint32_t version = get_u32(buf + 8);
    if (version != DZ_SEEDLOG_VERSION)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: seed log version %" PRIu32 "; this build reads version %u",
                       path, version, DZ_SEEDLOG_VERSION);
    if (get_u32(buf + HEADER_CRC_AT) != dz_crc32(0, buf, HEADER_CRC_AT))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: header CRC mismatch (the header is corrupt)", path);
    h->q = get_u32(buf + 12);
    h->run_seed = (uint64_t)get_u32(buf + 16) | (uint64_t)get_u32(buf + 20) << 32;
    h->dist = get_u32(buf + 24) & 0xFFFFu;
    h->rng = (get_u32(buf + 24) >> 16) + 1;
    h->eps = get_f32(buf + 28);
    h->start_step = get_u32(buf + 32);
    memcpy(h->fingerprint, buf + 36, 64);
    return check_fields(path, h, DZ_ERR_FORMAT, err);
}

static const char *dist_name(uint32_t dist) { return dist == DZ_SEEDLOG_RADEMACHER ? "rademacher" : "gaussian"; }

dz_status dz_seedlog_check_settings(const char *path, const dz_seedlog_header *got, const dz_seedlog_header *want,
                                    dz_error *err) {
    if (got->run_seed != want->run_seed)
        return dz_fail(err, DZ_ERR_INVALID, "%s: run seed %" PRIu64 " in the log, %" PRIu64 " in run.json: the log is "
                       "not this run's", path, got->run_seed, want->run_seed);
    if (got->q != want->q)
        return dz_fail(err, DZ_ERR_INVALID, "%s: q (values a record) %" PRIu32 " in the log, %" PRIu32 " expected from "
                       "run.json's --spsa-samples and --estimator", path, got->q, want->q);
    if (got->dist != want->dist)
        return dz_fail(err, DZ_ERR_INVALID, "%s: the log was written with --perturbation %s, run.json's \"rademacher\" "
                       "says %s: a seed log is never replayed or resumed with another distribution", path,
                       dist_name(got->dist), dist_name(want->dist));
    if (rng_version(got) != rng_version(want))
        return dz_fail(err, DZ_ERR_INVALID, "%s: the log was written with --rng v%" PRIu32 ", this run uses --rng v%" PRIu32
                       ": a seed log is never replayed or resumed with another ZO_RNG version", path,
                       rng_version(got), rng_version(want));
    if (memcmp(&got->eps, &want->eps, sizeof got->eps) != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: eps %.9g in the log, %.9g in run.json", path, (double)got->eps,
                       (double)want->eps);
    return DZ_OK;
}

/* The log must belong to the run resuming it. */
static dz_status match_header(const char *path, const dz_seedlog_header *got, const dz_seedlog_header *want,
                              dz_error *err) {
    dz_status st = dz_seedlog_check_settings(path, got, want, err);
    if (st != DZ_OK) return st;
    if (got->start_step != want->start_step)
        return dz_fail(err, DZ_ERR_INVALID, "%s: start step %" PRIu32 " in the log, %" PRIu32 " expected", path,
                       got->start_step, want->start_step);
    if (memcmp(got->fingerprint, want->fingerprint, 64) != 0)
        return dz_fail(err, DZ_ERR_INVALID, "%s: base model fingerprint \"%.64s\" in the log differs from \"%.64s\"",
                       path, (const char *)got->fingerprint, (const char *)want->fingerprint);
    return DZ_OK;
}

static int reserve(dz_seedlog *log, size_t n) {
    if (n <= log->cap) return 0;
    size_t cap = log->cap ? log->cap : 1024;
    while (cap < n) cap *= 2;
    float *lr = realloc(log->lr, cap * sizeof *lr);
    if (lr) log->lr = lr;
    float *g = lr ? realloc(log->g, cap * log->h.q * sizeof *g) : NULL;
    if (!g) return -1;
    log->g = g;
    log->cap = cap;
    return 0;
}

static void free_log(dz_seedlog *log) {
    if (!log) return;
    if (log->fd >= 0) close(log->fd);
    free(log->path);
    free(log->rec);
    free(log->lr);
    free(log->g);
    free(log);
}

static dz_status read_all(dz_seedlog *log, uint8_t **out, size_t *len, dz_error *err) {
    struct stat st;
    if (fstat(log->fd, &st) != 0) return dz_fail(err, DZ_ERR_IO, "%s: stat failed: %s", log->path, strerror(errno));
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory reading %zu bytes", log->path, size);
    while (got < size) {
        ssize_t r = dz_io_pread(log->fd, buf + got, size - got, (off_t)got);
        if (r <= 0) {
            free(buf);
            return dz_fail(err, DZ_ERR_IO, "%s: read failed at byte %zu: %s", log->path, got,
                           r < 0 ? strerror(errno) : "unexpected end of file");
        }
        got += (size_t)r;
    }
    *out = buf;
    *len = size;
    return DZ_OK;
}

static int record_ok(const uint8_t *r, size_t rec_bytes) {
    return get_u32(r + rec_bytes - 4) == dz_crc32(0, r, rec_bytes - 4);
}

/* Cuts the file to the header and its first keep records, durably. */
static dz_status cut_to(dz_seedlog *log, size_t keep, dz_error *err) {
    off_t size = DZ_SEEDLOG_HEADER_BYTES + (off_t)(keep * log->rec_bytes);
    if (ftruncate(log->fd, size) != 0 || dz_io_fdatasync(log->fd) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: cannot truncate to %lld bytes: %s", log->path, (long long)size,
                       strerror(errno));
    log->size = size;
    log->n = keep;
    log->unsynced = 0;
    return DZ_OK;
}

/* What a crash can leave after the last good record: part of one record (each append is
 * one write), or zeros (blocks the file system allocated but never wrote, after a crash
 * of the machine). A whole record with other bytes and a bad CRC is damage, not a crash. */
static int crash_tail(const uint8_t *tail, size_t n, size_t rec_bytes) {
    if (n < rec_bytes) return 1;
    for (size_t i = 0; i < n; i++)
        if (tail[i]) return 0;
    return 1;
}

/* Checks the records of buf and keeps the good ones in memory. A crash's tail is cut off
 * the file by a writer, and only ignored by a reader (writable = 0). */
static dz_status load_records(dz_seedlog *log, const uint8_t *buf, size_t len, int writable, dz_error *err) {
    const size_t rb = log->rec_bytes, q = log->h.q;
    size_t whole = (len - DZ_SEEDLOG_HEADER_BYTES) / rb;
    const uint8_t *rec0 = buf + DZ_SEEDLOG_HEADER_BYTES;
    size_t good = whole; /* records before the bad tail */
    while (good > 0 && !record_ok(rec0 + (good - 1) * rb, rb)) good--;
    if (reserve(log, good)) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory for %zu records", log->path, good);
    for (size_t i = 0; i < good; i++) {
        const uint8_t *r = rec0 + i * rb;
        long long at = (long long)(DZ_SEEDLOG_HEADER_BYTES + i * rb);
        if (!record_ok(r, rb))
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s: record %zu (byte %lld) fails its CRC check but later records are intact: the log is "
                           "corrupt",
                           log->path, i + 1, at);
        uint32_t want = log->h.start_step + (uint32_t)i, step = get_u32(r);
        if (step != want)
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s: record %zu (byte %lld) has step %" PRIu32 ", expected %" PRIu32
                           " (records are consecutive steps from the start step)",
                           log->path, i + 1, at, step, want);
        log->lr[i] = get_f32(r + 4);
        for (size_t j = 0; j < q; j++) log->g[i * q + j] = get_f32(r + 8 + 4 * j);
    }
    log->n = good;
    log->size = DZ_SEEDLOG_HEADER_BYTES + (off_t)(good * rb);
    size_t dropped = len - (size_t)log->size;
    if (dropped == 0) return DZ_OK;
    if (!crash_tail(rec0 + good * rb, dropped, rb))
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: record %zu (byte %lld) is whole but fails its CRC check: the log is damaged (a crash "
                       "leaves at most an incomplete last record, or zeros); refusing to drop it",
                       log->path, good + 1, (long long)log->size);
    if (!log->quiet_tail)
        dz_log(DZ_LOG_WARN, "%s: %s a torn tail of %zu bytes after record %zu: the writer stopped while appending",
               log->path, writable ? "dropping" : "ignoring (the writer repairs it)", dropped, good);
    return writable ? cut_to(log, good, err) : DZ_OK;
}

/* Opens path for appending (writable: locked, a crash's tail cut) or for reading only. */
static dz_status open_log(const char *path, const dz_seedlog_header *expect, int sync_every, int writable,
                          int quiet_tail, dz_seedlog **out, dz_error *err) {
    *out = NULL;
    if (!path || sync_every < 0) return dz_fail(err, DZ_ERR_INVALID, "seed log: need a path and sync_every >= 0");
    dz_seedlog *log = calloc(1, sizeof *log);
    if (!log || !(log->path = strdup(path))) {
        free(log);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    log->sync_every = sync_every;
    log->readonly = !writable;
    log->quiet_tail = quiet_tail;
    log->fd = open(path, (writable ? O_RDWR | O_APPEND : O_RDONLY) | O_CLOEXEC);
    dz_status st = DZ_OK;
    if (log->fd < 0)
        st = dz_fail(err, errno == ENOENT ? DZ_ERR_NOT_FOUND : DZ_ERR_IO, "%s: cannot open seed log: %s", path,
                     strerror(errno));
    else if (writable && flock(log->fd, LOCK_EX | LOCK_NB) != 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: seed log is locked by another process (%s)", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st == DZ_OK) st = read_all(log, &buf, &len, err);
    if (st == DZ_OK) st = decode_header(path, buf, len, &log->h, err);
    if (st == DZ_OK && expect) st = match_header(path, &log->h, expect, err);
    if (st == DZ_OK) {
        log->rec_bytes = dz_seedlog_record_bytes(log->h.q);
        if (!(log->rec = malloc(log->rec_bytes))) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == DZ_OK) st = load_records(log, buf, len, writable, err);
    free(buf);
    if (st != DZ_OK) {
        free_log(log);
        return st;
    }
    *out = log;
    return DZ_OK;
}

dz_status dz_seedlog_open(const char *path, const dz_seedlog_header *expect, int sync_every, dz_seedlog **out,
                          dz_error *err) {
    return open_log(path, expect, sync_every, 1, 0, out, err);
}

dz_status dz_seedlog_open_read(const char *path, const dz_seedlog_header *expect, dz_seedlog **out, dz_error *err) {
    return open_log(path, expect, 0, 0, 0, out, err);
}

dz_status dz_seedlog_peek(const char *path, const dz_seedlog_header *expect, dz_seedlog **out, dz_error *err) {
    return open_log(path, expect, 0, 0, 1, out, err);
}

dz_status dz_seedlog_create(const char *path, const dz_seedlog_header *h, int sync_every, dz_seedlog **out,
                            dz_error *err) {
    *out = NULL;
    if (!path || !h) return dz_fail(err, DZ_ERR_INVALID, "seed log: create needs a path and a header");
    dz_status st = check_fields(path, h, DZ_ERR_INVALID, err);
    if (st != DZ_OK) return st;
    if (dz_file_exists(path))
        return dz_fail(err, DZ_ERR_INVALID, "%s: a seed log already exists (open it to resume, or use a new run folder)",
                       path);
    uint8_t header[DZ_SEEDLOG_HEADER_BYTES];
    encode_header(h, header);
    st = dz_write_file_atomic(path, header, sizeof header, err);
    return st == DZ_OK ? dz_seedlog_open(path, h, sync_every, out, err) : st;
}

dz_status dz_seedlog_sync(dz_seedlog *log, dz_error *err) {
    if (log->unsynced == 0) return DZ_OK;
    if (dz_io_fdatasync(log->fd) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: fdatasync failed: %s", log->path, strerror(errno));
    log->unsynced = 0;
    return DZ_OK;
}

dz_status dz_seedlog_append(dz_seedlog *log, uint32_t step, float lr, const float *g, dz_error *err) {
    if (!log || !g) return dz_fail(err, DZ_ERR_INVALID, "seed log: append needs a log and g");
    if (log->readonly) return dz_fail(err, DZ_ERR_INVALID, "%s: opened for reading only", log->path);
    uint32_t next = dz_seedlog_next_step(log);
    if (step != next)
        return dz_fail(err, DZ_ERR_INVALID, "%s: appending step %" PRIu32 ", but the next step is %" PRIu32, log->path,
                       step, next);
    if (reserve(log, log->n + 1)) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", log->path);
    const uint32_t q = log->h.q;
    uint8_t *r = log->rec;
    dz_seedlog_encode_record(q, step, lr, g, r);
    /* One write() for the record, so a killed process leaves it whole or absent. */
    for (size_t done = 0; done < log->rec_bytes;) {
        ssize_t w = dz_io_write(log->fd, r + done, log->rec_bytes - done);
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            int cut = ftruncate(log->fd, log->size); /* best effort: the next open drops a partial record anyway */
            (void)cut;
            return dz_fail(err, DZ_ERR_IO, "%s: appending step %" PRIu32 " failed: %s", log->path, step, strerror(e));
        }
        done += (size_t)w;
    }
    log->lr[log->n] = lr;
    memcpy(log->g + log->n * q, g, q * sizeof *g);
    log->n++;
    log->size += (off_t)log->rec_bytes;
    log->unsynced++;
    if (log->sync_every > 0 && log->unsynced >= log->sync_every) return dz_seedlog_sync(log, err);
    return DZ_OK;
}

dz_status dz_seedlog_close(dz_seedlog *log, dz_error *err) {
    if (!log) return DZ_OK;
    dz_status st = dz_seedlog_sync(log, err);
    free_log(log);
    return st;
}

const dz_seedlog_header *dz_seedlog_get_header(const dz_seedlog *log) { return &log->h; }
size_t dz_seedlog_count(const dz_seedlog *log) { return log->n; }
uint32_t dz_seedlog_next_step(const dz_seedlog *log) { return log->h.start_step + (uint32_t)log->n; }

dz_seedlog_record dz_seedlog_get(const dz_seedlog *log, size_t i) {
    dz_seedlog_record r = {0, 0.0f, NULL};
    if (i >= log->n) return r;
    r.step = log->h.start_step + (uint32_t)i;
    r.lr = log->lr[i];
    r.g = log->g + i * log->h.q;
    return r;
}

dz_status dz_seedlog_replay_range(const dz_seedlog *log, int64_t ckpt_step, size_t *first, size_t *count,
                                  dz_error *err) {
    int64_t base = (int64_t)log->h.start_step - 1, last = base + (int64_t)log->n;
    if (ckpt_step < base)
        return dz_fail(err, DZ_ERR_INVALID,
                       "%s: checkpoint step %" PRId64 " is before the log's start (its first step is %" PRIu32 ")",
                       log->path, ckpt_step, log->h.start_step);
    if (ckpt_step > last)
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s: the log ends at step %" PRId64 " but the checkpoint is at step %" PRId64
                       ": steps %" PRId64 "..%" PRId64 " are missing (the log must be synced before a checkpoint)",
                       log->path, last, ckpt_step, last + 1, ckpt_step);
    *first = (size_t)(ckpt_step - base);
    *count = log->n - *first;
    return DZ_OK;
}

dz_status dz_seedlog_truncate_after(dz_seedlog *log, int64_t step, dz_error *err) {
    if (log->readonly) return dz_fail(err, DZ_ERR_INVALID, "%s: opened for reading only", log->path);
    if (step >= (int64_t)log->h.start_step - 1 + (int64_t)log->n) return DZ_OK;
    size_t first = 0, count = 0;
    dz_status st = dz_seedlog_replay_range(log, step, &first, &count, err);
    if (st != DZ_OK || count == 0) return st;
    return cut_to(log, first, err);
}
