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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <sched.h>

#include "_numpy_head.h"
#include "_shm_wait.h"

#define NSLOTS 4
/* or-ed into an acknowledgement word by a reader that found the call and is still copying
 * (`direct_area.ARRIVED`): enough for a root's confirmation, not for reusing the slot */
#define ARRIVED (1ULL << 62)
#define HOT_MAX_DIMS 8
#define HOT_HEAD_MAX 256
/* numpy's array flags the bound broadcast checks */
#define NPY_C_CONTIGUOUS 0x0001
#define NPY_WRITEABLE 0x0400

enum { READ_NONE = 0, READ_COPY = 1, READ_SELF = 2, READ_REDUCE = 3, READ_TABLE = 4 };
enum { OP_SUM = 0, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR };
enum { DT_I1 = 0, DT_I2, DT_I4, DT_I8, DT_U1, DT_U2, DT_U4, DT_U8, DT_F4, DT_F8 };


typedef struct {
    PyObject_HEAD
    Py_buffer segment;          /* the job segment, held for the runner's lifetime */
    int have_segment;
    char *base;
    PyObject *ndarray;          /* numpy.ndarray, for the data-pointer shortcut */
    PyObject *occupant;         /* area.occupant.readers: per slot, the tuple of members that
                                 * read it (anything else: held, the slot counts as busy) */
    Py_buffer occupant_view;    /* area.occupant.calls: per slot, its call number (u64) */
    uint64_t *occupant_calls;
    PyObject *own_pending;      /* area.own_pending: list of int per slot */
    PyObject *area;             /* the DirectArea (its `inflight`) */
    PyObject *readers;          /* tuple: members that read this rank's slot */
    PyObject *slow;             /* slow(status, send, recv, seq, timeout) */
    PyObject *wake;             /* wake(world_rank) */
    PyObject *inflight_name;
    int publishes;              /* stores its word each call (with data when nbytes) */
    int is_root;                /* the root of a bcast or scatter: it completes once every
                                 * reader found its call (`shm.direct_roles.confirms`) */
    int announces;              /* a reader of such a root: it says it found the call before
                                 * it copies (`shm.direct_roles.announces`) */
    int store_fingerprint;      /* 0 only to measure what the fingerprint costs */
    /* length prefix: a contribution (each copied piece) starts with a header of prefix_head
     * bytes whose little-endian u64 at prefix_at counts the bytes in use after it; only those
     * are copied (-1: copy everything). write_prefix: apply it to the write as well. */
    Py_ssize_t prefix_at, prefix_head;
    int write_prefix;
    Py_ssize_t nbytes;          /* contribution bytes copied from send */
    /* bytes of the contribution nobody reads, not copied: a scatter root's own block */
    Py_ssize_t skip_from, skip_len;
    uint64_t fingerprint, mix;
    Py_ssize_t my_held[NSLOTS], my_fp[NSLOTS], my_data[NSLOTS];
    Py_ssize_t nothers;
    Py_ssize_t *held;           /* [slot][other]: word index of the other's held word */
    Py_ssize_t *ack;            /* [slot][other]: word where this rank acknowledges it */
    Py_ssize_t nmembers;
    Py_ssize_t *ack_of_me;      /* [member][slot]: word where member acknowledges this rank */
    Py_ssize_t nsleepers;
    Py_ssize_t *sleeper_word;
    long *sleeper_rank;
    int read_kind;
    Py_ssize_t npieces;
    Py_ssize_t *src;            /* [slot][piece]: byte offset in the segment */
    Py_ssize_t *dst;            /* [piece]: byte offset in recv (READ_COPY) */
    Py_ssize_t *len;            /* [piece]: bytes (READ_COPY) */
    Py_ssize_t self_src, self_dst, self_len;   /* READ_SELF: send -> recv */
    Py_ssize_t count;           /* READ_REDUCE: items */
    /* an alltoallv (`collops.shm.direct_alltoallv`): this rank writes `whead_len` header bytes
     * and then `nwrites` pieces (from, bytes, to: send -> its slot) instead of `nbytes`; as
     * READ_TABLE it checks each writer's header words table[0..2] (what the writer sends it,
     * expects from it, where its block lies) against len[i] and back[i] before copying, and
     * copies its own block as READ_SELF does */
    char *whead;
    Py_ssize_t whead_len, nwrites;
    Py_ssize_t *writes, *back;
    Py_ssize_t table[3], slot_bytes;
    int op, dtype;
    double spin_seconds;
    double yield_seconds;       /* then polling with sched_yield (the GIL released) */
    int hand_over_core;         /* more ranks than cores: a rank that publishes and awaits
                                 * nobody yields once, so a peer sharing its core that waits
                                 * for the contribution runs now rather than after this
                                 * rank's next stretch of work */
    Py_ssize_t nlocal;
    Py_ssize_t *local_words;    /* words written by peers pinned to this rank's core: while
                                 * one is missing, spinning cannot help (that peer runs only
                                 * once this rank yields), so the wait yields at once */
    /* the bound broadcast (see `Runner_bcast`): one array signature, its envelope header */
    int hot_bound;
    PyObject *hot_descr;        /* the dtype both ends' arrays must have (identity) */
    int hot_nd;
    Py_ssize_t hot_dims[HOT_MAX_DIMS];
    Py_ssize_t hot_nbytes;      /* data bytes after the header (each block's, a scatter's) */
    Py_ssize_t hot_blocks;      /* blocks the root writes: 1 (bcast), one per rank (scatter) */
    Py_ssize_t hot_block;       /* bytes from one block to the next in the slot */
    Py_ssize_t hot_own;         /* where the root's own result starts in its x */
    /* a scatterv root's blocks (NULL: a scatter's, `hot_nbytes` each from byte j * hot_nbytes
     * of x under `hot_head`): block j is hot_lengths[j] bytes from byte hot_offsets[j] of x
     * under the header at hot_heads + j * prefix_head; x holds hot_x_bytes */
    Py_ssize_t *hot_offsets, *hot_lengths;
    char *hot_heads;
    Py_ssize_t hot_x_bytes;
    char hot_head[HOT_HEAD_MAX];
    PyObject *hot_env;          /* the envelope the general path parses (template.recv) */
    PyObject *hot_slow;         /* what `bcast` returns when it did nothing */
    PyObject *hot_alloc;        /* alloc(): a fresh result array (a non-root given no out) */
    PyObject *hot_counter;      /* the communicator's call counter: int64 array it owns */
    long long *calls;           /* its first element, the next call number */
    long long hand_seq;         /* the number a bound call took, for `hand_over` */
    /* a bound call (`Runner_call`): the result's shape, when this rank gets one */
    int hot_receives;
    Py_ssize_t hot_itemsize;
    int hot_out_nd;
    Py_ssize_t hot_out_dims[HOT_MAX_DIMS];
} Runner;

static inline uint64_t load_word(Runner *r, Py_ssize_t index) {
    return shm_load(r->base, index);
}

static inline void store_word(Runner *r, Py_ssize_t index, uint64_t value) {
    shm_store(r->base, index, value);
}

/* ---- reductions: numpy's arithmetic, element by element ------------------------------- */

/* The folds are vectorised (the build's -O2 leaves these loops scalar, several times slower
 * than numpy's own loops); their operands never overlap. `fold_T`: out = out op in;
 * `combine_T`: out = a op b. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FOLD_FN __attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define FOLD_FN __attribute__((optimize("O3")))
#else
#define FOLD_FN
#endif

#define LOOPS_INT(T, UT, A, B)                                                            \
    Py_ssize_t i;                                                                         \
    switch (op) {                                                                         \
    case OP_SUM: for (i = 0; i < n; i++) out[i] = (T)((UT)A[i] + (UT)B[i]); break;        \
    case OP_PROD: for (i = 0; i < n; i++) out[i] = (T)((UT)A[i] * (UT)B[i]); break;       \
    case OP_MIN: for (i = 0; i < n; i++) out[i] = A[i] < B[i] ? A[i] : B[i]; break;       \
    case OP_MAX: for (i = 0; i < n; i++) out[i] = A[i] > B[i] ? A[i] : B[i]; break;       \
    case OP_BAND: for (i = 0; i < n; i++) out[i] = A[i] & B[i]; break;                    \
    case OP_BOR: for (i = 0; i < n; i++) out[i] = A[i] | B[i]; break;                     \
    case OP_BXOR: for (i = 0; i < n; i++) out[i] = A[i] ^ B[i]; break;                    \
    }

/* numpy's minimum/maximum on floats: the left operand when it is strictly smaller (larger)
 * or NaN, else the right one (so of two equal zeros the right one's sign wins) */
