/* Logits and log-probs of the forward pass against Hugging Face transformers, on tiny
 * random models written by tools/make_hf_golden.py: OPT pre-LN, OPT-350m-style post-LN
 * with project_in/out, LLaMA with GQA and an untied head, LLaMA tied, Qwen2 biases;
 * F32, BF16 and F16 files, and a sharded checkpoint. Right-padded batches. Every check runs
 * on every registered backend (backend/backend.h), the reference included. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "distzo/model.h"
#include "golden.h"

static dz_model *load(const char *name, dz_dtype dtype) {
    char path[1024];
    snprintf(path, sizeof path, "%s/hf/%s", DZ_TEST_DATA, name);
    dz_model *m = NULL;
    dz_error err = {0};
    dz_status st = dz_model_load(path, dtype, &m, &err);
    if (st != DZ_OK) fail_msg("%s: %s", path, err.msg);
    return m;
}

/* Max |distzo - reference| over real (non-padding) positions, for logits and log-probs, on
 * backend be. */
static void compare_batch_on(const dz_backend *be, const char *name, dz_dtype dtype, const char *golden_name,
                             double tol) {
    golden_batch g;
    golden_batch_load_hf(golden_name, &g);
    dz_model *m = load(name, dtype);
    assert_int_equal(dz_model_config(m)->vocab_size, g.V);
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_backend(m, be, g.B, g.T, 0, 1, &f, &err), DZ_OK);
    assert_ptr_equal(dz_forward_backend(f), be);
    dz_weight_source w = dz_model_weights(m);
    assert_int_equal(dz_forward_run(f, &w, g.tokens, g.lengths, g.B, g.T, 0, &err), DZ_OK);
    int *rows = malloc(sizeof(int) * (size_t)g.B * g.T), *targets = malloc(sizeof(int) * (size_t)g.B * g.T);
    int n = 0;
    for (int b = 0; b < g.B; b++)
        for (int t = 0; t < g.lengths[b]; t++) rows[n++] = b * g.T + t;
    float *logits = malloc(sizeof(float) * (size_t)n * g.V), *lp = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(dz_forward_logits(f, &w, rows, n, logits, &err), DZ_OK);
    double max_err = 0.0;
    for (int i = 0; i < n; i++)
        for (int v = 0; v < g.V; v++) {
            double d = fabs(logits[(size_t)i * g.V + v] - g.logits[(size_t)rows[i] * g.V + v]);
            max_err = d > max_err ? d : max_err;
        }
    /* log-probs of the next token, where one exists */
    int *lrows = malloc(sizeof(int) * (size_t)g.B * g.T);
    const int nt = golden_batch_next_token_rows(&g, lrows, targets);
    assert_int_equal(dz_forward_logprobs(f, &w, lrows, targets, nt, lp, &err), DZ_OK);
    double max_lp = 0.0;
    for (int i = 0; i < nt; i++) {
        double d = fabs(lp[i] - g.logprobs[lrows[i]]);
        max_lp = d > max_lp ? d : max_lp;
    }
    printf("  %-28s as %-4s on %-3s vs %-26s max |logit err| %.2e, max |logprob err| %.2e\n", name,
           dz_dtype_name(dtype), be->name, golden_name, max_err, max_lp);
    assert_true(max_err <= tol);
    assert_true(max_lp <= tol);
    free(rows);
    free(targets);
    free(lrows);
    free(logits);
    free(lp);
    dz_forward_free(f);
    dz_model_free(m);
    golden_batch_free(&g);
}

static void compare_batch(const char *name, dz_dtype dtype, const char *golden_name, double tol) {
    for (int i = 0; i < dz_backend_count(); i++) compare_batch_on(dz_backend_at(i), name, dtype, golden_name, tol);
}

static void opt_preln_fp32(void **s) { (void)s; compare_batch("opt_preln", DZ_F32, "opt_preln", 1e-4); }
static void opt_postln_project_in_out_fp32(void **s) { (void)s; compare_batch("opt_postln_proj", DZ_F32, "opt_postln_proj", 1e-4); }
static void llama_gqa_untied_fp32(void **s) { (void)s; compare_batch("llama_gqa_untied", DZ_F32, "llama_gqa_untied", 1e-4); }
static void llama_tied_mha_fp32(void **s) { (void)s; compare_batch("llama_tied_mha", DZ_F32, "llama_tied_mha", 1e-4); }
static void qwen2_qkv_bias_fp32(void **s) { (void)s; compare_batch("qwen2_bias", DZ_F32, "qwen2_bias", 1e-4); }
static void sharded_checkpoint(void **s) { (void)s; compare_batch("llama_gqa_untied_sharded", DZ_F32, "llama_gqa_untied", 1e-4); }

