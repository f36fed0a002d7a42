/* The ZO engine's private state, shared by src/zo/engine.c (its lifetime and the calls
 * outside a step) and src/zo/estimator.c (the SPSA step). The block pipeline
 * (src/pipeline) holds the weights' side: working copies, store, pending update. */
#ifndef DZ_ZO_INTERNAL_H
#define DZ_ZO_INTERNAL_H

#include "distzo/zo.h"
#include "pipeline/pipeline.h"

struct dz_zo_engine {
    dz_model *m;
    dz_forward *f;
    dz_zo_params p;
    dz_pipeline *pipe;
    dz_zo_parallel par;    /* signs this rank computes, the sum over ranks (slices: the pipeline's) */
    float *lp[2], *plp[2]; /* log-probs of each sign: continuation rows, prompt rows */
    double *ex_loss;       /* per-example (loss, weight) pairs of a step: [q][2 signs][n_global][2] */
    size_t ex_cap;
    int *dec_tokens[2];    /* decoding: each sign's live sequences packed [live, T] */
    size_t dec_cap;
    int dec_rows[2][DZ_ZO_MAX_DECODE], dec_len[2][DZ_ZO_MAX_DECODE];
    int adapter;             /* m is an adapter over a read-only base (dz_zo_engine_set_adapter) */
    dz_weight_source base;   /* then: the base's weights */
};

/* The weight source of a perturbation's embedding and head: the pipeline's perturbed
 * global rows, or the read-only base under an adapter. */
static inline dz_weight_source dz_zo_step_source(dz_zo_engine *e) {
    return e->adapter ? e->base : dz_pipeline_perturbed_source(e->pipe);
}

/* The update of step `step` (g[0..q-1], learning rate lr, the run's weight decay) becomes
 * the pipeline's pending update. */
dz_status dz_zo_set_update(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err);

/* The pipeline's perturbation for the estimator of p. */
static inline dz_pipeline_perturbation dz_zo_perturbation_of(const dz_zo_params *p) {
    static const dz_pipeline_zshape shapes[] = {[DZ_ZO_MEZO] = DZ_PZ_DENSE, [DZ_ZO_SPARSE] = DZ_PZ_SPARSE,
                                                [DZ_ZO_LOZO] = DZ_PZ_LOWRANK, [DZ_ZO_HIZOO] = DZ_PZ_HESSIAN};
    const int known = p->estimator >= DZ_ZO_MEZO && p->estimator <= DZ_ZO_HIZOO;
    return (dz_pipeline_perturbation){.seed = p->seed, .eps = p->eps,
                                      .dist = dz_zdist_of(p->rademacher, p->rng_v2),
                                      .shape = known ? shapes[p->estimator] : DZ_PZ_DENSE,
                                      .density = p->sparse_density, .rank = p->lozo_rank, .nu = p->lozo_nu,
                                      .q = p->q, .smooth = p->hizoo_smooth};
}

/* One step's or one sample's batch, either kind. */
typedef struct dz_zo_sample_batch {
    const dz_zo_batch *b;
    const dz_zo_decode *d;
    int n_examples, example0, n_global;
} dz_zo_sample_batch;
/* The losses and g of n samples, draws draw0 .. draw0 + n - 1, into out (no update). */
dz_status dz_zo_estimate_samples(dz_zo_engine *e, int n, uint32_t draw0, const dz_zo_sample_batch *b,
                                 dz_zo_step_result *out, dz_error *err);
/* hizoo.c: HiZOO's step: L0, then L+ and L-, the update with g and c pending. */
dz_status dz_zo_hizoo_step(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_sample_batch *sb,
                           dz_zo_step_result *out, dz_error *err);

/* The log-prob vectors the estimator keeps (rows = max_batch * max_seq of the forward). */
static inline size_t dz_zo_logprob_bytes(size_t rows) { return 4 * rows * sizeof(float); }

#endif
