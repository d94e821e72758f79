/* collops.shm._p2p: the cell rings of point-to-point messages, compiled (`collops.shm.cells`).
 *
 * One `CellRing` is one end of the single-producer single-consumer ring of a directed rank
 * pair in the job segment's cell area (`segment.Layout.cell_ring_offset`): the sender copies
 * a message into the next free cell and publishes it by storing the cell's sequence word last
 * (release); the receiver reads the head cell once that word shows the index it expects
 * (acquire), and gives the cell back by storing its consumed counter. The cell's words are
 * listed in `collops.shm.cells`; this file writes them and reads them, nothing more: matching,
 * queues, failures and sleeping stay in Python. `take` is the one receive done here: the head
 * cell, when it is for the given communicator, fits the tag, carries its payload and fits the
 * buffer.
 *
 * A message a little larger than a cell's body is carried across consecutive cells (a
 * *chain*, flag F_CHAIN): the first cell as any, its body full, then continuation cells each
 * holding the next payload bytes after a 64-byte line whose sequence word alone is used. The
 * sender starts a chain only when the ring has room for all of it and publishes its cells in
 * order, so the receiver copies each while the next is written; it gives the cells back only
 * once it has the whole message, so a receive that stops waiting leaves the ring as it was.
 *
 * Waking: after publishing, the sender wakes the receiver if its *sleeping* flag is up; after
 * consuming, the receiver wakes the sender if it marked the ring *blocked* (a full ring) and
 * sleeps. A sequentially consistent fence separates each store from the other side's flag
 * load, pairing with the fence a sleeper issues after raising its flag.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "_shm_wait.h"

/* words of a cell's 64-byte header (`cells.py` names them) */
enum { C_SEQ = 0, C_CONTEXT, C_TAG, C_NBYTES, C_FORM, C_MSEQ, C_TOKEN };
#define CELL_HEADER 64
/* flags in the low byte of C_FORM (`cells.py`: OBJECT, SYNC, INLINE) */
#define F_OBJECT 1
#define F_SYNC 2
#define F_INLINE 4
#define F_CHAIN 8
#define ANY_TAG (-1)

typedef struct {
    PyObject_HEAD
    Py_buffer segment;
    int have_segment;
    char *base;
    char *cells;              /* cell 0 */
    int64_t consumed_word;    /* the ring's consumed counter (written by the receiver) */
    int64_t blocked_word;     /* the sender's "ring full, waiting" flag */
    int64_t peer_sleeping;    /* the other end's sleeping flag and doorbell */
    int64_t peer_doorbell;
    uint64_t ncells, cell_bytes;
    uint64_t head;            /* sender: next cell index to write */
    uint64_t consumed;        /* sender: the receiver's counter last read */
    uint64_t tail;            /* receiver: next cell index to read */
    double spin, yield_seconds;
    uint64_t last_token;      /* `take`'s message: its dtype token word */
} CellRing;

static inline char *cell_at(CellRing *r, uint64_t index) {
    return r->cells + (index % r->ncells) * r->cell_bytes;
}

static inline uint64_t *cell_word(char *cell, int w) { return (uint64_t *)cell + w; }

