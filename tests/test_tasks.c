/* MeZO's tasks: each preset's prompts, candidates, labels and answers on the fixtures of
 * tests/data/tasks/ against tools/task_golden.py (MeZO's templates in Python, on the
 * fields Hugging Face's loaders give); F1 / exact match against the official SQuAD v1.1
 * evaluate script's definitions on crafted cases; per-example candidates (a jsonl with
 * 2 to 4 candidates per example) scored on stories260K against a direct log-softmax of
 * the full sequences, with shared prompts and without; the greedy answer of a generation
 * task against dz_generate (KV cache) cut at the first newline. */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/util.h"
#include "distzo/distzo.h"
#include "assets.h"
#include "json_file.h"

static cJSON *golden(void) { return test_json_file("tasks/golden.json"); }

static void presets_match_mezo_templates(void **state) {
    (void)state;
    cJSON *g = golden(), *pr = cJSON_GetObjectItem(g, "presets"), *t;
    int n_presets = 0;
    cJSON_ArrayForEach(t, pr) {
        const dz_task_preset *p = dz_task_preset_find(t->string);
        assert_non_null(p);
        char path[1200];
        snprintf(path, sizeof path, "%s/tasks/%s", DZ_TEST_DATA, cJSON_GetObjectItem(t, "file")->valuestring);
        dz_dataset ds;
        dz_error err = {0};
        if (dz_dataset_load_preset(p, path, &ds, &err) != DZ_OK) fail_msg("%s: %s", t->string, err.msg);
        const cJSON *exs = cJSON_GetObjectItem(t, "examples"), *e;
        assert_int_equal(ds.count, cJSON_GetArraySize(exs));
        int i = 0;
        cJSON_ArrayForEach(e, exs) {
            const dz_example *x = &ds.items[i++];
            assert_string_equal(x->text, cJSON_GetObjectItem(e, "prompt")->valuestring);
            const cJSON *c = cJSON_GetObjectItem(e, "cands"), *a = cJSON_GetObjectItem(e, "answers");
            const cJSON *list = c ? c : a;
            char **mine = c ? x->cands : x->answers;
            assert_non_null(mine);
            assert_int_equal(c ? x->n_cands : x->n_answers, cJSON_GetArraySize(list));
            for (int k = 0; k < cJSON_GetArraySize(list); k++)
                assert_string_equal(mine[k], cJSON_GetArrayItem(list, k)->valuestring);
            if (c) {
                assert_int_equal(x->label, cJSON_GetObjectItem(e, "label")->valueint);
            } else { /* trained on MeZO's verbalize(): " answer\n" */
                char want[512];
                snprintf(want, sizeof want, " %s\n", cJSON_GetArrayItem(a, 0)->valuestring);
                assert_string_equal(x->completion, want);
            }
        }
        dz_dataset_free(&ds);
        n_presets++;
    }
    assert_int_equal(n_presets, 10);
    assert_null(dz_task_preset_find("sst2")); /* the tsv task of its own */
    cJSON_Delete(g);
}

