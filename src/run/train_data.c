/* The run's data (train_data.h). train_examples + dev_examples are drawn (without replacement,
 * data seed) from the training pool: the first part trains, the second selects the best
 * model (MeZO's setup); the test set (GLUE dev for SST-2) is what accuracy is reported
 * on. Step t uses examples t*batch .. t*batch+batch-1 of an endless sequence of epochs,
 * each a seeded shuffle of the training examples, so the data of a step depends on
 * nothing but t. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/rng.h"
#include "distzo/log.h"
#include "run/train_data.h"

static dz_status load_examples(const dz_run_data *td, const char *path, dz_dataset *ds, dz_error *err) {
    const dz_train_data *d = &td->cfg->data;
    if (td->lm) return dz_dataset_load_text(path, ds, err);
    if (td->preset) return dz_dataset_load_preset(td->preset, path, ds, err);
    if (!strcmp(d->task, "sst2")) return dz_dataset_load_sst2(path, ds, err);
    return dz_dataset_load_jsonl(path, d->text_key ? d->text_key : "text", d->label_key ? d->label_key : "label", ds,
                                 err);
}

uint64_t dz_run_data_hash(const dz_dataset *ds) {
    uint64_t h = dz_hash_u64(DZ_HASH_START, (uint64_t)ds->count);
    for (int i = 0; i < ds->count; i++) {
        const dz_example *ex = &ds->items[i];
        h = dz_hash_str(h, ex->text);
        h = dz_hash_str(h, ex->completion);
        h = dz_hash_u64(h, (uint64_t)(int64_t)ex->label);
        for (int k = 0; k < ex->n_cands; k++) h = dz_hash_str(h, ex->cands[k]);
        for (int k = 0; k < ex->n_answers; k++) h = dz_hash_str(h, ex->answers[k]);
    }
    return h;
}

/* A generation row held in memory (a prompt and its gold answers) trains on what the
 * preset's file loader gives it: MeZO's verbalize(), " answers[0]\n" after "Answer:". */
static dz_status answer_target(dz_example *ex, const char *name, dz_error *err) {
    if (ex->completion) return DZ_OK;
    if (ex->n_answers < 1)
        return dz_fail(err, DZ_ERR_INVALID, "%s:%d: no gold answers (a generation task trains on the first)", name,
                       ex->line);
    const size_t n = strlen(ex->answers[0]) + 3;
    if (!(ex->completion = malloc(n))) return dz_fail(err, DZ_ERR_NOMEM, "%s: out of memory", name);
    snprintf(ex->completion, n, " %s\n", ex->answers[0]);
    return DZ_OK;
}

/* Rows the caller holds (Python's: cfg's train_set, k 0, or test_set, k 1), copied into
 * *ds, never written to a file: run.json keeps their fingerprint instead of a path, and a
 * resume (cfg's fingerprint, run.json's) must be given rows with the same one. */
static dz_status memory_examples(dz_run_data *td, int k, dz_dataset *ds, dz_error *err) {
    const dz_train_data *d = &td->cfg->data;
    const dz_dataset *given = k ? d->test_set : d->train_set;
    const char *fp = k ? d->test_fingerprint : d->train_fingerprint, *what = k ? "test" : "train";
    const char *run = td->cfg->out_dir ? td->cfg->out_dir : "RUN";
    if (!given)
        return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: the run's %s data was held in memory (%s_data_fingerprint "
                       "%s: rows given from Python), not in a file: resume the run from Python with the same rows, "
                       "distzo.Trainer.resume(\"%s\", %s=...)", run, what, what, fp, run,
                       k ? "eval_data" : "train_data");
    if (k ? d->test : d->train)
        return dz_fail(err, DZ_ERR_INVALID, "the %s data is both a file (%s) and rows held in memory: give one", what,
                       k ? d->test : d->train);
    char *hex = td->fingerprints[k];
    snprintf(hex, sizeof td->fingerprints[k], "%016" PRIx64, dz_run_data_hash(given));
    if (fp && strcmp(fp, hex))
        return dz_fail(err, DZ_ERR_INVALID, "%s/run.json: %s_data_fingerprint %s, but the %s data given has "
                       "fingerprint %s: a resumed run keeps its data (give the rows it was started with)", run, what,
                       fp, what, hex);
    memset(ds, 0, sizeof *ds);
    if (!(ds->path = strdup(given->path ? given->path : k ? "<test data>" : "<train data>")))
        return dz_fail(err, DZ_ERR_NOMEM, "out of memory for the %s data", what);
    dz_status st = DZ_OK;
    int cap = 0;
    for (int i = 0; i < given->count && st == DZ_OK; i++) st = dz_dataset_append(ds, &cap, &given->items[i], err);
    for (int i = 0; i < ds->count && st == DZ_OK && td->gen; i++) st = answer_target(&ds->items[i], ds->path, err);
    return st;
}

