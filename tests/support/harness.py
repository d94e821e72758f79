"""Drive a test `Case` through the public Comm API on real ranks (any transport)."""

from __future__ import annotations

from typing import Any

import numpy as np

import collops
from collops.check.cases import Case

#: collectives whose result is None on the ranks that get nothing (compared as empty)
_NONE_OFF_ROOT = ("gather", "gatherv", "reduce")


def call_arguments(comm: collops.Comm, case: Case, algorithm: str | None,
                   ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments of ``case``'s call on this rank."""
    r = comm.rank
    spec = case.specs[r]
    x = case.inputs[r]
    c = case.collective
    kw: dict[str, Any] = {"algorithm": algorithm} if algorithm else {}
    if c == "barrier":
        return (), kw
    if case.displaced:  # counts and displacements given (where the rank uses them)
        if c == "alltoallv":
            return (x, list(spec.sendcounts), list(spec.sdispls), list(spec.recvcounts)), {
                **kw, "rdispls": list(spec.rdispls)}
        at_root = c == "allgatherv" or r == spec.root
        kw["displs"] = list(spec.displs) if at_root else None
        if c == "scatterv":
            return (x, list(spec.counts) if at_root else None, spec.root), kw
        if c == "gatherv":
            return (x, spec.root, list(spec.counts)), kw
        return (x, list(spec.counts)), kw
    if c in ("gatherv", "allgatherv") and len(set(spec.counts)) > 1:
        # uneven counts given (the one-phase call, fast path included); even ones exchanged
        return ((x, spec.root, list(spec.counts)) if c == "gatherv"
                else (x, list(spec.counts))), kw
    if c in ("bcast", "scatter", "gather", "gatherv"):
        return (x, spec.root), kw
    if c == "scatterv":
        return (x, list(spec.counts), spec.root), kw
    if c == "alltoallv":
        return (x, list(spec.sendcounts)), {**kw, "recvcounts": list(spec.recvcounts)}
    if c == "reduce":
        return (x, case.op, spec.root), kw
    if c == "reduce_scatter":
        return (x, case.op, list(spec.counts)), kw
    if c in ("allreduce", "reduce_scatter_block", "scan", "exscan"):
        return (x, case.op), kw
    if c in ("allgather", "allgatherv", "alltoall"):
        return (x,), kw
    raise ValueError(c)


def as_result(case: Case, got: Any) -> Any:
    """What a call returned, with a barrier's nothing and an off-root None made empty."""
    if case.collective == "barrier" or (got is None and case.collective in _NONE_OFF_ROOT):
        return np.empty(0, case.dtype)
    return got


def call_collective(comm: collops.Comm, case: Case, algorithm: str | None) -> Any:
    """Make ``case``'s call on this rank through the public API; return what it returns."""
    args, kw = call_arguments(comm, case, algorithm)
    return as_result(case, getattr(comm, case.collective)(*args, **kw))


def start_collective(comm: collops.Comm, case: Case, algorithm: str | None) -> Any:
    """Start ``case``'s call non-blocking on this rank; return its request."""
    args, kw = call_arguments(comm, case, algorithm)
    return getattr(comm, "i" + case.collective)(*args, **kw)

