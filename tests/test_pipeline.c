/* The block pipeline (ZO2 streaming) against a plain MeZO loop, bitwise, on the committed
 * tiny models (tests/data/hf) and on random models of their shapes with 5 layers (an odd
 * count, so the store's two block slots alternate unevenly across steps).
 *
 * The reference is written here and has no pipeline: no blocks, slots, store or deferred
 * updates. Each draw d = step * q + j perturbs every tensor of the whole model at once
 * with the CPU backend's ZO ops (w+- = theta +- eps z, perturb_pair*), runs the plain forward
 * (dz_forward_run + dz_forward_logprobs) on w+ and on w-, and takes g = (L+ - L-) / (2 eps);
 * then every tensor is updated (update_*). The engine must give every L+, L- and g,
 * every master byte after the steps, and the log-probs of an evaluation on the final
 * masters, bit for bit, in each pipeline:
 *  - masters in RAM, the update fused into the next step's pass or applied at once;
 *  - masters in a disk store, set up as the trainer does (dz_store_create_as,
 *    dz_zo_store_residency, dz_zo_engine_use_store), the global block resident or
 *    streamed from the store, fused or not, with the page cache kept or dropped; the disk
 *    store therefore equals RAM;
 *  - replay (dz_zo_apply of the reference's g, as resume and export do), in RAM and over
 *    a store;
 *  - resident on a device stand-in (--backend ref's instance: the reference backend's ops
 *    on buffers that host code cannot touch, src/backend/guard_backend.c): the masters,
 *    working copies and global rows in the backend's buffers, every ZO op on them, fused,
 *    unfused and replayed, against the same plain loop run on the reference backend (its
 *    float ops are not the CPU's); the estimators it does not run yet are refused;
 *  - resident on the CUDA backend's instance over the host seam (its buffers, ZO ops and
 *    forward ops on the seam's stream), against the plain loop on such an instance,
 *    meeting no overrun, race or read before a synchronize;
 *  - streamed under a device memory cap on both (the layer masters in host memory, one
 *    slot; on the CUDA instance two where they fit: upload, op and write-back overlapped on
 *    three streams), each wait of the overlap shown to matter (one dropped: a race);
 *  - a disk store behind either (the layer masters read from the store and written back
 *    to it through host staging; on the CUDA instance two slots, store reads and the
 *    transfers overlapped with compute, each wait shown to matter as above; one slot where
 *    two do not fit under a cap);
 * with f32 masters and bf16 masters (stochastic rounding), for each estimator: MeZO, and
 * Sparse-MeZO and LOZO, whose z of 2-D tensors the reference builds here from the
 * contract's scalar Philox and Box-Muller (backend/zo_ops.h) as include/distzo/zo.h
 * defines them: a row mask from a sorted sample of |theta| (sparse), U V^T / sqrt(r) with
 * V of the window step / nu (lozo), then the contract's update and pair in float order. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "temp_dir.h"

#include "distzo/zo.h"
#include "golden.h"
#include "nll_batch.h"
#include "store/store.h"
#include "pipeline/pipeline.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/stream_ops.h"

enum { STEPS = 4, Q = 2 };
static const uint64_t SEED = 21;
static const float EPS = 1e-3f, LR = 2e-3f, WD = 0.01f;
static const dz_zdist DIST = DZ_Z_GAUSSIAN;

/* ---- the models ------------------------------------------------------------------------ */

/* An estimator and its knobs as the engine takes them (lozo: nu 2, so the 4 steps cross a
 * window; rank 3, so a row's U straddles Philox blocks). */
typedef struct estimator_case {
    dz_zo_estimator estimator;
    float density;
    int rank, nu;
} estimator_case;
static const estimator_case MEZO = {DZ_ZO_MEZO, 0.0f, 0, 0}, SPARSE = {DZ_ZO_SPARSE, 0.3f, 0, 0},
                            LOZO = {DZ_ZO_LOZO, 0.0f, 3, 2};

typedef struct model_case {
    const char *name; /* tests/data/hf/NAME: the shape and the golden batch */
    int n_layers;     /* 0: NAME's committed weights; else random weights of NAME's shape with this many layers */
    dz_dtype dtype;   /* of the masters */
    estimator_case est;
    int hidden_dim;   /* 0: NAME's FFN width; else random weights with this one (rows wider than a chunk) */
} model_case;

/* The folder to load: the committed model, or a random one written once into the scratch folder. */
static void model_dir(const model_case *mc, char *out, size_t cap) {
    char src[1024];
    snprintf(src, sizeof src, "%s/hf/%s", DZ_TEST_DATA, mc->name);
    if (!mc->n_layers && !mc->hidden_dim) {
        snprintf(out, cap, "%s", src);
        return;
    }
    snprintf(out, cap, "%s/%s_%d_layers_%d_ffn", g_dir, mc->name, mc->n_layers, mc->hidden_dim);
    if (access(out, F_OK) == 0) return;
    dz_config cfg;
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_config_load(src, &cfg, &err), DZ_OK);
    if (mc->n_layers) cfg.n_layers = mc->n_layers;
    if (mc->hidden_dim) cfg.hidden_dim = mc->hidden_dim;
    if (dz_model_init_random(&cfg, DZ_F32, 5, 0.05f, &m, &err) != DZ_OK || dz_model_save_hf(m, out, &err) != DZ_OK)
        fail_msg("%s: %s", out, err.msg);
    dz_model_free(m);
}

static size_t tensor_bytes(const dz_param_table *t, dz_dtype dt, int id) {
    return (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dt);
}

static size_t model_bytes(const dz_param_table *t, dz_dtype dt) {
    size_t n = 0;
    for (int i = 0; i < t->count; i++) n += tensor_bytes(t, dt, i);
    return n;
}

/* ---- what a run gives -------------------------------------------------------------------- */

typedef struct trace {
    double loss_plus[STEPS][Q], loss_minus[STEPS][Q];
    float g[STEPS][Q];
    unsigned char *masters; /* every tensor's bytes, table order, the masters' dtype */
    float *eval_lp;         /* log-probs of the batch's rows on the final masters */
} trace;

static void trace_alloc(trace *tr, const dz_param_table *t, dz_dtype dt, const batch *b) {
    memset(tr, 0, sizeof *tr);
    tr->masters = malloc(model_bytes(t, dt));
    tr->eval_lp = malloc(sizeof(float) * (size_t)b->n_rows);
    assert_true(tr->masters && tr->eval_lp);
}

