/* collops.facade._specs: the checks of collops.MPI's commonest buffer specifications,
 * compiled (`facade.buffers`, `facade.layouts`).
 *
 * `array` is `buffers.fast_array`: the array of an ndarray or of `[ndarray, its own
 * predefined type]`, or None. `elements` is the size of a 1-D C-contiguous ndarray (writeable
 * if asked), or -1. `same_ints` says whether counts or displacements still hold the values
 * `layouts.snapshot` recorded; `find` and `fast_vector` are `layouts.find` and
 * `buffers.fast_vector`, reading the memo of `layouts`. The same checks in Python are the
 * fallback where this module is not built; this file only saves the interpreter's work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../shm/_numpy_head.h"
#include "_specs.h"
#include <stdint.h>
#include <string.h>
#include <structmember.h>

static PyTypeObject *ndarray_type;   /* numpy.ndarray */
static PyTypeObject *datatype_type;  /* collops.facade.datatypes.Datatype */
static PyObject *memo;               /* `layouts._memo`: key -> (counts_of, displs_of,
                                        counts_snap, displs_snap, size, step, layout) */
static Py_ssize_t exact_offset;      /* where a Datatype holds its `exact` slot */

/* Arrays are read through numpy's array head (`_numpy_head.h`); `buffers` checks `elements`
 * against numpy's own answers when it loads and uses the Python checks if they ever differ. */

#define C_CONTIGUOUS 0x0001  /* NPY_ARRAY_C_CONTIGUOUS */
#define WRITEABLE 0x0400     /* NPY_ARRAY_WRITEABLE */

/* The offset of `type`'s __slots__ member `name` in its objects (0, -1 with an error). */
int slot_offset(PyObject *type, const char *name, Py_ssize_t *offset) {
    PyObject *member = PyObject_GetAttrString(type, name);  /* its member descriptor */
    if (member == NULL)
        return -1;
    int is_slot = Py_IS_TYPE(member, &PyMemberDescr_Type);
    if (is_slot)
        *offset = ((PyMemberDescrObject *)member)->d_member->offset;
    Py_DECREF(member);
    if (!is_slot) {
        PyErr_Format(PyExc_TypeError, "%s.%s must be a __slots__ member",
                     ((PyTypeObject *)type)->tp_name, name);
        return -1;
    }
    return 0;
}

static PyTypeObject *layout_type;    /* collops.facade.layouts.Layout */
static Py_ssize_t layout_offsets[LAYOUT_FIELDS];  /* where a Layout holds each field */
static const char *const layout_names[LAYOUT_FIELDS] = {
    "counts", "displs", "end", "total", "contiguous", "placed", "placed_displs"};

/* configure(ndarray, Datatype, memo, Layout): the two types the checks compare with, the memo
 * of layouts, and the type of its layouts (whose fields are read from their slots). */
static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0]) || !PyType_Check(args[1])
        || !PyDict_CheckExact(args[2]) || !PyType_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(ndarray, Datatype, memo, Layout) takes "
                        "two types, a dict and a type");
        return NULL;
    }
    if (slot_offset(args[1], "exact", &exact_offset) < 0)
        return NULL;
    for (int k = 0; k < LAYOUT_FIELDS; ++k)
        if (slot_offset(args[3], layout_names[k], &layout_offsets[k]) < 0)
            return NULL;
    Py_XSETREF(ndarray_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(datatype_type, (PyTypeObject *)Py_NewRef(args[1]));
    Py_XSETREF(memo, Py_NewRef(args[2]));
    Py_XSETREF(layout_type, (PyTypeObject *)Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

PyObject *layout_field(PyObject *layout, int field) {
    PyObject *value = *(PyObject **)((char *)layout + layout_offsets[field]);
    if (value == NULL)
        PyErr_Format(PyExc_AttributeError, "Layout.%s is not set", layout_names[field]);
    return value;
}

/* Whether `datatype.exact is arr.dtype` (the type's base is the array's own dtype). */
static int exact_type(PyObject *arr, PyObject *datatype) {
    PyObject *exact = *(PyObject **)((char *)datatype + exact_offset);  /* NULL: unset */
    return exact != NULL && exact != Py_None && exact == ((ArrayFields *)arr)->descr;
}

/* The size of a 1-D C-contiguous array (writeable when asked), else -1. */
Py_ssize_t array_elements(PyObject *arr, int writable) {
    ArrayFields *head = (ArrayFields *)arr;
    if (Py_TYPE(arr) != ndarray_type || head->nd != 1 || !(head->flags & C_CONTIGUOUS)
        || (writable && !(head->flags & WRITEABLE)))
        return -1;
    return head->dimensions[0];
}

/* The array of an ndarray or of `[ndarray, its own predefined type]` (borrowed), or NULL. */
PyObject *spec_array(PyObject *spec) {
    if (Py_TYPE(spec) == ndarray_type)
        return spec;
    if (PyList_CheckExact(spec) && PyList_GET_SIZE(spec) == 2) {
        PyObject *arr = PyList_GET_ITEM(spec, 0), *datatype = PyList_GET_ITEM(spec, 1);
        if (Py_TYPE(arr) == ndarray_type && Py_TYPE(datatype) == datatype_type
            && exact_type(arr, datatype))
            return arr;
    }
    return NULL;
}

/* array(spec) -> ndarray | None */
static PyObject *array(PyObject *self, PyObject *spec) {
    if (ndarray_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "collops.facade._specs is not configured");
        return NULL;
    }
    PyObject *arr = spec_array(spec);
    return Py_NewRef(arr ? arr : Py_None);
}

/* elements(arr, writable) -> int: arr's size if it is a 1-D C-contiguous array (writeable
 * when asked), else -1. */
static PyObject *elements(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "elements(arr, writable) takes two arguments");
        return NULL;
    }
    int writable = PyObject_IsTrue(args[1]);
    if (writable < 0)
        return NULL;
    return PyLong_FromSsize_t(array_elements(args[0], writable));
}