/* The training (k 0) or test set (k 1): from its file or held in memory; *present 0: none. */
static dz_status load_set(dz_run_data *td, int k, dz_dataset *ds, int *present, dz_error *err) {
    const dz_train_data *d = &td->cfg->data;
    const char *path = k ? d->test : d->train;
    const int memory = (k ? d->test_set : d->train_set) || (k ? d->test_fingerprint : d->train_fingerprint);
    *present = path || memory;
    dz_status st = memory ? memory_examples(td, k, ds, err) : path ? load_examples(td, path, ds, err) : DZ_OK;
    if (st == DZ_OK && *present && ds->count == 0) /* rows from Python may be none; a file says so when it loads */
        st = dz_fail(err, DZ_ERR_INVALID, "%s: no examples (the %s data is empty)", ds->path ? ds->path : "?",
                     k ? "test" : "training");
    return st;
}

/* Sequences of a dataset for this run's task; a warning names the first example cut to
 * fit and the limit that cut it. */
static dz_status build_set(const dz_run_data *td, const dz_dataset *ds, dz_class_set *out, dz_error *err) {
    const int model_len = dz_model_config(td->comp->m)->max_seq_len;
    const int max_len = td->lm && td->cfg->data.lm_seq > 0 ? td->cfg->data.lm_seq : model_len;
    const int as_lm = td->lm || td->gen;
    if (max_len > model_len) /* its positions end there (OPT's table, LLaMA's trained range) */
        return dz_fail(err, DZ_ERR_INVALID, "--seq %d is more than the model's %d positions (%s): give at most %d",
                       max_len, model_len, td->cfg->model ? td->cfg->model : "the model", model_len);
    dz_status st = as_lm ? dz_lm_set_build(ds, td->comp->tok, max_len, out, err)
                         : dz_class_set_build(ds, &td->spec, td->comp->tok, model_len, out, err);
    if (st == DZ_OK && out->truncated && td->comp->rank0)
        dz_log(DZ_LOG_WARN, "%s:%d: longer than %d tokens (%s): cut from the left to fit, keeping %s; %d sequence%s "
               "of this file cut so", ds->path ? ds->path : "data", out->truncated_line, max_len,
               max_len == model_len ? "the model's maximum" : "--seq", as_lm ? "BOS and the completion" : "BOS and the label word",
               out->truncated, out->truncated == 1 ? "" : "s");
    return st;
}

/* A generation task's evaluation set: prompts leaving room for the answer. */
static dz_status build_qa(const dz_run_data *td, const dz_dataset *ds, dz_qa_set *out, dz_error *err) {
    const int model_len = dz_model_config(td->comp->m)->max_seq_len;
    dz_status st = dz_qa_set_build(ds, td->comp->tok, model_len, dz_run_data_gen_tokens(td), out, err);
    if (st == DZ_OK && out->truncated && td->comp->rank0)
        dz_log(DZ_LOG_WARN, "%s:%d: prompt cut from the left to leave %d answer tokens; %d prompt%s of this file cut so",
               ds->path ? ds->path : "data", out->truncated_line, dz_run_data_gen_tokens(td), out->truncated,
               out->truncated == 1 ? "" : "s");
    return st;
}

