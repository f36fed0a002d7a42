/* Examples held in Python as the library's dataset: (text, label or None[, answers]) appended
 * in memory, never written to a file (Model.evaluate's data, a Trainer's train_data and
 * eval_data). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ext.h"

/* A record's gold answers (a sequence of str) into ex, pointing into the strings of the
 * list returned (dz_dataset_append copies them; the caller then drops it); NULL with an
 * exception set. */
static PyObject *record_answers(PyObject *answers, dz_example *ex, const char **strs, int cap) {
    PyObject *fast = PySequence_Fast(answers, "answers must be a sequence of str");
    const Py_ssize_t n = fast ? PySequence_Fast_GET_SIZE(fast) : 0;
    if (fast && n > cap) PyErr_Format(PyExc_ValueError, "%zd answers, more than %d", n, cap);
    for (Py_ssize_t k = 0; fast && !PyErr_Occurred() && k < n; k++)
        strs[k] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, k));
    if (fast && PyErr_Occurred()) Py_CLEAR(fast);
    ex->answers = (char **)strs, ex->n_answers = (int)n;
    return fast;
}

/* Rows of a SuperGLUE preset, each a str of JSON, as the preset's file loader reads its lines. */
static int preset_rows(PyObject *fast, const dz_task_preset *preset, dz_dataset *ds, dz_error *err) {
    int cap = 0, rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast) && !rc; i++) {
        const char *json = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(fast, i));
        if (!json) rc = -1;
        else if (dz_dataset_append_preset_row(preset, json, (int)i + 1, ds, &cap, err) != DZ_OK) rc = -2;
    }
    return rc;
}

int dzpy_records_dataset(PyObject *records, const char *name, const dz_task_preset *preset, dz_dataset *ds) {
    dz_error err = {0};
    PyObject *fast = PySequence_Fast(records, "data must be a sequence of (text, label[, answers]) tuples");
    if (!fast) return -1;
    int cap = 0, rc = 0;
    const char *strs[64];
    ds->path = strdup(name); /* messages name it as they name a file */
    if (ds->path && preset) rc = preset_rows(fast, preset, ds, &err);
    for (Py_ssize_t i = 0; ds->path && !preset && i < PySequence_Fast_GET_SIZE(fast) && !rc; i++) {
        PyObject *rec = PySequence_Fast_GET_ITEM(fast, i), *label = NULL, *answers = NULL;
        const char *text = NULL;
        if (!PyArg_ParseTuple(rec, "s|OO", &text, &label, &answers)) rc = -1;
        long l = !rc && label && label != Py_None ? PyLong_AsLong(label) : -1;
        if (!rc && l == -1 && PyErr_Occurred()) rc = -1;
        if (!rc && (l < -1 || l > INT_MAX)) /* a C int holds it: never wrapped onto another label */
            rc = (PyErr_Format(PyExc_ValueError, "example %zd: label %ld is outside 0..%d", i + 1, l, INT_MAX), -1);
        dz_example ex = {.text = (char *)text, .label = (int)l, .line = (int)i + 1};
        PyObject *kept = !rc && answers && answers != Py_None ? record_answers(answers, &ex, strs, 64) : NULL;
        if (!rc && !kept && answers && answers != Py_None) rc = -1;
        if (!rc && dz_dataset_append(ds, &cap, &ex, &err) != DZ_OK) rc = -2;
        Py_XDECREF(kept);
    }
    Py_DECREF(fast);
    if (!ds->path) rc = (dz_fail(&err, DZ_ERR_NOMEM, "out of memory"), -2);
    if (rc == -2) dzpy_raise(&err);
    if (rc) dz_dataset_free(ds);
    return rc ? -1 : 0;
}
