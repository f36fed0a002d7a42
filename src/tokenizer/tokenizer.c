/* Public tokenizer API: picks the format from the path, dispatches to the encoders. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "tokenizer/internal.h"

typedef struct gpt2_files {
    char vocab[4096], merges[4096], dict[4096];
    int has_dict;
    char hf_json[4096], hf_config[4096]; /* tokenizer.json (hf_json[0] = 0: none) + tokenizer_config.json */
    char spm[4096];                      /* a SentencePiece tokenizer.model (spm[0] = 0: none) */
    char llama2c[4096];                  /* a llama2.c tokenizer.bin (dz_tokenizer_save_hf's; [0] = 0: none) */
    int has_config;
} gpt2_files;

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* dir/name, which must resolve inside dir (a tokenizer file symlinked out of its folder is
 * refused; the Hugging Face hub cache's blobs are allowed: core/util.h). */
static dz_status join(char *out, const char *dir, const char *name, dz_error *err) {
    if (dz_path_join(out, 4096, dir, name) != 0) return dz_fail(err, DZ_ERR_INVALID, "%s: path too long", dir);
    const dz_status st = dz_path_check_inside(dir, name, "the tokenizer file", err);
    if (st != DZ_OK) return st;
    return DZ_OK;
}

/* tokenizer.json in dir: sets f->hf_json (and hf_config when tokenizer_config.json is there). */
static dz_status hf_json_files(const char *dir, gpt2_files *f, dz_error *err) {
    dz_status st = join(f->hf_json, dir, "tokenizer.json", err);
    if (st == DZ_OK) st = join(f->hf_config, dir, "tokenizer_config.json", err);
    if (st != DZ_OK) return st;
    f->has_config = dz_file_exists(f->hf_config);
    return DZ_OK;
}


/* A folder: tokenizer.json, else vocab.json + merges.txt, else encoder.json + vocab.bpe (+ dict.txt). */
static dz_status folder_files(const char *dir, gpt2_files *f, dz_error *err) {
    char probe[4096];
    dz_status st = join(probe, dir, "tokenizer.json", err);
    if (st == DZ_OK && dz_file_exists(probe)) return hf_json_files(dir, f, err);
    if (st == DZ_OK) st = join(f->vocab, dir, "vocab.json", err);
    if (st == DZ_OK && dz_file_exists(f->vocab)) return join(f->merges, dir, "merges.txt", err);
    if (st == DZ_OK) st = join(f->vocab, dir, "encoder.json", err);
    if (st == DZ_OK) st = join(f->merges, dir, "vocab.bpe", err);
    if (st == DZ_OK) st = join(f->dict, dir, "dict.txt", err);
    if (st != DZ_OK) return st;
    if (!dz_file_exists(f->vocab) && !dz_file_exists(f->merges)) {
        if ((st = join(f->spm, dir, "tokenizer.model", err)) == DZ_OK && dz_file_exists(f->spm)) return DZ_OK;
        f->spm[0] = '\0';
        if (st == DZ_OK && (st = join(f->llama2c, dir, "tokenizer.bin", err)) == DZ_OK && dz_file_exists(f->llama2c))
            return DZ_OK;
        f->llama2c[0] = '\0';
        return st != DZ_OK ? st
                           : dz_fail(err, DZ_ERR_IO, "%s: no tokenizer files (tokenizer.json, vocab.json + merges.txt, "
                                     "encoder.json + vocab.bpe, tokenizer.model or llama2.c's tokenizer.bin)", dir);
    }
    f->has_dict = dz_file_exists(f->dict);
    return DZ_OK;
}

/* One of the GPT-2 files: its folder's files, with dict.txt only when that is the file
 * named (so the asset folder can give GPT-2 ids through encoder.json or vocab.bpe). */
static int gpt2_file_files(const char *path, gpt2_files *f, dz_error *err, dz_status *st) {
    const char *name = base_name(path);
    int hf = !strcmp(name, "vocab.json") || !strcmp(name, "merges.txt");
    int orig = !strcmp(name, "encoder.json") || !strcmp(name, "vocab.bpe") || !strcmp(name, "dict.txt");
    int hf_json = !strcmp(name, "tokenizer.json") || !strcmp(name, "tokenizer_config.json");
    if (!hf && !orig && !hf_json) return 0;
    char dir[4096];
    size_t dlen = (size_t)(name - path);
    if (dlen >= sizeof dir) {
        *st = dz_fail(err, DZ_ERR_INVALID, "%s: path too long", path);
        return 1;
    }
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    if (dlen == 0) strcpy(dir, ".");
    else if (dlen > 1) dir[dlen - 1] = '\0'; /* drop the slash, except for "/" */
    if (hf_json) {
        *st = hf_json_files(dir, f, err);
        return 1;
    }
    *st = join(f->vocab, dir, hf ? "vocab.json" : "encoder.json", err);
    if (*st == DZ_OK) *st = join(f->merges, dir, hf ? "merges.txt" : "vocab.bpe", err);
    if (*st == DZ_OK) *st = join(f->dict, dir, "dict.txt", err);
    f->has_dict = !strcmp(name, "dict.txt");
    return 1;
}

dz_status dz_tokenizer_load(const char *path, int vocab_size, dz_tokenizer **out, dz_error *err) {
    *out = NULL;
    if (!path) return dz_fail(err, DZ_ERR_INVALID, "tokenizer: no path given");
    gpt2_files *f = calloc(1, sizeof *f);
    if (!f) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    dz_status st = DZ_OK;
    int gpt2 = 1;
    if (dz_is_dir(path)) st = folder_files(path, f, err);
    else if (!gpt2_file_files(path, f, err, &st)) gpt2 = 0;
    if (st == DZ_OK && f->llama2c[0]) gpt2 = 0, path = f->llama2c; /* a saved llama2.c tokenizer's folder */
    size_t plen = strlen(path);
    if (st == DZ_OK && !gpt2 && plen >= 6 && !strcmp(path + plen - 6, ".model")) snprintf(f->spm, sizeof f->spm, "%s", path);
    if (st == DZ_OK && !gpt2 && plen >= 5 && !strcmp(path + plen - 5, ".gguf")) {
        free(f);
        return dz_gguf_tokenizer_load(path, out, err);
    }
    if (st == DZ_OK && f->spm[0]) {
        st = dz_sentencepiece_load(f->spm, out, err);
        free(f);
        return st;
    }
    if (st == DZ_OK && f->hf_json[0]) {
        st = dz_hf_json_load(f->hf_json, f->has_config ? f->hf_config : NULL, out, err);
        free(f);
        return st;
    }
    dz_tokenizer *tok = st == DZ_OK ? dz_tokenizer_alloc() : NULL;
    if (st == DZ_OK && !tok) st = dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", path);
    if (st == DZ_OK)
        st = gpt2 ? dz_gpt2_load(tok, f->vocab, f->merges, f->has_dict ? f->dict : NULL, err)
                  : dz_llama2c_load(tok, path, vocab_size, err);
    free(f);
    if (st != DZ_OK) {
        dz_tokenizer_free(tok);
        return st;
    }
    tok->special[DZ_SPECIAL_BOS] = tok->bos;
    tok->special[DZ_SPECIAL_EOS] = tok->eos;
    *out = tok;
    return DZ_OK;
}

dz_tokenizer *dz_tokenizer_alloc(void) {
    dz_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return NULL;
    tok->space_id = tok->unk_id = -1;
    for (int k = 0; k < DZ_SPECIAL_COUNT; k++) tok->special[k] = -1;
    return tok;
}

void dz_tokenizer_free(dz_tokenizer *tok) {
    if (!tok) return;
    dz_pieces_free(&tok->pieces);
    dz_pairmap_free(&tok->merges);
    free(tok->id_map);
    free(tok->scores);
    dz_strmap_free(&tok->lookup);
    dz_pieces_free(&tok->bpe);
    dz_pieces_free(&tok->mergeable);
    dz_strmap_free(&tok->bpe_index);
    free(tok->added.id);
    free(tok->added.special);
    free(tok->added.strip);
    free(tok->chat_template);
    free(tok);
}

dz_tokenizer_kind dz_tokenizer_get_kind(const dz_tokenizer *tok) { return tok->kind; }
int dz_tokenizer_vocab_size(const dz_tokenizer *tok) { return tok->vocab_size; }
int dz_tokenizer_bos(const dz_tokenizer *tok) { return tok->bos; }
int dz_tokenizer_eos(const dz_tokenizer *tok) { return tok->eos; }
int dz_tokenizer_special(const dz_tokenizer *tok, dz_special which) {
    return which >= 0 && which < DZ_SPECIAL_COUNT ? tok->special[which] : -1;
}

int dz_tokenizer_encode(const dz_tokenizer *tok, const char *text, int add_bos, int *ids, int cap, dz_error *err) {
    return dz_tokenizer_encode_flags(tok, text, add_bos ? DZ_ENCODE_BOS : 0, ids, cap, err);
}

int dz_tokenizer_encode_flags(const dz_tokenizer *tok, const char *text, unsigned flags, int *ids, int cap,
                              dz_error *err) {
    if (!tok || !text || cap < 0 || (cap > 0 && !ids)) {
        dz_fail(err, DZ_ERR_INVALID, "tokenizer: encode needs a tokenizer, text and room for ids");
        return -1;
    }
    if (strlen(text) > INT_MAX / 4) { /* ids (<= bytes + 2) and merge-heap entries (3 per symbol) are ints */
        dz_fail(err, DZ_ERR_INVALID, "tokenizer: text of %zu bytes is too long to encode", strlen(text));
        return -1;
    }
    dz_id_sink out = {ids, cap, 0};
    int llama = tok->kind == DZ_TOK_LLAMA2C || tok->kind == DZ_TOK_SENTENCEPIECE;
    dz_status st = llama ? dz_llama2c_encode(tok, text, flags & DZ_ENCODE_BOS, &out, err)
                         : dz_gpt2_encode(tok, text, flags, &out, err);
    return st == DZ_OK ? out.n : -1;
}

const char *dz_tokenizer_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap) {
    if (!tok || !buf || cap <= 0) return "";
    if (tok->kind == DZ_TOK_LLAMA2C || tok->kind == DZ_TOK_SENTENCEPIECE) return dz_llama2c_decode(tok, prev_id, id, buf, cap);
    int len;
    const char *piece = dz_pieces_get(&tok->pieces, id, &len);
    if (!piece) return "";
    /* SentencePiece-style: the prepended space goes after BOS (HF's Strip decoder) */
    if (tok->char_bpe && prev_id >= 0 && prev_id == tok->special[DZ_SPECIAL_BOS] && len > 0 && piece[0] == ' ')
        piece++, len--;
    if (len > cap - 1) len = cap - 1;
    memcpy(buf, piece, (size_t)len);
    buf[len] = '\0';
    return buf;
}
