/* Tokenizer -> tokenizer.ggml.* (save_gguf.h). */
#include "tokenizer/save_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bytes.h"
#include "tokenizer/build.h"
#include "tokenizer/internal.h"

/* The token strings, built into one blob (each followed by a NUL), then handed to the
 * writer as an array. */
typedef struct strlist {
    dz_bytes blob;
    size_t *off;
    int *len;
    int n;
} strlist;

static void sl_add(strlist *l, const char *s, int len) {
    const size_t at = l->blob.len;
    dz_bytes_put(&l->blob, s, (size_t)len);
    dz_bytes_put(&l->blob, "", 1);
    if (l->blob.oom) return;
    l->off[l->n] = at;
    l->len[l->n++] = len;
}

static int sl_init(strlist *l, int n) {
    memset(l, 0, sizeof *l);
    l->off = malloc((size_t)(n ? n : 1) * sizeof *l->off);
    l->len = malloc((size_t)(n ? n : 1) * sizeof *l->len);
    return l->off && l->len ? 0 : -1;
}

/* Hands the list to the writer (pointers are made only now: the blob may have moved). */
static int sl_put(strlist *l, dz_gguf_writer *w, const char *key) {
    const char **p = malloc((size_t)(l->n ? l->n : 1) * sizeof *p);
    if (!p || l->blob.oom) {
        free(p);
        return -1;
    }
    for (int i = 0; i < l->n; i++) p[i] = l->blob.p + l->off[i];
    dz_gguf_put_strings(w, key, p, l->len, (size_t)l->n);
    free(p);
    return 0;
}

static void sl_free(strlist *l) {
    free(l->blob.p);
    free(l->off);
    free(l->len);
}

/* An id past the tokenizer's (the embedding's padding rows): named [PADn], type unused. */
static void pad_token(strlist *l, int32_t *types, int id) {
    char s[32];
    sl_add(l, s, snprintf(s, sizeof s, "[PAD%d]", id));
    types[id] = DZ_TOKEN_UNUSED;
}

static void put_id(dz_gguf_writer *w, const char *key, int id) {
    if (id >= 0) dz_gguf_put_u32(w, key, (uint32_t)id);
}

/* The declared ids and the BOS/EOS flags, the same for every tokenizer model. */
static void put_specials(dz_gguf_writer *w, const dz_tokenizer *tok, int unk) {
    put_id(w, "tokenizer.ggml.bos_token_id", tok->special[DZ_SPECIAL_BOS]);
    put_id(w, "tokenizer.ggml.eos_token_id", tok->special[DZ_SPECIAL_EOS]);
    put_id(w, "tokenizer.ggml.padding_token_id", tok->special[DZ_SPECIAL_PAD]);
    put_id(w, "tokenizer.ggml.unknown_token_id", unk);
    dz_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", tok->bos >= 0);
    dz_gguf_put_bool(w, "tokenizer.ggml.add_eos_token", 0);
}

/* llama.cpp's "llama" (SentencePiece) vocabulary: tokens, scores, types; -1 when out of memory. */
static int put_llama_vocab(dz_gguf_writer *w, strlist *l, const float *scores, const int32_t *types, int n_vocab) {
    dz_gguf_put_string(w, "tokenizer.ggml.model", "llama");
    if (sl_put(l, w, "tokenizer.ggml.tokens")) return -1;
    dz_gguf_put_f32s(w, "tokenizer.ggml.scores", scores, (size_t)n_vocab);
    dz_gguf_put_i32s(w, "tokenizer.ggml.token_type", types, (size_t)n_vocab);
    return 0;
}

/* ---- SentencePiece: llama2.c and tokenizer.model ---- */

