/* collops.shm._stream: a plan made from the tables Python works out (`stream_plan.py`), and
 * released (the essay is at the top of _stream.c). */
#include "_stream.h"

STREAM_INTERNAL void Plan_dealloc(Plan *p) {
    Py_buffer *bufs[] = {&p->segment, &p->cursors, &p->writes, &p->drained_of_me, &p->writers};
    for (int i = 0; i < p->held; i++)
        PyBuffer_Release(bufs[i]);
    PyMem_Free(p->sleeper_word);
    PyMem_Free(p->sleeper_rank);
    PyMem_Free(p->roll_word);
    PyMem_Free(p->row_position);
    PyMem_Free(p->position_row);
    Py_XDECREF(p->wake);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static int hold(Plan *p, PyObject *o, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(o, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                             : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    p->held++;
    if (view->len % 8) {
        PyErr_Format(PyExc_ValueError, "%s must hold 64-bit integers", what);
        return -1;
    }
    return 0;
}

/* A folding rank's fold: `order` names the writer row at each position (-1: the own block),
 * every row once; the chunks must hold whole items. */
static int fold_of(Plan *p, int op, int dtype, PyObject *order) {
    if (op > OP_BXOR || dtype < DT_I1 || dtype > DT_F8 || order == NULL
        || p->chunk_bytes % itemsize_of[dtype]) {
        PyErr_SetString(PyExc_ValueError, "fold needs known codes, fold_order and chunks of "
                                          "whole items");
        return -1;
    }
    PyObject *fo = PySequence_Fast(order, "fold_order");
    if (fo == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fo);
    p->nparts = n;
    p->position_row = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    p->row_position = PyMem_Calloc(p->nwriters ? p->nwriters : 1, sizeof(int64_t));
    int bad = n != p->nwriters + 1 || p->position_row == NULL || p->row_position == NULL;
    Py_ssize_t owns = 0;
    for (Py_ssize_t i = 0; i < p->nwriters && !bad; i++)
        p->row_position[i] = -1;
    for (Py_ssize_t j = 0; j < n && !bad; j++) {
        int64_t row = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fo, j));
        p->position_row[j] = row;
        if (row < 0) {
            owns++;
            p->own_position = j;
        } else if (row >= p->nwriters || p->row_position[row] >= 0) {
            bad = 1;
        } else {
            p->row_position[row] = j;
        }
    }
    Py_DECREF(fo);
    if (PyErr_Occurred())
        return -1;
    if (bad || owns != 1) {
        PyErr_SetString(PyExc_ValueError, "fold_order must name each writer row once and the "
                                          "own block (-1) once");
        return -1;
    }
    p->fold_op = op;
    p->fold_dtype = dtype;
    return 0;
}

