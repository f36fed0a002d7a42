/* Unicode NFC (canonical decomposition, canonical ordering, canonical composition), for
 * tokenizer.json's normalizer "NFC". Tables: nfc_tables.c (tools/gen_nfc_tables.py). */
#ifndef DZ_TOKENIZER_NFC_H
#define DZ_TOKENIZER_NFC_H

#include <stddef.h>
#include <stdint.h>

typedef struct dz_nfc_ccc_range {
    uint32_t lo, hi;
    uint8_t ccc;
} dz_nfc_ccc_range;

typedef struct dz_nfc_decomp {
    uint32_t cp, first, second; /* second 0: a singleton decomposition */
} dz_nfc_decomp;

typedef struct dz_nfc_pair {
    uint32_t first, second, composite;
} dz_nfc_pair;

extern const dz_nfc_ccc_range dz_nfc_ccc[];
extern const int dz_nfc_ccc_count;
extern const dz_nfc_decomp dz_nfc_decomps[]; /* sorted by cp */
extern const int dz_nfc_decomp_count;
extern const dz_nfc_pair dz_nfc_pairs[]; /* sorted by (first, second) */
extern const int dz_nfc_pair_count;

/* Whether s[0..n) may change under NFC (it has a code point from U+0300 on); text without
 * one is already NFC. */
int dz_nfc_may_change(const uint8_t *s, size_t n);

/* NFC of the valid UTF-8 s[0..n) into *out (malloc'ed, *out_len bytes); invalid UTF-8 is
 * copied unchanged. 0, or -1 out of memory. */
int dz_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len);

#endif
