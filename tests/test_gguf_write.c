/* The GGUF writer and `distzo export --format gguf`:
 *  - the writer reproduces, byte for byte, a file gguf-py (llama.cpp's Python writer) wrote
 *    with one key/value of each kind and tensors in F32, F16, BF16 and Q8_0 quantized by
 *    gguf-py (tools/make_gguf_write_golden.py: Q8_0's roundf ties, zero and subnormal
 *    scales, fp16 ties and overflow);
 *  - its errors name the file and the key or tensor, and leave no file behind;
 *  - files written by llama.cpp's converter layout (tests/data/gguf/tiny_*.gguf, Q/K rows
 *    permuted) exported again give their tensors back byte for byte (the permutation is
 *    inverted exactly, Q8_0 re-quantizes to the same bytes);
 *  - stories260K (llama2.c) and SmolLM2-135M (Q4_1 GGUF) exported as GGUF load back as the
 *    same config, the same tokenizer ids and the same weights: F32 bitwise, F16 / BF16 the
 *    fp32 weights rounded, Q8_0 the weights quantized as the golden above checks.
 * The asset cases need $DISTZO_ASSETS. */
#define _GNU_SOURCE
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

#include "distzo/distzo.h"
#include "format/ggml_quant.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "model/save_gguf.h"
#include "temp_dir.h"
#include "assets.h"

static void *read_all(const char *path, size_t *n) {
    char *p = NULL;
    dz_error err = {0};
    if (dz_read_file(path, &p, n, &err) != DZ_OK) fail_msg("%s", err.msg);
    return p;
}

static void check(dz_status st, const dz_error *err) {
    if (st != DZ_OK) fail_msg("%s", err->msg);
}

/* ---- the writer against gguf-py -------------------------------------------------- */

static void writes_what_gguf_py_writes(void **state) {
    (void)state;
    size_t n_in, n_gold;
    float *x = read_all(DZ_TEST_DATA "/gguf/written_input.f32", &n_in);
    unsigned char *gold = read_all(DZ_TEST_DATA "/gguf/written.gguf", &n_gold);
    assert_int_equal(n_in, 4 * 96 * sizeof(float));
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/written.gguf", g_dir);
    dz_gguf_writer *w;
    dz_error err = {0};
    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_put_string(w, "general.architecture", "llama");
    dz_gguf_put_u32(w, "test.u32", 4000000000u);
    dz_gguf_put_i32(w, "test.i32", -7);
    dz_gguf_put_f32(w, "test.f32", 0.1f);
    dz_gguf_put_bool(w, "test.bool", 1);
    dz_gguf_put_string(w, "test.string", "h\xC3\xA9llo");
    const char *strs[] = {"a", "", "\xE2\x96\x81the", "<0x0A>"};
    dz_gguf_put_strings(w, "test.strings", strs, NULL, 4);
    const float fs[] = {1.5f, -2.25f};
    dz_gguf_put_f32s(w, "test.f32s", fs, 2);
    const int32_t is[] = {3, -4, 5};
    dz_gguf_put_i32s(w, "test.i32s", is, 3);
    const uint32_t types[] = {DZ_GGML_F32, DZ_GGML_F16, DZ_GGML_BF16, DZ_GGML_Q8_0};
    const int64_t ne[2] = {96, 4};
    for (int k = 0; k < 4; k++) dz_gguf_add_tensor(w, dz_ggml_type_describe(types[k]).name, types[k], 2, ne);
    check(dz_gguf_writer_begin(w, &err), &err);
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < 4; r++) /* row by row: a tensor may come in pieces */
            check(dz_gguf_write_f32(w, x + r * 96, 96, &err), &err);
    check(dz_gguf_writer_finish(w, &err), &err);
    dz_gguf_writer_free(w);
    size_t n_out;
    unsigned char *out = read_all(path, &n_out);
    assert_int_equal(n_out, n_gold);
    for (size_t i = 0; i < n_out; i++)
        if (out[i] != gold[i]) fail_msg("byte %zu differs from gguf-py's file: %u != %u", i, out[i], gold[i]);
    free(out);
    free(gold);
    free(x);
    dz_temp_dir_remove();
}

