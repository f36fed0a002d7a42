/* The ZO engine: MeZO's SPSA step with ZO2's block structure.
 *
 * One step, for each of q samples: every block is copied into two fp32 working buffers
 * with +eps*z and -eps*z applied on the fly (the master weights are never perturbed, so
 * nothing has to be restored), both forwards of the block run while it is resident (two
 * activation streams), and g = (L+ - L-) / (2 eps). The update of step t is deferred and
 * fused into step t+1's pass over each block; dz_zo_flush applies whatever is pending
 * (before evaluation, checkpoints, exit). z is a pure function of (run seed, step*q +
 * sample, tensor id, element): see docs/ZO_RNG.md and src/backend/zo_ops.h. */
#ifndef DISTZO_ZO_H
#define DISTZO_ZO_H

#include <stdint.h>

#include "distzo/model.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DZ_ZO_MAX_Q = 64 };

/* The estimator's perturbation of 2-D tensors (vectors always get MeZO's dense z):
 * MEZO    dense z (Gaussian or Rademacher) on every element;
 * SPARSE  Sparse-MeZO: MeZO's z on the sparse_density fraction of each row with the
 *         smallest |theta| (the mask recomputed from the current weights at every pass);
 * LOZO    low-rank z = U V^T / sqrt(r) per matrix: U (rows x r) of each draw, V (cols x r)
 *         of the step's window of lozo_nu steps, both Gaussian from the run seed;
 * FZOO    FZOO (arXiv 2506.09034): q one-sided Rademacher directions sharing one unperturbed
 *         loss l0, g_j = (l_j - l0) / (eps sigma), sigma the spread of the q losses
 *         (src/zo/fzoo.c); q >= 2, rademacher must be 1.
 * HIZOO   HiZOO (arXiv 2402.15173): every tensor's z over sqrt(H), H a diagonal Hessian
 *         estimate (one f32 per parameter, from 1) moved each step by a third forward
 *         L0 at theta: H = (1 - a) H + c H z^2, c = a |L+ + L- - 2 L0| / (2 eps^2), and
 *         the update g z / sqrt(H). c is logged beside g (dz_zo_log_values), so the seed
 *         log replays H too; the state is dz_zo_curvature's.
 * Every choice is a pure function of (seed, step, weights): the seed log replays it. */
typedef enum dz_zo_estimator {
    DZ_ZO_MEZO = 0, DZ_ZO_SPARSE = 1, DZ_ZO_LOZO = 2, DZ_ZO_FZOO = 3, DZ_ZO_HIZOO = 4
} dz_zo_estimator;
enum { DZ_ZO_LOZO_MAX_RANK = 16 };
/* FZOO's directions per step unless told (--fzoo-directions). */
enum { DZ_ZO_FZOO_DEFAULT_DIRECTIONS = 8 };
/* "mezo", "sparse", "lozo", "fzoo", "hizoo"; parse returns 0, or -1 for another name. */
const char *dz_zo_estimator_name(dz_zo_estimator e);
int dz_zo_estimator_parse(const char *name, dz_zo_estimator *out);

typedef struct dz_zo_params {
    uint64_t seed;   /* run seed: keys the perturbation RNG */
    float eps;       /* perturbation scale (MeZO default 1e-3) */
    int q;           /* SPSA samples per step (n-SPSA), 1..DZ_ZO_MAX_Q */
    int rademacher;  /* 0: Gaussian z, 1: Rademacher +-1 */
    float wd;        /* weight decay (skips biases and norm weights) */
    int fuse;        /* 1: defer each update into the next step's pass; 0: apply it at once */
    dz_zo_estimator estimator;
    float sparse_density; /* SPARSE: fraction of each row perturbed, (0, 1] */
    int lozo_rank, lozo_nu; /* LOZO: rank r (1..DZ_ZO_LOZO_MAX_RANK), V refreshed every nu steps */
    float hizoo_smooth; /* HIZOO: the curvature's EMA weight alpha, (0, 1) */
    int hizoo_rank;     /* HIZOO: 0, H diagonal; 1, HiZOO-L: a 2-D tensor's H in rank-1 factors */
    int rng_v2;      /* 1: ZO_RNG v2 z (docs/ZO_RNG.md section 10); 0: v1 */
    size_t max_device_bytes; /* a device backend's memory cap (--max-device-memory; 0: none): above it the
                              * layer masters stay in host memory and stream through the device */
} dz_zo_params;

