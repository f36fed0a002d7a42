/* Over 500 lines, one file: the jsonl rows and their two views (csv, TensorBoard) are written,
 * read back and repaired together, through the same row struct and static helpers.
 * metrics.jsonl writer and reader, with the metrics.csv and TensorBoard views of the same
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
    dz_metrics_row *rows; /* open: metrics.jsonl's kept rows, to find those the views lack */
    size_t nrows;
};

/* The evaluation fields of a metrics.jsonl line, in the order they are written: one list for
 * the writer and the reader, so that a row with any of them is read as an evaluation row. */
static const char *const EVAL_KEYS[] = {"dev_accuracy", "test_accuracy", "best_dev_accuracy", "dev_loss",
                                        "test_loss"};
#define N_EVAL_KEYS (sizeof EVAL_KEYS / sizeof EVAL_KEYS[0])

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
        /* any evaluation field: a run without a dev set writes only the test scores */
        row->has_eval = 0;
        for (size_t i = 0; i < N_EVAL_KEYS; i++)
            row->has_eval |= cJSON_GetObjectItemCaseSensitive(obj, EVAL_KEYS[i]) != NULL;
        row->dev_accuracy = num_field(obj, "dev_accuracy");
        row->test_accuracy = num_field(obj, "test_accuracy");
        row->best_dev_accuracy = num_field(obj, "best_dev_accuracy");
        row->dev_loss = num_field(obj, "dev_loss");
        row->test_loss = num_field(obj, "test_loss");
    }
    cJSON_Delete(obj);
    return ok ? 0 : -1;
}

void dz_metrics_say_torn(const char *path, const dz_metrics_torn *t) {
    if (t->bytes)
        dz_log(DZ_LOG_WARN, "%s: dropping a torn tail of %zu bytes from line %zu: not metrics lines, and none intact "
               "after them (the writer stopped mid-line, a crash left unwritten blocks, or an edit)", path, t->bytes,
               t->line);
}

/* The good lines of buf. Bad lines after the last good one are a torn tail (the writer
 * stopped mid-line, or a machine crash left unwritten blocks), *torn (the caller says it).
 * A bad line before a good one is an error. *kept_bytes: where the good part ends. */
static dz_status scan_lines(const char *path, const char *buf, size_t len, line_span **out, size_t *n,
                            size_t *kept_bytes, dz_metrics_torn *torn, dz_error *err) {
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
    *torn = (dz_metrics_torn){.bytes = len - end, .line = end < len ? bad_line : 0};
    *out = spans;
    *n = count;
    *kept_bytes = end;
    return DZ_OK;
}

dz_status dz_metrics_read(const char *path, dz_metrics_row **rows, size_t *n, dz_error *err) {
    dz_metrics_torn torn;
    const dz_status st = dz_metrics_read_quiet(path, rows, n, &torn, err);
    if (st == DZ_OK) dz_metrics_say_torn(path, &torn);
    return st;
}

