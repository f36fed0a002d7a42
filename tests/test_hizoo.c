/* HiZOO (--estimator hizoo) against a plain loop written here from the formulas of
 * include/distzo/zo.h and src/pipeline/hessian_z.c, with the contract's scalar Philox and
 * Box-Muller (backend/zo_ops.h) as its RNG and no pipeline: each step t computes
 *   L0 at theta, L+- at theta +- eps z / sqrt(H) (z: MeZO's Gaussian of draw t),
 *   g = (L+ - L-) / (2 eps), c = alpha |L+ + L- - 2 L0| / (2 eps^2) (double, then f32),
 *   per element: H = H (1 - alpha) + c (H (z z)); theta -= lr (0 + g z / sqrt(H) + wd theta)
 *   (bf16 masters stochastically rounded with the purpose-1 word of draw t).
 * The engine must give every L+, L-, g and c and, after the steps, every master byte and
 * every float of H, bit for bit: in RAM fused and unfused, with the layers in a disk store,
 * replayed from (g, c) alone (dz_zo_apply), at 1 and 3 threads and at every ISA level. The
 * settings HiZOO refuses are refused.
 * HiZOO-L (--hizoo-rank 1) the same way, its reference here: a 2-D tensor keeps R (rows),
 * C (cols) and mean(R), H_ij = R_i C_j / mean; an update first computes the moved H of
 * every element into a whole rows x cols matrix T, then R = its row means, C = its column
 * means (double sums in index order, then f32), mean = mean of R, then theta's update
 * with the new factors' H. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "temp_dir.h"

#include "backend/backend.h"
#include "core/isa.h"
#include "core/threads.h"
#include "distzo/zo.h"
#include "golden.h"
#include "nll_batch.h"
#include "store/store.h"

enum { STEPS = 4 };
static const uint64_t SEED = 33;
static const float EPS = 1e-3f, LR = 5e-3f, WD = 0.01f, ALPHA = 0.05f;
static int g_rank; /* 0: HiZOO; 1: HiZOO-L */

/* ---- what a run gives ------------------------------------------------------------------------ */

typedef struct trace {
    double loss_plus[STEPS], loss_minus[STEPS];
    float g[STEPS][2]; /* g and c: a seed-log record's values */
    unsigned char *masters;
    float *h;
    size_t masters_bytes, n_h;
} trace;

static void trace_free(trace *t) {
    free(t->masters);
    free(t->h);
}

/* ---- the reference RNG: the contract's scalar Philox4x32-10 and Box-Muller ------------------ */

static void philox_block(uint32_t purpose, uint32_t tensor, uint32_t draw, uint64_t i, uint32_t x[4]) {
    const uint32_t key[2] = {(uint32_t)SEED, (uint32_t)(SEED >> 32)}, ctr[4] = {(uint32_t)(i / 4), purpose, tensor, draw};
    dz_philox4x32_10(ctr, key, x);
}

static float z_at(uint32_t tensor, uint32_t draw, uint64_t i) {
    uint32_t x[4];
    philox_block(DZ_PURPOSE_Z, tensor, draw, i, x);
    const unsigned pair = (unsigned)(i & 2);
    float z[2];
    dz_box_muller(x[pair], x[pair + 1], &z[0], &z[1]);
    return z[i & 1];
}

/* ---- the reference loop --------------------------------------------------------------------- */

static int factored(const dz_param *t) { return g_rank == 1 && t->rows > 1 && t->cols > 1; }

static size_t state_floats(const dz_param *t) {
    return factored(t) ? (size_t)(t->rows + t->cols + 1) : (size_t)dz_param_numel(t);
}

/* H of element i of tensor t from its state s (factored: R, then C, then mean(R)). */
static float h_of(const dz_param *t, const float *s, int64_t i) {
    if (!factored(t)) return s[i];
    const int64_t r = i / t->cols, c = i % t->cols;
    return s[r] * s[t->rows + c] / s[t->rows + t->cols];
}

