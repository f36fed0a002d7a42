/* LoRA adapters on the real stories260K (q, k, v, o as separate tensors): an adapter made
 * from a seed has PEFT's init (A within +-1/sqrt(in), B = 0) and is rebuilt bitwise from
 * it; with B = 0 the forward's logits are bitwise the base model's; with a nonzero adapter
 * on every target they equal those of the base with W + (alpha/r) B A merged in by this
 * test's own loops, within 3e-5 of their size (the float rounding of the merged W), and
 * dz_lora_merge agrees; a PEFT folder round-trips bitwise, one written as PEFT does (bf16,
 * other field order, extra keys) loads; bad targets and folders are refused by name. */
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

#include "core/util.h"
#include "distzo/distzo.h"
#include "format/safetensors.h"
#include "assets.h"
#include "temp_dir.h"

static const int TOKENS[12] = {1, 403, 407, 261, 378, 284, 339, 270, 301, 46, 312, 280};
enum { T = 12 };

static dz_model *load_base(void) {
    char p[1200];
    test_asset_path(p, sizeof p, "stories260K/stories260K.bin");
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_model_load(p, DZ_F32, &m, &err), DZ_OK);
    return m;
}

/* Logits of every position, with adapter a attached (NULL: none). */
static float *logits_of(const dz_model *m, const dz_model *a) {
    const int V = dz_model_config(m)->vocab_size;
    dz_forward *f = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(m, 1, T, 0, &f, &err), DZ_OK);
    if (a) assert_int_equal(dz_forward_set_adapter(f, a, NULL, &err), DZ_OK);
    const dz_weight_source w = dz_model_weights(m);
    assert_int_equal(dz_forward_run(f, &w, TOKENS, NULL, 1, T, 0, &err), DZ_OK);
    int rows[T];
    for (int i = 0; i < T; i++) rows[i] = i;
    float *out = malloc(sizeof(float) * T * V);
    assert_int_equal(dz_forward_logits(f, &w, rows, T, out, &err), DZ_OK);
    dz_forward_free(f);
    return out;
}

static dz_model *make_adapter(const dz_config *c, const char *targets, uint64_t seed) {
    dz_lora_spec spec = {.rank = 8, .alpha = 16.0f};
    dz_error err = {0};
    assert_int_equal(dz_lora_parse_targets(targets, &spec.targets, &err), DZ_OK);
    dz_model *a = NULL;
    assert_int_equal(dz_lora_create(c, &spec, seed, "stories260K", &a, &err), DZ_OK);
    return a;
}

static int is_b(const dz_param *p) { return strstr(p->hf_name, "lora_B") != NULL; }

static void init_is_peft_and_seeded(void **state) {
    (void)state;
    dz_model *m = load_base();
    dz_model *a = make_adapter(dz_model_config(m), "q_proj,v", 7), *b = make_adapter(dz_model_config(m), "q,v", 7);
    dz_model *c = make_adapter(dz_model_config(m), "q,v", 8);
    const dz_param_table *t = dz_model_params(a);
    assert_int_equal(t->count, 4 * dz_model_config(m)->n_layers);
    int differs = 0;
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        const float *x = dz_model_tensor(a, i), *y = dz_model_tensor(b, i), *z = dz_model_tensor(c, i);
        const float bound = 1.0f / sqrtf((float)p->cols);
        double sum_sq = 0.0;
        for (int64_t e = 0; e < dz_param_numel(p); e++) {
            if (is_b(p)) assert_true(x[e] == 0.0f);
            else assert_true(fabsf(x[e]) <= bound), sum_sq += (double)x[e] * x[e];
            differs |= x[e] != z[e];
        }
        if (!is_b(p)) /* U(-b, b) has variance b^2 / 3 */
            assert_true(fabs(sum_sq / dz_param_numel(p) / (bound * bound / 3.0) - 1.0) < 0.2);
        assert_memory_equal(x, y, sizeof(float) * (size_t)dz_param_numel(p));
    }
    assert_true(differs);
    assert_string_equal(t->params[1].hf_name, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
    dz_model_free(a), dz_model_free(b), dz_model_free(c), dz_model_free(m);
}