static void trace_free(trace *tr) {
    free(tr->masters);
    free(tr->eval_lp);
}

/* Log-probs of the batch's rows through weight source w (the forward's stream 0). */
static void eval_logprobs(dz_forward *f, const dz_weight_source *w, const batch *b, float *lp) {
    dz_error err = {0};
    if (dz_forward_run(f, w, b->g.tokens, b->g.lengths, b->g.B, b->g.T, 0, &err) != DZ_OK ||
        dz_forward_logprobs(f, w, b->rows, b->targets, b->n_rows, lp, &err) != DZ_OK)
        fail_msg("forward: %s", err.msg);
}



/* ---- the reference estimators' z of a 2-D tensor ------------------------------------------ */

enum { SAMPLE = 128 }; /* sparse: a row's threshold from at most this many evenly spaced elements */

/* The contract's Philox block of element i, counter (i / 4, purpose, tensor, draw). */
static void philox_block(uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i, uint32_t x[4]) {
    const uint32_t key[2] = {(uint32_t)SEED, (uint32_t)(SEED >> 32)}, ctr[4] = {(uint32_t)(i / 4), purpose, tensor, draw};
    dz_philox4x32_10(ctr, key, x);
}

/* Element i's Gaussian of a purpose: Box-Muller on its word pair, the pair's first or second. */
static float gaussian_at(uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i) {
    uint32_t x[4];
    philox_block(purpose, tensor, draw, i, x);
    const unsigned pair = (unsigned)(i & 2);
    float z[2];
    dz_box_muller(x[pair], x[pair + 1], &z[0], &z[1]);
    return z[i & 1];
}


static int by_value(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* tau of each row: the ceil(density n)-th smallest |theta| of n evenly spaced elements. */
static float row_tau(const void *theta, dz_dtype dt, int64_t row, int64_t cols, float density) {
    float sample[SAMPLE];
    const int n = cols < SAMPLE ? (int)cols : SAMPLE;
    for (int k = 0; k < n; k++) {
        const float a = fabsf(widen(theta, dt, (size_t)(row * cols + (int64_t)k * cols / n)));
        sample[k] = isnan(a) ? INFINITY : a;
    }
    qsort(sample, (size_t)n, sizeof(float), by_value);
    int r = (int)ceilf(density * (float)n) - 1;
    return sample[r < 0 ? 0 : r >= n ? n - 1 : r];
}

/* z of draw `draw` of 2-D tensor id (theta: its current values, for sparse's mask). */
static void reference_z(const estimator_case *e, const dz_param *t, int id, uint32_t draw, const void *theta,
                        dz_dtype dt, float *z) {
    const size_t n = (size_t)dz_param_numel(t);
    if (e->estimator == DZ_ZO_SPARSE) {
        dz_backend_ref()->ops->z_fill(dz_backend_ref(), z, SEED, (uint32_t)id, draw, 0, n, DIST);
        for (int64_t row = 0; row < t->rows; row++) {
            const float tau = row_tau(theta, dt, row, t->cols, e->density);
            for (int64_t c = 0; c < t->cols; c++) {
                const size_t i = (size_t)(row * t->cols + c);
                if (!(fabsf(widen(theta, dt, i)) <= tau)) z[i] = 0.0f;
            }
        }
        return;
    }
    const int r = e->rank;
    const uint32_t window = (draw / Q) / (uint32_t)e->nu;
    const float scale = 1.0f / sqrtf((float)r);
    for (int64_t row = 0; row < t->rows; row++)
        for (int64_t c = 0; c < t->cols; c++) {
            float s = 0.0f;
            for (int k = 0; k < r; k++)
                s = s + gaussian_at(DZ_PURPOSE_LOZO_U, (uint32_t)id, draw, (uint64_t)(row * r + k)) *
                            gaussian_at(DZ_PURPOSE_LOZO_V, (uint32_t)id, window, (uint64_t)(c * r + k));
            z[row * t->cols + c] = s * scale;
        }
}

static int structured(const estimator_case *e, const dz_param *t) {
    return e->estimator != DZ_ZO_MEZO && t->rows > 1 && t->cols > 1;
}

/* w+- = theta +- (eps z) of draw `draw`: the CPU backend's ZO ops, or the estimator's z. */
static void reference_perturb(const estimator_case *e, dz_model *m, int id, uint32_t draw, float *plus, float *minus,
                              float *z) {
    const dz_param *t = &dz_model_params(m)->params[id];
    const dz_dtype dt = dz_model_dtype(m);
    const size_t n = (size_t)dz_param_numel(t);
    const void *theta = dz_model_tensor(m, id);
    if (!structured(e, t)) {
        const dz_backend *cpu = dz_backend_cpu();
        if (dt == DZ_BF16)
            cpu->ops->perturb_pair_bf16(cpu, theta, plus, minus, n, EPS, SEED, (uint32_t)id, draw, 0, DIST);
        else cpu->ops->perturb_pair(cpu, theta, plus, minus, n, EPS, SEED, (uint32_t)id, draw, 0, DIST);
        return;
    }
    reference_z(e, t, id, draw, theta, dt, z);
    for (size_t i = 0; i < n; i++) {
        const float th = widen(theta, dt, i), d = EPS * z[i];
        plus[i] = th + d, minus[i] = th - d;
    }
}

/* The update of `step`: the CPU backend's ZO ops, or the contract's update with the estimator's
 * z_j of the weights before it (zs: Q tensors of scratch). */
static void reference_update(const estimator_case *e, dz_model *m, int id, uint32_t step, const float *g, float wd,
                             float *zs) {
    const dz_param *t = &dz_model_params(m)->params[id];
    const dz_dtype dt = dz_model_dtype(m);
    const size_t n = (size_t)dz_param_numel(t);
    void *theta = dz_model_tensor(m, id);
    if (!structured(e, t)) {
        if (dt == DZ_BF16)
            dz_backend_cpu()->ops->update_bf16(dz_backend_cpu(), theta, n, g, Q, LR, wd, SEED, (uint32_t)id, step, 0,
                                               DIST);
        else
            dz_backend_cpu()->ops->update_f32(dz_backend_cpu(), theta, n, g, Q, LR, wd, SEED, (uint32_t)id, step, 0,
                                              DIST);
        return;
    }
    for (int j = 0; j < Q; j++) reference_z(e, t, id, step * Q + (uint32_t)j, theta, dt, zs + (size_t)j * n);
    for (size_t i = 0; i < n; i++) {
        const float th = widen(theta, dt, i);
        float u = 0.0f;
        for (int j = 0; j < Q; j++) u = u + g[j] * zs[(size_t)j * n + i];
        float v = u;
        if (Q > 1) v = v / (float)Q;
        if (wd != 0.0f) v = v + wd * th;
        const float y = th - LR * v;
        if (dt == DZ_F32) {
            ((float *)theta)[i] = y;
        } else {
            uint32_t x[4];
            philox_block(DZ_PURPOSE_SR, (uint32_t)id, step * Q, i, x);
            ((uint16_t *)theta)[i] = dz_bf16_round_stochastic(y, x[i & 3]);
        }
    }
}

/* ---- the reference: a plain MeZO loop on the whole model ---------------------------------- */


/* The plain loop with its forward on backend be (NULL: the CPU). */
static void plain_mezo(const char *dir, dz_dtype dt, const estimator_case *est, const batch *b, const dz_backend *be,
                       trace *out) {
    dz_model *m = load_owned(dir, dt);
    const dz_param_table *t = dz_model_params(m);
    trace_alloc(out, t, dt, b);
    float **plus = calloc((size_t)t->count, sizeof *plus), **minus = calloc((size_t)t->count, sizeof *minus);
    assert_true(plus && minus);
    for (int i = 0; i < t->count; i++) {
        plus[i] = malloc(sizeof(float) * (size_t)dz_param_numel(&t->params[i]));
        minus[i] = malloc(sizeof(float) * (size_t)dz_param_numel(&t->params[i]));
        assert_true(plus[i] && minus[i]);
    }
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_backend(m, be, b->g.B, b->g.T, 0, 1, &f, &err), DZ_OK);
    const whole_model wp = {t, plus}, wm = {t, minus};
    const dz_weight_source src_plus = {.rows = whole_rows, .self = &wp}, src_minus = {.rows = whole_rows, .self = &wm};
    float *lp = malloc(sizeof(float) * (size_t)b->n_rows);
    size_t largest = 0;
    for (int i = 0; i < t->count; i++)
        if ((size_t)dz_param_numel(&t->params[i]) > largest) largest = (size_t)dz_param_numel(&t->params[i]);
    float *zs = malloc(sizeof(float) * largest * Q);
    assert_non_null(zs);
    for (uint32_t step = 0; step < STEPS; step++) {
        for (int j = 0; j < Q; j++) {
            const uint32_t draw = step * Q + (uint32_t)j;
            for (int i = 0; i < t->count; i++) reference_perturb(est, m, i, draw, plus[i], minus[i], zs);
            eval_logprobs(f, &src_plus, b, lp);
            const double l_plus = mean_nll(lp, b);
            eval_logprobs(f, &src_minus, b, lp);
            const double l_minus = mean_nll(lp, b);
            out->loss_plus[step][j] = l_plus, out->loss_minus[step][j] = l_minus;
            out->g[step][j] = (float)((l_plus - l_minus) / (2.0 * (double)EPS));
        }
        for (int i = 0; i < t->count; i++)
            reference_update(est, m, i, step, out->g[step], decays(&t->params[i]) ? WD : 0.0f, zs);
    }
    size_t off = 0;
    for (int i = 0; i < t->count; i++) {
        memcpy(out->masters + off, dz_model_tensor(m, i), tensor_bytes(t, dt, i));
        off += tensor_bytes(t, dt, i);
    }
    const dz_weight_source own = dz_model_weights(m);
    eval_logprobs(f, &own, b, out->eval_lp);
    free(lp);
    free(zs);
    for (int i = 0; i < t->count; i++) free(plus[i]), free(minus[i]);
    free(plus);
    free(minus);
    dz_forward_free(f);
    dz_model_free(m);
}

