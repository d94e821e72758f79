/* collops.facade._specs.Starter: collops.MPI's `I…` v-methods (`Iallgatherv`, `Igatherv`,
 * `Iscatterv`, `Ialltoallv`), compiled as a whole.
 *
 * The Python form of such a method (`forms.forms`) is two frames deep before it
 * reaches collops: the generated method, then the blocking method's fast path, then the
 * `Request`. With a v-spec's checks on top they cost more than the 0.5 µs the facade may
 * add to a call. A `Starter` does the same in one C call: it reads the specs with the
 * checks of `_specs.c`, calls collops' own non-blocking method (``comm.iallgatherv(...)``)
 * with the arguments the Python fast path would pass, and wraps what it returns in the
 * facade's `Request` by filling its slots. Every call it does not take — keywords, specs
 * of other forms, layouts not remembered — goes to the Python method it was made with, which
 * is the whole behaviour; a `Starter` only saves the interpreter's work on the commonest
 * call. A collops error becomes `mpi_error(exc)`, raised from None, as the Python form does.
 *
 * It is a method descriptor (`Py_TPFLAGS_METHOD_DESCRIPTOR`): ``comm.Iallgatherv(x, spec)``
 * calls it with the facade communicator first, without a bound method in between.
 *
 * The same type, of kind "wait", is `Request.Wait`: a collective's request waited for with
 * no status (the commonest call), the rest by the Python method, as `Request.Wait` itself
 * distinguishes them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_specs.h"
#include <stddef.h>
#include <structmember.h>

enum { ALLGATHERV, GATHERV, SCATTERV, ALLTOALLV, WAIT, KINDS };
static const char *const kind_names[KINDS] = {"allgatherv", "gatherv", "scatterv",
                                              "alltoallv", "wait"};

static PyTypeObject *request_type;  /* collops.facade.requests.Request */
#define REQUEST_SLOTS 5
static Py_ssize_t request_slots[REQUEST_SLOTS]; /* its _request, _finish, _value, _status,
                                                 _same slots */
static PyObject *mpi_error;         /* facade.exceptions.mpi_error */
static PyObject *collops_error;     /* collops.errors.CollopsError */
static PyObject *str_comm, *str_rank, *str_size, *str_wait, *str_nbytes;
static PyObject *names_displs_out, *names_rdispls_out, *names_out, *zero;
/* a miss: the call is not of the form a Starter takes (no error set) */
static PyObject missed_marker;
#define MISSED (&missed_marker)

typedef struct {
    PyObject_HEAD
    int kind;
    PyObject *own;       /* collops' method: "iallgatherv", ... */
    PyObject *fallback;  /* the Python method: every call not taken here */
    PyObject *dict;      /* __doc__, __name__, __signature__, ... */
    vectorcallfunc vectorcall;
} Starter;

static const char *const slot_names[REQUEST_SLOTS] = {"_request", "_finish", "_value",
                                                      "_status", "_same"};

/* configure_requests(Request, mpi_error, CollopsError): the facade's request type (its
 * slots' offsets), the error mapping, and the errors it maps. */
