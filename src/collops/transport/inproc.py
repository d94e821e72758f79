"""The in-process transport: ranks are threads of one process sharing a `Fabric`.

Each rank owns a mailbox guarded by a condition variable: a send either fills a receive
already posted there or parks a copy of its bytes as an unexpected message; a receive takes a
parked message or registers itself. Sends complete at once (eager), so progress is implicit.

Threads behave like the processes of the `shm` transport. When a rank's function ends, the
fabric records it and wakes everyone. A rank that *raised* ends the job: every rank with a
receive pending raises `PeerFailed` naming it and its exception from `progress`. A rank that
*returned* fails only the operations that still need it: a receive from it that nothing can
fill any more, or a send to it that nothing will receive, completes with `PeerFailed` as its
error ("it exited while an operation with it was pending", as on `shm`), so the call waiting
for it raises and others do not (a receive kept posted in case a message comes, as the
endpoints' header receives are, just completes with that error). A rank whose call failed
so (`give_up`) will not send the rest of that call either: the receives of that call from
it complete with the same `PeerFailed`, so a peer that needed only it does not wait forever;
a rank that gave a call up after an error of its own (an argument only it saw was wrong,
`collops.runtime.abandon`) fails them with `PeerFailed` naming itself and its error.
`Fabric.stop` (a `spawn` that ran out of time) makes every pending and later operation raise
`CollectiveTimeout`.
Waiting ranks sleep on their condition variable; they use no CPU.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ..errors import CollectiveTimeout, CollopsError, PeerFailed
from .base import Capabilities, Handle, Transport
from .tags import PHASE_BITS, SEQ_BITS

#: why a peer that returned fails an operation that needs it (the `shm` transport's words)
RETURNED = "it exited while an operation with it was pending"
#: ``tag >> CALL_SHIFT`` is a message's call: its communicator context and call number
CALL_SHIFT = SEQ_BITS + PHASE_BITS


class _Mailbox:
    __slots__ = ("cond", "posted", "unexpected", "events")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.posted: dict[tuple[int, int], tuple[Handle, memoryview]] = {}
        self.unexpected: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.events = 0


class Fabric:
    """The shared state of one in-process job: a mailbox per rank, the ranks whose function
    has ended, and whether the job was stopped."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.mailboxes = [_Mailbox() for _ in range(size)]
        #: rank -> None if its function returned, else why it failed ("raised ValueError: …");
        #: replaced, never changed in place, so readers need no lock
        self.ended: dict[int, str | None] = {}
        #: rank -> the rank whose failure its own followed from (a `PeerFailed` it raised)
        self.causes: dict[int, int] = {}
        self._lock = threading.Lock()
        #: why the job was stopped (`stop`), or None while it runs
        self.stopped: str | None = None
        #: (context, rank) -> that rank's next call number there (`Transport.call_counter`)
        self.counters: dict[tuple[int, int], np.ndarray] = {}
        #: (rank, call) -> (the failed rank, why): calls a rank gave up after a PeerFailed;
        #: replaced like ``ended``
        self.given_up: dict[tuple[int, int], tuple[int, str]] = {}

    def mark_returned(self, rank: int) -> None:
        """Record that ``rank``'s function returned and wake every waiting rank."""
        with self._lock:
            if rank not in self.ended:
                self.ended = {**self.ended, rank: None}
        self._wake_all()

    def mark_failed(self, rank: int, why: str, cause: int | None = None) -> None:
        """Record that ``rank`` failed (``why``: what it raised; ``cause``: the rank whose
        failure it raised, for a follow-on `PeerFailed`) and wake every waiting rank."""
        with self._lock:
            if self.ended.get(rank) is None:
                self.ended = {**self.ended, rank: why}
            if cause is not None and cause != rank:
                self.causes = {**self.causes, rank: cause}
        self._wake_all()

    def first_cause(self, rank: int) -> int:
        """The rank whose failure ``rank``'s failure followed from (itself if none)."""
        seen = {rank}
        while rank in self.causes and self.causes[rank] not in seen:
            rank = self.causes[rank]
            seen.add(rank)
        return rank

    def give_up(self, rank: int, call: int, failed: int, why: str) -> None:
        """Record that ``rank`` abandoned ``call`` because rank ``failed`` ended (``why``)."""
        with self._lock:
            self.given_up = {**self.given_up, (rank, call): (failed, why)}
        self._wake_all()

    def stop(self, why: str) -> None:
        """Make every pending and later operation of every rank raise `CollectiveTimeout`
        with ``why``, and wake every waiting rank."""
        self.stopped = why
        self._wake_all()

    def awaited_by(self, rank: int) -> list[int]:
        """The ranks from which ``rank`` has a receive pending."""
        box = self.mailboxes[rank]
        with box.cond:
            return sorted({peer for peer, _ in box.posted})

    def endpoint(self, rank: int) -> InprocTransport:
        """The transport object rank ``rank`` uses."""
        return InprocTransport(self, rank)

    def _wake_all(self) -> None:
        for box in self.mailboxes:
            with box.cond:
                box.events += 1
                box.cond.notify_all()


