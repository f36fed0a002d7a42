/* Failures inside the block pipeline reach the caller as a status instead of being logged
 * and dropped: a store file cut short under a running engine (tests/data/hf/llama_gqa_untied,
 * every weight in the store) fails the flush, the replay, the checksum, an evaluation
 * through the masters' source and the step itself with DZ_ERR_IO naming the file; a node
 * barrier that fails, fails the step and the flush with its own error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "distzo/zo.h"
#include "store/store.h"

enum { B = 2, T = 8 };

typedef struct batch {
    int tokens[B * T], rows[B * T], targets[B * T], n_rows;
} batch;

static void mean_nll(const float *lp, const float *plp, void *user, double *out) {
    (void)plp;
    const batch *b = user;
    double s = 0.0;
    for (int i = 0; i < b->n_rows; i++) s -= lp[i];
    out[0] = s / b->n_rows, out[1] = 1.0;
}

/* Next-token prediction on fixed tokens of the 259-token vocabulary. */
static dz_zo_batch make_batch(batch *b) {
    b->n_rows = 0;
    for (int i = 0; i < B * T; i++) b->tokens[i] = 3 + (i * 37) % 250;
    for (int s = 0; s < B; s++)
        for (int t = 0; t + 1 < T; t++) {
            b->rows[b->n_rows] = s * T + t;
            b->targets[b->n_rows++] = b->tokens[s * T + t + 1];
        }
    return (dz_zo_batch){.tokens = b->tokens, .B = B, .T = T, .rows = b->rows, .targets = b->targets,
                         .n_rows = b->n_rows, .loss = mean_nll, .user = b};
}

static const char *model_dir(void) { return DZ_TEST_DATA "/hf/llama_gqa_untied"; }

static void expect_io_error(dz_status st, const dz_error *err, const char *path, const char *what) {
    if (st != DZ_ERR_IO || !strstr(err->msg, path))
        fail_msg("%s: status %d, message '%s' (expected DZ_ERR_IO naming %s)", what, (int)st, err->msg, path);
}

/* Every weight in the store (the global block streamed); the file then loses its global
 * block, which is last in it, while the layers stay readable. */
static void store_cut_short(void **state) {
    (void)state;
    char path[] = "/tmp/dz_zo_errors_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    dz_error err = {0};
    dz_model *m = NULL;
    dz_store *s = NULL;
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    assert_int_equal(dz_store_load_model(model_dir(), DZ_F32, &m, &err), DZ_OK);
    assert_int_equal(dz_store_create_as(path, m, DZ_F32, 0, &s, &err), DZ_OK);
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    assert_int_equal(dz_zo_store_residency(m, f, s, NULL, 0, 1, &err), DZ_OK);
    const dz_zo_params zp = {.seed = 7, .eps = 1e-3f, .q = 2, .fuse = 1};
    assert_int_equal(dz_zo_engine_create(m, f, &zp, &e, &err), DZ_OK);
    assert_int_equal(dz_zo_engine_use_store(e, s, &err), DZ_OK);
    batch bb;
    const dz_zo_batch zb = make_batch(&bb);
    int tokens[B * T];
    memcpy(tokens, bb.tokens, sizeof tokens);

    /* intact: everything succeeds, and an update is left pending */
    dz_zo_step_result r;
    assert_int_equal(dz_zo_step(e, 0, 1e-3f, &zb, &r, &err), DZ_OK);
    assert_true(r.finite);
    uint64_t sum = 0;
    dz_forward *ef = NULL;
    assert_int_equal(dz_forward_create(m, B, T, 0, &ef, &err), DZ_OK);
    assert_int_equal(dz_zo_flush(e, &err), DZ_OK);
    const dz_weight_source w = dz_zo_master_source(e);
    assert_int_equal(dz_forward_run(ef, &w, tokens, NULL, B, T, 0, &err), DZ_OK);
    assert_int_equal(dz_zo_source_status(e, &err), DZ_OK);
    assert_int_equal(dz_zo_checksum_slice(e, 0, 1, &sum, &err), DZ_OK);
    assert_int_equal(dz_zo_step(e, 1, 1e-3f, &zb, &r, &err), DZ_OK);
    assert_true(r.finite);

    /* the global block cut off */
    assert_int_equal(truncate(path, (off_t)dz_store_block_offset(s, dz_model_config(m)->n_layers) + 16), 0);
    expect_io_error(dz_zo_flush(e, &err), &err, path, "flush of the pending update");
    expect_io_error(dz_zo_checksum_slice(e, 0, 1, &sum, &err), &err, path, "checksum");
    assert_int_equal(dz_forward_run(ef, &w, tokens, NULL, B, T, 0, &err), DZ_OK); /* rows() hands zeros... */
    expect_io_error(dz_zo_source_status(e, &err), &err, path, "evaluation"); /* ...and the error is kept */
    assert_int_equal(dz_zo_source_status(e, &err), DZ_OK);                   /* once */
    expect_io_error(dz_zo_step(e, 2, 1e-3f, &zb, &r, &err), &err, path, "step reading global rows");
    const float g[2] = {0.5f, -0.25f};
    expect_io_error(dz_zo_apply(e, 3, 1e-3f, g, &err), &err, path, "replay");

    /* the layers cut off too: the I/O thread's preparation fails the step */
    assert_int_equal(truncate(path, 0), 0);
    expect_io_error(dz_zo_step(e, 4, 1e-3f, &zb, &r, &err), &err, path, "step preparing a layer");

    dz_forward_free(ef);
    dz_zo_engine_free(e);
    dz_forward_free(f);
    dz_store_close(s);
    dz_model_free(m);
    unlink(path);
}

