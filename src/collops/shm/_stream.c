/* collops.shm._stream: the inner loop of the shm_stream collectives, compiled.
 *
 * The protocol is the one `collops.shm.stream` describes and also runs in Python
 * (its `PyPlan`); this file only moves the chunks without the interpreter. Each rank of a
 * communicator with a stream area owns a ring of R chunk slots in the job segment, a filled
 * counter (chunks it has published, cumulative over the job) and, per slot, a header line:
 *
 *     word 0  SEQ     c + 1 for the chunk c the slot holds (0 while it is being rewritten)
 *     word 1  CALL    the call's held word (call number << 24 | 24 bits of fingerprint)
 *     word 2  FP      the call's full fingerprint (for the error message of a mismatch)
 *     word 3  MASK    the world ranks that must read the chunk (bit r: rank r)
 *     word 4  OFFSET  where the chunk's bytes go in the reader's block of this writer
 *     word 5  NBYTES  how many bytes it holds
 *     word 6  SOURCE  0 when the bytes are in the slot; else where they are in the writer's
 *                     own memory (a *reference* chunk: the reader copies them from there
 *                     with process_vm_readv, one copy instead of two)
 *
 * and every reader r has a drained counter on the writer's ring: the chunks of it r has
 * finished with. A writer may put chunk c into slot c mod R once every reader in the mask of
 * chunk c - R has drained past it; a reader walks a writer's ring from its cursor, skips the
 * chunks whose mask lacks it, copies those of its call and stops at one of another call
 * (status FOREIGN: Python hands it to that call, or raises a mismatch).
 *
 * `Plan.advance` does all it can without waiting — writes, reads and the rank's own block
 * copy, interleaved chunk by chunk — spinning at most `spin` seconds when nothing can move
 * (a rooted call's, once its data is done, also for the roll call's words it waits for:
 * `roll_words`, see `collops.shm.roll_call`); waiting, sleeping, failure, timeout and
 * mismatch checks stay in Python.
 *
 * A writer's reference chunks point into its send buffer, so its call is done only once every
 * reader of them has drained past the last (state: per world rank, the chunk number + 1 it
 * must drain past); a reader whose process_vm_readv fails returns FAILED with the writer and
 * the errno in its state, for Python to name.
 *
 * Memory ordering: a slot's header and data are stored before its SEQ and the filled counter
 * (release), a reader copies before it stores its drained counter (release); a reader reads a
 * header between two acquire loads of SEQ (a seqlock: a rewritten slot is skipped, it was not
 * the reader's); a sequentially consistent fence separates the last store of an advance from
 * the check of the peers' sleeping flags.
 */
#include "_stream.h"

static void wake_sleepers(Plan *p) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (Py_ssize_t i = 0; i < p->nsleepers; i++) {
        if (load_relaxed(p, p->sleeper_word[i])) {
            PyObject *res = PyObject_CallFunction(p->wake, "l", p->sleeper_rank[i]);
            if (res == NULL)
                PyErr_WriteUnraisable(p->wake);
            Py_XDECREF(res);
        }
    }
}

/* Copy into the receive buffer: bypassing the cache for a call that receives a lot. */
static inline void copy_in(Plan *p, char *to, const char *from, size_t n) {
    if (p->streaming)
        copy_streaming(to, from, n);
    else
        copy_bytes(to, from, n);
}

/* Whether every reader of the chunk slot `slot` of this rank's ring last held has drained it
 * (the chunk to write is `c`); else the first reader still at it, in *blocked. */
static int slot_free(Plan *p, int64_t c, int64_t *blocked) {
    if (c < p->nchunks)
        return 1;
    int64_t slot = c % p->nchunks;
    int64_t h = p->my_headers / 8 + 8 * slot;
    uint64_t mask = load_relaxed(p, h + H_MASK);
    uint64_t need = (uint64_t)(c - p->nchunks + 1);
    while (mask) {
        int r = __builtin_ctzll(mask);
        mask &= mask - 1;
        if (r < p->size && load_acq(p, p->drained[r]) < need) {
            *blocked = r;
            return 0;
        }
    }
    return 1;
}

