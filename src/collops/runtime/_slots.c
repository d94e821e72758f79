/* collops.runtime._slots: the object collectives' slot codec, compiled (`runtime.objects`).
 *
 * A slot is `slot` bytes: an int64 header (the pickle's length, or TOO_BIG = -1) and the
 * pickle after it. `encode` pickles one object with protocol 5 — buffers (numpy arrays…) of
 * at most `slot` − HEAD bytes in band, larger ones out of band — and writes it into a slot
 * when it fits with no out-of-band buffer; `decode` checks the headers
 * of the slots and unpickles those asked for, or says that one did not fit. The same
 * codec in Python is `runtime.slot_codec`; this file only saves the interpreter's work
 * around the two pickle calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEAD 8
#define TOO_BIG (-1)

static PyObject *pickle_dumps;  /* pickle.dumps */
static PyObject *pickle_loads;  /* pickle.loads */
static PyObject *protocol;      /* 5 */
static PyObject *callback_kw;   /* ("buffer_callback",) */

/* The buffer callback of one `encode`, `self` its (list, in_band): a buffer of at most
 * in_band bytes stays in the pickle (a true result), a larger one is appended to the list and
 * travels out of band. */
static PyObject *keep_large(PyObject *self, PyObject *buffer) {
    Py_ssize_t in_band = PyLong_AsSsize_t(PyTuple_GET_ITEM(self, 1)), len;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();  /* not contiguous: out of band, as pickle's own `raw` would fail */
        len = in_band + 1;
    } else {
        len = view.len;
        PyBuffer_Release(&view);
    }
    if (len <= in_band)
        Py_RETURN_TRUE;
    if (PyList_Append(PyTuple_GET_ITEM(self, 0), buffer) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef keep_large_def = {"keep_large", keep_large, METH_O,
                                     "Keep a large buffer out of band."};

/* Whether pickling `obj` can meet no out-of-band buffer: a plain scalar, string or bytes,
 * or a small tuple, list or dict of them (`depth` levels deep); only PickleBuffer-aware
 * objects, numpy arrays among them, hand pickle a buffer. Then no buffer callback is made. */
#define PLAIN_ITEMS 16
static int plain(PyObject *obj, int depth) {
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyLong_Type || t == &PyFloat_Type || t == &PyUnicode_Type ||
        t == &PyBool_Type || obj == Py_None || t == &PyBytes_Type)
        return 1;
    if (depth == 0)
        return 0;
    if (t == &PyTuple_Type || t == &PyList_Type) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (n > PLAIN_ITEMS)
            return 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!plain(PySequence_Fast_GET_ITEM(obj, i), depth - 1))
                return 0;
        return 1;
    }
    if (t == &PyDict_Type && PyDict_GET_SIZE(obj) <= PLAIN_ITEMS) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &pos, &key, &value))
            if (!plain(key, depth - 1) || !plain(value, depth - 1))
                return 0;
        return 1;
    }
    return 0;
}

/* `obj` pickled into the `slot` bytes at `dst`: None when it fits (the header its length),
 * else the header says TOO_BIG and (pickle, out-of-band buffers) comes back; NULL on an
 * error. */
static PyObject *encode_into(char *dst, Py_ssize_t slot, PyObject *obj) {
    PyObject *buffers = PyList_New(0), *main;
    if (buffers == NULL) return NULL;
    if (plain(obj, 2)) {
        PyObject *call[2] = {obj, protocol};
        main = PyObject_Vectorcall(pickle_dumps, call, 2, NULL);
    } else {
        PyObject *state = Py_BuildValue("(On)", buffers, slot - HEAD);
        PyObject *append = state == NULL ? NULL : PyCFunction_New(&keep_large_def, state);
        Py_XDECREF(state);
        if (append == NULL) {
            Py_DECREF(buffers);
            return NULL;
        }
        PyObject *call[3] = {obj, protocol, append};
        main = PyObject_Vectorcall(pickle_dumps, call, 2, callback_kw);
        Py_DECREF(append);
    }
    if (main == NULL) {
        Py_DECREF(buffers);
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(main);
    int64_t head = TOO_BIG;
    int fits = PyList_GET_SIZE(buffers) == 0 && n <= slot - HEAD;
    if (fits) {
        head = (int64_t)n;
        memcpy(dst + HEAD, PyBytes_AS_STRING(main), (size_t)n);
    }
    memcpy(dst, &head, HEAD);
    if (fits) {
        Py_DECREF(main);
        Py_DECREF(buffers);
        Py_RETURN_NONE;
    }
    PyObject *pair = PyTuple_Pack(2, main, buffers);
    Py_DECREF(main);
    Py_DECREF(buffers);
    return pair;
}

/* A writable view of `buffer` holding `count` slots of `slot` bytes from byte `at`: 0, or -1
 * with an exception set (`what` names the caller) and nothing held. */
static int slots_view(PyObject *buffer, Py_ssize_t at, Py_ssize_t slot, Py_ssize_t count,
                      Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(buffer, view, PyBUF_WRITABLE) < 0)
        return -1;
    if (at < 0 || slot < HEAD || count < 0 || count > (view->len - at) / slot) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: the slots lie outside the buffer", what);
        return -1;
    }
    return 0;
}

