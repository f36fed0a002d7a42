/* A replica's fingerprint, records and checksum (replica.h). */
#include "federated/replica.h"

#include <math.h>
#include <stdlib.h>

#include "core/hash.h"
#include "run/compute.h"
#include "run/seed_pool.h"

/* An adapter's read-only base: its table and its weights as f32 rows, a few rows at a time. */
static dz_status base_hash(const dz_model *base, uint64_t *h, dz_error *err) {
    const dz_param_table *t = dz_model_params(base);
    const dz_weight_source src = dz_model_weights(base);
    enum { CHUNK_FLOATS = 1 << 20 };
    *h = dz_compute_table_hash(t);
    for (int i = 0; i < t->count; i++) {
        const int64_t cols = t->params[i].cols, rows = t->params[i].rows;
        const int64_t step = cols < CHUNK_FLOATS ? CHUNK_FLOATS / cols : 1;
        float *scratch = malloc((size_t)(step * cols) * sizeof(float));
        if (!scratch) return dz_fail(err, DZ_ERR_NOMEM, "fingerprint: out of memory");
        for (int64_t r = 0; r < rows; r += step) {
            const int64_t n = rows - r < step ? rows - r : step;
            *h = dz_hash_bytes(*h, src.rows(src.self, 0, i, r, n, scratch), (size_t)(n * cols) * sizeof(float));
        }
        free(scratch);
    }
    return DZ_OK;
}

dz_status dz_fed_fingerprint(dz_zo_setup *s, uint64_t *out, dz_error *err) {
    const dz_model *m = dz_setup_model(s);
    uint64_t h = dz_hash_u64(dz_compute_table_hash(dz_model_params(m)), (uint64_t)dz_model_dtype(m)), sum = 0;
    dz_status st = dz_zo_checksum_slice(dz_setup_zo_engine(s), 0, 1, &sum, err);
    h = dz_hash_u64(h, sum);
    uint64_t base = 0;
    if (st == DZ_OK && dz_model_lora(m)) st = base_hash(dz_setup_base_model(s), &base, err);
    *out = dz_model_lora(m) ? dz_hash_u64(h, base) : h; /* a full run's as before */
    return st;
}

dz_status dz_fed_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err) {
    if (!isfinite(g[0])) return DZ_OK; /* a skipped step, as in export and resume */
    return dz_zo_apply(e, step, lr, g, err);
}

dz_status dz_fed_checksum(dz_zo_engine *e, uint64_t *out, dz_error *err) {
    *out = 0;
    return dz_zo_checksum_slice(e, 0, 1, out, err);
}

dz_status dz_fed_pool_sync(dz_zo_engine *e, dz_seed_pool_weights *w, const dz_seed_pool *pool, dz_error *err) {
    dz_status st = dz_zo_flush(e, err); /* nothing pending may land on the weights written */
    if (st == DZ_OK) dz_seed_pool_weights_sync(w, pool);
    return st;
}
