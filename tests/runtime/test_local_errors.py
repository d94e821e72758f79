"""A call whose arguments fail a check this rank can make alone raises before anything leaves
the rank and takes no call number: the communicator then goes on matching its peers' calls."""

from __future__ import annotations

import numpy as np
import pytest

import collops

P = 2
WRONG = np.empty(7)  # an ``out`` of the wrong size for every call below


def _calls(comm, x, out):
    """collective -> its call on ``x`` (float64, 2·p rows) with ``out``."""
    p = comm.size
    return {
        "allreduce": lambda: comm.allreduce(x, out=out),
        "reduce": lambda: comm.reduce(x, root=0, out=out),
        "scan": lambda: comm.scan(x, out=out),
        "reduce_scatter": lambda: comm.reduce_scatter(x, counts=[2] * p, out=out),
        "reduce_scatter_block": lambda: comm.reduce_scatter_block(x, out=out),
        "allgather": lambda: comm.allgather(x, out=out),
        "gather": lambda: comm.gather(x, root=0, out=out),
        "gatherv": lambda: comm.gatherv(x, root=0, counts=[2 * p] * p, out=out),
        "alltoall": lambda: comm.alltoall(x, out=out),
        "alltoallv": lambda: comm.alltoallv(x, [2] * p, recvcounts=[2] * p, out=out),
        "scatter": lambda: comm.scatter(x, root=0, out=out),
        "scatterv": lambda: comm.scatterv(x, [2] * p, root=0, out=out),
        "bcast": lambda: comm.bcast(x, root=0, out=out),
    }


def _want(collective, xs, me):
    """What ``collective`` returns on rank ``me`` for the ranks' inputs ``xs`` (numpy)."""
    p = len(xs)
    total = np.sum(xs, axis=0)
    if collective == "allreduce":
        return total
    if collective == "reduce":
        return total if me == 0 else None
    if collective == "scan":
        return np.sum(xs[: me + 1], axis=0)
    if collective in ("reduce_scatter", "reduce_scatter_block"):
        return total[2 * me: 2 * me + 2]
    if collective == "allgather":
        return np.concatenate(xs)
    if collective in ("gather", "gatherv"):
        return np.concatenate(xs) if me == 0 else None
    if collective in ("alltoall", "alltoallv"):
        return np.concatenate([xs[j][2 * me: 2 * me + 2] for j in range(p)])
    if collective in ("scatter", "scatterv"):
        return xs[0][2 * me: 2 * me + 2]
    return xs[0]  # bcast


def _inputs(p):
    return [np.arange(2.0 * p) + 10 * r for r in range(p)]


def _wrong_then_right(comm, collective, warm=0):
    """Rank 0 makes the call with a wrong ``out`` (which raises at once), then every rank
    makes it right, twice; ``warm``: after as many right calls (a repeated signature runs its
    prepared call, bound to a compiled runner on shared memory)."""
    x = _inputs(comm.size)[comm.rank]
    for _ in range(warm):
        _calls(comm, x, None)[collective]()
    error = None
    if comm.rank == 0:
        try:
            _calls(comm, x, WRONG)[collective]()
        except collops.ArgumentError as exc:
            error = exc.__class__.__name__
    got = [_calls(comm, x, None)[collective]() for _ in range(2)]
    return error, [None if g is None else g.tolist() for g in got]


COLLECTIVES = list(_calls(type("C", (), {"size": P})(), np.zeros(2 * P), None))


@pytest.mark.timeout(40)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("warm", [0, 3])
def test_a_call_refused_locally_takes_no_call_number(collective, transport, warm):
    per_rank = collops.spawn(_wrong_then_right, P, collective, warm, transport=transport,
                             timeout=20)
    xs = _inputs(P)
    assert per_rank[0][0] == "ArgumentError"
    for me, (_, got) in enumerate(per_rank):
        want = _want(collective, xs, me)
        expected = None if want is None else want.tolist()
        assert got == [expected, expected], (collective, me)
