"""The shared-memory segment of one job: its layout and its creation (the Linux primitives
the transport reaches through ctypes are in `kernel`).

A job's segment is anonymous shared memory (``memfd_create``): the launcher creates it,
and the ranks inherit its descriptor (``COLLOPS_SHM_FD``) and map it. It has no name, so
nothing can be left behind: the kernel frees it once the last process holding it ends,
whoever is killed and whenever, and ``/dev/shm``'s size does not matter. Only a job whose
ranks are not the creator's children (`create_job` with ``named=True``: an MPI benchmark)
gets a file under /dev/shm (mode 0600, unguessable name), unlinked by its creator once
every rank has mapped it.

Its size is linear in the ranks (`Layout.for_ranks`): at most `PAIR_RESERVE` plus
``COLLOPS_SHM_PER_RANK`` (`DEFAULT_PER_RANK`) per rank. The per-rank areas (direct and
stream) come first out of a rank's share; the pair areas share the rest, so their rings and
bulk areas shrink as the ranks grow (64 slots and 2 × 1 MiB up to 3 ranks, 16 slots and
2 × 92 KiB at 16, 4 slots and 2 × 12 KiB at 63).

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
                      counter of reader r, one header line per chunk slot, then the roll
                      call's lines (`ROLL_LINES`: its words, their fingerprints, the calls
                      it is done with; see `collops.shm.roll_call`) — and a ring of
                      stream_chunks chunks of stream_chunk_bytes
    call counters     per rank COUNTED_CONTEXTS words: its next call number on each of the
                      first communicator contexts (written by the rank as it takes a call,
                      read by the others only for stall reports)
    cell rings        one per ordered pair (src, dst) of point-to-point messages (see
                      `collops.shm.cells`): line 0 consumed (ring tail, by dst), line 1 the
                      sender's waiting-for-room flag (by src), then `p2p_cells` cells of
                      `P2P_CELL_BYTES`: a 64-byte header, the dims and dtype token, the payload

The header words of a slot are ``seq, tag, fingerprint, nbytes, kind, aux``; ``seq`` is
written last and names the slot's message (message k of the pair carries seq k + 1), so a
reader that sees the seq it expects sees the whole message (x86 stores are ordered).
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import re
import secrets
from dataclasses import dataclass, replace

from .. import config
from ..errors import ArgumentError, TransportError
from .kernel import cross_memory_attach_works

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
 H_STREAM_CHUNK_BYTES, H_P2P_CELL_BYTES, H_P2P_CELLS) = range(15)

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
#: the most ranks the stream areas serve (a job of more has none): a chunk's mask of readers
#: is a signed 64-bit word in the stream's plans, so rank 63's bit does not fit
STREAM_MAX_RANKS = 63
#: slots per rank in a direct area (successive calls use them in turn)
DIRECT_SLOTS = 4
#: a stream area's roll-call words per rank (`collops.shm.roll_call`: successive rooted calls
#: and phases use them in turn), and the control lines holding them: words, fingerprints,
#: calls done
ROLL_SLOTS = 64
ROLL_LINES = 3 * ROLL_SLOTS * WORD // LINE
#: communicator contexts whose next call numbers the segment holds (for stall reports)
COUNTED_CONTEXTS = 64
#: bytes of one rank's call counters (whole lines: no other rank writes near them)
COUNTER_BYTES = COUNTED_CONTEXTS * 8
#: bytes of one point-to-point cell (a 64-byte header, then dims, dtype token and payload)
#: unless the selection tables say otherwise (``protocols.shm.p2p_cell_bytes``), and the
#: bounds a table's value must keep (a multiple of 64)
P2P_CELL_BYTES = 1024
P2P_CELL_BOUNDS = (128, 65536)
#: the bounds of a table's cells per pair ring (``protocols.shm.p2p_ring_cells``) and of its
#: pair ring slot's bytes (``protocols.shm.ring_slot_bytes``, a multiple of 64)
P2P_RING_CELL_BOUNDS = (2, 4096)
RING_SLOT_BOUNDS = (128, 65536)
#: the control lines of a cell ring: consumed counter, sender's waiting flag
CELL_CONTROL = 2 * LINE
#: bytes per rank a job's segment takes at most (``COLLOPS_SHM_PER_RANK``), besides
#: `PAIR_RESERVE`: the rank's direct and stream areas, then its share of the pair areas
DEFAULT_PER_RANK = 16 << 20
#: bytes the pair areas get besides the ranks' shares, so that 2 to 4 ranks keep full rings
#: and bulk areas
PAIR_RESERVE = 16 << 20
#: the fewest ring slots and the smallest bulk chunk of a pair area
MIN_SLOTS = 4
MIN_CHUNK_BYTES = 4096
#: the control page that starts every pair area
PAIR_CONTROL = 4096

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
    p2p_cell_bytes: int = P2P_CELL_BYTES
    #: cells of one pair's point-to-point ring (``protocols.shm.p2p_ring_cells``: fewer as
    #: the pairs multiply)
    p2p_cells: int = 64

    @classmethod
    def for_ranks(cls, size: int, per_rank: int | None = None) -> Layout:
        """The layout of a job of ``size`` ranks within ``per_rank`` bytes a rank (default:
        ``COLLOPS_SHM_PER_RANK``) plus `PAIR_RESERVE`: the per-rank areas as they are, the
        pair areas as large as the rest allows (at most the defaults); `TransportError` naming
        the least that would do when the rest cannot hold the smallest pair areas."""
        if per_rank is None:
            per_rank = config.settings.shm_per_rank or DEFAULT_PER_RANK
        base = cls(size, stream_areas=DEFAULT_STREAM_AREAS if size <= STREAM_MAX_RANKS else 0,
                   **_tabled_sizes(size))
        budget = (PAIR_RESERVE + size * (per_rank - base.rank_area_bytes)) // (size * size)
        geometry = _pair_geometry(budget, base.slot_bytes)
        if geometry is None:
            smallest = PAIR_CONTROL + MIN_SLOTS * base.slot_bytes + 2 * MIN_CHUNK_BYTES
            least = max(1, base.rank_area_bytes
                        - (PAIR_RESERVE - smallest * size * size) // size)
            raise TransportError(
                f"shared memory for {size} ranks: COLLOPS_SHM_PER_RANK={per_rank} bytes a rank "
                f"is too small; a job of {size} ranks needs at least {least} bytes "
                f"({least / (1 << 20):.1f} MiB) a rank: raise COLLOPS_SHM_PER_RANK")
        nslots, nchunks, chunk_bytes = geometry
        return replace(base, nslots=nslots, nchunks=nchunks, chunk_bytes=chunk_bytes)

    @property
    def rank_area_bytes(self) -> int:
        """Bytes of one rank's block, direct areas, stream areas and call counters (its part of
        the segment besides the pair areas)."""
        return (LINE + self.direct_areas * self.direct_rank_bytes
                + self.stream_areas * self.stream_rank_bytes + COUNTER_BYTES
                + self.size * self.cell_ring_bytes)

    @property
    def ring_offset(self) -> int:
        """Offset of the first pair area."""
        return _round_up(HEADER_BYTES + self.size * LINE, 4096)

    @property
    def pair_bytes(self) -> int:
        """Bytes of one pair area (control lines, ring, bulk), page aligned."""
        return _round_up(PAIR_CONTROL + self.nslots * self.slot_bytes
                         + self.nchunks * self.chunk_bytes, 4096)

    @property
    def direct_offset(self) -> int:
        """Offset of the first direct area."""
        return self.ring_offset + self.size * self.size * self.pair_bytes

    @property
    def direct_acks_bytes(self) -> int:
        """Bytes of one rank's acknowledgement words in a direct area."""
        return _round_up(self.size * DIRECT_SLOTS * WORD, LINE)

    @property
    def direct_slot_bytes(self) -> int:
        """Bytes of one direct slot: ``direct_bytes`` of contribution and the lines where the
        header of a call whose blocks carry their lengths goes (alltoallv, gatherv: ``1 + 3p``
        words, `direct_alltoallv.head_words`), so blocks of ``direct_bytes`` fit with it at
        any number of ranks."""
        return self.direct_bytes + _round_up(WORD * (1 + 3 * self.size), LINE)

    @property
    def direct_rank_bytes(self) -> int:
        """Bytes of one rank's part of a direct area: control line, acks, slots."""
        return LINE + self.direct_acks_bytes + DIRECT_SLOTS * self.direct_slot_bytes

    @property
    def stream_offset(self) -> int:
        """Offset of the first stream area."""
        return _round_up(self.direct_offset + self.direct_areas * self.size
                         * self.direct_rank_bytes, 4096)

    @property
    def stream_control_bytes(self) -> int:
        """Bytes of one rank's control lines in a stream area: its filled counter, one
        drained counter per reader, one header per chunk slot, the roll call's lines (page
        aligned)."""
        return _round_up(LINE * (1 + self.size + self.stream_chunks + ROLL_LINES), 4096)

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
    def cell_ring_bytes(self) -> int:
        """Bytes of one pair's cell ring: its control lines and cells."""
        return CELL_CONTROL + self.p2p_cells * self.p2p_cell_bytes

    @property
    def cells_offset(self) -> int:
        """Offset of the first cell ring (after the call counters)."""
        return _round_up(self.counters_offset + self.size * COUNTER_BYTES, 4096)

    def cell_ring_offset(self, src: int, dst: int) -> int:
        """Byte offset of the (src -> dst) cell ring's control lines."""
        return self.cells_offset + (src * self.size + dst) * self.cell_ring_bytes

    @property
    def total_bytes(self) -> int:
        """Size of the whole segment."""
        return _round_up(self.cells_offset + self.size * self.size * self.cell_ring_bytes, 4096)

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
        return self.pair_offset(src, dst) + PAIR_CONTROL + slot * self.slot_bytes

    def chunk_offset(self, src: int, dst: int, chunk: int) -> int:
        """Byte offset of a bulk chunk."""
        return (self.pair_offset(src, dst) + PAIR_CONTROL + self.nslots * self.slot_bytes
                + chunk * self.chunk_bytes)


