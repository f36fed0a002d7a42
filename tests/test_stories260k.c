/* The real pretrained stories260K (llama2.c format) against the independent PyTorch
 * reference in tools/ref_llama2c.py: logits, 200 greedy tokens from BOS, and zero-shot
 * SST-2 dev predictions and scores (both label-word pairs); shared prompts give the full
 * sequences' scores bitwise; logits and scores are bitwise the same at every
 * instruction-set level the machine runs (core/isa.h) with 1 and 2 threads; the logits
 * match the reference on every registered backend, and the reference backend's SST-2
 * scores (shared prompts on two streams) match the CPU's. */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/threads.h"
#include "core/util.h"
#include "distzo/distzo.h"
#include "backend/backend.h"
#include "assets.h"
#include "golden.h"
#include "json_file.h"

typedef struct fixture {
    dz_model *m;
    dz_tokenizer *tok;
} fixture;

/* Loads the model where it is present; each case asks for it with need_model, which fails
 * (or skips, see assets.h) where it is missing. */
static int setup(void **state) {
    static fixture fx;
    char p[1200];
    snprintf(p, sizeof p, "%s/stories260K/stories260K.bin", test_assets_dir());
    *state = NULL;
    if (!dz_file_exists(p)) return 0;
    dz_error err = {0};
    if (dz_model_load(p, DZ_F32, &fx.m, &err) != DZ_OK) return fprintf(stderr, "%s\n", err.msg), -1;
    if (dz_tokenizer_load(dz_model_tokenizer_path(fx.m), 512, &fx.tok, &err) != DZ_OK)
        return fprintf(stderr, "%s\n", err.msg), -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    if (fx) {
        dz_tokenizer_free(fx->tok);
        dz_model_free(fx->m);
    }
    return 0;
}

static fixture *need_model(void **state) {
    char p[1200];
    test_asset_path(p, sizeof p, "stories260K/stories260K.bin");
    assert_non_null(*state); /* present now but absent at setup: the folder changed under the test */
    return *state;
}

static void logits_match_reference(void **state) {
    fixture *fx = need_model(state);
    char p[1200];
    snprintf(p, sizeof p, "%s/stories260k/logits_first.bin", DZ_TEST_DATA);
    golden_batch g;
    golden_batch_load(p, &g);
    assert_int_equal(g.B, 1);
    const int T = g.T, V = g.V;
    assert_true(T <= 64);
    float *out = malloc(sizeof(float) * (size_t)T * V);
    for (int b = 0; b < dz_backend_count(); b++) {
        dz_forward *fw;
        dz_error err = {0};
        assert_int_equal(dz_forward_create_backend(fx->m, dz_backend_at(b), 1, T, 0, 1, &fw, &err), DZ_OK);
        dz_weight_source w = dz_model_weights(fx->m);
        assert_int_equal(dz_forward_run(fw, &w, g.tokens, NULL, 1, T, 0, &err), DZ_OK);
        int rows[64];
        for (int t = 0; t < T; t++) rows[t] = t;
        assert_int_equal(dz_forward_logits(fw, &w, rows, T, out, &err), DZ_OK);
        double max_err = 0.0;
        for (size_t i = 0; i < (size_t)T * V; i++) max_err = fmax(max_err, fabs(out[i] - g.logits[i]));
        printf("  %s: %d positions x %d logits: max |err| %.2e\n", dz_backend_at(b)->name, T, V, max_err);
        assert_true(max_err <= 1e-4);
        dz_forward_free(fw);
    }
    free(out);
    golden_batch_free(&g);
}

