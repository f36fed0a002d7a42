/* A byte-level BPE tokenizer (from tokenizer.json or GGUF) written back as Hugging Face's
 * tokenizer.json + tokenizer_config.json, so checkpoints load in distzo and transformers. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "tokenizer/build.h"
#include "tokenizer/internal.h"

typedef struct writer {
    const dz_tokenizer *tok;
    char *scratch; /* room for the longest token string */
    int oom;
} writer;

static int is_added(const dz_tokenizer *tok, int id, int *special) {
    for (int k = 0; k < tok->added.n; k++)
        if (tok->added.id[k] == id) {
            if (special) *special = tok->added.special[k];
            return 1;
        }
    return 0;
}

/* The vocabulary string of an id: its bytes mapped (BPE tokens), else its text as written. */
static const char *token_string(writer *w, int id) {
    int len;
    const char *bytes = dz_pieces_get(&w->tok->bpe, id, &len);
    if (bytes && !is_added(w->tok, id, NULL)) {
        if (w->tok->char_bpe) memcpy(w->scratch, bytes, (size_t)len), w->scratch[len] = '\0'; /* as written */
        else dz_bytelevel_from_bytes(bytes, len, w->scratch);
        return w->scratch;
    }
    const char *text = dz_pieces_get(&w->tok->pieces, id, &len);
    if (!text) return NULL;
    memcpy(w->scratch, text, (size_t)len);
    w->scratch[len] = '\0';
    return w->scratch;
}

static cJSON *add(writer *w, cJSON *obj, const char *key, cJSON *item) {
    if (!item) w->oom = 1;
    else if (key) cJSON_AddItemToObject(obj, key, item);
    else cJSON_AddItemToArray(obj, item);
    return item;
}

