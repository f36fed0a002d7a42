/* distzo's GGUF export against llama.cpp itself. tools/check_gguf_llamacpp.py had distzo
 * export models from the assets (stories260K, SmolLM2-135M) as f32/f16/bf16/q8_0 .gguf files,
 * (and a stories260K run trained 2 steps, `distzo export --run`, trained here again with
 * dz_train and the same settings; and random Qwen2 and Llama-2-family models from `distzo init`
 * with the small tokenizer.json fixtures, made here again with the same calls) ran them in llama.cpp (llama-cpp-python, CPU) and recorded the file's size and CRC-32,
 * llama.cpp's prompt ids, its greedy continuation and its top logits at every position
 * (tests/data/gguf_llamacpp/<case>.json). Here distzo regenerates each file from the
 * assets (it must be the same file, byte for byte: size and CRC-32), loads it and checks:
 *  - its tokenizer (from the file's tokenizer.ggml.*) gives llama.cpp's prompt ids;
 *  - its forward over llama.cpp's ids gives llama.cpp's logits at the recorded ids within
 *    the type's tolerance below, and picks llama.cpp's greedy token at every generated
 *    position (for f16/q8_0, a pick may differ only on a near tie: within the tolerance).
 * Why the tolerances differ: both sides read the same weights, but llama.cpp's CPU matmul
 * rounds the activations to the weights' type's partner before the dot products (f16
 * weights: the activations to fp16; bf16: to bf16; q8_0 weights: the activations to q8_0 blocks of 32,
 * an 8-bit quantization per block), while distzo keeps the activations in fp32. f32 files
 * have no such rounding, only summation order. (llama.cpp ran with its K/V cache in f32,
 * not its default f16, so the cache adds nothing.) Needs $DISTZO_ASSETS. */
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

#include <cjson/cJSON.h>

#include "distzo/distzo.h"
#include "run/seedlog.h"
#include "temp_dir.h"
#include "assets.h"
#include "tokenizer_test_util.h"

/* |distzo - llama.cpp| <= atol + rtol * |llama.cpp| on every recorded logit (the top 20 ids
 * at every position). Measured maxima of |d| (llama-cpp-python 0.3.36, this machine):
 *   f32:  stories260K 9.5e-6 (trained 1.0e-5), SmolLM2 5.7e-5 (3.6e-6 of the logits' size):
 *         summation order only;
 *   f16:  stories260K 5.9e-3, SmolLM2 3.9e-2 (1.6e-3 relative): llama.cpp rounds the
 *         activations to fp16 for f16 matmuls;
 *   bf16: stories260K 6.6e-2, SmolLM2 0.25 (1.2e-2 relative): the activations to bf16;
 *   q8_0: stories260K 0.17, SmolLM2 0.73 (at a logit of 21.5; 4.3e-2 relative): llama.cpp
 *         quantizes the activations to q8_0 blocks for q8_0 matmuls. That this is all of it:
 *         smollm2_q8_0_as_f32 (the q8_0 file's weights converted to f32, run by llama.cpp with
 *         f32 matmuls) agrees with distzo on the q8_0 weights to 8.8e-5, and llama.cpp's q8_0
 *         run differs from its own f32 run of the same weights by the same 0.73.
 * Greedy picks: identical everywhere except one near tie of 32 in stories260K q8_0. */
typedef struct tolerance {
    const char *type;
    double atol, rtol;
} tolerance;

static const tolerance k_tol[] = {
    {"f32", 2e-4, 1e-4},
    {"f16", 0.05, 0.01},
    {"bf16", 0.2, 0.02},
    {"q8_0", 0.5, 0.03},
};

static void *read_all(const char *path, size_t *n) {
    char *p = NULL;
    dz_error err = {0};
    if (dz_read_file(path, &p, n, &err) != DZ_OK) fail_msg("%s", err.msg);
    return p;
}

static uint32_t file_crc32(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    static unsigned char chunk[1 << 20];
    uint32_t crc = 0;
    size_t got;
    *size = 0;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) crc = dz_crc32(crc, chunk, got), *size += got;
    fclose(f);
    return crc;
}

static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j) fail_msg("golden: no \"%s\"", key);
    return j;
}

static int *int_array(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < *n; i++) v[i] = cJSON_GetArrayItem(a, i)->valueint;
    return v;
}

