/* ZO2 streaming over a node's GPUs with DistZO2's sliced upload (docs/CUDA.md, "Several
 * GPUs"), in real runs of the engine: under mpirun (tests/cli/node_stream.sh: 2 and 3 ranks
 * on one node) every rank is one GPU, played by a host seam (CUDA instance over
 * dz_cuda_seam_host_create_device(node rank)), the masters are node-shared host memory as
 * setup's share_masters makes them, the node's NCCL group is joined as setup joins it
 * (dz_gpu_group_join_backend) and the cross-process all-gathers go through an exchange over
 * MPI (dz_cuda_seam_host_set_exchange). Each rank checks, against a run it makes alone on
 * its own host seam (one GPU, whole uploads) with the same seed and batch:
 *  - losses and g of every step, and every master byte of the node-shared host copy after
 *    the flush (which every rank wrote a slice of), bitwise;
 *  - every upload from a layer's host range is exactly this rank's slice of it, bytes
 *    [r c, min(B, (r + 1) c)), c = ceil(B / N), B the layer's host range (so at most
 *    ceil(B / N)), and summed over the node's ranks each layer pass carries B bytes; the
 *    run alone carries every layer whole;
 *  - the seam met no race, overrun or early read;
 *  - with the op's wait for its slot's upload (the all-gather) dropped, or the upload's
 *    wait for the slot's last write-back, the seam reports DZ_CUDA_ERR_HAZARD on every rank.
 * Two slots (overlapped) on both models, and one slot (a cap below two slots' need) on OPT
 * with bf16 masters. Alone (one rank) it checks the same against itself: a node of one uploads whole layers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/stream_ops.h"
#include "distzo/zo.h"
#include "golden.h"
#include "next_token_batch.h"
#include "parallel/comm.h"
#include "parallel/gpu_group.h"
#include "pipeline/pipeline.h"

enum { STEPS = 3, LAYERS = 3, MAX_LAYERS = 8 };
static const float LR = 2e-3f;
static dz_comm *comm;

/* ---- the exchange across processes: a node sum of u64 words (one contributor per byte) -- */

static int exchange(void *ctx, unsigned char *all, size_t count, int nranks, int rank) {
    (void)rank;
    const size_t bytes = count * (size_t)nranks, words = (bytes + 7) / 8;
    uint64_t *w = calloc(words ? words : 1, sizeof *w);
    if (!w) return 1;
    memcpy(w, all, bytes);
    dz_error err;
    const dz_status st = dz_comm_node_sum_u64(ctx, w, words, &err); /* disjoint bytes: the sum is their union */
    memcpy(all, w, bytes);
    free(w);
    return st != DZ_OK;
}

/* ---- the uploads from the layers' host ranges, counted on the seam ------------------------ */

typedef struct layer_range {
    uintptr_t lo, hi;
} layer_range;

static struct {
    int on, n_layers;
    layer_range layer[MAX_LAYERS];
    size_t copies[MAX_LAYERS], bytes[MAX_LAYERS];
    int bad;         /* a copy that is not this rank's slice */
    char msg[200];
} g_count;
static int (*g_inner_memcpy)(dz_cuda_seam *, void *, const void *, size_t, dz_cuda_copy, dz_cuda_stream);

static size_t slice_of(size_t block, int n, int rank, size_t *off) {
    const size_t c = (block + (size_t)n - 1) / (size_t)n, lo = (size_t)rank * c < block ? (size_t)rank * c : block;
    *off = lo;
    return block - lo > c ? c : block - lo;
}

static int counting_memcpy(dz_cuda_seam *s, void *dst, const void *src, size_t n, dz_cuda_copy kind,
                           dz_cuda_stream st) {
    for (int l = 0; g_count.on && kind == DZ_COPY_H2D && l < g_count.n_layers; l++) {
        const layer_range *r = &g_count.layer[l];
        if ((uintptr_t)src < r->lo || (uintptr_t)src >= r->hi) continue;
        g_count.copies[l]++, g_count.bytes[l] += n;
        size_t off = 0;
        const size_t want = slice_of(r->hi - r->lo, g_count.on, dz_comm_node_rank(comm), &off);
        if (g_count.on > 1 && (n != want || (uintptr_t)src != r->lo + off) && !g_count.bad++)
            snprintf(g_count.msg, sizeof g_count.msg, "layer %d: %zu bytes at +%zu, its slice is %zu at +%zu", l, n,
                     (size_t)((uintptr_t)src - r->lo), want, off);
    }
    return g_inner_memcpy(s, dst, src, n, kind, st);
}

