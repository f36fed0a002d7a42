/* ZO2 on a device under --max-device-memory: when every master does not fit in the
 * device's memory beside the working copies and the forward's buffers, the layer masters
 * stay in the model's (host) memory and each pass over a layer streams it through a device
 * buffer, a slot: its masters are uploaded, the same ZO op as resident mode runs on them
 * (the pending update fused with the fill of w+/w-), and where the update landed the
 * updated masters are downloaded back (written back). The global block stays resident.
 *
 * Written back, not re-applied on the host from the seed: the device's op computes the
 * update once and the host copy receives those bits, so a streamed run equals the resident
 * run and the CPU's replay bitwise, and the host spends no time redrawing z.
 *
 * Two slots where the backend overlaps its transfers (be->streams: the CUDA instance) and
 * both fit under the cap: layer l uses slot l % 2; its pass issues the upload of layer l+1
 * on the UPLOAD lane, its op on COMPUTE and its write-back on WRITEBACK, ordered by marks:
 * the op waits for its slot's upload, the write-back for the op, and the next upload into a
 * slot for the slot's last op and last write-back. A layer is always written back from the
 * same slot, so that last write-back also orders the next upload of this layer's host
 * masters after the write-back that changed them. Otherwise one slot, the transfers being
 * the backend's upload and download in order with its ops (any device backend). A disk
 * store's layers take the same two slots, through host staging (device_store.c). */
#include <stdint.h>

#include "backend/stream_ops.h"
#include "distzo/log.h"
#include "pipeline/internal.h"

static double mb(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

dz_pipeline_device_bytes dz_pipeline_device_need(const dz_model *m, const dz_forward *f) {
    const dz_param_table *t = dz_model_params(m);
    const size_t dts = dz_dtype_size(dz_model_dtype(m));
    const int n_layers = dz_model_config(m)->n_layers;
    dz_pipeline_device_bytes b = {0};
    for (int id = 0; id < t->count; id++) {
        const size_t n = (size_t)dz_param_numel(&t->params[id]) * dts;
        b.masters += n;
        if (t->params[id].block >= n_layers) b.globals += n;
    }
    b.layer = dz_ws_max_layer_floats(t) * dts;
    b.work = dz_pipeline_bytes_for(t, dz_pipeline_row_floats(m, f));
    b.forward = dz_forward_bytes(f);
    return b;
}

/* The layer masters in a disk store: streamed whatever the cap (within it), through two
 * slots where the backend overlaps its transfers and both fit (device_store.c). */
static dz_status choose_store(dz_pipeline *p, const dz_forward *f, size_t max_device_bytes, dz_error *err) {
    const dz_pipeline_device_bytes b = dz_pipeline_device_need(p->m, f);
    const size_t need = dz_pipeline_device_streamed(&b), two = dz_pipeline_device_streamed_slots(&b, 2);
    if (max_device_bytes && need > max_device_bytes)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --max-device-memory %.2f MB: streaming the layers from the disk store "
                       "needs %.2f MB on --backend %s: the global block's masters %.2f MB, one layer's masters %.2f MB, "
                       "the working copies %.2f MB, the forward's buffers %.2f MB", mb(max_device_bytes), mb(need),
                       p->be->name, mb(b.globals), mb(b.layer), mb(b.work), mb(b.forward));
    p->res.stream = 1;
    p->res.slots = p->be->streams && (!max_device_bytes || two <= max_device_bytes) ? 2 : 1;
    dz_log(DZ_LOG_INFO, "--store disk with --backend %s: the layer masters stay in the store; each pass reads a layer, "
           "uploads it into a slot and writes it back (%.2f MB on the device, %s)", p->be->name,
           mb(dz_pipeline_device_streamed_slots(&b, p->res.slots)),
           p->res.slots == 2 ? "two slots: store reads, upload, compute and write-back overlapped"
           : p->be->streams  ? "one slot: the overlap's two do not fit, transfers in order with compute"
                             : "one slot, transfers in order with compute");
    return DZ_OK;
}