int dz_run_data_gen_tokens(const dz_run_data *td) {
    const int model_len = dz_model_config(td->comp->m)->max_seq_len;
    const int want = td->cfg->data.gen_tokens > 0 ? td->cfg->data.gen_tokens : 50;
    return want < model_len / 2 ? want : model_len / 2; /* a short model keeps half its positions for the prompt */
}

/* One evaluation or training set as the task wants it, after --demos. */
static dz_status build_one(dz_run_data *td, const dz_dataset *ds, const dz_dataset *train, int exclude_self,
                           uint64_t salt, dz_class_set *cs, dz_qa_set *qa, dz_error *err) {
    const int k = td->cfg->data.demos;
    dz_dataset shown;
    const dz_dataset *use = ds;
    dz_prompt_spec spec = td->spec;
    if (k > 0) {
        dz_status st =
            dz_dataset_with_demos(ds, train, &td->spec, k, td->cfg->data.seed ^ salt, exclude_self, &shown, err);
        if (st != DZ_OK) return st;
        use = &shown;
        td->spec.verbatim = 1; /* the texts are whole prompts now */
        snprintf(td->spec.template_, sizeof td->spec.template_, "%s", "{text}");
    }
    dz_status st = qa ? build_qa(td, use, qa, err) : build_set(td, use, cs, err);
    td->spec = spec;
    if (k > 0) dz_dataset_free(&shown);
    return st;
}

dz_status dz_run_data_load(dz_run_data *td, dz_error *err) {
    const dz_train_data *d = &td->cfg->data;
    int has_train = 0, has_test = 0;
    dz_status st = load_set(td, 0, &td->pool, &has_train, err);
    if (st == DZ_OK && !has_train) { /* an evaluation-only trainer (the federated coordinator): the test set alone */
        st = load_set(td, 1, &td->test, &has_test, err);
        if (st == DZ_OK && !has_test)
            st = dz_fail(err, DZ_ERR_INVALID, "a trainer without training data needs a test file");
        return st == DZ_OK ? build_one(td, &td->test, &td->test, 0, 0x3ULL, &td->testset,
                                       td->gen ? &td->test_qa : NULL, err)
                           : st;
    }
    if (st == DZ_OK && !td->lm && !td->gen) st = dz_dataset_require_labels(&td->pool, err); /* train and dev rows */
    if (st == DZ_OK) st = load_set(td, 1, &td->test, &has_test, err);
    if (st != DZ_OK) return st;
    dz_dataset drawn;
    const int want = d->train_examples + d->dev_examples;
    if (d->train_examples < 1) return dz_fail(err, DZ_ERR_INVALID, "--train-examples must be at least 1");
    st = dz_dataset_sample(&td->pool, want, d->seed, &drawn, err);
    if (st != DZ_OK) return st;
    int ntrain, ndev; /* a small file keeps a dev set, so best/ is chosen and written */
    if (dz_split_counts(drawn.count, d->train_examples, d->dev_examples, &ntrain, &ndev) && td->comp->rank0)
        dz_log(DZ_LOG_WARN, "%s has %d examples, fewer than the %d train + %d dev asked for: drawn (data seed %llu) "
               "into %d train and %d dev, in the proportion asked (--train-examples and --dev-examples set it)",
               td->pool.path, drawn.count, d->train_examples, d->dev_examples, (unsigned long long)d->seed, ntrain,
               ndev);
    if (ntrain < td->cfg->optim.batch && td->comp->rank0) /* the draw wraps: a step repeats examples */
        dz_log(DZ_LOG_WARN, "%s gives %d training example%s, fewer than --batch %d: each step's batch repeats "
               "examples (a plain-text file is one lm example; give more rows, or a smaller --batch)", td->pool.path,
               ntrain, ntrain == 1 ? "" : "s", td->cfg->optim.batch);
    if (!has_test && ndev > 0 && td->comp->rank0)
        dz_log(DZ_LOG_INFO, "no --test file: the run reports its %d dev examples' scores (best/ by them); test scores "
               "are n/a", ndev);
    dz_dataset train = drawn, dev = drawn;
    train.count = ntrain;
    dev.items = drawn.items + ntrain;
    dev.count = ndev;
    /* demonstrations come from the training examples: MeZO's ICL draws them from its train set */
    st = build_one(td, &train, &train, 1, 0x1ULL, &td->train, NULL, err);
    if (st == DZ_OK && td->objective == DZ_OBJ_F1) /* the same examples, decoded at each step */
        st = build_one(td, &train, &train, 1, 0x1ULL, NULL, &td->train_qa, err);
    if (st == DZ_OK && dev.count > 0) st = build_one(td, &dev, &train, 0, 0x2ULL, &td->dev, td->gen ? &td->dev_qa : NULL, err);
    if (st == DZ_OK && has_test)
        st = build_one(td, &td->test, &train, 0, 0x3ULL, &td->testset, td->gen ? &td->test_qa : NULL, err);
    dz_dataset_free(&drawn);
    return st;
}

