/* A growable byte buffer for files built in memory (a tokenizer's files, a prompt): an
 * append that runs out of memory sets oom and every later one is dropped, so a writer
 * checks once, at the end. p stays NUL-terminated after its len bytes. Zeroed is empty;
 * free p when done. */
#ifndef DZ_CORE_BYTES_H
#define DZ_CORE_BYTES_H

#include <stddef.h>
#include <string.h>

typedef struct dz_bytes {
    char *p;
    size_t len, cap;
    int oom;
} dz_bytes;

void dz_bytes_put(dz_bytes *b, const void *s, size_t n);
static inline void dz_bytes_str(dz_bytes *b, const char *s) { dz_bytes_put(b, s, strlen(s)); }

#endif
