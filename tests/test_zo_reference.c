/* distzo's first ZO training steps on the real stories260K + SST-2 train against the
 * independent reference tools/ref_zo_step.py (tests/data/zo/stories260k_steps.json):
 * gaussian q=1 (3 steps), rademacher q=1 and gaussian q=2 (2 steps each); batch 4,
 * 32 train + 8 dev examples, data seed 42, run seed 7, lr 1e-3, eps 1e-3, " bad"/" good".
 *  - train_matches_reference: the whole trainer (dz_train into a temp run folder): g of
 *    every draw from seeds.log, the step loss (mean of L+ and L-) from metrics.jsonl. This
 *    covers the data draw, the epoch shuffle, prompts, the dual forward and the fused updates.
 *  - engine_matches_reference: dz_zo_engine driven directly on the reference's examples,
 *    so L+ and L- of every draw are compared on their own.
 * Tolerances: losses 1e-5 relative (float32 forward vs the reference's float64 forward on
 * bitwise the same perturbed weights), g 1e-3 relative (g = (L+ - L-) / (2 eps) amplifies
 * the forward's rounding by 1/(2 eps)).
 * After step 0 the weights depend on the float32 g values distzo itself computed, which
 * differ from the reference's by forward rounding (~1e-5 relative); with lr 1e-3 and |g| up
 * to ~100 a step is large, and that difference moves the next losses by up to ~3e-5
 * relative. The reference therefore also gives dL/dg_k for every earlier draw k, and the
 * expected values are corrected to first order to distzo's own g_k:
 *   L_expected = L_ref + sum_k dL/dg_k (g_distzo_k - g_ref_k). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/util.h"
#include "distzo/distzo.h"
#include "distzo/train.h"
#include "run/metrics.h"
#include "run/seedlog.h"
#include "assets.h"

#define LOSS_RTOL 1e-5
#define G_RTOL 1e-3

static char g_model[1200], g_train[1200], g_tmp[256];
static cJSON *g_golden;

static int setup(void **state) {
    (void)state;
    char *text = NULL;
    size_t len = 0;
    dz_error err = {0};
    if (dz_read_file(DZ_TEST_DATA "/zo/stories260k_steps.json", &text, &len, &err) != DZ_OK)
        return fprintf(stderr, "%s\n", err.msg), -1;
    g_golden = cJSON_Parse(text);
    free(text);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/dz_zo_reference_XXXXXX");
    return g_golden && mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cJSON_Delete(g_golden);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void need_assets(void) {
    test_asset_path(g_model, sizeof g_model, "stories260K/stories260K.bin");
    test_asset_path(g_train, sizeof g_train, "sst2/train.tsv");
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return v;
}

/* |got - want| <= rtol |want|, or a failure naming what differs. */
static void expect_close(double got, double want, double rtol, const char *what, const char *run, int step, int j) {
    const double rel = fabs(got - want) / fabs(want);
    if (!(rel <= rtol))
        fail_msg("%s step %d draw %d: %s = %.9g, reference %.9g (relative difference %.3g > %.0e)", run, step, j,
                 what, got, want, rel, rtol);
}

/* The reference's L+, L- and g of draw d (a "draws" item), corrected to first order for
 * distzo's g of the earlier draws (g_dz[k], k < number of derivatives given). */
typedef struct expected {
    double lp, lm, g, lp_raw, lm_raw, g_raw;
} expected;

static expected expected_for(const cJSON *d, const float *g_dz, const float *g_ref, float eps) {
    expected x = {num(d, "loss_plus"), num(d, "loss_minus"), num(d, "g"), 0, 0, 0};
    x.lp_raw = x.lp, x.lm_raw = x.lm, x.g_raw = x.g;
    const cJSON *dp = item(d, "dloss_plus_dg"), *dm = item(d, "dloss_minus_dg");
    for (int k = 0; k < cJSON_GetArraySize(dp); k++) {
        const double dg = (double)g_dz[k] - (double)g_ref[k];
        x.lp += cJSON_GetArrayItem(dp, k)->valuedouble * dg;
        x.lm += cJSON_GetArrayItem(dm, k)->valuedouble * dg;
    }
    x.g = (float)((x.lp - x.lm) / (2.0 * (double)eps));
    return x;
}

/* The run configuration the reference used for one golden run; returns its step count. */
static int config_for(const cJSON *run, dz_train_config *c) {
    const int steps = cJSON_GetArraySize(item(run, "steps"));
    const cJSON *cfg = item(g_golden, "config");
    dz_train_config_default(c);
    c->model = g_model;
    c->data.train = g_train;
    c->data.test = NULL;
    c->data.label_words = "bad,good";
    c->optim.batch = (int)num(cfg, "batch");
    c->data.train_examples = (int)num(cfg, "train_examples");
    c->data.dev_examples = (int)num(cfg, "dev_examples");
    c->data.seed = (uint64_t)num(cfg, "data_seed");
    c->optim.seed = (uint64_t)num(cfg, "seed");
    c->optim.lr = (float)num(cfg, "lr");
    c->optim.eps = (float)num(cfg, "eps");
    c->optim.q = (int)num(run, "q");
    c->optim.rademacher = !strcmp(item(run, "dist")->valuestring, "rademacher");
    c->optim.steps = steps;
    c->schedule.eval_every = 0;
    c->schedule.checkpoint_every = 0;
    return steps;
}

