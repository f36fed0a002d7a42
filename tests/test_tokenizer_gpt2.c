/* GPT-2 byte-level BPE against HF tokenizers' ids (tools/make_tokenizer_golden.py):
 * GPT-2 ids (encoder.json + vocab.bpe), OPT ids (+ dict.txt, and an OPT-style
 * vocab.json + merges.txt written here), round trips, malformed files. */
#include <stdatomic.h>

#include "tokenizer_test_util.h"
#include "core/threads.h"

static golden G;

static int teardown(void **state) {
    (void)state;
    if (G.row) golden_free(&G);
    return 0;
}

static void need_golden(void) {
    if (!G.row) golden_load(&G, "gpt2_golden.jsonl");
}

static dz_tokenizer *load_ok(const char *path) {
    dz_tokenizer *tok = NULL;
    dz_error err = {0};
    dz_status st = dz_tokenizer_load(path, 0, &tok, &err);
    if (st != DZ_OK) print_error("%s: %s\n", path, err.msg);
    assert_int_equal(st, DZ_OK);
    assert_int_equal(dz_tokenizer_get_kind(tok), DZ_TOK_GPT2_BPE);
    return tok;
}

static void expect_golden(const dz_tokenizer *tok, const char *key, int add_bos) {
    int checked, bad = golden_check(&G, tok, key, add_bos, &checked);
    print_message("%s (add_bos=%d): %d/%d cases identical (%d from SST-2 dev)\n", key, add_bos, checked - bad,
                  checked, G.n_dev);
    assert_int_equal(checked, G.count);
    assert_int_equal(bad, 0);
}

static void gpt2_ids_match_hf(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe/encoder.json");
    need_golden();
    dz_tokenizer *tok = load_ok(path); /* the file, not the folder: no dict.txt, GPT-2 ids */
    assert_int_equal(dz_tokenizer_vocab_size(tok), 50257);
    assert_int_equal(dz_tokenizer_bos(tok), -1);
    assert_int_equal(dz_tokenizer_eos(tok), 50256);
    expect_golden(tok, "gpt2", 0);
    expect_golden(tok, "gpt2", 1); /* GPT-2 has no start token to add */
    dz_tokenizer_free(tok);
    test_asset_path(path, sizeof path, "gpt2-bpe/vocab.bpe"); /* the other file names the same route */
    tok = load_ok(path);
    expect_golden(tok, "gpt2", 0);
    dz_tokenizer_free(tok);
}

static void opt_ids_match_fairseq_mapping(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe/dict.txt");
    need_golden();
    const char *routes[] = {"gpt2-bpe", "gpt2-bpe/dict.txt"};
    for (int r = 0; r < 2; r++) {
        test_asset_path(path, sizeof path, routes[r]);
        dz_tokenizer *tok = load_ok(path);
        assert_int_equal(dz_tokenizer_bos(tok), 2);
        assert_int_equal(dz_tokenizer_eos(tok), 2);
        assert_int_equal(dz_tokenizer_vocab_size(tok), 50260); /* <|endoftext|> (OPT 50260) is never produced */
        expect_golden(tok, "opt", 1);
        char buf[64];
        assert_string_equal(dz_tokenizer_decode(tok, -1, 31414, buf, sizeof buf), "Hello"); /* README's example */
        assert_string_equal(dz_tokenizer_decode(tok, -1, 2, buf, sizeof buf), "</s>");
        dz_tokenizer_free(tok);
    }
}

