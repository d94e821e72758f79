"""The one way the shared-memory transport waits for another process: spin, yield, sleep.

A wait polls ``ready()`` for ``spin`` seconds (a peer on another core answers within
microseconds), then polls with sched_yield for ``yield_seconds`` (a peer waiting for this
core gets it at once), then sleeps on the rank's doorbell futex (`ShmTransport.sleep_until`)
at most ``sleep_slice`` at a time, calling ``check()`` before each sleep to raise for failed
peers, mismatches and the deadline. The three durations come from `collops.config.Settings`.

What differs between waiters is a parameter chosen here, once per transport (`Ladder`):

* with more ranks than cores nothing spins (the peer needs this core), and compiled loops
  poll only `OVERSUBSCRIBED_SPIN` before they yield;
* a spin that found nothing halves the next one, a spin that succeeded restores it (on a
  loaded machine spinning only steals the peers' cores);
* compiled code runs the first two stages itself (``shm_wait_until`` in ``_shm_wait.h``, the
  GIL released while it yields) and hands over to `Ladder.wait` at `SLEEP` — the same ladder,
  not a second one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from .. import config

#: the stages of a wait, for `Ladder.wait`'s ``start``
SPIN, YIELD, SLEEP = range(3)
#: seconds compiled loops poll before yielding when ranks outnumber cores: a few polls
OVERSUBSCRIBED_SPIN = 2e-6
#: the shortest spin an adaptive budget halves to
MIN_SPIN = 2e-6


class Ladder:
    """The wait of one process: its durations (from the settings) and its spin budget."""

    __slots__ = ("oversubscribed", "full_spin", "spin", "compiled_spin", "yield_seconds",
                 "sleep_slice")

    def __init__(self, oversubscribed: bool) -> None:
        s = config.settings
        self.oversubscribed = oversubscribed
        #: seconds of pure polling, when every rank has a core of its own
        self.full_spin = 0.0 if oversubscribed else s.spin_seconds
        #: the current budget: halved by a spin that found nothing, restored by one that did
        self.spin = self.full_spin
        #: seconds compiled loops poll before they yield or return
        self.compiled_spin = min(OVERSUBSCRIBED_SPIN, s.spin_seconds) if oversubscribed \
            else s.spin_seconds
        self.yield_seconds = s.yield_seconds
        self.sleep_slice = s.sleep_slice

    def wait(self, ready: Callable[[], bool], sleep: Callable[[float], None],
             check: Callable[[], None] | None = None, deadline: float | None = None,
             start: int = SPIN) -> bool:
        """Wait until ``ready()``: True then; False once ``deadline`` (monotonic seconds)
        passed without it. ``sleep(t)`` sleeps at most ``t`` s or until woken; ``check()``
        runs before each sleep; ``start``: the first stage (`SPIN`, `YIELD`, `SLEEP`)."""
        clock = time.monotonic
        end = float("inf") if deadline is None else deadline
        if start <= SPIN and self.full_spin:
            stop = min(end, clock() + max(self.spin, MIN_SPIN))
            while clock() < stop:
                if ready():
                    self.spin = self.full_spin
                    return True
            self.spin *= 0.5
        if start <= YIELD:
            stop = min(end, clock() + self.yield_seconds)
            while clock() < stop:
                os.sched_yield()
                if ready():
                    return True
        while not ready():
            if check is not None:
                check()
            remaining = end - clock()
            if remaining <= 0:
                return False
            sleep(min(self.sleep_slice, remaining))
        return True
