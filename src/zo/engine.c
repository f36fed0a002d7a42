/* The ZO engine: dual forward over perturbed working copies, fused deferred updates. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "core/rng.h"
#include "core/util.h"
#include "distzo/zo.h"
#include "distzo/log.h"
#include "zo/perturb.h"
#include "store/store.h"

/* Elements per unit of parallel work: big enough to amortize scheduling, small enough
 * to balance a block's tensors over the threads. */
enum { SPAN = 32768, PARALLEL_ROWS_MIN = 65536 };
/* Spans one pass over a block in the store moves at a time (8 MB of f32): bounds the
 * chunk buffer, not the file's layout. */
enum { GCHUNK_SPANS = 64 };

typedef struct span {
    int id;
    uint64_t i0;
    size_t n;
} span;

struct dz_zo_engine {
    dz_model *m;
    dz_forward *f;
    dz_zo_params p;
    dz_zdist dist;
    int n_blocks;             /* layers + the global block */
    span *spans;
    int *block_first_span;    /* spans of block b: [block_first_span[b], block_first_span[b+1]) */
    size_t *tensor_off;       /* offset of a layer tensor inside its block's working buffers */
    int (*layer_ids)[DZ_L_COUNT]; /* tensor id of (layer, role), or -1 */
    float *wplus[2], *wminus[2]; /* pairs of working copies (+eps, -eps) of a layer block: pair 0
                                  * always, pair 1 with a store (block l uses pair l % 2, so the
                                  * I/O thread fills block l+1's while layer l computes) */
    size_t block_floats;      /* floats in each: the largest layer block */
    int own_work;             /* wplus[0]/wminus[0] are this engine's (not a node's shared set) */
    float *minus_cache;       /* stream 1's rows, computed with stream 0's (same z) */
    size_t row_floats;
    int cache_valid, cache_id;
    int64_t cache_row0, cache_nrows;
    uint32_t draw;            /* the draw the weight source perturbs with */
    int pending;              /* an update waits to be applied */
    unsigned char *applied;   /* per block: the pending update is already in */
    dz_zo_update upd;
    float upd_g[DZ_ZO_MAX_Q];
    float *lp[2], *plp[2];    /* log-probs of each sign: continuation rows, prompt rows */
    dz_store *store;          /* layer masters on disk (NULL: in the model's memory) */
    int prep_apply[2];        /* per pair: the queued preparation applies the pending update */
    int stream_globals;       /* the global block stays in the store too (the model holds no tensor) */
    char *gtheta;             /* streamed globals: the rows zo_rows reads, in the store's dtype */
    char *chunk;              /* a store's bounded transfer buffer: GCHUNK_SPANS spans of a block */
    int gapply;               /* streamed globals: this pass's update is not yet in the store */
    int io_failed;            /* a read inside rows() failed (it has no error path): io_err says why */
    dz_error io_err;
    size_t bytes;
    dz_zo_parallel par;       /* signs this rank computes; sliced updates of shared masters */
    double *ex_loss;          /* per-example (loss, weight) pairs of a step: [q][2 signs][n_global][2] */
    size_t ex_cap;
};

static int decays(const dz_param *p) { return p->kind == DZ_PARAM_MATRIX || p->kind == DZ_PARAM_EMBEDDING; }

static int is_bf16(const dz_zo_engine *e) { return dz_model_dtype(e->m) == DZ_BF16; }

/* Element i0 of a tensor the model holds (not one that lives in the store: in_store). */
static void *theta_at(const dz_zo_engine *e, int id, uint64_t i0) {
    return (char *)dz_model_tensor(e->m, id) + i0 * dz_dtype_size(dz_model_dtype(e->m));
}

/* Block b's masters live in the store (a layer, or a streamed global block), so every
 * pass over them goes chunk by chunk through the chunk buffer. */
static int in_store(const dz_zo_engine *e, int b) {
    return e->store && (b < e->n_blocks - 1 || e->stream_globals);
}

/* The pending update as one tensor sees it (no decay on biases and norms). */
static dz_zo_update update_for(const dz_zo_engine *e, int id) {
    dz_zo_update u = e->upd;
    u.g = e->upd_g;
    if (!decays(&dz_model_params(e->m)->params[id])) u.wd = 0.0f;
    return u;
}

/* w_plus/w_minus for elements [i0, i0+n) of tensor id at the current draw from th (where
 * element i0 lies), applying the pending update to th first when apply is set. */
static void perturb_span(const dz_zo_engine *e, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                         int apply) {
    const dz_zo_update u = update_for(e, id);
    if (is_bf16(e))
        dz_update_then_perturb_bf16(th, wp, wm, n, apply ? &u : NULL, e->p.eps, e->p.seed, (uint32_t)id, e->draw, i0,
                                    e->dist);
    else
        dz_update_then_perturb_f32(th, wp, wm, n, apply ? &u : NULL, e->p.eps, e->p.seed, (uint32_t)id, e->draw, i0,
                                   e->dist);
}

/* The pending update of span s, whose first element lies at th. */
static void update_span(const dz_zo_engine *e, const span *s, void *th) {
    const dz_zo_update u = update_for(e, s->id);
    if (is_bf16(e))
        dz_update_bf16(th, s->n, u.g, u.q, u.lr, u.wd, e->p.seed, (uint32_t)s->id, u.step, s->i0, e->dist);
    else
        dz_update_f32(th, s->n, u.g, u.q, u.lr, u.wd, e->p.seed, (uint32_t)s->id, u.step, s->i0, e->dist);
}