/* A file with alignment 64 parses back with distzo's reader: keys, shapes, data. */
static void aligned_file_reads_back(void **state) {
    (void)state;
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/a64.gguf", g_dir);
    dz_gguf_writer *w;
    dz_error err = {0};
    check(dz_gguf_writer_create(path, 64, &w, &err), &err);
    dz_gguf_put_u32(w, "x.n", 5);
    float v[3 * 32];
    for (int i = 0; i < 96; i++) v[i] = (float)i * 0.25f - 7.0f;
    const int64_t ne1[1] = {3}, ne2[2] = {32, 3};
    dz_gguf_add_tensor(w, "vec", DZ_GGML_F32, 1, ne1);
    dz_gguf_add_tensor(w, "mat", DZ_GGML_BF16, 2, ne2);
    check(dz_gguf_writer_begin(w, &err), &err);
    check(dz_gguf_write_f32(w, v, 3, &err), &err);
    check(dz_gguf_write_f32(w, v, 96, &err), &err);
    check(dz_gguf_writer_finish(w, &err), &err);
    dz_gguf_writer_free(w);
    dz_gguf g;
    check(dz_gguf_open(path, &g, &err), &err);
    assert_int_equal(g.alignment, 64);
    uint32_t n = 0;
    check(dz_gguf_get_u32(&g, "x.n", &n, &err), &err);
    assert_int_equal(n, 5);
    const dz_gguf_tensor *a = dz_gguf_find_tensor(&g, "vec"), *b = dz_gguf_find_tensor(&g, "mat");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(((uintptr_t)b->data - (uintptr_t)g.map) % 64, 0);
    assert_memory_equal(a->data, v, 3 * sizeof(float));
    float back[96];
    dz_ggml_dequantize(b->type, b->data, back, 96);
    for (int i = 0; i < 96; i++) assert_true(back[i] == v[i]); /* multiples of 1/4: exact in bf16 */
    dz_gguf_close(&g);
    dz_temp_dir_remove();
}

static void expect_error(dz_status st, const dz_error *err, const char *want) {
    if (st == DZ_OK || !strstr(err->msg, want)) fail_msg("expected an error with \"%s\", got %d: %s", want, st, err->msg);
}

static void writer_errors_name_the_key_or_tensor(void **state) {
    (void)state;
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", g_dir);
    dz_gguf_writer *w;
    dz_error err = {0};
    const int64_t ne[2] = {33, 2};
    float v[66] = {0};

    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_put_u32(w, "k", 1);
    dz_gguf_put_u32(w, "k", 2);
    expect_error(dz_gguf_writer_begin(w, &err), &err, "duplicate metadata key 'k'");
    dz_gguf_writer_free(w);

    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_add_tensor(w, "q", DZ_GGML_Q8_0, 2, ne);
    expect_error(dz_gguf_writer_begin(w, &err), &err, "tensor 'q'");
    dz_gguf_writer_free(w);

    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_add_tensor(w, "t", 16 /* IQ2_XXS: layout unknown here */, 2, ne);
    expect_error(dz_gguf_writer_begin(w, &err), &err, "cannot write this ggml type for tensor 't'");
    dz_gguf_writer_free(w);

    /* Q4_0 is declared, but its data only comes as encoded blocks, whole ones that fit */
    const int64_t ne4[2] = {32, 2};
    const unsigned char blocks[3 * 18] = {0};
    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_add_tensor(w, "t", DZ_GGML_Q4_0, 2, ne4);
    check(dz_gguf_writer_begin(w, &err), &err);
    expect_error(dz_gguf_write_f32(w, v, 32, &err), &err, "tensor 't': distzo cannot convert fp32 into Q4_0");
    expect_error(dz_gguf_write_blocks(w, blocks, 3, &err), &err, "tensor 't': 3 blocks do not fit the 2 left");
    check(dz_gguf_write_blocks(w, blocks, 2, &err), &err);
    check(dz_gguf_writer_finish(w, &err), &err);
    dz_gguf_writer_free(w);
    assert_int_equal(unlink(path), 0);

    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_add_tensor(w, "f", DZ_GGML_F32, 2, ne);
    check(dz_gguf_writer_begin(w, &err), &err);
    check(dz_gguf_write_f32(w, v, 33, &err), &err);
    expect_error(dz_gguf_write_f32(w, v, 66, &err), &err, "tensor 'f'");
    dz_gguf_writer_free(w); /* unfinished: the temp file goes, nothing appears */
    assert_false(access(path, F_OK) == 0);

    check(dz_gguf_writer_create(path, 0, &w, &err), &err);
    dz_gguf_add_tensor(w, "f", DZ_GGML_F32, 2, ne);
    check(dz_gguf_writer_begin(w, &err), &err);
    check(dz_gguf_write_f32(w, v, 33, &err), &err);
    expect_error(dz_gguf_writer_finish(w, &err), &err, "not all data written for tensor 'f'");
    dz_gguf_writer_free(w);
    assert_false(access(path, F_OK) == 0);

    expect_error(dz_gguf_writer_create(path, 48, &w, &err), &err, "alignment 48");
    dz_temp_dir_remove();
}

/* ---- export of whole models ------------------------------------------------------ */

