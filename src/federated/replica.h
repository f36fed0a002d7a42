/* What the coordinator and every worker do alike to a replica of the weights: fingerprint
 * the base model, apply the run's records, checksum the result. */
#ifndef DZ_FEDERATED_REPLICA_H
#define DZ_FEDERATED_REPLICA_H

#include <stdint.h>

#include "distzo/model.h"
#include "distzo/setup.h"
#include "distzo/zo.h"

/* The replica's start: the trained model's tensor table (names, shapes), master dtype and
 * a checksum of every byte of its weights (dz_zo_checksum_slice); under an adapter (--peft)
 * that is the adapter's, and the read-only base's table and every weight (read as f32
 * rows, so a base kept quantized and one dequantized at load agree) join it, since a
 * LoRA's start (A from the seed, B = 0) says nothing of the base. Call before any record
 * is applied. */
dz_status dz_fed_fingerprint(dz_zo_setup *s, uint64_t *out, dz_error *err);
/* One record of the run (a round): bitwise what every replica does with it. */
dz_status dz_fed_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err);
/* The replica's checksum (what the coordinator sends with each round). */
dz_status dz_fed_checksum(dz_zo_engine *e, uint64_t *out, dz_error *err);

struct dz_seed_pool;
struct dz_seed_pool_weights;
/* A K-seed pool replica's weights := those of the pool's scalars (run/seed_pool.h). */
dz_status dz_fed_pool_sync(dz_zo_engine *e, struct dz_seed_pool_weights *w, const struct dz_seed_pool *pool,
                           dz_error *err);

#endif