/* With masters shared by a node's ranks, span k is this rank's to update and perturb when
 * k mod n_slices is its slice; alone, every span is. */
static int my_span(const dz_zo_engine *e, int k) { return e->par.n_slices <= 1 || k % e->par.n_slices == e->par.slice; }

/* Where span s starts inside its block's bytes in the store. */
static size_t span_offset(const dz_zo_engine *e, const span *s) {
    return dz_store_tensor_offset_in_block(e->store, s->id) + s->i0 * dz_dtype_size(dz_model_dtype(e->m));
}

/* A span's bytes, 8 at a time through a multiply-xor chain, then keyed by the span index
 * so equal contents at different places do not cancel in the sum. */
static uint64_t hash_span(const unsigned char *p, size_t n, uint64_t k) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    uint64_t state = h + k * 0xbf58476d1ce4e5b9ULL;
    return dz_splitmix64(&state);
}

/* What one pass over spans of a block in the store does to each span, in its chunk. */
typedef struct pass {
    int apply;            /* apply the pending update (the range is then written back) */
    int pair;             /* >= 0: write w+/w- of the spans into this pair (after the update) */
    uint64_t *hash;       /* non-NULL: add the hashes of this slice's spans */
    int slice, n_slices;  /* with hash: spans k with k % n_slices == slice */
    int parallel;         /* spread a chunk's spans over the pool's threads (not on the I/O thread) */
} pass;

/* One chunk of a pass: task k is span s0 + k, whose bytes lie at chunk + offset - off.
 * The hashes add up mod 2^64, exact and commutative: the threads' order does not matter. */
typedef struct chunk_job {
    dz_zo_engine *e;
    const pass *p;
    int s0;
    size_t off, esz;
    _Atomic uint64_t hash;
} chunk_job;

static void chunk_task(void *ctx, int k, int thread) {
    chunk_job *c = ctx;
    dz_zo_engine *e = c->e;
    const pass *p = c->p;
    const int j = c->s0 + k;
    const span *sp = &e->spans[j];
    char *th = e->chunk + span_offset(e, sp) - c->off;
    if (p->pair >= 0) {
        const size_t w = e->tensor_off[sp->id] + sp->i0;
        perturb_span(e, sp->id, sp->i0, sp->n, th, e->wplus[p->pair] + w, e->wminus[p->pair] + w, p->apply);
    } else if (p->apply) {
        update_span(e, sp, th);
    }
    if (p->hash && j % p->n_slices == p->slice)
        atomic_fetch_add_explicit(&c->hash, hash_span((const unsigned char *)th, sp->n * c->esz, (uint64_t)j),
                                  memory_order_relaxed);
}

/* Spans are handed out one by one (they differ in size); on the I/O thread they run on
 * it alone, leaving the pool to the compute thread. */
static void run_spans(int parallel, int n, dz_task_fn fn, void *ctx) {
    if (parallel) {
        dz_parallel_for_dynamic(n, fn, ctx);
        return;
    }
    for (int k = 0; k < n; k++) fn(ctx, k, 0);
}

/* Spans [a, b) of block blk in the store, GCHUNK_SPANS at a time: read the chunk (the
 * spans are adjacent: a block is one byte range in table order), run the pass on each
 * span where it lies in the chunk, write the chunk back if it changed. The same
 * element-wise kernels as in memory, so the bits do not depend on where this runs. */
static dz_status chunk_pass(dz_zo_engine *e, int blk, int a, int b, const pass *p, dz_error *err) {
    const size_t esz = dz_dtype_size(dz_model_dtype(e->m));
    for (int s0 = a; s0 < b; s0 += GCHUNK_SPANS) {
        const int s1 = b - s0 < GCHUNK_SPANS ? b : s0 + GCHUNK_SPANS;
        const size_t off = span_offset(e, &e->spans[s0]);
        const size_t len = span_offset(e, &e->spans[s1 - 1]) + e->spans[s1 - 1].n * esz - off;
        dz_status st = dz_store_read_range(e->store, blk, off, len, e->chunk, err);
        if (st != DZ_OK) return st;
        chunk_job c = {.e = e, .p = p, .s0 = s0, .off = off, .esz = esz, .hash = 0};
        run_spans(p->parallel, s1 - s0, chunk_task, &c);
        if (p->hash) *p->hash += atomic_load(&c.hash);
        if (p->apply && (st = dz_store_write_range(e->store, blk, off, len, e->chunk, err)) != DZ_OK) return st;
    }
    return DZ_OK;
}

/* I/O thread: layer block l read chunk by chunk, the pending update applied and written
 * back (if the caller queued it with one), and w+/w- written into pair l % 2. */
static dz_status prepare_cb(void *user, int l, void *buf, dz_error *err) {
    (void)buf;
    dz_zo_engine *e = user;
    const pass p = {.apply = e->prep_apply[l % 2], .pair = l % 2};
    return chunk_pass(e, l, e->block_first_span[l], e->block_first_span[l + 1], &p, err);
}

/* I/O thread, streamed global block: slice k of n_layers of its spans (one per layer, so
 * the work spreads over the step) updated in the store. */
