/* Pre-tokenization of byte-level BPE: the regex patterns of GPT-2, Llama-3 and Qwen2 as
 * hand-written matchers (no regex engine), chosen by the exact pattern string a
 * tokenizer.json writes or by the pre-tokenizer name a GGUF file gives. */
#ifndef DZ_TOKENIZER_PRETOKENIZE_H
#define DZ_TOKENIZER_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dz_pattern {
    DZ_PATTERN_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    DZ_PATTERN_LLAMA3, /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    DZ_PATTERN_QWEN2   /* as Llama-3 with \p{N} (one digit) for \p{N}{1,3} */
} dz_pattern;

typedef struct dz_pretok {
    dz_pattern pattern;
    int split_digits;     /* HF's Digits(individual_digits) first: every \p{N} char alone */
    int add_prefix_space; /* ByteLevel's add_prefix_space: " " before text not starting with one */
} dz_pretok;

/* The pattern whose regex is exactly re (as tokenizer.json holds it, JSON escapes undone);
 * 0, or -1 when re is none of the known ones. */
int dz_pattern_from_regex(const char *re, dz_pattern *out);
const char *dz_pattern_regex(dz_pattern p);

/* GGUF's tokenizer.ggml.pre names (llama.cpp's): gpt2, smollm, llama-bpe/llama3, qwen2. 0 or -1. */
int dz_pretok_from_gguf_name(const char *name, dz_pretok *out);

/* End of the pre-token starting at s[i] (i < n), by the pattern; never looks at s[n..]. */
size_t dz_pretoken_end(dz_pattern p, const uint8_t *s, size_t n, size_t i);

/* End of the Digits piece starting at s[i]: one \p{N} char, or the run up to the next one. */
size_t dz_digit_piece_end(const uint8_t *s, size_t n, size_t i);

#endif