/* ---- the whole trainer ------------------------------------------------------------------ */

static void train_one(const cJSON *run) {
    const char *name = item(run, "name")->valuestring;
    const cJSON *steps = item(run, "steps");
    dz_train_config c;
    const int n_steps = config_for(run, &c);
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    c.out_dir = dir;
    dz_train_result res;
    dz_error err = {0};
    if (dz_train(&c, 0, NULL, NULL, &res, &err) != DZ_OK) fail_msg("dz_train %s: %s", name, err.msg);
    assert_int_equal(res.steps_done, n_steps);

    dz_seedlog *log = NULL;
    snprintf(path, sizeof path, "%s/seeds.log", dir);
    if (dz_seedlog_open(path, NULL, 0, &log, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(dz_seedlog_count(log), n_steps);
    assert_int_equal(dz_seedlog_get_header(log)->q, c.optim.q);
    dz_metrics_row *rows = NULL;
    size_t n_rows = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (dz_metrics_read(path, &rows, &n_rows, &err) != DZ_OK) fail_msg("%s", err.msg);
    assert_int_equal(n_rows, n_steps + 1); /* row 0: the evaluation before training; row s + 1: step s */
    assert_int_equal(rows[0].step, 0);

    float g_dz[64], g_ref[64];
    int k = 0;
    printf("  dz_train %s (%s, q=%d): distzo | reference (corrected for distzo's earlier g; raw)\n", name,
           c.optim.rademacher ? "rademacher" : "gaussian", c.optim.q);
    for (int s = 0; s < n_steps; s++) {
        const cJSON *rs = cJSON_GetArrayItem(steps, s);
        const dz_seedlog_record r = dz_seedlog_get(log, (size_t)s);
        assert_int_equal(r.step, s);
        assert_true(k + c.optim.q <= 64);
        expected x[DZ_ZO_MAX_Q];
        double loss = 0.0;
        for (int j = 0; j < c.optim.q; j++) {
            x[j] = expected_for(cJSON_GetArrayItem(item(rs, "draws"), j), g_dz, g_ref, c.optim.eps);
            loss += 0.5 * (x[j].lp + x[j].lm) / c.optim.q;
        }
        const dz_metrics_row *row = &rows[s + 1];
        assert_int_equal(row->step, s + 1);
        printf("    step %d loss %.9g | %.9g; %.9g\n", s, row->loss, loss, num(rs, "loss"));
        for (int j = 0; j < c.optim.q; j++)
            printf("      draw %d g %.9g | %.9g; %.9g\n", k + j, r.g[j], x[j].g, x[j].g_raw);
        expect_close(row->loss, loss, LOSS_RTOL, "loss (mean of L+, L-)", name, s, -1);
        for (int j = 0; j < c.optim.q; j++) {
            expect_close(r.g[j], x[j].g, G_RTOL, "g", name, s, j);
            g_dz[k] = r.g[j];
            g_ref[k++] = (float)num(cJSON_GetArrayItem(item(rs, "draws"), j), "g");
        }
    }
    free(rows);
    dz_seedlog_close(log, NULL);
}

static void train_matches_reference(void **state) {
    (void)state;
    need_assets();
    const cJSON *run;
    cJSON_ArrayForEach(run, item(g_golden, "runs")) train_one(run);
}

/* ---- the engine alone, on the reference's examples ---------------------------------------- */

typedef struct loss_ctx {
    dz_class_batch *bb;
    const int *labels;
    int n, K;
    float scores[64];
} loss_ctx;

static void loss_cb(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    loss_ctx *lc = user;
    dz_class_batch_scores(lc->bb, logprobs, p_logprobs, lc->scores);
    out[0] = dz_class_loss(lc->scores, lc->labels, lc->n, lc->K), out[1] = 1.0;
}

typedef struct engine_fixture {
    dz_model *m;
    dz_tokenizer *tok;
    dz_class_set train;
    dz_forward *f;
    dz_zo_engine *e;
    dz_class_batch bb;
} engine_fixture;

static void engine_free(engine_fixture *x) {
    dz_class_batch_free(&x->bb);
    dz_zo_engine_free(x->e);
    dz_forward_free(x->f);
    dz_class_set_free(&x->train);
    dz_tokenizer_free(x->tok);
    dz_model_free(x->m);
}

/* Model, tokenizer and the training examples as the trainer builds them (public API). */
static void engine_init(const dz_train_config *c, engine_fixture *x) {
    memset(x, 0, sizeof *x);
    dz_error err = {0};
    dz_dataset pool = {0}, drawn = {0};
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    dz_status st = dz_model_load(c->model, DZ_F32, &x->m, &err);
    if (st == DZ_OK) st = dz_model_make_owned(x->m, &err);
    if (st == DZ_OK) st = dz_tokenizer_load(dz_model_tokenizer_path(x->m), 512, &x->tok, &err);
    if (st == DZ_OK) st = dz_prompt_spec_set_labels(&spec, c->data.label_words, &err);
    if (st == DZ_OK) st = dz_dataset_load_sst2(c->data.train, &pool, &err);
    const int want = c->data.train_examples + c->data.dev_examples;
    if (st == DZ_OK) st = dz_dataset_sample(&pool, want, c->data.seed, &drawn, &err);
    if (st != DZ_OK) fail_msg("%s", err.msg);
    dz_dataset train = drawn;
    train.count = c->data.train_examples;
    st = dz_class_set_build(&train, &spec, x->tok, dz_model_config(x->m)->max_seq_len, &x->train, &err);
    dz_dataset_free(&drawn);
    dz_dataset_free(&pool);
    const int K = x->train.n_labels;
    /* 4 streams: the engine runs each example's prompt once for its candidates (tree batches) */
    if (st == DZ_OK) st = dz_forward_create_streams(x->m, c->optim.batch * K, x->train.max_len, 0, 4, &x->f, &err);
    const dz_zo_params zp = {.seed = c->optim.seed, .eps = c->optim.eps, .q = c->optim.q,
                             .rademacher = c->optim.rademacher, .wd = c->optim.wd, .fuse = 1};
    if (st == DZ_OK) st = dz_zo_engine_create(x->m, x->f, &zp, &x->e, &err);
    if (st == DZ_OK) st = dz_class_batch_init(&x->bb, c->optim.batch * K, x->train.max_len, 1, &err);
    if (st != DZ_OK) fail_msg("%s", err.msg);
}

static void engine_one(const cJSON *run) {
    const char *name = item(run, "name")->valuestring;
    const cJSON *steps = item(run, "steps");
    dz_train_config c;
    const int n_steps = config_for(run, &c);
    engine_fixture x;
    engine_init(&c, &x);
    dz_error err = {0};
    int ex[16], labels[16];
    assert_true(c.optim.batch <= 16 && c.optim.batch * x.train.n_labels <= 64);
    loss_ctx lc = {&x.bb, labels, c.optim.batch, x.train.n_labels, {0}};
    float g_dz[64], g_ref[64];
    int k = 0;
    printf("  engine %s: distzo | reference (corrected for distzo's earlier g; raw)\n", name);
    for (int s = 0; s < n_steps; s++) {
        const cJSON *rs = cJSON_GetArrayItem(steps, s);
        for (int b = 0; b < c.optim.batch; b++) {
            ex[b] = cJSON_GetArrayItem(item(rs, "examples"), b)->valueint;
            labels[b] = x.train.labels[ex[b]];
            assert_int_equal(labels[b], cJSON_GetArrayItem(item(rs, "labels"), b)->valueint);
        }
        if (dz_class_batch_fill(&x.bb, &x.train, ex, c.optim.batch, &err) != DZ_OK) fail_msg("%s", err.msg);
        const dz_zo_batch zb = dz_class_batch_zo(&x.bb, loss_cb, &lc);
        dz_zo_step_result r;
        if (dz_zo_step(x.e, (uint32_t)s, c.optim.lr, &zb, &r, &err) != DZ_OK) fail_msg("%s", err.msg);
        assert_true(r.finite);
        assert_true(k + c.optim.q <= 64);
        for (int j = 0; j < c.optim.q; j++) {
            const cJSON *d = cJSON_GetArrayItem(item(rs, "draws"), j);
            const expected w = expected_for(d, g_dz, g_ref, c.optim.eps);
            printf("    step %d draw %d L+ %.9g | %.9g; %.9g  L- %.9g | %.9g; %.9g  g %.9g | %.9g; %.9g\n", s,
                   k + j, r.loss_plus[j], w.lp, w.lp_raw, r.loss_minus[j], w.lm, w.lm_raw, r.g[j], w.g, w.g_raw);
            expect_close(r.loss_plus[j], w.lp, LOSS_RTOL, "L+", name, s, j);
            expect_close(r.loss_minus[j], w.lm, LOSS_RTOL, "L-", name, s, j);
            expect_close(r.g[j], w.g, G_RTOL, "g", name, s, j);
        }
        for (int j = 0; j < c.optim.q; j++, k++) { /* after the step: its draws are earlier draws now */
            g_dz[k] = r.g[j];
            g_ref[k] = (float)num(cJSON_GetArrayItem(item(rs, "draws"), j), "g");
        }
    }
    engine_free(&x);
}

static void engine_matches_reference(void **state) {
    (void)state;
    need_assets();
    const cJSON *run;
    cJSON_ArrayForEach(run, item(g_golden, "runs")) engine_one(run);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(engine_matches_reference),
        cmocka_unit_test(train_matches_reference),
    };
    return test_assets_exit(cmocka_run_group_tests(tests, setup, teardown));
}