/* HiZOO's move of one H. */
static float moved(float h, float z, float c) {
    float k = z * z;
    k = h * k;
    k = c * k;
    return h * (1.0f - ALPHA) + k;
}

/* HiZOO-L: the factors of tensor id moved by step `step`'s c, from the whole matrix T. */
static void refactor(const dz_param *t, int id, float *s, uint32_t step, float c) {
    const int64_t rows = t->rows, cols = t->cols;
    float *tm = malloc(sizeof(float) * (size_t)(rows * cols));
    assert_non_null(tm);
    for (int64_t i = 0; i < rows * cols; i++) tm[i] = moved(h_of(t, s, i), z_at((uint32_t)id, step, (uint64_t)i), c);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++) sum += (double)tm[r * cols + j];
        s[r] = (float)(sum / (double)cols);
    }
    for (int64_t j = 0; j < cols; j++) {
        double sum = 0.0;
        for (int64_t r = 0; r < rows; r++) sum += (double)tm[r * cols + j];
        s[rows + j] = (float)(sum / (double)rows);
    }
    double sum = 0.0;
    for (int64_t r = 0; r < rows; r++) sum += (double)s[r];
    s[rows + cols] = (float)(sum / (double)rows);
    free(tm);
}

/* The loss of the whole model at w (every tensor as f32). */
static double loss_at(dz_forward *f, const whole_model *w, const batch *b, float *lp) {
    const dz_weight_source src = {.rows = whole_rows, .self = w};
    dz_error err = {0};
    if (dz_forward_run(f, &src, b->g.tokens, b->g.lengths, b->g.B, b->g.T, 0, &err) != DZ_OK ||
        dz_forward_logprobs(f, &src, b->rows, b->targets, b->n_rows, lp, &err) != DZ_OK)
        fail_msg("forward: %s", err.msg);
    return mean_nll(lp, b);
}

/* w = theta + sign * eps z / sqrt(H) of draw (sign 0: theta itself). */
static void fill(dz_model *m, float **w, float **h, uint32_t draw, int sign) {
    const dz_param_table *t = dz_model_params(m);
    for (int id = 0; id < t->count; id++)
        for (int64_t i = 0; i < dz_param_numel(&t->params[id]); i++) {
            const float th = widen(dz_model_tensor(m, id), dz_model_dtype(m), (size_t)i);
            const float s = z_at((uint32_t)id, draw, (uint64_t)i) / sqrtf(h_of(&t->params[id], h[id], i)), e = EPS * s;
            w[id][i] = sign == 0 ? th : sign > 0 ? th + e : th - e;
        }
}

static void update(dz_model *m, float **h, uint32_t step, float g, float c) {
    const dz_param_table *t = dz_model_params(m);
    const dz_dtype dt = dz_model_dtype(m);
    for (int id = 0; id < t->count; id++) {
        const float wd = decays(&t->params[id]) ? WD : 0.0f;
        void *theta = dz_model_tensor(m, id);
        const dz_param *pt = &t->params[id];
        if (factored(pt)) refactor(pt, id, h[id], step, c);
        for (int64_t i = 0; i < dz_param_numel(pt); i++) {
            const float z = z_at((uint32_t)id, step, (uint64_t)i), th = widen(theta, dt, (size_t)i);
            if (!factored(pt)) h[id][i] = moved(h[id][i], z, c);
            float v = 0.0f + g * (z / sqrtf(h_of(pt, h[id], i)));
            if (wd != 0.0f) v = v + wd * th;
            const float y = th - LR * v;
            if (dt == DZ_F32) {
                ((float *)theta)[i] = y;
            } else {
                uint32_t x[4];
                philox_block(DZ_PURPOSE_SR, (uint32_t)id, step, (uint64_t)i, x);
                ((uint16_t *)theta)[i] = dz_bf16_round_stochastic(y, x[i & 3]);
            }
        }
    }
}

