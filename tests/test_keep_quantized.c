/* A GGUF base kept quantized (DZ_LOAD_KEEP_QUANTIZED: the blocks stay in the file mapping
 * and the model's weight source dequantizes each layer, token row and head chunk as the
 * forward reads it) gives bitwise the logits of the same file dequantized at load:
 *  - tiny llama models written here with every weight matrix in one ggml type, for each
 *    type the loader reads (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, F16, BF16): random
 *    quants under small random scales (weights of a trained model's size), through the
 *    project's GGUF writer; f32, and bf16 for a K-quant; tied and untied heads;
 *  - the checked-in tiny llama (mixed quant types, rotary rows permuted) and qwen2 (biases);
 *  - the real SmolLM2-135M Q4_1 (assets): every logit of a prompt, and a second forward
 *    continuing the first on a KV cache (generation's way);
 *  - two streams through one forward: a source the same for every stream, whose blocks
 *    and head chunks the forward fetches once, gives what a per-stream source gives.
 * And a model kept quantized is read-only: its held tensors have no data, making it owned
 * (full-parameter training) is refused naming the file, and a non-finite scale is refused
 * at load as the dequantize-at-load path refuses it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "distzo/dtype.h"
#include "distzo/model.h"
#include "format/ggml_quant.h"
#include "format/gguf_write.h"
#include "temp_dir.h"
#include "assets.h"

enum { DIM = 256, HIDDEN = 512, LAYERS = 2, HEADS = 4, KV_HEADS = 2, VOCAB = 300, SEQ = 8 };

static uint64_t g_rng = 0x9e3779b97f4a7c15u;
static uint64_t next_u64(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1du;
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(next_u64() >> 40) / (float)(1 << 24); }

/* Where each block type keeps its fp16 scale (and min) fields, and a scale size that makes
 * weights of ~0.01..0.1: the quants times the sub-scales reach ~8 (Q4_0) to ~4000 (Q6_K). */
typedef struct block_kind {
    uint32_t type;
    int halves[2], n_halves;
    float scale;
} block_kind;
static const block_kind k_kinds[] = {
    {DZ_GGML_Q4_0, {0}, 1, 8e-3f},       {DZ_GGML_Q4_1, {0, 2}, 2, 4e-3f},   {DZ_GGML_Q5_0, {0}, 1, 4e-3f},
    {DZ_GGML_Q5_1, {0, 2}, 2, 2e-3f},    {DZ_GGML_Q8_0, {0}, 1, 5e-4f},      {DZ_GGML_Q2_K, {80, 82}, 2, 1.5e-3f},
    {DZ_GGML_Q3_K, {108}, 1, 5e-4f},     {DZ_GGML_Q4_K, {0, 2}, 2, 7e-5f},   {DZ_GGML_Q5_K, {0, 2}, 2, 4e-5f},
    {DZ_GGML_Q6_K, {208}, 1, 2e-5f},
};

static void put_half(unsigned char *p, float v) {
    const uint16_t h = dz_f32_to_f16(v);
    p[0] = (unsigned char)(h & 0xFF), p[1] = (unsigned char)(h >> 8);
}

/* One tensor of rows x cols in type: random blocks with their scale fields set (quants),
 * or random values (plain types; norms near 1). */
