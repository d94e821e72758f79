/* The compiled whole call of ``mpi_native`` (`collops.mpi.blocking`): a repeated blocking call
 * checks its arrays, takes its number, posts it on the node's fingerprint board and, once
 * every rank of the node has posted the same call, calls MPI's blocking collective itself —
 * no Python frame and no mpi4py buffer specification between the user's call and MPI's.
 * Anything else (a time limit, calls in flight, a rank not there within the spin, a board
 * showing another call) goes on in Python (`BlockingCall.finish`), with the call's number
 * taken and its entry posted, exactly where the Python route would be at that point.
 *
 * Which MPI. The module is compiled against the ``mpi.h`` of the environment but links no
 * MPI library: `load` takes MPI's functions from the library mpi4py has loaded already
 * (``dlopen`` of mpi4py's own module with RTLD_NOLOAD, then ``dlsym``, which searches the
 * libraries it depends on), so it never brings a second libmpi into the process, and it
 * refuses (returns False) unless that library's handles are those of the header compiled
 * against (the sizes of MPI_Comm and the values of MPI_COMM_WORLD, MPI_BYTE, MPI_DOUBLE,
 * MPI_SUM): an mpi4py running Open MPI or the MPI ABI then keeps the Python route.
 *
 * A barrier on a board is its agreement: MPI's barrier runs only when a rank flagged its entry
 * (it sent messages since its last MPI barrier: `board.Board`'s essay, `BlockingCall._flag`).
 *
 * Python owns the state: the board, the MPI communicators, the counter and the watchdog's
 * word are Python's objects, whose memory and handles this module only reads and writes.
 */
#include "_native.h"

