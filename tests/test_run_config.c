/* run.json (src/run/run_json.c): every setting of dz_train_config written and read back
 * field by field, each with a value no default has (so a field read into another, or
 * left at its default, fails), under the key names run folders written before the
 * config was nested already use (a resume of an existing run must keep reading them);
 * what is never saved (the layout, out_dir) comes back unset. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "temp_dir.h"

#include "core/util.h"
#include "run/run_files.h"

static dz_train_config distinctive(void) {
    dz_train_config c;
    dz_train_config_default(&c);
    c.model = "/m/model", c.tokenizer = "/m/tok.json", c.out_dir = "/runs/x";
    c.data = (dz_train_data){.task = "classify", .train = "/d/train.jsonl", .test = "/d/test.jsonl",
                             .template_ = "{text} is", .label_words = "no,yes", .text_key = "sentence",
                             .label_key = "y", .train_examples = 123, .dev_examples = 45, .seed = 777,
                             .lm_seq = 33, .share_prompts = 0};
    c.optim = (dz_train_optim){.lr = 2.5e-4f, .eps = 3e-3f, .wd = 0.125f, .batch = 7, .steps = 91, .q = 3,
                               .warmup = 11, .lr_schedule = DZ_LR_COSINE, .rademacher = 1, .fuse = 0, .seed = 99,
                               .max_bad_steps = 4};
    c.store = (dz_train_store){.master_dtype = DZ_BF16, .spec = "disk:/s/x.store", .max_resident_mb = 512,
                               .stream_globals = 1};
    c.schedule = (dz_train_schedule){.eval_every = 13, .eval_batch = 17, .checkpoint_every = 19,
                                     .log_sync_every = 23};
    c.layout = (dz_train_layout){.comm = (dz_comm *)&c, .pertp = 2, .dp = 3, .verify_every = 5};
    return c;
}

static void streq(const char *a, const char *b) {
    assert_non_null(a);
    assert_string_equal(a, b);
}

static void round_trip(void **state) {
    (void)state;
    const dz_train_config w = distinctive();
    dz_error err = {0};
    if (dz_run_config_write(g_dir, &w, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_train_config r;
    char *strings = NULL;
    if (dz_run_config_read(g_dir, &r, &strings, &err) != DZ_OK) fail_msg("%s", err.msg);
    streq(r.model, w.model), streq(r.tokenizer, w.tokenizer);
    streq(r.data.task, w.data.task), streq(r.data.train, w.data.train), streq(r.data.test, w.data.test);
    streq(r.data.template_, w.data.template_), streq(r.data.label_words, w.data.label_words);
    streq(r.data.text_key, w.data.text_key), streq(r.data.label_key, w.data.label_key);
    assert_int_equal(r.data.train_examples, 123), assert_int_equal(r.data.dev_examples, 45);
    assert_int_equal(r.data.seed, 777), assert_int_equal(r.data.lm_seq, 33), assert_int_equal(r.data.share_prompts, 0);
    assert_true(r.optim.lr == w.optim.lr && r.optim.eps == w.optim.eps && r.optim.wd == w.optim.wd);
    assert_int_equal(r.optim.batch, 7), assert_int_equal(r.optim.steps, 91), assert_int_equal(r.optim.q, 3);
    assert_int_equal(r.optim.warmup, 11), assert_int_equal(r.optim.lr_schedule, DZ_LR_COSINE);
    assert_int_equal(r.optim.rademacher, 1), assert_int_equal(r.optim.fuse, 0), assert_int_equal(r.optim.seed, 99);
    assert_int_equal(r.optim.max_bad_steps, 4);
    assert_int_equal(r.store.master_dtype, DZ_BF16), streq(r.store.spec, w.store.spec);
    assert_int_equal(r.store.max_resident_mb, 512), assert_int_equal(r.store.stream_globals, 1);
    assert_int_equal(r.schedule.eval_every, 13), assert_int_equal(r.schedule.eval_batch, 17);
    assert_int_equal(r.schedule.checkpoint_every, 19), assert_int_equal(r.schedule.log_sync_every, 23);
    /* never saved: a run resumes under any layout, in the folder it is given */
    assert_null(r.layout.comm), assert_int_equal(r.layout.pertp, 0), assert_int_equal(r.layout.dp, 0);
    assert_int_equal(r.layout.verify_every, 0), assert_null(r.out_dir);
    free(strings);

    /* the key names of existing run folders */
    char path[512], *text = NULL;
    snprintf(path, sizeof path, "%s/run.json", g_dir);
    if (dz_read_file(path, &text, NULL, &err) != DZ_OK) fail_msg("%s", err.msg);
    static const char *keys[] = {"model", "tokenizer", "task", "train_data", "test_data", "template", "label_words",
                                 "text_key", "label_key", "store", "master_dtype", "train_examples", "dev_examples",
                                 "data_seed", "lr", "eps", "weight_decay", "batch", "steps", "spsa_samples", "warmup",
                                 "rademacher", "fuse", "schedule", "seed", "eval_every", "checkpoint_every",
                                 "log_sync_every", "max_bad_steps", "eval_batch", "share_prompts", "lm_seq",
                                 "max_resident_mb", "stream_globals"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\":", keys[i]);
        if (!strstr(text, quoted)) fail_msg("run.json lacks key %s:\n%s", keys[i], text);
    }
    free(text);
}