/* Whether `values` hold `snapshot` (bytes, or None for an object that cannot change): a list
 * or tuple of ints whose values are its int64s, or a 1-D contiguous buffer whose format, a NUL
 * and bytes are it. */
static int holds(PyObject *values, PyObject *snapshot) {
    if (snapshot == Py_None)
        return 1;
    if (!PyBytes_CheckExact(snapshot))
        return 0;
    const char *snap = PyBytes_AS_STRING(snapshot);
    Py_ssize_t snap_len = PyBytes_GET_SIZE(snapshot);
    if (PyList_CheckExact(values) || PyTuple_CheckExact(values)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
        if (snap_len != n * (Py_ssize_t)sizeof(int64_t))
            return 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(values, i);
            if (!PyLong_CheckExact(item))  /* bool, numpy integers, floats: parse again */
                return 0;
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
            int64_t was;
            memcpy(&was, snap + i * (Py_ssize_t)sizeof(int64_t), sizeof was);
            if (overflow || v != was)
                return 0;
        }
        return 1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_ND | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *format = view.format ? view.format : "B";
    Py_ssize_t head = (Py_ssize_t)strlen(format) + 1;
    int same = view.ndim == 1 && snap_len == head + view.len && memcmp(snap, format, head) == 0
               && memcmp(snap + head, view.buf, view.len) == 0;
    PyBuffer_Release(&view);
    return same;
}

/* same_ints(values, snapshot) -> bool: whether `values` still hold `snapshot`. */
static PyObject *same_ints(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "same_ints(values, snapshot) takes a bytes snapshot");
        return NULL;
    }
    return PyBool_FromLong(holds(args[0], args[1]));
}

/* The memo's entries found last, by their counts' and displacements' objects: a lookup with
 * no int key made and no dict searched. An entry holds its objects, so they cannot be others
 * at the same address; it is used only while their values hold its snapshots, as the memo's
 * own entry, whatever the memo has dropped or replaced since. */
#define RECENT 64
static PyObject *recent[RECENT];

/* The layout the memo keeps for these counts and displacements (a new reference), if they
 * are its objects with its values, for this size and step; NULL (no error) otherwise. */
