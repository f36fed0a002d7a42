/* llama2.c tokenizer.bin (tok512) against tools/ref_llama2c_tokenizer.py, a port of upstream
 * run.c's encode (golden ids in tests/data/tokenizer/llama2c_golden.jsonl); decode; bad files. */
#include "tokenizer_test_util.h"

static golden G;

static int teardown(void **state) {
    (void)state;
    if (G.row) golden_free(&G);
    return 0;
}

static dz_tokenizer *load_tok512(int vocab_size) {
    char path[4096];
    test_asset_path(path, sizeof path, "stories260K/tok512.bin");
    dz_tokenizer *tok = NULL;
    dz_error err = {0};
    dz_status st = dz_tokenizer_load(path, vocab_size, &tok, &err);
    if (st != DZ_OK) print_error("%s\n", err.msg);
    assert_int_equal(st, DZ_OK);
    assert_int_equal(dz_tokenizer_get_kind(tok), DZ_TOK_LLAMA2C);
    assert_int_equal(dz_tokenizer_vocab_size(tok), 512);
    assert_int_equal(dz_tokenizer_bos(tok), 1);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    return tok;
}

static void ids_match_reference(void **state) {
    (void)state;
    dz_tokenizer *tok = load_tok512(512);
    if (!G.row) golden_load(&G, "llama2c_golden.jsonl");
    int checked, bad = golden_check(&G, tok, "ids", 1, &checked);
    print_message("ids (add_bos=1): %d/%d cases identical (%d from SST-2 dev)\n", checked - bad, checked, G.n_dev);
    assert_int_equal(checked, G.count);
    assert_int_equal(bad, 0);
    bad = golden_check(&G, tok, "ids_nobos", 0, &checked);
    print_message("ids_nobos (add_bos=0): %d/%d cases identical\n", checked - bad, checked);
    assert_true(checked > 100);
    assert_int_equal(bad, 0);
    dz_tokenizer_free(tok);

    tok = load_tok512(0); /* 0: read tokens up to the end of the file */
    bad = golden_check(&G, tok, "ids", 1, &checked);
    assert_int_equal(bad, 0);
    dz_tokenizer_free(tok);
}

static void decode_pieces(void **state) {
    (void)state;
    dz_tokenizer *tok = load_tok512(512);
    char buf[64];
    int ids[8];
    /* "Once" as one id after the dummy prefix: " Once"; after BOS the space goes */
    assert_int_equal(dz_tokenizer_encode(tok, "Once", 1, ids, 8, NULL), 2);
    assert_string_equal(dz_tokenizer_decode(tok, 1, ids[1], buf, sizeof buf), "Once");
    assert_string_equal(dz_tokenizer_decode(tok, 5, ids[1], buf, sizeof buf), " Once");
    assert_string_equal(dz_tokenizer_decode(tok, -1, 3 + 0xE4, buf, sizeof buf), "\xe4"); /* <0xE4> */
    assert_string_equal(dz_tokenizer_decode(tok, -1, 3 + 'A', buf, sizeof buf), "A");
    assert_string_equal(dz_tokenizer_decode(tok, -1, 2, buf, sizeof buf), "\n</s>\n");
    assert_string_equal(dz_tokenizer_decode(tok, -1, 512, buf, sizeof buf), "");
    assert_string_equal(dz_tokenizer_decode(tok, -1, -1, buf, sizeof buf), "");
    assert_string_equal(dz_tokenizer_decode(tok, 5, ids[1], buf, 3), " O");
    dz_tokenizer_free(tok);
}

