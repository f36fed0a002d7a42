/* dz_tokenizer_from_vocab: byte-level BPE from token strings, merges and token types. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/build.h"
#include "tokenizer/internal.h"

dz_vocab_spec dz_vocab_spec_init(const char *source) {
    return (dz_vocab_spec){.source = source,
                           .model = "gpt2",
                           .bos = -1,
                           .eos = -1,
                           .pad = -1,
                           .unk = -1,
                           .bpe_unk = -1,
                           .add_dummy_prefix = 1,
                           .tokens_field = "tokenizer.ggml.tokens",
                           .merges_field = "tokenizer.ggml.merges"};
}

static dz_status oom(const dz_vocab_spec *spec, dz_error *err) {
    return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", spec->source);
}

static int is_added(const dz_vocab_spec *spec, int id) {
    return spec->types && (spec->types[id] == DZ_TOKEN_CONTROL || spec->types[id] == DZ_TOKEN_USER_DEFINED);
}

/* What the BPE matches a token string against: byte-level: the bytes it stands for (-1 if
 * outside the mapping); character BPE: the string itself. out: room for strlen(t) + 1. */
static int token_bytes(const dz_tokenizer *tok, const int *inv, const char *t, char *out) {
    if (!tok->char_bpe) return dz_bytelevel_to_bytes(inv, t, out);
    size_t len = strlen(t);
    memcpy(out, t, len);
    return (int)len;
}

/* Character BPE's text of a token: U+2581 as " ", "<0xXX>" as its byte (HF's decoders
 * Replace + ByteFallback). out: room for strlen(t). */
static int decoded_piece(const char *t, char *out) {
    unsigned b;
    char end;
    if (strlen(t) == 6 && sscanf(t, "<0x%2X%c", &b, &end) == 2 && end == '>') return out[0] = (char)b, 1;
    int m = 0;
    for (size_t i = 0; t[i]; i++) {
        if ((uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 && (uint8_t)t[i + 2] == 0x81) out[m++] = ' ', i += 2;
        else out[m++] = t[i];
    }
    return m;
}

/* Token strings: bytes (byte mapping undone) into tok->bpe and tok->pieces; added tokens
 * and strings outside the mapping decode as written. */
/* *buf holds at least len + 1 bytes (grown to 2 len + 64 when not): 0, or -1 out of memory. */
static int room_for(char **buf, size_t *cap, size_t len) {
    if (len + 1 <= *cap) return 0;
    char *nb = realloc(*buf, *cap = 2 * len + 64);
    if (!nb) return -1;
    *buf = nb;
    return 0;
}

static dz_status read_tokens(dz_tokenizer *tok, const dz_vocab_spec *spec, const int *inv, dz_error *err) {
    int n = spec->n_tokens;
    if (dz_pieces_init(&tok->bpe, n) || dz_pieces_init(&tok->pieces, n)) return oom(spec, err);
    size_t cap = 0;
    char *bytes = NULL;
    dz_status st = DZ_OK;
    for (int id = 0; id < n && st == DZ_OK; id++) {
        const char *t = spec->tokens[id];
        if (!t) continue;
        size_t len = strlen(t);
        if (room_for(&bytes, &cap, len)) {
            st = oom(spec, err);
            break;
        }
        int blen = token_bytes(tok, inv, t, bytes);
        if (blen >= 0 && dz_pieces_set(&tok->bpe, id, bytes, blen)) st = oom(spec, err);
        else if (tok->char_bpe && !is_added(spec, id)) blen = decoded_piece(t, bytes);
        if (st == DZ_OK && dz_pieces_set(&tok->pieces, id, blen >= 0 && !is_added(spec, id) ? bytes : t,
                                         blen >= 0 && !is_added(spec, id) ? blen : (int)len))
            st = oom(spec, err);
    }
    free(bytes);
    if (st == DZ_OK && dz_strmap_build(&tok->bpe_index, &tok->bpe)) st = oom(spec, err);
    for (int b = 0; st == DZ_OK && b < 256; b++) {
        char c[8];
        if (tok->char_bpe) snprintf(c, sizeof c, "<0x%02X>", b); /* byte fallback pieces */
        else c[0] = (char)b;
        int id = dz_strmap_find(&tok->bpe_index, &tok->bpe, c, tok->char_bpe ? 6 : 1);
        tok->byte_id[b] = tok->char_bpe && !spec->byte_fallback ? -1 : id; /* -1: dropped, as HF does */
    }
    return st;
}

static int symbol_id(const dz_tokenizer *tok, const int *inv, const char *sym, char *scratch) {
    int blen = token_bytes(tok, inv, sym, scratch);
    return blen < 0 ? -1 : dz_strmap_find(&tok->bpe_index, &tok->bpe, scratch, blen);
}

static dz_status read_merges(dz_tokenizer *tok, const dz_vocab_spec *spec, const int *inv, dz_error *err) {
    size_t cap = 0;
    char *left = NULL, *scratch = NULL;
    dz_status st = DZ_OK;
    for (int i = 0; i < spec->n_merges && st == DZ_OK; i++) {
        const char *m = spec->merges[i], *b = spec->merges_right ? spec->merges_right[i] : NULL;
        if (!m || (spec->merges_right && !b)) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: %s[%d]: missing", spec->source, spec->merges_field, i);
            break;
        }
        size_t need = strlen(m) + (b ? strlen(b) : 0) + 1;
        if (need > cap) {
            cap = 2 * need + 64;
            char *nl = realloc(left, cap), *ns = nl ? realloc(scratch, 2 * cap) : NULL;
            if (nl) left = nl;
            if (ns) scratch = ns;
            if (!nl || !ns) {
                st = oom(spec, err);
                break;
            }
        }
        strcpy(left, m);
        if (!b) { /* "a b": split at the first space after the first character (llama.cpp, HF) */
            char *sp = *left ? strchr(left + 1, ' ') : NULL;
            if (!sp || sp[1] == '\0' || strchr(sp + 1, ' ')) {
                st = dz_fail(err, DZ_ERR_FORMAT, "%s: %s[%d]: expected two symbols separated by one space, got \"%.80s\"",
                             spec->source, spec->merges_field, i, m);
                break;
            }
            *sp = '\0';
            b = sp + 1;
        }
        int ia = symbol_id(tok, inv, left, scratch), ib = symbol_id(tok, inv, b, scratch);
        if (ia < 0 || ib < 0) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: %s[%d]: symbol \"%.80s\" is not in %s", spec->source,
                         spec->merges_field, i, ia < 0 ? left : b, spec->tokens_field);
            break;
        }
        const int merged = dz_strmap_find_pair(&tok->bpe_index, &tok->bpe, ia, ib, scratch);
        if (merged < 0)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s: %s[%d]: merged token \"%.80s%.80s\" is not in %s", spec->source,
                         spec->merges_field, i, left, b, spec->tokens_field);
        else if (dz_pairmap_put(&tok->merges, ia, ib, i, merged)) st = oom(spec, err);
    }
    free(left);
    free(scratch);
    return st;
}