#define LOOPS_FLOAT(A, B)                                                                 \
    Py_ssize_t i;                                                                         \
    switch (op) {                                                                         \
    case OP_SUM: for (i = 0; i < n; i++) out[i] = A[i] + B[i]; break;                     \
    case OP_PROD: for (i = 0; i < n; i++) out[i] = A[i] * B[i]; break;                    \
    case OP_MIN:                                                                          \
        for (i = 0; i < n; i++)                                                           \
            out[i] = (A[i] < B[i] || isnan(A[i])) ? A[i] : B[i];                          \
        break;                                                                            \
    case OP_MAX:                                                                          \
        for (i = 0; i < n; i++)                                                           \
            out[i] = (A[i] > B[i] || isnan(A[i])) ? A[i] : B[i];                          \
        break;                                                                            \
    }

#define FOLD_INT(T, UT)                                                                   \
    static FOLD_FN void fold_##T(int op, T *restrict out, const T *restrict in,           \
                                 Py_ssize_t n) {                                          \
        LOOPS_INT(T, UT, out, in)                                                         \
    }                                                                                     \
    static FOLD_FN void combine_##T(int op, T *restrict out, const T *restrict a,         \
                                    const T *restrict b, Py_ssize_t n) {                  \
        LOOPS_INT(T, UT, a, b)                                                            \
    }

#define FOLD_FLOAT(T)                                                                     \
    static FOLD_FN void fold_##T(int op, T *restrict out, const T *restrict in,           \
                                 Py_ssize_t n) {                                          \
        LOOPS_FLOAT(out, in)                                                              \
    }                                                                                     \
    static FOLD_FN void combine_##T(int op, T *restrict out, const T *restrict a,         \
                                    const T *restrict b, Py_ssize_t n) {                  \
        LOOPS_FLOAT(a, b)                                                                 \
    }

FOLD_INT(int8_t, uint8_t)
FOLD_INT(int16_t, uint16_t)
FOLD_INT(int32_t, uint32_t)
FOLD_INT(int64_t, uint64_t)
FOLD_INT(uint8_t, uint8_t)
FOLD_INT(uint16_t, uint16_t)
FOLD_INT(uint32_t, uint32_t)
FOLD_INT(uint64_t, uint64_t)
FOLD_FLOAT(float)
FOLD_FLOAT(double)

