"""The shared-memory transport: ranks that are processes of one machine.

Every ordered pair of ranks (src -> dst) owns a ring of fixed-size slots and a bulk area in
the job's segment (see `shm_segment` for the layout). Three protocols move a message:

* **eager** (payload fits a slot): the sender writes payload, header, and last the slot's
  sequence number; the send is done at once. The receiver polls the next slot of each
  incoming ring in `progress`, copies the payload into the posted buffer — or keeps a copy
  among the unexpected messages — and publishes its tail so the sender can reuse the slot.
* **single copy** (when the kernel permits `process_vm_readv`: up to `SINGLE_COPY_MAX` and
  from `SINGLE_COPY_MIN` bytes, by default every size): the sender posts a request-to-send
  carrying its buffer's address; the receiver, once it has a matching receive, reads the
  bytes straight from the sender's memory and answers FIN. From `SPLIT_MIN` bytes the
  transfer is **split**: the receiver reads pieces from the front and invites the sender
  (SPLIT, carrying the receive buffer's address) to write pieces from the back with
  `process_vm_writev` whenever it polls, the two claiming pieces through words of the pair
  area (see "split single copy" below). Buffers whose kernel copy would suffer 4 KiB
  aliasing are pipelined instead (`shm_segment.aliased`).
* **pipelined** (in between, or without single copy): the receiver answers a request-to-send
  with clear-to-send when its receive is posted and the pair's bulk area is free; the sender
  then streams chunks into the bulk area's chunk slots while the receiver copies earlier
  chunks out, each side publishing a cumulative chunk counter. The receiver grants the bulk
  area to one message at a time, so out-of-order receives can never deadlock it.
  **Two-ended** when the request carries the sender's address and the receiver does not
  send to that peer itself: should no chunk come for `PULL_AFTER`, the receiver reads
  pieces from the back of the sender's buffer, publishing its lower boundary in the word
  after its drained counter; the sender stops at that boundary (bytes copied twice near the
  meeting point are the same bytes, so races cost only time), sends STOP with its chunk
  count, and completes on the receiver's FIN, sent once the front meets the back.

Waiting spins briefly (not at all when ranks outnumber cores), then yields the core, then
sleeps on a futex in the rank's block after raising its *sleeping* flag; a sender that sees
the flag bumps the doorbell and wakes it, so wake-ups cost a system call only for ranks
that actually sleep. Flag and ring stores are ordered by a full fence on both sides (an
uncontended lock, whose atomic instruction is a fence on x86).

Failures: the launcher marks a dead rank in the job header and wakes every rank; `progress`
raises `PeerFailed` when any operation is pending. A peer that exited normally while this
rank still waits for it is reported the same way.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..algorithms.fingerprint import describe
from ..errors import CollectiveMismatch, PeerFailed, TransportError
from ..transport import placement
from ..transport.base import Capabilities, Handle, Transport
from ..transport.tags import CALL_BITS, PHASE_BITS, SEQ_BITS
from . import segment as seg
from .direct_area import DirectArea, set_slot_capacity, slot_of
from .stream_area import StreamArea

_FENCE = threading.Lock()
#: tag, fingerprint, nbytes, kind, aux: the slot header after its sequence word
_SLOT_FIELDS = struct.Struct("=5Q")
_MASK32 = 0xFFFFFFFF
#: seconds of pure polling before yielding, when every rank has a core of its own
SPIN_SECONDS = 50e-6
#: seconds of polling with sched_yield between polls before sleeping
YIELD_SECONDS = 1e-3
#: longest single futex sleep (failures also wake sleepers explicitly)
SLEEP_SLICE = 0.25
#: messages sent single-copy when every rank has a core: up to the most and from the least
#: (the receiver reads them from the sender's memory, one system call; only the reader needs
#: to be scheduled). Those in between are pipelined through the bulk area, whose copy-in and
#: copy-out run on two cores at once, and, unless both ranks send to each other, two-ended:
#: the receiver reads from the back itself when no chunk comes for `PULL_AFTER`, so a sender
#: that is not scheduled delays nothing for long. When ranks outnumber cores the pipeline
#: stalls on every chunk until the peer is scheduled, so then every large message goes
#: single-copy. Measured with benchmarks/shm_transfer.py and benchmarks/variants.py on the
#: 2-core development machine, µs (pipelined through 2 x 1 MiB / single copy): one way, best
#: of 11 rounds: 64 KiB 21 / 28, 256 KiB 35 / 53, 1 MiB 80 / 97, 4 MiB 174 / 269, 16 MiB
#: 949 / 1194; both ways at once: 64 KiB 44 / 17, 256 KiB 118 / 35, 1 MiB 67 / 102, 4 MiB
#: 290 / 271, 16 MiB 2146 / 1858; with other jobs loading the machine single copy is 2-5x
#: faster at every size. Collectives (median µs): bcast 64 KiB 67 / 58, 16 MiB 2493 / 1711
#: (its root copies locally as well), allgather 1 MiB 124 / 149, 4 MiB 896 / 1073.
#: Since split transfers (`SPLIT_MIN`) let both cores copy a one-way message and buffers in
#: 4 KiB aliasing (`seg.aliased`) go through the bulk area, single copy is the default at every
#: size (2 ranks, interleaved with MPICH on an idle machine, collops / MPICH before → after:
#: bcast 1 MiB 2.9 → 1.4, 4 MiB 2.2 → 1.2; allgather 1 MiB 1.0 → 0.6, 4 MiB 1.2 → 0.6;
#: alltoall 1 MiB 1.6 → 1.3, 4 MiB 2.6 → 1.2, before splitting). With splitting, the same
#: interleaved run (benchmarks/interleaved.py, ratios to MPICH, single copy from 0 / 2 MiB /
#: 8 MiB) put the pipeline ahead at 1 MiB (bcast 1.64 / 1.43 / 1.47, allgather 1.77 / 1.12 /
#: 1.27, alltoall 1.84 / 1.48 / 1.58) and 2 MiB level with 0 from 4 MiB on, so single copy
#: starts at 2 MiB; `COLLOPS_SHM_SINGLE_COPY_MIN` moves that.
SINGLE_COPY_MAX = 256 << 10
SINGLE_COPY_MIN = 2 << 20
#: smallest chunk of a pipelined transfer (see `ShmTransport._piece`)
PIECE_MIN = 64 << 10
#: seconds a two-ended transfer's receiver waits for a chunk before it reads from the back
#: itself (reading while the sender streams slows both down: they copy the same bytes)
PULL_AFTER = 100e-6
#: bytes it then reads at a time: at first; doubled (up to the most) while no chunk comes
PULL_BYTES, PULL_MAX = 128 << 10, 2 << 20
#: STOP: a two-ended transfer's sender wrote its last chunk (aux: its pair's chunk count)
_STOP = 6
#: SPLIT: the receiver of a single-copy message reads it from the front and invites the
#: sender to write it from the back (fingerprint field: the transfer's generation, nbytes:
#: its piece size, aux: the receive buffer's address)
_SPLIT = 7
#: single-copy messages from this size on are split: the receiver reads pieces from the
#: front, the sender — whenever it polls and has nothing else to do — writes pieces into the
#: receive buffer from the back (``process_vm_writev``), so two cores copy a one-way message
#: and a sender waiting for its peer (a broadcast's root, say) is never idle
#: (a rank that is reading split transfers itself writes none: in an exchange each reads
#: its own, and helps the other once done)
SPLIT_MIN = 256 << 10
#: seconds a rank whose single-copy read failed waits for the sender's death to be marked
FAILURE_GRACE = 5.0
#: a split transfer's pieces: an eighth of the message, within these bounds
SPLIT_PIECE_MIN, SPLIT_PIECE_MAX = 128 << 10, 1 << 20
#: the ``go`` of a clear-to-send: refused (message too large), pipelined, two-ended
_GO_REFUSED, _GO_PIPE, _GO_SHARED = 0, 1, 2


def _byte_view(data: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer-protocol object (copying only if strided)."""
    view = data if type(data) is memoryview else memoryview(data)
    if view.format == "B" and view.ndim == 1 and view.c_contiguous:
        return view
    if view.c_contiguous:
        return view.cast("B")
    return memoryview(view.tobytes())