/* Where write row `row` is published from this call (IN_RING, IN_SEND or IN_RECV). */
static int64_t reference_of(const Plan *p, const int64_t *row, const char *send,
                            const char *recv) {
    if (row[W_REFERENCE] != IN_OWN)
        return row[W_REFERENCE];
    uintptr_t from = (uintptr_t)(send + row[W_SRC]);
    uintptr_t to = (uintptr_t)(recv + p->self_dst + (row[W_SRC] - p->self_src));
    if (aliased(to, from, (size_t)row[W_NBYTES]))
        return IN_RECV;
    return p->own_from;
}

/* Write this call's next chunk if its slot is free (and, for one published in the receive
 * buffer, the own block is copied): 1 written, 0 not. */
static int write_one(Plan *p, int64_t *state, char *send, char *recv, uint64_t word,
                     uint64_t fp) {
    int64_t i = state[S_WRITTEN];
    if (i >= p->nwrites)
        return 0;
    const int64_t *row = p->write + W_COLS * i;
    int64_t reference = reference_of(p, row, send, recv);
    if (reference == IN_RECV && state[S_SELF] < p->self_len)
        return 0;
    int64_t c = p->cursor[p->size];
    int64_t blocked = -1;
    if (!slot_free(p, c, &blocked)) {
        state[S_BLOCKED_ON] = blocked;
        return 0;
    }
    state[S_BLOCKED_ON] = -1;
    int64_t slot = c % p->nchunks;
    int64_t h = p->my_headers / 8 + 8 * slot;
    store_rel(p, h + H_SEQ, 0);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    store_rel(p, h + H_CALL, word);
    store_rel(p, h + H_FP, fp);
    store_rel(p, h + H_MASK, (uint64_t)row[W_MASK]);
    store_rel(p, h + H_OFFSET, (uint64_t)row[W_OFFSET]);
    store_rel(p, h + H_NBYTES, (uint64_t)row[W_NBYTES]);
    if (reference != IN_RING) {
        int64_t src = row[W_SRC];
        if (reference == IN_RECV && row[W_REFERENCE] == IN_OWN)
            src += p->self_dst - p->self_src;
        char *from = reference == IN_RECV ? recv : send;
        store_rel(p, h + H_SOURCE, (uint64_t)(uintptr_t)(from + src));
        int64_t *must_drain = state + S_RECEIVED + p->nwriters;
        for (uint64_t mask = (uint64_t)row[W_MASK]; mask; mask &= mask - 1)
            must_drain[__builtin_ctzll(mask)] = c + 1;
    } else {
        store_rel(p, h + H_SOURCE, 0);
        char *to = p->base + p->my_ring + slot * p->chunk_bytes;
        int64_t own = row[W_SRC] - p->self_src, n = row[W_NBYTES];
        if (own == state[S_SELF] && own + n <= p->self_len
            && recv + p->self_dst != send + p->self_src) {
            /* the own block's next piece is this chunk's bytes: one read for both copies */
            copy_twice(to, recv + p->self_dst + own, send + row[W_SRC], (size_t)n);
            state[S_SELF] = own + n;
        } else {
            copy_bytes(to, send + row[W_SRC], (size_t)n);
        }
    }
    store_rel(p, h + H_SEQ, (uint64_t)(c + 1));
    store_rel(p, p->my_filled, (uint64_t)(c + 1));
    p->cursor[p->size] = c + 1;
    state[S_WRITTEN] = i + 1;
    return 1;
}

/* -- a rank that folds as it reads ---------------------------------------------------------
 * A reduce's root, or a reduce_scatter_block's rank, folds each chunk into its result as it
 * reads it instead of copying every contribution into a scratch buffer first. The fold keeps
 * the rank order of the copying fold, element by element — ((x0 op x1) op x2) ... — so the
 * result is the same bit for bit: the chunk of the contribution at position j is folded only
 * once position j - 1 is folded past its end, and waits in its writer's ring until then. The
 * first two positions are folded in one pass (out = x0 op x1); the own block, at position
 * q, is folded as far as position q - 1 is. Each position's folded bytes are its writer row's
 * received bytes, the own block's S_SELF. */

/* How far position `j` is folded. */
static inline int64_t folded(const Plan *p, const int64_t *state, int64_t j) {
    int64_t row = p->position_row[j];
    return row < 0 ? state[S_SELF] : state[S_RECEIVED + row];
}

