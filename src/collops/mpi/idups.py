"""MPI communicators made without blocking: a batch of ``MPI_Comm_idup`` s, tested later.

MPI lets ranks begin non-blocking collectives on two communicators in opposite orders, so
nothing a non-blocking call needs may be made by a blocking collective where the call begins
(two ranks, each blocked making a different communicator's, wait for each other for ever).
``MPI_Comm_idup`` is the one non-blocking way MPI has to make a communicator: `IdupBatch`
begins the duplications a communicator's first call needs (`NativeComms`: its pool for
``mpi_native``, ``hier``'s node and leader communicators per slot), all at once, so their
order on each parent is the same on every rank whichever call begins them; the call is polled
until `IdupBatch.done`. Each parent is one on which nothing else is collective.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any


class IdupBatch:
    """``MPI_Comm_idup`` of each of ``parents``, begun now; ``comms`` in the same order,
    usable once `done`. Their requests are watched (``watch(request, group)``: a completion
    wakes the transport's wait, a dead member of ``group`` is named) until then."""

    #: polled like an execution (`poll`), it has no time limit of its own: every member began
    #: it, so MPI completes it without any further call of theirs
    deadline = None

    def __init__(self, MPI: Any, parents: Sequence[Any], group: tuple[int, ...],
                 watch: Callable[..., None], unwatch: Callable[[Any], None],
                 failed: Callable[[Any], Exception]) -> None:
        """``failed(exc)``: the collops error for MPI's error ``exc`` (raised from here)."""
        self._MPI, self._unwatch, self._failed = MPI, unwatch, failed
        self.comms: list[Any] = []
        self.requests: list[Any] = []
        #: every duplication completed (`done`)
        self.finished = False
        try:
            for parent in parents:
                comm, request = parent.Idup()
                self.comms.append(comm)
                self.requests.append(request)
        except MPI.Exception as exc:
            raise failed(exc) from exc
        for request in self.requests:
            watch(request, group)

    def done(self, wait: bool = False) -> bool:
        """Whether every duplication has completed (``wait``: block until they have; only
        where every member is sure to begin them without this rank's progress)."""
        if self.finished:
            return True
        MPI = self._MPI
        try:
            if wait:
                MPI.Request.Waitall(self.requests)
            elif not MPI.Request.Testall(self.requests):
                return False
            for comm in self.comms:
                comm.Set_errhandler(MPI.ERRORS_RETURN)
        except MPI.Exception as exc:
            raise self._failed(exc) from exc
        self.forget()
        self.finished = True
        return True

    def poll(self) -> bool:
        """`done`, polled like an execution."""
        return self.done()

    def settle(self, end: float) -> bool:
        """Wait (sleeping) until `done` or the monotonic time ``end``: whether it is done;
        if not, it is forgotten (its communicators are left to MPI)."""
        while not self.done():
            if time.monotonic() > end:
                self.forget()
                return False
            time.sleep(1e-3)
        return True

    def forget(self) -> None:
        """Stop watching the requests (done, or given up: the communicators are left to
        MPI)."""
        for request in self.requests:
            self._unwatch(request)
        self.requests = []
