#include "bench/losses.h"

#include <stdlib.h>

#include "distzo/bench.h"

void dz_lm_work_free(dz_lm_work *w) {
    free(w->tokens);
    free(w->rows);
    free(w->targets);
    free(w->lp);
}

dz_status dz_lm_work_init(dz_lm_work *w, const dz_config *c, int batch, int seq, dz_error *err) {
    const int N = batch * seq;
    w->N = N;
    w->tokens = malloc(sizeof(int) * (size_t)N);
    w->rows = malloc(sizeof(int) * (size_t)N);
    w->targets = malloc(sizeof(int) * (size_t)N);
    w->lp = malloc(sizeof(float) * (size_t)N);
    if (!w->tokens || !w->rows || !w->targets || !w->lp) {
        dz_lm_work_free(w);
        *w = (dz_lm_work){0};
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory");
    }
    dz_bench_random_tokens(w->tokens, (size_t)N, 3, c->vocab_size, 1234);
    for (int i = 0; i < N; i++) {
        w->rows[i] = i;
        w->targets[i] = i % seq + 1 < seq ? w->tokens[i + 1] : w->tokens[i - seq + 1];
    }
    return DZ_OK;
}

dz_status dz_lm_work_forward(dz_forward *f, const dz_weight_source *w, dz_lm_work *lw, int batch, int seq,
                             dz_error *err) {
    dz_status st = dz_forward_run(f, w, lw->tokens, NULL, batch, seq, 0, err);
    return st == DZ_OK ? dz_forward_logprobs(f, w, lw->rows, lw->targets, lw->N, lw->lp, err) : st;
}

static void mean_nll(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    (void)p_logprobs;
    const dz_lm_work *b = user;
    double s = 0.0;
    for (int i = 0; i < b->N; i++) s -= logprobs[i];
    out[0] = s / b->N, out[1] = 1.0;
}

dz_zo_batch dz_lm_work_zo(dz_lm_work *lw, int batch, int seq) {
    return (dz_zo_batch){.tokens = lw->tokens, .B = batch, .T = seq, .rows = lw->rows, .targets = lw->targets,
                         .n_rows = lw->N, .loss = mean_nll, .user = lw};
}

void dz_bench_class_loss_fn(const float *lp, const float *plp, void *user, double *out) {
    dz_bench_class_loss *cl = user;
    dz_class_batch_scores(cl->bb, lp, plp, cl->scores);
    out[0] = dz_class_loss(cl->scores, cl->labels, cl->n, cl->K), out[1] = 1.0;
}
