/* The byte-level BPE encoder (GPT-2/OPT files, tokenizer.json, GGUF): added tokens first
 * (they split the text into segments), then per segment the pre-tokenizer (optional Digits
 * split, optional prefix space, the pattern), then per pre-token one symbol per byte merged
 * by rank. Bytes without a token are dropped (or become unk_token), as HF's BPE does. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/build.h"
#include "tokenizer/internal.h"
#include "tokenizer/nfc.h"
#include "tokenizer/unicode.h"

typedef struct encoder {
    const dz_tokenizer *tok;
    dz_id_sink *out;
    dz_merge_ws ws;
    int *sym;
    int sym_cap;
    uint8_t *prefixed; /* " " + segment, for add_prefix_space */
    size_t prefixed_cap;
} encoder;

static int bpe_pair(const void *ctx, int left, int right, double *key, int *merged) {
    const dz_pair_entry *e = dz_pairmap_find(&((const dz_tokenizer *)ctx)->merges, left, right);
    if (!e) return 0;
    *key = e->rank;
    *merged = e->merged;
    return 1;
}

static int output_id(const dz_tokenizer *tok, int id) { return tok->id_map ? tok->id_map[id] : id; }

/* Character BPE's symbols of s[0..len) into sym (room for len): per character its token,
 * else (byte_fallback) its <0xXX> tokens, else unk_token (fused if fuse_unk), else
 * nothing, as HF's BPE does. Returns the count. */
static int char_symbols(const dz_tokenizer *tok, const uint8_t *s, int len, int *sym) {
    int m = 0, prev_unk = 0;
    for (int i = 0, clen; i < len; i += clen) {
        dz_utf8_decode(s + i, (size_t)(len - i), &clen);
        int id = dz_strmap_find(&tok->bpe_index, &tok->bpe, (const char *)s + i, clen), bytes_ok = 1;
        for (int k = 0; id < 0 && k < clen; k++) bytes_ok &= tok->byte_id[s[i + k]] >= 0;
        if (id >= 0) sym[m++] = id;
        else if (bytes_ok)
            for (int k = 0; k < clen; k++) sym[m++] = tok->byte_id[s[i + k]];
        else if (tok->unk_id >= 0 && !(tok->fuse_unk && prev_unk)) sym[m++] = tok->unk_id;
        prev_unk = id < 0 && !bytes_ok;
    }
    return m;
}

/* One pre-token s[0..len): 0, or -1 out of memory. */
static int encode_pretoken(encoder *e, const uint8_t *s, int len) {
    const dz_tokenizer *tok = e->tok;
    if (tok->ignore_merges) {
        int id = dz_strmap_find(&tok->bpe_index, &tok->bpe, (const char *)s, len);
        if (id >= 0) {
            dz_sink_push(e->out, id);
            return 0;
        }
    }
    if (len > e->sym_cap) {
        int *ns = realloc(e->sym, (size_t)len * sizeof *ns);
        if (!ns) return -1;
        e->sym = ns;
        e->sym_cap = len;
    }
    int m = 0;
    if (tok->char_bpe) {
        m = char_symbols(tok, s, len, e->sym);
    } else if (tok->unk_id < 0) { /* bytes without a token are dropped */
        for (int k = 0; k < len; k++) {
            int id = tok->byte_id[s[k]];
            e->sym[m] = id;
            m += id >= 0;
        }
    } else { /* HF: unk_token, fused with a preceding one if fuse_unk */
        for (int k = 0, prev_unk = 0; k < len; k++) {
            int id = tok->byte_id[s[k]];
            if (id < 0 && !(tok->fuse_unk && prev_unk)) e->sym[m++] = tok->unk_id;
            else if (id >= 0) e->sym[m++] = id;
            prev_unk = id < 0;
        }
    }
    m = dz_bpe_merge(e->sym, m, bpe_pair, tok, &e->ws);
    if (m < 0) return -1;
    for (int k = 0; k < m; k++) dz_sink_push(e->out, output_id(tok, e->sym[k]));
    return 0;
}

static int reserve_prefixed(encoder *e, size_t n) {
    if (n <= e->prefixed_cap) return 0;
    uint8_t *p = realloc(e->prefixed, n);
    if (!p) return -1;
    e->prefixed = p;
    e->prefixed_cap = n;
    return 0;
}

static int is_metaspace(const uint8_t *s, size_t n, size_t i) {
    return i + 2 < n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81;
}

/* Character BPE's segment: " " as U+2581, one prepended by the rule, pre-tokens split
 * before each U+2581 with Metaspace split, else the whole segment. */