static dz_status read_added(dz_tokenizer *tok, const dz_vocab_spec *spec, dz_error *err) {
    int count = 0;
    for (int id = 0; id < spec->n_tokens; id++) count += is_added(spec, id) && spec->tokens[id] && spec->tokens[id][0];
    if (!count) return DZ_OK;
    tok->added.id = malloc((size_t)count * sizeof *tok->added.id);
    tok->added.special = malloc((size_t)count);
    tok->added.strip = malloc((size_t)count);
    if (!tok->added.id || !tok->added.special || !tok->added.strip) return oom(spec, err);
    for (int id = 0; id < spec->n_tokens; id++)
        if (is_added(spec, id) && spec->tokens[id] && spec->tokens[id][0]) {
            tok->added.id[tok->added.n] = id;
            tok->added.first_byte[(uint8_t)spec->tokens[id][0]] = 1;
            tok->added.strip[tok->added.n] = spec->strip ? spec->strip[id] & (DZ_STRIP_LEFT | DZ_STRIP_RIGHT) : 0;
            tok->added.special[tok->added.n++] = spec->types[id] == DZ_TOKEN_CONTROL;
        }
    return DZ_OK;
}

static dz_status check_id(const dz_vocab_spec *spec, int id, const char *what, dz_error *err) {
    if (id < -1 || id >= spec->n_tokens || (id >= 0 && !spec->tokens[id]))
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %s id %d is not a token of %s (%d tokens)", spec->source, what, id,
                       spec->tokens_field, spec->n_tokens);
    return DZ_OK;
}

/* SentencePiece BPE: pieces with U+2581 turned into " " (as llama2.c's tokenizer.bin holds
 * them), mergeable = normal and user-defined pieces, byte fallback through <0xXX>. */
