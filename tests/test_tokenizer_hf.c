/* Hugging Face tokenizer.json / tokenizer_config.json: ids equal to HF tokenizers' on SST-2
 * dev and ~490 varied strings (golden files from tools/make_hf_tokenizer_golden.py), for
 * SmolLM2-135M's real tokenizer and one small tokenizer per pre-tokenizer pattern; special
 * tokens only when asked for; declared specials; loud refusals of what is not supported. */
#include "tokenizer_test_util.h"

#include "tokenizer/build.h"
#include "tokenizer/unicode.h"

/* Loads path, or with round_trip the folder dz_tokenizer_save_hf writes from it. */
static dz_tokenizer *load(const char *path, int round_trip) {
    dz_tokenizer *tok = NULL;
    dz_error err = {0};
    if (dz_tokenizer_load(path, 0, &tok, &err) != DZ_OK) print_error("%s: %s\n", path, err.msg);
    assert_non_null(tok);
    if (!round_trip) return tok;
    char dir[] = "/tmp/dz_tok_save_XXXXXX", file[64];
    assert_non_null(mkdtemp(dir));
    if (dz_tokenizer_save_hf(tok, dir, &err) != DZ_OK) print_error("save: %s\n", err.msg);
    dz_tokenizer_free(tok);
    tok = NULL;
    if (dz_tokenizer_load(dir, 0, &tok, &err) != DZ_OK) print_error("%s: %s\n", dir, err.msg);
    assert_non_null(tok);
    const char *names[] = {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"};
    for (int k = 0; k < 3; k++) {
        snprintf(file, sizeof file, "%s/%s", dir, names[k]);
        unlink(file);
    }
    assert_int_equal(rmdir(dir), 0); /* nothing else was written */
    return tok;
}

static void check_golden(const char *path, const char *golden_name, int want_vocab, int round_trip) {
    dz_tokenizer *tok = load(path, round_trip);
    assert_int_equal(dz_tokenizer_get_kind(tok), DZ_TOK_HF_BPE);
    if (want_vocab) assert_int_equal(dz_tokenizer_vocab_size(tok), want_vocab);
    golden G;
    golden_load(&G, golden_name);
    int checked, bad = golden_check(&G, tok, "ids", DZ_ENCODE_BOS, &checked);
    print_message("%s%s plain text: %d/%d cases identical (%d from SST-2 dev)\n", golden_name,
                  round_trip ? " (saved and reloaded)" : "", checked - bad, checked, G.n_dev);
    assert_int_equal(bad, 0);
    assert_true(checked == G.count && G.n_dev == 872);
    bad = golden_check(&G, tok, "ids_special", DZ_ENCODE_BOS | DZ_ENCODE_SPECIAL, &checked);
    print_message("%s special tokens parsed: %d/%d cases identical\n", golden_name, checked - bad, checked);
    assert_int_equal(bad, 0);
    assert_true(checked >= 10);
    golden_free(&G);
    dz_tokenizer_free(tok);
}

static void smollm2_matches_hf(void **state) {
    (void)state;
    char dir[4096];
    test_asset_path(dir, sizeof dir, "smollm2-135m/hf-tokenizer");
    check_golden(dir, "hf_smollm2_golden.jsonl", 49152, 0);
}

/* The tokenizer in the GGUF file's metadata (pre-tokenizer "smollm": SmolLM2's original
 * Digits + ByteLevel) against HF with that pre-tokenizer. (The asset's tokenizer.json lost
 * the digit split: the ids differ on whitespace before digits, "  123".) */
static void smollm2_gguf_matches_hf(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf");
    check_golden(path, "hf_smollm2_gguf_golden.jsonl", 49152, 0);
    dz_tokenizer *tok = load(path, 0);
    assert_int_equal(dz_tokenizer_bos(tok), -1); /* tokenizer.ggml.add_bos_token false */
    print_message("GGUF specials: bos %d eos %d pad %d unk %d\n", dz_tokenizer_special(tok, DZ_SPECIAL_BOS),
                  dz_tokenizer_special(tok, DZ_SPECIAL_EOS), dz_tokenizer_special(tok, DZ_SPECIAL_PAD),
                  dz_tokenizer_special(tok, DZ_SPECIAL_UNK));
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_BOS), 1);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    dz_tokenizer_free(tok);
}

