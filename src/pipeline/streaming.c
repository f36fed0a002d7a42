/* A disk store's schedule: the layer masters live in the store, and its I/O thread
 * prepares layer l+1 (read chunk by chunk, the pending update applied and written back,
 * w+/w- written into pair (l+1) % 2) while layer l computes on the other pair. A streamed
 * global block's update runs there too, one slice per layer. */
#include "core/util.h"
#include "pipeline/internal.h"

dz_status dz_pipeline_use_store(dz_pipeline *p, dz_store *s, dz_error *err) {
    working_set *ws = &p->ws;
    if (dz_store_dtype(s) != dz_model_dtype(p->m) || dz_store_n_blocks(s) != ws->n_blocks)
        return dz_fail(err, DZ_ERR_INVALID, "%s: the store does not hold this model's blocks", dz_store_path(s));
    if (p->node.n_slices > 1)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: a disk store cannot be shared by the ranks of a node yet");
    if (p->res.on) return dz_dev_use_store(p, s, err);
    const dz_param_table *t = dz_model_params(p->m);
    const int g = ws->n_blocks - 1;
    const int first_global =
        ws->block_first_span[g] < ws->block_first_span[g + 1] ? ws->spans[ws->block_first_span[g]].id : t->count - 1;
    p->io.stream_globals = dz_model_tensor(p->m, first_global) == NULL; /* the model let go of it */
    if (p->io.stream_globals && p->z.shape == DZ_PZ_HESSIAN) /* its rows' update runs on copies: H would move twice */
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --estimator hizoo keeps the global block (embeddings, head) in "
                       "memory: leave out --stream-globals, raise --max-resident so that it fits, or use --store ram");
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    if (!(ws->wplus[1] = dz_alloc(ws->block_floats * sizeof(float))) ||
        !(ws->wminus[1] = dz_alloc(ws->block_floats * sizeof(float))) ||
        !(p->io.chunk = dz_alloc((size_t)GCHUNK_SPANS * SPAN * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the second pair of working copies");
    if (p->io.stream_globals && !(p->io.gtheta = dz_alloc(p->rows.row_floats * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the global block's row buffer");
    p->bytes = dz_res_bytes(p->m, p->rows.row_floats, s, p->io.stream_globals) +
               dz_pipeline_shape_bytes_for(dz_model_params(p->m), &p->z);
    p->io.store = s;
    return DZ_OK;
}

/* I/O thread: layer block l read chunk by chunk, the pending update applied and written
 * back (if the caller queued it with one), and w+/w- written into pair l % 2. */
static dz_status prepare_cb(void *user, int l, void *buf, dz_error *err) {
    (void)buf;
    dz_pipeline *p = user;
    const dz_pass pass = {.apply = p->io.prep_apply[l % 2], .pair = l % 2};
    return dz_pass_chunks(p, l, p->ws.block_first_span[l], p->ws.block_first_span[l + 1], &pass, err);
}

/* I/O thread, streamed global block: slice k of n_layers of its spans (one per layer, so
 * the work spreads over the step) updated in the store. */
static dz_status update_global_slice_cb(void *user, int k, void *buf, dz_error *err) {
    (void)buf;
    dz_pipeline *p = user;
    const int g = p->ws.n_blocks - 1, slices = g > 0 ? g : 1;
    const int64_t first = p->ws.block_first_span[g], count = p->ws.block_first_span[g + 1] - first;
    const dz_pass pass = {.apply = 1, .pair = -1};
    return dz_pass_chunks(p, g, (int)(first + count * k / slices), (int)(first + count * (k + 1) / slices), &pass,
                          err);
}

dz_status dz_stream_prepare(dz_pipeline *p, int l, dz_error *err) {
    int *apply = &p->io.prep_apply[l % 2];
    *apply = p->upd.pending && !p->upd.applied[l];
    if (*apply) p->upd.applied[l] = 1;
    return dz_store_start_call(p->io.store, prepare_cb, p, l, NULL, err);
}

dz_status dz_stream_stage(dz_pipeline *p, int l, dz_error *err) {
    dz_status st = dz_store_wait(p->io.store, err);
    if (st == DZ_OK && l + 1 < p->ws.n_blocks - 1) st = dz_stream_prepare(p, l + 1, err);
    if (st == DZ_OK && p->io.gapply) st = dz_store_start_call(p->io.store, update_global_slice_cb, p, l, NULL, err);
    return st;
}
