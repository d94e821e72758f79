"""Persistent collectives (``*_init``), the generated non-blocking forms, and the request helpers.

Every collective's persistent form is started and completed several times with its input
changed in place between starts, on threads and on processes over shared memory, and each
result is checked against numpy; persistent, blocking and non-blocking calls of one collective
are mixed across ranks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import collops
from collops import ArgumentError, Comm, PersistentRequest, Request, RequestError

STARTS = 3
TRANSPORTS = ["inproc", "shm"]


def _data(rows: int, rank: int, k: int) -> np.ndarray:
    """Rank ``rank``'s input of ``rows`` rows (3 columns) at start ``k``."""
    return np.arange(rows * 3, dtype=np.int64).reshape(rows, 3) * (k + 2) + 100 * rank + 7 * k


def _offset(counts: list[int], j: int) -> int:
    return sum(counts[:j])


def _sends(p: int, r: int) -> list[int]:
    """The rows rank ``r`` sends each rank in the alltoallv case (uneven, some zero)."""
    return [(2 * r + j) % 3 for j in range(p)]


@dataclass(frozen=True)
class Case:
    """One collective's call: each rank's input, its arguments and the numpy reference."""

    #: (p, rank, k) -> this rank's input at start k (None: the rank passes none)
    x: Callable[[int, int, int], np.ndarray | None]
    #: (p, rank, x) -> positional arguments of the call
    args: Callable[[int, int, Any], tuple[Any, ...]]
    #: (p, rank, k) -> the result expected at start k (None where the call returns None)
    expect: Callable[[int, int, int], np.ndarray | None]


def _all(p: int, rows: Callable[[int], int], k: int) -> list[np.ndarray]:
    return [_data(rows(j), j, k) for j in range(p)]


def _v(p: int) -> list[int]:
    return [j + 1 for j in range(p)]


CASES: dict[str, Case] = {
    "barrier": Case(lambda p, r, k: None, lambda p, r, x: (), lambda p, r, k: None),
    "bcast": Case(lambda p, r, k: _data(2, r, k) if r == p - 1 else None,
                  lambda p, r, x: (x, p - 1), lambda p, r, k: _data(2, p - 1, k)),
    "scatter": Case(lambda p, r, k: _data(2 * p, r, k) if r == 0 else None,
                    lambda p, r, x: (x, 0), lambda p, r, k: _data(2 * p, 0, k)[2 * r: 2 * r + 2]),
    "scatterv": Case(lambda p, r, k: _data(sum(_v(p)), r, k) if r == 1 % p else None,
                     lambda p, r, x: (x, _v(p) if r == 1 % p else None, 1 % p),
                     lambda p, r, k: _data(sum(_v(p)), 1 % p, k)[
                         _offset(_v(p), r): _offset(_v(p), r) + r + 1]),
    "gather": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x, 0),
                   lambda p, r, k: np.concatenate(_all(p, lambda j: 2, k)) if r == 0 else None),
    "gatherv": Case(lambda p, r, k: _data(r + 1, r, k), lambda p, r, x: (x, p - 1),
                    lambda p, r, k: np.concatenate(_all(p, lambda j: j + 1, k))
                    if r == p - 1 else None),
    "allgather": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x,),
                      lambda p, r, k: np.concatenate(_all(p, lambda j: 2, k))),
    "allgatherv": Case(lambda p, r, k: _data(r + 1, r, k), lambda p, r, x: (x, _v(p)),
                       lambda p, r, k: np.concatenate(_all(p, lambda j: j + 1, k))),
    "alltoall": Case(lambda p, r, k: _data(2 * p, r, k), lambda p, r, x: (x,),
                     lambda p, r, k: np.concatenate([_data(2 * p, j, k)[2 * r: 2 * r + 2]
                                                     for j in range(p)])),
    "alltoallv": Case(lambda p, r, k: _data(sum(_sends(p, r)), r, k),
                      lambda p, r, x: (x, _sends(p, r)),
                      lambda p, r, k: np.concatenate([
                          _data(sum(_sends(p, j)), j, k)[
                              _offset(_sends(p, j), r): _offset(_sends(p, j), r)
                              + _sends(p, j)[r]] for j in range(p)])),
    "reduce": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x, "sum", 1 % p),
                   lambda p, r, k: sum(_all(p, lambda j: 2, k)) if r == 1 % p else None),
    "allreduce": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x, "sum"),
                      lambda p, r, k: sum(_all(p, lambda j: 2, k))),
    "reduce_scatter": Case(lambda p, r, k: _data(sum(_v(p)), r, k),
                           lambda p, r, x: (x, "sum", _v(p)),
                           lambda p, r, k: sum(_all(p, lambda j: sum(_v(p)), k))[
                               _offset(_v(p), r): _offset(_v(p), r) + r + 1]),
    "reduce_scatter_block": Case(lambda p, r, k: _data(2 * p, r, k), lambda p, r, x: (x, "max"),
                                 lambda p, r, k: np.max(_all(p, lambda j: 2 * p, k), axis=0)[
                                     2 * r: 2 * r + 2]),
    "scan": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x, "sum"),
                 lambda p, r, k: sum(_all(r + 1, lambda j: 2, k))),
    "exscan": Case(lambda p, r, k: _data(2, r, k), lambda p, r, x: (x, "sum"),
                   lambda p, r, k: sum(_all(r, lambda j: 2, k)) if r else None),
}


