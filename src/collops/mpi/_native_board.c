/* collops.mpi._native: one whole call — the node's fingerprint board, then MPI's blocking
 * collective (the essay is at the top of _native.c). */
#include <limits.h>

#include "_native.h"

/* ---- one MPI collective ----------------------------------------------------------------- */
static int run_mpi(Runner *r, MPI_Comm c, const char *send, char *recv) {
    switch (r->kind) {
    case K_BARRIER:
        return mpi_barrier(c);
    case K_BCAST:
        return mpi_bcast(recv, r->count, MPI_BYTE, r->root, c);
    case K_ALLREDUCE:
        return mpi_allreduce(send, recv, r->count, r->datatype, r->op, c);
    case K_REDUCE:
        return mpi_reduce(send, r->is_root ? recv : NULL, r->count, r->datatype, r->op,
                          r->root, c);
    case K_ALLGATHER:
        return mpi_allgather(send, r->count, MPI_BYTE, recv, r->count, MPI_BYTE, c);
    case K_ALLTOALL:
        return mpi_alltoall(send, r->count, MPI_BYTE, recv, r->count, MPI_BYTE, c);
    case K_GATHER:
        return mpi_gather(send, r->count, MPI_BYTE, r->is_root ? recv : NULL, r->count,
                          MPI_BYTE, r->root, c);
    case K_SCAN:
        return mpi_scan(send, recv, r->count, r->datatype, r->op, c);
    case K_EXSCAN:
        return mpi_exscan(send, recv, r->count, r->datatype, r->op, c);
    case K_REDUCE_SCATTER_BLOCK:
        return mpi_reduce_scatter_block(send, recv, r->count, r->datatype, r->op, c);
    }
    return MPI_ERR_OTHER;
}

/* 0 if `err` is MPI_SUCCESS, else -1 with the error MPI returned for call `seq` raised
 * (`BlockingCall.failed`). */
static int mpi_failed(Runner *r, long long seq, int err) {
    if (err == MPI_SUCCESS)
        return 0;
    PyObject *got = PyObject_CallFunction(r->fail, "Li", seq, err);
    Py_XDECREF(got);
    if (got != NULL)
        PyErr_SetString(PyExc_RuntimeError, "collops: an MPI error was not raised");
    return -1;
}

/* Mark this rank inside MPI's collective of call `seq` for the watchdog (`Watchdog._inside`:
 * [number, call]), or (seq < 0) outside; no GIL needed. */