static void keep_state(dz_model *m, float **h, trace *out) {
    const dz_param_table *t = dz_model_params(m);
    size_t bytes = 0, n = 0;
    for (int id = 0; id < t->count; id++) {
        bytes += (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dz_model_dtype(m));
        n += state_floats(&t->params[id]);
    }
    out->masters = malloc(bytes), out->h = malloc(n * sizeof(float));
    assert_true(out->masters && out->h);
    out->masters_bytes = bytes, out->n_h = n;
    size_t off = 0, k = 0;
    for (int id = 0; id < t->count; id++) {
        const size_t numel = (size_t)dz_param_numel(&t->params[id]), b = numel * dz_dtype_size(dz_model_dtype(m));
        const size_t ns = state_floats(&t->params[id]);
        memcpy(out->masters + off, dz_model_tensor(m, id), b);
        if (h) memcpy(out->h + k, h[id], ns * sizeof(float));
        off += b, k += ns;
    }
}

static void plain_hizoo(const char *dir, dz_dtype dt, const batch *b, trace *out) {
    memset(out, 0, sizeof *out);
    dz_model *m = load_owned(dir, dt);
    const dz_param_table *t = dz_model_params(m);
    float **w = calloc((size_t)t->count, sizeof *w), **h = calloc((size_t)t->count, sizeof *h);
    assert_true(w && h);
    for (int id = 0; id < t->count; id++) {
        const size_t n = (size_t)dz_param_numel(&t->params[id]), ns = state_floats(&t->params[id]);
        w[id] = malloc(n * sizeof(float)), h[id] = malloc(ns * sizeof(float));
        assert_true(w[id] && h[id]);
        for (size_t i = 0; i < ns; i++) h[id][i] = 1.0f;
    }
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_backend(m, NULL, b->g.B, b->g.T, 0, 1, &f, &err), DZ_OK);
    float *lp = malloc(sizeof(float) * (size_t)b->n_rows);
    const whole_model wm = {t, w};
    for (uint32_t step = 0; step < STEPS; step++) {
        fill(m, w, h, step, 0);
        const double l0 = loss_at(f, &wm, b, lp);
        fill(m, w, h, step, 1);
        const double lp_ = loss_at(f, &wm, b, lp);
        fill(m, w, h, step, -1);
        const double lm = loss_at(f, &wm, b, lp);
        out->loss_plus[step] = lp_, out->loss_minus[step] = lm;
        out->g[step][0] = (float)((lp_ - lm) / (2.0 * (double)EPS));
        out->g[step][1] = (float)((double)ALPHA * fabs(lp_ + lm - 2.0 * l0) / (2.0 * (double)EPS * (double)EPS));
        update(m, h, step, out->g[step][0], out->g[step][1]);
    }
    keep_state(m, h, out);
    for (int id = 0; id < t->count; id++) free(w[id]), free(h[id]);
    free(w), free(h), free(lp);
    dz_forward_free(f);
    dz_model_free(m);
}

/* ---- the engine ------------------------------------------------------------------------------ */

typedef struct how {
    const char *name;
    int fuse, disk, replay, threads;
} how;

typedef struct engine_run {
    dz_model *m;
    dz_forward *f;
    dz_store *s;
    dz_zo_engine *e;
} engine_run;

static dz_zo_params params_of(int fuse) {
    return (dz_zo_params){.seed = SEED, .eps = EPS, .q = 1, .wd = WD, .fuse = fuse, .estimator = DZ_ZO_HIZOO,
                          .hizoo_smooth = ALPHA, .hizoo_rank = g_rank};
}

