/* Dataset plumbing shared by the loaders, plus the plain-text loader. */
#include "data/internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "distzo/log.h"

size_t dz_utf8_invalid_at(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == 0) return i; /* a NUL would silently cut the C string short */
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) { need = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { need = 2; cp = c & 0x0f; min = 0x800; }
        else if (c >= 0xf0 && c <= 0xf4) { need = 3; cp = c & 0x07; min = 0x10000; }
        else return i; /* stray continuation byte, or 0xc0/0xc1/0xf5..0xff */
        if (n - i <= need) return i;
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += need + 1;
    }
    return n;
}

static size_t skip_bom(const char *buf, size_t len) {
    return len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

dz_status dz_lines_open(dz_line_reader *r, const char *path, dz_error *err) {
    memset(r, 0, sizeof *r);
    r->path = path;
    dz_status st = dz_read_file(path, &r->buf, &r->len, err);
    if (st != DZ_OK) return st;
    r->pos = skip_bom(r->buf, r->len);
    return DZ_OK;
}

dz_status dz_lines_next(dz_line_reader *r, char **line, size_t *n, dz_error *err) {
    *line = NULL;
    *n = 0;
    if (r->pos >= r->len) return DZ_OK; /* a final newline does not start another line */
    char *start = r->buf + r->pos;
    size_t left = r->len - r->pos;
    char *nl = memchr(start, '\n', left);
    size_t len = nl ? (size_t)(nl - start) : left;
    r->pos += len + (nl ? 1 : 0);
    r->lineno++;
    if (len > DZ_DATA_MAX_LINE)
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: line is %zu bytes, longer than the limit of %d",
                       r->path, r->lineno, len, DZ_DATA_MAX_LINE);
    if (len > 0 && start[len - 1] == '\r') len--;
    start[len] = '\0';
    size_t bad = dz_utf8_invalid_at(start, len);
    if (bad < len)
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: invalid UTF-8 (byte 0x%02x at column %zu)",
                       r->path, r->lineno, (unsigned char)start[bad], bad + 1);
    *line = start;
    *n = len;
    return DZ_OK;
}

void dz_lines_close(dz_line_reader *r) {
    free(r->buf);
    r->buf = NULL;
}

dz_status dz_dataset_init(dz_dataset *out, const char *path, dz_error *err) {
    memset(out, 0, sizeof *out);
    out->path = strdup(path);
    if (!out->path) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    return DZ_OK;
}

dz_status dz_dataset_push(dz_dataset *ds, int *cap, const char *text, size_t n, int label, int line,
                          dz_error *err) {
    if (ds->count == *cap) {
        if (*cap > INT_MAX / 2) return dz_fail(err, DZ_ERR_FORMAT, "%s: too many examples", ds->path);
        int ncap = *cap ? *cap * 2 : 256;
        dz_example *items = realloc(ds->items, (size_t)ncap * sizeof *items);
        if (!items) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ds->path);
        ds->items = items;
        *cap = ncap;
    }
    char *copy = malloc(n + 1);
    if (!copy) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ds->path);
    memcpy(copy, text, n);
    copy[n] = '\0';
    ds->items[ds->count].text = copy;
    ds->items[ds->count].label = label;
    ds->items[ds->count].line = line;
    ds->items[ds->count].completion = NULL;
    ds->items[ds->count].cands = ds->items[ds->count].answers = NULL;
    ds->items[ds->count].n_cands = ds->items[ds->count].n_answers = 0;
    ds->count++;
    return DZ_OK;
}

int dz_is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && (s[i] < '\t' || s[i] > '\r')) return 0;
    return 1;
}

dz_status dz_dataset_require_labels(const dz_dataset *ds, dz_error *err) {
    for (int i = 0; i < ds->count; i++)
        if (ds->items[i].label < 0)
            return dz_fail(err, DZ_ERR_FORMAT,
                           "%s:%d: this row has no label, and training and model selection need one on every row "
                           "(an unlabelled split such as GLUE's test set can only be scored)",
                           ds->path ? ds->path : "dataset", ds->items[i].line);
    return DZ_OK;
}