/* The losses of one forward from the log-probs the caller asked for: logprobs[n_rows] of
 * rows/targets, and p_logprobs[n_p_rows] of the prompts' rows (tree batches; else NULL).
 * Writes a (loss, weight) pair per example: losses[2i] and losses[2i+1] for each of the
 * batch's n_examples (one pair for a batch that is one example). The step's loss is
 * (sum of losses) / (sum of weights) over the global batch, each summed in example order:
 * weight 1 gives the mean over examples, a token count the token-weighted mean. */
typedef void (*dz_zo_loss_fn)(const float *logprobs, const float *p_logprobs, void *user, double *losses);

typedef struct dz_zo_batch {
    const int *tokens, *lengths; /* [B, T] right-padded, and lengths (positions from 0) */
    int B, T;
    const int *rows, *targets;   /* log p(targets[i] | row rows[i]) feed the loss */
    int n_rows;
    dz_zo_loss_fn loss;
    void *user;
    /* The batch's examples within the step's global batch (data parallelism): this batch
     * holds examples [example0, example0 + n_examples) of n_global. Zeros mean one
     * example, the whole batch. */
    int n_examples, example0, n_global;
    /* Tree batches (n_prompts > 0): the sequences above continue prompts [n_prompts, PT]
     * (sequence i from position start[i] of prompt parent[i]); each prompt is computed once
     * per perturbation. The forward then needs 4 streams. */
    const int *p_tokens, *p_lengths;
    int n_prompts, PT;
    const int *p_rows, *p_targets;
    int n_p_rows;
    const int *start, *parent;
} dz_zo_batch;

/* A batch scored by what the model generates (non-differentiable objectives: the F1 of
 * a greedy answer): B sequences per sign, grown pass by pass under that sign's
 * perturbation. Every pass runs the pipeline at the step's draw over each sign's live
 * sequences (whole, no KV cache) and hands the logits of each one's last position to
 * next, which appends a token to tokens[sign] / lengths[sign] or sets done[sign][b].
 * reset(sign) puts the prompts back (before each sample); loss(sign, losses) writes a
 * (loss, weight) pair per example as dz_zo_loss_fn does. */
enum { DZ_ZO_MAX_DECODE = 256 };
typedef struct dz_zo_decode {
    int B, T;                    /* sequences, and the positions each may grow to (the row stride of tokens) */
    int *tokens[2], *lengths[2]; /* per sign: [B, T] and [B] */
    unsigned char *done[2];      /* per sign: [B] */
    int max_passes;
    float *logits;               /* [B, vocab]: the caller's buffer */
    void (*reset)(void *user, int sign);
    void (*next)(void *user, int sign, int b, const float *logits);
    void (*loss)(void *user, int sign, double *losses);
    void *user;
    int n_examples, example0, n_global; /* as dz_zo_batch's */
} dz_zo_decode;

/* Where a step's wall time went, seconds summed over its samples (and decoding passes):
 * what `distzo bench eval` reports. */
typedef struct dz_zo_step_time {
    double begin;  /* the global block's pending update (or, from a store, its preparation) and the embeddings */
    double pass;   /* the layer blocks' element-wise pass: the pending update, then w+ and w- */
    double layers; /* the layers' forwards, every sign and stream */
    double head;   /* the head over every sign's rows: the perturbed vocabulary chunks and their GEMMs */
} dz_zo_step_time;

typedef struct dz_zo_step_result {
    double loss_plus[DZ_ZO_MAX_Q], loss_minus[DZ_ZO_MAX_Q];
    float g[DZ_ZO_MAX_Q + 1]; /* g[q]: HiZOO's curvature step c (dz_zo_log_values) */
    int finite;      /* 0: some loss was not finite; no update was recorded */
    dz_zo_step_time time;
} dz_zo_step_result;

typedef struct dz_zo_engine dz_zo_engine;

/* m must own its weights (dz_model_make_owned) in F32 or BF16: they are the master
 * weights, updated in place. f must have 2 streams (4 for tree batches). */