/* encode(buffer, at, slot, obj) -> None | (pickle, buffers): obj pickled once into the slot
 * at byte `at` of `buffer` (None), else the slot says TOO_BIG and the pickle and its
 * out-of-band buffers come back for the frames' path. */
static PyObject *encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode(buffer, at, slot, obj)");
        return NULL;
    }
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    Py_ssize_t slot = PyLong_AsSsize_t(args[2]);
    Py_buffer view;
    if (((at == -1 || slot == -1) && PyErr_Occurred())
        || slots_view(args[0], at, slot, 1, &view, "encode") < 0)
        return NULL;
    PyObject *got = encode_into((char *)view.buf + at, slot, args[3]);
    PyBuffer_Release(&view);
    return got;
}

/* encode_rows(buffer, slot, objs) -> None | list: object j of `objs` pickled once into slot j
 * of `buffer` (None when they all fit), else each one's `encode` result (None, or the pickle
 * and its buffers of one that did not fit). */
static PyObject *encode_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_rows(buffer, slot, objs)");
        return NULL;
    }
    Py_ssize_t slot = PyLong_AsSsize_t(args[1]);
    if (slot == -1 && PyErr_Occurred()) return NULL;
    PyObject *objs = PySequence_Tuple(args[2]);  /* a copy: pickling may change a list */
    if (objs == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(objs);
    Py_buffer view;
    if (slots_view(args[0], 0, slot, n, &view, "encode_rows") < 0) {
        Py_DECREF(objs);
        return NULL;
    }
    PyObject *out = NULL, *got;
    for (Py_ssize_t j = 0; j < n; j++) {
        got = encode_into((char *)view.buf + j * slot, slot, PyTuple_GET_ITEM(objs, j));
        if (got == NULL)
            goto fail;
        if (got != Py_None && out == NULL) {  /* the first that did not fit: list them all */
            out = PyList_New(n);
            if (out == NULL) {
                Py_DECREF(got);
                goto done;
            }
            for (Py_ssize_t i = 0; i < n; i++)
                PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
        }
        if (out != NULL)
            PyList_SetItem(out, j, got);  /* steals got */
        else
            Py_DECREF(got);
    }
    if (out == NULL)
        out = Py_NewRef(Py_None);
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    Py_DECREF(objs);
    return out;
}

/* decode(buffer, slot, total, first, count) -> list | None: the objects of slots first …
 * first + count − 1 of the `total` slots at the start of `buffer`, each unpickled once; None
 * when one of the `total` says TOO_BIG (the ranks then take the frames' path together). */
static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode(buffer, slot, total, first, count)");
        return NULL;
    }
    Py_ssize_t slot = PyLong_AsSsize_t(args[1]);
    Py_ssize_t total = PyLong_AsSsize_t(args[2]);
    Py_ssize_t first = PyLong_AsSsize_t(args[3]);
    Py_ssize_t count = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (slot < HEAD || total < 0 || first < 0 || count < 0 || first + count > total ||
        total * slot > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode: the slots lie outside the buffer");
        return NULL;
    }
    const char *base = (const char *)view.buf;
    for (Py_ssize_t r = 0; r < total; r++) {
        int64_t head;
        memcpy(&head, base + r * slot, HEAD);
        if (head == TOO_BIG) {
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
        if (head < 0 || head > slot - HEAD) {
            PyBuffer_Release(&view);
            PyErr_Format(PyExc_ValueError, "decode: slot %zd has a corrupt length %lld", r,
                         (long long)head);
            return NULL;
        }
    }
    /* copy the pickles out first: unpickling runs Python code, which may reuse the buffer */
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        const char *at = base + (first + r) * slot;
        int64_t head;
        memcpy(&head, at, HEAD);
        PyObject *raw = PyBytes_FromStringAndSize(at + HEAD, (Py_ssize_t)head);
        if (raw == NULL) {
            PyBuffer_Release(&view);
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, r, raw);
    }
    PyBuffer_Release(&view);
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *obj = PyObject_CallOneArg(pickle_loads, PyList_GET_ITEM(out, r));
        if (obj == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SetItem(out, r, obj);  /* drops the bytes */
    }
    return out;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "Pickle an object into a slot when it fits; else the pickle and its buffers."},
    {"encode_rows", (PyCFunction)(void (*)(void))encode_rows, METH_FASTCALL,
     "Pickle each object of a sequence into its slot; None when all fit, else each result."},
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "Unpickle the objects of some slots, or None when one did not fit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_slots",
                                    "The object collectives' slot codec, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__slots(void) {
    PyObject *pickle = PyImport_ImportModule("pickle");
    if (pickle == NULL) return NULL;
    pickle_dumps = PyObject_GetAttrString(pickle, "dumps");
    pickle_loads = PyObject_GetAttrString(pickle, "loads");
    Py_DECREF(pickle);
    protocol = PyLong_FromLong(5);
    callback_kw = Py_BuildValue("(s)", "buffer_callback");
    if (pickle_dumps == NULL || pickle_loads == NULL || protocol == NULL || callback_kw == NULL)
        return NULL;
    return PyModule_Create(&module);
}