def test_every_collective_has_a_case():
    assert sorted(CASES) == sorted(collops.COLLECTIVES)


def _persistent_runs(comm: Comm, names: list[str]) -> dict[str, tuple[list[Any], bool]]:
    """Each collective's ``_init`` started `STARTS` times, its input changed in place between
    starts: the results (copied) and whether every start wrote the same result array."""
    p, r = comm.size, comm.rank
    runs = {}
    for name in names:
        case = CASES[name]
        first = case.x(p, r, 0)
        x = None if first is None else first.copy()
        req = getattr(comm, name + "_init")(*case.args(p, r, x))
        assert isinstance(req, PersistentRequest) and not req.active
        got, arrays = [], []
        for k in range(STARTS):
            if x is not None:
                x[...] = case.x(p, r, k)
            req.start()
            assert req.active
            value = req.wait()
            assert not req.active and req.done
            got.append(None if value is None else value.copy())
            if value is not None:
                arrays.append(value)
        req.free()
        same = all(np.shares_memory(a, arrays[0]) for a in arrays)
        runs[name] = (got, same)
    return runs


def _check_runs(per_rank: list[dict[str, tuple[list[Any], bool]]], names: list[str]) -> None:
    p = len(per_rank)
    for r, runs in enumerate(per_rank):
        for name in names:
            got, same = runs[name]
            assert same, f"{name}: rank {r}'s result array was not reused"
            for k, value in enumerate(got):
                expected = CASES[name].expect(p, r, k)
                if expected is None:
                    assert value is None, (name, r, k)
                else:
                    np.testing.assert_array_equal(value, expected, err_msg=f"{name} r{r} k{k}")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport,p", [("inproc", 2), ("inproc", 3), ("inproc", 4),
                                         ("shm", 2), ("shm", 3), ("shm", 4)])
def test_every_persistent_collective_runs_again_on_new_data(transport, p):
    names = sorted(CASES)
    per_rank = collops.spawn(_persistent_runs, p, names, transport=transport, timeout=180)
    _check_runs(per_rank, names)


def _mixed_forms(comm: Comm, names: list[str]) -> dict[str, list[Any]]:
    """Rank r makes each call in form r % 3: persistent, blocking, non-blocking."""
    p, r = comm.size, comm.rank
    form = r % 3
    runs = {}
    for name in names:
        case = CASES[name]
        first = case.x(p, r, 0)
        x = None if first is None else first.copy()
        req = getattr(comm, name + "_init")(*case.args(p, r, x)) if form == 0 else None
        got = []
        for k in range(STARTS):
            if x is not None:
                x[...] = case.x(p, r, k)
            if req is not None:
                req.start()
                value = req.wait()
            elif form == 1:
                value = getattr(comm, name)(*case.args(p, r, x))
            else:
                value = getattr(comm, "i" + name)(*case.args(p, r, x)).wait()
            got.append(None if value is None else np.array(value))
        runs[name] = got
    return runs


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_persistent_calls_match_blocking_and_nonblocking_calls_on_other_ranks(transport):
    names = sorted(CASES)
    per_rank = collops.spawn(_mixed_forms, 3, names, transport=transport, timeout=180)
    _check_runs([{n: (got, True) for n, got in runs.items()} for runs in per_rank], names)


