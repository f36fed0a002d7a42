/* Hugging Face tokenizers' tokenizer.json (byte-level BPE) and tokenizer_config.json,
 * turned into a dz_vocab_spec for dz_tokenizer_from_vocab. Anything that would change the
 * ids and is not implemented (a normalizer, another pre-tokenizer or pattern, stripping
 * added tokens, BPE dropout...) is refused naming the file and the field. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "tokenizer/build.h"
#include "tokenizer/internal.h"

typedef struct hf_load {
    const char *path;
    dz_error *err;
    const char **tokens;
    int32_t *types;
    uint8_t *strip;
    const char **left, **right;
    int n_tokens, n_merges;
    char *chat_template; /* tokenizer_config.json's, or chat_template.jinja's */
} hf_load;

static dz_status bad(hf_load *L, const char *field, const char *what) {
    return dz_fail(L->err, DZ_ERR_FORMAT, "%s: %s: %s", L->path, field, what);
}

static dz_status unsupported(hf_load *L, const char *field, const char *what) {
    return dz_fail(L->err, DZ_ERR_UNSUPPORTED, "%s: %s: %s is not supported", L->path, field, what);
}

static dz_status parse_json(const char *path, cJSON **out, dz_error *err) {
    char *text;
    size_t len;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*out) {
        int line = 1;
        for (const char *p = text; end && p < end; p++) line += *p == '\n';
        free(text);
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: malformed JSON", path, line);
    }
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return dz_fail(err, DZ_ERR_FORMAT, "%s: expected a JSON object", path);
    }
    return DZ_OK;
}

static int is_null_or_empty(const cJSON *v) {
    return !v || cJSON_IsNull(v) || (cJSON_IsString(v) && v->valuestring[0] == '\0');
}

static int as_id(const cJSON *v) {
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    return d >= 0 && d < (1 << 24) && d == (double)(int)d ? (int)d : -1;
}

static int flag(const cJSON *obj, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key)); }

static const char *type_of(const cJSON *obj) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* model.vocab and added_tokens -> L->tokens/types (ids are the array index). */
static dz_status read_vocab(hf_load *L, const cJSON *vocab, const cJSON *added) {
    if (!cJSON_IsObject(vocab)) return bad(L, "model.vocab", "expected an object of token -> id");
    int max_id = -1;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int id = as_id(e);
        if (id < 0) return bad(L, "model.vocab", "an id is not an integer in [0, 2^24)");
        if (id > max_id) max_id = id;
    }
    if (added && !cJSON_IsArray(added)) return bad(L, "added_tokens", "expected an array");
    for (const cJSON *a = added ? added->child : NULL; a; a = a->next) {
        int id = as_id(cJSON_GetObjectItemCaseSensitive(a, "id"));
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (id < 0 || !cJSON_IsString(content)) return bad(L, "added_tokens", "an entry lacks an integer id or a content string");
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return bad(L, "model.vocab", "no tokens");
    L->n_tokens = max_id + 1;
    L->tokens = calloc((size_t)L->n_tokens, sizeof *L->tokens);
    L->types = malloc((size_t)L->n_tokens * sizeof *L->types);
    L->strip = calloc((size_t)L->n_tokens, 1);
    if (!L->tokens || !L->types || !L->strip) return dz_fail(L->err, DZ_ERR_NOMEM, "%s: out of memory", L->path);
    for (int i = 0; i < L->n_tokens; i++) L->types[i] = DZ_TOKEN_NORMAL;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int id = as_id(e);
        if (L->tokens[id]) {
            dz_fail(L->err, DZ_ERR_FORMAT, "%s: model.vocab: token \"%.80s\": id %d is used twice", L->path, e->string, id);
            return DZ_ERR_FORMAT;
        }
        L->tokens[id] = e->string;
    }
    for (const cJSON *a = added ? added->child : NULL; a; a = a->next) {
        int id = as_id(cJSON_GetObjectItemCaseSensitive(a, "id"));
        const char *content = cJSON_GetObjectItemCaseSensitive(a, "content")->valuestring;
        if (flag(a, "single_word")) {
            dz_fail(L->err, DZ_ERR_UNSUPPORTED, "%s: added_tokens: \"%.80s\": single_word is not supported", L->path,
                    content);
            return DZ_ERR_UNSUPPORTED;
        }
        L->strip[id] = (uint8_t)((flag(a, "lstrip") ? DZ_STRIP_LEFT : 0) | (flag(a, "rstrip") ? DZ_STRIP_RIGHT : 0));
        L->tokens[id] = content; /* the added token's text wins over a model.vocab entry of that id */
        L->types[id] = flag(a, "special") ? DZ_TOKEN_CONTROL : DZ_TOKEN_USER_DEFINED;
    }
    return DZ_OK;
}

