/* The tiny real-shaped models of tests/data/hf with their golden batch as a ZO batch
 * (next-token rows, the mean NLL as the loss), loaded owned as the engine needs them, and
 * a checksum of every tensor's bytes: shared by the ZO engine's tests. Include after
 * cmocka.h. */
#ifndef DZ_TESTS_ZO_FIXTURE_H
#define DZ_TESTS_ZO_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "distzo/zo.h"
#include "golden.h"

enum { B = 3, T = 12 };

typedef struct fixture {
    int tokens[B * T], lengths[B], rows[B * T], targets[B * T], n_rows;
} fixture;

static inline double mean_nll(const float *lp, const float *plp, void *user) {
    (void)plp;
    const fixture *fx = user;
    double s = 0.0;
    for (int i = 0; i < fx->n_rows; i++) s -= lp[i];
    return s / fx->n_rows;
}

static inline void mean_nll_cb(const float *lp, const float *plp, void *user, double *out) {
    out[0] = mean_nll(lp, plp, user), out[1] = 1.0;
}

/* Tokens and lengths of the golden batch; rows/targets: next-token prediction. */
static inline void load_batch(const char *name, fixture *fx) {
    golden_batch g;
    golden_batch_load_hf(name, &g);
    assert_int_equal(g.B, B);
    assert_int_equal(g.T, T);
    memcpy(fx->tokens, g.tokens, sizeof fx->tokens);
    memcpy(fx->lengths, g.lengths, sizeof fx->lengths);
    fx->n_rows = golden_batch_next_token_rows(&g, fx->rows, fx->targets);
    golden_batch_free(&g);
}

static inline dz_model *load_owned(const char *name, dz_dtype dt) {
    char path[1024];
    snprintf(path, sizeof path, "%s/hf/%s", DZ_TEST_DATA, name);
    dz_model *m = NULL;
    dz_error err = {0};
    assert_int_equal(dz_model_load(path, dt, &m, &err), DZ_OK);
    assert_int_equal(dz_model_make_owned(m, &err), DZ_OK);
    return m;
}

static inline dz_zo_batch batch_of(fixture *fx, dz_zo_loss_fn loss) {
    return (dz_zo_batch){.tokens = fx->tokens, .lengths = fx->lengths, .B = B, .T = T, .rows = fx->rows,
                         .targets = fx->targets, .n_rows = fx->n_rows, .loss = loss, .user = fx};
}

/* FNV-1a over every tensor's bytes. */
static inline uint64_t checksum(const dz_model *m) {
    uint64_t h = 1469598103934665603ULL;
    const dz_param_table *t = dz_model_params(m);
    for (int i = 0; i < t->count; i++) {
        const unsigned char *p = dz_model_tensor(m, i);
        const size_t n = (size_t)dz_param_numel(&t->params[i]) * dz_dtype_size(dz_model_dtype(m));
        for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 1099511628211ULL;
    }
    return h;
}

/* A model, its 2-stream forward (batch B x T) and an engine over them. */
typedef struct zo_rig {
    dz_model *m;
    dz_forward *f;
    dz_zo_engine *e;
} zo_rig;

static inline zo_rig zo_rig_open(const char *name, dz_dtype dt, const dz_zo_params *p) {
    zo_rig r = {.m = load_owned(name, dt)};
    dz_error err = {0};
    assert_int_equal(dz_forward_create_streams(r.m, B, T, 0, 2, &r.f, &err), DZ_OK);
    assert_int_equal(dz_zo_engine_create(r.m, r.f, p, &r.e, &err), DZ_OK);
    return r;
}

static inline void zo_rig_close(zo_rig *r) {
    dz_zo_engine_free(r->e);
    dz_forward_free(r->f);
    dz_model_free(r->m);
}

#endif