/* A node barrier that works `ok` times, then fails. */
typedef struct barrier {
    int ok, calls;
} barrier;

static dz_status flaky_barrier(void *ctx, dz_error *err) {
    barrier *b = ctx;
    return b->calls++ < b->ok ? DZ_OK : dz_fail(err, DZ_ERR_IO, "node barrier: the node's peer is gone");
}

static void barrier_fails(void **state) {
    (void)state;
    dz_error err = {0};
    dz_model *m = NULL;
    dz_forward *f = NULL;
    dz_zo_engine *e = NULL;
    assert_int_equal(dz_model_load(model_dir(), DZ_F32, &m, &err), DZ_OK);
    assert_int_equal(dz_model_make_owned(m, &err), DZ_OK);
    assert_int_equal(dz_forward_create_streams(m, B, T, 0, 2, &f, &err), DZ_OK);
    const dz_zo_params zp = {.seed = 7, .eps = 1e-3f, .q = 1, .fuse = 1};
    assert_int_equal(dz_zo_engine_create(m, f, &zp, &e, &err), DZ_OK);
    float *work = calloc(2 * dz_zo_block_floats(e), sizeof(float));
    assert_non_null(work);
    const int n_layers = dz_model_config(m)->n_layers;
    barrier bar = {.ok = 2 * n_layers}; /* one step's fills (nothing is pending before it) */
    const dz_zo_parallel par = {.signs = 3, .slice = 0, .n_slices = 2, .shared_work = work, .barrier = flaky_barrier,
                                .ctx = &bar};
    assert_int_equal(dz_zo_engine_set_parallel(e, &par, &err), DZ_OK);
    batch bb;
    const dz_zo_batch zb = make_batch(&bb);
    dz_zo_step_result r;
    assert_int_equal(dz_zo_step(e, 0, 1e-3f, &zb, &r, &err), DZ_OK);
    assert_true(r.finite);
    assert_int_equal(bar.calls, 2 * n_layers);
    assert_int_equal(dz_zo_flush(e, &err), DZ_ERR_IO); /* the pending update waits behind a barrier */
    assert_non_null(strstr(err.msg, "peer is gone"));
    bar.calls = 0, bar.ok = 3; /* the global block's update passes its barriers; layer 0's fill fails after it */
    err = (dz_error){0};
    assert_int_equal(dz_zo_step(e, 1, 1e-3f, &zb, &r, &err), DZ_ERR_IO);
    assert_non_null(strstr(err.msg, "peer is gone"));
    assert_int_equal(bar.calls, 4); /* the step stopped at the failed barrier */
    dz_zo_engine_free(e);
    free(work);
    dz_forward_free(f);
    dz_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(store_cut_short),
        cmocka_unit_test(barrier_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