def test_requests_in_flight_together_complete_in_any_order():
    def body(comm):
        x = np.zeros(4, np.int64)
        y = np.zeros(2, np.float64)
        sums = comm.allreduce_init(x, "sum")
        gathered = comm.allgather_init(y)
        seen = []
        for k in range(STARTS):
            x[...] = comm.rank + k
            y[...] = comm.rank * 10 + k
            collops.start_all([sums, gathered])
            assert gathered.wait() is not None  # in the other order than started
            seen.append((sums.wait().copy(), gathered.wait().copy()))
        return seen
    for seen in collops.spawn(body, 3, timeout=60):
        for k, (total, every) in enumerate(seen):
            np.testing.assert_array_equal(total, np.full(4, 3 + 3 * k))
            np.testing.assert_array_equal(every, np.repeat([k, 10 + k, 20 + k], 2))


def test_start_all_and_wait_all_over_several_rounds():
    def body(comm):
        xs = [np.zeros(3) for _ in range(3)]
        reqs = [comm.allreduce_init(xs[0], "max"), comm.bcast_init(xs[1], 1),
                comm.scan_init(xs[2], "sum")]
        rounds = []
        for k in range(STARTS):
            for i, x in enumerate(xs):
                x[...] = comm.rank * (i + 1) + k
            collops.start_all(reqs)
            rounds.append([v.copy() for v in collops.wait_all(reqs)])
        return rounds
    per_rank = collops.spawn(body, 3, timeout=60)
    for r, rounds in enumerate(per_rank):
        for k, (top, sent, prefix) in enumerate(rounds):
            np.testing.assert_array_equal(top, np.full(3, 2 + k))
            np.testing.assert_array_equal(sent, np.full(3, 2 + k))
            np.testing.assert_array_equal(prefix, np.full(3, sum(3 * j + k for j in range(r + 1))))


def test_start_all_starts_none_when_one_is_active():
    def body(comm):
        a = comm.allreduce_init(np.ones(2), "sum")
        b = comm.allreduce_init(np.ones(2), "sum")
        b.start()
        with pytest.raises(RequestError):
            collops.start_all([a, b])
        started_a = a.active
        value = b.wait()
        return started_a, value
    for started_a, value in collops.spawn(body, 2, timeout=60):
        assert not started_a
        np.testing.assert_array_equal(value, [2, 2])


def test_request_state_errors():
    def body(comm):
        req = comm.allreduce_init(np.ones(2), "sum")
        # never started: inactive, complete at once
        assert not req.active and req.done and req.test()
        assert req.wait() is None
        req.start()
        with pytest.raises(RequestError) as active:
            req.start()
        value = req.wait().copy()
        assert req.wait() is not None  # inactive again: the last value, at once
        req.free()
        with pytest.raises(RequestError) as freed:
            req.start()
        for use in (req.wait, req.test, req.free):
            with pytest.raises(RequestError):
                use()
        return str(active.value), str(freed.value), value
    for r, (active, freed, value) in enumerate(collops.spawn(body, 2, timeout=60)):
        assert "allreduce_init" in active and f"rank {r}" in active and "active" in active
        assert "allreduce_init" in freed and "freed" in freed
        np.testing.assert_array_equal(value, [2, 2])


def test_free_of_an_active_request_completes_it_first():
    def body(comm):
        req = comm.allgather_init(np.array([comm.rank]))
        req.start()
        req.free()
        return comm.allreduce(np.array([comm.rank]), "sum")[0]
    assert collops.spawn(body, 3, timeout=60) == [3, 3, 3]


BAD_INITS = {
    "unknown op": (lambda c: c.allreduce_init(np.ones(3), "frobnicate"), "op"),
    "op undefined for dtype": (lambda c: c.allreduce_init(np.ones(3), "band"), "op"),
    "root out of range": (lambda c: c.bcast_init(np.ones(2), root=7), "root"),
    "out shape": (lambda c: c.allgather_init(np.ones(3), out=np.empty(2)), "out"),
    "out dtype": (lambda c: c.reduce_init(np.ones(3), out=np.empty(3, np.float32)), "out"),
    "counts": (lambda c: c.reduce_scatter_init(np.ones(4), "sum", [1, 1]), "counts"),
    "sendcounts": (lambda c: c.alltoallv_init(np.ones(4), [-1, 5]), "sendcounts"),
    "not divisible": (lambda c: c.alltoall_init(np.ones(3)), "x"),
    "scatterv counts at the root": (lambda c: c.scatterv_init(np.ones(4), root=c.rank), "counts"),
    "scatter out": (lambda c: c.scatter_init(np.ones(4), root=c.rank, out=np.empty(3)), "out"),
}


