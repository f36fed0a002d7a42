/* The run directory's durable files: the seed log (round trips, reopen, torn tails of every
 * length, CRC damage at the tail vs in the middle, non-consecutive steps, bad headers, a
 * writer killed with SIGKILL, resume ranges) and metrics.jsonl (format, resume rewrite).
 * Expected bytes come from the format as documented, encoded here by hand. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "distzo/log.h"
#include "run/metrics.h"
#include "run/seedlog.h"
#include "expect_error.h"
#include "ref_crc.h"

enum { HDR = DZ_SEEDLOG_HEADER_BYTES };

/* ---- scratch files and captured warnings ---- */

static char g_dir[256];
static int g_warnings;
static char g_last_warning[2048];

static void sink(dz_log_level level, const char *msg, void *user) {
    (void)user;
    if (level < DZ_LOG_WARN) return;
    g_warnings++;
    snprintf(g_last_warning, sizeof g_last_warning, "%s", msg);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dz_seedlog_test_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    dz_log_set_sink(sink, NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *path_of(const char *name) {
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static size_t file_size(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* The whole file, NUL-terminated (read with stdio, not the library). */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    buf[size] = 0;
    *len = (size_t)size;
    return buf;
}

static void spit(const char *path, const void *data, size_t len) {
    unlink(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ---- the format, written independently of seedlog.c ---- */

static void le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Bitwise CRC-32 (the textbook loop, not seedlog.c's table). */
static uint32_t ref_crc32(const uint8_t *p, size_t n) { return ref_crc_bitwise(0xEDB88320u, p, n); }

static dz_seedlog_header make_header(uint32_t q, uint32_t start) {
    dz_seedlog_header h;
    memset(&h, 0, sizeof h);
    h.run_seed = 0x0123456789ABCDEFull;
    h.q = q;
    h.dist = DZ_SEEDLOG_GAUSSIAN;
    h.eps = 1e-3f;
    h.start_step = start;
    snprintf((char *)h.fingerprint, sizeof h.fingerprint, "opt-125m sha256:%s", "5a1b2c3d4e5f");
    return h;
}

/* The test's values for step s, sample j: exact in float. */
static float g_of(uint32_t s, uint32_t j) { return (float)((int)(s % 1000) - 500) * 0.25f + (float)j; }
static float lr_of(uint32_t s) { return 1e-6f * (float)(1 + s % 3); }

static void ref_record(uint8_t *r, uint32_t q, uint32_t step, float lr, const float *g) {
    le32(r, step);
    le32(r + 4, fbits(lr));
    for (uint32_t j = 0; j < q; j++) le32(r + 8 + 4 * j, fbits(g[j]));
    le32(r + 8 + 4 * q, ref_crc32(r, 8 + 4 * q));
}

static dz_seedlog *create_ok(const char *path, const dz_seedlog_header *h, int sync_every) {
    dz_seedlog *log = NULL;
    dz_error err = {0};
    dz_status st = dz_seedlog_create(path, h, sync_every, &log, &err);
    if (st != DZ_OK) print_error("create %s: %s\n", path, err.msg);
    assert_int_equal(st, DZ_OK);
    return log;
}

static dz_seedlog *open_ok(const char *path, const dz_seedlog_header *expect) {
    dz_seedlog *log = NULL;
    dz_error err = {0};
    dz_status st = dz_seedlog_open(path, expect, 0, &log, &err);
    if (st != DZ_OK) print_error("open %s: %s\n", path, err.msg);
    assert_int_equal(st, DZ_OK);
    return log;
}

static void append_steps(dz_seedlog *log, uint32_t from, uint32_t to) {
    uint32_t q = dz_seedlog_get_header(log)->q;
    float g[64];
    dz_error err = {0};
    for (uint32_t s = from; s <= to; s++) {
        for (uint32_t j = 0; j < q; j++) g[j] = g_of(s, j);
        dz_status st = dz_seedlog_append(log, s, lr_of(s), g, &err);
        if (st != DZ_OK) print_error("append %u: %s\n", s, err.msg);
        assert_int_equal(st, DZ_OK);
    }
}

/* Every record holds the test's values for its step; steps start_step, start_step + 1, ... */
static void expect_records(const dz_seedlog *log, size_t n) {
    const dz_seedlog_header *h = dz_seedlog_get_header(log);
    assert_int_equal(dz_seedlog_count(log), n);
    for (size_t i = 0; i < n; i++) {
        dz_seedlog_record r = dz_seedlog_get(log, i);
        assert_int_equal(r.step, h->start_step + i);
        assert_int_equal(fbits(r.lr), fbits(lr_of(r.step)));
        for (uint32_t j = 0; j < h->q; j++) assert_int_equal(fbits(r.g[j]), fbits(g_of(r.step, j)));
    }
    assert_int_equal(dz_seedlog_next_step(log), h->start_step + n);
}

static void expect_open_error(const char *path, const dz_seedlog_header *expect, dz_status code, const char *needle,
                              const char *needle2) {
    dz_seedlog *log = (dz_seedlog *)1;
    dz_error err = {0};
    expect_error_naming(path, dz_seedlog_open(path, expect, 0, &log, &err), &err, code, needle, needle2);
    assert_null(log);
    assert_non_null(strstr(err.msg, path));
}

/* ---- seed log ---- */

static void crc32_check_value(void **state) {
    (void)state;
    /* The CRC-32 check value of "123456789" (the catalogue value of CRC-32/ISO-HDLC). */
    assert_int_equal(dz_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(ref_crc32((const uint8_t *)"123456789", 9), 0xCBF43926u);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 131 + 7);
    assert_int_equal(dz_crc32(0, buf, sizeof buf), ref_crc32(buf, sizeof buf));
    assert_int_equal(dz_crc32(dz_crc32(0, buf, 300), buf + 300, 700), ref_crc32(buf, sizeof buf)); /* continues */
}

static void round_trip_and_layout(void **state) {
    (void)state;
    const char *path = path_of("rt.log");
    dz_seedlog_header h = make_header(3, 1);
    dz_seedlog *log = create_ok(path, &h, 0);
    assert_int_equal(file_size(path), HDR); /* header only, already durable */
    append_steps(log, 1, 100);
    expect_records(log, 100);
    dz_error err = {0};
    assert_int_equal(dz_seedlog_close(log, &err), DZ_OK);
    assert_int_equal(dz_seedlog_record_bytes(3), 24);
    assert_int_equal(file_size(path), HDR + 100 * 24);

    /* the bytes on disk, field by field as documented */
    size_t len;
    uint8_t *b = slurp(path, &len), want[HDR];
    memset(want, 0, sizeof want);
    memcpy(want, "DZSEEDLG", 8);
    le32(want + 8, 1);
    le32(want + 12, 3);
    le32(want + 16, 0x89ABCDEFu);
    le32(want + 20, 0x01234567u);
    le32(want + 24, 1);
    le32(want + 28, fbits(1e-3f));
    le32(want + 32, 1);
    memcpy(want + 36, h.fingerprint, 64);
    le32(want + 100, ref_crc32(want, 100));
    assert_memory_equal(b, want, HDR);
    uint8_t rec[24];
    float g[3];
    for (uint32_t i = 0; i < 100; i++) {
        for (int j = 0; j < 3; j++) g[j] = g_of(i + 1, (uint32_t)j);
        ref_record(rec, 3, i + 1, lr_of(i + 1), g);
        assert_memory_equal(b + HDR + 24 * i, rec, 24);
    }
    free(b);

    log = open_ok(path, &h);
    expect_records(log, 100);
    const dz_seedlog_header *got = dz_seedlog_get_header(log);
    assert_memory_equal(got->fingerprint, h.fingerprint, 64);
    assert_true(got->run_seed == h.run_seed && got->eps == h.eps && got->dist == h.dist);
    dz_seedlog_close(log, NULL);
    assert_int_equal(g_warnings, 0);
}

/* ZO_RNG v2 (--rng v2): the version - 1 in the high half of the distribution word; a log
 * of one version is refused by a run of the other, naming both; rng 0 is v1. */
static void rng_version_in_header(void **state) {
    (void)state;
    const char *path = path_of("rng.log");
    dz_seedlog_header h = make_header(1, 0);
    h.dist = DZ_SEEDLOG_RADEMACHER, h.rng = 2;
    dz_seedlog *log = create_ok(path, &h, 0);
    append_steps(log, 0, 3);
    dz_seedlog_close(log, NULL);
    size_t len;
    uint8_t *b = slurp(path, &len), word[4];
    le32(word, 0x10000u); /* Rademacher 0, v2 */
    assert_memory_equal(b + 24, word, 4);
    free(b);
    log = open_ok(path, &h);
    assert_int_equal(dz_seedlog_get_header(log)->rng, 2);
    assert_int_equal(dz_seedlog_get_header(log)->dist, DZ_SEEDLOG_RADEMACHER);
    dz_seedlog_close(log, NULL);
    dz_seedlog_header v1 = h;
    v1.rng = 0; /* callers that predate --rng: v1 */
    expect_open_error(path, &v1, DZ_ERR_INVALID, "--rng v2", "--rng v1");
    /* a v1 log (the word is 0 or 1, as before v2) opened by a v2 run */
    const char *p1 = path_of("rng1.log");
    log = create_ok(p1, &v1, 0);
    dz_seedlog_close(log, NULL);
    expect_open_error(p1, &h, DZ_ERR_INVALID, "never replayed", "--rng v1");
}

static void size_of_20000_steps(void **state) {
    (void)state;
    const char *path = path_of("big.log");
    dz_seedlog_header h = make_header(1, 1);
    dz_seedlog *log = create_ok(path, &h, 0);
    double t0 = dz_now();
    append_steps(log, 1, 20000);
    double dt = dz_now() - t0;
    dz_seedlog_close(log, NULL);
    size_t size = file_size(path);
    print_message("seed log: q=1 %zu bytes/record; 20000 steps = %zu bytes; appends %.2f us each (no sync)\n",
                  dz_seedlog_record_bytes(1), size, dt / 20000 * 1e6);
    assert_int_equal(dz_seedlog_record_bytes(1), 16);
    assert_int_equal(size, HDR + 20000 * 16);
    assert_true(size < 1000000);
    t0 = dz_now();
    log = open_ok(path, &h);
    expect_records(log, 20000);
    print_message("seed log: reopening and checking 20000 records: %.2f ms\n", (dz_now() - t0) * 1e3);

    /* fsync cadence: every append */
    dz_seedlog_close(log, NULL);
    dz_error err = {0};
    assert_int_equal(dz_seedlog_open(path, &h, 1, &log, &err), DZ_OK);
    t0 = dz_now();
    append_steps(log, 20001, 20100);
    print_message("seed log: append + fdatasync: %.3f ms each on this disk\n", (dz_now() - t0) / 100 * 1e3);
    dz_seedlog_close(log, NULL);
}

static void append_across_reopen(void **state) {
    (void)state;
    const char *path = path_of("reopen.log");
    dz_seedlog_header h = make_header(2, 7);
    dz_seedlog *log = create_ok(path, &h, 4);
    append_steps(log, 7, 20);
    dz_seedlog_close(log, NULL);
    log = open_ok(path, &h);
    expect_records(log, 14);
    append_steps(log, 21, 30);
    dz_error err = {0};
    float g[2] = {1, 2};
    assert_int_equal(dz_seedlog_append(log, 32, 0.1f, g, &err), DZ_ERR_INVALID); /* skips 31 */
    assert_non_null(strstr(err.msg, "next step is 31"));
    assert_int_equal(dz_seedlog_append(log, 30, 0.1f, g, &err), DZ_ERR_INVALID); /* repeats 30 */
    /* one writer at a time */
    dz_seedlog *other = (dz_seedlog *)1;
    assert_int_equal(dz_seedlog_open(path, &h, 0, &other, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "locked"));
    assert_null(other);
    dz_seedlog_close(log, NULL);
    log = open_ok(path, NULL); /* no expectations: any run's log */
    expect_records(log, 24);
    dz_seedlog_close(log, NULL);
    /* create never replaces a run's log */
    assert_int_equal(dz_seedlog_create(path, &h, 0, &log, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "already exists"));
    assert_int_equal(file_size(path), HDR + 24 * 20);
    /* bad headers at create */
    dz_seedlog_header bad = make_header(0, 1);
    assert_int_equal(dz_seedlog_create(path_of("bad.log"), &bad, 0, &log, &err), DZ_ERR_INVALID);
    bad = make_header(1, 1);
    bad.eps = NAN;
    assert_int_equal(dz_seedlog_create(path_of("bad.log"), &bad, 0, &log, &err), DZ_ERR_INVALID);
    assert_false(dz_file_exists(path_of("bad.log")));
}

/* A log of n records (q = 2, start 1) written by the reference encoder. */
static uint8_t *ref_log(uint32_t n, size_t *len) {
    dz_seedlog_header h = make_header(2, 1);
    const char *path = path_of("ref.log");
    unlink(path);
    dz_seedlog *log = create_ok(path, &h, 0);
    dz_seedlog_close(log, NULL); /* the header from the library, checked in round_trip_and_layout */
    uint8_t *b = slurp(path, len);
    b = realloc(b, HDR + n * 20);
    for (uint32_t s = 1; s <= n; s++) {
        float g[2] = {g_of(s, 0), g_of(s, 1)};
        ref_record(b + HDR + (s - 1) * 20, 2, s, lr_of(s), g);
    }
    *len = HDR + n * 20;
    return b;
}

static void torn_tail_every_length(void **state) {
    (void)state;
    size_t len;
    uint8_t *full = ref_log(5, &len);
    const char *path = path_of("torn.log");
    dz_seedlog_header h = make_header(2, 1);
    for (size_t cut = 0; cut < 20; cut++) { /* keep 4 records + cut bytes of the 5th */
        spit(path, full, HDR + 4 * 20 + cut);
        int warned = g_warnings;
        dz_seedlog *log = open_ok(path, &h);
        expect_records(log, 4);
        assert_int_equal(g_warnings, warned + (cut > 0)); /* a torn tail is reported, a clean end is not */
        if (cut) assert_non_null(strstr(g_last_warning, path));
        assert_int_equal(file_size(path), HDR + 4 * 20); /* cut off on disk */
        append_steps(log, 5, 6);                        /* and appending continues cleanly */
        dz_seedlog_close(log, NULL);
        log = open_ok(path, &h);
        expect_records(log, 6);
        dz_seedlog_close(log, NULL);
    }
    /* a header alone, and a torn first record */
    for (size_t cut = 0; cut < 20; cut += 7) {
        spit(path, full, HDR + cut);
        dz_seedlog *log = open_ok(path, &h);
        expect_records(log, 0);
        dz_seedlog_close(log, NULL);
    }
    free(full);
}

static void crc_damage_tail_vs_middle(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = ref_log(5, &len);
    const char *path = path_of("crc.log");
    dz_seedlog_header h = make_header(2, 1);

    /* last record whole but damaged (any byte, CRC field included): a crash never leaves
     * that, so it is refused with its offset and nothing is cut */
    for (int at = 0; at < 20; at += 3) {
        b[HDR + 4 * 20 + at] ^= 0x40;
        spit(path, b, len);
        expect_open_error(path, &h, DZ_ERR_FORMAT, "record 5 (byte 184)", "damaged");
        assert_int_equal(file_size(path), len);
        b[HDR + 4 * 20 + at] ^= 0x40;
    }
    /* an unwritten (zero-filled) tail of several records after a machine crash: all dropped */
    uint8_t *z = calloc(1, len + 3 * 20 + 5);
    memcpy(z, b, len);
    spit(path, z, len + 3 * 20 + 5);
    dz_seedlog *log = open_ok(path, &h);
    expect_records(log, 5);
    dz_seedlog_close(log, NULL);
    free(z);

    /* a damaged record before intact ones: corruption, not a crash */
    b[HDR + 1 * 20 + 9] ^= 0x01;
    spit(path, b, len);
    expect_open_error(path, &h, DZ_ERR_FORMAT, "record 2", "CRC");
    assert_int_equal(file_size(path), len); /* nothing cut */
    /* even with a torn tail after it */
    spit(path, b, len - 3);
    expect_open_error(path, &h, DZ_ERR_FORMAT, "record 2", "CRC");
    free(b);
}

/* A reader (export, replay) never modifies the log: a torn tail is ignored, not cut, and
 * appending is refused. */
static void readers_leave_the_file_alone(void **state) {
    (void)state;
    size_t len;
    uint8_t *full = ref_log(5, &len);
    const char *path = path_of("reader.log");
    dz_seedlog_header h = make_header(2, 1);
    spit(path, full, HDR + 4 * 20 + 7);
    dz_seedlog *log = NULL;
    dz_error err = {0};
    if (dz_seedlog_open_read(path, &h, &log, &err) != DZ_OK) fail_msg("%s", err.msg);
    expect_records(log, 4);
    assert_int_equal(file_size(path), HDR + 4 * 20 + 7);
    const float g[2] = {1, 2};
    assert_int_equal(dz_seedlog_append(log, 5, 0.1f, g, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "reading only"));
    assert_int_equal(dz_seedlog_truncate_after(log, 2, &err), DZ_ERR_INVALID);
    dz_seedlog_close(log, NULL);
    assert_int_equal(file_size(path), HDR + 4 * 20 + 7);
    /* a writer holding the lock does not stop a reader */
    dz_seedlog *w = open_ok(path, &h);
    if (dz_seedlog_open_read(path, &h, &log, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_seedlog_close(log, NULL);
    dz_seedlog_close(w, NULL);
    free(full);
}

static void non_consecutive_steps(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = ref_log(5, &len);
    const char *path = path_of("steps.log");
    float g[2] = {g_of(9, 0), g_of(9, 1)};
    ref_record(b + HDR + 2 * 20, 2, 9, lr_of(9), g); /* record 3 says step 9, with a valid CRC */
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "record 3", "step 9, expected 3");
    ref_record(b + HDR + 2 * 20, 2, 2, lr_of(2), g); /* a repeated step */
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "record 3", "step 2, expected 3");
    free(b);
    /* the first record must be the header's start step */
    b = ref_log(3, &len);
    le32(b + 32, 2); /* start step 2 in the header */
    le32(b + 100, ref_crc32(b, 100));
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "record 1", "step 1, expected 2");
    free(b);
}

static void bad_headers(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = ref_log(2, &len);
    const char *path = path_of("hdr.log");
    dz_seedlog_header h = make_header(2, 1);

    expect_open_error(path_of("missing.log"), NULL, DZ_ERR_NOT_FOUND, "cannot open", NULL);
    b[3] = 'X';
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "not a distzo seed log", "magic");
    b[3] = 'E';
    le32(b + 8, 2);
    le32(b + 100, ref_crc32(b, 100));
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_UNSUPPORTED, "version 2", NULL);
    le32(b + 8, 1);
    le32(b + 100, ref_crc32(b, 100));
    b[50] ^= 1; /* fingerprint byte, CRC not updated */
    spit(path, b, len);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "header CRC", NULL);
    b[50] ^= 1;
    spit(path, b, 60);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "truncated header", NULL);
    spit(path, "", 0);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "not a distzo seed log", NULL);
    le32(b + 12, 0); /* q = 0 with a valid CRC */
    le32(b + 100, ref_crc32(b, 100));
    spit(path, b, HDR);
    expect_open_error(path, NULL, DZ_ERR_FORMAT, "q (samples per step) 0", NULL);
    le32(b + 12, 2);
    le32(b + 100, ref_crc32(b, 100));
    spit(path, b, len);

    /* the run resuming must be the run that wrote it */
    dz_seedlog_header other = h;
    other.q = 4;
    expect_open_error(path, &other, DZ_ERR_INVALID, "q (values a record) 2 in the log, 4 expected", NULL);
    other = h;
    other.run_seed++;
    expect_open_error(path, &other, DZ_ERR_INVALID, "run seed", NULL);
    other = h;
    other.eps = 2e-3f;
    expect_open_error(path, &other, DZ_ERR_INVALID, "eps", NULL);
    other = h;
    other.fingerprint[0] = 'X';
    expect_open_error(path, &other, DZ_ERR_INVALID, "fingerprint", NULL);
    dz_seedlog *log = open_ok(path, &h);
    expect_records(log, 2);
    dz_seedlog_close(log, NULL);
    free(b);
}