static dz_status update_global_slice_cb(void *user, int k, void *buf, dz_error *err) {
    (void)buf;
    dz_zo_engine *e = user;
    const int g = e->n_blocks - 1, slices = g > 0 ? g : 1;
    const int64_t first = e->block_first_span[g], count = e->block_first_span[g + 1] - first;
    const pass p = {.apply = 1, .pair = -1};
    return chunk_pass(e, g, (int)(first + count * k / slices), (int)(first + count * (k + 1) / slices), &p, err);
}

/* Spans [first, first + n) of a block in memory, one task each (this rank's slice only). */
typedef struct block_job {
    dz_zo_engine *e;
    int first;
    int apply; /* fill: fuse the pending update */
} block_job;

static void update_task(void *ctx, int k, int thread) {
    const block_job *b = ctx;
    dz_zo_engine *e = b->e;
    const span *s = &e->spans[b->first + k];
    if (my_span(e, b->first + k)) update_span(e, s, theta_at(e, s->id, s->i0));
}

static void fill_task(void *ctx, int k, int thread) {
    const block_job *b = ctx;
    dz_zo_engine *e = b->e;
    if (!my_span(e, b->first + k)) return;
    const span *s = &e->spans[b->first + k];
    const size_t off = e->tensor_off[s->id] + s->i0;
    perturb_span(e, s->id, s->i0, s->n, theta_at(e, s->id, s->i0), e->wplus[0] + off, e->wminus[0] + off, b->apply);
}

/* Applies the pending update to block b alone (no perturbation), outside the step's
 * pipeline (flush, replay): a block in the store chunk by chunk, the chunk's spans over
 * the pool's threads. With shared masters (never with a store) this rank updates only
 * its slice of the spans. */
static void update_block(dz_zo_engine *e, int b) {
    if (!e->pending || e->applied[b]) return;
    dz_error err = {0};
    if (e->store && dz_store_wait(e->store, &err) != DZ_OK) dz_log(DZ_LOG_ERROR, "%s", err.msg);
    const int first = e->block_first_span[b], last = e->block_first_span[b + 1];
    if (in_store(e, b)) {
        const pass p = {.apply = 1, .pair = -1, .parallel = 1};
        if (chunk_pass(e, b, first, last, &p, &err) != DZ_OK) dz_log(DZ_LOG_ERROR, "%s", err.msg);
        e->applied[b] = 1;
        return;
    }
    block_job job = {.e = e, .first = first};
    dz_parallel_for_dynamic(last - first, update_task, &job);
    e->applied[b] = 1;
}

/* Queues the preparation of layer block l into pair l % 2 (prepare_cb), with the pending
 * update if block l does not have it yet. The caller must be done with that pair. */
static dz_status prepare(dz_zo_engine *e, int l, dz_error *err) {
    e->prep_apply[l % 2] = e->pending && !e->applied[l];
    if (e->prep_apply[l % 2]) e->applied[l] = 1;
    return dz_store_start_call(e->store, prepare_cb, e, l, NULL, err);
}

/* With a store: once the queue drains, block l's pair is ready (and layer l-1, which used
 * the other pair, is done); then block l+1's preparation into the other pair and a slice
 * of a streamed global block's update are queued, both overlapped with layer l's compute. */
static dz_status stage_block(dz_zo_engine *e, int l, dz_error *err) {
    if (!e->store) return DZ_OK;
    dz_status st = dz_store_wait(e->store, err);
    if (st == DZ_OK && l + 1 < e->n_blocks - 1) st = prepare(e, l + 1, err);
    if (st == DZ_OK && e->gapply) st = dz_store_start_call(e->store, update_global_slice_cb, e, l, NULL, err);
    return st;
}

/* Shared masters: nobody may still read what is about to be written (old weights, or the
 * working copies of the previous block), and nobody may read before every slice is in. */
static void shared_barrier(dz_zo_engine *e) {
    dz_error err = {0};
    if (e->par.n_slices > 1 && e->par.barrier(e->par.ctx, &err) != DZ_OK) dz_log(DZ_LOG_ERROR, "%s", err.msg);
}

/* The pending update of blocks [b0, b1) outside the step's fills (flush, replay, the global
 * block before its rows are read). With shared masters, between barriers: nobody reads old
 * weights while slices are written, nor new ones before every slice is in. */
static void update_blocks(dz_zo_engine *e, int b0, int b1) {
    int todo = 0;
    for (int b = b0; b < b1; b++) todo |= e->pending && !e->applied[b];
    if (todo) shared_barrier(e);
    for (int b = b0; b < b1; b++) update_block(e, b);
    if (todo) shared_barrier(e);
}

/* Without a store: fills pair 0 with layer block l, the pending update fused in. With a
 * node's ranks sharing the masters and the working buffers, each fills its slice of the
 * spans (updating only those masters), between barriers. */
static void fill_block(dz_zo_engine *e, int l) {
    const int apply = e->pending && !e->applied[l];
    const int first = e->block_first_span[l], last = e->block_first_span[l + 1];
    shared_barrier(e);
    block_job job = {.e = e, .first = first, .apply = apply};
    dz_parallel_for_dynamic(last - first, fill_task, &job);
    shared_barrier(e);
    if (apply) e->applied[l] = 1;
}

/* Theta for rows of a global tensor starting at element i0: in place, or (streamed) read
 * from the store into gtheta; NULL after a failed read (recorded in io_err). */
