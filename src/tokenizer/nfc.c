/* NFC as UAX #15 defines it: full canonical decomposition (Hangul algorithmically),
 * canonical ordering of combining marks, then canonical composition (UAX #15's sample
 * algorithm: a mark composes with the last starter unless blocked). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/nfc.h"
#include "tokenizer/unicode.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7 };
enum { L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int ccc_of(uint32_t cp) {
    int lo = 0, hi = dz_nfc_ccc_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < dz_nfc_ccc[mid].lo) hi = mid - 1;
        else if (cp > dz_nfc_ccc[mid].hi) lo = mid + 1;
        else return dz_nfc_ccc[mid].ccc;
    }
    return 0;
}

static const dz_nfc_decomp *decomp_of(uint32_t cp) {
    int lo = 0, hi = dz_nfc_decomp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < dz_nfc_decomps[mid].cp) hi = mid - 1;
        else if (cp > dz_nfc_decomps[mid].cp) lo = mid + 1;
        else return &dz_nfc_decomps[mid];
    }
    return NULL;
}

static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    int lo = 0, hi = dz_nfc_pair_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const dz_nfc_pair *p = &dz_nfc_pairs[mid];
        if (a < p->first || (a == p->first && b < p->second)) hi = mid - 1;
        else if (a > p->first || b > p->second) lo = mid + 1;
        else return p->composite;
    }
    return 0;
}

typedef struct cps {
    uint32_t *v;
    size_t n, cap;
} cps;

static int push(cps *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        uint32_t *v = realloc(c->v, cap * sizeof *v);
        if (!v) return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = cp;
    return 0;
}

static int decompose(cps *c, uint32_t cp) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        if (push(c, L_BASE + s / N_COUNT) || push(c, V_BASE + (s % N_COUNT) / T_COUNT)) return -1;
        return t ? push(c, T_BASE + t) : 0;
    }
    const dz_nfc_decomp *d = decomp_of(cp);
    if (!d) return push(c, cp);
    if (decompose(c, d->first)) return -1;
    return d->second ? decompose(c, d->second) : 0;
}

int dz_nfc_may_change(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0xCC) return 1; /* U+0300 = CC 80: the first code point NFC can touch */
    return 0;
}

int dz_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len) {
    cps c = {0};
    *out = NULL;
    for (size_t i = 0; i < n;) {
        int len;
        int32_t cp = dz_utf8_decode(s + i, n - i, &len);
        if (cp < 0) { /* not text HF could be given: leave it as it is */
            free(c.v);
            *out = malloc(n ? n : 1);
            if (!*out) return -1;
            memcpy(*out, s, n);
            *out_len = n;
            return 0;
        }
        if (decompose(&c, (uint32_t)cp)) {
            free(c.v);
            return -1;
        }
        i += (size_t)len;
    }
    /* canonical ordering: stable sort of each run of non-starters by combining class */
    for (size_t i = 1; i < c.n; i++) {
        uint32_t cp = c.v[i];
        int k = ccc_of(cp);
        size_t j = i;
        while (k && j > 0 && ccc_of(c.v[j - 1]) > k) c.v[j] = c.v[j - 1], j--;
        c.v[j] = cp;
    }
    size_t m = c.n ? 1 : 0, starter = 0;
    int last_class = c.n && ccc_of(c.v[0]) ? 256 : 0;
    for (size_t i = 1; i < c.n; i++) {
        uint32_t cp = c.v[i], composite = compose(c.v[starter], cp);
        int k = ccc_of(cp);
        if (composite && (last_class < k || last_class == 0)) {
            c.v[starter] = composite;
            continue;
        }
        if (k == 0) starter = m;
        last_class = k;
        c.v[m++] = cp;
    }
    *out = malloc(4 * m + 1);
    if (!*out) {
        free(c.v);
        return -1;
    }
    size_t len = 0;
    for (size_t i = 0; i < m; i++) len += (size_t)dz_utf8_encode(c.v[i], (char *)*out + len);
    *out_len = len;
    free(c.v);
    return 0;
}
