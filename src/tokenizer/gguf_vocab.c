/* The tokenizer of a GGUF file: its tokenizer.ggml.* metadata (llama.cpp's keys) turned
 * into a dz_vocab_spec for dz_tokenizer_from_vocab, the constructor tokenizer.json uses. */
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "tokenizer/build.h"
#include "tokenizer/internal.h"

/* A NUL-terminated copy of a GGUF string, or NULL when out of memory. */
static char *copy_str(dz_gguf_str s) {
    char *c = malloc((size_t)s.len + 1);
    if (c) memcpy(c, s.s, (size_t)s.len), c[s.len] = '\0';
    return c;
}

/* A string array as NUL-terminated copies (*out[count]); 0 or -1 out of memory. */
static int string_array(const dz_gguf_kv *kv, char ***out) {
    dz_gguf_str *s = malloc((size_t)(kv->count ? kv->count : 1) * sizeof *s);
    char **c = calloc((size_t)(kv->count ? kv->count : 1), sizeof *c);
    int bad = !s || !c;
    if (!bad) dz_gguf_array_strings(kv, s);
    for (uint64_t i = 0; !bad && i < kv->count; i++) bad = !(c[i] = copy_str(s[i]));
    free(s);
    *out = c;
    return bad ? -1 : 0;
}

static void free_strings(char **s, uint64_t n) {
    for (uint64_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

/* An optional id key (-1 when absent). */
static dz_status optional_id(const dz_gguf *g, const char *key, int *id, dz_error *err) {
    int32_t v = -1;
    *id = -1;
    dz_status st = dz_gguf_get_i32(g, key, &v, err);
    if (st == DZ_ERR_NOT_FOUND) return DZ_OK;
    if (st == DZ_OK) *id = v;
    return st;
}

static dz_status optional_bool(const dz_gguf *g, const char *key, int *v, dz_error *err) {
    dz_status st = dz_gguf_get_bool(g, key, v, err);
    return st == DZ_ERR_NOT_FOUND ? DZ_OK : st;
}

/* tokenizer.chat_template, copied; NULL when absent. */
static dz_status chat_template(const dz_gguf *g, const char *path, char **out, dz_error *err) {
    *out = NULL;
    if (!dz_gguf_find_kv(g, "tokenizer.chat_template")) return DZ_OK;
    dz_gguf_str s;
    dz_status st = dz_gguf_get_string(g, "tokenizer.chat_template", &s, err);
    if (st == DZ_OK && !(*out = copy_str(s))) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    return st;
}

dz_status dz_tokenizer_from_gguf(const dz_gguf *g, dz_tokenizer **out, dz_error *err) {
    *out = NULL;
    const char *path = g->path ? g->path : "<memory>";
    dz_vocab_spec spec = dz_vocab_spec_init(path);
    dz_gguf_str model_s, pre_s = {"default", 7};
    const dz_gguf_kv *tokens_kv = NULL, *merges_kv = NULL, *types_kv = NULL, *scores_kv = NULL;
    char *model = NULL, *pre = NULL, **tokens = NULL, **merges = NULL, *chat = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    dz_status st = dz_gguf_get_string(g, "tokenizer.ggml.model", &model_s, err);
    if (st == DZ_OK) st = dz_gguf_get_array(g, "tokenizer.ggml.tokens", DZ_GGUF_STRING, &tokens_kv, err);
    if (st == DZ_OK && dz_gguf_find_kv(g, "tokenizer.ggml.pre"))
        st = dz_gguf_get_string(g, "tokenizer.ggml.pre", &pre_s, err);
    if (st == DZ_OK && dz_gguf_find_kv(g, "tokenizer.ggml.merges"))
        st = dz_gguf_get_array(g, "tokenizer.ggml.merges", DZ_GGUF_STRING, &merges_kv, err);
    if (st == DZ_OK && dz_gguf_find_kv(g, "tokenizer.ggml.token_type"))
        st = dz_gguf_get_array(g, "tokenizer.ggml.token_type", -1, &types_kv, err);
    if (st == DZ_OK && dz_gguf_find_kv(g, "tokenizer.ggml.scores"))
        st = dz_gguf_get_array(g, "tokenizer.ggml.scores", -1, &scores_kv, err);
    if (st == DZ_OK && tokens_kv->count >= (1u << 24))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: tokenizer.ggml.tokens: %llu tokens", path,
                     (unsigned long long)tokens_kv->count);
    const uint64_t n = st == DZ_OK ? tokens_kv->count : 0;
    if (st == DZ_OK && ((types_kv && types_kv->count != n) || (scores_kv && scores_kv->count != n)))
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: tokenizer.ggml.%s has %llu entries for %llu tokens", path,
                     types_kv && types_kv->count != n ? "token_type" : "scores",
                     (unsigned long long)(types_kv && types_kv->count != n ? types_kv->count : scores_kv->count),
                     (unsigned long long)n);
    if (st == DZ_OK) {
        model = copy_str(model_s);
        pre = copy_str(pre_s);
        types = types_kv ? malloc((size_t)(n ? n : 1) * sizeof *types) : NULL;
        scores = scores_kv ? malloc((size_t)(n ? n : 1) * sizeof *scores) : NULL;
        if (!model || !pre || (types_kv && !types) || (scores_kv && !scores) || string_array(tokens_kv, &tokens) ||
            (merges_kv && string_array(merges_kv, &merges)))
            st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    for (uint64_t i = 0; st == DZ_OK && i < n; i++) {
        if (types) types[i] = (int32_t)dz_gguf_array_number(types_kv, i);
        if (scores) scores[i] = (float)dz_gguf_array_number(scores_kv, i);
    }
    int add_bos = !strcmp(model ? model : "", "llama"); /* llama.cpp's default per model */
    if (st == DZ_OK) st = optional_id(g, "tokenizer.ggml.bos_token_id", &spec.bos, err);
    if (st == DZ_OK) st = optional_id(g, "tokenizer.ggml.eos_token_id", &spec.eos, err);
    if (st == DZ_OK) st = optional_id(g, "tokenizer.ggml.padding_token_id", &spec.pad, err);
    if (st == DZ_OK) st = optional_id(g, "tokenizer.ggml.unknown_token_id", &spec.unk, err);
    if (st == DZ_OK) st = optional_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, err);
    if (st == DZ_OK) st = chat_template(g, path, &chat, err);
    if (st == DZ_OK) {
        spec.chat_template = chat;
        spec.model = model;
        spec.pre = pre;
        spec.tokens = (const char *const *)tokens;
        spec.n_tokens = (int)n;
        spec.types = types;
        spec.scores = scores;
        spec.merges = (const char *const *)merges;
        spec.n_merges = merges_kv ? (int)merges_kv->count : 0;
        spec.add_bos = add_bos && spec.bos >= 0;
        st = dz_tokenizer_from_vocab(&spec, out, err);
    }
    free(model);
    free(pre);
    free(chat);
    free(types);
    free(scores);
    free_strings(tokens, tokens_kv ? tokens_kv->count : 0);
    free_strings(merges, merges_kv ? merges_kv->count : 0);
    return st;
}

dz_status dz_gguf_tokenizer_load(const char *path, dz_tokenizer **out, dz_error *err) {
    dz_gguf g;
    dz_status st = dz_gguf_open(path, &g, err);
    if (st != DZ_OK) return st;
    st = dz_tokenizer_from_gguf(&g, out, err);
    dz_gguf_close(&g);
    return st;
}