static PyObject *found(PyObject *counts, PyObject *displs, Py_ssize_t size, Py_ssize_t step) {
    uintptr_t both = (uintptr_t)counts ^ (uintptr_t)displs;
    PyObject **seen = &recent[(both >> 4) % RECENT];
    PyObject *entry = *seen;
    if (entry == NULL || PyTuple_GET_ITEM(entry, 0) != counts
        || PyTuple_GET_ITEM(entry, 1) != displs) {
        PyObject *key = PyLong_FromVoidPtr((void *)both);
        entry = key ? PyDict_GetItemWithError(memo, key) : NULL;
        Py_XDECREF(key);
        if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 7) {
            PyErr_Clear();
            return NULL;
        }
        Py_XSETREF(*seen, Py_NewRef(entry));
    }
    Py_INCREF(entry);  /* the memo may drop it while the values are compared */
    PyObject *layout = NULL;
    if (PyTuple_GET_ITEM(entry, 0) == counts && PyTuple_GET_ITEM(entry, 1) == displs
        && PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 4)) == size
        && PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 5)) == step
        && holds(counts, PyTuple_GET_ITEM(entry, 2))
        && holds(displs, PyTuple_GET_ITEM(entry, 3)))
        layout = Py_IS_TYPE(PyTuple_GET_ITEM(entry, 6), layout_type)
                     ? Py_NewRef(PyTuple_GET_ITEM(entry, 6)) : NULL;
    PyErr_Clear();
    Py_DECREF(entry);
    return layout;
}

/* find(counts, displs, size, step) -> Layout | None */
static PyObject *find(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || memo == NULL) {
        PyErr_SetString(PyExc_TypeError, "find(counts, displs, size, step), once configured");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[2]), step = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *layout = found(args[0], args[1], size, step);
    return layout ? layout : Py_NewRef(Py_None);
}

/* An int field of a layout (-1 with an error set if it is none). */
static Py_ssize_t field_size(PyObject *layout, int field) {
    PyObject *value = layout_field(layout, field);
    return value == NULL ? -1 : PyLong_AsSsize_t(value);
}

/* A receive buffer longer than its blocks' span goes to collops as a view of its first
 * `placed` elements. numpy makes a view through its general indexing (~0.15 us, more than
 * the rest of a call's parsing), and a program receives into the same buffers call after
 * call, so the recent views are kept and one is given again when it is of the same memory:
 * the same first element, type, length and writeability make it the same view, whichever
 * array it was cut from. A kept view holds its memory, so each call first lets go of those
 * whose memory nothing else holds any more (the program dropped the buffer); the last ones a
 * program drops are held until its next v-call. */
#define VIEWS 8
static PyObject *views[VIEWS];
static int next_view;

/* The first `placed` elements of the 1-D C-contiguous `buf` (a new reference): a kept view
 * of the same memory, else a new one, kept in place of the oldest. */
static PyObject *placed_view(PyObject *buf, Py_ssize_t placed) {
    ArrayFields *b = (ArrayFields *)buf;
    PyObject *view = NULL;
    for (int k = 0; k < VIEWS; ++k) {
        ArrayFields *v = (ArrayFields *)views[k];
        if (v == NULL)
            continue;
        if (Py_REFCNT(views[k]) == 1 && (v->base == NULL || Py_REFCNT(v->base) == 1)) {
            Py_CLEAR(views[k]);  /* only this table holds it and its memory */
            continue;
        }
        if (view == NULL && v->data == b->data && v->descr == b->descr
            && v->dimensions[0] == placed && (v->flags & WRITEABLE) == (b->flags & WRITEABLE))
            view = views[k];
    }
    if (view != NULL)
        return Py_NewRef(view);
    view = PySequence_GetSlice(buf, 0, placed);
    if (view == NULL || Py_TYPE(view) != ndarray_type || ((ArrayFields *)view)->nd != 1)
        return view;
    Py_XSETREF(views[next_view], Py_NewRef(view));
    next_view = (next_view + 1) % VIEWS;
    return view;
}

/* The array, remembered layout and (for a receive, `writable`) out array of a v-collective's
 * commonest specs (`buffers.fast_vector`): 1 with three new references, 0 when the spec is of
 * another form or its layout not remembered, -1 with an exception. */