class InprocTransport(Transport):
    """Rank ``rank`` of a `Fabric`."""

    def __init__(self, fabric: Fabric, rank: int) -> None:
        self.fabric = fabric
        self.rank = rank
        self.size = fabric.size
        self._box = fabric.mailboxes[rank]
        self._seen = 0

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Deliver at once: into a posted receive, or parked as unexpected; a send to a rank
        that has ended and posted no receive for it completes with `PeerFailed` as its error."""
        self._raise_if_stopped()
        h = Handle(peer, tag, data.nbytes)
        box = self.fabric.mailboxes[peer]
        key = (self.rank, tag)
        with box.cond:
            posted = box.posted.pop(key, None)
            if posted is not None:
                rh, out = posted
                _fill(rh, out, data, fingerprint)
            elif peer in self.fabric.ended and peer != self.rank:
                h.error = self._peer_failed(peer)
            else:
                box.unexpected[key] = (bytes(data), fingerprint)
            box.events += 1
            box.cond.notify_all()
        h.done = True
        return h

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Take a parked message or register the receive (failed at once if ``peer`` ended)."""
        self._raise_if_stopped()
        h = Handle(peer, tag)
        box = self._box
        key = (peer, tag)
        with box.cond:
            parked = box.unexpected.pop(key, None)
            if parked is not None:
                _fill(h, out, memoryview(parked[0]), parked[1])
            elif (error := self._lost(peer, tag)) is not None:
                h.error = error
                h.done = True
            else:
                box.posted[key] = (h, out)
        return h

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        """``(peer, fingerprint)`` of a parked message with ``tag >> shift == value``."""
        with self._box.cond:
            for (peer, tag), (_, fingerprint) in self._box.unexpected.items():
                if tag >> shift == value:
                    return peer, fingerprint
        return None

    def arrived(self, peer: int, tag: int) -> int | None:
        """The size of the parked message ``(peer, tag)``, if there is one."""
        parked = self._box.unexpected.get((peer, tag))  # one dict read: no lock needed
        return None if parked is None else len(parked[0])

    def lost(self, peer: int) -> tuple[PeerFailed, bool] | None:
        """``(PeerFailed, True)`` once any rank raised (the job ends), ``(PeerFailed, False)``
        once ``peer`` returned, else None."""
        ended = self.fabric.ended
        if not ended:
            return None
        for rank, why in ended.items():
            if why is not None and rank != self.rank:
                return self._peer_failed(rank), True
        return (self._peer_failed(peer), False) if peer in ended else None

    def give_up(self, tag_base: int, error: BaseException, fingerprint: int | None = None
                ) -> None:
        """After an error in a call, fail the receives of this call from this rank at its
        peers: with `PeerFailed` naming the rank that failed (after a `PeerFailed`), else
        naming this rank and its error (an argument only it saw was wrong, a mismatch)."""
        call = tag_base >> CALL_SHIFT
        if isinstance(error, PeerFailed):
            if error.failed_rank != self.rank:
                why = str(error).removeprefix(f"peer rank {error.failed_rank} failed: ")
                self.fabric.give_up(self.rank, call, error.failed_rank,
                                    f"{why} (rank {self.rank} gave this call up)")
        elif isinstance(error, CollopsError):
            self.fabric.give_up(self.rank, call, self.rank, f"it gave the call up, raising "
                                f"{type(error).__name__}: {error}")

    def progress(self) -> None:
        """Nothing to advance (delivery is synchronous); raise if the job was stopped or a
        pending receive can no longer complete."""
        self._raise_if_stopped()
        if self.fabric.ended or self.fabric.given_up:
            self._raise_if_peer_ended()

    def wait_for_activity(self, timeout: float | None) -> None:
        """Sleep until a message arrives for this rank, a rank ends (or ``timeout``)."""
        box = self._box
        with box.cond:
            if box.events == self._seen:
                box.cond.wait(timeout)
            self._seen = box.events
        self.progress()

    def call_counter(self, context: int) -> np.ndarray:
        """The next call number of this rank on ``context``, where every thread sees it."""
        counter = np.zeros(1, np.int64)
        if (context, self.rank) not in self.fabric.counters:  # else a second communicator
            self.fabric.counters[(context, self.rank)] = counter  # on it: kept private
        return counter

    def release_comm(self, context: int, group: tuple[int, ...],
                     timeout: float | None) -> None:
        """The freed communicator's counter no longer shows (the next on ``context`` will)."""
        self.fabric.counters.pop((context, self.rank), None)

    def calls_started(self, context: int, group: Sequence[int]) -> list[int] | None:
        """Every member's next call number on ``context`` (0 for one that has none yet)."""
        counters = self.fabric.counters
        return [int(counters[(context, r)][0]) if (context, r) in counters else 0
                for r in group]

    def capabilities(self) -> Capabilities:
        """Threads of one process: one node, single-copy."""
        return Capabilities("inproc", (0,) * self.size, single_copy=True)

    def _raise_if_stopped(self) -> None:
        if self.fabric.stopped is not None:
            raise CollectiveTimeout(f"rank {self.rank}: {self.fabric.stopped}")

    def _raise_if_peer_ended(self) -> None:
        """With a receive pending: `PeerFailed` if some rank failed; receives from a rank that
        returned complete with it as their error (a message it sent would have filled them)."""
        ended = self.fabric.ended
        box = self._box
        with box.cond:
            if not box.posted:
                return
            failed = [r for r, why in ended.items() if why is not None and r != self.rank]
            if not failed:
                for (peer, tag), (h, _) in list(box.posted.items()):
                    if (error := self._lost(peer, tag)) is not None:
                        del box.posted[(peer, tag)]
                        h.error = error
                        h.done = True
                return
        raise self._peer_failed(failed[0])

    def _lost(self, peer: int, tag: int) -> PeerFailed | None:
        """The error of a receive from ``peer`` that nothing will fill (None if it may be)."""
        if peer == self.rank:
            return None
        if peer in self.fabric.ended:
            return self._peer_failed(peer)
        given_up = self.fabric.given_up.get((peer, tag >> CALL_SHIFT))
        return None if given_up is None else PeerFailed(*given_up)

    def _peer_failed(self, peer: int) -> PeerFailed:
        """`PeerFailed` naming the rank whose failure ended ``peer`` (``peer`` itself unless it
        died of a follow-on error), as a process job's survivors name the first to die."""
        cause = self.fabric.first_cause(peer)
        why = self.fabric.ended.get(cause)
        detail = RETURNED if why is None else f"{why}; the job cannot continue"
        if cause != peer:
            detail += f" (rank {peer} ended after it)"
        return PeerFailed(cause, detail)


def _fill(h: Handle, out: memoryview, data: memoryview, fingerprint: int) -> None:
    h.nbytes = data.nbytes
    h.fingerprint = fingerprint
    if data.nbytes == out.nbytes:
        out[:] = data
    h.done = True