STREAM_INTERNAL int Plan_init(Plan *p, PyObject *args, PyObject *kw) {
    static char *names[] = {
        "segment", "cursors", "me", "nchunks", "chunk_bytes", "my_filled", "my_headers",
        "my_ring", "writes", "drained_of_me", "writers", "self_copy", "sleeper_words",
        "sleeper_ranks", "wake", "streaming", "own_from", "roll_words", "roll_slots", "fold",
        "fold_order", NULL};
    PyObject *segment, *cursors, *writes, *drained, *writers, *sleeper_words, *sleeper_ranks;
    PyObject *wake, *roll_words = NULL, *fold_order = NULL;
    int fold_op = -1, fold_dtype = -1;
    long long me, nchunks, chunk_bytes, my_filled, my_headers, my_ring;
    long long self_src, self_dst, self_len, roll_slots = 0;
    int streaming = 0, own_from = IN_SEND;
    if (p->held) {
        PyErr_SetString(PyExc_RuntimeError, "a Plan is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOLLLLLLOOO(LLL)OOO|piOL(ii)O", names, &segment,
                                     &cursors, &me, &nchunks, &chunk_bytes, &my_filled,
                                     &my_headers, &my_ring, &writes, &drained, &writers,
                                     &self_src, &self_dst, &self_len, &sleeper_words,
                                     &sleeper_ranks, &wake, &streaming, &own_from,
                                     &roll_words, &roll_slots, &fold_op, &fold_dtype,
                                     &fold_order))
        return -1;
    if (own_from != IN_SEND && own_from != IN_RECV) {
        PyErr_SetString(PyExc_ValueError, "own_from must be IN_SEND (1) or IN_RECV (2)");
        return -1;
    }
    if (hold(p, segment, &p->segment, 1, "segment") < 0
        || hold(p, cursors, &p->cursors, 1, "cursors") < 0
        || hold(p, writes, &p->writes, 0, "writes") < 0
        || hold(p, drained, &p->drained_of_me, 0, "drained_of_me") < 0
        || hold(p, writers, &p->writers, 0, "writers") < 0)
        return -1;
    p->base = p->segment.buf;
    p->cursor = p->cursors.buf;
    p->size = p->cursors.len / 8 - 1;
    if (p->drained_of_me.len / 8 != p->size || p->writes.len % (8 * W_COLS)
        || p->writers.len % (8 * R_COLS) || nchunks <= 0 || chunk_bytes <= 0 || me < 0
        || me >= p->size || p->size > 64) {
        PyErr_SetString(PyExc_ValueError, "inconsistent stream plan");
        return -1;
    }
    p->me = me;
    p->nchunks = nchunks;
    p->chunk_bytes = chunk_bytes;
    p->my_filled = my_filled;
    p->my_headers = my_headers;
    p->my_ring = my_ring;
    p->write = p->writes.buf;
    p->nwrites = p->writes.len / (8 * W_COLS);
    p->drained = p->drained_of_me.buf;
    p->writer = p->writers.buf;
    p->nwriters = p->writers.len / (8 * R_COLS);
    p->self_src = self_src;
    p->self_dst = self_dst;
    p->self_len = self_len;
    p->self_piece = chunk_bytes;
    p->streaming = streaming;
    p->own_from = own_from;
    for (Py_ssize_t i = 0; i < p->nwrites; i++) {
        if (p->write[W_COLS * i + W_REFERENCE] != IN_RING)
            p->by_reference = 1;
    }
    PyObject *fw = PySequence_Fast(sleeper_words, "sleeper_words");
    if (fw == NULL)
        return -1;
    PyObject *fr = PySequence_Fast(sleeper_ranks, "sleeper_ranks");
    if (fr == NULL) {
        Py_DECREF(fw);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fw);
    int bad = PySequence_Fast_GET_SIZE(fr) != n;
    p->sleeper_word = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    p->sleeper_rank = PyMem_Calloc(n ? n : 1, sizeof(long));
    for (Py_ssize_t i = 0; !bad && i < n; i++) {
        p->sleeper_word[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fw, i));
        p->sleeper_rank[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fr, i));
    }
    Py_DECREF(fw);
    Py_DECREF(fr);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "one sleeper rank per sleeper word");
        return -1;
    }
    if (PyErr_Occurred())
        return -1;
    p->nsleepers = n;
    p->wake = Py_NewRef(wake);
    if (roll_words != NULL) {
        PyObject *fr = PySequence_Fast(roll_words, "roll_words");
        if (fr == NULL)
            return -1;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(fr);
        p->roll_word = PyMem_Calloc(m ? m : 1, sizeof(int64_t));
        for (Py_ssize_t i = 0; i < m; i++)
            p->roll_word[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fr, i));
        Py_DECREF(fr);
        if (PyErr_Occurred())
            return -1;
        if (m && roll_slots <= 0) {
            PyErr_SetString(PyExc_ValueError, "roll_words need roll_slots > 0");
            return -1;
        }
        p->nroll = m;
        p->roll_slots = roll_slots;
    }
    p->fold_op = -1;
    if (fold_op >= 0)
        return fold_of(p, fold_op, fold_dtype, fold_order);
    return 0;
}
