/* GPT-2 byte-level BPE (GPT-2 ids, and OPT ids through fairseq's dict.txt).
 *
 * Vocabulary strings are stored as the raw bytes they stand for (the byte-to-unicode
 * mapping undone at load time), so encoding works on the text's bytes directly: split
 * into pre-tokens with GPT-2's regex, start from one symbol per byte, merge by rank. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "tokenizer/internal.h"
#include "tokenizer/unicode.h"

enum { MAX_BPE_ID = 1 << 24 };

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other
 * 68 bytes take code points 256, 257, ... in byte order. */
void dz_bytelevel_inverse(int inv[DZ_BYTE_MAP_SIZE]) {
    int extra = 0;
    for (int cp = 0; cp < DZ_BYTE_MAP_SIZE; cp++) inv[cp] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        inv[printable ? b : 256 + extra++] = b;
    }
}

int dz_bytelevel_from_bytes(const char *bytes, int len, char *out) {
    int inv[DZ_BYTE_MAP_SIZE], cp[256], m = 0;
    dz_bytelevel_inverse(inv);
    for (int c = 0; c < DZ_BYTE_MAP_SIZE; c++)
        if (inv[c] >= 0) cp[inv[c]] = c;
    for (int i = 0; i < len; i++) m += dz_utf8_encode((uint32_t)cp[(uint8_t)bytes[i]], out + m);
    out[m] = '\0';
    return m;
}

int dz_bytelevel_to_bytes(const int inv[DZ_BYTE_MAP_SIZE], const char *s, char *out) {
    size_t n = strlen(s);
    int m = 0;
    for (size_t i = 0; i < n;) {
        int len;
        int32_t cp = dz_utf8_decode((const uint8_t *)s + i, n - i, &len);
        if (cp < 0 || cp >= DZ_BYTE_MAP_SIZE || inv[cp] < 0) return -1;
        out[m++] = (char)inv[cp];
        i += (size_t)len;
    }
    return m;
}

static int line_of(const char *buf, const char *pos) {
    int line = 1;
    for (const char *p = buf; p < pos && *p; p++) line += *p == '\n';
    return line;
}

/* Parses vocab.json / encoder.json: an object of token string -> id. */
static dz_status read_vocab_json(const char *path, cJSON **out, int *n_ids, dz_error *err) {
    char *text;
    size_t len;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line = line_of(text, end ? end : text);
        free(text);
        return dz_fail(err, DZ_ERR_FORMAT, "%s:%d: malformed JSON", path, line);
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: expected a JSON object of token -> id", path);
    }
    int max_id = -1;
    for (const cJSON *e = root->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (v < 0 || v >= MAX_BPE_ID || v != (double)(int)v) {
            dz_fail(err, DZ_ERR_FORMAT, "%s: token \"%.80s\": id is not an integer in [0, %d)", path, e->string,
                    MAX_BPE_ID);
            cJSON_Delete(root);
            return DZ_ERR_FORMAT;
        }
        if ((int)v > max_id) max_id = (int)v;
    }
    if (max_id < 0) {
        cJSON_Delete(root);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: no tokens", path);
    }
    *out = root;
    *n_ids = max_id + 1;
    return DZ_OK;
}

/* Load-time state: the BPE vocabulary as bytes (holes for tokens outside the byte
 * mapping, e.g. special tokens with spaces), and its byte-string index. */
typedef struct gpt2_loader {
    int inv[DZ_BYTE_MAP_SIZE];
    dz_pieces bpe;
    dz_strmap index;
} gpt2_loader;

static dz_status build_vocab(dz_tokenizer *tok, gpt2_loader *ld, const char *path, const cJSON *root,
                             dz_error *err) {
    if (dz_pieces_init(&ld->bpe, tok->n_bpe) || dz_pieces_init(&tok->pieces, tok->n_bpe))
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *e = root->child; e; e = e->next) {
        int id = (int)e->valuedouble, slen = (int)strlen(e->string);
        if (dz_pieces_get(&tok->pieces, id, NULL))
            return dz_fail(err, DZ_ERR_FORMAT, "%s: token \"%s\": id %d is used twice", path, e->string, id);
        char *bytes = malloc((size_t)slen + 1);
        if (!bytes) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
        int blen = dz_bytelevel_to_bytes(ld->inv, e->string, bytes);
        int bad = blen >= 0 ? dz_pieces_set(&ld->bpe, id, bytes, blen) || dz_pieces_set(&tok->pieces, id, bytes, blen)
                            : dz_pieces_set(&tok->pieces, id, e->string, slen); /* decoded as written */
        free(bytes);
        if (bad) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    if (dz_strmap_build(&ld->index, &ld->bpe)) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        tok->byte_id[b] = dz_strmap_find(&ld->index, &ld->bpe, &c, 1);
        if (tok->byte_id[b] < 0) /* tokenizer.json / GGUF vocabularies drop such bytes, as HF does */
            return dz_fail(err, DZ_ERR_FORMAT, "%s: no token for byte 0x%02X (byte-level BPE needs all 256)",
                           path, b);
    }
    return DZ_OK;
}

