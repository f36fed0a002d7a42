/* Passes over a block's spans: the element-wise kernels (update, update-then-perturb,
 * hash) run span by span over the pool's threads, on masters in the model's memory or,
 * chunk by chunk, in the store. The same kernels everywhere, so the bits do not depend on
 * where a pass runs or in what pieces. */
#include <stdatomic.h>

#include "core/threads.h"
#include "pipeline/internal.h"

static int decays(const dz_param *p) { return p->kind == DZ_PARAM_MATRIX || p->kind == DZ_PARAM_EMBEDDING; }

/* The pending update as one tensor sees it (no decay on biases and norms). */
dz_zo_update dz_pass_update_for(const dz_pipeline *p, int id) {
    dz_zo_update u = p->upd.rule;
    if (!decays(&dz_model_params(p->m)->params[id])) u.wd = 0.0f;
    return u;
}

void dz_pass_perturb_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                          int apply) {
    const dz_zo_update u = dz_pass_update_for(p, id);
    if (p->z.shape == DZ_PZ_HESSIAN)
        dz_hz_span(p, id, i0, n, th, wp, wm, apply ? &u : NULL);
    else if (dz_sz_applies(p, id))
        dz_sz_span(p, id, i0, n, th, wp, wm, apply ? &u : NULL);
    else if (dz_masters_bf16(p))
        p->be->ops->update_then_perturb_bf16(p->be, th, wp, wm, n, apply ? &u : NULL, p->z.eps, p->z.seed, (uint32_t)id,
                                             p->draw, i0, p->z.dist);
    else
        p->be->ops->update_then_perturb_f32(p->be, th, wp, wm, n, apply ? &u : NULL, p->z.eps, p->z.seed, (uint32_t)id,
                                            p->draw, i0, p->z.dist);
}

void dz_pass_update_span(const dz_pipeline *p, const span *s, void *th) {
    const dz_zo_update u = dz_pass_update_for(p, s->id);
    if (p->z.shape == DZ_PZ_HESSIAN)
        dz_hz_span(p, s->id, s->i0, s->n, th, NULL, NULL, &u);
    else if (dz_sz_applies(p, s->id))
        dz_sz_span(p, s->id, s->i0, s->n, th, NULL, NULL, &u);
    else if (dz_masters_bf16(p))
        p->be->ops->update_bf16(p->be, th, s->n, u.g, u.q, u.lr, u.wd, p->z.seed, (uint32_t)s->id, u.step, s->i0,
                                p->z.dist);
    else
        p->be->ops->update_f32(p->be, th, s->n, u.g, u.q, u.lr, u.wd, p->z.seed, (uint32_t)s->id, u.step, s->i0,
                               p->z.dist);
}

/* ---- In the store, chunk by chunk ------------------------------------------------- */

/* Where span s starts inside its block's bytes in the store. */
static size_t span_offset(const dz_pipeline *p, const span *s) {
    return dz_store_tensor_offset_in_block(p->io.store, s->id) + s->i0 * dz_dtype_size(dz_model_dtype(p->m));
}

/* One chunk of a pass: task k is span s0 + k, whose bytes lie at chunk + offset - off.
 * The hashes add up mod 2^64, exact and commutative: the threads' order does not matter. */
typedef struct chunk_job {
    dz_pipeline *p;
    const dz_pass *pass;
    int s0;
    size_t off, esz;
    _Atomic uint64_t hash;
} chunk_job;

