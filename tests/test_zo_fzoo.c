/* --estimator fzoo (src/zo/fzoo.c) on a tiny real-shaped model (tests/data/hf): two steps
 * against a plain loop written here from the contract (docs/ESTIMATORS.md "FZOO"): the
 * Rademacher directions from the scalar Philox of docs/ZO_RNG.md section 2-3, l0 and
 * l_j by plain forwards over weights built here, sigma and g, and the update of section 5
 * element by element; then fused == unfused, 1 == 2 threads and every ISA level == the
 * baseline (f32 and bf16 masters), replay of the g == training, a federated worker's
 * coefficients == the step's g, the flat-loss guard and
 * the refused parameters. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/isa.h"
#include "core/threads.h"
#include "distzo/zo.h"
#include "backend/zo_ops.h"

#include "zo_fixture.h"

enum { N = 4 };

static void constant_loss(const float *lp, const float *plp, void *user, double *out) {
    (void)lp, (void)plp, (void)user;
    out[0] = 0.75, out[1] = 1.0;
}

static dz_zo_params fzoo_params(float eps, float wd, int fuse) {
    return (dz_zo_params){.seed = 7, .eps = eps, .q = N, .rademacher = 1, .wd = wd, .fuse = fuse,
                          .estimator = DZ_ZO_FZOO};
}

/* ---- The reference: the contract as a plain loop ---------------------------------- */

/* Section 3's Rademacher z of element i: the sign of word i mod 4 of Philox block
 * (i / 4, purpose 0, tensor t, draw d) under key (seed lo, seed hi). */
static float ref_z(uint64_t seed, uint32_t t, uint32_t d, uint64_t i) {
    const uint32_t ctr[4] = {(uint32_t)(i / 4), 0, t, d}, key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t x[4];
    dz_philox4x32_10(ctr, key, x);
    return (x[i % 4] & 0x80000000u) ? -1.0f : 1.0f;
}

/* The reference weights (f32, one array per tensor) as a weight source perturbed by
 * eps z of one draw (eps 0: the weights as they are). */
typedef struct ref_model {
    const dz_model *m;
    float **theta;
    uint64_t seed;
    uint32_t draw;
    float eps;
} ref_model;

static const float *ref_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    (void)stream;
    const ref_model *r = self;
    const int64_t cols = dz_model_params(r->m)->params[id].cols;
    for (int64_t k = 0; k < nrows * cols; k++) {
        const uint64_t i = (uint64_t)(row0 * cols + k);
        scratch[k] = r->theta[id][i] + r->eps * ref_z(r->seed, (uint32_t)id, r->draw, i); /* w+ = theta + eps z */
    }
    return scratch;
}

static double ref_loss(ref_model *r, fixture *fx, uint32_t draw, float eps) {
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(r->m, B, T, 0, &f, &err), DZ_OK);
    r->draw = draw, r->eps = eps;
    const dz_weight_source w = {.rows = ref_rows, .self = r};
    float lp[B * T];
    assert_int_equal(dz_forward_run(f, &w, fx->tokens, fx->lengths, B, T, 0, &err), DZ_OK);
    assert_int_equal(dz_forward_logprobs(f, &w, fx->rows, fx->targets, fx->n_rows, lp, &err), DZ_OK);
    dz_forward_free(f);
    return mean_nll(lp, NULL, fx);
}

/* FZOO's coefficients from the losses, written from the definition. */
static void ref_g(double l0, const double *l, float eps, float *g) {
    double sum = 0.0, ss = 0.0;
    for (int j = 0; j < N; j++) sum += l[j];
    const double mean = sum / N;
    for (int j = 0; j < N; j++) ss += (l[j] - mean) * (l[j] - mean);
    const double sigma = sqrt(ss / (N - 1)); /* the sample standard deviation */
    for (int j = 0; j < N; j++) g[j] = (float)((l[j] - l0) / ((double)eps * sigma));
}

