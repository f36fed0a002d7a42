/* Adapters against Hugging Face PEFT itself (issue 29): tests/data/peft/ holds PEFT's
 * logits (tools/make_peft_golden.py) for adapters distzo trained and exported (distzo_lora,
 * distzo_prefix) and for adapters PEFT made (peft_lora, peft_prefix, peft_prefix_proj (PEFT's
 * MLP, saved as its output) on stories260K; opt_peft_lora (a regex target_modules),
 * opt_peft_prefix on tests/data/hf/opt_preln; qwen2_peft_lora (on the biased q, k, v),
 * qwen2_peft_prefix on tests/data/hf/qwen2_bias). Each folder is loaded as
 * eval --adapter and generate --adapter load it (dz_lora_load + dz_forward_set_adapter),
 * and distzo's logits must equal PEFT's within 1e-4 at every real position, while the
 * adapter moves them from the base's by far more. The base alone equals its conversion
 * in the script (so a difference in the base shows apart). The check can fail: a 1%
 * change of one adapter tensor, or a LoRA scale of alpha/r off by the rank's ratio, is
 * seen. That distzo's export makes these distzo_* files bitwise is tests/cli/peft_golden.sh. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distzo/distzo.h"
#include "assets.h"
#include "golden.h"

static const double TOL = 1e-4; /* issue 29: PEFT's logits to 1e-4 */

/* The base a case runs on: stories260K from the assets, or a tests/data/hf model. */
static dz_model *load_base(const char *base) {
    char p[1200];
    if (!strcmp(base, "stories260k")) test_asset_path(p, sizeof p, "stories260K/stories260K.bin");
    else snprintf(p, sizeof p, "%s/hf/%s", DZ_TEST_DATA, base);
    dz_model *m = NULL;
    dz_error err = {0};
    if (dz_model_load(p, DZ_F32, &m, &err) != DZ_OK) fail_msg("%s: %s", p, err.msg);
    return m;
}

static dz_model *load_adapter(const dz_model *m, const char *name) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/peft/%s", DZ_TEST_DATA, name);
    dz_model *a = NULL;
    dz_error err = {0};
    if (dz_lora_load(dir, dz_model_config(m), &a, &err) != DZ_OK) fail_msg("%s: %s", dir, err.msg);
    return a;
}

/* Sequence b of g alone, adapter a attached (NULL: none): its logits [len, V] into out. */
static void logits_of(const dz_model *m, const dz_model *a, const golden_batch *g, int b, float *out) {
    const int len = g->lengths[b];
    dz_forward *f = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(m, 1, len, 0, &f, &err), DZ_OK);
    if (a) assert_int_equal(dz_forward_set_adapter(f, a, NULL, &err), DZ_OK);
    const dz_weight_source w = dz_model_weights(m);
    assert_int_equal(dz_forward_run(f, &w, g->tokens + b * g->T, NULL, 1, len, 0, &err), DZ_OK);
    int rows[64];
    assert_true(len <= 64);
    for (int t = 0; t < len; t++) rows[t] = t;
    assert_int_equal(dz_forward_logits(f, &w, rows, len, out, &err), DZ_OK);
    dz_forward_free(f);
}

typedef struct gap {
    double to_golden; /* max |distzo - PEFT| */
    double moved;     /* max |PEFT's logits under the adapter - the base's| (distzo's base) */
} gap;

/* distzo's logits (base m, adapter a) against the golden g at every real position. */
static gap compare(const dz_model *m, const dz_model *a, const golden_batch *g) {
    const size_t V = (size_t)g->V;
    assert_int_equal(g->V, dz_model_config(m)->vocab_size);
    float *with = malloc(sizeof(float) * (size_t)g->T * V), *plain = malloc(sizeof(float) * (size_t)g->T * V);
    gap r = {0};
    for (int b = 0; b < g->B; b++) {
        logits_of(m, a, g, b, with);
        logits_of(m, NULL, g, b, plain);
        const float *want = g->logits + (size_t)b * g->T * V;
        for (size_t i = 0; i < (size_t)g->lengths[b] * V; i++) {
            r.to_golden = fmax(r.to_golden, fabs((double)with[i] - want[i]));
            r.moved = fmax(r.moved, fabs((double)want[i] - plain[i]));
        }
    }
    free(with), free(plain);
    return r;
}

static void load_golden(const char *name, golden_batch *g) {
    char path[1200];
    snprintf(path, sizeof path, "%s/peft/%s/logits.bin", DZ_TEST_DATA, name);
    golden_batch_load(path, g);
}

