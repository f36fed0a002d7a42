/* What the coordinator and every worker do alike to a replica of the weights: fingerprint
 * the base model, apply the run's records, checksum the result. */
#ifndef DZ_FEDERATED_REPLICA_H
#define DZ_FEDERATED_REPLICA_H

#include <stdint.h>

#include "distzo/model.h"
#include "distzo/zo.h"

/* The base model: its tensor table (names, shapes), master dtype and a checksum of every
 * byte of its weights (dz_zo_checksum_slice). Call before any record is applied. */
dz_status dz_fed_fingerprint(const dz_model *m, dz_zo_engine *e, uint64_t *out, dz_error *err);
/* One record of the run (a round): bitwise what every replica does with it. */
dz_status dz_fed_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err);
/* The replica's checksum (what the coordinator sends with each round). */
dz_status dz_fed_checksum(dz_zo_engine *e, uint64_t *out, dz_error *err);

/* A K-seed pool replica (run/seed_pool.h): its weights are always the base with the
 * pool's scalars applied, so it keeps a copy of the base model's bytes and rebuilds from
 * it after each round (bitwise what `distzo export` does once). */
typedef struct dz_fed_base_copy {
    dz_model *m;
    unsigned char *bytes;
    size_t n;
} dz_fed_base_copy;
/* The model's weights as they are now (call before any record is applied). */
dz_status dz_fed_base_copy_make(dz_model *m, dz_fed_base_copy *out, dz_error *err);
void dz_fed_base_copy_free(dz_fed_base_copy *b);
struct dz_seed_pool;
/* The replica's weights := the base with the pool applied. */
dz_status dz_fed_pool_rebuild(dz_zo_engine *e, const dz_fed_base_copy *base, const struct dz_seed_pool *pool,
                              dz_error *err);

#endif