PyObject *configure_requests(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyCallable_Check(args[1])
        || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_requests(Request, mpi_error, CollopsError)");
        return NULL;
    }
    for (int k = 0; k < REQUEST_SLOTS; ++k)
        if (slot_offset(args[0], slot_names[k], &request_slots[k]) < 0)
            return NULL;
    Py_XSETREF(request_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(mpi_error, Py_NewRef(args[1]));
    Py_XSETREF(collops_error, Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

/* `Request(started, None)`: the facade's request over collops' (stolen). */
static PyObject *wrapped(PyObject *started) {
    PyObject *request = request_type->tp_alloc(request_type, 0);
    if (request == NULL) {
        Py_DECREF(started);
        return NULL;
    }
    *(PyObject **)((char *)request + request_slots[0]) = started;
    for (int k = 1; k < REQUEST_SLOTS; ++k)
        *(PyObject **)((char *)request + request_slots[k]) = Py_NewRef(Py_None);
    return request;
}

/* wrap_request(started) -> Request: `Request(started, None)` without running its
 * __init__ (what the generated `I…` methods return over collops' request). */
PyObject *wrap_request(PyObject *self, PyObject *started) {
    if (request_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wrap_request: configure_requests first");
        return NULL;
    }
    return wrapped(Py_NewRef(started));
}

/* The collops error being raised as `mpi_error(exc)`, raised from None. */
static void map_error(void) {
    if (!PyErr_ExceptionMatches(collops_error))
        return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL)
        PyException_SetTraceback(value, traceback);
    PyObject *mapped = PyObject_CallOneArg(mpi_error, value);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    if (mapped == NULL) {
        Py_XDECREF(value);
        return;
    }
    PyException_SetCause(mapped, NULL);   /* `from None`: no cause, context suppressed */
    PyException_SetContext(mapped, value);  /* steals value */
    PyErr_SetObject((PyObject *)Py_TYPE(mapped), mapped);
    Py_DECREF(mapped);
}

/* An int attribute of the collops communicator ``obj``, or -1 with no error set when it
 * cannot be read (a freed handle's stand-in): the Python method then raises what it raises. */
static Py_ssize_t size_of(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    Py_ssize_t n = value == NULL ? -1 : PyLong_AsSsize_t(value);
    Py_XDECREF(value);
    if (n < 0)
        PyErr_Clear();
    return n;
}

/* ``comm.<own>(*positional, **dict(zip(names, keywords)))``; ``call`` holds a free first
 * entry, then the positional arguments, then the keyword values. */
static PyObject *call_own(Starter *s, PyObject *comm, PyObject **call, Py_ssize_t npositional,
                          PyObject *names) {
    call[0] = comm;
    return PyObject_VectorcallMethod(s->own, call, (size_t)(npositional + 1), names);
}

static PyObject *start_allgatherv(Starter *s, PyObject *comm, PyObject *const *args) {
    PyObject *x = spec_array(args[1]), *got[4];
    if (x == NULL || array_elements(x, 0) < 0)  /* counts are of a 1-D buffer's items */
        return MISSED;
    Py_ssize_t size = size_of(comm, str_size);
    if (size < 0)
        return MISSED;
    Py_INCREF(x);
    int found = vector_parts(args[2], size, 1, LAYOUT_COUNTS, LAYOUT_PLACED_DISPLS, got);
    PyObject *result = found < 0 ? NULL : MISSED;
    if (found > 0) {
        PyObject *call[5] = {NULL, x, got[1], got[2], got[3]};
        result = call_own(s, comm, call, 2, names_displs_out);
        for (int k = 0; k < 4; ++k)
            Py_DECREF(got[k]);
    }
    Py_DECREF(x);
    return result;
}

static PyObject *start_alltoallv(Starter *s, PyObject *comm, PyObject *const *args) {
    Py_ssize_t size = size_of(comm, str_size);
    if (size < 0)
        return MISSED;
    PyObject *sent[4], *got[4];
    int found = vector_parts(args[1], size, 0, LAYOUT_COUNTS, LAYOUT_DISPLS, sent);
    if (found <= 0)
        return found < 0 ? NULL : MISSED;
    found = vector_parts(args[2], size, 1, LAYOUT_COUNTS, LAYOUT_PLACED_DISPLS, got);
    PyObject *result = found < 0 ? NULL : MISSED;
    if (found > 0) {
        PyObject *call[7] = {NULL, sent[0], sent[1], sent[2], got[1], got[2], got[3]};
        result = call_own(s, comm, call, 4, names_rdispls_out);
        for (int k = 0; k < 4; ++k)
            Py_DECREF(got[k]);
    }
    for (int k = 0; k < 4; ++k)
        Py_DECREF(sent[k]);
    return result;
}

/* 1 if ``comm.rank == root``, 0 if not, -1 (no error set) when that cannot be told here:
 * the Python method then raises what it raises. */
static int is_root(PyObject *comm, PyObject *root) {
    PyObject *rank = PyObject_GetAttr(comm, str_rank);
    int same = rank == NULL ? -1 : PyObject_RichCompareBool(rank, root, Py_EQ);
    Py_XDECREF(rank);
    if (same < 0)
        PyErr_Clear();
    return same;
}

/* A rooted call's plain array (`spec`: 1-D, contiguous, writeable when asked; borrowed) and
 * whether this rank is `root`: 1, or 0 when the call is not taken here. */
static int rooted(PyObject *comm, PyObject *spec, int writable, PyObject *root, PyObject **arr,
                  int *root_here) {
    *arr = spec_array(spec);
    if (*arr == NULL || array_elements(*arr, writable) < 0)
        return 0;
    *root_here = is_root(comm, root);
    return *root_here >= 0;
}

static PyObject *start_gatherv(Starter *s, PyObject *comm, PyObject *const *args,
                               PyObject *root) {
    PyObject *x;
    int root_here;
    if (!rooted(comm, args[1], 0, root, &x, &root_here))
        return MISSED;
    if (!root_here) {
        PyObject *call[4] = {NULL, x, root, Py_None};
        return call_own(s, comm, call, 3, NULL);
    }
    Py_ssize_t size = size_of(comm, str_size);
    if (size < 0)
        return MISSED;
    Py_INCREF(x);
    PyObject *got[4];
    int found = vector_parts(args[2], size, 1, LAYOUT_COUNTS, LAYOUT_PLACED_DISPLS, got);
    PyObject *result = found < 0 ? NULL : MISSED;
    if (found > 0) {
        PyObject *call[6] = {NULL, x, root, got[1], got[2], got[3]};
        result = call_own(s, comm, call, 3, names_displs_out);
        for (int k = 0; k < 4; ++k)
            Py_DECREF(got[k]);
    }
    Py_DECREF(x);
    return result;
}

/* The root's scatterv: blocks of the remembered layout of ``spec``, this rank's into the
 * first elements of ``out``. */
static PyObject *scatterv_root(Starter *s, PyObject *comm, PyObject *spec, PyObject *out,
                               PyObject *root) {
    Py_ssize_t size = size_of(comm, str_size), rank = size < 0 ? -1 : size_of(comm, str_rank);
    if (rank < 0)
        return MISSED;
    PyObject *arr, *layout, *unused;
    int found = vector_of(spec, size, 0, &arr, &layout, &unused);
    if (found <= 0)
        return found < 0 ? NULL : MISSED;
    Py_DECREF(unused);
    PyObject *result = NULL, *mine = NULL, *sent = NULL;
    PyObject *counts = layout_field(layout, LAYOUT_COUNTS);
    PyObject *count_of = counts ? PySequence_GetItem(counts, rank) : NULL;
    Py_ssize_t count = count_of ? PyLong_AsSsize_t(count_of) : -1;
    Py_XDECREF(count_of);
    PyObject *flag = count < 0 ? NULL : layout_field(layout, LAYOUT_CONTIGUOUS);
    int contiguous = flag ? PyObject_IsTrue(flag) : -1;
    if (contiguous < 0)
        goto done;
    mine = array_elements(out, 1) == count ? Py_NewRef(out) : PySequence_GetSlice(out, 0, count);
    if (mine == NULL)
        goto done;
    if (contiguous) {
        PyObject *total_of = layout_field(layout, LAYOUT_TOTAL);
        Py_ssize_t total = total_of ? PyLong_AsSsize_t(total_of) : -1;
        if (total < 0)
            goto done;
        sent = array_elements(arr, 0) == total ? Py_NewRef(arr)
                                               : PySequence_GetSlice(arr, 0, total);
        if (sent == NULL)
            goto done;
        PyObject *call[5] = {NULL, sent, counts, root, mine};
        result = call_own(s, comm, call, 3, names_out);
    } else {
        PyObject *displs = layout_field(layout, LAYOUT_DISPLS);
        if (displs == NULL)
            goto done;
        PyObject *call[6] = {NULL, arr, counts, root, displs, mine};
        result = call_own(s, comm, call, 3, names_displs_out);
    }
done:
    Py_XDECREF(mine);
    Py_XDECREF(sent);
    Py_DECREF(layout);
    Py_DECREF(arr);
    return result;
}

static PyObject *start_scatterv(Starter *s, PyObject *comm, PyObject *const *args,
                                PyObject *root) {
    PyObject *out;
    int root_here;
    if (!rooted(comm, args[2], 1, root, &out, &root_here))
        return MISSED;
    if (!root_here) {
        PyObject *call[5] = {NULL, Py_None, Py_None, root, out};
        return call_own(s, comm, call, 3, names_out);
    }
    Py_INCREF(out);
    PyObject *result = scatterv_root(s, comm, args[1], out, root);
    Py_DECREF(out);
    return result;
}

/* The request's slot `k` (borrowed). */
#define SLOT(request, k) (*(PyObject **)((char *)(request) + request_slots[k]))

/* `Request.Wait()` of a collective's request (no status, nothing to finish): collops'
 * request waited for, its value kept as `Request._complete` keeps it, the request null. */
static PyObject *wait_request(PyObject *request) {
    PyObject *started = Py_NewRef(SLOT(request, 0));
    PyObject *value = PyObject_CallMethodNoArgs(started, str_wait);
    Py_SETREF(SLOT(request, 0), Py_NewRef(Py_None));  /* null, whatever the wait raised */
    Py_DECREF(started);
    if (value == NULL) {
        map_error();
        return NULL;
    }
    PyObject *kept = value;  /* a receive's (object, status) keeps the object */
    if (PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == 2) {
        if (PyObject_HasAttr(PyTuple_GET_ITEM(value, 1), str_nbytes))
            kept = PyTuple_GET_ITEM(value, 0);
    }
    Py_XSETREF(SLOT(request, 3), Py_NewRef(value));
    Py_XSETREF(SLOT(request, 2), Py_NewRef(kept));
    Py_DECREF(value);
    Py_RETURN_TRUE;
}

/* The call: taken here when positional and of the commonest forms, else the Python
 * method's. */
static PyObject *starter_call(Starter *s, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (s->kind == WAIT) {
        if (nargs == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)
            && request_type != NULL && Py_IS_TYPE(args[0], request_type)
            && SLOT(args[0], 1) == Py_None && SLOT(args[0], 0) != NULL
            && SLOT(args[0], 0) != Py_None)
            return wait_request(args[0]);
        return PyObject_Vectorcall(s->fallback, args, nargsf, kwnames);
    }
    int rooted = s->kind == GATHERV || s->kind == SCATTERV;
    if (request_type == NULL || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || nargs < 3 || nargs > (rooted ? 4 : 3))
        return PyObject_Vectorcall(s->fallback, args, nargsf, kwnames);
    PyObject *comm = PyObject_GetAttr(args[0], str_comm);
    if (comm == NULL) {  /* not a facade communicator: the Python method says so */
        PyErr_Clear();
        return PyObject_Vectorcall(s->fallback, args, nargsf, kwnames);
    }
    PyObject *root = nargs == 4 ? args[3] : zero, *started;
    switch (s->kind) {
    case ALLGATHERV: started = start_allgatherv(s, comm, args); break;
    case ALLTOALLV: started = start_alltoallv(s, comm, args); break;
    case GATHERV: started = start_gatherv(s, comm, args, root); break;
    default: started = start_scatterv(s, comm, args, root); break;
    }
    Py_DECREF(comm);
    if (started == MISSED)
        return PyObject_Vectorcall(s->fallback, args, nargsf, kwnames);
    if (started == NULL) {
        map_error();
        return NULL;
    }
    return wrapped(started);
}