/* The run `distzo train` made for the tool with these settings (dz_train: the same code). */
static void train_as_the_tool_did(const cJSON *t, const char *model, char *run, size_t cap) {
    static char data[512];
    test_asset_path(data, sizeof data, item(t, "data")->valuestring);
    dz_train_config c;
    dz_train_config_default(&c);
    c.model = model;
    c.data.train = data;
    c.data.test = NULL; /* the tool's --test only adds an evaluation at the end */
    c.data.template_ = item(t, "template")->valuestring;
    c.data.label_words = item(t, "label_words")->valuestring;
    c.optim.steps = item(t, "steps")->valueint;
    c.optim.lr = (float)item(t, "lr")->valuedouble;
    c.optim.eps = (float)item(t, "eps")->valuedouble;
    c.optim.batch = item(t, "batch")->valueint;
    c.data.train_examples = item(t, "train_examples")->valueint;
    c.data.dev_examples = item(t, "dev_examples")->valueint;
    c.optim.seed = (uint64_t)item(t, "seed")->valuedouble;
    c.data.seed = (uint64_t)item(t, "data_seed")->valuedouble;
    c.schedule.eval_every = 0;
    c.schedule.checkpoint_every = c.optim.steps;
    snprintf(run, cap, "%s/run", g_dir);
    c.out_dir = run;
    dz_train_result res;
    dz_error err = {0};
    if (dz_train(&c, 0, NULL, NULL, &res, &err) != DZ_OK) fail_msg("dz_train: %s", err.msg);
    assert_int_equal(res.steps_done, c.optim.steps);
}

/* The random model `distzo init` made for the tool (the same calls): preset, seed, layers and
 * a tokenizer of tests/data, written as a Hugging Face folder into dir. */
static void init_as_the_tool_did(const cJSON *init, char *dir, size_t cap) {
    dz_config cfg;
    dz_error err = {0};
    if (dz_config_preset(item(init, "preset")->valuestring, &cfg, &err) != DZ_OK) fail_msg("%s", err.msg);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(init, "layers");
    if (layers && layers->valueint) cfg.n_layers = layers->valueint;
    char tok_path[512];
    snprintf(tok_path, sizeof tok_path, "%s/%s", DZ_TEST_DATA, item(init, "tokenizer")->valuestring);
    snprintf(dir, cap, "%s/init", g_dir);
    dz_model *m = NULL;
    dz_tokenizer *tok = NULL;
    if (dz_tokenizer_load(tok_path, cfg.vocab_size, &tok, &err) != DZ_OK ||
        dz_model_init_random(&cfg, DZ_F32, (uint64_t)item(init, "seed")->valuedouble, 0.02f, &m, &err) != DZ_OK ||
        dz_model_save_hf(m, dir, &err) != DZ_OK || dz_tokenizer_save_hf(tok, dir, &err) != DZ_OK)
        fail_msg("init: %s", err.msg);
    dz_model_free(m);
    dz_tokenizer_free(tok);
}

/* Every row of the tokenizer's golden file (Hugging Face's ids), tokenized by distzo from the
 * exported file, against what the file's consumer does. llama.cpp may differ from Hugging Face
 * only where the tool could say why: text that NFC normalization changes (Qwen2's
 * tokenizer.json normalizes to NFC; llama.cpp's qwen2 tokenizer, and so a GGUF file, does
 * not: there distzo must give llama.cpp's ids), or a letter newer than llama.cpp's Unicode
 * tables (distzo's are Unicode 16, as Hugging Face's: not compared). Every other row: all
 * three agree. */
static void check_tokenize(const char *name, const cJSON *t, const dz_tokenizer *tok) {
    enum { CAP = 8192 };
    golden g;
    golden_load(&g, strchr(item(t, "golden")->valuestring, '/') + 1);
    assert_int_equal(g.count, item(t, "rows")->valueint);
    const cJSON **llama = calloc((size_t)g.count, sizeof *llama);
    int *want = malloc(CAP * sizeof *want), *got = malloc(CAP * sizeof *got);
    char *newer = calloc((size_t)g.count, 1);
    assert_non_null(llama);
    assert_non_null(newer);
    const cJSON *d;
    int n_differ = 0, n_nfc = 0, bad = 0;
    cJSON_ArrayForEach(d, item(t, "differ")) {
        const int row = item(d, "row")->valueint;
        const char *why = item(d, "why")->valuestring;
        assert_true(row >= 0 && row < g.count);
        if (!strcmp(why, "unexplained")) fail_msg("%s: llama.cpp differs on row %d (\"%.60s\")", name, row, g.text[row]);
        if (!strcmp(why, "nfc")) llama[row] = item(d, "ids"), n_nfc++;
        else newer[row] = 1;
        n_differ++;
    }
    for (int i = 0; i < g.count; i++) {
        if (newer[i]) continue;
        int nw = llama[i] ? cJSON_GetArraySize(llama[i]) : golden_ids(&g, i, "ids", want, CAP);
        for (int k = 0; llama[i] && k < nw && k < CAP; k++) want[k] = cJSON_GetArrayItem(llama[i], k)->valueint;
        dz_error err = {0};
        const int ng = dz_tokenizer_encode_flags(tok, g.text[i], DZ_ENCODE_BOS, got, CAP, &err);
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got))
            if (++bad <= 5) print_error("%s: row %d (\"%.60s\"): distzo %d ids, want %d (%s's)\n", name, i, g.text[i], ng,
                                        nw, llama[i] ? "llama.cpp" : "Hugging Face");
    }
    if (bad) fail_msg("%s: distzo's tokenizer from the exported file is wrong on %d of %d rows", name, bad, g.count);
    print_message("%s: %d golden rows: llama.cpp = Hugging Face on %d; of the other %d, %d NFC (distzo = llama.cpp "
                  "there), %d newer Unicode (not compared); distzo from the .gguf right on the rest\n", name, g.count, g.count - n_differ,
                  n_differ, n_nfc, n_differ - n_nfc);
    free(llama);
    free(newer);
    free(want);
    free(got);
    golden_free(&g);
}

