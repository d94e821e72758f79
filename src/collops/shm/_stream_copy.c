/* collops.shm._stream: copies out of another process's memory (process_vm_readv), around
 * the 4 KiB-aliasing slow case, for the stream's references, the transport's messages and
 * shm_cma; and the module's copy functions (see _stream.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "_shm_wait.h"
#include "_stream_copy.h"

/* process_vm_readv of `n` bytes at `remote` in process `pid` to `local`: 0, or the errno. */
static int read_process(int64_t pid, char *local, uint64_t remote, size_t n) {
    while (n) {
        struct iovec l = {local, n}, r = {(void *)(uintptr_t)remote, n};
        ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (got <= 0)
            return got < 0 ? errno : EFAULT;
        local += got;
        remote += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* Bytes of the bounce buffer an aliased single copy goes through, a piece at a time. */
#define BOUNCE_BYTES (256 * 1024)
static char *bounce;   /* page-aligned, BOUNCE_BYTES + 4 KiB; used under the GIL */

/* Copy `n` bytes at `remote` in process `pid` to `local`: 0, or the errno. The kernel copies
 * with `rep movsb` and so has the 4 KiB-aliasing slow case `copy_bytes` avoids (a 4 MiB
 * read 4x slower with the destination 16 bytes past the source, modulo 4 KiB: two numpy
 * arrays allocated one after the other on the heap); such reads go through a bounce buffer
 * placed half a page from the source's offset in its page, then to where they belong. */
int copy_from_process(int64_t pid, char *local, uint64_t remote, size_t n) {
    if (!aliased((uintptr_t)local, (uintptr_t)remote, n))
        return read_process(pid, local, remote, n);
    if (bounce == NULL && posix_memalign((void **)&bounce, 4096, BOUNCE_BYTES + 4096))
        return ENOMEM;
    /* half a page past the source's offset: neither the kernel's copy into it nor the copy
     * out of it is aliased */
    char *tmp = bounce + ((remote + 2048) & 4095);
    while (n) {
        size_t m = n < BOUNCE_BYTES ? n : BOUNCE_BYTES;
        int err = read_process(pid, tmp, remote, m);
        if (err)
            return err;
        copy_bytes(local, tmp, m);
        local += m;
        remote += m;
        n -= m;
    }
    return 0;
}

/* The byte count of a copy function called as `usage` with `nargs` arguments, its last: -1
 * with an exception set when the call or the count is wrong. */
static Py_ssize_t byte_count(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want,
                             const char *usage) {
    if (nargs != want) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[want - 1]);
    if (n < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "nbytes must be >= 0");
    return n;
}

/* copy(dst, src, nbytes): `copy_bytes` between two addresses, for the transport's bulk areas
 * (whose chunk slots start on a page while numpy's arrays start 16 bytes into one). */
PyObject *module_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Py_ssize_t n = byte_count(args, nargs, 3, "copy(dst, src, nbytes)");
    if (n < 0)
        return NULL;
    void *dst = PyLong_AsVoidPtr(args[0]);
    void *src = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    copy_bytes(dst, src, (size_t)n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* read_process(pid, remote, local, nbytes) -> errno: `copy_from_process`, the one
 * single-copy read (through the bounce buffer when aliased), for the transport's messages
 * and shm_cma as for the stream's references. Under the GIL: the bounce buffer is shared. */
PyObject *module_read_process(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    Py_ssize_t n = byte_count(args, nargs, 4, "read_process(pid, remote, local, nbytes)");
    if (n < 0)
        return NULL;
    int64_t pid = PyLong_AsLongLong(args[0]);
    uint64_t remote = PyLong_AsUnsignedLongLong(args[1]);
    char *local = PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(copy_from_process(pid, local, remote, (size_t)n));
}
