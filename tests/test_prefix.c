/* Prefix tuning (docs/ADAPTERS.md). MeZO's init from real tokens makes the prefix the key/
 * value cache of those tokens, so a sequence under the fresh prefix must give exactly the
 * logits the base gives that sequence after the init tokens (its rows there): checked
 * bitwise on stories260K (LLaMA: RoPE, GQA-free) and a random OPT (learned positions,
 * biases). A cached decoding step under a prefix gives the whole run's bits. Also: the
 * init is a pure function of the seed; the PEFT folder's
 * prompt_embeddings holds layer l's key and value of virtual token n at chunks 2l and
 * 2l + 1 of row n (read back by this test from the file), round-trips bitwise and gives the
 * same logits, also marked prefix_projection true (PEFT saves the MLP's output); bad
 * folders and sizes are refused by name; --merge refuses a prefix. */
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

static const int TOKENS[9] = {1, 403, 407, 261, 378, 284, 339, 270, 301};
enum { T = 9, N = 3 };

static dz_model *load_base(void) {
    char p[1200];
    test_asset_path(p, sizeof p, "stories260K/stories260K.bin");
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_model_load(p, DZ_F32, &m, &err), DZ_OK);
    return m;
}

static dz_model *random_opt(void) {
    dz_config c;
    dz_error err = {0};
    assert_int_equal(dz_config_preset("opt-tiny", &c, &err), DZ_OK);
    dz_model *m = NULL;
    assert_int_equal(dz_model_init_random(&c, DZ_F32, 5, 0.2f, &m, &err), DZ_OK);
    return m;
}

static dz_model *make_prefix(const dz_model *base, int n, uint64_t seed) {
    const dz_lora_spec spec = {.prefix_tokens = n};
    dz_model *a = NULL;
    dz_error err = {0};
    assert_int_equal(dz_prefix_create(base, &spec, seed, "base", &a, &err), DZ_OK);
    return a;
}

/* Logits of the last n rows of tokens[0 .. len), adapter a attached (NULL: none). */
static float *logits_of(const dz_model *m, const dz_model *a, const int *tokens, int len, int n) {
    const int V = dz_model_config(m)->vocab_size;
    dz_forward *f = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(m, 1, len, 0, &f, &err), DZ_OK);
    if (a) assert_int_equal(dz_forward_set_adapter(f, a, NULL, &err), DZ_OK);
    const dz_weight_source w = dz_model_weights(m);
    assert_int_equal(dz_forward_run(f, &w, tokens, NULL, 1, len, 0, &err), DZ_OK);
    int rows[32];
    for (int i = 0; i < n; i++) rows[i] = len - n + i;
    float *out = malloc(sizeof(float) * (size_t)n * V);
    assert_int_equal(dz_forward_logits(f, &w, rows, n, out, &err), DZ_OK);
    dz_forward_free(f);
    return out;
}

/* The fresh prefix is the init tokens' cache: logits equal the base's after those tokens. */
static void fresh_prefix_is_the_init_tokens(const dz_model *m, uint64_t seed) {
    const dz_config *c = dz_model_config(m);
    int all[N + T];
    dz_prefix_init_tokens(seed, c->vocab_size, N, all);
    for (int i = 0; i < T; i++) all[N + i] = TOKENS[i] % c->vocab_size;
    dz_model *a = make_prefix(m, N, seed);
    float *with = logits_of(m, a, all + N, T, T), *after = logits_of(m, NULL, all, N + T, T);
    float *plain = logits_of(m, NULL, all + N, T, T);
    assert_memory_equal(with, after, sizeof(float) * T * c->vocab_size);
    assert_true(memcmp(with, plain, sizeof(float) * T * c->vocab_size) != 0); /* the prefix moves them */
    free(with), free(after), free(plain);
    dz_model_free(a);
}