static dz_status read_merges(hf_load *L, const cJSON *merges) {
    if (!cJSON_IsArray(merges)) return bad(L, "model.merges", "expected an array");
    int n = cJSON_GetArraySize(merges);
    L->left = calloc((size_t)n + 1, sizeof *L->left);
    L->right = calloc((size_t)n + 1, sizeof *L->right);
    if (!L->left || !L->right) return dz_fail(L->err, DZ_ERR_NOMEM, "%s: out of memory", L->path);
    int i = 0, pairs = -1;
    for (const cJSON *m = merges->child; m; m = m->next, i++) {
        int is_pair = cJSON_IsArray(m);
        if (pairs >= 0 && pairs != is_pair) return bad(L, "model.merges", "mixes \"a b\" strings and [a, b] pairs");
        pairs = is_pair;
        if (is_pair) {
            const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
            if (cJSON_GetArraySize(m) != 2 || !cJSON_IsString(a) || !cJSON_IsString(b)) {
                dz_fail(L->err, DZ_ERR_FORMAT, "%s: model.merges[%d]: expected a pair of strings", L->path, i);
                return DZ_ERR_FORMAT;
            }
            L->left[i] = a->valuestring;
            L->right[i] = b->valuestring;
        } else if (cJSON_IsString(m)) {
            L->left[i] = m->valuestring;
        } else {
            dz_fail(L->err, DZ_ERR_FORMAT, "%s: model.merges[%d]: expected \"a b\" or [a, b]", L->path, i);
            return DZ_ERR_FORMAT;
        }
    }
    L->n_merges = n;
    if (pairs != 1) {
        free(L->right);
        L->right = NULL;
    }
    return DZ_OK;
}

