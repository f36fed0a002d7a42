/* jsonl: one JSON object per line with a text field and an optional integer label. */
#include "data/internal.h"
#include "core/json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reads a class index from a JSON integer or from a string holding a decimal integer
 * (some exports quote every field). -1 if it is neither or out of range. */
static int label_value(const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        return (d >= 0 && d <= 1e9 && floor(d) == d) ? (int)d : -1;
    }
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        size_t n = strlen(s);
        if (n == 0 || n > 9 || strspn(s, "0123456789") != n) return -1;
        return atoi(s);
    }
    return -1;
}

/* An example's own candidates: a list of 2..DZ_MAX_CANDS non-empty strings, the label
 * (if any) one of their indexes. */
static dz_status parse_candidates(const dz_line_reader *r, const cJSON *v, int label, dz_example *ex, dz_error *err) {
    const int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 2 || n > DZ_MAX_CANDS)
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"candidates\" must be a list of 2 to %d strings", r->path,
                       r->lineno, DZ_MAX_CANDS);
    const char *strs[DZ_MAX_CANDS];
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsString(c) || !c->valuestring[0])
            return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"candidates\": entry %d is not a non-empty string",
                           r->path, r->lineno, i);
        strs[i] = c->valuestring;
        for (int j = 0; j < i; j++) /* a tie between them would be scored as the label's */
            if (!strcmp(strs[j], strs[i]))
                return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"candidates\": entries %d and %d are both \"%.60s\"",
                               r->path, r->lineno, j, i, strs[i]);
    }
    if (label >= n)
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: label %d, but the example has only %d candidates", r->path,
                       r->lineno, label, n);
    return dz_example_set_list(ex, DZ_EXAMPLE_CANDS, strs, n, err);
}

static dz_status parse_line(const dz_line_reader *r, const char *line, const char *text_key,
                            const char *label_key, dz_dataset *out, int *cap, dz_error *err) {
    const char *path = r->path;
    int ln = r->lineno;
    cJSON *obj = cJSON_ParseWithOpts(line, NULL, 1);
    if (!obj) return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: not valid JSON", path, ln);
    dz_status st = DZ_OK;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(obj, text_key);
    const cJSON *lab = label_key ? cJSON_GetObjectItemCaseSensitive(obj, label_key) : NULL;
    int label = -1;
    if (!cJSON_IsObject(obj))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected a JSON object", path, ln);
    else if (dz_json_repeated_key(obj))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" is given twice", path, ln, dz_json_repeated_key(obj));
    else if (!text)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: missing key \"%s\"", path, ln, text_key);
    else if (!cJSON_IsString(text))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" must be a string", path, ln, text_key);
    else if (dz_is_blank(text->valuestring, strlen(text->valuestring)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" is empty", path, ln, text_key);
    else if (label_key && !lab)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: missing key \"%s\"", path, ln, label_key);
    else if (label_key && (label = label_value(lab)) < 0)
        st = dz_fail(err, DZ_ERR_FORMAT,
                     "%s:%d: key \"%s\" must be a non-negative integer (or a string holding one)",
                     path, ln, label_key);
    if (st == DZ_OK)
        st = dz_dataset_push(out, cap, text->valuestring, strlen(text->valuestring), label, ln, err);
    const cJSON *cands = st == DZ_OK ? cJSON_GetObjectItemCaseSensitive(obj, "candidates") : NULL;
    if (cands) st = parse_candidates(r, cands, label, &out->items[out->count - 1], err);
    cJSON_Delete(obj);
    return st;
}

/* Reads path line by line (blank lines skipped), handing each to parse. */
typedef dz_status (*line_parser)(const dz_line_reader *r, const char *line, const void *ctx, dz_dataset *out, int *cap,
                                 dz_error *err);

