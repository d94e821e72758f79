"""Drive a test `Case` through the public Comm API on real ranks (any transport)."""

from __future__ import annotations

from typing import Any

import numpy as np

import collops
from tests.support.cases import Case


def call_collective(comm: collops.Comm, case: Case, algorithm: str | None) -> Any:
    """Make ``case``'s call on this rank through the public API; return what it returns."""
    r = comm.rank
    spec = case.specs[r]
    x = case.inputs[r]
    c = case.collective
    kw: dict[str, Any] = {"algorithm": algorithm} if algorithm else {}
    if c == "barrier":
        comm.barrier(**kw)
        return np.empty(0, case.dtype)
    if c == "bcast":
        return comm.bcast(x, spec.root, **kw)
    if c == "scatter":
        return comm.scatter(x, spec.root, **kw)
    if c == "scatterv":
        return comm.scatterv(x, list(spec.counts), spec.root, **kw)
    if c == "gather":
        out = comm.gather(x, spec.root, **kw)
        return out if out is not None else np.empty(0, case.dtype)
    if c == "gatherv":
        out = comm.gatherv(x, spec.root, **kw)
        return out if out is not None else np.empty(0, case.dtype)
    if c == "allgather":
        return comm.allgather(x, **kw)
    if c == "allgatherv":
        return comm.allgatherv(x, **kw)
    if c == "alltoall":
        return comm.alltoall(x, **kw)
    if c == "alltoallv":
        return comm.alltoallv(x, list(spec.sendcounts), recvcounts=list(spec.recvcounts), **kw)
    if c == "reduce":
        out = comm.reduce(x, case.op, spec.root, **kw)
        return out if out is not None else np.empty(0, case.dtype)
    if c == "allreduce":
        return comm.allreduce(x, case.op, **kw)
    if c == "reduce_scatter":
        return comm.reduce_scatter(x, case.op, list(spec.counts), **kw)
    if c == "reduce_scatter_block":
        return comm.reduce_scatter_block(x, case.op, **kw)
    if c == "scan":
        return comm.scan(x, case.op, **kw)
    if c == "exscan":
        return comm.exscan(x, case.op, **kw)
    raise ValueError(c)


def run_case(case: Case, algorithm: str | None, transport: str = "inproc") -> list[Any]:
    """Run ``case`` on ``len(case.specs)`` ranks over ``transport``; results by rank."""
    p = len(case.specs)
    return collops.spawn(lambda comm: call_collective(comm, case, algorithm), p,
                         transport=transport, timeout=60)
