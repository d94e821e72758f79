/* What `_specs.c` (the buffer-specification checks) shares with `_starters.c` (the compiled
 * `I…` v-methods) inside the one extension module `collops.facade._specs`. */
#ifndef COLLOPS_FACADE_SPECS_H
#define COLLOPS_FACADE_SPECS_H

#include <Python.h>

/* the fields of a `layouts.Layout` read from its slots (`layout_field`) */
enum { LAYOUT_COUNTS, LAYOUT_DISPLS, LAYOUT_END, LAYOUT_TOTAL, LAYOUT_CONTIGUOUS, LAYOUT_PLACED,
       LAYOUT_PLACED_DISPLS, LAYOUT_FIELDS };
/* A layout's field (borrowed; NULL with an error if unset). */
PyObject *layout_field(PyObject *layout, int field);
/* The offset of `type`'s __slots__ member `name` in its objects (0, -1 with an error). */
int slot_offset(PyObject *type, const char *name, Py_ssize_t *offset);

/* The size of a 1-D C-contiguous ndarray (writeable when asked), else -1. */
Py_ssize_t array_elements(PyObject *arr, int writable);
/* The array of an ndarray or of `[ndarray, its own predefined type]` (borrowed), or NULL. */
PyObject *spec_array(PyObject *spec);
/* A v-spec of the commonest forms: its array, remembered layout and out (1, three new
 * references), 0 for another form, -1 with an exception. */
int vector_of(PyObject *spec, Py_ssize_t size, int writable, PyObject **buf_found,
              PyObject **layout_found, PyObject **out_found);
/* The same as collops' call's fields: array, the layout's `first` and `second` fields
 * (`LAYOUT_…`), out. */
int vector_parts(PyObject *spec, Py_ssize_t size, int writable, int first, int second,
                 PyObject *parts[4]);

/* `_starters.c`: configure_requests(Request, mpi_error, CollopsError), wrap_request(started),
 * and the `Starter`
 * type added to the module. */
PyObject *configure_requests(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *wrap_request(PyObject *self, PyObject *started);
int add_starters(PyObject *module);

#endif
