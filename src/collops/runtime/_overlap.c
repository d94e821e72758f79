/* collops.runtime._overlap: whether two arrays may share memory, answered from their array
 * heads when each one's memory belongs to an array that owns it (`runtime.overlap`).
 *
 * numpy's `may_share_memory` compares the arrays' byte bounds, and costs more than a
 * non-blocking 8-byte call's whole preparation. Most calls need none of it: an array that
 * owns its memory (numpy allocated it), or a view whose `base` is such an array (numpy makes
 * every view of a view point at the owner), belongs to one owner, and arrays of two different
 * owners cannot overlap. Everything else — one owner for both, a view of a buffer that is not
 * an owning ndarray — is numpy's question, asked of the function `configure` was given.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../shm/_numpy_head.h"

#define OWNDATA 0x0004  /* NPY_ARRAY_OWNDATA */

static PyObject *ndarray_type;  /* numpy.ndarray */
static PyObject *may_share;     /* numpy.may_share_memory */

/* The ndarray owning `arr`'s memory (borrowed), or NULL when that is not known here. */
static PyObject *owner(PyObject *arr) {
    if ((PyObject *)Py_TYPE(arr) != ndarray_type)
        return NULL;
    ArrayFields *a = (ArrayFields *)arr;
    if (a->flags & OWNDATA)
        return arr;
    PyObject *base = a->base;
    if (base == NULL || (PyObject *)Py_TYPE(base) != ndarray_type
        || !(((ArrayFields *)base)->flags & OWNDATA))
        return NULL;
    return base;
}

/* may_overlap(a, b) -> bool */
static PyObject *may_overlap(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || may_share == NULL) {
        PyErr_SetString(PyExc_TypeError, "may_overlap(a, b), once configured");
        return NULL;
    }
    PyObject *a = owner(args[0]), *b = owner(args[1]);
    if (a != NULL && b != NULL && a != b)
        Py_RETURN_FALSE;
    return PyObject_Vectorcall(may_share, args, 2, NULL);
}

/* configure(ndarray, may_share_memory) */
static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure(ndarray, may_share_memory)");
        return NULL;
    }
    Py_XSETREF(ndarray_type, Py_NewRef(args[0]));
    Py_XSETREF(may_share, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"may_overlap", (PyCFunction)(void (*)(void))may_overlap, METH_FASTCALL,
     "Whether two arrays may share memory (numpy's answer, from the heads where it can)."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "Set the array type and numpy's may_share_memory."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_overlap",
                                    "Whether two arrays may share memory, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__overlap(void) { return PyModule_Create(&module); }
