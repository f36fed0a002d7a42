/* The trainer's data. train_examples + dev_examples are drawn (without replacement,
 * data seed) from the training pool: the first part trains, the second selects the best
 * model (MeZO's setup); the test set (GLUE dev for SST-2) is what accuracy is reported
 * on. Step t uses examples t*batch .. t*batch+batch-1 of an endless sequence of epochs,
 * each a seeded shuffle of the training examples, so the data of a step depends on
 * nothing but t. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "distzo/log.h"
#include "run/trainer.h"

static dz_status load_examples(const dz_trainer *tr, const char *path, dz_dataset *ds, dz_error *err) {
    const dz_train_data *d = &tr->cfg.data;
    if (tr->lm) return dz_dataset_load_text(path, ds, err);
    if (tr->preset) return dz_dataset_load_preset(tr->preset, path, ds, err);
    if (!strcmp(d->task, "sst2")) return dz_dataset_load_sst2(path, ds, err);
    return dz_dataset_load_jsonl(path, d->text_key ? d->text_key : "text", d->label_key ? d->label_key : "label", ds,
                                 err);
}

/* Examples the caller holds (Python's rows: cfg.data.train_set, k 0, or test_set, k 1),
 * copied into *ds, never written to a file: run.json keeps their fingerprint instead of a
 * path, and a resume must be given rows with the same one. */
static dz_status memory_examples(dz_trainer *tr, int k, dz_dataset *ds, dz_error *err) {
    dz_train_data *d = &tr->cfg.data;
    const dz_dataset *given = k ? d->test_set : d->train_set;
    const char **fp = k ? &d->test_fingerprint : &d->train_fingerprint, *what = k ? "test" : "train";
    if (!given)
        return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: the run's %s data was held in memory (%s_data_fingerprint "
                       "%s: rows given from Python), not in a file: resume the run from Python with the same rows, "
                       "distzo.Trainer.resume(\"%s\", %s=...)", tr->run_dir, what, what, *fp, tr->run_dir,
                       k ? "eval_data" : "train_data");
    if (k ? d->test : d->train)
        return dz_fail(err, DZ_ERR_INVALID, "the %s data is both a file (%s) and rows held in memory: give one", what,
                       k ? d->test : d->train);
    char *hex = tr->fingerprints[k];
    snprintf(hex, sizeof tr->fingerprints[k], "%016" PRIx64, dz_trainer_data_hash(given));
    if (*fp && strcmp(*fp, hex))
        return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: %s_data_fingerprint %s, but the %s data given has "
                       "fingerprint %s: a resumed run keeps its data (give the rows it was started with)",
                       tr->run_dir, what, *fp, what, hex);
    *fp = hex;
    memset(ds, 0, sizeof *ds);
    if (!(ds->path = strdup(given->path ? given->path : k ? "<test data>" : "<train data>")))
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory for the %s data", what);
    dz_status st = DZ_OK;
    int cap = 0;
    for (int i = 0; i < given->count && st == DZ_OK; i++) st = dz_dataset_append(ds, &cap, &given->items[i], err);
    return st;
}

/* The training (k 0) or test set (k 1): from its file or held in memory; *present 0: none. */
static dz_status load_set(dz_trainer *tr, int k, dz_dataset *ds, int *present, dz_error *err) {
    const dz_train_data *d = &tr->cfg.data;
    const char *path = k ? d->test : d->train;
    const int memory = (k ? d->test_set : d->train_set) || (k ? d->test_fingerprint : d->train_fingerprint);
    *present = path || memory;
    if (memory) return memory_examples(tr, k, ds, err);
    return path ? load_examples(tr, path, ds, err) : DZ_OK;
}

/* Sequences of a dataset for this run's task; a warning names the first example cut to
 * fit and the limit that cut it. */
static dz_status build_set(const dz_trainer *tr, const dz_dataset *ds, dz_class_set *out, dz_error *err) {
    const int model_len = dz_model_config(tr->m)->max_seq_len;
    const int max_len = tr->lm && tr->cfg.data.lm_seq > 0 ? tr->cfg.data.lm_seq : model_len;
    const int as_lm = tr->lm || tr->gen;
    dz_status st = as_lm ? dz_lm_set_build(ds, tr->tok, max_len, out, err)
                         : dz_class_set_build(ds, &tr->spec, tr->tok, model_len, out, err);
    if (st == DZ_OK && out->truncated && tr->rank0)
        dz_log(DZ_LOG_WARN, "%s:%d: longer than %d tokens (%s): cut from the left to fit, keeping %s; %d sequence%s "
               "of this file cut so", ds->path ? ds->path : "data", out->truncated_line, max_len,
               max_len == model_len ? "the model's maximum" : "--seq", as_lm ? "BOS and the completion" : "BOS and the label word",
               out->truncated, out->truncated == 1 ? "" : "s");
    return st;
}

/* A generation task's evaluation set: prompts leaving room for the answer. */
static dz_status build_qa(const dz_trainer *tr, const dz_dataset *ds, dz_qa_set *out, dz_error *err) {
    const int model_len = dz_model_config(tr->m)->max_seq_len;
    dz_status st = dz_qa_set_build(ds, tr->tok, model_len, dz_trainer_gen_tokens(tr), out, err);
    if (st == DZ_OK && out->truncated && tr->rank0)
        dz_log(DZ_LOG_WARN, "%s:%d: prompt cut from the left to leave %d answer tokens; %d prompt%s of this file cut so",
               ds->path ? ds->path : "data", out->truncated_line, dz_trainer_gen_tokens(tr), out->truncated,
               out->truncated == 1 ? "" : "s");
    return st;
}

