/* Data layer: SST-2 / jsonl / text loaders, prompt specs and sampling.
 * Expected values for the real SST-2 files were read with sed/awk, not with our loader:
 *   sed -n 2p dev.tsv; sed -n 873p dev.tsv; sed -n 19p dev.tsv; sed -n 2p train.tsv; tail -1 train.tsv
 *   awk -F'\t' 'NR>1{c[$2]++} END{for(k in c) print k, c[k]}' dev.tsv   (and train.tsv)
 * Sample indices come from tools/sample_reference.py (an independent Python implementation). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "assets.h"
#include "distzo/data.h"

static char g_tmp[256];  /* per-run temp dir for hand-written bad files */

/* Writes len bytes of content to g_tmp/name; out gets the full path. */
static void write_file(const char *name, const char *content, size_t len, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", g_tmp, name);
    FILE *f = fopen(out, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(content, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_str(const char *name, const char *content, char *out, size_t cap) {
    write_file(name, content, strlen(content), out, cap);
}

/* The error names "path:line:" (line > 0) or at least the path (line == 0). */
static void assert_msg_names(const dz_error *err, const char *path, int line, const char *what) {
    char where[600];
    if (line > 0) snprintf(where, sizeof where, "%s:%d:", path, line);
    else snprintf(where, sizeof where, "%s", path);
    if (!strstr(err->msg, where) || (what && !strstr(err->msg, what)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err->msg, where, what ? what : "");
}

/* ---- real SST-2 ---- */

static void sst2_dev_real(void **state) {
    (void)state;
    char path[512];
    test_asset_path(path, sizeof path, "sst2/dev.tsv");
    dz_dataset ds;
    dz_error err = {0};
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 872);
    assert_string_equal(ds.path, path);
    assert_string_equal(ds.items[0].text, "it 's a charming and often affecting journey . ");
    assert_int_equal(ds.items[0].label, 1);
    assert_string_equal(ds.items[1].text, "unflinchingly bleak and desperate ");
    assert_int_equal(ds.items[1].label, 0);
    assert_string_equal(ds.items[871].text,
                        "looking aristocratic , luminous yet careworn in jane hamilton 's exemplary "
                        "costumes , rampling gives a performance that could not be improved upon . ' ");
    assert_int_equal(ds.items[871].label, 1);
    /* file line 19: non-ASCII text survives byte for byte */
    assert_non_null(strstr(ds.items[17].text, "as she was in am\xc3\xa9lie . "));
    int pos = 0, neg = 0;
    for (int i = 0; i < ds.count; i++) {
        if (ds.items[i].label == 1) pos++;
        else if (ds.items[i].label == 0) neg++;
    }
    assert_int_equal(pos, 444);
    assert_int_equal(neg, 428);
    dz_dataset_free(&ds);
    assert_int_equal(ds.count, 0);
    assert_null(ds.items);
    dz_dataset_free(&ds); /* idempotent */
}

static void sst2_train_real(void **state) {
    (void)state;
    char path[512];
    test_asset_path(path, sizeof path, "sst2/train.tsv");
    dz_dataset ds;
    dz_error err = {0};
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 67349);
    assert_string_equal(ds.items[0].text, "hide new secretions from the parental units ");
    assert_int_equal(ds.items[0].label, 0);
    assert_string_equal(ds.items[67348].text,
                        "this new jangle of noise , mayhem and stupidity must be a serious contender "
                        "for the title . ");
    assert_int_equal(ds.items[67348].label, 0);
    int pos = 0;
    for (int i = 0; i < ds.count; i++) pos += ds.items[i].label == 1;
    assert_int_equal(pos, 37569);
    assert_int_equal(ds.count - pos, 29780);

    /* Sample indices 67284, 51484, 29858 (tools/sample_reference.py, seed 1), whose rows
     * are file lines 67286, 51486, 29860. */
    dz_dataset s;
    assert_int_equal(dz_dataset_sample(&ds, 5, 1, &s, &err), DZ_OK);
    assert_int_equal(s.count, 5);
    assert_string_equal(s.items[0].text, "of afghan tragedies ");
    assert_int_equal(s.items[0].label, 0);
    assert_string_equal(s.items[1].text, "chronically ");
    assert_string_equal(s.items[2].text, ", storytelling is far more appealing ");
    assert_int_equal(s.items[2].label, 1);
    dz_dataset_free(&s);
    dz_dataset_free(&ds);
}

/* ---- SST-2 format cases ---- */

static void sst2_good_variants(void **state) {
    (void)state;
    char path[512];
    dz_dataset ds;
    dz_error err = {0};

    /* CRLF, BOM, no final newline */
    write_str("crlf.tsv", "\xef\xbb\xbfsentence\tlabel\r\nfoo bar \t1\r\nbaz\t0", path, sizeof path);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 2);
    assert_string_equal(ds.items[0].text, "foo bar ");
    assert_int_equal(ds.items[0].label, 1);
    assert_string_equal(ds.items[1].text, "baz");
    assert_int_equal(ds.items[1].label, 0);
    dz_dataset_free(&ds);

    /* GLUE test layout: unlabelled */
    write_str("test.tsv", "index\tsentence\n0\tfirst one\n1\tsecond\n", path, sizeof path);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 2);
    assert_string_equal(ds.items[1].text, "second");
    assert_int_equal(ds.items[0].label, -1);
    assert_int_equal(ds.items[1].label, -1);
    dz_dataset_free(&ds);
}

