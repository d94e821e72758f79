"""The few Linux primitives the shared-memory transport needs, reached through ctypes: the
futex its ranks sleep and wake on, and single copies from and into another process's memory
(``process_vm_readv``/``writev``), 4 KiB-aliased copies going around the slow case.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from ..errors import TransportError

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_FUTEX = 202  # x86_64
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def futex_wait(address: int, expected: int, timeout: float) -> None:
    """Sleep while the u32 at ``address`` equals ``expected``, at most ``timeout`` seconds."""
    ts = _Timespec(int(timeout), int((timeout % 1.0) * 1e9))
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(_FUTEX_WAIT),
             ctypes.c_uint(expected & 0xFFFFFFFF), ctypes.byref(ts), None, ctypes.c_int(0))


def futex_wake(address: int) -> None:
    """Wake every process sleeping on the u32 at ``address``."""
    _syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(_FUTEX_WAKE),
             ctypes.c_int(2**31 - 1), None, None, ctypes.c_int(0))


#: the kernel's copy is 4 KiB-aliased too (docs/performance.md, "Huge pages and the kernel's
#: single copy"): single copies at such distances go through a bounce buffer, a piece at a
#: time, placed half a page off so that neither its kernel copy nor its memcpy is aliased.
ALIASED_BELOW = 64
BOUNCE_BYTES = 256 * 1024


#: bytes from which glibc's ``memcpy`` no longer uses ``rep movsb`` (``COPY_WHOLE_FROM`` of
#: ``_shm_wait.h``): a whole copy is then the faster, aliased or not
COPY_WHOLE_FROM = 1024 * 1024


def aliased(destination: int, source: int, nbytes: int) -> bool:
    """Whether a copy of ``nbytes`` from ``source`` to ``destination`` is in the 4 KiB
    aliasing slow case (`ALIASED_BELOW`), for glibc's ``memcpy`` and the kernel's copy
    alike."""
    return nbytes > 2048 and 0 < (destination - source) % 4096 < ALIASED_BELOW


def _copy_in_pieces(destination: int, source: int, nbytes: int) -> None:
    """``memmove``, in 2 KiB pieces where the copy is aliased (`ALIASED_BELOW`) and below
    `COPY_WHOLE_FROM`."""
    if nbytes < COPY_WHOLE_FROM and aliased(destination, source, nbytes):
        for done in range(0, nbytes, 2048):
            ctypes.memmove(destination + done, source + done, min(2048, nbytes - done))
    else:
        ctypes.memmove(destination, source, nbytes)


try:
    from ._stream import copy as copy_memory  # compiled: `copy_bytes` of ``_shm_wait.h``
    from ._stream import read_process as _read_process  # `copy_from_process` of ``_stream.c``
except ImportError:  # the same in Python
    copy_memory = _copy_in_pieces
    _read_process = None  # type: ignore[assignment]


class RemoteReader:
    """Single-copy reads from (``process_vm_readv``) and writes into (``process_vm_writev``)
    another process's memory (aliased ones through a bounce buffer: `ALIASED_BELOW`)."""

    def __init__(self) -> None:
        self._local = _Iovec()
        self._remote = _Iovec()
        self._local_ref = ctypes.byref(self._local)
        self._remote_ref = ctypes.byref(self._remote)
        self._fn = _libc.process_vm_readv
        self._fn.restype = ctypes.c_ssize_t
        self._write_fn = _libc.process_vm_writev
        self._write_fn.restype = ctypes.c_ssize_t
        self._bounce: Any = None  # allocated on the first aliased copy

    def read(self, pid: int, remote_address: int, local_address: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``pid``'s ``remote_address`` to ``local_address`` (compiled:
        the stream's own read of references, one implementation)."""
        if _read_process is None:
            self._copy(True, pid, remote_address, local_address, nbytes)
            return
        err = _read_process(pid, remote_address, local_address, nbytes)
        if err:
            raise _failed("process_vm_readv from", pid, err)

    def write(self, pid: int, remote_address: int, local_address: int, nbytes: int) -> None:
        """Copy ``nbytes`` from ``local_address`` to ``pid``'s ``remote_address``."""
        self._copy(False, pid, remote_address, local_address, nbytes)

    def _copy(self, reading: bool, pid: int, remote: int, local: int, nbytes: int) -> None:
        fn, what = ((self._fn, "process_vm_readv from") if reading
                    else (self._write_fn, "process_vm_writev to"))
        source, destination = (remote, local) if reading else (local, remote)
        if not aliased(destination, source, nbytes):
            self._move(fn, what, pid, remote, local, nbytes)
            return
        # through the bounce buffer, placed half a page off the source's offset in its page:
        # neither the kernel's copy nor the memmove is then aliased
        if self._bounce is None:
            self._bounce = ctypes.create_string_buffer(BOUNCE_BYTES + 2 * 4096)
        bounce = ctypes.addressof(self._bounce)
        bounce += -bounce % 4096 + (source + 2048) % 4096
        for done in range(0, nbytes, BOUNCE_BYTES):
            m = min(BOUNCE_BYTES, nbytes - done)
            if reading:
                self._move(fn, what, pid, remote + done, bounce, m)
                ctypes.memmove(local + done, bounce, m)
            else:
                ctypes.memmove(bounce, local + done, m)
                self._move(fn, what, pid, remote + done, bounce, m)

    def _move(self, fn: Any, what: str, pid: int, remote_address: int, local_address: int,
              nbytes: int) -> None:
        done = 0
        local, remote = self._local, self._remote
        while done < nbytes:
            local.base = local_address + done
            local.len = nbytes - done
            remote.base = remote_address + done
            remote.len = nbytes - done
            got = fn(pid, self._local_ref, 1, self._remote_ref, 1, 0)
            if got <= 0:
                raise _failed(what, pid, ctypes.get_errno())
            done += got


def _failed(what: str, pid: int, err: int) -> TransportError:
    """The error of a single copy that failed with ``err`` (kept as its ``errno``)."""
    error = TransportError(f"{what} pid {pid} failed: {os.strerror(err)}")
    error.errno = err  # type: ignore[attr-defined]
    return error


def cross_memory_attach_works() -> bool:
    """Whether this process may read a sibling's memory (kernel support, ptrace policy)."""
    src = ctypes.create_string_buffer(b"collops", 8)
    dst = ctypes.create_string_buffer(8)
    pid = os.fork()
    if pid == 0:  # the child reads its parent, as a rank reads a sibling
        try:
            RemoteReader().read(os.getppid(), ctypes.addressof(src), ctypes.addressof(dst), 8)
            os._exit(0 if dst.raw == src.raw else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
