"""A call whose arguments fail a check this rank can make alone raises before anything leaves
the rank, and its peers, which made the call too, are told (`collops.runtime.abandon`): the
call ends on every rank that needs this one — its `ArgumentError`, the others'
`CollectiveMismatch` or `PeerFailed` naming it — and the next calls match. A mistake at the
root of a bcast or scatter is told in the call's own envelope, quoting the root's error."""

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
    """Every rank makes the call, rank 0 with a wrong ``out`` (which raises at once), then
    right, twice; ``warm``: after as many right calls (a repeated signature runs its prepared
    call, bound to a compiled runner on shared memory)."""
    x = _inputs(comm.size)[comm.rank]
    for _ in range(warm):
        _calls(comm, x, None)[collective]()
    try:
        first = _calls(comm, x, WRONG if comm.rank == 0 else None)[collective]()
        error = None if first is None else "returned"
    except collops.CollopsError as exc:
        error = (type(exc).__name__, str(exc), getattr(exc, "failed_rank", None))
    got = [_calls(comm, x, None)[collective]() for _ in range(2)]
    return error, [None if g is None else g.tolist() for g in got]


COLLECTIVES = list(_calls(type("C", (), {"size": P})(), np.zeros(2 * P), None))
#: the calls whose root tells its peers it gave up
TOLD = ("bcast", "scatter", "scatterv")


def _wrong_at_the_root_then_right(comm, collective):
    """Every rank makes the call, the root (0) with a wrong ``out``; then right, twice."""
    x = _inputs(comm.size)[comm.rank]
    try:
        _calls(comm, x, WRONG if comm.rank == 0 else None)[collective]()
        error = "no error"
    except collops.CollopsError as exc:
        error = f"{type(exc).__name__}: {exc}"
    got = [_calls(comm, x, None)[collective]() for _ in range(2)]
    return error, [g.tolist() for g in got]


@pytest.mark.timeout(40)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("collective", TOLD)
def test_a_mistake_at_the_root_ends_the_call_on_every_rank(collective, transport):
    per_rank = collops.spawn(_wrong_at_the_root_then_right, P, collective,
                             transport=transport, timeout=20)
    root_error = per_rank[0][0]
    assert root_error.startswith(f"ArgumentError: {collective}: argument out=(7,) on rank 0")
    quoted = root_error.removeprefix("ArgumentError: ")[:60]
    xs = _inputs(P)
    for me, (error, got) in enumerate(per_rank):
        if me:
            assert error.startswith("CollectiveMismatch: the root gave up the call, raising: ")
            assert quoted in error, (error, quoted)
        assert got == [_want(collective, xs, me).tolist()] * 2, (collective, me)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
@pytest.mark.parametrize("collective", [c for c in COLLECTIVES if c not in TOLD])
@pytest.mark.parametrize("warm", [0, 3])
def test_a_call_refused_on_one_rank_ends_on_every_rank(collective, transport, warm):
    per_rank = collops.spawn(_wrong_then_right, P, collective, warm, transport=transport,
                             timeout=20)
    xs = _inputs(P)
    assert per_rank[0][0][0] == "ArgumentError", per_rank
    for me, (error, got) in enumerate(per_rank):
        want = _want(collective, xs, me)
        if me and error is not None:  # a gather's or reduce's non-root may finish its part
            kind, text, failed = error
            assert kind in ("CollectiveMismatch", "PeerFailed"), error
            assert failed == 0 or "rank 0 gave the call up" in text, error
        elif me:
            assert want is None, (collective, per_rank)
        expected = None if want is None else want.tolist()
        assert got == [expected, expected], (collective, me)