/* bf16/f16 files: weights exact in fp32, so the fp32 compute must match HF's fp32 run on
 * the same (upcast) weights to 1e-4, whether held as f32 or as the file's own dtype. */
static void bf16_file_held_as_f32_and_bf16(void **s) {
    (void)s;
    compare_batch("opt_preln_bf16", DZ_F32, "opt_preln_bf16", 1e-4);
    compare_batch("opt_preln_bf16", DZ_BF16, "opt_preln_bf16", 1e-4);
    compare_batch("llama_gqa_untied_bf16", DZ_BF16, "llama_gqa_untied_bf16", 1e-4);
}
static void f16_file(void **s) {
    (void)s;
    compare_batch("llama_gqa_untied_f16", DZ_F32, "llama_gqa_untied_f16", 1e-4);
    compare_batch("llama_gqa_untied_f16", DZ_F16, "llama_gqa_untied_f16", 1e-4);
}

/* fp32 weights held in bf16: rounding each weight to bf16 (round to nearest even, as
 * torch's .to(bfloat16)) must equal HF on its own bf16 copy, and stay within the stated
 * bound of 0.15 (logits of magnitude ~5) of the fp32 reference. */
static void fp32_checkpoint_held_as_bf16(void **s) {
    (void)s;
    compare_batch("opt_preln", DZ_BF16, "opt_preln_bf16", 1e-4);
    compare_batch("llama_gqa_untied", DZ_BF16, "llama_gqa_untied_bf16", 1e-4);
    compare_batch("opt_preln", DZ_BF16, "opt_preln", 0.15);
}

/* Token-by-token decoding with the KV cache gives the same logits as the batch reference. */
static void kv_cache_matches_full_sequence(void **s) {
    (void)s;
    static const char *names[] = {"opt_preln", "opt_postln_proj", "llama_gqa_untied", "qwen2_bias"};
    for (int k = 0; k < 4 * dz_backend_count(); k++) {
        const dz_backend *be = dz_backend_at(k / 4);
        golden_batch g;
        golden_batch_load_hf(names[k % 4], &g);
        dz_model *m = load(names[k % 4], DZ_F32);
        dz_forward *f;
        dz_error err = {0};
        assert_int_equal(dz_forward_create_backend(m, be, 1, g.T, 1, 1, &f, &err), DZ_OK);
        dz_weight_source w = dz_model_weights(m);
        float *logits = malloc(sizeof(float) * (size_t)g.V);
        const int b = 1, row0 = 0; /* the unpadded sequence */
        double max_err = 0.0;
        for (int t = 0; t < g.lengths[b]; t++) {
            assert_int_equal(dz_forward_run(f, &w, &g.tokens[b * g.T + t], NULL, 1, 1, t, &err), DZ_OK);
            assert_int_equal(dz_forward_logits(f, &w, &row0, 1, logits, &err), DZ_OK);
            for (int v = 0; v < g.V; v++) {
                double d = fabs(logits[v] - g.logits[((size_t)b * g.T + t) * g.V + v]);
                max_err = d > max_err ? d : max_err;
            }
        }
        printf("  %-28s on %-3s incremental decoding max |logit err| %.2e\n", names[k % 4], be->name, max_err);
        assert_true(max_err <= 1e-4);
        free(logits);
        dz_forward_free(f);
        dz_model_free(m);
        golden_batch_free(&g);
    }
}

/* A shape in config.json that disagrees with the tensor file is an error naming both. */
static void shape_mismatch_is_reported(void **s) {
    (void)s;
    char dir[] = "/tmp/dz_fwd_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cp %s/hf/opt_preln/model.safetensors %s/ && sed 's/\"ffn_dim\": *[0-9]*/\"ffn_dim\": 100/' "
             "%s/hf/opt_preln/config.json > %s/config.json",
             DZ_TEST_DATA, dir, DZ_TEST_DATA, dir);
    assert_int_equal(system(cmd), 0);
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_model_load(dir, DZ_F32, &m, &err), DZ_ERR_FORMAT);
    printf("  expected error: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "fc1.weight"));
    assert_non_null(strstr(err.msg, "model.safetensors"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opt_preln_fp32),
        cmocka_unit_test(opt_postln_project_in_out_fp32),
        cmocka_unit_test(llama_gqa_untied_fp32),
        cmocka_unit_test(llama_tied_mha_fp32),
        cmocka_unit_test(qwen2_qkv_bias_fp32),
        cmocka_unit_test(sharded_checkpoint),
        cmocka_unit_test(bf16_file_held_as_f32_and_bf16),
        cmocka_unit_test(f16_file),
        cmocka_unit_test(fp32_checkpoint_held_as_bf16),
        cmocka_unit_test(kv_cache_matches_full_sequence),
        cmocka_unit_test(shape_mismatch_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
