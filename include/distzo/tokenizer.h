/* Tokenizers: GPT-2 byte-level BPE (GPT-2 and OPT ids) and llama2.c's sentencepiece-style BPE. */
#ifndef DISTZO_TOKENIZER_H
#define DISTZO_TOKENIZER_H

#include "distzo/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dz_tokenizer dz_tokenizer;

/* DZ_TOK_HF_BPE: BPE from a Hugging Face tokenizer.json or a GGUF file's metadata:
 * byte-level (GPT-2, Llama-3, Qwen2 or SmolLM pre-tokenization) or SentencePiece-style
 * (Metaspace, byte fallback), with added/special tokens. */
/* DZ_TOK_SENTENCEPIECE: SentencePiece BPE (tokenizer.model, GGUF "llama"): llama2.c's
 * encoder (dummy prefix, highest-score merges, <0xXX> byte fallback) over its pieces. */
typedef enum dz_tokenizer_kind { DZ_TOK_GPT2_BPE, DZ_TOK_LLAMA2C, DZ_TOK_HF_BPE, DZ_TOK_SENTENCEPIECE } dz_tokenizer_kind;

/* The special tokens a tokenizer declares (tokenizer_config.json, GGUF metadata). */
typedef enum dz_special { DZ_SPECIAL_BOS, DZ_SPECIAL_EOS, DZ_SPECIAL_PAD, DZ_SPECIAL_UNK, DZ_SPECIAL_COUNT } dz_special;

/* Flags of dz_tokenizer_encode_flags. */
enum {
    DZ_ENCODE_BOS = 1,     /* prepend the model's start id where it has one (dz_tokenizer_bos) */
    DZ_ENCODE_SPECIAL = 2  /* special tokens written in the text ("<|im_start|>") become their ids */
};

/* Loads a tokenizer from a file or folder:
 *  - a folder with vocab.json + merges.txt (ids as in vocab.json; OPT's HF files, where
 *    "</s>" is id 2, give bos = eos = 2);
 *  - a folder with encoder.json + vocab.bpe (GPT-2 ids), and with dict.txt the fairseq
 *    mapping to OPT ids (id = 4 + line of the GPT-2 id; 0..3 = <s>,<pad>,</s>,<unk>;
 *    GPT-2 ids missing from dict.txt become <unk>);
 *  - a path to one of those files: its folder's pair of files; dict.txt is used only when
 *    it is the file named (so encoder.json or vocab.bpe gives GPT-2 ids even beside a dict.txt);
 *  - a folder with tokenizer.json (Hugging Face tokenizers; what transformers 5 saves, with
 *    tokenizer_config.json beside it for bos/eos/pad/unk and add_bos_token), or that file:
 *    byte-level BPE (pre_tokenizer ByteLevel, or Sequence of Split(regex of GPT-2, Llama-3
 *    or Qwen2) or Digits(individual_digits) + ByteLevel), or SentencePiece-style BPE
 *    (normalizer Prepend + Replace, or pre_tokenizer Metaspace; byte_fallback). Taken before
 *    vocab.json + merges.txt when a folder has both. Bytes (byte-level) or characters
 *    without a token are dropped, as Hugging Face does;
 *  - a SentencePiece tokenizer.model (a file so named or ending in .model, or in a folder
 *    without the files above): BPE with byte fallback and the identity normalizer
 *    (Llama-2, TinyLlama, Mistral); encode's DZ_ENCODE_BOS adds its bos (<s>);
 *  - a .gguf file: the tokenizer in its metadata (tokenizer.ggml.*: byte-level BPE "gpt2"
 *    with pre-tokenizer gpt2, smollm, llama-bpe or qwen2; SentencePiece "llama");
 *  - any other file: a llama2.c tokenizer.bin (vocab_size entries; pass 0 to read up to EOF).
 *    vocab_size is ignored for GPT-2 BPE files.
 * Errors name the file and the line or field. */
dz_status dz_tokenizer_load(const char *path, int vocab_size, dz_tokenizer **out, dz_error *err);
void dz_tokenizer_free(dz_tokenizer *tok);

dz_tokenizer_kind dz_tokenizer_get_kind(const dz_tokenizer *tok);
/* 1 + the largest id encode can produce (start/end tokens included): the embedding rows a
 * model needs. GPT-2 50257; OPT 50260 (dict.txt's madeupword padding lines and unused
 * specials are never produced, though decode knows them); llama2.c: its vocab_size;
 * tokenizer.json / GGUF: the number of ids of the vocabulary (added tokens included). */
int dz_tokenizer_vocab_size(const dz_tokenizer *tok);
int dz_tokenizer_bos(const dz_tokenizer *tok); /* id prepended to inputs: OPT </s>=2, llama2.c <s>=1, GPT-2: -1 */
int dz_tokenizer_eos(const dz_tokenizer *tok); /* GPT-2 <|endoftext|> 50256, OPT 2, llama2.c 2 */
/* The id the tokenizer's files declare for a special token, whether or not encode adds it
 * (SmolLM2 declares bos <|im_start|> = 1 but adds none: dz_tokenizer_bos is -1); -1 if none.
 * Its name is dz_tokenizer_decode(tok, -1, id, ...). GPT-2/OPT/llama2.c: bos/eos as above. */
int dz_tokenizer_special(const dz_tokenizer *tok, dz_special which);