/* ---- the engine in each pipeline ----------------------------------------------------------- */

typedef struct pipeline {
    const char *name;
    int disk;           /* masters in a disk store */
    int stream_globals; /* with disk: the global block streams from the store too */
    int fuse;
    unsigned flags;     /* store flags */
    int replay;         /* dz_zo_apply of the reference's g instead of dz_zo_step */
    int resident;       /* the masters resident in the buffers of: 1 --backend ref's guarded instance, 2 the
                           CUDA instance over the host seam */
    int stream;         /* resident, under a device memory cap one byte below resident mode's need: the layer
                           masters stream from host memory (pipeline/device_stream.c); with disk, one byte
                           below two slots' need: the store's layers stream through one slot */
    int count;          /* resident: count the device's allocations (the twin a streamed run is checked by) */
} pipeline;

static const pipeline PIPELINES[] = {
    {"RAM, fused", 0, 0, 1, 0, 0, 0, 0, 0},
    {"RAM, unfused", 0, 0, 0, 0, 0, 0, 0, 0},
    {"disk, globals resident, fused", 1, 0, 1, 0, 0, 0, 0, 0},
    {"disk, globals resident, unfused", 1, 0, 0, 0, 0, 0, 0, 0},
    {"disk, globals streamed, fused", 1, 1, 1, 0, 0, 0, 0, 0},
    {"disk, globals streamed, unfused", 1, 1, 0, 0, 0, 0, 0, 0},
    {"disk without page cache, globals streamed, fused", 1, 1, 1, DZ_STORE_DROP_CACHE, 0, 0, 0, 0},
    {"RAM, replayed", 0, 0, 1, 0, 1, 0, 0, 0},
    {"disk, globals resident, replayed", 1, 0, 1, 0, 1, 0, 0, 0},
    {"disk, globals streamed, replayed", 1, 1, 1, 0, 1, 0, 0, 0},
    {"on a device stand-in (resident), fused", 0, 0, 1, 0, 0, 1, 0, 0},
    {"on a device stand-in (resident), unfused", 0, 0, 0, 0, 0, 1, 0, 0},
    {"on a device stand-in (resident), replayed", 0, 0, 1, 0, 1, 1, 0, 0},
    {"on CUDA over the host seam (resident), fused", 0, 0, 1, 0, 0, 2, 0, 0},
    {"on CUDA over the host seam (resident), unfused", 0, 0, 0, 0, 0, 2, 0, 0},
    {"on CUDA over the host seam (resident), replayed", 0, 0, 1, 0, 1, 2, 0, 0},
    {"on a device stand-in, layers streamed under a cap, fused", 0, 0, 1, 0, 0, 1, 1, 0},
    {"on a device stand-in, layers streamed under a cap, unfused", 0, 0, 0, 0, 0, 1, 1, 0},
    {"on a device stand-in, layers streamed under a cap, replayed", 0, 0, 1, 0, 1, 1, 1, 0},
    {"on CUDA over the host seam, layers streamed under a cap, fused", 0, 0, 1, 0, 0, 2, 1, 0},
    {"on CUDA over the host seam, layers streamed under a cap, replayed", 0, 0, 1, 0, 1, 2, 1, 0},
    {"disk behind a device stand-in, fused", 1, 0, 1, 0, 0, 1, 0, 0},
    {"disk behind a device stand-in, unfused", 1, 0, 0, 0, 0, 1, 0, 0},
    {"disk behind a device stand-in, replayed", 1, 0, 1, 0, 1, 1, 0, 0},
    {"disk behind CUDA over the host seam, fused", 1, 0, 1, 0, 0, 2, 0, 0},
    {"disk behind CUDA over the host seam, unfused", 1, 0, 0, 0, 0, 2, 0, 0},
    {"disk behind CUDA over the host seam, replayed", 1, 0, 1, 0, 1, 2, 0, 0},
    {"disk behind CUDA over the host seam, one slot under a cap, fused", 1, 0, 1, 0, 0, 2, 1, 0},
};

