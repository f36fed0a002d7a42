/* The weight sources the forward reads the global block through (token and position rows,
 * the final norm, head chunks): perturbed for a step, the masters as they are for
 * evaluation. Resident, the perturbed rows are computed on the device from the masters
 * there, into the forward's buffers (backend_rows); the masters' source is their host copy.
 * rows() has no error path: a store read that fails hands the forward zeros and is
 * recorded here for dz_pipeline_rows_status. */
#include <string.h>

#include "core/threads.h"
#include "pipeline/internal.h"

void dz_rows_record(dz_pipeline *p, const dz_error *err) {
    if (!p->rows.failed) p->rows.err = *err;
    p->rows.failed = 1;
}

dz_status dz_pipeline_rows_status(dz_pipeline *p, dz_error *err) {
    if (!p->rows.failed) return DZ_OK;
    p->rows.failed = 0;
    return dz_fail(err, p->rows.err.code, "%s", p->rows.err.msg);
}

/* Theta for rows of a global tensor starting at element i0: in place, or (streamed) read
 * from the store into gtheta; NULL after a failed read (recorded). */
static void *global_theta(dz_pipeline *p, int id, int64_t row0, int64_t nrows, uint64_t i0) {
    if (!p->io.stream_globals) return dz_ws_theta_at(p, id, i0);
    dz_error err = {0};
    if (dz_store_read_rows(p->io.store, id, row0, nrows, p->io.gtheta, &err) == DZ_OK) return p->io.gtheta;
    dz_rows_record(p, &err);
    return NULL;
}

/* Elements [0, n) of global rows as tasks of `piece` elements (whole rows under SPARSE). */
typedef struct rows_job {
    const dz_pipeline *p;
    int id, apply;
    uint64_t i0;
    size_t n, esz, piece;
    char *th;
    float *wp, *wm;
} rows_job;

static void rows_task(void *ctx, int k, int thread) {
    const rows_job *r = ctx;
    const size_t a = (size_t)k * r->piece, len = r->n - a < r->piece ? r->n - a : r->piece;
    dz_pass_perturb_span(r->p, r->id, r->i0 + a, len, r->th + a * r->esz, r->wp + a, r->wm + a, r->apply);
}

/* n floats from src to dst: host memory, or resident, buffers of the backend (one row of
 * n columns through its copy op). */
static void copy_floats(const dz_pipeline *p, float *dst, const float *src, size_t n) {
    if (p->res.on) p->be->ops->copy_rows(p->be, dst, NULL, src, NULL, 1, (int)n);
    else memcpy(dst, src, n * sizeof(float));
}

/* The cached -eps rows if they are these rows of an odd stream, else NULL. */
static const float *perturbed_view(const void *self, int stream, int id, int64_t row0, int64_t nrows) {
    const rows_state *rs = &((const dz_pipeline *)self)->rows;
    const int hit = (stream & 1) && rs->cache_valid && rs->cache_id == id && rs->cache_row0 == row0 &&
                    rs->cache_nrows == nrows;
    return hit ? rs->minus_cache : NULL;
}

/* Rows of a global tensor for even streams (theta + eps z) or odd ones (theta - eps z).
 * Both are computed together: an even stream's draw keeps the -eps rows in the cache
 * (until other rows are drawn), which serves the odd streams' requests (a view, or here
 * a copy). */
static const float *perturbed_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    dz_pipeline *p = (dz_pipeline *)self;
    rows_state *rs = &p->rows;
    const int64_t cols = dz_model_params(p->m)->params[id].cols;
    const uint64_t i0 = (uint64_t)(row0 * cols);
    const size_t n = (size_t)(nrows * cols);
    const float *cached = perturbed_view(self, stream, id, row0, nrows);
    if (cached) {
        copy_floats(p, scratch, cached, n);
        return scratch;
    }
    stream &= 1; /* even streams see +eps, odd ones -eps */
    float *wp = stream == 0 ? scratch : rs->minus_cache, *wm = stream == 0 ? rs->minus_cache : scratch;
    char *th = global_theta(p, id, row0, nrows, i0);
    if (!th) { /* the caller sees zeros; the step reports the error */
        memset(scratch, 0, n * sizeof(float)); /* a store: never resident */
        rs->cache_valid = 0;
        return scratch;
    }
    const int apply = p->io.gapply; /* a streamed global block's update is in the copy, not yet in the store */
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    if (n < PARALLEL_ROWS_MIN || p->res.on) { /* resident: one op, from this thread */
        dz_pass_perturb_span(p, id, i0, n, th, wp, wm, apply);
    } else {
        const size_t piece = dz_ws_span_elems(&dz_model_params(p->m)->params[id], p->z.shape == DZ_PZ_SPARSE);
        rows_job job = {.p = p, .id = id, .apply = apply, .i0 = i0, .n = n, .esz = esz, .piece = piece, .th = th,
                        .wp = wp, .wm = wm};
        dz_parallel_for((int)((n + piece - 1) / piece), rows_task, &job);
    }
    rs->cache_valid = stream == 0; /* an odd stream's draw used the cache for the +eps half */
    rs->cache_id = id;
    rs->cache_row0 = row0;
    rs->cache_nrows = nrows;
    return scratch;
}

dz_weight_source dz_pipeline_perturbed_source(dz_pipeline *p) {
    return (dz_weight_source){.rows = perturbed_rows, .self = p, .view = perturbed_view, .backend_rows = p->res.on};
}

/* The masters as evaluation sees them: resident tensors in place, the others read from
 * the store. */
static const float *master_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    dz_pipeline *p = (dz_pipeline *)self; /* created mutable; only the error record changes */
    const dz_weight_source own = dz_model_weights(p->m);
    if (dz_model_tensor(p->m, id)) return own.rows(own.self, stream, id, row0, nrows, scratch);
    const size_t n = (size_t)(nrows * dz_model_params(p->m)->params[id].cols);
    const int bf16 = dz_masters_bf16(p);
    void *raw = bf16 ? (void *)((uint16_t *)(void *)scratch + n) : (void *)scratch; /* bf16 lands in the upper half */
    dz_error err = {0};
    if (dz_store_read_rows(p->io.store, id, row0, nrows, raw, &err) != DZ_OK) {
        dz_rows_record(p, &err);
        memset(scratch, 0, n * sizeof(float));
        return scratch;
    }
    if (bf16) /* widening in place, front to back: each source element is read before it is overwritten */
        for (size_t i = 0; i < n; i++) scratch[i] = dz_bf16_to_f32(((const uint16_t *)raw)[i]);
    return scratch;
}

dz_weight_source dz_pipeline_master_source(const dz_pipeline *p) {
    if (!p->io.store) return dz_model_weights(p->m);
    return (dz_weight_source){.rows = master_rows, .self = p};
}