static void check_case(const char *name) {
    char gpath[512], src[512], out[512];
    snprintf(gpath, sizeof gpath, "%s/gguf_llamacpp/%s.json", DZ_TEST_DATA, name);
    size_t n;
    char *text = read_all(gpath, &n);
    cJSON *g = cJSON_Parse(text);
    assert_non_null(g);
    const char *type = item(g, "type")->valuestring;
    const cJSON *init = cJSON_GetObjectItemCaseSensitive(g, "init");
    if (!init) test_asset_path(src, sizeof src, item(g, "source")->valuestring);
    const tolerance *tol = NULL;
    for (size_t k = 0; k < sizeof k_tol / sizeof k_tol[0]; k++)
        if (!strcmp(k_tol[k].type, type)) tol = &k_tol[k];
    assert_non_null(tol);

    assert_int_equal(dz_temp_dir_make("dz_gguf_llamacpp_"), 0);
    snprintf(out, sizeof out, "%s/%s.gguf", g_dir, name);
    dz_error err = {0};
    char run[600];
    const cJSON *train = cJSON_GetObjectItemCaseSensitive(g, "train");
    if (train) train_as_the_tool_did(train, src, run, sizeof run);
    if (init) init_as_the_tool_did(init, src, sizeof src);
    /* "via": exported in that type first, then that file converted to `type` */
    const cJSON *via = cJSON_GetObjectItemCaseSensitive(g, "via");
    char first[600];
    snprintf(first, sizeof first, "%s/via.gguf", g_dir);
    if (via) {
        const dz_export_spec s1 = {.model = src, .out = first, .format = DZ_EXPORT_GGUF, .gguf_type = via->valuestring};
        if (dz_export_model(&s1, &err) != DZ_OK) fail_msg("%s", err.msg);
    }
    const dz_export_spec spec = {
        .run_dir = train ? run : NULL, .model = train ? NULL : via ? first : src, .out = out,
        .format = DZ_EXPORT_GGUF, .gguf_type = type};
    if (dz_export_model(&spec, &err) != DZ_OK) fail_msg("%s", err.msg);
    if (via) unlink(first);
    size_t size;
    const uint32_t crc = file_crc32(out, &size);
    if (size != (size_t)item(g, "file_bytes")->valuedouble || crc != (uint32_t)item(g, "file_crc32")->valuedouble)
        fail_msg("%s: the export (%zu bytes, crc %08x) is not the file llama.cpp ran (%.0f bytes, crc %08x): "
                 "rerun tools/check_gguf_llamacpp.py", name, size, crc, item(g, "file_bytes")->valuedouble,
                 (uint32_t)item(g, "file_crc32")->valuedouble);
    dz_model *m = NULL;
    dz_tokenizer *tok = NULL;
    if (dz_model_load(out, DZ_F32, &m, &err) != DZ_OK || dz_tokenizer_load(out, 0, &tok, &err) != DZ_OK)
        fail_msg("%s", err.msg);
    const int vocab = dz_model_config(m)->vocab_size;
    const dz_weight_source w = dz_model_weights(m);

    const cJSON *prompts = item(g, "prompts"), *p;
    double worst = 0, worst_rel = 0;
    int picks = 0, exact = 0;
    cJSON_ArrayForEach(p, prompts) {
        int np, nids;
        int *want = int_array(item(p, "prompt_ids"), &np), *ids = int_array(item(p, "ids"), &nids);
        int got[512];
        const unsigned flags = DZ_ENCODE_BOS | (cJSON_IsTrue(item(p, "special")) ? DZ_ENCODE_SPECIAL : 0);
        const int ng = dz_tokenizer_encode_flags(tok, item(p, "text")->valuestring, flags, got, 512, &err);
        if (ng != np || memcmp(got, want, (size_t)np * sizeof *got) != 0)
            fail_msg("%s: \"%s\": distzo's %d ids are not llama.cpp's %d", name, item(p, "text")->valuestring, ng, np);
        const cJSON *top = item(p, "top");
        const int npos = cJSON_GetArraySize(top);
        assert_true(npos <= nids);
        dz_forward *f = NULL;
        if (dz_forward_create(m, 1, npos, 0, &f, &err) != DZ_OK) fail_msg("%s", err.msg);
        if (dz_forward_run(f, &w, ids, NULL, 1, npos, 0, &err) != DZ_OK) fail_msg("%s", err.msg);
        int *rows = malloc((size_t)npos * sizeof *rows);
        float *logits = malloc((size_t)npos * (size_t)vocab * sizeof *logits);
        assert_non_null(rows);
        assert_non_null(logits);
        for (int i = 0; i < npos; i++) rows[i] = i;
        if (dz_forward_logits(f, &w, rows, npos, logits, &err) != DZ_OK) fail_msg("%s", err.msg);
        for (int i = 0; i < npos; i++) {
            const float *row = logits + (size_t)i * (size_t)vocab;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetArrayItem(top, i)) {
                const int id = cJSON_GetArrayItem(e, 0)->valueint;
                const double ref = cJSON_GetArrayItem(e, 1)->valuedouble, d = fabs((double)row[id] - ref);
                if (d > worst) worst = d;
                if (d / fmax(fabs(ref), 1.0) > worst_rel) worst_rel = d / fmax(fabs(ref), 1.0);
                if (d > tol->atol + tol->rtol * fabs(ref))
                    fail_msg("%s: position %d id %d: distzo %.6f, llama.cpp %.6f (|d| %.3g > %.3g + %.3g |ref|)", name, i,
                             id, row[id], ref, d, tol->atol, tol->rtol);
            }
            if (i + 1 >= np && i + 1 < nids) { /* a greedy pick of llama.cpp's */
                int best = 0;
                for (int v = 1; v < vocab; v++)
                    if (row[v] > row[best]) best = v;
                picks++;
                if (best == ids[i + 1]) exact++;
                else if (!strcmp(type, "f32") || row[best] - row[ids[i + 1]] > tol->atol + tol->rtol * fabs(row[best]))
                    fail_msg("%s: position %d: distzo picks %d (%.5f), llama.cpp picked %d (distzo %.5f)", name, i, best,
                             row[best], ids[i + 1], row[ids[i + 1]]);
            }
        }
        free(rows);
        free(logits);
        free(want);
        free(ids);
        dz_forward_free(f);
    }
    assert_true(picks > 0);
    const cJSON *tokenize = cJSON_GetObjectItemCaseSensitive(g, "tokenize");
    if (tokenize) check_tokenize(name, tokenize, tok);
    print_message("%s: max |distzo - llama.cpp| logit %.3g (relative to max(|logit|, 1): %.3g); greedy picks %d/%d "
                  "identical\n", name, worst, worst_rel, exact, picks);
    dz_tokenizer_free(tok);
    dz_model_free(m);
    cJSON_Delete(g);
    free(text);
    dz_temp_dir_remove();
}