/* A device instance whose alloc counts the bytes it hands out (nothing is freed before the
 * run ends), so a streamed run's device memory is checked against its cap by what was
 * allocated, not by the pipeline's own count. One at a time. */
static dz_backend_ops g_counting_ops;
static void *(*g_inner_alloc)(const dz_backend *be, size_t bytes);
static size_t g_allocated;

static void *counting_alloc(const dz_backend *be, size_t bytes) {
    g_allocated += bytes;
    return g_inner_alloc(be, bytes);
}

/* The overlap's waits (pipeline/device_stream.c) with one kind dropped: every wait of lane
 * g_drop_lane on a mark of kind g_drop_mark (DZ_DEV_MARK_*); g_drop_lane DZ_LANES: none. */
static int g_drop_on;
static dz_lane g_drop_lane;
static int g_drop_mark;
static const dz_stream_ops *g_inner_streams;
static dz_stream_ops g_dropping_streams;

/* With waits dropped, the instance's synchronize is no wait either: the forward's
 * synchronize after each layer (for host-memory callers) would order the slots' uses on
 * its own, and a device forward need not make it. */
static void no_synchronize(const dz_backend *be) { (void)be; }

static void dropping_wait(const dz_backend *be, dz_lane lane, int m) {
    if (lane == g_drop_lane && m - m % 2 == g_drop_mark) return;
    g_inner_streams->wait(be, lane, m);
}

static void counting_wrap(const dz_backend *inner, dz_backend *out) {
    g_counting_ops = *inner->ops;
    g_inner_alloc = inner->ops->alloc;
    g_counting_ops.alloc = counting_alloc;
    g_allocated = 0;
    *out = *inner;
    out->ops = &g_counting_ops;
    if (g_drop_on && inner->streams) {
        g_inner_streams = inner->streams;
        g_dropping_streams = *inner->streams;
        g_dropping_streams.wait = dropping_wait;
        out->streams = &g_dropping_streams;
        g_counting_ops.synchronize = no_synchronize;
    }
}

typedef struct engine_run {
    dz_backend *be; /* the forward's (NULL: the CPU) */
    dz_backend counted; /* streamed: be, its allocations counted (the forward's and the engine's) */
    size_t cap;         /* streamed: the device memory cap */
    dz_model *m;
    dz_forward *f;
    dz_store *s;
    dz_zo_engine *e;
} engine_run;

static void flush(dz_zo_engine *e) {
    dz_error err = {0};
    if (dz_zo_flush(e, &err) != DZ_OK) fail_msg("flush: %s", err.msg);
}

static void apply(dz_zo_engine *e, uint32_t step, float lr, const float *g) {
    dz_error err = {0};
    if (dz_zo_apply(e, step, lr, g, &err) != DZ_OK) fail_msg("replay of step %u: %s", step, err.msg);
}

static dz_status engine_try_open(const char *dir, dz_dtype dt, const estimator_case *est, const pipeline *p,
                                 const batch *b, engine_run *r, dz_error *refusal);
static void engine_close(engine_run *r);

/* What a streamed pipeline allocated on its device when created: no more than the cap, and
 * what the same pipeline resident (from RAM) allocates less every layer's masters but its
 * slots', to the byte: two slots where the backend overlaps its transfers (the CUDA
 * instance) and two fit under the cap, else one. */
static int g_slots; /* the last streamed run's slots, as expected here */
static void expect_streamed_allocations(const char *dir, dz_dtype dt, const estimator_case *est, const pipeline *p,
                                        const batch *b, const dz_pipeline_device_bytes *need, size_t cap) {
    const size_t streamed = g_allocated;
    if (streamed > cap) fail_msg("%s: %zu bytes allocated on the device, above the cap of %zu", p->name, streamed, cap);
    pipeline twin = *p;
    twin.stream = 0;
    twin.count = 1;
    twin.disk = twin.stream_globals = 0; /* from RAM: every master resident */
    engine_run r;
    dz_error err = {0};
    if (engine_try_open(dir, dt, est, &twin, b, &r, &err) != DZ_OK) fail_msg("%s: %s", p->name, err.msg);
    const size_t resident = g_allocated;
    engine_close(&r);
    g_allocated = streamed; /* the streamed run's count goes on (its evaluation's block scratch) */
    g_slots = p->resident == 2 && dz_pipeline_device_streamed_slots(need, 2) <= cap ? 2 : 1;
    if (streamed + (need->masters - need->globals - (size_t)g_slots * need->layer) != resident)
        fail_msg("%s: %zu bytes allocated streamed, %zu resident: the layers are not streamed through %d slot(s)",
                 p->name, streamed, resident, g_slots);
}

/* The trainer's setup (src/run/trainer.c: setup, open_store) for one pipeline: DZ_OK, or
 * (expect_refusal) the engine's refusal, whose message is in err. */
