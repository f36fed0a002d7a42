/* The public API called the way a C program can get it wrong, each case found by probing
 * the installed library: every one gets DZ_ERR_INVALID (or NULL, or nothing for a free of
 * NULL) with a message, never a crash, a heap corruption or a silent wrong result. Run
 * under ASan in CI (the class batch case wrote past its buffers before). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "assets.h"
#include "distzo/data.h"
#include "distzo/model.h"
#include "distzo/task.h"
#include "distzo/tokenizer.h"
#include "distzo/train.h"
#include "temp_dir.h"

static void expect_invalid(dz_status st, const dz_error *err, const char *needle) {
    assert_int_equal(st, DZ_ERR_INVALID);
    if (!strstr(err->msg, needle)) fail_msg("expected '%s' in: %s", needle, err->msg);
}

static void null_arguments(void **state) {
    (void)state;
    dz_error err = {0};
    dz_model *m = (dz_model *)1;
    expect_invalid(dz_model_load(NULL, DZ_F32, &m, &err), &err, "no path");
    assert_null(m);
    expect_invalid(dz_model_load("x.bin", DZ_F32, NULL, &err), &err, "out is NULL");
    dz_config cfg;
    expect_invalid(dz_config_load(NULL, &cfg, &err), &err, "no path");
    expect_invalid(dz_config_preset(NULL, &cfg, &err), &err, "no name");
    dz_dtype t;
    assert_int_not_equal(dz_dtype_parse(NULL, &t), 0);
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    expect_invalid(dz_prompt_spec_set_labels(&spec, NULL, &err), &err, "label words");
    dz_forward *f = (dz_forward *)1;
    expect_invalid(dz_forward_create(NULL, 1, 8, 0, &f, &err), &err, "no model");
    dz_class_set_free(NULL);
    dz_param_table_free(NULL);
    dz_train_result res;
    expect_invalid(dz_train(NULL, 0, NULL, NULL, &res, &err), &err, "no config");
    expect_invalid(dz_train_branch(NULL, 0, NULL, NULL, NULL, &res, &err), &err, "no run");
}

/* stories260K, loaded as f32. */
static dz_model *stories(void) {
    char path[4096];
    test_asset_path(path, sizeof path, "stories260K/stories260K.bin");
    dz_error err = {0};
    dz_model *m = NULL;
    if (dz_model_load(path, DZ_F32, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
    return m;
}

/* A dtype outside the enum: refused at load (it was accepted, reported as "?", and only
 * the save failed, half-written). */
static void model_load_dtype(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "stories260K/stories260K.bin");
    dz_error err = {0};
    dz_model *m = NULL;
    const int bad[] = {3, 5, 7, -1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        expect_invalid(dz_model_load(path, (dz_dtype)bad[i], &m, &err), &err, "dtype");
        assert_null(m);
    }
    m = stories();
    const int n = dz_model_params(m)->count;
    assert_non_null(dz_model_tensor(m, 0));
    assert_null(dz_model_tensor(m, n)); /* past the table: NULL, not a read past the array */
    assert_null(dz_model_tensor(m, -1));
    dz_model_free(m);
}

/* A class set longer than the forward's positions: refused (the plain layout wrote past
 * its batch buffers), and the same set with a forward long enough evaluates. */
static void class_set_longer_than_forward(void **state) {
    (void)state;
    char tok_path[4096], dev[4096];
    test_asset_path(tok_path, sizeof tok_path, "stories260K/tok512.bin");
    test_asset_path(dev, sizeof dev, "sst2/dev.tsv");
    dz_error err = {0};
    dz_model *m = stories();
    dz_tokenizer *tok = NULL;
    assert_int_equal(dz_tokenizer_load(tok_path, 512, &tok, &err), DZ_OK);
    dz_dataset ds;
    assert_int_equal(dz_dataset_load_sst2(dev, &ds, &err), DZ_OK);
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    dz_class_set cs;
    assert_int_equal(dz_class_set_build(&ds, &spec, tok, 128, &cs, &err), DZ_OK);
    assert_true(cs.max_len > 9);
    const dz_weight_source w = dz_model_weights(m);
    double acc = -1;
    for (int share = 0; share < 2; share++) { /* the plain layout, and the shared prompts' */
        dz_forward *f = NULL;
        assert_int_equal(dz_forward_create_backend(m, NULL, 4, 8, 0, share ? 2 : 1, &f, &err), DZ_OK);
        expect_invalid(dz_class_evaluate(f, &w, &cs, 4, NULL, NULL, &acc, &err), &err, "exceeds the batch's");
        dz_forward_free(f);
    }
    dz_forward *f = NULL;
    assert_int_equal(dz_forward_create(m, 4, cs.max_len, 0, &f, &err), DZ_OK);
    cs.n_examples = 8; /* a few examples are enough */
    assert_int_equal(dz_class_evaluate(f, &w, &cs, 4, NULL, NULL, &acc, &err), DZ_OK);
    assert_true(acc >= 0 && acc <= 1);
    dz_forward_free(f);
    dz_class_set_free(&cs);
    dz_dataset_free(&ds);
    dz_tokenizer_free(tok);
    dz_model_free(m);
}

/* A sampler's settings are checked by dz_generate, as the command line checks its flags (a
 * NaN temperature emitted the last id at every step). */
static void sampler_settings(void **state) {
    (void)state;
    dz_error err = {0};
    dz_model *m = stories();
    dz_forward *f = NULL;
    assert_int_equal(dz_forward_create(m, 1, 16, 1, &f, &err), DZ_OK);
    const dz_weight_source w = dz_model_weights(m);
    const int prompt[] = {1, 400};
    int out[4], n_out = -1;
    const float temps[] = {NAN, -1.0f, INFINITY};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++) {
        dz_sampler s;
        dz_sampler_init(&s, temps[i], 0.9f, 1);
        expect_invalid(dz_generate(f, &w, prompt, 2, 4, -1, &s, out, &n_out, NULL, NULL, &err), &err, "temperature");
        assert_int_equal(n_out, 0);
    }
    dz_sampler s;
    dz_sampler_init(&s, 0.8f, 0.9f, 1);
    assert_int_equal(dz_generate(f, &w, prompt, 2, 4, -1, &s, out, &n_out, NULL, NULL, &err), DZ_OK);
    assert_int_equal(n_out, 4);
    dz_forward_free(f);
    dz_model_free(m);
}

