/* A replica's fingerprint, records and checksum (replica.h). */
#include "federated/replica.h"

#include <math.h>

#include "core/hash.h"
#include "run/compute.h"
#include "run/seed_pool.h"

dz_status dz_fed_fingerprint(const dz_model *m, dz_zo_engine *e, uint64_t *out, dz_error *err) {
    const uint64_t h = dz_hash_u64(dz_compute_table_hash(dz_model_params(m)), (uint64_t)dz_model_dtype(m));
    uint64_t sum = 0;
    dz_status st = dz_zo_checksum_slice(e, 0, 1, &sum, err);
    *out = dz_hash_u64(h, sum);
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
