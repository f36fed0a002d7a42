/* The block pipeline's private state, shared by the files of src/pipeline:
 * working_set.c   spans, block layout, the pairs of working copies, a node's sharing
 * block_pass.c    the element-wise passes over a block's spans, in memory or in the store
 * pending.c       the pending update: recorded, applied block by block, flushed
 * streaming.c     a disk store's schedule on its I/O thread
 * perturbation.c  one perturbation's walk over the blocks (begin, layer, end)
 * global_rows.c   the weight sources: perturbed global rows, the masters as they are
 * checksum.c      span hashes and the masters' checksum
 * structured_z.c  the sparse and low-rank z of 2-D tensors
 * resident.c      the masters resident on a device backend (buffers not host memory)
 * device_stream.c under a device memory cap: the layer masters streamed block by block
 * device_node.c   a node's ranks on devices: the host copy shared, DistZO2's sliced upload
 * device_store.c  a disk store behind a device: layer blocks read into staging, uploaded
 *                 (on the CUDA lanes, overlapped with compute)
 * pipeline.c      creation and release, byte counts */
#ifndef DZ_PIPELINE_INTERNAL_H
#define DZ_PIPELINE_INTERNAL_H

#include "pipeline/pipeline.h"

/* Elements per unit of parallel work: big enough to amortize scheduling, small enough
 * to balance a block's tensors over the threads. Global rows below PARALLEL_ROWS_MIN
 * elements are perturbed on the calling thread. */
enum { SPAN = 32768, PARALLEL_ROWS_MIN = 65536 };
/* Spans one pass over a block in the store moves at a time (8 MB of f32): bounds the
 * chunk buffer, not the file's layout. */
enum { GCHUNK_SPANS = 64 };

/* Elements [i0, i0 + n) of tensor id. */
typedef struct span {
    int id;
    uint64_t i0;
    size_t n;
} span;

/* Where every element goes: the tensors cut into spans in table order, grouped by block,
 * and the fp32 working copies a layer block is perturbed into. */
typedef struct working_set {
    int n_blocks;                 /* layers + the global block (the last) */
    span *spans;
    int *block_first_span;        /* spans of block b: [block_first_span[b], block_first_span[b+1]) */
    size_t *tensor_off;           /* offset of a layer tensor inside its block's working copies */
    int (*layer_ids)[DZ_L_COUNT]; /* tensor id of (layer, role), or -1 */
    const dz_backend *dev;        /* non-NULL: the working copies are this backend's buffers */
    float *wplus[2], *wminus[2];  /* pairs of working copies (+eps, -eps) of a layer block: pair 0
                                   * always, pair 1 with a store (block l uses pair l % 2, so the
                                   * I/O thread fills block l+1's while layer l computes) */
    size_t block_floats;          /* floats in each: the largest layer block */
    int own_work;                 /* pair 0 is this pipeline's (not a node's shared one) */
} working_set;

/* The update a step leaves for the next pass over each block. */
typedef struct pending_update {
    int pending;            /* an update waits to be applied */
    unsigned char *applied; /* per block: the pending update is already in */
    dz_zo_update rule;      /* rule.g points at g */
    float g[DZ_PIPELINE_MAX_Q];
} pending_update;

/* A disk store and its schedule (store NULL: the masters are in the model's memory). */
typedef struct stream_state {
    dz_store *store;
    int stream_globals; /* the global block stays in the store too (the model holds no tensor) */
    int prep_apply[2];  /* per pair: the queued preparation applies the pending update */
    char *chunk;        /* the bounded transfer buffer: GCHUNK_SPANS spans of a block */
    char *gtheta;       /* streamed globals: the rows a source reads, in the store's dtype */
    int gapply;         /* streamed globals: this pass's update is not yet in the store */
} stream_state;

/* The global rows of a perturbation: the -eps rows are computed with the +eps ones (same
 * z) and kept until other rows are drawn or the next perturbation begins, so every odd
 * stream asking for them (prompts and continuations) gets a copy; and the first read that
 * failed inside rows(). A +eps cache too would spare the continuations' redraw of a head
 * chunk, for another chunk-sized buffer under --max-resident. */