static void *global_theta(dz_zo_engine *e, int id, int64_t row0, int64_t nrows, uint64_t i0) {
    if (!e->stream_globals) return theta_at(e, id, i0);
    dz_error err = {0};
    if (dz_store_read_rows(e->store, id, row0, nrows, e->gtheta, &err) == DZ_OK) return e->gtheta;
    if (!e->io_failed) e->io_err = err;
    e->io_failed = 1;
    return NULL;
}

/* Elements [0, n) of global rows as SPAN-element tasks (task k: elements k*SPAN...). */
typedef struct rows_job {
    const dz_zo_engine *e;
    int id, apply;
    uint64_t i0;
    size_t n, esz;
    char *th;
    float *wp, *wm;
} rows_job;

static void rows_task(void *ctx, int k, int thread) {
    const rows_job *r = ctx;
    const size_t a = (size_t)k * SPAN, len = r->n - a < SPAN ? r->n - a : SPAN;
    perturb_span(r->e, r->id, r->i0 + a, len, r->th + a * r->esz, r->wp + a, r->wm + a, r->apply);
}

/* Rows of a global tensor for stream 0 (theta + eps z) or 1 (theta - eps z). Both are
 * computed together; stream 1's half is kept for the head's next request. */
static const float *zo_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    dz_zo_engine *e = (dz_zo_engine *)self;
    const int64_t cols = dz_model_params(e->m)->params[id].cols;
    const uint64_t i0 = (uint64_t)(row0 * cols);
    const size_t n = (size_t)(nrows * cols);
    stream &= 1; /* even streams see +eps, odd ones -eps */
    if (stream == 1 && e->cache_valid && e->cache_id == id && e->cache_row0 == row0 && e->cache_nrows == nrows) {
        memcpy(scratch, e->minus_cache, n * sizeof(float));
        e->cache_valid = 0;
        return scratch;
    }
    float *wp = stream == 0 ? scratch : e->minus_cache, *wm = stream == 0 ? e->minus_cache : scratch;
    char *th = global_theta(e, id, row0, nrows, i0);
    if (!th) { /* the caller sees zeros; the step reports the error */
        memset(scratch, 0, n * sizeof(float));
        e->cache_valid = 0;
        return scratch;
    }
    const int apply = e->gapply; /* a streamed global block's update is in the copy, not yet in the store */
    const size_t esz = dz_dtype_size(dz_model_dtype(e->m));
    if (n < PARALLEL_ROWS_MIN) {
        perturb_span(e, id, i0, n, th, wp, wm, apply);
    } else {
        rows_job job = {.e = e, .id = id, .apply = apply, .i0 = i0, .n = n, .esz = esz, .th = th, .wp = wp, .wm = wm};
        dz_parallel_for((int)((n + SPAN - 1) / SPAN), rows_task, &job);
    }
    e->cache_valid = stream == 0;
    e->cache_id = id;
    e->cache_row0 = row0;
    e->cache_nrows = nrows;
    return scratch;
}

/* Elements of the largest layer block (the global block is the last). */
static size_t max_layer_floats(const dz_param_table *t) {
    int n_layers = 0;
    for (int i = 0; i < t->count; i++)
        if (t->params[i].block > n_layers) n_layers = t->params[i].block;
    size_t best = 0;
    for (int b = 0; b < n_layers; b++) {
        size_t n = 0;
        for (int i = 0; i < t->count; i++)
            if (t->params[i].block == b) n += (size_t)dz_param_numel(&t->params[i]);
        best = n > best ? n : best;
    }
    return best;
}

/* w+ and w- of the largest layer block, the head's -eps row cache, and the log-probs of
 * each sign (continuation and prompt rows). */
size_t dz_zo_engine_bytes_for(const dz_param_table *t, size_t row_floats, size_t rows) {
    return (2 * max_layer_floats(t) + row_floats + 4 * rows) * sizeof(float);
}

/* A store's second pair of fp32 working copies and its chunk buffer (masters of dtype). */
size_t dz_zo_store_bytes_for(const dz_param_table *t, dz_dtype dtype) {
    return 2 * max_layer_floats(t) * sizeof(float) + (size_t)GCHUNK_SPANS * SPAN * dz_dtype_size(dtype);
}

/* What the engine allocates (the resident check counts it before the engine exists): a
 * pair of fp32 working copies of the largest layer, stream 1's rows, four log-prob
 * vectors; with a store the second pair and the chunk buffer; with the global block
 * streamed its row buffer. */
static size_t work_bytes(const dz_model *m, const dz_forward *f, const dz_store *s, int stream_globals) {
    const size_t rows = (size_t)dz_forward_max_batch(f) * dz_forward_max_seq(f);
    const dz_dtype dt = s ? dz_store_dtype(s) : dz_model_dtype(m); /* the model may not have it yet */
    size_t bytes = dz_zo_engine_bytes_for(dz_model_params(m), dz_forward_row_floats(f), rows);
    if (s) bytes += dz_zo_store_bytes_for(dz_model_params(m), dt);
    if (s && stream_globals) bytes += dz_forward_row_floats(f) * dz_dtype_size(dt);
    return bytes;
}

