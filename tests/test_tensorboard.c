/* TensorBoard event files (src/run/tensorboard.h): CRC32C against published check values,
 * with a bit-at-a-time CRC of the test's own; the committed event file of a real 2-rank
 * run decoded here, independently of the writer (framing, both CRCs, the protobuf fields),
 * equal to what TensorBoard's own reader read from it (tests/data/tensorboard/
 * run.events.txt, tools/check_tensorboard_events.py), holding its metrics.jsonl's losses,
 * and re-encoded byte for byte by the writer; the writer's files read back whole, and every prefix of one readable up to its
 * last whole record.
 *
 * `test_tensorboard FILE` prints FILE's events as the tool does (tests/cli/conventions.sh
 * reads a run's event file with it). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/util.h"
#include "distzo/metrics.h"
#include "run/tensorboard.h"
#include "ref_crc.h"

/* ---- an independent reader ---- */

static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) { return ref_crc_bitwise(0x82F63B78u, p, n); }

static uint32_t masked(const uint8_t *p, size_t n) {
    const uint32_t c = crc32c_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

typedef struct event {
    double wall_time;
    int64_t step;
    char what[64]; /* "file_version" or the scalar's tag */
    char version[32];
    float value;
    size_t offset, size; /* the whole record in the file */
} event;

/* A protobuf varint at *p (< end); -1 when cut short. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        const uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* One message's fields: calls back for each (number, wire type, payload). -1: malformed. */
typedef int (*field_fn)(int number, int wire, uint64_t v, const uint8_t *data, size_t len, void *user);

static int fields(const uint8_t *p, size_t n, field_fn fn, void *user) {
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t key, v = 0, len = 0;
        if (varint(&p, end, &key)) return -1;
        const int wire = (int)(key & 7), number = (int)(key >> 3);
        const uint8_t *data = p;
        if (wire == 0) {
            if (varint(&p, end, &v)) return -1;
        } else if (wire == 1 || wire == 5) {
            len = wire == 1 ? 8 : 4;
            if ((size_t)(end - p) < len) return -1;
            v = le(p, (int)len), p += len;
        } else if (wire == 2) {
            if (varint(&p, end, &len) || (size_t)(end - p) < len) return -1;
            data = p, p += len;
        } else {
            return -1;
        }
        if (fn(number, wire, v, data, (size_t)len, user)) return -1;
    }
    return 0;
}

static int value_field(int number, int wire, uint64_t v, const uint8_t *data, size_t len, void *user) {
    event *e = user;
    if (number == 1 && wire == 2 && len < sizeof e->what) {
        memcpy(e->what, data, len), e->what[len] = '\0';
    } else if (number == 2 && wire == 5) {
        const uint32_t bits = (uint32_t)v;
        memcpy(&e->value, &bits, 4);
    } else {
        return -1; /* the writer writes nothing else */
    }
    return 0;
}

static int summary_field(int number, int wire, uint64_t v, const uint8_t *data, size_t len, void *user) {
    (void)v;
    return number == 1 && wire == 2 ? fields(data, len, value_field, user) : -1;
}

static int event_field(int number, int wire, uint64_t v, const uint8_t *data, size_t len, void *user) {
    event *e = user;
    if (number == 1 && wire == 1) memcpy(&e->wall_time, &v, 8);
    else if (number == 2 && wire == 0) e->step = (int64_t)v;
    else if (number == 3 && wire == 2 && len < sizeof e->version) {
        snprintf(e->what, sizeof e->what, "file_version");
        memcpy(e->version, data, len), e->version[len] = '\0';
    } else if (number == 5 && wire == 2) return fields(data, len, summary_field, user);
    else return -1;
    return 0;
}

/* The whole records of buf (n bytes) into ev (cap); returns their count, or -1 when a
 * whole record is damaged (a short tail is not an error: it is where a writer stopped). */