/* Section 5 for one element: U = sum_j g_j z_j in order, / N, + wd theta, theta - lr U. */
static void ref_update(ref_model *r, uint32_t step, float lr, float wd, const float *g) {
    const dz_param_table *t = dz_model_params(r->m);
    for (int id = 0; id < t->count; id++) {
        const dz_param *p = &t->params[id];
        const float wdp = p->kind == DZ_PARAM_MATRIX || p->kind == DZ_PARAM_EMBEDDING ? wd : 0.0f;
        for (uint64_t i = 0; i < (uint64_t)dz_param_numel(p); i++) {
            float u = 0.0f;
            for (int j = 0; j < N; j++) u = u + g[j] * ref_z(r->seed, (uint32_t)id, step * N + (uint32_t)j, i);
            u = u / (float)N;
            if (wdp != 0.0f) u = u + wdp * r->theta[id][i];
            r->theta[id][i] = r->theta[id][i] - lr * u;
        }
    }
}

static float **copy_weights(const dz_model *m) {
    const dz_param_table *t = dz_model_params(m);
    float **w = calloc((size_t)t->count, sizeof *w);
    for (int id = 0; id < t->count; id++) {
        const size_t n = (size_t)dz_param_numel(&t->params[id]);
        w[id] = malloc(n * sizeof(float));
        memcpy(w[id], dz_model_tensor(m, id), n * sizeof(float));
    }
    return w;
}

static void free_weights(float **w, int n) {
    for (int id = 0; id < n; id++) free(w[id]);
    free(w);
}

static int close_rel(double a, double b, double rel, double abs_) { return fabs(a - b) <= rel * fabs(b) + abs_; }

/* One engine step against the reference at its weights: losses close (the engine's
 * batched head sums in another order), g from the engine's own losses bitwise, g from the
 * reference's losses close; then the reference takes the engine's g. */
static void check_step(dz_zo_engine *e, ref_model *r, fixture *fx, uint32_t step, float lr, float wd, float eps) {
    const dz_zo_batch zb = batch_of(fx, mean_nll_cb);
    dz_zo_step_result res;
    dz_error err = {0};
    assert_int_equal(dz_zo_step(e, step, lr, &zb, &res, &err), DZ_OK);
    assert_true(res.finite);
    const double l0 = ref_loss(r, fx, step * N, 0.0f);
    double l[N];
    float g_own[N], g_ref[N];
    for (int j = 0; j < N; j++) l[j] = ref_loss(r, fx, step * N + (uint32_t)j, eps);
    ref_g(res.loss_minus[0], res.loss_plus, eps, g_own);
    ref_g(l0, l, eps, g_ref);
    double gmax = 0.0;
    for (int j = 0; j < N; j++) gmax = fmax(gmax, fabs(g_ref[j]));
    for (int j = 0; j < N; j++) {
        printf("  step %u dir %d: l %.7f (ref %.7f) l0 %.7f (ref %.7f) g %.5f (ref %.5f)\n", step, j, res.loss_plus[j],
               l[j], res.loss_minus[j], l0, res.g[j], g_ref[j]);
        assert_true(close_rel(res.loss_plus[j], l[j], 1e-5, 0.0));
        assert_true(res.loss_minus[j] == res.loss_minus[0]);
        assert_memory_equal(&res.g[j], &g_own[j], sizeof(float));
        assert_true(close_rel(res.g[j], g_ref[j], 0.0, 0.05 * gmax));
    }
    assert_true(close_rel(res.loss_minus[0], l0, 1e-5, 0.0));
    ref_update(r, step, lr, wd, res.g);
}

static void two_steps_match_the_reference_loop(void **state) {
    (void)state;
    static const char *names[] = {"llama_gqa_untied", "opt_preln"};
    for (int k = 0; k < 2; k++) {
        for (int fuse = 0; fuse <= 1; fuse++) {
            fixture fx;
            load_batch(names[k], &fx);
            const dz_zo_params p = fzoo_params(1e-2f, 0.01f, fuse);
            zo_rig g = zo_rig_open(names[k], DZ_F32, &p);
            const dz_model *m = g.m;
            ref_model r = {.m = m, .theta = copy_weights(m), .seed = 7};
            dz_error err = {0};
            for (uint32_t s = 0; s < 2; s++) check_step(g.e, &r, &fx, s, 1e-5f, 0.01f, 1e-2f);
            assert_int_equal(dz_zo_flush(g.e, &err), DZ_OK);
            const dz_param_table *t = dz_model_params(m);
            for (int id = 0; id < t->count; id++)
                assert_memory_equal(dz_model_tensor(m, id), r.theta[id],
                                    (size_t)dz_param_numel(&t->params[id]) * sizeof(float));
            printf("  %s %s: the masters after 2 steps == the reference loop's, bitwise\n", names[k],
                   fuse ? "fused" : "unfused");
            free_weights(r.theta, t->count);
            zo_rig_close(&g);
        }
    }
}