static void engine_open(const char *dir, dz_dtype dt, const how *w, const batch *b, engine_run *r) {
    memset(r, 0, sizeof *r);
    char store_path[600];
    snprintf(store_path, sizeof store_path, "%s/hizoo_masters.safetensors", g_dir);
    dz_error err = {0};
    dz_status st = w->disk ? dz_store_load_model(dir, dt, &r->m, &err) : dz_model_load(dir, dt, &r->m, &err);
    if (st == DZ_OK) st = w->disk ? dz_store_create_as(store_path, r->m, dt, 0, &r->s, &err)
                                  : dz_model_make_owned(r->m, &err);
    if (st == DZ_OK) st = dz_forward_create_backend(r->m, NULL, b->g.B, b->g.T, 0, 2, &r->f, &err);
    if (st == DZ_OK && w->disk) st = dz_zo_store_residency(r->m, r->f, r->s, NULL, 0, 0, &err);
    const dz_zo_params zp = params_of(w->fuse);
    if (st == DZ_OK) st = dz_zo_engine_create(r->m, r->f, &zp, &r->e, &err);
    if (st == DZ_OK && w->disk) st = dz_zo_engine_use_store(r->e, r->s, &err);
    if (st != DZ_OK) fail_msg("%s, %s: %s", dir, w->name, err.msg);
}

static void engine_close(engine_run *r) {
    dz_zo_engine_free(r->e);
    dz_forward_free(r->f);
    dz_store_close(r->s);
    dz_model_free(r->m);
}

/* The masters (the model's, or the store's for the layers) and H after a flush. */
static void engine_state(engine_run *r, trace *out) {
    dz_error err = {0};
    if (dz_zo_flush(r->e, &err) != DZ_OK) fail_msg("flush: %s", err.msg);
    const dz_param_table *t = dz_model_params(r->m);
    const dz_dtype dt = dz_model_dtype(r->m);
    size_t bytes = 0;
    for (int id = 0; id < t->count; id++) bytes += (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dt);
    out->masters = malloc(bytes);
    assert_non_null(out->masters);
    out->masters_bytes = bytes;
    size_t off = 0;
    for (int id = 0; id < t->count; id++) {
        const size_t b = (size_t)dz_param_numel(&t->params[id]) * dz_dtype_size(dt);
        const void *p = dz_model_tensor(r->m, id);
        if (p) memcpy(out->masters + off, p, b);
        else if (dz_store_read_rows(r->s, id, 0, t->params[id].rows, out->masters + off, &err) != DZ_OK)
            fail_msg("store read: %s", err.msg);
        off += b;
    }
    size_t n = 0;
    const float *h = dz_zo_curvature(r->e, &n);
    assert_non_null(h);
    out->h = malloc(n * sizeof(float));
    assert_non_null(out->h);
    memcpy(out->h, h, n * sizeof(float));
    out->n_h = n;
}

static void run_engine(const char *dir, dz_dtype dt, const how *w, const batch *b, const trace *want, trace *out) {
    memset(out, 0, sizeof *out);
    dz_set_num_threads(w->threads);
    engine_run r;
    engine_open(dir, dt, w, b, &r);
    const dz_zo_batch zb = {.tokens = b->g.tokens, .lengths = b->g.lengths, .B = b->g.B, .T = b->g.T,
                            .rows = b->rows, .targets = b->targets, .n_rows = b->n_rows, .loss = mean_nll_cb,
                            .user = (void *)b};
    for (uint32_t step = 0; step < STEPS; step++) {
        dz_error err = {0};
        if (w->replay) {
            if (dz_zo_apply(r.e, step, LR, want->g[step], &err) != DZ_OK) fail_msg("replay: %s", err.msg);
            out->loss_plus[step] = want->loss_plus[step], out->loss_minus[step] = want->loss_minus[step];
            memcpy(out->g[step], want->g[step], sizeof out->g[step]);
            continue;
        }
        dz_zo_step_result res;
        if (dz_zo_step(r.e, step, LR, &zb, &res, &err) != DZ_OK) fail_msg("%s, step %u: %s", w->name, step, err.msg);
        assert_true(res.finite);
        out->loss_plus[step] = res.loss_plus[0], out->loss_minus[step] = res.loss_minus[0];
        out->g[step][0] = res.g[0], out->g[step][1] = res.g[1];
    }
    engine_state(&r, out);
    engine_close(&r);
    dz_set_num_threads(0);
}