static const Py_ssize_t itemsize_of[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

static void fold(int dtype, int op, void *out, const void *in, Py_ssize_t n) {
    switch (dtype) {
    case DT_I1: fold_int8_t(op, out, in, n); break;
    case DT_I2: fold_int16_t(op, out, in, n); break;
    case DT_I4: fold_int32_t(op, out, in, n); break;
    case DT_I8: fold_int64_t(op, out, in, n); break;
    case DT_U1: fold_uint8_t(op, out, in, n); break;
    case DT_U2: fold_uint16_t(op, out, in, n); break;
    case DT_U4: fold_uint32_t(op, out, in, n); break;
    case DT_U8: fold_uint64_t(op, out, in, n); break;
    case DT_F4: fold_float(op, out, in, n); break;
    case DT_F8: fold_double(op, out, in, n); break;
    }
}

/* out = a op b (`a` may be `out`: then `fold`). */
static void combine(int dtype, int op, void *out, const void *a, const void *b, Py_ssize_t n) {
    if (out == a) {
        fold(dtype, op, out, b, n);
        return;
    }
    switch (dtype) {
    case DT_I1: combine_int8_t(op, out, a, b, n); break;
    case DT_I2: combine_int16_t(op, out, a, b, n); break;
    case DT_I4: combine_int32_t(op, out, a, b, n); break;
    case DT_I8: combine_int64_t(op, out, a, b, n); break;
    case DT_U1: combine_uint8_t(op, out, a, b, n); break;
    case DT_U2: combine_uint16_t(op, out, a, b, n); break;
    case DT_U4: combine_uint32_t(op, out, a, b, n); break;
    case DT_U8: combine_uint64_t(op, out, a, b, n); break;
    case DT_F4: combine_float(op, out, a, b, n); break;
    case DT_F8: combine_double(op, out, a, b, n); break;
    }
}

/* ---- the runner ------------------------------------------------------------------------ */

static void Runner_dealloc(Runner *r) {
    if (r->have_segment)
        PyBuffer_Release(&r->segment);
    if (r->occupant_calls != NULL)
        PyBuffer_Release(&r->occupant_view);
    Py_XDECREF(r->ndarray);
    Py_XDECREF(r->occupant);
    Py_XDECREF(r->own_pending);
    Py_XDECREF(r->area);
    Py_XDECREF(r->readers);
    Py_XDECREF(r->slow);
    Py_XDECREF(r->wake);
    Py_XDECREF(r->inflight_name);
    Py_XDECREF(r->hot_descr);
    Py_XDECREF(r->hot_env);
    Py_XDECREF(r->hot_slow);
    Py_XDECREF(r->hot_alloc);
    Py_XDECREF(r->hot_counter);
    PyMem_Free(r->held);
    PyMem_Free(r->ack);
    PyMem_Free(r->ack_of_me);
    PyMem_Free(r->sleeper_word);
    PyMem_Free(r->sleeper_rank);
    PyMem_Free(r->src);
    PyMem_Free(r->dst);
    PyMem_Free(r->len);
    PyMem_Free(r->local_words);
    PyMem_Free(r->whead);
    PyMem_Free(r->writes);
    PyMem_Free(r->back);
    PyMem_Free(r->hot_offsets);
    PyMem_Free(r->hot_lengths);
    PyMem_Free(r->hot_heads);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* Copy a sequence of ints into a fresh array of `expect` entries (-1: any length). */
static Py_ssize_t *int_array(PyObject *seq, Py_ssize_t expect, Py_ssize_t *got, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (expect >= 0 && n != expect) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd integers, got %zd", what, expect, n);
        Py_DECREF(fast);
        return NULL;
    }
    Py_ssize_t *out = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(out);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    if (got)
        *got = n;
    return out;
}

static int fill_fixed(PyObject *seq, Py_ssize_t *dst, const char *what) {
    Py_ssize_t *tmp = int_array(seq, NSLOTS, NULL, what);
    if (tmp == NULL)
        return -1;
    memcpy(dst, tmp, NSLOTS * sizeof(Py_ssize_t));
    PyMem_Free(tmp);
    return 0;
}

static int Runner_init(Runner *r, PyObject *args, PyObject *kw) {
    static char *names[] = {
        "segment", "ndarray", "area", "occupant", "own_pending", "readers", "slow", "wake",
        "publishes", "nbytes", "fingerprint", "mix", "my_held", "my_fp", "my_data",
        "held", "ack", "ack_of_me", "sleeper_words", "sleeper_ranks", "read_kind",
        "src", "dst", "len", "self_copy", "count", "op", "dtype", "spin_seconds",
        "store_fingerprint", "prefix_at", "prefix_head", "write_prefix", "yield_seconds",
        "hand_over_core", "local_words", "is_root", "announces", "head", "writes", "back",
        "table", "slot_bytes", "occupant_calls", "skip", NULL};
    PyObject *segment, *ndarray, *area, *occupant, *own_pending, *readers, *slow, *wake;
    PyObject *my_held, *my_fp, *my_data, *held, *ack, *ack_of_me, *sleeper_words;
    PyObject *sleeper_ranks, *src, *dst, *len, *self_copy, *local_words = NULL;
    PyObject *writes = NULL, *back = NULL, *table = NULL, *occupant_calls = NULL;
    Py_ssize_t skip_from = 0, skip_len = 0;
    Py_buffer head = {0};
    Py_ssize_t slot_bytes = 0;
    int publishes, read_kind, op, dtype;
    Py_ssize_t nbytes, count;
    unsigned long long fingerprint, mix;
    double spin, yield = 0.0;
    int store_fingerprint = 1, write_prefix = 0, hand_over_core = 0, is_root = 0, announces = 0;
    Py_ssize_t prefix_at = -1, prefix_head = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OOOO!O!O!OOpnKKOOOOOOOOiOOOOniid|pnnpdpOppy*OOOnO(nn)", names, &segment, &ndarray, &area,
            &PyList_Type, &occupant, &PyList_Type, &own_pending, &PyTuple_Type, &readers,
            &slow, &wake, &publishes, &nbytes, &fingerprint, &mix, &my_held, &my_fp,
            &my_data, &held, &ack, &ack_of_me, &sleeper_words, &sleeper_ranks, &read_kind,
            &src, &dst, &len, &self_copy, &count, &op, &dtype, &spin, &store_fingerprint,
            &prefix_at, &prefix_head, &write_prefix, &yield, &hand_over_core, &local_words,
            &is_root, &announces, &head, &writes, &back, &table, &slot_bytes,
            &occupant_calls, &skip_from, &skip_len))
        return -1;
    if (head.buf != NULL) {  /* kept as a copy: the runner outlives the argument */
        r->whead = PyMem_Malloc(head.len ? head.len : 1);
        if (r->whead == NULL) {
            PyBuffer_Release(&head);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(r->whead, head.buf, head.len);
        r->whead_len = head.len;
        PyBuffer_Release(&head);
    }
    if (PyList_GET_SIZE(occupant) != NSLOTS || PyList_GET_SIZE(own_pending) != NSLOTS) {
        PyErr_SetString(PyExc_ValueError, "occupant and own_pending need one entry per slot");
        return -1;
    }
    if (r->have_segment)
        return 0; /* initialised once */
    if (PyObject_GetBuffer(segment, &r->segment, PyBUF_WRITABLE) < 0)
        return -1;
    r->have_segment = 1;
    r->base = r->segment.buf;
    if (occupant_calls == NULL
        || PyObject_GetBuffer(occupant_calls, &r->occupant_view, PyBUF_WRITABLE) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "occupant_calls is required");
        return -1;
    }
    if (r->occupant_view.len < (Py_ssize_t)(NSLOTS * sizeof(uint64_t))) {
        PyBuffer_Release(&r->occupant_view);
        PyErr_SetString(PyExc_ValueError, "occupant_calls needs one u64 per slot");
        return -1;
    }
    r->occupant_calls = r->occupant_view.buf;
    r->ndarray = Py_NewRef(ndarray);
    r->area = Py_NewRef(area);
    r->occupant = Py_NewRef(occupant);
    r->own_pending = Py_NewRef(own_pending);
    r->readers = Py_NewRef(readers);
    r->slow = Py_NewRef(slow);
    r->wake = Py_NewRef(wake);
    r->inflight_name = PyUnicode_InternFromString("inflight");
    if (r->inflight_name == NULL)
        return -1;
    r->publishes = publishes;
    r->is_root = is_root;
    r->announces = announces;
    r->store_fingerprint = store_fingerprint;
    if (prefix_at >= 0 && (prefix_head < prefix_at + 8)) {
        PyErr_SetString(PyExc_ValueError, "the length prefix must lie inside the header");
        return -1;
    }
    r->prefix_at = prefix_at;
    r->prefix_head = prefix_head;
    r->write_prefix = write_prefix;
    r->nbytes = nbytes;
    if (skip_from < 0 || skip_len < 0 || skip_from + skip_len > nbytes) {
        PyErr_SetString(PyExc_ValueError, "skip must lie inside the contribution");
        return -1;
    }
    r->skip_from = skip_from;
    r->skip_len = skip_len;
    r->fingerprint = fingerprint;
    r->mix = mix;
    r->spin_seconds = spin;
    r->yield_seconds = yield;
    r->hand_over_core = hand_over_core;
    if (fill_fixed(my_held, r->my_held, "my_held") || fill_fixed(my_fp, r->my_fp, "my_fp")
        || fill_fixed(my_data, r->my_data, "my_data"))
        return -1;
    Py_ssize_t n;
    if ((r->held = int_array(held, -1, &n, "held")) == NULL)
        return -1;
    r->nothers = n / NSLOTS;
    if ((r->ack = int_array(ack, NSLOTS * r->nothers, NULL, "ack")) == NULL)
        return -1;
    if ((r->ack_of_me = int_array(ack_of_me, -1, &n, "ack_of_me")) == NULL)
        return -1;
    r->nmembers = n / NSLOTS;
    if ((r->sleeper_word = int_array(sleeper_words, -1, &r->nsleepers, "sleeper_words")) == NULL)
        return -1;
    Py_ssize_t *ranks = int_array(sleeper_ranks, r->nsleepers, NULL, "sleeper_ranks");
    if (ranks == NULL)
        return -1;
    r->sleeper_rank = PyMem_Calloc(r->nsleepers ? r->nsleepers : 1, sizeof(long));
    for (Py_ssize_t i = 0; i < r->nsleepers; i++)
        r->sleeper_rank[i] = (long)ranks[i];
    PyMem_Free(ranks);
    r->read_kind = read_kind;
    if ((r->src = int_array(src, -1, &n, "src")) == NULL)
        return -1;
    r->npieces = n / NSLOTS;
    if ((r->dst = int_array(dst, -1, NULL, "dst")) == NULL)
        return -1;
    if ((r->len = int_array(len, -1, NULL, "len")) == NULL)
        return -1;
    Py_ssize_t three[3] = {0, 0, 0};
    Py_ssize_t *sc = int_array(self_copy, 3, NULL, "self_copy");
    if (sc == NULL)
        return -1;
    memcpy(three, sc, sizeof three);
    PyMem_Free(sc);
    r->self_src = three[0];
    r->self_dst = three[1];
    r->self_len = three[2];
    r->count = count;
    if (op < OP_SUM || op > OP_BXOR || dtype < DT_I1 || dtype > DT_F8) {
        PyErr_SetString(PyExc_ValueError, "unknown op or dtype code");
        return -1;
    }
    r->op = op;
    r->dtype = dtype;
    if (local_words != NULL && local_words != Py_None
        && (r->local_words = int_array(local_words, -1, &r->nlocal, "local_words")) == NULL)
        return -1;
    if (writes != NULL && writes != Py_None) {
        if ((r->writes = int_array(writes, -1, &n, "writes")) == NULL)
            return -1;
        r->nwrites = n / 3;
    }
    if (read_kind == READ_TABLE) {
        Py_ssize_t *t = table == NULL ? NULL : int_array(table, 3, NULL, "table");
        if (t == NULL || back == NULL)
            return -1;
        memcpy(r->table, t, sizeof r->table);
        PyMem_Free(t);
        if ((r->back = int_array(back, r->npieces, NULL, "back")) == NULL)
            return -1;
        r->slot_bytes = slot_bytes;
    }
    return 0;
}

/* The data of a buffer argument (None: NULL); arrays without the buffer protocol's cost. */
static int data_of(Runner *r, PyObject *o, char **data, Py_buffer *view, int *held) {
    *held = 0;
    if (o == Py_None) {
        *data = NULL;
        return 0;
    }
    if ((PyObject *)Py_TYPE(o) == r->ndarray) {
        *data = ((ArrayFields *)o)->data;
        return 0;
    }
    if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0)
        return -1;
    *held = 1;
    *data = view->buf;
    return 0;
}

