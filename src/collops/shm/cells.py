"""Point-to-point cells: the shared-memory transport's protocol for point-to-point envelopes.

Per directed rank pair a single-producer single-consumer ring of fixed-size cells (1 KiB, or
``protocols.shm.p2p_cell_bytes`` of the selection tables, read as the job is laid out) in the job
segment (`segment`, "cell rings"), as MPICH's nemesis and CH4 shared-memory eager cells or
Open MPI's vader fast boxes: a send copies its message into the next free cell and publishes
it; a receive reads the head cell. Every point-to-point message of the pair, on every
communicator, has its cell, in the order it was sent: a small one carries its payload inline
(``INLINE``), one up to ``protocols.shm.p2p_chain_bytes`` too, across consecutive cells
(``CHAIN``: the receiver copies each as it is published), a larger one only its envelope, its
payload following by the transport's rendezvous — so order per pair holds whatever the size.
Matching stays MPI's rule, in `runtime.matching`; this module moves cells.

A cell's 64-byte header (words): sequence (the ring index + 1, stored last: publishes the
cell), communicator context, user tag, payload bytes, form (flags ``OBJECT``, ``SYNC``,
``INLINE``, ``CHAIN`` in the low byte, the dims' count in the next, the prefix's length from
bit 16), the message's number on its pair and communicator, the dtype token as one word (when
it has at most 8 bytes, else 0). The body: the prefix (the dims as int64, then the dtype
token), then, from the next 8-byte boundary, the inline payload; a chain's continues in the
bodies of the next cells, whose header line holds only their sequence word. The compiled
`_p2p.CellRing` writes and reads cells; `CellRings` holds a rank's rings, the cells waiting
for room in a full ring, and the cells drained from the rings for communicators to match
(`parked`).

Waiting: a rank waiting for cells sleeps by the transport's ladder (`CellRings.progress` is one
of the transport's watched activities); a sender publishing a cell wakes a sleeping receiver,
and a receiver taking a cell wakes a sender that marked the ring blocked (full) and sleeps.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ..transport.base import Handle
from . import segment as seg

try:
    from ._p2p import CellRing
except ImportError:  # pragma: no cover - a build without a C compiler
    CellRing = None

#: cell flags (the form word's low byte)
OBJECT, SYNC, INLINE, CHAIN = 1, 2, 4, 8
#: a cell as `CellRing.head` gives it: context, tag, nbytes, form, seq, token, body
Cell = tuple[int, int, int, int, int, int, bytes]


def compiled() -> bool:
    """Whether the compiled cell rings were built."""
    return CellRing is not None


def token_word(token: str) -> int:
    """A dtype token as one word (0 when longer than 8 bytes: read from the body instead)."""
    raw = token.encode()
    return int.from_bytes(raw, "little") if len(raw) <= 8 else 0


class CellRings:
    """One rank's cell rings: towards and from every other rank of the job."""

    def __init__(self, transport: Any, chain_bytes: int = 0) -> None:
        layout = transport._layout
        me = transport.rank
        self.rank = me
        self.size = layout.size
        ladder = transport.ladder
        words = seg.WORD

        def ring(src: int, dst: int, peer: int) -> Any:
            offset = layout.cell_ring_offset(src, dst)
            return CellRing(transport.segment_map, offset + seg.CELL_CONTROL, offset // words,
                            (offset + seg.LINE) // words, transport.sleeping_word(peer),
                            layout.rank_word(peer, seg.R_DOORBELL), layout.p2p_cells,
                            layout.p2p_cell_bytes, ladder.compiled_spin, ladder.yield_seconds)

        peers = range(self.size)
        #: the rings this rank writes (to each peer) and reads (from each peer); None: itself
        self.outgoing: list[Any] = [None if p == me else ring(me, p, p) for p in peers]
        self.incoming: list[Any] = [None if p == me else ring(p, me, p) for p in peers]
        #: bytes a cell's body holds (prefix and inline payload)
        self.capacity = layout.p2p_cell_bytes - 64
        #: the most payload bytes a chain of cells carries, and the most body bytes it has:
        #: half a ring's (the sender waits for room for all of it, other messages behind it)
        self.chain_bytes = chain_bytes
        self.chain_room = max(1, layout.p2p_cells // 2) * self.capacity
        #: per peer the cells waiting for room: push arguments and the send's handle
        self.queued: list[deque[tuple[tuple[Any, ...], Handle]]] = [deque() for _ in peers]
        self.queued_count = 0
        #: cells drained from the rings, per (context, source), for their communicator
        self.parked: dict[tuple[int, int], deque[Cell]] = {}
        self.parked_count = 0
        self._watched = False
        self._transport = transport
        #: token word -> dtype (`dtype_of`)
        self.dtypes: dict[int, np.dtype] = {}

    #: a dtype token as one word
    token_word = staticmethod(token_word)

    def inline(self, nbytes: int, prefix_room: int) -> bool:
        """Whether a payload of ``nbytes`` after a prefix taking ``prefix_room`` bytes of the
        body goes in the ring: in one cell, or a chain of them up to `chain_bytes`."""
        room = nbytes + prefix_room
        return room <= self.capacity or (nbytes <= self.chain_bytes
                                         and room <= self.chain_room)

    def watch(self) -> None:
        """Have the transport's waits count moving cells as activity (once)."""
        if not self._watched:
            self._watched = True
            self._transport.watch_direct(self.progress)

    # -- sending -------------------------------------------------------------------------------
    def send(self, peer: int, *cell: Any) -> Handle | None:
        """Publish ``cell`` (`CellRing.push`'s arguments but the ring) towards ``peer``: None
        when done, else the handle of the cell queued behind a full ring (or earlier cells)."""
        queue = self.queued[peer]
        if not queue and self.outgoing[peer].push(*cell):
            return None
        h = Handle(peer, cell[1], len(cell[-1]))
        if not queue:
            self.outgoing[peer].block(True)
        queue.append((cell, h))
        self.queued_count += 1
        self.flush_to(peer)
        return h

    def flush_to(self, peer: int) -> bool:
        """Push the cells queued for ``peer`` while its ring has room; True if any moved."""
        queue, ring, moved = self.queued[peer], self.outgoing[peer], False
        while queue:
            cell, h = queue[0]
            if not ring.push(*cell):
                break
            queue.popleft()
            self.queued_count -= 1
            h.done = moved = True
        if moved and not queue:
            ring.block(False)
        return moved

    # -- receiving -----------------------------------------------------------------------------
    def pull(self) -> bool:
        """Drain every published cell into `parked`; True if any came."""
        moved = False
        for src, ring in enumerate(self.incoming):
            if ring is None:
                continue
            while True:
                cell = ring.head()
                if cell is None:
                    break
                ring.consume()
                key = (cell[0], src)
                found = self.parked.get(key)
                if found is None:
                    found = self.parked[key] = deque()
                found.append(cell)
                self.parked_count += 1
                moved = True
        return moved

    def take_parked(self, context: int, src: int) -> Cell | None:
        """The earliest drained cell from ``src`` on ``context``, removed; None if none."""
        found = self.parked.get((context, src))
        if not found:
            return None
        self.parked_count -= 1
        cell = found.popleft()
        if not found:
            del self.parked[(context, src)]
        return cell

    def progress(self) -> bool:
        """Push queued cells, drain arrived ones; True if anything moved."""
        moved = False
        if self.queued_count:
            for peer in range(self.size):
                if self.queued[peer]:
                    moved |= self.flush_to(peer)
        return self.pull() or moved

    def dtype_of(self, word: int) -> np.dtype:
        """The dtype of a cell's token word (`token_word`)."""
        dtype = self.dtypes.get(word)
        if dtype is None:
            raw = word.to_bytes(8, "little").rstrip(b"\0").decode()
            dtype = self.dtypes[word] = np.dtype(raw)
        return dtype