static dz_status load_lines(const char *path, line_parser parse, const void *ctx, dz_dataset *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    dz_line_reader r;
    dz_status st = dz_lines_open(&r, path, err);
    if (st != DZ_OK) return st;
    int cap = 0;
    st = dz_dataset_init(out, path, err);
    while (st == DZ_OK) {
        char *line;
        size_t n;
        st = dz_lines_next(&r, &line, &n, err);
        if (st != DZ_OK || !line) break;
        if (dz_is_blank(line, n)) continue;
        st = parse(&r, line, ctx, out, &cap, err);
    }
    if (st == DZ_OK && out->count == 0) st = dz_fail(err, DZ_ERR_FORMAT, "%s: no examples", path);
    dz_lines_close(&r);
    if (st != DZ_OK) dz_dataset_free(out);
    return st;
}

typedef struct keys {
    const char *text, *label;
} keys;

static dz_status parse_class_line(const dz_line_reader *r, const char *line, const void *ctx, dz_dataset *out, int *cap,
                                  dz_error *err) {
    const keys *k = ctx;
    return parse_line(r, line, k->text, k->label, out, cap, err);
}

dz_status dz_dataset_load_jsonl(const char *path, const char *text_key, const char *label_key,
                                dz_dataset *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    if (!text_key || !*text_key)
        return dz_fail(err, DZ_ERR_INVALID, "%s: jsonl text key must be given", path);
    const keys k = {text_key, label_key};
    return load_lines(path, parse_class_line, &k, out, err);
}

/* A non-blank string under key, or NULL with err set (missing is not an error if optional). */
static const char *str_key(const cJSON *obj, const char *key, const dz_line_reader *r, int optional, dz_status *st,
                           dz_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (!optional) *st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: missing key \"%s\"", r->path, r->lineno, key);
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        *st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" must be a string", r->path, r->lineno, key);
        return NULL;
    }
    if (dz_is_blank(v->valuestring, strlen(v->valuestring))) {
        *st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" is empty", r->path, r->lineno, key);
        return NULL;
    }
    return v->valuestring;
}

static dz_status parse_lm_line(const dz_line_reader *r, const char *line, const void *ctx, dz_dataset *out, int *cap,
                               dz_error *err) {
    (void)ctx;
    cJSON *obj = cJSON_ParseWithOpts(line, NULL, 1);
    if (!obj || !cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected a JSON object", r->path, r->lineno);
    }
    dz_status st = DZ_OK;
    if (dz_json_repeated_key(obj))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: key \"%s\" is given twice", r->path, r->lineno, dz_json_repeated_key(obj));
    else if (cJSON_GetObjectItemCaseSensitive(obj, "text") && (cJSON_GetObjectItemCaseSensitive(obj, "prompt") ||
                                                               cJSON_GetObjectItemCaseSensitive(obj, "completion")))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: both \"text\" and \"prompt\"/\"completion\": give one or the other",
                     r->path, r->lineno);
    const char *text = st == DZ_OK ? str_key(obj, "text", r, 1, &st, err) : NULL, *prompt = NULL, *completion = NULL;
    if (st == DZ_OK && !text) {
        prompt = str_key(obj, "prompt", r, 1, &st, err);
        if (st == DZ_OK && !prompt)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: needs \"text\", or \"prompt\" and \"completion\"", r->path,
                         r->lineno);
        if (st == DZ_OK) completion = str_key(obj, "completion", r, 0, &st, err);
    }
    const char *first = text ? text : prompt;
    if (st == DZ_OK && first) st = dz_dataset_push(out, cap, first, strlen(first), -1, r->lineno, err);
    if (st == DZ_OK && completion) {
        out->items[out->count - 1].completion = strdup(completion);
        if (!out->items[out->count - 1].completion) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", r->path);
    }
    cJSON_Delete(obj);
    return st;
}

dz_status dz_dataset_load_lm_jsonl(const char *path, dz_dataset *out, dz_error *err) {
    return load_lines(path, parse_lm_line, NULL, out, err);
}
