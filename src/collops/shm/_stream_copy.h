/* What _stream.c takes from _stream_copy.c: a single copy out of another process, and the
 * module's copy functions. */
#ifndef COLLOPS_SHM_STREAM_COPY_H
#define COLLOPS_SHM_STREAM_COPY_H

#define STREAM_INTERNAL __attribute__((visibility("hidden")))

/* Copy `n` bytes at `remote` in process `pid` to `local`: 0, or the errno. */
STREAM_INTERNAL int copy_from_process(int64_t pid, char *local, uint64_t remote, size_t n);
/* copy(dst, src, nbytes) and read_process(pid, remote, local, nbytes) -> errno */
STREAM_INTERNAL PyObject *module_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
STREAM_INTERNAL PyObject *module_read_process(PyObject *self, PyObject *const *args,
                                              Py_ssize_t nargs);

#endif /* COLLOPS_SHM_STREAM_COPY_H */