/* dz_tokenizer_save_hf's folder loads back, as its header says, for llama2.c too. */
static void llama2c_tokenizer_folder(void **state) {
    (void)state;
    char path[4096], dir[4200];
    test_asset_path(path, sizeof path, "stories260K/tok512.bin");
    snprintf(dir, sizeof dir, "%s/tok_llama2c", g_dir);
    dz_error err = {0};
    dz_tokenizer *a = NULL, *b = NULL;
    assert_int_equal(dz_tokenizer_load(path, 512, &a, &err), DZ_OK);
    assert_int_equal(dz_tokenizer_save_hf(a, dir, &err), DZ_OK);
    if (dz_tokenizer_load(dir, 512, &b, &err) != DZ_OK) fail_msg("%s", err.msg);
    const char *text = "Once upon a time, a little girl named Lily found a shiny red ball.";
    int ia[128], ib[128];
    const int na = dz_tokenizer_encode(a, text, 1, ia, 128, &err), nb = dz_tokenizer_encode(b, text, 1, ib, 128, &err);
    assert_true(na > 10);
    assert_int_equal(na, nb);
    assert_memory_equal(ia, ib, sizeof(int) * (size_t)na);
    dz_tokenizer_free(a);
    dz_tokenizer_free(b);
}

/* GPT-2 BPE files that hold nothing: refused, naming the file (an empty dict.txt made
 * every token <unk>; an empty vocab.bpe loaded with no merges). */
static void gpt2_empty_files(void **state) {
    (void)state;
    char enc[4096], bpe[4096], dict[4096], dir[4200], p[4300];
    test_asset_path(enc, sizeof enc, "gpt2-bpe/encoder.json");
    test_asset_path(bpe, sizeof bpe, "gpt2-bpe/vocab.bpe");
    test_asset_path(dict, sizeof dict, "gpt2-bpe/dict.txt");
    const char *const names[] = {"encoder.json", "vocab.bpe", "dict.txt"};
    const char *const srcs[] = {enc, bpe, dict};
    for (int empty = 1; empty < 3; empty++) { /* vocab.bpe, then dict.txt, empty */
        snprintf(dir, sizeof dir, "%s/gpt2_%d", g_dir, empty);
        assert_int_equal(mkdir(dir, 0755), 0);
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%s/%s", dir, names[k]);
            FILE *out = fopen(p, "w");
            assert_non_null(out);
            if (k != empty) {
                FILE *in = fopen(srcs[k], "rb");
                assert_non_null(in);
                char buf[1 << 16];
                size_t n;
                while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
                fclose(in);
            }
            fclose(out);
        }
        snprintf(p, sizeof p, "%s/dict.txt", dir); /* OPT ids: through dict.txt */
        dz_error err = {0};
        dz_tokenizer *tok = NULL;
        assert_int_equal(dz_tokenizer_load(p, 0, &tok, &err), DZ_ERR_FORMAT);
        assert_null(tok);
        if (!strstr(err.msg, names[empty]) || !strstr(err.msg, empty == 1 ? "no merges" : "no entries"))
            fail_msg("%s", err.msg);
    }
}

