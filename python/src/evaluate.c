/* Model.evaluate: `distzo eval` on data from a file or from Python (examples appended to
 * an in-memory dataset, never written to a file): classification accuracy with every
 * example's prediction and candidate scores, or an LM's mean NLL. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ext.h"

typedef struct eval_args {
    const char *task, *path, *template_, *labels, *text_key, *label_key;
    PyObject *records;        /* a list of (text, label or None) pairs, or None: path */
    int batch, share_prompts, gen_tokens, special_tokens;
    const dz_task_preset *preset;
} eval_args;

static dz_status file_dataset(const eval_args *a, dz_dataset *ds, dz_error *err) {
    if (a->preset) return dz_dataset_load_preset(a->preset, a->path, ds, err);
    if (!strcmp(a->task, "sst2")) return dz_dataset_load_sst2(a->path, ds, err);
    if (!strcmp(a->task, "classify")) return dz_dataset_load_jsonl(a->path, a->text_key, a->label_key, ds, err);
    return dz_dataset_load_text(a->path, ds, err);
}

typedef struct class_out {
    dz_class_set cs;
    int *preds;
    float *scores;
    double accuracy;
} class_out;

/* eval_classify of the command line (src/cli/cmd_eval.c), without printing. */
static dz_status classify_run(const dzpy_net *net, const dz_tokenizer *tok, const eval_args *a, const dz_dataset *ds,
                              class_out *o, dz_error *err) {
    const dz_model *m = net->model;
    dz_prompt_spec spec;
    dz_prompt_spec_default_sst2(&spec);
    if (a->preset) dz_prompt_spec_preset(&spec);
    dz_status st = a->template_ ? dz_prompt_spec_set_template(&spec, a->template_, err) : DZ_OK;
    if (st == DZ_OK && a->labels) st = dz_prompt_spec_set_labels(&spec, a->labels, err);
    spec.special_tokens = a->special_tokens;
    if (st == DZ_OK && !a->preset) dz_prompt_spec_warn_text_special(&spec, tok);
    if (st == DZ_OK) st = dz_class_set_build(ds, &spec, tok, dz_model_config(m)->max_seq_len, &o->cs, err);
    if (st != DZ_OK) return st;
    int per = a->batch / o->cs.n_labels > 0 ? a->batch / o->cs.n_labels : 1;
    if (per > o->cs.n_examples) per = o->cs.n_examples;
    o->preds = malloc(sizeof(int) * (size_t)(o->cs.n_examples + 1));
    o->scores = malloc(sizeof(float) * (size_t)(dz_class_first(&o->cs, o->cs.n_examples) + 1));
    if (!o->preds || !o->scores) return dz_fail(err, DZ_ERR_NOMEM, "out of memory for the scores");
    dz_forward *f = NULL;
    st = dzpy_forward(net, per * o->cs.n_labels, o->cs.max_len, 0, a->share_prompts ? 2 : 1, &f, err);
    dz_weight_source w = dz_model_weights(m);
    if (st == DZ_OK) st = dz_class_evaluate(f, &w, &o->cs, per * o->cs.n_labels, o->preds, o->scores, &o->accuracy, err);
    dz_forward_free(f);
    return st;
}

static PyObject *class_result(const class_out *o) {
    const dz_class_set *cs = &o->cs;
    int *first = malloc(sizeof(int) * (size_t)(cs->n_examples + 1));
    if (!first) return PyErr_NoMemory();
    for (int e = 0; e <= cs->n_examples; e++) first[e] = dz_class_first(cs, e) - dz_class_first(cs, 0);
    PyObject *r = Py_BuildValue("{s:i,s:d,s:i,s:i,s:y#,s:y#,s:y#}", "examples", cs->n_examples, "accuracy",
                                o->accuracy, "n_labels", cs->n_labels, "truncated", cs->truncated, "predictions",
                                (const char *)o->preds, (Py_ssize_t)(sizeof(int) * (size_t)cs->n_examples), "scores",
                                (const char *)o->scores, (Py_ssize_t)(sizeof(float) * (size_t)first[cs->n_examples]),
                                "first", (const char *)first, (Py_ssize_t)(sizeof(int) * (size_t)(cs->n_examples + 1)));
    free(first);
    return r;
}

/* eval_lm of the command line: the mean next-token NLL over every text, windows of up
 * to 1024 tokens. */