static dz_status build_spans(dz_zo_engine *e, dz_error *err) {
    const dz_param_table *t = dz_model_params(e->m);
    size_t count = 0;
    for (int i = 0; i < t->count; i++) count += ((size_t)dz_param_numel(&t->params[i]) + SPAN - 1) / SPAN;
    e->spans = malloc(sizeof *e->spans * (count ? count : 1));
    if (e->n_blocks < 1) return dz_fail(err, DZ_ERR_INVALID, "zo: a model without blocks");
    e->block_first_span = calloc((size_t)e->n_blocks + 1, sizeof *e->block_first_span);
    e->tensor_off = calloc((size_t)t->count, sizeof *e->tensor_off);
    if (!e->spans || !e->block_first_span || !e->tensor_off) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    size_t k = 0;
    const size_t max_block = max_layer_floats(t);
    for (int b = 0; b < e->n_blocks; b++) { /* the table is ordered by block */
        e->block_first_span[b] = (int)k;
        size_t off = 0;
        for (int i = 0; i < t->count; i++) {
            if (t->params[i].block != b) continue;
            const size_t n = (size_t)dz_param_numel(&t->params[i]);
            e->tensor_off[i] = off;
            off += n;
            for (size_t a = 0; a < n; a += SPAN) e->spans[k++] = (span){i, a, n - a < SPAN ? n - a : SPAN};
        }
    }
    e->block_first_span[e->n_blocks] = (int)k;
    e->wplus[0] = dz_alloc(max_block * sizeof(float));
    e->wminus[0] = dz_alloc(max_block * sizeof(float));
    e->block_floats = max_block, e->own_work = 1;
    e->row_floats = dz_forward_row_floats(e->f);
    e->minus_cache = dz_alloc(e->row_floats * sizeof(float));
    const size_t rows = (size_t)dz_forward_max_batch(e->f) * dz_forward_max_seq(e->f);
    for (int sign = 0; sign < 2; sign++) {
        e->lp[sign] = dz_alloc(rows * sizeof(float));
        e->plp[sign] = dz_alloc(rows * sizeof(float));
    }
    e->applied = calloc((size_t)e->n_blocks, 1);
    e->layer_ids = malloc(sizeof *e->layer_ids * (size_t)e->n_blocks);
    if (!e->layer_ids) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    for (int l = 0; l < e->n_blocks - 1; l++)
        for (int r = 0; r < DZ_L_COUNT; r++) e->layer_ids[l][r] = dz_param_find(t, l, r);
    e->bytes = work_bytes(e->m, e->f, NULL, 0);
    if (!e->wplus[0] || !e->wminus[0] || !e->minus_cache || !e->lp[0] || !e->lp[1] || !e->plp[0] || !e->plp[1] || !e->applied)
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate working buffers (%zu floats per block)", max_block);
    return DZ_OK;
}

dz_status dz_zo_engine_create(dz_model *m, dz_forward *f, const dz_zo_params *p, dz_zo_engine **out, dz_error *err) {
    *out = NULL;
    if (p->q < 1 || p->q > DZ_ZO_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --spsa-samples %d is outside 1..%d", p->q, DZ_ZO_MAX_Q);
    if (!(p->eps > 0.0f)) return dz_fail(err, DZ_ERR_INVALID, "zo: --eps must be positive");
    if (dz_model_dtype(m) != DZ_F32 && dz_model_dtype(m) != DZ_BF16)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: master weights must be f32 or bf16, not %s",
                       dz_dtype_name(dz_model_dtype(m)));
    if (dz_model_bytes_mapped(m) > 0)
        return dz_fail(err, DZ_ERR_INVALID, "zo: the master weights must be owned (dz_model_make_owned)");
    dz_zo_engine *e = calloc(1, sizeof *e);
    if (!e) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    e->m = m;
    e->f = f;
    e->p = *p;
    e->dist = p->rademacher ? DZ_Z_RADEMACHER : DZ_Z_GAUSSIAN;
    e->n_blocks = dz_model_config(m)->n_layers + 1;
    e->par.signs = 3;
    dz_status st = build_spans(e, err);
    if (st != DZ_OK) {
        dz_zo_engine_free(e);
        return st;
    }
    *out = e;
    return DZ_OK;
}