static dz_status engine_try_open(const char *dir, dz_dtype dt, const estimator_case *est, const pipeline *p,
                                 const batch *b, engine_run *r, dz_error *refusal) {
    memset(r, 0, sizeof *r);
    char store_path[600];
    snprintf(store_path, sizeof store_path, "%s/masters.safetensors", g_dir);
    dz_error err = {0};
    dz_status st = p->disk ? dz_store_load_model(dir, dt, &r->m, &err) : dz_model_load(dir, dt, &r->m, &err);
    if (st == DZ_OK) st = p->disk ? dz_store_create_as(store_path, r->m, dt, p->flags, &r->s, &err)
                                  : dz_model_make_owned(r->m, &err);
    if (st == DZ_OK && p->resident == 1) st = dz_backend_create("ref", &r->be, &err);
    if (st == DZ_OK && p->resident == 2) st = dz_backend_cuda_create_on(dz_cuda_seam_host_create(), 1, &r->be, &err);
    const int count = p->stream || p->count;
    if (st == DZ_OK && count) counting_wrap(r->be, &r->counted);
    const dz_backend *fbe = count ? &r->counted : r->be;
    if (st == DZ_OK) st = dz_forward_create_backend(r->m, fbe, b->g.B, b->g.T, 0, 2, &r->f, &err);
    if (st == DZ_OK && p->disk) st = dz_zo_store_residency(r->m, r->f, r->s, NULL, 0, p->stream_globals, &err);
    dz_zo_params zp = {.seed = SEED, .eps = EPS, .q = Q, .rademacher = DIST == DZ_Z_RADEMACHER, .wd = WD,
                       .fuse = p->fuse, .estimator = est->estimator, .sparse_density = est->density,
                       .lozo_rank = est->rank, .lozo_nu = est->nu};
    dz_pipeline_device_bytes need = {0};
    if (st == DZ_OK && p->stream) {
        need = dz_pipeline_device_need(r->m, r->f);
        zp.max_device_bytes = p->disk ? dz_pipeline_device_streamed_slots(&need, 2) - 1
                                      : dz_pipeline_device_resident(&need) - 1;
    }
    if (st == DZ_OK) {
        st = dz_zo_engine_create(r->m, r->f, &zp, &r->e, refusal);
        if (st != DZ_OK) return st;
    }
    if (st == DZ_OK && p->stream) expect_streamed_allocations(dir, dt, est, p, b, &need, zp.max_device_bytes);
    r->cap = zp.max_device_bytes;
    if (st == DZ_OK && p->disk) st = dz_zo_engine_use_store(r->e, r->s, &err);
    if (st != DZ_OK) fail_msg("%s, %s: %s", dir, p->name, err.msg);
    if (p->disk) { /* what the pipeline holds where: the layers never in the model, the globals as asked */
        const dz_param_table *t = dz_model_params(r->m);
        const int n_layers = dz_model_config(r->m)->n_layers;
        for (int i = 0; i < t->count; i++) {
            const int resident = t->params[i].block == n_layers && !p->stream_globals;
            if ((dz_model_tensor(r->m, i) != NULL) != resident)
                fail_msg("%s: %s is %s the model's memory", p->name, t->params[i].hf_name,
                         resident ? "missing from" : "still in");
        }
    }
    return DZ_OK;
}

static void engine_open(const char *dir, dz_dtype dt, const estimator_case *est, const pipeline *p, const batch *b,
                        engine_run *r) {
    dz_error err = {0};
    if (engine_try_open(dir, dt, est, p, b, r, &err) != DZ_OK) fail_msg("%s, %s: %s", dir, p->name, err.msg);
}

/* be (NULL, or not the CUDA instance: nothing to check) met no seam error: no overrun, no
 * race between streams, no read before a synchronize. */
static void expect_seam_clean(const char *what, const dz_backend *be) {
    char msg[300];
    if (be && !strcmp(be->name, "cuda") && dz_backend_cuda_status(be, msg, sizeof msg) != DZ_CUDA_OK)
        fail_msg("%s: %s", what, msg);
}

static void engine_close(engine_run *r) {
    dz_zo_engine_free(r->e);
    dz_forward_free(r->f);
    expect_seam_clean("the CUDA instance's seam", r->be);
    dz_backend_free(r->be);
    dz_store_close(r->s);
    dz_model_free(r->m);
}

/* The masters after flushing: the model's tensors where it holds them, else the store's. */
static void engine_masters(engine_run *r, unsigned char *out) {
    flush(r->e);
    const dz_param_table *t = dz_model_params(r->m);
    const dz_dtype dt = dz_model_dtype(r->m);
    size_t off = 0;
    for (int i = 0; i < t->count; i++) {
        const void *p = dz_model_tensor(r->m, i);
        dz_error err = {0};
        if (p) memcpy(out + off, p, tensor_bytes(t, dt, i));
        else if (dz_store_read_rows(r->s, i, 0, t->params[i].rows, out + off, &err) != DZ_OK)
            fail_msg("%s", err.msg);
        off += tensor_bytes(t, dt, i);
    }
}

static void run_pipeline(const char *dir, dz_dtype dt, const estimator_case *est, const pipeline *p, const batch *b,
                         const trace *want, trace *out) {
    engine_run r;
    engine_open(dir, dt, est, p, b, &r);
    trace_alloc(out, dz_model_params(r.m), dt, b);
    const dz_zo_batch zb = {.tokens = b->g.tokens, .lengths = b->g.lengths, .B = b->g.B, .T = b->g.T,
                            .rows = b->rows, .targets = b->targets, .n_rows = b->n_rows, .loss = mean_nll_cb,
                            .user = (void *)b};
    for (uint32_t step = 0; step < STEPS; step++) {
        if (p->replay) {
            apply(r.e, step, LR, want->g[step]);
            memcpy(out->loss_plus[step], want->loss_plus[step], sizeof out->loss_plus[step]); /* nothing to compare */
            memcpy(out->loss_minus[step], want->loss_minus[step], sizeof out->loss_minus[step]);
            memcpy(out->g[step], want->g[step], sizeof out->g[step]);
            continue;
        }
        dz_zo_step_result res;
        dz_error err = {0};
        if (dz_zo_step(r.e, step, LR, &zb, &res, &err) != DZ_OK) fail_msg("%s, step %u: %s", p->name, step, err.msg);
        assert_true(res.finite);
        for (int j = 0; j < Q; j++) {
            out->loss_plus[step][j] = res.loss_plus[j], out->loss_minus[step][j] = res.loss_minus[j];
            out->g[step][j] = res.g[j];
        }
    }
    engine_masters(&r, out->masters);
    const dz_weight_source src = dz_zo_master_source(r.e); /* evaluation reads the store where it holds the masters */
    eval_logprobs(r.f, &src, b, out->eval_lp);
    dz_error err = {0};
    if (dz_zo_source_status(r.e, &err) != DZ_OK) fail_msg("%s: evaluation through the masters' source: %s", p->name,
                                                          err.msg);
    if (p->stream && g_allocated > r.cap) /* the steps and the evaluation included */
        fail_msg("%s: %zu bytes allocated on the device over the run, above the cap of %zu", p->name, g_allocated,
                 r.cap);
    engine_close(&r);
}

