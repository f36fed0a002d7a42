/* The working set: the model's tensors cut into spans, grouped by block, and the pair of
 * fp32 working copies (w+, w-) a layer block is perturbed into; this rank's own, or one
 * pair per node that the node's ranks fill slice by slice. */
#include <stdlib.h>

#include "core/util.h"
#include "pipeline/internal.h"

/* The number of layer blocks: a model's table ends with the global block (it holds the
 * token embedding), an adapter's has layer blocks only (LoRA's A and B, a prefix's K and V),
 * so a 1-layer adapter's one block is a layer, not the global block. */
static int layer_blocks(const dz_param_table *t) {
    int last = -1, global = 0;
    for (int i = 0; i < t->count; i++)
        if (t->params[i].block > last) last = t->params[i].block;
    for (int i = 0; i < t->count; i++)
        if (t->params[i].block == last && t->params[i].kind == DZ_PARAM_EMBEDDING) global = 1;
    return global ? last : last + 1;
}

size_t dz_ws_max_layer_floats(const dz_param_table *t) {
    const int n_layers = layer_blocks(t);
    size_t best = 0;
    for (int b = 0; b < n_layers; b++) {
        size_t n = 0;
        for (int i = 0; i < t->count; i++)
            if (t->params[i].block == b) n += (size_t)dz_param_numel(&t->params[i]);
        best = n > best ? n : best;
    }
    return best;
}

size_t dz_ws_span_elems(const dz_param *t, int whole_rows) {
    if (!whole_rows || t->rows <= 1 || t->cols > SPAN) return SPAN;
    return (size_t)(SPAN / t->cols * t->cols);
}

/* Working copies: host memory, or (resident) buffers of the backend. */
static float *work_alloc(const working_set *ws, size_t floats) {
    return ws->dev ? ws->dev->ops->alloc(ws->dev, floats * sizeof(float)) : dz_alloc(floats * sizeof(float));
}

static void work_free(const working_set *ws, float *w) {
    if (ws->dev) ws->dev->ops->free(ws->dev, w);
    else dz_free(w);
}

dz_status dz_ws_build(working_set *ws, const dz_param_table *t, int n_blocks, int whole_rows, const dz_backend *dev,
                      dz_error *err) {
    ws->n_blocks = n_blocks;
    ws->dev = dev;
    size_t count = 0;
    for (int i = 0; i < t->count; i++) {
        const size_t step = dz_ws_span_elems(&t->params[i], whole_rows);
        count += ((size_t)dz_param_numel(&t->params[i]) + step - 1) / step;
    }
    ws->spans = malloc(sizeof *ws->spans * (count ? count : 1));
    if (n_blocks < 1) return dz_fail(err, DZ_ERR_INVALID, "zo: a model without blocks");
    ws->block_first_span = calloc((size_t)n_blocks + 1, sizeof *ws->block_first_span);
    ws->tensor_off = calloc((size_t)t->count, sizeof *ws->tensor_off);
    if (!ws->spans || !ws->block_first_span || !ws->tensor_off) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    size_t k = 0;
    for (int b = 0; b < n_blocks; b++) { /* the table is ordered by block */
        ws->block_first_span[b] = (int)k;
        size_t off = 0;
        for (int i = 0; i < t->count; i++) {
            if (t->params[i].block != b) continue;
            const size_t n = (size_t)dz_param_numel(&t->params[i]);
            ws->tensor_off[i] = off;
            off += n;
            const size_t step = dz_ws_span_elems(&t->params[i], whole_rows);
            for (size_t a = 0; a < n; a += step) ws->spans[k++] = (span){i, a, n - a < step ? n - a : step};
        }
    }
    ws->block_first_span[n_blocks] = (int)k;
    ws->layer_ids = malloc(sizeof *ws->layer_ids * (size_t)n_blocks);
    if (!ws->layer_ids) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    for (int l = 0; l < n_blocks - 1; l++)
        for (int r = 0; r < DZ_L_COUNT; r++) ws->layer_ids[l][r] = dz_param_find(t, l, r);
    ws->block_floats = dz_ws_max_layer_floats(t);
    ws->wplus[0] = work_alloc(ws, ws->block_floats);
    ws->wminus[0] = work_alloc(ws, ws->block_floats);
    ws->own_work = 1;
    if (!ws->wplus[0] || !ws->wminus[0])
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate working buffers (%zu floats per block)",
                       ws->block_floats);
    return DZ_OK;
}

void dz_ws_free(working_set *ws) {
    free(ws->spans);
    free(ws->block_first_span);
    free(ws->tensor_off);
    free(ws->layer_ids);
    if (ws->own_work) {
        work_free(ws, ws->wplus[0]);
        work_free(ws, ws->wminus[0]);
    }
    dz_free(ws->wplus[1]); /* a store's second pair: never resident */
    dz_free(ws->wminus[1]);
}

void *dz_ws_host_at(const dz_pipeline *p, int id, uint64_t i0) {
    const size_t at = i0 * dz_dtype_size(dz_model_dtype(p->m));
    void *t = dz_model_tensor(p->m, id);
    if (!t && p->res.staging) /* a disk store behind a device: the layer as staged */
        return p->res.staging + dz_store_tensor_offset_in_block(p->io.store, id) + at;
    return (char *)t + at;
}

void *dz_ws_theta_at(const dz_pipeline *p, int id, uint64_t i0) {
    if (!p->res.on) return dz_ws_host_at(p, id, i0);
    return (char *)p->res.theta[id] + i0 * dz_dtype_size(dz_model_dtype(p->m));
}

/* With masters shared by a node's ranks, span k is this rank's when k mod n_slices is its
 * slice. */
int dz_ws_my_span(const dz_pipeline *p, int k) {
    return p->node.n_slices <= 1 || k % p->node.n_slices == p->node.slice;
}

dz_status dz_ws_node_barrier(dz_pipeline *p, dz_error *err) {
    return p->node.n_slices > 1 ? p->node.barrier(p->node.ctx, err) : DZ_OK;
}

dz_status dz_pipeline_share_node(dz_pipeline *p, const dz_pipeline_node *node, dz_error *err) {
    if (node->n_slices <= 1) return DZ_OK;
    if (!node->barrier || node->slice < 0 || node->slice >= node->n_slices)
        return dz_fail(err, DZ_ERR_INVALID, "zo: sliced updates need a barrier and a slice in 0..%d",
                       node->n_slices - 1);
    if (p->io.store)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: a disk store cannot be shared by the ranks of a node yet");
    if (p->z.shape == DZ_PZ_HESSIAN)
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --estimator hizoo keeps the curvature of every parameter on "
                       "every rank, not shared by a node's ranks: give each rank its own replica (--node-size 1)");
    if (p->res.on) return dz_dev_share_node(p, node, err); /* each rank's device its own copy */
    if (!node->work) return dz_fail(err, DZ_ERR_INVALID, "zo: sliced fills need working buffers shared by the node");
    p->node = (node_share){
        .slice = node->slice, .n_slices = node->n_slices, .barrier = node->barrier, .ctx = node->ctx};
    working_set *ws = &p->ws;
    if (ws->own_work) { /* the node's one pair replaces this rank's own */
        dz_free(ws->wplus[0]);
        dz_free(ws->wminus[0]);
        ws->own_work = 0;
        p->bytes -= 2 * ws->block_floats * sizeof(float);
    }
    ws->wplus[0] = node->work, ws->wminus[0] = node->work + ws->block_floats;
    return DZ_OK;
}

size_t dz_pipeline_block_floats(const dz_pipeline *p) { return p->ws.block_floats; }