static void stories260k_trained_f32(void **state) { (void)state, check_case("stories260k_trained_f32"); }
static void stories260k_f32(void **state) { (void)state, check_case("stories260k_f32"); }
static void stories260k_f16(void **state) { (void)state, check_case("stories260k_f16"); }
static void stories260k_bf16(void **state) { (void)state, check_case("stories260k_bf16"); }
static void stories260k_q8_0(void **state) { (void)state, check_case("stories260k_q8_0"); }
static void smollm2_f32(void **state) { (void)state, check_case("smollm2_f32"); }
static void smollm2_f16(void **state) { (void)state, check_case("smollm2_f16"); }
static void smollm2_bf16(void **state) { (void)state, check_case("smollm2_bf16"); }
static void smollm2_q8_0(void **state) { (void)state, check_case("smollm2_q8_0"); }
static void smollm2_q8_0_as_f32(void **state) { (void)state, check_case("smollm2_q8_0_as_f32"); }
static void qwen2_tiny_f32(void **state) { (void)state, check_case("qwen2_tiny_f32"); }
static void llama_tiny_spm_f32(void **state) { (void)state, check_case("llama_tiny_spm_f32"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stories260k_trained_f32),
        cmocka_unit_test(stories260k_f32), cmocka_unit_test(stories260k_f16), cmocka_unit_test(stories260k_bf16),
        cmocka_unit_test(stories260k_q8_0),
        cmocka_unit_test(smollm2_f32),     cmocka_unit_test(smollm2_f16),     cmocka_unit_test(smollm2_bf16),
        cmocka_unit_test(smollm2_q8_0),
        cmocka_unit_test(smollm2_q8_0_as_f32),
        cmocka_unit_test(qwen2_tiny_f32),  cmocka_unit_test(llama_tiny_spm_f32),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
