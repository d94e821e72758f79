"""The collops exception hierarchy: every error a user can see derives from `CollopsError`."""

from __future__ import annotations

from typing import Any


class CollopsError(Exception):
    """Base class of every error collops raises."""


class ArgumentError(CollopsError, ValueError):
    """A call's argument is invalid; names the call, the argument, its value and the rank."""

    def __init__(
        self,
        call: str,
        argument: str,
        value: Any,
        reason: str,
        rank: int | None = None,
    ) -> None:
        self.call = call
        self.argument = argument
        self.value = value
        self.reason = reason
        self.rank = rank
        shown = repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        where = f" on rank {rank}" if rank is not None else ""
        super().__init__(f"{call}: argument {argument}={shown}{where}: {reason}")


class CommunicatorFreed(ArgumentError):
    """A call on a communicator after its `free`; names the call and the communicator."""

    def __init__(self, call: str, comm: str, rank: int | None = None) -> None:
        super().__init__(call, "comm", comm, "the communicator was freed", rank)


class CommunicatorLimit(CollopsError):
    """No communicator id is free on every member (the limit of live communicators)."""


class SettingError(CollopsError, ValueError):
    """An environment variable holds a value collops cannot use; names the variable."""


class UnsupportedOperation(ArgumentError):
    """A reduction operator is not defined for the given dtype."""


class AlgorithmIneligible(ArgumentError):
    """An explicitly requested algorithm cannot take the call's arguments."""


class UnknownAlgorithm(ArgumentError):
    """No algorithm of that name is registered for the collective."""


class ScheduleError(CollopsError):
    """A schedule (or a set of per-rank schedules) is malformed: the validator's verdict."""


class DeadlockError(ScheduleError):
    """A set of schedules cannot complete: a cycle of waits between ranks."""


class RankFailed(CollopsError):
    """A rank of a spawned job raised; carries the rank and its formatted traceback."""

    def __init__(self, rank: int, traceback_text: str, exc_type: str = "Exception") -> None:
        self.rank = rank
        self.traceback_text = traceback_text
        self.exc_type = exc_type
        super().__init__(f"rank {rank} raised {exc_type}:\n{traceback_text}")


class TransportError(CollopsError):
    """Bytes could not be moved: a transport-level failure."""


class MessageSizeMismatch(TransportError):
    """A message arrived with a size other than the receive expected."""


class TruncationError(MessageSizeMismatch):
    """A point-to-point message is larger than the buffer that received it (MPI_ERR_TRUNCATE);
    names both sizes."""

    def __init__(self, call: str, rank: int, source: int, tag: int, nbytes: int,
                 capacity: int) -> None:
        self.nbytes, self.capacity = nbytes, capacity
        super().__init__(f"{call} on rank {rank}: the message from rank {source} (tag {tag}) "
                         f"has {nbytes} bytes, more than the {capacity} bytes of out")


class PeerFailed(TransportError):
    """A peer rank died while a collective needed it: "rank 1 died in allgather (call 17, step
    3 of ring): detail" once the call it failed in is known (`locate`)."""

    def __init__(self, rank: int, detail: str = "", call: str | None = None,
                 number: int | None = None, step: str | None = None) -> None:
        self.failed_rank = rank
        self.detail = detail
        self.call, self.number, self.step = call, number, step
        super().__init__(self._text())

    def locate(self, call: str, number: int | None = None, step: str | None = None) -> None:
        """Name the collective (its call number and step) it failed in, unless already named."""
        if self.call is None:
            self.call, self.number, self.step = call, number, step
            self.args = (self._text(),)

    def locate_native(self, what: str, number: int | None = None) -> None:
        """`locate` from a native call's ``what`` (``"rank 0: allgather[shm_direct]"``)."""
        collective, _, algorithm = what.split(": ", 1)[-1].partition("[")
        if algorithm:
            self.locate(collective, number, f"through {algorithm.rstrip(']')}")

    def _text(self) -> str:
        where = [f"call {self.number}"] if self.number is not None else []
        where += [self.step] if self.step else []
        return (f"rank {self.failed_rank} died" + (f" in {self.call}" if self.call else "")
                + (f" ({', '.join(where)})" if where else "")
                + (f": {self.detail}" if self.detail else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.failed_rank, self.detail, self.call, self.number, self.step)


class CollectiveMismatch(CollopsError):
    """Ranks of one communicator called different collectives (or arguments) at the same point."""

    #: the peer's call's fingerprint, where the part that raised (a transport) could not
    #: compare it with this rank's: the call's execution adds what differs (`failure_site`)
    theirs: int | None = None


class CommunicatorBroken(CollectiveMismatch):
    """A communicator refuses calls: an earlier mismatch left a message of MPI's collective
    unmatched on it (`collops.mpi.board`)."""


class CollectiveTimeout(CollopsError):
    """A collective did not complete within its timeout."""


class RequestError(CollopsError):
    """A request was used in a state that forbids it: a persistent request started while
    active, or used after `free`."""

    def __init__(self, call: str, reason: str, rank: int | None = None) -> None:
        self.call = call
        self.rank = rank
        where = f" on rank {rank}" if rank is not None else ""
        super().__init__(f"{call}{where}: {reason}")


class PluginError(CollopsError):
    """A plug-in of users' algorithms could not be loaded; names it and where it failed."""

    def __init__(self, plugin: str, reason: str) -> None:
        self.plugin = plugin
        self.reason = reason
        super().__init__(f"plug-in {plugin}: {reason}")


class TuningWarning(UserWarning):
    """A rule of a user's selection table was ignored (it names an algorithm that does not
    exist any more); the defaults decide where it would have."""


class PerformanceWarning(UserWarning):
    """collops runs, but slower than it could: e.g. its compiled runners are missing."""
