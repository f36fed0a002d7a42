/* Token string tables and the two hash maps the tokenizers look ids up in. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

int dz_pieces_init(dz_pieces *p, int n) {
    memset(p, 0, sizeof *p);
    p->off = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->off);
    p->len = calloc((size_t)(n > 0 ? n : 1), sizeof *p->len);
    if (!p->off || !p->len) return -1;
    for (int i = 0; i < n; i++) p->off[i] = -1;
    p->n = n;
    return 0;
}

int dz_pieces_set(dz_pieces *p, int id, const char *s, int len) {
    size_t need = p->used + (size_t)len + 1;
    if (need > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < need) cap *= 2;
        char *nb = realloc(p->blob, cap);
        if (!nb) return -1;
        p->blob = nb;
        p->cap = cap;
    }
    memcpy(p->blob + p->used, s, (size_t)len);
    p->blob[p->used + (size_t)len] = '\0';
    p->off[id] = (long)p->used;
    p->len[id] = len;
    p->used = need;
    return 0;
}

const char *dz_pieces_get(const dz_pieces *p, int id, int *len) {
    if (id < 0 || id >= p->n || p->off[id] < 0) return NULL;
    if (len) *len = p->len[id];
    return p->blob + p->off[id];
}

void dz_pieces_free(dz_pieces *p) {
    free(p->blob);
    free(p->off);
    free(p->len);
    memset(p, 0, sizeof *p);
}

static uint32_t hash_bytes(const char *s, int len) { /* FNV-1a */
    uint32_t h = 2166136261u;
    for (int i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t table_size(int count) {
    uint32_t size = 16;
    while (size < 2u * (uint32_t)count) size *= 2;
    return size;
}

int dz_strmap_build(dz_strmap *m, const dz_pieces *p) {
    uint32_t size = table_size(p->n);
    m->slot = malloc(size * sizeof *m->slot);
    if (!m->slot) return -1;
    memset(m->slot, 0xff, size * sizeof *m->slot);
    m->mask = size - 1;
    for (int id = 0; id < p->n; id++) {
        int len;
        const char *s = dz_pieces_get(p, id, &len);
        if (!s || dz_strmap_find(m, p, s, len) >= 0) continue;
        uint32_t h = hash_bytes(s, len) & m->mask;
        while (m->slot[h] >= 0) h = (h + 1) & m->mask;
        m->slot[h] = id;
    }
    return 0;
}

int dz_strmap_find(const dz_strmap *m, const dz_pieces *p, const char *s, int len) {
    for (uint32_t h = hash_bytes(s, len) & m->mask;; h = (h + 1) & m->mask) {
        int id = m->slot[h];
        if (id < 0) return -1;
        if (p->len[id] == len && memcmp(p->blob + p->off[id], s, (size_t)len) == 0) return id;
    }
}

int dz_strmap_find_pair(const dz_strmap *m, const dz_pieces *p, int a, int b, char *scratch) {
    int la = 0, lb = 0;
    const char *pa = dz_pieces_get(p, a, &la), *pb = dz_pieces_get(p, b, &lb);
    memcpy(scratch, pa, (size_t)la);
    memcpy(scratch + la, pb, (size_t)lb);
    return dz_strmap_find(m, p, scratch, la + lb);
}

void dz_strmap_free(dz_strmap *m) {
    free(m->slot);
    m->slot = NULL;
}

static uint32_t hash_pair(uint64_t key) { /* splitmix64 finaliser */
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (uint32_t)key;
}

static uint64_t pair_key(int left, int right) { return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right; }

static dz_pair_entry *pair_slot(dz_pair_entry *e, uint32_t mask, uint64_t key) {
    uint32_t h = hash_pair(key) & mask;
    while (e[h].key != UINT64_MAX && e[h].key != key) h = (h + 1) & mask;
    return &e[h];
}

static int pairmap_grow(dz_pairmap *m) {
    uint32_t size = m->e ? 2 * (m->mask + 1) : 1024;
    dz_pair_entry *e = malloc(size * sizeof *e);
    if (!e) return -1;
    for (uint32_t i = 0; i < size; i++) e[i].key = UINT64_MAX;
    if (m->e) {
        for (uint32_t i = 0; i <= m->mask; i++)
            if (m->e[i].key != UINT64_MAX) *pair_slot(e, size - 1, m->e[i].key) = m->e[i];
        free(m->e);
    }
    m->e = e;
    m->mask = size - 1;
    return 0;
}

int dz_pairmap_put(dz_pairmap *m, int left, int right, int rank, int merged) {
    if ((!m->e || 2u * (uint32_t)(m->count + 1) > m->mask + 1) && pairmap_grow(m) != 0) return -1;
    dz_pair_entry *slot = pair_slot(m->e, m->mask, pair_key(left, right));
    if (slot->key == UINT64_MAX) m->count++;
    slot->key = pair_key(left, right);
    slot->rank = rank;
    slot->merged = merged;
    return 0;
}

const dz_pair_entry *dz_pairmap_find(const dz_pairmap *m, int left, int right) {
    if (!m->e) return NULL;
    const dz_pair_entry *slot = pair_slot(m->e, m->mask, pair_key(left, right));
    return slot->key == UINT64_MAX ? NULL : slot;
}

void dz_pairmap_free(dz_pairmap *m) {
    free(m->e);
    memset(m, 0, sizeof *m);
}
