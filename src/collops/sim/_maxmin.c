/* Max-min fair rates by progressive filling: the compiled twin of collops.sim.maxmin.
 *
 * fill(pair_flow, pair_link, capacity, rate): flow pair_flow[i] crosses link pair_link[i]
 * (int64 arrays of one length), link l has capacity[l] (float64); rate (float64, one per flow,
 * written) gets every flow's max-min fair rate, +inf for a flow that crosses no link. Each
 * round finds the smallest share (remaining capacity / unfrozen flows) over the links, freezes
 * every flow crossing a link at that share (within a relative 1e-12, as the numpy version),
 * takes their rate off every link they cross and goes on with the rest. Returns the number
 * of rounds. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SAME_LEVEL 1e-12

static PyObject *fill(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer fv, lv, cv, rv;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &fv, &lv, &cv, &rv)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t npairs = fv.len / 8, nlinks = cv.len / 8, nflows = rv.len / 8;
    const int64_t *flow = fv.buf, *link = lv.buf;
    const double *capacity = cv.buf;
    double *rate = rv.buf;
    int64_t *open = NULL, *count = NULL, *used = NULL;
    double *left = NULL;
    char *frozen = NULL;
    long rounds = 0;
    if (lv.len != fv.len) {
        PyErr_SetString(PyExc_ValueError, "pair_flow and pair_link differ in length");
        goto done;
    }
    open = malloc(sizeof(int64_t) * (size_t)(npairs + 1));
    count = calloc((size_t)nlinks + 1, sizeof(int64_t));
    used = malloc(sizeof(int64_t) * (size_t)(nlinks + 1));
    left = malloc(sizeof(double) * (size_t)(nlinks + 1));
    frozen = calloc((size_t)nflows + 1, 1);
    if (!open || !count || !used || !left || !frozen) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t f = 0; f < nflows; ++f) rate[f] = INFINITY;
    Py_ssize_t nused = 0;
    for (Py_ssize_t i = 0; i < npairs; ++i) {
        if (flow[i] < 0 || flow[i] >= nflows || link[i] < 0 || link[i] >= nlinks) {
            PyErr_SetString(PyExc_IndexError, "flow or link id out of range");
            goto done;
        }
        if (count[link[i]]++ == 0) { used[nused++] = link[i]; left[link[i]] = capacity[link[i]]; }
        open[i] = i;
    }
    Py_ssize_t nopen = npairs;
    while (nopen > 0) {
        ++rounds;
        double level = INFINITY;
        for (Py_ssize_t k = 0; k < nused; ++k) {
            int64_t l = used[k];
            if (count[l] > 0) {
                double share = (left[l] > 0 ? left[l] : 0.0) / (double)count[l];
                if (share < level) level = share;
            }
        }
        double limit = level * (1.0 + SAME_LEVEL);
        for (Py_ssize_t j = 0; j < nopen; ++j) {
            int64_t l = link[open[j]];
            if ((left[l] > 0 ? left[l] : 0.0) / (double)count[l] <= limit) frozen[flow[open[j]]] = 1;
        }
        Py_ssize_t kept = 0;
        for (Py_ssize_t j = 0; j < nopen; ++j) {
            int64_t i = open[j];
            if (frozen[flow[i]]) {
                rate[flow[i]] = level;
                left[link[i]] -= level;
                count[link[i]] -= 1;
            } else {
                open[kept++] = i;
            }
        }
        nopen = kept;
    }
    result = PyLong_FromLong(rounds);
done:
    free(open); free(count); free(used); free(left); free(frozen);
    PyBuffer_Release(&fv); PyBuffer_Release(&lv); PyBuffer_Release(&cv); PyBuffer_Release(&rv);
    return result;
}


/* A binary min-heap of (share, link) entries; stale entries are skipped when popped. */
typedef struct { double share; int64_t link; } Entry;

static void heap_push(Entry *heap, Py_ssize_t *size, double share, int64_t link) {
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (heap[parent].share <= share) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i].share = share;
    heap[i].link = link;
}

static Entry heap_pop(Entry *heap, Py_ssize_t *size) {
    Entry top = heap[0], last = heap[--(*size)];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= *size) break;
        if (child + 1 < *size && heap[child + 1].share < heap[child].share) ++child;
        if (last.share <= heap[child].share) break;
        heap[i] = heap[child];
        i = child;
    }
    if (*size > 0) heap[i] = last;
    return top;
}

static double share_of(const double *left, const int64_t *count, int64_t l) {
    return (left[l] > 0 ? left[l] : 0.0) / (double)count[l];
}

/* fill_routes(flows, offsets, links, capacity, rate, unbounded): the same allocation, for the
 * flows carrying messages flows[i], message m crossing links[offsets[m]:offsets[m+1]].
 * Links are taken in increasing order of their share from a heap. A link's share only grows
 * as flows freeze (a flow frozen at level L <= share s leaves (left − L)/(n − 1) >= s), so
 * an entry is a lower bound: a popped entry below its link's current share goes back in at
 * that share, and one that is current is the next bottleneck. Freezing touches only the
 * links the frozen flows cross, so the cost is about O(pairs · log links) rather than
 * rounds × pairs. A flow crossing no link gets `unbounded`. */
