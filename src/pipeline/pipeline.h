/* The block pipeline: the model's master weights walked block by block (each layer, then
 * the global block of embeddings, final norm and head), every pass writing two fp32
 * working copies w+ = theta + eps z and w- = theta - eps z with a pending update fused in
 * before the perturbation. The masters live in the model's memory, in a disk store (each
 * layer prepared on the store's I/O thread while the previous one computes; the global
 * block resident or streamed by rows), or once per node, each rank passing over its slice
 * of every block's spans. z is a pure function of (seed, tensor, draw, element), so where
 * and in what pieces a pass runs never changes the bits.
 *
 * The estimator (src/zo) drives one perturbation (draw) of the forward like this:
 *
 *   dz_pipeline_begin(p, draw)          global block brought up to date, layer 0 queued
 *   dz_pipeline_perturbed_source(p)     its rows: the embedding (stream parity: +eps/-eps)
 *   dz_pipeline_layer(p, l, w)          l = 0, 1, ...: layer l's working copies, ready
 *   dz_pipeline_end_layers(p)           every block has the update; the store is idle
 *   dz_pipeline_perturbed_source(p)     its rows again: the head
 *   dz_pipeline_rows_status(p)          a read that failed inside rows()
 *
 * Every call that can fail returns a status; rows() of a weight source has no error path,
 * so a failed read there hands the forward zeros and is recorded for rows_status. */
#ifndef DZ_PIPELINE_PIPELINE_H
#define DZ_PIPELINE_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "distzo/error.h"
#include "distzo/model.h"
#include "store/store.h"
#include "backend/backend.h" /* the span kernels are the forward's backend's ZO ops */
#include "backend/zo_ops.h"
#include "model/forward_pair.h"

/* The most samples a pending update combines (g[0..q-1]). */
enum { DZ_PIPELINE_MAX_Q = 64 };
/* The highest rank of a LOWRANK perturbation. */
enum { DZ_PIPELINE_MAX_RANK = 16 };

typedef struct dz_pipeline dz_pipeline;

/* The z of 2-D tensors (structured_z.c; vectors always get DENSE). */
/* HESSIAN (HiZOO, hessian_z.c) applies to every tensor: MeZO's z over sqrt(H) of a
 * curvature state the update moves. */
typedef enum dz_pipeline_zshape {
    DZ_PZ_DENSE = 0, DZ_PZ_SPARSE = 1, DZ_PZ_LOWRANK = 2, DZ_PZ_HESSIAN = 3
} dz_pipeline_zshape;

/* The perturbation the working copies carry: z of (seed, tensor, draw, element), shaped
 * (SPARSE: masked by the row's magnitudes; LOWRANK: U V^T, U of the draw, V of the window
 * (draw / q) / nu). */
typedef struct dz_pipeline_perturbation {
    uint64_t seed;
    float eps;
    dz_zdist dist;
    dz_pipeline_zshape shape;
    float density; /* SPARSE: fraction of each row perturbed */
    int rank, nu;  /* LOWRANK */
    int q;         /* draws per step (the window of a draw) */
    float smooth;  /* HESSIAN: the curvature's EMA weight alpha, (0, 1) */
    int factored;  /* HESSIAN: 2-D tensors keep H as rank-1 factors (HiZOO-L, hessian_factors.c) */
} dz_pipeline_perturbation;

/* m's masters (owned, f32 or bf16: the caller checks) in memory; f gives the row buffer's
 * size (dz_forward_row_floats). When f's backend's buffers are not host memory (a device),
 * the pipeline is resident: every master is uploaded into a buffer of that backend now,
 * the working copies are its buffers, every ZO op runs there, and the global rows the
 * perturbed source hands out are its buffers (dz_weight_source.backend_rows); the model's
 * tensors are the host copy (dz_pipeline_flush). Resident mode refuses a disk store, a
 * node's sharing and the SPARSE and LOWRANK shapes. */
/* max_device_bytes (0: no cap; only with such a backend): where every master does not fit
 * under it beside the working copies and f's buffers, the layer masters stay in host memory
 * and each pass streams its block through a device buffer (device_stream.c: two, the
 * transfers overlapped, where the backend has be->streams and both fit; else one); refused,
 * naming the parts, where even one does not fit. The layer masters are then the model's
 * tensors, pinned while the pipeline lives with two buffers: free the pipeline first. */
