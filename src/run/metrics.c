/* metrics.jsonl writer and reader, with the metrics.csv and TensorBoard views of the same
 * rows (formats in metrics.h). */
#include "run/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/io.h"
#include "core/util.h"
#include "distzo/log.h"
#include "run/tensorboard.h"

struct dz_metrics {
    char *path, *csv_path, *dir;
    int fd, csv_fd;
    dz_tb_writer *tb;
    int64_t last_step;
    int sync_every, unsynced;
};

static const char CSV_HEADER[] = "step,loss,g,lr,seconds,steps_per_s,bytes_per_step,dev_accuracy,test_accuracy,"
                                 "best_dev_accuracy,dev_loss,test_loss\n";

/* ---- reading ---- */

typedef struct line_span {
    size_t off, len; /* len counts the '\n' */
    dz_metrics_row row;
} line_span;

static double num_field(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* One '\n'-terminated line (without the '\n') into row; 0, or -1 when it is not a metrics line. */
static int parse_line(const char *s, size_t len, dz_metrics_row *row) {
    cJSON *obj = cJSON_ParseWithLength(s, len);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(obj, "step");
    int ok = cJSON_IsObject(obj) && cJSON_IsNumber(step) && step->valuedouble == floor(step->valuedouble) &&
             fabs(step->valuedouble) < 9e15;
    if (ok) {
        row->step = (int64_t)step->valuedouble;
        row->loss = num_field(obj, "loss");
        row->g = num_field(obj, "g");
        row->lr = num_field(obj, "lr");
        row->seconds = num_field(obj, "seconds");
        row->has_eval = cJSON_GetObjectItemCaseSensitive(obj, "dev_accuracy") != NULL ||
                        cJSON_GetObjectItemCaseSensitive(obj, "dev_loss") != NULL;
        row->dev_accuracy = num_field(obj, "dev_accuracy");
        row->test_accuracy = num_field(obj, "test_accuracy");
        row->best_dev_accuracy = num_field(obj, "best_dev_accuracy");
        row->dev_loss = num_field(obj, "dev_loss");
        row->test_loss = num_field(obj, "test_loss");
    }
    cJSON_Delete(obj);
    return ok ? 0 : -1;
}

/* The good lines of buf. Bad lines after the last good one are a torn tail (the writer
 * stopped mid-line, or a machine crash left unwritten blocks): dropped with a warning.
 * A bad line before a good one is an error. *kept_bytes: where the good part ends. */
static dz_status scan_lines(const char *path, const char *buf, size_t len, line_span **out, size_t *n,
                            size_t *kept_bytes, dz_error *err) {
    size_t cap = 1, count = 0;
    for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
    line_span *spans = malloc(cap * sizeof *spans);
    if (!spans) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    size_t bad_line = 0, bad_off = 0, lineno = 0, end = 0;
    for (size_t off = 0; off < len; lineno++) {
        const char *nl = memchr(buf + off, '\n', len - off);
        size_t llen = nl ? (size_t)(nl - (buf + off)) + 1 : len - off;
        line_span sp = {.off = off, .len = llen};
        int ok = nl && parse_line(buf + off, llen - 1, &sp.row) == 0; /* an unterminated line is torn */
        if (ok && bad_line) {
            free(spans);
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s:%zu: not a metrics line (a JSON object with an integer \"step\"), but later lines are "
                           "intact (byte %zu)",
                           path, bad_line, bad_off);
        }
        if (ok) spans[count++] = sp, end = off + llen;
        else if (!bad_line) bad_line = lineno + 1, bad_off = off;
        off += llen;
    }
    if (end < len)
        dz_log(DZ_LOG_WARN, "%s: dropping a torn tail of %zu bytes from line %zu: the writer stopped mid-line", path,
               len - end, bad_line);
    *out = spans;
    *n = count;
    *kept_bytes = end;
    return DZ_OK;
}

dz_status dz_metrics_read(const char *path, dz_metrics_row **rows, size_t *n, dz_error *err) {
    *rows = NULL;
    *n = 0;
    char *buf;
    size_t len, count, kept;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    line_span *spans = NULL;
    st = scan_lines(path, buf, len, &spans, &count, &kept, err);
    free(buf);
    if (st != DZ_OK) return st;
    dz_metrics_row *r = malloc((count ? count : 1) * sizeof *r);
    if (!r) {
        free(spans);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < count; i++) r[i] = spans[i].row;
    free(spans);
    *rows = r;
    *n = count;
    return DZ_OK;
}

/* ---- writing ---- */

/* Keeps the good lines with step <= keep_through; rewrites path atomically if that changes it. */
static dz_status trim_file(dz_metrics *m, int64_t keep_through, dz_error *err) {
    char *buf;
    size_t len, count, kept;
    dz_status st = dz_read_file(m->path, &buf, &len, err);
    if (st != DZ_OK) return st;
    line_span *spans = NULL;
    st = scan_lines(m->path, buf, len, &spans, &count, &kept, err);
    if (st != DZ_OK) {
        free(buf);
        return st;
    }
    size_t used = 0, dropped = 0;
    for (size_t i = 0; i < count; i++) {
        if (spans[i].row.step > keep_through) {
            dropped++;
            continue;
        }
        memmove(buf + used, buf + spans[i].off, spans[i].len);
        used += spans[i].len;
        if (spans[i].row.step > m->last_step) m->last_step = spans[i].row.step;
    }
    free(spans);
    if (dropped)
        dz_log(DZ_LOG_INFO, "%s: dropping %zu line(s) past step %" PRId64 " (resuming from it)", m->path, dropped,
               keep_through);
    if (used < len) st = dz_write_file_atomic(m->path, buf, used, err);
    free(buf);
    return st;
}

/* metrics.csv: the header, then the whole lines with step <= keep_through (a line cut
 * short by a crash is dropped); created with its header when missing. */
static dz_status open_csv(dz_metrics *m, int64_t keep_through, dz_error *err) {
    dz_status st = DZ_OK;
    if (!dz_file_exists(m->csv_path)) {
        st = dz_write_file_atomic(m->csv_path, CSV_HEADER, strlen(CSV_HEADER), err);
    } else {
        char *buf;
        size_t len, used = 0;
        if ((st = dz_read_file(m->csv_path, &buf, &len, err)) != DZ_OK) return st;
        for (size_t off = 0; off < len;) {
            const char *nl = memchr(buf + off, '\n', len - off);
            if (!nl) break; /* torn */
            const size_t llen = (size_t)(nl - (buf + off)) + 1;
            char *end;
            const long long step = strtoll(buf + off, &end, 10);
            const int header = off == 0 && !strncmp(buf, "step,", 5);
            if (header || (end != buf + off && *end == ',' && step <= keep_through)) {
                memmove(buf + used, buf + off, llen);
                used += llen;
            }
            off += llen;
        }
        if (used == 0) memcpy(buf, CSV_HEADER, used = strlen(CSV_HEADER)); /* fits: the file had more than 0 bytes */
        if (used != len) st = dz_write_file_atomic(m->csv_path, buf, used, err);
        free(buf);
    }
    if (st == DZ_OK && (m->csv_fd = open(m->csv_path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: cannot open for appending: %s", m->csv_path, strerror(errno));
    return st;
}

static void free_writer(dz_metrics *m) {
    if (m->fd >= 0) close(m->fd);
    if (m->csv_fd >= 0) close(m->csv_fd);
    dz_tb_close(m->tb, NULL);
    free(m->path);
    free(m->csv_path);
    free(m->dir);
    free(m);
}

dz_status dz_metrics_open(const char *path, int64_t keep_through, int sync_every, dz_metrics **out, dz_error *err) {
    *out = NULL;
    if (!path || sync_every < 0) return dz_fail(err, DZ_ERR_INVALID, "metrics: need a path and sync_every >= 0");
    dz_metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    m->fd = m->csv_fd = -1;
    m->last_step = INT64_MIN;
    m->sync_every = sync_every;
    char dir[4096];
    dz_path_parent(path, dir, sizeof dir);
    const size_t csv_cap = strlen(dir) + sizeof "/metrics.csv";
    if (!(m->csv_path = malloc(csv_cap)) || !(m->dir = strdup(dir))) {
        free_writer(m);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(m->csv_path, csv_cap, "%s/metrics.csv", dir);
    dz_status st = dz_file_exists(path) ? trim_file(m, keep_through, err)
                                        : dz_write_file_atomic(path, "", 0, err); /* durable directory entry */
    if (st == DZ_OK && (m->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
        st = dz_fail(err, DZ_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    if (st == DZ_OK) st = open_csv(m, keep_through, err);
    if (st != DZ_OK) {
        free_writer(m);
        return st;
    }
    *out = m;
    return DZ_OK;
}

int dz_float_shortest(char *out, size_t cap, float f) {
    int n = 0;
    for (int prec = 1; prec <= 9; prec++) {
        n = snprintf(out, cap, "%.*g", prec, (double)f);
        if ((float)strtod(out, NULL) == f) break;
    }
    return n;
}

/* A float32 value with the fewest digits that read back as the same float; null if not finite. */
static int put_value(char *out, size_t cap, double v) {
    const float f = (float)v;
    return isfinite(f) ? dz_float_shortest(out, cap, f) : snprintf(out, cap, "null");
}

static size_t put_field(char *line, size_t used, size_t cap, const char *key, double v) {
    used += (size_t)snprintf(line + used, cap - used, ", \"%s\": ", key);
    return used + (size_t)put_value(line + used, cap - used, v);
}

dz_status dz_metrics_sync(dz_metrics *m, dz_error *err) {
    if (m->unsynced == 0) return DZ_OK;
    if (dz_io_fsync(m->fd) != 0) return dz_fail(err, DZ_ERR_IO, "%s: fsync failed: %s", m->path, strerror(errno));
    if (dz_io_fsync(m->csv_fd) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: fsync failed: %s", m->csv_path, strerror(errno));
    dz_status st = m->tb ? dz_tb_flush(m->tb, 1, err) : DZ_OK;
    if (st == DZ_OK) m->unsynced = 0;
    return st;
}

/* One whole line in one write(): a killed process leaves whole lines only. */
static dz_status write_line(int fd, const char *path, const char *line, size_t len, int64_t step, dz_error *err) {
    for (size_t done = 0; done < len;) {
        ssize_t w = dz_io_write(fd, line + done, len - done);
        if (w <= 0)
            return dz_fail(err, DZ_ERR_IO, "%s: writing step %" PRId64 " failed: %s", path, step,
                           w < 0 ? strerror(errno) : "no progress");
        done += (size_t)w;
    }
    return DZ_OK;
}

/* A CSV cell: the value, or nothing when it was not measured. */
static size_t put_cell(char *line, size_t used, size_t cap, double v, int measured) {
    line[used++] = ',';
    if (measured && isfinite(v)) used += (size_t)put_value(line + used, cap - used, v);
    return used;
}

/* The row's metrics.csv line and TensorBoard scalars. */
static dz_status append_views(dz_metrics *m, const dz_metrics_row *row, dz_error *err) {
    const struct { const char *tag; double v; int on; } sc[] = { /* in metrics.csv's column order */
        {"train/loss", row->loss, 1}, {"train/g", row->g, 1}, {"train/lr", row->lr, 1},
        {"train/steps_per_s", row->steps_per_s, row->steps_per_s > 0},
        {"train/bytes_per_step", row->step_bytes, row->step_bytes > 0},
        {"eval/dev_accuracy", row->dev_accuracy, row->has_eval}, {"eval/test_accuracy", row->test_accuracy, row->has_eval},
        {"eval/best_dev_accuracy", row->best_dev_accuracy, row->has_eval},
        {"eval/dev_loss", row->dev_loss, row->has_eval}, {"eval/test_loss", row->test_loss, row->has_eval},
    };
    char line[512];
    const size_t cap = sizeof line;
    size_t used = (size_t)snprintf(line, cap, "%" PRId64, row->step);
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        if (i == 3) /* seconds, after lr */
            used += (size_t)snprintf(line + used, cap - used, isfinite(row->seconds) ? ",%.3f" : ",", row->seconds);
        used = put_cell(line, used, cap, sc[i].v, sc[i].on);
    }
    line[used++] = '\n';
    dz_status st = write_line(m->csv_fd, m->csv_path, line, used, row->step, err);
    if (st == DZ_OK && !m->tb) st = dz_tb_open_in(m->dir, &m->tb, err); /* at the first row: a start with
                                                                          * nothing to log makes no file */
    const double wall = dz_tb_wall_time();
    for (size_t i = 0; st == DZ_OK && i < sizeof sc / sizeof sc[0]; i++)
        if (sc[i].on && isfinite(sc[i].v)) st = dz_tb_scalar(m->tb, wall, row->step, sc[i].tag, (float)sc[i].v, err);
    return st == DZ_OK ? dz_tb_flush(m->tb, 0, err) : st;
}

/* The row's metrics.jsonl line, '\n' included; returns its length. */
static size_t format_row(const dz_metrics_row *row, char *line, size_t cap) {
    size_t used = (size_t)snprintf(line, cap, "{\"step\": %" PRId64, row->step);
    used = put_field(line, used, cap, "loss", row->loss);
    used = put_field(line, used, cap, "g", row->g);
    used = put_field(line, used, cap, "lr", row->lr);
    used += (size_t)snprintf(line + used, cap - used, ", \"seconds\": ");
    used += isfinite(row->seconds) ? (size_t)snprintf(line + used, cap - used, "%.3f", row->seconds)
                                   : (size_t)snprintf(line + used, cap - used, "null");
    if (row->has_eval) { /* the evaluation fields the task has (accuracy or loss) */
        const struct { const char *k; double v; } ev[] = {
            {"dev_accuracy", row->dev_accuracy}, {"test_accuracy", row->test_accuracy},
            {"best_dev_accuracy", row->best_dev_accuracy}, {"dev_loss", row->dev_loss}, {"test_loss", row->test_loss}};
        for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
            if (isfinite(ev[i].v)) used = put_field(line, used, cap, ev[i].k, ev[i].v);
    }
    used += (size_t)snprintf(line + used, cap - used, "}\n");
    return used;
}

dz_status dz_metrics_write_rows(const char *path, const dz_metrics_row *rows, size_t n, dz_error *err) {
    char *text = malloc(n * 512 + 1);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += format_row(&rows[i], text + len, 512);
    const dz_status st = dz_write_file_atomic(path, text, len, err);
    free(text);
    return st;
}

dz_status dz_metrics_append(dz_metrics *m, const dz_metrics_row *row, dz_error *err) {
    if (!m || !row) return dz_fail(err, DZ_ERR_INVALID, "metrics: append needs a writer and a row");
    if (row->step < m->last_step)
        return dz_fail(err, DZ_ERR_INVALID, "%s: step %" PRId64 " after step %" PRId64 " (steps must not decrease)",
                       m->path, row->step, m->last_step);
    char line[512];
    const size_t used = format_row(row, line, sizeof line);
    /* The views first, metrics.jsonl last: a resume trusts the jsonl's rows and trims the
     * CSV to them, so a failure between the two leaves nothing to disagree (a torn line is
     * dropped on reopen). */
    dz_status st = append_views(m, row, err);
    if (st == DZ_OK) st = write_line(m->fd, m->path, line, used, row->step, err);
    if (st != DZ_OK) return st;
    m->last_step = row->step;
    m->unsynced++;
    if (m->sync_every > 0 && m->unsynced >= m->sync_every) return dz_metrics_sync(m, err);
    return DZ_OK;
}

dz_status dz_metrics_close(dz_metrics *m, dz_error *err) {
    if (!m) return DZ_OK;
    dz_status st = dz_metrics_sync(m, err);
    if (m->tb) {
        dz_status cl = dz_tb_close(m->tb, st == DZ_OK ? err : NULL);
        m->tb = NULL;
        if (st == DZ_OK) st = cl;
    }
    free_writer(m);
    return st;
}