static void expect_same(const char *what, const trace *want, const trace *got) {
    for (int s = 0; s < STEPS; s++) {
        if (memcmp(&want->loss_plus[s], &got->loss_plus[s], sizeof(double)) ||
            memcmp(&want->loss_minus[s], &got->loss_minus[s], sizeof(double)))
            fail_msg("%s: step %d: L+ %.17g / %.17g, L- %.17g / %.17g", what, s, want->loss_plus[s],
                     got->loss_plus[s], want->loss_minus[s], got->loss_minus[s]);
        if (memcmp(want->g[s], got->g[s], sizeof want->g[s]))
            fail_msg("%s: step %d: g %.9g / %.9g, c %.9g / %.9g", what, s, (double)want->g[s][0], (double)got->g[s][0],
                     (double)want->g[s][1], (double)got->g[s][1]);
    }
    assert_int_equal(want->masters_bytes, got->masters_bytes);
    assert_int_equal(want->n_h, got->n_h);
    for (size_t i = 0; i < want->n_h; i++)
        if (memcmp(&want->h[i], &got->h[i], sizeof(float)))
            fail_msg("%s: H[%zu] is %.9g, the reference's %.9g", what, i, (double)got->h[i], (double)want->h[i]);
    if (memcmp(want->masters, got->masters, want->masters_bytes)) fail_msg("%s: the masters differ", what);
}

/* The reference moves: H is no longer 1 everywhere and c is not 0 (else the test proves
 * less than it says). */
static void expect_curvature_moved(const trace *ref) {
    size_t moved = 0;
    for (size_t i = 0; i < ref->n_h; i++) moved += ref->h[i] != 1.0f;
    assert_true(moved > ref->n_h / 2);
    for (int s = 0; s < STEPS; s++) assert_true(ref->g[s][1] > 0.0f);
}

static void engine_equals_the_plain_loop(const char *model, dz_dtype dt) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/hf/%s", DZ_TEST_DATA, model);
    batch b;
    batch_load(model, &b);
    trace ref;
    plain_hizoo(dir, dt, &b, &ref);
    expect_curvature_moved(&ref);
    const how ways[] = {
        {"ram, fused", 1, 0, 0, 1},   {"ram, unfused", 0, 0, 0, 1}, {"ram, fused, 3 threads", 1, 0, 0, 3},
        {"disk store, fused", 1, 1, 0, 2}, {"replay", 1, 0, 1, 2},  {"replay over a disk store", 1, 1, 1, 2},
    };
    for (size_t k = 0; k < sizeof ways / sizeof ways[0]; k++) {
        trace got;
        run_engine(dir, dt, &ways[k], &b, &ref, &got);
        char what[200];
        snprintf(what, sizeof what, "%s %s rank %d, %s", model, dz_dtype_name(dt), g_rank, ways[k].name);
        expect_same(what, &ref, &got);
        trace_free(&got);
    }
    for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++) { /* every kernel level */
        assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
        trace got;
        run_engine(dir, dt, &(how){"level", 1, 0, 0, 2}, &b, &ref, &got);
        char what[200];
        snprintf(what, sizeof what, "%s %s rank %d at %s", model, dz_dtype_name(dt), g_rank, dz_isa_name(isa));
        expect_same(what, &ref, &got);
        trace_free(&got);
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    trace_free(&ref);
    batch_free(&b);
}

static void llama_f32(void **state) {
    (void)state;
    engine_equals_the_plain_loop("llama_gqa_untied", DZ_F32);
}

static void opt_bf16(void **state) {
    (void)state;
    engine_equals_the_plain_loop("opt_preln", DZ_BF16);
}

