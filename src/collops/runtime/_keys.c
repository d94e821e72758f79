/* collops.runtime._keys: the hashable key of a v-call's counts and displacements, compiled
 * (`runtime.vector_calls.vector_key`, which is the same in Python and which this module
 * calls for anything but its common cases). A key holds each part as a tuple of ints, None
 * for None; a list or tuple of plain ints is only copied, anything else (numpy integers,
 * ranges, bools) goes to the Python function, which converts or says it is not one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *in_python;  /* vector_calls.vector_key, for whatever is not a common case */

/* `part` as a tuple of plain ints (a new reference), None for None, or NULL with no
 * exception set when it is not a list or tuple of plain ints. */
static PyObject *plain_ints(PyObject *part) {
    if (part == Py_None)
        return Py_NewRef(Py_None);
    PyObject *ints;
    if (PyTuple_CheckExact(part))
        ints = Py_NewRef(part);
    else if (PyList_CheckExact(part))
        ints = PyList_AsTuple(part);
    else
        return NULL;
    if (ints == NULL)
        return NULL;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(ints); i < n; i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(ints, i))) {
            Py_DECREF(ints);
            return NULL;
        }
    return ints;
}

/* vector_key(*parts): a tuple of `plain_ints` of each part, or the Python function's key. */
static PyObject *vector_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *key = PyTuple_New(nargs);
    if (key == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *ints = plain_ints(args[i]);
        if (ints == NULL) {
            Py_DECREF(key);
            if (PyErr_Occurred())
                return NULL;
            if (in_python == NULL) {
                PyErr_SetString(PyExc_RuntimeError, "_keys.configure was not called");
                return NULL;
            }
            return PyObject_Vectorcall(in_python, args, nargs, NULL);
        }
        PyTuple_SET_ITEM(key, i, ints);
    }
    return key;
}

/* configure(vector_key): the Python function for the cases this module hands on. */
static PyObject *configure(PyObject *self, PyObject *fallback) {
    Py_XSETREF(in_python, Py_NewRef(fallback));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"vector_key", (PyCFunction)(void (*)(void))vector_key, METH_FASTCALL,
     "The hashable key of a v-call's counts and displacements (None: not all integers)."},
    {"configure", configure, METH_O, "Set the Python key function for uncommon arguments."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_keys",
                                    "The v-calls' keys, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__keys(void) { return PyModule_Create(&module); }
