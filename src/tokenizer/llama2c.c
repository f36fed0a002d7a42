/* llama2.c's tokenizer.bin and its encoder (upstream run.c's encode()/decode()).
 *
 * File: int32 max_token_length, then per token: float32 score, int32 byte length, bytes.
 * Encoding: a dummy-prefix " " for non-empty text, one symbol per UTF-8 code point (the
 * code point's token, or byte-fallback ids byte + 3), then repeatedly merge the adjacent
 * pair whose concatenation is a token with the highest score (leftmost on ties). Upstream
 * rescans all pairs per merge; the shared heap-based loop picks the same pair each time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tokenizer/internal.h"

enum { FIRST_BYTE_ID = 3, LLAMA_BOS = 1, LLAMA_EOS = 2 };

static int read_i32(const char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static float read_f32(const char *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Counts the tokens (vocab_size, or all up to EOF when 0), checks every length field and
 * score, and says where the last one ends. */
static dz_status scan_tokens(const char *path, const char *buf, size_t len, int vocab_size, int *count, size_t *end,
                             dz_error *err) {
    size_t pos = 4;
    int n = 0;
    while (vocab_size > 0 ? n < vocab_size : pos < len) {
        if (len - pos < 8)
            return dz_fail(err, DZ_ERR_FORMAT, "%s: truncated: token %d's score/length at byte %zu%s", path, n, pos,
                           vocab_size > 0 ? " (fewer tokens than vocab_size)" : "");
        int tlen = read_i32(buf + pos + 4);
        if (tlen < 0) return dz_fail(err, DZ_ERR_FORMAT, "%s: token %d: negative length %d", path, n, tlen);
        if ((size_t)tlen > len - pos - 8)
            return dz_fail(err, DZ_ERR_FORMAT, "%s: truncated: token %d's %d bytes run past the end of the file",
                           path, n, tlen);
        const float score = read_f32(buf + pos);
        if (!isfinite(score)) /* merges are ranked by it */
            return dz_fail(err, DZ_ERR_FORMAT, "%s: token %d: score %g is not a finite number", path, n, (double)score);
        if (tlen > read_i32(buf)) /* upstream sizes its buffers by it */
            return dz_fail(err, DZ_ERR_FORMAT, "%s: token %d is %d bytes, longer than max_token_length %d", path, n,
                           tlen, read_i32(buf));
        pos += 8 + (size_t)tlen;
        n++;
    }
    *count = n, *end = pos;
    return DZ_OK;
}

dz_status dz_llama2c_load(dz_tokenizer *tok, const char *path, int vocab_size, dz_error *err) {
    tok->kind = DZ_TOK_LLAMA2C;
    if (vocab_size < 0) return dz_fail(err, DZ_ERR_INVALID, "%s: vocab_size %d is negative", path, vocab_size);
    char *buf;
    size_t len;
    dz_status st = dz_read_file(path, &buf, &len, err);
    if (st != DZ_OK) return st;
    int n = 0;
    size_t end = len;
    if (len < 4) st = dz_fail(err, DZ_ERR_FORMAT, "%s: truncated: no max_token_length field", path);
    else if (read_i32(buf) < 0)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: max_token_length %d is negative", path, read_i32(buf));
    else st = scan_tokens(path, buf, len, vocab_size, &n, &end, err);
    if (st == DZ_OK && n < FIRST_BYTE_ID + 256)
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: %d tokens; byte fallback needs ids 3..258 (at least 259 tokens)",
                     path, n);
    if (st == DZ_OK && end != len) /* a larger vocabulary's file, or not a tokenizer.bin at all */
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: %zu bytes after its %d tokens (the model's vocab_size): another "
                     "vocabulary's file?", path, len - end, n);
    if (st == DZ_OK && (dz_pieces_init(&tok->pieces, n) || !(tok->scores = malloc((size_t)n * sizeof(float)))))
        st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    size_t pos = 4;
    for (int i = 0; st == DZ_OK && i < n; i++) {
        int tlen = read_i32(buf + pos + 4);
        tok->scores[i] = read_f32(buf + pos);
        if (dz_pieces_set(&tok->pieces, i, buf + pos + 8, tlen)) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
        if (tlen > tok->max_piece_len) tok->max_piece_len = tlen;
        pos += 8 + (size_t)tlen;
    }
    free(buf);
    if (st == DZ_OK && dz_strmap_build(&tok->lookup, &tok->pieces))
        st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    if (st != DZ_OK) return st;
    tok->vocab_size = n;
    tok->bos = LLAMA_BOS;
    tok->eos = LLAMA_EOS;
    tok->byte_base = FIRST_BYTE_ID;
    tok->dummy_prefix = 1;
    tok->space_id = dz_strmap_find(&tok->lookup, &tok->pieces, " ", 1);
    return DZ_OK;
}