dz_status dz_pipeline_create(dz_model *m, const dz_forward *f, const dz_pipeline_perturbation *z,
                             size_t max_device_bytes, dz_pipeline **out, dz_error *err);
void dz_pipeline_free(dz_pipeline *p);

/* Moves the layer masters (and, when the model let go of them, the global block's) to
 * store s: allocates the second pair of working copies, the chunk buffer and (streamed
 * globals) the row buffer. */
dz_status dz_pipeline_use_store(dz_pipeline *p, dz_store *s, dz_error *err);

/* A node's ranks sharing the masters: this rank is slice `slice` of n_slices; work (2 x
 * dz_pipeline_block_floats floats, node-shared) replaces this rank's own pair of working
 * copies; barrier(ctx) separates the slices' writes from everyone's reads. */
typedef struct dz_pipeline_node {
    int slice, n_slices;
    float *work;
    dz_status (*barrier)(void *ctx, dz_error *err);
    void *ctx;
} dz_pipeline_node;
dz_status dz_pipeline_share_node(dz_pipeline *p, const dz_pipeline_node *node, dz_error *err);

/* Floats in one working copy (the largest layer block). */
size_t dz_pipeline_block_floats(const dz_pipeline *p);
/* Bytes the pipeline holds: working copies, the -eps row cache, a store's buffers. */
size_t dz_pipeline_bytes(const dz_pipeline *p);

/* ---- The pending update ----------------------------------------------------------- */

/* Records u (g copied; q in 1..DZ_PIPELINE_MAX_Q) as pending: each block takes it in its
 * next pass, and the caller must flush before it sets another. */
dz_status dz_pipeline_set_update(dz_pipeline *p, const dz_zo_update *u, dz_error *err);
/* Applies the pending update to every block that does not have it yet; with a store,
 * returns once the I/O thread is idle. Resident masters (a backend whose buffers are not
 * host memory) are then downloaded into the model's tensors, if an update reached them
 * since the last flush: the model then holds the masters for evaluation, checkpoints and
 * checksums. */
dz_status dz_pipeline_flush(dz_pipeline *p, dz_error *err);
/* The same without the download (--no-fuse steps, a replay's updates): the model's tensors
 * may lag resident masters until the next flush. */
dz_status dz_pipeline_apply_pending(dz_pipeline *p, dz_error *err);

/* ---- One perturbation of the forward ---------------------------------------------- */

dz_status dz_pipeline_begin(dz_pipeline *p, uint32_t draw, dz_error *err);
/* The scale of the perturbations from the next dz_pipeline_begin on (between passes only:
 * the I/O thread is idle then). FZOO's unperturbed forward is a pass at eps 0: w+- =
 * theta + (0 z) = theta bitwise (bar the sign of a zero), the pending update still fused. */
void dz_pipeline_set_eps(dz_pipeline *p, float eps);
/* Layer l's working copies (in order l = 0, 1, ...): w[0][role] = w+, w[1][role] = w-
 * (NULL for a role the layer lacks), valid until the next call (which starts refilling
 * them: the caller is then done with layer l). */
dz_status dz_pipeline_layer(dz_pipeline *p, int l, const float *w[2][DZ_L_COUNT], dz_error *err);
dz_status dz_pipeline_end_layers(dz_pipeline *p, dz_error *err);
/* Layer l for a forward that runs both signs in lockstep (model/forward_pair.h): its
 * matrices are not filled; mats gets their masters and perturbation (the pending update
 * included, once per block), which the pair's GEMMs apply while packing; w gets the other
 * tensors' working copies (the matrices' entries must not be read). Only where that is
 * exact, dz_pipeline_pair_exact: f32 masters in memory (no store, not resident on a
 * device), dense z (not sparse, low-rank or HiZOO's), one rank per node's masters. */
int dz_pipeline_pair_exact(const dz_pipeline *p);
dz_status dz_pipeline_layer_pair(dz_pipeline *p, int l, const float *w[2][DZ_L_COUNT], dz_layer_pair_mats *mats,
                                 dz_error *err);
/* Rows of the global block as the perturbation sees them: even streams theta + eps z,
 * odd ones theta - eps z (a pending update in the copy when the store has not got it). */
