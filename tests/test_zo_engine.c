/* The ZO engine's properties on a tiny real-shaped model (tests/data/hf/llama_gqa_untied
 * and opt_preln): g against an independent perturbation + plain forward, exact restore,
 * fused == unfused, 1 == 2 threads, every instruction-set level (1 and 2 threads) == the
 * baseline, replay == training, non-finite losses skipped; the last four for every estimator
 * (MeZO, Sparse-MeZO, LOZO), and Sparse-MeZO at density 1 is MeZO bitwise. (Each
 * estimator against an independent reference: tests/test_pipeline.c.) */
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
#include "distzo/util.h"
#include "distzo/zo.h"
#include "backend/backend.h"

#include "zo_fixture.h"

static void nan_loss(const float *lp, const float *plp, void *user, double *out) {
    (void)lp, (void)plp, (void)user;
    out[0] = NAN, out[1] = 1.0;
}

/* An independent weight source: theta + sign*eps*z built here in double from the CPU backend's z_fill. */
typedef struct ref_source {
    const dz_model *m;
    uint64_t seed;
    uint32_t draw;
    float eps;
    double sign;
} ref_source;

static const float *ref_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    (void)stream;
    const ref_source *r = self;
    const int64_t cols = dz_model_params(r->m)->params[id].cols;
    const size_t n = (size_t)(nrows * cols);
    const float *theta = (const float *)dz_model_tensor(r->m, id) + row0 * cols;
    dz_backend_cpu()->ops->z_fill(dz_backend_cpu(), scratch, r->seed, (uint32_t)id, r->draw, (uint64_t)(row0 * cols), n,
                                  DZ_Z_GAUSSIAN);
    for (size_t i = 0; i < n; i++) scratch[i] = (float)((double)theta[i] + r->sign * (double)r->eps * scratch[i]);
    return scratch;
}

static double ref_loss(const dz_model *m, fixture *fx, uint64_t seed, uint32_t draw, float eps, double sign) {
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create(m, B, T, 0, &f, &err), DZ_OK);
    ref_source rs = {m, seed, draw, eps, sign};
    dz_weight_source w = {.rows = ref_rows, .self = &rs};
    float lp[B * T];
    assert_int_equal(dz_forward_run(f, &w, fx->tokens, fx->lengths, B, T, 0, &err), DZ_OK);
    assert_int_equal(dz_forward_logprobs(f, &w, fx->rows, fx->targets, fx->n_rows, lp, &err), DZ_OK);
    dz_forward_free(f);
    return mean_nll(lp, NULL, fx);
}