/* Starter(kind, own, fallback): ``kind`` one of "allgatherv", "gatherv", "scatterv",
 * "alltoallv", "wait"; ``own`` collops' method it calls; ``fallback`` the Python method. */
static PyObject *starter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    const char *kind;
    PyObject *own, *fallback;
    static char *keywords[] = {"kind", "own", "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sUO:Starter", keywords, &kind, &own,
                                     &fallback))
        return NULL;
    int k = 0;
    while (k < KINDS && strcmp(kind, kind_names[k]) != 0)
        ++k;
    if (k == KINDS || !PyCallable_Check(fallback)) {
        PyErr_Format(PyExc_ValueError, "Starter(kind, own, fallback): kind %s is not one of "
                     "allgatherv, gatherv, scatterv, alltoallv, wait, or fallback not callable",
                     kind);
        return NULL;
    }
    Starter *s = (Starter *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    s->kind = k;
    s->own = Py_NewRef(own);
    PyUnicode_InternInPlace(&s->own);
    s->fallback = Py_NewRef(fallback);
    s->vectorcall = (vectorcallfunc)starter_call;
    return (PyObject *)s;
}

static int starter_traverse(Starter *s, visitproc visit, void *arg) {
    Py_VISIT(s->fallback);
    Py_VISIT(s->dict);
    return 0;
}

