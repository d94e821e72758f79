"""The values of PAMI's point-to-point on endpoints (`endpoints.p2p`): a transfer in flight
and its completions, a receive a dispatch function directs (PAMI's ``pami_recv_t``), a memory
region, the sentinel of posted work that wants to run again; errors as they travel back to
the origin."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, CollectiveTimeout, CollopsError
from .xfer import DispatchError

if TYPE_CHECKING:
    from ..runtime.request import Request
    from .client import Context, Endpoint


class _Again:
    """The value a posted work function returns to be run again (PAMI_EAGAIN)."""

    def __repr__(self) -> str:
        return "AGAIN"


AGAIN = _Again()


class Recv:
    """PAMI's ``pami_recv_t``: what a dispatch function learns of a message too large to
    come with its header, and where it says the data goes. Set ``buffer`` (a writeable
    C-contiguous array of at least ``nbytes`` bytes; the data lands at its start) and
    optionally ``done``, called as ``done(recv)`` once the data has landed."""

    __slots__ = ("origin", "nbytes", "dtype", "shape", "buffer", "done")

    def __init__(self, origin: Endpoint, nbytes: int, dtype: np.dtype,
                 shape: tuple[int, ...]) -> None:
        self.origin, self.nbytes, self.dtype, self.shape = origin, nbytes, dtype, shape
        self.buffer: Any = None
        self.done: Callable[[Recv], Any] | None = None

    def __repr__(self) -> str:
        return f"Recv({self.nbytes} bytes {self.dtype}{list(self.shape)} from {self.origin})"


@dataclass(frozen=True)
class Memregion:
    """A memory region registered on one context (PAMI_Memregion_create): picklable, so it
    can be sent to the tasks that will `rput` into it or `rget` from it."""

    task: int
    context: int
    region_id: int
    nbytes: int


class Transfer:
    """A `send`, `rput`, `rget` or fence in flight: ``local`` once the origin's buffer may
    be reused (for a get: once the data landed), ``remote`` once the target has it."""

    def __init__(self, context: Context, call: str, target: Endpoint | None,
                 done: Callable[[Transfer], Any] | None,
                 remote_done: Callable[[Transfer], Any] | None) -> None:
        self.context, self.call, self.target = context, call, target
        self._on_local, self._on_remote = done, remote_done
        self.local = self.remote = False
        self.error: BaseException | None = None
        #: whether ``error`` has been raised to the user (by `wait` or an advance)
        self.reported = False
        #: a get's receive of its data (cancelled when the target refuses the get)
        self.request: Request | None = None

    def __repr__(self) -> str:
        state = "failed" if self.error else "remote" if self.remote else \
            "local" if self.local else "pending"
        return f"<Transfer {self.call} to {self.target} {state}>"

    @property
    def completed(self) -> bool:
        """Whether the transfer has completed remotely or failed."""
        return self.remote or self.error is not None

    def complete_local(self) -> None:
        """Local completion: run ``done`` (once)."""
        if not self.local:
            self.local = True
            if self._on_local is not None:
                self._on_local(self)

    def complete_remote(self) -> None:
        """Remote completion, after the local one: run ``remote_done`` (once)."""
        self.complete_local()
        if not self.remote:
            self.remote = True
            if self._on_remote is not None:
                self._on_remote(self)

    def wait(self, timeout: float | None = None) -> None:
        """Advance the origin's context until the transfer completes remotely; raises its
        error, or `CollectiveTimeout` after ``timeout`` seconds."""
        wait_until(self.context, lambda: self.completed, timeout, self.call)
        if self.error is not None:
            self.reported = True
            raise self.error


def wait_until(context: Context, condition: Callable[[], bool], timeout: float | None,
               call: str) -> None:
    """Advance ``context`` until ``condition()`` holds (`CollectiveTimeout` after
    ``timeout`` seconds)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not condition():
        if deadline is not None and time.monotonic() > deadline:
            raise CollectiveTimeout(f"{call} on task {context.client.task} (context "
                                    f"{context.offset}) did not complete within {timeout} s")
        if not context.advance():
            context.client.wait_for_activity(0.001)


def error_record(exc: BaseException) -> tuple[Any, ...]:
    """``exc`` as a picklable record (`error_from` makes it again)."""
    if isinstance(exc, ArgumentError):
        return ("argument", exc.call, exc.argument, exc.value, exc.reason, exc.rank)
    return ("dispatch", str(exc))


def error_from(record: tuple[Any, ...]) -> CollopsError:
    """The exception an `error_record` describes."""
    if record[0] == "argument":
        return ArgumentError(*record[1:])
    return DispatchError(record[1])


def recv_buffer_error(call: str, recv: Recv, rank: int) -> ArgumentError | None:
    """Why ``recv.buffer`` cannot take the ``recv.nbytes`` bytes (None when it can)."""
    buffer = recv.buffer
    if buffer is None:
        return ArgumentError(call, "recv.buffer", None, f"the dispatch function named no "
                             f"buffer for the {recv.nbytes} bytes from {recv.origin}", rank)
    if not isinstance(buffer, np.ndarray) or not buffer.flags.c_contiguous \
            or not buffer.flags.writeable:
        return ArgumentError(call, "recv.buffer", type(buffer).__name__, "must be a "
                             "writeable C-contiguous numpy array", rank)
    if buffer.nbytes < recv.nbytes:
        return ArgumentError(call, "recv.buffer", buffer.shape,
                             f"holds {buffer.nbytes} bytes, the message from "
                             f"{recv.origin} has {recv.nbytes}", rank)
    return None


def bytes_of(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array."""
    return array.reshape(-1).view(np.uint8)