static void zero_b_is_the_base(void **state) {
    (void)state;
    dz_model *m = load_base();
    dz_model *a = make_adapter(dz_model_config(m), "q,k,v,o,up,gate,down", 3);
    const size_t V = (size_t)dz_model_config(m)->vocab_size;
    float *base = logits_of(m, NULL), *with = logits_of(m, a);
    assert_memory_equal(base, with, sizeof(float) * T * V);
    free(base), free(with);
    dz_model_free(a), dz_model_free(m);
}

/* W += s B A in double per element, this test's own loops over the base model's tensors. */
static void merge_by_hand(dz_model *m, const dz_model *a) {
    static const int roles[] = {DZ_L_WQ, DZ_L_WK, DZ_L_WV, DZ_L_WO, DZ_L_W_UP, DZ_L_W_GATE, DZ_L_W_DOWN};
    const dz_param_table *t = dz_model_params(a);
    const double s = 16.0 / 8.0;
    for (int i = 0; i < t->count; i += 2) {
        const dz_param *pa = &t->params[i], *pb = &t->params[i + 1];
        const int target = (pa->role - DZ_L_LORA_FIRST) / 2, id = dz_param_find(dz_model_params(m), pa->block, roles[target]);
        assert_true(id >= 0);
        float *w = dz_model_tensor(m, id);
        const float *A = dz_model_tensor(a, i), *B = dz_model_tensor(a, i + 1);
        assert_int_equal(pb->rows, dz_model_params(m)->params[id].rows);
        for (int64_t o = 0; o < pb->rows; o++)
            for (int64_t j = 0; j < pa->cols; j++) {
                double acc = 0.0;
                for (int k = 0; k < 8; k++) acc += (double)B[o * 8 + k] * A[k * pa->cols + j];
                w[o * pa->cols + j] = (float)(w[o * pa->cols + j] + s * acc);
            }
    }
}

static void adapter_forward_equals_merged(void **state) {
    (void)state;
    dz_model *m = load_base(), *merged = load_base(), *merged2 = load_base();
    dz_error err = {0};
    assert_int_equal(dz_model_make_owned(merged, &err), DZ_OK);
    assert_int_equal(dz_model_make_owned(merged2, &err), DZ_OK);
    dz_model *a = make_adapter(dz_model_config(m), "q,k,v,o,up,gate,down", 5);
    const dz_param_table *t = dz_model_params(a);
    uint64_t s = 99;
    for (int i = 0; i < t->count; i++) /* B nonzero: uniform in +-0.05 */
        if (is_b(&t->params[i]))
            for (int64_t e = 0; e < dz_param_numel(&t->params[i]); e++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                ((float *)dz_model_tensor(a, i))[e] = (float)((double)(s >> 40) / 16777216.0 - 0.5) * 0.1f;
            }
    merge_by_hand(merged, a);
    assert_int_equal(dz_lora_merge(merged2, a, &err), DZ_OK);
    const size_t V = (size_t)dz_model_config(m)->vocab_size;
    float *base = logits_of(m, NULL), *with = logits_of(m, a), *want = logits_of(merged, NULL), *lib = logits_of(merged2, NULL);
    double most = 0.0, moved = 0.0;
    /* W' = W + s B A rounded to float alone moves these logits by ~1e-5 of their size
     * (measured 8e-6 .. 1.4e-5 per target, the same for B 10x smaller: rounding, not the
     * adapter), so the bound is 3e-5 relative; a wrong scale, a transposed B or a missed
     * target moves them by 0.08 .. 3 */
    for (size_t i = 0; i < T * V; i++) {
        most = fmax(most, fabs((double)with[i] - want[i]) / fmax(1.0, fabs((double)want[i])));
        moved = fmax(moved, fabs((double)with[i] - base[i]));
        assert_true(fabs((double)lib[i] - want[i]) <= 1e-5);
    }
    assert_true(moved > 1e-2); /* the adapter does change the logits */
    if (most > 3e-5) fail_msg("adapter forward vs merged: max |diff| / max(1, |logit|) %g > 3e-5", most);
    print_message("adapter forward vs merged: max |diff| / max(1, |logit|) %g, moved by the adapter %g\n", most, moved);
    free(base), free(with), free(want), free(lib);
    dz_model_free(a), dz_model_free(m), dz_model_free(merged), dz_model_free(merged2);
}