static cJSON *str(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

static cJSON *byte_level(writer *w, int use_regex, int prefix) {
    cJSON *o = cJSON_CreateObject();
    add(w, o, "type", str("ByteLevel"));
    add(w, o, "add_prefix_space", cJSON_CreateBool(prefix));
    add(w, o, "trim_offsets", cJSON_CreateTrue());
    add(w, o, "use_regex", cJSON_CreateBool(use_regex));
    return o;
}

#define METASPACE "\xE2\x96\x81"

/* SentencePiece-style: the normalizer Prepend + Replace (NULL otherwise). */
static cJSON *normalizer(writer *w) {
    if (w->tok->nfc) {
        cJSON *o = cJSON_CreateObject();
        add(w, o, "type", str("NFC"));
        return o;
    }
    if (!w->tok->char_bpe || (w->tok->prepend != DZ_PREPEND_NORMALIZER && w->tok->prepend != DZ_PREPEND_NEVER))
        return cJSON_CreateNull();
    cJSON *rep = cJSON_CreateObject(), *pat = cJSON_CreateObject();
    if (w->tok->prepend == DZ_PREPEND_NEVER) { /* Gemma: Replace alone */
        add(w, rep, "type", str("Replace"));
        add(w, rep, "pattern", pat);
        add(w, pat, "String", str(" "));
        add(w, rep, "content", str(METASPACE));
        return rep;
    }
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray(), *prep = cJSON_CreateObject();
    add(w, seq, "type", str("Sequence"));
    add(w, seq, "normalizers", list);
    add(w, list, NULL, prep);
    add(w, prep, "type", str("Prepend"));
    add(w, prep, "prepend", str(METASPACE));
    add(w, list, NULL, rep);
    add(w, rep, "type", str("Replace"));
    add(w, rep, "pattern", pat);
    add(w, pat, "String", str(" "));
    add(w, rep, "content", str(METASPACE));
    return seq;
}

static cJSON *metaspace(writer *w) {
    static const char *const scheme[] = {[DZ_PREPEND_NEVER] = "never", [DZ_PREPEND_FIRST] = "first", [DZ_PREPEND_ALWAYS] = "always"};
    if (w->tok->prepend == DZ_PREPEND_NORMALIZER || w->tok->prepend == DZ_PREPEND_NEVER) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    add(w, o, "type", str("Metaspace"));
    add(w, o, "replacement", str(METASPACE));
    add(w, o, "prepend_scheme", str(scheme[w->tok->prepend]));
    add(w, o, "split", cJSON_CreateBool(w->tok->metaspace_split));
    return o;
}

/* Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0): as Llama-2's tokenizer.json. */
static cJSON *sentencepiece_decoder(writer *w) {
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray();
    add(w, seq, "type", str("Sequence"));
    add(w, seq, "decoders", list);
    cJSON *rep = add(w, list, NULL, cJSON_CreateObject()), *pat = cJSON_CreateObject();
    add(w, rep, "type", str("Replace"));
    add(w, rep, "pattern", pat);
    add(w, pat, "String", str(METASPACE));
    add(w, rep, "content", str(" "));
    add(w, add(w, list, NULL, cJSON_CreateObject()), "type", str("ByteFallback"));
    add(w, add(w, list, NULL, cJSON_CreateObject()), "type", str("Fuse"));
    cJSON *strip = add(w, list, NULL, cJSON_CreateObject());
    add(w, strip, "type", str("Strip"));
    add(w, strip, "content", str(" "));
    add(w, strip, "start", cJSON_CreateNumber(1));
    add(w, strip, "stop", cJSON_CreateNumber(0));
    return seq;
}

static cJSON *pre_tokenizer(writer *w) {
    const dz_pretok *p = &w->tok->pretok;
    if (w->tok->char_bpe) return metaspace(w);
    if (p->pattern == DZ_PATTERN_GPT2 && !p->split_digits) return byte_level(w, 1, p->add_prefix_space);
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray(), *first = cJSON_CreateObject();
    add(w, seq, "type", str("Sequence"));
    add(w, seq, "pretokenizers", list);
    add(w, list, NULL, first);
    if (p->pattern == DZ_PATTERN_GPT2) { /* GPT-2's regex after the digit split */
        add(w, first, "type", str("Digits"));
        add(w, first, "individual_digits", cJSON_CreateTrue());
        add(w, list, NULL, byte_level(w, 1, 0));
        return seq;
    }
    cJSON *pattern = cJSON_CreateObject();
    add(w, first, "type", str("Split"));
    add(w, first, "pattern", pattern);
    add(w, pattern, "Regex", str(dz_pattern_regex(p->pattern)));
    add(w, first, "behavior", str("Isolated"));
    add(w, first, "invert", cJSON_CreateFalse());
    add(w, list, NULL, byte_level(w, 0, 0));
    return seq;
}

/* TemplateProcessing: "[bos] $A" / "[bos] $A [bos] $B", as HF writes it. */
static cJSON *post_processor(writer *w) {
    const dz_tokenizer *tok = w->tok;
    cJSON *o = cJSON_CreateObject(), *single = cJSON_CreateArray(), *pair = cJSON_CreateArray();
    cJSON *specials = cJSON_CreateObject();
    add(w, o, "type", str("TemplateProcessing"));
    add(w, o, "single", single);
    add(w, o, "pair", pair);
    add(w, o, "special_tokens", specials);
    for (int part = 0; part < 3; part++) {
        cJSON *list = part == 0 ? single : pair;
        const char *seq = part == 2 ? "B" : "A";
        if (tok->bos >= 0) {
            cJSON *e = add(w, list, NULL, cJSON_CreateObject()), *sp = add(w, e, "SpecialToken", cJSON_CreateObject());
            add(w, sp, "id", str(token_string(w, tok->bos)));
            add(w, sp, "type_id", cJSON_CreateNumber(part == 2));
        }
        cJSON *e = add(w, list, NULL, cJSON_CreateObject()), *sq = add(w, e, "Sequence", cJSON_CreateObject());
        add(w, sq, "id", str(seq));
        add(w, sq, "type_id", cJSON_CreateNumber(part == 2));
    }
    if (tok->bos >= 0) {
        const char *name = token_string(w, tok->bos);
        cJSON *t = add(w, specials, name, cJSON_CreateObject());
        add(w, t, "id", str(name));
        int one[1] = {tok->bos};
        add(w, t, "ids", cJSON_CreateIntArray(one, 1));
        add(w, add(w, t, "tokens", cJSON_CreateArray()), NULL, str(name));
    }
    return o;
}

static int by_rank(const void *a, const void *b) {
    const dz_pair_entry *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static cJSON *model(writer *w) {
    const dz_tokenizer *tok = w->tok;
    cJSON *m = cJSON_CreateObject(), *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray();
    add(w, m, "type", str("BPE"));
    add(w, m, "dropout", cJSON_CreateNull());
    add(w, m, "unk_token", str(tok->unk_id >= 0 ? token_string(w, tok->unk_id) : NULL));
    add(w, m, "continuing_subword_prefix", cJSON_CreateNull());
    add(w, m, "end_of_word_suffix", cJSON_CreateNull());
    add(w, m, "fuse_unk", cJSON_CreateBool(tok->fuse_unk));
    add(w, m, "byte_fallback", cJSON_CreateBool(tok->char_bpe && tok->byte_id[0] >= 0));
    add(w, m, "ignore_merges", cJSON_CreateBool(tok->ignore_merges));
    add(w, m, "vocab", vocab);
    add(w, m, "merges", merges);
    for (int id = 0; id < tok->pieces.n && !w->oom; id++) {
        const char *s = token_string(w, id);
        if (s) add(w, vocab, s, cJSON_CreateNumber(id));
    }
    const dz_pairmap *pm = &tok->merges;
    dz_pair_entry *e = malloc((size_t)(pm->count ? pm->count : 1) * sizeof *e);
    if (!e) {
        w->oom = 1;
        return m;
    }
    int n = 0;
    for (uint32_t i = 0; pm->e && i <= pm->mask; i++)
        if (pm->e[i].key != UINT64_MAX) e[n++] = pm->e[i];
    qsort(e, (size_t)n, sizeof *e, by_rank);
    for (int i = 0; i < n && !w->oom; i++) {
        cJSON *pair = add(w, merges, NULL, cJSON_CreateArray());
        add(w, pair, NULL, str(token_string(w, (int)(e[i].key >> 32))));
        add(w, pair, NULL, str(token_string(w, (int)(uint32_t)e[i].key)));
    }
    free(e);
    return m;
}

static cJSON *tokenizer_json(writer *w) {
    const dz_tokenizer *tok = w->tok;
    cJSON *root = cJSON_CreateObject(), *added = cJSON_CreateArray();
    add(w, root, "version", str("1.0"));
    add(w, root, "truncation", cJSON_CreateNull());
    add(w, root, "padding", cJSON_CreateNull());
    add(w, root, "added_tokens", added);
    for (int k = 0; k < tok->added.n; k++) {
        cJSON *a = add(w, added, NULL, cJSON_CreateObject());
        add(w, a, "id", cJSON_CreateNumber(tok->added.id[k]));
        add(w, a, "content", str(token_string(w, tok->added.id[k])));
        add(w, a, "single_word", cJSON_CreateFalse());
        add(w, a, "lstrip", cJSON_CreateBool(tok->added.strip[k] & DZ_STRIP_LEFT));
        add(w, a, "rstrip", cJSON_CreateBool(tok->added.strip[k] & DZ_STRIP_RIGHT));
        add(w, a, "normalized", cJSON_CreateFalse());
        add(w, a, "special", cJSON_CreateBool(tok->added.special[k]));
    }
    add(w, root, "normalizer", normalizer(w));
    add(w, root, "pre_tokenizer", pre_tokenizer(w));
    add(w, root, "post_processor", post_processor(w));
    add(w, root, "decoder", tok->char_bpe ? sentencepiece_decoder(w) : byte_level(w, 1, 1));
    add(w, root, "model", model(w));
    return root;
}

static cJSON *tokenizer_config(writer *w) {
    static const char *const keys[DZ_SPECIAL_COUNT] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    cJSON *cfg = cJSON_CreateObject();
    add(w, cfg, "tokenizer_class", str("PreTrainedTokenizerFast"));
    for (int k = 0; k < DZ_SPECIAL_COUNT; k++)
        if (w->tok->special[k] >= 0) add(w, cfg, keys[k], str(token_string(w, w->tok->special[k])));
    if (w->tok->chat_template) add(w, cfg, "chat_template", str(w->tok->chat_template)); /* checkpoints keep --chat */
    return cfg;
}

static dz_status write_json(writer *w, const char *dir, const char *name, cJSON *root, dz_error *err) {
    char path[4096];
    char *text = !w->oom && root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return dz_fail(err, DZ_ERR_NOMEM, "%s/%s: out of memory", dir, name);
    dz_status st = dz_path_join(path, sizeof path, dir, name) != 0
                       ? dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir)
                       : dz_write_file_atomic(path, text, strlen(text), err);
    cJSON_free(text);
    return st;
}

dz_status dz_save_tokenizer_json(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    size_t longest = 0;
    for (int id = 0; id < tok->pieces.n; id++) {
        int len;
        if (dz_pieces_get(&tok->pieces, id, &len) && (size_t)len > longest) longest = (size_t)len;
    }
    writer w = {tok, malloc(2 * longest + 1), 0};
    if (!w.scratch) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    dz_status st = write_json(&w, dir, "tokenizer.json", tokenizer_json(&w), err);
    if (st == DZ_OK) st = write_json(&w, dir, "tokenizer_config.json", tokenizer_config(&w), err);
    free(w.scratch);
    return st;
}