/* ---- Determinism and replay ------------------------------------------------------- */

enum { S = 3 };

static uint64_t train(const char *name, dz_dtype dt, int fuse, int threads, float *g_out) {
    fixture fx;
    load_batch(name, &fx);
    dz_set_num_threads(threads);
    const dz_zo_params p = fzoo_params(1e-3f, 0.01f, fuse);
    zo_rig g = zo_rig_open(name, dt, &p);
    dz_error err = {0};
    const dz_zo_batch zb = batch_of(&fx, mean_nll_cb);
    for (int s = 0; s < S; s++) {
        dz_zo_step_result r;
        assert_int_equal(dz_zo_step(g.e, (uint32_t)s, 1e-5f, &zb, &r, &err), DZ_OK);
        assert_true(r.finite);
        memcpy(g_out + s * N, r.g, sizeof(float) * N);
    }
    assert_int_equal(dz_zo_flush(g.e, &err), DZ_OK);
    const uint64_t sum = checksum(g.m);
    zo_rig_close(&g);
    dz_set_num_threads(0);
    return sum;
}

/* Every level with 1 and 2 threads, fused and not, gives the baseline's 2-thread fused
 * weights and g; f32 and bf16 masters. */
static void threads_levels_and_fusing_are_bitwise_equal(void **state) {
    (void)state;
    const struct { const char *model; dz_dtype dt; } runs[] = {{"opt_preln", DZ_F32}, {"llama_gqa_untied", DZ_BF16}};
    for (int r = 0; r < 2; r++) {
        float want[S * N], got[S * N];
        assert_int_equal(dz_isa_force(DZ_ISA_BASELINE, NULL), DZ_OK);
        const uint64_t baseline = train(runs[r].model, runs[r].dt, 1, 2, want);
        for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++)
            for (int v = 0; v < 4; v++) {
                const int threads = 1 + (v & 1), fuse = !(v & 2);
                if (isa == DZ_ISA_BASELINE && threads == 2 && fuse) continue; /* the reference itself */
                assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
                const uint64_t sum = train(runs[r].model, runs[r].dt, fuse, threads, got);
                printf("  fzoo %s at %s, %d thread(s), %s: %016llx, baseline %016llx\n", runs[r].model,
                       dz_isa_name(isa), threads, fuse ? "fused" : "unfused", (unsigned long long)sum,
                       (unsigned long long)baseline);
                assert_true(sum == baseline);
                assert_memory_equal(got, want, sizeof want);
            }
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
}

/* The logged g alone (dz_zo_apply, as resume and export replay the seed log) rebuild the
 * trained weights. */
static void replay_equals_training(void **state) {
    (void)state;
    float g[S * N];
    const uint64_t trained = train("llama_gqa_untied", DZ_F32, 1, 2, g);
    const dz_zo_params p = fzoo_params(1e-3f, 0.01f, 1);
    zo_rig r = zo_rig_open("llama_gqa_untied", DZ_F32, &p);
    dz_error err = {0};
    for (int s = 0; s < S; s++) assert_int_equal(dz_zo_apply(r.e, (uint32_t)s, 1e-5f, g + s * N, &err), DZ_OK);
    assert_int_equal(dz_zo_flush(r.e, &err), DZ_OK);
    printf("  replayed %016llx, trained %016llx\n", (unsigned long long)checksum(r.m), (unsigned long long)trained);
    assert_true(checksum(r.m) == trained);
    zo_rig_close(&r);
}

/* Losses that agree (sigma 0) leave no direction: g = 0, finite, and without weight
 * decay the weights stay bitwise as they were. */
static void flat_losses_give_no_update(void **state) {
    (void)state;
    fixture fx;
    load_batch("llama_gqa_untied", &fx);
    const dz_zo_params p = fzoo_params(1e-3f, 0.0f, 1);
    zo_rig g = zo_rig_open("llama_gqa_untied", DZ_F32, &p);
    const uint64_t before = checksum(g.m);
    dz_error err = {0};
    const dz_zo_batch zb = batch_of(&fx, constant_loss);
    dz_zo_step_result r;
    assert_int_equal(dz_zo_step(g.e, 0, 1e-3f, &zb, &r, &err), DZ_OK);
    assert_true(r.finite);
    for (int j = 0; j < N; j++) assert_true(r.g[j] == 0.0f && r.loss_plus[j] == 0.75 && r.loss_minus[j] == 0.75);
    assert_int_equal(dz_zo_flush(g.e, &err), DZ_OK);
    assert_true(checksum(g.m) == before);
    zo_rig_close(&g);
}