typedef struct rows_state {
    float *minus_cache;
    size_t row_floats;
    int cache_valid, cache_id;
    int64_t cache_row0, cache_nrows;
    int failed;
    dz_error err;
} rows_state;

/* A node's ranks sharing the masters (n_slices <= 1: alone). */
typedef struct node_share {
    int slice, n_slices;
    dz_status (*barrier)(void *ctx, dz_error *err);
    void *ctx;
} node_share;

/* LOWRANK: V of every matrix for two windows of steps (slot w % 2), regenerated from the
 * seed when a window starts. */
typedef struct lowrank_state {
    float *v[2];
    size_t *v_off; /* per tensor: its V's offset in a slot */
    uint32_t window[2];
    int valid[2];
} lowrank_state;

/* A node's ranks on device backends (device_node.c): the masters' host copy is node-shared
 * memory, each rank's device holds its own copy of what it computes on (every rank runs
 * every op: z depends on the element index alone, so the devices' bits agree), and the
 * host copy is written by slices: rank r writes bytes [r c, (r + 1) c) of each range. */
typedef struct res_node {
    int rank, n;           /* n <= 1: alone */
    int sliced;            /* streaming: layers reach the node's GPUs by DistZO2's sliced upload */
    dz_status (*barrier)(void *ctx, dz_error *err);
    void *ctx;
} res_node;

/* Resident on the forward's backend (its buffers are not host memory; no store): each
 * tensor's masters in a backend buffer; the model's tensors are the host copy, brought up
 * to date by dz_pipeline_flush (resident.c). */
typedef struct resident_state {
    int on;
    void **theta; /* per tensor id: its masters, a backend buffer */
    int stale;    /* an update reached the device's masters since the host copy was made */
    int stream;   /* under the cap: the layers' masters stay in the model's memory, and each
                   * pass over a layer uploads it into a slot (theta points there) */
    int slots;    /* streaming: 1 (transfers in order with the ops) or 2 (overlapped: layer l
                   * in slot l % 2, through be->streams) */
    void *slot[2];  /* streaming: the masters of one layer block each, backend buffers */
    int held[2];    /* overlapped: the layer whose upload into the slot is issued (-1: none) */
    void *pinned;   /* overlapped: the start of the layer masters' host range, pinned (NULL: not) */
    res_node node;
    char *staging;  /* a disk store behind the device: one layer block as the store holds it;
                     * two slots: four, slot s's upload source and its write-back's target */
    size_t stage_bytes; /* a disk store behind the device: one staging block */
    int unwritten[2];   /* two slots and a disk store: the layer whose write-back waits in slot
                         * s's write-back staging for the store (-1: none) */
    int failed;     /* a store read or write of a pass failed (its error in err) */
    dz_error err;
} resident_state;

/* HESSIAN: the curvature state H of every element (hessian_z.c). */
typedef struct hessian_state {
    float *h;
    size_t *off; /* per tensor: its first element in h */
    size_t n;
    int center;  /* passes write theta itself (the L0 forward) */
    double *colsum; /* factored: the column sums of each factored tensor (cols doubles each) */
    size_t *coff;   /* factored: per tensor, its first column sum */
} hessian_state;

struct dz_pipeline {
    dz_model *m;
    const dz_backend *be; /* the forward's: its ZO ops perturb and update the spans */
    dz_pipeline_perturbation z;
    uint32_t draw; /* the draw the working copies and the perturbed source carry */
    working_set ws;
    pending_update upd;
    stream_state io;
    rows_state rows;
    node_share node;
    lowrank_state lowrank;
    hessian_state hess;
    resident_state res;
    size_t bytes;
};

static inline int dz_masters_bf16(const dz_pipeline *p) { return dz_model_dtype(p->m) == DZ_BF16; }

