"""Bound calls: whole single-phase direct calls run by the compiled runner (``Runner.call``).

After `Comm._fast` has run a signature through a compiled runner, the next calls of that
collective, operator and root go to ``Runner.call`` first, which checks the arrays against
the bound signature and runs the call without the interpreter, or hands it back before
taking a call number. These tests check results against numpy on the same inputs, that the
bound path is the one repeated calls take, and that everything unusual still comes out right.
Timings decide nothing.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import collops
from tests.support.runners import compiled_runners

#: tests of the compiled route: it is on for them whatever the environment says
pytestmark = pytest.mark.usefixtures("compiled_on")

_direct = pytest.importorskip("collops.shm._direct")  # test_direct_compiled fails if absent


def _x(me, shape, dtype, salt):
    n = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(n) * 5 + 11 * me + salt) % 31).astype(dtype).reshape(shape)


#: (collective, op, root, per-rank shape as a function of p, dtype)
CASES = [
    ("allreduce", "sum", 0, lambda p: (2, 3), np.float64),
    ("allreduce", "max", 0, lambda p: (5,), np.int32),
    ("allgather", None, 0, lambda p: (3, 2), np.float32),
    ("alltoall", None, 0, lambda p: (2 * p,), np.int64),
    ("reduce", "sum", 1, lambda p: (4,), np.float64),
    ("gather", None, 0, lambda p: (2,), np.uint8),
    ("reduce_scatter_block", "sum", 0, lambda p: (p, 2), np.int16),
    ("scan", "sum", 0, lambda p: (3,), np.float64),
    ("exscan", "prod", 0, lambda p: (3,), np.int64),
    ("barrier", None, 0, lambda p: (0,), np.uint8),
]


def _call(comm, collective, x, op, root, out):
    if collective == "barrier":
        return comm.barrier()
    if collective in ("allreduce", "reduce_scatter_block", "scan", "exscan"):
        return getattr(comm, collective)(x, op, out=out)
    if collective == "reduce":
        return comm.reduce(x, op, root, out=out)
    if collective == "gather":
        return comm.gather(x, root, out=out)
    return getattr(comm, collective)(x, out=out)


def _want(collective, xs, op, root, me):
    p = len(xs)
    fold = {"sum": np.add, "max": np.maximum, "prod": np.multiply}.get(op)

    class ufunc:  # numpy's fold, in the inputs' dtype (numpy widens small integers' sums)
        @staticmethod
        def reduce(stacked):
            return fold.reduce(stacked, dtype=stacked.dtype)

    if collective == "barrier":
        return None
    if collective == "allreduce":
        return ufunc.reduce(np.stack(xs))
    if collective == "reduce":
        return ufunc.reduce(np.stack(xs)) if me == root else None
    if collective in ("allgather", "gather"):
        whole = np.concatenate(xs)
        return whole if collective == "allgather" or me == root else None
    if collective == "alltoall":
        return np.concatenate([np.split(x, p)[me] for x in xs])
    if collective == "reduce_scatter_block":
        return np.split(ufunc.reduce(np.stack(xs)), p)[me]
    if collective == "scan":
        return ufunc.reduce(np.stack(xs[: me + 1]))
    return None if me == 0 else ufunc.reduce(np.stack(xs[:me]))  # exscan


def _out_for(collective, x, p, me, root):
    if collective == "barrier" or (collective in ("reduce", "gather") and me != root):
        return None
    if collective in ("allgather", "gather"):
        return np.empty((p * x.shape[0], *x.shape[1:]), x.dtype)
    if collective == "reduce_scatter_block":
        return np.empty((x.shape[0] // p, *x.shape[1:]), x.dtype)
    return np.empty_like(x)


def _all_cases(comm, with_out):
    p, me = comm.size, comm.rank
    got = []
    for c, (collective, op, root, shape, dtype) in enumerate(CASES):
        results = []
        for rep in range(6):
            x = _x(me, shape(p), dtype, 7 * c + rep)
            out = _out_for(collective, x, p, me, root) if with_out else None
            comm.barrier()
            before = len(comm.prepared_calls())
            r = _call(comm, collective, x, op, root, out)
            grew = len(comm.prepared_calls()) - before
            bound = comm.bound_calls().get(collective)
            if out is not None and r is not None:
                assert np.shares_memory(r, out) or r.size == 0, (collective, rep)
            results.append(r)
            got.append((c, rep, None if r is None else (r.dtype.str, r.shape, r.tolist()),
                        (grew, bound), comm.last_algorithm,
                        out is None or r is None or r is out))
        fresh = [r for r in results if r is not None]
        assert all(not np.shares_memory(a, b) for i, a in enumerate(fresh)
                   for b in fresh[i + 1:]) or with_out, collective
    return got


@pytest.mark.timeout(120)
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("with_out", [False, True])
def test_bound_calls_match_numpy_and_repeats_take_the_bound_path(p, with_out):
    per_rank = collops.spawn(_all_cases, p, with_out, transport="shm", timeout=100)
    for me, got in enumerate(per_rank):
        for c, rep, result, (grew, bound), algorithm, into_out in got:
            collective, op, root, shape, dtype = CASES[c]
            xs = [_x(r, shape(p), dtype, 7 * c + rep) for r in range(p)]
            want = _want(collective, xs, op, root, me)
            if want is None:
                assert result is None, (collective, me)
            else:
                assert result == (want.dtype.str, want.shape, want.tolist()), (collective, me)
            assert algorithm == "shm_direct"
            none_here = collective == "exscan" and me == 0
            # the template is made, its algorithm prepared, its runner made, the signature
            # bound: from the fifth call on, the bound path, preparing nothing new
            if rep >= 4 and not none_here:
                assert bound == "shm_direct" and grew == 0, \
                    f"{collective} on rank {me}, call {rep}: not bound"
                assert into_out, "a bound call returns the out it was given"


def _alternating(comm):
    me = comm.rank
    got = []
    for i in range(8):
        x = np.full((2, 2) if i % 2 else (3,), float(me + i))
        got.append(comm.allreduce(x).tolist())
    return got


@pytest.mark.timeout(60)
def test_two_signatures_in_turn_stay_right():
    for got in collops.spawn(_alternating, 2, transport="shm", timeout=50):
        assert got == [np.full((2, 2) if i % 2 else (3,), float(1 + 2 * i)).tolist()
                       for i in range(8)]


def _late_peer(comm):
    got = []
    for i in range(6):
        if comm.rank == 1 and i >= 4:
            time.sleep(0.05)  # the bound call's spin and yield run out: Python waits
        x = np.arange(6.0).reshape(2, 3) * (comm.rank + 1) + i
        got.append(comm.allreduce(x).tolist())
        got.append(comm.allgather(x[:1]).tolist())
    return got


@pytest.mark.timeout(60)
def test_a_late_peer_is_waited_for_with_multidimensional_arrays():
    for got in collops.spawn(_late_peer, 2, transport="shm", timeout=50):
        for i in range(6):
            xs = [np.arange(6.0).reshape(2, 3) * (r + 1) + i for r in range(2)]
            assert got[2 * i] == (xs[0] + xs[1]).tolist()
            assert got[2 * i + 1] == np.concatenate([x[:1] for x in xs]).tolist()


def _odd(comm):
    me = comm.rank
    x = np.arange(4.0) + me
    for _ in range(4):
        comm.allreduce(x)
    got = []
    y = np.arange(8.0) + me
    got.append(comm.allreduce(y[:4], out=y[2:6]).tolist())  # overlapping out
    got.append(comm.allreduce(x, out=np.empty((2, 2))).tolist())  # another shape of out
    req = comm.iallgather(x)  # a call in flight
    got.append(comm.allreduce(x).tolist())
    got.append(req.wait().tolist())
    got.append(comm.allreduce(x.astype(np.float32)).tolist())  # another dtype
    return got


@pytest.mark.timeout(60)
def test_odd_arrays_and_calls_in_flight_leave_the_bound_path_and_come_out_right():
    for got in collops.spawn(_odd, 2, transport="shm", timeout=50):
        x0, x1 = np.arange(4.0), np.arange(4.0) + 1
        assert got[0] == (x0 + x1).tolist()
        assert got[1] == (x0 + x1).tolist()  # the shape of x, in the memory of out
        assert got[2] == (x0 + x1).tolist()
        assert got[3] == np.concatenate([x0, x1]).tolist()
        assert got[4] == (x0 + x1).tolist()


def _other_call(comm):
    x = np.arange(2.0)
    for _ in range(4):
        comm.allreduce(x)
    try:
        if comm.rank == 0:
            comm.allreduce(x)
        else:
            comm.allgather(x[:1])
    except collops.CollopsError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


@pytest.mark.timeout(60)
def test_a_bound_call_against_another_collective_is_a_mismatch():
    texts = collops.spawn(_other_call, 2, transport="shm", timeout=50)
    mismatches = [t for kind, t in texts if kind == "CollectiveMismatch"]
    assert mismatches and all("allreduce" in t and "allgather" in t for t in mismatches), texts


def _unset(comm):
    x = np.arange(3.0)
    got = [comm.allreduce(x).tolist() for _ in range(4)]
    bound = "allreduce" in comm.bound_calls()
    comm.set_algorithm("allreduce", "ring")
    got += [comm.allreduce(x).tolist() for _ in range(2)]
    return got, bound, comm.bound_calls() == {}, comm.last_algorithm


@pytest.mark.timeout(60)
def test_setting_an_algorithm_unbinds_the_calls():
    for got, bound, unbound, algorithm in collops.spawn(_unset, 2, transport="shm", timeout=50):
        assert got == [[0.0, 2.0, 4.0]] * 6
        assert bound and unbound and algorithm == "ring"


def _named(comm):
    """Repeated calls asking for an algorithm by name, beside automatic ones."""
    me, p = comm.rank, comm.size
    got, kinds = [], []
    for i in range(4):
        x = _x(me, (3,), np.float64, i)
        everyone = [_x(r, (3,), np.float64, i) for r in range(p)]
        got.append(np.array_equal(comm.allreduce(x, algorithm="shm_direct"), sum(everyone)))
        got.append(np.array_equal(comm.allreduce(x), sum(everyone)))
        got.append(np.array_equal(comm.bcast(x if me == 0 else None, 0, algorithm="shm_direct"),
                                  everyone[0]))
        kinds.append(comm.bound_route("allreduce", "shm_direct") == "compiled")
    listed = comm.bound_calls()
    comm.set_algorithm("allreduce", "ring")
    cleared = comm.bound_route("allreduce", "shm_direct") is None
    return got, kinds, listed, cleared


@pytest.mark.timeout(60)
def test_calls_asking_for_an_algorithm_by_name_bind_their_own_runner():
    # before: a call naming its algorithm never took the bound route (the brief's bench,
    # ``collops bench --algorithm``, measured the general route); now it binds under
    # (collective, algorithm), beside the automatic binding, unlisted, unbound by settings
    for got, kinds, listed, cleared in collops.spawn(_named, 2, transport="shm", timeout=50):
        assert all(got), got
        assert kinds[1:] == [True] * 3, kinds  # bound from the second call on
        assert listed.get("allreduce") == "shm_direct" and all(
            type(c) is str for c in listed), listed
        assert cleared


def _routes(comm):
    """The bound route of an allreduce before and after repeated calls, and of a name it never
    asked for."""
    x = np.ones(3)
    before = comm.bound_route("allreduce")
    for _ in range(5):
        comm.allreduce(x)
    return before, comm.bound_route("allreduce"), comm.bound_route("allreduce", "ring")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("compiled", [True, False])
def test_the_bound_route_says_whether_repeated_calls_run_compiled(compiled):
    with compiled_runners(compiled):
        routes = collops.spawn(_routes, 2, transport="shm", timeout=50)
    assert routes == [(None, "compiled" if compiled else None, None)] * 2
