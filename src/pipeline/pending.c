/* The pending update: the update of step t waits to be fused into step t+1's pass over
 * each block (pipeline/perturbation.c); outside a step (flush, replay, the global block
 * before its rows are read) it is applied here, block by block. Resident masters are
 * updated on the device; a flush then brings their host copy up to date. */
#include <string.h>

#include "pipeline/internal.h"

dz_status dz_pipeline_set_update(dz_pipeline *p, const dz_zo_update *u, dz_error *err) {
    if (u->q < 1 || u->q > DZ_PIPELINE_MAX_Q)
        return dz_fail(err, DZ_ERR_INVALID, "zo: an update of %d samples (1..%d)", u->q, DZ_PIPELINE_MAX_Q);
    pending_update *pu = &p->upd;
    pu->rule = *u;
    memcpy(pu->g, u->g, sizeof(float) * (size_t)u->q);
    pu->rule.g = pu->g;
    memset(pu->applied, 0, (size_t)p->ws.n_blocks);
    pu->pending = 1;
    p->res.stale = p->res.on; /* the host copy of resident masters lags from here */
    if (p->z.shape == DZ_PZ_HESSIAN) dz_hz_refactor(p); /* HiZOO-L: before any span reads H */
    return dz_sz_prepare(p, 0, 0, err);
}

/* The pending update of block b alone (no perturbation): in the store chunk by chunk,
 * the chunk's spans over the pool's threads; in memory this rank's slice of the spans. */
static dz_status update_block(dz_pipeline *p, int b, dz_error *err) {
    if (!p->upd.pending || p->upd.applied[b]) return DZ_OK;
    dz_status st = p->io.store ? dz_store_wait(p->io.store, err) : DZ_OK; /* nothing queued may still touch it */
    if (st != DZ_OK) return st;
    p->upd.applied[b] = 1; /* a pass that fails half way is not retried: its first chunks have the update */
    if (p->res.on || !dz_stream_in_store(p, b)) { /* a device reads and writes the store in its pass */
        dz_pass_update_in_memory(p, b);
        return dz_dev_store_status(p, err);
    }
    const dz_pass pass = {.apply = 1, .pair = -1, .parallel = 1};
    return dz_pass_chunks(p, b, p->ws.block_first_span[b], p->ws.block_first_span[b + 1], &pass, err);
}

/* With shared masters, between barriers: nobody reads old weights while slices are
 * written, nor new ones before every slice is in. */
dz_status dz_pending_update_blocks(dz_pipeline *p, int b0, int b1, dz_error *err) {
    int todo = 0;
    for (int b = b0; b < b1; b++) todo |= p->upd.pending && !p->upd.applied[b];
    if (!todo) return DZ_OK;
    dz_status st = dz_ws_node_barrier(p, err);
    for (int b = b0; st == DZ_OK && b < b1; b++) st = update_block(p, b, err);
    return st == DZ_OK ? dz_ws_node_barrier(p, err) : st;
}

dz_status dz_pipeline_apply_pending(dz_pipeline *p, dz_error *err) {
    dz_status st = dz_pending_update_blocks(p, 0, p->ws.n_blocks, err);
    if (st != DZ_OK) return st;
    p->upd.pending = 0;
    return p->io.store ? dz_store_wait(p->io.store, err) : DZ_OK;
}

dz_status dz_pipeline_flush(dz_pipeline *p, dz_error *err) {
    dz_status st = dz_pipeline_apply_pending(p, err);
    return st == DZ_OK ? dz_res_sync_host(p, err) : st; /* resident: the host copy is what readers read */
}