/* run.json's text: names for choices, the shortest decimal for floats, seeds as exact
 * integers (2^53 + 1 and 2^63 - 1 read back as themselves, not as the nearest double). */
static void readable_and_exact(void **state) {
    (void)state;
    dz_train_config w = distinctive();
    w.optim.seed = 9007199254740993ull, w.data.seed = 9223372036854775807ull, w.optim.lr = 4e-5f;
    w.optim.lr_schedule = DZ_LR_LINEAR, w.optim.rademacher = 1, w.optim.estimator = DZ_ZO_LOZO;
    dz_error err = {0};
    if (dz_run_config_write(g_dir, &w, &err) != DZ_OK) fail_msg("%s", err.msg);
    char path[512], *text = NULL;
    snprintf(path, sizeof path, "%s/run.json", g_dir);
    if (dz_read_file(path, &text, NULL, &err) != DZ_OK) fail_msg("%s", err.msg);
    static const char *want[] = {"\"seed\":\t9007199254740993", "\"data_seed\":\t9223372036854775807",
                                 "\"lr\":\t4e-05", "\"eps\":\t0.003", "\"weight_decay\":\t0.125",
                                 "\"schedule\":\t\"linear\"", "\"rademacher\":\t\"rademacher\"",
                                 "\"estimator\":\t\"lozo\"", "\"fuse\":\t\"unfused\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("run.json lacks %s:\n%s", want[i], text);
    free(text);
    dz_train_config r;
    char *strings = NULL;
    if (dz_run_config_read(g_dir, &r, &strings, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_true(r.optim.seed == 9007199254740993ull && r.data.seed == 9223372036854775807ull);
    assert_true(r.optim.lr == 4e-5f), assert_int_equal(r.optim.lr_schedule, DZ_LR_LINEAR);
    assert_int_equal(r.optim.rademacher, 1), assert_int_equal(r.optim.estimator, DZ_ZO_LOZO);
    free(strings);

    /* run.json as older versions wrote it: choices as numbers, floats as doubles */
    static const char old[] = "{\"model\": \"m\", \"master_dtype\": \"F32\", \"train_examples\": 8, "
        "\"dev_examples\": 2, \"data_seed\": 42, \"lr\": 3.9999998989515e-05, \"eps\": 0.001, "
        "\"weight_decay\": 0, \"batch\": 4, \"steps\": 9, \"spsa_samples\": 1, \"warmup\": 0, \"rademacher\": 1, "
        "\"fuse\": 1, \"schedule\": 2, \"seed\": 1.8446744073709552e+19, \"eval_every\": 5, "
        "\"checkpoint_every\": 5, \"log_sync_every\": 64, \"max_bad_steps\": 5, \"eval_batch\": 64, "
        "\"share_prompts\": 1, \"lm_seq\": 0, \"max_resident_mb\": 0}";
    assert_int_equal(dz_run_config_parse(old, strlen(old), "old.json", &r, &strings, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "seed")); /* 2^64: the wrapped -1 is not a seed */
    char fixed[sizeof old];
    snprintf(fixed, sizeof fixed, "%s", old);
    memcpy(strstr(fixed, "1.8446744073709552e+19"), "12345678901234567890e0", 22);
    if (dz_run_config_parse(fixed, strlen(fixed), "old.json", &r, &strings, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_true(r.optim.lr == 4e-5f), assert_int_equal(r.optim.lr_schedule, DZ_LR_COSINE);
    assert_int_equal(r.optim.rademacher, 1);
    free(strings);

    /* a choice given as a number is one of its names' places: -1 or 2 of a two-way choice
     * is refused, naming the field (found by fuzz_run_config: it was kept and compared) */
    static const char *const bad[] = {"\"share_prompts\": -1", "\"fuse\": 2", "\"schedule\": 3", "\"rademacher\": -1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[sizeof old + 16];
        const char *key_end = strchr(bad[i] + 1, '"') + 1;
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(key_end - bad[i]), bad[i]); /* with its quotes */
        const char *field = strstr(fixed, key);
        assert_non_null(field);
        const char *value_end = strpbrk(field, ",}");
        snprintf(json, sizeof json, "%.*s%s%s", (int)(field - fixed), fixed, bad[i], value_end);
        assert_int_equal(dz_run_config_parse(json, strlen(json), "bad.json", &r, &strings, &err), DZ_ERR_FORMAT);
        if (!strstr(err.msg, "bad.json") || !strstr(err.msg, "0..") || strncmp(strchr(err.msg, '\'') + 1, key + 1, strlen(key) - 2)) fail_msg("%s: %s", bad[i], err.msg);
        free(strings), strings = NULL;
    }
}

/* An adapter's setting (or FZOO's directions) in a run.json or --config of a run that has
 * no such adapter (estimator) is refused by the check: it would be ignored and not written back (found by fuzz_run_config:
 * "lora_rank": 0 with no "peft" parsed, and the written run.json read back as rank 8). */
static int check_config_text(const char *text, dz_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f), fclose(f);
    dz_train_config c;
    dz_train_config_default(&c);
    char *strings = NULL;
    const char *const caller_keys[] = {NULL};
    if (dz_train_config_load_file(path, &c, caller_keys, &strings, err) != DZ_OK) fail_msg("%s", err->msg);
    int st = dz_train_config_check(&c, err);
    free(strings);
    return st;
}

static void adapter_settings_need_their_adapter(void **state) {
    (void)state;
    dz_error err;
    static const char *const json[] = {
        "{\"lora_rank\": 0}", "{\"lora_alpha\": 8}", "{\"lora_targets\": \"q\"}",
        "{\"peft\": \"prefix\", \"lora_rank\": 4}", "{\"prefix_tokens\": 7}",
        "{\"peft\": \"lora\", \"prefix_tokens\": 7}", "{\"fzoo_directions\": 4}"};
    static const char *const named[] = {"lora_rank", "lora_rank", "lora_rank", "lora_rank", "prefix_tokens", "prefix_tokens",
                                        "fzoo-directions"};
    for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
        assert_int_equal(check_config_text(json[i], &err), DZ_ERR_INVALID);
        if (!strstr(err.msg, named[i])) fail_msg("%s: %s", json[i], err.msg);
    }
    /* the defaults written out in full are no setting, and each adapter takes its own */
    static const char *const fine[] = {"{\"lora_rank\": 8, \"lora_alpha\": 16, \"prefix_tokens\": 5}",
                                       "{\"peft\": \"lora\", \"lora_rank\": 4, \"lora_targets\": \"q\"}",
                                       "{\"peft\": \"prefix\", \"prefix_tokens\": 7}"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++)
        if (check_config_text(fine[i], &err) != DZ_OK) fail_msg("%s: %s", fine[i], err.msg);
}

/* The task is one distzo knows: a typo ("sst3") was trained as classify and written to
 * run.json, which the command line then refused to resume. */
static void unknown_task_refused(void **state) {
    (void)state;
    dz_error err;
    dz_train_config c;
    dz_train_config_default(&c);
    const char *const bad[] = {"sst3", "", "LM", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.data.task = bad[i];
        assert_int_equal(dz_train_config_check(&c, &err), DZ_ERR_INVALID);
        if (!strstr(err.msg, "--task") || (bad[i] && !strstr(err.msg, bad[i]))) fail_msg("%s", err.msg);
    }
    const char *const good[] = {"sst2", "classify", "lm", "rte", "squad"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        c.data.task = good[i];
        if (dz_train_config_check(&c, &err) != DZ_OK) fail_msg("%s: %s", good[i], err.msg);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(round_trip), cmocka_unit_test(readable_and_exact),
                                       cmocka_unit_test(adapter_settings_need_their_adapter),
                                       cmocka_unit_test(unknown_task_refused)};
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