static void preset_errors_name_file_line_and_field(void **state) {
    (void)state;
    char path[] = "/tmp/dz_tasks_bad_rte_XXXXXX"; /* a name of its own: other runs of the suite may be at work */
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"premise\": \"a\", \"hypothesis\": \"b\", \"label\": \"entailment\"}\n", f);
    fputs("{\"premise\": \"a\", \"label\": \"entailment\"}\n", f);
    fclose(f);
    dz_dataset ds;
    dz_error err = {0};
    assert_int_equal(dz_dataset_load_preset(dz_task_preset_find("rte"), path, &ds, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, ":2:"));
    assert_non_null(strstr(err.msg, "\"hypothesis\""));
    f = fopen(path, "w");
    fputs("{\"premise\": \"a\", \"hypothesis\": \"b\", \"label\": \"maybe\"}\n", f);
    fclose(f);
    assert_int_equal(dz_dataset_load_preset(dz_task_preset_find("rte"), path, &ds, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not_entailment"));
    remove(path);
}

static void f1_and_exact_match_are_squad_v1_1s(void **state) {
    (void)state;
    cJSON *g = golden(), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g, "qa")) {
        const char *pred = cJSON_GetObjectItem(c, "pred")->valuestring, *gold = cJSON_GetObjectItem(c, "gold")->valuestring;
        char norm[256];
        dz_qa_normalize(pred, norm, sizeof norm);
        assert_string_equal(norm, cJSON_GetObjectItem(c, "norm_pred")->valuestring);
        const double f1 = dz_qa_f1(pred, gold);
        if (fabs(f1 - cJSON_GetObjectItem(c, "f1")->valuedouble) > 1e-12)
            fail_msg("F1('%s', '%s') = %.6f, the script's %.6f", pred, gold, f1, cJSON_GetObjectItem(c, "f1")->valuedouble);
        assert_int_equal(dz_qa_exact(pred, gold), cJSON_IsTrue(cJSON_GetObjectItem(c, "em")));
        n++;
    }
    assert_true(n >= 10);
    /* hand-computed: "dog dog cat" vs "dog cat cat": 2 common of 3 each: F1 2/3 */
    assert_true(fabs(dz_qa_f1("dog dog cat", "dog cat cat") - 2.0 / 3.0) < 1e-12);
    char *golds[2] = {"new york", "the big apple"};
    double f1, em;
    dz_qa_best("Big Apple", golds, 2, &f1, &em);
    assert_true(f1 == 1.0 && em == 1.0);
    dz_qa_best("york", golds, 2, &f1, &em);
    assert_true(fabs(f1 - 2.0 / 3.0) < 1e-12 && em == 0.0);
    cJSON_Delete(g);
}

/* --demos: each example's text is k demonstrations of other pool examples (prompt + gold
 * answer + blank line), then its own prompt; the same seed draws the same ones. */
static void demos_are_other_examples_with_their_answers(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/tasks/COPA/train.jsonl", DZ_TEST_DATA);
    dz_dataset ds, shown, again;
    dz_error err = {0};
    assert_int_equal(dz_dataset_load_preset(dz_task_preset_find("copa"), path, &ds, &err), DZ_OK);
    dz_prompt_spec spec;
    dz_prompt_spec_preset(&spec);
    assert_int_equal(dz_dataset_with_demos(&ds, &ds, &spec, 2, 7, 1, &shown, &err), DZ_OK);
    assert_int_equal(dz_dataset_with_demos(&ds, &ds, &spec, 2, 7, 1, &again, &err), DZ_OK);
    assert_int_equal(shown.count, ds.count);
    for (int e = 0; e < ds.count; e++) {
        const char *t = shown.items[e].text;
        assert_string_equal(t, again.items[e].text);
        int used = -1;
        for (int d = 0; d < 2; d++) { /* a demonstration block: some other example's prompt and gold alternative */
            int found = -1;
            for (int j = 0; j < ds.count && found < 0; j++) {
                char block[1024];
                snprintf(block, sizeof block, "%s%s\n\n", ds.items[j].text, ds.items[j].cands[ds.items[j].label]);
                if (!strncmp(t, block, strlen(block))) found = j, t += strlen(block);
            }
            assert_true(found >= 0);
            assert_int_not_equal(found, e);
            assert_int_not_equal(found, used);
            used = found;
        }
        assert_string_equal(t, ds.items[e].text); /* then the example's own prompt */
        assert_int_equal(shown.items[e].label, ds.items[e].label);
        assert_int_equal(shown.items[e].n_cands, 2);
    }
    dz_dataset_free(&again);
    assert_int_equal(dz_dataset_with_demos(&ds, &ds, &spec, 4, 7, 1, &again, &err), DZ_ERR_INVALID); /* 3 others */
    dz_dataset_free(&shown);
    dz_dataset_free(&ds);
}

typedef struct fixture {
    dz_model *m;
    dz_tokenizer *tok;
} fixture;

