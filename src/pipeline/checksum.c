/* A checksum of the master weights (--verify-every compares replicas with it): the sum
 * mod 2^64 of a hash of each span's bytes, keyed by the span's index. The sum is exact
 * and commutative, so threads, chunks and a node's slices may add in any order. */
#include <stdatomic.h>
#include <string.h>

#include "core/rng.h"
#include "core/threads.h"
#include "pipeline/internal.h"

/* 8 bytes at a time through a multiply-xor chain, then keyed by the span index so equal
 * contents at different places do not cancel in the sum. */
uint64_t dz_hash_span(const unsigned char *bytes, size_t n, uint64_t k) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, bytes + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ bytes[i]) * 0x100000001b3ULL;
    uint64_t state = h + k * 0xbf58476d1ce4e5b9ULL;
    return dz_splitmix64(&state);
}

/* Hashes of a block's spans in memory: task k is span first + k (this slice's only). */
typedef struct hash_job {
    const dz_pipeline *p;
    int first, slice, n_slices;
    size_t esz;
    _Atomic uint64_t hash;
} hash_job;

static void hash_task(void *ctx, int k, int thread) {
    hash_job *h = ctx;
    const int j = h->first + k;
    const span *s = &h->p->ws.spans[j];
    if (j % h->n_slices == h->slice)
        atomic_fetch_add_explicit(&h->hash,
                                  dz_hash_span(dz_ws_host_at(h->p, s->id, s->i0), s->n * h->esz, (uint64_t)j),
                                  memory_order_relaxed);
}

dz_status dz_pipeline_checksum_slice(dz_pipeline *p, int slice, int n_slices, uint64_t *sum, dz_error *err) {
    *sum = 0;
    if (n_slices < 1 || slice < 0 || slice >= n_slices)
        return dz_fail(err, DZ_ERR_INVALID, "zo: checksum slice %d of %d", slice, n_slices);
    dz_status st = dz_pipeline_flush(p, err);
    if (st != DZ_OK) return st;
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    uint64_t total = 0;
    for (int b = 0; b < p->ws.n_blocks; b++) {
        const int first = p->ws.block_first_span[b], last = p->ws.block_first_span[b + 1];
        if (dz_stream_in_store(p, b)) {
            uint64_t part = 0;
            const dz_pass pass = {.pair = -1, .hash = &part, .slice = slice, .n_slices = n_slices, .parallel = 1};
            if ((st = dz_pass_chunks(p, b, first, last, &pass, err)) != DZ_OK) return st;
            total += part;
            continue;
        }
        hash_job job = {.p = p, .first = first, .slice = slice, .n_slices = n_slices, .esz = esz, .hash = 0};
        dz_parallel_for_dynamic(last - first, hash_task, &job);
        total += atomic_load(&job.hash);
    }
    *sum = total;
    return DZ_OK;
}
