/* _distzo.Model: a model distzo loads (any format the command line takes) and its
 * tokenizer, with the forward's logits and generation. The GIL is released while the
 * library computes, so other Python threads run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext.h"

typedef struct {
    PyObject_HEAD
    dz_model *model;
    dz_tokenizer *tok;  /* NULL: the model has none and none was given */
    char *tok_path;     /* the file tok was loaded from */
    dz_model *adapter;  /* a PEFT adapter folder's LoRA or prefix on every forward; NULL: none */
    char *adapter_path;
} Model;

static void model_free(Model *self) {
    dz_tokenizer_free(self->tok);
    dz_model_free(self->adapter);
    dz_model_free(self->model);
    free(self->tok_path);
    free(self->adapter_path);
    self->tok_path = self->adapter_path = NULL;
    self->adapter = NULL;
    self->tok = NULL;
    self->model = NULL;
}

static void model_dealloc(Model *self) {
    model_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The tokenizer: tok_path, else the model's own (none: self->tok stays NULL). As the
 * command line, one larger than the model's vocabulary is refused. */
static int load_tokenizer(Model *self, const char *tok_path, dz_error *err) {
    const char *path = tok_path ? tok_path : dz_model_tokenizer_path(self->model);
    if (!path) return 0;
    const int vocab = dz_model_config(self->model)->vocab_size;
    if (dz_tokenizer_load(path, vocab, &self->tok, err) != DZ_OK) return -1;
    if (!(self->tok_path = strdup(path))) {
        dz_fail(err, DZ_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (dz_tokenizer_vocab_size(self->tok) > vocab) {
        dz_fail(err, DZ_ERR_INVALID, "%s: tokenizer has %d tokens but the model's vocabulary is %d", path,
                dz_tokenizer_vocab_size(self->tok), vocab);
        return -1;
    }
    return 0;
}

/* The adapter folder at path on self's model (its base: the shapes must match). */
static int load_adapter(Model *self, const char *path, dz_error *err) {
    if (!dz_lora_is_folder(path)) {
        dz_fail(err, DZ_ERR_INVALID, "%s: not a PEFT adapter folder (adapter_config.json and adapter_model.safetensors)",
                path);
        return -1;
    }
    if (dz_lora_load(path, dz_model_config(self->model), &self->adapter, err) != DZ_OK) return -1;
    if (!(self->adapter_path = strdup(path))) {
        dz_fail(err, DZ_ERR_NOMEM, "out of memory");
        return -1;
    }
    return 0;
}

dz_status dzpy_forward(const dzpy_net *net, int max_batch, int max_seq, int kv_cache, int n_streams, dz_forward **f,
                       dz_error *err) {
    dz_status st = dz_forward_create_streams(net->model, max_batch, max_seq, kv_cache, n_streams, f, err);
    return st == DZ_OK && net->adapter ? dz_forward_set_adapter(*f, net->adapter, NULL, err) : st;
}

static dzpy_net net_of(const Model *self) { return (dzpy_net){self->model, self->adapter}; }

static int model_init(Model *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", "tokenizer", "dtype", "keep_quantized", "adapter", NULL};
    const char *path, *tok_path = NULL, *dtype = "f32", *adapter = NULL;
    int keep = 0; /* DZ_LOAD_KEEP_QUANTIZED: a GGUF's blocks held as stored */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zspz", names, &path, &tok_path, &dtype, &keep, &adapter)) return -1;
    dz_dtype dt;
    if (dz_dtype_parse(dtype, &dt) != 0) {
        PyErr_Format(PyExc_ValueError, "dtype '%s' is not one of f32, bf16, f16", dtype);
        return -1;
    }
    if (self->model) { /* another thread may be computing on it with the GIL released */
        PyErr_SetString(PyExc_RuntimeError, "the model is already loaded: load another with distzo.load");
        return -1;
    }
    dz_error err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dz_model_load_flags(path, dt, keep ? DZ_LOAD_KEEP_QUANTIZED : 0, &self->model, &err) == DZ_OK
             ? load_tokenizer(self, tok_path, &err)
             : -1;
    if (rc == 0 && adapter) rc = load_adapter(self, adapter, &err);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        model_free(self);
        dzpy_raise(&err);
        return -1;
    }
    return 0;
}

static int ready(const Model *self, int need_tokenizer) {
    if (!self->model) PyErr_SetString(PyExc_RuntimeError, "the model is not loaded");
    else if (need_tokenizer && !self->tok)
        PyErr_Format(PyExc_RuntimeError, "%s: no tokenizer found beside the model; load it with tokenizer=PATH",
                     dz_model_path(self->model));
    return !PyErr_Occurred();
}

static PyObject *model_info(Model *self, PyObject *unused) {
    if (!ready(self, 0)) return NULL;
    const dz_config *c = dz_model_config(self->model);
    return Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:z,s:z,s:L,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:d,s:d,s:O,s:i,s:i,s:i}", "path",
        dz_model_path(self->model), "format", dz_model_format(self->model), "arch", dz_arch_name(c->arch), "dtype",
        dz_dtype_name(dz_model_dtype(self->model)), "tokenizer", self->tok_path, "adapter", self->adapter_path,
        "params", (long long)dz_param_table_numel(dz_model_params(self->model)), "vocab_size", c->vocab_size, "dim",
        c->dim, "hidden_dim", c->hidden_dim, "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads",
        c->n_kv_heads, "head_dim", c->head_dim, "max_seq_len", c->max_seq_len, "norm_eps", (double)c->norm_eps,
        "rope_theta", (double)c->rope_theta, "tied_head", c->tied_head ? Py_True : Py_False, "bos_id", c->bos_id,
        "eos_id", c->eos_id, "pad_id", c->pad_id);
}