dz_status dz_zo_engine_create(dz_model *m, dz_forward *f, const dz_zo_params *p, dz_zo_engine **out, dz_error *err);
/* Adapter training: m (the engine's model) is a LoRA adapter (dz_lora_create/load) and f
 * runs the base model, read through base (never perturbed, never written). Only the
 * adapter's tensors get z and updates; dz_zo_master_source then gives the base, and f
 * reads the adapter's masters beside it. */
dz_status dz_zo_engine_set_adapter(dz_zo_engine *e, const dz_weight_source *base, dz_error *err);
void dz_zo_engine_free(dz_zo_engine *e);

/* One SPSA step numbered `step` (draws step*q .. step*q+q-1) on batch b. On success with
 * finite losses, the update with learning rate lr is pending (fused) or applied. */
dz_status dz_zo_step(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_batch *b, dz_zo_step_result *out,
                     dz_error *err);
/* The same step on a decoding batch. */
dz_status dz_zo_step_decode(dz_zo_engine *e, uint32_t step, float lr, const dz_zo_decode *d, dz_zo_step_result *out,
                            dz_error *err);
/* One sample alone, with no update: both perturbed forwards at draw `draw` (z of draw
 * index `draw`, docs/ZO_RNG.md) on batch b; its losses and g in out->loss_plus[0],
 * loss_minus[0], g[0]. A federated worker computes its share of a step so; the step's
 * update then comes back as a logged record (dz_zo_apply). */
dz_status dz_zo_estimate(dz_zo_engine *e, uint32_t draw, const dz_zo_batch *b, dz_zo_step_result *out,
                         dz_error *err);
/* FZOO's step alone, with no update (--estimator fzoo only): the N + 1 forwards of step
 * `step` (draws step * N + j) on batch b; g[0..N-1] the coefficients of the step's record,
 * loss_plus[j] = l_j, loss_minus[j] = l0. A federated FZOO worker computes a round so. */
dz_status dz_zo_fzoo_coefficients(dz_zo_engine *e, uint32_t step, const dz_zo_batch *b, dz_zo_step_result *out,
                                  dz_error *err);
/* Keeps the layer blocks' master weights in a parameter store on disk (src/store/store.h)
 * instead of the model's memory: each step reads a block into one of two resident slots
 * while the previous block computes, and writes it back once updated. */
struct dz_store;
dz_status dz_zo_engine_use_store(dz_zo_engine *e, struct dz_store *s, dz_error *err);

/* With a store, the layers always live in it; the global block (embeddings, final norm,
 * head) stays resident in the model, or, when the model lets go of it too
 * (dz_model_keep_for_store), streams: its rows are read from the store as
 * the forward asks, and its update is applied chunk by chunk on the I/O thread. The
 * engine sees which at dz_zo_engine_use_store. */
typedef struct dz_zo_resident {
    size_t weights, activations, buffers; /* resident global block, f's buffers, the engine's */
    size_t estimator;                     /* the estimator's state (HiZOO's curvature, LOZO's factors) */
} dz_zo_resident;
/* What training allocates with store s, before the engine exists, for the estimator p
 * (NULL: MeZO's, none). The process itself (program, libraries) is not counted. */
dz_zo_resident dz_zo_resident_bytes(const dz_model *m, const dz_forward *f, const struct dz_store *s,
                                    const dz_zo_params *p, int stream_globals);
/* Fits training under cap_mb megabytes (0: no cap): keeps *stream_globals if it fits,
 * else streams the global block when that fits (*stream_globals = 1), else refuses
 * naming each part of the smallest layout. */
dz_status dz_zo_plan_resident(const dz_model *m, const dz_forward *f, const struct dz_store *s, const dz_zo_params *p,
                              int cap_mb, int *stream_globals, dz_error *err);
/* Once s holds m's tensors (dz_store_create) and f exists: plans as above and lets m keep
 * the global block, or nothing; then create the engine and dz_zo_engine_use_store. */
dz_status dz_zo_store_residency(dz_model *m, const dz_forward *f, const struct dz_store *s, const dz_zo_params *p,
                                int cap_mb, int stream_globals, dz_error *err);

/* Applies any pending update to every block (with shared masters: collective). Masters
 * resident on a device backend (its buffers not host memory) are then downloaded into the
 * model's tensors, which evaluation, checkpoints and checksums read. */
dz_status dz_zo_flush(dz_zo_engine *e, dz_error *err);
/* Applies the update of a logged step (replay: resume, export): bitwise what training did.
 * Resident masters are updated on the device; the model's tensors catch up at the next
 * dz_zo_flush. */