static void resume_ranges(void **state) {
    (void)state;
    const char *path = path_of("resume.log");
    dz_seedlog_header h = make_header(1, 1);
    dz_seedlog *log = create_ok(path, &h, 0);
    append_steps(log, 1, 10);
    size_t first, count;
    dz_error err = {0};
    assert_int_equal(dz_seedlog_replay_range(log, 0, &first, &count, &err), DZ_OK); /* from the base model */
    assert_true(first == 0 && count == 10);
    assert_int_equal(dz_seedlog_replay_range(log, 7, &first, &count, &err), DZ_OK);
    assert_true(first == 7 && count == 3 && dz_seedlog_get(log, first).step == 8);
    assert_int_equal(dz_seedlog_replay_range(log, 10, &first, &count, &err), DZ_OK);
    assert_true(first == 10 && count == 0);
    assert_int_equal(dz_seedlog_replay_range(log, 12, &first, &count, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "steps 11..12 are missing"));
    assert_int_equal(dz_seedlog_replay_range(log, -1, &first, &count, &err), DZ_ERR_INVALID);

    /* branching off an earlier checkpoint drops the later records, durably */
    assert_int_equal(dz_seedlog_truncate_after(log, 12, &err), DZ_OK); /* nothing past 12 */
    assert_int_equal(dz_seedlog_count(log), 10);
    assert_int_equal(dz_seedlog_truncate_after(log, 6, &err), DZ_OK);
    expect_records(log, 6);
    assert_int_equal(file_size(path), HDR + 6 * 16);
    append_steps(log, 7, 8);
    dz_seedlog_close(log, NULL);
    log = open_ok(path, &h);
    expect_records(log, 8);
    assert_int_equal(dz_seedlog_truncate_after(log, 0, &err), DZ_OK);
    expect_records(log, 0);
    dz_seedlog_close(log, NULL);

    /* a log that starts later (a run continued from another run's checkpoint) */
    h = make_header(1, 501);
    log = create_ok(path_of("late.log"), &h, 0);
    append_steps(log, 501, 505);
    assert_int_equal(dz_seedlog_replay_range(log, 500, &first, &count, &err), DZ_OK);
    assert_true(first == 0 && count == 5);
    assert_int_equal(dz_seedlog_replay_range(log, 499, &first, &count, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "before the log's start"));
    dz_seedlog_close(log, NULL);
}