static PyObject *model_encode(Model *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "bos", "special", NULL};
    const char *text;
    Py_ssize_t len;
    int bos = 1, special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|pp", names, &text, &len, &bos, &special) || !ready(self, 1))
        return NULL;
    if (len > INT32_MAX / 2 - 16) return PyErr_Format(PyExc_ValueError, "a text of %zd bytes is too long", len);
    if (memchr(text, 0, (size_t)len)) /* the library reads a C string: the rest would be dropped */
        return PyErr_Format(PyExc_ValueError, "the text holds a NUL character (at byte %zd)",
                            (Py_ssize_t)((const char *)memchr(text, 0, (size_t)len) - text));
    const int cap = 2 * (int)len + 16; /* at most a token per byte, the BOS and the specials */
    int *ids = malloc(sizeof(int) * (size_t)cap), n = -1;
    if (!ids) return PyErr_NoMemory();
    dz_error err = {0};
    Py_BEGIN_ALLOW_THREADS
    n = dz_tokenizer_encode_flags(self->tok, text, (bos ? DZ_ENCODE_BOS : 0) | (special ? DZ_ENCODE_SPECIAL : 0), ids,
                                  cap, &err);
    Py_END_ALLOW_THREADS
    PyObject *out = n < 0 ? dzpy_raise(&err) : PyList_New(n);
    for (int i = 0; out && i < n; i++) PyList_SET_ITEM(out, i, PyLong_FromLong(ids[i]));
    free(ids);
    return out;
}

/* The text of ids, each piece decoded after the one before it (prev: the id before the
 * first; -1: none), as the command line prints a generation; the BOS id is a marker and
 * gives no text. */
static PyObject *model_decode(Model *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"ids", "prev", NULL};
    PyObject *seq;
    int prev = -1, n = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &seq, &prev) || !ready(self, 1)) return NULL;
    if (prev < -1 || prev >= dz_tokenizer_vocab_size(self->tok))
        return PyErr_Format(PyExc_ValueError, "prev %d is outside the vocabulary (0..%d, or -1: none)", prev,
                            dz_tokenizer_vocab_size(self->tok) - 1);
    if (PySequence_Check(seq) && PySequence_Size(seq) == 0) return PyUnicode_FromString("");
    int *ids = dzpy_token_ids(seq, dz_tokenizer_vocab_size(self->tok), &n);
    if (!ids) return NULL;
    size_t len = 0, cap = 64 + 8 * (size_t)n;
    char *text = malloc(cap);
    for (int i = 0; text && i < n; prev = ids[i++]) {
        if (ids[i] == dz_tokenizer_bos(self->tok)) continue;
        char buf[256];
        const char *piece = dz_tokenizer_decode(self->tok, prev, ids[i], buf, sizeof buf);
        size_t k = strlen(piece);
        if (len + k >= cap) {
            char *t = realloc(text, cap = 2 * (len + k + 1));
            if (!t) free(text);
            text = t;
        }
        if (text) memcpy(text + len, piece, k);
        len += k;
    }
    free(ids);
    PyObject *out = text ? PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace") : PyErr_NoMemory();
    free(text);
    return out;
}