/* working_set.c */
/* dev non-NULL: the working copies are buffers of that backend (resident mode). */
dz_status dz_ws_build(working_set *ws, const dz_param_table *t, int n_blocks, int whole_rows, const dz_backend *dev,
                      dz_error *err);
void dz_ws_free(working_set *ws);
size_t dz_ws_max_layer_floats(const dz_param_table *t);
/* Element i0 of a tensor's masters where the ZO ops update them (not one in the store):
 * the model's memory, or resident, the backend's buffer. */
void *dz_ws_theta_at(const dz_pipeline *p, int id, uint64_t i0);
/* The same in the model's memory (resident: the host copy, current after a flush). */
void *dz_ws_host_at(const dz_pipeline *p, int id, uint64_t i0);
/* Span k is this rank's to update and perturb (its slice; alone, every span is). */
int dz_ws_my_span(const dz_pipeline *p, int k);
/* Shared masters: nobody may still read what is about to be written (old weights, the
 * working copies of the previous block), nor read before every slice is in. */
dz_status dz_ws_node_barrier(dz_pipeline *p, dz_error *err);

/* block_pass.c */
/* w+/w- of elements [i0, i0+n) of tensor id at the current draw from th (where element
 * i0 lies), applying the pending update to th first when apply is set. */
void dz_pass_perturb_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                          int apply);
/* What one pass over spans of a block in the store does to each span, in its chunk. */
typedef struct dz_pass {
    int apply;           /* apply the pending update (the range is then written back) */
    int pair;            /* >= 0: write w+/w- of the spans into this pair (after the update) */
    uint64_t *hash;      /* non-NULL: add the hashes of this slice's spans */
    int slice, n_slices; /* with hash: spans k with k % n_slices == slice */
    int parallel;        /* spread a chunk's spans over the pool's threads (not on the I/O thread) */
} dz_pass;
dz_status dz_pass_chunks(dz_pipeline *p, int blk, int a, int b, const dz_pass *pass, dz_error *err);
/* The pending update of span s, whose first element lies at th. */
void dz_pass_update_span(const dz_pipeline *p, const span *s, void *th);
/* Block b in memory: this rank's spans updated; layer l's spans into pair 0 (the pending
 * update fused in when the block does not have it yet). */
void dz_pass_update_in_memory(dz_pipeline *p, int b);
/* skip[0 .. n_skip): tensors whose spans the fill leaves alone (not with p->res.on). */
void dz_pass_fill_in_memory(dz_pipeline *p, int l, int apply, const int *skip, int n_skip);
/* The pending update as tensor id takes it (no decay on biases and norms). */
dz_zo_update dz_pass_update_for(const dz_pipeline *p, int id);

/* pending.c: the pending update of blocks [b0, b1) outside a step's fills, between node
 * barriers. */
dz_status dz_pending_update_blocks(dz_pipeline *p, int b0, int b1, dz_error *err);

/* streaming.c */
/* The store's I/O thread schedules the passes (not with a device backend, whose passes read
 * and write the store themselves: device_store.c). */
static inline int dz_stream_scheduled(const dz_pipeline *p) { return p->io.store && !p->res.on; }
/* Block b's masters are in the store: a layer, or a streamed global block. */
static inline int dz_stream_in_store(const dz_pipeline *p, int b) {
    return p->io.store && (b < p->ws.n_blocks - 1 || p->io.stream_globals);
}
/* Queues the preparation of layer l into pair l % 2 (the caller is done with that pair). */
dz_status dz_stream_prepare(dz_pipeline *p, int l, dz_error *err);
/* Layer l's pair is ready once the queue drains; then queues layer l+1's preparation and a
 * slice of a streamed global block's update, both overlapping layer l's compute. */
dz_status dz_stream_stage(dz_pipeline *p, int l, dz_error *err);

/* global_rows.c */
void dz_rows_record(dz_pipeline *p, const dz_error *err);