static int starter_clear(Starter *s) {
    Py_CLEAR(s->fallback);
    Py_CLEAR(s->dict);
    return 0;
}

static void starter_dealloc(Starter *s) {
    PyObject_GC_UnTrack(s);
    starter_clear(s);
    Py_CLEAR(s->own);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* A method: bound to the facade communicator it is read from. */
static PyObject *starter_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *starter_repr(Starter *s) {
    PyObject *name = s->dict ? PyDict_GetItemString(s->dict, "__qualname__") : NULL;
    return name ? PyUnicode_FromFormat("<compiled collops.MPI method %S>", name)
                : PyUnicode_FromFormat("<compiled collops.MPI method (%s)>", kind_names[s->kind]);
}

static PyMemberDef starter_members[] = {
    {"fallback", T_OBJECT, offsetof(Starter, fallback), READONLY,
     "The Python method: every call the compiled one does not take."},
    {"__dictoffset__", T_PYSSIZET, offsetof(Starter, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Starter, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject starter_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collops.facade._specs.Starter",
    .tp_doc = "A collops.MPI I-v-method compiled as a whole (see _starters.c).",
    .tp_basicsize = sizeof(Starter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = starter_new,
    .tp_dealloc = (destructor)starter_dealloc,
    .tp_repr = (reprfunc)starter_repr,
    .tp_traverse = (traverseproc)starter_traverse,
    .tp_clear = (inquiry)starter_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Starter, vectorcall),
    .tp_descr_get = starter_get,
    .tp_dictoffset = offsetof(Starter, dict),
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_members = starter_members,
};

int add_starters(PyObject *module) {
    str_comm = PyUnicode_InternFromString("_comm");
    str_rank = PyUnicode_InternFromString("rank");
    str_size = PyUnicode_InternFromString("size");
    str_wait = PyUnicode_InternFromString("wait");
    str_nbytes = PyUnicode_InternFromString("nbytes");
    names_displs_out = Py_BuildValue("(ss)", "displs", "out");
    names_rdispls_out = Py_BuildValue("(ss)", "rdispls", "out");
    names_out = Py_BuildValue("(s)", "out");
    zero = PyLong_FromLong(0);
    if (str_comm == NULL || str_rank == NULL || str_size == NULL || str_wait == NULL
        || str_nbytes == NULL || names_displs_out == NULL || names_rdispls_out == NULL
        || names_out == NULL || zero == NULL || PyType_Ready(&starter_type) < 0)
        return -1;
    Py_INCREF(&starter_type);
    if (PyModule_AddObject(module, "Starter", (PyObject *)&starter_type) < 0) {
        Py_DECREF(&starter_type);
        return -1;
    }
    return 0;
}
