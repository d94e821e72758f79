/* collops.shm._direct: the reductions' Python entry points (the kernels are in _kernels.c). */
#include "_direct.h"

PyObject *fold_into(PyObject *self, PyObject *args) {
    /* fold_into(out, in, dtype, op): out = out op in, element-wise (for tests) */
    Py_buffer out, in;
    int dtype, op;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*ii", &out, &in, &dtype, &op))
        return NULL;
    PyObject *result = NULL;
    if (dtype < DT_I1 || dtype > DT_F8 || op < OP_SUM || op > OP_BXOR)
        PyErr_SetString(PyExc_ValueError, "unknown op or dtype code");
    else if (out.len != in.len || out.len % itemsize_of[dtype])
        PyErr_SetString(PyExc_ValueError, "out and in must hold the same whole items");
    else {
        fold(dtype, op, out.buf, in.buf, out.len / itemsize_of[dtype]);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&in);
    return result;
}

/* combine_into(out, a, b, dtype, op): out = a op b element-wise, in numpy's arithmetic: the
 * compiled kernel of `collops.ops.combine` (`out` may be `a`; no other overlap). */
PyObject *combine_into(PyObject *self, PyObject *args) {
    Py_buffer out, a, b;
    int dtype, op;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*y*ii", &out, &a, &b, &dtype, &op))
        return NULL;
    PyObject *result = NULL;
    char *o = out.buf;
    const char *x = a.buf, *y = b.buf;
    if (dtype < DT_I1 || dtype > DT_F8 || op < OP_SUM || op > OP_BXOR)
        PyErr_SetString(PyExc_ValueError, "unknown op or dtype code");
    else if (out.len != a.len || out.len != b.len || out.len % itemsize_of[dtype])
        PyErr_SetString(PyExc_ValueError, "out, a and b must hold the same whole items");
    else if ((o != x && o < x + a.len && x < o + out.len) || (o < y + b.len && y < o + out.len))
        PyErr_SetString(PyExc_ValueError, "out may be a, and overlap nothing else");
    else {
        Py_ssize_t n = out.len / itemsize_of[dtype];
        if (out.len >= 65536) {
            Py_BEGIN_ALLOW_THREADS
            combine(dtype, op, o, x, y, n);
            Py_END_ALLOW_THREADS
        } else {
            combine(dtype, op, o, x, y, n);
        }
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return result;
}
