"""Stall reports: a rank that waits in one call longer than a threshold says so, once.

Like NCCL's and PyTorch's watchdogs, a rank blocked in a collective for longer than
``COLLOPS_STALL_REPORT`` seconds (60 by default) prints one line to stderr: which call it
waits in (collective, call number, algorithm, step), for how long, and which ranks of the
communicator have and have not arrived at that call. It then goes on waiting; ``timeout=``
(or ``COLLOPS_TIMEOUT``) is what aborts a call.

There is no watchdog thread. Every blocking wait reaches a sleeping stage after at most a
millisecond of polling (the shared-memory `Ladder`'s futex sleeps, the progress engine's
waits between polls, the MPI transport's poll loop), and that stage tells the transport's
`StallWatch` which call it waits in (`StallWatch.waiting`); the watch remembers the call and
since when, and prints the report once the threshold has passed. So the fast paths pay
nothing, and the report costs one clock read per sleep.

Who has arrived: each communicator's next call number lives where the transport can share it
(`Transport.call_counter`: the job segment on ``shm``, the fabric on threads); a member whose
next call number is past the waited call has arrived at it (`arrivals`). MPI knows only this
rank's own number, and the report says so.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from .tags import CALL_BITS

#: seconds without a sleep after which a wait is counted as a new one (a rank that went back
#: to user code between two waits on the same call did not wait meanwhile)
GAP = 1.0
_CALLS = 1 << CALL_BITS


class StallWatch:
    """Which call this rank waits in, since when, and whether that was reported."""

    __slots__ = ("key", "since", "last", "reported", "write")

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self.key: Hashable = None
        self.since = 0.0
        self.last = 0.0
        self.reported = False
        self.write = write or _to_stderr

    def waiting(self, key: Hashable, threshold: float | None,
                describe: Callable[[float], str]) -> bool:
        """Note that this rank is about to sleep waiting in call ``key``; once it has waited
        ``threshold`` seconds in it, write ``describe(seconds waited)`` (once per call).
        True if it wrote the report now."""
        if threshold is None:
            return False
        now = time.monotonic()
        if key != self.key or now - self.last > GAP:
            self.key, self.since, self.reported = key, now, False
        self.last = now
        if self.reported or now - self.since < threshold:
            return False
        self.reported = True
        self.write(describe(now - self.since))
        return True


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def watch_of(transport: Any) -> StallWatch:
    """The stall watch of ``transport`` (made on first use)."""
    watch = getattr(transport, "_stall_watch", None)
    if watch is None:
        watch = StallWatch()
        transport._stall_watch = watch
    return watch  # type: ignore[no-any-return]


def arrivals(counters: Sequence[int], seq: int) -> tuple[list[int], list[int]]:
    """``(arrived, not arrived)``: the members (indices into ``counters``, each a member's
    next call number) that have and have not taken call ``seq`` (compared modulo
    ``2**CALL_BITS``, as tags carry it)."""
    arrived: list[int] = []
    missing: list[int] = []
    for member, following in enumerate(counters):
        ahead = (following - 1 - seq) % _CALLS
        (arrived if ahead < _CALLS // 2 else missing).append(member)
    return arrived, missing


def report(rank: int, call: str, seq: int | None, where: str, waited: float,
           counters: Sequence[int] | None, threshold: float) -> str:
    """The one line of a stall report (see the module's docstring)."""
    number = "" if seq is None else f" #{seq}"
    text = (f"collops: stall: rank {rank} has waited {waited:.1f} s in {call}{number}"
            + (f", {where}" if where else ""))
    if counters is not None and seq is not None:
        arrived, missing = arrivals(counters, seq)
        text += f"; arrived at this call: ranks {arrived}; not arrived: ranks {missing}"
    else:
        text += "; which ranks have arrived is not known on this transport"
    return text + (f" (reported once after {threshold:g} s, COLLOPS_STALL_REPORT; it keeps "
                   "waiting: timeout= or COLLOPS_TIMEOUT aborts a call)")
