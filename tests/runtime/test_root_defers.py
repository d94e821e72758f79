"""A bcast's or scatter's root 0 on the compiled route returns without waiting for its readers
to find the call and checks that at its next call on the communicator
(`collops.shm.direct.root_defers`, `DirectArea.settle`). Over shared memory, 2 and 3 ranks:
results stay right call after call (against numpy); a rank that disagrees raises at the call,
the root raises `CollectiveMismatch` naming both calls at its next call (or at ``free``), the
ranks that meet that given-up call raise too, and the communicator goes on working."""

from __future__ import annotations

import time

import numpy as np
import pytest

import collops
from collops import CollectiveMismatch
from tests.support.runners import compiled_route

WARM = 6  # agreeing calls first, so that every rank takes the compiled route


def _rooted(comm, collective, root, n=1):
    p = comm.size
    if collective == "bcast":
        return comm.bcast(np.full(n, 7.0 + root), root=root)
    return comm.scatter(np.arange(float(n * p)) + root, root=root)


def _steps(comm, steps):
    """Run each step, noting its error's type and text (None, None when it returned)."""
    seen = []
    for step in steps:
        try:
            step()
            seen.append((None, None))
        except CollectiveMismatch as exc:
            seen.append((type(exc).__name__, str(exc)))
    return seen


def _disagree(comm, collective, case):
    for _ in range(WARM):
        _rooted(comm, collective, 0)
    comm.barrier()  # every reader done with the calls before, so root 0's call defers
    me = comm.rank
    if me == comm.size - 1:
        time.sleep(0.05)  # and none of its readers could find it yet
    odd = me == comm.size - 1

    def first():
        if case == "root":  # the last rank names itself the root
            return _rooted(comm, collective, me if odd else 0)
        # the last rank makes another collective at that point
        return comm.allreduce(np.ones(1)) if odd else _rooted(comm, collective, 0)

    seen = _steps(comm, [first, lambda: comm.barrier(timeout=30)])
    total = comm.allreduce(np.full(3, float(me)), timeout=30)  # still usable
    assert np.array_equal(total, np.full(3, float(sum(range(comm.size))))), total
    return seen


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("case", ["root", "kind"])
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
def test_root_0_finds_a_disagreement_at_its_next_call(collective, case, ranks):
    got = collops.spawn(_disagree, ranks, collective, case, transport="shm", timeout=90)
    last = got[-1]
    # the rank that disagrees raises at the call itself
    assert last[0][0] == "CollectiveMismatch", got
    if not compiled_route():  # root 0 raises at the call, its next call is a call like any
        assert got[0][0][0] == "CollectiveMismatch" and got[0][1] == (None, None), got
        return
    # root 0 returned (its data had gone out) and raises at its next call, naming both calls
    (call_error, _), (late_error, late) = got[0]
    assert call_error is None and late_error == "CollectiveMismatch", got
    assert "next call" in late, late
    if case == "root":
        assert "root=0" in late and f"root={ranks - 1}" in late, late
    else:
        assert "allreduce" in late and collective in late, late
    # a rank that took root 0's data returned it, and meets the given-up call after
    for seen in got[1:-1]:
        assert seen[0] == (None, None) and seen[1][0] == "CollectiveMismatch", got


def _free_finds_it(comm):
    sub = comm.dup()
    for _ in range(WARM):
        sub.bcast(np.ones(1), root=0)
    sub.barrier()
    seen = _steps(comm, [lambda: sub.bcast(np.ones(1), root=sub.rank), sub.free])
    return seen


@pytest.mark.timeout(120)
def test_a_deferred_disagreement_is_raised_when_the_communicator_is_freed():
    got = collops.spawn(_free_finds_it, 2, transport="shm", timeout=90)
    assert got[1][0][0] == "CollectiveMismatch", got
    raised = got[0][1] if compiled_route() else got[0][0]  # at free, or at the call
    assert raised[0] == "CollectiveMismatch", got
    assert "root=0" in raised[1] and "root=1" in raised[1], got


def _many(comm, collective, calls):
    p, me = comm.size, comm.rank
    rng = np.random.default_rng(5)
    wrong = 0
    for i in range(calls):
        n = 1 + i % 5
        x = rng.random(n * p)  # the same on every rank: the numpy reference
        if collective == "bcast":
            got = comm.bcast(x[:n] if me == 0 else None, root=0)
            wrong += not np.array_equal(got, x[:n])
        else:
            got = comm.scatter(x if me == 0 else None, root=0)
            wrong += not np.array_equal(got, x[me * n:(me + 1) * n])
        if i % 7 == 0:  # another call between, on the same direct slots
            total = comm.allreduce(np.full(2, float(i)))
            wrong += not np.array_equal(total, np.full(2, float(i * p)))
    return wrong


@pytest.mark.timeout(120)
@pytest.mark.parametrize("collective", ["bcast", "scatter"])
@pytest.mark.parametrize("ranks", [2, 4])
def test_deferring_roots_keep_every_result_right(collective, ranks):
    assert collops.spawn(_many, ranks, collective, 400, transport="shm",
                         timeout=90) == [0] * ranks