/* dz_tokenizer_save_hf writes tokenizer.json + tokenizer_config.json that load back the same. */
static void smollm2_save_round_trip(void **state) {
    (void)state;
    char dir[4096];
    test_asset_path(dir, sizeof dir, "smollm2-135m/hf-tokenizer");
    check_golden(dir, "hf_smollm2_golden.jsonl", 49152, 1);
    dz_tokenizer *tok = load(dir, 1);
    for (int k = 0; k < DZ_SPECIAL_COUNT; k++) assert_true(dz_tokenizer_special(tok, (dz_special)k) >= 0);
    assert_int_equal(dz_tokenizer_bos(tok), -1);
    dz_tokenizer_free(tok);
}

static void small_save_round_trip(void **state) {
    (void)state;
    const char *names[] = {"gpt2", "llama3", "qwen2", "digits", "llama2", "metaspace", "gemma"};
    for (int k = 0; k < 7; k++) {
        char dir[4096], golden_name[64];
        snprintf(dir, sizeof dir, "%s/tokenizer/hf_small/%s", DZ_TEST_DATA, names[k]);
        snprintf(golden_name, sizeof golden_name, "hf_%s_golden.jsonl", names[k]);
        check_golden(dir, golden_name, 0, 1);
    }
}

static void small_tokenizer(const char *name, int with_config) {
    char dir[4096], golden_name[64];
    snprintf(dir, sizeof dir, "%s/tokenizer/hf_small/%s%s", DZ_TEST_DATA, name, with_config ? "" : "/tokenizer.json");
    snprintf(golden_name, sizeof golden_name, "hf_%s_golden.jsonl", name);
    check_golden(dir, golden_name, 0, 0);
}

static void gpt2_pattern_matches_hf(void **state) { (void)state, small_tokenizer("gpt2", 0); }
static void llama3_pattern_matches_hf(void **state) { (void)state, small_tokenizer("llama3", 1); }
static void qwen2_pattern_matches_hf(void **state) { (void)state, small_tokenizer("qwen2", 0); }
static void digits_split_matches_hf(void **state) { (void)state, small_tokenizer("digits", 0); }
static void sentencepiece_style_llama2_matches_hf(void **state) { (void)state, small_tokenizer("llama2", 0); }
static void sentencepiece_style_metaspace_matches_hf(void **state) { (void)state, small_tokenizer("metaspace", 0); }
static void sentencepiece_style_gemma_matches_hf(void **state) { (void)state, small_tokenizer("gemma", 0); }

static int encode(const dz_tokenizer *tok, const char *text, unsigned flags, int *ids) {
    return dz_tokenizer_encode_flags(tok, text, flags, ids, 64, NULL);
}

static void smollm2_specials(void **state) {
    (void)state;
    char dir[4096];
    test_asset_path(dir, sizeof dir, "smollm2-135m/hf-tokenizer");
    dz_tokenizer *tok = NULL;
    assert_int_equal(dz_tokenizer_load(dir, 0, &tok, NULL), DZ_OK);
    /* tokenizer_config.json declares bos <|im_start|>, eos/pad <|im_end|>, unk <|endoftext|>;
     * the template adds no bos, so encode never prepends one */
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_BOS), 1);
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_EOS), 2);
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_PAD), 2);
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_UNK), 0);
    assert_int_equal(dz_tokenizer_bos(tok), -1);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    char buf[64];
    assert_string_equal(dz_tokenizer_decode(tok, -1, 1, buf, sizeof buf), "<|im_start|>");
    int ids[64];
    assert_int_equal(encode(tok, "<|im_end|>", DZ_ENCODE_BOS | DZ_ENCODE_SPECIAL, ids), 1);
    assert_int_equal(ids[0], 2);
    assert_true(encode(tok, "<|im_end|>", DZ_ENCODE_BOS, ids) > 1); /* plain text by default */
    /* bytes without a token (0x04, 0xF5..0xFF) are dropped, as HF does: the bytes around
     * them merge as if they were adjacent (one pre-token: a run of punctuation) */
    int n = encode(tok, "!\x04!", 0, ids);
    int m = encode(tok, "!!", 0, ids + 32);
    assert_int_equal(m, 1);
    assert_int_equal(n, m);
    assert_memory_equal(ids, ids + 32, (size_t)n * sizeof *ids);
    dz_tokenizer_free(tok);
}