static int spm_type(const dz_tokenizer *tok, int id) {
    if (id >= tok->byte_base && id < tok->byte_base + 256) return DZ_TOKEN_BYTE;
    int len;
    const char *s = dz_pieces_get(&tok->pieces, id, &len);
    if (id == tok->special[DZ_SPECIAL_UNK] || (s && len == 5 && !memcmp(s, "<unk>", 5))) return DZ_TOKEN_UNKNOWN;
    if (id == tok->special[DZ_SPECIAL_BOS] || id == tok->special[DZ_SPECIAL_EOS] || id == tok->special[DZ_SPECIAL_PAD])
        return DZ_TOKEN_CONTROL;
    if (tok->mergeable.off && !dz_pieces_get(&tok->mergeable, id, NULL)) return DZ_TOKEN_CONTROL;
    return DZ_TOKEN_NORMAL;
}

static dz_status declare_spm(const dz_tokenizer *tok, int n_vocab, dz_gguf_writer *w, dz_error *err) {
    strlist l = {0};
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    char *buf = malloc(3 * (size_t)tok->max_piece_len + 16);
    int bad = sl_init(&l, n_vocab) || !scores || !types || !buf;
    for (int id = 0; !bad && id < n_vocab; id++) {
        if (id >= tok->vocab_size) {
            pad_token(&l, types, id);
            scores[id] = -1000.0f; /* the converter's score for padding */
            continue;
        }
        int len, m = 0;
        const char *s = dz_pieces_get(&tok->pieces, id, &len);
        types[id] = spm_type(tok, id);
        scores[id] = tok->scores[id];
        /* llama2.c's tokenizer.bin names bos/eos "\n<s>\n", "\n</s>\n": their SentencePiece names */
        if (tok->kind == DZ_TOK_LLAMA2C && (id == tok->special[DZ_SPECIAL_BOS] || id == tok->special[DZ_SPECIAL_EOS])) {
            const char *name = id == tok->special[DZ_SPECIAL_BOS] ? "<s>" : "</s>";
            sl_add(&l, name, (int)strlen(name));
            continue;
        }
        for (int i = 0; s && i < len; i++) {
            if (s[i] == ' ') memcpy(buf + m, "\xE2\x96\x81", 3), m += 3;
            else buf[m++] = s[i];
        }
        sl_add(&l, buf, m);
    }
    dz_status st = DZ_OK;
    if (!bad) bad = put_llama_vocab(w, &l, scores, types, n_vocab);
    if (!bad) {
        int unk = tok->special[DZ_SPECIAL_UNK];
        for (int id = 0; unk < 0 && id < tok->vocab_size; id++)
            if (types[id] == DZ_TOKEN_UNKNOWN) unk = id;
        put_specials(w, tok, unk);
        dz_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", tok->dummy_prefix);
    }
    if (bad) st = dz_fail(err, DZ_ERR_NOMEM, "GGUF export: out of memory for the tokenizer");
    sl_free(&l);
    free(scores);
    free(types);
    free(buf);
    return st;
}

/* ---- byte-level BPE ---- */

static int added_type(const dz_tokenizer *tok, int id) {
    for (int k = 0; k < tok->added.n; k++)
        if (tok->added.id[k] == id) return tok->added.special[k] ? DZ_TOKEN_CONTROL : DZ_TOKEN_USER_DEFINED;
    return 0;
}

/* The llama.cpp pre-tokenizer name of a byte-level tokenizer (NULL: none matches). */
static const char *pre_name(const dz_tokenizer *tok) {
    const dz_pretok *p = &tok->pretok;
    if (p->add_prefix_space) return NULL;
    if (p->pattern == DZ_PATTERN_GPT2) return p->split_digits ? "smollm" : "gpt2";
    if (p->split_digits) return NULL;
    if (p->pattern == DZ_PATTERN_LLAMA3 && !tok->nfc) return "llama-bpe";
    if (p->pattern == DZ_PATTERN_QWEN2) return "qwen2";
    return NULL;
}

