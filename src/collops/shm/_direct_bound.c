/* collops.shm._direct: the bound whole calls, broadcast and single-phase (see _direct.c). */
#include "_direct.h"

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
PyObject *Runner_bind_bcast(Runner *r, PyObject *args) {
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
    return array_is(o, r->ndarray, r->hot_descr, nd, dims, writeable);
}

/* Whether `o` is an ndarray of the bound signature, C-contiguous (and writeable). */
static int bound_array(Runner *r, PyObject *o, int writeable) {
    return array_fits(r, o, r->hot_nd, r->hot_dims, writeable);
}

/* Copy a shape tuple into `dims` (at most HOT_MAX_DIMS); -1 with an exception on failure. */
static int shape_of(PyObject *shape, int *nd, Py_ssize_t *dims) {
    return tuple_shape(shape, nd, dims, HOT_MAX_DIMS);
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
    int busy = area_busy(r);
    if (busy)
        return busy < 0 ? -1 : 0;
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
PyObject *Runner_bcast(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
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
        /* every reader found the call: ranks that disagree on the root meet here, or, when
         * the root defers, at its next call on the area (`area_busy`) */
        if (r->defers && timeout == Py_None && !all_arrived(r, slot))
            r->occupant_calls[DEFERRED] = k;
        else if (!await_arrivals(r, slot)) {
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
PyObject *Runner_bind_call(Runner *r, PyObject *args) {
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
PyObject *Runner_call(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
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
