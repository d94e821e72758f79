"""Collective transfers (``Xfer``), what a dispatch callback is told, and their errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import COLLECTIVES, REDUCING, CallSpec, make_spec
from ..datatypes import MOVABLE_KINDS
from ..errors import ArgumentError, CollopsError
from ..ops import as_op
from .catalog import Verdict

if TYPE_CHECKING:
    from .client import Endpoint
    from .geometry import Geometry
    from .p2p_values import Recv

#: active-message collectives and the collective that moves their data
AM_COLLECTIVES = {"ambroadcast": "bcast", "amscatter": "scatter", "amgather": "gather",
                  "amreduce": "reduce"}


class DispatchError(CollopsError):
    """A dispatch callback raised (on this endpoint or, for active messages, on a peer)."""


@dataclass(frozen=True)
class Delivery:
    """What a dispatch callback learns about the transfer that reached its endpoint."""

    geometry: Geometry
    endpoint: Endpoint
    collective: str
    dispatch_id: int | None
    root: int
    #: for active messages: dtype and per-endpoint shape the root announced
    dtype: np.dtype | None = None
    shape: tuple[int, ...] | None = None
    #: for a two-phase callback's header call: where it may name the receive buffer
    recv: Recv | None = None


class Xfer:
    """A collective transfer posted without blocking through one endpoint of a geometry."""

    def __init__(self, collective: str, algorithm: str | None = None, data: Any = None,
                 dispatch_id: int | None = None, done: Callable[[Xfer], Any] | None = None, *,
                 root: int = 0, op: Any = None, params: Mapping[str, Any] | None = None,
                 args: Mapping[str, Any] | None = None, timeout: float | None = None,
                 geometry: Geometry | None = None) -> None:
        if collective not in COLLECTIVES and collective not in AM_COLLECTIVES:
            raise ArgumentError("Xfer", "collective", collective,
                                f"one of {', '.join((*COLLECTIVES, *AM_COLLECTIVES))}")
        self.collective = collective
        self.algorithm = algorithm
        self.data = data
        self.dispatch_id = dispatch_id
        self.done = done
        self.root = root
        self.op = op
        self.params = dict(params or {})
        self.args = dict(args or {})
        self.timeout = timeout
        self.result: Any = None
        self.error: BaseException | None = None
        self.completed = False
        #: the geometry it is for (given here, so that ``endpoint.post(xfer)`` needs no more,
        #: or set when it is posted)
        self.geometry: Geometry | None = geometry
        self.endpoint: Endpoint | None = None

    def __repr__(self) -> str:
        state = "done" if self.completed else ("failed" if self.error else "in flight")
        return f"<Xfer {self.collective}[{self.algorithm or 'auto'}] {state}>"

    @property
    def active_message(self) -> bool:
        """Whether only the root posts it (ambroadcast, amscatter, amgather, amreduce)."""
        return self.collective in AM_COLLECTIVES

    @property
    def data_collective(self) -> str:
        """The collective that moves the data."""
        return AM_COLLECTIVES.get(self.collective, self.collective)

    def test(self) -> bool:
        """Advance the posting task's contexts once; True when complete (raises on failure)."""
        if self.error is not None:
            raise self.error
        if not self.completed and self.endpoint is not None:
            self.endpoint.client.advance()
        if self.error is not None:
            raise self.error
        return self.completed

    def wait(self, timeout: float | None = None) -> Any:
        """Advance until complete and return the result (raises the transfer's error)."""
        if self.endpoint is None:
            raise ArgumentError("Xfer.wait", "xfer", self, "not posted")
        deadline = None if timeout is None else time.monotonic() + timeout
        client = self.endpoint.client
        while not self.test():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{self!r} did not complete within {timeout} s")
            client.wait_for_activity(0.001)
        return self.result


def spec_of(xfer: Xfer, size: int) -> CallSpec | Verdict:
    """The call spec of ``xfer`` on ``size`` endpoints, or a `Verdict` saying why it has none."""
    c = xfer.data_collective
    if c in ("bcast", "scatter", "scatterv", "gather", "gatherv", "reduce") and not (
            isinstance(xfer.root, (int, np.integer)) and 0 <= xfer.root < size):
        return Verdict(False, (f"root {xfer.root!r} is not an endpoint index in [0, {size})",))
    if c == "barrier":
        return make_spec("barrier", size, np.uint8)
    if xfer.data is None:
        return Verdict(False, ("the call carries no data to describe it (post it at the root)",))
    try:
        data = np.asarray(xfer.data)
    except Exception as exc:  # noqa: BLE001 - reported as a reason
        return Verdict(False, (f"data is not an array: {exc}",))
    if data.dtype.kind not in MOVABLE_KINDS or data.dtype.hasobject:
        return Verdict(False, (f"dtype {data.dtype} cannot move (contiguous numeric data only)",))
    op = None
    if c in REDUCING:
        try:
            op = as_op(xfer.op, c)
            op.check(data.dtype, c)
        except CollopsError as exc:
            return Verdict(False, (str(exc),))
    n = int(data.size)
    if c in ("scatter", "alltoall", "reduce_scatter_block"):
        if n % size:
            return Verdict(False, (f"{n} elements do not split into {size} equal blocks",))
        n //= size
    if c in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        counts = xfer.args.get("counts") or [n] * size
        return make_spec(c, size, data.dtype, counts=list(counts), root=xfer.root, op=op)
    if c == "alltoallv":
        send = xfer.args.get("sendcounts") or [n // size] * size
        recv = xfer.args.get("recvcounts") or send
        return make_spec(c, size, data.dtype, sendcounts=list(send), recvcounts=list(recv))
    return make_spec(c, size, data.dtype, count=n, root=int(xfer.root), op=op)
