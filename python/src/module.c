/* distzo._distzo: the module, its exceptions and the runtime's thread count. */
#include "ext.h"

static PyObject *dz_errors[DZ_ERR_NOT_FOUND + 1]; /* by dz_status; [DZ_OK]: distzo.Error itself */

PyObject *dzpy_raise(const dz_error *err) {
    dz_status code = err->code >= DZ_OK && err->code <= DZ_ERR_NOT_FOUND ? err->code : DZ_OK;
    PyObject *type = dz_errors[code] ? dz_errors[code] : dz_errors[DZ_OK];
    PyObject *exc = PyObject_CallFunction(type, "s", err->msg[0] ? err->msg : dz_status_name(err->code));
    if (!exc) return NULL;
    PyObject_SetAttrString(exc, "status", PyUnicode_FromString(dz_status_name(err->code)));
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* distzo.Error, and per status a subclass that is also the built-in a Python caller
 * would catch for it. */
int dzpy_add_errors(PyObject *m) {
    static const struct { dz_status code; const char *name; } subs[] = {
        {DZ_ERR_IO, "distzo.FileError"},       {DZ_ERR_FORMAT, "distzo.FormatError"},
        {DZ_ERR_INVALID, "distzo.InvalidError"}, {DZ_ERR_NOMEM, "distzo.NoMemoryError"},
        {DZ_ERR_UNSUPPORTED, "distzo.UnsupportedError"}, {DZ_ERR_NOT_FOUND, "distzo.NotFoundError"},
    };
    PyObject *builtin[] = {[DZ_ERR_IO] = PyExc_OSError, [DZ_ERR_FORMAT] = PyExc_ValueError,
                           [DZ_ERR_INVALID] = PyExc_ValueError, [DZ_ERR_NOMEM] = PyExc_MemoryError,
                           [DZ_ERR_UNSUPPORTED] = PyExc_NotImplementedError,
                           [DZ_ERR_NOT_FOUND] = PyExc_FileNotFoundError};
    dz_errors[DZ_OK] = PyErr_NewExceptionWithDoc("distzo.Error", "An error distzo reported; str() is its message, "
                                                 ".status the library's status name.", PyExc_Exception, NULL);
    if (!dz_errors[DZ_OK] || PyModule_AddObjectRef(m, "Error", dz_errors[DZ_OK]) < 0) return -1;
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        PyObject *bases = PyTuple_Pack(2, dz_errors[DZ_OK], builtin[subs[i].code]);
        PyObject *type = bases ? PyErr_NewException(subs[i].name, bases, NULL) : NULL;
        Py_XDECREF(bases);
        if (!type || PyModule_AddObjectRef(m, strchr(subs[i].name, '.') + 1, type) < 0) return -1;
        dz_errors[subs[i].code] = type;
    }
    return 0;
}

int *dzpy_token_ids(PyObject *seq, int vocab, int *n) {
    PyObject *fast = PySequence_Fast(seq, "token ids must be a sequence of ints");
    if (!fast) return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    int *ids = len > 0 && len < INT32_MAX ? malloc(sizeof(int) * (size_t)len) : NULL;
    if (!ids) {
        Py_DECREF(fast);
        return len > 0 ? (int *)PyErr_NoMemory() : (PyErr_SetString(PyExc_ValueError, "no token ids"), NULL);
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (id == -1 && PyErr_Occurred()) break;
        if (id < 0 || id >= vocab) {
            PyErr_Format(PyExc_ValueError, "token id %ld at position %zd is outside the vocabulary [0, %d)", id, i, vocab);
            break;
        }
        ids[i] = (int)id;
    }
    Py_DECREF(fast);
    if (PyErr_Occurred()) {
        free(ids);
        return NULL;
    }
    *n = (int)len;
    return ids;
}

static PyObject *runtime_init(PyObject *self, PyObject *args) {
    int threads = 0;
    if (!PyArg_ParseTuple(args, "|i", &threads)) return NULL;
    dz_error err = {0};
    if (dz_runtime_init(threads, &err) != DZ_OK) return dzpy_raise(&err);
    return PyLong_FromLong(dz_runtime_threads());
}

static PyObject *train_option_known(PyObject *self, PyObject *key) {
    const char *k = PyUnicode_AsUTF8(key);
    return k ? PyBool_FromLong(dz_train_config_has_key(k)) : NULL;
}

/* data_folder(task, folder) -> (train, test or None): dz_train_data_folder, train's rule. */
static PyObject *data_folder(PyObject *self, PyObject *args) {
    const char *task, *folder;
    if (!PyArg_ParseTuple(args, "ss", &task, &folder)) return NULL;
    char train[4200], test[4200];
    dz_error err = {0};
    if (dz_train_data_folder(task, folder, train, test, sizeof train, &err) != DZ_OK) return dzpy_raise(&err);
    return test[0] ? Py_BuildValue("(ss)", train, test) : Py_BuildValue("(sO)", train, Py_None);
}

static PyMethodDef methods[] = {
    {"comm_init", dzpy_comm_init, METH_VARARGS,
     "comm_init(node_size=0) -> dict: the process group (MPI under mpirun, else one process), started once"},
    {"train_option_known", train_option_known, METH_O, "train_option_known(key) -> bool: a train --config key"},
    {"data_folder", data_folder, METH_VARARGS,
     "data_folder(task, folder) -> (train, test or None): a --data folder's files, as train reads them"},
    {"runtime_init", runtime_init, METH_VARARGS, "runtime_init(threads=0) -> threads in use (0: the default)"},
    {"train", (PyCFunction)(void (*)(void))dzpy_train, METH_VARARGS | METH_KEYWORDS,
     "train(options_json, out_dir, resume, callback) -> dict: dz_train over a --config JSON of settings"},
    {"export", (PyCFunction)(void (*)(void))dzpy_export, METH_VARARGS | METH_KEYWORDS,
     "export(run_dir, model, out, format) -> None: dz_export_model"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_distzo", "distzo's C library (use the distzo package).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__distzo(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (dzpy_add_errors(m) < 0 || dzpy_add_model(m) < 0 || PyModule_AddStringConstant(m, "VERSION", DISTZO_VERSION) < 0 ||
        PyModule_AddStringConstant(m, "DEFAULT_LABEL_WORDS", DZ_DEFAULT_LABEL_WORDS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