/* The id of a merge symbol, or -1 (symbol outside the byte mapping or not in the vocab). */
static int symbol_id(const gpt2_loader *ld, const char *sym, char *scratch) {
    int blen = dz_bytelevel_to_bytes(ld->inv, sym, scratch);
    return blen < 0 ? -1 : dz_strmap_find(&ld->index, &ld->bpe, scratch, blen);
}

/* Next line of buf starting at *pos, NUL-terminated in place, '\r' stripped; NULL at the end. */
static char *next_line(char *buf, size_t len, size_t *pos) {
    if (*pos >= len) return NULL;
    char *line = buf + *pos, *nl = memchr(line, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - line) : len - *pos;
    *pos += n + (nl ? 1 : 0);
    line[n] = '\0';
    if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
    return line;
}

static dz_status read_merges(dz_tokenizer *tok, const gpt2_loader *ld, const char *path, const char *vocab_path,
                             dz_error *err) {
    char *text;
    size_t len, pos = 0;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    char *scratch = malloc(len + 1);
    if (!scratch) {
        free(text);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    char *line;
    int n_merges = 0;
    for (int lineno = 1; st == DZ_OK && (line = next_line(text, len, &pos)); lineno++) {
        if (strncmp(line, "#version", 8) == 0) continue;
        n_merges++;
        char *sp = strchr(line, ' ');
        if (!sp || sp == line || sp[1] == '\0' || strchr(sp + 1, ' ')) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected two symbols separated by one space, got \"%.80s\"",
                         path, lineno, line);
            break;
        }
        *sp = '\0';
        const char *a = line, *b = sp + 1;
        int ia = symbol_id(ld, a, scratch), ib = symbol_id(ld, b, scratch);
        if (ia < 0 || ib < 0) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: merge symbol \"%.80s\" is not in %s", path, lineno,
                         ia < 0 ? a : b, vocab_path);
            break;
        }
        const int merged = dz_strmap_find_pair(&ld->index, &ld->bpe, ia, ib, scratch);
        if (merged < 0)
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: merged token \"%.80s%.80s\" is not in %s", path, lineno, a, b,
                         vocab_path);
        else if (dz_pairmap_put(&tok->merges, ia, ib, lineno, merged))
            st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == DZ_OK && n_merges == 0) /* a byte-level BPE without merges is a truncated or wrong file */
        st = dz_fail(err, DZ_ERR_FORMAT, "%s: holds no merges (expected one \"a b\" pair a line)", path);
    free(scratch);
    free(text);
    return st;
}

static int is_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* Splits a dict.txt line "<symbol> <count>[ #fairseq:overwrite]" in place (as fairseq's
 * Dictionary.add_from_file does: the count is after the last space). Returns the symbol or NULL. */
static char *dict_symbol(char *line) {
    size_t n = strlen(line);
    while (n > 0 && isspace((unsigned char)line[n - 1])) line[--n] = '\0';
    static const char flag[] = " #fairseq:overwrite";
    size_t fl = sizeof flag - 1;
    if (n > fl && strcmp(line + n - fl, flag) == 0) line[n -= fl] = '\0';
    char *sp = strrchr(line, ' ');
    if (!sp || sp == line || !is_digits(sp + 1)) return NULL;
    *sp = '\0';
    return line;
}

static const char *const fairseq_specials[4] = {"<s>", "<pad>", "</s>", "<unk>"};