static dz_status lm_run(const dzpy_net *net, const dz_tokenizer *tok, const dz_dataset *ds, double *nll,
                        int64_t *scored, dz_error *err) {
    const dz_model *m = net->model;
    if (ds->count < 1) return dz_fail(err, DZ_ERR_INVALID, "%s: no texts to score", ds->path ? ds->path : "the data");
    const int seq = dz_model_config(m)->max_seq_len < 1024 ? dz_model_config(m)->max_seq_len : 1024;
    dz_forward *f = NULL;
    dz_status st = dzpy_forward(net, 1, seq, 0, 1, &f, err);
    dz_weight_source w = dz_model_weights(m);
    for (int e = 0; e < ds->count && st == DZ_OK; e++) {
        int need = dz_tokenizer_encode(tok, ds->items[e].text, 1, NULL, 0, err);
        int *ids = need >= 0 ? malloc(sizeof(int) * (size_t)(need + 1)) : NULL;
        if (!ids) {
            st = need < 0 ? err->code : dz_fail(err, DZ_ERR_NOMEM, "out of memory for %d tokens", need);
            break;
        }
        dz_tokenizer_encode(tok, ds->items[e].text, 1, ids, need, err);
        double s = 0.0;
        int64_t k = 0;
        st = dz_lm_nll(f, &w, ids, need, seq, &s, &k, NULL, err);
        *nll += s, *scored += k;
        free(ids);
    }
    dz_forward_free(f);
    return st;
}

static PyObject *evaluate_dataset(const dzpy_net *net, const dz_tokenizer *tok, const eval_args *a,
                                  const dz_dataset *ds) {
    dz_error err = {0};
    dz_status st;
    if (a->preset && a->preset->generation) return dzpy_evaluate_qa(net, tok, ds, a->gen_tokens);
    if (!strcmp(a->task, "lm")) {
        double nll = 0.0;
        int64_t scored = 0;
        Py_BEGIN_ALLOW_THREADS
        st = lm_run(net, tok, ds, &nll, &scored, &err);
        Py_END_ALLOW_THREADS
        if (st == DZ_OK && scored == 0) /* as eval --task lm: a text of one token or none predicts nothing */
            st = dz_fail(&err, DZ_ERR_INVALID, "%s: no token to predict (every text is empty or one token)",
                         ds->path ? ds->path : "the data");
        const double mean = scored ? nll / (double)scored : 0.0;
        return st != DZ_OK ? dzpy_raise(&err)
                           : Py_BuildValue("{s:L,s:d,s:d}", "tokens", (long long)scored, "nll", mean, "perplexity",
                                           exp(mean));
    }
    class_out o = {0};
    Py_BEGIN_ALLOW_THREADS
    st = classify_run(net, tok, a, ds, &o, &err);
    Py_END_ALLOW_THREADS
    PyObject *r = st != DZ_OK ? dzpy_raise(&err) : class_result(&o);
    free(o.preds);
    free(o.scores);
    dz_class_set_free(&o.cs);
    return r;
}

PyObject *dzpy_evaluate(const dzpy_net *net, const dz_tokenizer *tok, PyObject *args, PyObject *kw) {
    static char *names[] = {"task", "path", "records", "template", "label_words", "text_key", "label_key", "batch",
                            "share_prompts", "gen_tokens", "special_tokens", NULL};
    eval_args a = {.task = "sst2", .text_key = "text", .label_key = "label", .batch = 16, .share_prompts = 1};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "szO|zzssipip", names, &a.task, &a.path, &a.records, &a.template_,
                                     &a.labels, &a.text_key, &a.label_key, &a.batch, &a.share_prompts, &a.gen_tokens,
                                     &a.special_tokens))
        return NULL;
    a.preset = dz_task_preset_find(a.task);
    if (strcmp(a.task, "sst2") && strcmp(a.task, "classify") && strcmp(a.task, "lm") && !a.preset)
        return PyErr_Format(PyExc_ValueError, "task '%s' is not one of sst2, classify, lm or a preset", a.task);
    if (a.gen_tokens < 0) return PyErr_Format(PyExc_ValueError, "gen_tokens %d: give at least 1 (0: 50)", a.gen_tokens);
    if (a.batch < 1) return PyErr_Format(PyExc_ValueError, "batch %d must be at least 1", a.batch);
    if (!a.path == (a.records == Py_None)) return PyErr_Format(PyExc_ValueError, "give a data file or records, one");
    dz_dataset ds = {0};
    dz_error err = {0};
    int rc = 0;
    if (a.path) {
        dz_status st;
        Py_BEGIN_ALLOW_THREADS
        st = file_dataset(&a, &ds, &err);
        Py_END_ALLOW_THREADS
        if (st != DZ_OK) rc = (dzpy_raise(&err), -1);
    } else {
        rc = dzpy_records_dataset(a.records, "<python data>", a.preset && !a.preset->generation ? a.preset : NULL, &ds);
    }
    PyObject *r = rc ? NULL : evaluate_dataset(net, tok, &a, &ds);
    dz_dataset_free(&ds);
    return r;
}