/* Llama-2-style decode: "▁" is a space, <0xXX> its byte, the prefix space dropped after <s>. */
static void sentencepiece_style_decode(void **state) {
    (void)state;
    char dir[4096], buf[64], text[256] = "";
    snprintf(dir, sizeof dir, "%s/tokenizer/hf_small/llama2", DZ_TEST_DATA);
    dz_tokenizer *tok = load(dir, 0);
    int ids[64];
    const char *in = "the film \xe2\x82\xac 1 \xf0\x9f\x98\x80";
    int n = encode(tok, in, DZ_ENCODE_BOS, ids);
    assert_true(n > 3 && ids[0] == dz_tokenizer_bos(tok));
    for (int i = 1; i < n; i++) strcat(text, dz_tokenizer_decode(tok, ids[i - 1], ids[i], buf, sizeof buf));
    assert_string_equal(text, in);
    dz_tokenizer_free(tok);
}

static void llama3_bos_from_template(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tokenizer/hf_small/llama3", DZ_TEST_DATA);
    dz_tokenizer *tok = NULL;
    assert_int_equal(dz_tokenizer_load(dir, 0, &tok, NULL), DZ_OK);
    int bos = dz_tokenizer_bos(tok), ids[64];
    assert_true(bos >= 0);
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_BOS), bos);
    char buf[64];
    assert_string_equal(dz_tokenizer_decode(tok, -1, bos, buf, sizeof buf), "<|begin_of_text|>");
    assert_string_equal(dz_tokenizer_decode(tok, -1, dz_tokenizer_eos(tok), buf, sizeof buf), "<|eot_id|>");
    assert_int_equal(encode(tok, "", DZ_ENCODE_BOS, ids), 1);
    assert_int_equal(ids[0], bos);
    assert_int_equal(encode(tok, "", 0, ids), 0);
    dz_tokenizer_free(tok);
}

/* A copy of the small GPT-2-pattern tokenizer.json with one substring replaced. */
static const char *patched(scratch *s, const char *from, const char *to) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/hf_small/qwen2/tokenizer.json", DZ_TEST_DATA);
    char *text;
    size_t len;
    dz_error err;
    assert_int_equal(dz_read_file(path, &text, &len, &err), DZ_OK);
    char *at = strstr(text, from);
    assert_non_null(at);
    size_t flen = strlen(from), tlen = strlen(to);
    char *out = malloc(len - flen + tlen + 1);
    memcpy(out, text, (size_t)(at - text));
    memcpy(out + (at - text), to, tlen);
    strcpy(out + (at - text) + tlen, at + flen);
    const char *p = scratch_write_str(s, "tokenizer.json", out);
    free(out);
    free(text);
    return p;
}

static void unsupported_files_are_refused(void **state) {
    (void)state;
    scratch s;
    scratch_make(&s);
    expect_load_error(patched(&s, "\\\\p{N}| ?", "\\\\p{N}{1,2}| ?"), 0, DZ_ERR_UNSUPPORTED, "tokenizer.json",
                      "pretokenizers[0].pattern.Regex");
    expect_load_error(patched(&s, "\"type\": \"NFC\"", "\"type\": \"NFKC\""), 0,
                      DZ_ERR_UNSUPPORTED, "tokenizer.json", "normalizer: NFKC");
    expect_load_error(patched(&s, "\"type\": \"BPE\"", "\"type\": \"WordPiece\""), 0, DZ_ERR_UNSUPPORTED,
                      "model.type", "WordPiece");
    expect_load_error(patched(&s, "\"byte_fallback\": false", "\"byte_fallback\": true"), 0, DZ_ERR_UNSUPPORTED,
                      "model.byte_fallback", NULL);
    expect_load_error(patched(&s, "\"merges\": [", "\"merges\": [[\"\\u0120\", \"zzzq\"], "), 0, DZ_ERR_FORMAT,
                      "model.merges[0]", "zzzq");
    expect_load_error(patched(&s, "\"vocab\": {", "\"vocab\": {\"dup\": 5, "), 0, DZ_ERR_FORMAT, "model.vocab",
                      "used twice");
    scratch_remove(&s, "tokenizer.json");
    /* a tokenizer.model is read as SentencePiece's protobuf, never misread as a llama2.c file */
    const char *spm = scratch_write(&s, "tokenizer.model", "\x0a\x0e\x0a\x05<unk>\x15\x00\x00\x00\x00\x18\x02", 16);
    expect_load_error(spm, 0, DZ_ERR_UNSUPPORTED, "tokenizer.model", "trainer_spec.model_type");
    expect_load_error(s.dir, 0, DZ_ERR_UNSUPPORTED, "tokenizer.model", "unigram");
    spm = scratch_write(&s, "tokenizer.model", "\x0a\x0e\x0a\x05<unk>\x15\x00\x00", 11);
    expect_load_error(spm, 0, DZ_ERR_FORMAT, "tokenizer.model", "protobuf");
    const char *names[] = {"tokenizer.json", "tokenizer.model", NULL};
    scratch_free(&s, names);
}