def _round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


@dataclass(frozen=True)
class Tabled:
    """A number of the layout the selection tables set: its `Layout` field, the multiple it
    must be of, its bounds (``high`` None: none) and its unit in errors."""

    field: str
    multiple: int
    low: int
    high: int | None = None
    unit: str = "bytes"


#: numbers of the layout the selection tables set (``protocols.shm.<name>``, read as the
#: job's segment is laid out; a tuning file may set them per rank count, as `collops tune`
#: does): the direct slots, the stream's chunks, the point-to-point cells and their count per
#: pair ring, the pair ring's slots (an eager message's most bytes, besides `SLOT_HEADER`)
TABLED_SIZES = {
    "direct_bytes": Tabled("direct_bytes", 4096, 4096),
    "stream_chunk_bytes": Tabled("stream_chunk_bytes", 4096, 4096),
    "p2p_cell_bytes": Tabled("p2p_cell_bytes", 64, *P2P_CELL_BOUNDS),
    "p2p_ring_cells": Tabled("p2p_cells", 1, *P2P_RING_CELL_BOUNDS, unit="cells"),
    "ring_slot_bytes": Tabled("slot_bytes", 64, *RING_SLOT_BOUNDS),
}


def _tabled_sizes(size: int) -> dict[str, int]:
    """The `TABLED_SIZES` the selection tables give a job of ``size`` ranks, by `Layout`
    field; `TransportError` when the tuning file in force cannot be read or gives a number
    out of bounds."""
    from ..algorithms import tuning

    found = {}
    for name, t in TABLED_SIZES.items():
        try:
            rule = tuning.setting("shm", name, None, config.settings.tuning_file, size)
        except ArgumentError as exc:
            raise TransportError(f"the layout of a job of {size} ranks: {exc}") from exc
        value = rule.value
        if (isinstance(value, bool) or not isinstance(value, int) or value < t.low
                or value % t.multiple or (t.high is not None and value > t.high)):
            bounds = "" if t.high is None else f" from {t.low} to {t.high}"
            what = (f"a positive multiple of {t.multiple} {t.unit}" if t.multiple > 1
                    else f"a whole number of {t.unit}")
            raise TransportError(f"{rule.where}: shm.{name} must be {what}{bounds}, "
                                 f"not {value!r}")
        found[t.field] = value
    return found


