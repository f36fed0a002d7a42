/* _distzo.train and _distzo.export: dz_train over a --config JSON of settings (the
 * command line's long names or run.json's keys), with the GIL released during the run and
 * taken back for each step's callback; Ctrl-C (KeyboardInterrupt) or an exception in the
 * callback stops the run at a step boundary (dz_train_request_stop: the run folder stays
 * resumable) and is raised once dz_train has returned. */
#include <stdlib.h>
#include <string.h>

#include "ext.h"

/* The process group, started once (MPI under mpirun, else one process) and ended at exit. */
static dz_comm *g_comm;

typedef struct train_call {
    PyObject *callback;   /* None: no callback */
    int stopped;          /* an exception stopped the run (KeyboardInterrupt, the callback's): kept in exc */
    PyObject *exc[3];     /* type, value, traceback (one object from Python 3.12) */
} train_call;

static void exc_keep(train_call *tc) {
    tc->stopped = 1;
#if PY_VERSION_HEX >= 0x030C0000
    tc->exc[0] = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&tc->exc[0], &tc->exc[1], &tc->exc[2]);
#endif
}

static void exc_raise(train_call *tc) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(tc->exc[0]);
#else
    PyErr_Restore(tc->exc[0], tc->exc[1], tc->exc[2]);
#endif
}