/* The constructor the GGUF loader calls: tokens as GGUF stores them, pre-tokenizer by name. */
static void from_vocab_arrays(void **state) {
    (void)state;
    const char *tokens[300];
    char store[256][4];
    int n = 0;
    for (int b = 0; b < 256; b++) { /* byte-level symbols of the 188 printable bytes only */
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (!printable) continue;
        int len = dz_utf8_encode((uint32_t)b, store[n]);
        store[n][len] = '\0';
        tokens[n] = store[n];
        n++;
    }
    tokens[n++] = "12";
    tokens[n++] = "<|end|>";
    int32_t types[300];
    for (int i = 0; i < n; i++) types[i] = DZ_TOKEN_NORMAL;
    types[n - 1] = DZ_TOKEN_CONTROL;
    const char *merges[] = {"1 2"};
    dz_vocab_spec spec = dz_vocab_spec_init("test.gguf");
    spec.pre = "smollm";
    spec.tokens = tokens;
    spec.n_tokens = n;
    spec.types = types;
    spec.merges = merges;
    spec.n_merges = 1;
    spec.eos = n - 1;
    dz_tokenizer *tok = NULL;
    dz_error err = {0};
    assert_int_equal(dz_tokenizer_from_vocab(&spec, &tok, &err), DZ_OK);
    int ids[64];
    /* smollm splits digits one by one: "12" never merges; spaces have no token: dropped */
    assert_int_equal(encode(tok, "12", 0, ids), 2);
    assert_int_equal(encode(tok, "1 2<|end|>", DZ_ENCODE_SPECIAL, ids), 3);
    assert_int_equal(ids[2], n - 1);
    assert_int_equal(dz_tokenizer_eos(tok), n - 1);
    dz_tokenizer_free(tok);
    spec.pre = "gpt2";
    assert_int_equal(dz_tokenizer_from_vocab(&spec, &tok, &err), DZ_OK);
    assert_int_equal(encode(tok, "12", 0, ids), 1);
    assert_int_equal(ids[0], n - 2);
    dz_tokenizer_free(tok);
    spec.pre = "deepseek-coder";
    assert_int_equal(dz_tokenizer_from_vocab(&spec, &tok, &err), DZ_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "tokenizer.ggml.pre"));
    assert_null(tok);
}

/* SentencePiece BPE (Llama-2's setup) from tokenizer.model: ids equal to sentencepiece's,
 * also after dz_tokenizer_save_hf wrote it back. */
static void sentencepiece_check(int round_trip) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/spm_small/tokenizer.model", DZ_TEST_DATA);
    dz_tokenizer *tok = load(path, round_trip);
    assert_int_equal(dz_tokenizer_get_kind(tok), DZ_TOK_SENTENCEPIECE);
    assert_int_equal(dz_tokenizer_vocab_size(tok), 800);
    assert_int_equal(dz_tokenizer_bos(tok), 1);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    assert_int_equal(dz_tokenizer_special(tok, DZ_SPECIAL_UNK), 0);
    golden G;
    golden_load(&G, "spm_small_golden.jsonl");
    int checked, bad = golden_check(&G, tok, "ids", DZ_ENCODE_BOS, &checked);
    print_message("sentencepiece%s with <s>: %d/%d cases identical (%d from SST-2 dev)\n",
                  round_trip ? " (saved and reloaded)" : "", checked - bad, checked, G.n_dev);
    assert_int_equal(bad, 0);
    bad = golden_check(&G, tok, "ids_nobos", 0, &checked);
    print_message("sentencepiece without <s>: %d/%d cases identical\n", checked - bad, checked);
    assert_int_equal(bad, 0);
    assert_true(checked == G.count && G.n_dev == 872);
    golden_free(&G);
    dz_tokenizer_free(tok);
}

