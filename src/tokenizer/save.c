/* Writes a loaded tokenizer into a checkpoint folder, as Hugging Face files where HF can
 * read them: GPT-2 byte-level BPE as vocab.json + merges.txt + special_tokens_map.json +
 * tokenizer_config.json (GPT2Tokenizer); llama2.c as tokenizer.bin (HF has no reader for it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "core/bytes.h"
#include "core/util.h"
#include "tokenizer/internal.h"

static dz_status write_file(const char *dir, const char *name, const dz_bytes *b, dz_error *err) {
    char path[4096];
    if (b->oom) return dz_fail(err, DZ_ERR_NOMEM, "%s/%s: out of memory", dir, name);
    if (dz_path_join(path, sizeof path, dir, name) != 0) return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    return dz_write_file_atomic(path, b->p ? b->p : "", b->len, err);
}

/* ---- llama2.c ---- */

static dz_status save_llama2c(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    dz_bytes b = {0};
    int32_t max_len = tok->max_piece_len;
    dz_bytes_put(&b, &max_len, 4); /* llama2.c's files are little-endian, as is every host we build on */
    for (int id = 0; id < tok->vocab_size; id++) {
        int len;
        const char *s = dz_pieces_get(&tok->pieces, id, &len);
        int32_t n = s ? len : 0;
        dz_bytes_put(&b, &tok->scores[id], 4);
        dz_bytes_put(&b, &n, 4);
        if (n) dz_bytes_put(&b, s, (size_t)n);
    }
    dz_status st = write_file(dir, "tokenizer.bin", &b, err);
    free(b.p);
    return st;
}

/* ---- GPT-2 byte-level BPE ---- */

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other
 * 68 bytes take code points 256, 257, ... in byte order. */
static void byte_to_unicode(int cp[256]) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        cp[b] = printable ? b : 256 + extra++;
    }
}

/* A token's bytes as its vocabulary string (UTF-8), JSON-escaped when json is set. */
static void put_token(dz_bytes *b, const int cp[256], const char *s, int len, int json) {
    for (int i = 0; i < len; i++) {
        int c = cp[(uint8_t)s[i]];
        char u[2];
        if (c < 0x80) {
            if (json && (c == '"' || c == '\\')) dz_bytes_put(b, "\\", 1);
            u[0] = (char)c;
            dz_bytes_put(b, u, 1);
        } else { /* all code points of the mapping are below 0x800: two UTF-8 bytes */
            u[0] = (char)(0xC0 | (c >> 6));
            u[1] = (char)(0x80 | (c & 0x3F));
            dz_bytes_put(b, u, 2);
        }
    }
}

static void put_entry(dz_bytes *b, const int cp[256], const char *s, int len, int id, int *first) {
    char num[32];
    dz_bytes_str(b, *first ? "{\"" : ", \"");
    *first = 0;
    put_token(b, cp, s, len, 1);
    snprintf(num, sizeof num, "\": %d", id);
    dz_bytes_str(b, num);
}

/* With fairseq's dict.txt (OPT ids), the vocabulary HF's OPT files have: the four specials,
 * the dictionary (GPT-2 tokens at 4 + line) cut where fairseq's padding to a multiple of 8
 * ends (madeupword0000..0002 for GPT-2), then "<mask>" - RoBERTa's vocab.json, which
 * facebook/opt-* ship (50265 entries). The rest of dict.txt's madeupword padding is left
 * out: HF would count it in len(tokenizer), beyond OPT's 50272 embedding rows.
 * Without dict.txt the ids already are the vocabulary file's: all of them are written. */
static void vocab_json(const dz_tokenizer *tok, const int cp[256], dz_bytes *b) {
    int end = tok->pieces.n, mask_id = -1, first = 1;
    if (tok->id_map) {
        int max_mapped = 3;
        for (int i = 0; i < tok->n_bpe; i++)
            if (tok->id_map[i] > max_mapped) max_mapped = tok->id_map[i];
        mask_id = (max_mapped + 1 + 7) / 8 * 8;
        if (mask_id < end) end = mask_id;
    }
    for (int id = 0; id < end; id++) {
        int len;
        const char *s = dz_pieces_get(&tok->pieces, id, &len);
        if (s) put_entry(b, cp, s, len, id, &first);
    }
    if (mask_id >= 0) put_entry(b, cp, "<mask>", 6, mask_id, &first);
    dz_bytes_str(b, first ? "{}\n" : "}\n");
}

/* The bytes of a BPE-space id (merges run on GPT-2 ids; dict.txt maps them to output ids). */
static const char *bpe_piece(const dz_tokenizer *tok, int bpe_id, int *len) {
    int out = tok->id_map ? tok->id_map[bpe_id] : bpe_id;
    if (tok->id_map && out == 3) return NULL; /* not in dict.txt: its bytes were not kept */
    return dz_pieces_get(&tok->pieces, out, len);
}