/* decode after BOS, piece by piece, gives every golden text back (byte fallback included). */
static void decode_round_trips(void **state) {
    (void)state;
    dz_tokenizer *tok = load_tok512(512);
    if (!G.row) golden_load(&G, "llama2c_golden.jsonl");
    int bad = 0;
    for (int i = 0; i < G.count; i++) {
        const char *text = G.text[i];
        size_t len = strlen(text), used = 0;
        int *ids = malloc((len + 2) * sizeof *ids);
        int n = dz_tokenizer_encode(tok, text, 1, ids, (int)len + 2, NULL);
        char *out = malloc(len + 64), buf[64];
        int ok = n >= 1 && n <= (int)len + 2;
        for (int k = 1; ok && k < n; k++) {
            const char *piece = dz_tokenizer_decode(tok, ids[k - 1], ids[k], buf, sizeof buf);
            size_t pl = strlen(piece);
            ok = used + pl <= len;
            if (ok) memcpy(out + used, piece, pl), used += pl;
        }
        if (!(ok && used == len && memcmp(out, text, len) == 0) && ++bad <= 5)
            print_error("round trip failed: \"%.60s\"\n", text);
        free(ids);
        free(out);
    }
    assert_int_equal(bad, 0);
    dz_tokenizer_free(tok);
}

static void encode_edges(void **state) {
    (void)state;
    dz_tokenizer *tok = load_tok512(512);
    int ids[4] = {-7, -7, -7, -7};
    assert_int_equal(dz_tokenizer_encode(tok, "", 0, ids, 4, NULL), 0); /* no dummy prefix */
    assert_int_equal(dz_tokenizer_encode(tok, "", 1, ids, 4, NULL), 1);
    assert_int_equal(ids[0], 1);
    int n = dz_tokenizer_encode(tok, "Once upon a time there was", 1, ids, 2, NULL);
    assert_true(n > 2);
    assert_int_equal(ids[2], -7); /* cap respected, full count returned */
    dz_tokenizer_free(tok);
}

static void malformed_files_fail_with_their_name(void **state) {
    (void)state;
    size_t len;
    char *bin = read_asset("stories260K/tok512.bin", &len);
    scratch s;
    scratch_make(&s);
    const char *p;

    p = scratch_write(&s, "short.bin", bin, 2);
    expect_load_error(p, 0, DZ_ERR_FORMAT, "short.bin", "max_token_length");
    p = scratch_write(&s, "cut.bin", bin, len - 3); /* inside the last token's bytes */
    expect_load_error(p, 512, DZ_ERR_FORMAT, "cut.bin", "token 511");
    expect_load_error(p, 0, DZ_ERR_FORMAT, "cut.bin", "truncated");
    p = scratch_write(&s, "cut8.bin", bin, 4 + 5); /* inside token 0's score/length */
    expect_load_error(p, 0, DZ_ERR_FORMAT, "cut8.bin", "token 0");
    p = scratch_write(&s, "full.bin", bin, len);
    expect_load_error(p, 600, DZ_ERR_FORMAT, "full.bin", "truncated");
    expect_load_error(p, 100, DZ_ERR_FORMAT, "full.bin", "259"); /* no room for byte fallback */

    int32_t neg = -5;
    memcpy(bin + 4 + 4, &neg, 4); /* token 0's length */
    p = scratch_write(&s, "neg.bin", bin, len);
    expect_load_error(p, 512, DZ_ERR_FORMAT, "neg.bin", "negative length");
    memcpy(bin, &neg, 4);
    p = scratch_write(&s, "negmax.bin", bin, len);
    expect_load_error(p, 512, DZ_ERR_FORMAT, "negmax.bin", "max_token_length");

    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.bin", s.dir);
    expect_load_error(missing, 512, DZ_ERR_IO, "missing.bin", NULL);

    free(bin);
    const char *names[] = {"short.bin", "cut.bin", "cut8.bin", "full.bin", "neg.bin", "negmax.bin", NULL};
    scratch_free(&s, names);
}

static void encode_speed_sst2_train(void **state) {
    (void)state;
    encode_speed_sst2(load_tok512(512), "llama2.c");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_match_reference),
        cmocka_unit_test(decode_pieces),
        cmocka_unit_test(decode_round_trips),
        cmocka_unit_test(encode_edges),
        cmocka_unit_test(malformed_files_fail_with_their_name),
        cmocka_unit_test(encode_speed_sst2_train),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, teardown));
}