static void write_tensor(dz_gguf_writer *w, uint32_t type, int64_t rows, int64_t cols, int norm) {
    dz_error err = {0};
    const dz_ggml_type_info ti = dz_ggml_type_describe(type);
    const size_t nblocks = (size_t)(rows * cols / ti.block), bytes = nblocks * (size_t)ti.block_bytes;
    if (type == DZ_GGML_F32 || type == DZ_GGML_F16 || type == DZ_GGML_BF16) {
        float *v = malloc(sizeof(float) * (size_t)(rows * cols));
        for (int64_t i = 0; i < rows * cols; i++) v[i] = norm ? uniform(0.8f, 1.2f) : uniform(-0.08f, 0.08f);
        if (dz_gguf_write_f32(w, v, (size_t)(rows * cols), &err) != DZ_OK) fail_msg("%s", err.msg);
        free(v);
        return;
    }
    const block_kind *k = NULL;
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++)
        if (k_kinds[i].type == type) k = &k_kinds[i];
    assert_non_null(k);
    unsigned char *b = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)next_u64();
    for (size_t i = 0; i < nblocks; i++)
        for (int h = 0; h < k->n_halves; h++)
            put_half(b + i * (size_t)ti.block_bytes + k->halves[h],
                     uniform(0.5f, 1.0f) * k->scale * (next_u64() & 1 ? 1.0f : -1.0f));
    if (dz_gguf_write_blocks(w, b, nblocks, &err) != DZ_OK) fail_msg("%s", err.msg);
    free(b);
}

typedef struct tensor_spec {
    char name[64];
    int64_t rows, cols;
    int norm;
} tensor_spec;

static int tiny_tensors(tensor_spec *t, int untied) {
    int n = 0;
    const int kvd = DIM / HEADS * KV_HEADS;
    t[n++] = (tensor_spec){"token_embd.weight", VOCAB, DIM, 0};
    for (int l = 0; l < LAYERS; l++) {
        const struct { const char *s; int64_t rows, cols; int norm; } per[] = {
            {"attn_norm.weight", 1, DIM, 1}, {"attn_q.weight", DIM, DIM, 0},   {"attn_k.weight", kvd, DIM, 0},
            {"attn_v.weight", kvd, DIM, 0},  {"attn_output.weight", DIM, DIM, 0}, {"ffn_norm.weight", 1, DIM, 1},
            {"ffn_gate.weight", HIDDEN, DIM, 0}, {"ffn_up.weight", HIDDEN, DIM, 0}, {"ffn_down.weight", DIM, HIDDEN, 0},
        };
        for (size_t i = 0; i < sizeof per / sizeof per[0]; i++) {
            snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s", l, per[i].s);
            t[n].rows = per[i].rows, t[n].cols = per[i].cols, t[n++].norm = per[i].norm;
        }
    }
    t[n++] = (tensor_spec){"output_norm.weight", 1, DIM, 1};
    if (untied) t[n++] = (tensor_spec){"output.weight", VOCAB, DIM, 0};
    return n;
}