/* Concatenated decode of text's ids (after the start token, if any) must give text back. */
static int round_trips(const dz_tokenizer *tok, const char *text, int add_bos) {
    int cap = (int)strlen(text) + 2, *ids = malloc((size_t)cap * sizeof *ids);
    int n = dz_tokenizer_encode(tok, text, add_bos, ids, cap, NULL);
    size_t len = strlen(text);
    char *out = calloc(len + 1, 1), buf[256];
    size_t used = 0;
    int ok = n >= 0;
    for (int k = add_bos ? 1 : 0; ok && k < n; k++) {
        const char *piece = dz_tokenizer_decode(tok, k ? ids[k - 1] : -1, ids[k], buf, sizeof buf);
        size_t pl = strlen(piece);
        ok = used + pl <= len;
        if (ok) memcpy(out + used, piece, pl), used += pl;
    }
    ok = ok && used == len && memcmp(out, text, len) == 0;
    free(ids);
    free(out);
    return ok;
}

static void decode_round_trips(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe");
    need_golden();
    char enc[4096];
    test_asset_path(enc, sizeof enc, "gpt2-bpe/encoder.json");
    dz_tokenizer *gpt2 = load_ok(enc), *opt = load_ok(path);
    int bad = 0;
    for (int i = 0; i < G.count; i++) {
        if (!round_trips(gpt2, G.text[i], 0) || !round_trips(opt, G.text[i], 1)) {
            if (++bad <= 5) print_error("round trip failed: \"%.60s\"\n", G.text[i]);
        }
    }
    /* invalid UTF-8 goes through byte-level BPE unchanged too */
    assert_true(round_trips(gpt2, "\xff\xfe a\x80\xc3 \xed\xa0\x80 \xf4\x90\x80\x80!", 0));
    char buf[8];
    assert_string_equal(dz_tokenizer_decode(gpt2, -1, 99999, buf, sizeof buf), "");
    assert_string_equal(dz_tokenizer_decode(gpt2, -1, 15496, buf, 3), "He"); /* truncated to cap */
    assert_int_equal(bad, 0);
    dz_tokenizer_free(gpt2);
    dz_tokenizer_free(opt);
}

static void encode_reports_full_length(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe/encoder.json");
    dz_tokenizer *tok = load_ok(path);
    int ids[2] = {-7, -7};
    assert_int_equal(dz_tokenizer_encode(tok, "Hello world", 0, ids, 0, NULL), 2);
    assert_int_equal(ids[0], -7);
    assert_int_equal(dz_tokenizer_encode(tok, "Hello world again", 0, ids, 1, NULL), 3);
    assert_int_equal(ids[0], 15496);
    assert_int_equal(ids[1], -7);
    dz_error err = {0};
    assert_int_equal(dz_tokenizer_encode(tok, NULL, 0, ids, 2, &err), -1);
    assert_int_equal(err.code, DZ_ERR_INVALID);
    dz_tokenizer_free(tok);
}

/* Appends s as a JSON string literal. */
static void json_string(char **p, const char *s) {
    *(*p)++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') *(*p)++ = '\\';
        *(*p)++ = *s;
    }
    *(*p)++ = '"';
}

/* An OPT-style HF vocab.json: fairseq ids (specials 0..3, then 4 + dict line), as in
 * facebook/opt-*. Built from encoder.json + dict.txt of the assets. */
