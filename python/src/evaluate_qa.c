/* Model.evaluate of the generation presets (squad, drop), as `distzo eval` scores them:
 * each question's greedy answer, its F1 and exact match against the gold answers (the
 * SQuAD v1.1 script's rules, dz_qa_*), and their means. */
#include <stdlib.h>
#include <string.h>

#include "ext.h"

typedef struct qa_out {
    dz_qa_set qs;
    double *f1, *em;
    char **answers;
} qa_out;

static dz_status qa_run(const dzpy_net *net, const dz_tokenizer *tok, const dz_dataset *ds, int gen_tokens, qa_out *o,
                        dz_error *err) {
    const dz_model *m = net->model;
    const int max_seq = dz_model_config(m)->max_seq_len, want = gen_tokens > 0 ? gen_tokens : 50;
    const int max_new = want < max_seq / 2 ? want : max_seq / 2; /* as eval: half the positions stay the prompt's */
    dz_status st = dz_qa_set_build(ds, tok, max_seq, max_new, &o->qs, err);
    if (st != DZ_OK) return st;
    const size_t n = (size_t)o->qs.n_examples + 1;
    o->f1 = malloc(sizeof(double) * n), o->em = malloc(sizeof(double) * n), o->answers = calloc(n, sizeof(char *));
    if (!o->f1 || !o->em || !o->answers) return dz_fail(err, DZ_ERR_NOMEM, "out of memory for %zu answers", n - 1);
    dz_forward *f = NULL;
    st = dzpy_forward(net, 1, max_seq, 0, 1, &f, err);
    dz_weight_source w = dz_model_weights(m);
    if (st == DZ_OK)
        st = dz_qa_evaluate_answers(f, &w, tok, &o->qs, 0, o->qs.n_examples, max_new, o->f1, o->em, o->answers, err);
    dz_forward_free(f);
    return st;
}

/* {examples, f1, exact_match (the means, in example order as eval sums them), answers
 * (the greedy texts), f1s, exact_matches (bytes of float64, per example)}. */
static PyObject *qa_result(const qa_out *o) {
    const int n = o->qs.n_examples;
    double sf = 0.0, se = 0.0;
    for (int e = 0; e < n; e++) sf += o->f1[e], se += o->em[e];
    PyObject *answers = PyList_New(n);
    for (int e = 0; answers && e < n; e++) {
        PyObject *s = PyUnicode_DecodeUTF8(o->answers[e] ? o->answers[e] : "",
                                           o->answers[e] ? (Py_ssize_t)strlen(o->answers[e]) : 0, "replace");
        if (!s) Py_CLEAR(answers);
        else PyList_SET_ITEM(answers, e, s);
    }
    if (!answers) return NULL;
    const int d = n > 0 ? n : 1;
    return Py_BuildValue("{s:i,s:d,s:d,s:N,s:y#,s:y#,s:i}", "examples", n, "f1", sf / d, "exact_match", se / d,
                         "answers", answers, "f1s", (const char *)o->f1, (Py_ssize_t)(sizeof(double) * (size_t)n),
                         "exact_matches", (const char *)o->em, (Py_ssize_t)(sizeof(double) * (size_t)n), "truncated",
                         o->qs.truncated);
}

PyObject *dzpy_evaluate_qa(const dzpy_net *net, const dz_tokenizer *tok, const dz_dataset *ds, int gen_tokens) {
    qa_out o = {0};
    dz_error err = {0};
    dz_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qa_run(net, tok, ds, gen_tokens, &o, &err);
    Py_END_ALLOW_THREADS
    PyObject *r = st != DZ_OK ? dzpy_raise(&err) : qa_result(&o);
    for (int e = 0; o.answers && e < o.qs.n_examples; e++) free(o.answers[e]);
    free(o.answers);
    free(o.f1);
    free(o.em);
    dz_qa_set_free(&o.qs);
    return r;
}
