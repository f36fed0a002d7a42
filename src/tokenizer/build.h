/* Building a tokenizer from a vocabulary given as plain C arrays: the one path behind
 * tokenizer.json (src/tokenizer/hf_json.c) and GGUF's tokenizer.ggml.* metadata
 * (src/model's GGUF loader), so both give the same tokenizer from the same tokens. */
#ifndef DZ_TOKENIZER_BUILD_H
#define DZ_TOKENIZER_BUILD_H

#include <stdint.h>

#include "distzo/tokenizer.h"
#include "tokenizer/pretokenize.h"

/* GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
typedef enum dz_token_type {
    DZ_TOKEN_NORMAL = 1,
    DZ_TOKEN_UNKNOWN = 2,
    DZ_TOKEN_CONTROL = 3,      /* special token: an id in the text only with DZ_ENCODE_SPECIAL */
    DZ_TOKEN_USER_DEFINED = 4, /* added token: always one id where its text appears */
    DZ_TOKEN_UNUSED = 5,
    DZ_TOKEN_BYTE = 6
} dz_token_type;

typedef enum dz_prepend {
    DZ_PREPEND_NEVER,
    DZ_PREPEND_FIRST,  /* Metaspace prepend_scheme "first": the text's first segment, unless it starts with one */
    DZ_PREPEND_ALWAYS, /* Metaspace "always": every segment between added tokens, unless it starts with one */
    DZ_PREPEND_NORMALIZER /* normalizer Prepend: every non-empty segment */
} dz_prepend;

typedef struct dz_vocab_spec {
    const char *source;       /* the file, named in errors */
    const char *model;        /* GGUF tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama"
                                 (SentencePiece BPE: tokens with U+2581 for spaces, scores,
                                 types, <0x00>..<0xFF> byte pieces); others refused */
    const char *pre;          /* GGUF tokenizer.ggml.pre (gpt2, smollm, llama-bpe, qwen2), or NULL: use pretok */
    dz_pretok pretok;         /* when pre is NULL */
    int ignore_merges;        /* when pre is NULL (llama-bpe sets it, as llama.cpp does) */
    const char *const *tokens; /* [n_tokens]: token strings as the file writes them (byte-level
                                  mapped: "Ġthe"); NULL for an id without a token */
    int n_tokens;
    const int32_t *types;     /* [n_tokens] dz_token_type, or NULL (all normal) */
    const float *scores;      /* [n_tokens] or NULL (unused by byte-level BPE) */
    const uint8_t *strip;     /* [n_tokens] or NULL: added tokens' lstrip (1) / rstrip (2) bits */
    const char *const *merges; /* [n_merges], best first: "a b", or the left symbols when merges_right */
    const char *const *merges_right; /* NULL, or [n_merges] right symbols (tokenizer.json's pair form) */
    int n_merges;
    int bos, eos, pad, unk;   /* declared special ids, -1 for none */
    int add_bos;              /* encode's DZ_ENCODE_BOS prepends bos */
    int bpe_unk;              /* HF BPE model.unk_token id for bytes without a token (-1: dropped) */
    int fuse_unk;
    /* SentencePiece-style BPE in tokenizer.json (Llama-2, TinyLlama, Mistral): symbols are
     * characters of the text with " " as U+2581, looked up as written; byte_fallback: a
     * character without a token becomes its <0xXX> tokens. */
    int char_bpe, byte_fallback;
    dz_prepend prepend;      /* where a U+2581 goes before the text */
    int metaspace_split;     /* Metaspace split: a pre-token starts at every U+2581 */
    int nfc;                 /* Unicode NFC before pre-tokenization (tokenizer.json normalizer NFC) */
    int add_dummy_prefix;     /* SentencePiece: " " before non-empty text (default 1) */
    const char *tokens_field, *merges_field; /* names in errors, e.g. "tokenizer.ggml.tokens" */
    const char *chat_template; /* GGUF tokenizer.chat_template / tokenizer_config.json's, or NULL (copied) */
} dz_vocab_spec;

/* A spec with every id -1 and the GGUF field names. */
dz_vocab_spec dz_vocab_spec_init(const char *source);

dz_status dz_tokenizer_from_vocab(const dz_vocab_spec *spec, dz_tokenizer **out, dz_error *err);

/* The tokenizer of an open GGUF file (tokenizer.ggml.model, pre, tokens, merges, token_type,
 * scores, bos/eos/padding/unknown ids, add_bos_token), through dz_tokenizer_from_vocab.
 * dz_tokenizer_load(path.gguf) does the same for a path. */
struct dz_gguf;
dz_status dz_tokenizer_from_gguf(const struct dz_gguf *g, dz_tokenizer **out, dz_error *err);

#endif