static void wake_sleepers(Runner *r) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (Py_ssize_t i = 0; i < r->nsleepers; i++) {
        if (load_word(r, r->sleeper_word[i])) {
            PyObject *res = PyObject_CallFunction(r->wake, "l", r->sleeper_rank[i]);
            if (res == NULL)
                PyErr_WriteUnraisable(r->wake);
            Py_XDECREF(res);
        }
    }
}

/* The acknowledgement words of the members that must read this rank's `slot` and the call
 * `k` they must hold there: their number (at most 64), or -1 when this rank still reads the
 * slot itself or the occupant cannot be read (the slot counts as busy). */
static Py_ssize_t slot_readers(Runner *r, int slot, uint64_t *k, Py_ssize_t *words) {
    if (PyObject_IsTrue(PyList_GET_ITEM(r->own_pending, slot)))
        return -1;
    PyObject *readers = PyList_GET_ITEM(r->occupant, slot);
    if (!PyTuple_Check(readers))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(readers);
    if (n == 0)
        return 0;
    *k = r->occupant_calls[slot];
    if (n > 64)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t m = PyLong_AsSsize_t(PyTuple_GET_ITEM(readers, i));
        if (m < 0 || m >= r->nmembers) {
            PyErr_Clear();
            return -1;
        }
        words[i] = r->ack_of_me[m * NSLOTS + slot];
    }
    return n;
}

/* The bytes of a `full`-byte piece at `piece` to copy: all, or its header and the bytes in use. */
static inline Py_ssize_t used_bytes(const Runner *r, const char *piece, Py_ssize_t full) {
    if (r->prefix_at < 0 || full <= r->prefix_head)
        return full;
    uint64_t n;
    memcpy(&n, piece + r->prefix_at, sizeof n);
    if (n > (uint64_t)(full - r->prefix_head))
        return full;
    return r->prefix_head + (Py_ssize_t)n;
}

/* An alltoallv's reads (READ_TABLE): every writer's header checked first — it writes its
 * blocks into its slot, sends this rank len[i] bytes and expects back[i], its block lies
 * inside the slot — then the blocks copied, and this rank's own. 0 when a header asks for
 * more (Python reads the call, status 5). */
static int read_table(Runner *r, const Py_ssize_t *src, char *send, char *recv) {
    Py_ssize_t np = r->npieces, at[np ? np : 1];
    for (Py_ssize_t i = 0; i < np; i++) {
        uint64_t w[4];
        const char *head = r->base + src[i];
        memcpy(&w[0], head, 8);
        memcpy(&w[1], head + 8 * r->table[0], 8);
        memcpy(&w[2], head + 8 * r->table[1], 8);
        memcpy(&w[3], head + 8 * r->table[2], 8);
        if (w[0] != 0 || w[1] != (uint64_t)r->len[i] || w[2] != (uint64_t)r->back[i]
            || (r->len[i] && (w[3] < (uint64_t)r->whead_len
                              || w[3] > (uint64_t)(r->slot_bytes - r->len[i]))))
            return 0;
        at[i] = (Py_ssize_t)w[3];
    }
    for (Py_ssize_t i = 0; i < np; i++)
        if (r->len[i])
            copy_bytes(recv + r->dst[i], r->base + src[i] + at[i], r->len[i]);
    if (r->self_len)
        copy_bytes(recv + r->self_dst, send + r->self_src, r->self_len);
    return 1;
}

static int read_slots(Runner *r, int slot, char *send, char *recv) {
    Py_ssize_t np = r->npieces, *src = r->src + slot * np;
    switch (r->read_kind) {
    case READ_TABLE:
        return read_table(r, src, send, recv);
    case READ_COPY:
        for (Py_ssize_t i = 0; i < np; i++)
            copy_bytes(recv + r->dst[i], r->base + src[i], used_bytes(r, r->base + src[i], r->len[i]));
        break;
    case READ_SELF:
        if (recv != NULL && send != NULL && recv + r->self_dst != send + r->self_src)
            copy_bytes(recv + r->self_dst, send + r->self_src, r->self_len);
        break;
    case READ_REDUCE:
        if (np == 0)
            break;
        if (np == 1)
            copy_bytes(recv, r->base + src[0], r->count * itemsize_of[r->dtype]);
        else
            combine(r->dtype, r->op, recv, r->base + src[0], r->base + src[1], r->count);
        for (Py_ssize_t i = 2; i < np; i++)
            fold(r->dtype, r->op, recv, r->base + src[i], r->count);
        break;
    }
    return 1;
}

/* Whether one of the `n` words at `index` still short of `word` (the bits of `ignore` left
 * out) is written by a peer pinned to this rank's core. */
static int awaits_own_core(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word,
                           uint64_t ignore) {
    for (Py_ssize_t i = 0; i < n; i++)
        for (Py_ssize_t j = 0; j < r->nlocal; j++)
            if (index[i] == r->local_words[j] && (load_word(r, index[i]) & ~ignore) != word)
                return 1;
    return 0;
}

/* The words `index[i..n)` a runner waits for to hold `word`, the bits of `ignore` left out
 * (`words_hold`). */
typedef struct {
    Runner *r;
    const Py_ssize_t *index;
    Py_ssize_t n, i;
    uint64_t word, ignore;
} awaited_words;

/* Whether every awaited word holds its value (those seen to do are not looked at again). */
static int words_hold(void *ctx) {
    awaited_words *w = ctx;
    while (w->i < w->n && (load_word(w->r, w->index[w->i]) & ~w->ignore) == w->word)
        w->i++;
    return w->i == w->n;
}

/* Wait until each of the `n` words at `index` holds `word` (the bits of `ignore` left out),
 * with the compiled stages of the one wait (`shm_wait_until`): no spin when a peer it waits
 * for shares this rank's core. 1: they all do; 0: not yet (Python then sleeps and checks for
 * failures, timeouts and mismatches). */
static int await_masked(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word,
                        uint64_t ignore) {
    awaited_words w = {r, index, n, 0, word, ignore};
    if (words_hold(&w))
        return 1;
    double spin = awaits_own_core(r, index + w.i, n - w.i, word, ignore) ? 0.0
                                                                         : r->spin_seconds;
    return shm_wait_until(words_hold, &w, spin, r->yield_seconds);
}

/* `await_masked` of exactly `word`. */
static int await_words(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word) {
    return await_masked(r, index, n, word, 0);
}

/* Wait, as `await_words` does, until every reader of this rank's `slot` has acknowledged the
 * call the slot holds: 1 when they have; 0 when not yet, or when this rank itself still reads
 * the slot (Python then takes the call). A reader one call behind is common when ranks
 * outnumber cores: a rank that returns at once from a rooted call is in its next call while
 * a peer has not yet been scheduled to finish the last one. */
static int await_slot(Runner *r, int slot) {
    uint64_t k = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &k, words);
    return n >= 0 && await_words(r, words, n, k);
}

/* A root's confirmation: wait, as `await_slot` does, until every reader of `slot` has found
 * the call there (said so with `ARRIVED`, or acknowledged it already). */
static int await_arrivals(Runner *r, int slot) {
    uint64_t k = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &k, words);
    return n >= 0 && await_masked(r, words, n, k, ARRIVED);
}

/* After publishing a contribution this rank awaits nobody for: with more ranks than cores,
 * give the core to a peer that may be waiting on it (see `hand_over_core`). */