static void fresh_prefix_equals_a_continuation(void **state) {
    (void)state;
    dz_model *m = load_base(), *opt = random_opt();
    fresh_prefix_is_the_init_tokens(m, 42);
    fresh_prefix_is_the_init_tokens(opt, 43);
    dz_model_free(m), dz_model_free(opt);
}

/* Decoding with a KV cache under a prefix (a step at start > 0: the virtual rows, then the
 * cached positions) gives the bits of the whole sequence's last row. */
static void cached_step_is_the_whole_run(void **state) {
    (void)state;
    dz_model *m = load_base(), *a = make_prefix(m, N, 3);
    const int V = dz_model_config(m)->vocab_size;
    dz_forward *f = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(m, 1, T, 1, &f, &err), DZ_OK);
    assert_int_equal(dz_forward_set_adapter(f, a, NULL, &err), DZ_OK);
    const dz_weight_source w = dz_model_weights(m);
    assert_int_equal(dz_forward_run(f, &w, TOKENS, NULL, 1, T - 1, 0, &err), DZ_OK);
    assert_int_equal(dz_forward_run(f, &w, TOKENS + T - 1, NULL, 1, 1, T - 1, &err), DZ_OK);
    const int row = 0;
    float *step = malloc(sizeof(float) * V), *whole = logits_of(m, a, TOKENS, T, 1);
    assert_int_equal(dz_forward_logits(f, &w, &row, 1, step, &err), DZ_OK);
    assert_memory_equal(step, whole, sizeof(float) * V);
    free(step), free(whole);
    dz_forward_free(f);
    dz_model_free(a), dz_model_free(m);
}

static void init_is_seeded(void **state) {
    (void)state;
    dz_model *m = load_base();
    const dz_config *c = dz_model_config(m);
    dz_model *a = make_prefix(m, 5, 7), *b = make_prefix(m, 5, 7), *d = make_prefix(m, 5, 8);
    const dz_param_table *t = dz_model_params(a);
    assert_int_equal(t->count, 2 * c->n_layers);
    int differs = 0;
    for (int i = 0; i < t->count; i++) {
        const dz_param *p = &t->params[i];
        assert_int_equal(p->rows, 5);
        assert_int_equal(p->cols, c->n_kv_heads * c->head_dim);
        const size_t bytes = sizeof(float) * (size_t)dz_param_numel(p);
        assert_memory_equal(dz_model_tensor(a, i), dz_model_tensor(b, i), bytes);
        differs |= memcmp(dz_model_tensor(a, i), dz_model_tensor(d, i), bytes) != 0;
    }
    assert_true(differs);
    int tok[64];
    dz_prefix_init_tokens(7, c->vocab_size, 64, tok);
    int distinct = 0;
    for (int i = 0; i < 64; i++) {
        assert_true(tok[i] >= 0 && tok[i] < c->vocab_size);
        distinct += i == 0 || tok[i] != tok[i - 1];
    }
    assert_true(distinct > 32);
    dz_model_free(a), dz_model_free(b), dz_model_free(d), dz_model_free(m);
}

/* prompt_embeddings[n, (2l + k) * td + j] is tensor (l, k)'s [n, j]: read from the file. */
static void check_layout(const dz_model *a, const char *dir) {
    const dz_config *c = dz_model_config(a);
    const int td = c->n_kv_heads * c->head_dim, row = c->n_layers * 2 * td;
    char path[600];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    dz_safetensors sf;
    dz_error err = {0};
    assert_int_equal(dz_safetensors_open(path, &sf, &err), DZ_OK);
    assert_int_equal(sf.count, 1);
    const dz_st_tensor *pe = dz_safetensors_find(&sf, "prompt_embeddings");
    assert_non_null(pe);
    assert_int_equal(pe->shape[0], N), assert_int_equal(pe->shape[1], row);
    const dz_param_table *t = dz_model_params(a);
    for (int i = 0; i < t->count; i++) {
        const int l = t->params[i].block, k = t->params[i].role == DZ_L_PREFIX_V;
        const float *x = dz_model_tensor(a, i);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < td; j++) {
                float v;
                memcpy(&v, (const char *)pe->data + sizeof(float) * ((size_t)n * row + (size_t)(2 * l + k) * td + j), sizeof v);
                assert_true(v == x[n * td + j]);
            }
    }
    dz_safetensors_close(&sf);
}

