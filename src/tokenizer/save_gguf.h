/* A tokenizer as a GGUF file's tokenizer.ggml.* metadata, the keys llama.cpp reads and
 * distzo's own reader (gguf_vocab.c) turns back into the same tokenizer:
 *  - llama2.c tokenizer.bin and SentencePiece: model "llama" (pieces with U+2581 for
 *    spaces, scores, token types: <unk> unknown, bos/eos and pieces outside the BPE
 *    control, <0xXX> byte), add_bos_token when encode adds bos;
 *  - byte-level BPE (tokenizer.json, GGUF, GPT-2 files without fairseq ids): model "gpt2",
 *    pre the pre-tokenizer's llama.cpp name (gpt2, smollm, llama-bpe, qwen2), tokens as
 *    byte-level strings, merges best first, added tokens control (special) or
 *    user-defined.
 * The tokens are padded to n_vocab (the embedding's rows) with unused "[PAD<id>]" tokens,
 * as llama.cpp's converter does: llama.cpp needs one token per row. */
#ifndef DZ_TOKENIZER_SAVE_GGUF_H
#define DZ_TOKENIZER_SAVE_GGUF_H

#include "distzo/tokenizer.h"
#include "format/gguf_write.h"

/* DZ_ERR_UNSUPPORTED, naming the kind, for a tokenizer llama.cpp has no model for (OPT's
 * fairseq ids, SentencePiece-style tokenizer.json) and when it has more ids than n_vocab. */
dz_status dz_tokenizer_gguf_declare(const dz_tokenizer *tok, int n_vocab, dz_gguf_writer *w, dz_error *err);

#endif