dz_status dz_dev_choose(dz_pipeline *p, const dz_forward *f, size_t max_device_bytes, dz_error *err) {
    p->res.stream = 0;
    if (!p->be->host_buffers && dz_dev_layers_in_store(p)) return choose_store(p, f, max_device_bytes, err);
    if (!max_device_bytes) return DZ_OK;
    if (p->be->host_buffers)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --max-device-memory caps a device backend's memory; --backend %s "
                       "computes in host memory", p->be->name);
    const dz_pipeline_device_bytes b = dz_pipeline_device_need(p->m, f);
    if (dz_pipeline_device_resident(&b) <= max_device_bytes) return DZ_OK; /* resident: nothing moves per step */
    if (dz_pipeline_device_streamed(&b) > max_device_bytes)
        return dz_fail(err, DZ_ERR_INVALID, "zo: --max-device-memory %.2f MB: even streaming the layers needs %.2f MB "
                       "on --backend %s: the global block's masters %.2f MB, one layer's masters %.2f MB, the "
                       "working copies %.2f MB, the forward's buffers %.2f MB",
                       mb(max_device_bytes), mb(dz_pipeline_device_streamed(&b)), p->be->name, mb(b.globals),
                       mb(b.layer), mb(b.work), mb(b.forward));
    p->res.stream = 1;
    const size_t two = dz_pipeline_device_streamed_slots(&b, 2);
    p->res.slots = p->be->streams && two <= max_device_bytes ? 2 : 1;
    dz_log(DZ_LOG_INFO, "--max-device-memory %.2f MB: every master resident needs %.2f MB on --backend %s; the "
           "layer masters stay in host memory and stream through it (%.2f MB, %s)", mb(max_device_bytes),
           mb(dz_pipeline_device_resident(&b)), p->be->name, mb(dz_pipeline_device_streamed_slots(&b, p->res.slots)),
           p->res.slots == 2    ? "two slots: upload, compute and write-back overlapped"
           : p->be->streams     ? "one slot: the overlap's two do not fit, transfers in order with compute"
                                : "one slot, transfers in order with compute");
    return DZ_OK;
}

static size_t elem_bytes(const dz_pipeline *p) { return dz_dtype_size(dz_model_dtype(p->m)); }

void dz_dev_stream_in(dz_pipeline *p, int id, uint64_t i0, size_t n) {
    p->res.theta[id] = (char *)p->res.slot[0] + p->ws.tensor_off[id] * elem_bytes(p);
    p->be->ops->upload(p->be, dz_ws_theta_at(p, id, i0), dz_ws_host_at(p, id, i0), n * elem_bytes(p));
}

void dz_dev_stream_out(dz_pipeline *p, int id, uint64_t i0, size_t n) {
    p->be->ops->download(p->be, dz_ws_host_at(p, id, i0), dz_ws_theta_at(p, id, i0), n * elem_bytes(p));
}

/* ---- two slots, overlapped (backend/stream_ops.h) ---- */

/* Where run r of a layer lies in slot s: the working copies' layout, or on a node the layer's
 * host range's (what the sliced upload carries, padding included). */
static void *slot_at(const dz_pipeline *p, int s, const span *r) {
    if (!p->res.node.sliced) return (char *)p->res.slot[s] + (p->ws.tensor_off[r->id] + r->i0) * elem_bytes(p);
    const char *base;
    dz_dev_layer_host(p, dz_model_params(p->m)->params[r->id].block, &base);
    return (char *)p->res.slot[s] + ((const char *)dz_ws_host_at(p, r->id, r->i0) - base);
}

/* Layer l's masters into slot l % slots on UPLOAD, after the slot's last op and write-back:
 * on a node, by the sliced upload (this GPU's slice, an all-gather the rest). */
static void upload_layer(dz_pipeline *p, int l) {
    const dz_stream_ops *so = p->be->streams;
    const int s = l % p->res.slots, last = p->ws.block_first_span[l + 1];
    if (p->res.held[s] == l) return;
    so->wait(p->be, DZ_LANE_UPLOAD, DZ_DEV_MARK_DONE + s);
    so->wait(p->be, DZ_LANE_UPLOAD, DZ_DEV_MARK_WB + s);
    if (p->io.store) dz_dev_store_stage(p, l, s); /* a disk store's block, into the slot's upload staging */
    if (p->res.node.sliced) {
        const char *base;
        const size_t bytes = dz_dev_layer_host(p, l, &base);
        so->upload_node(p->be, p->res.slot[s], base, bytes);
    }
    for (int a = p->ws.block_first_span[l], b; !p->res.node.sliced && a < last; a = b) {
        span r;
        b = dz_res_run(p, a, last, &r);
        const void *src = p->io.store ? dz_dev_stage_at(p, s, 0, &r) : dz_ws_host_at(p, r.id, r.i0);
        so->upload_async(p->be, slot_at(p, s, &r), src, r.n * elem_bytes(p));
    }
    so->mark(p->be, DZ_DEV_MARK_UP + s, DZ_LANE_UPLOAD);
    p->res.held[s] = l;
}