typedef struct bad_case {
    const char *name, *content;
    int line;          /* line the message must name; 0 = just the path */
    const char *what;  /* substring the message must contain */
} bad_case;

static void sst2_bad_files(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"empty.tsv", "", 1, "missing header"},
        {"wronghdr.tsv", "text\tlabel\nfoo\t1\n", 1, "missing header"},
        {"nohdr.tsv", "a fine film\t1\nbad\t0\n", 1, "missing header"},
        {"threecol.tsv", "sentence\tlabel\nok\t1\nnot ok\t0\textra\n", 3, "columns"},
        {"onecol.tsv", "sentence\tlabel\nok\t1\nok\t0\nno tab here\n", 4, "columns"},
        {"blankline.tsv", "sentence\tlabel\nok\t1\n\nok\t0\n", 3, "columns"},
        {"label2.tsv", "sentence\tlabel\nok\t1\nok\t2\n", 3, "label must be 0 or 1"},
        {"labelneg.tsv", "sentence\tlabel\nok\t-1\n", 2, "label must be 0 or 1"},
        {"labelspace.tsv", "sentence\tlabel\nok\t1 \n", 2, "label must be 0 or 1"},
        {"labelnone.tsv", "sentence\tlabel\nok\t\n", 2, "label must be 0 or 1"},
        {"labelcrlf.tsv", "sentence\tlabel\r\nok\t1\r\nok\tx\r\n", 3, "label must be 0 or 1"},
        {"emptysent.tsv", "sentence\tlabel\nok\t1\n\t0\n", 3, "empty sentence"},
        {"blanksent.tsv", "sentence\tlabel\n   \t0\n", 2, "empty sentence"},
        {"latin1.tsv", "sentence\tlabel\nok\t1\ncaf\xe9 au lait\t1\n", 3, "UTF-8"},
        {"overlong.tsv", "sentence\tlabel\n\xc0\xaf\t1\n", 2, "UTF-8"},
        {"surrogate.tsv", "sentence\tlabel\nx\xed\xa0\x80y\t1\n", 2, "UTF-8"},
        {"truncated.tsv", "sentence\tlabel\nx\xe2\x82\t1\n", 2, "UTF-8"},
        {"toobig.tsv", "sentence\tlabel\nx\xf4\x90\x80\x80\t1\n", 2, "UTF-8"},
        {"headeronly.tsv", "sentence\tlabel\n", 0, "no examples"},
        {"testidx.tsv", "index\tsentence\n0\tok\nx\tok\n", 3, "index"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        dz_dataset ds;
        dz_error err = {0};
        write_str(cases[i].name, cases[i].content, path, sizeof path);
        dz_status st = dz_dataset_load_sst2(path, &ds, &err);
        if (st != DZ_ERR_FORMAT) fail_msg("%s: status %d, msg \"%s\"", cases[i].name, st, err.msg);
        assert_msg_names(&err, path, cases[i].line, cases[i].what);
        assert_int_equal(ds.count, 0);
        assert_null(ds.items);
        assert_null(ds.path);
    }
}

