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
    if ((at == -1 || slot == -1) && PyErr_Occurred()) return NULL;
    PyObject *buffers = PyList_New(0);
    if (buffers == NULL) return NULL;
    PyObject *state = Py_BuildValue("(On)", buffers, slot - HEAD);
    PyObject *append = state == NULL ? NULL : PyCFunction_New(&keep_large_def, state);
    Py_XDECREF(state);
    if (append == NULL) {
        Py_DECREF(buffers);
        return NULL;
    }
    PyObject *call[3] = {args[3], protocol, append};
    PyObject *main = PyObject_Vectorcall(pickle_dumps, call, 2, callback_kw);
    Py_DECREF(append);
    if (main == NULL) {
        Py_DECREF(buffers);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) goto fail;
    if (at < 0 || slot < HEAD || at + slot > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "encode: the slot lies outside the buffer");
        goto fail;
    }
    char *dst = (char *)view.buf + at;
    Py_ssize_t n = PyBytes_GET_SIZE(main);
    int64_t head = TOO_BIG;
    int fits = PyList_GET_SIZE(buffers) == 0 && n <= slot - HEAD;
    if (fits) {
        head = (int64_t)n;
        memcpy(dst + HEAD, PyBytes_AS_STRING(main), (size_t)n);
    }
    memcpy(dst, &head, HEAD);
    PyBuffer_Release(&view);
    if (fits) {
        Py_DECREF(main);
        Py_DECREF(buffers);
        Py_RETURN_NONE;
    }
    PyObject *pair = PyTuple_Pack(2, main, buffers);
    Py_DECREF(main);
    Py_DECREF(buffers);
    return pair;
fail:
    Py_DECREF(main);
    Py_DECREF(buffers);
    return NULL;
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