static int decode(const uint8_t *buf, size_t n, event *ev, int cap) {
    int count = 0;
    for (size_t off = 0; off + 12 <= n && count < cap;) {
        const uint64_t len = le(buf + off, 8);
        if ((uint32_t)le(buf + off + 8, 4) != masked(buf + off, 8)) return -1;
        if (n - off - 12 < len + 4) break; /* torn */
        if ((uint32_t)le(buf + off + 12 + len, 4) != masked(buf + off + 12, len)) return -1;
        event *e = &ev[count];
        memset(e, 0, sizeof *e);
        if (fields(buf + off + 12, len, event_field, e)) return -1;
        e->offset = off, e->size = 12 + len + 4;
        off += e->size, count++;
    }
    return count;
}

static uint8_t *read_all(const char *path, size_t *n) {
    char *text;
    dz_error err = {0};
    if (dz_read_file(path, &text, n, &err) != DZ_OK) return NULL;
    return (uint8_t *)text;
}

static void print_event(FILE *out, const event *e) {
    fprintf(out, "%.17g %lld %s ", e->wall_time, (long long)e->step, e->what);
    if (!strcmp(e->what, "file_version")) fprintf(out, "%s\n", e->version);
    else fprintf(out, "%.9g\n", (double)e->value);
}

/* ---- the tests ---- */