static PyObject *progress_dict(const dz_train_progress *p) {
    PyObject *d = Py_BuildValue("{s:i,s:i,s:i,s:i,s:O,s:O}", "step", p->step, "steps", p->steps, "steps_run",
                                p->steps_run, "replayed", p->replayed, "has_eval", p->has_eval ? Py_True : Py_False,
                                "lm", p->lm ? Py_True : Py_False);
    if (!d) return NULL;
    const struct { const char *key; double value; int given; } fields[] = {
        /* the report before a resumed run's first step (replayed) has no step's numbers */
        {"loss", p->loss, p->step > 0 && !p->replayed}, {"g", p->g, p->step > 0 && !p->replayed},
        {"lr", p->lr, p->step > 0 && !p->replayed},
        {"seconds", p->seconds, 1}, {"steps_per_s", p->steps_per_s, 1},
        {"dev_accuracy", p->dev_accuracy, p->has_eval}, {"test_accuracy", p->test_accuracy, p->has_eval},
        {"best_dev_accuracy", p->best_dev_accuracy, p->has_eval},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!fields[i].given) continue;
        PyObject *v = PyFloat_FromDouble(fields[i].value);
        if (!v || PyDict_SetItemString(d, fields[i].key, v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
        if (!d) return NULL;
    }
    return d;
}

static void on_progress(const dz_train_progress *p, void *user) {
    train_call *tc = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    if (!tc->stopped && PyErr_CheckSignals() == 0 && tc->callback != Py_None) {
        PyObject *d = progress_dict(p);
        PyObject *r = d ? PyObject_CallOneArg(tc->callback, d) : NULL;
        Py_XDECREF(d);
        Py_XDECREF(r);
    }
    if (!tc->stopped && PyErr_Occurred()) {
        if (g_comm && dz_comm_size(g_comm) > 1) { /* the other ranks would wait for this one: end the job */
            PyErr_Print();
            dz_comm_abort(g_comm, 1);
        }
        exc_keep(tc);
        dz_train_request_stop();
    }
    PyGILState_Release(gil);
}

static void comm_end(void) {
    dz_comm_finalize(g_comm);
    g_comm = NULL;
}

PyObject *dzpy_comm_init(PyObject *self, PyObject *args) {
    int node_size = 0;
    if (!PyArg_ParseTuple(args, "|i", &node_size)) return NULL;
    if (!g_comm) {
        dz_error err = {0};
        if (dz_comm_init(NULL, NULL, node_size, 0, &g_comm, &err) != DZ_OK) return dzpy_raise(&err);
        if (Py_AtExit(comm_end) < 0) dz_log(DZ_LOG_WARN, "distzo: MPI will not be finalized at exit");
    }
    return Py_BuildValue("{s:i,s:i,s:i,s:s}", "rank", dz_comm_rank(g_comm), "size", dz_comm_size(g_comm),
                         "machine_ranks", dz_comm_machine_ranks(g_comm), "backend", dz_comm_backend(g_comm));
}

static PyObject *result_dict(const dz_train_result *r) {
    return Py_BuildValue("{s:i,s:d,s:d,s:d,s:d,s:d,s:d,s:i,s:d,s:i,s:d,s:d,s:O,s:O,s:O}", "steps_done", r->steps_done,
                         "zero_shot_dev", r->zero_shot_dev, "zero_shot_test", r->zero_shot_test, "final_dev",
                         r->final_dev, "final_test", r->final_test, "best_dev", r->best_dev, "best_test", r->best_test,
                         "best_step", r->best_step, "seconds", r->seconds, "steps_run", r->steps_run, "step_seconds",
                         r->step_seconds, "step_bytes", r->step_bytes, "lm", r->lm ? Py_True : Py_False, "was_finished",
                         r->was_finished ? Py_True : Py_False, "interrupted", r->interrupted ? Py_True : Py_False);
}

/* The run's settings: for a new run, the library's defaults under the JSON file; on
 * resume, the run's run.json under it (steps may be raised, placement and cadence changed). */
static dz_status train_config(const char *options, const char *out_dir, int resume, dz_train_config *c,
                              char **strings, dz_error *err) {
    dz_train_config_default(c);
    dz_status st = resume ? dz_train_config_load(out_dir, c, &strings[0], err) : DZ_OK;
    if (st == DZ_OK && options) st = dz_train_config_load_file(options, c, NULL, &strings[1], err);
    c->out_dir = out_dir;
    return st;
}

/* Python-held data as datasets (before the GIL is released); -1 with an exception set. */
static int train_datasets(PyObject *records[2], const char *preset, dz_dataset ds[2]) {
    static const char *const names[2] = {"<train_data>", "<eval_data>"};
    const dz_task_preset *p = preset ? dz_task_preset_find(preset) : NULL;
    if (preset && !p) return PyErr_Format(PyExc_ValueError, "'%s' is not a task preset", preset), -1;
    for (int k = 0; k < 2; k++)
        if (records[k] != Py_None && dzpy_records_dataset(records[k], names[k], p, &ds[k]) < 0) return -1;
    return 0;
}

PyObject *dzpy_train(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"options", "out_dir", "resume", "callback", "train_records", "test_records", "preset",
                            "pertp", "dp", "verify_every", NULL};
    const char *options, *out_dir, *preset = NULL;
    int resume = 0, pertp = 0, dp = 0, verify_every = 0;
    PyObject *records[2] = {Py_None, Py_None};
    train_call tc = {.callback = Py_None};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "zs|pOOOziii", names, &options, &out_dir, &resume, &tc.callback,
                                     &records[0], &records[1], &preset, &pertp, &dp, &verify_every))
        return NULL;
    dz_dataset ds[2] = {{0}, {0}};
    if (train_datasets(records, preset, ds) < 0) {
        dz_dataset_free(&ds[0]);
        return NULL;
    }
    dz_train_config c;
    char *strings[2] = {NULL, NULL};
    dz_train_result res = {0};
    dz_error err = {0};
    dz_status st;
    Py_BEGIN_ALLOW_THREADS
    st = train_config(options, out_dir, resume, &c, strings, &err);
    c.layout = (dz_train_layout){.comm = g_comm, .pertp = pertp, .dp = dp, .verify_every = verify_every};
    c.data.train_set = records[0] != Py_None ? &ds[0] : NULL;
    c.data.test_set = records[1] != Py_None ? &ds[1] : NULL;
    if (st == DZ_OK) st = dz_train(&c, resume, on_progress, &tc, &res, &err);
    Py_END_ALLOW_THREADS
    free(strings[0]);
    free(strings[1]);
    dz_dataset_free(&ds[0]);
    dz_dataset_free(&ds[1]);
    if (tc.stopped) {
        exc_raise(&tc);
        return NULL;
    }
    return st != DZ_OK ? dzpy_raise(&err) : result_dict(&res);
}

PyObject *dzpy_export(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"run_dir", "model", "out", "format", "gguf_type", "store", "merge", NULL};
    dz_export_spec spec = {0};
    const char *format = "hf";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "zzs|szzp", names, &spec.run_dir, &spec.model, &spec.out, &format,
                                     &spec.gguf_type, &spec.store, &spec.merge))
        return NULL;
    if (strcmp(format, "hf") && strcmp(format, "gguf"))
        return PyErr_Format(PyExc_ValueError, "format '%s' is not one of hf, gguf", format);
    spec.format = strcmp(format, "gguf") ? DZ_EXPORT_HF : DZ_EXPORT_GGUF;
    dz_error err = {0};
    dz_status st;
    Py_BEGIN_ALLOW_THREADS
    st = dz_export_model(&spec, &err);
    Py_END_ALLOW_THREADS
    if (st != DZ_OK) return dzpy_raise(&err);
    Py_RETURN_NONE;
}