static void after_publishing(Runner *r) {
    if (r->hand_over_core) {
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
}

/* Hand the call to Python's `slow(status, send, recv, seq, timeout, phase, confirm)`; a bound
 * call passes its sequence number as NULL and `r->hand_seq` (made an object only here). */
static PyObject *hand_over(Runner *r, int status, PyObject *const *args, long phase,
                           int confirm) {
    PyObject *flag = confirm ? Py_True : Py_False;
    if (args[2] == NULL)
        return PyObject_CallFunction(r->slow, "iOOLOlO", status, args[0], args[1], r->hand_seq,
                                     args[3], phase, flag);
    return PyObject_CallFunction(r->slow, "iOOOOlO", status, args[0], args[1], args[2], args[3],
                                 phase, flag);
}

/* Record that this rank's `slot` holds call `k`, which its `readers` must read (no allocation:
 * the readers' tuple is the runner's own, kept in the list only when it changes). */
static void occupy(Runner *r, int slot, uint64_t k) {
    r->occupant_calls[slot] = k;
    if (PyList_GET_ITEM(r->occupant, slot) != r->readers)
        PyList_SetItem(r->occupant, slot, Py_NewRef(r->readers)); /* steals the new ref */
}

/* Store this rank's word `word` for call `k` in `slot` (its contribution first, when it
 * copies one from `send`) and wake the peers that sleep. -1 on an error. */
static int publish(Runner *r, int slot, uint64_t k, uint64_t word, const char *send) {
    if (r->whead_len) {  /* an alltoallv's header and blocks */
        char *mine = r->base + r->my_data[slot];
        memcpy(mine, r->whead, r->whead_len);
        for (Py_ssize_t i = 0; i < r->nwrites; i++) {
            const Py_ssize_t *w = r->writes + 3 * i;
            copy_bytes(mine + w[2], send + w[0], w[1]);
        }
    } else if (r->skip_len && send != NULL) {  /* around the block nobody reads */
        char *mine = r->base + r->my_data[slot];
        Py_ssize_t after = r->skip_from + r->skip_len;
        copy_bytes(mine, send, r->skip_from);
        copy_bytes(mine + after, send + after, r->nbytes - after);
    } else if (r->nbytes && send != NULL)
        copy_bytes(r->base + r->my_data[slot], send,
                   r->write_prefix ? used_bytes(r, send, r->nbytes) : r->nbytes);
    if (r->store_fingerprint)
        store_word(r, r->my_fp[slot], r->fingerprint);
    store_word(r, r->my_held[slot], word);
    occupy(r, slot, k);
    wake_sleepers(r);
    return 0;
}

/* Tell the members this rank waited for in `slot` that it found call `k` there (a reader of
 * a root that confirms: the root may go on while this rank copies). No wake: a root asleep is
 * woken by the acknowledgement that follows. */
static void announce(Runner *r, int slot, uint64_t k) {
    Py_ssize_t *ack = r->ack + slot * r->nothers;
    for (Py_ssize_t i = 0; i < r->nothers; i++)
        store_word(r, ack[i], k | ARRIVED);
}

/* Tell the members this rank waited for in `slot` that it is done with call `k`. */
static void acknowledge(Runner *r, int slot, uint64_t k) {
    if (!r->nothers)
        return;
    Py_ssize_t *ack = r->ack + slot * r->nothers;
    for (Py_ssize_t i = 0; i < r->nothers; i++)
        store_word(r, ack[i], k);
    wake_sleepers(r);
}

/* Call `k` (held word `word`) in `slot`, which is free: publish this rank's contribution,
 * wait for the peers', read, acknowledge. Peers still late after `await_words` go to Python
 * (`hand_over` status 2, with `args`: send, recv, seq, timeout). A root that confirms waits
 * for its readers' arrivals only when `confirm` (else a phase that follows checks the root).
 * None, or NULL on an error. */
static PyObject *run_call(Runner *r, int slot, uint64_t k, uint64_t word, char *send,
                          char *recv, PyObject *const *args, long phase, int confirm) {
    if (r->publishes) {
        if (publish(r, slot, k, word, send) < 0)
            return NULL;
        if ((r->nothers == 0 || r->is_root) && PyTuple_GET_SIZE(r->readers) > 1)
            after_publishing(r);  /* a root whose readers all wait (not a gather's leaf) */
    }
    if (!await_words(r, r->held + slot * r->nothers, r->nothers, word))
        return hand_over(r, 2, args, phase, confirm);
    if (r->announces)
        announce(r, slot, k);
    if (!read_slots(r, slot, send, recv))
        return hand_over(r, 5, args, phase, confirm);  /* Python reads and acknowledges */
    acknowledge(r, slot, k);
    if (r->is_root && confirm && !await_arrivals(r, slot))
        return hand_over(r, 3, args, phase, 1);  /* Python waits for the readers' arrivals */
    return Py_NewRef(Py_None);
}

/* run(send, recv, seq, timeout[, phase[, confirm]]): one blocking call (see the module's
 * comment); `confirm` false: a root does not wait for its readers' arrivals. */
static PyObject *Runner_run(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "run(send, recv, seq, timeout[, phase[, confirm]])");
        return NULL;
    }
    long phase = 0;
    int confirm = 1;
    if (nargs == 6) {
        confirm = PyObject_IsTrue(args[5]);
        if (confirm < 0)
            return NULL;
    }
    if (nargs >= 5) {
        phase = PyLong_AsLong(args[4]);
        if (phase == -1 && PyErr_Occurred())
            return NULL;
        if (phase < 0 || phase > 7) {
            PyErr_SetString(PyExc_ValueError, "phase must be 0 to 7");
            return NULL;
        }
    }
    PyObject *inflight = PyObject_GetAttr(r->area, r->inflight_name);
    if (inflight == NULL)
        return NULL;
    int busy = PyObject_IsTrue(inflight);
    Py_DECREF(inflight);
    if (busy)
        return hand_over(r, 1, args, phase, confirm);
    long long seq = PyLong_AsLongLong(args[2]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    int slot = (int)((2 * seq + phase) % NSLOTS);
    uint64_t k = ((uint64_t)seq << 3) + (uint64_t)phase + 1;
    uint64_t word = (k << 24) | r->mix;
    char *send, *recv;
    Py_buffer sview, rview;
    int sheld, rheld;
    if (data_of(r, args[0], &send, &sview, &sheld) < 0)
        return NULL;
    if (data_of(r, args[1], &recv, &rview, &rheld) < 0) {
        if (sheld)
            PyBuffer_Release(&sview);
        return NULL;
    }
    PyObject *result = NULL;
    if (r->publishes && !await_slot(r, slot))
        result = hand_over(r, 1, args, phase, confirm);
    else
        result = run_call(r, slot, k, word, send, recv, args, phase, confirm);
    if (sheld)
        PyBuffer_Release(&sview);
    if (rheld)
        PyBuffer_Release(&rview);
    return result;
}

/* ---- a non-blocking call: published at once, finished later -----------------------------
 * `post` publishes this rank's contribution to call `seq` (phase 0) when it can do so
 * without waiting — nothing else of the area in flight, its slot free — as `run_call` first
 * does; `finish` then does the rest of `run_call` (wait for the peers' words, read,
 * acknowledge), without waiting (`block` false: False while a peer is late, nothing done) or
 * waiting as a blocking call does (late peers go to Python, `hand_over` status 2).
 */

/* Whether the `n` words at `index` hold `word` now (no wait). */
static int words_hold_now(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word,
                          uint64_t ignore) {
    awaited_words w = {r, index, n, 0, word, ignore};
    return words_hold(&w);
}

/* The slot, call number and held word of call `seq`, phase 0. */
static void call_words(Runner *r, long long seq, int *slot, uint64_t *k, uint64_t *word) {
    *slot = (int)((2 * seq) % NSLOTS);
    *k = ((uint64_t)seq << 3) + 1;
    *word = (*k << 24) | r->mix;
}

/* post(send, seq): True once this rank's contribution to call `seq` is published; False
 * (nothing done) while another direct call of the area is in flight or a reader of the slot
 * has not acknowledged the call it holds. */