static void wake_peer(CellRing *r) {
    uint64_t *bell = shm_word(r->base, r->peer_doorbell);
    __atomic_store_n(bell, (__atomic_load_n(bell, __ATOMIC_RELAXED) + 1) & 0xFFFFFFFFu,
                     __ATOMIC_RELEASE);
    syscall(SYS_futex, (uint32_t *)bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int head_published(void *ctx) {
    CellRing *r = ctx;
    return __atomic_load_n(cell_word(cell_at(r, r->tail), C_SEQ), __ATOMIC_ACQUIRE)
           == r->tail + 1;
}

static int has_room(CellRing *r, uint64_t k) {
    if (r->head - r->consumed + k <= r->ncells)
        return 1;
    r->consumed = shm_load(r->base, r->consumed_word);
    return r->head - r->consumed + k <= r->ncells;
}

/* Cells a message of `n` inline payload bytes after a body prefix of `body` bytes (aligned)
 * takes: one if it fits a cell, else the first cell's rest then whole continuation bodies. */
static uint64_t cells_for(CellRing *r, uint64_t body, uint64_t n) {
    uint64_t room = r->cell_bytes - CELL_HEADER;
    if (body + n <= room)
        return 1;
    return 1 + (body + n - room + room - 1) / room;
}

/* Whether cell `index` is published (its sequence word shows index + 1). */
static inline int published(CellRing *r, uint64_t index) {
    return __atomic_load_n(cell_word(cell_at(r, index), C_SEQ), __ATOMIC_ACQUIRE) == index + 1;
}

typedef struct {
    CellRing *ring;
    uint64_t index;
} CellAt;

static int cell_published(void *ctx) {
    CellAt *at = ctx;
    return published(at->ring, at->index);
}

/* Copy the payload bytes [from, from + len) of the chained message at the tail into `dst`:
 * they lie in the continuation cells (`from` counts from the first continuation body). With
 * `wait`, each cell after the spin and yield stages of the one wait; 0 if one did not come. */
static int copy_chain(CellRing *r, char *dst, uint64_t len, int wait) {
    uint64_t room = r->cell_bytes - CELL_HEADER, index = r->tail + 1;
    for (uint64_t done = 0; done < len; index++) {
        if (!published(r, index)) {
            CellAt at = {r, index};
            if (!wait || !shm_wait_until(cell_published, &at, r->spin, r->yield_seconds))
                return 0;
        }
        uint64_t part = len - done < room ? len - done : room;
        copy_bytes(dst + done, cell_at(r, index) + CELL_HEADER, (size_t)part);
        done += part;
    }
    return 1;
}

/* Cells the head message takes (checked against the ring), 0 if its header is corrupt. */
static uint64_t head_cells(CellRing *r, uint64_t *w) {
    uint64_t form = w[C_FORM];
    if (!(form & F_CHAIN))
        return 1;
    uint64_t body = (((form >> 16) & 0xFFFF) + 7) & ~(uint64_t)7;
    uint64_t k = cells_for(r, body, w[C_NBYTES]);
    return k <= r->ncells ? k : 0;
}

static int CellRing_init(CellRing *self, PyObject *args, PyObject *kwds) {
    PyObject *segment;
    long long cells_offset, consumed_word, blocked_word, peer_sleeping, peer_doorbell;
    unsigned long long ncells, cell_bytes;
    double spin, yield_seconds;
    if (!PyArg_ParseTuple(args, "OLLLLLKKdd", &segment, &cells_offset, &consumed_word,
                          &blocked_word, &peer_sleeping, &peer_doorbell, &ncells, &cell_bytes,
                          &spin, &yield_seconds))
        return -1;
    if (ncells == 0 || cell_bytes <= CELL_HEADER || cell_bytes % 64) {
        PyErr_SetString(PyExc_ValueError, "CellRing: cells must be whole lines past a header");
        return -1;
    }
    if (self->have_segment)
        PyBuffer_Release(&self->segment);
    if (PyObject_GetBuffer(segment, &self->segment, PyBUF_WRITABLE) < 0)
        return -1;
    self->have_segment = 1;
    if (cells_offset < 0 || (uint64_t)cells_offset + ncells * cell_bytes
            > (uint64_t)self->segment.len) {
        PyErr_SetString(PyExc_ValueError, "CellRing: the ring lies outside the segment");
        return -1;
    }
    self->base = self->segment.buf;
    self->cells = self->base + cells_offset;
    self->consumed_word = consumed_word;
    self->blocked_word = blocked_word;
    self->peer_sleeping = peer_sleeping;
    self->peer_doorbell = peer_doorbell;
    self->ncells = ncells;
    self->cell_bytes = cell_bytes;
    self->head = self->consumed = self->tail = 0;
    self->spin = spin;
    self->yield_seconds = yield_seconds;
    return 0;
}

static void CellRing_dealloc(CellRing *self) {
    if (self->have_segment)
        PyBuffer_Release(&self->segment);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* push(context, tag, seq, flags, token, ndim, prefix, data) -> bool: write one message
 * into the next free cell (or cells: a chain) and publish it; False when the ring has not
 * room for all of it. `prefix` (the shape's dims, then the dtype token) starts the cell's
 * body; with F_INLINE the payload `data` follows it at the next 8-byte boundary (continuing
 * in the next cells when it does not fit), else only its size is in the cell. */
static PyObject *CellRing_push(CellRing *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "push takes 8 arguments");
        return NULL;
    }
    long long context = PyLong_AsLongLong(args[0]), tag = PyLong_AsLongLong(args[1]);
    long long seq = PyLong_AsLongLong(args[2]), flags = PyLong_AsLongLong(args[3]);
    unsigned long long token = PyLong_AsUnsignedLongLongMask(args[4]);
    long long ndim = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyBytes_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "push: prefix must be bytes");
        return NULL;
    }
    Py_ssize_t plen = PyBytes_GET_SIZE(args[6]);
    Py_buffer data;
    if (PyObject_GetBuffer(args[7], &data, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    uint64_t body = ((uint64_t)plen + 7) & ~(uint64_t)7;
    uint64_t n = (uint64_t)data.len;
    uint64_t room = self->cell_bytes - CELL_HEADER;
    uint64_t k = (flags & F_INLINE) ? cells_for(self, body, n) : 1;
    if (body > room || k > self->ncells || plen > 0xFFFF) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "push: the message does not fit the ring");
        return NULL;
    }
    if (!has_room(self, k)) {
        PyBuffer_Release(&data);
        Py_RETURN_FALSE;
    }
    if (k > 1)
        flags |= F_CHAIN;
    char *cell = cell_at(self, self->head);
    uint64_t *w = (uint64_t *)cell;
    w[C_CONTEXT] = (uint64_t)context;
    w[C_TAG] = (uint64_t)tag;
    w[C_NBYTES] = n;
    w[C_FORM] = (uint64_t)flags | ((uint64_t)ndim << 8) | ((uint64_t)plen << 16);
    w[C_MSEQ] = (uint64_t)seq;
    w[C_TOKEN] = token;
    memcpy(cell + CELL_HEADER, PyBytes_AS_STRING(args[6]), (size_t)plen);
    const char *src = data.buf;
    uint64_t part = (flags & F_INLINE) ? (n < room - body ? n : room - body) : 0;
    copy_bytes(cell + CELL_HEADER + body, src, (size_t)part);
    self->head += 1;
    __atomic_store_n(cell_word(cell, C_SEQ), self->head, __ATOMIC_RELEASE);
    for (uint64_t done = part; done < n && (flags & F_INLINE); done += part) {
        cell = cell_at(self, self->head);
        part = n - done < room ? n - done : room;
        copy_bytes(cell + CELL_HEADER, src + done, (size_t)part);
        self->head += 1;
        __atomic_store_n(cell_word(cell, C_SEQ), self->head, __ATOMIC_RELEASE);
    }
    PyBuffer_Release(&data);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (shm_load(self->base, self->peer_sleeping))
        wake_peer(self);
    Py_RETURN_TRUE;
}

