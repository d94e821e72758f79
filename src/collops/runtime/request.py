"""Requests: a non-blocking collective in flight, and waiting on several (MPI's Wait*/Test*).

A `Request` drives a call's phase generator (see `comm`): each phase is an `Execution`
polled by the communicator's `Progress`; when one completes the next starts at once, even
during another request's wait. `wait_all`, `wait_any` and `test_all` take any requests with
``test`` and ``wait`` (persistent ones too, see `persistent`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ArgumentError
from ..transport.tags import make_tag_base
from .abandon import abandon_call
from .engine import Execution
from .failure_site import locate_failure

if TYPE_CHECKING:
    from .commbase import CommBase

Phases = Generator[Execution, None, Any]

#: seconds `wait_any` sleeps in the transport between passes over requests none of which
#: completed (a message arriving ends the sleep at once)
_IDLE = 0.05
#: passes `wait_any` makes before it starts sleeping
_SPINS = 16


class Completable(Protocol):
    """What the wait and test helpers need of a request."""

    def test(self) -> bool:
        """Advance without blocking; True once complete."""

    def wait(self) -> Any:
        """Block until complete; the call's value."""


class Request:
    """A non-blocking collective in flight: `test` and `wait` drive it."""

    def __init__(self, comm: CommBase, phases: Phases, blocking: bool = False) -> None:
        self._comm = comm
        self._phases = phases
        #: the phases are a blocking call's (`CommBase.blocking_phase` while one starts)
        self._blocking = blocking
        self._current: Execution | None = None
        self._done = False
        self._value: Any = None
        #: an error raised while another request's wait advanced this one
        self._error: BaseException | None = None
        pending = getattr(comm, "_pending", None)
        if pending is not None:  # what `free` lets complete first
            pending.add(self)
        #: whether a phase has started (a request for a phase of a call numbered already)
        self._started = False
        #: ``(call number, phase)`` of this request's latest phase (None: none yet)
        self._phase: tuple[int, int] | None = None
        taken = comm._call_number[0]
        try:
            self._advance()
        except ArgumentError as exc:  # its peers may wait for this rank: they are told
            took = comm._call_number[0] != taken
            # not when a phase of a call made (and numbered) already raised it: a request
            # inside a phase generator's step, or one that ran a phase without a number;
            # nor when a later phase's check raised it (`_give_up_next_phase` told them)
            if not comm._stepping and self._phase is None and (took or not self._started):
                abandon_call(comm, exc, int(taken) if took else None)
            raise

    def _advance(self) -> None:
        progress = self._comm._progress
        while not self._done:
            if self._current is not None:
                try:
                    done = self._current.poll()
                except BaseException as exc:
                    locate_failure(exc, self._current)
                    progress.drop(self._current, exc)  # failed: never polled again
                    self._current = None
                    self._done = True
                    self._close()
                    raise
                if not done:
                    if self._current not in progress.active:
                        progress.active.append(self._current)
                    # when progress completes this phase, start the next one at once
                    progress.own(self._current, self._advance_from_progress, self._fail)
                    return
                progress.disown(self._current)
                if self._current in progress.active:
                    progress.active.remove(self._current)
            comm = self._comm
            outer, comm.blocking_phase = comm.blocking_phase, self._blocking
            comm._stepping += 1
            comm._last_started = None  # so a phase this step did not start is not taken
            try:
                self._current = self._phases.send(None)
                self._started = True
                if comm._last_started is not None:
                    self._phase = comm._last_started
            except StopIteration as stop:
                self._done = True
                self._current = None
                self._value = stop.value
            except ArgumentError as exc:
                if self._phase is not None and comm._stepping == 1:
                    self._give_up_next_phase(exc)
                raise
            finally:
                comm.blocking_phase = outer
                comm._stepping -= 1

    def _give_up_next_phase(self, error: ArgumentError) -> None:
        """A check before this call's next phase failed on this rank alone (a root's ``out``
        seen once the counts are known): its peers, already in that phase, are told."""
        assert self._phase is not None
        seq, phase = self._phase
        self._done, self._current = True, None
        self._comm.transport.give_up(make_tag_base(self._comm.context, seq, phase + 1), error)

    def _advance_from_progress(self) -> None:
        """Start the next phase from another wait; keep an error for this request's wait."""
        try:
            self._advance()
        except BaseException as exc:  # raised again by test() or wait()
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """This request's phase failed during another call's progress: keep the error for
        this request's `test` or `wait`."""
        self._error = exc
        self._done = True
        self._current = None
        self._close()

    def _close(self) -> None:
        """End the phases of a call whose phase failed, so their ``finally`` clauses run now
        (a making call's place in its communicator's queue, the ids an agreement held, what
        a transport began for it) rather than whenever the request is collected: a failed
        request stays referenced by its communicator until it is freed."""
        phases = getattr(self, "_phases", None)  # a request begun without a generator: none
        if phases is not None:
            phases.close()

    def _raise_kept(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def test(self) -> bool:
        """Advance without blocking; True once the collective has completed."""
        if not self._done:
            self._comm._progress.poll_all()
            self._advance()
        self._raise_kept()
        return self._done

    def wait(self) -> Any:
        """Block until completion and return what the blocking call would have returned."""
        while not self._done:
            assert self._current is not None
            try:
                self._comm._progress.wait(self._current)
            except BaseException:
                self._current, self._done = None, True  # the engine dropped the phase
                self._close()
                raise
            self._advance()
        self._raise_kept()
        return self._value

    def settle(self) -> None:
        """Drive to completion without raising (an error is kept for `test` or `wait`)."""
        try:
            while not self._done:
                assert self._current is not None
                self._comm._progress.wait(self._current)
                self._advance()
        except BaseException as exc:
            self._fail(exc)

    def idle(self, timeout: float) -> None:
        """Sleep in the transport until a message arrives or ``timeout`` seconds pass."""
        self._comm._progress.transport.wait_for_activity(timeout)

    @property
    def done(self) -> bool:
        """Whether the collective has completed (without advancing it)."""
        return self._done


#: what a `StartedRequest` does when one step completes: ``then(request, execution)`` returns
#: the next step, begun already (None: the call is done; it may set ``request._value``)
Then = Callable[["StartedRequest", Execution], "Execution | None"]


class StartedRequest(Request):
    """A call whose first step has started already (``execution``), its value ``value`` once
    it completes: a `Request` without a phase generator, for the calls begun from their
    prepared call (`FastPaths._fast_start`). A call of two steps — a data phase after an
    envelope, a gatherv's stream after its headers — says with ``then`` what follows a step."""

    def __init__(self, comm: CommBase, execution: Execution, value: Any,
                 then: Then | None = None) -> None:
        self._comm = comm
        self._then = then
        self._blocking = False
        self._current: Execution | None = execution
        self._done = False
        self._value = value
        self._error: BaseException | None = None
        self._started = True
        self._phase = None
        pending = getattr(comm, "_pending", None)
        if pending is not None:
            pending.add(self)
        self._advance()

    def _advance(self) -> None:
        progress = self._comm._progress
        while True:
            ex = self._current
            if self._done or ex is None:
                return
            try:
                done = ex.poll()
            except BaseException as exc:
                locate_failure(exc, ex)
                progress.drop(ex, exc)
                self._current = None
                self._done = True
                raise
            if not done:
                if ex not in progress.active:
                    progress.active.append(ex)
                progress.own(ex, self._advance_from_progress, self._fail)
                return
            progress.disown(ex)
            if ex in progress.active:
                progress.active.remove(ex)
            then, self._then = self._then, None
            self._current = None
            if then is None:
                self._done = True
                return
            comm = self._comm
            outer, comm.blocking_phase = comm.blocking_phase, False  # as `Request`'s steps
            try:
                self._current = then(self, ex)
            except BaseException:
                self._done = True
                raise
            finally:
                comm.blocking_phase = outer
            if self._current is None:
                self._done = True


def wait_all(requests: Sequence[Completable]) -> list[Any]:
    """Wait for every request; returns their values in order."""
    return [r.wait() for r in requests]


def test_all(requests: Sequence[Completable]) -> bool:
    """Advance every request without blocking; True when all have completed."""
    finished = [r.test() for r in requests]  # every request advances, not just the first few
    return all(finished)


def wait_any(requests: Sequence[Completable]) -> tuple[int, Any]:
    """Block until one request completes; its index and value (the lowest index if several).

    Inactive persistent requests are skipped, as MPI_Waitany skips them; an error if no
    request is left to wait for."""
    live = [i for i, r in enumerate(requests) if getattr(r, "active", True)]
    if not live:
        raise ArgumentError("wait_any", "requests", len(requests), "no active request to wait "
                            "for")
    spins = 0
    while True:
        for i in live:
            if requests[i].test():
                return i, requests[i].wait()
        spins += 1
        if spins > _SPINS:
            idle = getattr(requests[live[0]], "idle", None)
            if idle is not None:
                idle(_IDLE)
