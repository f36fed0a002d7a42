/* The forward's row chunks: the feed-forward runs FFN_ROW_CHUNK rows at a time and the head
 * HEAD_ROW_CHUNK rows at a time, so their buffers hold a chunk, not the batch.
 * - A batch of more rows than either chunk gives, row for row, the bits of each sequence run
 *   alone (one chunk): log-probs and logits, LLaMA (with a LoRA adapter on every target,
 *   its products chunked too) and OPT.
 * - The buffers grow with the batch by exactly the per-row floats counted here by hand (the
 *   residual streams, their key/value slots and head state, the attention's buffers): the
 *   feed-forward's, the head's and the embedding's do not grow; a LoRA adapter's products
 *   are as wide as the widest output it targets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distzo/distzo.h"

enum { B = 12, T = 96, V = 5000 }; /* rows: 12 sequences of 63..96 tokens, about 950 */

static dz_config tiny(const char *preset) {
    dz_config c;
    dz_error err = {0};
    assert_int_equal(dz_config_preset(preset, &c, &err), DZ_OK);
    c.n_layers = 2;
    c.vocab_size = V; /* two vocabulary chunks of the head, logits of every row affordable */
    return c;
}

static dz_model *random_model(const dz_config *c, uint64_t seed) {
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_model_init_random(c, DZ_F32, seed, 0.05f, &m, &err), DZ_OK);
    return m;
}

/* A LoRA adapter (r 8, alpha 16) on targets, PEFT's init from seed 3. */
static dz_model *lora(const dz_config *c, const char *targets) {
    dz_lora_spec spec = {.rank = 8, .alpha = 16.0f};
    dz_error err = {0};
    assert_int_equal(dz_lora_parse_targets(targets, &spec.targets, &err), DZ_OK);
    dz_model *a = NULL;
    assert_int_equal(dz_lora_create(c, &spec, 3, "random", &a, &err), DZ_OK);
    return a;
}

static int len_of(int b) { return T - 3 * b; }

/* The head rows of sequence b (padded index b * T + t, t < len - 1), their next tokens as
 * targets, appended at rows[*n] / targets[*n]. */
static void rows_of(const int *tokens, int b, int base, int *rows, int *targets, int *n) {
    for (int t = 0; t < len_of(b) - 1; t++) {
        rows[*n] = base + t;
        targets[(*n)++] = tokens[b * T + t + 1];
    }
}

/* Log-probs and logits of every head row of the batch (one forward of B sequences), then
 * of each sequence alone: the same bits. */
static void batch_equals_alone(const dz_model *m, const dz_model *adapter) {
    dz_error err = {0};
    static int tokens[B * T], lengths[B], rows[B * T], targets[B * T];
    uint64_t s = 7;
    for (int i = 0; i < B * T; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = 3 + (int)((s >> 33) % (V - 3));
    }
    int n = 0;
    for (int b = 0; b < B; b++) {
        lengths[b] = len_of(b);
        rows_of(tokens, b, b * T, rows, targets, &n);
    }
    assert_true(n > 2 * 480 - 100 && n > 512); /* more than one chunk of each */
    float *lp = malloc(sizeof(float) * n), *logits = malloc(sizeof(float) * (size_t)n * V);
    float *lp1 = malloc(sizeof(float) * T), *logits1 = malloc(sizeof(float) * (size_t)T * V);
    assert_non_null(lp), assert_non_null(logits), assert_non_null(lp1), assert_non_null(logits1);
    const dz_weight_source w = dz_model_weights(m);
    dz_forward *f = NULL, *f1 = NULL;
    assert_int_equal(dz_forward_create(m, B, T, 0, &f, &err), DZ_OK);
    assert_int_equal(dz_forward_create(m, 1, T, 0, &f1, &err), DZ_OK);
    if (adapter) {
        assert_int_equal(dz_forward_set_adapter(f, adapter, NULL, &err), DZ_OK);
        assert_int_equal(dz_forward_set_adapter(f1, adapter, NULL, &err), DZ_OK);
    }
    assert_int_equal(dz_forward_run(f, &w, tokens, lengths, B, T, 0, &err), DZ_OK);
    assert_int_equal(dz_forward_logprobs(f, &w, rows, targets, n, lp, &err), DZ_OK);
    assert_int_equal(dz_forward_logits(f, &w, rows, n, logits, &err), DZ_OK);
    for (int b = 0, at = 0; b < B; b++) {
        int n1 = 0;
        rows_of(tokens, b, 0, rows, targets, &n1);
        assert_int_equal(dz_forward_run(f1, &w, tokens + b * T, lengths + b, 1, T, 0, &err), DZ_OK);
        assert_int_equal(dz_forward_logprobs(f1, &w, rows, targets, n1, lp1, &err), DZ_OK);
        assert_int_equal(dz_forward_logits(f1, &w, rows, n1, logits1, &err), DZ_OK);
        if (memcmp(lp + at, lp1, sizeof(float) * n1)) fail_msg("sequence %d: batch log-probs differ from alone", b);
        if (memcmp(logits + (size_t)at * V, logits1, sizeof(float) * (size_t)n1 * V))
            fail_msg("sequence %d: batch logits differ from alone", b);
        at += n1;
    }
    dz_forward_free(f);
    dz_forward_free(f1);
    free(lp), free(logits), free(lp1), free(logits1);
}