void dz_dev_prefetch(dz_pipeline *p, int l) {
    if (p->res.slots == 2 && l < dz_model_config(p->m)->n_layers) upload_layer(p, l);
}

/* The updated layer l back into host memory from slot s: on a node, this rank's slice; with
 * a disk store, into the slot's write-back staging (the block waiting there first goes to
 * the store), written to the store later (device_store.c). */
static void write_back(dz_pipeline *p, int l, int s) {
    const dz_stream_ops *so = p->be->streams;
    const int first = p->ws.block_first_span[l], last = p->ws.block_first_span[l + 1];
    if (p->io.store) {
        dz_dev_store_write_waiting(p, s);
        p->res.unwritten[s] = l;
    }
    if (p->res.node.sliced) {
        const char *base;
        size_t off = 0;
        const size_t len = dz_dev_node_slice(p, dz_dev_layer_host(p, l, &base), &off);
        if (len) so->download_async(p->be, (char *)base + off, (char *)p->res.slot[s] + off, len);
        return;
    }
    for (int a = first, b; a < last; a = b) {
        span r;
        b = dz_res_run(p, a, last, &r);
        void *dst = p->io.store ? dz_dev_stage_at(p, s, 1, &r) : dz_ws_host_at(p, r.id, r.i0);
        so->download_async(p->be, dst, slot_at(p, s, &r), r.n * elem_bytes(p));
    }
}

void dz_dev_overlapped_pass(dz_pipeline *p, int l, float *const pair[2], int apply) {
    const dz_stream_ops *so = p->be->streams;
    const int s = l % p->res.slots, first = p->ws.block_first_span[l], last = p->ws.block_first_span[l + 1];
    upload_layer(p, l);
    dz_dev_prefetch(p, l + 1); /* overlaps this layer's op */
    so->wait(p->be, DZ_LANE_COMPUTE, DZ_DEV_MARK_UP + s);
    for (int a = first, b; a < last; a = b) {
        span r;
        b = dz_res_run(p, a, last, &r);
        p->res.theta[r.id] = (char *)slot_at(p, s, &r) - r.i0 * elem_bytes(p);
        dz_res_run_op(p, &r, pair, apply);
    }
    so->mark(p->be, DZ_DEV_MARK_DONE + s, DZ_LANE_COMPUTE);
    p->res.held[s] = -1; /* the op changed it: the next pass over layer l uploads it again */
    if (!pair || apply) { /* an update landed: write it back */
        so->wait(p->be, DZ_LANE_WRITEBACK, DZ_DEV_MARK_DONE + s);
        write_back(p, l, s);
        so->mark(p->be, DZ_DEV_MARK_WB + s, DZ_LANE_WRITEBACK);
    }
    if (p->io.store && l == dz_model_config(p->m)->n_layers - 1) dz_dev_store_settle(p); /* the walk's end */
}

void dz_dev_pin(dz_pipeline *p) {
    const dz_param_table *t = dz_model_params(p->m);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int id = 0; id < t->count; id++)
        if (dz_res_streamed(p, id)) {
            const uintptr_t a = (uintptr_t)dz_model_tensor(p->m, id);
            if (a < lo) lo = a;
            if (a + dz_res_tensor_bytes(p, id) > hi) hi = a + dz_res_tensor_bytes(p, id);
        }
    if (hi <= lo) return;
    /* the model's arena holds the tensors in table order: the layers' range is one piece of it */
    if (p->be->streams->pin(p->be, (void *)lo, hi - lo) == 0) {
        p->res.pinned = (void *)lo;
        return;
    }
    dz_log(DZ_LOG_INFO, "--backend %s: the layer masters (%.2f MB) could not be pinned; their copies run from "
           "pageable memory", p->be->name, mb(hi - lo));
}

void dz_dev_drain(dz_pipeline *p, int unpin) {
    if (!dz_dev_lanes(p)) return;
    p->be->streams->drain(p->be);
    if (unpin && p->res.pinned) p->be->streams->unpin(p->be, p->res.pinned);
    if (unpin) p->res.pinned = NULL;
}