/* ---- comparison ---------------------------------------------------------------------------- */

static void expect_same_losses(const char *what, const trace *want, const trace *got) {
    for (int s = 0; s < STEPS; s++)
        for (int j = 0; j < Q; j++) {
            const double w[3] = {want->loss_plus[s][j], want->loss_minus[s][j], want->g[s][j]};
            const double o[3] = {got->loss_plus[s][j], got->loss_minus[s][j], got->g[s][j]};
            static const char *names[3] = {"L+", "L-", "g"};
            for (int k = 0; k < 3; k++)
                if (memcmp(&w[k], &o[k], sizeof w[k]) != 0)
                    fail_msg("%s: step %d draw %d: %s = %.17g, the plain loop's %.17g", what, s, j, names[k], o[k],
                             w[k]);
        }
}

static void expect_same_masters(const char *what, const dz_param_table *t, dz_dtype dt, const trace *want,
                                const trace *got) {
    size_t off = 0;
    for (int i = 0; i < t->count; i++) {
        const size_t n = tensor_bytes(t, dt, i), esz = dz_dtype_size(dt);
        for (size_t k = 0; k < n; k += esz)
            if (memcmp(want->masters + off + k, got->masters + off + k, esz) != 0)
                fail_msg("%s: master %s element %zu differs from the plain loop's", what, t->params[i].hf_name,
                         k / esz);
        off += n;
    }
}

static void expect_same_eval(const char *what, const batch *b, const trace *want, const trace *got) {
    for (int i = 0; i < b->n_rows; i++)
        if (memcmp(&want->eval_lp[i], &got->eval_lp[i], sizeof(float)) != 0)
            fail_msg("%s: evaluation log-prob of row %d = %.9g, the plain loop's %.9g", what, b->rows[i],
                     got->eval_lp[i], want->eval_lp[i]);
}

/* The reference does train (most master elements move, L+ and L- differ at every draw);
 * else agreement with it would prove little. */
static void expect_reference_trains(const char *dir, dz_dtype dt, const estimator_case *est, const trace *ref) {
    dz_model *m = load_owned(dir, dt);
    const dz_param_table *t = dz_model_params(m);
    size_t off = 0, moved = 0, total = 0;
    for (int i = 0; i < t->count; i++) {
        const size_t n = tensor_bytes(t, dt, i), esz = dz_dtype_size(dt);
        const unsigned char *before = dz_model_tensor(m, i);
        for (size_t k = 0; k < n; k += esz) moved += memcmp(before + k, ref->masters + off + k, esz) != 0;
        off += n, total += n / esz;
    }
    dz_model_free(m);
    printf("  plain loop: %zu of %zu master elements moved; g step 0: %.6g %.6g, step %d: %.6g %.6g\n", moved, total,
           ref->g[0][0], ref->g[0][1], STEPS - 1, ref->g[STEPS - 1][0], ref->g[STEPS - 1][1]);
    /* sparse: the unmasked rest moves by weight decay alone, too little for a bf16 step */
    const double share = est->estimator == DZ_ZO_SPARSE ? est->density / 2.0 : 0.5;
    assert_true((double)moved > share * (double)total);
    for (int s = 0; s < STEPS; s++)
        for (int j = 0; j < Q; j++) assert_true(ref->loss_plus[s][j] != ref->loss_minus[s][j]);
}

/* Resident mode computes z on the device only for MeZO: the structured estimators are
 * refused, saying which, before a step. */
static void expect_resident_refused(const char *dir, const model_case *mc, const pipeline *p, const batch *b) {
    engine_run r;
    dz_error err = {0};
    if (engine_try_open(dir, mc->dtype, &mc->est, p, b, &r, &err) != DZ_ERR_UNSUPPORTED)
        fail_msg("%s, %s: resident mode ran %s", dir, p->name, dz_zo_estimator_name(mc->est.estimator));
    if (!strstr(err.msg, "computes its z on the host")) fail_msg("%s: the refusal says: %s", p->name, err.msg);
    engine_close(&r);
}

/* The plain loop on the CUDA instance over the host seam. */
static void plain_mezo_on_cuda(const char *dir, const model_case *mc, const batch *b, trace *out) {
    dz_backend *cuda = NULL;
    dz_error err = {0};
    if (dz_backend_cuda_create_on(dz_cuda_seam_host_create(), 1, &cuda, &err) != DZ_OK) fail_msg("%s", err.msg);
    plain_mezo(dir, mc->dtype, &mc->est, b, cuda, out);
    expect_seam_clean("the plain loop on CUDA", cuda);
    dz_backend_free(cuda);
}

/* Step 0's losses (both draws at the base weights) of the plain loop on another backend
 * agree with the CPU's to summation order: the largest relative difference, printed. */
static void expect_close_first_losses(const char *what, const trace *cpu, const trace *other) {
    double worst = 0.0;
    for (int j = 0; j < Q; j++) {
        const double want[2] = {cpu->loss_plus[0][j], cpu->loss_minus[0][j]};
        const double got[2] = {other->loss_plus[0][j], other->loss_minus[0][j]};
        for (int k = 0; k < 2; k++) worst = fmax(worst, fabs(got[k] - want[k]) / fabs(want[k]));
    }
    printf("  plain loop %s: step 0's losses within %.2g (relative) of the CPU's\n", what, worst);
    assert_true(worst <= 1e-5);
}

