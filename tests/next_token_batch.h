/* A golden batch as next-token prediction (its rows and targets) and the engine's loss
 * callback on it, the mean NLL of the rows as one example of weight 1: shared by the
 * pipeline's tests (test_pipeline.c, test_node_stream.c). Include after cmocka.h and
 * golden.h. */
#ifndef DZ_TESTS_NEXT_TOKEN_BATCH_H
#define DZ_TESTS_NEXT_TOKEN_BATCH_H

#include <stdlib.h>

typedef struct batch {
    golden_batch g;
    int *rows, *targets, n_rows;
} batch;

static inline void batch_load(const char *name, batch *b) {
    golden_batch_load_hf(name, &b->g);
    b->rows = malloc(sizeof(int) * (size_t)b->g.B * b->g.T);
    b->targets = malloc(sizeof(int) * (size_t)b->g.B * b->g.T);
    assert_true(b->rows && b->targets);
    b->n_rows = golden_batch_next_token_rows(&b->g, b->rows, b->targets);
}

static inline void batch_free(batch *b) {
    golden_batch_free(&b->g);
    free(b->rows);
    free(b->targets);
}

static inline double mean_nll(const float *lp, const batch *b) {
    double s = 0.0;
    for (int i = 0; i < b->n_rows; i++) s -= lp[i];
    return s / b->n_rows;
}

/* The engine's loss callback: one example, weight 1, so the step's loss is mean_nll. */
static inline void mean_nll_cb(const float *lp, const float *plp, void *user, double *out) {
    (void)plp;
    out[0] = mean_nll(lp, user), out[1] = 1.0;
}

#endif
