/* A disk store behind a device backend (--store disk with --backend ref or cuda): the layer
 * masters stay in the store and stream through the device. Each pass over a layer reads
 * its block from the store into a host staging buffer (the store's layout: its tensors
 * packed), uploads it into a slot, runs the same ZO op as resident mode and every other
 * streamed mode (the pending update fused with w+/w- of the new draw), and where the update
 * landed downloads the block into staging and writes it back to the store: written back,
 * not re-applied from the seed, as the CPU's disk store does, so the bits are --store ram's
 * on the same backend. The global block stays resident on the device, from the model's
 * memory (where it must be: a global block streamed from the store too is refused).
 *
 * One slot (a backend without be->streams, or two slots over --max-device-memory): the
 * transfers in order with the ops, through one staging block. Two slots (the CUDA
 * instance): device_stream.c's overlap, with four pinned staging blocks, two per slot: the
 * store read of layer l+1 into slot s's upload staging (the host first settles the
 * staging's last upload, mark UP + s) runs while layer l computes; the write-back of layer
 * l downloads into slot s's write-back staging on WRITEBACK, and the host writes that block
 * to the store later, after settling its mark WB + s: before the next write-back into the
 * same staging, and at the end of every walk over the layers (the last layer's pass), so
 * whoever reads the store next (the next step, evaluation, a checksum) reads it updated.
 * Separate staging for the two directions keeps the host's settles from ordering a slot's
 * next upload after its last op and write-back: the lanes' waits alone do that, as in
 * host-memory streaming (test_pipeline drops each and sees the race). The store's I/O
 * thread is not used; evaluation and checksums read the store as on the CPU (io.store). */
#include "backend/stream_ops.h"
#include "core/util.h"
#include "pipeline/internal.h"

int dz_dev_layers_in_store(const dz_pipeline *p) {
    const dz_param_table *t = dz_model_params(p->m);
    const int n_layers = dz_model_config(p->m)->n_layers;
    for (int id = 0; id < t->count; id++)
        if (t->params[id].block < n_layers && !dz_model_tensor(p->m, id)) return 1;
    return 0;
}

dz_status dz_dev_use_store(dz_pipeline *p, dz_store *s, dz_error *err) {
    if (!p->res.stream) /* dz_dev_choose streams the layers when the model holds none */
        return dz_fail(err, DZ_ERR_INVALID, "zo: --backend %s: the layer masters are not streamed from the store",
                       p->be->name);
    size_t block = 1;
    for (int l = 0; l < p->ws.n_blocks - 1; l++)
        if (dz_store_block_bytes(s, l) > block) block = dz_store_block_bytes(s, l);
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m)), stages = p->res.slots == 2 ? 4 : 1;
    if (!(p->res.staging = dz_alloc(stages * block)) || !(p->io.chunk = dz_alloc((size_t)GCHUNK_SPANS * SPAN * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the disk store's staging buffers (%zu bytes)",
                       stages * block);
    p->res.stage_bytes = block;
    p->res.unwritten[0] = p->res.unwritten[1] = -1;
    /* pinned for the asynchronous copies; unpinned (dz_dev_drain) before it is freed */
    if (stages == 4 && !p->res.pinned && p->be->streams->pin(p->be, p->res.staging, stages * block) == 0)
        p->res.pinned = p->res.staging;
    p->io.store = s;
    p->bytes = dz_res_bytes(p->m, p->rows.row_floats, s, 0) + stages * block +
               dz_pipeline_shape_bytes_for(dz_model_params(p->m), &p->z);
    return DZ_OK;
}

static void keep(dz_pipeline *p, dz_status st, const dz_error *err) {
    if (st != DZ_OK && !p->res.failed) p->res.failed = 1, p->res.err = *err;
}

void dz_dev_store_read(dz_pipeline *p, int l) {
    dz_error err = {0};
    keep(p, dz_store_read_range(p->io.store, l, 0, dz_store_block_bytes(p->io.store, l), p->res.staging, &err), &err);
}

void dz_dev_store_write(dz_pipeline *p, int l) {
    dz_error err = {0};
    keep(p, dz_store_write_range(p->io.store, l, 0, dz_store_block_bytes(p->io.store, l), p->res.staging, &err), &err);
}

/* ---- two slots ---- */

static char *stage(const dz_pipeline *p, int s, int wb) {
    return p->res.staging + (size_t)(2 * s + wb) * p->res.stage_bytes;
}

void *dz_dev_stage_at(const dz_pipeline *p, int s, int wb, const span *r) {
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    return stage(p, s, wb) + dz_store_tensor_offset_in_block(p->io.store, r->id) + r->i0 * esz;
}

void dz_dev_store_write_waiting(dz_pipeline *p, int s) {
    const int l = p->res.unwritten[s];
    if (l < 0) return;
    p->be->streams->settle(p->be, DZ_DEV_MARK_WB + s); /* its download has landed */
    dz_error err = {0};
    keep(p, dz_store_write_range(p->io.store, l, 0, dz_store_block_bytes(p->io.store, l), stage(p, s, 1), &err), &err);
    p->res.unwritten[s] = -1;
}

void dz_dev_store_settle(dz_pipeline *p) {
    for (int s = 0; s < 2; s++) dz_dev_store_write_waiting(p, s);
}

void dz_dev_store_stage(dz_pipeline *p, int l, int s) {
    for (int w = 0; w < 2; w++) /* a walk cut short left layer l's update unwritten: the store first */
        if (p->res.unwritten[w] == l) dz_dev_store_write_waiting(p, w);
    p->be->streams->settle(p->be, DZ_DEV_MARK_UP + s); /* the staging's last upload has read it */
    dz_error err = {0};
    keep(p, dz_store_read_range(p->io.store, l, 0, dz_store_block_bytes(p->io.store, l), stage(p, s, 0), &err), &err);
}

dz_status dz_dev_store_status(dz_pipeline *p, dz_error *err) {
    if (!p->res.failed) return DZ_OK;
    p->res.failed = 0;
    *err = p->res.err;
    return err->code ? err->code : DZ_ERR_IO;
}