static void free_list(char **strs, int n) {
    for (int i = 0; i < n; i++) free(strs[i]);
    free(strs);
}

dz_status dz_example_set_list(dz_example *ex, dz_example_list which, const char *const *strs, int n, dz_error *err) {
    char **copy = calloc((size_t)(n > 0 ? n : 1), sizeof *copy);
    int ok = copy != NULL;
    for (int i = 0; ok && i < n; i++) ok = (copy[i] = strdup(strs[i])) != NULL;
    if (!ok) {
        free_list(copy, n);
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory for an example's list");
    }
    char ***dst = which == DZ_EXAMPLE_CANDS ? &ex->cands : &ex->answers;
    int *dn = which == DZ_EXAMPLE_CANDS ? &ex->n_cands : &ex->n_answers;
    free_list(*dst, *dn);
    *dst = copy, *dn = n;
    return DZ_OK;
}

dz_status dz_dataset_append(dz_dataset *ds, int *cap, const dz_example *ex, dz_error *err) {
    dz_status st = dz_dataset_push(ds, cap, ex->text, strlen(ex->text), ex->label, ex->line, err);
    dz_example *dst = st == DZ_OK ? &ds->items[ds->count - 1] : NULL;
    if (st == DZ_OK && ex->completion && !(dst->completion = strdup(ex->completion)))
        st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", ds->path);
    if (st == DZ_OK && ex->cands)
        st = dz_example_set_list(dst, DZ_EXAMPLE_CANDS, (const char *const *)ex->cands, ex->n_cands, err);
    if (st == DZ_OK && ex->answers)
        st = dz_example_set_list(dst, DZ_EXAMPLE_ANSWERS, (const char *const *)ex->answers, ex->n_answers, err);
    return st;
}

void dz_dataset_free(dz_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < ds->count; i++) {
        free(ds->items[i].text);
        free(ds->items[i].completion);
        free_list(ds->items[i].cands, ds->items[i].n_cands);
        free_list(ds->items[i].answers, ds->items[i].n_answers);
    }
    free(ds->items);
    free(ds->path);
    memset(ds, 0, sizeof *ds);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int line_of(const char *buf, size_t off) {
    int line = 1;
    for (size_t i = 0; i < off; i++) line += buf[i] == '\n';
    return line;
}

dz_status dz_dataset_load_text(const char *path, dz_dataset *out, dz_error *err) {
    if (ends_with(path, ".jsonl")) return dz_dataset_load_lm_jsonl(path, out, err);
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    size_t start = skip_bom(buf, len);
    const char *text = buf + start;
    size_t n = len - start;
    size_t bad = dz_utf8_invalid_at(text, n);
    if (bad < n)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: invalid UTF-8 (byte 0x%02x at offset %zu)", path,
                     line_of(text, bad), (unsigned char)text[bad], start + bad);
    else if (dz_is_blank(text, n))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: file has no text", path);
    /* the text is the file's bytes (a run's data never changes under it): a Windows line end's
     * \r is scored as a character, so say so */
    const char *crlf = NULL;
    for (size_t i = 0; st == DZ_OK && !crlf && i + 1 < n; i++)
        if (text[i] == '\r' && text[i + 1] == '\n') crlf = text + i;
    if (crlf)
        dz_log(DZ_LOG_WARN, "%s:%d: Windows line ends (\\r\\n): the \\r characters are part of the text and are scored; "
               "convert the file (e.g. dos2unix) for the text alone", path, line_of(text, (size_t)(crlf - text)));
    int cap = 0;
    if (st == DZ_OK) st = dz_dataset_init(out, path, err);
    if (st == DZ_OK) st = dz_dataset_push(out, &cap, text, n, -1, 1, err);
    free(buf);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}