/* Give the head message's `k` cells back; wake a sender that waits for room and sleeps. */
static void consume(CellRing *self, uint64_t k) {
    self->tail += k;
    shm_store(self->base, self->consumed_word, self->tail);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (shm_load(self->base, self->blocked_word) && shm_load(self->base, self->peer_sleeping))
        wake_peer(self);
}

/* The head cell's receive, if it is the simple case: -1 nothing published, -2 published but
 * not for this receive here (another communicator, another tag, a synchronous or object
 * send, a payload not in the cell, or larger than `out`), else tag | nbytes << 31. */
static long long take_head(CellRing *self, long long context, long long tag, Py_buffer *out,
                           int wait) {
    if (!head_published(self))
        return -1;
    char *cell = cell_at(self, self->tail);
    uint64_t *w = (uint64_t *)cell;
    uint64_t form = w[C_FORM];
    uint64_t n = w[C_NBYTES];
    long long got = (long long)w[C_TAG];
    uint64_t k = head_cells(self, w);
    if ((long long)w[C_CONTEXT] != context || (tag != ANY_TAG && got != tag)
            || (form & 0xFF & ~F_CHAIN) != F_INLINE || n > (uint64_t)out->len
            || w[C_TOKEN] == 0 || k == 0)
        return -2;
    uint64_t body = (((form >> 16) & 0xFFFF) + 7) & ~(uint64_t)7;
    uint64_t first = k == 1 ? n : self->cell_bytes - CELL_HEADER - body;
    copy_bytes(out->buf, cell + CELL_HEADER + body, (size_t)first);
    if (k > 1 && !copy_chain(self, (char *)out->buf + first, n - first, wait))
        return -1;
    self->last_token = w[C_TOKEN];
    consume(self, k);
    return got | (long long)(n << 31);
}