/* The forward over ids[n] (one sequence from position 0) and the logits of every
 * position into out[n * vocab]. */
static dz_status logits_run(const dzpy_net *net, const int *ids, int n, float *out, dz_error *err) {
    const dz_model *m = net->model;
    dz_forward *f = NULL;
    int *rows = malloc(sizeof(int) * (size_t)n);
    if (!rows) return dz_fail(err, DZ_ERR_NOMEM, "out of memory for %d rows", n);
    for (int i = 0; i < n; i++) rows[i] = i;
    dz_weight_source w = dz_model_weights(m);
    dz_status st = dzpy_forward(net, 1, n, 0, 1, &f, err);
    if (st == DZ_OK) st = dz_forward_run(f, &w, ids, NULL, 1, n, 0, err);
    if (st == DZ_OK) st = dz_forward_logits(f, &w, rows, n, out, err);
    dz_forward_free(f);
    free(rows);
    return st;
}

/* logits(ids) -> bytearray of n * vocab float32 (distzo.Model.logits makes it an array). */
static PyObject *model_logits(Model *self, PyObject *seq) {
    if (!ready(self, 0)) return NULL;
    const dz_config *c = dz_model_config(self->model);
    int n = 0, *ids = dzpy_token_ids(seq, c->vocab_size, &n);
    if (!ids) return NULL;
    if (n > c->max_seq_len) {
        free(ids);
        return PyErr_Format(PyExc_ValueError, "%d token ids do not fit the model's %d positions", n, c->max_seq_len);
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n * c->vocab_size * (Py_ssize_t)sizeof(float));
    dz_error err = {0};
    dz_status st = DZ_OK;
    if (out) {
        float *logits = (float *)PyByteArray_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        const dzpy_net net = net_of(self);
        st = logits_run(&net, ids, n, logits, &err);
        Py_END_ALLOW_THREADS
    }
    free(ids);
    if (st != DZ_OK) Py_CLEAR(out);
    return st != DZ_OK ? dzpy_raise(&err) : out;
}

typedef struct gen_args {
    int n, stop_at_eos;
    unsigned long long seed; /* as generate --seed: any 64-bit value */
    float temperature, top_p;
} gen_args;

/* dz_generate after ids[n_prompt] with a KV-cache forward, as `distzo generate` does;
 * out holds a->n ids. */
static dz_status generate_run(const Model *self, const int *ids, int n_prompt, const gen_args *a, int *out,
                              int *n_out, dz_error *err) {
    const int cap = dz_model_config(self->model)->max_seq_len;
    const int seq = n_prompt + a->n < cap ? n_prompt + a->n : cap;
    dz_forward *f = NULL;
    const dzpy_net net = net_of(self);
    dz_status st = dzpy_forward(&net, 1, seq, 1, 1, &f, err);
    if (st != DZ_OK) return st;
    dz_sampler s;
    dz_sampler_init(&s, a->temperature, a->top_p, (uint64_t)a->seed);
    dz_weight_source w = dz_model_weights(self->model);
    const int eos = a->stop_at_eos && self->tok ? dz_tokenizer_eos(self->tok) : -1;
    st = dz_generate(f, &w, ids, n_prompt, a->n, eos, &s, out, n_out, NULL, NULL, err);
    dz_forward_free(f);
    return st;
}