static void count_layers(const dz_model *m, int gpus) {
    memset(&g_count, 0, sizeof g_count);
    const dz_param_table *t = dz_model_params(m);
    g_count.n_layers = dz_model_config(m)->n_layers;
    for (int l = 0; l < g_count.n_layers; l++) g_count.layer[l].lo = UINTPTR_MAX;
    for (int id = 0; id < t->count; id++) {
        const int l = t->params[id].block;
        if (l >= g_count.n_layers) continue;
        const uintptr_t a = (uintptr_t)dz_model_tensor(m, id);
        const size_t n = (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dz_model_dtype(m));
        if (a < g_count.layer[l].lo) g_count.layer[l].lo = a;
        if (a + n > g_count.layer[l].hi) g_count.layer[l].hi = a + n;
    }
    g_count.on = gpus;
}

/* ---- dropping one wait of the pipeline's (backend/stream_ops.h) ------------------------- */

static dz_lane g_drop_lane;
static int g_drop_mark = -1; /* DZ_DEV_MARK_UP or _WB: every slot's; -1: none */
static const dz_stream_ops *g_inner_streams;
static dz_stream_ops g_dropping;

static void dropping_wait(const dz_backend *be, dz_lane lane, int m) {
    if (lane == g_drop_lane && m - m % 2 == g_drop_mark) return;
    g_inner_streams->wait(be, lane, m);
}

/* ---- one run ------------------------------------------------------------------------------ */

typedef struct run_out {
    float g[STEPS];
    double loss_plus[STEPS], loss_minus[STEPS];
    unsigned char *masters;
    size_t bytes;
    int status; /* the seam's first error */
    char msg[300];
} run_out;

static void must(dz_status st, const dz_error *err, const char *what) {
    if (st != DZ_OK) fail_msg("rank %d: %s: %s", dz_comm_rank(comm), what, err->msg);
}

static dz_model *random_model(const char *name, int layers, dz_dtype dt) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/hf/%s", DZ_TEST_DATA, name);
    dz_config cfg;
    dz_model *m = NULL;
    dz_error err = {0};
    must(dz_config_load(dir, &cfg, &err), &err, dir);
    cfg.n_layers = layers;
    must(dz_model_init_random(&cfg, dt, 5, 0.05f, &m, &err), &err, "random model");
    return m;
}

/* The node's ranks share one copy of the masters (src/run/setup.c, share_masters). */
static void share_masters(dz_model *m, void **arena) {
    dz_error err = {0};
    must(dz_comm_node_alloc(comm, dz_model_arena_bytes(m), arena, &err), &err, "node arena");
    const int leader = dz_comm_node_rank(comm) == 0;
    if (leader) must(dz_model_move_to(m, *arena, 1, &err), &err, "masters into the arena");
    must(dz_comm_node_barrier(comm, &err), &err, "barrier");
    if (!leader) must(dz_model_move_to(m, *arena, 0, &err), &err, "masters from the arena");
}

static dz_status node_barrier(void *ctx, dz_error *err) { return dz_comm_node_barrier(ctx, err); }

/* STEPS fused steps and a flush on a streamed CUDA instance over a host seam: the node's
 * (node: shared masters, the group, sliced uploads) or this rank's alone. */
static int g_one_slot; /* a cap one byte below two slots' need: one slot, no prefetch */

