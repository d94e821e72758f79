/* collops.shm._direct: the blocking fast path of the shm_direct collectives, compiled.
 *
 * The protocol is the one `collops.shm.direct_area` describes and implements in Python;
 * this file only runs its common case without the interpreter: copy this rank's contribution
 * into its slot, store the fingerprint and the call number, wake sleeping peers, spin a few
 * microseconds for the peers' slots to hold the same call, read them (copies, or a reduction
 * folded in rank order with the same arithmetic as numpy's ufuncs), acknowledge, wake again.
 *
 * Everything unusual is handed back to Python, which owns the state machine: a slot still
 * being read (status 1: the call has not started, Python runs it the general way), or peers
 * that are late (status 2: the contribution is published, Python waits with its spin, yield,
 * futex sleep, failure, timeout and mismatch checks; 3: a root's readers have not all found
 * the call; 4: a reader has read, the other readers of its root have not all found the call;
 * 5: an alltoallv writer's header asks for more than slot copies — its blocks come as
 * messages, or its counts disagree with this rank's — Python reads the call and acknowledges).
 * Every hand-off calls the `slow` callable given at construction, so a `Runner`'s `run` is a
 * drop-in for the Python path (`_run`).
 *
 * Memory ordering: the data and the fingerprint are stored before the call number with
 * release stores; peers' words are read with acquire loads; a sequentially consistent fence
 * separates this rank's last store from its check of the peers' sleeping flags, pairing
 * with the fence the sleepers issue before they raise them (x86 and arm64 alike).
 */
#include "_direct.h"

static PyMethodDef Runner_methods[] = {
    {"bind_call", (PyCFunction)Runner_bind_call, METH_VARARGS,
     "bind_call(counter, dtype, itemsize, shape, out_shape, slow, alloc): what `call` runs."},
    {"call", (PyCFunction)(void (*)(void))Runner_call, METH_FASTCALL,
     "call(x, out, timeout): a whole bound call (result, None or the slow marker)."},
    {"bind_bcast", (PyCFunction)Runner_bind_bcast, METH_VARARGS,
     "bind_bcast(counter, env, dtype, shape, nbytes, head, slow, alloc): what `bcast` runs."},
    {"bcast", (PyCFunction)(void (*)(void))Runner_bcast, METH_FASTCALL,
     "bcast(x, out, timeout): a whole bound broadcast (result, None or the slow marker)."},
    {"run", (PyCFunction)(void (*)(void))Runner_run, METH_FASTCALL,
     "run(send, recv, seq, timeout[, phase[, confirm]]): one blocking direct call."},
    {"post", (PyCFunction)(void (*)(void))Runner_post, METH_FASTCALL,
     "post(send, seq): publish call seq's contribution if that needs no wait (True)."},
    {"finish", (PyCFunction)(void (*)(void))Runner_finish, METH_FASTCALL,
     "finish(send, recv, seq, timeout, block): the rest of a posted call (False: not yet)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject RunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collops.shm._direct.Runner",
    .tp_basicsize = sizeof(Runner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The blocking fast path of one shm_direct call signature on one rank.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Runner_init,
    .tp_dealloc = (destructor)Runner_dealloc,
    .tp_methods = Runner_methods,
};

static PyMethodDef module_methods[] = {
    {"fold_into", fold_into, METH_VARARGS, "fold_into(out, in, dtype, op): out = out op in."},
    {"combine_into", combine_into, METH_VARARGS,
     "combine_into(out, a, b, dtype, op): out = a op b (out may be a)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.shm._direct",
    "The compiled blocking fast path of the shm_direct collectives.", -1, module_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__direct(void) {
    if (PyType_Ready(&RunnerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Runner", (PyObject *)&RunnerType) < 0
        || PyModule_AddIntConstant(m, "READ_NONE", READ_NONE) < 0
        || PyModule_AddIntConstant(m, "READ_COPY", READ_COPY) < 0
        || PyModule_AddIntConstant(m, "READ_TABLE", READ_TABLE) < 0
        || PyModule_AddIntConstant(m, "READ_SELF", READ_SELF) < 0
        || PyModule_AddIntConstant(m, "READ_REDUCE", READ_REDUCE) < 0
        || PyModule_AddIntConstant(m, "ANY_LENGTH", HEAD_ANY_LENGTH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
