"""The one interface of a transport component's own collectives (native algorithms).

Most algorithms are schedules. A native one — shared-memory slots, streamed rings, single
copies, MPI's own collective — moves the bytes itself, through its transport component
(`collops.shm`, `collops.mpi`). It is registered like any schedule, with a
`NativeAlgorithm` in its record, and the runtime calls it through this interface only: it
hands over a `NativeCall` (what the call may know of its communicator) and never the
communicator itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .spec import CallSpec


class Pollable(Protocol):
    """A call in flight, as the progress engine polls it (the `Execution` interface)."""

    left: int
    deadline: float | None

    def poll(self) -> bool:
        """Advance without blocking; True once the call has completed on this rank."""
        ...


class Progress(Protocol):
    """The communicator's progress engine, as a native call sees it."""

    @property
    def active(self) -> list[Any]:
        """The executions in flight (a call that waits alone, nothing else in flight, takes
        itself out while what it hands to Python waits through `wait`)."""
        ...

    def wait(self, ex: Any) -> None:
        """Block until ``ex`` completes, progressing the other calls in flight meanwhile."""
        ...


@dataclass(frozen=True)
class NativeCall:
    """What a native collective may know of one call signature on one communicator."""

    spec: CallSpec
    #: this rank's number in the communicator
    rank: int
    #: the transport ranks of the communicator's members, in rank order
    group: tuple[int, ...]
    #: the communicator's context (its private message space)
    context: int
    #: the communicator's transport (typed by the component that runs the call)
    transport: Any
    #: the algorithm's parameters, defaults filled in
    params: Mapping[str, Any]
    #: the engine driving the communicator's calls in flight
    progress: Progress

    @property
    def transport_name(self) -> str:
        """Name of the transport underneath (for error messages)."""
        return str(self.transport.capabilities().name)


class LengthsLearned(Exception):  # noqa: N818 - not an error: the call completed
    """Raised by a bound gatherv runner whose root guessed the blocks' lengths (its spec's
    counts are a guess) and found them otherwise: the call completed all the same, in the
    component's general protocol, which learned the bytes each member sent (``lengths``) and
    holds them back to back (``recv``); the runtime builds the root's result from them."""

    def __init__(self, lengths: Sequence[int], recv: np.ndarray) -> None:
        super().__init__("the lengths were learned")
        self.lengths, self.recv = lengths, recv


Buffer = np.ndarray | None
#: ``start(call, send, recv, seq, phase, timeout)``: the call ``seq``'s phase ``phase`` begun
#: on flat ``send`` / ``recv`` (timeout resolved: the call's, else the communicator's, else
#: ``COLLOPS_TIMEOUT``), returned as a `Pollable`
Start = Callable[[NativeCall, Buffer, Buffer, int, int, "float | None"], Pollable]
#: ``fn(send, recv, seq, timeout, phase=0)``: one blocking call of a bound signature
Runner = Callable[..., None]


class Bind(Protocol):
    """Make the blocking runner of one call signature (the communicator's fast path)."""

    def __call__(self, call: NativeCall, length_prefix: tuple[int, int] | None = None
                 ) -> Runner:
        """``length_prefix=(at, head)``: the buffers start with a ``head``-byte header whose
        u64 at byte ``at`` counts the bytes in use after it (bcast's and scatter's
        envelopes), which a runner may exploit."""
        ...


@dataclass(frozen=True)
class NativeAlgorithm:
    """How the runtime runs a native collective: `start` it (non-blocking), or `bind` a
    blocking runner to a signature once and call that (optional). ``blocking_only``: every
    phase of a blocking call must go to the bound runner, whichever path runs it (MPI's
    blocking collectives never match its non-blocking ones). ``reported_as(spec, rank)``: the
    algorithm a call of ``spec`` is reported as (`Comm.last_algorithm`) when its data goes by
    another one after this one's first phase (the data phase's, as the general path says)."""

    start: Start
    bind: Bind | None = None
    blocking_only: bool = False
    reported_as: Callable[[CallSpec, int], str] | None = None