static int encode_char_segment(encoder *e, const uint8_t *s, size_t n, int first) {
    const dz_tokenizer *tok = e->tok;
    if (n == 0) return 0;
    int starts = s[0] == ' ' || is_metaspace(s, n, 0);
    int prepend = tok->prepend == DZ_PREPEND_NORMALIZER || (tok->prepend == DZ_PREPEND_ALWAYS && !starts) ||
                  (tok->prepend == DZ_PREPEND_FIRST && first && !starts);
    if (reserve_prefixed(e, 3 * n + 3) != 0) return -1;
    uint8_t *t = e->prefixed;
    size_t m = 0;
    if (prepend) t[m++] = 0xE2, t[m++] = 0x96, t[m++] = 0x81;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') t[m++] = 0xE2, t[m++] = 0x96, t[m++] = 0x81;
        else t[m++] = s[i];
    }
    for (size_t i = 0; i < m;) {
        size_t end = m;
        if (tok->metaspace_split)
            for (end = i + 1; end < m && !is_metaspace(t, m, end); end++) {
            }
        if (encode_pretoken(e, t + i, (int)(end - i)) != 0) return -1;
        i = end;
    }
    return 0;
}

/* Byte-level text between added tokens: 0, or -1 out of memory. */
static int encode_byte_segment(encoder *e, const uint8_t *s, size_t n) {
    const dz_pretok *pt = &e->tok->pretok;
    if (n == 0) return 0;
    if (pt->add_prefix_space && s[0] != ' ') {
        if (reserve_prefixed(e, n + 1) != 0) return -1;
        e->prefixed[0] = ' ';
        memcpy(e->prefixed + 1, s, n);
        s = e->prefixed;
        n++;
    }
    for (size_t piece = 0; piece < n;) {
        size_t piece_end = pt->split_digits ? dz_digit_piece_end(s, n, piece) : n;
        for (size_t i = piece; i < piece_end;) {
            size_t end = dz_pretoken_end(pt->pattern, s, piece_end, i);
            if (encode_pretoken(e, s + i, (int)(end - i)) != 0) return -1;
            i = end;
        }
        piece = piece_end;
    }
    return 0;
}

/* Text between added tokens, NFC-normalized first when the tokenizer says so. */
static int encode_segment(encoder *e, const uint8_t *s, size_t n, int first) {
    uint8_t *normalized = NULL;
    if (e->tok->nfc && dz_nfc_may_change(s, n)) {
        if (dz_nfc(s, n, &normalized, &n) != 0) return -1;
        s = normalized;
    }
    int rc = e->tok->char_bpe ? encode_char_segment(e, s, n, first) : encode_byte_segment(e, s, n);
    free(normalized);
    return rc;
}

static int is_space_at(const uint8_t *s, size_t n, size_t i, int *len) {
    int32_t cp = dz_utf8_decode(s + i, n - i, len);
    return cp >= 0 && dz_uni_class_of((uint32_t)cp) == DZ_UNI_SPACE;
}

/* The leftmost added token in s[from..n) that may be matched (longest at that position):
 * its index in tok->added, with [*at, *end) the text it takes (its lstrip/rstrip whitespace
 * included, as HF's AddedVocabulary does), or -1. */
static int next_added(const dz_tokenizer *tok, const uint8_t *s, size_t n, size_t from, int special, size_t *at,
                      size_t *end) {
    const dz_added_tokens *a = &tok->added;
    for (size_t i = from; i < n; i++) {
        if (!a->first_byte[s[i]]) continue;
        int best = -1, best_len = 0;
        for (int k = 0; k < a->n; k++) {
            if (a->special[k] && !special) continue;
            int len;
            const char *t = dz_pieces_get(&tok->pieces, a->id[k], &len);
            if (t && len > best_len && (size_t)len <= n - i && (uint8_t)t[0] == s[i] && !memcmp(t, s + i, (size_t)len))
                best = k, best_len = len;
        }
        if (best < 0) continue;
        size_t start = i, stop = i + (size_t)best_len;
        int len;
        if (a->strip[best] & DZ_STRIP_LEFT)
            for (size_t j = start; j > from;) {
                size_t back = j - 1;
                while (back > from && (s[back] & 0xC0) == 0x80) back--;
                if (!is_space_at(s, n, back, &len) || back + (size_t)len != j) break;
                start = j = back;
            }
        if (a->strip[best] & DZ_STRIP_RIGHT)
            while (stop < n && is_space_at(s, n, stop, &len)) stop += (size_t)len;
        *at = start;
        *end = stop;
        return best;
    }
    return -1;
}

dz_status dz_gpt2_encode(const dz_tokenizer *tok, const char *text, unsigned flags, dz_id_sink *out, dz_error *err) {
    const uint8_t *s = (const uint8_t *)text;
    size_t n = strlen(text);
    if ((flags & DZ_ENCODE_BOS) && tok->bos >= 0) dz_sink_push(out, tok->bos);
    encoder e = {.tok = tok, .out = out};
    int special = (flags & DZ_ENCODE_SPECIAL) != 0, fail = 0;
    for (size_t i = 0; i < n && !fail;) {
        size_t at = n, end = n;
        int k = tok->added.n ? next_added(tok, s, n, i, special, &at, &end) : -1;
        fail = encode_segment(&e, s + i, at - i, i == 0);
        if (k < 0) break;
        dz_sink_push(out, tok->added.id[k]);
        i = end;
    }
    free(e.sym);
    free(e.prefixed);
    dz_merge_ws_free(&e.ws);
    if (fail) return dz_fail(err, DZ_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", n);
    return DZ_OK;
}
