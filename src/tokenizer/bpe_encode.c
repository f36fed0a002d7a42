/* The byte-level BPE encoder (GPT-2/OPT files, tokenizer.json, GGUF): added tokens first
 * (they split the text into segments), then per segment the pre-tokenizer (optional Digits
 * split, optional prefix space, the pattern), then per pre-token one symbol per byte merged
 * by rank. Bytes without a token are dropped (or become unk_token), as HF's BPE does. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

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
    if (tok->unk_id < 0) { /* bytes without a token are dropped */
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

/* Text between added tokens: 0, or -1 out of memory. */
static int encode_segment(encoder *e, const uint8_t *s, size_t n) {
    const dz_pretok *pt = &e->tok->pretok;
    if (n == 0) return 0;
    if (pt->add_prefix_space && s[0] != ' ') {
        if (n + 1 > e->prefixed_cap) {
            uint8_t *p = realloc(e->prefixed, n + 1);
            if (!p) return -1;
            e->prefixed = p;
            e->prefixed_cap = n + 1;
        }
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

/* The leftmost added token in s[from..n) that may be matched (longest at that position):
 * its index in tok->added and *at, or -1. */
static int next_added(const dz_tokenizer *tok, const uint8_t *s, size_t n, size_t from, int special, size_t *at) {
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
        if (best >= 0) {
            *at = i;
            return best;
        }
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
        size_t at = n;
        int k = tok->added.n ? next_added(tok, s, n, i, special, &at) : -1;
        fail = encode_segment(&e, s + i, at - i);
        if (k < 0) break;
        int len;
        dz_pieces_get(&tok->pieces, tok->added.id[k], &len);
        dz_sink_push(out, tok->added.id[k]);
        i = at + (size_t)len;
    }
    free(e.sym);
    free(e.prefixed);
    dz_merge_ws_free(&e.ws);
    if (fail) return dz_fail(err, DZ_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", n);
    return DZ_OK;
}
