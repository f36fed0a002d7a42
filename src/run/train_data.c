/* The trainer's data. train_examples + dev_examples are drawn (without replacement,
 * data seed) from the training pool: the first part trains, the second selects the best
 * model (MeZO's setup); the test set (GLUE dev for SST-2) is what accuracy is reported
 * on. Step t uses examples t*batch .. t*batch+batch-1 of an endless sequence of epochs,
 * each a seeded shuffle of the training examples, so the data of a step depends on
 * nothing but t. */
#include <string.h>

#include "core/rng.h"
#include "distzo/log.h"
#include "run/trainer.h"

static dz_status load_examples(const dz_trainer *tr, const char *path, dz_dataset *ds, dz_error *err) {
    const dz_train_data *d = &tr->cfg.data;
    if (tr->lm) return dz_dataset_load_text(path, ds, err);
    if (!strcmp(d->task, "sst2")) return dz_dataset_load_sst2(path, ds, err);
    return dz_dataset_load_jsonl(path, d->text_key ? d->text_key : "text", d->label_key ? d->label_key : "label", ds,
                                 err);
}

/* Sequences of a dataset for this run's task; a warning names the first example cut to
 * fit and the limit that cut it. */
static dz_status build_set(const dz_trainer *tr, const dz_dataset *ds, dz_class_set *out, dz_error *err) {
    const int model_len = dz_model_config(tr->m)->max_seq_len;
    const int max_len = tr->lm && tr->cfg.data.lm_seq > 0 ? tr->cfg.data.lm_seq : model_len;
    dz_status st = tr->lm ? dz_lm_set_build(ds, tr->tok, max_len, out, err)
                          : dz_class_set_build(ds, &tr->spec, tr->tok, model_len, out, err);
    if (st == DZ_OK && out->truncated && tr->rank0)
        dz_log(DZ_LOG_WARN, "%s:%d: longer than %d tokens (%s): cut from the left to fit, keeping %s; %d sequence%s "
               "of this file cut so", ds->path ? ds->path : "data", out->truncated_line, max_len,
               max_len == model_len ? "the model's maximum" : "--seq", tr->lm ? "BOS and the completion" : "BOS and the label word",
               out->truncated, out->truncated == 1 ? "" : "s");
    return st;
}

dz_status dz_trainer_load_data(dz_trainer *tr, dz_error *err) {
    const dz_train_data *d = &tr->cfg.data;
    dz_status st = load_examples(tr, d->train, &tr->pool, err);
    if (st == DZ_OK && !tr->lm) st = dz_dataset_require_labels(&tr->pool, err); /* train and dev rows */
    if (st == DZ_OK && d->test) st = load_examples(tr, d->test, &tr->test, err);
    if (st != DZ_OK) return st;
    dz_dataset drawn;
    const int want = d->train_examples + d->dev_examples;
    if (d->train_examples < 1) return dz_fail(err, DZ_ERR_INVALID, "--train-examples must be at least 1");
    st = dz_dataset_sample(&tr->pool, want, d->seed, &drawn, err);
    if (st != DZ_OK) return st;
    if (drawn.count < want)
        dz_log(DZ_LOG_WARN, "%s has %d examples, fewer than the %d train + %d dev asked for", d->train, drawn.count,
               d->train_examples, d->dev_examples);
    const int ntrain = drawn.count < d->train_examples ? drawn.count : d->train_examples;
    dz_dataset train = drawn, dev = drawn;
    train.count = ntrain;
    dev.items = drawn.items + ntrain;
    dev.count = drawn.count - ntrain;
    st = build_set(tr, &train, &tr->train, err);
    if (st == DZ_OK && dev.count > 0) st = build_set(tr, &dev, &tr->dev, err);
    if (st == DZ_OK && d->test) st = build_set(tr, &tr->test, &tr->testset, err);
    dz_dataset_free(&drawn);
    return st;
}

/* Example index of slot b of step t: epoch e = k / n is a seeded shuffle of 0..n-1. */
void dz_trainer_draw_batch(dz_trainer *tr, int step) {
    const int n = tr->train.n_examples, B = tr->cfg.optim.batch;
    for (int b = 0; b < B; b++) {
        const int64_t k = (int64_t)step * B + b;
        const int epoch = (int)(k / n), pos = (int)(k % n);
        if (epoch != tr->order_epoch) {
            uint64_t s = tr->cfg.data.seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1));
            for (int i = 0; i < n; i++) tr->order[i] = i;
            for (int i = n - 1; i > 0; i--) {
                const int j = (int)dz_uniform_below(&s, (uint64_t)i + 1), x = tr->order[i];
                tr->order[i] = tr->order[j];
                tr->order[j] = x;
            }
            tr->order_epoch = epoch;
        }
        tr->batch_ex[b] = tr->order[pos];
        tr->batch_labels[b] = tr->train.labels[tr->order[pos]];
    }
}

/* (loss, weight) of each of this rank's examples: cross-entropy and 1, or an LM window's
 * summed NLL and its token count. */
void dz_trainer_loss(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    dz_trainer *tr = user;
    if (tr->lm) {
        dz_lm_example_losses(&tr->bb, logprobs, out);
        return;
    }
    const int K = tr->train.n_labels;
    dz_class_batch_scores(&tr->bb, logprobs, p_logprobs, tr->scores);
    for (int e = 0; e < tr->hi - tr->lo; e++) {
        dz_class_example_losses(tr->scores + (size_t)e * K, tr->batch_labels + tr->lo + e, 1, K, &out[2 * e]);
        out[2 * e + 1] = 1.0;
    }
}
