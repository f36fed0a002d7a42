/* The ZO reference tests' shared pieces (test_pipeline.c, test_hizoo.c): a golden batch
 * scored by the mean next-token NLL (the engine's loss callback too), a model loaded
 * with owned masters, which tensors decay, a master element widened to f32, and a weight
 * source over whole f32 tensors (a plain loop's perturbed model). Header-only: each test
 * is one file. */
#ifndef DZ_TESTS_NLL_BATCH_H
#define DZ_TESTS_NLL_BATCH_H

#include <stdlib.h>
#include <string.h>

#include "distzo/model.h"
#include "golden.h"

typedef struct batch {
    golden_batch g;
    int *rows, *targets, n_rows;
} batch;

static void batch_load(const char *name, batch *b) {
    golden_batch_load_hf(name, &b->g);
    b->rows = malloc(sizeof(int) * (size_t)b->g.B * b->g.T);
    b->targets = malloc(sizeof(int) * (size_t)b->g.B * b->g.T);
    assert_true(b->rows && b->targets);
    b->n_rows = golden_batch_next_token_rows(&b->g, b->rows, b->targets);
}

static void batch_free(batch *b) {
    golden_batch_free(&b->g);
    free(b->rows);
    free(b->targets);
}

static double mean_nll(const float *lp, const batch *b) {
    double s = 0.0;
    for (int i = 0; i < b->n_rows; i++) s -= lp[i];
    return s / b->n_rows;
}

/* The engine's loss callback: one example, weight 1, so the step's loss is mean_nll. */
static void mean_nll_cb(const float *lp, const float *plp, void *user, double *out) {
    (void)plp;
    out[0] = mean_nll(lp, user), out[1] = 1.0;
}

static dz_model *load_owned(const char *dir, dz_dtype dt) {
    dz_model *m = NULL;
    dz_error err = {0};
    if (dz_model_load(dir, dt, &m, &err) != DZ_OK || dz_model_make_owned(m, &err) != DZ_OK)
        fail_msg("%s: %s", dir, err.msg);
    return m;
}

static int decays(const dz_param *p) { return p->kind == DZ_PARAM_MATRIX || p->kind == DZ_PARAM_EMBEDDING; }

static float widen(const void *theta, dz_dtype dt, size_t i) {
    if (dt == DZ_F32) return ((const float *)theta)[i];
    const uint32_t u = (uint32_t)((const uint16_t *)theta)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every tensor of the model as f32 (perturbed one way), as the forward reads it. */
typedef struct whole_model {
    const dz_param_table *t;
    float **w;
} whole_model;

static const float *whole_rows(const void *self, int stream, int id, int64_t row0, int64_t nrows, float *scratch) {
    (void)stream, (void)nrows, (void)scratch;
    const whole_model *wm = self;
    return wm->w[id] + row0 * wm->t->params[id].cols;
}

#endif
