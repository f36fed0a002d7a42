/* A pipeline's creation and release, and what it keeps in memory: counted from the
 * parameter table and the forward's shape, so the resident check and the planner see it
 * before a pipeline exists (and dz_pipeline_bytes reports the same). */
#include <stdlib.h>

#include "core/util.h"
#include "pipeline/internal.h"

size_t dz_pipeline_bytes_for(const dz_param_table *t, size_t row_floats) {
    return (2 * dz_ws_max_layer_floats(t) + row_floats) * sizeof(float);
}

size_t dz_pipeline_store_bytes_for(const dz_param_table *t, dz_dtype dtype) {
    return 2 * dz_ws_max_layer_floats(t) * sizeof(float) + (size_t)GCHUNK_SPANS * SPAN * dz_dtype_size(dtype);
}

size_t dz_res_bytes(const dz_model *m, size_t row_floats, const dz_store *s, int stream_globals) {
    size_t bytes = dz_pipeline_bytes_for(dz_model_params(m), row_floats);
    if (!s) return bytes;
    const dz_dtype dt = dz_store_dtype(s); /* the model may not hold a tensor of its dtype yet */
    bytes += dz_pipeline_store_bytes_for(dz_model_params(m), dt);
    if (stream_globals) bytes += row_floats * dz_dtype_size(dt);
    return bytes;
}

size_t dz_pipeline_row_floats(const dz_model *m, const dz_forward *f) {
    const dz_param_table *t = dz_model_params(m);
    for (int i = 0; i < t->count; i++)
        if (t->params[i].block >= dz_model_config(m)->n_layers) return dz_forward_row_floats(f);
    return 0; /* no global block (an adapter): no perturbed rows to cache */
}

size_t dz_pipeline_planned_bytes(const dz_model *m, const dz_forward *f, const dz_store *s, int stream_globals) {
    return dz_res_bytes(m, dz_pipeline_row_floats(m, f), s, stream_globals);
}

size_t dz_pipeline_bytes(const dz_pipeline *p) { return p->bytes; }

dz_status dz_pipeline_create(dz_model *m, const dz_forward *f, const dz_pipeline_perturbation *z,
                             size_t max_device_bytes, dz_pipeline **out, dz_error *err) {
    *out = NULL;
    dz_pipeline *p = calloc(1, sizeof *p);
    if (!p) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    p->m = m;
    p->be = dz_forward_backend(f);
    p->z = *z;
    const int n_blocks = dz_model_config(m)->n_layers + 1;
    const int resident = !p->be->host_buffers; /* the masters go where the forward's ops can read them */
    dz_status st = dz_dev_choose(p, f, max_device_bytes, err);
    if (st == DZ_OK && resident) st = dz_res_create(p, err);
    if (st == DZ_OK)
        st = dz_ws_build(&p->ws, dz_model_params(m), n_blocks, z->shape == DZ_PZ_SPARSE, resident ? p->be : NULL, err);
    if (st == DZ_OK) st = dz_sz_create(p, err);
    if (st == DZ_OK) st = dz_hz_create(p, err);
    if (st == DZ_OK) {
        const size_t rf = p->rows.row_floats = dz_pipeline_row_floats(m, f);
        if (rf) p->rows.minus_cache = resident ? p->be->ops->alloc(p->be, rf * sizeof(float)) : dz_alloc(rf * sizeof(float));
        p->upd.applied = calloc((size_t)n_blocks, 1);
        if ((rf && !p->rows.minus_cache) || !p->upd.applied)
            st = dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate working buffers (%zu floats per block)",
                         p->ws.block_floats);
    }
    if (st != DZ_OK) {
        dz_pipeline_free(p);
        return st;
    }
    p->bytes = dz_res_bytes(m, p->rows.row_floats, NULL, 0) + dz_pipeline_shape_bytes_for(dz_model_params(m), z);
    *out = p;
    return DZ_OK;
}

void dz_pipeline_free(dz_pipeline *p) {
    if (!p) return;
    dz_ws_free(&p->ws);
    dz_sz_free(p);
    dz_hz_free(p);
    dz_free(p->io.chunk);
    dz_free(p->io.gtheta);
    if (p->res.on) p->be->ops->free(p->be, p->rows.minus_cache);
    else dz_free(p->rows.minus_cache);
    dz_res_free(p); /* lands and unpins what the staging buffers still hold */
    dz_free(p->res.staging);
    free(p->upd.applied);
    free(p);
}