/* Every truncation of a real tokenizer.model, and single-byte corruptions of it, load or
 * fail with an error naming the file: never a crash or a read past the end (ASan). */
static void sentencepiece_damaged_files_fail_cleanly(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer/spm_small/tokenizer.model", DZ_TEST_DATA);
    char *buf;
    size_t len;
    dz_error err;
    assert_int_equal(dz_read_file(path, &buf, &len, &err), DZ_OK);
    scratch s;
    scratch_make(&s);
    int failed = 0, loaded = 0;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 64) {
        const char *p = scratch_write(&s, "tokenizer.model", buf, cut);
        dz_tokenizer *tok = NULL;
        dz_error e = {0};
        if (dz_tokenizer_load(p, 0, &tok, &e) == DZ_OK) loaded++, dz_tokenizer_free(tok);
        else failed++, assert_non_null(strstr(e.msg, "tokenizer.model"));
    }
    uint32_t rng = 12345;
    for (int k = 0; k < 300; k++) {
        rng = rng * 1664525u + 1013904223u;
        size_t at = (rng >> 8) % len;
        char saved = buf[at];
        buf[at] = (char)(rng >> 24);
        const char *p = scratch_write(&s, "tokenizer.model", buf, len);
        buf[at] = saved;
        dz_tokenizer *tok = NULL;
        dz_error e = {0};
        if (dz_tokenizer_load(p, 0, &tok, &e) == DZ_OK) {
            int ids[64];
            dz_tokenizer_encode(tok, "it 's a charming journey", 1, ids, 64, NULL);
            loaded++, dz_tokenizer_free(tok);
        } else failed++, assert_non_null(strstr(e.msg, "tokenizer.model"));
    }
    print_message("damaged tokenizer.model files: %d refused, %d loaded\n", failed, loaded);
    assert_true(failed > 0);
    const char *names[] = {"tokenizer.model", NULL};
    scratch_free(&s, names);
    free(buf);
}

static void sentencepiece_matches_spm(void **state) { (void)state, sentencepiece_check(0); }
static void sentencepiece_save_round_trip(void **state) { (void)state, sentencepiece_check(1); }

/* Encode speed on SmolLM2's tokenizer (17 added tokens to look for), for the record. */
static void smollm2_encode_speed(void **state) {
    (void)state;
    char dir[4096];
    test_asset_path(dir, sizeof dir, "smollm2-135m/hf-tokenizer");
    encode_speed_sst2(load(dir, 0), "SmolLM2");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smollm2_matches_hf),        cmocka_unit_test(smollm2_gguf_matches_hf),        cmocka_unit_test(gpt2_pattern_matches_hf),
        cmocka_unit_test(llama3_pattern_matches_hf), cmocka_unit_test(qwen2_pattern_matches_hf),
        cmocka_unit_test(digits_split_matches_hf),   cmocka_unit_test(sentencepiece_style_llama2_matches_hf),
        cmocka_unit_test(sentencepiece_style_metaspace_matches_hf), cmocka_unit_test(sentencepiece_style_gemma_matches_hf),   cmocka_unit_test(smollm2_specials),
        cmocka_unit_test(llama3_bos_from_template),  cmocka_unit_test(sentencepiece_style_decode),  cmocka_unit_test(unsupported_files_are_refused),
        cmocka_unit_test(from_vocab_arrays),         cmocka_unit_test(smollm2_save_round_trip),
        cmocka_unit_test(small_save_round_trip),     cmocka_unit_test(sentencepiece_matches_spm),
        cmocka_unit_test(sentencepiece_save_round_trip), cmocka_unit_test(sentencepiece_damaged_files_fail_cleanly), cmocka_unit_test(smollm2_encode_speed),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
