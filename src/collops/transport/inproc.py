"""The in-process transport: ranks are threads of one process sharing a `Fabric`.

Each rank owns a mailbox guarded by a condition variable: a send either fills a receive
already posted there or parks a copy of its bytes as an unexpected message; a receive takes a
parked message or registers itself. Sends complete at once (eager), so progress is implicit.
When a rank's thread fails, the fabric marks it dead and wakes everyone: pending operations
then raise `PeerFailed`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ..errors import PeerFailed
from .base import Capabilities, Handle, Transport


class _Mailbox:
    __slots__ = ("cond", "posted", "unexpected", "events")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.posted: dict[tuple[int, int], tuple[Handle, memoryview]] = {}
        self.unexpected: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.events = 0


class Fabric:
    """The shared state of one in-process job: a mailbox per rank and the failure list."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.mailboxes = [_Mailbox() for _ in range(size)]
        self.failed: dict[int, str] = {}
        #: (context, rank) -> that rank's next call number there (`Transport.call_counter`)
        self.counters: dict[tuple[int, int], np.ndarray] = {}

    def mark_failed(self, rank: int, why: str) -> None:
        """Record that ``rank`` died and wake every waiting rank."""
        self.failed.setdefault(rank, why)
        for box in self.mailboxes:
            with box.cond:
                box.events += 1
                box.cond.notify_all()

    def endpoint(self, rank: int) -> InprocTransport:
        """The transport object rank ``rank`` uses."""
        return InprocTransport(self, rank)


class InprocTransport(Transport):
    """Rank ``rank`` of a `Fabric`."""

    def __init__(self, fabric: Fabric, rank: int) -> None:
        self.fabric = fabric
        self.rank = rank
        self.size = fabric.size
        self._box = fabric.mailboxes[rank]
        self._seen = 0

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Deliver at once: into a posted receive, or parked as unexpected."""
        h = Handle(peer, tag, data.nbytes)
        box = self.fabric.mailboxes[peer]
        key = (self.rank, tag)
        with box.cond:
            posted = box.posted.pop(key, None)
            if posted is None:
                box.unexpected[key] = (bytes(data), fingerprint)
            else:
                rh, out = posted
                _fill(rh, out, data, fingerprint)
            box.events += 1
            box.cond.notify_all()
        h.done = True
        return h

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Take a parked message or register the receive."""
        h = Handle(peer, tag)
        box = self._box
        key = (peer, tag)
        with box.cond:
            parked = box.unexpected.pop(key, None)
            if parked is None:
                box.posted[key] = (h, out)
            else:
                _fill(h, out, memoryview(parked[0]), parked[1])
        return h

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of a parked message with ``tag >> shift == value``."""
        with self._box.cond:
            for (peer, tag), (_, fingerprint) in self._box.unexpected.items():
                if tag >> shift == value:
                    return peer, fingerprint
        return None

    def progress(self) -> None:
        """Nothing to advance (delivery is synchronous); raise if a rank has failed."""
        if self.fabric.failed:
            self._raise_failed()

    def _raise_failed(self) -> None:
        rank, why = next(iter(self.fabric.failed.items()))
        if rank != self.rank:
            raise PeerFailed(rank, why)

    def wait_for_activity(self, timeout: float | None) -> None:
        """Sleep until a message arrives for this rank (or ``timeout``)."""
        box = self._box
        with box.cond:
            if box.events == self._seen:
                box.cond.wait(timeout)
            self._seen = box.events
        if self.fabric.failed:
            self._raise_failed()

    def call_counter(self, context: int) -> np.ndarray:
        """The next call number of this rank on ``context``, where every thread sees it."""
        counter = np.zeros(1, np.int64)
        if (context, self.rank) not in self.fabric.counters:  # else a second communicator
            self.fabric.counters[(context, self.rank)] = counter  # on it: kept private
        return counter

    def calls_started(self, context: int, group: Sequence[int]) -> list[int] | None:
        """Every member's next call number on ``context`` (0 for one that has none yet)."""
        counters = self.fabric.counters
        return [int(counters[(context, r)][0]) if (context, r) in counters else 0
                for r in group]

    def capabilities(self) -> Capabilities:
        """Threads of one process: one node, single-copy."""
        return Capabilities("inproc", (0,) * self.size, single_copy=True)


def _fill(h: Handle, out: memoryview, data: memoryview, fingerprint: int) -> None:
    h.nbytes = data.nbytes
    h.fingerprint = fingerprint
    if data.nbytes == out.nbytes:
        out[:] = data
    h.done = True