/* Whether writer row `k`'s next chunk, up to byte `end` of its block, may be folded now. */
static inline int may_fold(const Plan *p, const int64_t *state, Py_ssize_t k, int64_t end) {
    int64_t j = p->row_position[k];
    return j == 0 || (j == 1 && p->own_position == 0) || folded(p, state, j - 1) >= end;
}

/* The own block's contribution: in the send buffer, or the copy in S_OWN. */
static inline const char *own_of(const Plan *p, const int64_t *state, const char *send) {
    return state[S_OWN] ? (const char *)(uintptr_t)state[S_OWN] : send + p->self_src;
}

/* Fold the `nbytes` at `chunk` of writer row `k` into the result at `offset`. */
static void fold_chunk(Plan *p, Py_ssize_t k, int64_t *state, const char *send, char *recv,
                       int64_t offset, const char *chunk, int64_t nbytes) {
    char *out = recv + p->self_dst + offset;
    const char *own = own_of(p, state, send) + offset;
    Py_ssize_t items = nbytes / itemsize_of[p->fold_dtype];
    int64_t j = p->row_position[k];
    if (j == 0 && p->own_position == 1) {
        combine(p->fold_dtype, p->fold_op, out, chunk, own, items);
    } else if (j == 0) {
        copy_bytes(out, chunk, (size_t)nbytes);
        return;
    } else if (j == 1 && p->own_position == 0) {
        combine(p->fold_dtype, p->fold_op, out, own == out ? out : own, chunk, items);
    } else {
        fold(p->fold_dtype, p->fold_op, out, chunk, items);
        return;
    }
    if (state[S_SELF] < offset + nbytes)
        state[S_SELF] = offset + nbytes;  /* the own block, folded with its neighbour */
}

/* Fold the own block as far as the position before it is folded (positions 0 and 1 fold it
 * with their chunks): 1 if anything was folded. */
static int fold_own_some(Plan *p, int64_t *state, const char *send, char *recv) {
    int64_t q = p->own_position, done = state[S_SELF];
    if (q < 2)
        return 0;
    int64_t limit = folded(p, state, q - 1);
    if (limit <= done)
        return 0;
    fold(p->fold_dtype, p->fold_op, recv + p->self_dst + done, own_of(p, state, send) + done,
         (limit - done) / itemsize_of[p->fold_dtype]);
    state[S_SELF] = limit;
    return 1;
}

/* Read what writer row `k` has for this call, at most `limit` chunks: the chunks read (or
 * skipped); -1 when a chunk of another call blocks the ring, -2 when a reference chunk could
 * not be copied or a chunk's bytes would lie outside the writer's block in `recv` (errno
 * EMSGSIZE: a corrupt header, or a writer whose lengths differ; all recorded in `state`). */