/* Example index of slot b of step t: epoch e = k / n is a seeded shuffle of 0..n-1. */
void dz_run_data_draw_batch(dz_run_data *td, int step) {
    const int n = td->train.n_examples, B = td->cfg->optim.batch;
    for (int b = 0; b < B; b++) {
        const int64_t k = (int64_t)step * B + b;
        const int epoch = (int)(k / n), pos = (int)(k % n);
        if (epoch != td->order_epoch) {
            uint64_t s = td->cfg->data.seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1));
            for (int i = 0; i < n; i++) td->order[i] = i;
            for (int i = n - 1; i > 0; i--) {
                const int j = (int)dz_uniform_below(&s, (uint64_t)i + 1), x = td->order[i];
                td->order[i] = td->order[j];
                td->order[j] = x;
            }
            td->order_epoch = epoch;
        }
        td->batch_ex[b] = td->order[pos];
        td->batch_labels[b] = td->train.labels[td->order[pos]];
    }
}

/* (loss, weight) of each of this rank's examples: cross-entropy and 1 (or, with
 * --objective accuracy, minus whether the prediction is right, and 1), or an LM window's
 * summed NLL and its token count. */
void dz_run_data_loss(const float *logprobs, const float *p_logprobs, void *user, double *out) {
    dz_run_data *td = user;
    if (td->lm || td->gen) {
        dz_lm_example_losses(&td->bb, logprobs, out);
        return;
    }
    const dz_class_batch *bb = &td->bb;
    dz_class_batch_scores(bb, logprobs, p_logprobs, td->scores);
    for (int e = 0; e < td->hi - td->lo; e++) {
        const float *s = td->scores + bb->ex_first[e];
        const int K = bb->ex_first[e + 1] - bb->ex_first[e];
        const int label = td->batch_labels[td->lo + e];
        if (td->objective == DZ_OBJ_ACCURACY) out[2 * e] = -(double)(dz_class_predict(s, K) == label);
        else dz_class_example_losses(s, &label, 1, K, &out[2 * e]);
        out[2 * e + 1] = 1.0;
    }
}

dz_status dz_run_data_task(dz_run_data *td, const dz_compute *comp, dz_error *err) {
    const dz_train_data *d = &comp->cfg->data;
    td->cfg = comp->cfg, td->comp = comp;
    td->lm = !strcmp(d->task, "lm");
    td->preset = dz_task_preset_find(d->task);
    td->gen = td->preset && td->preset->generation;
    const char *obj = d->objective ? d->objective : "ce";
    td->objective = !strcmp(obj, "accuracy") ? DZ_OBJ_ACCURACY : !strcmp(obj, "f1") ? DZ_OBJ_F1 : DZ_OBJ_CE;
    td->order_epoch = -1;
    if (td->preset && (d->template_ || d->label_words))
        return dz_fail(err, DZ_ERR_INVALID, "--task %s: the preset has its own template and words (--template and "
                       "--label-words are for sst2 and classify)", td->preset->name);
    dz_prompt_spec_default_sst2(&td->spec);
    if (td->preset) dz_prompt_spec_preset(&td->spec);
    dz_status st = DZ_OK;
    if (d->template_ && (st = dz_prompt_spec_set_template(&td->spec, d->template_, err)) != DZ_OK) return st;
    if (d->label_words && (st = dz_prompt_spec_set_labels(&td->spec, d->label_words, err)) != DZ_OK) return st;
    td->spec.special_tokens = d->special_tokens;
    if (!td->lm && !td->preset && comp->rank0 && comp->tok) dz_prompt_spec_warn_text_special(&td->spec, comp->tok);
    return DZ_OK;
}