@pytest.mark.parametrize("name", list(BAD_INITS))
def test_init_raises_what_the_blocking_call_raises_without_taking_part(name):
    make, argument = BAD_INITS[name]

    def body(comm):
        # only rank 0 makes the bad call: had it taken a sequence number or sent anything, the
        # allreduce after would not match the other rank's
        error = None
        if comm.rank == 0:
            with pytest.raises(ArgumentError) as info:
                make(comm)
            error = (info.value.argument, info.value.call)
        return error, comm.allreduce(np.array([1]), "sum")[0]
    (error, ok0), (_, ok1) = collops.spawn(body, 2, timeout=60)
    assert error is not None and error[0] == argument
    assert not error[1].startswith("i")
    assert ok0 == ok1 == 2


def test_out_given_at_init_receives_every_start():
    def body(comm):
        x = np.zeros(3)
        out = np.empty(3)
        req = comm.allreduce_init(x, "sum", out=out)
        seen = []
        for k in range(STARTS):
            x[...] = k + comm.rank
            req.start()
            value = req.wait()
            seen.append((np.shares_memory(value, out), out.copy()))
        return seen
    for seen in collops.spawn(body, 2, timeout=60):
        for k, (shared, out) in enumerate(seen):
            assert shared
            np.testing.assert_array_equal(out, np.full(3, 2 * k + 1))


def test_wait_any_and_test_all():
    def body(comm):
        late = comm.ibcast(np.arange(3) if comm.rank == 0 else None)
        reqs = [comm.iallreduce(np.array([comm.rank]), "sum"), late]
        first, value = collops.wait_any(reqs)
        while not collops.test_all(reqs):
            pass
        values = collops.wait_all(reqs)
        idle = comm.allreduce_init(np.ones(1), "sum")
        with pytest.raises(ArgumentError):
            collops.wait_any([idle])  # an inactive persistent request is skipped
        idle.start()
        index, total = collops.wait_any([idle])
        return first, value, values, index, total
    for first, value, values, index, total in collops.spawn(body, 2, timeout=60):
        np.testing.assert_array_equal(values[0], [1])
        np.testing.assert_array_equal(values[1], np.arange(3))
        np.testing.assert_array_equal(value, values[first])
        assert index == 0 and total[0] == 2


@pytest.mark.parametrize("name", collops.COLLECTIVES)
def test_generated_forms_have_the_blocking_signature(name):
    blocking = inspect.signature(getattr(Comm, name))
    for method, returns in (("i" + name, "Request"), (name + "_init", "PersistentRequest")):
        fn = getattr(Comm, method)
        generated = inspect.signature(fn)
        assert list(generated.parameters.values()) == list(blocking.parameters.values())
        assert generated.return_annotation == returns
        assert fn.__name__ == method and fn.__qualname__ == f"Comm.{method}"
        assert fn.__doc__ and "\n" not in fn.__doc__.strip()
        assert f"`{name}`" in fn.__doc__


def test_nonblocking_scatterv_checks_counts_at_the_root_before_sending():
    def body(comm):
        if comm.rank == 1:
            with pytest.raises(ArgumentError) as info:
                comm.iscatterv(np.ones(4), root=1)
            assert info.value.call == "iscatterv" and info.value.argument == "counts"
        req = comm.iallreduce(np.array([2]), "sum")
        assert isinstance(req, Request)
        return req.wait()[0]
    assert collops.spawn(body, 2, timeout=60) == [4, 4]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_init_alone_sends_nothing(transport):
    def body(comm):
        if comm.rank == 0:  # made and freed on one rank only, never started
            for name in ("allreduce", "bcast", "alltoallv"):
                case = CASES[name]
                x = case.x(comm.size, comm.rank, 0)
                getattr(comm, name + "_init")(*case.args(comm.size, comm.rank, x)).free()
        return comm.allreduce(np.array([comm.rank + 1]), "sum", timeout=20)[0]
    assert collops.spawn(body, 2, transport=transport, timeout=60) == [3, 3]