/* A tiny llama GGUF at path whose matrices (and embedding) are all of type; norms F32. */
static void write_tiny(const char *path, uint32_t type, int untied) {
    dz_gguf_writer *w;
    dz_error err = {0};
    if (dz_gguf_writer_create(path, 0, &w, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_gguf_put_string(w, "general.architecture", "llama");
    dz_gguf_put_u32(w, "llama.block_count", LAYERS);
    dz_gguf_put_u32(w, "llama.embedding_length", DIM);
    dz_gguf_put_u32(w, "llama.feed_forward_length", HIDDEN);
    dz_gguf_put_u32(w, "llama.attention.head_count", HEADS);
    dz_gguf_put_u32(w, "llama.attention.head_count_kv", KV_HEADS);
    dz_gguf_put_u32(w, "llama.context_length", 64);
    dz_gguf_put_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tensor_spec t[64];
    const int n = tiny_tensors(t, untied);
    for (int i = 0; i < n; i++) {
        const int64_t ne[2] = {t[i].cols, t[i].rows};
        dz_gguf_add_tensor(w, t[i].name, t[i].norm ? DZ_GGML_F32 : type, t[i].rows == 1 ? 1 : 2, ne);
    }
    if (dz_gguf_writer_begin(w, &err) != DZ_OK) fail_msg("%s", err.msg);
    for (int i = 0; i < n; i++) write_tensor(w, t[i].norm ? DZ_GGML_F32 : type, t[i].rows, t[i].cols, t[i].norm);
    if (dz_gguf_writer_finish(w, &err) != DZ_OK) fail_msg("%s", err.msg);
    dz_gguf_writer_free(w);
}

static dz_model *load(const char *path, dz_dtype dt, unsigned flags) {
    dz_model *m;
    dz_error err = {0};
    if (dz_model_load_flags(path, dt, flags, &m, &err) != DZ_OK) fail_msg("%s", err.msg);
    return m;
}

/* Logits of every real position of a 2-sequence batch (lengths n and n - 3), then, on a KV
 * cache, of one more token per sequence at position n (generation's step); *count: the
 * floats written. */
static float *run_logits(dz_model *m, const int *tokens, int n, size_t *count) {
    const int vocab = dz_model_config(m)->vocab_size, lengths[2] = {n, n - 3}, next[2] = {1, 2}, next_rows[2] = {0, 1};
    int rows[2 * 64], nrows = 0;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < lengths[b]; t++) rows[nrows++] = b * n + t;
    float *out = malloc(sizeof(float) * (size_t)(nrows + 2) * vocab);
    dz_forward *f;
    dz_error err = {0};
    const dz_weight_source w = dz_model_weights(m);
    if (dz_forward_create(m, 2, n + 1, 1, &f, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (dz_forward_run(f, &w, tokens, lengths, 2, n, 0, &err) != DZ_OK ||
        dz_forward_logits(f, &w, rows, nrows, out, &err) != DZ_OK || /* all real now: the cache is whole */
        dz_forward_run(f, &w, tokens, NULL, 2, n, 0, &err) != DZ_OK ||
        dz_forward_run(f, &w, next, NULL, 2, 1, n, &err) != DZ_OK ||
        dz_forward_logits(f, &w, next_rows, 2, out + (size_t)nrows * vocab, &err) != DZ_OK)
        fail_msg("%s", err.msg);
    dz_forward_free(f);
    *count = (size_t)(nrows + 2) * vocab;
    return out;
}

/* The file's logits with the base kept quantized = dequantized at load, bit for bit. */
static void same_bits(const char *path, dz_dtype dt, const char *what) {
    dz_model *a = load(path, dt, 0), *b = load(path, dt, DZ_LOAD_KEEP_QUANTIZED);
    assert_true(dz_model_bytes_quantized(b) > 0);
    assert_int_equal(dz_model_bytes_quantized(a), 0);
    const int vocab = dz_model_config(a)->vocab_size;
    int tokens[2 * SEQ];
    for (int i = 0; i < 2 * SEQ; i++) tokens[i] = (int)(next_u64() % (uint64_t)vocab);
    size_t na, nb;
    float *la = run_logits(a, tokens, SEQ, &na), *lb = run_logits(b, tokens, SEQ, &nb);
    assert_int_equal(na, nb);
    size_t differ = 0, finite = 0;
    for (size_t i = 0; i < na; i++) {
        differ += memcmp(&la[i], &lb[i], 4) != 0;
        finite += la[i] == la[i] && la[i] - la[i] == 0.0f;
    }
    printf("  %-28s %zu logits, %zu differ\n", what, na, differ);
    assert_int_equal(differ, 0);
    assert_int_equal(finite, na); /* a sane model: the comparison is of real numbers */
    free(la);
    free(lb);
    dz_model_free(a);
    dz_model_free(b);
}

static void every_type_same_bits(void **s) {
    (void)s;
    const uint32_t types[] = {DZ_GGML_Q4_0, DZ_GGML_Q4_1, DZ_GGML_Q5_0, DZ_GGML_Q5_1, DZ_GGML_Q8_0, DZ_GGML_Q2_K,
                              DZ_GGML_Q3_K, DZ_GGML_Q4_K, DZ_GGML_Q5_K, DZ_GGML_Q6_K, DZ_GGML_F16, DZ_GGML_BF16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const dz_ggml_type_info ti = dz_ggml_type_describe(types[i]);
        assert_true(ti.dequantizable);
        char path[512], what[64];
        snprintf(path, sizeof path, "%s/tiny_%s.gguf", g_dir, ti.name);
        write_tiny(path, types[i], (int)(i % 2));
        snprintf(what, sizeof what, "%s (%s head), f32", ti.name, i % 2 ? "untied" : "tied");
        same_bits(path, DZ_F32, what);
        if (types[i] == DZ_GGML_Q4_K || types[i] == DZ_GGML_Q8_0) {
            snprintf(what, sizeof what, "%s, bf16 weights", ti.name);
            same_bits(path, DZ_BF16, what);
        }
    }
}

static void checked_in_models_same_bits(void **s) {
    (void)s;
    same_bits(DZ_TEST_DATA "/gguf/tiny_llama.gguf", DZ_F32, "tiny_llama.gguf (mixed)");
    same_bits(DZ_TEST_DATA "/gguf/tiny_qwen2.gguf", DZ_F32, "tiny_qwen2.gguf (biases)");
}

static void smollm2_same_bits(void **s) {
    (void)s;
    char path[1024];
    test_asset_path(path, sizeof path, "smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    same_bits(path, DZ_F32, "SmolLM2-135M Q4_1");
}

/* Two streams of different tokens: the model's own source (blocks and head chunks fetched
 * once for both) = the same source marked per stream (fetched for each). */
static void streams_share_fetches(void **s) {
    (void)s;
    dz_model *m = load(DZ_TEST_DATA "/gguf/tiny_llama.gguf", DZ_F32, DZ_LOAD_KEEP_QUANTIZED);
    const dz_weight_source once = dz_model_weights(m);
    dz_weight_source each = once;
    each.same_for_streams = 0;
    assert_int_equal(once.same_for_streams, 1);
    const int vocab = dz_model_config(m)->vocab_size;
    float lp[2][2][SEQ];
    int tokens[2][SEQ], rows[SEQ], targets[SEQ];
    for (int i = 0; i < SEQ; i++) {
        tokens[0][i] = (int)(next_u64() % (uint64_t)vocab), tokens[1][i] = (int)(next_u64() % (uint64_t)vocab);
        rows[i] = i, targets[i] = (int)(next_u64() % (uint64_t)vocab);
    }
    for (int k = 0; k < 2; k++) {
        const dz_weight_source *w = k ? &each : &once;
        dz_forward *f;
        dz_error err = {0};
        static const int streams[2] = {0, 1};
        if (dz_forward_create_streams(m, 1, SEQ, 0, 2, &f, &err) != DZ_OK) fail_msg("%s", err.msg);
        const dz_head_rows sets[2] = {{.stream = 0, .rows = rows, .targets = targets, .nrows = SEQ, .logprobs = lp[k][0]},
                                      {.stream = 1, .rows = rows, .targets = targets, .nrows = SEQ, .logprobs = lp[k][1]}};
        if (dz_forward_embed(f, 0, w, tokens[0], NULL, 1, SEQ, 0, &err) != DZ_OK ||
            dz_forward_embed(f, 1, w, tokens[1], NULL, 1, SEQ, 0, &err) != DZ_OK ||
            dz_forward_layers(f, w, 2, streams, &err) != DZ_OK || dz_forward_logprobs_sets(f, w, 2, sets, &err) != DZ_OK)
            fail_msg("%s", err.msg);
        dz_forward_free(f);
    }
    assert_memory_equal(lp[0], lp[1], sizeof lp[0]);
    assert_true(memcmp(lp[0][0], lp[0][1], sizeof lp[0][0]) != 0); /* the streams did differ */
    dz_model_free(m);
}

static void read_only(void **s) {
    (void)s;
    dz_model *m = load(DZ_TEST_DATA "/gguf/tiny_llama.gguf", DZ_F32, DZ_LOAD_KEEP_QUANTIZED);
    const dz_param_table *t = dz_model_params(m);
    int held = 0;
    size_t stored = 0;
    for (int i = 0; i < t->count; i++) {
        const int q = dz_model_tensor_quantized(m, i);
        held += q;
        assert_true(q ? dz_model_tensor(m, i) == NULL : dz_model_tensor(m, i) != NULL);
        if (t->params[i].rows == 1) assert_false(q); /* the F32 norms are read as stored */
        size_t nbytes;
        const void *bytes = dz_model_tensor_stored(m, i, &nbytes);
        assert_non_null(bytes);
        if (q) stored += nbytes;
        else assert_int_equal(nbytes, (size_t)(t->params[i].rows * t->params[i].cols) * 4);
    }
    assert_int_equal(stored, dz_model_bytes_quantized(m));
    /* the bytes held are the file's own blocks */
    dz_gguf g;
    dz_error err = {0};
    if (dz_gguf_open(DZ_TEST_DATA "/gguf/tiny_llama.gguf", &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    const dz_gguf_tensor *emb = dz_gguf_find_tensor(&g, "token_embd.weight");
    size_t nbytes;
    const void *held_emb = dz_model_tensor_stored(m, dz_param_find(t, dz_model_config(m)->n_layers, DZ_G_TOK_EMB), &nbytes);
    assert_int_equal(nbytes, emb->nbytes);
    assert_memory_equal(held_emb, emb->data, nbytes);
    dz_gguf_close(&g);
    assert_true(held > 0);
    assert_int_equal(dz_model_make_owned(m, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tiny_llama.gguf: the model is held quantized (--keep-quantized)"));
    assert_int_equal(dz_model_keep_for_store(m, 1, DZ_F32, &err), DZ_ERR_UNSUPPORTED);
    dz_model_free(m);
    /* other formats hold nothing quantized: the flag changes nothing */
    m = load(DZ_TEST_DATA "/hf/llama_tied_mha", DZ_F32, DZ_LOAD_KEEP_QUANTIZED);
    assert_int_equal(dz_model_bytes_quantized(m), 0);
    assert_int_equal(dz_model_make_owned(m, &err), DZ_OK);
    dz_model_free(m);
}

/* An Inf scale in one block of blk.1.ffn_up: both loads refuse it with the same words. */
static void non_finite_refused_alike(void **s) {
    (void)s;
    char path[512];
    snprintf(path, sizeof path, "%s/inf.gguf", g_dir);
    write_tiny(path, DZ_GGML_Q8_0, 0);
    dz_gguf g;
    dz_error err = {0};
    if (dz_gguf_open(path, &g, &err) != DZ_OK) fail_msg("%s", err.msg);
    const dz_gguf_tensor *t = dz_gguf_find_tensor(&g, "blk.1.ffn_up.weight");
    const size_t at = (size_t)((const char *)t->data - (const char *)g.map) + 3 * t->row_bytes + 34 * 2;
    dz_gguf_close(&g);
    FILE *f = fopen(path, "r+b");
    const unsigned char inf[2] = {0x00, 0x7c}; /* fp16 +Inf: the scale of row 3's third block */
    assert_int_equal(fseek(f, (long)at, SEEK_SET), 0);
    assert_int_equal(fwrite(inf, 1, 2, f), 2);
    fclose(f);
    char msg[2][1024];
    for (int k = 0; k < 2; k++) {
        dz_model *m = NULL;
        dz_error e = {0};
        assert_int_equal(dz_model_load_flags(path, DZ_F32, k ? DZ_LOAD_KEEP_QUANTIZED : 0, &m, &e), DZ_ERR_FORMAT);
        snprintf(msg[k], sizeof msg[k], "%s", e.msg);
    }
    assert_string_equal(msg[0], msg[1]);
    assert_non_null(strstr(msg[1], "non-finite value at element"));
    assert_non_null(strstr(msg[1], "(row 3)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_same_bits),   cmocka_unit_test(checked_in_models_same_bits),
        cmocka_unit_test(smollm2_same_bits),      cmocka_unit_test(streams_share_fetches),
        cmocka_unit_test(read_only),              cmocka_unit_test(non_finite_refused_alike),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown));
}
