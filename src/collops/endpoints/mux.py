"""Several endpoints per task over one transport: virtual ranks, multiplexed by tag.

A geometry's members are endpoints — (task, context) pairs — and a task may own several.
Each member runs collectives as one rank of a `MuxTransport`: a view of its task's real
transport in which every member is a rank. A message from member ``a`` to member ``b`` goes
to ``b``'s task with its tag's *communicator-context field* (the top bits of the engine's
tag, see `collops.transport.tags.make_tag_base`) replaced by a context id reserved for the
ordered pair of slots ``(slot(a), slot(b))`` — a slot being a member's position among its
task's members. The ids are reserved collectively when the geometry is made (one ``dup`` of
the task communicator per slot pair), so they never meet another communicator's traffic, and
two members of one task never receive each other's messages. Members of the same task talk
through an in-process loopback mailbox instead of the transport.

One lock per task guards the real transport, so contexts advanced from several threads
(progress threads) never enter it at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..transport.base import Capabilities, Handle, Transport
from ..transport.tags import CALL_BITS, CONTEXT_BITS, PHASE_BITS, SEQ_BITS

#: bits below the communicator-context field of a tag
CONTEXT_SHIFT = SEQ_BITS + PHASE_BITS + CALL_BITS
_LOW_MASK = (1 << CONTEXT_SHIFT) - 1
_CONTEXT_MASK = (1 << CONTEXT_BITS) - 1
#: longest single wait on the real transport while holding the task's lock (seconds)
WAIT_SLICE = 0.002


def retag(tag: int, context: int) -> int:
    """``tag`` with its communicator-context field set to ``context``."""
    return (tag & _LOW_MASK) | ((context & _CONTEXT_MASK) << CONTEXT_SHIFT)


class Loopback:
    """Messages between members of one task: posted receives and parked messages."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.posted: dict[tuple[int, int, int], tuple[Handle, memoryview]] = {}
        self.parked: dict[tuple[int, int, int], tuple[bytes, int]] = {}

    def send(self, key: tuple[int, int, int], handle: Handle, data: memoryview,
             fingerprint: int) -> None:
        """Deliver into a posted receive or park a copy; the send completes at once."""
        with self.lock:
            posted = self.posted.pop(key, None)
            if posted is None:
                self.parked[key] = (bytes(data), fingerprint)
            else:
                _fill(posted[0], posted[1], data, fingerprint)
        handle.done = True

    def recv(self, key: tuple[int, int, int], handle: Handle, out: memoryview) -> None:
        """Take a parked message or post the receive."""
        with self.lock:
            parked = self.parked.pop(key, None)
            if parked is None:
                self.posted[key] = (handle, out)
            else:
                _fill(handle, out, memoryview(parked[0]), parked[1])


def _fill(h: Handle, out: memoryview, data: memoryview, fingerprint: int) -> None:
    h.nbytes, h.fingerprint = data.nbytes, fingerprint
    if data.nbytes <= out.nbytes:
        out[: data.nbytes] = data
    h.done = True


class MuxTransport(Transport):
    """Member ``rank`` of a geometry, as a transport over its task's real transport."""

    def __init__(self, base: Transport, lock: threading.RLock, loopback: Loopback, rank: int,
                 task_rank: Sequence[int], slot: Sequence[int], contexts: Sequence[int],
                 slots: int) -> None:
        self.base = base
        self.lock = lock
        self.loopback = loopback
        self.rank = rank
        self.size = len(task_rank)
        self._task_rank = list(task_rank)   # member -> rank of its task on the real transport
        self._slot = list(slot)
        self._contexts = list(contexts)     # slots × slots table of reserved context ids
        self._slots = slots
        self._me = task_rank[rank]

    def _pair_context(self, src: int, dst: int) -> int:
        return self._contexts[self._slot[src] * self._slots + self._slot[dst]]

    def isend(self, peer: int, tag: int, data: memoryview, fingerprint: int = 0) -> Handle:
        """Send to member ``peer`` (through the loopback when it shares this task)."""
        wire = retag(tag, self._pair_context(self.rank, peer))
        if self._task_rank[peer] == self._me:
            h = Handle(peer, tag, data.nbytes)
            self.loopback.send((self.rank, peer, wire), h, data, fingerprint)
            return h
        with self.lock:
            return self.base.isend(self._task_rank[peer], wire, data, fingerprint)

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        """Receive from member ``peer``."""
        wire = retag(tag, self._pair_context(peer, self.rank))
        if self._task_rank[peer] == self._me:
            h = Handle(peer, tag)
            self.loopback.recv((peer, self.rank, wire), h, out)
            return h
        with self.lock:
            return self.base.irecv(self._task_rank[peer], wire, out)

    def progress(self) -> None:
        """Advance the real transport."""
        with self.lock:
            self.base.progress()

    def wait_for_activity(self, timeout: float | None) -> None:
        """Wait briefly on the real transport (loopback deliveries need no wake-up)."""
        slice_ = WAIT_SLICE if timeout is None else min(timeout, WAIT_SLICE)
        with self.lock:
            self.base.wait_for_activity(slice_)

    def capabilities(self) -> Capabilities:
        """The real transport's, with each member on its task's node.

        Named resources ("mpi", "shm_direct") are left out: the collectives that need them
        run on the real transport's own ranks, not on endpoints multiplexed over them.
        """
        caps = self.base.capabilities()
        nodes = caps.node_of_rank
        node_of = tuple(nodes[t] if t < len(nodes) else 0 for t in self._task_rank)
        return Capabilities(caps.name, node_of, caps.single_copy, caps.in_network_reduction)
