/* What the benchmarks' forwards and ZO steps score: a random LM batch (every position
 * predicts the next token) and prompt classification's candidates. */
#ifndef DZ_BENCH_LOSSES_H
#define DZ_BENCH_LOSSES_H

#include "distzo/distzo.h"

/* A random batch scored as LM training does: every position predicts the next token
 * (the last wraps to the sequence's start), so the head runs on all B*T rows. */
typedef struct dz_lm_work {
    int N;
    int *tokens, *rows, *targets;
    float *lp;
} dz_lm_work;

dz_status dz_lm_work_init(dz_lm_work *w, const dz_config *c, int batch, int seq, dz_error *err);
void dz_lm_work_free(dz_lm_work *w);
/* One plain forward with the head on every row. */
dz_status dz_lm_work_forward(dz_forward *f, const dz_weight_source *w, dz_lm_work *lw, int batch, int seq,
                             dz_error *err);
/* The ZO batch of lw: the mean NLL over its rows. */
dz_zo_batch dz_lm_work_zo(dz_lm_work *lw, int batch, int seq);

/* A classification batch's loss: the candidates' scores, the mean cross-entropy. */
typedef struct dz_bench_class_loss {
    dz_class_batch *bb;
    const int *labels;
    int n, K;
    float *scores;
} dz_bench_class_loss;
void dz_bench_class_loss_fn(const float *lp, const float *plp, void *user, double *out);

#endif