dz_weight_source dz_pipeline_perturbed_source(dz_pipeline *p);

/* ---- The masters as they are ------------------------------------------------------ */

/* Resident tensors in place, the others read from the store (flush first; resident
 * masters: their host copy, which the flush downloaded). */
dz_weight_source dz_pipeline_master_source(const dz_pipeline *p);
/* The first read that failed inside either source's rows() since the last call (or since
 * dz_pipeline_begin), then clears it. */
dz_status dz_pipeline_rows_status(dz_pipeline *p, dz_error *err);
/* Flushes, then the sum over spans k with k % n_slices == slice of a hash of (k, span
 * bytes): a node's slices add up to the node's checksum, the same for any slicing. */
dz_status dz_pipeline_checksum_slice(dz_pipeline *p, int slice, int n_slices, uint64_t *sum, dz_error *err);

/* ---- HESSIAN's curvature state (hessian_z.c) ------------------------------------------ */

/* H, one f32 per element of every tensor in table order (factored: a 2-D tensor's rows
 * factors, then its columns', then their mean; NULL, *n = 0: another shape); the caller
 * may read it (flush first) or overwrite it (a checkpoint's, before replay). */
float *dz_pipeline_curvature(dz_pipeline *p, size_t *n);
/* center: the passes that follow write w+ = w- = theta (the estimator's L0 forward). */
void dz_pipeline_set_center(dz_pipeline *p, int center);
/* Floats of the curvature state of table t (factored: HiZOO-L's). */
size_t dz_hz_floats_for(const dz_param_table *t, int factored);

/* ---- Sizes, before a pipeline exists (the planner, the resident check) ------------ */

/* A pair of fp32 working copies of the largest layer block and the -eps row cache
 * (row_floats = dz_forward_row_floats). */
size_t dz_pipeline_bytes_for(const dz_param_table *t, size_t row_floats);
/* What the perturbation's shape adds (LOWRANK: V of two windows for every matrix). */
size_t dz_pipeline_shape_bytes_for(const dz_param_table *t, const dz_pipeline_perturbation *z);
/* What a disk store of masters in dtype adds: the second pair and the chunk buffer. */
size_t dz_pipeline_store_bytes_for(const dz_param_table *t, dz_dtype dtype);
/* What dz_pipeline_create + dz_pipeline_use_store(s) allocate for m and f (s NULL: no
 * store); with stream_globals also the global block's row buffer. */
size_t dz_pipeline_planned_bytes(const dz_model *m, const dz_forward *f, const dz_store *s, int stream_globals);

/* What a pipeline on a device backend puts in its memory, by part: resident mode holds
 * masters + work + forward, streaming globals + slots x layer + work + forward (two slots
 * where the backend overlaps its transfers and they fit, else one). */
typedef struct dz_pipeline_device_bytes {
    size_t masters; /* every tensor's masters */
    size_t globals; /* the global block's masters (embeddings, final norm, head) */
    size_t layer;   /* the masters of the largest layer block: the one streamed buffer */
    size_t work;    /* the two fp32 working copies and the -eps row cache */
    size_t forward; /* f's buffers (dz_forward_bytes) */
} dz_pipeline_device_bytes;
dz_pipeline_device_bytes dz_pipeline_device_need(const dz_model *m, const dz_forward *f);
static inline size_t dz_pipeline_device_resident(const dz_pipeline_device_bytes *b) {
    return b->masters + b->work + b->forward;
}
static inline size_t dz_pipeline_device_streamed_slots(const dz_pipeline_device_bytes *b, int slots) {
    return b->globals + (size_t)slots * b->layer + b->work + b->forward;
}
/* Streaming's least need: one slot (transfers in order with the ops). */
static inline size_t dz_pipeline_device_streamed(const dz_pipeline_device_bytes *b) {
    return dz_pipeline_device_streamed_slots(b, 1);
}
/* Streaming with two slots (backend/stream_ops.h), the overlap's marks: slot s's upload is
 * mark DZ_DEV_MARK_UP + s, its compute's last use DZ_DEV_MARK_DONE + s, its write-back
 * DZ_DEV_MARK_WB + s (device_stream.c). */
enum { DZ_DEV_MARK_UP = 0, DZ_DEV_MARK_DONE = 2, DZ_DEV_MARK_WB = 4 };

#endif
