/* The selection score of a set: accuracy (classification) or minus the mean NLL (LM), so
 * higher is better either way. Each rank scores a share of the examples; per-example
 * (score, weight) pairs are summed over ranks (one non-zero contributor each) and combined
 * in example order, so the result is the same for any number of ranks. */
#include <math.h>
#include <string.h>

#include "distzo/log.h"
#include "distzo/progress.h"
#include "parallel/comm.h"
#include "run/evaluate.h"

/* This rank's share of n examples: what its progress counts. */
static int64_t own_share(const dz_run_data *td, int n) {
    int lo, hi;
    dz_layout_share(n, td->comp->lay.n, td->comp->lay.rank, &lo, &hi);
    return hi - lo;
}

dz_status dz_evaluate(dz_run_data *td, const dz_class_set *cs, double *score, dz_error *err) {
    *score = NAN;
    const int n = cs->n_examples;
    if (n == 0) return DZ_OK;
    dz_status st = dz_zo_flush(td->comp->e, err); /* evaluation never sees stale weights */
    if (st != DZ_OK) return st;
    const dz_weight_source w = dz_zo_master_source(td->comp->e);
    int lo, hi;
    dz_layout_share(n, td->comp->lay.n, td->comp->lay.rank, &lo, &hi);
    double *pairs = td->eval_pairs;
    memset(pairs, 0, sizeof(double) * 2 * (size_t)n);
    const dz_class_set v = dz_class_set_view(cs, lo, hi);
    const int eval_batch = td->cfg->schedule.eval_batch;
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "examples", hi - lo);
    if (hi > lo && td->lm) {
        double nll;
        st = dz_lm_evaluate(td->comp->f, &w, &v, eval_batch, pairs + 2 * (size_t)lo, &nll, err);
    } else if (hi > lo) {
        st = dz_class_evaluate(td->comp->f, &w, &v, eval_batch, td->eval_preds, NULL, NULL, err);
        for (int i = 0; st == DZ_OK && i < hi - lo; i++) {
            pairs[2 * (size_t)(lo + i)] = v.labels[i] >= 0 && dz_class_correct(&v, i, td->eval_preds[i]);
            pairs[2 * (size_t)(lo + i) + 1] = v.labels[i] >= 0;
        }
    }
    dz_progress_end(&prog);
    if (st == DZ_OK) st = dz_zo_source_status(td->comp->e, err); /* a store read that failed inside the forward */
    if (st == DZ_OK) st = dz_comm_sum_f64(td->comp->comm, pairs, 2 * (size_t)n, err);
    if (st != DZ_OK) return st;
    double a = 0.0, b = 0.0;
    for (int i = 0; i < n; i++) a += pairs[2 * i], b += pairs[2 * i + 1];
    if (td->lm) *score = b > 0 ? -(a / b) : NAN;
    else *score = b > 0 ? a / b : 0.0;
    return DZ_OK;
}

dz_status dz_evaluate_qa(dz_run_data *td, const dz_qa_set *s, double *f1, double *em, dz_error *err) {
    *f1 = *em = NAN;
    const int n = s->n_examples;
    if (n == 0) return DZ_OK;
    dz_status st = dz_zo_flush(td->comp->e, err);
    if (st != DZ_OK) return st;
    const dz_weight_source w = dz_zo_master_source(td->comp->e);
    int lo, hi;
    dz_layout_share(n, td->comp->lay.n, td->comp->lay.rank, &lo, &hi);
    double *pairs = td->eval_pairs; /* (f1, em) per example */
    memset(pairs, 0, sizeof(double) * 2 * (size_t)n);
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "examples", hi - lo);
    for (int e = lo; e < hi && st == DZ_OK; e++) {
        double f, x;
        st = dz_qa_evaluate(td->comp->f, &w, td->comp->tok, s, e, e + 1, dz_run_data_gen_tokens(td), &f, &x, err);
        pairs[2 * (size_t)e] = f, pairs[2 * (size_t)e + 1] = x;
    }
    dz_progress_end(&prog);
    if (st == DZ_OK) st = dz_zo_source_status(td->comp->e, err);
    if (st == DZ_OK) st = dz_comm_sum_f64(td->comp->comm, pairs, 2 * (size_t)n, err);
    if (st != DZ_OK) return st;
    double a = 0.0, b = 0.0;
    for (int i = 0; i < n; i++) a += pairs[2 * i], b += pairs[2 * i + 1];
    *f1 = a / n, *em = b / n;
    return DZ_OK;
}

/* Dev and test: one operation for the progress shown. */
static dz_status evaluate_both(dz_run_data *td, double *dev, double *test, dz_error *err) {
    if (td->gen) {
        double em[2];
        dz_status st = dz_evaluate_qa(td, &td->dev_qa, dev, &em[0], err);
        if (st == DZ_OK) st = dz_evaluate_qa(td, &td->test_qa, test, &em[1], err);
        if (st == DZ_OK && td->comp->rank0)
            dz_log(DZ_LOG_INFO, "generation: dev F1 %.4f EM %.4f, test F1 %.4f EM %.4f", *dev, em[0], *test, em[1]);
        return st;
    }
    dz_status st = dz_evaluate(td, &td->dev, dev, err);
    return st == DZ_OK ? dz_evaluate(td, &td->testset, test, err) : st;
}

dz_status dz_evaluate_sets(dz_run_data *td, double *dev, double *test, dz_error *err) {
    const int64_t n = td->gen ? own_share(td, td->dev_qa.n_examples) + own_share(td, td->test_qa.n_examples)
                              : own_share(td, td->dev.n_examples) + own_share(td, td->testset.n_examples);
    dz_progress prog;
    dz_progress_begin(&prog, "evaluation", "examples", n);
    const dz_status st = evaluate_both(td, dev, test, err);
    dz_progress_end(&prog);
    return st;
}

void dz_evaluate_row(const dz_run_data *td, double dev, double test, double best_dev, dz_metrics_row *row) {
    row->has_eval = 1;
    if (td->lm) {
        row->dev_loss = -dev, row->test_loss = -test;
    } else {
        row->dev_accuracy = dev, row->test_accuracy = test, row->best_dev_accuracy = best_dev;
    }
}