static void export_gguf(const char *model, const char *out, const char *type) {
    const dz_export_spec spec = {.model = model, .out = out, .format = DZ_EXPORT_GGUF, .gguf_type = type};
    dz_error err = {0};
    check(dz_export_model(&spec, &err), &err);
}

/* Every tensor of a that b has in the same type holds the same bytes; returns how many. */
static int same_tensors(const char *pa, const char *pb, int want_all) {
    dz_gguf a, b;
    dz_error err = {0};
    check(dz_gguf_open(pa, &a, &err), &err);
    check(dz_gguf_open(pb, &b, &err), &err);
    int same = 0;
    for (int i = 0; i < a.n_tensors; i++) {
        const dz_gguf_tensor *t = &a.tensors[i], *u = dz_gguf_find_tensor(&b, t->name);
        if (!u) fail_msg("%s: tensor %s missing from the export %s", pa, t->name, pb);
        assert_int_equal(t->ndim, u->ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(t->ne[d], u->ne[d]);
        if (t->type != u->type) {
            if (want_all) fail_msg("%s: type %u, exported as %u", t->name, t->type, u->type);
            continue;
        }
        if (memcmp(t->data, u->data, t->nbytes) != 0) fail_msg("%s: the exported bytes differ", t->name);
        same++;
    }
    assert_int_equal(a.n_tensors, b.n_tensors);
    dz_gguf_close(&a);
    dz_gguf_close(&b);
    return same;
}

static void converter_files_export_back_to_their_bytes(void **state) {
    (void)state;
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    char out[512];
    snprintf(out, sizeof out, "%s/tl.gguf", g_dir);
    /* llama: Q/K rows interleaved by the converter; its attn_q/attn_k/output are Q8_0 */
    export_gguf(DZ_TEST_DATA "/gguf/tiny_llama.gguf", out, "q8_0");
    int same = same_tensors(DZ_TEST_DATA "/gguf/tiny_llama.gguf", out, 0);
    assert_int_equal(same, 10); /* 2 layers x (attn_q, attn_k, 2 norms) + output + output_norm */
    snprintf(out, sizeof out, "%s/tq.gguf", g_dir);
    export_gguf(DZ_TEST_DATA "/gguf/tiny_qwen2.gguf", out, "f16"); /* qwen2: no permutation, biases */
    same_tensors(DZ_TEST_DATA "/gguf/tiny_qwen2.gguf", out, 1);
    dz_temp_dir_remove();
}

static int tensors_equal_as(const dz_model *ref, const dz_model *got, uint32_t type) {
    const dz_param_table *t = dz_model_params(ref);
    assert_int_equal(t->count, dz_model_params(got)->count);
    float *q = NULL;
    unsigned char *blocks = NULL;
    for (int id = 0; id < t->count; id++) {
        const dz_param *p = &t->params[id];
        const size_t n = (size_t)dz_param_numel(p);
        const float *a = dz_model_tensor(ref, id), *b = dz_model_tensor(got, id);
        /* norms stay f32; q8_0 rows that are not whole blocks fall back to f16 */
        const uint32_t ty = p->rows == 1 ? DZ_GGML_F32 : type == DZ_GGML_Q8_0 && p->cols % 32 ? DZ_GGML_F16 : type;
        q = realloc(q, n * sizeof *q);
        blocks = realloc(blocks, n * 4 + 64);
        dz_ggml_quantize(ty, a, blocks, n);
        dz_ggml_dequantize(ty, blocks, q, n);
        for (size_t i = 0; i < n; i++)
            if (memcmp(&q[i], &b[i], 4) != 0)
                fail_msg("%s element %zu: %.9g read back, %.9g expected (%s)", p->hf_name, i, b[i], q[i],
                         dz_ggml_type_describe(ty).name);
    }
    free(q);
    free(blocks);
    return 1;
}

static void configs_equal(const dz_config *a, const dz_config *b) {
    assert_int_equal(a->arch, b->arch);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->dim, b->dim);
    assert_int_equal(a->hidden_dim, b->hidden_dim);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->max_seq_len, b->max_seq_len);
    assert_int_equal(a->tied_head, b->tied_head);
    assert_int_equal(a->qkv_bias, b->qkv_bias);
    assert_true(a->norm_eps == b->norm_eps);
    assert_true(a->rope_theta == b->rope_theta);
}

static const char *const k_texts[] = {
    "Once upon a time, there was a little girl named Lily.",
    "  two  spaces\tand a tab\n\nnew lines",
    "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC 12345 3.14159",
    "<|im_start|>user\nHi!<|im_end|>",
    "",
};

