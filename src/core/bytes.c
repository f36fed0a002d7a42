#include "core/bytes.h"

#include <stdlib.h>

void dz_bytes_put(dz_bytes *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) { /* + 1: the NUL after the bytes */
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
