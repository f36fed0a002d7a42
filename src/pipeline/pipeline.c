/* A pipeline's creation and release. */
#include <stdlib.h>

#include "core/util.h"
#include "pipeline/internal.h"

dz_status dz_pipeline_create(dz_model *m, const dz_forward *f, const dz_pipeline_perturbation *z, dz_pipeline **out,
                             dz_error *err) {
    *out = NULL;
    dz_pipeline *p = calloc(1, sizeof *p);
    if (!p) return dz_fail(err, DZ_ERR_NOMEM, "zo: out of memory");
    p->m = m;
    p->be = dz_forward_backend(f);
    p->z = *z;
    const int n_blocks = dz_model_config(m)->n_layers + 1;
    dz_status st = dz_ws_build(&p->ws, dz_model_params(m), n_blocks, z->shape == DZ_PZ_SPARSE, err);
    if (st == DZ_OK) st = dz_sz_create(p, err);
    if (st == DZ_OK) {
        p->rows.row_floats = dz_forward_row_floats(f);
        p->rows.minus_cache = dz_alloc(p->rows.row_floats * sizeof(float));
        p->upd.applied = calloc((size_t)n_blocks, 1);
        if (!p->rows.minus_cache || !p->upd.applied)
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
    dz_free(p->io.chunk);
    dz_free(p->io.gtheta);
    dz_free(p->rows.minus_cache);
    free(p->upd.applied);
    free(p);
}