static void write_text(const char *path, const char *text) {
    dz_error err = {0};
    assert_int_equal(dz_write_file_atomic(path, text, strlen(text), &err), DZ_OK);
}

static void peft_folders(void **state) {
    (void)state;
    dz_model *m = load_base();
    const dz_config *c = dz_model_config(m);
    dz_model *a = make_adapter(c, "q,v", 11), *back = NULL;
    char dir[400], path[500];
    dz_error err = {0};
    snprintf(dir, sizeof dir, "%s/ours", g_dir);
    assert_int_equal(dz_model_save_hf(a, dir, &err), DZ_OK);
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_OK);
    const dz_param_table *t = dz_model_params(a);
    for (int i = 0; i < t->count; i++)
        assert_memory_equal(dz_model_tensor(a, i), dz_model_tensor(back, i), sizeof(float) * (size_t)dz_param_numel(&t->params[i]));
    dz_model_free(back);
    /* as PEFT writes one: bf16, its own field order and extra fields, targets in another order */
    snprintf(dir, sizeof dir, "%s/peft", g_dir);
    assert_int_equal(dz_mkdirs(dir), 0);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    write_text(path, "{\"alpha_pattern\": {}, \"base_model_name_or_path\": \"x\", \"bias\": \"none\", \"fan_in_fan_out\": "
               "false, \"inference_mode\": true, \"layers_to_transform\": null, \"lora_alpha\": 16, \"lora_dropout\": 0.05, "
               "\"peft_type\": \"LORA\", \"r\": 8, \"revision\": null, \"target_modules\": [\"v_proj\", \"q_proj\"], "
               "\"task_type\": \"CAUSAL_LM\", \"use_rslora\": false}");
    dz_st_write_tensor *ts = calloc((size_t)t->count, sizeof *ts);
    uint16_t **bf = calloc((size_t)t->count, sizeof *bf);
    for (int i = 0; i < t->count; i++) {
        const size_t n = (size_t)dz_param_numel(&t->params[i]);
        bf[i] = malloc(2 * n);
        for (size_t e = 0; e < n; e++) bf[i][e] = (uint16_t)(0x3c00 + (e % 64) + 16 * i); /* small bf16 values */
        ts[i] = (dz_st_write_tensor){.name = t->params[i].hf_name, .dtype = DZ_BF16, .data = bf[i], .ndim = 2,
                                     .shape = {t->params[i].rows, t->params[i].cols}};
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    assert_int_equal(dz_safetensors_write(path, ts, t->count, &err), DZ_OK);
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_OK);
    for (int i = 0; i < t->count; i++) {
        const float *x = dz_model_tensor(back, i);
        for (int64_t e = 0; e < dz_param_numel(&t->params[i]); e++) {
            const uint32_t bits = (uint32_t)bf[i][e] << 16;
            float want;
            memcpy(&want, &bits, 4);
            assert_true(x[e] == want);
        }
        free(bf[i]);
    }
    assert_true(dz_model_lora(back)->targets == dz_model_lora(a)->targets);
    free(bf), free(ts);
    dz_model_free(back), dz_model_free(a), dz_model_free(m);
}