static int by_rank(const void *a, const void *b) {
    const dz_pair_entry *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The bytes of BPE id i: tokenizer.json/GGUF keep them in bpe, GPT-2 files in pieces. */
static const char *bpe_bytes(const dz_tokenizer *tok, int id, int *len) {
    return dz_pieces_get(tok->kind == DZ_TOK_HF_BPE ? &tok->bpe : &tok->pieces, id, len);
}

/* Token id's string: an added token's text (type: its GGUF type), else its BPE piece (type 0);
 * NULL past the tokenizer's ids (the embedding's padding rows), once written as padding into
 * l and types. */
static const char *token_text(const dz_tokenizer *tok, int id, strlist *l, int32_t *types, int *type, int *len) {
    *type = id < tok->pieces.n ? added_type(tok, id) : 0;
    if (id >= tok->pieces.n) {
        pad_token(l, types, id);
        return NULL;
    }
    return *type ? dz_pieces_get(&tok->pieces, id, len) : bpe_bytes(tok, id, len);
}

static dz_status declare_bpe(const dz_tokenizer *tok, int n_vocab, dz_gguf_writer *w, dz_error *err) {
    const char *pre = pre_name(tok);
    if (!pre)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "GGUF export: the tokenizer's pre-tokenizer has no llama.cpp name (gpt2, smollm, llama-bpe, qwen2)");
    const dz_pairmap *m = &tok->merges;
    strlist l = {0}, ml = {0};
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    dz_pair_entry *e = malloc((size_t)(m->count ? m->count : 1) * sizeof *e);
    int maxlen = 1;
    for (int id = 0; id < tok->pieces.n; id++) {
        int len;
        if (dz_pieces_get(&tok->pieces, id, &len) && len > maxlen) maxlen = len;
        if (bpe_bytes(tok, id, &len) && len > maxlen) maxlen = len;
    }
    char *buf = malloc(4 * (size_t)maxlen + 16);
    int bad = sl_init(&l, n_vocab) | sl_init(&ml, m->count) | !types | !e | !buf;
    for (int id = 0; !bad && id < n_vocab; id++) {
        int len, type;
        const char *s = token_text(tok, id, &l, types, &type, &len);
        if (!s) continue;
        if (type) {
            sl_add(&l, s, len); /* added tokens are written as their text */
        } else {
            sl_add(&l, buf, dz_bytelevel_from_bytes(s, len, buf));
            type = id == tok->special[DZ_SPECIAL_EOS] || id == tok->special[DZ_SPECIAL_BOS] ? DZ_TOKEN_CONTROL
                                                                                              : DZ_TOKEN_NORMAL;
        }
        types[id] = type;
    }
    int n = 0;
    for (uint32_t i = 0; !bad && m->e && i <= m->mask; i++)
        if (m->e[i].key != UINT64_MAX) e[n++] = m->e[i];
    if (!bad) qsort(e, (size_t)n, sizeof *e, by_rank);
    char *pair = bad ? NULL : malloc(8 * (size_t)maxlen + 16);
    bad |= !pair;
    for (int i = 0; !bad && i < n; i++) {
        int la, lb;
        const char *a = bpe_bytes(tok, (int)(e[i].key >> 32), &la), *b = bpe_bytes(tok, (int)(uint32_t)e[i].key, &lb);
        if (!a || !b) {
            bad = 2;
            break;
        }
        int k = dz_bytelevel_from_bytes(a, la, pair);
        pair[k++] = ' ';
        k += dz_bytelevel_from_bytes(b, lb, pair + k);
        sl_add(&ml, pair, k);
    }
    dz_status st = DZ_OK;
    if (!bad) {
        dz_gguf_put_string(w, "tokenizer.ggml.model", "gpt2");
        dz_gguf_put_string(w, "tokenizer.ggml.pre", pre);
        bad = sl_put(&l, w, "tokenizer.ggml.tokens");
    }
    if (!bad) {
        dz_gguf_put_i32s(w, "tokenizer.ggml.token_type", types, (size_t)n_vocab);
        bad = sl_put(&ml, w, "tokenizer.ggml.merges");
    }
    if (!bad) put_specials(w, tok, tok->special[DZ_SPECIAL_UNK]);
    if (bad == 2) st = dz_fail(err, DZ_ERR_UNSUPPORTED, "GGUF export: a merge names a token without bytes");
    else if (bad) st = dz_fail(err, DZ_ERR_NOMEM, "GGUF export: out of memory for the tokenizer");
    sl_free(&l);
    sl_free(&ml);
    free(types);
    free(e);
    free(buf);
    free(pair);
    return st;
}