/* A federated worker's round (dz_zo_fzoo_coefficients): the step's g and losses bitwise,
 * at step 1 after a step (so a pending update is in the first pass), and no update of its
 * own: the weights stay those after step 0. An engine of another estimator is refused. */
static void coefficients_are_the_steps_g(void **state) {
    (void)state;
    fixture fx;
    load_batch("llama_gqa_untied", &fx);
    const dz_zo_params p = fzoo_params(1e-3f, 0.01f, 1);
    zo_rig a = zo_rig_open("llama_gqa_untied", DZ_F32, &p), b = zo_rig_open("llama_gqa_untied", DZ_F32, &p);
    dz_error err = {0};
    const dz_zo_batch zb = batch_of(&fx, mean_nll_cb);
    dz_zo_step_result ra, rb;
    assert_int_equal(dz_zo_step(a.e, 0, 1e-5f, &zb, &ra, &err), DZ_OK);
    assert_int_equal(dz_zo_step(b.e, 0, 1e-5f, &zb, &rb, &err), DZ_OK);
    assert_int_equal(dz_zo_step(a.e, 1, 1e-5f, &zb, &ra, &err), DZ_OK);
    assert_int_equal(dz_zo_fzoo_coefficients(b.e, 1, &zb, &rb, &err), DZ_OK);
    assert_true(ra.finite && rb.finite);
    for (int j = 0; j < N; j++) {
        assert_memory_equal(&ra.g[j], &rb.g[j], sizeof ra.g[j]);
        assert_true(ra.loss_plus[j] == rb.loss_plus[j] && ra.loss_minus[j] == rb.loss_minus[j]);
    }
    assert_int_equal(dz_zo_flush(b.e, &err), DZ_OK);
    const uint64_t after_coefficients = checksum(b.m);
    assert_int_equal(dz_zo_apply(b.e, 1, 1e-5f, rb.g, &err), DZ_OK);
    assert_int_equal(dz_zo_flush(a.e, &err), DZ_OK);
    assert_int_equal(dz_zo_flush(b.e, &err), DZ_OK);
    assert_true(checksum(b.m) != after_coefficients && checksum(a.m) == checksum(b.m));
    zo_rig_close(&a), zo_rig_close(&b);
    dz_zo_params mp = p;
    mp.estimator = DZ_ZO_MEZO, mp.q = 1;
    zo_rig m = zo_rig_open("llama_gqa_untied", DZ_F32, &mp);
    assert_int_equal(dz_zo_fzoo_coefficients(m.e, 0, &zb, &rb, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "estimator mezo"));
    zo_rig_close(&m);
}

static void bad_parameters_are_refused(void **state) {
    (void)state;
    dz_model *m = load_owned("llama_gqa_untied", DZ_F32);
    dz_forward *f;
    dz_zo_engine *e = NULL;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    dz_zo_params p = fzoo_params(1e-3f, 0.0f, 1);
    p.q = 1;
    assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "at least 2 directions"));
    p = fzoo_params(1e-3f, 0.0f, 1);
    p.rademacher = 0;
    assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_ERR_INVALID);
    assert_non_null(strstr(err.msg, "Rademacher"));
    assert_null(e);
    assert_string_equal(dz_zo_estimator_name(DZ_ZO_FZOO), "fzoo");
    dz_zo_estimator est;
    assert_int_equal(dz_zo_estimator_parse("fzoo", &est), 0);
    assert_int_equal(est, DZ_ZO_FZOO);
    dz_forward_free(f);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_steps_match_the_reference_loop),
        cmocka_unit_test(threads_levels_and_fusing_are_bitwise_equal),
        cmocka_unit_test(replay_equals_training),
        cmocka_unit_test(flat_losses_give_no_update),
        cmocka_unit_test(coefficients_are_the_steps_g),
        cmocka_unit_test(bad_parameters_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