static dz_status check_model(hf_load *L, const cJSON *model, dz_vocab_spec *spec) {
    if (!cJSON_IsObject(model)) return bad(L, "model", "missing");
    if (strcmp(type_of(model), "BPE") != 0) return unsupported(L, "model.type", type_of(model));
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!(is_null_or_empty(dropout) || (cJSON_IsNumber(dropout) && dropout->valuedouble == 0)))
        return unsupported(L, "model.dropout", "BPE dropout");
    if (!is_null_or_empty(cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix")))
        return unsupported(L, "model.continuing_subword_prefix", "a subword prefix");
    if (!is_null_or_empty(cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix")))
        return unsupported(L, "model.end_of_word_suffix", "a word suffix");
    spec->byte_fallback = flag(model, "byte_fallback");
    spec->ignore_merges = flag(model, "ignore_merges");
    spec->fuse_unk = flag(model, "fuse_unk");
    return DZ_OK;
}

static int is_bytelevel(const cJSON *p, int use_regex) {
    if (strcmp(type_of(p), "ByteLevel") != 0) return 0;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
    return (r ? cJSON_IsTrue(r) : 1) == use_regex; /* tokenizers' default: use_regex true */
}

/* ByteLevel(use_regex); Sequence[Split(known regex, Isolated), ByteLevel(no regex)];
 * Sequence[Digits(individual_digits), ByteLevel(use_regex)]. */
static dz_status read_pretokenizer(hf_load *L, const cJSON *pre, dz_pretok *out) {
    *out = (dz_pretok){DZ_PATTERN_GPT2, 0, 0};
    if (!cJSON_IsObject(pre)) return unsupported(L, "pre_tokenizer", "none (byte-level BPE needs ByteLevel)");
    const cJSON *last = pre, *first = NULL;
    if (!strcmp(type_of(pre), "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
            return unsupported(L, "pre_tokenizer.pretokenizers", "a sequence other than [Split or Digits, ByteLevel]");
        first = cJSON_GetArrayItem(list, 0);
        last = cJSON_GetArrayItem(list, 1);
    }
    int split = first && !strcmp(type_of(first), "Split");
    if (!is_bytelevel(last, !split))
        return unsupported(L, first ? "pre_tokenizer.pretokenizers[1]" : "pre_tokenizer",
                           split ? "anything but ByteLevel with use_regex false after Split"
                                 : "anything but ByteLevel with use_regex true");
    out->add_prefix_space = flag(last, "add_prefix_space");
    if (first && out->add_prefix_space)
        return unsupported(L, "pre_tokenizer.pretokenizers[1].add_prefix_space", "a prefix space after a split");
    if (!first) return DZ_OK;
    if (!strcmp(type_of(first), "Digits")) {
        if (!flag(first, "individual_digits"))
            return unsupported(L, "pre_tokenizer.pretokenizers[0].individual_digits", "false (digit runs)");
        out->split_digits = 1;
        return DZ_OK;
    }
    if (!split) return unsupported(L, "pre_tokenizer.pretokenizers[0].type", type_of(first));
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(first, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(first, "behavior");
    if (!cJSON_IsString(re) || dz_pattern_from_regex(re->valuestring, &out->pattern) != 0) {
        dz_fail(L->err, DZ_ERR_UNSUPPORTED,
                "%s: pre_tokenizer.pretokenizers[0].pattern.Regex: \"%.200s\" is not a supported pattern "
                "(GPT-2's, Llama-3's or Qwen2's exactly)",
                L->path, cJSON_IsString(re) ? re->valuestring : "(not a Regex string)");
        return DZ_ERR_UNSUPPORTED;
    }
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0 || flag(first, "invert"))
        return unsupported(L, "pre_tokenizer.pretokenizers[0].behavior", "anything but Isolated, not inverted");
    return DZ_OK;
}

static int is_string(const cJSON *obj, const char *key, const char *want) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

#define METASPACE "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* SentencePiece-style BPE: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")] with no
 * pre-tokenizer (Llama-2, TinyLlama), Replace(" ", "▁") alone (Gemma), or no normalizer and pre_tokenizer Metaspace
 * (Mistral, newer Llama-2 files). Sets spec->char_bpe; 0 when the file is neither. */
static dz_status read_sentencepiece_style(hf_load *L, const cJSON *norm, const cJSON *pre, dz_vocab_spec *spec) {
    if (cJSON_IsObject(norm) && !strcmp(type_of(norm), "NFC")) { /* Qwen2: NFC before a byte-level pipeline */
        spec->nfc = 1;
        return DZ_OK;
    }
    if (cJSON_IsObject(norm) && !strcmp(type_of(norm), "Replace")) { /* Gemma: spaces replaced, nothing prepended */
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(norm, "pattern");
        if (!is_string(pat, "String", " ") || !is_string(norm, "content", METASPACE))
            return unsupported(L, "normalizer", "a Replace other than \" \" -> U+2581");
        if (pre && !cJSON_IsNull(pre)) return unsupported(L, "pre_tokenizer", "a pre-tokenizer after Replace");
        spec->char_bpe = 1;
        spec->prepend = DZ_PREPEND_NEVER;
        return DZ_OK;
    }
    if (norm && !cJSON_IsNull(norm)) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
        const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(b, "pattern");
        if (strcmp(type_of(norm), "Sequence") != 0 || cJSON_GetArraySize(list) != 2 || strcmp(type_of(a), "Prepend") ||
            !is_string(a, "prepend", METASPACE) || strcmp(type_of(b), "Replace") || !is_string(pat, "String", " ") ||
            !is_string(b, "content", METASPACE))
            return unsupported(L, "normalizer", type_of(norm)[0] ? type_of(norm) : "this normalizer");
        if (pre && !cJSON_IsNull(pre)) return unsupported(L, "pre_tokenizer", "a pre-tokenizer after Prepend + Replace");
        spec->char_bpe = 1;
        spec->prepend = DZ_PREPEND_NORMALIZER;
        return DZ_OK;
    }
    if (!cJSON_IsObject(pre) || strcmp(type_of(pre), "Metaspace") != 0) return DZ_OK;
    if (!is_string(pre, "replacement", METASPACE)) return unsupported(L, "pre_tokenizer.replacement", "anything but U+2581");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(pre, "prepend_scheme");
    if (cJSON_IsString(scheme)) {
        if (!strcmp(scheme->valuestring, "first")) spec->prepend = DZ_PREPEND_FIRST;
        else if (!strcmp(scheme->valuestring, "always")) spec->prepend = DZ_PREPEND_ALWAYS;
        else if (!strcmp(scheme->valuestring, "never")) spec->prepend = DZ_PREPEND_NEVER;
        else return unsupported(L, "pre_tokenizer.prepend_scheme", scheme->valuestring);
    } else spec->prepend = flag(pre, "add_prefix_space") ? DZ_PREPEND_ALWAYS : DZ_PREPEND_NEVER; /* older files */
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(pre, "split");
    spec->metaspace_split = split ? cJSON_IsTrue(split) : 1;
    spec->char_bpe = 1;
    return DZ_OK;
}

/* The id of a token text among the added tokens, then the vocabulary; -1 if none. */
static int find_token(const hf_load *L, const char *text) {
    for (int pass = 0; pass < 2; pass++)
        for (int id = 0; id < L->n_tokens; id++)
            if (L->tokens[id] && (pass || L->types[id] != DZ_TOKEN_NORMAL) && !strcmp(L->tokens[id], text)) return id;
    return -1;
}

/* post_processor: TemplateProcessing whose single template starts with a special token
 * gives add_bos with that token; ByteLevel or none adds nothing. */
static dz_status read_post_processor(hf_load *L, const cJSON *post, dz_vocab_spec *spec) {
    if (!post || cJSON_IsNull(post) || !strcmp(type_of(post), "ByteLevel")) return DZ_OK;
    if (!strcmp(type_of(post), "Sequence")) { /* Llama-3: [ByteLevel, TemplateProcessing] */
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(post, "processors");
        dz_status st = DZ_OK;
        for (const cJSON *p = cJSON_IsArray(list) ? list->child : NULL; p && st == DZ_OK; p = p->next)
            st = read_post_processor(L, p, spec);
        return st;
    }
    if (strcmp(type_of(post), "TemplateProcessing") != 0) return unsupported(L, "post_processor.type", type_of(post));
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(post, "single");
    int n = cJSON_GetArraySize(single), seq = -1;
    for (int i = 0; i < n; i++)
        if (cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, i), "Sequence")) seq = i;
    if (seq < 0 || seq > 1 || n > seq + 1)
        return unsupported(L, "post_processor.single", "a template other than [special token] $A");
    if (seq == 1) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
        int id = cJSON_IsString(name) ? find_token(L, name->valuestring) : -1;
        if (id < 0) return bad(L, "post_processor.single[0]", "not a token of the vocabulary");
        spec->bos = id;
        spec->add_bos = 1;
    }
    return DZ_OK;
}

