/* collops.mpi._native's shared parts: the MPI functions `load` takes from the library mpi4py
 * loaded, the bound runner's record, and the whole call `run_call` (_native_board.c: the
 * board's agreement, then MPI's collective). The essay is at the top of _native.c. */
#ifndef COLLOPS_MPI_NATIVE_H
#define COLLOPS_MPI_NATIVE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <mpi.h>

#include "../shm/_numpy_head.h"
#include "../shm/_shm_wait.h"

#define HOT_MAX_DIMS 8
#define MAX_SLOTS 64
/* board entries per rank (`board.RING`) */
#define RING 256

enum { K_BARRIER, K_BCAST, K_ALLREDUCE, K_REDUCE, K_ALLGATHER, K_ALLTOALL, K_GATHER, K_SCAN,
       K_EXSCAN, K_REDUCE_SCATTER_BLOCK, K_COUNT };

/* Across the module's files, hidden from its exports. */
#define NATIVE_INTERNAL __attribute__((visibility("hidden")))

/* MPI's collectives, from the library mpi4py loaded (`load`, in _native.c) */
NATIVE_INTERNAL extern int (*mpi_barrier)(MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op,
                                            MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int,
                                         MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_allgather)(const void *, int, MPI_Datatype, void *, int,
                                            MPI_Datatype, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_alltoall)(const void *, int, MPI_Datatype, void *, int,
                                           MPI_Datatype, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_gather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                                         int, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_scan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_exscan)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
NATIVE_INTERNAL extern int (*mpi_reduce_scatter_block)(const void *, void *, int, MPI_Datatype,
                                                       MPI_Op, MPI_Comm);

typedef struct {
    PyObject_HEAD
    int kind, root, is_root, nslots, nrows, receives;
    MPI_Comm comms[MAX_SLOTS];
    int count;  /* of `datatype`: elements of a reduction, bytes of a data movement */
    MPI_Datatype datatype;
    MPI_Op op;
    /* the board (NULL: no board) */
    uint64_t *words;
    Py_ssize_t mine, rows[MAX_SLOTS];
    /* a barrier's: where the board's flags start (-1: this runner posts none), its mark of
     * the transport's sends at its last MPI barrier (`BlockingCall.mark`) */
    Py_ssize_t flags;
    int64_t *mark;
    PyObject *mark_array, *sends_name;
    /* the board's `pending` words: [deferred key (0: none), its fingerprint, refusing];
     * `defer`: this runner (a small bcast's root) enters MPI without waiting */
    uint64_t *pending;
    PyObject *pending_array;
    int defer;
    uint64_t fingerprint;
    double spin;
    int agree_first;  /* no board but an agreement across nodes: Python agrees */
    PyObject *board_view;  /* keeps the board's memory */
    /* Python's state, looked at before the inline route */
    /* the transport's lists of MPI requests in the background and awaited (changed in place:
     * `MpiTransport._advance`), both empty when nothing else may need this rank's progress */
    PyObject *transport, *active, *background, *awaited;
    int64_t *watch, watch_id;  /* the watchdog's word (NULL: no watchdog) */
    PyObject *watch_array;
    PyObject *finish;  /* BlockingCall.finish(send, recv, seq, timeout, agreed, spun) */
    PyObject *fail;    /* BlockingCall.failed(seq, error code): raises */
    /* the bound signature */
    long long *calls;
    PyObject *counter, *ndarray, *descr, *slow, *alloc;
    int nd, out_nd;
    Py_ssize_t dims[HOT_MAX_DIMS], out_dims[HOT_MAX_DIMS], itemsize;
    /* a bound broadcast's envelope: this rank's, its header (`head_len` bytes), the data */
    PyObject *env, *head;
    char *env_data, *env_mine;
    Py_ssize_t head_len, env_bytes, data_bytes;
    int bound;
    /* a bound bcast whose data every rank knows (`bind_known`): its signature (0: none), and
     * what finishes a call not every rank posted it for */
    uint64_t known_signature;
    PyObject *rest;
} Runner;

/* _native_board.c: call ``seq`` on the board and in MPI (the inline route), or hand it to
 * Python (`BlockingCall.finish`) */
NATIVE_INTERNAL PyObject *Runner_known(Runner *r, PyObject *const *args, Py_ssize_t nargs);
NATIVE_INTERNAL PyObject *Runner_known_call(Runner *r, PyObject *const *args,
                                            Py_ssize_t nargs);
NATIVE_INTERNAL int run_call(Runner *r, long long seq, PyObject *timeout, const char *send,
                             char *recv, PyObject *send_obj, PyObject *recv_obj);

#endif