/* ---- SentencePiece-style tokenizer.json (Llama-2, TinyLlama, Mistral): merges, no scores ---- */

/* llama.cpp's "llama" tokenizer merges the adjacent pair whose joined text is the token with
 * the highest score; Hugging Face merges the pair of the lowest merge rank. Scoring each token
 * by -(the rank of the first merge that makes it) makes the two pick the same pairs (the
 * converter from SentencePiece ranks merges by the merged piece's score). A token no merge
 * makes (a character, a byte, an added token) gets the lowest score: llama.cpp never prefers
 * it to a merge. */
static dz_status declare_char_bpe(const dz_tokenizer *tok, int n_vocab, dz_gguf_writer *w, dz_error *err) {
    if (tok->metaspace_split)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "GGUF export: this tokenizer.json splits words at U+2581 (Metaspace split) before its merges; "
                       "llama.cpp's SentencePiece tokenizer merges across words: export with --format hf");
    const dz_pairmap *m = &tok->merges;
    strlist l = {0};
    float *scores = malloc((size_t)n_vocab * sizeof *scores);
    int32_t *types = malloc((size_t)n_vocab * sizeof *types);
    int bad = sl_init(&l, n_vocab) || !scores || !types;
    for (int id = 0; !bad && id < n_vocab; id++) scores[id] = -1e9f;
    for (uint32_t i = 0; !bad && m->e && i <= m->mask; i++) {
        const dz_pair_entry *e = &m->e[i];
        if (e->key != UINT64_MAX && e->merged >= 0 && e->merged < n_vocab && -(float)e->rank - 1.0f > scores[e->merged])
            scores[e->merged] = -(float)e->rank - 1.0f;
    }
    for (int id = 0; !bad && id < n_vocab; id++) {
        int len, type;
        const char *s = token_text(tok, id, &l, types, &type, &len);
        if (!s) continue;
        sl_add(&l, s, len); /* the piece as tokenizer.json writes it: U+2581 for " ", <0xXX> for bytes */
        if (!type) {
            const int is_byte = len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>';
            type = id == tok->special[DZ_SPECIAL_UNK] ? DZ_TOKEN_UNKNOWN
                   : id == tok->special[DZ_SPECIAL_BOS] || id == tok->special[DZ_SPECIAL_EOS] ? DZ_TOKEN_CONTROL
                   : is_byte ? DZ_TOKEN_BYTE : DZ_TOKEN_NORMAL;
        }
        types[id] = type;
    }
    dz_status st = DZ_OK;
    if (!bad) bad = put_llama_vocab(w, &l, scores, types, n_vocab);
    if (!bad) {
        put_specials(w, tok, tok->special[DZ_SPECIAL_UNK]);
        dz_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", tok->prepend != DZ_PREPEND_NEVER);
    }
    if (bad) st = dz_fail(err, DZ_ERR_NOMEM, "GGUF export: out of memory for the tokenizer");
    sl_free(&l);
    free(scores);
    free(types);
    return st;
}

dz_status dz_tokenizer_gguf_declare(const dz_tokenizer *tok, int n_vocab, dz_gguf_writer *w, dz_error *err) {
    if (tok->vocab_size > n_vocab)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "GGUF export: the tokenizer has %d ids but the model's embedding only %d rows",
                       tok->vocab_size, n_vocab);
    switch (tok->kind) {
    case DZ_TOK_LLAMA2C:
    case DZ_TOK_SENTENCEPIECE: return declare_spm(tok, n_vocab, w, err);
    case DZ_TOK_HF_BPE:
        return tok->char_bpe ? declare_char_bpe(tok, n_vocab, w, err) : declare_bpe(tok, n_vocab, w, err);
    case DZ_TOK_GPT2_BPE:
        if (tok->id_map)
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "GGUF export: OPT's fairseq token ids have no llama.cpp tokenizer model");
        return declare_bpe(tok, n_vocab, w, err);
    }
    return dz_fail(err, DZ_ERR_UNSUPPORTED, "GGUF export: unknown tokenizer kind");
}
