/* Shared internals of the tokenizers: token string tables, hash maps, the BPE merge loop. */
#ifndef DZ_TOKENIZER_INTERNAL_H
#define DZ_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/tokenizer.h"
#include "tokenizer/pretokenize.h"

/* Byte strings addressed by id, stored in one NUL-separated blob. Ids may have holes. */
typedef struct dz_pieces {
    char *blob;
    size_t used, cap;
    long *off; /* -1 for an id without a string */
    int *len;
    int n;
} dz_pieces;

int dz_pieces_init(dz_pieces *p, int n);                          /* 0, or -1 out of memory */
int dz_pieces_set(dz_pieces *p, int id, const char *s, int len); /* 0, or -1 out of memory */
const char *dz_pieces_get(const dz_pieces *p, int id, int *len); /* NULL for a hole */
void dz_pieces_free(dz_pieces *p);

/* Byte string -> id over a dz_pieces (which must outlive it); the first id wins on duplicates. */
typedef struct dz_strmap {
    int *slot; /* id, or -1 for empty */
    uint32_t mask;
} dz_strmap;

int dz_strmap_build(dz_strmap *m, const dz_pieces *p); /* 0, or -1 out of memory */
int dz_strmap_find(const dz_strmap *m, const dz_pieces *p, const char *s, int len); /* id or -1 */
/* The id of pieces a and b one after the other (what a BPE merge of a and b makes), or -1;
 * scratch holds their two lengths. */
int dz_strmap_find_pair(const dz_strmap *m, const dz_pieces *p, int a, int b, char *scratch);
void dz_strmap_free(dz_strmap *m);

/* (left id, right id) -> merge rank and merged id; a later insert of the same pair replaces
 * the earlier one, as HF tokenizers and GPT-2's encoder.py build their rank maps. */
typedef struct dz_pair_entry {
    uint64_t key; /* UINT64_MAX: empty */
    int rank, merged;
} dz_pair_entry;

typedef struct dz_pairmap {
    dz_pair_entry *e;
    uint32_t mask;
    int count;
} dz_pairmap;

int dz_pairmap_put(dz_pairmap *m, int left, int right, int rank, int merged); /* 0, or -1 OOM */
const dz_pair_entry *dz_pairmap_find(const dz_pairmap *m, int left, int right);
void dz_pairmap_free(dz_pairmap *m);

/* The BPE merge loop shared by both tokenizers: repeatedly merge the adjacent pair with the
 * smallest key, the leftmost one among equal keys, until no pair is mergeable. pair_fn says
 * whether (left, right) merges, and into which id with which key. */
typedef int (*dz_pair_fn)(const void *ctx, int left, int right, double *key, int *merged);

typedef struct dz_heap_entry {
    double key;
    int left, right; /* node indices; left is also the tie-break position */
    int left_ver, right_ver, merged;
} dz_heap_entry;

/* Per-call scratch memory (never shared between threads). Zero-initialise; free when done. */
typedef struct dz_merge_ws {
    int cap;
    size_t heap_cap;
    int *next, *prev, *ver;
    dz_heap_entry *heap;
} dz_merge_ws;

/* Merges ids[0..n) in place; returns the new count, or -1 when out of memory. */
int dz_bpe_merge(int *ids, int n, dz_pair_fn pair_fn, const void *ctx, dz_merge_ws *ws);
void dz_merge_ws_free(dz_merge_ws *ws);

/* Output ids: writes the first cap, counts all. */
typedef struct dz_id_sink {
    int *ids;
    int cap, n;
} dz_id_sink;

static inline void dz_sink_push(dz_id_sink *s, int id) {
    if (s->n < s->cap) s->ids[s->n] = id;
    s->n++;
}

/* Added tokens (tokenizer.json's added_tokens, GGUF's control and user-defined tokens):
 * found in the text before pre-tokenization, leftmost first, longest at a position. Special
 * ones only when the caller asks for special-token parsing; the others always, as HF does. */
enum { DZ_STRIP_LEFT = 1, DZ_STRIP_RIGHT = 2 };

typedef struct dz_added_tokens {
    int n;
    int *id;          /* their text is the id's piece */
    uint8_t *special; /* 1: special (control) token */
    uint8_t *strip;   /* DZ_STRIP_* bits: whitespace around the token it takes (HF lstrip/rstrip) */
    uint8_t first_byte[256]; /* 1: some added token starts with this byte */
} dz_added_tokens;

struct dz_tokenizer {
    dz_tokenizer_kind kind;
    int vocab_size, bos, eos;
    int special[DZ_SPECIAL_COUNT]; /* declared ids (bos, eos, pad, unk), -1 for none */
    dz_pieces pieces; /* decoded bytes of each output id (what decode returns) */

