"""The call spec: everything about a collective call that shapes its schedule.

A `CallSpec` is the call *as one rank sees it*: the collective, the number of ranks, the dtype,
counts (in elements), displacements, root and operator. It is hashable, so a schedule is
cached by ``(algorithm, params, rank, spec)``. For most collectives every rank's spec is the
same; for ``alltoallv`` it holds the calling rank's own send and receive vectors.

Non-v collectives are normalised to their v-form (``allgather`` gets ``counts`` of equal
values, ``alltoall`` gets send/receive vectors), so one builder serves both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ops import Op
from ..schedule import ScheduleBuilder

COLLECTIVES = (
    "barrier", "bcast", "scatter", "scatterv", "gather", "gatherv", "allgather", "allgatherv",
    "alltoall", "alltoallv", "reduce", "allreduce", "reduce_scatter", "reduce_scatter_block",
    "scan", "exscan",
)
ROOTED = frozenset({"bcast", "scatter", "scatterv", "gather", "gatherv", "reduce"})
REDUCING = frozenset({"reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan",
                      "exscan"})
VECTOR = frozenset({"scatterv", "gatherv", "allgatherv", "alltoallv", "reduce_scatter"})


def prefix(counts: tuple[int, ...]) -> tuple[int, ...]:
    """Displacements of consecutive blocks of the given counts."""
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return tuple(out)


def extent(displs: tuple[int, ...], counts: tuple[int, ...]) -> int:
    """Elements a buffer needs to hold blocks of ``counts`` at ``displs``."""
    return max((d + c for d, c in zip(displs, counts, strict=True) if c), default=0)


@dataclass(frozen=True)
class CallSpec:
    """A collective call as one rank sees it (hashable; counts in elements)."""

    collective: str
    size: int
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float64))
    count: int = 0
    counts: tuple[int, ...] = ()
    displs: tuple[int, ...] = ()
    root: int = 0
    op: Op | None = None
    sendcounts: tuple[int, ...] = ()
    sdispls: tuple[int, ...] = ()
    recvcounts: tuple[int, ...] = ()
    rdispls: tuple[int, ...] = ()

    def __hash__(self) -> int:
        """The fields' hash, worked out once: a call's spec is looked up on every call."""
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.collective, self.size, self.dtype, self.count, self.counts,
                           self.displs, self.root, self.op, self.sendcounts, self.sdispls,
                           self.recvcounts, self.rdispls))
            object.__setattr__(self, "_hash", cached)
        return cached  # type: ignore[no-any-return]

    def __getstate__(self) -> dict[str, Any]:
        """The fields without the hash, which another process works out anew (a string's
        hash differs between processes)."""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return int(self.dtype.itemsize)

    @property
    def commutative(self) -> bool:
        """Whether the operator (if any) is commutative."""
        return self.op is None or self.op.commutative

    @property
    def total(self) -> int:
        """Elements in the v-counts (sum)."""
        return sum(self.counts)

    def block(self, rank: int) -> int:
        """The count that belongs to ``rank`` (its v-count, or the common count)."""
        return self.counts[rank] if self.counts else self.count

    def buffer_counts(self, rank: int) -> tuple[int, int]:
        """Elements of the caller's SEND and RECV areas on ``rank`` for this collective."""
        c, n, root = self.collective, self.size, self.root
        if c == "barrier":
            return 0, 0
        if c == "bcast":
            return (self.count if rank == root else 0), self.count
        if c in ("scatter", "scatterv"):
            return (extent(self.displs, self.counts) if rank == root else 0), self.counts[rank]
        if c in ("gather", "gatherv"):
            return self.counts[rank], (extent(self.displs, self.counts) if rank == root else 0)
        if c in ("allgather", "allgatherv"):
            return self.counts[rank], extent(self.displs, self.counts)
        if c in ("alltoall", "alltoallv"):
            return (extent(self.sdispls, self.sendcounts), extent(self.rdispls, self.recvcounts))
        if c == "reduce":
            return self.count, (self.count if rank == root else 0)
        if c in ("allreduce", "scan", "exscan"):
            return self.count, self.count
        if c in ("reduce_scatter", "reduce_scatter_block"):
            return sum(self.counts), self.counts[rank]
        raise ValueError(f"unknown collective {c!r} (size {n})")

    def vector_bytes(self) -> int:
        """Bytes of ``count`` elements: the vector of a bcast, reduce or allreduce."""
        return self.count * self.itemsize

    def message_bytes(self) -> int:
        """The call's characteristic message size in bytes (per-rank contribution)."""
        c = self.collective
        if c in ("alltoall", "alltoallv"):
            return sum(self.sendcounts) * self.itemsize
        if self.counts:
            return max(self.counts, default=0) * self.itemsize * (
                self.size if c in ("reduce_scatter", "reduce_scatter_block") else 1)
        return self.count * self.itemsize

    def key(self) -> tuple[Any, ...]:
        """A hashable identity (the dataclass itself is hashable; kept for clarity)."""
        return (self.collective, self.size, self.dtype.str, self.count, self.counts, self.displs,
                self.root, id(self.op), self.sendcounts, self.sdispls, self.recvcounts,
                self.rdispls)

    def with_(self, **changes: Any) -> CallSpec:
        """A copy with some fields changed."""
        return replace(self, **changes)


def make_spec(
    collective: str,
    size: int,
    dtype: Any = np.float64,
    *,
    count: int = 0,
    counts: tuple[int, ...] | list[int] | None = None,
    displs: tuple[int, ...] | list[int] | None = None,
    root: int = 0,
    op: Op | None = None,
    sendcounts: tuple[int, ...] | list[int] | None = None,
    sdispls: tuple[int, ...] | list[int] | None = None,
    recvcounts: tuple[int, ...] | list[int] | None = None,
    rdispls: tuple[int, ...] | list[int] | None = None,
) -> CallSpec:
    """Build a normalised `CallSpec` (fills v-counts and default displacements)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")
    dt = np.dtype(dtype)

    def tup(v: Any) -> tuple[int, ...]:
        return tuple(int(x) for x in v)

    cs: tuple[int, ...] = ()
    ds: tuple[int, ...] = ()
    sc: tuple[int, ...] = ()
    sd: tuple[int, ...] = ()
    rc: tuple[int, ...] = ()
    rd: tuple[int, ...] = ()
    if collective in ("scatter", "gather", "allgather", "reduce_scatter_block"):
        cs = (int(count),) * size
        ds = prefix(cs)
    elif collective in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        if counts is None:
            raise ValueError(f"{collective} needs counts")
        cs = tup(counts)
        ds = tup(displs) if displs is not None else prefix(cs)
    elif collective == "alltoall":
        sc = rc = (int(count),) * size
        sd = rd = prefix(sc)
    elif collective == "alltoallv":
        if sendcounts is None or recvcounts is None:
            raise ValueError("alltoallv needs sendcounts and recvcounts")
        sc, rc = tup(sendcounts), tup(recvcounts)
        sd = tup(sdispls) if sdispls is not None else prefix(sc)
        rd = tup(rdispls) if rdispls is not None else prefix(rc)
    return CallSpec(collective, int(size), dt, int(count), cs, ds, int(root), op, sc, sd, rc, rd)


def builder_for(rank: int, spec: CallSpec, tmp: int = 0) -> ScheduleBuilder:
    """An empty schedule builder for ``rank``'s part of ``spec``, with its SEND and RECV areas."""
    return ScheduleBuilder(rank, spec.size, *spec.buffer_counts(rank), tmp=tmp)
