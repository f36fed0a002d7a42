/* Tokenizers: GPT-2 byte-level BPE (GPT-2 and OPT ids) and llama2.c's sentencepiece-style BPE. */
#ifndef DISTZO_TOKENIZER_H
#define DISTZO_TOKENIZER_H

#include "distzo/error.h"

typedef struct dz_tokenizer dz_tokenizer;

typedef enum dz_tokenizer_kind { DZ_TOK_GPT2_BPE, DZ_TOK_LLAMA2C } dz_tokenizer_kind;

/* Loads a tokenizer from a file or folder:
 *  - a folder with vocab.json + merges.txt (ids as in vocab.json; OPT's HF files, where
 *    "</s>" is id 2, give bos = eos = 2);
 *  - a folder with encoder.json + vocab.bpe (GPT-2 ids), and with dict.txt the fairseq
 *    mapping to OPT ids (id = 4 + line of the GPT-2 id; 0..3 = <s>,<pad>,</s>,<unk>;
 *    GPT-2 ids missing from dict.txt become <unk>);
 *  - a path to one of those files: its folder's pair of files; dict.txt is used only when
 *    it is the file named (so encoder.json or vocab.bpe gives GPT-2 ids even beside a dict.txt);
 *  - any other file: a llama2.c tokenizer.bin (vocab_size entries; pass 0 to read up to EOF).
 *    vocab_size is ignored for GPT-2 BPE files.
 * Errors name the file and the line or field. */
dz_status dz_tokenizer_load(const char *path, int vocab_size, dz_tokenizer **out, dz_error *err);
void dz_tokenizer_free(dz_tokenizer *tok);

dz_tokenizer_kind dz_tokenizer_get_kind(const dz_tokenizer *tok);
/* 1 + the largest id encode can produce (start/end tokens included): the embedding rows a
 * model needs. GPT-2 50257; OPT 50260 (dict.txt's madeupword padding lines and unused
 * specials are never produced, though decode knows them); llama2.c: its vocab_size. */
int dz_tokenizer_vocab_size(const dz_tokenizer *tok);
int dz_tokenizer_bos(const dz_tokenizer *tok); /* id prepended to inputs: OPT </s>=2, llama2.c <s>=1, GPT-2: -1 */
int dz_tokenizer_eos(const dz_tokenizer *tok); /* GPT-2 <|endoftext|> 50256, OPT 2, llama2.c 2 */

/* Encodes text (UTF-8, NUL-terminated). With add_bos, the model's start id comes first
 * (OPT: </s> (2); llama2.c: <s> (1)). llama2.c's encoder adds its dummy-prefix space
 * to non-empty text as sentencepiece does. Writes at most cap ids; returns the number
 * of ids the full encoding has (may exceed cap), or -1 on error (err filled).
 * Text is always plain text: "<|endoftext|>" or "</s>" in it are not special tokens
 * (HF would turn them into one id). Invalid UTF-8 bytes are encoded byte by byte
 * (GPT-2: as punctuation-class characters). Thread-safe on a shared tokenizer. */
int dz_tokenizer_encode(const dz_tokenizer *tok, const char *text, int add_bos,
                        int *ids, int cap, dz_error *err);

/* The text of one token id, as bytes (NUL-terminated; may hold a partial UTF-8 char),
 * truncated to cap - 1 bytes. Special tokens give their vocabulary text ("</s>"), as HF's decode
 * does without skip_special_tokens. prev_id lets llama2.c strip the dummy-prefix space
 * after BOS; llama2.c's <0xXX> tokens give the raw byte. Returns "" for unknown ids. */
const char *dz_tokenizer_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap);

/* Writes the tokenizer into folder dir (created if missing; files replaced atomically),
 * so that the folder loads back through dz_tokenizer_load with the same ids:
 *  - GPT-2 byte-level BPE: Hugging Face's files, vocab.json (token -> id in this tokenizer's
 *    id space: with OPT ids, facebook/opt-*'s layout: <s> <pad> </s> <unk> = 0..3, GPT-2
 *    tokens at 4 + dict.txt line, fairseq's madeupword padding to a multiple of 8, <mask>)
 *    + merges.txt ("#version: 0.2", best merge first) + special_tokens_map.json +
 *    tokenizer_config.json (GPT2Tokenizer; OPT: bos = eos = "</s>", pad "<pad>", unk
 *    "<unk>", add_bos_token), which transformers' AutoTokenizer loads with the same ids;
 *  - llama2.c: tokenizer.bin (the same bytes as the file loaded). Hugging Face has no
 *    loader for this format. */
dz_status dz_tokenizer_save_hf(const dz_tokenizer *tok, const char *dir, dz_error *err);

#endif