static void sst2_nul_and_long_lines(void **state) {
    (void)state;
    char path[512];
    dz_dataset ds;
    dz_error err = {0};
    static const char nul[] = "sentence\tlabel\nok\t1\na\0b\t1\n";
    write_file("nul.tsv", nul, sizeof nul - 1, path, sizeof path);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 3, NULL);

    /* one byte over the limit on line 3; a line exactly at the limit is fine */
    size_t n = DZ_DATA_MAX_LINE;
    char *buf = malloc(n + 64);
    assert_non_null(buf);
    int off = snprintf(buf, 64, "sentence\tlabel\nok\t1\n");
    memset(buf + off, 'a', n - 2);
    memcpy(buf + off + n - 2, "\t1\n", 3);
    write_file("atlimit.tsv", buf, (size_t)off + n + 1, path, sizeof path);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 2);
    assert_int_equal(strlen(ds.items[1].text), n - 2);
    dz_dataset_free(&ds);
    memset(buf + off, 'a', n - 1);
    memcpy(buf + off + n - 1, "\t1\n", 3);
    write_file("long.tsv", buf, (size_t)off + n + 2, path, sizeof path);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 3, "longer than");
    free(buf);

    snprintf(path, sizeof path, "%s/does-not-exist.tsv", g_tmp);
    assert_int_equal(dz_dataset_load_sst2(path, &ds, &err), DZ_ERR_IO);
    assert_msg_names(&err, path, 0, NULL);
}

/* ---- jsonl ---- */