static void greedy_200_tokens_match_reference(void **state) {
    fixture *fx = need_model(state);
    cJSON *root = test_json_file("stories260k/greedy200.json");
    dz_error err = {0};
    cJSON *ref_tokens = cJSON_GetObjectItem(root, "tokens");
    const char *ref_text = cJSON_GetObjectItem(root, "text")->valuestring;
    const int n = cJSON_GetArraySize(ref_tokens);
    assert_int_equal(n, 200);

    dz_forward *fw;
    assert_int_equal(dz_forward_create(fx->m, 1, 512, 1, &fw, &err), DZ_OK);
    dz_weight_source w = dz_model_weights(fx->m);
    dz_sampler s;
    dz_sampler_init(&s, 0.0f, 1.0f, 0);
    int bos = 1, out[200], n_out = 0;
    assert_int_equal(dz_generate(fw, &w, &bos, 1, 200, -1, &s, out, &n_out, NULL, NULL, &err), DZ_OK);
    assert_int_equal(n_out, 200);
    char text[8192] = "", buf[64];
    for (int i = 0; i < n; i++) {
        assert_int_equal(out[i], cJSON_GetArrayItem(ref_tokens, i)->valueint);
        strcat(text, dz_tokenizer_decode(fx->tok, i ? out[i - 1] : bos, out[i], buf, sizeof buf));
    }
    assert_string_equal(text, ref_text);
    /* the upstream project's own known answer */
    assert_true(strncmp(text, "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
                        91) == 0);
    cJSON_Delete(root);
    dz_forward_free(fw);
}

/* Reference rows: index, label, pred, score0, score1 for terrible/great then bad/good. */
static void sst2_zero_shot_matches_reference(void **state) {
    fixture *fx = need_model(state);
    char p[1200];
    dz_error err = {0};
    dz_dataset ds;
    test_asset_path(p, sizeof p, "sst2/dev.tsv");
    assert_int_equal(dz_dataset_load_sst2(p, &ds, &err), DZ_OK);
    snprintf(p, sizeof p, "%s/stories260k/sst2_dev_zeroshot.tsv", DZ_TEST_DATA);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    int (*ref_pred)[2] = calloc((size_t)ds.count, sizeof *ref_pred);
    float (*ref_score)[2][2] = calloc((size_t)ds.count, sizeof *ref_score);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        int idx, label, p0, p1;
        float a, b, c, d;
        if (sscanf(line, "%d\t%d\t%d\t%f\t%f\t%d\t%f\t%f", &idx, &label, &p0, &a, &b, &p1, &c, &d) != 8) continue;
        assert_int_equal(idx, rows);
        assert_int_equal(label, ds.items[idx].label);
        ref_pred[idx][0] = p0, ref_pred[idx][1] = p1;
        ref_score[idx][0][0] = a, ref_score[idx][0][1] = b, ref_score[idx][1][0] = c, ref_score[idx][1][1] = d;
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, ds.count);

    static const char *words[2] = {"terrible,great", "bad,good"};
    for (int set = 0; set < 2; set++) {
        dz_prompt_spec spec;
        dz_prompt_spec_default_sst2(&spec);
        assert_int_equal(dz_prompt_spec_set_labels(&spec, words[set], &err), DZ_OK);
        dz_class_set cs;
        assert_int_equal(dz_class_set_build(&ds, &spec, fx->tok, 512, &cs, &err), DZ_OK);
        dz_forward *fw;
        assert_int_equal(dz_forward_create(fx->m, 32, cs.max_len, 0, &fw, &err), DZ_OK);
        dz_weight_source w = dz_model_weights(fx->m);
        int *preds = malloc(sizeof(int) * (size_t)ds.count);
        float *scores = malloc(sizeof(float) * (size_t)ds.count * 2);
        double acc, ref_acc = 0.0, max_err = 0.0;
        assert_int_equal(dz_class_evaluate(fw, &w, &cs, 32, preds, scores, &acc, &err), DZ_OK);
        int same = 0;
        for (int e = 0; e < ds.count; e++) {
            same += preds[e] == ref_pred[e][set];
            ref_acc += ref_pred[e][set] == ds.items[e].label;
            for (int k = 0; k < 2; k++) max_err = fmax(max_err, fabs(scores[2 * e + k] - ref_score[e][set][k]));
        }
        ref_acc /= ds.count;
        printf("  %-15s accuracy %.4f (reference %.4f), same predictions %d/%d, max |score err| %.2e\n", words[set],
               acc, ref_acc, same, ds.count, max_err);
        assert_int_equal(same, ds.count);
        assert_true(fabs(acc - ref_acc) < 1e-12);
        assert_true(max_err <= 1e-4);
        /* the same with each prompt computed once and the candidates continuing it (two
         * streams): bitwise the per-candidate computation's scores */
        dz_forward *f2;
        assert_int_equal(dz_forward_create_streams(fx->m, 32, cs.max_len, 0, 2, &f2, &err), DZ_OK);
        float *scores2 = malloc(sizeof(float) * (size_t)ds.count * 2);
        int *preds2 = malloc(sizeof(int) * (size_t)ds.count);
        double acc2, max_diff = 0.0;
        assert_int_equal(dz_class_evaluate(f2, &w, &cs, 32, preds2, scores2, &acc2, &err), DZ_OK);
        for (int i = 0; i < ds.count * 2; i++) max_diff = fmax(max_diff, fabs(scores2[i] - scores[i]));
        printf("  %-15s shared prompts: accuracy %.4f, max |score - per-candidate score| %.2e\n", words[set], acc2,
               max_diff);
        assert_memory_equal(scores2, scores, sizeof(float) * (size_t)ds.count * 2);
        assert_memory_equal(preds2, preds, sizeof(int) * (size_t)ds.count);
        free(scores2);
        free(preds2);
        dz_forward_free(f2);
        free(preds);
        free(scores);
        dz_forward_free(fw);
        dz_class_set_free(&cs);
    }
    free(ref_pred);
    free(ref_score);
    dz_dataset_free(&ds);
}