static PyObject *take_common(CellRing *self, PyObject *const *args, Py_ssize_t nargs,
                             int wait) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "take takes 3 arguments");
        return NULL;
    }
    long long context = PyLong_AsLongLong(args[0]), tag = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer out;
    if (PyObject_GetBuffer(args[2], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return PyLong_FromLong(-2);
    }
    if (wait && !head_published(self))
        shm_wait_until(head_published, self, self->spin, self->yield_seconds);
    long long got = take_head(self, context, tag, &out, wait);
    PyBuffer_Release(&out);
    return PyLong_FromLongLong(got);
}

/* take(context, tag, out) -> int: `take_head`, not waiting. */
static PyObject *CellRing_take(CellRing *self, PyObject *const *args, Py_ssize_t nargs) {
    return take_common(self, args, nargs, 0);
}

/* wait_take(context, tag, out) -> int: `take_head` after the compiled stages of the one wait
 * (spin, then yield without the GIL) for the head cell (and each cell of a chain); -1 if one
 * did not come by then. */
static PyObject *CellRing_wait_take(CellRing *self, PyObject *const *args, Py_ssize_t nargs) {
    return take_common(self, args, nargs, 1);
}

/* head() -> (context, tag, nbytes, form, seq, token, body) of the head message, or None
 * (none, or a chain not all published yet): `body` the bytes of its prefix and, if inline,
 * payload. Leaves the message's cells in place (`consume`). */
static PyObject *CellRing_head(CellRing *self, PyObject *Py_UNUSED(ignored)) {
    if (!head_published(self))
        Py_RETURN_NONE;
    char *cell = cell_at(self, self->tail);
    uint64_t *w = (uint64_t *)cell;
    uint64_t form = w[C_FORM], n = w[C_NBYTES];
    uint64_t plen = (form >> 16) & 0xFFFF, body = (plen + 7) & ~(uint64_t)7;
    uint64_t size = (form & F_INLINE) ? body + n : plen;
    uint64_t k = head_cells(self, w);
    if (k == 0 || (k == 1 && CELL_HEADER + size > self->cell_bytes)
            || (k > 1 && !(form & F_INLINE))) {
        PyErr_SetString(PyExc_RuntimeError, "a cell's header names more bytes than it holds");
        return NULL;
    }
    if (k > 1 && !published(self, self->tail + k - 1))
        Py_RETURN_NONE;  /* cells are published in order: the last one says all are */
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (bytes == NULL)
        return NULL;
    char *dst = PyBytes_AS_STRING(bytes);
    uint64_t first = k == 1 ? size : self->cell_bytes - CELL_HEADER;
    memcpy(dst, cell + CELL_HEADER, (size_t)first);
    if (k > 1)
        copy_chain(self, dst + first, size - first, 0);
    PyObject *result = Py_BuildValue("(LLKKLKN)", (long long)w[C_CONTEXT], (long long)w[C_TAG],
                                     (unsigned long long)n, (unsigned long long)form,
                                     (long long)w[C_MSEQ], (unsigned long long)w[C_TOKEN],
                                     bytes);
    return result;
}