static int read_from(Plan *p, Py_ssize_t k, int64_t *state, const char *send, char *recv,
                     uint64_t word, int64_t limit) {
    const int64_t *w = p->writer + R_COLS * k;
    int64_t *received = &state[S_RECEIVED + k];
    if (*received >= w[R_EXPECT])
        return 0;
    int64_t rank = w[R_RANK];
    int64_t cur = p->cursor[rank];
    int64_t start = cur;
    int64_t filled = (int64_t)load_acq(p, w[R_FILLED]);
    if (cur < filled - p->nchunks)
        cur = filled - p->nchunks;  /* anything older was not this rank's, or is read */
    uint64_t bit = 1ull << p->me;
    int moved = 0, result = 0;
    while (cur < filled && moved < limit && *received < w[R_EXPECT]) {
        int64_t slot = cur % p->nchunks;
        int64_t h = w[R_HEADERS] / 8 + 8 * slot;
        uint64_t seq = load_acq(p, h + H_SEQ);
        if (seq != (uint64_t)(cur + 1)) {   /* rewritten: it was not for this rank */
            cur++;
            continue;
        }
        uint64_t mask = load_acq(p, h + H_MASK);
        uint64_t call = load_acq(p, h + H_CALL);
        uint64_t fp = load_acq(p, h + H_FP);
        uint64_t offset = load_acq(p, h + H_OFFSET);
        uint64_t nbytes = load_acq(p, h + H_NBYTES);
        uint64_t source = load_acq(p, h + H_SOURCE);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (load_acq(p, h + H_SEQ) != seq || !(mask & bit)) {
            cur++;
            continue;
        }
        if (call != word) {
            state[S_FOREIGN_WRITER] = rank;
            state[S_FOREIGN_CALL] = (int64_t)call;
            state[S_FOREIGN_FP] = (int64_t)fp;
            result = -1;
            break;
        }
        if (offset > (uint64_t)w[R_EXPECT] || nbytes > (uint64_t)(w[R_EXPECT] - *received)
            || nbytes > (uint64_t)w[R_EXPECT] - offset
            || (!source && nbytes > (uint64_t)p->chunk_bytes)
            || (p->fold_op >= 0 && (source || offset != (uint64_t)*received
                                    || nbytes % itemsize_of[p->fold_dtype]))) {
            state[S_FAILED_WRITER] = rank;
            state[S_ERRNO] = EMSGSIZE;
            result = -2;
            break;
        }
        if (p->fold_op >= 0) {
            if (!may_fold(p, state, k, (int64_t)(offset + nbytes)))
                break;  /* its turn comes once the position before it is folded this far */
            fold_chunk(p, k, state, send, recv, (int64_t)offset,
                       p->base + w[R_RING] + slot * p->chunk_bytes, (int64_t)nbytes);
        } else if (source) {
            int err = copy_from_process((int64_t)load_acq(p, w[R_PID]), recv + w[R_DST] + offset,
                                        source, nbytes);
            if (err) {
                state[S_FAILED_WRITER] = rank;
                state[S_ERRNO] = err;
                result = -2;
                break;
            }
        } else {
            copy_in(p, recv + w[R_DST] + offset, p->base + w[R_RING] + slot * p->chunk_bytes,
                    nbytes);
        }
        *received += (int64_t)nbytes;
        cur++;
        moved++;
    }
    if (cur != start) {
        p->cursor[rank] = cur;
        store_rel(p, w[R_DRAINED], (uint64_t)cur);
    }
    if (result == -2)
        return -2;
    return result < 0 && !moved ? -1 : moved + (cur != start);
}

/* Copy the next piece of the rank's own block (all the rest when `whole`): 1, or 0 when it
 * is all copied. */
static int self_copy_some(Plan *p, int64_t *state, char *send, char *recv, int whole) {
    int64_t done = state[S_SELF];
    if (done >= p->self_len)
        return 0;
    int64_t n = p->self_len - done < p->self_piece || whole ? p->self_len - done
                                                           : p->self_piece;
    if (recv + p->self_dst != send + p->self_src)
        copy_in(p, recv + p->self_dst + done, send + p->self_src + done, n);
    state[S_SELF] = done + n;
    return 1;
}

/* Whether every reader of this call's reference chunks has drained past them; else the
 * first still at them, in *blocked. */
static int references_drained(Plan *p, const int64_t *state, int64_t *blocked) {
    const int64_t *must_drain = state + S_RECEIVED + p->nwriters;
    for (Py_ssize_t r = 0; r < p->size; r++) {
        if (must_drain[r] && (int64_t)load_acq(p, p->drained[r]) < must_drain[r]) {
            *blocked = r;
            return 0;
        }
    }
    return 1;
}

/* Whether everything but the readers' draining of reference chunks is done. */
static int moved_all(Plan *p, const int64_t *state) {
    if (state[S_WRITTEN] < p->nwrites || state[S_SELF] < p->self_len)
        return 0;
    for (Py_ssize_t k = 0; k < p->nwriters; k++)
        if (state[S_RECEIVED + k] < p->writer[R_COLS * k + R_EXPECT])
            return 0;
    return 1;
}

/* Whether the words of the call's roll call that this rank waits for hold the call's word
 * `word` (none to wait for: yes). Phase ph of call seq has the word's call number
 * k = (seq << 3 | ph) + 1 and the roll slot (2 seq + ph) mod roll_slots (`RollCall`). */
static int roll_heard(Plan *p, uint64_t word) {
    if (!p->nroll)
        return 1;
    int64_t k = (int64_t)(word >> 24) - 1;
    int64_t slot = (2 * (k >> 3) + (k & 7)) % p->roll_slots;
    for (Py_ssize_t i = 0; i < p->nroll; i++)
        if (load_acq(p, p->roll_word[i] + slot) != word)
            return 0;
    return 1;
}