static void refusals(void **state) {
    (void)state;
    unsigned targets = 0;
    dz_error err = {0};
    assert_int_equal(dz_lora_parse_targets("q,zz", &targets, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'zz'"));
    dz_config opt;
    assert_int_equal(dz_config_preset("opt-tiny", &opt, &err), DZ_OK);
    dz_lora_spec spec = {.rank = 4, .alpha = 8.0f, .targets = 1u << DZ_LORA_GATE};
    dz_model *a = NULL;
    assert_int_equal(dz_lora_create(&opt, &spec, 1, "opt", &a, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "gate_proj"));
    spec.targets = 1u << DZ_LORA_O, spec.rank = 0;
    assert_int_equal(dz_lora_create(&opt, &spec, 1, "opt", &a, &err), DZ_ERR_INVALID);
    spec.rank = 4;
    assert_int_equal(dz_lora_create(&opt, &spec, 1, "opt", &a, &err), DZ_OK); /* OPT's out_proj */
    assert_string_equal(dz_model_params(a)->params[0].hf_name,
                        "base_model.model.model.decoder.layers.0.self_attn.out_proj.lora_A.weight");
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/bad", g_dir);
    assert_int_equal(dz_model_save_hf(a, dir, &err), DZ_OK);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    /* PEFT's regex (a string): the targets are the modules whose tensors the file holds */
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": \".*\\\\.(out|o)_proj\"}");
    dz_model *back = NULL;
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_OK);
    assert_true(dz_model_lora(back)->targets == 1u << DZ_LORA_O);
    assert_memory_equal(dz_model_tensor(back, 0), dz_model_tensor(a, 0),
                        sizeof(float) * (size_t)dz_param_numel(&dz_model_params(a)->params[0]));
    dz_model_free(back);
    back = NULL;
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"out_proj\"], "
               "\"use_rslora\": true}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "use_rslora"));
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"out_proj\"], "
               "\"rank_pattern\": {\"out_proj\": 2}}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "rank_pattern"));
    /* PEFT's variants with the same tensors but another forward, refused by name */
    static const char *const variants[] = {"\"alora_invocation_tokens\": [5, 6]", "\"lora_bias\": true",
                                           "\"layer_replication\": [[0, 2]]", "\"modules_to_save\": [\"lm_head\"]"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char text[300], key[40];
        snprintf(text, sizeof text, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": "
                 "[\"out_proj\"], \"rank_pattern\": {}, \"exclude_modules\": null, %s}", variants[i]);
        write_text(path, text);
        assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_UNSUPPORTED);
        snprintf(key, sizeof key, "%.*s", (int)(strchr(variants[i] + 1, '"') - variants[i] - 1), variants[i] + 1);
        if (!strstr(err.msg, key)) fail_msg("%s: '%s' not named in: %s", variants[i], key, err.msg);
    }
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"out_proj\", \"fc1\"]}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "fc1.lora_A.weight' is missing"));
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"k_proj\"]}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_UNSUPPORTED); /* out_proj's tensors are extra */
    assert_non_null(strstr(err.msg, "out_proj.lora_A.weight"));
    write_text(path, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"out_proj\", \"foo\"]}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_FORMAT); /* the cause's words, not a mangled copy */
    if (!strstr(err.msg, "adapter_config.json: target_modules: ") || !strstr(err.msg, "unknown module 'foo'"))
        fail_msg("an unknown target module: %s", err.msg);
    write_text(path, "{\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 5}"); /* read as a prefix's */
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "num_layers"));
    write_text(path, "{\"peft_type\": \"IA3\"}");
    assert_int_equal(dz_lora_load(dir, &opt, &back, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "peft_type"));
    assert_null(back);
    dz_model_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_is_peft_and_seeded), cmocka_unit_test(zero_b_is_the_base),
        cmocka_unit_test(adapter_forward_equals_merged), cmocka_unit_test(peft_folders),
        cmocka_unit_test(refusals),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown));
}