/* The child appends forever; the parent kills it at a random moment, then reopens. */
static void sigkill_while_appending(void **state) {
    (void)state;
    const char *path = path_of("kill.log");
    dz_seedlog_header h = make_header(4, 1);
    dz_seedlog *log = create_ok(path, &h, 0);
    dz_seedlog_close(log, NULL);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    print_message("SIGKILL test seed %u\n", seed);
    srand(seed);
    size_t prev = 0;
    for (int round = 0; round < 6; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dz_seedlog *w;
            int sync_every = round % 3 == 0 ? 0 : round % 3 == 1 ? 1 : 16;
            if (dz_seedlog_open(path, &h, sync_every, &w, NULL) != DZ_OK) _exit(3);
            float g[4];
            for (uint32_t s = dz_seedlog_next_step(w);; s++) {
                for (uint32_t j = 0; j < 4; j++) g[j] = g_of(s, j);
                if (dz_seedlog_append(w, s, lr_of(s), g, NULL) != DZ_OK) _exit(4);
            }
        }
        struct timespec ts = {0, (long)(5 + rand() % 60) * 1000000L};
        nanosleep(&ts, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* it was appending, not failing */
        log = open_ok(path, &h); /* checks every CRC and that steps are consecutive */
        size_t n = dz_seedlog_count(log);
        expect_records(log, n);
        assert_true(n >= prev);
        print_message("round %d: killed after %zu records (%zu new)\n", round, n, n - prev);
        prev = n;
        dz_seedlog_close(log, NULL);
    }
    assert_true(prev > 0);
}

