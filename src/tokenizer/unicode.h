/* UTF-8 decoding and the character classes of GPT-2's pre-tokenization regex. */
#ifndef DZ_TOKENIZER_UNICODE_H
#define DZ_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dz_uni_class {
    DZ_UNI_OTHER = 0, /* neither \p{L}, \p{N} nor \s (also: invalid UTF-8 bytes) */
    DZ_UNI_LETTER,    /* general category L* */
    DZ_UNI_NUMBER,    /* general category N* */
    DZ_UNI_SPACE      /* Unicode White_Space, i.e. the regex's \s */
} dz_uni_class;

typedef struct dz_uni_range {
    uint32_t lo, hi;
    uint8_t cls;
} dz_uni_range;

/* Generated into unicode_tables.c by tools/gen_unicode_tables.py. */
extern const dz_uni_range dz_uni_ranges[];
extern const int dz_uni_range_count;

dz_uni_class dz_uni_class_of(uint32_t cp);

/* Decodes the code point at s[0] (n > 0 bytes available) and sets *len to its byte length.
 * A byte that does not start a valid, shortest-form UTF-8 sequence (including surrogates
 * and values past U+10FFFF) decodes as itself with length 1 and returns -1. */
int32_t dz_utf8_decode(const uint8_t *s, size_t n, int *len);

/* Writes cp as UTF-8 into out (4 bytes room); returns the byte count. */
int dz_utf8_encode(uint32_t cp, char *out);

#endif
