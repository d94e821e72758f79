/* collops.shm._stream's shared parts: the segment's words a plan reads, the plan's record and
 * its atomic accessors (the essay is at the top of _stream.c). */
#ifndef COLLOPS_SHM_STREAM_H
#define COLLOPS_SHM_STREAM_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "_shm_wait.h"
#include "_stream_copy.h"
#include "_kernels.h"

enum { H_SEQ = 0, H_CALL, H_FP, H_MASK, H_OFFSET, H_NBYTES, H_SOURCE };
/* MOVED: or-ed in when anything moved */
enum { DONE = 0, STUCK = 1, FOREIGN = 2, FAILED = 3, MOVED = 4 };
/* state words of one call; S_OWN: where a folding rank's own contribution is when not in the
 * send buffer (0: there; a copy of it when the result overwrites it); after S_RECEIVED: one
 * per writer row (bytes received), then one per world rank (the reference chunk + 1 that
 * reader must drain past, 0: none) */
enum { S_WRITTEN = 0, S_SELF, S_FOREIGN_WRITER, S_FOREIGN_CALL, S_FOREIGN_FP, S_BLOCKED_ON,
       S_FAILED_WRITER, S_ERRNO, S_OWN, S_RECEIVED };
/* columns of a write row and of a writer row */
enum { W_SRC = 0, W_NBYTES, W_MASK, W_OFFSET, W_REFERENCE, W_COLS };
/* W_REFERENCE: the bytes are copied into the ring, or published where they are — in the send
 * buffer, or in the receive buffer once the rank's own block is copied there (an allgather's:
 * the readers' destinations then sit at the same page offsets as the source when the ranks
 * allocated alike, which keeps the kernel's copy out of its aliased slow case). IN_OWN: an
 * allgather's own block, from the buffer the selection table names (`own_from`, given by
 * Python) unless the reader's destination — where this rank's own copy goes, if the ranks
 * allocated alike — would be aliased with the send buffer; then from the receive buffer.
 * W_SRC is then the send buffer's offset. */
enum { IN_RING = 0, IN_SEND = 1, IN_RECV = 2, IN_OWN = 3 };
/* R_PID: the segment word holding the writer's process id (read when needed: a peer may
 * publish it after this rank's first plan was made) */
enum { R_RANK = 0, R_FILLED, R_HEADERS, R_RING, R_DRAINED, R_DST, R_EXPECT, R_PID, R_COLS };

typedef struct {
    PyObject_HEAD
    Py_buffer segment, cursors, writes, drained_of_me, writers;
    int held;                   /* how many of the buffers above are held */
    char *base;
    int64_t *cursor;            /* [world rank]: this rank's cursor on each ring; [size]: filled */
    Py_ssize_t size;            /* world ranks */
    int64_t me, nchunks, chunk_bytes;
    int64_t my_filled, my_headers, my_ring;   /* word index, byte offsets */
    const int64_t *write;       /* [nwrites][W_COLS] */
    Py_ssize_t nwrites;
    const int64_t *drained;     /* [world rank]: word where that reader counts my chunks */
    const int64_t *writer;      /* [nwriters][R_COLS] */
    Py_ssize_t nwriters;
    int64_t self_src, self_dst, self_len, self_piece;
    int streaming;              /* copy into the receive buffer bypassing the cache */
    int by_reference;           /* some write rows are references: copy the own block whole */
    int own_from;               /* IN_OWN rows' source unless aliased: IN_SEND or IN_RECV */
    Py_ssize_t nsleepers;
    Py_ssize_t *sleeper_word;
    long *sleeper_rank;
    PyObject *wake;
    Py_ssize_t nroll;           /* the roll call's words this rank waits for (0: none) */
    int64_t *roll_word;         /* their first word indices (plus the call's slot) */
    int64_t roll_slots;
    /* a rank that folds as it reads (see _stream.c): the operator and dtype codes (-1: it
     * copies), the position of each writer row in the fold and of its own block, and the
     * writer row at each position (-1: the own block) */
    int fold_op, fold_dtype;
    Py_ssize_t nparts;
    int64_t *row_position, *position_row, own_position;
} Plan;

static inline uint64_t load_acq(Plan *p, int64_t index) {
    return shm_load(p->base, index);
}
static inline uint64_t load_relaxed(Plan *p, int64_t index) {
    return shm_load_relaxed(p->base, index);
}
static inline void store_rel(Plan *p, int64_t index, uint64_t v) {
    shm_store(p->base, index, v);
}

/* _stream_plan.c: a plan made from Python's tables, and released */
STREAM_INTERNAL int Plan_init(Plan *p, PyObject *args, PyObject *kw);
STREAM_INTERNAL void Plan_dealloc(Plan *p);

#endif /* COLLOPS_SHM_STREAM_H */
