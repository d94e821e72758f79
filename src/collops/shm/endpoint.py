"""One rank's end of the shared-memory job segment: its state and tables, and writing
messages into the rings (the protocol is described in `collops.shm.transport`).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config
from ..algorithms import tuning
from ..compiled import warn_if_interpreted
from ..errors import TransportError
from ..transport import placement
from ..transport.base import Handle, Transport
from . import cells, kernel
from . import segment as seg
from .direct_area import DirectArea, set_slot_capacity
from .stream_area import StreamArea
from .waiting import Ladder

if TYPE_CHECKING:  # the bulk transfers in flight, kept in the endpoint's tables
    from .bulk import _Incoming, _Outgoing, _SplitIn, _SplitOut

_FENCE = threading.Lock()
#: tag, fingerprint, nbytes, kind, aux: the slot header after its sequence word
_SLOT_FIELDS = struct.Struct("=5Q")
_MASK32 = 0xFFFFFFFF
#: smallest chunk of a pipelined transfer (see `ShmTransport._piece`)
PIECE_MIN = tuning.setting("shm", "piece_min").value
#: STOP: a two-ended transfer's sender wrote its last chunk (aux: its pair's chunk count)
_STOP = 6
#: SPLIT: the receiver of a single-copy message reads it from the front and invites the
#: sender to write it from the back (fingerprint field: the transfer's generation, nbytes:
#: its piece size, aux: the receive buffer's address)
_SPLIT = 7
#: single-copy messages from this size on are split: the receiver reads pieces from the
#: front, the sender writes pieces into the receive buffer from the back whenever it polls
#: with nothing else to do (selection table: ``protocols.shm.split_min``)
SPLIT_MIN = tuning.setting("shm", "split_min").value
#: seconds a rank whose single-copy read failed waits for the sender's death to be marked
FAILURE_GRACE = 5.0
#: the ``go`` of a clear-to-send: refused (message too large), pipelined, two-ended
_GO_REFUSED, _GO_PIPE, _GO_SHARED = 0, 1, 2


#: shm protocol settings read from the selection tables alone (``protocols.shm.<name>``):
#: seconds a two-ended transfer's receiver waits for a chunk before it reads from the back
#: itself, the bytes it then reads at first and at most (doubled while no chunk comes); the
#: bounds of a split transfer's pieces (an eighth of the message within them)
TABLE_ONLY = ("pull_after", "pull_bytes", "pull_max", "split_piece_min", "split_piece_max",
              "pipeline_chunk_min")


def _protocols(oversubscribed: bool, single_copy: bool | None,
               single_copy_min: int | None, ranks: int) -> dict[str, tuple[Any, str]]:
    """The shm protocol settings in force in a job of ``ranks`` ranks, each with where it
    comes from: the arguments, then the settings (``COLLOPS_SHM_SINGLE_COPY*``), then the
    selection tables. Messages go single-copy (the receiver reads them from the sender's
    memory) up to ``single_copy_max`` and from ``single_copy_min`` bytes; those between are
    pipelined through the bulk area."""
    prefs = config.settings

    def table(name: str) -> tuple[Any, str]:
        rule = tuning.setting("shm", name, None, prefs.tuning_file, ranks)
        return rule.value, f"{rule.where}, source {rule.source or '-'}"

    found = {name: table(name) for name in ("single_copy", "single_copy_max", "split_min",
                                            "p2p_cells", "p2p_chain_bytes", *TABLE_ONLY)}
    found["single_copy_min"] = table("single_copy_min_oversubscribed" if oversubscribed
                                     else "single_copy_min")
    for name, given, env, variable in (
            ("single_copy", single_copy, prefs.shm_single_copy, "COLLOPS_SHM_SINGLE_COPY"),
            ("single_copy_min", single_copy_min, prefs.shm_single_copy_min,
             "COLLOPS_SHM_SINGLE_COPY_MIN"),
            ("p2p_cells", None, prefs.shm_p2p_cells, "COLLOPS_SHM_P2P_CELLS")):
        if given is not None:
            found[name] = (given, "argument")
        elif env is not None:
            found[name] = (env, variable)
    return found


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


class ShmEndpoint(Transport):
    """Rank ``rank`` of ``size`` ranks attached to the job segment ``job`` (a descriptor or a
    name, `segment.Job`): the state the transport's parts share, and sending."""

    def __init__(self, job: seg.Job, rank: int, size: int, *, single_copy: bool | None = None,
                 single_copy_min: int | None = None) -> None:
        self._segment = seg.Segment(job)
        layout = self._segment.layout
        if layout.size != size or not 0 <= rank < size:
            self._segment.close()
            raise TransportError(
                f"job {job} has {layout.size} ranks; cannot attach as rank {rank} of {size}")
        self.job, self.rank, self.size = job, rank, size
        warn_if_interpreted()  # once per process: the compiled runners did not load
        self._layout = layout
        self._words = self._segment.words
        self._buf = self._segment.buf
        self._base_address = self._segment.address
        self._nslots, self._mask = layout.nslots, layout.nslots - 1
        assert layout.nslots & self._mask == 0, "slot count must be a power of two"
        self._eager_limit = layout.eager_limit
        self._nchunks, self._chunk_bytes = layout.nchunks, layout.chunk_bytes
        allowed = bool(self._words[seg.H_CMA])
        self._oversubscribed = size > placement.job_cpu_count()
        self._binding = placement.binding_of_job(size)
        self._protocols = _protocols(self._oversubscribed, single_copy, single_copy_min,
                                     size)
        if not allowed:
            self._protocols["single_copy"] = (False, "the kernel forbids cross-memory attach")
        self._single_copy = bool(self._protocols["single_copy"][0])
        self._single_copy_min = max(layout.eager_limit + 1,
                                    int(self._protocols["single_copy_min"][0]))
        self._single_copy_max = int(self._protocols["single_copy_max"][0])
        # bulk chunks this small (a many-rank job's pair areas) pipeline a message several
        # times slower than one single copy: where it is permitted, single copy throughout
        pipeline_chunk_min = int(self._protocols["pipeline_chunk_min"][0])
        if layout.chunk_bytes < pipeline_chunk_min and self._single_copy_max < \
                self._single_copy_min:
            self._single_copy_max = self._single_copy_min
            self._protocols["single_copy_max"] = (
                self._single_copy_max, f"the job's bulk chunks of {layout.chunk_bytes} bytes "
                f"(below {pipeline_chunk_min}: single copy throughout)")
        self._split_min = int(self._protocols["split_min"][0])
        self._pull_after = float(self._protocols["pull_after"][0])
        self._pull_bytes = int(self._protocols["pull_bytes"][0])
        self._pull_max = int(self._protocols["pull_max"][0])
        self._split_pieces = (int(self._protocols["split_piece_min"][0]),
                              int(self._protocols["split_piece_max"][0]))
        if layout.direct_areas and layout.direct_bytes:
            set_slot_capacity(layout.direct_bytes)
        self._reader = kernel.RemoteReader()
        if not (cells.compiled() and config.settings.compiled):
            self._protocols["p2p_cells"] = (False, "the compiled cell rings (collops.shm._p2p) "
                                            "are not in use")
        self._cells: cells.CellRings | None = None
        #: how this process waits for the others (`waiting`)
        self.ladder = Ladder(self._oversubscribed)
        self._closed = False
        self._direct_areas: dict[tuple[int, tuple[int, ...]], DirectArea] = {}
        self._stream_areas: dict[int, StreamArea] = {}
        self._direct_watch: list[Callable[[], bool]] = []
        #: the contexts whose call counter a communicator took (`call_counter`)
        self._counted: set[int] = set()
        self._init_tables()
        self._attach()

    def point_to_point_cells(self) -> cells.CellRings | None:
        """The cell rings point-to-point envelopes take (`cells`), when the selection table's
        ``protocols.shm.p2p_cells`` (or ``COLLOPS_SHM_P2P_CELLS``) chose them; else None."""
        if self._cells is None and self._protocols["p2p_cells"][0]:
            self._cells = cells.CellRings(self, int(self._protocols["p2p_chain_bytes"][0]))
        return self._cells

    def protocol_settings(self) -> dict[str, tuple[Any, str]]:
        """The shm protocol settings in force, each with where it came from."""
        return {f"shm.{name}": setting for name, setting in self._protocols.items()}

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
        kernel.futex_wake(self._base_address + w * 8)