static int finished(Plan *p, int64_t *state) {
    if (!moved_all(p, state))
        return 0;
    int64_t blocked = -1;
    int drained = references_drained(p, state, &blocked);
    state[S_BLOCKED_ON] = blocked;
    return drained;
}

static int parse_call(Plan *p, PyObject *const *args, Py_ssize_t nargs, Py_buffer *state,
                      char **send, char **recv, uint64_t *word, uint64_t *fp, int *may_write) {
    if (nargs < 6) {
        PyErr_SetString(PyExc_TypeError, "(state, send, recv, word, fp, may_write, ...)");
        return -1;
    }
    if (PyObject_GetBuffer(args[0], state, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (state->len / 8 < S_RECEIVED + p->nwriters + p->size) {
        PyBuffer_Release(state);
        PyErr_SetString(PyExc_ValueError, "state too short for the plan");
        return -1;
    }
    *send = (char *)PyLong_AsVoidPtr(args[1]);
    *recv = (char *)PyLong_AsVoidPtr(args[2]);
    *word = PyLong_AsUnsignedLongLong(args[3]);
    *fp = PyLong_AsUnsignedLongLong(args[4]);
    *may_write = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(state);
        return -1;
    }
    return 0;
}

/* advance(state, send, recv, word, fp, may_write, spin): DONE, STUCK, FOREIGN or FAILED, with MOVED
 * or-ed in when anything was written, read or copied. */
static PyObject *Plan_advance(Plan *p, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer sbuf;
    char *send, *recv;
    uint64_t word, fp;
    int may_write;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "advance(state, send, recv, word, fp, may_write, spin)");
        return NULL;
    }
    if (parse_call(p, args, nargs, &sbuf, &send, &recv, &word, &fp, &may_write) < 0)
        return NULL;
    double spin = PyFloat_AsDouble(args[6]);
    if (spin == -1.0 && PyErr_Occurred()) {
        PyBuffer_Release(&sbuf);
        return NULL;
    }
    int64_t *state = sbuf.buf;
    int status = STUCK, touched = 0, copied = 0;
    shm_spin idle = {0.0, 0};
    state[S_FOREIGN_WRITER] = -1;
    if (may_write && state[S_WRITTEN] < p->nwrites
        && reference_of(p, p->write + W_COLS * state[S_WRITTEN], send, recv) == IN_RECV)
        /* the own block first: the peers wait for the reference to it, not for this rank's
         * reads of theirs */
        copied = self_copy_some(p, state, send, recv, 1);
    for (;;) {
        int moved = 0, foreign = 0, failed = 0;
        if (may_write)
            moved += write_one(p, state, send, recv, word, fp);
        for (Py_ssize_t k = 0; k < p->nwriters; k++) {
            int got = read_from(p, k, state, send, recv, word, 2);
            if (got == -2) {
                failed = 1;
                break;
            }
            if (got < 0)
                foreign = 1;
            else
                moved += got;
        }
        if (failed) {
            status = FAILED;
            break;
        }
        if (moved) {
            /* a peer may have gone to sleep for this chunk or this drain while the rank
             * copied the last one: waking it only at the end would serialise the two */
            touched = 1;
            wake_sleepers(p);
        }
        if (!moved && (p->fold_op >= 0 ? fold_own_some(p, state, send, recv)
                                       : self_copy_some(p, state, send, recv, p->by_reference))) {
            copied = 1;        /* the rank's own block fills the time its peers need */
            continue;
        }
        if (finished(p, state)) {
            status = DONE;
            /* a rooted call's roll call: spin on, within the budget, for the words it waits
             * for (Python's `RollCall` checks them, and waits on past the budget) */
            while (!roll_heard(p, word) && !shm_spin_over(&idle, spin))
                ;
            break;
        }
        if (moved) {
            idle = (shm_spin){0.0, 0};
            continue;
        }
        if (foreign) {
            status = FOREIGN;
            break;
        }
        if (shm_spin_over(&idle, spin))
            break;
    }
    if (touched)
        wake_sleepers(p);
    PyBuffer_Release(&sbuf);
    return PyLong_FromLong(status | (touched || copied ? MOVED : 0));
}