NATIVE_INTERNAL int (*mpi_barrier)(MPI_Comm);
NATIVE_INTERNAL int (*mpi_bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
NATIVE_INTERNAL int (*mpi_allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
NATIVE_INTERNAL int (*mpi_reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
NATIVE_INTERNAL int (*mpi_allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                                     MPI_Comm);
NATIVE_INTERNAL int (*mpi_alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                                    MPI_Comm);
NATIVE_INTERNAL int (*mpi_gather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                                  MPI_Comm);
NATIVE_INTERNAL int (*mpi_scan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
NATIVE_INTERNAL int (*mpi_exscan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
NATIVE_INTERNAL int (*mpi_reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op,
                                                MPI_Comm);
static int loaded = 0;

/* ---- the runner ------------------------------------------------------------------------- */
static int shape_of(PyObject *shape, int *nd, Py_ssize_t *dims) {
    return tuple_shape(shape, nd, dims, HOT_MAX_DIMS);
}

/* The address of a writable contiguous buffer of at least `need` bytes (NULL: an error). */
static char *buffer_of(PyObject *o, Py_ssize_t need, const char *what) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    char *at = view.buf;
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (len < need) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, %zd needed", what, len, need);
        return NULL;
    }
    return at;
}

static int array_fits(Runner *r, PyObject *o, int nd, const Py_ssize_t *dims, int writeable) {
    return array_is(o, r->ndarray, r->descr, nd, dims, writeable);
}

static Py_ssize_t bytes_of(Runner *r, int nd, const Py_ssize_t *dims) {
    Py_ssize_t n = r->itemsize;
    for (int i = 0; i < nd; i++)
        n *= dims[i];
    return n;
}

static PyObject *Runner_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {"kind", "comms", "count", "datatype", "op", "root", "is_root",
                            "board", "mine", "rows", "fingerprint", "spin", "agree_first",
                            "transport", "active", "watch", "watch_id", "finish", "fail",
                            "ndarray", "flags", "mark", "pending", "defer", NULL};
    int kind, count, root, is_root, agree_first;
    long long watch_id;
    unsigned long long datatype, op, fingerprint;
    Py_ssize_t mine, flags = -1;
    double spin;
    PyObject *comms, *board, *rows, *transport, *active, *watch, *finish, *fail, *ndarray;
    PyObject *mark = Py_None, *pending = Py_None;
    int defer = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iOiKKiiOnOKdpOO!OLOOO|nOOp", names, &kind,
                                     &comms, &count, &datatype, &op, &root, &is_root, &board,
                                     &mine, &rows, &fingerprint, &spin, &agree_first,
                                     &transport, &PyList_Type, &active, &watch, &watch_id,
                                     &finish, &fail, &ndarray, &flags, &mark, &pending,
                                     &defer))
        return NULL;
    if (!loaded) {
        PyErr_SetString(PyExc_RuntimeError, "collops.mpi._native: load() first");
        return NULL;
    }
    if (kind < 0 || kind >= K_COUNT || !PyTuple_Check(comms) || !PyTuple_Check(rows)
        || PyTuple_GET_SIZE(comms) < 1 || PyTuple_GET_SIZE(comms) > MAX_SLOTS
        || PyTuple_GET_SIZE(rows) > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "a collective kind, 1-64 communicators, rows");
        return NULL;
    }
    Runner *r = (Runner *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    r->kind = kind;
    r->count = count;
    r->datatype = (MPI_Datatype)(intptr_t)datatype;
    r->op = (MPI_Op)(intptr_t)op;
    r->root = root;
    r->is_root = is_root;
    r->nslots = (int)PyTuple_GET_SIZE(comms);
    for (int i = 0; i < r->nslots; i++) {
        /* mpi4py gives handles as unsigned words: an MPICH handle's int, sign-extended */
        unsigned long long h = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(comms, i));
        if (h == (unsigned long long)-1 && PyErr_Occurred())
            goto fail;
        r->comms[i] = (MPI_Comm)(intptr_t)h;
    }
    r->nrows = (int)PyTuple_GET_SIZE(rows);
    for (int i = 0; i < r->nrows; i++) {
        r->rows[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(rows, i));
        if (r->rows[i] == -1 && PyErr_Occurred())
            goto fail;
    }
    if (board != Py_None) {
        Py_ssize_t need = 8 * (mine + 2 * RING);
        for (int i = 0; i < r->nrows; i++)
            if (8 * (r->rows[i] + 2 * RING) > need)
                need = 8 * (r->rows[i] + 2 * RING);
        /* the flags: a row of RING per rank after the entries */
        Py_ssize_t ranks = r->nrows + 1;
        if (flags < 0 || pending == Py_None || (kind == K_BARRIER && mark == Py_None)) {
            PyErr_SetString(PyExc_ValueError, "a board needs its flags, its pending words and "
                            "(a barrier) its mark");
            goto fail;
        }
        if (8 * (flags + ranks * RING) > need)
            need = 8 * (flags + ranks * RING);
        r->words = (uint64_t *)buffer_of(board, need, "the board");
        if (r->words == NULL)
            goto fail;
        r->board_view = Py_NewRef(board);
        r->flags = flags;
        if ((r->pending = (uint64_t *)buffer_of(pending, 24, "the pending words")) == NULL)
            goto fail;
        r->pending_array = Py_NewRef(pending);
        if (kind == K_BARRIER) {
            if ((r->mark = (int64_t *)buffer_of(mark, 8, "the mark")) == NULL)
                goto fail;
            r->mark_array = Py_NewRef(mark);
        }
        r->defer = defer && ((kind == K_BCAST && is_root) || (kind == K_REDUCE && !is_root));
    }
    r->mine = mine;
    r->fingerprint = fingerprint;
    r->spin = spin;
    r->agree_first = agree_first;
    r->transport = Py_NewRef(transport);
    r->active = Py_NewRef(active);
    r->background = PyObject_GetAttrString(transport, "_background");
    r->awaited = PyObject_GetAttrString(transport, "_pending");
    r->sends_name = PyUnicode_InternFromString("_sends");
    if (r->background == NULL || r->awaited == NULL || r->sends_name == NULL)
        goto fail;
    if (!PyList_CheckExact(r->background) || !PyList_CheckExact(r->awaited)) {
        PyErr_SetString(PyExc_TypeError, "the transport's _background and _pending must be lists");
        goto fail;
    }
    if (watch != Py_None) {
        r->watch = (int64_t *)buffer_of(watch, 16, "the watchdog's word");
        if (r->watch == NULL)
            goto fail;
        r->watch_array = Py_NewRef(watch);
    }
    r->watch_id = watch_id;
    r->finish = Py_NewRef(finish);
    r->fail = Py_NewRef(fail);
    r->ndarray = Py_NewRef(ndarray);
    return (PyObject *)r;
fail:
    Py_DECREF(r);
    return NULL;
}