/* The strings merges may produce: all pieces for tokenizer.bin (as upstream), the normal
 * and user-defined ones for SentencePiece models. */
static const dz_pieces *lookup_pieces(const dz_tokenizer *tok) {
    return tok->mergeable.off ? &tok->mergeable : &tok->pieces;
}

typedef struct pair_ctx {
    const dz_tokenizer *tok;
    char *buf; /* room for two pieces */
} pair_ctx;

static int llama_pair(const void *ctx, int left, int right, double *key, int *merged) {
    const pair_ctx *c = ctx;
    const dz_tokenizer *tok = c->tok;
    int la, lb;
    const char *a = dz_pieces_get(&tok->pieces, left, &la), *b = dz_pieces_get(&tok->pieces, right, &lb);
    memcpy(c->buf, a, (size_t)la);
    memcpy(c->buf + la, b, (size_t)lb);
    int id = dz_strmap_find(&tok->lookup, lookup_pieces(tok), c->buf, la + lb);
    /* upstream starts its best score at -1e10 and needs strictly more */
    if (id < 0 || !(tok->scores[id] > -1e10f)) return 0;
    *key = -(double)tok->scores[id];
    *merged = id;
    return 1;
}

dz_status dz_llama2c_encode(const dz_tokenizer *tok, const char *text, int add_bos, dz_id_sink *out,
                            dz_error *err) {
    size_t n = strlen(text);
    int *ids = malloc((n + 2) * sizeof *ids);
    char *buf = malloc(2 * (size_t)tok->max_piece_len + 1);
    if (!ids || !buf) {
        free(ids);
        free(buf);
        return dz_fail(err, DZ_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", n);
    }
    int count = 0;
    if (add_bos && tok->bos >= 0) ids[count++] = tok->bos; /* upstream lets BOS take part in merges too */
    /* A vocab without " " would make upstream emit -1; byte fallback is what sentencepiece does. */
    if (n > 0 && tok->dummy_prefix) ids[count++] = tok->space_id >= 0 ? tok->space_id : ' ' + tok->byte_base;
    /* As upstream: a code point is a lead byte plus up to 3 continuation bytes; an unknown
     * one (or stray continuation bytes) becomes one byte-fallback id per byte. */
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && (s[j] & 0xC0) == 0x80 && j - i < 4) j++;
        int id = dz_strmap_find(&tok->lookup, lookup_pieces(tok), text + i, (int)(j - i));
        if (id >= 0) ids[count++] = id;
        else
            for (size_t k = i; k < j; k++) ids[count++] = s[k] + tok->byte_base;
        i = j;
    }
    dz_merge_ws ws = {0};
    pair_ctx ctx = {tok, buf};
    int m = dz_bpe_merge(ids, count, llama_pair, &ctx, &ws);
    dz_merge_ws_free(&ws);
    free(buf);
    for (int k = 0; k < m; k++) dz_sink_push(out, ids[k]);
    free(ids);
    if (m < 0) return dz_fail(err, DZ_ERR_NOMEM, "tokenizer: out of memory encoding %zu bytes", n);
    return DZ_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

const char *dz_llama2c_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap) {
    int len;
    const char *piece = dz_pieces_get(&tok->pieces, id, &len);
    if (!piece || cap <= 0) return "";
    /* after BOS, sentencepiece drops the dummy-prefix space */
    if (prev_id >= 0 && prev_id == tok->special[DZ_SPECIAL_BOS] && len > 0 && piece[0] == ' ') piece++, len--;
    /* byte-fallback tokens "<0xXX>" stand for one raw byte */
    if (len == 6 && memcmp(piece, "<0x", 3) == 0 && piece[5] == '>' && hex_digit(piece[3]) >= 0 &&
        hex_digit(piece[4]) >= 0) {
        buf[0] = (char)(hex_digit(piece[3]) * 16 + hex_digit(piece[4]));
        len = 1;
        piece = buf;
    }
    if (len > cap - 1) len = cap - 1;
    memmove(buf, piece, (size_t)len);
    buf[len] = '\0';
    return buf;
}
