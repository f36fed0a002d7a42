/* Helpers shared by the tokenizer tests: golden jsonl cases, SST-2 lines,
 * scratch folders. Header-only (static functions) so each test stays one program. */
#ifndef DZ_TOKENIZER_TEST_UTIL_H
#define DZ_TOKENIZER_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "distzo/tokenizer.h"
#include "assets.h"
#include "expect_error.h"

/* ---- SST-2 tsv: text of each file line (1-based), before the tab ---- */
typedef struct sst2_lines {
    char *buf;
    char **line; /* line[n] for n in 1..count */
    int count;
} sst2_lines;

static inline int sst2_read(const char *path, sst2_lines *out) {
    size_t len;
    dz_error err;
    memset(out, 0, sizeof *out);
    if (dz_read_file(path, &out->buf, &len, &err) != DZ_OK) return -1;
    int n = 1;
    for (size_t i = 0; i < len; i++) n += out->buf[i] == '\n';
    out->line = calloc((size_t)n + 1, sizeof *out->line);
    char *p = out->buf;
    for (int k = 1; p && *p; k++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        char *tab = strchr(p, '\t');
        if (tab) *tab = '\0';
        out->line[k] = p;
        out->count = k;
        p = nl ? nl + 1 : NULL;
    }
    return 0;
}

static inline void sst2_free(sst2_lines *s) {
    free(s->buf);
    free(s->line);
}

/* ---- golden jsonl: one object per line, with "text" or "sst2_dev_line" ---- */
typedef struct golden {
    int count;
    cJSON **row;
    const char **text; /* resolved text of each row (points into row or the SST-2 buffer) */
    sst2_lines dev;
    int n_dev;         /* rows that come from SST-2 */
} golden;

static inline void golden_load(golden *g, const char *name) {
    char path[4096], dev_path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/%s", DZ_TEST_DATA, name);
    test_asset_path(dev_path, sizeof dev_path, "sst2/dev.tsv");
    memset(g, 0, sizeof *g);
    assert_int_equal(sst2_read(dev_path, &g->dev), 0);
    char *buf;
    size_t len;
    dz_error err;
    assert_int_equal(dz_read_file(path, &buf, &len, &err), DZ_OK);
    int cap = 1;
    for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
    g->row = calloc((size_t)cap, sizeof *g->row);
    g->text = calloc((size_t)cap, sizeof *g->text);
    for (char *p = buf, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        cJSON *r = cJSON_Parse(p);
        assert_non_null(r);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "text");
        const cJSON *ln = cJSON_GetObjectItemCaseSensitive(r, "sst2_dev_line");
        if (cJSON_IsString(t)) {
            g->text[g->count] = t->valuestring;
        } else {
            assert_true(cJSON_IsNumber(ln) && ln->valueint >= 2 && ln->valueint <= g->dev.count);
            g->text[g->count] = g->dev.line[ln->valueint];
            g->n_dev++;
        }
        g->row[g->count++] = r;
    }
    free(buf);
}

static inline void golden_free(golden *g) {
    for (int i = 0; i < g->count; i++) cJSON_Delete(g->row[i]);
    free(g->row);
    free(g->text);
    sst2_free(&g->dev);
}

/* The int array row[key] into ids (cap room); returns its length, or -1 if the key is absent. */
static inline int golden_ids(const golden *g, int i, const char *key, int *ids, int cap) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(g->row[i], key);
    if (!cJSON_IsArray(a)) return -1;
    int n = 0;
    for (const cJSON *e = a->child; e; e = e->next, n++)
        if (n < cap) ids[n] = e->valueint;
    return n;
}

/* Encodes every golden text (flags: DZ_ENCODE_*; 1 is add_bos) and compares with row[key];
 * returns the number of mismatches (the first few are printed with both id lists). Rows
 * without the key are not counted. */