static void llama_batch_equals_each_sequence_alone(void **state) {
    (void)state;
    dz_config c = tiny("llama-tiny");
    dz_model *m = random_model(&c, 1), *a = lora(&c, "q,k,v,o,up,gate,down");
    batch_equals_alone(m, NULL);
    const dz_param_table *t = dz_model_params(a);
    for (int i = 0; i < t->count; i++) /* B nonzero (PEFT starts it at 0): the products count */
        for (int64_t e = 0; e < dz_param_numel(&t->params[i]); e++)
            if (((float *)dz_model_tensor(a, i))[e] == 0.0f) ((float *)dz_model_tensor(a, i))[e] = 0.01f * (float)(e % 7 - 3);
    batch_equals_alone(m, a);
    dz_model_free(a);
    dz_model_free(m);
}

static void opt_batch_equals_each_sequence_alone(void **state) {
    (void)state;
    dz_config c = tiny("opt-tiny");
    dz_model *m = random_model(&c, 2);
    batch_equals_alone(m, NULL);
    dz_model_free(m);
}

/* Floats per row of a forward with n_streams streams: each stream's residual x, its
 * key/value slots (one layer's) and head state (max, sum, target); the shared xb, q, k, v
 * and attention output. Nothing of the feed-forward, the head's rows or the embedding. */
static size_t per_row_floats(const dz_config *c, int n_streams) {
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t d = (size_t)c->dim;
    return (size_t)n_streams * (d + 2 * kvd + 3) + d + qd + 2 * kvd + (qd > d ? qd : d);
}

static void buffers_grow_by_the_rows_alone(void **state) {
    (void)state;
    const char *names[] = {"llama-tiny", "opt-tiny"};
    for (int k = 0; k < 2; k++) {
        const dz_config c = tiny(names[k]);
        for (int ns = 1; ns <= 4; ns++) { /* 1024 and 2048 rows: past every chunk */
            const size_t small = dz_forward_bytes_for(&c, 32, 32, 0, ns, 1, NULL);
            const size_t large = dz_forward_bytes_for(&c, 64, 32, 0, ns, 1, NULL);
            assert_int_equal(large - small, (size_t)32 * 32 * per_row_floats(&c, ns) * sizeof(float));
        }
    }
}

/* A LoRA adapter on q and v: x A^T [rows, r], its products [rows, q's width] (the wider of
 * q and v; not the feed-forward's), one layer's A and B. */
static void lora_buffers_fit_the_targets(void **state) {
    (void)state;
    dz_config c = tiny("llama-tiny");
    dz_model *m = random_model(&c, 1), *a = lora(&c, "q,v");
    dz_error err = {0};
    dz_forward *f = NULL;
    assert_int_equal(dz_forward_create(m, 4, 16, 0, &f, &err), DZ_OK);
    const size_t before = dz_forward_bytes(f), rows = 4 * 16, r = 8;
    const size_t qd = (size_t)c.n_heads * c.head_dim, kvd = (size_t)c.n_kv_heads * c.head_dim;
    const size_t layer = r * c.dim + qd * r + r * c.dim + kvd * r; /* A_q, B_q, A_v, B_v */
    assert_int_equal(dz_forward_set_adapter(f, a, NULL, &err), DZ_OK);
    assert_int_equal(dz_forward_bytes(f) - before, (rows * r + rows * qd + layer) * sizeof(float));
    dz_forward_free(f);
    dz_model_free(a);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_batch_equals_each_sequence_alone),
        cmocka_unit_test(opt_batch_equals_each_sequence_alone),
        cmocka_unit_test(buffers_grow_by_the_rows_alone),
        cmocka_unit_test(lora_buffers_fit_the_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