static void chunk_task(void *ctx, int k, int thread) {
    chunk_job *c = ctx;
    dz_pipeline *p = c->p;
    const dz_pass *pass = c->pass;
    const int j = c->s0 + k;
    const span *sp = &p->ws.spans[j];
    char *th = p->io.chunk + span_offset(p, sp) - c->off;
    if (pass->pair >= 0) {
        const size_t w = p->ws.tensor_off[sp->id] + sp->i0;
        dz_pass_perturb_span(p, sp->id, sp->i0, sp->n, th, p->ws.wplus[pass->pair] + w, p->ws.wminus[pass->pair] + w,
                             pass->apply);
    } else if (pass->apply) {
        dz_pass_update_span(p, sp, th);
    }
    if (pass->hash && j % pass->n_slices == pass->slice)
        atomic_fetch_add_explicit(&c->hash, dz_hash_span((const unsigned char *)th, sp->n * c->esz, (uint64_t)j),
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

/* Spans [a, b) of block blk, GCHUNK_SPANS at a time: read the chunk (the spans are
 * adjacent: a block is one byte range in table order), run the pass on each span where it
 * lies in the chunk, write the chunk back if it changed. */
dz_status dz_pass_chunks(dz_pipeline *p, int blk, int a, int b, const dz_pass *pass, dz_error *err) {
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    const span *spans = p->ws.spans;
    for (int s0 = a; s0 < b; s0 += GCHUNK_SPANS) {
        const int s1 = b - s0 < GCHUNK_SPANS ? b : s0 + GCHUNK_SPANS;
        const size_t off = span_offset(p, &spans[s0]);
        const size_t len = span_offset(p, &spans[s1 - 1]) + spans[s1 - 1].n * esz - off;
        dz_status st = dz_store_read_range(p->io.store, blk, off, len, p->io.chunk, err);
        if (st != DZ_OK) return st;
        chunk_job c = {.p = p, .pass = pass, .s0 = s0, .off = off, .esz = esz, .hash = 0};
        run_spans(pass->parallel, s1 - s0, chunk_task, &c);
        if (pass->hash) *pass->hash += atomic_load(&c.hash);
        if (pass->apply && (st = dz_store_write_range(p->io.store, blk, off, len, p->io.chunk, err)) != DZ_OK)
            return st;
    }
    return DZ_OK;
}

/* ---- In memory --------------------------------------------------------------------- */

/* Spans [first, first + n) of a block in memory, one task each (this rank's slice only). */
typedef struct block_job {
    dz_pipeline *p;
    int first;
    int apply; /* fill: fuse the pending update */
    const int *skip; /* fill: the tensors left out (a layer pair's matrices), n_skip of them */
    int n_skip;
} block_job;

static void update_task(void *ctx, int k, int thread) {
    const block_job *b = ctx;
    const dz_pipeline *p = b->p;
    const span *s = &p->ws.spans[b->first + k];
    if (dz_ws_my_span(p, b->first + k)) dz_pass_update_span(p, s, dz_ws_theta_at(p, s->id, s->i0));
}

static void fill_task(void *ctx, int k, int thread) {
    const block_job *b = ctx;
    const dz_pipeline *p = b->p;
    if (!dz_ws_my_span(p, b->first + k)) return;
    const span *s = &p->ws.spans[b->first + k];
    for (int i = 0; i < b->n_skip; i++)
        if (b->skip[i] == s->id) return;
    const size_t off = p->ws.tensor_off[s->id] + s->i0;
    dz_pass_perturb_span(p, s->id, s->i0, s->n, dz_ws_theta_at(p, s->id, s->i0), p->ws.wplus[0] + off,
                         p->ws.wminus[0] + off, b->apply);
}

void dz_pass_update_in_memory(dz_pipeline *p, int b) {
    const int first = p->ws.block_first_span[b], last = p->ws.block_first_span[b + 1];
    if (p->res.on) {
        dz_res_pass(p, first, last, NULL, 1);
        return;
    }
    block_job job = {.p = p, .first = first};
    dz_parallel_for_dynamic(last - first, update_task, &job);
}

void dz_pass_fill_in_memory(dz_pipeline *p, int l, int apply, const int *skip, int n_skip) {
    const int first = p->ws.block_first_span[l], last = p->ws.block_first_span[l + 1];
    if (p->res.on) {
        float *const pair[2] = {p->ws.wplus[0], p->ws.wminus[0]};
        dz_res_pass(p, first, last, pair, apply);
        return;
    }
    block_job job = {.p = p, .first = first, .apply = apply, .skip = skip, .n_skip = n_skip};
    dz_parallel_for_dynamic(last - first, fill_task, &job);
}
