"""The shared-memory segment of one job: its layout, its creation and removal, and the
few Linux primitives (futex, process_vm_readv) the transport needs, reached through ctypes.

One file under /dev/shm holds a whole job. It is created by the launcher with mode 0600
under ``collops-<32 random hex digits>``; ranks open it by that name (raw ``os.open`` +
``mmap``, so Python's multiprocessing resource tracker never hears of it), and the launcher
unlinks it as soon as every rank has attached — and again, idempotently, on every exit path.

Layout (all offsets are multiples of 64 bytes, so no two writers share a cache line)::

    page 0            job header: magic, size, layout, first failed rank + 1, single-copy ok
    rank blocks       one 64-byte line per rank: state, pid, sleeping flag, doorbell (futex)
    pair areas        one per ordered pair (src, dst), src == dst included:
                        line 0  consumed   (ring tail, written by dst)
                        line 1  filled     (bulk chunks written, by src)
                        line 2  drained    (bulk chunks read, by dst)
                        line 3  split single copy: sender's claim and done words (by src)
                        line 4  split single copy: receiver's claim (by dst)
                        ring    nslots slots of slot_bytes: 64-byte header + payload
                        bulk    nchunks chunks of chunk_bytes
    direct areas      one per communicator context below ``direct_areas`` (see `shm_direct`):
                        per rank: a control line (call number and fingerprint of each
                        of its DIRECT_SLOTS slots), its acknowledgements (one word per
                        rank and slot: the call it last read there), the slots of
                        direct_bytes
    stream areas      one per communicator context below ``stream_areas`` (see
                      `collops.shm.stream`): per rank (the writer) a page of
                      control lines — line 0 its filled counter, line 1 + r the drained
                      counter of reader r, then one header line per chunk slot — and a ring
                      of stream_chunks chunks of stream_chunk_bytes
    call counters     per rank COUNTED_CONTEXTS words: its next call number on each of the
                      first communicator contexts (written by the rank as it takes a call,
                      read by the others only for stall reports)

The header words of a slot are ``seq, tag, fingerprint, nbytes, kind, aux``; ``seq`` is
written last and names the slot's message (message k of the pair carries seq k + 1), so a
reader that sees the seq it expects sees the whole message (x86 stores are ordered).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import TransportError

SHM_DIR = "/dev/shm"
PREFIX = "collops-"
MAGIC = 0x636F6C6C6F707331  # "collops1"

LINE = 64
WORD = 8
HEADER_BYTES = 4096
SLOT_HEADER = 64

# header words
(H_MAGIC, H_SIZE, H_NSLOTS, H_SLOT_BYTES, H_NCHUNKS, H_CHUNK_BYTES, H_FAILED, H_CMA,
 H_DIRECT_AREAS, H_DIRECT_BYTES, H_STREAM_AREAS, H_STREAM_CHUNKS,
 H_STREAM_CHUNK_BYTES) = range(13)

# rank block words (relative to the rank's line)
R_STATE, R_PID, R_SLEEPING, R_DOORBELL, R_STATUS = range(5)

# rank states
NOT_STARTED, ATTACHED, EXITED, FAILED = 0, 1, 2, 3

# slot header words (relative to the slot)
S_SEQ, S_TAG, S_FP, S_NBYTES, S_KIND, S_AUX = range(6)

# message kinds
EAGER, RTS_CMA, RTS_PIPE, CTS, FIN = 1, 2, 3, 4, 5

DEFAULT_NSLOTS = 64
DEFAULT_SLOT_BYTES = 8192
DEFAULT_NCHUNKS = 2
DEFAULT_CHUNK_BYTES = 1024 * 1024
#: communicator contexts that get a direct-collective area, and the bytes of each rank's slot
DEFAULT_DIRECT_AREAS = 32
DEFAULT_DIRECT_BYTES = 65536
#: communicator contexts that get a stream area, and each rank's ring in it: chunks and their
#: bytes (8 of 128 KiB keep a writer a whole megabyte ahead of its slowest reader)
DEFAULT_STREAM_AREAS = 4
DEFAULT_STREAM_CHUNKS = 8
DEFAULT_STREAM_CHUNK_BYTES = 128 * 1024
#: slots per rank in a direct area (successive calls use them in turn)
DIRECT_SLOTS = 4
#: communicator contexts whose next call numbers the segment holds (for stall reports)
COUNTED_CONTEXTS = 64
#: bytes of one rank's call counters (whole lines: no other rank writes near them)
COUNTER_BYTES = COUNTED_CONTEXTS * 8
#: above this many bytes a job's file is left sparse instead of allocated up front
PREALLOCATE_LIMIT = 512 * 1024 * 1024

_JOB_NAME = re.compile(r"^[0-9a-f]{16,64}$")


@dataclass(frozen=True)
class Layout:
    """Byte offsets of every area of a job's segment."""

    size: int
    nslots: int = DEFAULT_NSLOTS
    slot_bytes: int = DEFAULT_SLOT_BYTES
    nchunks: int = DEFAULT_NCHUNKS
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    direct_areas: int = DEFAULT_DIRECT_AREAS
    direct_bytes: int = DEFAULT_DIRECT_BYTES
    stream_areas: int = DEFAULT_STREAM_AREAS
    stream_chunks: int = DEFAULT_STREAM_CHUNKS
    stream_chunk_bytes: int = DEFAULT_STREAM_CHUNK_BYTES

    @property
    def ring_offset(self) -> int:
        """Offset of the first pair area."""
        return _round_up(HEADER_BYTES + self.size * LINE, 4096)

    @property
    def pair_bytes(self) -> int:
        """Bytes of one pair area (control lines, ring, bulk), page aligned."""
        return _round_up(4096 + self.nslots * self.slot_bytes + self.nchunks * self.chunk_bytes,
                         4096)

    @property
    def direct_offset(self) -> int:
        """Offset of the first direct area."""
        return self.ring_offset + self.size * self.size * self.pair_bytes

    @property
    def direct_acks_bytes(self) -> int:
        """Bytes of one rank's acknowledgement words in a direct area."""
        return _round_up(self.size * DIRECT_SLOTS * WORD, LINE)

    @property
    def direct_rank_bytes(self) -> int:
        """Bytes of one rank's part of a direct area: control line, acks, slots."""
        return LINE + self.direct_acks_bytes + DIRECT_SLOTS * self.direct_bytes

    @property
    def stream_offset(self) -> int:
        """Offset of the first stream area."""
        return _round_up(self.direct_offset + self.direct_areas * self.size
                         * self.direct_rank_bytes, 4096)

    @property
    def stream_control_bytes(self) -> int:
        """Bytes of one rank's control lines in a stream area: its filled counter, one
        drained counter per reader, one header per chunk slot (page aligned)."""
        return _round_up(LINE * (1 + self.size + self.stream_chunks), 4096)

    @property
    def stream_rank_bytes(self) -> int:
        """Bytes of one rank's part of a stream area: control lines, then its ring."""
        if not (self.stream_areas and self.stream_chunks and self.stream_chunk_bytes):
            return 0
        return self.stream_control_bytes + self.stream_chunks * self.stream_chunk_bytes

    @property
    def counters_offset(self) -> int:
        """Offset of the first rank's call counters."""
        return _round_up(self.stream_offset + self.stream_areas * self.size
                         * self.stream_rank_bytes, LINE)

    @property
    def total_bytes(self) -> int:
        """Size of the whole segment."""
        return _round_up(self.counters_offset + self.size * COUNTER_BYTES, 4096)

    def counter_offset(self, rank: int, context: int) -> int:
        """Byte offset of ``rank``'s next call number on ``context`` (< COUNTED_CONTEXTS)."""
        return self.counters_offset + rank * COUNTER_BYTES + context * WORD

    @property
    def eager_limit(self) -> int:
        """Largest payload sent eagerly in one slot."""
        return self.slot_bytes - SLOT_HEADER

    def rank_word(self, rank: int, field: int) -> int:
        """Word index of a field of a rank's block."""
        return (HEADER_BYTES + rank * LINE) // WORD + field

    def pair_offset(self, src: int, dst: int) -> int:
        """Byte offset of the (src -> dst) pair area."""
        return self.ring_offset + (src * self.size + dst) * self.pair_bytes

    def consumed_word(self, src: int, dst: int) -> int:
        """Word index of the ring's consumed counter."""
        return self.pair_offset(src, dst) // WORD

    def filled_word(self, src: int, dst: int) -> int:
        """Word index of the bulk area's filled-chunks counter."""
        return (self.pair_offset(src, dst) + LINE) // WORD

    def drained_word(self, src: int, dst: int) -> int:
        """Word index of the bulk area's drained-chunks counter."""
        return (self.pair_offset(src, dst) + 2 * LINE) // WORD

    def split_sender_word(self, src: int, dst: int) -> int:
        """Word index of a split single-copy transfer's sender words: its claim, then the
        piece its writes are complete down to (line 3 of the pair area, written by src)."""
        return (self.pair_offset(src, dst) + 3 * LINE) // WORD

    def split_receiver_word(self, src: int, dst: int) -> int:
        """Word index of a split single-copy transfer's receiver claim (line 4, by dst)."""
        return (self.pair_offset(src, dst) + 4 * LINE) // WORD

    def direct_rank_offset(self, area: int, rank: int) -> int:
        """Byte offset of ``rank``'s control line in direct area ``area``."""
        return self.direct_offset + (area * self.size + rank) * self.direct_rank_bytes

    def stream_rank_offset(self, area: int, rank: int) -> int:
        """Byte offset of ``rank``'s control lines in stream area ``area`` (its ring follows
        them, `stream_control_bytes` on)."""
        return self.stream_offset + (area * self.size + rank) * self.stream_rank_bytes

    def slot_offset(self, src: int, dst: int, slot: int) -> int:
        """Byte offset of a ring slot's header."""
        return self.pair_offset(src, dst) + 4096 + slot * self.slot_bytes

    def chunk_offset(self, src: int, dst: int, chunk: int) -> int:
        """Byte offset of a bulk chunk."""
        return (self.pair_offset(src, dst) + 4096 + self.nslots * self.slot_bytes
                + chunk * self.chunk_bytes)


