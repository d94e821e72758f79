/* collops.shm._direct: one blocking call of a runner (see _direct.c). */
#include "_direct.h"

/* ---- the runner ------------------------------------------------------------------------ */

void Runner_dealloc(Runner *r) {
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
Py_ssize_t *int_array(PyObject *seq, Py_ssize_t expect, Py_ssize_t *got, const char *what) {
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

int Runner_init(Runner *r, PyObject *args, PyObject *kw) {
    static char *names[] = {
        "segment", "ndarray", "area", "occupant", "own_pending", "readers", "slow", "wake",
        "publishes", "nbytes", "fingerprint", "mix", "my_held", "my_fp", "my_data",
        "held", "ack", "ack_of_me", "sleeper_words", "sleeper_ranks", "read_kind",
        "src", "dst", "len", "self_copy", "count", "op", "dtype", "spin_seconds",
        "store_fingerprint", "prefix_at", "prefix_head", "write_prefix", "yield_seconds",
        "hand_over_core", "local_words", "is_root", "announces", "head", "writes", "back",
        "table", "slot_bytes", "occupant_calls", "skip", "defers", NULL};
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
    int defers = 0;
    Py_ssize_t prefix_at = -1, prefix_head = 0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OOOO!O!O!OOpnKKOOOOOOOOiOOOOniid|pnnpdpOppy*OOOnO(nn)p", names, &segment, &ndarray, &area,
            &PyList_Type, &occupant, &PyList_Type, &own_pending, &PyTuple_Type, &readers,
            &slow, &wake, &publishes, &nbytes, &fingerprint, &mix, &my_held, &my_fp,
            &my_data, &held, &ack, &ack_of_me, &sleeper_words, &sleeper_ranks, &read_kind,
            &src, &dst, &len, &self_copy, &count, &op, &dtype, &spin, &store_fingerprint,
            &prefix_at, &prefix_head, &write_prefix, &yield, &hand_over_core, &local_words,
            &is_root, &announces, &head, &writes, &back, &table, &slot_bytes,
            &occupant_calls, &skip_from, &skip_len, &defers))
        return -1;
    r->defers = defers;
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
    if (r->occupant_view.len < (Py_ssize_t)((NSLOTS + 1) * sizeof(uint64_t))) {
        PyBuffer_Release(&r->occupant_view);
        PyErr_SetString(PyExc_ValueError,
                        "occupant_calls needs one u64 per slot and one for a deferred call");
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
int data_of(Runner *r, PyObject *o, char **data, Py_buffer *view, int *held) {
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

void wake_sleepers(Runner *r) {
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
Py_ssize_t slot_readers(Runner *r, int slot, uint64_t *k, Py_ssize_t *words) {
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
        if ((w[0] & ~(uint64_t)HEAD_ANY_LENGTH) != 0 || w[1] != (uint64_t)r->len[i]
            || (!(w[0] & HEAD_ANY_LENGTH) && w[2] != (uint64_t)r->back[i])
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

int read_slots(Runner *r, int slot, char *send, char *recv) {
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


/* Whether every awaited word holds its value (those seen to do are not looked at again). */
int words_hold(void *ctx) {
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
int await_words(Runner *r, const Py_ssize_t *index, Py_ssize_t n, uint64_t word) {
    return await_masked(r, index, n, word, 0);
}

/* Wait, as `await_words` does, until every reader of this rank's `slot` has acknowledged the
 * call the slot holds: 1 when they have; 0 when not yet, or when this rank itself still reads
 * the slot (Python then takes the call). A reader one call behind is common when ranks
 * outnumber cores: a rank that returns at once from a rooted call is in its next call while
 * a peer has not yet been scheduled to finish the last one. */
int await_slot(Runner *r, int slot) {
    uint64_t k = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &k, words);
    return n >= 0 && await_words(r, words, n, k);
}

/* A root's confirmation: wait, as `await_slot` does, until every reader of `slot` has found
 * the call there (said so with `ARRIVED`, or acknowledged it already). */
int await_arrivals(Runner *r, int slot) {
    uint64_t k = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &k, words);
    return n >= 0 && await_masked(r, words, n, k, ARRIVED);
}

/* After publishing a contribution this rank awaits nobody for: with more ranks than cores,
 * give the core to a peer that may be waiting on it (see `hand_over_core`). */
void after_publishing(Runner *r) {
    if (r->hand_over_core) {
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
}

/* Hand the call to Python's `slow(status, send, recv, seq, timeout, phase, confirm)`; a bound
 * call passes its sequence number as NULL and `r->hand_seq` (made an object only here). */
PyObject *hand_over(Runner *r, int status, PyObject *const *args, long phase,
                           int confirm) {
    PyObject *flag = confirm ? Py_True : Py_False;
    if (args[2] == NULL)
        return PyObject_CallFunction(r->slow, "iOOLOlO", status, args[0], args[1], r->hand_seq,
                                     args[3], phase, flag);
    return PyObject_CallFunction(r->slow, "iOOOOlO", status, args[0], args[1], args[2], args[3],
                                 phase, flag);
}

/* Whether every reader of this rank's `slot` has found the call there, looked at once. */
int all_arrived(Runner *r, int slot) {
    uint64_t k = 0;
    Py_ssize_t words[64], n = slot_readers(r, slot, &k, words);
    awaited_words w = {r, words, n, 0, k, ARRIVED};
    return n >= 0 && words_hold(&w);
}

/* Whether the call a bcast's or scatter's root left unconfirmed (`defers`) is settled: its
 * slot no longer holds it (released or reused), or every reader found it, waited for through
 * the compiled stages of the one wait (Python sleeps and checks for mismatches after them). */
static int deferred_settled(Runner *r) {
    uint64_t k = r->occupant_calls[DEFERRED];
    if (!k)
        return 1;
    int slot = (int)((2 * ((k - 1) >> 3) + ((k - 1) & 7)) % NSLOTS);
    if (r->occupant_calls[slot] != k || await_arrivals(r, slot)) {
        r->occupant_calls[DEFERRED] = 0;
        return 1;
    }
    return 0;
}

/* Whether a direct call of this runner's area is in flight in Python (its `inflight`), or a
 * deferred confirmation is still open (Python then waits for it, `DirectArea.settle`): 1, 0,
 * or -1 with an exception set. The compiled paths stay out while either is. */
int area_busy(Runner *r) {
    PyObject *inflight = PyObject_GetAttr(r->area, r->inflight_name);
    if (inflight == NULL)
        return -1;
    int busy = PyObject_IsTrue(inflight);
    Py_DECREF(inflight);
    return busy ? busy : !deferred_settled(r);
}

/* The data of a call's send and recv arguments (`data_of` each): 0, or -1 with an exception
 * set and nothing held; `pair_release` gives back what it holds. */
int pair_of(Runner *r, PyObject *send, PyObject *recv, Pair *p) {
    if (data_of(r, send, &p->send, &p->sview, &p->sheld) < 0)
        return -1;
    if (data_of(r, recv, &p->recv, &p->rview, &p->rheld) < 0) {
        if (p->sheld)
            PyBuffer_Release(&p->sview);
        return -1;
    }
    return 0;
}

void pair_release(Pair *p) {
    if (p->sheld)
        PyBuffer_Release(&p->sview);
    if (p->rheld)
        PyBuffer_Release(&p->rview);
}

/* Record that this rank's `slot` holds call `k`, which its `readers` must read (no allocation:
 * the readers' tuple is the runner's own, kept in the list only when it changes). */
void occupy(Runner *r, int slot, uint64_t k) {
    r->occupant_calls[slot] = k;
    if (PyList_GET_ITEM(r->occupant, slot) != r->readers)
        PyList_SetItem(r->occupant, slot, Py_NewRef(r->readers)); /* steals the new ref */
}

/* Store this rank's word `word` for call `k` in `slot` (its contribution first, when it
 * copies one from `send`) and wake the peers that sleep. -1 on an error. */
int publish(Runner *r, int slot, uint64_t k, uint64_t word, const char *send) {
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
void announce(Runner *r, int slot, uint64_t k) {
    Py_ssize_t *ack = r->ack + slot * r->nothers;
    for (Py_ssize_t i = 0; i < r->nothers; i++)
        store_word(r, ack[i], k | ARRIVED);
}

/* Tell the members this rank waited for in `slot` that it is done with call `k`. */
void acknowledge(Runner *r, int slot, uint64_t k) {
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
PyObject *run_call(Runner *r, int slot, uint64_t k, uint64_t word, char *send,
                          char *recv, PyObject *const *args, long phase, int confirm) {
    if (r->publishes) {
        if (publish(r, slot, k, word, send) < 0)
            return NULL;
        /* a root whose readers all wait (not a gather's leaf), unless its data phase follows:
         * it writes that next, and readers given its core would only wait for it */
        if ((r->nothers == 0 || r->is_root) && PyTuple_GET_SIZE(r->readers) > 1 && confirm)
            after_publishing(r);
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
PyObject *Runner_run(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
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
    int busy = area_busy(r);
    if (busy < 0)
        return NULL;
    if (busy)
        return hand_over(r, 1, args, phase, confirm);
    long long seq = PyLong_AsLongLong(args[2]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    int slot = (int)((2 * seq + phase) % NSLOTS);
    uint64_t k = ((uint64_t)seq << 3) + (uint64_t)phase + 1;
    uint64_t word = (k << 24) | r->mix;
    Pair p;
    if (pair_of(r, args[0], args[1], &p) < 0)
        return NULL;
    PyObject *result = NULL;
    if (r->publishes && !await_slot(r, slot))
        result = hand_over(r, 1, args, phase, confirm);
    else
        result = run_call(r, slot, k, word, p.send, p.recv, args, phase, confirm);
    pair_release(&p);
    return result;
}