static dz_status build_sentencepiece(dz_tokenizer *tok, const dz_vocab_spec *spec, dz_error *err) {
    int n = spec->n_tokens;
    if (!spec->scores)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: SentencePiece needs token scores (tokenizer.ggml.scores)", spec->source);
    if (dz_pieces_init(&tok->pieces, n) || dz_pieces_init(&tok->mergeable, n) ||
        !(tok->scores = malloc((size_t)n * sizeof *tok->scores)))
        return oom(spec, err);
    tok->byte_base = -1;
    size_t cap = 0;
    char *buf = NULL;
    dz_status st = DZ_OK;
    for (int id = 0; id < n && st == DZ_OK; id++) {
        const char *t = spec->tokens[id] ? spec->tokens[id] : "";
        size_t len = strlen(t);
        int m = 0, type = spec->types ? spec->types[id] : DZ_TOKEN_NORMAL;
        if (room_for(&buf, &cap, len)) {
            st = oom(spec, err);
            break;
        }
        for (size_t i = 0; i < len; i++) {
            if ((uint8_t)t[i] == 0xE2 && i + 2 < len && (uint8_t)t[i + 1] == 0x96 && (uint8_t)t[i + 2] == 0x81) {
                buf[m++] = ' ';
                i += 2;
            } else buf[m++] = t[i];
        }
        tok->scores[id] = spec->scores[id];
        if (m > tok->max_piece_len) tok->max_piece_len = m;
        if (dz_pieces_set(&tok->pieces, id, buf, m) ||
            ((type == DZ_TOKEN_NORMAL || type == DZ_TOKEN_USER_DEFINED) && dz_pieces_set(&tok->mergeable, id, buf, m)))
            st = oom(spec, err);
        if (!strcmp(t, "<0x00>") && tok->byte_base < 0) tok->byte_base = id;
    }
    free(buf);
    if (st != DZ_OK) return st;
    for (int b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        int id = tok->byte_base + b;
        if (tok->byte_base < 0 || id >= n || !spec->tokens[id] || strcmp(spec->tokens[id], want) != 0)
            return dz_fail(err, DZ_ERR_UNSUPPORTED,
                           "%s: %s: no byte piece %s in order after <0x00> (SentencePiece without byte fallback is "
                           "not supported)",
                           spec->source, spec->tokens_field, want);
    }
    if (dz_strmap_build(&tok->lookup, &tok->mergeable)) return oom(spec, err);
    tok->space_id = dz_strmap_find(&tok->lookup, &tok->mergeable, " ", 1);
    tok->dummy_prefix = spec->add_dummy_prefix;
    tok->kind = DZ_TOK_SENTENCEPIECE;
    return DZ_OK;
}

static dz_status build(dz_tokenizer *tok, const dz_vocab_spec *spec, dz_error *err) {
    int spm = !strcmp(spec->model, "llama");
    if (!spm && strcmp(spec->model, "gpt2") != 0)
        return dz_fail(err, DZ_ERR_UNSUPPORTED,
                       "%s: tokenizer model \"%s\" is not supported (byte-level BPE \"gpt2\", SentencePiece \"llama\")",
                       spec->source, spec->model);
    if (spec->n_tokens <= 0 || spec->n_tokens >= (1 << 24) || !spec->tokens)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: %s: %d tokens", spec->source, spec->tokens_field, spec->n_tokens);
    tok->pretok = spec->pretok;
    tok->ignore_merges = spec->ignore_merges;
    if (spec->pre && !spm) {
        if (dz_pretok_from_gguf_name(spec->pre, &tok->pretok) != 0)
            return dz_fail(err, DZ_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.pre \"%s\" is not supported (gpt2, smollm, llama-bpe, qwen2; a file without the key gets llama.cpp's \"default\")",
                           spec->source, spec->pre);
        tok->ignore_merges = tok->pretok.pattern == DZ_PATTERN_LLAMA3;
    }
    const int ids[] = {spec->bos, spec->eos, spec->pad, spec->unk, spec->bpe_unk};
    const char *names[] = {"bos", "eos", "pad", "unk", "model.unk_token"};
    for (int k = 0; k < 5; k++) {
        dz_status st = check_id(spec, ids[k], names[k], err);
        if (st != DZ_OK) return st;
    }
    if (spec->add_bos && spec->bos < 0)
        return dz_fail(err, DZ_ERR_FORMAT, "%s: add_bos is set but no bos token is declared", spec->source);
    int inv[DZ_BYTE_MAP_SIZE];
    dz_bytelevel_inverse(inv);
    dz_status st;
    if (spm) {
        st = build_sentencepiece(tok, spec, err);
    } else {
        tok->kind = DZ_TOK_HF_BPE;
        tok->n_bpe = spec->n_tokens;
        tok->char_bpe = spec->char_bpe;
        tok->prepend = spec->prepend;
        tok->metaspace_split = spec->metaspace_split;
        tok->nfc = spec->nfc;
        st = read_tokens(tok, spec, inv, err);
        if (st == DZ_OK) st = read_merges(tok, spec, inv, err);
        if (st == DZ_OK) st = read_added(tok, spec, err);
    }
    if (st != DZ_OK) return st;
    tok->special[DZ_SPECIAL_BOS] = spec->bos;
    tok->special[DZ_SPECIAL_EOS] = spec->eos;
    tok->special[DZ_SPECIAL_PAD] = spec->pad;
    tok->special[DZ_SPECIAL_UNK] = spec->unk;
    tok->bos = spec->add_bos ? spec->bos : -1;
    tok->eos = spec->eos;
    tok->unk_id = spec->bpe_unk;
    tok->fuse_unk = spec->fuse_unk;
    tok->vocab_size = spec->n_tokens;
    return DZ_OK;
}

dz_status dz_tokenizer_from_vocab(const dz_vocab_spec *spec, dz_tokenizer **out, dz_error *err) {
    *out = NULL;
    dz_tokenizer *tok = dz_tokenizer_alloc();
    if (!tok) return oom(spec, err);
    dz_status st = build(tok, spec, err);
    if (st == DZ_OK && spec->chat_template && !(tok->chat_template = strdup(spec->chat_template)))
        st = oom(spec, err);
    if (st != DZ_OK) {
        dz_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return DZ_OK;
}