static void g_matches_independent_perturbed_forwards(void **state) {
    (void)state;
    static const char *names[] = {"llama_gqa_untied", "opt_preln"};
    for (int k = 0; k < 2; k++) {
        fixture fx;
        load_batch(names[k], &fx);
        dz_model *m = load_owned(names[k], DZ_F32);
        const uint64_t before = checksum(m);
        dz_forward *f;
        dz_zo_engine *e;
        dz_error err = {0};
        assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
        const dz_zo_params p = {.seed = 11, .eps = 1e-2f, .q = 1, .fuse = 1};
        assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_OK);
        const dz_zo_batch zb = batch_of(&fx, mean_nll_cb);
        dz_zo_step_result r;
        const double t0 = dz_now();
        assert_int_equal(dz_zo_step(e, 5, 0.0f, &zb, &r, &err), DZ_OK); /* lr 0: weights must come back exact */
        const double wall = dz_now() - t0;
        /* the phases are disjoint laps inside the call: each one ran, and together they fit in it */
        const dz_zo_step_time *tm = &r.time;
        assert_true(tm->begin > 0 && tm->pass > 0 && tm->layers > 0 && tm->head > 0);
        assert_true(tm->begin + tm->pass + tm->layers + tm->head <= wall);
        assert_int_equal(dz_zo_flush(e, &err), DZ_OK);
        assert_true(checksum(m) == before); /* the master is never perturbed in place */
        const double lp = ref_loss(m, &fx, 11, 5, 1e-2f, +1.0), lm = ref_loss(m, &fx, 11, 5, 1e-2f, -1.0);
        const double g_ref = (lp - lm) / (2.0 * 1e-2);
        printf("  %-18s L+ %.7f (ref %.7f)  L- %.7f (ref %.7f)  g %.6f (ref %.6f)\n", names[k], r.loss_plus[0], lp,
               r.loss_minus[0], lm, r.g[0], g_ref);
        assert_true(fabs(r.loss_plus[0] - lp) <= 1e-5 * fabs(lp));
        assert_true(fabs(r.loss_minus[0] - lm) <= 1e-5 * fabs(lm));
        assert_true(fabs(r.g[0] - g_ref) <= 2e-3 * fabs(g_ref) + 1e-3);
        /* and g is the central difference of the directional derivative: on the smooth
         * (SiLU) model its error shrinks ~4x each time eps halves (O(eps^2)); ReLU kinks in
         * the random OPT make that one too rough to show it at these scales */
        if (k == 1) goto done;
        double gs[3];
        for (int i = 0; i < 3; i++) {
            const float ep = 4e-3f / (float)(1 << i);
            gs[i] = (ref_loss(m, &fx, 11, 5, ep, +1.0) - ref_loss(m, &fx, 11, 5, ep, -1.0)) / (2.0 * ep);
        }
        printf("  %-18s g at eps 4e-3, 2e-3, 1e-3: %.6f %.6f %.6f\n", names[k], gs[0], gs[1], gs[2]);
        assert_true(fabs(gs[2] - gs[1]) < 0.5 * fabs(gs[1] - gs[0]));
    done:
        dz_zo_engine_free(e);
        dz_forward_free(f);
        dz_model_free(m);
    }
}

/* The estimators with the knobs the tests use (lozo: nu 2, so runs cross windows). */
static const dz_zo_params ESTIMATORS[] = {
    {.estimator = DZ_ZO_MEZO},
    {.estimator = DZ_ZO_SPARSE, .sparse_density = 0.25f},
    {.estimator = DZ_ZO_LOZO, .lozo_rank = 2, .lozo_nu = 2},
};
enum { N_ESTIMATORS = sizeof ESTIMATORS / sizeof ESTIMATORS[0] };
static const dz_zo_params *g_est = &ESTIMATORS[0]; /* the estimator train() and replay use */

static dz_zo_params params_of(uint64_t seed, float eps, int q, float wd, int fuse) {
    dz_zo_params p = *g_est;
    p.seed = seed, p.eps = eps, p.q = q, p.wd = wd, p.fuse = fuse;
    return p;
}

/* Trains `steps` steps with g_est; records g per step; returns the weights' checksum. */
static uint64_t train(const char *name, dz_dtype dt, int fuse, int threads, int q, int steps, float *g_out) {
    fixture fx;
    load_batch(name, &fx);
    dz_set_num_threads(threads);
    dz_model *m = load_owned(name, dt);
    dz_forward *f;
    dz_zo_engine *e;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params p = params_of(3, 1e-3f, q, 0.01f, fuse);
    assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_OK);
    const dz_zo_batch zb = batch_of(&fx, mean_nll_cb);
    for (int s = 0; s < steps; s++) {
        dz_zo_step_result r;
        assert_int_equal(dz_zo_step(e, (uint32_t)s, 1e-3f, &zb, &r, &err), DZ_OK);
        assert_true(r.finite);
        for (int j = 0; j < q; j++) g_out[s * q + j] = r.g[j];
    }
    assert_int_equal(dz_zo_flush(e, &err), DZ_OK);
    const uint64_t sum = checksum(m);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_model_free(m);
    dz_set_num_threads(0);
    return sum;
}