    /* GPT-2 byte-level BPE: merges run in the BPE vocabulary's id space, then id_map
     * (dict.txt) translates to output ids; without dict.txt the two spaces are the same. */
    int byte_id[256];
    dz_pairmap merges;
    int *id_map;
    int n_bpe;
    dz_pretok pretok;     /* GPT-2's pattern for vocab.json / encoder.json files */
    int ignore_merges;    /* HF BPE: a pre-token that is itself a token is that one id */
    int unk_id, fuse_unk; /* HF BPE unk_token for bytes without a token (-1: dropped, as HF does) */
    dz_pieces bpe;        /* the BPE vocabulary as bytes (byte-level HF / GGUF tokenizers only) */
    dz_strmap bpe_index;
    dz_added_tokens added;
    int char_bpe;          /* symbols are characters looked up in bpe (SentencePiece-style tokenizer.json) */
    int prepend;           /* dz_prepend (build.h) */
    int metaspace_split;
    int nfc;               /* tokenizer.json normalizer NFC (Qwen2) */

    /* llama2.c and SentencePiece (pieces with U+2581 as " ") */
    float *scores;
    dz_strmap lookup; /* piece bytes -> id, over mergeable (if set) or pieces */
    dz_pieces mergeable; /* SentencePiece: the normal and user-defined pieces only */
    int byte_base;    /* id of <0x00>; <0xXX> = byte_base + XX */
    int dummy_prefix; /* a " " before non-empty text */
    int max_piece_len;
    int space_id;     /* id of " " (the dummy prefix), or -1 */

    char *chat_template; /* the files' chat template (dz_tokenizer_chat_template), or NULL */
};

/* A zeroed tokenizer with every optional id -1 (NULL when out of memory). */
dz_tokenizer *dz_tokenizer_alloc(void);

/* The tokenizer in a GGUF file's tokenizer.ggml.* metadata (src/tokenizer/gguf_vocab.c;
 * dz_tokenizer_from_gguf, for a file already open, is declared in build.h). */
dz_status dz_gguf_tokenizer_load(const char *path, dz_tokenizer **out, dz_error *err);

/* A SentencePiece tokenizer.model (ModelProto, BPE with byte fallback). */
dz_status dz_sentencepiece_load(const char *path, dz_tokenizer **out, dz_error *err);
/* Writes dir/tokenizer.model for a DZ_TOK_SENTENCEPIECE tokenizer. */
dz_status dz_save_sentencepiece(const dz_tokenizer *tok, const char *dir, dz_error *err);

/* tokenizer.json (+ tokenizer_config.json in its folder when config_path is not NULL). */
dz_status dz_hf_json_load(const char *json_path, const char *config_path, dz_tokenizer **out, dz_error *err);

/* GPT-2's bytes_to_unicode() inverted: the byte a code point < DZ_BYTE_MAP_SIZE stands
 * for, or -1. dz_bytelevel_to_bytes undoes the mapping of token string s into out (room
 * for strlen(s) bytes): the byte count, or -1 when s has a character outside the mapping. */
enum { DZ_BYTE_MAP_SIZE = 324 }; /* 256 + 68 remapped bytes */
void dz_bytelevel_inverse(int inv[DZ_BYTE_MAP_SIZE]);
int dz_bytelevel_to_bytes(const int inv[DZ_BYTE_MAP_SIZE], const char *s, char *out);
/* The other way: bytes[0..len) as their token string into out (room for 2 * len + 1). */
int dz_bytelevel_from_bytes(const char *bytes, int len, char *out);

/* Writes dir/tokenizer.json + dir/tokenizer_config.json for a DZ_TOK_HF_BPE tokenizer. */
dz_status dz_save_tokenizer_json(const dz_tokenizer *tok, const char *dir, dz_error *err);

/* 1 + the largest id encode can produce from bytes and merges (start/end tokens included). */
int dz_gpt2_encodable_vocab_size(const dz_tokenizer *tok);

/* vocab_path: encoder.json or vocab.json; dict_path: fairseq dict.txt or NULL. */
dz_status dz_gpt2_load(dz_tokenizer *tok, const char *vocab_path, const char *merges_path,
                       const char *dict_path, dz_error *err);
dz_status dz_gpt2_encode(const dz_tokenizer *tok, const char *text, unsigned flags, dz_id_sink *out,
                         dz_error *err);
dz_status dz_llama2c_load(dz_tokenizer *tok, const char *path, int vocab_size, dz_error *err);
dz_status dz_llama2c_encode(const dz_tokenizer *tok, const char *text, int add_bos, dz_id_sink *out,
                            dz_error *err);
const char *dz_llama2c_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap);

#endif
