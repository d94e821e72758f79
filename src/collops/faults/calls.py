"""Random collective and point-to-point calls with numpy's answer: what every rank passes and
must get back.

A `Call` is drawn from a seed shared by all ranks, so each rank knows every rank's input and
computes the expected result itself with plain numpy (`expected`), independently of
collops. `invoke` makes the call through the public `Comm` API, with an optional `Deviation`
on one rank: another root, operator, dtype, count or collective (a mismatch to be detected).

The point-to-point calls (`P2P`) are made by a random pair or by every rank: ``send`` (the
rank ``root`` sends with a blocking ``send``, rank ``root + shift`` takes it with a blocking
``recv``, the others do nothing), ``sendrecv`` (every rank sends to rank ``rank + shift``
and receives from rank ``rank - shift`` in one blocking call) and ``isend_irecv`` (the same
exchange with ``irecv`` and ``isend``, then waiting for both).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce as fold
from typing import Any

import numpy as np

#: collectives the campaign draws from, with the arguments each takes
COLLECTIVES = ("barrier", "bcast", "scatter", "gather", "allgather", "allgatherv", "alltoall",
               "reduce", "allreduce", "reduce_scatter_block", "scan", "exscan")
#: point-to-point calls (module docstring), drawn as often as a collective when asked for
P2P = ("send", "sendrecv", "isend_irecv")
#: the tag of the campaign's point-to-point messages
P2P_TAG = 15
ROOTED = ("bcast", "scatter", "gather", "reduce")
REDUCTIONS = ("reduce", "allreduce", "reduce_scatter_block", "scan", "exscan")
DTYPES = ("float64", "float32", "int64", "int32", "uint8")
#: numpy's folds of the operators used here (all commutative and exact on small integers)
NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}
#: the same-width dtype a dtype mismatch passes instead (the bytes would fit: only the
#: fingerprint can tell)
SWAPPED_DTYPE = {"float64": "int64", "int64": "float64", "float32": "int32",
                 "int32": "float32", "uint8": "int8"}
#: the collective a collective mismatch calls instead
OTHER_COLLECTIVE = {"allreduce": "allgather", "allgather": "allreduce", "bcast": "gather",
                    "gather": "bcast", "reduce": "allreduce", "alltoall": "allgather",
                    "scan": "exscan", "scatter": "bcast", "barrier": "allreduce"}
#: which collectives each mismatch can be made in (the argument must matter on every rank)
MISMATCHABLE = {"root": ("bcast", "scatter", "gather", "reduce"),
                "op": ("allreduce", "reduce", "scan", "reduce_scatter_block"),
                "dtype": ("allreduce", "allgather", "gather", "alltoall"),
                "count": ("allreduce", "allgather", "gather", "alltoall", "reduce"),
                "collective": ("allreduce", "allgather", "bcast", "gather", "alltoall")}


@dataclass(frozen=True)
class Call:
    """One collective call as every rank makes it (``counts`` only for ``allgatherv``)."""

    collective: str
    dtype: str = "float64"
    count: int = 1
    op: str = "sum"
    root: int = 0
    seed: int = 0
    counts: tuple[int, ...] = ()
    #: a point-to-point call's distance from sender to receiver (1 … size-1)
    shift: int = 0


@dataclass(frozen=True)
class Deviation:
    """What one rank does differently in a call: ``kind`` is a key of `MISMATCHABLE`."""

    kind: str

    def applied(self, call: Call, size: int) -> Call:
        """The call this rank makes instead of ``call``."""
        if self.kind == "root":
            return replace(call, root=(call.root + 1) % size)
        if self.kind == "op":
            return replace(call, op="max" if call.op != "max" else "min")
        if self.kind == "dtype":
            return replace(call, dtype=SWAPPED_DTYPE[call.dtype])
        if self.kind == "count":
            return replace(call, count=call.count + 1)
        if self.kind == "collective":
            return replace(call, collective=OTHER_COLLECTIVE[call.collective])
        raise ValueError(f"unknown deviation {self.kind!r}")


def draw_call(rng: np.random.Generator, size: int, collective: str | None = None,
              large: bool = True, p2p: bool = False) -> Call:
    """A random valid call on ``size`` ranks (``collective`` forced if given); ``large``
    allows the occasional array big enough for the streamed and single-copy protocols;
    ``p2p`` draws point-to-point calls too."""
    c = collective or str(rng.choice(COLLECTIVES + (P2P if p2p and size > 1 else ())))
    sizes = [1, 3, 16, 100, 1000] + ([40_000, 300_000] if large else [])
    weights = np.array([4, 4, 3, 3, 2] + ([1, 0.3] if large else []))
    count = int(rng.choice(sizes, p=weights / weights.sum()))
    dtype = str(rng.choice(DTYPES))
    op = str(rng.choice(list(NUMPY_OPS)))
    counts = tuple(int(v) for v in rng.integers(0, count + 1, size)) if c == "allgatherv" else ()
    call = Call(c, dtype, count, op, int(rng.integers(size)), int(rng.integers(2**31)), counts)
    return replace(call, shift=1 + int(rng.integers(size - 1))) if c in P2P else call


def make_calls(seed: int, length: int, size: int, *, forced: dict[int, str] | None = None,
               large: bool = True, p2p: bool = False) -> list[Call]:
    """``length`` random calls from ``seed``, the same on every rank; ``forced`` maps call
    indices to the collective they must be; the last is always an allreduce (it needs
    every rank, so a failure earlier cannot go unnoticed to the end); ``p2p``: with
    point-to-point calls among them."""
    rng = np.random.default_rng(seed)
    forced = dict(forced or {})
    forced.setdefault(length - 1, "allreduce")
    return [draw_call(rng, size, forced.get(i), large, p2p) for i in range(length)]


def _values(rng: np.random.Generator, dtype: str, n: int, op: str) -> np.ndarray:
    """Small integers of ``dtype``: sums and products of a few ranks stay exact."""
    low, high = (1, 4) if op == "prod" else (0, 50)
    return rng.integers(low, high, n).astype(dtype)


def _block_rows(call: Call, size: int) -> int:
    """Rows a rank contributes: ``size`` blocks for scatter, alltoall, reduce_scatter_block."""
    spread = call.collective in ("scatter", "alltoall", "reduce_scatter_block")
    return call.count * size if spread else call.count


def rank_input(call: Call, rank: int, size: int) -> np.ndarray | None:
    """What ``rank`` passes as its array in ``call`` (None where it passes nothing)."""
    c = call.collective
    if c == "barrier" or (c in ("bcast", "scatter") and rank != call.root):
        return None
    if c == "send" and rank != call.root:
        return None
    rng = np.random.default_rng([call.seed, rank])
    rows = call.counts[rank] if c == "allgatherv" else _block_rows(call, size)
    return _values(rng, call.dtype, rows, call.op)


def expected(call: Call, rank: int, size: int) -> np.ndarray | None:
    """numpy's answer on ``rank`` (None where collops returns None)."""
    c, n = call.collective, call.count
    inputs = [rank_input(call, r, size) for r in range(size)]
    if c == "barrier":
        return None
    if c == "send":
        return inputs[call.root] if rank == (call.root + call.shift) % size else None
    if c in P2P:
        return inputs[(rank - call.shift) % size]
    if c == "bcast":
        return inputs[call.root]
    if c == "scatter":
        whole = inputs[call.root]
        assert whole is not None
        return whole[rank * n:(rank + 1) * n]
    if c in ("gather", "allgather", "allgatherv"):
        joined = np.concatenate([x for x in inputs if x is not None])
        return joined if c != "gather" or rank == call.root else None
    if c == "alltoall":
        return np.concatenate([x[rank * n:(rank + 1) * n] for x in inputs if x is not None])
    op = NUMPY_OPS[call.op]
    arrays = [x for x in inputs if x is not None]
    if c == "reduce":
        return fold(op, arrays) if rank == call.root else None
    if c == "allreduce":
        return fold(op, arrays)
    if c == "reduce_scatter_block":
        return fold(op, arrays)[rank * n:(rank + 1) * n]
    if c == "scan":
        return fold(op, arrays[:rank + 1])
    if c == "exscan":
        return fold(op, arrays[:rank]) if rank else None
    raise ValueError(f"unknown collective {c!r}")