def _round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def segment_path(job: str) -> str:
    """The /dev/shm path of a job's segment."""
    if not _JOB_NAME.match(job):
        raise TransportError(f"invalid collops job name {job!r}")
    return os.path.join(SHM_DIR, PREFIX + job)


def create_job(size: int, layout: Layout | None = None,
               single_copy: bool | None = None) -> tuple[str, Layout]:
    """Create a new job segment (mode 0600, unguessable name); return (job, layout).

    ``single_copy`` says whether ranks may use process_vm_readv (None: probe the kernel).
    """
    layout = layout or Layout(size)
    if single_copy is None:
        single_copy = cross_memory_attach_works()
    job = secrets.token_hex(16)
    path = segment_path(job)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.ftruncate(fd, layout.total_bytes)
        if layout.total_bytes <= PREALLOCATE_LIMIT:
            os.posix_fallocate(fd, 0, layout.total_bytes)
        with mmap.mmap(fd, HEADER_BYTES) as header:
            words = memoryview(header).cast("Q")
            words[H_SIZE] = size
            words[H_NSLOTS] = layout.nslots
            words[H_SLOT_BYTES] = layout.slot_bytes
            words[H_NCHUNKS] = layout.nchunks
            words[H_CHUNK_BYTES] = layout.chunk_bytes
            words[H_CMA] = int(single_copy)
            words[H_DIRECT_AREAS] = layout.direct_areas
            words[H_DIRECT_BYTES] = layout.direct_bytes
            words[H_STREAM_AREAS] = layout.stream_areas
            words[H_STREAM_CHUNKS] = layout.stream_chunks
            words[H_STREAM_CHUNK_BYTES] = layout.stream_chunk_bytes
            words[H_MAGIC] = MAGIC
            words.release()
    except BaseException:
        os.close(fd)
        unlink_job(job)
        raise
    os.close(fd)
    return job, layout