dz_status dz_zo_apply(dz_zo_engine *e, uint32_t step, float lr, const float *g, dz_error *err);
/* The model's weights as the forward sees them (flush first); with an adapter, the base
 * (the forward reads the adapter's masters itself). */
dz_weight_source dz_zo_master_source(const dz_zo_engine *e);
/* rows() of a weight source has no error path: a store read that fails inside the
 * engine's sources hands the forward zeros and is recorded. This returns the first such
 * error since the last call (or since the step began), then clears it: call it after
 * forwards through dz_zo_master_source (dz_zo_step checks its own). */
dz_status dz_zo_source_status(dz_zo_engine *e, dz_error *err);
/* Bytes of working buffers the engine holds (two fp32 copies of the largest block, ...). */
size_t dz_zo_engine_bytes(const dz_zo_engine *e);
/* The same from the model's table and its forward's shape (row_floats =
 * dz_forward_row_floats, rows = max_batch * max_seq), without a store's buffers. */
size_t dz_zo_engine_bytes_for(const dz_param_table *t, size_t row_floats, size_t rows);
/* What the estimator of p adds (LOZO: two windows' V of every matrix; else 0). */
size_t dz_zo_estimator_bytes_for(const dz_param_table *t, const dz_zo_params *p);
/* What a disk store adds to them, masters of dtype: the second pair of fp32 working copies
 * (the I/O thread fills block l+1's while layer l computes) and the bounded chunk buffer
 * its transfers go through. */
size_t dz_zo_store_bytes_for(const dz_param_table *t, dz_dtype dtype);

/* How a step's work is shared among processes (src/parallel sets it up; one process needs
 * none of it). Every rank applies every update, so replicas never exchange weights. */
typedef struct dz_zo_parallel {
    int signs;      /* forwards this rank runs: 1 = +eps, 2 = -eps, 3 = both (perturbation parallelism) */
    /* Sums doubles over all ranks in place; each element has exactly one non-zero
     * contributor, so the sum is exact whatever the order. */
    dz_status (*sum)(void *ctx, double *buf, size_t n, dz_error *err);
    /* Master weights and working copies shared by n_slices ranks (one node): each rank
     * updates and perturbs its slice of every block's spans into shared_work (2 x
     * dz_zo_block_floats floats, node-shared memory); barrier(ctx) separates the slices'
     * writes from everyone's reads. */
    int slice, n_slices;
    float *shared_work;
    dz_status (*barrier)(void *ctx, dz_error *err);
    void *ctx;
} dz_zo_parallel;
/* Floats in one working copy (the largest layer block). */
size_t dz_zo_block_floats(const dz_zo_engine *e);

/* Values a step's seed-log record holds: q projected gradients, and for HIZOO the
 * curvature step c after them (the step result's g[q]; dz_zo_apply reads it there). */
int dz_zo_log_values(const dz_zo_params *p);
/* HIZOO's curvature state H (flush first): one f32 per element of every tensor of the
 * engine's model in table order, *n of them (hizoo_rank 1: a 2-D tensor's row factors,
 * column factors and the row factors' mean instead, src/pipeline/hessian_factors.c);
 * NULL for another estimator. A checkpoint
 * saves it beside the weights and a resume writes it back before replaying the log. */
float *dz_zo_curvature(dz_zo_engine *e, size_t *n);
/* Call before the first step; p is copied. */
dz_status dz_zo_engine_set_parallel(dz_zo_engine *e, const dz_zo_parallel *p, dz_error *err);
/* A 64-bit checksum of the master weights (flushed first) into *sum: the sum over this
 * rank's slice of spans of a hash of (span, bytes); summing the slices of a node's ranks
 * gives the node's checksum, the same whatever the slicing. */
dz_status dz_zo_checksum_slice(dz_zo_engine *e, int slice, int n_slices, uint64_t *sum, dz_error *err);

/* Learning-rate schedules with linear warmup. */
typedef enum dz_lr_schedule { DZ_LR_CONSTANT, DZ_LR_LINEAR, DZ_LR_COSINE } dz_lr_schedule;
float dz_lr_at(dz_lr_schedule s, float lr, int warmup, int total, int step);

#ifdef __cplusplus
}
#endif

#endif
