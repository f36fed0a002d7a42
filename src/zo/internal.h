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
    dz_layer_pair_mats mats; /* the pair's layer matrices (pair_gemm) */
    int pair_gemm;           /* both signs through each layer in lockstep, the matrices perturbed in the
                              * GEMM's packing where exact (DISTZO_PAIR_GEMM, dz_zo_pair_gemm_setting) */
};

/* DISTZO_PAIR_GEMM: 1 runs a step's two forwards layer by layer in lockstep with each
 * matrix's w+ / w- made inside the GEMM's packing (model/forward_pair.h) wherever that is
 * exact, 0 through the working copies; unset: DZ_ZO_PAIR_GEMM_DEFAULT. The bits are the same. */
enum { DZ_ZO_PAIR_GEMM_DEFAULT = 0 };
dz_status dz_zo_pair_gemm_setting(int *on, dz_error *err);

/* The weight source of a perturbation's embedding and head: the pipeline's perturbed
 * global rows, or the read-only base under an adapter. */
static inline dz_weight_source dz_zo_step_source(dz_zo_engine *e) {
    return e->adapter ? e->base : dz_pipeline_perturbed_source(e->pipe);
}

/* The update of step `step` (g[0..q-1], learning rate lr, the run's weight decay) becomes
 * the pipeline's pending update. */
dz_status dz_zo_set_update(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err);

/* One sample's batch of either kind (a forward's, or a decoding one's), with its place in
 * the global batch. */
typedef struct dz_zo_sample_batch {
    const dz_zo_batch *b;
    const dz_zo_decode *d;
    int n_examples, example0, n_global;
} dz_zo_sample_batch;

/* The forwards of draw `draw` for the signs in mask (1: +eps, 2: -eps, 3: both): each
 * sign's (loss, weight) pair per example into out[sign] + 2 example0. */
dz_status dz_zo_run_sample(dz_zo_engine *e, uint32_t draw, int mask, const dz_zo_sample_batch *sb, double *out[2],
                           dz_zo_step_time *tm, dz_error *err);
/* e->ex_loss zeroed with room for n_slots sets of (loss, weight) pairs over the global
 * batch, *per_slot doubles each; refuses a batch outside its global batch. */
dz_status dz_zo_loss_slots(dz_zo_engine *e, int n_slots, const dz_zo_sample_batch *sb, size_t *per_slot,
                           dz_error *err);
/* The batch loss of a slot: sum of losses / sum of weights, each summed in example order. */
double dz_zo_slot_loss(const double *slot, int n_global);

/* FZOO (src/zo/fzoo.c): the N + 1 forwards of step `step` and its g[0..N-1] into out, no
 * update; and the check of its parameters at the engine's creation. */
dz_status dz_zo_fzoo_estimate(dz_zo_engine *e, uint32_t step, const dz_zo_sample_batch *sb, dz_zo_step_result *out,
                              dz_error *err);
dz_status dz_zo_fzoo_check(const dz_zo_params *p, dz_error *err);
/* FZOO under perturbation parallelism needs a replica per rank (refused otherwise). */
dz_status dz_zo_fzoo_check_parallel(const dz_zo_params *p, const dz_zo_parallel *par, dz_error *err);

/* The pipeline's perturbation for the estimator of p. */
static inline dz_pipeline_perturbation dz_zo_perturbation_of(const dz_zo_params *p) {
    static const dz_pipeline_zshape shapes[] = {[DZ_ZO_MEZO] = DZ_PZ_DENSE, [DZ_ZO_SPARSE] = DZ_PZ_SPARSE,
                                                [DZ_ZO_LOZO] = DZ_PZ_LOWRANK, [DZ_ZO_HIZOO] = DZ_PZ_HESSIAN};
    const int known = p->estimator >= DZ_ZO_MEZO && p->estimator <= DZ_ZO_HIZOO;
    return (dz_pipeline_perturbation){.seed = p->seed, .eps = p->eps,
                                      .dist = dz_zdist_of(p->rademacher, p->rng_v2),
                                      .shape = known ? shapes[p->estimator] : DZ_PZ_DENSE,
                                      .density = p->sparse_density, .rank = p->lozo_rank, .nu = p->lozo_nu,
                                      .q = p->q, .smooth = p->hizoo_smooth, .factored = p->hizoo_rank};
}

/* HiZOO (src/zo/hizoo.c): L0, L+ and L- of step `step`, g into out->g[0] and the
 * curvature step c into out->g[1], no update. */
dz_status dz_zo_hizoo_estimate(dz_zo_engine *e, uint32_t step, const dz_zo_sample_batch *sb, dz_zo_step_result *out,
                               dz_error *err);

/* The log-prob vectors the estimator keeps (rows = max_batch * max_seq of the forward). */
static inline size_t dz_zo_logprob_bytes(size_t rows) { return 4 * rows * sizeof(float); }

#endif