static PyObject *Runner_post(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "post(send, seq)");
        return NULL;
    }
    PyObject *inflight = PyObject_GetAttr(r->area, r->inflight_name);
    if (inflight == NULL)
        return NULL;
    int busy = PyObject_IsTrue(inflight);
    Py_DECREF(inflight);
    if (busy)
        Py_RETURN_FALSE;
    long long seq = PyLong_AsLongLong(args[1]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    int slot;
    uint64_t k, word;
    call_words(r, seq, &slot, &k, &word);
    if (!r->publishes)
        Py_RETURN_TRUE;
    uint64_t held = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &held, words);
    if (n < 0 || !words_hold_now(r, words, n, held, 0))
        Py_RETURN_FALSE;
    char *send;
    Py_buffer view;
    int viewed;
    if (data_of(r, args[0], &send, &view, &viewed) < 0)
        return NULL;
    int status = publish(r, slot, k, word, send);
    if (viewed)
        PyBuffer_Release(&view);
    if (status < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* finish(send, recv, seq, timeout, block): the rest of a posted call `seq`. True once done
 * (or None after Python finished it: `hand_over`); False when `block` is false and a peer's
 * word is not there yet (nothing done). */
static PyObject *Runner_finish(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "finish(send, recv, seq, timeout, block)");
        return NULL;
    }
    int block = PyObject_IsTrue(args[4]);
    long long seq = PyLong_AsLongLong(args[2]);
    if (block < 0 || (seq == -1 && PyErr_Occurred()))
        return NULL;
    int slot;
    uint64_t k, word;
    call_words(r, seq, &slot, &k, &word);
    const Py_ssize_t *held = r->held + slot * r->nothers;
    if (!block) {
        if (!words_hold_now(r, held, r->nothers, word, 0))
            Py_RETURN_FALSE;
        if (r->is_root) {  /* a root's confirmation: not waited for here */
            uint64_t kk = 0;
            Py_ssize_t words[64], n = slot_readers(r, slot, &kk, words);
            if (n < 0 || !words_hold_now(r, words, n, kk, ARRIVED))
                Py_RETURN_FALSE;
        }
    } else if (!await_words(r, held, r->nothers, word))
        return hand_over(r, 2, args, 0, 1);
    char *send, *recv;
    Py_buffer sview, rview;
    int sheld, rheld;
    if (data_of(r, args[0], &send, &sview, &sheld) < 0)
        return NULL;
    if (data_of(r, args[1], &recv, &rview, &rheld) < 0) {
        if (sheld)
            PyBuffer_Release(&sview);
        return NULL;
    }
    PyObject *result = Py_NewRef(Py_True);
    if (r->announces)
        announce(r, slot, k);
    if (!read_slots(r, slot, send, recv)) {
        Py_DECREF(result);
        result = hand_over(r, 5, args, 0, 1);  /* Python reads and acknowledges */
    } else {
        acknowledge(r, slot, k);
        if (r->is_root && block && !await_arrivals(r, slot)) {
            Py_DECREF(result);
            result = hand_over(r, 3, args, 0, 1);
        }
    }
    if (sheld)
        PyBuffer_Release(&sview);
    if (rheld)
        PyBuffer_Release(&rview);
    return result;
}

/* ---- the bound broadcast ------------------------------------------------------------------
 * A broadcast's envelope carries the root's dtype and shape (see collops.runtime.comm). Once
 * a rank has made one such call, `bind_bcast` gives this runner the signature of its array
 * and the envelope header that goes with it; `bcast` then runs a whole call without the
 * interpreter: it checks the arrays, takes the communicator's next call number, and either
 * writes header and data straight into the root's slot, or reads the root's slot, and when
 * its header is the bound one copies the data straight into the result. Anything else
 * returns the `slow` marker before the call number is taken, or (a non-root whose root sent
 * another signature) leaves the envelope for the general path to parse and returns None.
 */
static int shape_of(PyObject *shape, int *nd, Py_ssize_t *dims);

/* Keep `counter` (a writable, contiguous int64 array of at least one element: the
 * communicator's next call number, which Python reads and advances too) as the number a bound
 * call takes; 0, or -1 with an exception set. */
static int bind_counter(Runner *r, PyObject *counter) {
    Py_buffer view;
    if (PyObject_GetBuffer(counter, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    int fits = view.itemsize == 8 && view.len >= 8 && view.format != NULL
               && (view.format[0] == 'q' || view.format[0] == 'l'
                   || ((view.format[0] == '<' || view.format[0] == '=' || view.format[0] == '@')
                       && (view.format[1] == 'q' || view.format[1] == 'l')));
    long long *calls = view.buf;
    PyBuffer_Release(&view);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "the call counter must be a writable int64 array");
        return -1;
    }
    Py_XSETREF(r->hot_counter, Py_NewRef(counter));
    r->calls = calls;
    return 0;
}

/* A scatterv root's `layout` (offsets, lengths, heads, x_bytes) for `blocks` blocks of
 * `block` bytes, checked (every block within x and within its slot block) and copied into
 * fresh arrays: 0, or -1 with an exception set. */
static int blocks_layout(Runner *r, PyObject *layout, Py_ssize_t blocks, Py_ssize_t block,
                         Py_ssize_t **offsets, Py_ssize_t **lengths, char **heads,
                         Py_ssize_t *x_bytes) {
    PyObject *offs, *lens;
    Py_buffer hv;
    if (!PyArg_ParseTuple(layout, "OOy*n", &offs, &lens, &hv, x_bytes))
        return -1;
    int ok = hv.len == blocks * r->prefix_head && *x_bytes >= 0;
    *offsets = ok ? int_array(offs, blocks, NULL, "layout offsets") : NULL;
    *lengths = *offsets ? int_array(lens, blocks, NULL, "layout lengths") : NULL;
    *heads = *lengths ? PyMem_Malloc(hv.len ? hv.len : 1) : NULL;
    if (*heads != NULL)
        memcpy(*heads, hv.buf, hv.len);
    for (Py_ssize_t j = 0; *heads != NULL && j < blocks; j++)
        ok = ok && (*lengths)[j] >= 0 && (*offsets)[j] >= 0
             && (*offsets)[j] + (*lengths)[j] <= *x_bytes
             && r->prefix_head + (*lengths)[j] <= block;
    PyBuffer_Release(&hv);
    if (*heads != NULL && ok)
        return 0;
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "bind_bcast: a layout of one block per rank, each "
                        "within x and its slot block, and their headers");
    PyMem_Free(*offsets);
    PyMem_Free(*lengths);
    PyMem_Free(*heads);
    *offsets = *lengths = NULL;
    *heads = NULL;
    return -1;
}

/* bind_bcast(counter, env, dtype, shape, nbytes, head, slow, alloc[, out_shape, blocks, block,
 * own, layout]): a scatter's envelope has `blocks` blocks `block` bytes apart, each a header and
 * `nbytes` of data, and the root's result (of `out_shape`) starts at byte `own` of its x. A
 * scatterv root's `layout` is (offsets, lengths, heads, x_bytes): block j holds lengths[j]
 * bytes from byte offsets[j] of its x (of x_bytes) under the header heads[j * len(head):];
 * its own result is then `nbytes` from `own`. */