static void Runner_dealloc(Runner *r) {
    Py_XDECREF(r->board_view);
    Py_XDECREF(r->transport);
    Py_XDECREF(r->active);
    Py_XDECREF(r->background);
    Py_XDECREF(r->awaited);
    Py_XDECREF(r->sends_name);
    Py_XDECREF(r->mark_array);
    Py_XDECREF(r->pending_array);
    Py_XDECREF(r->watch_array);
    Py_XDECREF(r->finish);
    Py_XDECREF(r->fail);
    Py_XDECREF(r->counter);
    Py_XDECREF(r->ndarray);
    Py_XDECREF(r->descr);
    Py_XDECREF(r->slow);
    Py_XDECREF(r->alloc);
    Py_XDECREF(r->env);
    Py_XDECREF(r->head);
    Py_XDECREF(r->rest);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int bind_common(Runner *r, PyObject *counter, PyObject *descr, PyObject *shape,
                       PyObject *out_shape, PyObject *slow, PyObject *alloc) {
    if (shape_of(shape, &r->nd, r->dims) < 0
        || (out_shape != Py_None && shape_of(out_shape, &r->out_nd, r->out_dims) < 0))
        return -1;
    r->calls = (long long *)buffer_of(counter, 8, "the call counter");
    if (r->calls == NULL)
        return -1;
    PyObject *itemsize = PyObject_GetAttrString(descr, "itemsize");
    if (itemsize == NULL)
        return -1;
    r->itemsize = PyLong_AsSsize_t(itemsize);
    Py_DECREF(itemsize);
    if (r->itemsize < 0)
        return -1;
    r->receives = out_shape != Py_None;
    Py_XSETREF(r->counter, Py_NewRef(counter));
    Py_XSETREF(r->descr, Py_NewRef(descr));
    Py_XSETREF(r->slow, Py_NewRef(slow));
    Py_XSETREF(r->alloc, Py_NewRef(alloc));
    r->bound = 1;
    return 0;
}

/* bind_call(counter, dtype, shape, out_shape, slow, alloc): what `call` runs */
static PyObject *Runner_bind_call(Runner *r, PyObject *args) {
    PyObject *counter, *descr, *shape, *out_shape, *slow, *alloc;
    if (!PyArg_ParseTuple(args, "OOOOOO", &counter, &descr, &shape, &out_shape, &slow, &alloc))
        return NULL;
    if (bind_common(r, counter, descr, shape, out_shape, slow, alloc) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* call(x, out, timeout): a whole bound call (its result, None, or the slow marker) */
static PyObject *Runner_call(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !r->bound || r->env != NULL) {
        PyErr_SetString(PyExc_TypeError, "call(x, out, timeout) on a runner bound by bind_call");
        return NULL;
    }
    PyObject *x = args[0], *out = args[1], *timeout = args[2];
    if (!array_fits(r, x, r->nd, r->dims, 0))
        return Py_NewRef(r->slow);
    const char *send = ((ArrayFields *)x)->data;
    PyObject *into;
    if (!r->receives)
        into = Py_NewRef(Py_None);
    else if (out == Py_None) {
        into = PyObject_CallNoArgs(r->alloc);
        if (into == NULL)
            return NULL;
    } else {
        if (out == x || !array_fits(r, out, r->out_nd, r->out_dims, 1))
            return Py_NewRef(r->slow);
        const char *o = ((ArrayFields *)out)->data;
        Py_ssize_t n = bytes_of(r, r->nd, r->dims), m = bytes_of(r, r->out_nd, r->out_dims);
        if (n && m && o < send + n && send < o + m)
            return Py_NewRef(r->slow);  /* overlapping: the general path copes */
        into = Py_NewRef(out);
    }
    long long seq = *r->calls;
    *r->calls = seq + 1;
    char *recv = into == Py_None ? NULL : ((ArrayFields *)into)->data;
    if (run_call(r, seq, timeout, send, recv, x, into) < 0) {
        Py_DECREF(into);
        return NULL;
    }
    return into;
}

/* bind_bcast(counter, env, mine, head, dtype, shape, out_shape, slow, alloc): what `bcast`
 * runs; `env` is the envelope the others receive into, `mine` this rank's own (the root's,
 * with `head` written) */
static PyObject *Runner_bind_bcast(Runner *r, PyObject *args) {
    PyObject *counter, *env, *mine, *head, *descr, *shape, *out_shape, *slow, *alloc;
    if (!PyArg_ParseTuple(args, "OOOSOOOOO", &counter, &env, &mine, &head, &descr, &shape,
                          &out_shape, &slow, &alloc))
        return NULL;
    if (r->kind != K_BCAST) {
        PyErr_SetString(PyExc_TypeError, "bind_bcast: a bcast's runner only");
        return NULL;
    }
    if (bind_common(r, counter, descr, shape, out_shape, slow, alloc) < 0)
        return NULL;
    r->head_len = PyBytes_GET_SIZE(head);
    r->data_bytes = bytes_of(r, r->out_nd, r->out_dims);
    r->env_bytes = r->count;
    if ((r->env_data = buffer_of(env, r->count, "the envelope")) == NULL
        || (r->env_mine = buffer_of(mine, r->head_len + r->data_bytes, "the root's envelope"))
               == NULL)
        return NULL;
    if (r->head_len + r->data_bytes > r->env_bytes) {
        PyErr_SetString(PyExc_ValueError, "bind_bcast: the data does not fit the envelope");
        return NULL;
    }
    Py_XSETREF(r->env, PyTuple_Pack(2, env, mine));
    Py_XSETREF(r->head, Py_NewRef(head));
    if (r->env == NULL)
        return NULL;
    Py_RETURN_NONE;
}

/* bcast(x, out, timeout): a whole bound broadcast (its result, None when the root sent
 * another signature — the envelope holds its header — or the slow marker) */
static PyObject *Runner_bcast(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || r->env == NULL) {
        PyErr_SetString(PyExc_TypeError, "bcast(x, out, timeout) on a runner bound by bind_bcast");
        return NULL;
    }
    PyObject *x = args[0], *out = args[1], *timeout = args[2];
    Py_ssize_t n = r->data_bytes, at = r->head_len;
    if (r->is_root && !array_fits(r, x, r->nd, r->dims, 0))
        return Py_NewRef(r->slow);
    if (out != Py_None) {
        if (!array_fits(r, out, r->out_nd, r->out_dims, 1))
            return Py_NewRef(r->slow);
        if (r->is_root && out != x) {
            const char *o = ((ArrayFields *)out)->data, *s = ((ArrayFields *)x)->data;
            if (n && o < s + n && s < o + n)
                return Py_NewRef(r->slow);  /* the general path copies */
        }
    }
    long long seq = *r->calls;
    *r->calls = seq + 1;
    char *env = r->is_root ? r->env_mine : r->env_data;
    PyObject *env_obj = PyTuple_GET_ITEM(r->env, r->is_root ? 1 : 0);
    if (r->is_root)
        memcpy(env + at, ((ArrayFields *)x)->data, n);
    if (run_call(r, seq, timeout, NULL, env, Py_None, env_obj) < 0)
        return NULL;
    if (!r->is_root && memcmp(env, PyBytes_AS_STRING(r->head), at) != 0)
        Py_RETURN_NONE;  /* another signature: the general path parses the envelope */
    if (r->is_root && out == x)
        return Py_NewRef(out);
    PyObject *into = out == Py_None ? PyObject_CallNoArgs(r->alloc) : Py_NewRef(out);
    if (into == NULL)
        return NULL;
    if (!array_fits(r, into, r->out_nd, r->out_dims, 1)) {
        Py_DECREF(into);
        PyErr_SetString(PyExc_TypeError, "bcast: alloc made an array of another signature");
        return NULL;
    }
    memcpy(((ArrayFields *)into)->data, env + at, n);
    return into;
}

/* bind_known(counter, dtype, shape, signature, slow, alloc, rest): what `known_call` runs —
 * bcasts of an array of `dtype` and `shape` whose data every rank knows by `signature`
 * (`BlockingCall.run_known`), `rest` finishing those not every rank posted it for */
static PyObject *Runner_bind_known(Runner *r, PyObject *args) {
    PyObject *counter, *descr, *shape, *slow, *alloc, *rest;
    unsigned long long signature;
    if (!PyArg_ParseTuple(args, "OOOKOOO", &counter, &descr, &shape, &signature, &slow, &alloc,
                          &rest))
        return NULL;
    if (r->kind != K_BCAST || r->words == NULL || signature == 0 || !PyCallable_Check(rest)) {
        PyErr_SetString(PyExc_TypeError, "bind_known: a bcast's runner on a board, a non-zero "
                                         "signature and a callable rest");
        return NULL;
    }
    if (bind_common(r, counter, descr, shape, Py_None, slow, alloc) < 0)
        return NULL;
    r->data_bytes = bytes_of(r, r->nd, r->dims);
    if (r->data_bytes >= INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "bind_known: the data is past MPI's int count");
        return NULL;
    }
    r->known_signature = signature;
    Py_XSETREF(r->rest, Py_NewRef(rest));
    Py_RETURN_NONE;
}