static void run(const char *name, dz_dtype dt, const batch *b, int node, run_out *out) {
    memset(out, 0, sizeof *out);
    dz_error err = {0};
    dz_model *m = random_model(name, LAYERS, dt);
    void *arena = NULL;
    if (node) share_masters(m, &arena);
    else must(dz_model_make_owned(m, &err), &err, "owned");
    dz_cuda_seam *seam = dz_cuda_seam_host_create_device(node ? dz_comm_node_rank(comm) : 0);
    assert_non_null(seam);
    g_inner_memcpy = seam->memcpy_async, seam->memcpy_async = counting_memcpy;
    dz_backend *inner = NULL;
    must(dz_backend_cuda_create_on(seam, 1, &inner, &err), &err, "CUDA instance");
    dz_backend be = *inner; /* its streams, with one wait dropped where asked */
    g_inner_streams = inner->streams, g_dropping = *inner->streams, g_dropping.wait = dropping_wait;
    be.streams = &g_dropping;
    dz_gpu_group gpus = {0};
    if (node) must(dz_gpu_group_join_backend(comm, &be, &gpus, &err), &err, "the node's group");
    dz_forward *f = NULL;
    must(dz_forward_create_backend(m, &be, b->g.B, b->g.T, 0, 2, &f, &err), &err, "forward");
    const dz_pipeline_device_bytes need = dz_pipeline_device_need(m, f);
    const dz_zo_params zp = {.seed = 21, .eps = 1e-3f, .q = 1, .wd = 0.01f, .fuse = 1, .estimator = DZ_ZO_MEZO,
                             .max_device_bytes = g_one_slot ? dz_pipeline_device_streamed_slots(&need, 2) - 1
                                                            : dz_pipeline_device_resident(&need) - 1};
    dz_zo_engine *e = NULL;
    must(dz_zo_engine_create(m, f, &zp, &e, &err), &err, "engine");
    /* no node-shared working copies: each rank's are on its device (as setup's share_work) */
    const dz_zo_parallel par = {.signs = 3, .shared_work = NULL, .slice = node ? dz_comm_node_rank(comm) : 0,
                                .n_slices = node ? dz_comm_node_size(comm) : 1, .barrier = node_barrier, .ctx = comm};
    must(dz_zo_engine_set_parallel(e, &par, &err), &err, "set_parallel");
    count_layers(m, node ? dz_comm_node_size(comm) : 1);
    const dz_zo_batch zb = {.tokens = b->g.tokens, .lengths = b->g.lengths, .B = b->g.B, .T = b->g.T, .rows = b->rows,
                            .targets = b->targets, .n_rows = b->n_rows, .loss = mean_nll_cb, .user = (void *)b};
    for (uint32_t step = 0; step < STEPS; step++) {
        dz_zo_step_result res;
        must(dz_zo_step(e, step, LR, &zb, &res, &err), &err, "step");
        out->g[step] = res.g[0], out->loss_plus[step] = res.loss_plus[0], out->loss_minus[step] = res.loss_minus[0];
    }
    must(dz_zo_flush(e, &err), &err, "flush");
    g_count.on = 0;
    out->bytes = dz_model_arena_bytes(m);
    out->masters = malloc(out->bytes);
    assert_non_null(out->masters);
    const dz_param_table *t = dz_model_params(m);
    size_t off = 0;
    for (int id = 0; id < t->count; id++) { /* table order, tensors packed */
        const size_t n = (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dt);
        memcpy(out->masters + off, dz_model_tensor(m, id), n);
        off += n;
    }
    out->bytes = off;
    out->status = dz_backend_cuda_status(inner, out->msg, sizeof out->msg);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    must(dz_gpu_group_leave_backend(&be, &gpus, &err), &err, "leaving the group");
    dz_backend_free(inner);
    if (node) must(dz_comm_node_barrier(comm, &err), &err, "barrier"); /* every rank read the arena */
    dz_model_free(m);
}

/* The layers' uploads: this rank's slices only (checked per copy), every pass's slices
 * summing to the layer over the node; alone, whole layers. */
static void expect_sliced_uploads(const char *name, int n) {
    uint64_t sum[2 * MAX_LAYERS + 1] = {0};
    for (int l = 0; l < g_count.n_layers; l++) sum[l] = g_count.bytes[l], sum[MAX_LAYERS + l] = g_count.copies[l];
    sum[2 * MAX_LAYERS] = (uint64_t)g_count.bad;
    dz_error err;
    must(dz_comm_node_sum_u64(comm, sum, 2 * MAX_LAYERS + 1, &err), &err, "sum"); /* every rank fails alike */
    if (sum[2 * MAX_LAYERS])
        fail_msg("%s: %llu uploads on the node not their rank's slice; here %d: %s", name,
                 (unsigned long long)sum[2 * MAX_LAYERS], g_count.bad, g_count.msg);
    for (int l = 0; l < g_count.n_layers; l++) {
        const size_t block = g_count.layer[l].hi - g_count.layer[l].lo, passes = g_count.copies[l];
        size_t off;
        if (passes < STEPS || sum[MAX_LAYERS + l] != passes * (size_t)n)
            fail_msg("%s: layer %d uploaded %zu times here, %llu on the node of %d", name, l, passes,
                     (unsigned long long)sum[MAX_LAYERS + l], n);
        if (g_count.bytes[l] != passes * slice_of(block, n, dz_comm_node_rank(comm), &off) ||
            sum[l] != passes * block)
            fail_msg("%s: layer %d (%zu bytes): %zu bytes uploaded here, %llu on the node, over %zu passes", name, l,
                     block, g_count.bytes[l], (unsigned long long)sum[l], passes);
    }
}

