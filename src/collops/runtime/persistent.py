"""Persistent collectives (MPI-4 ``MPI_Allreduce_init`` and friends): one call, run many times.

``req = comm.allreduce_init(x, "sum")`` checks the arguments once and returns a
`PersistentRequest`; each ``req.start()`` begins the collective on the buffers given then —
reading ``x`` as it is at that moment, writing ``out`` — and ``req.wait()`` completes it.
A start is an ordinary non-blocking call of the collective (a `Request` over the same phase
generator, taking its sequence number at `start`), so it matches a blocking, non-blocking or
persistent call of the same collective on the other ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import RequestError
from .request import Phases, Request

if TYPE_CHECKING:
    from .comm import Comm
    from .prepared import PreparedCall


class _FirstPhase(Exception):
    """Raised by a `_checking` communicator where the call would start its first phase."""


_CHECKING: dict[type, type] = {}


def _checking(comm: Comm) -> Any:
    """A copy of ``comm`` that runs a call's phase generator up to its first phase and stops
    there (`_FirstPhase`): no sequence number taken, nothing sent. The arguments are checked on
    the way exactly as the call checks them; a result array the call allocates then is kept
    in ``allocated``, the first phase's prepared call in ``first``."""
    cls = type(comm)
    checking = _CHECKING.get(cls)
    if checking is None:
        class Checking(cls):  # type: ignore[valid-type, misc]
            allocated: np.ndarray | None = None
            first: PreparedCall | None = None

            def _reserve(self) -> int:
                return 0

            def _execute(self, spec: Any, send: Any, recv: Any, seq: int, phase: int,
                         algorithm: str | None, params: dict[str, Any], timeout: Any,
                         counts_signature: object = None, *args: Any, **kwargs: Any) -> Any:
                self.first = self._prepared(spec, algorithm, params, counts_signature)
                raise _FirstPhase

            def _out(self, call: str, out: Any, *args: Any, **kwargs: Any) -> np.ndarray:
                result: np.ndarray = super()._out(call, out, *args, **kwargs)
                if out is None and self.allocated is None:
                    self.allocated = result
                return result

        checking = _CHECKING[cls] = Checking
    copy: Any = object.__new__(checking)
    copy.__dict__.update(comm.__dict__)
    return copy


def check_call(comm: Comm, method: str, arguments: dict[str, Any]
               ) -> tuple[np.ndarray | None, PreparedCall | None]:
    """Check a call's arguments as ``comm.<method>(**arguments)`` would before sending
    anything (raising the same errors); the result array it allocates then, if any, and its
    first phase's prepared call (None: the call has no phase)."""
    checking = _checking(comm)
    phases: Phases = getattr(checking, method)(**arguments)
    try:
        phases.send(None)
    except (_FirstPhase, StopIteration):
        pass
    finally:
        phases.close()
    return checking.allocated, checking.first


class PersistentRequest:
    """A collective fixed at init, run by each `start` and completed by `wait` or `test`."""

    def __init__(self, comm: Comm, call: str, method: str, arguments: dict[str, Any]) -> None:
        self._comm = comm
        self._call = call
        self._method = method
        self._arguments = arguments
        self._request: Request | None = None
        self._value: Any = None
        self._freed = False
        allocated, first = check_call(comm, method, arguments)
        #: the prepared call of each start's first phase, kept from init: the algorithm
        #: chosen then serves every start (as MPI's persistent collectives fix it at init)
        self._first = first
        #: where the call allocates its result (``out`` None): allocated once and reused by
        #: every start, at init when the shape is known here, else at the first completion
        self._keep_result = "out" in arguments and arguments["out"] is None
        if self._keep_result and allocated is not None:
            arguments["out"] = allocated
            self._keep_result = False

    def __repr__(self) -> str:
        state = "freed" if self._freed else "active" if self.active else "inactive"
        return f"<PersistentRequest {self._call} rank {self._comm.rank} {state}>"

    def _usable(self) -> None:
        if self._freed:
            raise RequestError(self._call, "the request was freed", self._comm.rank)

    def _startable(self) -> None:
        self._usable()
        if self._request is not None:
            raise RequestError(self._call, "started while the request is active (complete it "
                               "with wait() or test() first)", self._comm.rank)

    def start(self) -> None:
        """Begin one run of the collective (non-blocking); an error while it is active."""
        self._startable()
        comm = self._comm
        comm._pinned = self._first
        try:
            phases = getattr(comm, self._method)(**self._arguments)
            self._request = Request(comm, phases)
        finally:
            comm._pinned = None

    def _complete(self, value: Any) -> None:
        self._request = None
        self._value = value
        if self._keep_result and isinstance(value, np.ndarray):
            self._arguments["out"] = value
            self._keep_result = False

    def wait(self) -> Any:
        """Complete the run started last and return what the blocking call returns (an
        inactive request returns at once, with the last run's value: None if none)."""
        self._usable()
        request = self._request
        if request is None:
            return self._value
        try:
            value = request.wait()
        except BaseException:
            self._request = None
            raise
        self._complete(value)
        return value

    def test(self) -> bool:
        """Advance without blocking; True once the run started last has completed (then
        inactive) or when the request is inactive."""
        self._usable()
        request = self._request
        if request is None:
            return True
        try:
            finished = request.test()
        except BaseException:
            self._request = None
            raise
        if finished:
            self._complete(request.wait())
        return finished

    def free(self) -> None:
        """Release the request, completing an active run first; any use after is an error."""
        self._usable()
        if self._request is not None:
            self.wait()
        self._freed = True
        self._arguments = {}

    def idle(self, timeout: float) -> None:
        """Sleep in the transport until a message arrives or ``timeout`` seconds pass."""
        self._comm._progress.transport.wait_for_activity(timeout)

    @property
    def active(self) -> bool:
        """Whether a run was started and not yet completed by `wait` or `test`."""
        return self._request is not None

    @property
    def done(self) -> bool:
        """Whether no run is in flight (without advancing it): inactive, or its run complete."""
        return self._request is None or self._request.done


def start_all(requests: Sequence[PersistentRequest]) -> None:
    """Start every request, in order (every rank must start them in the same order); none is
    started if any is active or freed."""
    for r in requests:
        r._startable()
    for r in requests:
        r.start()