static PyObject *Runner_bind_bcast(Runner *r, PyObject *args) {
    PyObject *counter, *env, *descr, *shape, *slow, *alloc, *out_shape = Py_None;
    PyObject *layout = Py_None;
    Py_ssize_t nbytes, blocks = 1, block = 0, own = 0;
    Py_buffer head;
    if (!PyArg_ParseTuple(args, "OOOO!ny*OO|OnnnO", &counter, &env, &descr, &PyTuple_Type,
                          &shape, &nbytes, &head, &slow, &alloc, &out_shape, &blocks, &block,
                          &own, &layout))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t *offsets = NULL, *lengths = NULL, x_bytes = nbytes * blocks;
    char *heads = NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    ArrayFields *e = (ArrayFields *)env;
    if ((PyObject *)Py_TYPE(env) != r->ndarray || e->nd != 1 || !(e->flags & NPY_C_CONTIGUOUS)
        || !(e->flags & NPY_WRITEABLE) || e->dimensions[0] < r->prefix_head + nbytes) {
        PyErr_SetString(PyExc_ValueError, "bind_bcast: env must be a writable byte envelope "
                        "holding the header and the data");
        goto done;
    }
    if (r->prefix_head <= 0 || head.len != r->prefix_head || head.len > HOT_HEAD_MAX
        || nd > HOT_MAX_DIMS || nbytes < 0) {
        PyErr_SetString(PyExc_ValueError, "bind_bcast: a header of the envelope's length and "
                        "at most 8 dimensions");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        r->hot_dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (r->hot_dims[i] == -1 && PyErr_Occurred())
            goto done;
    }
    r->hot_nd = (int)nd;
    r->hot_nbytes = nbytes;
    if (out_shape == Py_None) {
        r->hot_out_nd = r->hot_nd;
        memcpy(r->hot_out_dims, r->hot_dims, sizeof r->hot_dims);
    } else if (shape_of(out_shape, &r->hot_out_nd, r->hot_out_dims) < 0)
        goto done;
    if (blocks < 1 || (blocks > 1 && block < r->prefix_head + nbytes) || own < 0) {
        PyErr_SetString(PyExc_ValueError, "bind_bcast: blocks must hold a header and the data");
        goto done;
    }
    if (layout != Py_None && blocks_layout(r, layout, blocks, block, &offsets, &lengths,
                                           &heads, &x_bytes) < 0)
        goto done;
    if (bind_counter(r, counter) < 0)
        goto done;
    r->hot_blocks = blocks;
    r->hot_block = block;
    r->hot_own = own;
    r->hot_x_bytes = x_bytes;
    PyMem_Free(r->hot_offsets);
    PyMem_Free(r->hot_lengths);
    PyMem_Free(r->hot_heads);
    r->hot_offsets = offsets;
    r->hot_lengths = lengths;
    r->hot_heads = heads;
    offsets = lengths = NULL;
    heads = NULL;
    memcpy(r->hot_head, head.buf, head.len);
    Py_XSETREF(r->hot_descr, Py_NewRef(descr));
    Py_XSETREF(r->hot_env, Py_NewRef(env));
    Py_XSETREF(r->hot_slow, Py_NewRef(slow));
    Py_XSETREF(r->hot_alloc, Py_NewRef(alloc));
    r->hot_bound = 1;
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(offsets);
    PyMem_Free(lengths);
    PyMem_Free(heads);
    PyBuffer_Release(&head);
    return result;
}

/* Whether `o` is an ndarray of the bound dtype and of shape `dims`, C-contiguous (and
 * writeable). */
static int array_fits(Runner *r, PyObject *o, int nd, const Py_ssize_t *dims, int writeable) {
    if ((PyObject *)Py_TYPE(o) != r->ndarray)
        return 0;
    ArrayFields *a = (ArrayFields *)o;
    if (a->descr != r->hot_descr || a->nd != nd || !(a->flags & NPY_C_CONTIGUOUS)
        || (writeable && !(a->flags & NPY_WRITEABLE)))
        return 0;
    for (int i = 0; i < nd; i++)
        if (a->dimensions[i] != dims[i])
            return 0;
    return 1;
}

/* Whether `o` is an ndarray of the bound signature, C-contiguous (and writeable). */
static int bound_array(Runner *r, PyObject *o, int writeable) {
    return array_fits(r, o, r->hot_nd, r->hot_dims, writeable);
}

/* Copy a shape tuple into `dims` (at most HOT_MAX_DIMS); -1 with an exception on failure. */
static int shape_of(PyObject *shape, int *nd, Py_ssize_t *dims) {
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > HOT_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "a shape of at most 8 dimensions");
        return -1;
    }
    *nd = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < *nd; i++) {
        dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (dims[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}


/* Take call number `seq`: the counter the communicator shares with this runner moves on. */
static inline void take_call(Runner *r, long long seq) {
    *r->calls = seq + 1;
}

/* Whether a bound entry point got its 3 arguments and the runner is bound (else an error). */
static int bound_usage(Runner *r, Py_ssize_t nargs, const char *usage) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(x, out, timeout)", usage);
        return 0;
    }
    if (!r->hot_bound) {
        PyErr_Format(PyExc_RuntimeError, "%s: nothing bound", usage);
        return 0;
    }
    return 1;
}

/* The communicator's next call number, read from the shared counter, in `*seq` (and in
 * `r->hand_seq`, for `hand_over`): 1; 0 when a direct call of this area is in flight (the
 * bound path then stays out); -1 with an exception set. */
static int next_seq(Runner *r, long long *seq) {
    PyObject *inflight = PyObject_GetAttr(r->area, r->inflight_name);
    if (inflight == NULL)
        return -1;
    int busy = PyObject_IsTrue(inflight);
    Py_DECREF(inflight);
    if (busy)
        return 0;
    *seq = r->hand_seq = *r->calls;
    return 1;
}

/* Hand a bound broadcast's reader to Python's `slow` with `status`, the envelope as its
 * recv: 0, or -1 with an exception set and `into` released. */
static int reader_slowly(Runner *r, int status, PyObject *timeout, PyObject *into) {
    PyObject *hand[4] = {Py_None, r->hot_env, NULL, timeout};
    PyObject *done_slowly = hand_over(r, status, hand, 0, 1);
    if (done_slowly == NULL) {
        Py_DECREF(into);
        return -1;
    }
    Py_DECREF(done_slowly);
    return 0;
}

