/* FedKSeed's seed pool (arXiv 2312.06353; docs/FEDERATED.md "K-seed pool"): a run whose
 * perturbations come only from K seeds, the draws 0..K-1 of the run seed, so its whole
 * state past the base model is K accumulated scalars.
 *
 * The seed log of such a run holds, per round, the q slots' g and then the q slots' seed
 * indices (as floats holding whole numbers): q' = 2q values a record; its header's
 * fingerprint text is "fedkseed K <rest>", which is how export knows to read it so.
 *
 * Accumulation, in log order, then slot order: for a slot with g != 0 and seed k,
 *     acc[k] = (float)((double)acc[k] + (double)lr * (double)g)
 * (the product of two floats is exact in double, so no FMA or evaluation order can change
 * it).
 *
 * The weights are a function of the K scalars alone, in fixed point so that order cannot
 * matter: with z_k(t, i) the run's perturbation of draw k (docs/ZO_RNG.md) and
 *     term_k(t, i) = llrint((double)acc[k] * (double)z_k(t, i) * (2^40 / q))   (an int64),
 *     D(t, i) = sum over k of term_k(t, i)                                     (exact),
 *     w(t, i) = (float)((double)base(t, i) - (double)D(t, i) * 2^-40),
 * the update -lr * g * z / q of plain rounds summed exactly at 2^-40 resolution. A replica
 * that follows the rounds adds term(new acc) - term(old acc) for the seeds a round changed;
 * one that joins adds the K terms at once; export does the same from the log: integer sums
 * are associative, so all of them hold bitwise the same D and the same weights. f32 master
 * weights only (a pool replica keeps the base, D and the weights in memory: 16 bytes a
 * parameter). */
#ifndef DZ_RUN_SEED_POOL_H
#define DZ_RUN_SEED_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/model.h"
#include "distzo/zo.h"

#define DZ_SEED_POOL_MAX (1u << 21) /* its state (4 bytes a seed) within a worker's 16 MB answer limit; indices travel as exact floats */
#define DZ_SEED_POOL_DEFAULT 4096u

typedef enum dz_seed_sampling { DZ_SEED_UNIFORM = 0, DZ_SEED_IMPORTANCE = 1 } dz_seed_sampling;

typedef struct dz_seed_pool {
    uint32_t k;        /* seeds in the pool */
    uint32_t q;        /* slots per round (the engine's samples per step) */
    float *acc;        /* [k] the accumulated lr * g of each seed */
    double *abs_sum;   /* [k] sum of |g| over the seed's contributions (importance sampling) */
    uint32_t *count;   /* [k] its contributions */
} dz_seed_pool;

dz_status dz_seed_pool_init(dz_seed_pool *p, uint32_t k, uint32_t q, dz_error *err);
void dz_seed_pool_free(dz_seed_pool *p);
/* Adds one record of a pool run: vals = the q g, then the q seed indices. A seed index
 * that is not a whole number in 0..k-1 is DZ_ERR_FORMAT. Non-finite or zero g add nothing. */
dz_status dz_seed_pool_add(dz_seed_pool *p, float lr, const float *vals, dz_error *err);
/* A model's weights kept equal to (base, pool) as above. */
typedef struct dz_seed_pool_weights {
    dz_model *m;          /* its tensors are written */
    uint64_t run_seed;
    int rademacher, rng_v2; /* z's distribution and ZO_RNG version (--perturbation, --rng) */
    uint32_t k, q;
    float *applied;       /* [k] the scalars D holds */
    float **base;         /* per tensor: the base weights */
    int64_t **d;          /* per tensor: D */
    float *z;             /* a chunk of z */
    int n_tensors;
} dz_seed_pool_weights;

/* m: f32 weights in memory, as loaded (the base); the pool's K and q. */
dz_status dz_seed_pool_weights_init(dz_seed_pool_weights *w, dz_model *m, uint64_t run_seed, int rademacher, int rng_v2,
                                    const dz_seed_pool *p, dz_error *err);
void dz_seed_pool_weights_free(dz_seed_pool_weights *w);
/* The model's weights := those of p's scalars (only the seeds whose scalar changed cost a
 * pass). Flush the ZO engine before (nothing pending may land on them). */
void dz_seed_pool_weights_sync(dz_seed_pool_weights *w, const dz_seed_pool *p);

/* FedKSeed-Pro's sampling probabilities into prob[k]: m_i = the seed's mean |g| (0 for a
 * seed without contributions), psi_i = (m_i - min m) / (max m - min m) (0 for all when
 * max = min), prob = softmax(psi). Uniform: 1/k each. */
void dz_seed_pool_probabilities(const dz_seed_pool *p, dz_seed_sampling mode, double *prob);
/* The seeds of round `round`'s q slots: slot j draws u = (splitmix64 of the state
 * hash(hash(run_seed, round), j), top 53 bits) in [0, 1), and takes the first seed whose
 * cumulative probability (summed in seed order, in double) exceeds u (the last seed if none
 * does); uniform: floor(u * k). prob: k doubles of scratch. */
void dz_seed_pool_draw(const dz_seed_pool *p, dz_seed_sampling mode, uint64_t run_seed, uint32_t round, double *prob,
                       uint32_t *seeds);

/* The seed-log header's fingerprint text of a pool run, and its reading: K, or 0 for a
 * log that is not a pool run's. */
void dz_seed_pool_log_tag(uint32_t k, const char *rest, uint8_t fingerprint[64]);
uint32_t dz_seed_pool_log_k(const uint8_t fingerprint[64]);

const char *dz_seed_sampling_name(dz_seed_sampling s);
/* 0, or -1 for a name that is neither "uniform" nor "importance". */
int dz_seed_sampling_parse(const char *name, dz_seed_sampling *s);

#endif
