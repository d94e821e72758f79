"""Root agreement: the members of a rooted call confirm the call before its data moves.

A bcast or scatter root hears from no one, and two ranks that each believe themselves the
root of a gather wait for messages nobody sends: ranks that disagree on the root would return
different data or hang. So before the first rooted phase of a call whose algorithm does not
check this itself (`Algorithm.agrees_on_root`), every member sends every other an empty
message carrying its call fingerprint — which holds the root — in the phase's own tag space
(message numbers with the top bit set, which no schedule uses). All sends are posted before
any receive is looked at, so every member hears from every other; a fingerprint that differs
is a `CollectiveMismatch` naming both calls, raised before any of the call's data has left.
While it waits, a message of another collective that arrived for the same phase of the same
call (`Transport.unexpected_for_call`) is one too, and the other side's protocol sees these
messages the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..algorithms.fingerprint import mismatch
from ..errors import CollectiveMismatch, CollectiveTimeout
from ..transport.base import Handle
from ..transport.tags import SEQ_BITS, make_tag_base
from .engine import CallInfo

#: the bit of a message number that marks an agreement message
AGREEMENT_BIT = 1 << (SEQ_BITS - 1)
_NOTHING = memoryview(bytearray())


class Agreed:
    """A call's execution started only once its members have agreed on the call."""

    __slots__ = ("comm", "info", "tag_base", "phase_tag", "sends", "receives", "start", "main",
                 "left", "deadline", "timeout")

    def __init__(self, comm: Any, info: CallInfo, seq: int, phase: int, timeout: float | None,
                 start: Callable[[], Any]) -> None:
        self.comm = comm
        self.info = info
        base = make_tag_base(comm.context, seq, phase)
        self.tag_base = base
        #: ``tag >> SEQ_BITS`` of the messages of the phase agreed on
        self.phase_tag = base >> SEQ_BITS
        transport, group, me = comm.transport, comm._group, comm.rank
        others = [j for j in range(comm.size) if j != me]
        self.sends = [transport.isend(group[j], base | AGREEMENT_BIT | me, _NOTHING,
                                      info.fingerprint) for j in others]
        self.receives: list[tuple[int, Handle]] = [
            (j, transport.irecv(group[j], base | AGREEMENT_BIT | j, _NOTHING)) for j in others]
        self.start = start
        self.main: Any = None
        self.left = 1
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def poll(self) -> bool:
        """Advance without blocking; True once the call has completed on this rank."""
        if self.main is None:
            if not self._agreed():
                return False
            self.main = self.start()
            self.deadline = self.main.deadline
        if self.main.poll():
            self.left = 0
            return True
        return False

    def _agreed(self) -> bool:
        self.comm.transport.progress()
        waiting = False
        for member, h in self.receives:
            if h.error is not None:
                raise h.error
            if not h.done:
                waiting = True
            elif h.fingerprint != self.info.fingerprint:
                raise self._mismatch(f"rank {member}", h.fingerprint)
        for h in self.sends:
            if h.error is not None:
                raise h.error
            waiting = waiting or not h.done
        if waiting:
            self._check_strays()
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise self.timeout_error()
        return not waiting

    def _check_strays(self) -> None:
        transport = self.comm.transport
        stray = transport.unexpected_for_call(self.phase_tag, SEQ_BITS)
        if stray is not None and stray[1] not in (0, self.info.fingerprint):
            group = list(self.comm._group)
            who = f"rank {group.index(stray[0])}" if stray[0] in group else f"world rank {stray[0]}"
            raise self._mismatch(who, stray[1])

    def _mismatch(self, who: str, theirs: int) -> CollectiveMismatch:
        info = self.info
        return CollectiveMismatch(
            f"rank {info.rank}: {mismatch(info.fingerprint, theirs, who)} "
            f"({info.collective}[{info.algorithm}], before any data moved)")

    def timeout_error(self) -> CollectiveTimeout:
        """The error describing where the call stopped."""
        if self.main is not None:
            return self.main.timeout_error()  # type: ignore[no-any-return]
        missing = [m for m, h in self.receives if not h.done]
        info = self.info
        return CollectiveTimeout(
            f"rank {info.rank}: {info.collective}[{info.algorithm}] did not complete within "
            f"{self.timeout} s; waiting for the members to agree on the call; not heard from "
            f"ranks {missing}")