dz_status dz_run_data_buffers(dz_run_data *td, int local, int K, int max_len, int share, dz_error *err) {
    const int batch = td->cfg->optim.batch;
    dz_status st = dz_class_batch_init(&td->bb, local * K, max_len, share, err); /* the forward's positions */
    if (st == DZ_OK && td->objective == DZ_OBJ_F1) st = dz_train_decode_init(td, local, err);
    int n_eval = td->dev.n_examples > td->testset.n_examples ? td->dev.n_examples : td->testset.n_examples;
    if (td->dev_qa.n_examples > n_eval) n_eval = td->dev_qa.n_examples;
    if (td->test_qa.n_examples > n_eval) n_eval = td->test_qa.n_examples;
    td->order = malloc(sizeof(int) * (size_t)(td->train.n_examples > 0 ? td->train.n_examples : 1));
    td->batch_ex = malloc(sizeof(int) * (size_t)batch);
    td->batch_labels = malloc(sizeof(int) * (size_t)batch);
    td->scores = malloc(sizeof(float) * (size_t)local * K);
    td->eval_pairs = malloc(sizeof(double) * 2 * (size_t)(n_eval > 0 ? n_eval : 1));
    td->eval_preds = malloc(sizeof(int) * (size_t)(n_eval > 0 ? n_eval : 1));
    td->order_epoch = -1;
    if (st == DZ_OK && (!td->order || !td->batch_ex || !td->batch_labels || !td->scores || !td->eval_pairs ||
                        !td->eval_preds))
        st = dz_fail(err, DZ_ERR_NOMEM, "train: out of memory");
    return st;
}

void dz_run_data_free(dz_run_data *td) {
    dz_class_batch_free(&td->bb);
    dz_class_set_free(&td->train);
    dz_class_set_free(&td->dev);
    dz_class_set_free(&td->testset);
    dz_qa_set_free(&td->dev_qa);
    dz_qa_set_free(&td->train_qa);
    dz_train_decode_free(td);
    dz_qa_set_free(&td->test_qa);
    dz_dataset_free(&td->pool);
    dz_dataset_free(&td->test);
    free(td->order);
    free(td->batch_ex);
    free(td->batch_labels);
    free(td->scores);
    free(td->eval_pairs);
    free(td->eval_preds);
    memset(td, 0, sizeof *td);
}

dz_status dz_train_data_folder(const char *task, const char *folder, char *train, char *test, size_t cap,
                               dz_error *err) {
    if (!folder || !dz_is_dir(folder)) return dz_fail(err, DZ_ERR_INVALID, "%s: not a data folder", folder ? folder : "");
    const dz_task_preset *preset = task ? dz_task_preset_find(task) : NULL;
    const int tsv = !task || !strcmp(task, "sst2");
    const int a = preset ? snprintf(train, cap, "%s/%s", folder, preset->train_file)
                         : snprintf(train, cap, "%s/train.%s", folder, tsv ? "tsv" : "jsonl");
    const int b = preset ? snprintf(test, cap, "%s/%s", folder, preset->test_file)
                         : snprintf(test, cap, "%s/dev.%s", folder, tsv ? "tsv" : "jsonl");
    if (a < 0 || b < 0 || (size_t)a >= cap || (size_t)b >= cap)
        return dz_fail(err, DZ_ERR_INVALID, "%s: the data folder's path is too long", folder);
    if (!dz_file_exists(test)) test[0] = '\0';
    return DZ_OK;
}