int dz_trainer_gen_tokens(const dz_trainer *tr) {
    const int model_len = dz_model_config(tr->m)->max_seq_len, want = tr->cfg.data.gen_tokens > 0 ? tr->cfg.data.gen_tokens : 50;
    return want < model_len / 2 ? want : model_len / 2; /* a short model keeps half its positions for the prompt */
}

/* One evaluation or training set as the task wants it, after --demos. */
static dz_status build_one(dz_trainer *tr, const dz_dataset *ds, const dz_dataset *train, int exclude_self,
                           uint64_t salt, dz_class_set *cs, dz_qa_set *qa, dz_error *err) {
    const int k = tr->cfg.data.demos;
    dz_dataset shown;
    const dz_dataset *use = ds;
    dz_prompt_spec spec = tr->spec;
    if (k > 0) {
        dz_status st = dz_dataset_with_demos(ds, train, &tr->spec, k, tr->cfg.data.seed ^ salt, exclude_self, &shown, err);
        if (st != DZ_OK) return st;
        use = &shown;
        tr->spec.verbatim = 1; /* the texts are whole prompts now */
        snprintf(tr->spec.template_, sizeof tr->spec.template_, "%s", "{text}");
    }
    dz_status st = qa ? build_qa(tr, use, qa, err) : build_set(tr, use, cs, err);
    tr->spec = spec;
    if (k > 0) dz_dataset_free(&shown);
    return st;
}

dz_status dz_trainer_load_data(dz_trainer *tr, dz_error *err) {
    const dz_train_data *d = &tr->cfg.data;
    int has_train = 0, has_test = 0;
    dz_status st = load_set(tr, 0, &tr->pool, &has_train, err);
    if (st == DZ_OK && !has_train) { /* an evaluation-only trainer (the federated coordinator): the test set alone */
        st = load_set(tr, 1, &tr->test, &has_test, err);
        if (st == DZ_OK && !has_test) st = dz_fail(err, DZ_ERR_INVALID, "a trainer without training data needs a test file");
        return st == DZ_OK ? build_one(tr, &tr->test, &tr->test, 0, 0x3ULL, &tr->testset,
                                       tr->gen ? &tr->test_qa : NULL, err)
                           : st;
    }
    if (st == DZ_OK && !tr->lm && !tr->gen) st = dz_dataset_require_labels(&tr->pool, err); /* train and dev rows */
    if (st == DZ_OK) st = load_set(tr, 1, &tr->test, &has_test, err);
    if (st != DZ_OK) return st;
    dz_dataset drawn;
    const int want = d->train_examples + d->dev_examples;
    if (d->train_examples < 1) return dz_fail(err, DZ_ERR_INVALID, "--train-examples must be at least 1");
    st = dz_dataset_sample(&tr->pool, want, d->seed, &drawn, err);
    if (st != DZ_OK) return st;
    int ntrain, ndev; /* a small file keeps a dev set, so best/ is chosen and written */
    if (dz_split_counts(drawn.count, d->train_examples, d->dev_examples, &ntrain, &ndev) && tr->rank0)
        dz_log(DZ_LOG_WARN, "%s has %d examples, fewer than the %d train + %d dev asked for: drawn (data seed %llu) "
               "into %d train and %d dev, in the proportion asked (--train-examples and --dev-examples set it)",
               tr->pool.path, drawn.count, d->train_examples, d->dev_examples, (unsigned long long)d->seed, ntrain, ndev);
    if (!has_test && ndev > 0 && tr->rank0)
        dz_log(DZ_LOG_INFO, "no --test file: the run reports its %d dev examples' scores (best/ by them); test scores "
               "are n/a", ndev);
    dz_dataset train = drawn, dev = drawn;
    train.count = ntrain;
    dev.items = drawn.items + ntrain;
    dev.count = ndev;
    /* demonstrations come from the training examples: MeZO's ICL draws them from its train set */
    st = build_one(tr, &train, &train, 1, 0x1ULL, &tr->train, NULL, err);
    if (st == DZ_OK && tr->objective == DZ_OBJ_F1) /* the same examples, decoded at each step */
        st = build_one(tr, &train, &train, 1, 0x1ULL, NULL, &tr->train_qa, err);
    if (st == DZ_OK && dev.count > 0) st = build_one(tr, &dev, &train, 0, 0x2ULL, &tr->dev, tr->gen ? &tr->dev_qa : NULL, err);
    if (st == DZ_OK && has_test)
        st = build_one(tr, &tr->test, &train, 0, 0x3ULL, &tr->testset, tr->gen ? &tr->test_qa : NULL, err);
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

/* (loss, weight) of each of this rank's examples: cross-entropy and 1 (or, with
 * --objective accuracy, minus whether the prediction is right, and 1), or an LM window's
 * summed NLL and its token count. */
void dz_trainer_loss(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    dz_trainer *tr = user;
    if (tr->lm || tr->gen) {
        dz_lm_example_losses(&tr->bb, logprobs, out);
        return;
    }
    const dz_class_batch *bb = &tr->bb;
    dz_class_batch_scores(bb, logprobs, p_logprobs, tr->scores);
    for (int e = 0; e < tr->hi - tr->lo; e++) {
        const float *s = tr->scores + bb->ex_first[e];
        const int K = bb->ex_first[e + 1] - bb->ex_first[e];
        const int label = tr->batch_labels[tr->lo + e];
        if (tr->objective == DZ_OBJ_ACCURACY) out[2 * e] = -(double)(dz_class_predict(s, K) == label);
        else dz_class_example_losses(s, &label, 1, K, &out[2 * e]);
        out[2 * e + 1] = 1.0;
    }
}