static int by_rank(const void *a, const void *b) {
    const dz_pair_entry *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* "#version: 0.2", then the merges best first (ranks are their lines in the file read). */
static dz_status merges_txt(const dz_tokenizer *tok, const int cp[256], const char *dir, dz_bytes *b, dz_error *err) {
    const dz_pairmap *m = &tok->merges;
    dz_pair_entry *e = malloc((size_t)(m->count ? m->count : 1) * sizeof *e);
    if (!e) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", dir);
    int n = 0;
    for (uint32_t i = 0; m->e && i <= m->mask; i++)
        if (m->e[i].key != UINT64_MAX) e[n++] = m->e[i];
    qsort(e, (size_t)n, sizeof *e, by_rank);
    dz_bytes_str(b, "#version: 0.2\n");
    dz_status st = DZ_OK;
    for (int i = 0; i < n && st == DZ_OK; i++) {
        int ids[2] = {(int)(e[i].key >> 32), (int)(uint32_t)e[i].key};
        for (int k = 0; k < 2; k++) {
            int len;
            const char *s = bpe_piece(tok, ids[k], &len);
            if (!s) {
                st = dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: merge %d uses GPT-2 id %d, which dict.txt does not list", dir,
                             i + 1, ids[k]);
                break;
            }
            put_token(b, cp, s, len, 0);
            dz_bytes_str(b, k ? "\n" : " ");
        }
    }
    free(e);
    return st;
}

static const char *piece_str(const dz_tokenizer *tok, int id, const char *want) {
    int len;
    const char *s = dz_pieces_get(&tok->pieces, id, &len);
    return s && (!want || ((size_t)len == strlen(want) && !memcmp(s, want, (size_t)len))) ? s : NULL;
}

/* OPT: bos = eos = "</s>", pad "<pad>", unk "<unk>", a start token added. GPT-2: all of
 * them "<|endoftext|>" (HF's convention), no pad, nothing added. */
static dz_status special_files(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    const char *eos = piece_str(tok, tok->eos, NULL);
    if (!eos) return dz_fail(err, DZ_ERR_UNSUPPORTED, "%s: the tokenizer has no end-of-text token to name", dir);
    int opt = tok->bos >= 0;
    const char *unk = opt && piece_str(tok, 3, "<unk>") ? "<unk>" : eos;
    const char *pad = opt && piece_str(tok, 1, "<pad>") ? "<pad>" : NULL;
    cJSON *map = cJSON_CreateObject(), *cfg = cJSON_CreateObject();
    for (int k = 0; k < 2; k++) {
        cJSON *o = k ? cfg : map;
        if (k) cJSON_AddStringToObject(o, "tokenizer_class", "GPT2Tokenizer");
        cJSON_AddStringToObject(o, "bos_token", opt ? piece_str(tok, tok->bos, NULL) : eos);
        cJSON_AddStringToObject(o, "eos_token", eos);
        cJSON_AddStringToObject(o, "unk_token", unk);
        if (pad) cJSON_AddStringToObject(o, "pad_token", pad);
        if (k) {
            cJSON_AddBoolToObject(o, "add_bos_token", opt);
            cJSON_AddBoolToObject(o, "add_prefix_space", 0);
            cJSON_AddStringToObject(o, "errors", "replace");
        }
    }
    char *texts[2] = {cJSON_Print(map), cJSON_Print(cfg)};
    const char *names[2] = {"special_tokens_map.json", "tokenizer_config.json"};
    dz_status st = DZ_OK;
    for (int k = 0; k < 2 && st == DZ_OK; k++) {
        dz_bytes b = {0};
        if (texts[k]) {
            dz_bytes_str(&b, texts[k]);
            dz_bytes_str(&b, "\n");
        } else b.oom = 1;
        st = write_file(dir, names[k], &b, err);
        free(b.p);
    }
    for (int k = 0; k < 2; k++) cJSON_free(texts[k]);
    cJSON_Delete(map);
    cJSON_Delete(cfg);
    return st;
}

static dz_status save_gpt2(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    int cp[256];
    byte_to_unicode(cp);
    dz_bytes b = {0};
    vocab_json(tok, cp, &b);
    dz_status st = write_file(dir, "vocab.json", &b, err);
    b.len = 0;
    if (st == DZ_OK) st = merges_txt(tok, cp, dir, &b, err);
    if (st == DZ_OK) st = write_file(dir, "merges.txt", &b, err);
    free(b.p);
    return st == DZ_OK ? special_files(tok, dir, err) : st;
}

dz_status dz_tokenizer_save_hf(const dz_tokenizer *tok, const char *dir, dz_error *err) {
    if (!tok || !dir) return dz_fail(err, DZ_ERR_INVALID, "tokenizer: save needs a tokenizer and a folder");
    if (!dz_is_dir(dir) && mkdir(dir, 0755) != 0)
        return dz_fail(err, DZ_ERR_IO, "%s: cannot create folder: %s", dir, strerror(errno));
    if (tok->kind == DZ_TOK_HF_BPE) return dz_save_tokenizer_json(tok, dir, err);
    if (tok->kind == DZ_TOK_SENTENCEPIECE) return dz_save_sentencepiece(tok, dir, err);
    return tok->kind == DZ_TOK_LLAMA2C ? save_llama2c(tok, dir, err) : save_gpt2(tok, dir, err);
}