def _address(view: memoryview) -> int:
    """The address of a contiguous buffer's first byte."""
    if view.nbytes and not view.readonly:  # ctypes: 0.3 µs; through numpy: 1.8 µs
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    return int(np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0])


class _Outgoing:
    """A message this rank streams into a pair's bulk area."""

    __slots__ = ("h", "data", "piece", "shared", "offset", "stopped", "address")

    def __init__(self, h: Handle, data: memoryview, piece: int, shared: bool) -> None:
        self.h, self.data, self.piece, self.shared = h, data, piece, shared
        self.offset = 0  # where the next chunk starts
        self.stopped = False  # (two-ended) STOP sent
        self.address = 0  # of ``data``, once a chunk is copied


class _Incoming:
    """A message this rank receives through a pair's bulk area (and, when two-ended, by
    reading the sender's buffer from the back)."""

    __slots__ = ("h", "out", "n", "tag", "piece", "remote", "shared", "front", "back", "pid",
                 "local", "complete", "stop", "pull", "due")

    def __init__(self, h: Handle, out: memoryview, n: int, tag: int, piece: int,
                 remote: int) -> None:
        self.h, self.out, self.n, self.tag, self.piece = h, out, n, tag, piece
        self.remote = remote  # the sender's buffer address, 0 when it may not be read
        self.shared = remote != 0  # two-ended: FIN and STOP close it
        self.front = 0  # where the next chunk starts
        self.back = n  # bytes from here on were read from the back
        self.pid = self.local = 0
        self.complete = False
        self.stop: int | None = None  # (two-ended) the sender's chunk count at its STOP
        self.pull = PULL_BYTES  # bytes of the next read from the back
        self.due = 0.0  # when to read from the back unless a chunk comes first


