/* A replica's fingerprint, records and checksum (replica.h). */
#include "federated/replica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "run/seed_pool.h"
#include "run/trainer.h"

dz_status dz_fed_fingerprint(const dz_model *m, dz_zo_engine *e, uint64_t *out, dz_error *err) {
    const uint64_t h = dz_hash_u64(dz_trainer_table_hash(dz_model_params(m)), (uint64_t)dz_model_dtype(m));
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

/* Each tensor's bytes in table order (a tied tensor, sharing another's memory, twice: harmless). */
static size_t tensor_bytes(const dz_model *m, int id) {
    return (size_t)dz_param_numel(&dz_model_params(m)->params[id]) * dz_dtype_size(dz_model_dtype(m));
}

dz_status dz_fed_base_copy_make(dz_model *m, dz_fed_base_copy *out, dz_error *err) {
    memset(out, 0, sizeof *out);
    const dz_param_table *t = dz_model_params(m);
    size_t n = 0;
    for (int i = 0; i < t->count; i++) {
        if (!dz_model_tensor(m, i))
            return dz_fail(err, DZ_ERR_UNSUPPORTED, "seed pool: tensor %s is not in memory (a pool replica keeps its "
                           "weights in memory)", t->params[i].hf_name);
        n += tensor_bytes(m, i);
    }
    out->bytes = malloc(n ? n : 1);
    if (!out->bytes) return dz_fail(err, DZ_ERR_NOMEM, "seed pool: out of memory for a copy of the base (%zu bytes)", n);
    out->m = m, out->n = n;
    size_t at = 0;
    for (int i = 0; i < t->count; i++) {
        memcpy(out->bytes + at, dz_model_tensor(m, i), tensor_bytes(m, i));
        at += tensor_bytes(m, i);
    }
    return DZ_OK;
}

void dz_fed_base_copy_free(dz_fed_base_copy *b) {
    free(b->bytes);
    memset(b, 0, sizeof *b);
}

dz_status dz_fed_pool_rebuild(dz_zo_engine *e, const dz_fed_base_copy *base, const dz_seed_pool *pool, dz_error *err) {
    dz_status st = dz_zo_flush(e, err); /* nothing pending may land on the restored base */
    if (st != DZ_OK) return st;
    const dz_param_table *t = dz_model_params(base->m);
    size_t at = 0;
    for (int i = 0; i < t->count; i++) {
        memcpy(dz_model_tensor(base->m, i), base->bytes + at, tensor_bytes(base->m, i));
        at += tensor_bytes(base->m, i);
    }
    return dz_seed_pool_apply(pool, e, err);
}
