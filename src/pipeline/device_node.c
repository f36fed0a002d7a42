/* A node's ranks on device backends (docs/CUDA.md, "Several GPUs"): the masters' host copy
 * is the node-shared memory the node's ranks load once (src/run/setup.c, share_masters),
 * and each rank's device (its own GPU) holds its own copy of what it computes on. Every
 * rank runs every ZO op on its device, where the CPU's node ranks split the spans: z
 * depends on the element index alone, so the devices hold the same bits, and nothing but
 * the host copy is shared.
 *
 * The host copy is written by slices: of every range written back, rank r writes bytes
 * [r c, (r + 1) c), c = ceil(bytes / n) (the slicing of DistZO2's sliced upload,
 * backend/cuda/sliced_upload.c, which these must match). So:
 *  - resident: a flush downloads each rank's slice of every tensor, between node barriers
 *    (nobody still reads the old copy, nobody reads before every slice is in);
 *  - streamed (--max-device-memory): each layer reaches every GPU of the node by the sliced
 *    upload (the backend's upload_node: this GPU uploads slice r of the layer's host range
 *    from the pinned node-shared memory, an all-gather over NCCL brings the others), and
 *    each GPU writes back only its slice r. A rank reads and writes only its own slice of
 *    the host copy during the steps, ordered on its own device by the slot's marks, so the
 *    steps need no barrier. Without a node group (a backend with no upload_node, or GPUs
 *    not one per rank) streaming is refused: whole uploads by every rank would read the
 *    slices other ranks write back at any time. */
#include <stdint.h>

#include "backend/stream_ops.h"
#include "distzo/log.h"
#include "pipeline/internal.h"

static double mb(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

size_t dz_dev_node_slice(const dz_pipeline *p, size_t n, size_t *off) {
    const res_node *nd = &p->res.node;
    if (nd->n <= 1) {
        *off = 0;
        return n;
    }
    const size_t c = (n + (size_t)nd->n - 1) / (size_t)nd->n, lo = (size_t)nd->rank * c < n ? (size_t)nd->rank * c : n;
    *off = lo;
    return n - lo > c ? c : n - lo;
}

size_t dz_dev_layer_host(const dz_pipeline *p, int l, const char **base) {
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int r = 0; r < DZ_L_COUNT; r++) {
        const int id = p->ws.layer_ids[l][r];
        if (id < 0) continue;
        const uintptr_t a = (uintptr_t)dz_model_tensor(p->m, id);
        if (a < lo) lo = a;
        if (a + dz_res_tensor_bytes(p, id) > hi) hi = a + dz_res_tensor_bytes(p, id);
    }
    *base = (const char *)lo;
    return hi > lo ? hi - lo : 0;
}

/* Streaming on a node: the slots sized for the sliced upload (the largest layer's host range
 * rounded up to a multiple of the GPUs, NCCL's equal counts) and laid out as the host range. */
static dz_status node_slots(dz_pipeline *p, int gpus, dz_error *err) {
    size_t cap = 0;
    const char *base;
    for (int l = 0; l < dz_model_config(p->m)->n_layers; l++) {
        const size_t b = dz_dev_layer_host(p, l, &base);
        if (b > cap) cap = b;
    }
    cap = (cap + (size_t)gpus - 1) / (size_t)gpus * (size_t)gpus;
    for (int s = 0; s < p->res.slots; s++) {
        p->be->ops->free(p->be, p->res.slot[s]);
        p->res.slot[s] = p->be->ops->alloc(p->be, cap);
        p->res.held[s] = -1;
        if (!p->res.slot[s])
            return dz_fail(err, DZ_ERR_NOMEM, "zo: --backend %s: no memory for a layer's masters (%zu bytes)",
                           p->be->name, cap);
    }
    if (!p->res.pinned) dz_dev_pin(p);
    dz_log(DZ_LOG_INFO, "--backend %s, %d GPUs on the node: each uploads 1/%d of every layer (%.2f MB of %.2f MB "
           "at most) from the pinned node-shared masters and an all-gather brings the rest (DistZO2)",
           p->be->name, gpus, gpus, mb(cap / (size_t)gpus), mb(cap));
    return DZ_OK;
}

dz_status dz_dev_share_node(dz_pipeline *p, const dz_pipeline_node *node, dz_error *err) {
    const dz_stream_ops *so = p->be->streams;
    int rank = 0;
    const int gpus = so && so->node_gpus ? so->node_gpus(p->be, &rank) : 1;
    if (p->res.stream && (gpus != node->n_slices || rank != node->slice))
        return dz_fail(err, DZ_ERR_UNSUPPORTED, "zo: --max-device-memory with %d ranks on a node: the layers stream "
                       "from the node-shared masters by DistZO2's sliced upload, which needs the node's GPUs in one "
                       "NCCL group, one GPU per rank (--backend cuda without --share-gpus); --backend %s %s",
                       node->n_slices, p->be->name, gpus > 1 ? "is in a group of another shape" : "has none");
    p->res.node = (res_node){.rank = node->slice, .n = node->n_slices, .sliced = p->res.stream,
                             .barrier = node->barrier, .ctx = node->ctx};
    return p->res.stream ? node_slots(p, gpus, err) : DZ_OK;
}

/* The host copy's slices, between node barriers. */
static void download_slice(dz_pipeline *p, int id) {
    size_t off = 0;
    const size_t len = dz_dev_node_slice(p, dz_res_tensor_bytes(p, id), &off);
    if (len) p->be->ops->download(p->be, (char *)dz_model_tensor(p->m, id) + off, (char *)p->res.theta[id] + off, len);
}

dz_status dz_res_sync_host(dz_pipeline *p, dz_error *err) {
    if (!p->res.on) return DZ_OK;
    dz_dev_drain(p, 0); /* the streamed layers' write-backs land */
    const res_node *nd = &p->res.node;
    if (!p->res.stale) return DZ_OK; /* no update, so no write-back either, since the last sync */
    /* a node: every rank's write-backs in before anyone reads; and nobody still reads the old copy */
    dz_status st = nd->n > 1 ? nd->barrier(nd->ctx, err) : DZ_OK;
    for (int id = 0; st == DZ_OK && p->res.stale && id < dz_model_params(p->m)->count; id++)
        if (!dz_res_streamed(p, id)) download_slice(p, id); /* a streamed layer's host copy is current */
    p->res.stale = 0;
    return st == DZ_OK && nd->n > 1 ? nd->barrier(nd->ctx, err) : st;
}