static PyObject *fill_routes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer fv, ov, lv, cv, rv;
    double unbounded;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*d", &fv, &ov, &lv, &cv, &rv, &unbounded)) return NULL;
    PyObject *result = NULL;
    const int64_t *flows = fv.buf, *offsets = ov.buf, *links = lv.buf;
    const double *capacity = cv.buf;
    double *rate = rv.buf;
    Py_ssize_t nflows = fv.len / 8, nmsgs = ov.len / 8 - 1, nroute = lv.len / 8;
    Py_ssize_t nlinks = cv.len / 8;
    int64_t *count = NULL, *start = NULL, *member = NULL, *cursor = NULL;
    double *left = NULL;
    char *frozen = NULL;
    Entry *heap = NULL;
    long rounds = 0;
    if (rv.len / 8 < nflows) {
        PyErr_SetString(PyExc_ValueError, "rate is shorter than flows");
        goto done;
    }
    Py_ssize_t npairs = 0;
    for (Py_ssize_t i = 0; i < nflows; ++i) {
        int64_t m = flows[i];
        if (m < 0 || m >= nmsgs || offsets[m] < 0 || offsets[m + 1] > nroute
                || offsets[m + 1] < offsets[m]) {
            PyErr_SetString(PyExc_IndexError, "message id or route out of range");
            goto done;
        }
        npairs += offsets[m + 1] - offsets[m];
    }
    count = calloc((size_t)nlinks + 1, sizeof(int64_t));
    start = calloc((size_t)nlinks + 2, sizeof(int64_t));
    member = malloc(sizeof(int64_t) * (size_t)(npairs + 1));
    left = malloc(sizeof(double) * (size_t)(nlinks + 1));
    frozen = calloc((size_t)nflows + 1, 1);
    heap = malloc(sizeof(Entry) * (size_t)(npairs + nlinks + 1));
    if (!count || !start || !member || !left || !frozen || !heap) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < nflows; ++i) {
        int64_t m = flows[i];
        if (offsets[m + 1] == offsets[m]) { rate[i] = unbounded; frozen[i] = 1; }
        for (int64_t p = offsets[m]; p < offsets[m + 1]; ++p) {
            if (links[p] < 0 || links[p] >= nlinks) {
                PyErr_SetString(PyExc_IndexError, "link id out of range");
                goto done;
            }
            ++count[links[p]];
        }
    }
    for (Py_ssize_t l = 0; l < nlinks; ++l) start[l + 1] = start[l] + count[l];
    cursor = malloc(sizeof(int64_t) * (size_t)(nlinks + 1));
    if (!cursor) { PyErr_NoMemory(); goto done; }
    memcpy(cursor, start, sizeof(int64_t) * (size_t)nlinks);
    for (Py_ssize_t i = 0; i < nflows; ++i) {  /* the flows crossing each link */
        int64_t m = flows[i];
        for (int64_t p = offsets[m]; p < offsets[m + 1]; ++p) member[cursor[links[p]]++] = i;
    }
    Py_ssize_t size = 0;
    for (Py_ssize_t l = 0; l < nlinks; ++l) {
        if (count[l] > 0) {
            left[l] = capacity[l];
            heap_push(heap, &size, share_of(left, count, l), l);
        }
    }
    double level = 0.0;
    while (size > 0) {
        Entry e = heap_pop(heap, &size);
        int64_t l = e.link;
        if (count[l] == 0) continue;
        double share = share_of(left, count, l);
        if (share > e.share) {  /* stale: its share grew since; back in at its current one */
            heap_push(heap, &size, share, l);
            continue;
        }
        ++rounds;
        if (share > level) level = share;
        for (int64_t k = start[l]; k < start[l + 1]; ++k) {
            int64_t i = member[k];
            if (frozen[i]) continue;
            frozen[i] = 1;
            rate[i] = level;
            int64_t m = flows[i];
            for (int64_t p = offsets[m]; p < offsets[m + 1]; ++p) {
                int64_t other = links[p];
                left[other] -= level;
                --count[other];
            }
        }
    }
    result = PyLong_FromLong(rounds);
done:
    free(count); free(start); free(member); free(cursor); free(left); free(frozen); free(heap);
    PyBuffer_Release(&fv); PyBuffer_Release(&ov); PyBuffer_Release(&lv); PyBuffer_Release(&cv);
    PyBuffer_Release(&rv);
    return result;
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS, "Max-min fair rates by progressive filling (see the module)."},
    {"fill_routes", fill_routes, METH_VARARGS,
     "Max-min fair rates of flows given as message ids over CSR routes (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.sim._maxmin",
    "Max-min fair rates by progressive filling (compiled).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__maxmin(void) { return PyModule_Create(&module); }