def _pair_geometry(budget: int, slot_bytes: int) -> tuple[int, int, int] | None:
    """Ring slots, bulk chunks and chunk bytes of a pair area of at most ``budget`` bytes:
    the ring takes up to half of what follows the control page (halving its slots, down to
    `MIN_SLOTS`), the bulk area's two chunks the rest (at most the defaults); None when even
    the smallest does not fit."""
    room = budget - PAIR_CONTROL
    nslots = DEFAULT_NSLOTS
    while nslots > MIN_SLOTS and nslots * slot_bytes > room // 2:
        nslots //= 2
    chunk = min(DEFAULT_CHUNK_BYTES,
                (room - nslots * slot_bytes) // DEFAULT_NCHUNKS // 4096 * 4096)
    if chunk < MIN_CHUNK_BYTES:
        return None
    return nslots, DEFAULT_NCHUNKS, chunk


#: a job's segment: the descriptor of an anonymous one, or the name of a named one
Job = int | str


def segment_path(job: str) -> str:
    """The /dev/shm path of a named job's segment."""
    if not _JOB_NAME.match(job):
        raise TransportError(f"invalid collops job name {job!r}")
    return os.path.join(SHM_DIR, PREFIX + job)


def create_job(size: int, layout: Layout | None = None, single_copy: bool | None = None,
               named: bool = False) -> tuple[Job, Layout]:
    """Create a new job segment; return (job, layout): ``job`` is the descriptor of an
    anonymous segment (close it with `release_job` once the ranks hold it), or with
    ``named`` the name of a file under /dev/shm (mode 0600, unguessable; `release_job`
    unlinks it). `TransportError` naming the bytes, the ranks and the setting to change when
    the memory cannot be had.

    ``single_copy`` says whether ranks may use process_vm_readv (None: probe the kernel).
    """
    layout = layout or Layout.for_ranks(size)
    if single_copy is None:
        single_copy = cross_memory_attach_works()
    job: Job
    if named:
        job = secrets.token_hex(16)
        fd = os.open(segment_path(job), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                     0o600)
        os.fchmod(fd, 0o600)  # whatever the umask
    else:
        fd = job = os.memfd_create(PREFIX + "job", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        _allocate(fd, size, layout.total_bytes)
        if not named:  # no rank can shrink it under the others' feet
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
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
            words[H_P2P_CELL_BYTES] = layout.p2p_cell_bytes
            words[H_P2P_CELLS] = layout.p2p_cells
            words[H_MAGIC] = MAGIC
            words.release()
    except BaseException:
        os.close(fd)
        if named:
            release_job(job)
        raise
    if named:
        os.close(fd)
    return job, layout


def _allocate(fd: int, size: int, nbytes: int) -> None:
    """Give the segment its ``nbytes`` now (so a shortage is an error here, not a SIGBUS in
    a rank later); `TransportError` saying what to change when they cannot be had."""
    try:
        os.ftruncate(fd, nbytes)
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        per_rank = config.settings.shm_per_rank or DEFAULT_PER_RANK
        raise TransportError(
            f"shared memory for {size} ranks: cannot get the job's {nbytes} bytes "
            f"({nbytes / (1 << 20):.1f} MiB, at most {PAIR_RESERVE >> 20} MiB + "
            f"COLLOPS_SHM_PER_RANK={per_rank} bytes a rank): {exc.strerror or exc}; run "
            f"fewer ranks, lower COLLOPS_SHM_PER_RANK, or raise the memory limit "
            f"(ulimit -f / -v, the container's memory)") from None


def release_job(job: Job) -> None:
    """Drop the creator's hold on a job's segment: close an anonymous segment's descriptor,
    unlink a named one (idempotent)."""
    if isinstance(job, int):
        try:
            os.close(job)
        except OSError:
            pass
        return
    try:
        os.unlink(segment_path(job))
    except FileNotFoundError:
        pass


class Segment:
    """A job's segment mapped into this process."""

    def __init__(self, job: Job) -> None:
        if isinstance(job, int):  # an inherited descriptor: it stays open, not ours to close
            where = f"descriptor {job}"
            try:
                total = os.fstat(job).st_size
                self.map = mmap.mmap(job, total)
            except (OSError, ValueError) as exc:
                raise TransportError(f"collops job segment: {where} cannot be mapped "
                                     f"({exc})") from None
        else:
            where = segment_path(job)
            try:
                fd = os.open(where, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                raise TransportError(f"collops job segment {where} does not exist") from None
            try:
                self.map = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        self.buf = memoryview(self.map)
        self.words = self.buf.cast("Q")
        w = self.words
        if w[H_MAGIC] != MAGIC:
            self.close()
            raise TransportError(f"{where} is not a collops job segment")
        self.layout = Layout(int(w[H_SIZE]), int(w[H_NSLOTS]), int(w[H_SLOT_BYTES]),
                             int(w[H_NCHUNKS]), int(w[H_CHUNK_BYTES]),
                             int(w[H_DIRECT_AREAS]), int(w[H_DIRECT_BYTES]),
                             int(w[H_STREAM_AREAS]), int(w[H_STREAM_CHUNKS]),
                             int(w[H_STREAM_CHUNK_BYTES]), int(w[H_P2P_CELL_BYTES]),
                             int(w[H_P2P_CELLS]))
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
