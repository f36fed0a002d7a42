/* What the pipeline keeps in memory, counted from the parameter table and the forward's
 * shape, so the resident check and the planner see it before a pipeline exists (and
 * dz_pipeline_bytes reports the same). */
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

size_t dz_pipeline_planned_bytes(const dz_model *m, const dz_forward *f, const dz_store *s, int stream_globals) {
    return dz_res_bytes(m, dz_forward_row_floats(f), s, stream_globals);
}

size_t dz_pipeline_bytes(const dz_pipeline *p) { return p->bytes; }
