/* What training keeps in memory (the resident global block, the forward's buffers, the
 * pipeline's and the estimator's) and the plan that fits it under --max-resident, before
 * the engine exists; the planner (src/parallel/plan.c) uses the same counts. */
#include "distzo/log.h"
#include "zo/internal.h"

size_t dz_zo_engine_bytes_for(const dz_param_table *t, size_t row_floats, size_t rows) {
    return dz_pipeline_bytes_for(t, row_floats) + dz_zo_logprob_bytes(rows);
}

size_t dz_zo_estimator_bytes_for(const dz_param_table *t, const dz_zo_params *p) {
    const dz_pipeline_perturbation z = dz_zo_perturbation_of(p);
    return dz_pipeline_shape_bytes_for(t, &z);
}

size_t dz_zo_store_bytes_for(const dz_param_table *t, dz_dtype dtype) { return dz_pipeline_store_bytes_for(t, dtype); }

dz_zo_resident dz_zo_resident_bytes(const dz_model *m, const dz_forward *f, const struct dz_store *s,
                                    const dz_zo_params *p, int stream_globals) {
    const int g = dz_model_config(m)->n_layers;
    const size_t rows = (size_t)dz_forward_max_batch(f) * dz_forward_max_seq(f);
    return (dz_zo_resident){.weights = stream_globals ? 0 : dz_store_block_bytes(s, g),
                            .activations = dz_forward_bytes(f),
                            .buffers = dz_pipeline_planned_bytes(m, f, s, stream_globals) + dz_zo_logprob_bytes(rows),
                            .estimator = p ? dz_zo_estimator_bytes_for(dz_model_params(m), p) : 0};
}

static size_t total(dz_zo_resident r) { return r.weights + r.activations + r.buffers + r.estimator; }

dz_status dz_zo_plan_resident(const dz_model *m, const dz_forward *f, const struct dz_store *s, const dz_zo_params *p,
                              int cap_mb, int *stream_globals, dz_error *err) {
    const size_t cap = (size_t)cap_mb << 20;
    if (cap_mb <= 0) return DZ_OK;
    if (!*stream_globals && total(dz_zo_resident_bytes(m, f, s, p, 0)) <= cap) return DZ_OK;
    const dz_zo_resident r = dz_zo_resident_bytes(m, f, s, p, 1); /* the least a store allows */
    if (total(r) <= cap) {
        if (!*stream_globals)
            dz_log(DZ_LOG_INFO, "--max-resident %d MB: the global block (%.1f MB) stays in the store too", cap_mb,
                   dz_store_block_bytes(s, dz_model_config(m)->n_layers) / 1048576.0);
        *stream_globals = 1;
        return DZ_OK;
    }
    return dz_fail(err, DZ_ERR_INVALID,
                   "--max-resident %d MB cannot hold what training keeps in memory: %.1f MB even with every weight in "
                   "the store (activations %.1f MB, two pairs of working copies, chunk and row buffers %.1f MB, the "
                   "estimator's state %.1f MB)",
                   cap_mb, total(r) / 1048576.0, r.activations / 1048576.0, r.buffers / 1048576.0,
                   r.estimator / 1048576.0);
}

dz_status dz_zo_store_residency(dz_model *m, const dz_forward *f, const struct dz_store *s, const dz_zo_params *p,
                                int cap_mb, int stream_globals, dz_error *err) {
    dz_status st = dz_zo_plan_resident(m, f, s, p, cap_mb, &stream_globals, err);
    if (st != DZ_OK) return st;
    return dz_model_keep_for_store(m, !stream_globals, dz_store_dtype(s), err);
}