static char *opt_vocab_json(const char *enc_path, const char *dict_path) {
    char *enc_text, *dict;
    size_t len, dlen;
    dz_error err;
    assert_int_equal(dz_read_file(enc_path, &enc_text, &len, &err), DZ_OK);
    assert_int_equal(dz_read_file(dict_path, &dict, &dlen, &err), DZ_OK);
    cJSON *enc = cJSON_Parse(enc_text);
    assert_non_null(enc);
    int n = cJSON_GetArraySize(enc);
    const char **by_id = calloc((size_t)n, sizeof *by_id);
    for (const cJSON *e = enc->child; e; e = e->next) by_id[e->valueint] = e->string;
    char *out = malloc(2 * len + dlen + 1024), *p = out;
    p += sprintf(p, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3");
    int line = 0;
    for (char *s = dict, *nl; s && *s; s = nl ? nl + 1 : NULL, line++) {
        nl = strchr(s, '\n');
        if (nl) *nl = '\0'; /* sscanf would strlen the whole rest of the file */
        char sym[64];
        assert_int_equal(sscanf(s, "%63s", sym), 1);
        *p++ = ',', *p++ = ' ';
        json_string(&p, sym[0] >= '0' && sym[0] <= '9' ? by_id[atoi(sym)] : sym);
        p += sprintf(p, ": %d", 4 + line);
    }
    strcpy(p, "}");
    free(by_id);
    cJSON_Delete(enc);
    free(enc_text);
    free(dict);
    return out;
}

static void vocab_json_and_merges_txt(void **state) {
    (void)state;
    char enc[4096], bpe[4096], dict[4096];
    test_asset_path(enc, sizeof enc, "gpt2-bpe/encoder.json");
    test_asset_path(bpe, sizeof bpe, "gpt2-bpe/vocab.bpe");
    test_asset_path(dict, sizeof dict, "gpt2-bpe/dict.txt");
    need_golden();
    char *merges, *enc_text;
    size_t mlen, elen;
    dz_error err;
    assert_int_equal(dz_read_file(bpe, &merges, &mlen, &err), DZ_OK);
    assert_int_equal(dz_read_file(enc, &enc_text, &elen, &err), DZ_OK);
    scratch s;
    scratch_make(&s);
    scratch_write(&s, "merges.txt", merges, mlen);

    /* GPT-2's own files under HF's names: GPT-2 ids */
    scratch_write(&s, "vocab.json", enc_text, elen);
    dz_tokenizer *tok = load_ok(s.dir);
    assert_int_equal(dz_tokenizer_bos(tok), -1);
    assert_int_equal(dz_tokenizer_eos(tok), 50256);
    expect_golden(tok, "gpt2", 0);
    dz_tokenizer_free(tok);

    /* OPT's HF files: ids straight from vocab.json, </s> = 2 as start token */
    char *opt = opt_vocab_json(enc, dict);
    const char *vpath = scratch_write_str(&s, "vocab.json", opt);
    tok = load_ok(vpath); /* a path to one of the files works too */
    assert_int_equal(dz_tokenizer_bos(tok), 2);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    assert_int_equal(dz_tokenizer_vocab_size(tok), 50260); /* <|endoftext|> (OPT 50260) is never produced */
    expect_golden(tok, "opt", 1);
    dz_tokenizer_free(tok);

    free(opt);
    free(merges);
    free(enc_text);
    const char *names[] = {"vocab.json", "merges.txt", NULL};
    scratch_free(&s, names);
}

static int files_equal(const char *a, const char *b) {
    char *ta, *tb;
    size_t la, lb;
    dz_error err;
    assert_int_equal(dz_read_file(a, &ta, &la, &err), DZ_OK);
    assert_int_equal(dz_read_file(b, &tb, &lb, &err), DZ_OK);
    int same = la == lb && memcmp(ta, tb, la) == 0;
    free(ta);
    free(tb);
    return same;
}

static cJSON *read_json(const char *dir, const char *name) {
    char path[1024], *text;
    size_t len;
    dz_error err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(dz_read_file(path, &text, &len, &err), DZ_OK);
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

static int json_int(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

static const char *json_str(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void save_tok(const dz_tokenizer *tok, const char *dir) {
    dz_error err = {0};
    dz_status st = dz_tokenizer_save_hf(tok, dir, &err);
    if (st != DZ_OK) print_error("save %s: %s\n", dir, err.msg);
    assert_int_equal(st, DZ_OK);
}

/* dz_tokenizer_save_hf: the saved folders load back with the golden ids; the files are
 * the asset files where those exist (merges, GPT-2 vocabulary, tokenizer.bin), and OPT's
 * vocab.json has facebook/opt-*'s layout. */
static void save_hf_folders_load_back(void **state) {
    (void)state;
    char opt_src[4096], enc[4096], bpe[4096], tok512[4096];
    test_asset_path(opt_src, sizeof opt_src, "gpt2-bpe");
    test_asset_path(enc, sizeof enc, "gpt2-bpe/encoder.json");
    test_asset_path(bpe, sizeof bpe, "gpt2-bpe/vocab.bpe");
    test_asset_path(tok512, sizeof tok512, "stories260K/tok512.bin");
    need_golden();
    scratch s;
    scratch_make(&s);
    char a[300], b[300], path[700], path2[700];
    snprintf(a, sizeof a, "%s/a", s.dir); /* created by the save */
    snprintf(b, sizeof b, "%s/b", s.dir);

    /* OPT ids (encoder.json + vocab.bpe + dict.txt) -> HF files -> the same ids */
    dz_tokenizer *tok = load_ok(opt_src);
    save_tok(tok, a);
    dz_tokenizer_free(tok);
    tok = load_ok(a);
    assert_int_equal(dz_tokenizer_bos(tok), 2);
    assert_int_equal(dz_tokenizer_eos(tok), 2);
    assert_int_equal(dz_tokenizer_vocab_size(tok), 50260);
    expect_golden(tok, "opt", 1);
    snprintf(path, sizeof path, "%s/merges.txt", a);
    assert_true(files_equal(path, bpe));
    cJSON *v = read_json(a, "vocab.json");
    assert_int_equal(cJSON_GetArraySize(v), 50265); /* len(AutoTokenizer("facebook/opt-125m")) */
    assert_int_equal(json_int(v, "<s>"), 0);
    assert_int_equal(json_int(v, "<pad>"), 1);
    assert_int_equal(json_int(v, "</s>"), 2);
    assert_int_equal(json_int(v, "<unk>"), 3);
    assert_int_equal(json_int(v, "."), 4); /* dict.txt's first line, GPT-2 id 13 */
    assert_int_equal(json_int(v, "Hello"), 31414);
    assert_int_equal(json_int(v, "\xc4\xa0the"), 5); /* "Ġthe" */
    assert_int_equal(json_int(v, "<|endoftext|>"), 50260);
    assert_int_equal(json_int(v, "madeupword0002"), 50263);
    assert_int_equal(json_int(v, "<mask>"), 50264);
    cJSON_Delete(v);
    cJSON *cfg = read_json(a, "tokenizer_config.json"), *map = read_json(a, "special_tokens_map.json");
    assert_string_equal(json_str(cfg, "tokenizer_class"), "GPT2Tokenizer");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token")));
    for (int k = 0; k < 2; k++) {
        const cJSON *o = k ? cfg : map;
        assert_string_equal(json_str(o, "bos_token"), "</s>");
        assert_string_equal(json_str(o, "eos_token"), "</s>");
        assert_string_equal(json_str(o, "pad_token"), "<pad>");
        assert_string_equal(json_str(o, "unk_token"), "<unk>");
    }
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    /* saving what was loaded from the saved files gives the same files */
    save_tok(tok, b);
    dz_tokenizer_free(tok);
    const char *names[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"};
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s", a, names[k]);
        snprintf(path2, sizeof path2, "%s/%s", b, names[k]);
        assert_true(files_equal(path, path2));
    }

    /* GPT-2 ids: vocab.json is encoder.json's mapping, merges.txt is vocab.bpe */
    tok = load_ok(enc);
    save_tok(tok, a); /* over the OPT files */
    dz_tokenizer_free(tok);
    tok = load_ok(a);
    assert_int_equal(dz_tokenizer_bos(tok), -1);
    assert_int_equal(dz_tokenizer_eos(tok), 50256);
    expect_golden(tok, "gpt2", 0);
    dz_tokenizer_free(tok);
    snprintf(path, sizeof path, "%s/merges.txt", a);
    assert_true(files_equal(path, bpe));
    v = read_json(a, "vocab.json");
    char *enc_text;
    size_t elen;
    dz_error err;
    assert_int_equal(dz_read_file(enc, &enc_text, &elen, &err), DZ_OK);
    cJSON *want = cJSON_Parse(enc_text);
    free(enc_text);
    assert_true(cJSON_Compare(v, want, 1));
    cJSON_Delete(v);
    cJSON_Delete(want);
    cfg = read_json(a, "tokenizer_config.json");
    assert_string_equal(json_str(cfg, "eos_token"), "<|endoftext|>");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token")));
    assert_null(cJSON_GetObjectItemCaseSensitive(cfg, "pad_token"));
    cJSON_Delete(cfg);

    /* llama2.c: tokenizer.bin, byte for byte */
    {
        dz_error e2 = {0};
        assert_int_equal(dz_tokenizer_load(tok512, 512, &tok, &e2), DZ_OK);
        save_tok(tok, b);
        dz_tokenizer_free(tok);
        snprintf(path, sizeof path, "%s/tokenizer.bin", b);
        assert_true(files_equal(path, tok512));
        unlink(path);
    }

    /* a folder that cannot be made */
    tok = load_ok(enc);
    snprintf(path, sizeof path, "%s/no/such/parent", s.dir);
    assert_int_equal(dz_tokenizer_save_hf(tok, path, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    dz_tokenizer_free(tok);

    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "%s/%s", d ? b : a, names[k]);
            unlink(path);
        }
    rmdir(a);
    rmdir(b);
    const char *none[] = {NULL};
    scratch_free(&s, none);
}

static void malformed_files_fail_with_their_name(void **state) {
    (void)state;
    size_t elen;
    char *enc_text = read_asset("gpt2-bpe/encoder.json", &elen);
    scratch s;
    scratch_make(&s);
    char p[600];

    /* missing folder / files */
    snprintf(p, sizeof p, "%s/nope", s.dir);
    expect_load_error(p, 0, DZ_ERR_IO, "nope", NULL);
    expect_load_error(s.dir, 0, DZ_ERR_IO, s.dir, "no tokenizer files");
    snprintf(p, sizeof p, "%s/encoder.json", s.dir);
    expect_load_error(p, 0, DZ_ERR_IO, "encoder.json", NULL);

    /* malformed JSON, with its line */
    scratch_write_str(&s, "vocab.bpe", "#version: 0.2\n");
    static const bad_file encoders[] = {
        {"encoder.json", "{\"a\": 0,\n \"b\": }\n", "encoder.json:2", NULL},
        {"encoder.json", "[1, 2]", "encoder.json", "object"},
        {"encoder.json", "{\"a\": 0, \"b\": \"one\"}", "encoder.json", "\"b\""},
        {"encoder.json", "{\"a\": 0, \"b\": 1.5}", "encoder.json", "\"b\""},
        {"encoder.json", "{\"a\": 0, \"b\": 0}", "encoder.json", "twice"},
        {"encoder.json", "{\"a\": 0}", "encoder.json", "byte 0x00"}, /* byte-level BPE needs all 256 bytes */
    };
    expect_bad_files(&s, encoders, sizeof encoders / sizeof encoders[0]);

    /* merges: a line without exactly two symbols, unknown symbols, unknown merge result */
    scratch_write(&s, "encoder.json", enc_text, elen);
    static const bad_file merges[] = {
        {"vocab.bpe", "#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 a b\n", "vocab.bpe:3", "two symbols"},
        {"vocab.bpe", "#version: 0.2\n\xc4\xa0 t\nonlyone\n", "vocab.bpe:3", "two symbols"},
        {"vocab.bpe", "#version: 0.2\n\n\xc4\xa0 t\n", "vocab.bpe:2", "two symbols"},
        {"vocab.bpe", "#version: 0.2\n\xc4\xa0 t\nzzqqzzqq t\n", "vocab.bpe:3", "zzqqzzqq"},
        {"vocab.bpe", "#version: 0.2\n\xc4\xa0the \xc4\xa0the\n", "vocab.bpe:2", "merged"},
    };
    expect_bad_files(&s, merges, sizeof merges / sizeof merges[0]);

    /* dict.txt: malformed line, an id GPT-2 does not have; through the folder route */
    size_t blen;
    char *bpe_text = read_asset("gpt2-bpe/vocab.bpe", &blen);
    scratch_write(&s, "vocab.bpe", bpe_text, blen);
    free(bpe_text);
    static const bad_file dicts[] = {
        {"dict.txt", "13 850314647\nbadline\n", "dict.txt:2", NULL},
        {"dict.txt", "13 850314647\n262 12 extra\n", "dict.txt:2", NULL},
        {"dict.txt", "13 5\n99999 5\n", "dict.txt:2", "99999"},
        {"dict.txt", "13 5\n13 5\n", "dict.txt:2", "twice"},
    };
    expect_bad_files(&s, dicts, sizeof dicts / sizeof dicts[0]);
    scratch_write_str(&s, "dict.txt", "13 5\n262 7 #fairseq:overwrite\nmadeupword0000 0\n");
    dz_tokenizer *tok = load_ok(s.dir); /* well-formed: "." (13) -> 4, " the" (262) -> 5, others <unk> */
    assert_int_equal(dz_tokenizer_vocab_size(tok), 6); /* madeupword0000 (6) is never produced */
    int ids[8], want[] = {2, 4, 5, 4, 3};
    assert_int_equal(dz_tokenizer_encode(tok, ". the.x", 1, ids, 8, NULL), 5);
    assert_memory_equal(ids, want, sizeof want);
    char buf[32];
    assert_string_equal(dz_tokenizer_decode(tok, -1, 6, buf, sizeof buf), "madeupword0000");
    dz_tokenizer_free(tok);

    free(enc_text);
    const char *names[] = {"encoder.json", "vocab.bpe", "dict.txt", NULL};
    scratch_free(&s, names);
}

typedef struct shared_encode {
    const dz_tokenizer *tok;
    atomic_int bad;
} shared_encode;

static void encode_one(void *ctx, int rep, int thread) {
    shared_encode *s = ctx;
    int i = rep % G.count, want[4096], got[4096];
    int nw = golden_ids(&G, i, "opt", want, 4096);
    int ng = dz_tokenizer_encode(s->tok, G.text[i], 1, got, 4096, NULL);
    if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got) != 0) atomic_fetch_add(&s->bad, 1);
}

/* Encoding keeps no state in the tokenizer: threads sharing one give the golden ids. */
static void shared_tokenizer_across_threads(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe");
    need_golden();
    dz_tokenizer *tok = load_ok(path);
    shared_encode s = {.tok = tok, .bad = 0};
    assert_int_equal(dz_parallel_set_threads(4, NULL), DZ_OK);
    dz_parallel_for_dynamic(4 * G.count, encode_one, &s);
    assert_int_equal(dz_parallel_set_threads(0, NULL), DZ_OK);
    assert_int_equal(atomic_load(&s.bad), 0);
    dz_tokenizer_free(tok);
}

static void encode_speed_sst2_train(void **state) {
    (void)state;
    char path[4096];
    test_asset_path(path, sizeof path, "gpt2-bpe");
    encode_speed_sst2(load_ok(path), "GPT-2/OPT");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt2_ids_match_hf),
        cmocka_unit_test(opt_ids_match_fairseq_mapping),
        cmocka_unit_test(decode_round_trips),
        cmocka_unit_test(encode_reports_full_length),
        cmocka_unit_test(vocab_json_and_merges_txt),
        cmocka_unit_test(save_hf_folders_load_back),
        cmocka_unit_test(malformed_files_fail_with_their_name),
        cmocka_unit_test(shared_tokenizer_across_threads),
        cmocka_unit_test(encode_speed_sst2_train),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, teardown));
}