static void tokenizers_agree(const char *ref_path, const char *gguf_path) {
    dz_tokenizer *a = NULL, *b = NULL;
    dz_error err = {0};
    check(dz_tokenizer_load(ref_path, 0, &a, &err), &err);
    check(dz_tokenizer_load(gguf_path, 0, &b, &err), &err);
    assert_int_equal(dz_tokenizer_bos(a), dz_tokenizer_bos(b));
    assert_int_equal(dz_tokenizer_eos(a), dz_tokenizer_eos(b));
    for (int k = 0; k < DZ_SPECIAL_COUNT; k++)
        if (dz_tokenizer_special(a, k) >= 0) assert_int_equal(dz_tokenizer_special(a, k), dz_tokenizer_special(b, k));
    for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++)
        for (unsigned flags = 0; flags < 4; flags++) {
            int ia[512], ib[512];
            const int na = dz_tokenizer_encode_flags(a, k_texts[i], flags, ia, 512, &err);
            const int nb = dz_tokenizer_encode_flags(b, k_texts[i], flags, ib, 512, &err);
            if (na != nb || memcmp(ia, ib, (size_t)(na < 512 ? na : 512) * sizeof *ia) != 0)
                fail_msg("\"%s\" (flags %u): %d ids from %s, %d from the export", k_texts[i], flags, na, ref_path, nb);
        }
    const int v = dz_tokenizer_vocab_size(a);
    for (int id = 0; id < v; id++) {
        char sa[256], sb[256];
        /* llama2.c's tokenizer.bin names bos/eos "\n<s>\n"; GGUF gives SentencePiece's "<s>" */
        if (dz_tokenizer_get_kind(a) == DZ_TOK_LLAMA2C && (id == dz_tokenizer_bos(a) || id == dz_tokenizer_eos(a))) continue;
        dz_tokenizer_decode(a, 5, id, sa, sizeof sa);
        dz_tokenizer_decode(b, 5, id, sb, sizeof sb);
        if (strcmp(sa, sb) != 0) fail_msg("id %d decodes to \"%s\", from the export \"%s\"", id, sa, sb);
    }
    dz_tokenizer_free(a);
    dz_tokenizer_free(b);
}

static void round_trip(const char *model, const char *tokenizer, const char *const *types, int n_types) {
    dz_model *ref = NULL;
    dz_error err = {0};
    check(dz_model_load(model, DZ_F32, &ref, &err), &err);
    for (int k = 0; k < n_types; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s/export_%s.gguf", g_dir, types[k]);
        export_gguf(model, out, types[k]);
        dz_model *got = NULL;
        check(dz_model_load(out, DZ_F32, &got, &err), &err);
        configs_equal(dz_model_config(ref), dz_model_config(got));
        tensors_equal_as(ref, got, (uint32_t)dz_gguf_file_type_parse(types[k]));
        if (k == 0) tokenizers_agree(tokenizer, out);
        dz_model_free(got);
        unlink(out);
    }
    dz_model_free(ref);
}

static void stories260k_round_trip(void **state) {
    (void)state;
    char model[512], tok[512];
    test_asset_path(model, sizeof model, "stories260K/stories260K.bin");
    test_asset_path(tok, sizeof tok, "stories260K/tok512.bin");
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    const char *const types[] = {"f32", "f16", "bf16", "q8_0"};
    round_trip(model, tok, types, 4);
    dz_temp_dir_remove();
}

static void smollm2_round_trip(void **state) {
    (void)state;
    char model[512];
    test_asset_path(model, sizeof model, "smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    const char *const types[] = {"f32", "q8_0"};
    round_trip(model, model, types, 2);
    dz_temp_dir_remove();
}

static void opt_is_refused_by_name(void **state) {
    (void)state;
    assert_int_equal(dz_temp_dir_make("dz_gguf_write_"), 0);
    char out[512];
    snprintf(out, sizeof out, "%s/opt.gguf", g_dir);
    const dz_export_spec spec = {.model = DZ_TEST_DATA "/hf/opt_preln", .out = out, .format = DZ_EXPORT_GGUF};
    dz_error err = {0};
    expect_error(dz_export_model(&spec, &err), &err, "architecture opt has no llama.cpp counterpart");
    assert_false(access(out, F_OK) == 0);
    const dz_export_spec bad = {.model = DZ_TEST_DATA "/gguf/tiny_llama.gguf", .out = out, .format = DZ_EXPORT_GGUF,
                                .gguf_type = "q4_0"};
    expect_error(dz_export_model(&bad, &err), &err, "--type q4_0");
    dz_temp_dir_remove();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_what_gguf_py_writes),
        cmocka_unit_test(aligned_file_reads_back),
        cmocka_unit_test(writer_errors_name_the_key_or_tensor),
        cmocka_unit_test(converter_files_export_back_to_their_bytes),
        cmocka_unit_test(opt_is_refused_by_name),
        cmocka_unit_test(stories260k_round_trip),
        cmocka_unit_test(smollm2_round_trip),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
