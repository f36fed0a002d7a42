/* Tokenizers: GPT-2 byte-level BPE (GPT-2 and OPT ids) and llama2.c's sentencepiece-style BPE. */
#ifndef DISTZO_TOKENIZER_H
#define DISTZO_TOKENIZER_H

#include "distzo/error.h"

typedef struct dz_tokenizer dz_tokenizer;

typedef enum dz_tokenizer_kind { DZ_TOK_GPT2_BPE, DZ_TOK_LLAMA2C } dz_tokenizer_kind;

/* Loads a tokenizer from a file or folder:
 *  - a folder with vocab.json + merges.txt (ids as in vocab.json; OPT's HF files);
 *  - a folder with encoder.json + vocab.bpe (GPT-2 ids), and with dict.txt the fairseq
 *    mapping to OPT ids (id = 4 + line of the GPT-2 id; 0..3 = <s>,<pad>,</s>,<unk>);
 *  - a llama2.c tokenizer.bin file (vocab_size entries; pass 0 to read up to EOF).
 * Errors name the file and the line or field. */
dz_status dz_tokenizer_load(const char *path, int vocab_size, dz_tokenizer **out, dz_error *err);
void dz_tokenizer_free(dz_tokenizer *tok);

dz_tokenizer_kind dz_tokenizer_get_kind(const dz_tokenizer *tok);
int dz_tokenizer_vocab_size(const dz_tokenizer *tok);
int dz_tokenizer_bos(const dz_tokenizer *tok); /* id prepended to inputs: OPT </s>=2, llama2.c <s>=1, GPT-2: -1 */
int dz_tokenizer_eos(const dz_tokenizer *tok);

/* Encodes text (UTF-8, NUL-terminated). With add_bos, the model's start id comes first
 * (OPT: </s> (2); llama2.c: <s> (1)). llama2.c's encoder adds its dummy-prefix space
 * to non-empty text as sentencepiece does. Writes at most cap ids; returns the number
 * of ids the full encoding has (may exceed cap), or -1 on error (err filled). */
int dz_tokenizer_encode(const dz_tokenizer *tok, const char *text, int add_bos,
                        int *ids, int cap, dz_error *err);

/* The text of one token id, as bytes (NUL-terminated; may hold a partial UTF-8 char).
 * prev_id lets llama2.c strip the dummy-prefix space after BOS. Returns "" for unknown ids. */
const char *dz_tokenizer_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap);

#endif