/* structured_z.c */
/* Tensor id gets the structured z (a 2-D tensor under SPARSE or LOWRANK). */
int dz_sz_applies(const dz_pipeline *p, int id);
/* Checks the shape's knobs against the table; LOWRANK allocates its V. */
dz_status dz_sz_create(dz_pipeline *p, dz_error *err);
void dz_sz_free(dz_pipeline *p);
/* Before a pass (caller's thread, nothing running): LOWRANK's V for the pending update's
 * window and, with perturb, draw's (flushing first if both want one slot). */
dz_status dz_sz_prepare(dz_pipeline *p, int perturb, uint32_t draw, dz_error *err);
/* The span kernel: elements [i0, i0 + n) of tensor id at th (SPARSE: whole rows), the update
 * u (NULL: none) applied in place, then w+/w- (wp NULL: none) of the current draw. */
void dz_sz_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                const dz_zo_update *u);
/* Gaussians of counter purpose `purpose` for elements i0 .. i0+n-1 (z's word mapping). */
void dz_sz_gaussians(float *out, uint64_t seed, uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i0,
                     size_t n);
/* Elements per span of tensor t: SPAN, or (SPARSE) the most whole rows that fit. */
size_t dz_ws_span_elems(const dz_param *t, int whole_rows);

/* hessian_z.c */
/* HESSIAN: checks alpha, allocates H (every element 1). */
dz_status dz_hz_create(dz_pipeline *p, dz_error *err);
void dz_hz_free(dz_pipeline *p);
/* The span kernel of HESSIAN, as dz_sz_span's (any tensor, any span). */
void dz_hz_span(const dz_pipeline *p, int id, uint64_t i0, size_t n, void *th, float *wp, float *wm,
                const dz_zo_update *u);

/* pipeline.c: the floats of the -eps rows cache: the forward's row_floats, or 0 for a
 * model without a global block (an adapter, whose global rows are the base's). */
size_t dz_pipeline_row_floats(const dz_model *m, const dz_forward *f);

/* hessian_factors.c (HiZOO-L) */
/* Whether tensor t's H is kept as rank-1 factors (factored and 2-D). */
int dz_hz_factored(const dz_param *t, int factored);
/* Floats of tensor t's curvature state: rows + cols + 1 factored, else one an element. */
size_t dz_hz_tensor_floats(const dz_param *t, int factored);
/* The column sums' room: cols doubles per factored tensor. */
size_t dz_hz_colsum_count(const dz_param_table *t, int factored);
/* out[k] = H of elements i0 + k (k < n) of factored tensor id. */
void dz_hz_expand(const dz_pipeline *p, int id, uint64_t i0, size_t n, float *out);
/* The pending update's move of every factored tensor's factors (before any span of it is
 * updated: the update and the perturbations after it read the new factors). */
void dz_hz_refactor(dz_pipeline *p);

/* pipeline.c: dz_pipeline_planned_bytes with the forward's row_floats. */
size_t dz_res_bytes(const dz_model *m, size_t row_floats, const dz_store *s, int stream_globals);

/* resident.c */
/* Uploads every tensor's masters into a buffer of p->be (refusing what resident mode does
 * not do yet); dz_res_free frees them. */
dz_status dz_res_create(dz_pipeline *p, dz_error *err);
/* Tensor id's masters stream through a slot (a layer's, under the cap). */
int dz_res_streamed(const dz_pipeline *p, int id);
size_t dz_res_tensor_bytes(const dz_pipeline *p, int id);

/* device_stream.c */
/* Resident mode or streaming under max_device_bytes (0: resident), or the refusal. */
dz_status dz_dev_choose(dz_pipeline *p, const dz_forward *f, size_t max_device_bytes, dz_error *err);
/* One slot: tensor id's elements [i0, i0+n) into the slot, theta[id] pointing there. */
void dz_dev_stream_in(dz_pipeline *p, int id, uint64_t i0, size_t n);
/* One slot: the same range back into the model's memory (the update is in it). */
void dz_dev_stream_out(dz_pipeline *p, int id, uint64_t i0, size_t n);
/* Two slots: layer l's pass (dz_res_pass's arguments) overlapped with the upload of layer
 * l + 1, its write-back issued behind it. */