/* ---- metrics.jsonl ---- */

static dz_metrics_row row_of(int64_t step, double seconds) {
    dz_metrics_row r;
    memset(&r, 0, sizeof r);
    r.step = step;
    r.loss = (float)(2.0 - 0.01 * (double)step);
    r.g = (float)(step % 2 ? -0.125 : 0.5);
    r.lr = 1e-6f;
    r.seconds = seconds;
    if (step % 10 == 0) {
        r.has_eval = 1;
        r.dev_accuracy = (float)(0.5 + 0.01 * (double)step);
        r.test_accuracy = (float)0.7;
        r.best_dev_accuracy = r.dev_accuracy;
        r.dev_loss = r.test_loss = NAN; /* classification rows carry no losses */
    }
    return r;
}

static void write_rows(dz_metrics *m, int64_t from, int64_t to, double t0) {
    dz_error err = {0};
    for (int64_t s = from; s <= to; s++) {
        dz_metrics_row r = row_of(s, t0 + 0.25 * (double)s);
        if (s == 5) r.loss = NAN;
        if (s == 6) r.g = INFINITY;
        dz_status st = dz_metrics_append(m, &r, &err);
        if (st != DZ_OK) print_error("%s\n", err.msg);
        assert_int_equal(st, DZ_OK);
    }
}