static void every_pipeline_equals_the_plain_loop(const model_case *mc) {
    char dir[1024];
    model_dir(mc, dir, sizeof dir);
    batch b;
    batch_load(mc->name, &b);
    trace ref, on_dev[2]; /* the plain loop on the CPU, and (resident modes 1, 2) on ref and on CUDA */
    plain_mezo(dir, mc->dtype, &mc->est, &b, NULL, &ref);
    expect_reference_trains(dir, mc->dtype, &mc->est, &ref);
    const int resident_runs = mc->est.estimator == DZ_ZO_MEZO;
    if (resident_runs) {
        plain_mezo(dir, mc->dtype, &mc->est, &b, dz_backend_ref(), &on_dev[0]);
        plain_mezo_on_cuda(dir, mc, &b, &on_dev[1]);
        expect_close_first_losses("on ref", &ref, &on_dev[0]);
        expect_close_first_losses("on CUDA over the host seam", &ref, &on_dev[1]);
    }
    dz_model *shape = load_owned(dir, mc->dtype);
    for (size_t k = 0; k < sizeof PIPELINES / sizeof PIPELINES[0]; k++) {
        const pipeline *p = &PIPELINES[k];
        if (p->resident && !resident_runs) {
            expect_resident_refused(dir, mc, p, &b);
            continue;
        }
        const trace *want = p->resident ? &on_dev[p->resident - 1] : &ref;
        char what[1200];
        snprintf(what, sizeof what, "%s %s (%d layers) as %s, %s", dz_zo_estimator_name(mc->est.estimator), mc->name,
                 dz_model_config(shape)->n_layers, dz_dtype_name(mc->dtype), p->name);
        trace got;
        run_pipeline(dir, mc->dtype, &mc->est, p, &b, want, &got);
        expect_same_losses(what, want, &got);
        expect_same_masters(what, dz_model_params(shape), mc->dtype, want, &got);
        expect_same_eval(what, &b, want, &got);
        static const char *const on[] = {"", " on ref", " on CUDA"};
        printf("  %-72s = plain loop%s%s\n", what, on[p->resident],
               p->stream                         ? (g_slots == 2 ? " (two slots, overlapped)" : " (one slot)")
               : p->disk && p->resident == 2 ? " (two slots, overlapped)"
                                             : "");
        trace_free(&got);
    }
    dz_model_free(shape);
    trace_free(&ref);
    if (resident_runs) trace_free(&on_dev[0]), trace_free(&on_dev[1]);
    batch_free(&b);
}

/* The engine on backend be (NULL: the CPU) under cap: its status, the message in err. */
static dz_status engine_under_cap(const char *dir, const dz_backend *be, size_t cap_below_stream, size_t *cap,
                                  dz_error *err) {
    dz_model *m = load_owned(dir, DZ_F32);
    batch b;
    batch_load("opt_preln", &b);
    dz_forward *f = NULL;
    dz_error e0 = {0};
    if (dz_forward_create_backend(m, be, b.g.B, b.g.T, 0, 2, &f, &e0) != DZ_OK) fail_msg("%s", e0.msg);
    const dz_pipeline_device_bytes need = dz_pipeline_device_need(m, f);
    assert_true(need.layer > 0 && need.globals > 0 && need.work > 0 && need.forward > 0);
    *cap = cap_below_stream ? dz_pipeline_device_streamed(&need) - cap_below_stream : need.layer - 1;
    const dz_zo_params zp = {.seed = SEED, .eps = EPS, .q = Q, .fuse = 1, .estimator = DZ_ZO_MEZO,
                             .max_device_bytes = *cap};
    dz_zo_engine *e = NULL;
    const dz_status st = dz_zo_engine_create(m, f, &zp, &e, err);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    batch_free(&b);
    dz_model_free(m);
    return st;
}

/* Where even streaming does not fit under --max-device-memory (one byte short, or below
 * one layer's masters), the engine refuses before it allocates, naming every part; a cap
 * on a host-memory backend is refused saying so. */
static void device_cap_refusals(void **state) {
    (void)state;
    char dir[1024];
    model_dir(&(model_case){"opt_preln", 0, DZ_F32, MEZO, 0}, dir, sizeof dir);
    static const char *const parts[] = {"even streaming the layers needs", "the global block's masters",
                                        "one layer's masters", "the working copies", "the forward's buffers"};
    for (int k = 0; k < 2; k++) {
        dz_backend *be = NULL;
        dz_error err = {0};
        if (dz_backend_create("ref", &be, &err) != DZ_OK) fail_msg("%s", err.msg);
        size_t cap = 0;
        if (engine_under_cap(dir, be, k == 0 ? 1 : 0, &cap, &err) != DZ_ERR_INVALID)
            fail_msg("a cap of %zu bytes was not refused", cap);
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (!strstr(err.msg, parts[i])) fail_msg("the refusal does not say \"%s\": %s", parts[i], err.msg);
        printf("  cap %zu bytes refused: %s\n", cap, err.msg);
        dz_backend_free(be);
    }
    dz_error err = {0};
    size_t cap = 0;
    if (engine_under_cap(dir, NULL, 1, &cap, &err) != DZ_ERR_INVALID || !strstr(err.msg, "computes in host memory"))
        fail_msg("a device cap on the CPU backend: %s", err.msg);
}

/* A disk store behind a device with the global block left in the store too (streamed
 * globals): refused, naming the tensor and --max-resident. */
static void device_store_with_streamed_globals_refused(void **state) {
    (void)state;
    char dir[1024];
    model_dir(&(model_case){"opt_preln", 0, DZ_F32, MEZO, 0}, dir, sizeof dir);
    batch b;
    batch_load("opt_preln", &b);
    const pipeline p = {"disk behind a device stand-in, globals streamed", 1, 1, 1, 0, 0, 1, 0, 0};
    engine_run r;
    dz_error err = {0};
    if (engine_try_open(dir, DZ_F32, &MEZO, &p, &b, &r, &err) != DZ_ERR_UNSUPPORTED)
        fail_msg("%s: not refused", p.name);
    if (!strstr(err.msg, "stays in the disk store") || !strstr(err.msg, "--max-resident"))
        fail_msg("%s: the refusal says: %s", p.name, err.msg);
    printf("  %s refused: %s\n", p.name, err.msg);
    engine_close(&r);
    batch_free(&b);
}

/* The overlap's run on the CUDA instance over the host seam, the layers streamed from host
 * memory (disk 0) or from a disk store (disk 1): two steps and a flush. */