static inline int golden_check(const golden *g, const dz_tokenizer *tok, const char *key, unsigned flags, int *checked) {
    enum { CAP = 8192 };
    int *want = malloc(CAP * sizeof *want), *got = malloc(CAP * sizeof *got);
    int bad = 0;
    *checked = 0;
    for (int i = 0; i < g->count; i++) {
        int nw = golden_ids(g, i, key, want, CAP);
        if (nw < 0) continue;
        dz_error err = {0};
        int ng = dz_tokenizer_encode_flags(tok, g->text[i], flags, got, CAP, &err);
        assert_true(nw <= CAP && ng <= CAP);
        (*checked)++;
        if (ng == nw && memcmp(got, want, (size_t)nw * sizeof *got) == 0) continue;
        if (++bad <= 5) {
            print_error("%s mismatch on case %d (\"%.60s\"): got %d ids, want %d\n", key, i, g->text[i], ng, nw);
            for (int k = 0; k < ng && k < nw; k++)
                if (got[k] != want[k]) {
                    print_error("  first difference at %d: got %d, want %d\n", k, got[k], want[k]);
                    break;
                }
        }
    }
    free(want);
    free(got);
    return bad;
}

/* ASSETS/rel read whole (NUL-terminated; free it), its length in *len. */
static inline char *read_asset(const char *rel, size_t *len) {
    char path[4096], *text = NULL;
    test_asset_path(path, sizeof path, rel);
    dz_error err = {0};
    if (dz_read_file(path, &text, len, &err) != DZ_OK) fail_msg("%s", err.msg);
    return text;
}

/* Encodes every SST-2 training sentence with tok and prints the rate, for the record
 * (name: the tokenizer's, in the line). Frees tok. */
static inline void encode_speed_sst2(dz_tokenizer *tok, const char *name) {
    char train[4096];
    test_asset_path(train, sizeof train, "sst2/train.tsv");
    sst2_lines s;
    assert_int_equal(sst2_read(train, &s), 0);
    int ids[4096];
    long total = 0;
    double t0 = dz_now();
    for (int k = 2; k <= s.count; k++) total += dz_tokenizer_encode(tok, s.line[k], 1, ids, 4096, NULL);
    double dt = dz_now() - t0;
    print_message("%s encode: %d SST-2 train sentences, %ld tokens in %.3f s = %.2f M tokens/s\n", name, s.count - 1,
                  total, dt, total / dt / 1e6);
    dz_tokenizer_free(tok);
    sst2_free(&s);
}

/* ---- scratch folder for malformed files ---- */
typedef struct scratch {
    char dir[256];
} scratch;

static inline void scratch_make(scratch *s) {
    snprintf(s->dir, sizeof s->dir, "/tmp/dz_tok_test_XXXXXX");
    assert_non_null(mkdtemp(s->dir));
}

/* Writes dir/name; returns the full path in a static ring of buffers. */
static inline const char *scratch_write(scratch *s, const char *name, const void *data, size_t len) {
    static char paths[8][512];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 512, "%s/%s", s->dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

static inline const char *scratch_write_str(scratch *s, const char *name, const char *text) {
    return scratch_write(s, name, text, strlen(text));
}

static inline void scratch_remove(scratch *s, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    unlink(path);
}

static inline void scratch_free(scratch *s, const char *const *names) {
    for (; *names; names++) scratch_remove(s, *names);
    rmdir(s->dir);
}

/* Loading must fail with code, and err.msg must name needle (a file, usually). */
static inline void expect_load_error(const char *path, int vocab_size, dz_status code, const char *needle,
                              const char *needle2) {
    dz_tokenizer *tok = (dz_tokenizer *)1;
    dz_error err = {0};
    expect_error_naming(path, dz_tokenizer_load(path, vocab_size, &tok, &err), &err, code, needle, needle2);
    assert_null(tok);
}

/* One malformed file of a tokenizer folder: its name and text, and what loading the folder
 * must then say (needle2: NULL for none). */
typedef struct bad_file {
    const char *name, *text, *needle, *needle2;
} bad_file;

/* Each case's file written into s over the last one's (the other files as they are), then
 * loading s's folder must fail with DZ_ERR_FORMAT naming the case's needles. */
static inline void expect_bad_files(scratch *s, const bad_file *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        scratch_write_str(s, cases[i].name, cases[i].text);
        expect_load_error(s->dir, 0, DZ_ERR_FORMAT, cases[i].needle, cases[i].needle2);
    }
}

#endif