static inline void mark_inside(Runner *r, long long seq) {
    if (r->watch == NULL)
        return;
    if (seq < 0) {
        __atomic_store_n(r->watch, 0, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(r->watch + 1, seq, __ATOMIC_RELEASE);
    __atomic_store_n(r->watch, r->watch_id, __ATOMIC_RELEASE);
}

/* MPI's collective of call `seq` — `run_mpi`'s, or with `known` >= 0 a broadcast of that many
 * bytes at `recv` (`Runner.known`'s) — the watchdog's word marked while inside: 0, or -1 with
 * the error MPI returned raised (`BlockingCall.failed`). */
static int call_mpi(Runner *r, long long seq, const char *send, char *recv, Py_ssize_t known) {
    MPI_Comm c = r->comms[seq % r->nslots];
    int err;
    mark_inside(r, seq);
    Py_BEGIN_ALLOW_THREADS
    err = known >= 0 ? mpi_bcast(recv, (int)known, MPI_BYTE, r->root, c)
                     : run_mpi(r, c, send, recv);
    Py_END_ALLOW_THREADS
    mark_inside(r, -1);
    return mpi_failed(r, seq, err);
}

/* ---- the board (`board.Board.enter`) ------------------------------------------------------ */
typedef struct {
    Runner *r;
    Py_ssize_t slot;
    uint64_t key;
} BoardLook;

static int all_posted(void *ctx) {
    BoardLook *b = ctx;
    Runner *r = b->r;
    for (int i = 0; i < r->nrows; i++) {
        uint64_t *at = r->words + r->rows[i] + b->slot;
        if (__atomic_load_n(at + 1, __ATOMIC_ACQUIRE) != b->key
            || __atomic_load_n(at, __ATOMIC_ACQUIRE) != r->fingerprint
            || __atomic_load_n(at + 1, __ATOMIC_ACQUIRE) != b->key)
            return 0;
    }
    return 1;
}

/* Post this rank's entry of call `seq`'s first phase (`board.Board.post`: the key cleared,
 * then the flag, the fingerprint and the key) and the look for the others' same entry. */
static BoardLook post_entry(Runner *r, long long seq, uint64_t flag) {
    uint64_t key = ((((uint64_t)seq * 4) + 1) << 1) | 1;  /* `call_key(seq, 0, True)` */
    BoardLook b = {r, (Py_ssize_t)(((key >> 1) % RING) * 2), key};
    uint64_t *at = r->words + r->mine + b.slot;
    __atomic_store_n(at + 1, 0, __ATOMIC_RELEASE);
    __atomic_store_n(r->words + r->flags + r->mine / 2 + b.slot / 2, flag, __ATOMIC_RELEASE);
    __atomic_store_n(at, r->fingerprint, __ATOMIC_RELEASE);
    __atomic_store_n(at + 1, key, __ATOMIC_RELEASE);
    return b;
}

/* The transport's count of sends (`MpiTransport._sends`; -1: an error). */
static long long sends_of(Runner *r) {
    PyObject *v = PyObject_GetAttr(r->transport, r->sends_name);
    if (v == NULL)
        return -1;
    long long n = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return n == -1 && PyErr_Occurred() ? -1 : n;
}

/* Whether any rank flagged agreed barrier entry `slot` (`Board.flagged`). */
static int flagged(Runner *r, Py_ssize_t slot) {
    uint64_t *at = r->words + r->flags + slot / 2;
    if (__atomic_load_n(at + r->mine / 2, __ATOMIC_ACQUIRE))
        return 1;
    for (int i = 0; i < r->nrows; i++)
        if (__atomic_load_n(at + r->rows[i] / 2, __ATOMIC_ACQUIRE))
            return 1;
    return 0;
}

/* Whether the others posted this rank's deferred call as it did (`Board.settle`; no: not
 * yet, or a mismatch, which Python tells apart). */
static int settled(Runner *r) {
    uint64_t key = r->pending[0], fingerprint = r->pending[1];
    Py_ssize_t slot = (Py_ssize_t)(((key >> 1) % RING) * 2);
    for (int i = 0; i < r->nrows; i++) {
        uint64_t *at = r->words + r->rows[i] + slot;
        if (__atomic_load_n(at + 1, __ATOMIC_ACQUIRE) != key
            || __atomic_load_n(at, __ATOMIC_ACQUIRE) != fingerprint
            || __atomic_load_n(at + 1, __ATOMIC_ACQUIRE) != key)
            return 0;
    }
    return 1;
}

static int settled_look(void *ctx) { return settled((Runner *)ctx); }

/* Whether this rank's deferred call is checked, looking for `spin` seconds as `board_enter`
 * does (no: a reader is behind, or a mismatch: Python waits or raises). */
static int settle(Runner *r, double spin) {
    if (settled(r))
        return 1;
    if (spin <= 0.0)
        return 0;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = shm_wait_until(settled_look, r, spin, 0.0);
    Py_END_ALLOW_THREADS
    return ok;
}

/* Post call `seq`'s entry (a barrier's with its flag: `sends` not at the mark) and look, for
 * `spin` seconds, whether every other rank of the node posted the same one (0: not yet, or a
 * mismatch, which Python tells apart). */
static int board_enter(Runner *r, long long seq, double spin, long long sends) {
    uint64_t flag = r->defer ? 2 /* board.DEFERRED */
                  : r->kind == K_BARRIER ? (uint64_t)(sends != *r->mark) /* board.FLUSH */ : 0;
    BoardLook b = post_entry(r, seq, flag);
    if (r->defer) {  /* MPI's call returns here without the others: checked later */
        r->pending[1] = r->fingerprint;
        r->pending[0] = b.key;
        return 1;
    }
    if (all_posted(&b))
        return 1;
    if (spin <= 0.0)
        return 0;
    int agreed;
    Py_BEGIN_ALLOW_THREADS
    agreed = shm_wait_until(all_posted, &b, spin, 0.0);
    Py_END_ALLOW_THREADS
    return agreed;
}

/* Whether no MPI request of the transport runs in the background or is awaited: then a wait
 * may spin without leaving anything of this rank's behind. */
static int quiet_transport(Runner *r) {
    return PyList_GET_SIZE(r->background) == 0 && PyList_GET_SIZE(r->awaited) == 0;
}

/* Post call `seq`'s entry, then — once every other rank of the node posted the same one,
 * looking for `spin` seconds — MPI's collective, in one stretch without the GIL: 1 (ran), 0
 * (not all there: Python waits or raises) or -1 with the error MPI returned raised. A
 * reader's call takes the GIL back once, not after the board and again after MPI. */
static int enter_and_run(Runner *r, long long seq, double spin, const char *send,
                         char *recv) {
    BoardLook b = post_entry(r, seq, 0);
    if (all_posted(&b))
        return call_mpi(r, seq, send, recv, -1) < 0 ? -1 : 1;
    if (spin <= 0.0)
        return 0;
    MPI_Comm c = r->comms[seq % r->nslots];
    int agreed, err = MPI_SUCCESS;
    Py_BEGIN_ALLOW_THREADS
    agreed = shm_wait_until(all_posted, &b, spin, 0.0);
    if (agreed) {
        mark_inside(r, seq);
        err = run_mpi(r, c, send, recv);
        mark_inside(r, -1);
    }
    Py_END_ALLOW_THREADS
    if (!agreed)
        return 0;
    return mpi_failed(r, seq, err) < 0 ? -1 : 1;
}

/* Run call `seq` on `send`/`recv` (the route of `BlockingCall.run`): 0, or -1 with an
 * exception set. */
NATIVE_INTERNAL int run_call(Runner *r, long long seq, PyObject *timeout, const char *send,
                             char *recv, PyObject *send_obj, PyObject *recv_obj) {
    int inline_ok = timeout == Py_None && PyList_GET_SIZE(r->active) == 0;
    int agreed = 0, spun = 0;
    if (r->words != NULL) {
        /* refusing calls, or a deferred call not checked within the spin: Python waits (or
         * raises) */
        if (r->pending[2] || (r->pending[0] && !settle(r, inline_ok ? r->spin : 0.0)))
            inline_ok = 0;
        else
            r->pending[0] = 0;
        if (inline_ok) {
            int quiet = quiet_transport(r);
            if (r->kind != K_BARRIER && !r->defer) {  /* board and MPI in one stretch */
                spun = quiet && r->spin > 0.0;
                int ran = enter_and_run(r, seq, spun ? r->spin : 0.0, send, recv);
                if (ran != 0)
                    return ran < 0 ? -1 : 0;
                goto finish;  /* posted, not agreed: Python waits or raises */
            }
            long long sends = 0;
            if (r->kind == K_BARRIER && (sends = sends_of(r)) < 0)
                return -1;
            double spin = quiet ? r->spin : 0.0;
            spun = spin > 0.0;
            agreed = board_enter(r, seq, spin, sends);
            if (agreed && r->kind == K_BARRIER) {  /* the agreement was one */
                if (!flagged(r, (Py_ssize_t)(((seq * 4 + 1) % RING) * 2)))
                    return 0;
                *r->mark = sends;  /* MPI's barrier flushes them */
            }
        }
    } else
        agreed = !r->agree_first;
finish:
    if (!(agreed && inline_ok)) {
        PyObject *got = PyObject_CallFunction(r->finish, "OOLOii", send_obj, recv_obj, seq,
                                              timeout, agreed, spun);
        if (got == NULL)
            return -1;
        int ran = PyObject_IsTrue(got);
        Py_DECREF(got);
        if (ran != 0)  /* Python ran the call (or failed) */
            return ran < 0 ? -1 : 0;
    }
    return call_mpi(r, seq, send, recv, -1);
}

/* ---- a bcast whose data every rank knows (`BlockingCall.run_known`) ----------------------- */
/* Whether every rank's flag for the agreed entry of `look` is `flag` (`Board.same_signature`:
 * the flags of a known signature hold nothing else). */
static int same_flags(Runner *r, Py_ssize_t slot, uint64_t flag) {
    uint64_t *at = r->words + r->flags + slot / 2;
    if (__atomic_load_n(at + r->mine / 2, __ATOMIC_ACQUIRE) != flag)
        return 0;
    for (int i = 0; i < r->nrows; i++)
        if (__atomic_load_n(at + r->rows[i] / 2, __ATOMIC_ACQUIRE) != flag)
            return 0;
    return 1;
}

/* Whether call `seq` of a bcast may post and wait inline (no time limit, no calls in
 * flight, no deferred call to settle or refusal): 1, 0, or -1 with an error; `quiet` says
 * whether nothing runs in the background (the wait may spin). */
static int known_inline_ok(Runner *r, PyObject *timeout, int *quiet) {
    if (timeout != Py_None || PyList_GET_SIZE(r->active) != 0 || r->pending[0] || r->pending[2])
        return 0;
    *quiet = quiet_transport(r);
    return 1;
}

/* Phase 0 of bcast call `seq` for a rank that knows its data's `signature`: the entry posted
 * with the signature in its flag, then 1 — every rank posted the same signature within the
 * spin, and MPI's broadcast of `data` ran; 0 — every rank posted, not all the same; -1 — not
 * all there within the spin, or another call; -2 — an error raised. */
static int known_phase(Runner *r, uint64_t signature, char *data, Py_ssize_t nbytes,
                       long long seq, int quiet) {
    uint64_t flag = signature << 3;  /* `board.KNOWN_SHIFT` */
    BoardLook b = post_entry(r, seq, flag);
    int agreed = all_posted(&b);
    if (!agreed && quiet && r->spin > 0.0) {
        Py_BEGIN_ALLOW_THREADS
        agreed = shm_wait_until(all_posted, &b, r->spin, 0.0);
        Py_END_ALLOW_THREADS
    }
    if (!agreed)
        return -1;
    if (!same_flags(r, b.slot, flag))
        return 0;
    return call_mpi(r, seq, NULL, data, nbytes) < 0 ? -2 : 1;
}

/* known(signature, data, seq, timeout): phase 0 of bcast call `seq` for a rank that knows
 * its data's `signature` (`BlockingCall.run_known`, whose Python this is the inline part of):
 * None — nothing posted (a time limit, calls in flight, a deferred call, refusing, a count
 * past MPI's int); else the entry is posted with the signature in its flag and: 1 — every
 * rank posted the same signature within the spin, and MPI's broadcast of `data` ran; 0 —
 * every rank posted, not all the same (Python broadcasts the envelope); -1 — not all there
 * within the spin, or another call (Python waits or raises, then decides). */
NATIVE_INTERNAL PyObject *Runner_known(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || r->kind != K_BCAST || r->words == NULL) {
        PyErr_SetString(PyExc_TypeError, "known(signature, data, seq, timeout) on a bcast's "
                                         "runner on a board");
        return NULL;
    }
    unsigned long long signature = PyLong_AsUnsignedLongLong(args[0]);
    long long seq = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    int quiet, ok = known_inline_ok(r, args[3], &quiet);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, r->is_root ? PyBUF_C_CONTIGUOUS
                                                      : PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    char *data = view.buf;
    Py_ssize_t nbytes = view.len;
    PyBuffer_Release(&view);  /* the caller holds the array for the call */
    if (nbytes >= INT_MAX)
        Py_RETURN_NONE;
    int ended = known_phase(r, (uint64_t)signature, data, nbytes, seq, quiet);
    return ended == -2 ? NULL : PyLong_FromLong(ended);
}

/* known_call(x, out, timeout): a whole bound bcast whose data every rank knows
 * (`bind_known`): the root's `x`, a reader's `out` (required) of the bound signature. Taken
 * inline when it can wait so (else the slow marker, before the call takes its number): one
 * phase when every rank posted the same signature, the result returned; otherwise
 * `rest(seq, ended, x, out, timeout)` finishes the call in Python (the general wait, the
 * envelope and the data phase) and returns its result. */
NATIVE_INTERNAL PyObject *Runner_known_call(Runner *r, PyObject *const *args,
                                            Py_ssize_t nargs) {
    if (nargs != 3 || !r->bound || r->known_signature == 0 || r->rest == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "known_call(x, out, timeout) on a runner bound by bind_known");
        return NULL;
    }
    PyObject *x = args[0], *out = args[1], *timeout = args[2];
    Py_ssize_t n = r->data_bytes;
    if (r->is_root) {
        if (!array_is(x, r->ndarray, r->descr, r->nd, r->dims, 0))
            return Py_NewRef(r->slow);
        if (out != Py_None && out != x) {
            if (!array_is(out, r->ndarray, r->descr, r->nd, r->dims, 1))
                return Py_NewRef(r->slow);
            const char *o = ((ArrayFields *)out)->data, *s = ((ArrayFields *)x)->data;
            if (n && o < s + n && s < o + n)
                return Py_NewRef(r->slow);  /* the general path copies */
        }
    } else if (out == Py_None || !array_is(out, r->ndarray, r->descr, r->nd, r->dims, 1)) {
        return Py_NewRef(r->slow);
    }
    int quiet, ok = known_inline_ok(r, timeout, &quiet);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(r->slow);
    long long seq = *r->calls;
    *r->calls = seq + 1;
    PyObject *data = r->is_root ? x : out;
    int ended = known_phase(r, r->known_signature, ((ArrayFields *)data)->data, n, seq, quiet);
    if (ended == -2)
        return NULL;
    if (ended != 1)
        return PyObject_CallFunction(r->rest, "LiOOO", seq, ended, x, out, timeout);
    if (!r->is_root || out == x)
        return Py_NewRef(out);
    PyObject *into = out == Py_None ? PyObject_CallNoArgs(r->alloc) : Py_NewRef(out);
    if (into == NULL)
        return NULL;
    if (!array_is(into, r->ndarray, r->descr, r->nd, r->dims, 1)) {
        Py_DECREF(into);
        PyErr_SetString(PyExc_TypeError, "known_call: alloc made an array of another signature");
        return NULL;
    }
    memcpy(((ArrayFields *)into)->data, ((ArrayFields *)x)->data, n);
    return into;
}