/* ready(state, send, recv, word, fp, may_write): whether advance can move now. */
static PyObject *Plan_ready(Plan *p, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer sbuf;
    char *send, *recv;
    uint64_t word, fp;
    int may_write;
    if (parse_call(p, args, nargs, &sbuf, &send, &recv, &word, &fp, &may_write) < 0)
        return NULL;
    int64_t *state = sbuf.buf;
    int ready = 0;
    if (may_write && state[S_WRITTEN] < p->nwrites) {
        int64_t blocked = -1;
        ready = slot_free(p, p->cursor[p->size], &blocked);
    }
    for (Py_ssize_t k = 0; !ready && k < p->nwriters; k++) {
        const int64_t *w = p->writer + R_COLS * k;
        if (state[S_RECEIVED + k] < w[R_EXPECT] && w[R_RANK] != state[S_FOREIGN_WRITER]
            && (int64_t)load_acq(p, w[R_FILLED]) > p->cursor[w[R_RANK]]
            && (p->fold_op < 0 || may_fold(p, state, k, state[S_RECEIVED + k] + 1)))
            ready = 1;
    }
    if (!ready && state[S_SELF] < p->self_len)
        ready = p->fold_op < 0 || (p->own_position >= 2
                                   && folded(p, state, p->own_position - 1) > state[S_SELF]);
    if (!ready && moved_all(p, state)) {
        int64_t blocked = -1;
        ready = references_drained(p, state, &blocked);
    }
    PyBuffer_Release(&sbuf);
    return PyBool_FromLong(ready);
}

/* wake(): a full fence, then wake the peers asleep (after a store they may wait for). */
static PyObject *Plan_wake(Plan *p, PyObject *Py_UNUSED(ignored)) {
    wake_sleepers(p);
    Py_RETURN_NONE;
}

static PyMethodDef Plan_methods[] = {
    {"advance", (PyCFunction)(void (*)(void))Plan_advance, METH_FASTCALL,
     "advance(state, send, recv, word, fp, may_write, spin) -> DONE, STUCK, FOREIGN or FAILED."},
    {"ready", (PyCFunction)(void (*)(void))Plan_ready, METH_FASTCALL,
     "ready(state, send, recv, word, fp, may_write) -> whether advance can move now."},
    {"wake", (PyCFunction)Plan_wake, METH_NOARGS,
     "wake(): a full fence, then wake the peers asleep (after a store they may wait for)."},
    {NULL, NULL, 0, NULL}};

/* own_source: where an allgather's own block is published from unless aliased (IN_SEND or
 * IN_RECV: the selection table's `protocols.shm_stream.own_block`) */
static PyObject *Plan_own_source(Plan *p, void *closure) {
    (void)closure;
    return PyLong_FromLong(p->own_from);
}

static PyGetSetDef Plan_getset[] = {
    {"own_source", (getter)Plan_own_source, NULL, "the own block's source unless aliased", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "collops.shm._stream.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What one rank writes and reads in one shm_stream call signature.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Plan_init,
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_methods = Plan_methods,
    .tp_getset = Plan_getset,
};

static PyMethodDef module_methods[] = {
    {"copy", (PyCFunction)(void (*)(void))module_copy, METH_FASTCALL,
     "copy(dst, src, nbytes): copy bytes between two addresses, around 4 KiB aliasing."},
    {"read_process", (PyCFunction)(void (*)(void))module_read_process, METH_FASTCALL,
     "read_process(pid, remote, local, nbytes) -> errno: copy bytes out of another "
     "process, around 4 KiB aliasing."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.shm._stream",
    "The compiled inner loop of the shm_stream collectives.", -1, module_methods, NULL, NULL,
    NULL, NULL};

PyMODINIT_FUNC PyInit__stream(void) {
    if (PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0
        || PyModule_AddIntConstant(m, "DONE", DONE) < 0
        || PyModule_AddIntConstant(m, "STUCK", STUCK) < 0
        || PyModule_AddIntConstant(m, "FOREIGN", FOREIGN) < 0
        || PyModule_AddIntConstant(m, "FAILED", FAILED) < 0
        || PyModule_AddIntConstant(m, "MOVED", MOVED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
