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

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS, "Max-min fair rates by progressive filling (see the module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "collops.sim._maxmin",
    "Max-min fair rates by progressive filling (compiled).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__maxmin(void) { return PyModule_Create(&module); }
