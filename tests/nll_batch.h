/* The ZO reference tests' shared pieces (test_pipeline.c, test_hizoo.c) beyond the batch
 * of next_token_batch.h: a model loaded with owned masters, which tensors decay, a master
 * element widened to f32, and a weight source over whole f32 tensors (a plain loop's
 * perturbed model). Header-only: each test is one file. */
#ifndef DZ_TESTS_NLL_BATCH_H
#define DZ_TESTS_NLL_BATCH_H

#include <stdlib.h>
#include <string.h>

#include "distzo/model.h"
#include "golden.h"
#include "next_token_batch.h"

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