dz_status dz_metrics_read_quiet(const char *path, dz_metrics_row **rows, size_t *n, dz_metrics_torn *torn,
                                dz_error *err) {
    *rows = NULL;
    *n = 0;
    *torn = (dz_metrics_torn){0};
    char *buf;
    size_t len, count, kept;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    line_span *spans = NULL;
    st = scan_lines(path, buf, len, &spans, &count, &kept, torn, err);
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

/* One metrics.csv line (no '\n') into row; 0, or -1 when it is not one (the header, a torn line). */
static int parse_csv_line(const char *s, const char *end, dz_metrics_row *row) {
    double v[12]; /* the CSV_HEADER columns; an empty cell: not measured */
    int filled[12];
    for (int i = 0; i < 12; i++) {
        char *e = (char *)s;
        v[i] = s < end && *s != ',' ? strtod(s, &e) : NAN;
        filled[i] = e != s;
        if (e > end || (i < 11 && (e == end || *e != ',')) || (i == 11 && e != end)) return -1;
        s = e + (i < 11);
    }
    if (!filled[0] || v[0] != floor(v[0]) || v[0] < 0 || v[0] > 9e15) return -1;
    *row = (dz_metrics_row){.step = (int64_t)v[0], .loss = v[1], .g = v[2], .lr = v[3], .seconds = v[4],
                            .steps_per_s = filled[5] ? v[5] : 0, .step_bytes = filled[6] ? v[6] : 0,
                            .has_eval = filled[7] || filled[8] || filled[9] || filled[10] || filled[11],
                            .dev_accuracy = v[7], .test_accuracy = v[8], .best_dev_accuracy = v[9],
                            .dev_loss = v[10], .test_loss = v[11]};
    return 0;
}

dz_status dz_metrics_csv_read(const char *path, dz_metrics_row **rows, size_t *n, dz_error *err) {
    *rows = NULL;
    *n = 0;
    char *buf;
    size_t len;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
    dz_metrics_row *r = malloc(cap * sizeof *r);
    if (!r) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (size_t off = 0; r && off < len;) {
        const char *nl = memchr(buf + off, '\n', len - off);
        if (!nl) break; /* torn */
        if (parse_csv_line(buf + off, nl, &r[*n]) == 0) ++*n;
        off = (size_t)(nl - buf) + 1;
    }
    free(buf);
    *rows = r;
    return st;
}

/* ---- writing ---- */

/* Keeps the good lines with step <= keep_through; rewrites path atomically if that changes it. */
static dz_status trim_file(dz_metrics *m, int64_t keep_through, dz_error *err) {
    char *buf;
    size_t len, count, kept;
    dz_status st = dz_read_file(m->path, &buf, &len, err);
    if (st != DZ_OK) return st;
    line_span *spans = NULL;
    dz_metrics_torn torn;
    st = scan_lines(m->path, buf, len, &spans, &count, &kept, &torn, err);
    if (st != DZ_OK) {
        free(buf);
        return st;
    }
    dz_metrics_say_torn(m->path, &torn);
    size_t used = 0, dropped = 0;
    m->rows = malloc((count ? count : 1) * sizeof *m->rows);
    for (size_t i = 0; m->rows && i < count; i++) {
        if (spans[i].row.step > keep_through) {
            dropped++;
            continue;
        }
        m->rows[m->nrows++] = spans[i].row;
        memmove(buf + used, buf + spans[i].off, spans[i].len);
        used += spans[i].len;
        if (spans[i].row.step > m->last_step) m->last_step = spans[i].row.step;
    }
    free(spans);
    if (!m->rows) {
        free(buf);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", m->path);
    }
    if (dropped)
        dz_log(DZ_LOG_INFO, "%s: dropping %zu line(s) past step %" PRId64 " (resuming from it)", m->path, dropped,
               keep_through);
    if (used < len) st = dz_write_file_atomic(m->path, buf, used, err);
    free(buf);
    return st;
}

static size_t csv_line(const dz_metrics_row *row, char *line, size_t cap);
static dz_status tb_row(dz_metrics *m, const dz_metrics_row *row, dz_error *err);

static int cmp_step(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* steps: sorted (open_csv sorts them). */
static int has_step(const int64_t *steps, size_t n, int64_t step) {
    return n && bsearch(&step, steps, n, sizeof *steps, cmp_step) != NULL;
}

/* The rows of metrics.jsonl that metrics.csv (its lines' steps: steps[0..n)) lacks (resume
 * rebuilt them, or the CSV was removed): into the CSV in step order, and the TensorBoard
 * events, said. The views then hold what metrics.jsonl holds. */
static dz_status add_missing_rows(dz_metrics *m, const char *csv, size_t len, const int64_t *steps, size_t n,
                                  dz_error *err) {
    size_t missing = 0;
    for (size_t i = 0; i < m->nrows; i++) missing += !has_step(steps, n, m->rows[i].step);
    if (missing == 0) return csv ? DZ_OK : dz_write_file_atomic(m->csv_path, CSV_HEADER, strlen(CSV_HEADER), err);
    if (!csv) csv = CSV_HEADER, len = strlen(CSV_HEADER);
    char *out = malloc(len + missing * 512);
    if (!out) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", m->csv_path);
    size_t off = 0, used = strlen(CSV_HEADER); /* the header, then the file's lines after its own */
    memcpy(out, CSV_HEADER, used);
    if (!strncmp(csv, "step,", 5)) off = (size_t)((const char *)memchr(csv, '\n', len) - csv) + 1;
    for (size_t i = 0; i <= m->nrows; i++) { /* the CSV's lines before each missing row, then the row */
        const int64_t step = i < m->nrows ? m->rows[i].step : INT64_MAX;
        if (i < m->nrows && has_step(steps, n, step)) continue;
        while (off < len && strtoll(csv + off, NULL, 10) < step) {
            const size_t llen = (size_t)((const char *)memchr(csv + off, '\n', len - off) - (csv + off)) + 1;
            memcpy(out + used, csv + off, llen), used += llen, off += llen;
        }
        if (i < m->nrows) used += csv_line(&m->rows[i], out + used, 512);
    }
    dz_status st = dz_write_file_atomic(m->csv_path, out, used, err);
    free(out);
    for (size_t i = 0; st == DZ_OK && i < m->nrows; i++)
        if (!has_step(steps, n, m->rows[i].step)) st = tb_row(m, &m->rows[i], err);
    if (st == DZ_OK)
        dz_log(DZ_LOG_INFO, "%s: %zu row(s) of metrics.jsonl added, and to the TensorBoard events", m->csv_path,
               missing);
    return st;
}

/* metrics.csv: the header, then the whole lines with step <= keep_through (a line cut
 * short by a crash is dropped), with the rows of metrics.jsonl it lacks added; created
 * when missing. */
static dz_status open_csv(dz_metrics *m, int64_t keep_through, dz_error *err) {
    dz_status st = DZ_OK;
    if (!dz_file_exists(m->csv_path)) {
        st = add_missing_rows(m, NULL, 0, NULL, 0, err);
    } else {
        char *buf;
        size_t len, used = 0, n = 0;
        if ((st = dz_read_file(m->csv_path, &buf, &len, err)) != DZ_OK) return st;
        int64_t *steps = malloc(sizeof *steps * (len / 2 + 1)); /* a line has 2 bytes at least */
        if (!steps) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", m->csv_path);
        for (size_t off = 0; steps && off < len;) {
            const char *nl = memchr(buf + off, '\n', len - off);
            if (!nl) break; /* torn */
            const size_t llen = (size_t)(nl - (buf + off)) + 1;
            char *end;
            const long long step = strtoll(buf + off, &end, 10);
            const int header = off == 0 && !strncmp(buf, "step,", 5);
            if (header || (end != buf + off && *end == ',' && step <= keep_through)) {
                if (!header) steps[n++] = step;
                memmove(buf + used, buf + off, llen);
                used += llen;
            }
            off += llen;
        }
        if (used == 0) memcpy(buf, CSV_HEADER, used = strlen(CSV_HEADER)); /* fits: the file had more than 0 bytes */
        if (st == DZ_OK && used != len) st = dz_write_file_atomic(m->csv_path, buf, used, err);
        if (st == DZ_OK && n) qsort(steps, n, sizeof *steps, cmp_step);
        if (st == DZ_OK) st = add_missing_rows(m, buf, used, steps, n, err);
        free(buf), free(steps);
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
    free(m->rows);
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
    free(m->rows), m->rows = NULL, m->nrows = 0;
    if (st != DZ_OK) {
        free_writer(m);
        return st;
    }
    *out = m;
    return DZ_OK;
}

double dz_metrics_value(double v) { return isfinite(v) ? (double)(float)v : v; }

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

/* A row's scalars, in metrics.csv's column order (seconds, after lr, aside). */
typedef struct view_scalar {
    const char *tag;
    double v;
    int on;
} view_scalar;
#define N_VIEW_SCALARS 10

static void view_scalars(const dz_metrics_row *row, view_scalar sc[N_VIEW_SCALARS]) {
    const view_scalar all[N_VIEW_SCALARS] = {
        {"train/loss", row->loss, 1}, {"train/g", row->g, 1}, {"train/lr", row->lr, 1},
        {"train/steps_per_s", row->steps_per_s, row->steps_per_s > 0},
        {"train/bytes_per_step", row->step_bytes, row->step_bytes > 0},
        {"eval/dev_accuracy", row->dev_accuracy, row->has_eval}, {"eval/test_accuracy", row->test_accuracy, row->has_eval},
        {"eval/best_dev_accuracy", row->best_dev_accuracy, row->has_eval},
        {"eval/dev_loss", row->dev_loss, row->has_eval}, {"eval/test_loss", row->test_loss, row->has_eval},
    };
    memcpy(sc, all, sizeof all);
}

/* The row's metrics.csv line, '\n' included (cap >= 512); returns its length. */
static size_t csv_line(const dz_metrics_row *row, char *line, size_t cap) {
    view_scalar sc[N_VIEW_SCALARS];
    view_scalars(row, sc);
    size_t used = (size_t)snprintf(line, cap, "%" PRId64, row->step);
    for (size_t i = 0; i < N_VIEW_SCALARS; i++) {
        if (i == 3) /* seconds, after lr */
            used += (size_t)snprintf(line + used, cap - used, isfinite(row->seconds) ? ",%.3f" : ",", row->seconds);
        used = put_cell(line, used, cap, sc[i].v, sc[i].on);
    }
    line[used++] = '\n';
    return used;
}

/* The row's TensorBoard scalars. */
static dz_status tb_row(dz_metrics *m, const dz_metrics_row *row, dz_error *err) {
    view_scalar sc[N_VIEW_SCALARS];
    view_scalars(row, sc);
    dz_status st = m->tb ? DZ_OK : dz_tb_open_in(m->dir, &m->tb, err); /* at the first row: a start with
                                                                         * nothing to log makes no file */
    const double wall = dz_tb_wall_time();
    for (size_t i = 0; st == DZ_OK && i < N_VIEW_SCALARS; i++)
        if (sc[i].on && isfinite(sc[i].v)) st = dz_tb_scalar(m->tb, wall, row->step, sc[i].tag, (float)sc[i].v, err);
    return st == DZ_OK ? dz_tb_flush(m->tb, 0, err) : st;
}

/* The row's metrics.csv line and TensorBoard scalars. */
static dz_status append_views(dz_metrics *m, const dz_metrics_row *row, dz_error *err) {
    char line[512];
    const size_t used = csv_line(row, line, sizeof line);
    dz_status st = write_line(m->csv_fd, m->csv_path, line, used, row->step, err);
    return st == DZ_OK ? tb_row(m, row, err) : st;
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
        const double ev[N_EVAL_KEYS] = {row->dev_accuracy, row->test_accuracy, row->best_dev_accuracy, row->dev_loss,
                                         row->test_loss}; /* EVAL_KEYS' order */
        for (size_t i = 0; i < N_EVAL_KEYS; i++)
            if (isfinite(ev[i])) used = put_field(line, used, cap, EVAL_KEYS[i], ev[i]);
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