static void write_text(const char *path, const char *text) {
    dz_error err = {0};
    assert_int_equal(dz_write_file_atomic(path, text, strlen(text), &err), DZ_OK);
}

static void peft_folder(void **state) {
    (void)state;
    dz_model *m = load_base(), *back = NULL;
    const dz_config *c = dz_model_config(m);
    dz_model *a = make_prefix(m, N, 9);
    char dir[400], path[500];
    dz_error err = {0};
    snprintf(dir, sizeof dir, "%s/prefix", g_dir);
    assert_int_equal(dz_model_save_hf(a, dir, &err), DZ_OK);
    check_layout(a, dir);
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_OK);
    assert_int_equal(dz_model_lora(back)->prefix_tokens, N);
    const dz_param_table *t = dz_model_params(a);
    for (int i = 0; i < t->count; i++)
        assert_memory_equal(dz_model_tensor(a, i), dz_model_tensor(back, i), sizeof(float) * (size_t)dz_param_numel(&t->params[i]));
    float *x = logits_of(m, a, TOKENS, T, T), *y = logits_of(m, back, TOKENS, T, T);
    assert_memory_equal(x, y, sizeof(float) * T * c->vocab_size);
    free(x), free(y);
    dz_model_free(back);
    /* prefix_projection true: PEFT saves the MLP's output, the keys and values, read as they are */
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    write_text(path, "{\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 3, \"num_layers\": 5, \"token_dim\": 32, "
               "\"prefix_projection\": true, \"encoder_hidden_size\": 16}");
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_OK);
    for (int i = 0; i < t->count; i++)
        assert_memory_equal(dz_model_tensor(a, i), dz_model_tensor(back, i), sizeof(float) * (size_t)dz_param_numel(&t->params[i]));
    dz_model_free(back);
    back = NULL;
    /* refusals, by name */
    write_text(path, "{\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 3, \"num_layers\": 5, \"token_dim\": 64}");
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "token_dim"));
    write_text(path, "{\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 4, \"num_layers\": 5, \"token_dim\": 32}");
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_ERR_FORMAT); /* the tensor is [3, ...] */
    assert_non_null(strstr(err.msg, "prompt_embeddings"));
    write_text(path, "{\"peft_type\": \"PREFIX_TUNING\", \"num_virtual_tokens\": 0, \"num_layers\": 5, \"token_dim\": 32}");
    assert_int_equal(dz_lora_load(dir, c, &back, &err), DZ_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "num_virtual_tokens"));
    assert_null(back);
    dz_model_free(a), dz_model_free(m);
}

static void refusals(void **state) {
    (void)state;
    dz_model *m = load_base();
    dz_param_table t;
    dz_error err = {0};
    assert_int_equal(dz_prefix_table_build(dz_model_config(m), 0, &t, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--prefix-tokens 0"));
    dz_model *a = make_prefix(m, 2, 1), *owned = NULL;
    dz_config c = *dz_model_config(m);
    assert_int_equal(dz_model_init_random(&c, DZ_F32, 1, 0.02f, &owned, &err), DZ_OK);
    assert_int_equal(dz_lora_merge(owned, a, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "prefix"));
    dz_model_free(a), dz_model_free(owned), dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fresh_prefix_equals_a_continuation), cmocka_unit_test(cached_step_is_the_whole_run),
        cmocka_unit_test(init_is_seeded),
        cmocka_unit_test(peft_folder), cmocka_unit_test(refusals),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown));
}