/* bcast(x, out, timeout): a whole bound broadcast (see above). */
static PyObject *Runner_bcast(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (!bound_usage(r, nargs, "bcast"))
        return NULL;
    PyObject *x = args[0], *out = args[1], *timeout = args[2];
    Py_ssize_t n = r->hot_nbytes, head = r->prefix_head, all = r->hot_x_bytes;
    int out_fits = out != Py_None && array_fits(r, out, r->hot_out_nd, r->hot_out_dims, 1);
    if (r->is_root) {
        if (!bound_array(r, x, 0))
            return Py_NewRef(r->hot_slow);
        if (out != Py_None && (out != x || r->hot_blocks != 1)) {
            if (!out_fits)
                return Py_NewRef(r->hot_slow);
            char *xd = ((ArrayFields *)x)->data, *od = ((ArrayFields *)out)->data;
            if (od + n > xd && xd + all > od && od != xd + r->hot_own)
                return Py_NewRef(r->hot_slow);  /* overlapping: the general path copies */
        }
    } else if (out != Py_None && !out_fits) {
        return Py_NewRef(r->hot_slow);
    }
    long long seq = 0;
    int go = next_seq(r, &seq);
    if (go <= 0)
        return go < 0 ? NULL : Py_NewRef(r->hot_slow);
    int slot = (int)((2 * seq) % NSLOTS);
    uint64_t k = ((uint64_t)seq << 3) + 1;
    uint64_t word = (k << 24) | r->mix;
    PyObject *result = NULL, *mine = NULL;
    if (r->is_root) {
        if (!(out == x && r->hot_blocks == 1)) {  /* not in place: the root's result array */
            mine = out == Py_None ? PyObject_CallNoArgs(r->hot_alloc) : Py_NewRef(out);
            if (mine == NULL)
                goto done;
            if (!array_fits(r, mine, r->hot_out_nd, r->hot_out_dims, 1)) {
                Py_CLEAR(mine);  /* a dtype numpy does not keep as one object */
                result = Py_NewRef(r->hot_slow);
                goto done;
            }
        }
        if (!await_slot(r, slot)) {  /* a reader is one call behind: give it a moment */
            Py_XDECREF(mine);
            result = Py_NewRef(r->hot_slow);
            goto done;
        }
        take_call(r, seq);
        char *xd = ((ArrayFields *)x)->data, *dst = r->base + r->my_data[slot];
        if (r->hot_offsets != NULL)  /* a scatterv's: each block its header, length, place */
            for (Py_ssize_t j = 0; j < r->hot_blocks; j++, dst += r->hot_block) {
                memcpy(dst, r->hot_heads + j * head, head);
                copy_bytes(dst + head, xd + r->hot_offsets[j], r->hot_lengths[j]);
            }
        else
            for (Py_ssize_t j = 0; j < r->hot_blocks; j++, dst += r->hot_block) {
                memcpy(dst, r->hot_head, head);
                copy_bytes(dst + head, xd + j * n, n);
            }
        if (r->store_fingerprint)
            store_word(r, r->my_fp[slot], r->fingerprint);
        store_word(r, r->my_held[slot], word);
        occupy(r, slot, k);
        wake_sleepers(r);
        after_publishing(r);
        /* every reader found the call: ranks that disagree on the root meet here */
        if (!await_arrivals(r, slot)) {
            PyObject *hand[4] = {Py_None, Py_None, NULL, timeout};
            PyObject *done_slowly = hand_over(r, 3, hand, 0, 1);
            if (done_slowly == NULL) {
                Py_XDECREF(mine);
                goto done;
            }
            Py_DECREF(done_slowly);
        }
        if (mine == NULL)  /* in place, as MPI_Bcast's root */
            result = Py_NewRef(x);
        else {
            if (((ArrayFields *)mine)->data != xd + r->hot_own)
                copy_bytes(((ArrayFields *)mine)->data, xd + r->hot_own, n);
            result = mine;
        }
        goto done;
    }
    PyObject *into = out == Py_None ? PyObject_CallNoArgs(r->hot_alloc) : Py_NewRef(out);
    if (into == NULL)
        goto done;
    if (!array_fits(r, into, r->hot_out_nd, r->hot_out_dims, 1)) {  /* another dtype object */
        Py_DECREF(into);
        result = Py_NewRef(r->hot_slow);
        goto done;
    }
    take_call(r, seq);
    Py_ssize_t held = r->held[slot * r->nothers];
    const char *src = r->base + r->src[slot * r->npieces];
    char *env = ((ArrayFields *)r->hot_env)->data;
    int late = !await_words(r, &held, 1, word);
    if (late) {  /* Python waits, reads the envelope into env and acknowledges */
        if (reader_slowly(r, 2, timeout, into) < 0)
            goto done;
        src = env;
    }
    if (!late && r->announces)
        announce(r, slot, k);
    int same = memcmp(src, r->hot_head, head) == 0;
    if (same)
        copy_bytes(((ArrayFields *)into)->data, src + head, n);
    else if (!late)
        copy_bytes(env, src, used_bytes(r, src, ((ArrayFields *)r->hot_env)->dimensions[0]));
    if (!late)
        acknowledge(r, slot, k);
    if (same)
        result = into;
    else {
        Py_DECREF(into);
        result = Py_NewRef(Py_None);  /* another signature: the general path parses env */
    }
done:
    return result;
}

/* ---- the bound call ----------------------------------------------------------------------
 * The same for the single-phase calls `Comm._fast` runs (barrier, allreduce, allgather,
 * alltoall, reduce, gather, reduce_scatter_block, scan): `bind_call` gives the runner the
 * signature of the rank's send array and of its result; `call` checks the arrays against it,
 * takes the call number and runs the call, or returns the `slow` marker before taking it.
 */

/* bind_call(counter, dtype, itemsize, shape, out_shape, slow, alloc); out_shape None: this
 * rank gets no result */
static PyObject *Runner_bind_call(Runner *r, PyObject *args) {
    PyObject *counter, *descr, *shape, *out_shape, *slow, *alloc;
    Py_ssize_t itemsize;
    if (!PyArg_ParseTuple(args, "OOnOOOO", &counter, &descr, &itemsize, &shape, &out_shape,
                          &slow, &alloc))
        return NULL;
    int nd, out_nd = 0;
    Py_ssize_t dims[HOT_MAX_DIMS], out_dims[HOT_MAX_DIMS];
    if (shape_of(shape, &nd, dims) < 0
        || (out_shape != Py_None && shape_of(out_shape, &out_nd, out_dims) < 0)
        || bind_counter(r, counter) < 0)
        return NULL;
    r->hot_nd = nd;
    memcpy(r->hot_dims, dims, sizeof dims);
    r->hot_receives = out_shape != Py_None;
    r->hot_itemsize = itemsize;
    r->hot_out_nd = out_nd;
    memcpy(r->hot_out_dims, out_dims, sizeof out_dims);
    Py_XSETREF(r->hot_descr, Py_NewRef(descr));
    Py_XSETREF(r->hot_slow, Py_NewRef(slow));
    Py_XSETREF(r->hot_alloc, Py_NewRef(alloc));
    r->hot_bound = 1;
    Py_RETURN_NONE;
}

/* Whether this rank copies its whole `x` into its slot before it writes any result and
 * reads every result from the slots (folds and copies, nothing from `x`): then `out` may be
 * `x` or overlap it (MPI_IN_PLACE), as `collops.shm.direct.IN_PLACE` says. */
static int reads_slots_only(const Runner *r) {
    return r->publishes && !r->skip_len && !r->whead_len && !r->write_prefix
           && (r->read_kind == READ_COPY || r->read_kind == READ_REDUCE
               || r->read_kind == READ_NONE);
}

/* call(x, out, timeout): a whole bound call (its result, None, or the slow marker); `out`
 * may overlap `x` when the runner `reads_slots_only`. */
static PyObject *Runner_call(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (!bound_usage(r, nargs, "call"))
        return NULL;
    PyObject *x = args[0], *out = args[1], *timeout = args[2];
    if (!bound_array(r, x, 0))
        return Py_NewRef(r->hot_slow);
    char *send = ((ArrayFields *)x)->data, *recv = NULL;
    PyObject *into = NULL;
    if (r->hot_receives) {
        if (out == Py_None) {
            into = PyObject_CallNoArgs(r->hot_alloc);
            if (into == NULL)
                return NULL;
            if (!array_fits(r, into, r->hot_out_nd, r->hot_out_dims, 1)) {
                Py_DECREF(into);
                return Py_NewRef(r->hot_slow);
            }
        } else {
            if (!array_fits(r, out, r->hot_out_nd, r->hot_out_dims, 1))
                return Py_NewRef(r->hot_slow);
            if (!reads_slots_only(r)) {
                Py_ssize_t n = 1, m = 1;
                for (int i = 0; i < r->hot_nd; i++)
                    n *= r->hot_dims[i];
                for (int i = 0; i < r->hot_out_nd; i++)
                    m *= r->hot_out_dims[i];
                char *o = ((ArrayFields *)out)->data;
                Py_ssize_t item = r->hot_itemsize;
                if (o < send + n * item && send < o + m * item)
                    return Py_NewRef(r->hot_slow);  /* overlapping: the general path copes */
            }
            into = Py_NewRef(out);
        }
        recv = ((ArrayFields *)into)->data;
    }
    PyObject *result = NULL;
    long long seq = 0;
    int go = next_seq(r, &seq);
    if (go <= 0) {
        result = go < 0 ? NULL : Py_NewRef(r->hot_slow);
        goto done;
    }
    int slot = (int)((2 * seq) % NSLOTS);
    uint64_t k = ((uint64_t)seq << 3) + 1;
    if (r->publishes && !await_slot(r, slot)) {  /* a reader is one call behind */
        result = Py_NewRef(r->hot_slow);
        goto done;
    }
    take_call(r, seq);
    PyObject *hand[4] = {x, into ? into : Py_None, NULL, timeout};
    PyObject *ran = run_call(r, slot, k, (k << 24) | r->mix, send, recv, hand, 0, 1);
    if (ran == NULL)
        goto done;
    Py_DECREF(ran);
    result = into ? Py_NewRef(into) : Py_NewRef(Py_None);
done:
    Py_XDECREF(into);
    return result;
}

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

static PyObject *fold_into(PyObject *self, PyObject *args) {
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
static PyObject *combine_into(PyObject *self, PyObject *args) {
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
        || PyModule_AddIntConstant(m, "READ_REDUCE", READ_REDUCE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