/* Encodes text (UTF-8, NUL-terminated). With add_bos, the model's start id comes first
 * (OPT: </s> (2); llama2.c: <s> (1)). llama2.c's encoder adds its dummy-prefix space
 * to non-empty text as sentencepiece does. Writes at most cap ids; returns the number
 * of ids the full encoding has (may exceed cap), or -1 on error (err filled).
 * Text is always plain text: "<|endoftext|>" or "</s>" in it are not special tokens
 * (HF would turn them into one id). Invalid UTF-8 bytes are encoded byte by byte
 * (GPT-2: as punctuation-class characters). Thread-safe on a shared tokenizer. */
int dz_tokenizer_encode(const dz_tokenizer *tok, const char *text, int add_bos,
                        int *ids, int cap, dz_error *err);
/* As dz_tokenizer_encode, with DZ_ENCODE_* flags; DZ_ENCODE_SPECIAL reads special tokens in the
 * text as Hugging Face's encode does by default (tokenizer.json / GGUF tokenizers only).
 * Added tokens that are not special are always single ids, as in Hugging Face. */
int dz_tokenizer_encode_flags(const dz_tokenizer *tok, const char *text, unsigned flags,
                              int *ids, int cap, dz_error *err);

/* The text of one token id, as bytes (NUL-terminated; may hold a partial UTF-8 char),
 * truncated to cap - 1 bytes. Special tokens give their vocabulary text ("</s>"), as HF's decode
 * does without skip_special_tokens. prev_id lets llama2.c and SentencePiece-style tokenizers
 * strip the dummy-prefix space after BOS; <0xXX> byte-fallback tokens give the raw byte. Returns "" for unknown ids. */
const char *dz_tokenizer_decode(const dz_tokenizer *tok, int prev_id, int id, char *buf, int cap);

/* Chat templates (generate --chat). dz_tokenizer_chat_template: the template the files
 * carry (GGUF tokenizer.chat_template; tokenizer_config.json chat_template, a string or the
 * entry named "default" of a list; else chat_template.jinja beside it), or NULL. There is
 * no Jinja interpreter: dz_chat_detect recognises the common templates by their markers,
 * as llama.cpp's llm_chat_detect_template does (ChatML: <|im_start|>; Llama-3:
 * <|start_header_id|>; Llama-2: [INST], with <<SYS>> for a system turn; Zephyr: <|user|>
 * and <|assistant|>); Phi-3/4, SmolVLM and Mistral's later layouts are not recognised. */
typedef enum dz_chat_style { DZ_CHAT_UNKNOWN, DZ_CHAT_CHATML, DZ_CHAT_LLAMA2, DZ_CHAT_LLAMA3, DZ_CHAT_ZEPHYR } dz_chat_style;
const char *dz_tokenizer_chat_template(const dz_tokenizer *tok);
dz_chat_style dz_chat_detect(const char *chat_template);
const char *dz_chat_style_name(dz_chat_style s);
/* One conversation as the tokenizer's template lays it out: an optional system message
 * (NULL: a ChatML template's own default, where it writes one, as SmolLM2's does), one
 * user message, and the assistant's turn opened (add_generation_prompt). *text is
 * malloc'd; *add_bos is 1 when the template starts with bos_token. Refused, with a
 * message, when there is no template, it is not recognised, or it has no system turn and
 * system is given. */
dz_status dz_chat_render(const dz_tokenizer *tok, const char *system, const char *user, char **text, int *add_bos,
                         dz_error *err);
/* The ids of dz_chat_render's text: special tokens as their ids, the BOS where the template
 * writes it. Returns the count (may exceed cap) as dz_tokenizer_encode, or -1. */
int dz_tokenizer_encode_chat(const dz_tokenizer *tok, const char *system, const char *user, int *ids, int cap,
                             dz_error *err);

/* Writes the tokenizer into folder dir (created if missing; files replaced atomically),
 * so that the folder loads back through dz_tokenizer_load with the same ids:
 *  - GPT-2 byte-level BPE: Hugging Face's files, vocab.json (token -> id in this tokenizer's
 *    id space: with OPT ids, facebook/opt-*'s layout: <s> <pad> </s> <unk> = 0..3, GPT-2
 *    tokens at 4 + dict.txt line, fairseq's madeupword padding to a multiple of 8, <mask>)
 *    + merges.txt ("#version: 0.2", best merge first) + special_tokens_map.json +
 *    tokenizer_config.json (GPT2Tokenizer; OPT: bos = eos = "</s>", pad "<pad>", unk
 *    "<unk>", add_bos_token), which transformers' AutoTokenizer loads with the same ids;
 *  - tokenizer.json / GGUF byte-level BPE: tokenizer.json (model, added tokens, the
 *    pre-tokenizer, bos template) + tokenizer_config.json (bos/eos/pad/unk names), which
 *    Hugging Face tokenizers and transformers load with the same ids;
 *  - SentencePiece: tokenizer.model (pieces, scores, types, special ids, BPE with byte
 *    fallback, identity normalizer), which sentencepiece and transformers load;
 *  - llama2.c: tokenizer.bin (the same bytes as the file loaded). Hugging Face has no
 *    loader for this format. */
dz_status dz_tokenizer_save_hf(const dz_tokenizer *tok, const char *dir, dz_error *err);

#ifdef __cplusplus
}
#endif

#endif