static PyMethodDef Runner_methods[] = {
    {"bind_call", (PyCFunction)Runner_bind_call, METH_VARARGS,
     "bind_call(counter, dtype, shape, out_shape, slow, alloc): what `call` runs."},
    {"call", (PyCFunction)(void (*)(void))Runner_call, METH_FASTCALL,
     "call(x, out, timeout): a whole bound call (result, None or the slow marker)."},
    {"bind_bcast", (PyCFunction)Runner_bind_bcast, METH_VARARGS,
     "bind_bcast(counter, env, mine, head, dtype, shape, out_shape, slow, alloc): what "
     "`bcast` runs."},
    {"bcast", (PyCFunction)(void (*)(void))Runner_bcast, METH_FASTCALL,
     "bcast(x, out, timeout): a whole bound broadcast (result, None or the slow marker)."},
    {"known", (PyCFunction)(void (*)(void))Runner_known, METH_FASTCALL,
     "known(signature, data, seq, timeout): phase 0 of a bcast whose data this rank knows "
     "(1, 0, -1 or None: `BlockingCall.run_known`)."},
    {"bind_known", (PyCFunction)Runner_bind_known, METH_VARARGS,
     "bind_known(counter, dtype, shape, signature, slow, alloc, rest): what `known_call` "
     "runs."},
    {"known_call", (PyCFunction)(void (*)(void))Runner_known_call, METH_FASTCALL,
     "known_call(x, out, timeout): a whole bound bcast whose data every rank knows."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject RunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collops.mpi._native.Runner",
    .tp_basicsize = sizeof(Runner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The compiled whole call of one mpi_native signature.",
    .tp_new = Runner_new,
    .tp_dealloc = (destructor)Runner_dealloc,
    .tp_methods = Runner_methods,
};

/* ---- load ------------------------------------------------------------------------------- */
/* load(module_path, sizeof_comm, comm_world, byte, double, sum): take MPI's functions from
 * the library the already loaded `module_path` (mpi4py's MPI module) depends on; whether
 * they are there and that library's handles are the compiled header's. */
static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    long long size_comm;
    unsigned long long world, byte, dbl, sum;
    if (!PyArg_ParseTuple(args, "sLKKKK", &path, &size_comm, &world, &byte, &dbl, &sum))
        return NULL;
#define WORD(handle) ((unsigned long long)(intptr_t)(handle))
    if (size_comm != (long long)sizeof(MPI_Comm) || world != WORD(MPI_COMM_WORLD)
        || byte != WORD(MPI_BYTE) || dbl != WORD(MPI_DOUBLE) || sum != WORD(MPI_SUM))
        Py_RETURN_FALSE;  /* another MPI's handles */
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        Py_RETURN_FALSE;  /* not loaded: never load it here */
#define TAKE(var, name) \
    if ((*(void **)&var = dlsym(lib, name)) == NULL) { dlclose(lib); Py_RETURN_FALSE; }
    TAKE(mpi_barrier, "MPI_Barrier")
    TAKE(mpi_bcast, "MPI_Bcast")
    TAKE(mpi_allreduce, "MPI_Allreduce")
    TAKE(mpi_reduce, "MPI_Reduce")
    TAKE(mpi_allgather, "MPI_Allgather")
    TAKE(mpi_alltoall, "MPI_Alltoall")
    TAKE(mpi_gather, "MPI_Gather")
    TAKE(mpi_scan, "MPI_Scan")
    TAKE(mpi_exscan, "MPI_Exscan")
    TAKE(mpi_reduce_scatter_block, "MPI_Reduce_scatter_block")
#undef TAKE
#undef WORD
    /* the handle stays open: mpi4py's module is never unloaded */
    loaded = 1;
    Py_RETURN_TRUE;
}

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS,
     "load(module_path, sizeof_comm, comm_world, byte, double, sum): whether MPI's "
     "functions could be taken from the loaded library."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "collops.mpi._native",
                                    "The compiled whole call of mpi_native.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&RunnerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    static const char *kinds[] = {"BARRIER", "BCAST", "ALLREDUCE", "REDUCE", "ALLGATHER",
                                  "ALLTOALL", "GATHER", "SCAN", "EXSCAN",
                                  "REDUCE_SCATTER_BLOCK"};
    for (int i = 0; i < K_COUNT; i++)
        if (PyModule_AddIntConstant(m, kinds[i], i) < 0)
            goto fail;
    if (PyModule_AddObjectRef(m, "Runner", (PyObject *)&RunnerType) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