static void node_equals_alone(const char *name, dz_dtype dt) {
    batch b;
    batch_load(name, &b);
    g_drop_mark = -1;
    run_out alone, node;
    run(name, dt, &b, 0, &alone);
    const int n = dz_comm_node_size(comm);
    if (alone.status != DZ_CUDA_OK) fail_msg("%s alone: the seam: %s", name, alone.msg);
    run(name, dt, &b, 1, &node);
    if (node.status != DZ_CUDA_OK) fail_msg("%s on %d GPUs: the seam: %s", name, n, node.msg);
    if (n > 1) expect_sliced_uploads(name, n); /* alone: no group, the layers' tensors uploaded whole */
    for (int s = 0; s < STEPS; s++)
        if (memcmp(&alone.g[s], &node.g[s], sizeof(float)) || alone.loss_plus[s] != node.loss_plus[s] ||
            alone.loss_minus[s] != node.loss_minus[s])
            fail_msg("%s, step %d: g %.9g on %d GPUs, %.9g alone", name, s, (double)node.g[s], n, (double)alone.g[s]);
    assert_int_equal(alone.bytes, node.bytes);
    for (size_t i = 0; i < alone.bytes; i++)
        if (alone.masters[i] != node.masters[i]) fail_msg("%s: master byte %zu differs on %d GPUs", name, i, n);
    free(alone.masters);
    free(node.masters);
    batch_free(&b);
}

static void opt_f32_on_the_node_equals_alone(void **state) {
    (void)state;
    node_equals_alone("opt_preln", DZ_F32);
}

static void one_slot_on_the_node_equals_alone(void **state) {
    (void)state;
    g_one_slot = 1;
    node_equals_alone("opt_preln", DZ_BF16);
    g_one_slot = 0;
}

static void llama_bf16_on_the_node_equals_alone(void **state) {
    (void)state;
    node_equals_alone("llama_gqa_untied", DZ_BF16);
}

/* Each wait of the sliced path left out: a hazard on this rank's seam (every rank drops it). */
static void a_dropped_wait_is_a_hazard(void **state) {
    (void)state;
    batch b;
    batch_load("opt_preln", &b);
    const struct {
        dz_lane lane;
        int mark;
        const char *what;
    } drops[] = {{DZ_LANE_COMPUTE, DZ_DEV_MARK_UP, "the op's wait for its slot's upload and all-gather"},
                 {DZ_LANE_UPLOAD, DZ_DEV_MARK_WB, "the upload's wait for the slot's last write-back"}};
    for (size_t i = 0; i < sizeof drops / sizeof *drops; i++) {
        g_drop_lane = drops[i].lane, g_drop_mark = drops[i].mark;
        run_out out;
        run("opt_preln", DZ_F32, &b, 1, &out);
        if (out.status != DZ_CUDA_ERR_HAZARD)
            fail_msg("without %s: seam status %d (%s), not a hazard", drops[i].what, out.status, out.msg);
        free(out.masters);
    }
    g_drop_mark = -1;
    batch_free(&b);
}

int main(int argc, char **argv) {
    dz_error err;
    if (dz_comm_init(&argc, &argv, 0, 0, &comm, &err) != DZ_OK) {
        fprintf(stderr, "test_node_stream: %s\n", err.msg);
        return 1;
    }
    printf("test_node_stream: rank %d of %d, node rank %d of %d\n", dz_comm_rank(comm), dz_comm_size(comm),
           dz_comm_node_rank(comm), dz_comm_node_size(comm));
    fflush(stdout);
    dz_cuda_seam_host_set_exchange(exchange, comm);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opt_f32_on_the_node_equals_alone),
        cmocka_unit_test(llama_bf16_on_the_node_equals_alone),
        cmocka_unit_test(one_slot_on_the_node_equals_alone),
        cmocka_unit_test(a_dropped_wait_is_a_hazard),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dz_comm_finalize(comm);
    return failed;
}
