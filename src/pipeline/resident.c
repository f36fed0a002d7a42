/* Resident mode: the masters on the forward's backend when its buffers are not host memory
 * (a GPU; --backend ref, whose buffers host code cannot touch) and there is no disk store.
 * Every tensor's masters are uploaded once, into a buffer of the backend, when the pipeline
 * is created; the working copies and the -eps row cache are backend buffers too. From then
 * on every ZO op (the fused update-then-perturb, the update) gets backend buffers, so the
 * update is applied on the device and nothing crosses per step but the step's scalars.
 * The model's own tensors stay as the host copy: dz_pipeline_flush brings it up to date
 * (one download of every tensor, only when an update landed since the last one), before
 * evaluation, checkpoints, checksums and the end of a run read it.
 *
 * A device runs ops in call order, so a pass here is one op per tensor (its spans merged:
 * z depends on the element index alone, so the bits are those of any slicing), issued from
 * the calling thread, never from the pool's threads. */
#include <stdlib.h>

#include "pipeline/internal.h"

size_t dz_res_tensor_bytes(const dz_pipeline *p, int id) {
    return (size_t)dz_param_numel(&dz_model_params(p->m)->params[id]) * dz_dtype_size(dz_model_dtype(p->m));
}

int dz_res_streamed(const dz_pipeline *p, int id) {
    return p->res.stream && dz_model_params(p->m)->params[id].block < dz_model_config(p->m)->n_layers;
}

/* What resident mode does not do yet, refused before anything is uploaded. */
static dz_status resident_supported(const dz_pipeline *p, dz_error *err) {
    const dz_param_table *t = dz_model_params(p->m);
    for (int id = 0; id < t->count; id++)
        if (!dz_model_tensor(p->m, id) && !dz_res_streamed(p, id))
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --backend %s keeps the global block in its own memory, "
                           "uploaded from host memory, but %s stays in the disk store (--stream-globals, or "
                           "--max-resident too small for it): streaming the global block from the store to a device "
                           "is not built; leave out --stream-globals, raise --max-resident, or use --store ram", p->be->name, t->params[id].hf_name);
    if (p->z.shape != DZ_PZ_DENSE)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --estimator %s computes its z on the host; --backend %s keeps "
                       "the masters in its own memory: use --estimator mezo (or --backend cpu)",
                       p->z.shape == DZ_PZ_SPARSE ? "sparse" : p->z.shape == DZ_PZ_LOWRANK ? "lozo" : "hizoo", p->be->name);
    return DZ_OK;
}

dz_status dz_res_create(dz_pipeline *p, dz_error *err) {
    const dz_param_table *t = dz_model_params(p->m);
    dz_status st = resident_supported(p, err);
    if (st != DZ_OK) return st;
    p->res.theta = calloc((size_t)t->count, sizeof *p->res.theta);
    if (!p->res.theta) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    p->res.on = 1;
    for (int s = 0; p->res.stream && s < p->res.slots; s++) {
        const size_t n = dz_ws_max_layer_floats(t) * dz_dtype_size(dz_model_dtype(p->m));
        p->res.slot[s] = p->be->ops->alloc(p->be, n);
        p->res.held[s] = -1;
        if (!p->res.slot[s])
            return dz_fail(err, DZ_ERR_NOMEM, "zo: --backend %s: no memory for a layer's masters (%zu bytes)",
                           p->be->name, n);
    }
    if (p->res.slots == 2) dz_dev_pin(p);
    for (int id = 0; id < t->count; id++) {
        if (dz_res_streamed(p, id)) continue; /* theta points into the slot during a pass */
        const size_t n = dz_res_tensor_bytes(p, id);
        p->res.theta[id] = p->be->ops->alloc(p->be, n);
        if (!p->res.theta[id])
            return dz_fail(err, DZ_ERR_NOMEM, "zo: --backend %s: no memory for the masters of %s (%zu bytes)",
                           p->be->name, t->params[id].hf_name, n);
        p->be->ops->upload(p->be, p->res.theta[id], dz_model_tensor(p->m, id), n);
    }
    return DZ_OK;
}

void dz_res_free(dz_pipeline *p) {
    if (!p->res.theta) return;
    if (p->io.store && p->res.slots == 2) dz_dev_store_settle(p); /* a walk cut short: its write-backs, stored */
    dz_dev_drain(p, 1); /* the write-backs land and the host masters are unpinned before anyone frees them */
    for (int id = 0; id < dz_model_params(p->m)->count; id++)
        if (!dz_res_streamed(p, id)) p->be->ops->free(p->be, p->res.theta[id]);
    for (int s = 0; s < 2; s++) {
        if (p->res.slot[s]) p->be->ops->free(p->be, p->res.slot[s]);
        p->res.slot[s] = NULL;
    }
    free(p->res.theta);
    p->res.theta = NULL;
}

int dz_res_run(const dz_pipeline *p, int a, int last, span *whole) {
    const span *sp = p->ws.spans;
    int b = a + 1;
    while (b < last && sp[b].id == sp[a].id) b++;
    *whole = (span){sp[a].id, sp[a].i0, (size_t)(sp[b - 1].i0 - sp[a].i0) + sp[b - 1].n};
    return b;
}

void dz_res_run_op(dz_pipeline *p, const span *whole, float *const pair[2], int apply) {
    void *th = dz_ws_theta_at(p, whole->id, whole->i0);
    if (!pair) {
        dz_pass_update_span(p, whole, th);
        return;
    }
    const size_t off = p->ws.tensor_off[whole->id] + whole->i0;
    dz_pass_perturb_span(p, whole->id, whole->i0, whole->n, th, pair[0] + off, pair[1] + off, apply);
}

/* Spans [first, last) of a block, one op per run of spans of one tensor: the pending
 * update (pair NULL) or, with a pair, the fill of w+/w- at the current draw. */
void dz_res_pass(dz_pipeline *p, int first, int last, float *const pair[2], int apply) {
    const int id0 = first < last ? p->ws.spans[first].id : -1;
    if (id0 >= 0 && dz_dev_lanes(p) && dz_res_streamed(p, id0)) { /* a streamed layer, whole */
        dz_dev_overlapped_pass(p, dz_model_params(p->m)->params[id0].block, pair, apply);
        return;
    }
    const int staged = id0 >= 0 && p->res.staging && dz_res_streamed(p, id0); /* a layer in the disk store */
    const int l = id0 >= 0 ? dz_model_params(p->m)->params[id0].block : -1;
    if (staged) dz_dev_store_read(p, l);
    for (int a = first, b; a < last; a = b) {
        span whole;
        b = dz_res_run(p, a, last, &whole);
        const int streamed = dz_res_streamed(p, whole.id);
        if (streamed) dz_dev_stream_in(p, whole.id, whole.i0, whole.n);
        dz_res_run_op(p, &whole, pair, apply);
        if (streamed && (!pair || apply)) dz_dev_stream_out(p, whole.id, whole.i0, whole.n);
    }
    if (staged && (!pair || apply)) dz_dev_store_write(p, l);
}