/* With g_est. */
static void fused_unfused_and_thread_counts_agree(void) {
    enum { S = 6 };
    float g[4][S * 2];
    printf("  %s\n", dz_zo_estimator_name(g_est->estimator));
    for (int q = 1; q <= 2; q++) {
        const uint64_t a = train("opt_preln", DZ_F32, 1, 1, q, S, g[0]);
        const uint64_t b = train("opt_preln", DZ_F32, 0, 1, q, S, g[1]);
        const uint64_t c = train("opt_preln", DZ_F32, 1, 2, q, S, g[2]);
        const uint64_t d = train("opt_preln", DZ_F32, 0, 2, q, S, g[3]);
        printf("  q=%d checksums fused/1t %016llx unfused/1t %016llx fused/2t %016llx unfused/2t %016llx\n", q,
               (unsigned long long)a, (unsigned long long)b, (unsigned long long)c, (unsigned long long)d);
        assert_true(a == b && a == c && a == d);
        for (int k = 1; k < 4; k++) assert_memory_equal(g[0], g[k], sizeof(float) * S * q);
    }
    /* bf16 masters (stochastic rounding) too */
    const uint64_t e1 = train("llama_gqa_untied", DZ_BF16, 1, 1, 1, S, g[0]);
    const uint64_t e2 = train("llama_gqa_untied", DZ_BF16, 0, 2, 1, S, g[1]);
    assert_true(e1 == e2);
    assert_memory_equal(g[0], g[1], sizeof(float) * S);
}

static void fused_unfused_and_thread_counts_are_bitwise_equal(void **state) {
    (void)state;
    for (int k = 0; k < N_ESTIMATORS; k++) {
        g_est = &ESTIMATORS[k];
        fused_unfused_and_thread_counts_agree();
    }
    g_est = &ESTIMATORS[0];
}

/* Whole steps (forward, perturbation, update, RNG) at every level, with 1 and 2 threads,
 * give the baseline's 2-thread weights and g, f32 and bf16 masters. */
static void training_is_bitwise_equal_across_levels(void **state) {
    (void)state;
    enum { S = 4, Q = 2 };
    float want[S * Q], got[S * Q];
    const struct { const char *model; dz_dtype dt; } runs[] = {{"opt_preln", DZ_F32}, {"llama_gqa_untied", DZ_BF16}};
    for (size_t r = 0; r < N_ESTIMATORS * sizeof runs / sizeof runs[0]; r++) {
        g_est = &ESTIMATORS[r % N_ESTIMATORS];
        assert_int_equal(dz_isa_force(DZ_ISA_BASELINE, NULL), DZ_OK);
        const uint64_t baseline = train(runs[r / N_ESTIMATORS].model, runs[r / N_ESTIMATORS].dt, 1, 2, Q, S, want);
        for (dz_isa isa = DZ_ISA_BASELINE; isa <= dz_isa_best(); isa++)
            for (int threads = 1; threads <= 2; threads++) {
                if (isa == DZ_ISA_BASELINE && threads == 2) continue; /* the reference itself */
                assert_int_equal(dz_isa_force(isa, NULL), DZ_OK);
                const uint64_t sum = train(runs[r / N_ESTIMATORS].model, runs[r / N_ESTIMATORS].dt, 1, threads, Q, S, got);
                printf("  %s %s at %s, %d thread(s): checksum %016llx, baseline %016llx\n",
                       dz_zo_estimator_name(g_est->estimator), runs[r / N_ESTIMATORS].model,
                       dz_isa_name(isa), threads, (unsigned long long)sum, (unsigned long long)baseline);
                assert_true(sum == baseline);
                assert_memory_equal(got, want, sizeof want);
            }
    }
    assert_int_equal(dz_isa_force(DZ_ISA_AUTO, NULL), DZ_OK);
    g_est = &ESTIMATORS[0];
}

/* With g_est. */
static void replay_agrees(void) {
    enum { S = 5 };
    float g[S];
    const uint64_t trained = train("llama_gqa_untied", DZ_F32, 1, 2, 1, S, g);
    dz_model *m = load_owned("llama_gqa_untied", DZ_F32);
    dz_forward *f;
    dz_zo_engine *e;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, 1, 2, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params p = params_of(3, 1e-3f, 1, 0.01f, 1);
    assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_OK);
    for (int s = 0; s < S; s++) assert_int_equal(dz_zo_apply(e, (uint32_t)s, 1e-3f, &g[s], &err), DZ_OK);
    printf("  %s: replayed %016llx, trained %016llx\n", dz_zo_estimator_name(g_est->estimator),
           (unsigned long long)checksum(m), (unsigned long long)trained);
    assert_true(checksum(m) == trained);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_model_free(m);
}

