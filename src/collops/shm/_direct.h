/* collops.shm._direct's shared declarations: the runner's state (`Runner`), its words,
 * and what one part of the extension calls in another (`_direct.c` has the module and
 * the essay; `_direct_runner.c` a blocking call; `_direct_posted.c` a non-blocking one;
 * `_direct_bound.c` the bound whole calls; `_direct_fold.c` the reductions' entry points;
 * the kernels are in `_kernels.c`). */
#ifndef COLLOPS_SHM_DIRECT_H
#define COLLOPS_SHM_DIRECT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <sched.h>

#include "_numpy_head.h"
#include "_shm_wait.h"
#include "_kernels.h"

#define NSLOTS 4
/* or-ed into an acknowledgement word by a reader that found the call and is still copying
 * (`direct_area.ARRIVED`): enough for a root's confirmation, not for reusing the slot */
#define ARRIVED (1ULL << 62)
/* occupant_calls' entry after the slots': the call whose readers' arrivals a root left to
 * check at its next call (0: none; `direct_area.Occupancy.deferred`) */
#define DEFERRED NSLOTS
#define HOT_MAX_DIMS 8
#define HOT_HEAD_MAX 256

enum { READ_NONE = 0, READ_COPY = 1, READ_SELF = 2, READ_REDUCE = 3, READ_TABLE = 4 };
/* an alltoallv header's flag (`direct_alltoallv.ANY_LENGTH`): its writer takes whatever
 * length each of its writers sends it (a gatherv root given no counts) */
enum { HEAD_ANY_LENGTH = 4 };


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
    int defers;                 /* such a root may leave the confirmation to its next call
                                 * (`shm.direct.root_defers`): the call number it left goes
                                 * to occupant_calls[DEFERRED], which every runner of the
                                 * area settles before its next call (`area_busy`) */
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

/* internal to the extension: not exported from its shared object */
#define DIRECT_INTERNAL __attribute__((visibility("hidden")))


/* The words `index[i..n)` a runner waits for to hold `word`, the bits of `ignore` left out
 * (`words_hold`). */
typedef struct {
    Runner *r;
    const Py_ssize_t *index;
    Py_ssize_t n, i;
    uint64_t word, ignore;
} awaited_words;

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

DIRECT_INTERNAL PyObject *Runner_bcast(Runner *r, PyObject *const *args, Py_ssize_t nargs);
DIRECT_INTERNAL PyObject *Runner_bind_bcast(Runner *r, PyObject *args);
DIRECT_INTERNAL PyObject *Runner_bind_call(Runner *r, PyObject *args);
DIRECT_INTERNAL PyObject *Runner_call(Runner *r, PyObject *const *args, Py_ssize_t nargs);
DIRECT_INTERNAL void Runner_dealloc(Runner *r);
DIRECT_INTERNAL PyObject *Runner_finish(Runner *r, PyObject *const *args, Py_ssize_t nargs);
DIRECT_INTERNAL int Runner_init(Runner *r, PyObject *args, PyObject *kw);
DIRECT_INTERNAL PyObject *Runner_post(Runner *r, PyObject *const *args, Py_ssize_t nargs);
DIRECT_INTERNAL PyObject *Runner_run(Runner *r, PyObject *const *args, Py_ssize_t nargs);
/* a call's send and recv data, and the buffer views held for them (`pair_of`) */
typedef struct {
    char *send, *recv;
    Py_buffer sview, rview;
    int sheld, rheld;
} Pair;

DIRECT_INTERNAL int pair_of(Runner *r, PyObject *send, PyObject *recv, Pair *p);
DIRECT_INTERNAL void pair_release(Pair *p);
DIRECT_INTERNAL int area_busy(Runner *r);
DIRECT_INTERNAL int all_arrived(Runner *r, int slot);
DIRECT_INTERNAL void acknowledge(Runner *r, int slot, uint64_t k);
DIRECT_INTERNAL void after_publishing(Runner *r);
DIRECT_INTERNAL void announce(Runner *r, int slot, uint64_t k);
DIRECT_INTERNAL int await_arrivals(Runner *r, int slot);
DIRECT_INTERNAL int await_slot(Runner *r, int slot);
DIRECT_INTERNAL int await_words(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word);
DIRECT_INTERNAL PyObject *combine_into(PyObject *self, PyObject *args);
DIRECT_INTERNAL int data_of(Runner *r, PyObject *o, char **data, Py_buffer *view, int *held);
DIRECT_INTERNAL PyObject *fold_into(PyObject *self, PyObject *args);
DIRECT_INTERNAL PyObject *hand_over(Runner *r, int status, PyObject *const *args, long phase, int confirm);
DIRECT_INTERNAL Py_ssize_t *int_array(PyObject *seq, Py_ssize_t expect, Py_ssize_t *got, const char *what);
DIRECT_INTERNAL void occupy(Runner *r, int slot, uint64_t k);
DIRECT_INTERNAL int publish(Runner *r, int slot, uint64_t k, uint64_t word, const char *send);
DIRECT_INTERNAL int read_slots(Runner *r, int slot, char *send, char *recv);
DIRECT_INTERNAL PyObject *run_call(Runner *r, int slot, uint64_t k, uint64_t word, char *send, char *recv, PyObject *const *args, long phase, int confirm);
DIRECT_INTERNAL Py_ssize_t slot_readers(Runner *r, int slot, uint64_t *k, Py_ssize_t *words);
DIRECT_INTERNAL void wake_sleepers(Runner *r);
DIRECT_INTERNAL int words_hold(void *ctx);

#endif /* COLLOPS_SHM_DIRECT_H */