dz_status dz_zo_engine_use_store(dz_zo_engine *e, struct dz_store *s, dz_error *err) {
    if (dz_store_dtype(s) != dz_model_dtype(e->m) || dz_store_n_blocks(s) != e->n_blocks)
        return dz_fail(err, DZ_ERR_INVALID, "%s: the store does not hold this model's blocks", dz_store_path(s));
    if (e->par.n_slices > 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: a disk store cannot be shared by the ranks of a node yet");
    const dz_param_table *t = dz_model_params(e->m);
    const int first_global = e->block_first_span[e->n_blocks - 1] < e->block_first_span[e->n_blocks]
                                 ? e->spans[e->block_first_span[e->n_blocks - 1]].id
                                 : t->count - 1;
    e->stream_globals = dz_model_tensor(e->m, first_global) == NULL; /* the model let go of it */
    const size_t esz = dz_dtype_size(dz_model_dtype(e->m));
    if (!(e->wplus[1] = dz_alloc(e->block_floats * sizeof(float))) ||
        !(e->wminus[1] = dz_alloc(e->block_floats * sizeof(float))) ||
        !(e->chunk = dz_alloc((size_t)GCHUNK_SPANS * SPAN * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the second pair of working copies");
    if (e->stream_globals && !(e->gtheta = dz_alloc(e->row_floats * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the global block's row buffer");
    e->bytes = work_bytes(e->m, e->f, s, e->stream_globals);
    e->store = s;
    return DZ_OK;
}

dz_zo_resident dz_zo_resident_bytes(const dz_model *m, const dz_forward *f, const struct dz_store *s,
                                    int stream_globals) {
    const int g = dz_model_config(m)->n_layers;
    return (dz_zo_resident){.weights = stream_globals ? 0 : dz_store_block_bytes(s, g),
                            .activations = dz_forward_bytes(f),
                            .buffers = work_bytes(m, f, s, stream_globals)};
}

static size_t total(dz_zo_resident r) { return r.weights + r.activations + r.buffers; }

dz_status dz_zo_plan_resident(const dz_model *m, const dz_forward *f, const struct dz_store *s, int cap_mb,
                              int *stream_globals, dz_error *err) {
    const size_t cap = (size_t)cap_mb << 20;
    if (cap_mb <= 0) return DZ_OK;
    if (!*stream_globals && total(dz_zo_resident_bytes(m, f, s, 0)) <= cap) return DZ_OK;
    const dz_zo_resident r = dz_zo_resident_bytes(m, f, s, 1); /* the least a store allows */
    if (total(r) <= cap) {
        if (!*stream_globals)
            dz_log(DZ_LOG_INFO, "--max-resident %d MB: the global block (%.1f MB) stays in the store too", cap_mb,
                   dz_store_block_bytes(s, dz_model_config(m)->n_layers) / 1048576.0);
        *stream_globals = 1;
        return DZ_OK;
    }
    return dz_fail(err, DZ_ERR_INVALID,
                   "--max-resident %d MB cannot hold what training keeps in memory: %.1f MB even with every weight in "
                   "the store (activations %.1f MB, two pairs of working copies, chunk and row buffers %.1f MB)",
                   cap_mb, total(r) / 1048576.0, r.activations / 1048576.0, r.buffers / 1048576.0);
}

/* The masters as evaluation sees them: resident tensors in place, layers read from the store. */
static const float *master_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    const dz_zo_engine *e = self;
    const dz_weight_source own = dz_model_weights(e->m);
    if (dz_model_tensor(e->m, id)) return own.rows(own.self, stream, id, row0, nrows, scratch);
    const size_t n = (size_t)(nrows * dz_model_params(e->m)->params[id].cols);
    const int bf16 = is_bf16(e);
    void *raw = bf16 ? (void *)((uint16_t *)(void *)scratch + n) : (void *)scratch; /* bf16 lands in the upper half */
    dz_error err = {0};
    if (dz_store_read_rows(e->store, id, row0, nrows, raw, &err) != DZ_OK) {
        dz_log(DZ_LOG_ERROR, "%s", err.msg); /* rows() has no error path: the caller sees zeros */
        memset(scratch, 0, n * sizeof(float));
        return scratch;
    }
    if (bf16) /* widening in place, front to back: each source element is read before it is overwritten */
        for (size_t i = 0; i < n; i++) scratch[i] = dz_bf16_to_f32(((const uint16_t *)raw)[i]);
    return scratch;
}

dz_status dz_zo_store_residency(dz_model *m, const dz_forward *f, const struct dz_store *s, int cap_mb,
                                int stream_globals, dz_error *err) {
    dz_status st = dz_zo_plan_resident(m, f, s, cap_mb, &stream_globals, err);
    if (st != DZ_OK) return st;
    return dz_model_keep_for_store(m, !stream_globals, dz_store_dtype(s), err);
}

void dz_zo_engine_free(dz_zo_engine *e) {
    if (!e) return;
    dz_free(e->wplus[1]);
    dz_free(e->wminus[1]);
    dz_free(e->gtheta);
    dz_free(e->chunk);
    free(e->spans);
    free(e->block_first_span);
    free(e->tensor_off);
    free(e->applied);
    free(e->layer_ids);
    if (e->own_work) {
        dz_free(e->wplus[0]);
        dz_free(e->wminus[0]);
    }
    dz_free(e->minus_cache);
    for (int k = 0; k < 2; k++) {
        dz_free(e->lp[k]);
        dz_free(e->plp[k]);
    }
    free(e->ex_loss);
    free(e);
}

size_t dz_zo_engine_bytes(const dz_zo_engine *e) { return e->bytes; }

size_t dz_zo_block_floats(const dz_zo_engine *e) { return e->block_floats; }

void dz_zo_flush(dz_zo_engine *e) {
    update_blocks(e, 0, e->n_blocks);
    e->pending = 0;
    dz_error err = {0};
    if (e->store && dz_store_wait(e->store, &err) != DZ_OK) dz_log(DZ_LOG_ERROR, "%s", err.msg);
}

static void set_pending(dz_zo_engine *e, uint32_t step, float lr, const float *g) {
    e->upd = (dz_zo_update){.g = e->upd_g, .q = e->p.q, .lr = lr, .wd = e->p.wd, .step = step};
    memcpy(e->upd_g, g, sizeof(float) * (size_t)e->p.q);
    memset(e->applied, 0, (size_t)e->n_blocks);
    e->pending = 1;
}

void dz_zo_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g) {
    dz_zo_flush(e);
    set_pending(e, step, lr, g);
    dz_zo_flush(e);
}

dz_weight_source dz_zo_master_source(const dz_zo_engine *e) {
    if (!e->store) return dz_model_weights(e->m);
    return (dz_weight_source){master_rows, e};
}

/* One sample: both perturbed forwards block by block, then the per-example losses of each
 * sign this rank computes (into out[sign][example0 ...]). Streams: with a tree batch 0/1
 * are the prompts (+/-) and 2/3 the continuations; the weight source perturbs by the
 * stream's parity. */
static dz_status dual_forward(dz_zo_engine *e, const dz_zo_batch *b, double *out[2], dz_error *err) {
    const dz_config *c = dz_model_config(e->m);
    const dz_weight_source src = {zo_rows, e};
    const int tree = b->n_prompts > 0, cs = tree ? 2 : 0; /* continuation streams cs (+), cs+1 (-) */
    if (tree && dz_forward_n_streams(e->f) < 4)
        return dz_fail(err, DZ_ERR_INVALID, "zo: a tree batch needs a forward with 4 streams");
    int signs[2], n_signs = 0;
    for (int k = 0; k < 2; k++)
        if (e->par.signs & (1 << k)) signs[n_signs++] = k;
    e->cache_valid = 0;
    e->io_failed = 0;
    dz_status st = DZ_OK;
    if (e->stream_globals) { /* its update runs on the I/O thread, slice by slice; rows read first get it on the fly */
        e->gapply = e->pending && !e->applied[c->n_layers];
        e->applied[c->n_layers] = 1;
    } else { /* the global block is read by rows: bring it up to date first */
        update_blocks(e, c->n_layers, c->n_layers + 1);
    }
    if (e->store && (st = prepare(e, 0, err)) != DZ_OK) return st; /* overlaps the embedding */
    for (int i = 0; st == DZ_OK && i < n_signs; i++) {
        const int k = signs[i];
        if (tree) st = dz_forward_embed_tree(e->f, k, &src, b->p_tokens, b->p_lengths, b->n_prompts, b->PT, NULL, -1,
                                             NULL, err);
        if (st == DZ_OK)
            st = dz_forward_embed_tree(e->f, cs + k, &src, b->tokens, b->lengths, b->B, b->T, b->start,
                                       tree ? k : -1, tree ? b->parent : NULL, err);
    }
    if (st != DZ_OK) return st;
    const float *w[2][DZ_L_COUNT];
    for (int l = 0; l < c->n_layers; l++) {
        if ((st = stage_block(e, l, err)) != DZ_OK) return st;
        if (!e->store) fill_block(e, l); /* the update is applied to the master whichever signs run here */
        const int pr = e->store ? l % 2 : 0; /* a store's I/O thread filled pair l % 2 */
        for (int r = 0; r < DZ_L_COUNT; r++) {
            const int id = e->layer_ids[l][r];
            w[0][r] = id < 0 ? NULL : e->wplus[pr] + e->tensor_off[id];
            w[1][r] = id < 0 ? NULL : e->wminus[pr] + e->tensor_off[id];
        }
        for (int i = 0; i < n_signs; i++) {
            const int k = signs[i];
            if (tree) dz_forward_layer(e->f, k, l, w[k]); /* a prompt before its continuations */
            dz_forward_layer(e->f, cs + k, l, w[k]);
        }
    }
    e->pending = 0; /* every block has it now */
    if (e->store && (st = dz_store_wait(e->store, err)) != DZ_OK) return st;
    e->gapply = 0; /* the store holds the updated global block: the head reads it as is */
    int pstreams[2], cstreams[2];
    float *plp[2], *lp[2];
    for (int i = 0; i < n_signs; i++) {
        pstreams[i] = signs[i], cstreams[i] = cs + signs[i];
        plp[i] = e->plp[signs[i]], lp[i] = e->lp[signs[i]];
    }
    if (tree) st = dz_forward_logprobs_streams(e->f, &src, n_signs, pstreams, b->p_rows, b->p_targets, b->n_p_rows, plp, err);
    if (st == DZ_OK) st = dz_forward_logprobs_streams(e->f, &src, n_signs, cstreams, b->rows, b->targets, b->n_rows, lp, err);
    if (st == DZ_OK && e->io_failed) st = dz_fail(err, e->io_err.code, "%s", e->io_err.msg);
    if (st != DZ_OK) return st;
    for (int i = 0; i < n_signs; i++) {
        const int k = signs[i];
        b->loss(e->lp[k], tree ? e->plp[k] : NULL, b->user, out[k] + 2 * (size_t)b->example0);
    }
    return DZ_OK;
}

/* The batch's shape in the global batch, zeros meaning one example, the whole batch. */
static void batch_extent(const dz_zo_batch *b, int *n_local, int *n_global) {
    *n_local = b->n_examples > 0 ? b->n_examples : 1;
    *n_global = b->n_global > 0 ? b->n_global : *n_local;
}

dz_status dz_zo_step(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_batch *b, dz_zo_step_result *out,
                     dz_error *err) {
    memset(out, 0, sizeof *out);
    out->finite = 1;
    int n_local, n_global;
    batch_extent(b, &n_local, &n_global);
    if (b->example0 < 0 || b->example0 + n_local > n_global)
        return dz_fail(err, DZ_ERR_INVALID, "zo: batch examples [%d, %d) outside the global batch of %d", b->example0,
                       b->example0 + n_local, n_global);
    const size_t per_sign = 2 * (size_t)n_global, need = (size_t)e->p.q * 2 * per_sign; /* (loss, weight) pairs */
    if (need > e->ex_cap) { /* grows once, at the first step of a larger batch */
        double *p = realloc(e->ex_loss, need * sizeof *p);
        if (!p) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
        e->ex_loss = p, e->ex_cap = need;
    }
    memset(e->ex_loss, 0, need * sizeof *e->ex_loss);
    for (int j = 0; j < e->p.q; j++) {
        e->draw = step * (uint32_t)e->p.q + (uint32_t)j;
        double *sample[2] = {e->ex_loss + (size_t)(2 * j) * per_sign, e->ex_loss + (size_t)(2 * j + 1) * per_sign};
        dz_status st = dual_forward(e, b, sample, err);
        if (st != DZ_OK) return st;
    }
    if (e->par.sum) { /* every rank holds only its examples and signs; the others are zeros */
        dz_status st = e->par.sum(e->par.ctx, e->ex_loss, need, err);
        if (st != DZ_OK) return st;
    }
    for (int j = 0; j < e->p.q; j++) {
        double loss[2] = {0.0, 0.0}, weight[2] = {0.0, 0.0};
        for (int k = 0; k < 2; k++) {
            const double *x = e->ex_loss + (size_t)(2 * j + k) * per_sign;
            for (int i = 0; i < n_global; i++) loss[k] += x[2 * i], weight[k] += x[2 * i + 1];
        }
        out->loss_plus[j] = loss[0] / weight[0], out->loss_minus[j] = loss[1] / weight[1];
        out->g[j] = (float)((out->loss_plus[j] - out->loss_minus[j]) / (2.0 * (double)e->p.eps));
        if (!isfinite(out->loss_plus[j]) || !isfinite(out->loss_minus[j]) || !isfinite(out->g[j])) out->finite = 0;
    }
    if (!out->finite) return DZ_OK;
    set_pending(e, step, lr, out->g);
    if (!e->p.fuse) dz_zo_flush(e);
    return DZ_OK;
}

dz_status dz_zo_engine_set_parallel(dz_zo_engine *e, const dz_zo_parallel *p, dz_error *err) {
    if (!(p->signs >= 1 && p->signs <= 3)) return dz_fail(err, DZ_ERR_INVALID, "zo: signs must be 1, 2 or 3");
    if (p->n_slices > 1 && (!p->barrier || p->slice < 0 || p->slice >= p->n_slices))
        return dz_fail(err, DZ_ERR_INVALID, "zo: sliced updates need a barrier and a slice in 0..%d", p->n_slices - 1);
    if (p->n_slices > 1 && e->store)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: a disk store cannot be shared by the ranks of a node yet");
    if (p->n_slices > 1 && !p->shared_work)
        return dz_fail(err, DZ_ERR_INVALID, "zo: sliced fills need working buffers shared by the node");
    e->par = *p;
    if (p->n_slices > 1) { /* the node's one working set replaces this rank's own */
        dz_free(e->wplus[0]);
        dz_free(e->wminus[0]);
        e->wplus[0] = p->shared_work, e->wminus[0] = p->shared_work + e->block_floats;
        e->own_work = 0;
        e->bytes -= 2 * e->block_floats * sizeof(float);
    }
    return DZ_OK;
}

/* Hashes of a block's spans in memory: task k is span first + k (this slice's only),
 * summed mod 2^64 like chunk_job's. */
typedef struct hash_job {
    dz_zo_engine *e;
    int first, slice, n_slices;
    size_t esz;
    _Atomic uint64_t hash;
} hash_job;

static void hash_task(void *ctx, int k, int thread) {
    hash_job *h = ctx;
    const int j = h->first + k;
    const span *s = &h->e->spans[j];
    if (j % h->n_slices == h->slice)
        atomic_fetch_add_explicit(&h->hash, hash_span(theta_at(h->e, s->id, s->i0), s->n * h->esz, (uint64_t)j),
                                  memory_order_relaxed);
}

uint64_t dz_zo_checksum_slice(dz_zo_engine *e, int slice, int n_slices) {
    dz_zo_flush(e);
    const size_t esz = dz_dtype_size(dz_model_dtype(e->m));
    uint64_t total = 0;
    dz_error err = {0};
    for (int b = 0; b < e->n_blocks; b++) {
        uint64_t part = 0;
        const int first = e->block_first_span[b], last = e->block_first_span[b + 1];
        if (in_store(e, b)) {
            const pass p = {.pair = -1, .hash = &part, .slice = slice, .n_slices = n_slices, .parallel = 1};
            if (chunk_pass(e, b, first, last, &p, &err) != DZ_OK) dz_log(DZ_LOG_ERROR, "%s", err.msg);
            total += part;
            continue;
        }
        hash_job job = {.e = e, .first = first, .slice = slice, .n_slices = n_slices, .esz = esz, .hash = 0};
        dz_parallel_for_dynamic(last - first, hash_task, &job);
        total += atomic_load(&job.hash);
    }
    return total;
}

float dz_lr_at(dz_lr_schedule s, float lr, int warmup, int total, int step) {
    if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (s == DZ_LR_CONSTANT || total <= warmup) return lr;
    const double progress = (double)(step - warmup) / (double)(total - warmup);
    if (s == DZ_LR_LINEAR) return (float)(lr * (1.0 - progress));
    return (float)(lr * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}