enum { LT = 24, N_EXAMPLES = 12 }; /* 12 examples: a full batch of 8 (16 sequences) and a partial one */

/* Logits of a fixed sequence, and zero-shot scores of the first SST-2 dev examples with
 * shared prompts (streams 2) and full sequences (streams 1), at the level and thread count
 * in force. */
static void forward_bits(fixture *fx, dz_class_set *cs, float *logits, float *scores_shared, float *scores_full) {
    dz_error err = {0};
    dz_weight_source w = dz_model_weights(fx->m);
    int tokens[LT], rows[LT];
    for (int t = 0; t < LT; t++) tokens[t] = 1 + (37 * t) % 511, rows[t] = t;
    dz_forward *fw;
    assert_int_equal(dz_forward_create(fx->m, 1, LT, 0, &fw, &err), DZ_OK);
    assert_int_equal(dz_forward_run(fw, &w, tokens, NULL, 1, LT, 0, &err), DZ_OK);
    assert_int_equal(dz_forward_logits(fw, &w, rows, LT, logits, &err), DZ_OK);
    dz_forward_free(fw);
    for (int streams = 1; streams <= 2; streams++) {
        int preds[N_EXAMPLES];
        double acc;
        assert_int_equal(dz_forward_create_streams(fx->m, 16, cs->max_len, 0, streams, &fw, &err), DZ_OK);
        assert_int_equal(dz_class_evaluate(fw, &w, cs, 16, preds, streams == 2 ? scores_shared : scores_full, &acc, &err),
                         DZ_OK);
        dz_forward_free(fw);
    }
}

/* The first N_EXAMPLES of the SST-2 dev set as a class set with the default prompt. */
static void first_dev_examples(const fixture *fx, dz_class_set *cs) {
    char p[1200];
    dz_error err = {0};
    dz_dataset ds;
    test_asset_path(p, sizeof p, "sst2/dev.tsv");
    assert_int_equal(dz_dataset_load_sst2(p, &ds, &err), DZ_OK);
    assert_true(ds.count >= N_EXAMPLES);
    for (int i = N_EXAMPLES; i < ds.count; i++) free(ds.items[i].text), free(ds.items[i].completion);
    ds.count = N_EXAMPLES;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    assert_int_equal(dz_class_set_build(&ds, &spec, fx->tok, 512, cs, &err), DZ_OK);
    dz_dataset_free(&ds);
}