/* A file's bytes, malloc'd (NULL if unreadable). */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    if (buf && fread(buf, 1, *len, f) != *len) buf = (free(buf), NULL);
    fclose(f);
    return buf;
}

static void small_run(dz_train_config *c, const char *model, const char *tok, const char *train, const char *out,
                      int steps) {
    dz_train_config_default(c);
    c->model = model, c->tokenizer = tok, c->data.train = train, c->out_dir = out;
    c->data.label_words = "bad,good", c->data.train_examples = 32, c->data.dev_examples = 8;
    c->optim.batch = 4, c->optim.steps = steps, c->optim.lr = 1e-3f, c->optim.seed = 7;
    c->schedule.eval_every = 0, c->schedule.checkpoint_every = 0;
}

/* A resume through the library, both ways a program would write it: the config that
 * started the run with more steps (its model_table and fingerprints left NULL: refused as
 * "model_table (none) differs" before), and dz_train_config_load's with out_dir set (its
 * NULL out_dir is refused by name). Each gives the seed log of one uninterrupted run. */
static void resume_through_the_library(void **state) {
    (void)state;
    char model[4096], tok[4096], train[4096], dir[3][4200], log[4300];
    test_asset_path(model, sizeof model, "stories260K/stories260K.bin");
    test_asset_path(tok, sizeof tok, "stories260K/tok512.bin");
    test_asset_path(train, sizeof train, "sst2/train.tsv");
    dz_error err = {0};
    dz_train_result res;
    dz_train_config c;
    for (int k = 0; k < 3; k++) {
        snprintf(dir[k], sizeof dir[k], "%s/run%d", g_dir, k);
        small_run(&c, model, tok, train, dir[k], k == 0 ? 4 : 2);
        if (dz_train(&c, 0, NULL, NULL, &res, &err) != DZ_OK) fail_msg("%s", err.msg);
    }
    small_run(&c, model, tok, train, dir[1], 4); /* the starting config, more steps */
    if (dz_train(&c, 1, NULL, NULL, &res, &err) != DZ_OK) fail_msg("the starting config: %s", err.msg);
    char *strings = NULL;
    assert_int_equal(dz_train_config_load(dir[2], &c, &strings, &err), DZ_OK);
    c.optim.steps = 4;
    expect_invalid(dz_train(&c, 1, NULL, NULL, &res, &err), &err, "out_dir");
    c.out_dir = dir[2];
    if (dz_train(&c, 1, NULL, NULL, &res, &err) != DZ_OK) fail_msg("dz_train_config_load's: %s", err.msg);
    free(strings);
    size_t n0, n;
    snprintf(log, sizeof log, "%s/seeds.log", dir[0]);
    char *want = slurp(log, &n0);
    assert_non_null(want);
    for (int k = 1; k < 3; k++) {
        snprintf(log, sizeof log, "%s/seeds.log", dir[k]);
        char *got = slurp(log, &n);
        assert_non_null(got);
        assert_int_equal(n, n0);
        assert_memory_equal(got, want, n);
        free(got);
    }
    free(want);
    /* a branch whose settings the check refuses makes no folder (it made one, half written) */
    char branch[4300];
    snprintf(branch, sizeof branch, "%s/branch", g_dir);
    small_run(&c, model, tok, train, branch, 4);
    c.optim.lr = -1; /* a branch may set a new --lr: only the check refuses this one */
    expect_invalid(dz_train_branch(dir[0], 2, &c, NULL, NULL, &res, &err), &err, "--lr");
    struct stat sb;
    assert_int_not_equal(stat(branch, &sb), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_arguments),
        cmocka_unit_test(model_load_dtype),
        cmocka_unit_test(class_set_longer_than_forward),
        cmocka_unit_test(sampler_settings),
        cmocka_unit_test(llama2c_tokenizer_folder),
        cmocka_unit_test(gpt2_empty_files),
        cmocka_unit_test(resume_through_the_library),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown));
}
