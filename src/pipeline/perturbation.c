/* One perturbation's walk over the blocks, in the order the forward reads them: the
 * global block's rows first (the embedding), then each layer's working copies, then the
 * global block's rows again (the head). The pending update goes into each block on the
 * way: fused into a layer's fill, applied to the global block before its rows are read,
 * or, with a streamed global block, slice by slice on the I/O thread (rows read before a
 * slice is in get the update in their copy). */
#include "pipeline/internal.h"

dz_status dz_pipeline_begin(dz_pipeline *p, uint32_t draw, dz_error *err) {
    const int g = p->ws.n_blocks - 1;
    dz_status sst = dz_sz_prepare(p, 1, draw, err);
    if (sst != DZ_OK) return sst;
    p->draw = draw;
    p->rows.cache_valid = 0;
    p->rows.failed = 0;
    if (p->io.stream_globals) {
        p->io.gapply = p->upd.pending && !p->upd.applied[g];
        p->upd.applied[g] = 1;
    } else {
        dz_status st = dz_pending_update_blocks(p, g, g + 1, err);
        if (st != DZ_OK) return st;
    }
    dz_dev_prefetch(p, 0); /* streamed under a device cap, two slots: overlaps the embedding */
    return dz_stream_scheduled(p) ? dz_stream_prepare(p, 0, err) : DZ_OK; /* overlaps the embedding */
}

void dz_pipeline_set_eps(dz_pipeline *p, float eps) { p->z.eps = eps; }

/* Without a store: pair 0 filled with layer l, the pending update fused in. With a node's
 * ranks sharing the masters and the working copies, each fills its slice of the spans
 * (updating only those masters), between barriers. */
static dz_status fill_block(dz_pipeline *p, int l, dz_error *err) {
    const int apply = p->upd.pending && !p->upd.applied[l];
    dz_status st = dz_ws_node_barrier(p, err);
    if (st != DZ_OK) return st;
    dz_pass_fill_in_memory(p, l, apply, NULL, 0);
    if (apply) p->upd.applied[l] = 1;
    st = dz_dev_store_status(p, err); /* a disk store behind a device: its reads and writes */
    return st == DZ_OK ? dz_ws_node_barrier(p, err) : st;
}

/* Layer l's working copies of pair `pair` into w (NULL for the roles the layer lacks). */
static void layer_copies(const dz_pipeline *p, int l, int pair, const float *w[2][DZ_L_COUNT]) {
    const working_set *ws = &p->ws;
    for (int r = 0; r < DZ_L_COUNT; r++) {
        const int id = ws->layer_ids[l][r];
        w[0][r] = id < 0 ? NULL : ws->wplus[pair] + ws->tensor_off[id];
        w[1][r] = id < 0 ? NULL : ws->wminus[pair] + ws->tensor_off[id];
    }
}

dz_status dz_pipeline_layer(dz_pipeline *p, int l, const float *w[2][DZ_L_COUNT], dz_error *err) {
    dz_status st = dz_stream_scheduled(p) ? dz_stream_stage(p, l, err) : fill_block(p, l, err);
    if (st != DZ_OK) return st;
    layer_copies(p, l, dz_stream_scheduled(p) ? l % 2 : 0, w); /* a store's I/O thread filled pair l % 2 */
    return DZ_OK;
}

int dz_pipeline_pair_exact(const dz_pipeline *p) {
    return !dz_masters_bf16(p) && p->z.shape == DZ_PZ_DENSE && !p->io.store && !p->res.on && p->node.n_slices <= 1;
}

dz_status dz_pipeline_layer_pair(dz_pipeline *p, int l, const float *w[2][DZ_L_COUNT], dz_layer_pair_mats *mats,
                                 dz_error *err) {
    if (!dz_pipeline_pair_exact(p))
        return dz_fail(err, DZ_ERR_INVALID, "pipeline: a layer pair needs f32 masters in memory, dense z, one rank");
    const int apply = p->upd.pending && !p->upd.applied[l];
    int skip[DZ_PAIR_MATRICES], n_skip = 0;
    for (int r = 0; r < DZ_L_COUNT; r++) mats->theta[r] = NULL;
    for (int i = 0; i < DZ_PAIR_MATRICES; i++) {
        const int r = dz_pair_matrix_roles[i], id = p->ws.layer_ids[l][r];
        if (id < 0) continue;
        skip[n_skip++] = id;
        mats->theta[r] = dz_ws_theta_at(p, id, 0);
        mats->upd[r] = dz_pass_update_for(p, id);
        mats->pt[r] = (dz_gemm_perturb){.eps = p->z.eps, .seed = p->z.seed, .tensor = (uint32_t)id, .draw = p->draw,
                                        .i0 = 0, .dist = p->z.dist, .upd = apply ? &mats->upd[r] : NULL};
    }
    dz_pass_fill_in_memory(p, l, apply, skip, n_skip); /* the rest: norms and biases */
    if (apply) p->upd.applied[l] = 1; /* the matrices take it in the GEMMs that follow */
    layer_copies(p, l, 0, w);
    return DZ_OK;
}

dz_status dz_pipeline_end_layers(dz_pipeline *p, dz_error *err) {
    p->upd.pending = 0; /* every block has it now */
    dz_status st = p->io.store ? dz_store_wait(p->io.store, err) : DZ_OK;
    if (st != DZ_OK) return st;
    p->io.gapply = 0; /* the store holds the updated global block: the head reads it as is */
    return DZ_OK;
}