static void crc32c_check_values(void **state) {
    (void)state;
    uint8_t zeros[32] = {0}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; i++) ones[i] = 0xff, up[i] = (uint8_t)i, down[i] = (uint8_t)(31 - i);
    /* RFC 3720 B.4 and the common "123456789" check value */
    const struct { const uint8_t *p; size_t n; uint32_t want; } v[] = {
        {(const uint8_t *)"123456789", 9, 0xe3069283u}, {zeros, 32, 0x8a9136aau}, {ones, 32, 0x62a8ab43u},
        {up, 32, 0x46dd794eu}, {down, 32, 0x113fdb5cu}, {zeros, 0, 0u},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        assert_int_equal(dz_crc32c(v[i].p, v[i].n), v[i].want);
        assert_int_equal(crc32c_bitwise(v[i].p, v[i].n), v[i].want);
    }
    /* masked: TFRecord's rotation plus constant, by hand for "123456789" */
    const uint32_t c = 0xe3069283u;
    assert_int_equal(dz_crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

/* The committed run's file: our decoding = TensorBoard's, and the writer's bytes = the file's. */
static void committed_run_as_tensorboard_read_it(void **state) {
    (void)state;
    size_t n;
    uint8_t *buf = read_all(DZ_TEST_DATA "/tensorboard/run.tfevents", &n);
    assert_non_null(buf);
    event ev[64];
    const int count = decode(buf, n, ev, 64);
    FILE *want = fopen(DZ_TEST_DATA "/tensorboard/run.events.txt", "r");
    assert_non_null(want);
    char line[256];
    int lines = 0, scalars = 0, bytes_rows = 0;
    while (fgets(line, sizeof line, want)) {
        assert_true(lines < count);
        const event *e = &ev[lines++];
        double wall;
        long long step;
        char what[64], value[64];
        assert_int_equal(sscanf(line, "%lf %lld %63s %63s", &wall, &step, what, value), 4);
        assert_true(wall == e->wall_time);
        assert_int_equal(step, e->step);
        assert_string_equal(what, e->what);
        if (!strcmp(what, "file_version")) {
            assert_string_equal(value, e->version);
            continue;
        }
        assert_true(strtof(value, NULL) == e->value);
        scalars++, bytes_rows += !strcmp(what, "train/bytes_per_step");
        uint8_t rec[512]; /* the writer, given what was read, makes the record's very bytes */
        const size_t size = dz_tb_scalar_record(rec, sizeof rec, e->wall_time, e->step, e->what, e->value);
        assert_int_equal(size, e->size);
        assert_memory_equal(rec, buf + e->offset, size);
    }
    fclose(want);
    assert_int_equal(lines, count);
    /* the run's metrics.jsonl, written beside it from the same rows: each step's loss */
    dz_metrics_row *rows;
    size_t n_rows, losses = 0;
    dz_error err = {0};
    assert_int_equal(dz_metrics_read(DZ_TEST_DATA "/tensorboard/metrics.jsonl", &rows, &n_rows, &err), DZ_OK);
    for (int i = 0; i < count; i++)
        for (size_t r = 0; r < n_rows; r++)
            if (!strcmp(ev[i].what, "train/loss") && rows[r].step == ev[i].step) {
                assert_true(ev[i].value == (float)rows[r].loss);
                losses++;
            }
    assert_int_equal(losses, 4);
    free(rows);
    assert_true(scalars >= 20);
    assert_int_equal(bytes_rows, 4); /* the 2-rank run exchanged bytes in each of its 4 steps */
    free(buf);
}

static void writer_round_trip_and_prefixes(void **state) {
    (void)state;
    char path[] = "/tmp/dz_tb_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    dz_error err = {0};
    dz_tb_writer *w;
    assert_int_equal(dz_tb_open(path, 1700000000.25, &w, &err), DZ_OK);
    const struct { int64_t step; const char *tag; float v; } in[] = {
        {0, "eval/dev_accuracy", 0.5f}, {1, "train/loss", 0.693147f}, {1, "train/g", -12.5f},
        {1 << 20, "train/lr", 1e-6f}, {(int64_t)1 << 40, "t", -0.0f}, {7, "x/y/z", INFINITY},
    };
    const int n_in = sizeof in / sizeof in[0];
    for (int i = 0; i < n_in; i++)
        assert_int_equal(dz_tb_scalar(w, 1700000001.0 + i, in[i].step, in[i].tag, in[i].v, &err), DZ_OK);
    char long_tag[300];
    memset(long_tag, 'a', sizeof long_tag - 1), long_tag[sizeof long_tag - 1] = '\0';
    assert_int_equal(dz_tb_scalar(w, 0, 0, long_tag, 0, &err), DZ_ERR_INVALID);
    assert_int_equal(dz_tb_close(w, &err), DZ_OK);
    size_t n;
    uint8_t *buf = read_all(path, &n);
    assert_non_null(buf);
    event ev[16];
    assert_int_equal(decode(buf, n, ev, 16), n_in + 1);
    assert_string_equal(ev[0].what, "file_version");
    assert_string_equal(ev[0].version, "brain.Event:2");
    assert_true(ev[0].wall_time == 1700000000.25);
    for (int i = 0; i < n_in; i++) {
        assert_int_equal(ev[i + 1].step, in[i].step);
        assert_string_equal(ev[i + 1].what, in[i].tag);
        assert_memory_equal(&ev[i + 1].value, &in[i].v, 4);
        assert_true(ev[i + 1].wall_time == 1700000001.0 + i);
    }
    for (size_t cut = 0; cut <= n; cut++) { /* a crash at any byte: the whole records before it */
        int whole = 0;
        while (whole <= n_in && ev[whole].offset + ev[whole].size <= cut) whole++;
        assert_int_equal(decode(buf, cut, ev, 16), whole);
    }
    buf[ev[2].offset + 14] ^= 0x10; /* a damaged whole record is found by its CRC */
    assert_int_equal(decode(buf, n, ev, 16), -1);
    free(buf);
    unlink(path);
}

int main(int argc, char **argv) {
    if (argc == 2) { /* print a file's events */
        size_t n;
        uint8_t *buf = read_all(argv[1], &n);
        static event ev[1 << 16];
        const int count = buf ? decode(buf, n, ev, 1 << 16) : -1;
        for (int i = 0; i < count; i++) print_event(stdout, &ev[i]);
        if (count < 0) fprintf(stderr, "%s: %s\n", argv[1], buf ? "a damaged record" : "cannot read");
        free(buf);
        return count < 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_check_values),
        cmocka_unit_test(committed_run_as_tensorboard_read_it),
        cmocka_unit_test(writer_round_trip_and_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
