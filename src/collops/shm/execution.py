"""What every native shm call in flight shares (`AreaExecution`): it is polled like an
`Execution`, waits through the one wait, checks its peers through its communicator's direct
area, and leaves cleanly whatever ends it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..algorithms import fingerprint as fp
from .waiting import SPIN

if TYPE_CHECKING:
    from .direct_area import DirectArea
    from .transport import ShmTransport


class AreaExecution:
    """A native shm call in flight over its communicator's direct area ``area``, polled like
    an `Execution` (`poll`, ``left``, ``deadline``).

    `_advance` moves the call as far as it can without blocking; while it is stuck, `_check`
    raises for a failed peer (`PeerFailed`), the deadline (`CollectiveTimeout`) and a peer
    that made another call at the same point (`CollectiveMismatch`); whatever ends the call,
    completion or an error, ends it once (`_end`: it leaves the area's queues and the
    transport's watch list); `wait` blocks through the one wait (`DirectArea.wait`).
    A protocol supplies `_advance`, `_ready`, `_awaited`, `_expect` and `_leave`.
    """

    __slots__ = ("transport", "area", "what", "tag", "deadline", "left")

    transport: ShmTransport
    area: DirectArea
    #: who runs what, for error messages; the call's (value, shift) tag (`call_tag`)
    what: str
    tag: tuple[int, int]
    deadline: float | None
    left: int

    def _begin(self, transport: ShmTransport, area: DirectArea, what: str,
               tag: tuple[int, int], timeout: float | None) -> None:
        """Start being polled: the deadline from ``timeout``, watched by the transport."""
        self.transport, self.area, self.what, self.tag = transport, area, what, tag
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.left = 1
        transport.watch_direct(self._ready)

    def poll(self, spin: float = 0.0) -> bool:
        """Advance without blocking (a compiled loop may spin ``spin`` s); True once the call
        is done on this rank."""
        if not self.left:
            return True
        try:
            done = self._advance(spin)
        except BaseException:
            self._end()
            raise
        if done:
            self._end()
        return done

    def wait(self) -> None:
        """Block until done (nothing else in flight to progress meanwhile)."""
        while not self.poll(self._spin()):
            self.area.wait(self._ready, self._awaited, self.deadline, self.what, self.tag,
                           fp.describe, self._expect(), self._wait_from(), self._declares())

    def _stuck(self) -> bool:
        """`_check`, then False: what `_advance` returns when it cannot move."""
        self._check()
        return False

    def _check(self) -> None:
        """Raise if a peer failed, the deadline passed or a peer made another call."""
        self.area.check(self._awaited, self.deadline, self.what, self.tag, fp.describe,
                        self._expect(), self._declares())

    def _end(self) -> None:
        if self.left:
            self.left = 0
            self._leave()
            self.transport.unwatch_direct(self._ready)

    # -- what each protocol supplies -------------------------------------------------------
    def _advance(self, spin: float) -> bool:
        """Move as far as possible without blocking: whether the call is done here."""
        raise NotImplementedError

    def _ready(self) -> bool:
        """Whether `_advance` can move (read by the transport while it waits: words only)."""
        raise NotImplementedError

    def _awaited(self) -> list[int]:
        """The group ranks the call waits for now."""
        raise NotImplementedError

    def _expect(self) -> tuple[int, int, int] | None:
        """``(slot, word, fingerprint)`` of the direct-area word the call waits for (to tell
        a peer's other call at the same point), or None."""
        raise NotImplementedError

    def _leave(self) -> None:
        """Leave the area's queues (the call ended, done or not)."""
        raise NotImplementedError

    def _declares(self) -> bool:
        """Whether the rank publishes nothing for the call and leaves its word in its slot
        while it waits (`DirectArea.declare`), so a peer waiting for it as its root sees it."""
        return False

    def _spin(self) -> float:
        """Seconds `wait`'s polls may spin in compiled code."""
        return 0.0

    def _wait_from(self) -> int:
        """The stage of the one wait `wait` starts at (`waiting.SPIN`, ...)."""
        return SPIN