static fixture *model(void) {
    static fixture fx;
    if (fx.m) return &fx;
    char p[1200];
    test_asset_path(p, sizeof p, "stories260K/stories260K.bin");
    dz_error err = {0};
    if (dz_model_load(p, DZ_F32, &fx.m, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (dz_tokenizer_load(dz_model_tokenizer_path(fx.m), 512, &fx.tok, &err) != DZ_OK) fail_msg("%s", err.msg);
    return &fx;
}

/* mean log p(candidate tokens) by a plain forward of the whole sequence and a log-softmax here */
static double direct_score(fixture *fx, const char *prompt, const char *cand) {
    int ctx[512], full[512];
    char text[1024];
    snprintf(text, sizeof text, "%s%s", prompt, cand);
    dz_error err = {0};
    const int nc = dz_tokenizer_encode(fx->tok, prompt, 1, ctx, 512, &err), nf = dz_tokenizer_encode(fx->tok, text, 1, full, 512, &err);
    int pre = 0;
    while (pre < nc && pre < nf && ctx[pre] == full[pre]) pre++;
    const int V = dz_model_config(fx->m)->vocab_size;
    dz_forward *f;
    assert_int_equal(dz_forward_create(fx->m, 1, nf, 0, &f, &err), DZ_OK);
    dz_weight_source w = dz_model_weights(fx->m);
    assert_int_equal(dz_forward_run(f, &w, full, NULL, 1, nf, 0, &err), DZ_OK);
    float *logits = malloc(sizeof(float) * (size_t)V);
    double sum = 0.0;
    for (int p = pre; p < nf; p++) {
        const int row = p - 1;
        assert_int_equal(dz_forward_logits(f, &w, &row, 1, logits, &err), DZ_OK);
        double mx = logits[0], z = 0.0;
        for (int v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
        for (int v = 0; v < V; v++) z += exp((double)logits[v] - mx);
        sum += logits[full[p]] - mx - log(z);
    }
    free(logits);
    dz_forward_free(f);
    return sum / (nf - pre);
}

static void own_candidates_score_as_their_tokens_mean_logprob(void **state) {
    (void)state;
    fixture *fx = model();
    char path[1200];
    snprintf(path, sizeof path, "%s/tasks/candidates.jsonl", DZ_TEST_DATA);
    dz_dataset ds;
    dz_error err = {0};
    assert_int_equal(dz_dataset_load_jsonl(path, "text", "label", &ds, &err), DZ_OK);
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    assert_int_equal(dz_prompt_spec_set_template(&spec, "{text}", &err), DZ_OK);
    dz_class_set cs;
    assert_int_equal(dz_class_set_build(&ds, &spec, fx->tok, 256, &cs, &err), DZ_OK);
    assert_int_equal(cs.n_labels, 4);
    assert_int_equal(dz_class_first(&cs, 4), 2 + 3 + 4 + 2);
    float scores[2][16];
    int preds[2][4];
    for (int streams = 1; streams <= 2; streams++) { /* plain, then shared prompts; batch 5: examples never split */
        dz_forward *f;
        assert_int_equal(dz_forward_create_streams(fx->m, 5, cs.max_len, 0, streams, &f, &err), DZ_OK);
        dz_weight_source w = dz_model_weights(fx->m);
        double acc;
        if (dz_class_evaluate(f, &w, &cs, 5, preds[streams - 1], scores[streams - 1], &acc, &err) != DZ_OK)
            fail_msg("%s", err.msg);
        dz_forward_free(f);
    }
    for (int e = 0; e < ds.count; e++) {
        int best = 0;
        for (int k = 0; k < ds.items[e].n_cands; k++) {
            const int i = dz_class_first(&cs, e) + k;
            const double want = direct_score(fx, ds.items[e].text, ds.items[e].cands[k]);
            for (int s = 0; s < 2; s++)
                if (fabs(scores[s][i] - want) > 1e-4)
                    fail_msg("example %d candidate %d: %.6f, direct %.6f", e, k, scores[s][i], want);
            if (scores[0][i] > scores[0][dz_class_first(&cs, e) + best]) best = k;
        }
        assert_int_equal(preds[0][e], best);
        assert_int_equal(preds[1][e], preds[0][e]);
    }
    dz_class_set_free(&cs);
    dz_dataset_free(&ds);
}

/* A chat-form template on SmolLM2's tokenizer.json: with special_tokens "<|im_start|>" is
 * its id (1), otherwise its characters, each sequence as Hugging Face tokenizers 0.23.3
 * encodes it (Tokenizer.from_file(...).encode(prompt + word).ids; encode_special_tokens =
 * True for the plain text), and the template that writes one is found. */
static void special_tokens_in_a_template_are_their_ids(void **state) {
    (void)state;
    char path[1200];
    test_asset_path(path, sizeof path, "smollm2-135m/hf-tokenizer");
    dz_error err = {0};
    dz_tokenizer *tok;
    if (dz_tokenizer_load(path, 0, &tok, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_dataset ds = {0};
    int cap = 0;
    dz_example ex = {.text = "a gorgeous , witty , seductive movie . ", .label = 1, .line = 1};
    assert_int_equal(dz_dataset_append(&ds, &cap, &ex, &err), DZ_OK);
    static const int want_special[2][20] = {
        {1, 4093, 198, 21465, 42, 253, 35702, 3297, 43773, 3297, 6269, 101, 7888, 7704, 1673, 198, 35658, 2572, 42, 3524},
        {1, 4093, 198, 21465, 42, 253, 35702, 3297, 43773, 3297, 6269, 101, 7888, 7704, 1673, 198, 35658, 2572, 42, 2731}};
    static const int want_text[2][26] = {
        {44, 108, 306, 79, 3738, 108, 46, 4093, 198, 21465, 42, 253, 35702, 3297, 43773, 3297, 6269, 101, 7888, 7704,
         1673, 198, 35658, 2572, 42, 3524},
        {44, 108, 306, 79, 3738, 108, 46, 4093, 198, 21465, 42, 253, 35702, 3297, 43773, 3297, 6269, 101, 7888, 7704,
         1673, 198, 35658, 2572, 42, 2731}};
    for (int special = 0; special <= 1; special++) {
        dz_prompt_spec spec;
        dz_prompt_spec_default_sst2(&spec);
        assert_int_equal(dz_prompt_spec_set_template(&spec, "<|im_start|>user\nReview: {text}\nSentiment:", &err), DZ_OK);
        assert_int_equal(dz_prompt_spec_set_labels(&spec, "negative,positive", &err), DZ_OK);
        spec.special_tokens = special;
        char name[64];
        assert_int_equal(dz_prompt_spec_text_special(&spec, tok, name, sizeof name), !special);
        if (!special) assert_string_equal(name, "<|im_start|>");
        dz_class_set cs;
        if (dz_class_set_build(&ds, &spec, tok, 2048, &cs, &err) != DZ_OK) fail_msg("%s", err.msg);
        for (int k = 0; k < 2; k++) {
            const dz_cand_seq *q = &cs.seqs[k];
            const int *want = special ? want_special[k] : want_text[k];
            assert_int_equal(q->len, special ? 20 : 26);
            for (int i = 0; i < q->len; i++)
                if (q->tokens[i] != want[i])
                    fail_msg("special_tokens %d, candidate %d, id %d: %d, Hugging Face's %d", special, k, i,
                             q->tokens[i], want[i]);
            assert_int_equal(q->cand_len, 1);
        }
        dz_class_set_free(&cs);
    }
    dz_prompt_spec plain; /* no special token written: nothing to say */
    dz_prompt_spec_default_sst2(&plain);
    char name[64];
    assert_int_equal(dz_prompt_spec_text_special(&plain, tok, name, sizeof name), 0);
    dz_dataset_free(&ds);
    dz_tokenizer_free(tok);
}

/* ReCoRD: a query two entities answer ("Obama", "Barack Obama"): the first in sorted order
 * is the label (the training target), and a prediction of either is correct, as MeZO
 * scores it; the third entity is not. */
static void record_every_answering_entity_is_correct(void **state) {
    (void)state;
    fixture *fx = model();
    char path[] = "/tmp/dz_record_XXXXXX";
    assert_non_null(mkdtemp(path));
    char file[64];
    snprintf(file, sizeof file, "%s/val.jsonl", path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("{\"passage\": {\"text\": \"Barack Obama met Obama fans in Paris.\", \"entities\": [{\"start\": 0, "
          "\"end\": 11}, {\"start\": 17, \"end\": 21}, {\"start\": 31, \"end\": 35}]}, \"qas\": [{\"query\": "
          "\"@placeholder spoke.\", \"answers\": [{\"start\": 17, \"end\": 21, \"text\": \"Obama\"}, {\"start\": 0, "
          "\"end\": 11, \"text\": \"Barack Obama\"}]}]}\n", f);
    fclose(f);
    dz_dataset ds;
    dz_error err = {0};
    if (dz_dataset_load_preset(dz_task_preset_find("record"), file, &ds, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(ds.count, 1);
    assert_int_equal(ds.items[0].n_cands, 3);
    assert_string_equal(ds.items[0].cands[0], " Barack Obama spoke.");
    assert_int_equal(ds.items[0].label, 0);
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    assert_int_equal(dz_prompt_spec_set_template(&spec, "{text}", &err), DZ_OK);
    dz_class_set cs;
    assert_int_equal(dz_class_set_build(&ds, &spec, fx->tok, 256, &cs, &err), DZ_OK);
    assert_true(dz_class_correct(&cs, 0, 0));
    assert_true(dz_class_correct(&cs, 0, 1));
    assert_false(dz_class_correct(&cs, 0, 2));
    assert_false(dz_class_correct(&cs, 0, -1));
    const dz_class_set v = dz_class_set_view(&cs, 0, 1);
    assert_true(dz_class_correct(&v, 0, 1));
    dz_class_set_free(&cs);
    dz_dataset_free(&ds);
    unlink(file);
    rmdir(path);
}

static void greedy_answer_is_generate_cut_at_newline(void **state) {
    (void)state;
    fixture *fx = model();
    dz_error err = {0};
    const char *prompt = "Once upon a time";
    int ids[64];
    const int n = dz_tokenizer_encode(fx->tok, prompt, 1, ids, 64, &err);
    dz_forward *kv, *plain;
    assert_int_equal(dz_forward_create(fx->m, 1, 256, 1, &kv, &err), DZ_OK);
    assert_int_equal(dz_forward_create(fx->m, 1, 256, 0, &plain, &err), DZ_OK);
    dz_weight_source w = dz_model_weights(fx->m);
    for (int max_new = 1; max_new <= 40; max_new += 13) {
        dz_sampler s;
        dz_sampler_init(&s, 0.0f, 1.0f, 0);
        int out[64], n_out = 0;
        assert_int_equal(dz_generate(kv, &w, ids, n, max_new, dz_tokenizer_eos(fx->tok), &s, out, &n_out, NULL, NULL, &err),
                         DZ_OK);
        char want[2048] = "", piece[256];
        int prev = ids[n - 1];
        for (int i = 0; i < n_out; i++) {
            const char *p = dz_tokenizer_decode(fx->tok, prev, out[i], piece, sizeof piece);
            strncat(want, p, sizeof want - strlen(want) - 1);
            prev = out[i];
            if (strchr(want, '\n')) break;
        }
        if (strchr(want, '\n')) *strchr(want, '\n') = '\0';
        size_t a = strspn(want, " \t\r\n"), z = strlen(want);
        while (z > a && strchr(" \t\r\n", want[z - 1])) z--;
        want[z] = '\0';
        int work[256];
        float *logits = malloc(sizeof(float) * (size_t)dz_model_config(fx->m)->vocab_size);
        char got[2048];
        assert_int_equal(dz_qa_answer(plain, &w, fx->tok, ids, n, max_new, work, logits, got, sizeof got, &err), DZ_OK);
        free(logits);
        assert_string_equal(got, want + a);
    }
    dz_forward_free(kv);
    dz_forward_free(plain);
}

static int teardown(void **state) {
    (void)state;
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(presets_match_mezo_templates),
        cmocka_unit_test(preset_errors_name_file_line_and_field),
        cmocka_unit_test(f1_and_exact_match_are_squad_v1_1s),
        cmocka_unit_test(demos_are_other_examples_with_their_answers),
        cmocka_unit_test(own_candidates_score_as_their_tokens_mean_logprob),
        cmocka_unit_test(special_tokens_in_a_template_are_their_ids),
        cmocka_unit_test(record_every_answering_entity_is_correct),
        cmocka_unit_test(greedy_answer_is_generate_cut_at_newline),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