/* Every line parses as JSON; "seconds" removed, the lines of a and b are identical. */
static void expect_same_but_timing(const char *a, const char *b) {
    char *ta = strdup(a), *tb = strdup(b), *sa, *sb;
    char *la = strtok_r(ta, "\n", &sa), *lb = strtok_r(tb, "\n", &sb);
    int lines = 0;
    for (; la && lb; la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb), lines++) {
        cJSON *ja = cJSON_Parse(la), *jb = cJSON_Parse(lb);
        assert_non_null(ja);
        assert_non_null(jb);
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(ja, "seconds")));
        cJSON_DeleteItemFromObject(ja, "seconds");
        cJSON_DeleteItemFromObject(jb, "seconds");
        assert_true(cJSON_Compare(ja, jb, 1));
        cJSON_Delete(ja);
        cJSON_Delete(jb);
    }
    assert_null(la);
    assert_null(lb);
    assert_int_equal(lines, 20);
    free(ta);
    free(tb);
}

static void metrics_format_and_resume(void **state) {
    (void)state;
    const char *path = path_of("metrics.jsonl"), *ref = path_of("metrics_ref.jsonl");
    dz_metrics *m;
    dz_error err = {0};
    assert_int_equal(dz_metrics_open(ref, 0, 0, &m, &err), DZ_OK);
    write_rows(m, 1, 20, 0);
    assert_int_equal(dz_metrics_close(m, &err), DZ_OK);
    size_t ulen;
    char *uninterrupted = (char *)slurp(ref, &ulen);
    /* exact text of a few lines, from the documented format */
    assert_non_null(strstr(uninterrupted, "{\"step\": 1, \"loss\": 1.99, \"g\": -0.125, \"lr\": 1e-06, "
                                          "\"seconds\": 0.250}\n"));
    assert_non_null(strstr(uninterrupted, "{\"step\": 5, \"loss\": null,"));
    assert_non_null(strstr(uninterrupted, "\"step\": 6, \"loss\": 1.94, \"g\": null,"));
    assert_non_null(strstr(uninterrupted, "{\"step\": 10, \"loss\": 1.9, \"g\": 0.5, \"lr\": 1e-06, "
                                          "\"seconds\": 2.500, \"dev_accuracy\": 0.6, \"test_accuracy\": 0.7, "
                                          "\"best_dev_accuracy\": 0.6}\n"));
    dz_metrics_row *rows;
    size_t n;
    assert_int_equal(dz_metrics_read(ref, &rows, &n, &err), DZ_OK);
    assert_int_equal(n, 20);
    assert_true(isnan(rows[4].loss) && isnan(rows[5].g) && !rows[0].has_eval && rows[9].has_eval);
    assert_true((float)rows[9].dev_accuracy == (float)0.6 && rows[19].step == 20 && rows[19].seconds == 5.0);
    free(rows);

    /* the interrupted run: a crash after step 17's line, mid-way through step 18's */
    const char *torn = "{\"step\": 18, \"loss\": 1.8";
    char *crashed = malloc(ulen + 64);
    size_t keep = (size_t)(strstr(uninterrupted, "{\"step\": 18,") - uninterrupted);
    memcpy(crashed, uninterrupted, keep);
    memcpy(crashed + keep, torn, strlen(torn));
    spit(path, crashed, keep + strlen(torn));
    assert_int_equal(dz_metrics_read(path, &rows, &n, &err), DZ_OK); /* a reader skips the torn line */
    assert_int_equal(n, 17);
    free(rows);
    /* resume at step 12 (the seed log's last step): lines 13.. and the torn one go */
    int warned = g_warnings;
    assert_int_equal(dz_metrics_open(path, 12, 5, &m, &err), DZ_OK);
    assert_int_equal(g_warnings, warned + 1);
    size_t len;
    char *text = (char *)slurp(path, &len);
    size_t upto12 = (size_t)(strstr(uninterrupted, "{\"step\": 13,") - uninterrupted);
    assert_int_equal(len, upto12);
    assert_memory_equal(text, uninterrupted, upto12); /* byte for byte */
    free(text);
    dz_metrics_row back = row_of(11, 0);
    assert_int_equal(dz_metrics_append(m, &back, &err), DZ_ERR_INVALID); /* steps never go back */
    write_rows(m, 13, 20, 100.0); /* resumed later: other timings */
    assert_int_equal(dz_metrics_close(m, &err), DZ_OK);
    text = (char *)slurp(path, &len);
    assert_true(len != ulen || memcmp(text, uninterrupted, len) != 0); /* the seconds differ... */
    expect_same_but_timing(text, uninterrupted);                      /* ...and nothing else */
    free(text);

    /* a last line without its '\n' was cut short, even when what is there parses */
    spit(path, uninterrupted, ulen - 1);
    assert_int_equal(dz_metrics_read(path, &rows, &n, &err), DZ_OK);
    assert_int_equal(n, 19);
    free(rows);
    assert_int_equal(dz_metrics_open(path, 20, 0, &m, &err), DZ_OK);
    dz_metrics_close(m, NULL);
    text = (char *)slurp(path, &len);
    assert_int_equal(len, (size_t)(strstr(uninterrupted, "{\"step\": 20,") - uninterrupted));
    free(text);

    /* a malformed line before good ones is an error naming file and line */
    char *bad = strdup(uninterrupted);
    bad[strstr(bad, "{\"step\": 3,") - bad] = '[';
    spit(path, bad, ulen);
    assert_int_equal(dz_metrics_open(path, 20, 0, &m, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "metrics.jsonl:3"));
    assert_int_equal(dz_metrics_read(path, &rows, &n, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "metrics.jsonl:3"));
    free(bad);
    free(crashed);
    free(uninterrupted);

    /* a new run in a folder without the file creates it */
    unlink(path);
    assert_int_equal(dz_metrics_open(path, 0, 0, &m, &err), DZ_OK);
    dz_metrics_close(m, NULL);
    assert_int_equal(file_size(path), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32_check_value),
        cmocka_unit_test(round_trip_and_layout),
        cmocka_unit_test(rng_version_in_header),
        cmocka_unit_test(size_of_20000_steps),
        cmocka_unit_test(append_across_reopen),
        cmocka_unit_test(torn_tail_every_length),
        cmocka_unit_test(crc_damage_tail_vs_middle),
        cmocka_unit_test(readers_leave_the_file_alone),
        cmocka_unit_test(non_consecutive_steps),
        cmocka_unit_test(bad_headers),
        cmocka_unit_test(resume_ranges),
        cmocka_unit_test(sigkill_while_appending),
        cmocka_unit_test(metrics_format_and_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