/* A tokenizer_config.json token entry: "text" or {"content": "text"}; -2 when absent. */
static dz_status config_token(hf_load *L, const cJSON *cfg, const char *key, const char *cfg_path, int *id) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    *id = -2;
    if (!v || cJSON_IsNull(v)) return DZ_OK;
    if (!cJSON_IsString(v)) return dz_fail(L->err, DZ_ERR_FORMAT, "%s: %s: expected a token string", cfg_path, key);
    *id = find_token(L, v->valuestring);
    if (*id < 0)
        return dz_fail(L->err, DZ_ERR_FORMAT, "%s: %s: \"%.80s\" is not a token of %s", cfg_path, key, v->valuestring,
                       L->path);
    return DZ_OK;
}

/* chat_template: a string, or a list of {"name", "template"} of which "default" is used (as
 * transformers does); else the chat_template.jinja that newer transformers save beside. */
static dz_status read_chat_template(hf_load *L, const cJSON *cfg, const char *cfg_path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : NULL; e; e = e->next)
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")) &&
            !strcmp(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, "default"))
            v = cJSON_GetObjectItemCaseSensitive(e, "template");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return dz_fail(L->err, DZ_ERR_FORMAT, "%s: chat_template: expected a string or a list with a \"default\" entry",
                       cfg_path);
    if (cJSON_IsString(v))
        return (L->chat_template = strdup(v->valuestring)) ? DZ_OK : dz_fail(L->err, DZ_ERR_NOMEM, "out of memory");
    char dir[4096], jinja[4200];
    dz_path_parent(cfg_path, dir, sizeof dir);
    if (dz_path_join(jinja, sizeof jinja, dir, "chat_template.jinja") != 0 || !dz_file_exists(jinja)) return DZ_OK;
    return dz_read_file(jinja, &L->chat_template, NULL, L->err);
}