class _SplitIn:
    """A single-copy message this rank reads piece by piece from the front of the sender's
    buffer while the sender may write pieces from the back (see `ShmTransport._split_read`)."""

    __slots__ = ("h", "n", "tag", "piece", "pieces", "gen", "pid", "remote", "local", "front",
                 "error", "failed_at")

    def __init__(self, h: Handle, n: int, tag: int, gen: int, pid: int, remote: int,
                 local: int) -> None:
        self.h, self.n, self.tag, self.gen = h, n, tag, gen
        self.piece = _split_piece(n)
        self.pieces = -(-n // self.piece)
        self.pid, self.remote, self.local = pid, remote, local
        self.front = 0  # pieces [0, front) read by this rank
        self.error: TransportError | None = None  # a read failed (the sender died?) ...
        self.failed_at = 0.0  # ... at this time


class _SplitOut:
    """A single-copy message whose receiver invited this rank to write pieces from the back."""

    __slots__ = ("h", "n", "piece", "pieces", "gen", "pid", "remote", "local", "bottom",
                 "stopped")

    def __init__(self, h: Handle, n: int, piece: int, gen: int, pid: int, remote: int,
                 local: int) -> None:
        self.h, self.n, self.piece, self.gen = h, n, piece, gen
        self.pieces = -(-n // piece)
        self.pid, self.remote, self.local = pid, remote, local
        self.bottom = self.pieces  # pieces [bottom, pieces) written by this rank
        self.stopped = False  # met the receiver's front: nothing more to write


def _split_piece(n: int) -> int:
    """Bytes per piece of a split transfer of ``n`` bytes (both sides compute it alike)."""
    share = -(-n // (8 * 4096)) * 4096
    return min(SPLIT_PIECE_MAX, max(SPLIT_PIECE_MIN, share))


class ShmTransport(Transport):
    """Rank ``rank`` of ``size`` ranks sharing the job segment ``job`` under /dev/shm."""

    def __init__(self, job: str, rank: int, size: int, *, single_copy: bool | None = None,
                 single_copy_min: int | None = None) -> None:
        self._segment = seg.Segment(job)
        layout = self._segment.layout
        if layout.size != size or not 0 <= rank < size:
            self._segment.close()
            raise TransportError(
                f"job {job} has {layout.size} ranks; cannot attach as rank {rank} of {size}")
        self.job, self.rank, self.size = job, rank, size
        self._layout = layout
        self._words = self._segment.words
        self._buf = self._segment.buf
        self._base_address = self._segment.address
        self._nslots, self._mask = layout.nslots, layout.nslots - 1
        assert layout.nslots & self._mask == 0, "slot count must be a power of two"
        self._eager_limit = layout.eager_limit
        self._nchunks, self._chunk_bytes = layout.nchunks, layout.chunk_bytes
        allowed = bool(self._words[seg.H_CMA])
        if single_copy is None:
            single_copy = os.environ.get("COLLOPS_SHM_SINGLE_COPY", "1") != "0"
        self._single_copy = allowed and single_copy
        self._oversubscribed = size > placement.job_cpu_count()
        self._binding = placement.binding_of_job(size)
        if single_copy_min is None:
            default = 0 if self._oversubscribed else SINGLE_COPY_MIN
            single_copy_min = int(os.environ.get("COLLOPS_SHM_SINGLE_COPY_MIN", default))
        self._single_copy_min = max(layout.eager_limit + 1, single_copy_min)
        self._single_copy_max = SINGLE_COPY_MAX
        self._split_min = SPLIT_MIN
        if layout.direct_areas and layout.direct_bytes:
            set_slot_capacity(layout.direct_bytes)
        self._reader = seg.RemoteReader()
        #: current spin budget: halved when a spin finds nothing, restored when one succeeds
        self._spin = 0.0 if self._oversubscribed else SPIN_SECONDS
        self._closed = False
        self._direct_areas: dict[tuple[int, tuple[int, ...]], DirectArea] = {}
        self._stream_areas: dict[int, StreamArea] = {}
        self._direct_watch: list[Callable[[], bool]] = []
        self._init_tables()
        self._attach()

    @classmethod
    def from_env(cls) -> ShmTransport:
        """Attach as described by COLLOPS_JOB, COLLOPS_RANK and COLLOPS_SIZE."""
        try:
            job = os.environ["COLLOPS_JOB"]
            rank = int(os.environ["COLLOPS_RANK"])
            size = int(os.environ["COLLOPS_SIZE"])
        except (KeyError, ValueError) as exc:
            raise TransportError(f"shm transport: environment incomplete ({exc})") from None
        return cls(job, rank, size)

    # ---- set-up -----------------------------------------------------------------------

    def _init_tables(self) -> None:
        lay, me, n = self._layout, self.rank, self.size
        ranks = range(n)
        self._ranks = list(ranks)
        self._out_slots = [[lay.slot_offset(me, p, s) // 8 for s in range(lay.nslots)]
                           for p in ranks]
        self._in_slots = [[lay.slot_offset(p, me, s) // 8 for s in range(lay.nslots)]
                          for p in ranks]
        self._out_head = [0] * n
        self._out_consumed = [0] * n
        self._out_consumed_word = [lay.consumed_word(me, p) for p in ranks]
        self._in_tail = [0] * n
        self._in_consumed_word = [lay.consumed_word(p, me) for p in ranks]
        self._sleeping_word = [lay.rank_word(p, seg.R_SLEEPING) for p in ranks]
        self._doorbell_word = [lay.rank_word(p, seg.R_DOORBELL) for p in ranks]
        self._state_word = [lay.rank_word(p, seg.R_STATE) for p in ranks]
        self._pid_word = [lay.rank_word(p, seg.R_PID) for p in ranks]
        self._out_chunks = [lay.chunk_offset(me, p, 0) for p in ranks]  # chunk 0 byte offsets
        self._in_chunks = [lay.chunk_offset(p, me, 0) for p in ranks]
        self._out_filled_word = [lay.filled_word(me, p) for p in ranks]
        self._out_drained_word = [lay.drained_word(me, p) for p in ranks]
        self._in_filled_word = [lay.filled_word(p, me) for p in ranks]
        self._in_drained_word = [lay.drained_word(p, me) for p in ranks]
        #: a two-ended transfer's back boundary: the word after the drained counter
        self._in_back_word = [lay.drained_word(p, me) + 1 for p in ranks]
        self._out_chunk_count = [0] * n
        self._in_chunk_count = [0] * n
        self._posted: list[dict[int, tuple[Handle, memoryview]]] = [{} for _ in ranks]
        self._unexpected: list[dict[int, tuple[int, int, int, Any]]] = [{} for _ in ranks]
        self._rendezvous_sends: list[dict[int, tuple[Handle, memoryview]]] = [{} for _ in ranks]
        self._send_queue: list[deque[tuple[int, int, int, int, Any, int, Handle | None]]] = [
            deque() for _ in ranks]
        self._pipe_out: list[deque[_Outgoing]] = [deque() for _ in ranks]
        self._pipe_in: list[deque[_Incoming]] = [deque() for _ in ranks]
        #: two-ended transfers sent, until their FIN
        self._streams: list[dict[int, _Outgoing]] = [{} for _ in ranks]
        #: split single-copy transfers: the one this rank reads from each peer, and those it
        #: may help write to each peer; the words of both ends, and the generation counter
        #: that tells this transfer's words from an earlier one's
        self._split_in: list[_SplitIn | None] = [None] * n
        self._split_out: list[dict[int, _SplitOut]] = [{} for _ in ranks]
        self._split_gen = [0] * n
        self._split_reading = 0  # split transfers this rank reads (then it writes none)
        self._split_in_claim = [lay.split_receiver_word(p, me) for p in ranks]
        self._split_in_sender = [lay.split_sender_word(p, me) for p in ranks]
        self._split_out_claim = [lay.split_receiver_word(me, p) for p in ranks]
        self._split_out_sender = [lay.split_sender_word(me, p) for p in ranks]
        self._busy: set[int] = set()

    def _attach(self) -> None:
        lay, me = self._layout, self.rank
        for p in self._ranks:
            for a, b in ((me, p), (p, me)):
                self._segment.prefault(lay.pair_offset(a, b), lay.pair_bytes)
        self._words[lay.rank_word(me, seg.R_PID)] = os.getpid()
        self._words[lay.rank_word(me, seg.R_STATE)] = seg.ATTACHED

    # ---- the interface ----------------------------------------------------------------

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Start sending ``data`` to ``peer``; ``data`` must stay unchanged until done."""
        if type(data) is not memoryview or data.format != "B" or not data.c_contiguous:
            data = _byte_view(data)
        n = data.nbytes
        h = Handle(peer, tag, n)
        if n <= self._eager_limit:
            if self._send_queue[peer] or not self._push(peer, seg.EAGER, tag, fingerprint,
                                                          data, n, 0):
                self._enqueue(peer, (seg.EAGER, tag, fingerprint, n, data, 0, h))
            else:
                h.done = True
            return h
        self._rendezvous_sends[peer][tag] = (h, data)
        if self._single_copy and (n >= self._single_copy_min or n <= self._single_copy_max):
            kind, aux = seg.RTS_CMA, _address(data)
        else:  # pipelined; two-ended when the receiver may read this buffer too
            kind, aux = seg.RTS_PIPE, _address(data) if self._single_copy else 0
        self._send_control(peer, kind, tag, fingerprint, n, aux)
        return h

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Start receiving the message ``(peer, tag)`` into ``out``."""
        if type(out) is not memoryview or out.format != "B" or out.ndim != 1:
            out = memoryview(out)
            if not out.c_contiguous:
                raise TransportError("shm transport: a receive buffer must be contiguous")
            out = out.cast("B")
        h = Handle(peer, tag, out.nbytes)
        unexpected = self._unexpected[peer]
        if unexpected and tag in unexpected:
            kind, fp, n, extra = unexpected.pop(tag)
            if kind == seg.EAGER:
                self._complete_eager(h, out, fp, n, extra)
            else:
                self._match_rendezvous(peer, h, out, kind, tag, fp, n, extra)
        else:
            self._posted[peer][tag] = (h, out)
        return h

    def progress(self) -> None:
        """Advance pending operations without blocking; raise on failure."""
        self._advance()

    def wait_for_activity(self, timeout: float | None) -> None:
        """Block until some pending operation may have advanced, or ``timeout`` seconds."""
        if self._advance():
            return
        now = time.perf_counter()
        deadline = float("inf") if timeout is None else now + timeout
        for peer in self._busy:  # a two-ended receive reads from the back when its time comes
            queue = self._pipe_in[peer]
            if queue and queue[0].remote and not queue[0].complete:
                deadline = min(deadline, queue[0].due)
        if not self._oversubscribed:
            stop = min(deadline, now + max(self._spin, 2e-6))
            while time.perf_counter() < stop:
                if self._advance():
                    self._spin = SPIN_SECONDS
                    return
            self._spin *= 0.5  # a loaded machine: spinning only steals the peer's core
        stop = min(deadline, time.perf_counter() + YIELD_SECONDS)
        while time.perf_counter() < stop:
            os.sched_yield()
            if self._advance():
                return
        self._sleep_until_activity(deadline)

    def capabilities(self) -> Capabilities:
        """What this transport offers ("shm_direct": direct areas for small collectives;
        "shm_stream": stream areas for large ones, on top of them; "shm_cma": single copies
        out of the peers' memory, where the job permits them)."""
        lay = self._layout
        resources = frozenset({"shm_direct"}) if lay.direct_areas and lay.direct_bytes \
            else frozenset()
        if resources and lay.stream_rank_bytes and self.size <= 64:
            resources |= {"shm_stream"}
        if resources and self._single_copy:
            resources |= {"shm_cma"}
        return Capabilities(name="shm", node_of_rank=(0,) * self.size,
                            single_copy=self._single_copy, resources=resources)

    # ---- direct areas (see shm_direct) ------------------------------------------------

    def direct_area(self, context: int, group: Sequence[int]) -> DirectArea | None:
        """The direct area of the communicator ``(context, group)``, or None if it has none."""
        key = (context, tuple(group))
        area = self._direct_areas.get(key)
        if area is None:
            if not 0 <= context < self._layout.direct_areas or self.rank not in group:
                return None
            area = self._direct_areas[key] = DirectArea(self, context, group)
        return area

    def stream_area(self, context: int) -> StreamArea | None:
        """The stream area of communicator context ``context``, or None if it has none."""
        area = self._stream_areas.get(context)
        if area is None:
            if not 0 <= context < self._layout.stream_areas:
                return None
            area = self._stream_areas[context] = StreamArea(self, context)
        return area

    @property
    def segment_map(self) -> Any:
        """The job segment's mapping (a writable buffer), for the compiled runners."""
        return self._segment.map

    @property
    def segment_address(self) -> int:
        """The address of the job segment in this process."""
        return self._base_address

    @property
    def oversubscribed(self) -> bool:
        """Whether the job has more ranks than this process may use cores."""
        return self._oversubscribed

    def shares_core(self, rank: int) -> bool:
        """Whether the launcher pinned ``rank`` to the CPU it pinned this rank to."""
        mine = self._binding[self.rank]
        return mine is not None and rank != self.rank and self._binding[rank] == mine

    @property
    def direct_bytes(self) -> int:
        """Bytes of each rank's slot in a direct area (0: the job has no direct areas)."""
        return self._layout.direct_bytes if self._layout.direct_areas else 0

    def comm_resources(self, context: int, group: tuple[int, ...]) -> frozenset[str]:
        """"shm_direct" when the communicator has a direct area, "shm_stream" when it also
        has a stream area (`stream_areas`, in the segment after the direct areas)."""
        resources = self.capabilities().resources
        if "shm_direct" in resources and self.direct_area(context, group) is None:
            resources = resources - {"shm_direct", "shm_stream", "shm_cma"}
        if "shm_stream" in resources and not 0 <= context < self._layout.stream_areas:
            resources = resources - {"shm_stream"}
        return resources

    def watch_direct(self, ready: Callable[[], bool]) -> None:
        """Count ``ready()`` as activity in `wait_for_activity` until unwatched."""
        self._direct_watch.append(ready)

    def unwatch_direct(self, ready: Callable[[], bool]) -> None:
        """Stop watching ``ready``."""
        try:
            self._direct_watch.remove(ready)
        except ValueError:
            pass

    def wake_sleepers(self, ranks: Sequence[int]) -> None:
        """Wake those of ``ranks`` that sleep (after this rank's last store)."""
        _FENCE.acquire()
        _FENCE.release()
        words, sleeping = self._words, self._sleeping_word
        for r in ranks:
            if words[sleeping[r]]:
                self._wake(r)

    @staticmethod
    def fence() -> None:
        """A full memory fence: this rank's stores are visible before its next loads."""
        _FENCE.acquire()
        _FENCE.release()

    def read_from(self, rank: int, remote: int, local: int, nbytes: int) -> None:
        """Copy ``nbytes`` at address ``remote`` in rank ``rank``'s process to ``local``
        (single copy, for collectives that exchange buffer addresses); `PeerFailed` when that
        process is gone."""
        pid = self.pid_of(rank)
        try:
            self._reader.read(pid, remote, local, nbytes)
        except TransportError as e:
            raise self.single_copy_error(rank, getattr(e, "errno", 0), str(e)) from None

    def pid_of(self, rank: int) -> int:
        """The process id of world rank ``rank`` (for single copies from its memory)."""
        return int(self._words[self._pid_word[rank]])

    def pid_word(self, rank: int) -> int:
        """Index in the segment's words of world rank ``rank``'s process id (which it
        publishes when it attaches: read it when needed, not before)."""
        return self._pid_word[rank]

    def single_copy_error(self, rank: int, err: int, detail: str) -> TransportError:
        """The error for a single copy from ``rank``'s memory that failed with errno ``err``:
        `PeerFailed` when its process is gone (ESRCH: exited, even if not yet reaped), else a
        `TransportError` carrying ``detail``."""
        pid = self.pid_of(rank)
        if pid <= 0:  # not attached yet: nothing to read from, and nothing that died
            return TransportError(f"single copy from rank {rank}: it has not attached yet "
                                  f"({detail})")
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            err = errno.ESRCH
        if err == errno.ESRCH:
            return PeerFailed(rank, f"its process ({pid}) is gone ({detail})")
        return TransportError(f"single copy from rank {rank} (pid {pid}): {detail}")

    def sleeping_word(self, rank: int) -> int:
        """Index in the segment's words of ``rank``'s *sleeping* flag."""
        return self._sleeping_word[rank]

    def wake(self, rank: int) -> None:
        """Ring ``rank``'s doorbell and wake it (it has raised its sleeping flag)."""
        self._wake(rank)

    def sleep_for_direct(self, ready: Callable[[], bool], timeout: float) -> None:
        """Sleep on this rank's doorbell until ``ready()`` may hold (at most ``timeout``)."""
        words, me = self._words, self.rank
        sleeping, doorbell = self._sleeping_word[me], self._doorbell_word[me]
        ring = words[doorbell]
        words[sleeping] = 1
        _FENCE.acquire()
        _FENCE.release()
        try:
            if ready() or self._advance():
                return
            seg.futex_wait(self._base_address + doorbell * 8, ring, timeout)
        finally:
            words[sleeping] = 0

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of an unmatched message with ``tag >> shift == value``."""
        for peer in self._ranks:
            for tag, entry in self._unexpected[peer].items():
                if tag >> shift == value:
                    return peer, entry[1]
        return None

    def _direct_call_of_waited_peer(self) -> None:
        """Raise if a peer this rank awaits a message from made that call directly."""
        # where a message's call number sits in its tag (`collops.transport.tags`)
        shift, bits = SEQ_BITS, CALL_BITS + PHASE_BITS
        mask = (1 << bits) - 1
        words, lay = self._words, self._layout
        for peer in self._ranks:
            for tag in self._posted[peer]:
                context, call = tag >> (shift + bits), (tag >> shift) & mask
                if context >= lay.direct_areas:
                    continue
                slot = slot_of(call >> 3, call & 7)
                held = lay.direct_rank_offset(context, peer) // seg.WORD + 2 * slot
                k = int(words[held]) >> 24
                if k and (k - 1) & mask == call:
                    fingerprint = int(words[held + 1])
                    raise CollectiveMismatch(
                        f"rank {self.rank} (world) awaits a message from rank {peer} (world) "
                        f"for a call that rank {peer} made directly through shared memory: "
                        f"it called {describe(fingerprint)}")

    # ---- sending ----------------------------------------------------------------------

    def _push(self, peer: int, kind: int, tag: int, fp: int, data: Any, n: int,
              aux: int) -> bool:
        """Write one message into the (me -> peer) ring; False when the ring is full."""
        words = self._words
        head = self._out_head[peer]
        if head - self._out_consumed[peer] >= self._nslots:
            consumed = words[self._out_consumed_word[peer]]
            self._out_consumed[peer] = consumed
            if head - consumed >= self._nslots:
                return False
        w = self._out_slots[peer][head & self._mask]
        if n and kind == seg.EAGER:
            p = w * 8 + seg.SLOT_HEADER
            self._buf[p: p + n] = data
        _SLOT_FIELDS.pack_into(self._buf, w * 8 + 8, tag, fp, n, kind, aux)
        words[w] = head + 1
        self._out_head[peer] = head + 1
        _FENCE.acquire()
        _FENCE.release()
        if words[self._sleeping_word[peer]]:
            self._wake(peer)
        return True

    def _send_control(self, peer: int, kind: int, tag: int, fp: int, n: int, aux: int) -> None:
        if self._send_queue[peer] or not self._push(peer, kind, tag, fp, None, n, aux):
            self._enqueue(peer, (kind, tag, fp, n, None, aux, None))

    def _enqueue(self, peer: int, item: tuple[int, int, int, int, Any, int, Handle | None]
                 ) -> None:
        self._send_queue[peer].append(item)
        self._busy.add(peer)

    def _flush_queue(self, peer: int) -> bool:
        queue = self._send_queue[peer]
        moved = False
        while queue:
            kind, tag, fp, n, data, aux, h = queue[0]
            if not self._push(peer, kind, tag, fp, data, n, aux):
                break
            queue.popleft()
            if h is not None:
                h.done = True
            moved = True
        return moved

    def _wake(self, peer: int) -> None:
        words, w = self._words, self._doorbell_word[peer]
        words[w] = (words[w] + 1) & _MASK32
        seg.futex_wake(self._base_address + w * 8)

    # ---- receiving --------------------------------------------------------------------

    def _advance(self) -> bool:
        """One pass over every incoming ring and every busy peer; True if anything moved."""
        words = self._words
        if words[seg.H_FAILED]:
            self._raise_if_pending(int(words[seg.H_FAILED]) - 1)
        moved = False
        in_tail, in_slots, mask = self._in_tail, self._in_slots, self._mask
        for src in self._ranks:
            tail = in_tail[src]
            if words[in_slots[src][tail & mask]] == tail + 1:
                self._drain(src)
                moved = True
        if self._busy:
            for peer in list(self._busy):
                moved |= self._advance_peer(peer)
        if self._direct_watch:
            for ready in self._direct_watch:
                if ready():
                    return True
        return moved

    def _drain(self, src: int) -> None:
        words, slots, mask = self._words, self._in_slots[src], self._mask
        tail = self._in_tail[src]
        consumed_word = self._in_consumed_word[src]
        while True:
            w = slots[tail & mask]
            if words[w] != tail + 1:
                break
            kind, tag = words[w + 4], words[w + 1]
            if kind == seg.EAGER:
                self._on_eager(src, tag, words[w + 2], words[w + 3], w * 8 + seg.SLOT_HEADER)
            elif kind == seg.CTS:
                self._on_clear_to_send(src, tag, words[w + 5])
            elif kind == seg.FIN:
                self._on_finish(src, tag)
            elif kind == _STOP:
                self._on_stop(src, tag, words[w + 5])
            elif kind == _SPLIT:
                self._on_split(src, tag, words[w + 2], words[w + 3], words[w + 5])
            else:
                self._on_request_to_send(src, kind, tag, words[w + 2], words[w + 3],
                                         words[w + 5])
            tail += 1
            self._in_tail[src] = tail
            words[consumed_word] = tail

    def _on_eager(self, src: int, tag: int, fp: int, n: int, p: int) -> None:
        entry = self._posted[src].pop(tag, None)
        if entry is None:
            self._unexpected[src][tag] = (seg.EAGER, fp, n, bytes(self._buf[p: p + n]))
            return
        h, out = entry
        h.nbytes, h.fingerprint = n, fp
        if n <= out.nbytes:
            out[:n] = self._buf[p: p + n]
        h.done = True

    @staticmethod
    def _complete_eager(h: Handle, out: memoryview, fp: int, n: int, payload: bytes) -> None:
        h.nbytes, h.fingerprint = n, fp
        if n <= out.nbytes:
            out[:n] = payload
        h.done = True

    def _on_request_to_send(self, src: int, kind: int, tag: int, fp: int, n: int,
                            aux: int) -> None:
        entry = self._posted[src].pop(tag, None)
        if entry is None:
            self._unexpected[src][tag] = (kind, fp, n, aux)
        else:
            self._match_rendezvous(src, entry[0], entry[1], kind, tag, fp, n, aux)

    def _match_rendezvous(self, src: int, h: Handle, out: memoryview, kind: int, tag: int,
                          fp: int, n: int, address: int) -> None:
        """A request-to-send met its receive: read it now, or queue it for the bulk area."""
        h.nbytes, h.fingerprint = n, fp
        if n > out.nbytes:  # too large: copy nothing, release the sender
            self._send_control(src, seg.FIN if kind == seg.RTS_CMA else seg.CTS, tag, 0, 0,
                               _GO_REFUSED)
            h.done = True
            return
        readable = address != 0 and self._single_copy
        if (readable and kind == seg.RTS_CMA and not self._oversubscribed
                and seg.aliased(_address(out), address, n)):
            # the kernel's copy would crawl (1 MiB in 450 µs instead of 110): through the
            # bulk area instead, whose copies go around it (`seg.copy_memory`)
            readable = False
        if (readable and kind == seg.RTS_CMA and n >= self._split_min
                and self._split_in[src] is None):
            self._start_split(src, h, out, tag, n, address)
            return
        if readable and kind == seg.RTS_CMA:
            try:
                pid = int(self._words[self._pid_word[src]])
                self._reader.read(pid, address, _address(out), n)
            except TransportError:
                self._single_copy = readable = False  # not permitted after all: the pipe
            else:
                self._send_control(src, seg.FIN, tag, 0, 0, 0)
                h.done = True
                return
        # two-ended unless this rank sends to ``src`` too: in an exchange both ranks copy all
        # the time anyway, and a reader at the back would only add a FIN to wait for
        shared = (readable and kind == seg.RTS_PIPE
                  and not (self._rendezvous_sends[src] or self._pipe_out[src]))
        transfer = _Incoming(h, out, n, tag, self._piece(n), address if shared else 0)
        queue = self._pipe_in[src]
        queue.append(transfer)
        if len(queue) == 1:
            self._grant(src, transfer)
        self._busy.add(src)

    def _grant(self, src: int, transfer: _Incoming) -> None:
        """Give the bulk area of (src -> this rank) to ``transfer``: clear-to-send, after
        publishing where a two-ended transfer's sender must stop (nowhere yet: at its end)."""
        if transfer.shared:
            self._words[self._in_back_word[src]] = transfer.n
            transfer.due = time.perf_counter() + PULL_AFTER
            self._send_control(src, seg.CTS, transfer.tag, 0, 0, _GO_SHARED)
        else:
            self._send_control(src, seg.CTS, transfer.tag, 0, 0, _GO_PIPE)

    def _on_clear_to_send(self, peer: int, tag: int, go: int) -> None:
        h, data = self._rendezvous_sends[peer].pop(tag)
        if not go:
            h.done = True
            return
        transfer = _Outgoing(h, data, self._piece(h.nbytes), go == _GO_SHARED)
        if transfer.shared:
            self._streams[peer][tag] = transfer
        self._pipe_out[peer].append(transfer)
        self._busy.add(peer)

    def _on_finish(self, src: int, tag: int) -> None:
        """FIN: the receiver has the whole message and reads this rank's buffer no more."""
        entry = self._rendezvous_sends[src].pop(tag, None)
        if entry is not None:  # single copy
            if self._split_out[src]:
                self._split_out[src].pop(tag, None)
            entry[0].done = True
            return
        transfer = self._streams[src].pop(tag)  # a two-ended transfer
        transfer.h.done = True
        if not transfer.stopped:
            self._stop_stream(src, transfer, self._out_chunk_count[src])

    def _stop_stream(self, peer: int, transfer: _Outgoing, count: int) -> None:
        """Stop streaming a two-ended transfer; STOP tells the receiver how many chunks it
        wrote in all (``count``), so the receiver can pass over those it no longer needs."""
        transfer.stopped = True
        self._pipe_out[peer].remove(transfer)
        self._send_control(peer, _STOP, transfer.h.tag, 0, 0, count)

    def _on_stop(self, src: int, tag: int, count: int) -> None:
        transfer = self._pipe_in[src][0]
        assert transfer.tag == tag, "STOP for a transfer that does not hold the bulk area"
        transfer.stop = count
        self._busy.add(src)

    # ---- split single copy ------------------------------------------------------------
    #
    # The receiver reads pieces 0, 1, 2, … of the message from the sender's buffer; the
    # sender writes pieces k−1, k−2, … into the receive buffer. Before copying a piece each
    # side publishes its claim — the receiver "pieces below c are mine" (its claim word),
    # the sender "pieces from b on are mine" (its claim word) — then fences and loads the
    # other's claim, and copies only what the other has not claimed (the receiver below
    # min(c, b), the sender at max(b, c) and above, otherwise it withdraws its claim and
    # stops). Of two such store-fence-load sequences at least one sees the other's store, so
    # no piece is ever copied by both. The sender publishes the piece its writes are complete
    # down to only after the write; the receiver completes when its front reaches that piece,
    # so no write into the receive buffer can still be in flight once the receive is done,
    # and answers FIN, which frees the send. Every word carries the transfer's generation in
    # its upper half: a word of another generation is read as "nothing claimed or written".

    def _start_split(self, src: int, h: Handle, out: memoryview, tag: int, n: int,
                     address: int) -> None:
        gen = self._split_gen[src] = (self._split_gen[src] + 1) & _MASK32
        local = _address(out)
        transfer = _SplitIn(h, n, tag, gen, int(self._words[self._pid_word[src]]), address,
                            local)
        self._words[self._split_in_claim[src]] = gen << 32  # claims nothing yet
        self._send_control(src, _SPLIT, tag, gen, transfer.piece, local)
        self._split_in[src] = transfer
        self._split_reading += 1
        self._busy.add(src)
        self._split_read(src)

    def _split_read(self, src: int) -> bool:
        """Read the next piece of the split transfer from ``src`` (unless the sender claimed
        it); complete the receive once every piece is read or written."""
        transfer = self._split_in[src]
        assert transfer is not None
        words, gen = self._words, transfer.gen
        sender_word = self._split_in_sender[src]
        front, pieces = transfer.front, transfer.pieces
        if transfer.error is not None:
            self._split_failed(src, transfer)
            return False
        moved = False
        value = words[sender_word]
        if front < (value & _MASK32 if value >> 32 == gen else pieces):
            want = front + 1
            claim_word = self._split_in_claim[src]
            words[claim_word] = (gen << 32) | want
            _FENCE.acquire()
            _FENCE.release()
            value = words[sender_word]
            top = min(want, value & _MASK32 if value >> 32 == gen else pieces)
            if top > front:
                lo, hi = front * transfer.piece, min(top * transfer.piece, transfer.n)
                try:
                    self._reader.read(transfer.pid, transfer.remote + lo, transfer.local + lo,
                                      hi - lo)
                except TransportError as exc:
                    words[claim_word] = (gen << 32) | front
                    transfer.error, transfer.failed_at = exc, time.perf_counter()
                    self._split_failed(src, transfer)
                    return False
                transfer.front = front = top
                moved = True
            if top < want:  # the sender claimed it first: withdraw
                words[claim_word] = (gen << 32) | top
        value = words[sender_word + 1]
        if front >= (value & _MASK32 if value >> 32 == gen else pieces):
            self._split_in[src] = None
            self._split_reading -= 1
            transfer.h.done = True
            self._send_control(src, seg.FIN, transfer.tag, 0, 0, 0)
            moved = True
        return moved

    def _split_failed(self, src: int, transfer: _SplitIn) -> None:
        """A read from ``src`` failed: most likely it died, which the launcher is about to
        mark (then this rank raises `PeerFailed`); if nothing is marked in a while, the
        read's own error."""
        state = self._words[self._state_word[src]]
        if self._words[seg.H_FAILED] or state in (seg.EXITED, seg.FAILED):
            raise PeerFailed(src, "it died during a single-copy transfer") from transfer.error
        if time.perf_counter() - transfer.failed_at > FAILURE_GRACE:
            assert transfer.error is not None
            raise transfer.error

    def _on_split(self, peer: int, tag: int, gen: int, piece: int, address: int) -> None:
        """The receiver of a single-copy message invites this rank to write from the back."""
        entry = self._rendezvous_sends[peer].get(tag)
        if entry is None or not piece:
            return
        h, data = entry
        transfer = _SplitOut(h, h.nbytes, piece, gen, int(self._words[self._pid_word[peer]]),
                             address, _address(data))
        tagged = (gen << 32) | transfer.pieces
        w = self._split_out_sender[peer]
        self._words[w] = tagged
        self._words[w + 1] = tagged
        self._split_out[peer][tag] = transfer
        self._busy.add(peer)

    def _split_write(self, peer: int) -> bool:
        """Write the next piece (from the back) of a split transfer to ``peer``."""
        for transfer in self._split_out[peer].values():
            if transfer.stopped:
                continue
            words, gen = self._words, transfer.gen
            claim_word = self._split_out_sender[peer]
            piece = transfer.bottom - 1
            if piece < 0:
                transfer.stopped = True
                continue
            words[claim_word] = (gen << 32) | piece
            _FENCE.acquire()
            _FENCE.release()
            value = words[self._split_out_claim[peer]]
            if value >> 32 != gen or value & _MASK32 > piece:  # met the receiver (or it is done)
                words[claim_word] = (gen << 32) | transfer.bottom
                transfer.stopped = True
                continue
            lo = piece * transfer.piece
            hi = min(lo + transfer.piece, transfer.n)
            try:
                self._reader.write(transfer.pid, transfer.remote + lo, transfer.local + lo,
                                   hi - lo)
            except TransportError:  # the receiver reads the rest itself (or has died)
                words[claim_word] = (gen << 32) | transfer.bottom
                transfer.stopped = True
                continue
            transfer.bottom = piece
            words[claim_word + 1] = (gen << 32) | piece
            self._notify(peer)
            return True
        return False

    # ---- the bulk pipeline ------------------------------------------------------------

    def _advance_peer(self, peer: int) -> bool:
        moved = False
        if self._send_queue[peer]:
            moved |= self._flush_queue(peer)
        if self._pipe_out[peer]:
            moved |= self._stream_out(peer)
        if self._pipe_in[peer]:
            moved |= self._stream_in(peer)
        if self._split_in[peer] is not None:
            moved |= self._split_read(peer)
        if self._split_out[peer] and not self._split_reading:
            moved |= self._split_write(peer)  # helps only once its own reads are done
        if not (self._send_queue[peer] or self._pipe_out[peer] or self._pipe_in[peer]
                or self._split_in[peer] is not None or self._split_out[peer]):
            self._busy.discard(peer)
        return moved

    def _piece(self, n: int) -> int:
        """Bytes per chunk of an ``n``-byte transfer: an equal share of the chunk slots (so
        copy-in and copy-out overlap even when the message would fit one slot), at least
        `PIECE_MIN` and at most a slot. Both sides compute it from ``n`` alone."""
        share = -(-n // (self._nchunks * 4096)) * 4096
        return min(self._chunk_bytes, max(PIECE_MIN, share))

    def _stream_out(self, peer: int) -> bool:
        """Copy as many chunks of the current outgoing transfer as there is room for (of a
        two-ended transfer, only those below the receiver's published back boundary)."""
        words, slot, nchunks = self._words, self._chunk_bytes, self._nchunks
        queue = self._pipe_out[peer]
        count = self._out_chunk_count[peer]
        base, filled_word = self._out_chunks[peer], self._out_filled_word[peer]
        drained_word = self._out_drained_word[peer]
        drained = words[drained_word]
        moved = False
        while queue:
            transfer = queue[0]
            n, offset = transfer.h.nbytes, transfer.offset
            limit = min(n, words[drained_word + 1]) if transfer.shared else n
            if offset >= limit:  # a two-ended transfer whose rest the receiver reads itself
                self._stop_stream(peer, transfer, count)
                moved = True
                continue
            if count - drained >= nchunks:
                drained = words[drained_word]
                if count - drained >= nchunks:
                    break
            end = min(offset + transfer.piece, limit)
            p = base + (count % nchunks) * slot
            if not transfer.address:
                transfer.address = _address(transfer.data)
            seg.copy_memory(self._base_address + p, transfer.address + offset, end - offset)
            count += 1
            words[filled_word] = count
            transfer.offset = min(offset + transfer.piece, n)
            if transfer.offset == n and not transfer.shared:
                transfer.h.done = True
                queue.popleft()
            moved = True
            self._notify(peer)
        self._out_chunk_count[peer] = count
        return moved

    def _stream_in(self, src: int) -> bool:
        """Copy out the chunks of the current incoming transfer that had arrived on entry
        (no more, so that a rank both sending and receiving alternates between the two); of
        a two-ended transfer with no chunk waiting, read a piece from the back instead."""
        words, slot, nchunks = self._words, self._chunk_bytes, self._nchunks
        transfer = self._pipe_in[src][0]
        count = self._in_chunk_count[src]
        drained_word = self._in_drained_word[src]
        filled = words[self._in_filled_word[src]]
        moved = count < filled
        while count < filled:
            front = transfer.front
            if front < transfer.back:
                end = min(front + transfer.piece, transfer.back)
                p = self._in_chunks[src] + (count % nchunks) * slot
                if not transfer.local:
                    transfer.local = _address(transfer.out)
                # the slots start on a page, numpy's arrays 16 bytes into one: around aliasing
                seg.copy_memory(transfer.local + front, self._base_address + p, end - front)
            transfer.front = min(front + transfer.piece, transfer.n)
            count += 1
            words[drained_word] = count
            self._notify(src)
            if transfer.front >= transfer.back and not transfer.complete:
                self._complete(src, transfer)
        if moved:
            if transfer.remote:
                transfer.pull, transfer.due = PULL_BYTES, time.perf_counter() + PULL_AFTER
        elif (transfer.remote and not transfer.complete and time.perf_counter() >= transfer.due
              and not self._sending()):
            moved = self._pull(src, transfer)
        if transfer.complete and (not transfer.shared or transfer.stop is not None):
            if transfer.stop is not None and transfer.stop > count:
                count = transfer.stop  # chunks of bytes already read from the back
                words[drained_word] = count
                self._notify(src)
            queue = self._pipe_in[src]
            queue.popleft()
            if queue:
                self._grant(src, queue[0])
            moved = True
        self._in_chunk_count[src] = count
        return moved

    def _sending(self) -> bool:
        """Whether this rank streams a transfer out (then it helps no receiver by reading)."""
        return any(self._pipe_out[p] for p in self._busy)

    def _pull(self, src: int, transfer: _Incoming) -> bool:
        """Read the next piece of a two-ended transfer from the back of the sender's buffer,
        then publish the lower boundary (the sender may copy some of it too: harmless)."""
        back = transfer.back
        lower = max(transfer.front, back - transfer.pull)
        try:
            if not transfer.pid:
                transfer.pid = int(self._words[self._pid_word[src]])
                transfer.local = _address(transfer.out)
            self._reader.read(transfer.pid, transfer.remote + lower, transfer.local + lower,
                              back - lower)
        except TransportError:
            self._single_copy = False  # not permitted after all: the sender streams it all
            transfer.remote = 0
            return False
        transfer.back = lower
        transfer.pull = min(2 * transfer.pull, PULL_MAX)
        self._words[self._in_back_word[src]] = lower
        if transfer.front >= lower:
            self._complete(src, transfer)
        return True

    def _complete(self, src: int, transfer: _Incoming) -> None:
        transfer.complete = True
        transfer.h.done = True
        if transfer.shared:
            self._send_control(src, seg.FIN, transfer.tag, 0, 0, 0)

    def _notify(self, peer: int) -> None:
        _FENCE.acquire()
        _FENCE.release()
        if self._words[self._sleeping_word[peer]]:
            self._wake(peer)

    # ---- sleeping and failures --------------------------------------------------------

    def _sleep_until_activity(self, deadline: float) -> None:
        words, me = self._words, self.rank
        sleeping, doorbell = self._sleeping_word[me], self._doorbell_word[me]
        address = self._base_address + doorbell * 8
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self._direct_call_of_waited_peer()
            self._check_exited_peers()
            ring = words[doorbell]
            words[sleeping] = 1
            _FENCE.acquire()
            _FENCE.release()
            try:
                if self._advance():
                    return
                seg.futex_wait(address, ring, min(remaining, SLEEP_SLICE))
            finally:
                words[sleeping] = 0
            if self._advance():
                return

    def _pending_peers(self) -> set[int]:
        peers = {p for p in self._ranks
                 if self._posted[p] or self._rendezvous_sends[p] or self._pipe_in[p]
                 or self._pipe_out[p] or self._streams[p] or self._split_in[p] is not None}
        return peers | self._busy

    def _raise_if_pending(self, failed: int) -> None:
        if self._pending_peers():
            raise PeerFailed(failed, "the process died; the job cannot continue")

    def _check_exited_peers(self) -> None:
        for peer in self._pending_peers():
            if peer != self.rank and self._words[self._state_word[peer]] == seg.EXITED:
                self._advance()  # drain what it sent before leaving
                if peer in self._pending_peers():
                    raise PeerFailed(peer, "it exited while an operation with it was pending")