static void overlapped_steps(const char *dir, const model_case *mc, const batch *b, int disk, engine_run *r) {
    static const pipeline ps[2] = {{"on CUDA over the host seam, layers streamed under a cap", 0, 0, 1, 0, 0, 2, 1, 0},
                                   {"disk behind CUDA over the host seam", 1, 0, 1, 0, 0, 2, 0, 1}};
    const pipeline p = ps[disk];
    engine_open(dir, mc->dtype, &mc->est, &p, b, r);
    if (!disk && g_slots != 2) fail_msg("%s: %d slot(s) under the cap, where two fit", p.name, g_slots);
    const dz_param_table *t = dz_model_params(r->m);
    const dz_cuda_seam *seam = dz_backend_cuda_seam(r->be);
    for (int id = 0; !disk && id < t->count; id++) /* the layer masters are pinned for the asynchronous copies */
        if (t->params[id].block < dz_model_config(r->m)->n_layers &&
            !dz_cuda_seam_host_pinned(seam, dz_model_tensor(r->m, id), tensor_bytes(t, mc->dtype, id)))
            fail_msg("%s: %s is not in pinned host memory", p.name, t->params[id].hf_name);
    const dz_zo_batch zb = {.tokens = b->g.tokens, .lengths = b->g.lengths, .B = b->g.B, .T = b->g.T,
                            .rows = b->rows, .targets = b->targets, .n_rows = b->n_rows, .loss = mean_nll_cb,
                            .user = (void *)b};
    for (uint32_t step = 0; step < 2; step++) {
        dz_zo_step_result res;
        dz_error err = {0};
        (void)dz_zo_step(r->e, step, LR, &zb, &res, &err); /* with a wait dropped, whatever it returns */
    }
    dz_error err = {0};
    (void)dz_zo_flush(r->e, &err);
}

/* Each of the overlap's four kinds of waits matters: with it dropped (every such wait of
 * the run), the host seam reports a race (DZ_CUDA_ERR_HAZARD) within two steps and a flush;
 * with none dropped it reports nothing. The upload's wait for the slot's last op matters
 * where no write-back follows that op (step 0: no update is pending yet) and nothing else
 * orders the two: the instance's synchronize is made no wait here (no_synchronize). So for
 * the layers streamed from a disk store, whose host-side settles (the staging's last upload
 * before a store read, its last write-back before a store write) must not stand in for
 * the lanes' waits. */
static void overlap_wait_dropped_is_a_hazard(void **state) {
    (void)state;
    const model_case mc = {"opt_preln", 5, DZ_F32, MEZO, 0};
    char dir[1024];
    model_dir(&mc, dir, sizeof dir);
    batch b;
    batch_load(mc.name, &b);
    static const struct {
        dz_lane lane;
        int mark;
        const char *what;
    } drops[] = {
        {DZ_LANES, 0, "none"},
        {DZ_LANE_COMPUTE, DZ_DEV_MARK_UP, "the op's wait for its slot's upload"},
        {DZ_LANE_WRITEBACK, DZ_DEV_MARK_DONE, "the write-back's wait for the op"},
        {DZ_LANE_UPLOAD, DZ_DEV_MARK_DONE, "the upload's wait for the slot's last op"},
        {DZ_LANE_UPLOAD, DZ_DEV_MARK_WB, "the upload's wait for the slot's last write-back"},
    };
    for (int disk = 0; disk < 2; disk++)
        for (size_t k = 0; k < sizeof drops / sizeof drops[0]; k++) {
            g_drop_on = 1, g_drop_lane = drops[k].lane, g_drop_mark = drops[k].mark;
            engine_run r;
            overlapped_steps(dir, &mc, &b, disk, &r);
            g_drop_on = 0;
            char msg[300] = "";
            const int st = dz_backend_cuda_status(r.be, msg, sizeof msg);
            const int hazards = dz_cuda_seam_host_hazards(dz_backend_cuda_seam(r.be));
            printf("  %s, dropped: %s: status %d, %d hazard(s) %s\n", disk ? "disk" : "host memory", drops[k].what, st,
                   hazards, msg);
            if (k == 0 && (st != DZ_CUDA_OK || hazards != 0)) fail_msg("no wait dropped: %s", msg);
            if (k > 0 && (st != DZ_CUDA_ERR_HAZARD || hazards == 0))
                fail_msg("%s: dropped %s: not caught", disk ? "disk" : "host memory", drops[k].what);
            dz_zo_engine_free(r.e);
            dz_forward_free(r.f);
            dz_backend_free(r.be);
            dz_store_close(r.s);
            dz_model_free(r.m);
        }
    batch_free(&b);
}

static void opt_committed_f32(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"opt_preln", 0, DZ_F32, MEZO, 0});
}

static void llama_committed_bf16(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"llama_gqa_untied", 0, DZ_BF16, MEZO, 0});
}

static void opt_5_layers_bf16(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"opt_preln", 5, DZ_BF16, MEZO, 0});
}

static void llama_5_layers_f32(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"llama_gqa_untied", 5, DZ_F32, MEZO, 0});
}

/* The structured estimators on a committed model of each family, one per master dtype. */
static void sparse_opt_f32(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"opt_preln", 0, DZ_F32, SPARSE, 0});
}

static void sparse_llama_bf16(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"llama_gqa_untied", 0, DZ_BF16, SPARSE, 0});
}

static void lozo_llama_f32(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"llama_gqa_untied", 5, DZ_F32, LOZO, 0});
}

static void lozo_opt_bf16(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"opt_preln", 0, DZ_BF16, LOZO, 0});
}

/* FFN rows of 1100 columns: the threshold samples 128 of them (every 8.6th) and the span
 * kernels cut each row into two chunks; the committed models' rows are 128 wide at most. */
static void sparse_wide_rows_llama_bf16(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"llama_gqa_untied", 2, DZ_BF16, SPARSE, 1100});
}

static void lozo_wide_rows_opt_f32(void **state) {
    (void)state;
    every_pipeline_equals_the_plain_loop(&(model_case){"opt_preln", 2, DZ_F32, LOZO, 1100});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_cap_refusals),
        cmocka_unit_test(device_store_with_streamed_globals_refused),
        cmocka_unit_test(overlap_wait_dropped_is_a_hazard),
        cmocka_unit_test(opt_committed_f32),
        cmocka_unit_test(llama_committed_bf16),
        cmocka_unit_test(opt_5_layers_bf16),
        cmocka_unit_test(llama_5_layers_f32),
        cmocka_unit_test(sparse_opt_f32),
        cmocka_unit_test(sparse_llama_bf16),
        cmocka_unit_test(lozo_llama_f32),
        cmocka_unit_test(lozo_opt_bf16),
        cmocka_unit_test(sparse_wide_rows_llama_bf16),
        cmocka_unit_test(lozo_wide_rows_opt_f32),
    };
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
