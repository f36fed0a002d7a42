/* distzo._distzo, the CPython extension under the distzo package: what its files share. */
#ifndef DZPY_EXT_H
#define DZPY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "distzo/distzo.h"

/* Raises the distzo exception for err's status (distzo.Error or a subclass that is also
 * the matching built-in: FileNotFoundError, ValueError, OSError, MemoryError), carrying
 * the library's message. Returns NULL, for `return dzpy_raise(&err);`. */
PyObject *dzpy_raise(const dz_error *err);
/* The module's exception classes into m (module.c). */
int dzpy_add_errors(PyObject *m);

/* _distzo.Model (model.c). */
int dzpy_add_model(PyObject *m);

/* A loaded model and the PEFT adapter (LoRA or prefix) attached to its every forward,
 * as `distzo eval --adapter` attaches it (adapter NULL: none). */
typedef struct dzpy_net {
    const dz_model *model;
    const dz_model *adapter;
} dzpy_net;
/* dz_forward_create_streams on net->model, net->adapter attached (model.c). */
dz_status dzpy_forward(const dzpy_net *net, int max_batch, int max_seq, int kv_cache, int n_streams, dz_forward **f,
                       dz_error *err);

/* _distzo.train(options_json, out_dir, resume, callback, train_records, test_records, ...): records
 * (Python-held data) in place of the settings' files (train.c). */
PyObject *dzpy_train(PyObject *self, PyObject *args, PyObject *kw);
/* _distzo.comm_init(node_size=0): the process group dz_train runs on (train.c). */
PyObject *dzpy_comm_init(PyObject *self, PyObject *args);
/* _distzo.export(run_dir, model, out, fmt) (train.c). */
PyObject *dzpy_export(PyObject *self, PyObject *args, PyObject *kw);

/* Model.evaluate(task, path, records, ...) on net and tok (evaluate.c). */
PyObject *dzpy_evaluate(const dzpy_net *net, const dz_tokenizer *tok, PyObject *args, PyObject *kw);

/* Model.evaluate of squad and drop: the greedy answers' F1 and exact match on ds (evaluate_qa.c). */
PyObject *dzpy_evaluate_qa(const dzpy_net *net, const dz_tokenizer *tok, const dz_dataset *ds, int gen_tokens);

/* records (a sequence of (text, label or None[, answers]) tuples; with a SuperGLUE preset,
 * of str: each row as JSON) appended to ds, which messages call name; -1 with an
 * exception set (ds freed) (records.c). */
int dzpy_records_dataset(PyObject *records, const char *name, const dz_task_preset *preset, dz_dataset *ds);

/* A sequence of token ids as a malloc'ed int array of *n; NULL with an exception set
 * (TypeError, or ValueError naming an id outside [0, vocab)). */
int *dzpy_token_ids(PyObject *seq, int vocab, int *n);

#endif
