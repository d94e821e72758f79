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

#endif
