/* A disk store behind a device backend (--store disk with --backend ref or cuda): the layer
 * masters stay in the store and stream through the device. Each pass over a layer reads
 * its block from the store into a host staging buffer (the store's layout: its tensors
 * packed), uploads it into the device's one slot, runs the same ZO op as resident mode and
 * every other streamed mode (the pending update fused with w+/w- of the new draw), and
 * where the update landed downloads the block into the staging buffer and writes it back
 * to the store: written back, not re-applied from the seed, as the CPU's disk store does,
 * so the bits are --store ram's on the same backend. The global block stays resident on the
 * device, from the model's memory (where it must be: a global block streamed from the
 * store too is refused).
 *
 * One slot, transfers in order with the ops, on every device backend: the store's reads
 * and writes are the host's, and overlapping them with the device (the CPU store's I/O
 * thread, the CUDA instance's lanes) is not built. The store's I/O thread is not used;
 * evaluation and checksums read the store as on the CPU (io.store). */
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
    if (!p->res.stream || p->res.slots != 1) /* dz_dev_choose streams the layers when the model holds none */
        return dz_fail(err, DZ_ERR_INVALID, "zo: --backend %s: the layer masters are not streamed from the store",
                       p->be->name);
    size_t block = 0;
    for (int l = 0; l < p->ws.n_blocks - 1; l++)
        if (dz_store_block_bytes(s, l) > block) block = dz_store_block_bytes(s, l);
    const size_t esz = dz_dtype_size(dz_model_dtype(p->m));
    if (!(p->res.staging = dz_alloc(block ? block : 1)) || !(p->io.chunk = dz_alloc((size_t)GCHUNK_SPANS * SPAN * esz)))
        return dz_fail(err, DZ_ERR_NOMEM, "zo: cannot allocate the disk store's staging buffer (%zu bytes)", block);
    p->io.store = s;
    p->bytes = dz_res_bytes(p->m, p->rows.row_floats, s, 0) + block + dz_pipeline_shape_bytes_for(dz_model_params(p->m), &p->z);
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

dz_status dz_dev_store_status(dz_pipeline *p, dz_error *err) {
    if (!p->res.failed) return DZ_OK;
    p->res.failed = 0;
    *err = p->res.err;
    return err->code ? err->code : DZ_ERR_IO;
}