/* Output ids = 4 + line of the GPT-2 id in dict.txt; GPT-2 ids it lacks map to <unk> (3). */
static dz_status read_dict(dz_tokenizer *tok, const char *path, dz_error *err) {
    char *text;
    size_t len, pos = 0;
    dz_status st = dz_read_file(path, &text, &len, err);
    if (st != DZ_OK) return st;
    int lines = 0;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    if (len > 0 && text[len - 1] != '\n') lines++;
    if (lines == 0) {
        free(text);
        return dz_fail(err, DZ_ERR_FORMAT, "%s: holds no entries (expected \"<symbol> <count>\" a line)", path);
    }
    dz_pieces out;
    tok->id_map = malloc((size_t)tok->n_bpe * sizeof *tok->id_map);
    if (!tok->id_map || dz_pieces_init(&out, 4 + lines)) {
        free(text);
        return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < tok->n_bpe; i++) tok->id_map[i] = 3;
    for (int i = 0; i < 4 && st == DZ_OK; i++)
        if (dz_pieces_set(&out, i, fairseq_specials[i], (int)strlen(fairseq_specials[i])))
            st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    char *line;
    for (int lineno = 1; st == DZ_OK && (line = next_line(text, len, &pos)); lineno++) {
        int id = 4 + lineno - 1, plen;
        char *sym = dict_symbol(line);
        if (!sym) {
            st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: expected \"<symbol> <count>\"", path, lineno);
            break;
        }
        const char *piece = sym;
        plen = (int)strlen(sym);
        if (is_digits(sym)) { /* a GPT-2 id; other symbols (madeupword0000...) are never produced */
            long g = strtol(sym, NULL, 10);
            piece = g < tok->n_bpe ? dz_pieces_get(&tok->pieces, (int)g, &plen) : NULL;
            if (!piece) {
                st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: \"%s\" is not an id of the GPT-2 vocabulary", path, lineno,
                             sym);
                break;
            }
            if (tok->id_map[g] != 3) {
                st = dz_fail(err, DZ_ERR_FORMAT, "%s:%d: GPT-2 id %s is listed twice", path, lineno, sym);
                break;
            }
            tok->id_map[g] = id;
        }
        if (dz_pieces_set(&out, id, piece, plen)) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    }
    free(text);
    if (st != DZ_OK) {
        dz_pieces_free(&out);
        return st;
    }
    dz_pieces_free(&tok->pieces);
    tok->pieces = out;
    tok->bos = tok->eos = 2;
    return DZ_OK;
}

static int find_piece(const dz_pieces *p, const char *s) {
    for (int id = 0; id < p->n; id++) {
        int len;
        const char *t = dz_pieces_get(p, id, &len);
        if (t && (size_t)len == strlen(s) && memcmp(t, s, (size_t)len) == 0) return id;
    }
    return -1;
}

static int output_id(const dz_tokenizer *tok, int bpe_id) { return tok->id_map ? tok->id_map[bpe_id] : bpe_id; }

/* 1 + the largest id encode can give: byte tokens, merge results, start/end tokens.
 * Vocabulary entries past it (fairseq's madeupword padding, specials) still decode, but
 * a model needs no embedding rows for them. */
int dz_gpt2_encodable_vocab_size(const dz_tokenizer *tok) {
    int max_id = tok->bos > tok->eos ? tok->bos : tok->eos;
    for (int b = 0; b < 256; b++)
        if (tok->byte_id[b] >= 0 && output_id(tok, tok->byte_id[b]) > max_id) max_id = output_id(tok, tok->byte_id[b]);
    for (uint32_t i = 0; tok->merges.e && i <= tok->merges.mask; i++) {
        const dz_pair_entry *e = &tok->merges.e[i];
        if (e->key != UINT64_MAX && output_id(tok, e->merged) > max_id) max_id = output_id(tok, e->merged);
    }
    return max_id + 1;
}

dz_status dz_gpt2_load(dz_tokenizer *tok, const char *vocab_path, const char *merges_path, const char *dict_path,
                       dz_error *err) {
    gpt2_loader ld = {0};
    dz_bytelevel_inverse(ld.inv);
    cJSON *root = NULL;
    tok->kind = DZ_TOK_GPT2_BPE;
    dz_status st = read_vocab_json(vocab_path, &root, &tok->n_bpe, err);
    if (st == DZ_OK) st = build_vocab(tok, &ld, vocab_path, root, err);
    cJSON_Delete(root);
    if (st == DZ_OK) st = read_merges(tok, &ld, merges_path, vocab_path, err);
    dz_strmap_free(&ld.index);
    dz_pieces_free(&ld.bpe);
    if (st == DZ_OK && dict_path) st = read_dict(tok, dict_path, err);
    if (st == DZ_OK && !dict_path) {
        /* OPT's HF vocab.json already holds fairseq ids, with </s> = 2 as its start token. */
        int eos_s = find_piece(&tok->pieces, "</s>");
        tok->bos = eos_s == 2 ? 2 : -1;
        tok->eos = eos_s == 2 ? 2 : find_piece(&tok->pieces, "<|endoftext|>");
    }
    if (st == DZ_OK) tok->vocab_size = dz_gpt2_encodable_vocab_size(tok);
    return st;
}
