/* The BPE merge loop: a doubly linked list of symbols and a binary min-heap of candidate
 * pairs keyed by (key, left position). Entries made stale by a merge are skipped when
 * popped (node versions), so each merge costs O(log n) instead of a rescan of all pairs. */
#include <stdlib.h>

#include "tokenizer/internal.h"

static int ws_reserve(dz_merge_ws *ws, int n) {
    if (n > ws->cap) {
        int *next = realloc(ws->next, (size_t)n * sizeof *next);
        if (next) ws->next = next;
        int *prev = realloc(ws->prev, (size_t)n * sizeof *prev);
        if (prev) ws->prev = prev;
        int *ver = realloc(ws->ver, (size_t)n * sizeof *ver);
        if (ver) ws->ver = ver;
        if (!next || !prev || !ver) return -1;
        ws->cap = n;
    }
    /* n - 1 initial pairs, then at most two new ones per merge (n - 1 merges at most). */
    size_t heap_need = 3 * (size_t)n;
    if (heap_need > ws->heap_cap) {
        dz_heap_entry *heap = realloc(ws->heap, heap_need * sizeof *heap);
        if (!heap) return -1;
        ws->heap = heap;
        ws->heap_cap = heap_need;
    }
    return 0;
}

static int before(const dz_heap_entry *a, const dz_heap_entry *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(dz_heap_entry *h, int *size, dz_heap_entry e) {
    int i = (*size)++;
    while (i > 0 && before(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static dz_heap_entry heap_pop(dz_heap_entry *h, int *size) {
    dz_heap_entry top = h[0], last = h[--*size];
    int i = 0, n = *size;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (n > 0) h[i] = last;
    return top;
}

/* Queues the pair starting at node left, if it exists and merges. */
static void consider(const int *ids, const dz_merge_ws *ws, int left, dz_pair_fn pair_fn,
                     const void *ctx, int *heap_size) {
    if (left < 0) return;
    int right = ws->next[left];
    if (right < 0) return;
    dz_heap_entry e = {.left = left, .right = right, .left_ver = ws->ver[left], .right_ver = ws->ver[right]};
    if (pair_fn(ctx, ids[left], ids[right], &e.key, &e.merged)) heap_push(ws->heap, heap_size, e);
}

int dz_bpe_merge(int *ids, int n, dz_pair_fn pair_fn, const void *ctx, dz_merge_ws *ws) {
    if (n < 2) return n;
    if (ws_reserve(ws, n) != 0) return -1;
    for (int i = 0; i < n; i++) {
        ws->next[i] = i + 1 < n ? i + 1 : -1;
        ws->prev[i] = i - 1;
        ws->ver[i] = 0;
    }
    int heap_size = 0;
    for (int i = 0; i + 1 < n; i++) consider(ids, ws, i, pair_fn, ctx, &heap_size);
    while (heap_size > 0) {
        dz_heap_entry e = heap_pop(ws->heap, &heap_size);
        if (ws->ver[e.left] != e.left_ver || ws->ver[e.right] != e.right_ver || ws->next[e.left] != e.right)
            continue; /* one side was merged away or into something else since */
        ids[e.left] = e.merged;
        ws->ver[e.left]++;
        ws->ver[e.right]++;
        int after = ws->next[e.right];
        ws->next[e.left] = after;
        if (after >= 0) ws->prev[after] = e.left;
        ws->next[e.right] = -1;
        consider(ids, ws, ws->prev[e.left], pair_fn, ctx, &heap_size);
        consider(ids, ws, e.left, pair_fn, ctx, &heap_size);
    }
    int m = 0;
    for (int i = 0; i >= 0; i = ws->next[i]) ids[m++] = ids[i];
    return m;
}

void dz_merge_ws_free(dz_merge_ws *ws) {
    free(ws->next);
    free(ws->prev);
    free(ws->ver);
    free(ws->heap);
    *ws = (dz_merge_ws){0};
}
