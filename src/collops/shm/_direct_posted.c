/* collops.shm._direct: a non-blocking call, published at once and finished later (see _direct.c). */
#include "_direct.h"

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
PyObject *Runner_post(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "post(send, seq)");
        return NULL;
    }
    int busy = area_busy(r);
    if (busy < 0)
        return NULL;
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

/* `finish`'s `block` that waits as a blocking call does but hands nothing to `slow`: it
 * returns the status instead, and the caller's Python protocol takes the call on. */
#define KEEP_PYTHON 2

/* finish(send, recv, seq, timeout, block): the rest of a posted call `seq`. True once done
 * (or None after Python finished it: `hand_over`); False when `block` is false and a peer's
 * word is not there yet (nothing done); 5 when `block` is not 1 and a header asks for more
 * than the compiled reads do, 2 when `block` is `KEEP_PYTHON` and a peer is still late after
 * the compiled wait (nothing read: the caller's Python protocol takes the call). */
PyObject *Runner_finish(Runner *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "finish(send, recv, seq, timeout, block)");
        return NULL;
    }
    long block = PyLong_AsLong(args[4]);
    long long seq = PyLong_AsLongLong(args[2]);
    if ((block == -1 || seq == -1) && PyErr_Occurred())
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
        return block == KEEP_PYTHON ? PyLong_FromLong(2) : hand_over(r, 2, args, 0, 1);
    Pair p;
    if (pair_of(r, args[0], args[1], &p) < 0)
        return NULL;
    PyObject *result = Py_NewRef(Py_True);
    if (r->announces)
        announce(r, slot, k);
    if (!read_slots(r, slot, p.send, p.recv)) {
        Py_DECREF(result);  /* Python reads and acknowledges: here, or the caller's protocol */
        result = block == 1 ? hand_over(r, 5, args, 0, 1) : PyLong_FromLong(5);
    } else {
        acknowledge(r, slot, k);
        if (r->is_root && block && !await_arrivals(r, slot)) {
            Py_DECREF(result);
            result = hand_over(r, 3, args, 0, 1);
        }
    }
    pair_release(&p);
    return result;
}