def unlink_job(job: str) -> None:
    """Remove a job's segment if it still exists (idempotent)."""
    try:
        os.unlink(segment_path(job))
    except FileNotFoundError:
        pass


class Segment:
    """A job's segment mapped into this process."""

    def __init__(self, job: str) -> None:
        path = segment_path(job)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TransportError(f"collops job segment {path} does not exist") from None
        try:
            total = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, total)
        finally:
            os.close(fd)
        self.buf = memoryview(self.map)
        self.words = self.buf.cast("Q")
        w = self.words
        if w[H_MAGIC] != MAGIC:
            self.close()
            raise TransportError(f"{path} is not a collops job segment")
        self.layout = Layout(int(w[H_SIZE]), int(w[H_NSLOTS]), int(w[H_SLOT_BYTES]),
                             int(w[H_NCHUNKS]), int(w[H_CHUNK_BYTES]),
                             int(w[H_DIRECT_AREAS]), int(w[H_DIRECT_BYTES]),
                             int(w[H_STREAM_AREAS]), int(w[H_STREAM_CHUNKS]),
                             int(w[H_STREAM_CHUNK_BYTES]))
        self._anchor = ctypes.c_char.from_buffer(self.map)
        self.address = ctypes.addressof(self._anchor)

    def prefault(self, offset: int, length: int) -> None:
        """Map the pages of a region now rather than on first touch."""
        start = offset // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            self.map.madvise(23, start, offset + length - start)  # MADV_POPULATE_WRITE
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """Unmap (only once every view of it is gone)."""
        self.words.release()
        self.buf.release()
        self._anchor = None  # type: ignore[assignment]
        try:
            self.map.close()
        except BufferError:
            pass


# ---- Linux primitives -------------------------------------------------------------------

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
