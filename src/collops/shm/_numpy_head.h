/* The leading fields of numpy's array object (`PyArrayObject_fields` in numpy's
 * ndarraytypes.h: what its PyArray_DATA/NDIM/DIMS/FLAGS read; the same in numpy 1.x and 2.x).
 * Read directly so that the C extensions build without numpy's headers. */
#ifndef COLLOPS_NUMPY_HEAD_H
#define COLLOPS_NUMPY_HEAD_H

#include <Python.h>

typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

/* numpy's array flags (NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE) */
#define NPY_C_CONTIGUOUS 0x0001
#define NPY_WRITEABLE 0x0400

/* Whether `o` is an array of type `ndarray` with dtype object `descr`, of shape `dims` (`nd`
 * of them), C-contiguous (and writeable when `writeable`). */
static inline int array_is(PyObject *o, PyObject *ndarray, PyObject *descr, int nd,
                           const Py_ssize_t *dims, int writeable) {
    if ((PyObject *)Py_TYPE(o) != ndarray)
        return 0;
    ArrayFields *a = (ArrayFields *)o;
    if (a->descr != descr || a->nd != nd || !(a->flags & NPY_C_CONTIGUOUS)
        || (writeable && !(a->flags & NPY_WRITEABLE)))
        return 0;
    for (int i = 0; i < nd; i++)
        if (a->dimensions[i] != dims[i])
            return 0;
    return 1;
}

/* Copy a shape tuple into `dims` (at most `max_dims` of them, `*nd` set): 0, or -1 with an
 * exception set. */
static inline int tuple_shape(PyObject *shape, int *nd, Py_ssize_t *dims, int max_dims) {
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > max_dims) {
        PyErr_Format(PyExc_ValueError, "a shape of at most %d dimensions", max_dims);
        return -1;
    }
    *nd = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < *nd; i++) {
        dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (dims[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

#endif