static PyObject *model_generate(Model *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"ids", "max_tokens", "temperature", "top_p", "seed", "stop_at_eos", NULL};
    PyObject *seq, *seed = NULL;
    gen_args a = {.n = 256, .temperature = 1.0f, .top_p = 0.9f, .stop_at_eos = 1};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iffOp", names, &seq, &a.n, &a.temperature, &a.top_p, &seed,
                                     &a.stop_at_eos) || !ready(self, 0))
        return NULL;
    if (seed) { /* any integer (numpy's too) in 0..2^64-1, as generate --seed */
        PyObject *i = PyNumber_Index(seed);
        if (!i) return NULL;
        a.seed = PyLong_AsUnsignedLongLong(i);
        Py_DECREF(i);
        if (a.seed == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "seed %R is outside 0..2^64-1", seed);
        }
    }
    if (a.n < 1) return PyErr_Format(PyExc_ValueError, "max_tokens %d: generate at least 1", a.n);
    char v[32]; /* PyErr_Format has no %g */
    if (!(a.temperature >= 0.0f && isfinite(a.temperature))) {
        snprintf(v, sizeof v, "%g", (double)a.temperature);
        return PyErr_Format(PyExc_ValueError, "temperature %s: expected a finite number >= 0 (0: greedy)", v);
    }
    if (!(a.top_p > 0.0f && a.top_p <= 1.0f)) {
        snprintf(v, sizeof v, "%g", (double)a.top_p);
        return PyErr_Format(PyExc_ValueError, "top_p %s is outside (0, 1]", v);
    }
    const int cap = dz_model_config(self->model)->max_seq_len;
    if (a.n > cap) a.n = cap; /* generation stops at the model's last position anyway */
    int n_prompt = 0, n_out = 0, *ids = dzpy_token_ids(seq, dz_model_config(self->model)->vocab_size, &n_prompt);
    if (!ids) return NULL;
    int *out = n_prompt < cap ? malloc(sizeof(int) * (size_t)a.n) : NULL;
    dz_error err = {0};
    dz_status st = out ? DZ_OK : DZ_ERR_INVALID;
    if (out) {
        Py_BEGIN_ALLOW_THREADS
        st = generate_run(self, ids, n_prompt, &a, out, &n_out, &err);
        Py_END_ALLOW_THREADS
    } else if (n_prompt >= cap) {
        dz_fail(&err, DZ_ERR_INVALID, "%d prompt tokens do not fit %s's %d positions (leave room to generate)",
                n_prompt, dz_model_path(self->model), cap);
    } else {
        dz_fail(&err, DZ_ERR_NOMEM, "out of memory for %d token ids", a.n);
    }
    PyObject *res = st != DZ_OK ? dzpy_raise(&err) : PyList_New(n_out);
    for (int i = 0; res && i < n_out; i++) PyList_SET_ITEM(res, i, PyLong_FromLong(out[i]));
    free(out);
    free(ids);
    return res;
}

static PyObject *model_evaluate(Model *self, PyObject *args, PyObject *kw) {
    const dzpy_net net = net_of(self);
    return ready(self, 1) ? dzpy_evaluate(&net, self->tok, args, kw) : NULL;
}

static PyObject *model_has_tokenizer(Model *self, void *unused) { return PyBool_FromLong(self->tok != NULL); }

static PyObject *model_bos_eos(Model *self, PyObject *unused) {
    if (!ready(self, 1)) return NULL;
    return Py_BuildValue("(ii)", dz_tokenizer_bos(self->tok), dz_tokenizer_eos(self->tok));
}

static PyMethodDef model_methods[] = {
    {"info", (PyCFunction)model_info, METH_NOARGS, "info() -> dict: the model's config and files"},
    {"encode", (PyCFunction)(void (*)(void))model_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(text, bos=True, special=False) -> list of token ids"},
    {"decode", (PyCFunction)(void (*)(void))model_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(ids, prev=-1) -> str (prev: the id before ids[0])"},
    {"logits", (PyCFunction)model_logits, METH_O, "logits(ids) -> bytearray of len(ids) x vocab float32"},
    {"generate", (PyCFunction)(void (*)(void))model_generate, METH_VARARGS | METH_KEYWORDS,
     "generate(ids, max_tokens=256, temperature=1.0, top_p=0.9, seed=0, stop_at_eos=True) -> new ids"},
    {"evaluate", (PyCFunction)(void (*)(void))model_evaluate, METH_VARARGS | METH_KEYWORDS,
     "evaluate(task, path, records, template=None, label_words=None, text_key='text', label_key='label', batch=16, "
     "share_prompts=True, gen_tokens=0, special_tokens=False) -> dict"},
    {"bos_eos", (PyCFunction)model_bos_eos, METH_NOARGS, "bos_eos() -> (bos id, eos id); -1: none"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef model_getset[] = {
    {"has_tokenizer", (getter)model_has_tokenizer, NULL, "a tokenizer was found or given", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject model_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "distzo._distzo.Model",
    .tp_basicsize = sizeof(Model),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Model(path, tokenizer=None, dtype='f32'): a model distzo loads and its tokenizer",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)model_init,
    .tp_dealloc = (destructor)model_dealloc,
    .tp_methods = model_methods,
    .tp_getset = model_getset,
};

int dzpy_add_model(PyObject *m) {
    if (PyType_Ready(&model_type) < 0) return -1;
    return PyModule_AddObjectRef(m, "Model", (PyObject *)&model_type);
}