/* HiZOO-L: the factored state is far smaller than one float an element. */
static void expect_factored_size(const char *model) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/hf/%s", DZ_TEST_DATA, model);
    dz_model *m = load_owned(dir, DZ_F32);
    const dz_param_table *t = dz_model_params(m);
    size_t numel = 0, ns = 0, matrices = 0;
    for (int id = 0; id < t->count; id++) {
        numel += (size_t)dz_param_numel(&t->params[id]), ns += state_floats(&t->params[id]);
        matrices += factored(&t->params[id]);
    }
    assert_true(matrices > 0 && ns < numel / 2);
    dz_model_free(m);
}

static void lowrank_equals_the_plain_loop(const char *model, dz_dtype dt) {
    g_rank = 1;
    expect_factored_size(model);
    engine_equals_the_plain_loop(model, dt);
    g_rank = 0;
}

static void llama_f32_lowrank(void **state) {
    (void)state;
    lowrank_equals_the_plain_loop("llama_gqa_untied", DZ_F32);
}

static void opt_bf16_lowrank(void **state) {
    (void)state;
    lowrank_equals_the_plain_loop("opt_preln", DZ_BF16);
}

/* q > 1, alpha outside (0, 1) and a streamed global block are refused, naming the option. */
static void refusals(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/hf/opt_preln", DZ_TEST_DATA);
    batch b;
    batch_load("opt_preln", &b);
    engine_run r;
    memset(&r, 0, sizeof r);
    dz_error err = {0};
    r.m = load_owned(dir, DZ_F32);
    assert_int_equal(dz_forward_create_backend(r.m, NULL, b.g.B, b.g.T, 0, 2, &r.f, &err), DZ_OK);
    dz_zo_params zp = params_of(1);
    zp.q = 2;
    assert_int_not_equal(dz_zo_engine_create(r.m, r.f, &zp, &r.e, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--spsa-samples"));
    zp = params_of(1);
    zp.hizoo_smooth = 1.0f;
    assert_int_not_equal(dz_zo_engine_create(r.m, r.f, &zp, &r.e, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--hizoo-smooth"));
    zp = params_of(1);
    zp.hizoo_rank = 2;
    assert_int_not_equal(dz_zo_engine_create(r.m, r.f, &zp, &r.e, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--hizoo-rank"));
    zp = params_of(1);
    zp.estimator = DZ_ZO_MEZO, zp.hizoo_rank = 1;
    assert_int_not_equal(dz_zo_engine_create(r.m, r.f, &zp, &r.e, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "--hizoo-rank"));
    engine_close(&r);
    memset(&r, 0, sizeof r);
    char store_path[600];
    snprintf(store_path, sizeof store_path, "%s/hizoo_refused.safetensors", g_dir);
    assert_int_equal(dz_store_load_model(dir, DZ_F32, &r.m, &err), DZ_OK);
    assert_int_equal(dz_store_create_as(store_path, r.m, DZ_F32, 0, &r.s, &err), DZ_OK);
    assert_int_equal(dz_forward_create_backend(r.m, NULL, b.g.B, b.g.T, 0, 2, &r.f, &err), DZ_OK);
    assert_int_equal(dz_zo_store_residency(r.m, r.f, r.s, NULL, 0, 1, &err), DZ_OK); /* the globals streamed */
    zp = params_of(1);
    assert_int_equal(dz_zo_engine_create(r.m, r.f, &zp, &r.e, &err), DZ_OK);
    assert_int_not_equal(dz_zo_engine_use_store(r.e, r.s, &err), DZ_OK);
    assert_non_null(strstr(err.msg, "hizoo"));
    engine_close(&r);
    batch_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_f32),
        cmocka_unit_test(opt_bf16),
        cmocka_unit_test(llama_f32_lowrank),
        cmocka_unit_test(opt_bf16_lowrank),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, dz_temp_dir_setup, dz_temp_dir_teardown);
}