static void replay_equals_training(void **state) {
    (void)state;
    for (int k = 0; k < N_ESTIMATORS; k++) {
        g_est = &ESTIMATORS[k];
        replay_agrees();
    }
    g_est = &ESTIMATORS[0];
}

/* Every row's whole mask is on at density 1, so Sparse-MeZO is MeZO; and the estimators do
 * differ from MeZO otherwise. */
static void sparse_at_density_1_is_mezo(void **state) {
    (void)state;
    enum { S = 3, Q = 2 };
    float g[4][S * Q];
    const dz_zo_params dense = {.estimator = DZ_ZO_SPARSE, .sparse_density = 1.0f};
    uint64_t sums[4];
    const dz_zo_params *runs[4] = {&ESTIMATORS[0], &dense, &ESTIMATORS[1], &ESTIMATORS[2]};
    for (int k = 0; k < 4; k++) {
        g_est = runs[k];
        sums[k] = train("llama_gqa_untied", DZ_BF16, 1, 2, Q, S, g[k]);
    }
    g_est = &ESTIMATORS[0];
    assert_true(sums[0] == sums[1]);
    assert_memory_equal(g[0], g[1], sizeof g[0]);
    assert_true(sums[0] != sums[2] && sums[0] != sums[3] && sums[2] != sums[3]);
}

static void bad_estimator_knobs_are_refused(void **state) {
    (void)state;
    dz_model *m = load_owned("opt_preln", DZ_F32);
    dz_forward *f;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params bad[] = {
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = DZ_ZO_SPARSE, .sparse_density = 0.0f},
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = DZ_ZO_SPARSE, .sparse_density = 1.5f},
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = DZ_ZO_LOZO, .lozo_rank = 0, .lozo_nu = 5},
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = DZ_ZO_LOZO, .lozo_rank = DZ_ZO_LOZO_MAX_RANK + 1, .lozo_nu = 5},
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = DZ_ZO_LOZO, .lozo_rank = 2, .lozo_nu = 0},
        {.seed = 1, .eps = 1e-3f, .q = 1, .estimator = (dz_zo_estimator)7},
    };
    static const char *names[] = {"--sparse-density", "--sparse-density", "--lozo-rank", "--lozo-rank", "--lozo-nu",
                                  "unknown estimator"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dz_zo_engine *e = NULL;
        assert_int_equal(dz_zo_engine_create(m, f, &bad[k], &e, &err), DZ_ERR_INVALID);
        assert_null(e);
        printf("  refused: %s\n", err.msg);
        assert_non_null(strstr(err.msg, names[k]));
    }
    dz_forward_free(f);
    dz_model_free(m);
}

static void non_finite_loss_skips_the_update(void **state) {
    (void)state;
    fixture fx;
    load_batch("opt_preln", &fx);
    dz_model *m = load_owned("opt_preln", DZ_F32);
    const uint64_t before = checksum(m);
    dz_forward *f;
    dz_zo_engine *e;
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params p = {.seed = 3, .eps = 1e-3f, .q = 1, .fuse = 1};
    assert_int_equal(dz_zo_engine_create(m, f, &p, &e, &err), DZ_OK);
    const dz_zo_batch zb = batch_of(&fx, nan_loss);
    dz_zo_step_result r;
    assert_int_equal(dz_zo_step(e, 0, 1.0f, &zb, &r, &err), DZ_OK);
    assert_false(r.finite);
    assert_int_equal(dz_zo_flush(e, &err), DZ_OK);
    assert_true(checksum(m) == before);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(g_matches_independent_perturbed_forwards),
        cmocka_unit_test(fused_unfused_and_thread_counts_are_bitwise_equal),
        cmocka_unit_test(training_is_bitwise_equal_across_levels),
        cmocka_unit_test(replay_equals_training),
        cmocka_unit_test(non_finite_loss_skips_the_update),
        cmocka_unit_test(sparse_at_density_1_is_mezo),
        cmocka_unit_test(bad_estimator_knobs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