static dz_status read_config(hf_load *L, const char *cfg_path, dz_vocab_spec *spec) {
    cJSON *cfg = NULL;
    dz_status st = parse_json(cfg_path, &cfg, L->err);
    if (st != DZ_OK) return st;
    int ids[4];
    const char *keys[4] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    for (int k = 0; k < 4 && st == DZ_OK; k++) st = config_token(L, cfg, keys[k], cfg_path, &ids[k]);
    if (st == DZ_OK) {
        if (ids[0] != -2) spec->bos = ids[0];
        if (ids[1] != -2) spec->eos = ids[1];
        if (ids[2] != -2) spec->pad = ids[2];
        if (ids[3] != -2) spec->unk = ids[3];
        const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        if (add_bos && !cJSON_IsBool(add_bos) && !cJSON_IsNull(add_bos))
            st = dz_fail(L->err, DZ_ERR_FORMAT, "%s: field 'add_bos_token' must be true or false", cfg_path);
        if (cJSON_IsBool(add_bos)) spec->add_bos = cJSON_IsTrue(add_bos); /* transformers lets it override the template */
        if (st == DZ_OK && spec->add_bos && spec->bos < 0)
            st = dz_fail(L->err, DZ_ERR_FORMAT, "%s: add_bos_token is true but there is no bos_token", cfg_path);
    }
    if (st == DZ_OK) st = read_chat_template(L, cfg, cfg_path);
    spec->chat_template = L->chat_template;
    cJSON_Delete(cfg);
    return st;
}

dz_status dz_hf_json_load(const char *json_path, const char *config_path, dz_tokenizer **out, dz_error *err) {
    *out = NULL;
    hf_load L = {.path = json_path, .err = err};
    cJSON *root = NULL;
    dz_vocab_spec spec = dz_vocab_spec_init(json_path);
    spec.pre = NULL;
    spec.tokens_field = "model.vocab";
    spec.merges_field = "model.merges";
    dz_status st = parse_json(json_path, &root, err);
    const cJSON *model = st == DZ_OK ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    const cJSON *pre = st == DZ_OK ? cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer") : NULL;
    if (st == DZ_OK) st = read_sentencepiece_style(&L, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), pre, &spec);
    if (st == DZ_OK) st = check_model(&L, model, &spec);
    if (st == DZ_OK && spec.byte_fallback && !spec.char_bpe)
        st = unsupported(&L, "model.byte_fallback", "byte fallback with a byte-level pre-tokenizer");
    if (st == DZ_OK)
        st = read_vocab(&L, cJSON_GetObjectItemCaseSensitive(model, "vocab"), cJSON_GetObjectItemCaseSensitive(root, "added_tokens"));
    if (st == DZ_OK) st = read_merges(&L, cJSON_GetObjectItemCaseSensitive(model, "merges"));
    if (st == DZ_OK && !spec.char_bpe) st = read_pretokenizer(&L, pre, &spec.pretok);
    if (st == DZ_OK) st = read_post_processor(&L, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &spec);
    if (st == DZ_OK) {
        const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
        if (cJSON_IsString(unk) && (spec.bpe_unk = find_token(&L, unk->valuestring)) < 0)
            st = bad(&L, "model.unk_token", "not a token of the vocabulary");
    }
    if (st == DZ_OK && config_path) st = read_config(&L, config_path, &spec);
    if (st == DZ_OK && spec.eos < 0) { /* no tokenizer_config.json: the usual end-of-text names */
        static const char *const eos_names[] = {"<|endoftext|>", "</s>", "<|end_of_text|>"};
        for (int k = 0; k < 3 && spec.eos < 0; k++) spec.eos = find_token(&L, eos_names[k]);
    }
    if (st == DZ_OK) {
        spec.tokens = L.tokens;
        spec.n_tokens = L.n_tokens;
        spec.types = L.types;
        spec.strip = L.strip;
        spec.merges = L.left;
        spec.merges_right = L.right;
        spec.n_merges = L.n_merges;
        st = dz_tokenizer_from_vocab(&spec, out, err);
    }
    free(L.tokens);
    free(L.chat_template);
    free(L.types);
    free(L.strip);
    free(L.left);
    free(L.right);
    cJSON_Delete(root);
    return st;
}