def invoke(comm: Any, call: Call, deviation: Deviation | None = None,
           timeout: float | None = None, **changes: Any) -> Any:
    """Make ``call`` on ``comm`` (as changed by ``deviation``); return what collops returns.
    ``changes`` replace arguments as passed (``x``, ``root``, ``op``, ``counts``) or add
    keywords (``timeout``, ``algorithm``): how a caller passes an invalid one."""
    size = comm.size
    made = deviation.applied(call, size) if deviation else call
    x = changes.pop("x") if "x" in changes else rank_input(made, comm.rank, size)
    made = replace(made, **{k: changes.pop(k) for k in ("root", "op", "counts") if k in changes})
    c, kw = made.collective, {"timeout": timeout, **changes}
    if c == "barrier":
        return comm.barrier(**kw)
    if c in P2P:
        return _point_to_point(comm, made, x, timeout)
    if c in ROOTED and c not in REDUCTIONS:
        return getattr(comm, c)(x, made.root, **kw)
    if c == "reduce":
        return comm.reduce(x, made.op, made.root, **kw)
    if c in REDUCTIONS:
        return getattr(comm, c)(x, made.op, **kw)
    if c == "allgatherv":
        return comm.allgatherv(x, list(made.counts), **kw)
    return getattr(comm, c)(x, **kw)


def _point_to_point(comm: Any, call: Call, x: np.ndarray | None,
                    timeout: float | None) -> np.ndarray | None:
    """Make the point-to-point ``call`` (module docstring); what this rank received."""
    rank, size, c = comm.rank, comm.size, call.collective
    if c == "send":
        if rank == call.root:
            comm.send(x, (rank + call.shift) % size, P2P_TAG, timeout=timeout)
        elif rank == (call.root + call.shift) % size:
            return comm.recv(source=call.root, tag=P2P_TAG, timeout=timeout)[0]
        return None
    dest, source = (rank + call.shift) % size, (rank - call.shift) % size
    if c == "sendrecv":
        return comm.sendrecv(x, dest, P2P_TAG, source=source, recvtag=P2P_TAG,
                             timeout=timeout)[0]
    receive = comm.irecv(source=source, tag=P2P_TAG)
    comm.isend(x, dest, P2P_TAG).wait()
    return receive.wait()[0]


def same_result(got: Any, want: np.ndarray | None) -> bool:
    """Whether collops' result ``got`` is numpy's ``want`` (same dtype, shape and values)."""
    if want is None:
        return got is None or (isinstance(got, np.ndarray) and got.size == 0)
    return (isinstance(got, np.ndarray) and got.dtype == want.dtype
            and got.shape == want.shape and bool(np.array_equal(got, want)))
