/* GLUE SST-2 tsv: "sentence<TAB>label" (train/dev) or "index<TAB>sentence" (test, unlabelled). */
#include "data/internal.h"

#include <string.h>

typedef enum { SST2_LABELLED, SST2_TEST } sst2_layout;

static int all_digits(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static dz_status parse_header(dz_line_reader *r, sst2_layout *layout, dz_error *err) {
    char *line;
    size_t n;
    dz_status st = dz_lines_next(r, &line, &n, err);
    if (st != DZ_OK) return st;
    if (!line) return dz_fail(err, DZ_ERR_FORMAT, "%s:1: missing header: the file is empty", r->path);
    if (strcmp(line, "sentence\tlabel") == 0) *layout = SST2_LABELLED;
    else if (strcmp(line, "index\tsentence") == 0) *layout = SST2_TEST;
    else
        return dz_fail(err, DZ_ERR_FORMAT,
                       "%s:1: missing header: expected \"sentence<TAB>label\" (or \"index<TAB>sentence\"), "
                       "got \"%.60s\"", r->path, line);
    return DZ_OK;
}

/* Splits one data row into sentence and label (-1 for the test layout). */
static dz_status parse_row(const dz_line_reader *r, sst2_layout layout, char *line, size_t n,
                           const char **sentence, size_t *sentence_len, int *label, dz_error *err) {
    char *tab = memchr(line, '\t', n);
    int columns = 1;
    for (size_t i = 0; i < n; i++) columns += line[i] == '\t';
    if (columns != 2)
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected 2 tab-separated columns, found %d",
                       r->path, r->lineno, columns);
    const char *a = line, *b = tab + 1;
    size_t alen = (size_t)(tab - line), blen = n - alen - 1;
    if (layout == SST2_LABELLED) {
        if (blen != 1 || (b[0] != '0' && b[0] != '1'))
            return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: label must be 0 or 1, got \"%.20s\"",
                           r->path, r->lineno, b);
        *sentence = a;
        *sentence_len = alen;
        *label = b[0] - '0';
    } else {
        if (!all_digits(a, alen))
            return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: index must be a non-negative integer, got \"%.*s\"",
                           r->path, r->lineno, (int)(alen < 20 ? alen : 20), a);
        *sentence = b;
        *sentence_len = blen;
        *label = -1;
    }
    if (dz_is_blank(*sentence, *sentence_len))
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: empty sentence", r->path, r->lineno);
    return DZ_OK;
}

dz_status dz_dataset_load_sst2(const char *path, dz_dataset *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    dz_line_reader r;
    dz_status st = dz_lines_open(&r, path, err);
    if (st != DZ_OK) return st;
    sst2_layout layout = SST2_LABELLED;
    int cap = 0;
    st = parse_header(&r, &layout, err);
    if (st == DZ_OK) st = dz_dataset_init(out, path, err);
    while (st == DZ_OK) {
        char *line;
        size_t n;
        st = dz_lines_next(&r, &line, &n, err);
        if (st != DZ_OK || !line) break;
        const char *sentence = NULL;
        size_t sentence_len = 0;
        int label = -1;
        st = parse_row(&r, layout, line, n, &sentence, &sentence_len, &label, err);
        if (st == DZ_OK) st = dz_dataset_push(out, &cap, sentence, sentence_len, label, r.lineno, err);
    }
    if (st == DZ_OK && out->count == 0)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: no examples after the header", path);
    dz_lines_close(&r);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}
