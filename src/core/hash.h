/* A 64-bit fingerprint of bytes, for comparing what two processes hold (settings, a
 * tensor table, a dataset) without sending it: FNV-1a over the bytes, finished by
 * splitmix64's mixer. Not cryptographic: it catches mistakes, not adversaries. */
#ifndef DZ_CORE_HASH_H
#define DZ_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/rng.h"

enum { DZ_HASH_START = 0 };

/* Continues fingerprint h (start with DZ_HASH_START) with bytes p[0..n). */
static inline uint64_t dz_hash_bytes(uint64_t h, const void *p, size_t n) {
    uint64_t x = h ^ 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) x = (x ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
    return dz_splitmix64(&x);
}

static inline uint64_t dz_hash_str(uint64_t h, const char *s) { return dz_hash_bytes(h, s ? s : "", s ? strlen(s) + 1 : 1); }
static inline uint64_t dz_hash_u64(uint64_t h, uint64_t v) { return dz_hash_bytes(h, &v, sizeof v); }
static inline uint64_t dz_hash_f64(uint64_t h, double v) { return dz_hash_bytes(h, &v, sizeof v); }

#endif