static void every_level_and_thread_count_gives_the_same_bits(void **state) {
    fixture *fx = need_model(state);
    dz_class_set cs;
    first_dev_examples(fx, &cs);
    const int V = dz_model_config(fx->m)->vocab_size;
    float *want = malloc(sizeof(float) * LT * V), *got = malloc(sizeof(float) * LT * V);
    float want_scores[N_EXAMPLES * 2], shared[N_EXAMPLES * 2], full[N_EXAMPLES * 2];
    assert_int_equal(dz_isa_force(DZ_ISA_BASELINE, NULL), DZ_OK);
    dz_set_num_threads(1);
    forward_bits(fx, &cs, want, shared, want_scores);
    assert_memory_equal(shared, want_scores, sizeof want_scores);
    for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++)
        for (int threads = 1; threads <= 2; threads++) {
            if (isa == DZ_ISA_BASELINE && threads == 1) continue; /* the reference itself */
            assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
            dz_set_num_threads(threads);
            forward_bits(fx, &cs, got, shared, full);
            printf("  %s, %d thread(s): logits %s, scores (shared prompts) %s, scores (full sequences) %s\n",
                   dz_isa_name(isa), threads, memcmp(got, want, sizeof(float) * LT * V) ? "DIFFER" : "same",
                   memcmp(shared, want_scores, sizeof shared) ? "DIFFER" : "same",
                   memcmp(full, want_scores, sizeof full) ? "DIFFER" : "same");
            assert_memory_equal(got, want, sizeof(float) * LT * V);
            assert_memory_equal(shared, want_scores, sizeof shared);
            assert_memory_equal(full, want_scores, sizeof full);
        }
    dz_set_num_threads(0);
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    free(want);
    free(got);
    dz_class_set_free(&cs);
}

/* SST-2 scores with shared prompts (two streams, the parent's KV slots) on the reference
 * backend, against the CPU's. */
static void ref_backend_scores_match_cpu(void **state) {
    fixture *fx = need_model(state);
    dz_error err = {0};
    dz_class_set cs;
    first_dev_examples(fx, &cs);
    dz_weight_source w = dz_model_weights(fx->m);
    float scores[2][N_EXAMPLES * 2];
    int preds[2][N_EXAMPLES];
    const dz_backend *be[2] = {dz_backend_by_name("cpu"), dz_backend_by_name("ref")};
    for (int k = 0; k < 2; k++) {
        assert_non_null(be[k]);
        dz_forward *fw;
        double acc;
        assert_int_equal(dz_forward_create_backend(fx->m, be[k], 16, cs.max_len, 0, 2, &fw, &err), DZ_OK);
        assert_int_equal(dz_class_evaluate(fw, &w, &cs, 16, preds[k], scores[k], &acc, &err), DZ_OK);
        dz_forward_free(fw);
    }
    double max_err = 0.0;
    for (int i = 0; i < N_EXAMPLES * 2; i++) max_err = fmax(max_err, fabs(scores[1][i] - scores[0][i]));
    printf("  %d examples: ref vs cpu max |score err| %.2e\n", N_EXAMPLES, max_err);
    assert_true(max_err <= 1e-4);
    assert_memory_equal(preds[1], preds[0], sizeof preds[0]);
    dz_class_set_free(&cs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(logits_match_reference),
        cmocka_unit_test(greedy_200_tokens_match_reference),
        cmocka_unit_test(sst2_zero_shot_matches_reference),
        cmocka_unit_test(every_level_and_thread_count_gives_the_same_bits),
        cmocka_unit_test(ref_backend_scores_match_cpu),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, setup, teardown));
}