int vector_of(PyObject *spec, Py_ssize_t size, int writable, PyObject **buf_found,
              PyObject **layout_found, PyObject **out_found) {
    if (!PyList_CheckExact(spec) && !PyTuple_CheckExact(spec))
        return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(spec);
    PyObject *buf, *counts, *displs, *datatype;
    if (n == 3) {
        PyObject *middle = PySequence_Fast_GET_ITEM(spec, 1);
        if (PyTuple_CheckExact(middle) && PyTuple_GET_SIZE(middle) == 2) {
            counts = PyTuple_GET_ITEM(middle, 0);
            displs = PyTuple_GET_ITEM(middle, 1);
        } else if (Py_TYPE(middle) == ndarray_type) {
            counts = middle;
            displs = Py_None;
        } else {
            return 0;
        }
        datatype = PySequence_Fast_GET_ITEM(spec, 2);
    } else if (n == 4) {
        counts = PySequence_Fast_GET_ITEM(spec, 1);
        displs = PySequence_Fast_GET_ITEM(spec, 2);
        datatype = PySequence_Fast_GET_ITEM(spec, 3);
    } else {
        return 0;
    }
    buf = PySequence_Fast_GET_ITEM(spec, 0);
    if (Py_TYPE(buf) != ndarray_type || Py_TYPE(datatype) != datatype_type)
        return 0;
    if (!exact_type(buf, datatype))
        return 0;
    /* hold what is read: comparing an ndarray's values runs no Python code, but be safe */
    Py_INCREF(buf);
    Py_INCREF(counts);
    Py_INCREF(displs);
    int result = -1;
    PyObject *layout = found(counts, displs, size, 1);
    if (layout == NULL) {
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_ssize_t need = field_size(layout, LAYOUT_END), placed = -1;
    if (need >= 0 && writable)
        placed = field_size(layout, LAYOUT_PLACED);
    if (PyErr_Occurred()) {
        Py_DECREF(layout);
        goto done;
    }
    Py_ssize_t have = array_elements(buf, writable);
    if (have < 0 || have < need) {
        result = 0;
    } else {  /* a receive's out: the buffer's first `placed` elements */
        PyObject *out = !writable || have == placed ? Py_NewRef(buf)
                                                    : placed_view(buf, placed);
        if (out != NULL) {
            *buf_found = Py_NewRef(buf);
            *layout_found = Py_NewRef(layout);
            *out_found = out;
            result = 1;
        }
    }
    Py_DECREF(layout);
done:
    Py_DECREF(buf);
    Py_DECREF(counts);
    Py_DECREF(displs);
    return result;
}

/* fast_vector(spec, size, writable) -> (buf, Layout, out) | None: `buffers.fast_vector`. */
static PyObject *fast_vector(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || memo == NULL) {
        PyErr_SetString(PyExc_TypeError, "fast_vector(spec, size, writable), once configured");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    int writable = PyObject_IsTrue(args[2]);
    if ((size == -1 && PyErr_Occurred()) || writable < 0)
        return NULL;
    PyObject *buf, *layout, *out;
    int got = vector_of(args[0], size, writable, &buf, &layout, &out);
    if (got <= 0)
        return got < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = PyTuple_Pack(3, buf, layout, out);
    Py_DECREF(buf);
    Py_DECREF(layout);
    Py_DECREF(out);
    return result;
}

/* The size argument of a pair's `name(sendspec, recvspec, size)`: 0, or -1 with an
 * exception. */
static int pair_size(PyObject *const *args, Py_ssize_t nargs, const char *name,
                     Py_ssize_t *size) {
    if (nargs != 3 || memo == NULL) {
        PyErr_Format(PyExc_TypeError, "%s(sendspec, recvspec, size), once configured", name);
        return -1;
    }
    *size = PyLong_AsSsize_t(args[2]);
    return *size == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A v-spec of the commonest forms (`vector_of`) as the fields collops' call takes: its
 * array, its layout's `first` and `second` fields and its out (`writable`), four new
 * references in `parts`; 1, 0 when it is of another form, -1 with an exception. */
int vector_parts(PyObject *spec, Py_ssize_t size, int writable, int first, int second,
                 PyObject *parts[4]) {
    PyObject *layout;
    int got = vector_of(spec, size, writable, &parts[0], &layout, &parts[3]);
    if (got <= 0)
        return got;
    parts[1] = Py_XNewRef(layout_field(layout, first));
    parts[2] = parts[1] ? Py_XNewRef(layout_field(layout, second)) : NULL;
    Py_DECREF(layout);
    if (parts[2] == NULL) {
        for (int k = 0; k < 4; ++k)
            Py_CLEAR(parts[k]);
        return -1;
    }
    return 1;
}

/* alltoallv_args(sendspec, recvspec, size) -> (sendbuf, sendcounts, sdispls, recvcounts,
 * rdispls, out) | None: `buffers.alltoallv_args`, what collops' alltoallv takes for the
 * facade's `Alltoallv` when both specs are of the commonest forms, in one call. */
static PyObject *alltoallv_args(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t size;
    if (pair_size(args, nargs, "alltoallv_args", &size) < 0)
        return NULL;
    PyObject *sent[4], *got[4], *result = NULL;
    int found = vector_parts(args[0], size, 0, LAYOUT_COUNTS, LAYOUT_DISPLS, sent);
    if (found <= 0)
        return found < 0 ? NULL : Py_NewRef(Py_None);
    found = vector_parts(args[1], size, 1, LAYOUT_COUNTS, LAYOUT_PLACED_DISPLS, got);
    if (found > 0) {
        result = PyTuple_Pack(6, sent[0], sent[1], sent[2], got[1], got[2], got[3]);
        for (int k = 0; k < 4; ++k)
            Py_DECREF(got[k]);
    } else if (found == 0) {
        result = Py_NewRef(Py_None);
    }
    for (int k = 0; k < 4; ++k)
        Py_DECREF(sent[k]);
    return result;
}

/* allgatherv_args(sendspec, recvspec, size) -> (x, counts, displs, out) | None:
 * `buffers.allgatherv_args`, what collops' allgatherv takes for the facade's `Allgatherv`
 * (``x`` a plain send array, the receive spec of the commonest forms), in one call. */
static PyObject *allgatherv_args(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t size;
    if (pair_size(args, nargs, "allgatherv_args", &size) < 0)
        return NULL;
    PyObject *x = spec_array(args[0]), *got[4], *result = NULL;
    if (x == NULL || array_elements(x, 0) < 0)  /* counts are of a 1-D buffer's items */
        Py_RETURN_NONE;
    Py_INCREF(x);
    int found = vector_parts(args[1], size, 1, LAYOUT_COUNTS, LAYOUT_PLACED_DISPLS, got);
    if (found > 0) {
        result = PyTuple_Pack(4, x, got[1], got[2], got[3]);
        for (int k = 0; k < 4; ++k)
            Py_DECREF(got[k]);
    } else if (found == 0) {
        result = Py_NewRef(Py_None);
    }
    Py_DECREF(x);
    return result;
}

/* plain_pair(sendspec, recvspec) -> (x, out) | None: the arrays of two specs of the forms
 * `array` takes, both 1-D and C-contiguous and ``out`` writeable (what the fast paths of the
 * regular collectives pass collops as they are), in one call. */
static PyObject *plain_pair(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || ndarray_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "plain_pair(sendspec, recvspec), once configured");
        return NULL;
    }
    PyObject *x = spec_array(args[0]), *out = spec_array(args[1]);
    if (x == NULL || out == NULL || array_elements(x, 0) < 0 || array_elements(out, 1) < 0)
        Py_RETURN_NONE;
    return PyTuple_Pack(2, x, out);
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "Set the array and datatype types the checks compare with."},
    {"array", array, METH_O, "The array of an ndarray or [ndarray, its own type], or None."},
    {"elements", (PyCFunction)(void (*)(void))elements, METH_FASTCALL,
     "The size of a 1-D contiguous (writeable) array, or -1."},
    {"same_ints", (PyCFunction)(void (*)(void))same_ints, METH_FASTCALL,
     "Whether counts or displacements still hold their snapshot's values."},
    {"find", (PyCFunction)(void (*)(void))find, METH_FASTCALL,
     "The remembered layout of counts and displacements that still hold its values, or None."},
    {"fast_vector", (PyCFunction)(void (*)(void))fast_vector, METH_FASTCALL,
     "The array and remembered layout of a v-collective's commonest specs, or None."},
    {"allgatherv_args", (PyCFunction)(void (*)(void))allgatherv_args, METH_FASTCALL,
     "What collops' allgatherv takes for a plain array and a v-spec, or None."},
    {"alltoallv_args", (PyCFunction)(void (*)(void))alltoallv_args, METH_FASTCALL,
     "What collops' alltoallv takes for two v-specs of the commonest forms, or None."},
    {"plain_pair", (PyCFunction)(void (*)(void))plain_pair, METH_FASTCALL,
     "The arrays of two plain 1-D specs (the second writeable), or None."},
    {"configure_requests", (PyCFunction)(void (*)(void))configure_requests, METH_FASTCALL,
     "Set the facade's Request type and error mapping the Starter methods use."},
    {"wrap_request", (PyCFunction)wrap_request, METH_O,
     "Request(started, None), made without running its __init__."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_specs",
                                    "collops.MPI's buffer-specification checks, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__specs(void) {
    PyObject *made = PyModule_Create(&module);
    if (made != NULL && add_starters(made) < 0)
        Py_CLEAR(made);
    return made;
}
