/* ZO2 on a device under --max-device-memory: when every master does not fit in the
 * device's memory beside the working copies and the forward's buffers, the layer masters
 * stay in the model's (host) memory and each pass over a layer streams it through one
 * device buffer, the slot: its masters are uploaded, the same ZO op as resident mode runs
 * on them (the pending update fused with the fill of w+/w-), and where the update landed
 * the updated masters are downloaded back (written back). The global block stays resident.
 *
 * Written back, not re-applied on the host from the seed: the device's op computes the
 * update once and the host copy receives those bits, so a streamed run equals the resident
 * run and the CPU's replay bitwise, and the host spends no time redrawing z. The transfers
 * are the backend's upload and download, issued in order with its ops (correct on any
 * device backend; the overlap of upload, compute and write-back on three streams is not
 * built yet: docs/CUDA.md). */
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
    b.work = dz_pipeline_bytes_for(t, dz_forward_row_floats(f));
    b.forward = dz_forward_bytes(f);
    return b;
}

dz_status dz_dev_choose(dz_pipeline *p, const dz_forward *f, size_t max_device_bytes, dz_error *err) {
    p->res.stream = 0;
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
    dz_log(DZ_LOG_INFO, "--max-device-memory %.2f MB: every master resident needs %.2f MB on --backend %s; the "
           "layer masters stay in host memory and stream through it (%.2f MB)", mb(max_device_bytes),
           mb(dz_pipeline_device_resident(&b)), p->be->name, mb(dz_pipeline_device_streamed(&b)));
    return DZ_OK;
}

static size_t elem_bytes(const dz_pipeline *p) { return dz_dtype_size(dz_model_dtype(p->m)); }

void dz_dev_stream_in(dz_pipeline *p, int id, uint64_t i0, size_t n) {
    p->res.theta[id] = (char *)p->res.slot + p->ws.tensor_off[id] * elem_bytes(p);
    p->be->ops->upload(p->be, dz_ws_theta_at(p, id, i0), dz_ws_host_at(p, id, i0), n * elem_bytes(p));
}

void dz_dev_stream_out(dz_pipeline *p, int id, uint64_t i0, size_t n) {
    p->be->ops->download(p->be, dz_ws_host_at(p, id, i0), dz_ws_theta_at(p, id, i0), n * elem_bytes(p));
}