static void jsonl_good(void **state) {
    (void)state;
    char path[512];
    dz_dataset ds;
    dz_error err = {0};
    write_str("good.jsonl",
              "{\"text\": \"a\", \"label\": 1}\n"
              "\n"
              "{\"text\": \"b\\u00e9\", \"label\": \"0\"}\r\n"
              "   \n"
              "{\"label\": 2.0, \"text\": \"c\\td\", \"extra\": [1, {\"x\": null}]}",
              path, sizeof path);
    assert_int_equal(dz_dataset_load_jsonl(path, "text", "label", &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 3);
    assert_string_equal(ds.items[0].text, "a");
    assert_int_equal(ds.items[0].label, 1);
    assert_string_equal(ds.items[1].text, "b\xc3\xa9");
    assert_int_equal(ds.items[1].label, 0);
    assert_string_equal(ds.items[2].text, "c\td");
    assert_int_equal(ds.items[2].label, 2);
    dz_dataset_free(&ds);

    /* without a label key everything is unlabelled; labels need not be present */
    write_str("nolabel.jsonl", "{\"body\": \"x\"}\n{\"body\": \"y\", \"label\": \"junk\"}\n", path,
              sizeof path);
    assert_int_equal(dz_dataset_load_jsonl(path, "body", NULL, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 2);
    assert_string_equal(ds.items[1].text, "y");
    assert_int_equal(ds.items[0].label, -1);
    assert_int_equal(ds.items[1].label, -1);
    dz_dataset_free(&ds);
}

static void jsonl_bad(void **state) {
    (void)state;
    /* every file has a good first line, so the fault is on line 2 unless noted */
#define OK1 "{\"sentence\": \"fine\", \"y\": 0}\n"
    static const bad_case cases[] = {
        {"notjson.jsonl", OK1 "{\"sentence\": \"a\"\n", 2, "JSON"},
        {"trailing.jsonl", OK1 "{\"sentence\": \"a\", \"y\": 1} x\n", 2, "JSON"},
        {"array.jsonl", OK1 "[1, 2]\n", 2, "object"},
        {"notext.jsonl", OK1 "{\"text\": \"a\", \"y\": 1}\n", 2, "\"sentence\""},
        {"textnum.jsonl", OK1 "{\"sentence\": 5, \"y\": 1}\n", 2, "\"sentence\""},
        {"textempty.jsonl", OK1 "{\"sentence\": \"\", \"y\": 1}\n", 2, "\"sentence\""},
        {"nolabel.jsonl", OK1 "{\"sentence\": \"a\"}\n", 2, "\"y\""},
        {"labelfrac.jsonl", OK1 "{\"sentence\": \"a\", \"y\": 1.5}\n", 2, "\"y\""},
        {"labelneg.jsonl", OK1 "{\"sentence\": \"a\", \"y\": -1}\n", 2, "\"y\""},
        {"labelbool.jsonl", OK1 "{\"sentence\": \"a\", \"y\": true}\n", 2, "\"y\""},
        {"labelword.jsonl", OK1 "{\"sentence\": \"a\", \"y\": \"positive\"}\n", 2, "\"y\""},
        {"labelmix.jsonl", OK1 "{\"sentence\": \"a\", \"y\": \"1a\"}\n", 2, "\"y\""},
        {"labelstrempty.jsonl", OK1 "{\"sentence\": \"a\", \"y\": \"\"}\n", 2, "\"y\""},
        {"labelhuge.jsonl", OK1 "{\"sentence\": \"a\", \"y\": 1e12}\n", 2, "\"y\""},
        {"afterblank.jsonl", OK1 "\n\n{\"sentence\": \"a\", \"y\": null}\n", 4, "\"y\""},
        {"latin1.jsonl", OK1 "{\"sentence\": \"caf\xe9\", \"y\": 1}\n", 2, "UTF-8"},
        {"blank.jsonl", "\n  \n", 0, "no examples"},
    };
#undef OK1
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        dz_dataset ds;
        dz_error err = {0};
        write_str(cases[i].name, cases[i].content, path, sizeof path);
        dz_status st = dz_dataset_load_jsonl(path, "sentence", "y", &ds, &err);
        if (st != DZ_ERR_FORMAT) fail_msg("%s: status %d, msg \"%s\"", cases[i].name, st, err.msg);
        assert_msg_names(&err, path, cases[i].line, cases[i].what);
        assert_int_equal(ds.count, 0);
        assert_null(ds.items);
    }
}

/* ---- plain text ---- */

static void text_files(void **state) {
    (void)state;
    char path[512];
    dz_dataset ds;
    dz_error err = {0};
    const char *story = "Once upon a time.\n\nThe end. \xe2\x9c\x93\n";
    write_str("story.txt", story, path, sizeof path);
    assert_int_equal(dz_dataset_load_text(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 1);
    assert_string_equal(ds.items[0].text, story);
    assert_int_equal(ds.items[0].label, -1);
    dz_dataset_free(&ds);

    write_str("docs.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\", \"label\": 1}\n", path, sizeof path);
    assert_int_equal(dz_dataset_load_text(path, &ds, &err), DZ_OK);
    assert_int_equal(ds.count, 2);
    assert_string_equal(ds.items[1].text, "two");
    assert_int_equal(ds.items[1].label, -1);
    dz_dataset_free(&ds);

    write_str("bad.txt", "line one\nline two\nbad \xff byte\n", path, sizeof path);
    assert_int_equal(dz_dataset_load_text(path, &ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 3, "UTF-8");
    assert_null(ds.items);

    write_str("empty.txt", " \n\n", path, sizeof path);
    assert_int_equal(dz_dataset_load_text(path, &ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 0, "no text");

    write_str("bad.jsonl", "{\"text\": \"one\"}\n{\"txt\": \"two\"}\n", path, sizeof path);
    assert_int_equal(dz_dataset_load_text(path, &ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 2, "\"text\"");
}

/* ---- prompts ---- */

static void prompt_default_and_render(void **state) {
    (void)state;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    assert_string_equal(spec.template_, "{text} It was");
    assert_int_equal(spec.n_labels, 2);
    assert_string_equal(spec.label_words[0], " terrible");
    assert_string_equal(spec.label_words[1], " great");

    /* dev.tsv row 1, trailing space and all: MeZO's prompt strips it */
    char out[256];
    const char *want = "it 's a charming and often affecting journey . It was";
    int n = dz_prompt_render(&spec, "it 's a charming and often affecting journey . ", out, sizeof out);
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(out, want);
    /* exactly enough room, then one byte short */
    assert_int_equal(dz_prompt_render(&spec, "  x\t", out, 10), 8);
    assert_string_equal(out, "x It was");
    assert_int_equal(dz_prompt_render(&spec, "ab", out, 10), 9);
    assert_string_equal(out, "ab It was");
    assert_int_equal(dz_prompt_render(&spec, "abc", out, 10), -1);
    assert_string_equal(out, "");

    dz_error err = {0};
    assert_int_equal(dz_prompt_spec_set_template(&spec, "Review: {text}\nSentiment:", &err), DZ_OK);
    assert_int_equal(dz_prompt_render(&spec, "\nfun ", out, sizeof out), 22);
    assert_string_equal(out, "Review: fun\nSentiment:");
}

static void prompt_template_errors(void **state) {
    (void)state;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    dz_error err = {0};
    const char *bad[] = {"It was", "{text} and {text}", "{txt} It was", "{ text }", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dz_prompt_spec_set_template(&spec, bad[i], &err), DZ_ERR_INVALID);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        assert_non_null(strstr(err.msg, quoted));
        assert_string_equal(spec.template_, "{text} It was");
    }
    char big[600];
    memset(big, 'x', sizeof big);
    memcpy(big, "{text}", 6);
    big[511] = '\0'; /* 511 bytes: fits */
    assert_int_equal(dz_prompt_spec_set_template(&spec, big, &err), DZ_OK);
    big[511] = 'x';
    big[512] = '\0'; /* 512 bytes: does not */
    assert_int_equal(dz_prompt_spec_set_template(&spec, big, &err), DZ_ERR_INVALID);
    assert_int_equal(strlen(spec.template_), 511);
}

static void prompt_labels(void **state) {
    (void)state;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    dz_error err = {0};
    assert_int_equal(dz_prompt_spec_set_labels(&spec, "bad,good", &err), DZ_OK);
    assert_int_equal(spec.n_labels, 2);
    assert_string_equal(spec.label_words[0], " bad");
    assert_string_equal(spec.label_words[1], " good");
    assert_int_equal(dz_prompt_spec_set_labels(&spec, " neg, pos,neutral", &err), DZ_OK);
    assert_int_equal(spec.n_labels, 3);
    assert_string_equal(spec.label_words[0], " neg");
    assert_string_equal(spec.label_words[1], " pos");
    assert_string_equal(spec.label_words[2], " neutral");
    assert_string_equal(spec.template_, "{text} It was"); /* untouched */

    /* 16 words fit, 17 do not */
    assert_int_equal(dz_prompt_spec_set_labels(&spec, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p", &err), DZ_OK);
    assert_int_equal(spec.n_labels, 16);
    assert_string_equal(spec.label_words[15], " p");
    dz_prompt_spec_default_sst2(&spec);

    /* 63 bytes fit in label_words[i][64]: 62 letters + added space, or 63 with its own */
    char w[80];
    memset(w, 'w', 62);
    strcpy(w + 62, ",x");
    assert_int_equal(dz_prompt_spec_set_labels(&spec, w, &err), DZ_OK);
    assert_int_equal(strlen(spec.label_words[0]), 63);
    w[0] = ' ';
    memset(w + 1, 'w', 62);
    strcpy(w + 63, ",x");
    assert_int_equal(dz_prompt_spec_set_labels(&spec, w, &err), DZ_OK);
    assert_int_equal(strlen(spec.label_words[0]), 63);
    dz_prompt_spec_default_sst2(&spec);

    memset(w, 'w', 63);
    strcpy(w + 63, ",x");
    const char *bad[] = {"a,,b", ",a,b", "a,b,", "", "great", ",",
                         "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", w};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dz_prompt_spec_set_labels(&spec, bad[i], &err), DZ_ERR_INVALID);
        char quoted[96];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        if (!strstr(err.msg, quoted)) fail_msg("message \"%s\" does not quote %s", err.msg, quoted);
        assert_int_equal(spec.n_labels, 2); /* unchanged on error */
        assert_string_equal(spec.label_words[0], " terrible");
        assert_string_equal(spec.label_words[1], " great");
    }
}

/* ---- sampling ---- */

static void make_synthetic(dz_dataset *ds, int n) {
    ds->count = n;
    ds->items = calloc((size_t)n, sizeof *ds->items);
    ds->path = strdup("synthetic");
    assert_non_null(ds->items);
    for (int i = 0; i < n; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "ex%d", i);
        ds->items[i].text = strdup(buf);
        ds->items[i].label = i % 3;
    }
}

/* Index of each sampled example (from its "exN" text); fails on a repeat. */
static void sample_indices(const dz_dataset *s, int src_count, int *idx) {
    char *seen = calloc((size_t)src_count, 1);
    for (int i = 0; i < s->count; i++) {
        int k = atoi(s->items[i].text + 2);
        assert_in_range(k, 0, src_count - 1);
        if (seen[k]) fail_msg("example %d drawn twice", k);
        seen[k] = 1;
        assert_int_equal(s->items[i].label, k % 3);
        idx[i] = k;
    }
    free(seen);
}

static void sample_known_answer(void **state) {
    (void)state;
    dz_dataset src, s;
    dz_error err = {0};
    make_synthetic(&src, 100);
    /* tools/sample_reference.py */
    static const int want42[10] = {13, 83, 86, 9, 2, 27, 87, 45, 65, 28};
    static const int want0[10] = {35, 55, 39, 38, 95, 1, 21, 72, 79, 0};
    int idx[100];
    assert_int_equal(dz_dataset_sample(&src, 10, 42, &s, &err), DZ_OK);
    assert_int_equal(s.count, 10);
    sample_indices(&s, 100, idx);
    assert_memory_equal(idx, want42, sizeof want42);
    assert_string_equal(s.path, "synthetic");
    assert_ptr_not_equal(s.items[0].text, src.items[13].text); /* copied, not shared */
    dz_dataset_free(&s);
    assert_int_equal(dz_dataset_sample(&src, 10, 0, &s, &err), DZ_OK);
    sample_indices(&s, 100, idx);
    assert_memory_equal(idx, want0, sizeof want0);
    dz_dataset_free(&s);
    dz_dataset_free(&src);
}

static void sample_properties(void **state) {
    (void)state;
    dz_dataset src, a, b;
    dz_error err = {0};
    make_synthetic(&src, 100);
    int ia[100], ib[100];

    /* deterministic */
    assert_int_equal(dz_dataset_sample(&src, 30, 7, &a, &err), DZ_OK);
    assert_int_equal(dz_dataset_sample(&src, 30, 7, &b, &err), DZ_OK);
    sample_indices(&a, 100, ia);
    sample_indices(&b, 100, ib);
    assert_memory_equal(ia, ib, 30 * sizeof(int));
    dz_dataset_free(&b);

    /* another seed, another sample */
    assert_int_equal(dz_dataset_sample(&src, 30, 8, &b, &err), DZ_OK);
    sample_indices(&b, 100, ib);
    assert_memory_not_equal(ia, ib, 30 * sizeof(int));
    dz_dataset_free(&a);
    dz_dataset_free(&b);

    /* n > count: every example once, shuffled */
    assert_int_equal(dz_dataset_sample(&src, 1000, 7, &a, &err), DZ_OK);
    assert_int_equal(a.count, 100);
    sample_indices(&a, 100, ia);
    int in_place = 0;
    for (int i = 0; i < 100; i++) in_place += ia[i] == i;
    assert_true(in_place < 10);
    dz_dataset_free(&a);

    assert_int_equal(dz_dataset_sample(&src, 0, 7, &a, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "synthetic"));
    assert_int_equal(dz_dataset_sample(&src, -3, 7, &a, &err), DZ_ERR_INVALID);
    dz_dataset_free(&src);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "%s/dz_test_data_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* A sample carries each example's source line and its completion (LM prompt/completion
 * pairs would otherwise train on the prompt alone). */
static void sample_keeps_lines_and_completions(void **state) {
    (void)state;
    char path[512];
    write_str("pc.jsonl",
              "{\"prompt\": \"Q1\", \"completion\": \" A1\"}\n\n{\"prompt\": \"Q2\", \"completion\": \" A2\"}\n"
              "{\"text\": \"plain\"}\n",
              path, sizeof path);
    dz_dataset ds, s;
    dz_error err = {0};
    if (dz_dataset_load_lm_jsonl(path, &ds, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 3);
    assert_int_equal(ds.items[1].line, 3); /* the blank line 2 counts */
    assert_int_equal(dz_dataset_sample(&ds, 3, 5, &s, &err), DZ_OK);
    for (int i = 0; i < s.count; i++) {
        const char *want = !strcmp(s.items[i].text, "Q1") ? " A1" : !strcmp(s.items[i].text, "Q2") ? " A2" : NULL;
        const int line = !strcmp(s.items[i].text, "Q1") ? 1 : !strcmp(s.items[i].text, "Q2") ? 3 : 4;
        assert_int_equal(s.items[i].line, line);
        if (want) assert_string_equal(s.items[i].completion, want);
        else assert_null(s.items[i].completion);
    }
    dz_dataset_free(&s);
    dz_dataset_free(&ds);
}

/* Two classes with the same word cannot be told apart: refused (" good" == "good"). */
static void duplicate_label_words(void **state) {
    (void)state;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    dz_error err = {0};
    assert_int_equal(dz_prompt_spec_set_labels(&spec, "good,bad, good", &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "words 1 and 3 are both 'good'"));
    assert_string_equal(spec.label_words[0], " terrible"); /* unchanged */
    assert_int_equal(dz_prompt_spec_set_labels(&spec, "good,Good", &err), DZ_OK);
}

/* Training needs a label on every row: an unlabelled row is named by file and line. */
static void unlabelled_rows_refused(void **state) {
    (void)state;
    char path[512];
    write_str("test_split.tsv", "index\tsentence\n0\tgood film \n1\tbad film \n", path, sizeof path);
    dz_dataset ds;
    dz_error err = {0};
    if (dz_dataset_load_sst2(path, &ds, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(dz_dataset_require_labels(&ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 2, "no label");
    dz_dataset_free(&ds);
    write_str("labelled.tsv", "sentence\tlabel\ngood film \t1\n", path, sizeof path);
    if (dz_dataset_load_sst2(path, &ds, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(dz_dataset_require_labels(&ds, &err), DZ_OK);
    dz_dataset_free(&ds);
    write_str("nolabel.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\"}\n", path, sizeof path);
    if (dz_dataset_load_jsonl(path, "text", NULL, &ds, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(dz_dataset_require_labels(&ds, &err), DZ_ERR_FORMAT);
    assert_msg_names(&err, path, 1, "no label");
    dz_dataset_free(&ds);
}
/* A small file keeps a dev set (issue 27.17): as asked when there are enough, else the
 * proportion asked, the dev part rounded down and at least 1. */
static void split_counts(void **state) {
    (void)state;
    const struct { int avail, train, dev, want_train, want_dev, changed; } cases[] = {
        {67349, 1000, 500, 1000, 500, 0}, /* SST-2: as asked */
        {1500, 1000, 500, 1000, 500, 0},  /* exactly enough */
        {200, 1000, 500, 134, 66, 1},     /* 200 * 500 / 1500 = 66.7 -> 66 dev */
        {2, 1000, 500, 1, 1, 1},          /* 0 dev by the proportion: 1 kept */
        {1, 1000, 500, 1, 0, 1},          /* one example: it trains */
        {10, 32, 0, 10, 0, 1},            /* no dev asked: none drawn */
        {30, 16, 16, 15, 15, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int nt = -1, nd = -1;
        const int changed = dz_split_counts(cases[i].avail, cases[i].train, cases[i].dev, &nt, &nd);
        if (nt != cases[i].want_train || nd != cases[i].want_dev || changed != cases[i].changed)
            fail_msg("case %zu: %d available, %d + %d asked: %d train + %d dev (%d), want %d + %d (%d)", i,
                     cases[i].avail, cases[i].train, cases[i].dev, nt, nd, changed, cases[i].want_train,
                     cases[i].want_dev, cases[i].changed);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sst2_dev_real),
        cmocka_unit_test(sst2_train_real),
        cmocka_unit_test(sst2_good_variants),
        cmocka_unit_test(sst2_bad_files),
        cmocka_unit_test(sst2_nul_and_long_lines),
        cmocka_unit_test(jsonl_good),
        cmocka_unit_test(jsonl_bad),
        cmocka_unit_test(text_files),
        cmocka_unit_test(prompt_default_and_render),
        cmocka_unit_test(prompt_template_errors),
        cmocka_unit_test(prompt_labels),
        cmocka_unit_test(sample_known_answer),
        cmocka_unit_test(sample_properties),
        cmocka_unit_test(sample_keeps_lines_and_completions),
        cmocka_unit_test(unlabelled_rows_refused),
        cmocka_unit_test(duplicate_label_words),
        cmocka_unit_test(split_counts),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, setup, teardown));
}