static PyObject *CellRing_consume(CellRing *self, PyObject *Py_UNUSED(ignored)) {
    uint64_t k = head_published(self) ? head_cells(self, (uint64_t *)cell_at(self, self->tail))
                                      : 0;
    if (k == 0 || !published(self, self->tail + k - 1)) {
        PyErr_SetString(PyExc_RuntimeError, "consume: no message published");
        return NULL;
    }
    consume(self, k);
    Py_RETURN_NONE;
}

static PyObject *CellRing_ready(CellRing *self, PyObject *Py_UNUSED(ignored)) {
    return PyBool_FromLong(head_published(self));
}

static PyObject *CellRing_room(CellRing *self, PyObject *Py_UNUSED(ignored)) {
    return PyBool_FromLong(has_room(self, 1));
}

/* block(flag): raise or lower this sender's "waiting for room" flag, then fence, so that a
 * check of the ring after raising it sees a consume the receiver made before its flag
 * check. */
static PyObject *CellRing_block(CellRing *self, PyObject *flag) {
    int up = PyObject_IsTrue(flag);
    if (up < 0)
        return NULL;
    shm_store(self->base, self->blocked_word, (uint64_t)up);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    Py_RETURN_NONE;
}

static PyObject *CellRing_get_last_token(CellRing *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->last_token);
}

static PyObject *CellRing_get_capacity(CellRing *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->cell_bytes - CELL_HEADER);
}

static PyMethodDef CellRing_methods[] = {
    {"push", (PyCFunction)(void (*)(void))CellRing_push, METH_FASTCALL,
     "Write a message into the next free cells and publish them; False if the ring is full."},
    {"take", (PyCFunction)(void (*)(void))CellRing_take, METH_FASTCALL,
     "Receive the head cell into out if it is the simple case: tag | nbytes << 31, or -1/-2."},
    {"wait_take", (PyCFunction)(void (*)(void))CellRing_wait_take, METH_FASTCALL,
     "take, after spinning and yielding for the head cell."},
    {"head", (PyCFunction)CellRing_head, METH_NOARGS,
     "The head cell's (context, tag, nbytes, form, seq, token, body), or None."},
    {"consume", (PyCFunction)CellRing_consume, METH_NOARGS,
     "Give the head message's cells back."},
    {"ready", (PyCFunction)CellRing_ready, METH_NOARGS, "Whether the head cell is published."},
    {"room", (PyCFunction)CellRing_room, METH_NOARGS, "Whether a push would find a cell."},
    {"block", (PyCFunction)CellRing_block, METH_O,
     "Raise or lower the sender's waiting-for-room flag (then a full fence)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CellRing_getset[] = {
    {"last_token", (getter)CellRing_get_last_token, NULL,
     "The dtype token word of the last message `take` received.", NULL},
    {"capacity", (getter)CellRing_get_capacity, NULL, "Bytes of a cell's body.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CellRingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collops.shm._p2p.CellRing",
    .tp_basicsize = sizeof(CellRing),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One end of a rank pair's ring of point-to-point cells: CellRing(segment, "
              "cells_offset, consumed_word, blocked_word, peer_sleeping_word, "
              "peer_doorbell_word, ncells, cell_bytes, spin, yield_seconds).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CellRing_init,
    .tp_dealloc = (destructor)CellRing_dealloc,
    .tp_methods = CellRing_methods,
    .tp_getset = CellRing_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.shm._p2p",
    "The cell rings of point-to-point messages over shared memory (collops.shm.cells).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__p2p(void) {
    if (PyType_Ready(&CellRingType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CellRingType);
    if (PyModule_AddObject(m, "CellRing", (PyObject *)&CellRingType) < 0) {
        Py_DECREF(&CellRingType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