void dz_dev_overlapped_pass(dz_pipeline *p, int l, float *const pair[2], int apply);
/* Two slots: issues layer l's upload now (none past the last layer; one slot: nothing), so
 * that it overlaps what comes before its pass. */
void dz_dev_prefetch(dz_pipeline *p, int l);
/* Two slots: pins the layer masters' host range (a failure leaves them unpinned), and the
 * end: every lane drained, the range unpinned. */
void dz_dev_pin(dz_pipeline *p);
void dz_dev_drain(dz_pipeline *p, int unpin);
/* Layers pass through the transfer lanes (two slots, or a node's sliced upload). */
static inline int dz_dev_lanes(const dz_pipeline *p) { return p->res.slots == 2 || p->res.node.sliced; }
void dz_res_free(dz_pipeline *p);
/* Downloads the masters into the model's tensors if an update reached them since (a node's
 * ranks: each its slice, between node barriers). */
dz_status dz_res_sync_host(dz_pipeline *p, dz_error *err);

/* device_store.c: a disk store behind a device backend */
/* The layer masters are in a store (the model holds no layer tensor). */
int dz_dev_layers_in_store(const dz_pipeline *p);
/* dz_pipeline_use_store with a device backend. */
dz_status dz_dev_use_store(dz_pipeline *p, dz_store *s, dz_error *err);
/* Around a pass over streamed layer l: its block read from the store into the staging
 * buffer, and (written) the staging buffer written back; a failure is kept in p->res. */
void dz_dev_store_read(dz_pipeline *p, int l);
void dz_dev_store_write(dz_pipeline *p, int l);
/* Two slots: layer l's block read from the store into slot s's upload staging, after the
 * staging's last upload; the address of run r there (wb 0) or in slot s's write-back staging
 * (wb 1); before a write-back into slot s's staging, the block that waits there written to
 * the store; and every such block written (the end of a walk over the layers). */
void dz_dev_store_stage(dz_pipeline *p, int l, int s);
void *dz_dev_stage_at(const dz_pipeline *p, int s, int wb, const span *r);
void dz_dev_store_write_waiting(dz_pipeline *p, int s);
void dz_dev_store_settle(dz_pipeline *p);
/* The first failure of the passes' store reads and writes (DZ_OK: none), cleared. */
dz_status dz_dev_store_status(dz_pipeline *p, dz_error *err);

/* device_node.c */
/* A node's ranks on a device backend (dz_pipeline_share_node with p->res.on). */
dz_status dz_dev_share_node(dz_pipeline *p, const dz_pipeline_node *node, dz_error *err);
/* Layer l's masters in host memory: [*base, *base + bytes), padding between tensors included
 * (the model's arena aligns each tensor): the block a node's sliced upload carries. */
size_t dz_dev_layer_host(const dz_pipeline *p, int l, const char **base);
/* This rank's slice of n bytes: its length, at *off (alone: all of them). */
size_t dz_dev_node_slice(const dz_pipeline *p, size_t n, size_t *off);
/* Spans [first, last) of a block, one op per tensor from this thread: the pending update
 * (pair NULL) or the fill of pair (w+, w-), the update fused in when apply is set. */
void dz_res_pass(dz_pipeline *p, int first, int last, float *const pair[2], int apply);
/* The run of spans of one tensor starting at span a (before last), merged into whole; returns
 * the span after it. */
int dz_res_run(const dz_pipeline *p, int a, int last, span *whole);
/* dz_res_pass's op on one run, its masters where dz_ws_theta_at says. */
void dz_res_run_op(dz_pipeline *p, const span *whole, float *const pair[2], int apply);

/* checksum.c: a span's bytes hashed, keyed by its index k. */
uint64_t dz_hash_span(const unsigned char *bytes, size_t n, uint64_t k);

#endif