/* One case: distzo's logits with the folder are PEFT's to 1e-4; the adapter matters. */
static void check_case(const char *base, const char *name) {
    dz_model *m = load_base(base), *a = load_adapter(m, name);
    golden_batch g;
    load_golden(name, &g);
    const gap r = compare(m, a, &g);
    print_message("%s: max |distzo - PEFT| %.3g; the adapter moves the logits by up to %.3g\n", name, r.to_golden, r.moved);
    if (r.to_golden > TOL) fail_msg("%s: distzo's logits differ from PEFT's by %g > %g", name, r.to_golden, TOL);
    assert_true(r.moved > 1.0); /* far above the tolerance: the adapter is really read */
    golden_batch_free(&g);
    dz_model_free(a), dz_model_free(m);
}

static void base_is_the_scripts(void **state) {
    (void)state;
    dz_model *m = load_base("stories260k");
    golden_batch g;
    char path[1200];
    snprintf(path, sizeof path, "%s/peft/stories260k_base_logits.bin", DZ_TEST_DATA);
    golden_batch_load(path, &g);
    const gap r = compare(m, NULL, &g);
    print_message("stories260K base: max |distzo - transformers| %.3g\n", r.to_golden);
    if (r.to_golden > TOL) fail_msg("the base's logits differ from the script's conversion by %g", r.to_golden);
    golden_batch_free(&g);
    dz_model_free(m);
}

static void distzo_lora(void **state) { (void)state, check_case("stories260k", "distzo_lora"); }
static void distzo_prefix(void **state) { (void)state, check_case("stories260k", "distzo_prefix"); }
static void peft_lora(void **state) { (void)state, check_case("stories260k", "peft_lora"); }
static void peft_prefix(void **state) { (void)state, check_case("stories260k", "peft_prefix"); }
/* prefix_projection true: the folder holds the MLP's output, read as PEFT reads it */
static void peft_prefix_proj(void **state) { (void)state, check_case("stories260k", "peft_prefix_proj"); }
static void opt_peft_lora(void **state) { (void)state, check_case("opt_preln", "opt_peft_lora"); }
static void opt_peft_prefix(void **state) { (void)state, check_case("opt_preln", "opt_peft_prefix"); }
static void qwen2_peft_lora(void **state) { (void)state, check_case("qwen2_bias", "qwen2_peft_lora"); }
static void qwen2_peft_prefix(void **state) { (void)state, check_case("qwen2_bias", "qwen2_peft_prefix"); }

/* Tensor i of adapter a scaled by s: the comparison must then fail. */
static double gap_when_scaled(const char *base, const char *name, int i, float s) {
    dz_model *m = load_base(base), *a = load_adapter(m, name);
    float *x = dz_model_tensor(a, i);
    for (int64_t e = 0; e < dz_param_numel(&dz_model_params(a)->params[i]); e++) x[e] *= s;
    golden_batch g;
    load_golden(name, &g);
    const double d = compare(m, a, &g).to_golden;
    print_message("%s: %s scaled by %g: max |distzo - PEFT| %.3g\n", name, dz_model_params(a)->params[i].hf_name,
                  (double)s, d);
    golden_batch_free(&g);
    dz_model_free(a), dz_model_free(m);
    return d;
}

static void a_changed_adapter_fails(void **state) {
    (void)state;
    const double lora = gap_when_scaled("stories260k", "peft_lora", 1, 1.01f); /* one B by 1% */
    const double prefix = gap_when_scaled("stories260k", "peft_prefix", 0, 1.01f); /* layer 0's keys by 1% */
    const double opt = gap_when_scaled("opt_preln", "opt_peft_lora", 3, 1.01f); /* layer 0's k_proj B */
    /* the scale s = alpha/r read as alpha/r' for another rank r' = r/2: every B doubled */
    dz_model *m = load_base("stories260k"), *a = load_adapter(m, "distzo_lora");
    const dz_param_table *t = dz_model_params(a);
    for (int i = 1; i < t->count; i += 2)
        for (int64_t e = 0; e < dz_param_numel(&t->params[i]); e++) ((float *)dz_model_tensor(a, i))[e] *= 2.0f;
    golden_batch g;
    load_golden("distzo_lora", &g);
    const double scale = compare(m, a, &g).to_golden;
    golden_batch_free(&g);
    dz_model_free(a), dz_model_free(m);
    print_message("distzo_lora with twice the scale: max |distzo - PEFT| %.3g\n", scale);
    assert_true(lora > 10 * TOL), assert_true(prefix > 10 * TOL), assert_true(opt > 10 * TOL);
    assert_true(scale > 10 * TOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(base_is_the_scripts), cmocka_unit_test(distzo_lora),   cmocka_unit_test(distzo_prefix),
        cmocka_unit_test(peft_lora),           cmocka_unit_test(peft_prefix),   cmocka_unit_test(peft_prefix_proj),
        cmocka_unit_test(opt_peft_lora),       cmocka_unit_test(opt_peft_prefix),
        cmocka_unit_test(qwen2_peft_lora),     cmocka_unit_test(qwen2_peft_prefix),
        cmocka_unit_test(a_changed_adapter_fails),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
