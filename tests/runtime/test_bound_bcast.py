"""The bound broadcast: a whole small blocking bcast run by the compiled direct runner.

Once a rank has broadcast (or received from a root) an array of some dtype and shape through
the envelope's fast path, `Comm.bcast` hands the next calls of that signature to
``Runner.bcast`` (``_direct.c``), which checks the arrays, takes the call number and moves
header and data without the interpreter. Everything unusual must still come out right:
a root changing signature under bound non-roots, odd ``out`` buffers, late and missing
peers, a peer calling something else, calls in flight, settings changes. Results are
checked against numpy on the same inputs; timings decide nothing.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import collops
from collops.errors import ArgumentError, CollectiveTimeout

#: tests of the compiled route: it is on for them whatever the environment says
pytestmark = pytest.mark.usefixtures("compiled_on")

# test_direct_compiled.py fails when the extension is not built, so this is never silent
_direct = pytest.importorskip("collops.shm._direct")

#: (dtype, shape) signatures a root goes through, each repeated, some twice in a row
SIGNATURES = [(np.float64, (1,)), (np.float64, (1,)), (np.int32, (3, 2)), (np.float64, (1,)),
              (np.complex64, (4,)), (np.complex64, (4,)), (np.uint8, (1000,)),
              (np.float64, (1,)), (np.int8, ()), (np.int8, ())]


def _values(dtype, shape, seed):
    n = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(n) * 3 + seed) % 97).astype(dtype).reshape(shape)


def _counting_fast(comm):
    """Count the bcasts that reach `Comm._through_envelope` (the bound path does not)."""
    count = [0]
    fast = comm._through_envelope

    def counted(call, *args):
        count[0] += call == "bcast"
        return fast(call, *args)

    comm._through_envelope = counted
    return count


def _signatures(comm, root, out_mode):
    me = comm.rank
    reached = _counting_fast(comm)
    got = []
    results = []
    for i, (dtype, shape) in enumerate(SIGNATURES):
        for rep in range(3):
            data = _values(dtype, shape, 10 * i + rep)
            comm.barrier()  # the root's slot is free again: no hand-over for a busy one
            before = reached[0]
            if me == root:
                x = data.copy()
                out = {"in place": x, "none": None, "other": np.empty_like(x)}[out_mode]
                r = comm.bcast(x, root, out=out)
                if out is not None:
                    assert r is out or np.shares_memory(r, out)
                else:
                    assert not np.shares_memory(r, x)
            else:
                out = None if out_mode == "none" else np.empty(shape, data.dtype)
                r = comm.bcast(None, root, out=out)
                if out is not None:
                    assert r is out or r.size == 0 or np.shares_memory(r, out)
            results.append(r)
            got.append((i, rep, r.dtype.str, r.shape, r.tolist(), reached[0] - before,
                        comm.last_algorithm))
    # every result is an array of its own: later calls never wrote into earlier results
    for k, r in enumerate(results):
        i, rep = divmod(k, 3)
        dtype, shape = SIGNATURES[i]
        assert np.array_equal(r, _values(dtype, shape, 10 * i + rep)), (k, r)
    return got


@pytest.mark.timeout(90)
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("out_mode", ["in place", "none", "other"])
def test_bound_bcast_matches_numpy_through_every_change_of_signature(p, out_mode):
    for root in (0, p - 1):
        per_rank = collops.spawn(_signatures, p, root, out_mode, transport="shm", timeout=80)
        for me, got in enumerate(per_rank):
            for i, rep, dtype_str, shape, values, reached, algorithm in got:
                dtype, want_shape = SIGNATURES[i]
                want = _values(dtype, want_shape, 10 * i + rep)
                assert (dtype_str, shape, values) == (want.dtype.str, want.shape,
                                                      want.tolist()), (me, i, rep)
                assert algorithm == "shm_direct"
                if rep == 2 or (rep == 1 and i > 0):
                    # a signature's first call binds it (after the template's first call)
                    assert reached == 0, f"rank {me}, signature {i}: not the bound path"


def _odd_outs(comm):
    x = np.arange(6.0)
    me = comm.rank
    for _ in range(3):  # bind
        comm.bcast(x if me == 0 else None, 0, out=np.empty(6) if me else x)
    got = []
    # a non-root's out of another shape, not contiguous, of another dtype: the general path
    # takes the first (the result has the root's shape, in out's memory) and names the others
    outs = [np.empty((2, 3)), np.empty(12)[::2], np.empty(6, np.float32)]
    for out in outs:
        try:
            r = comm.bcast(x if me == 0 else None, 0, out=x if me == 0 else out)
            got.append(("ok", r.shape, r.tolist(), me == 0 or np.shares_memory(r, out)))
        except ArgumentError as exc:
            got.append(("error", str(exc)))
    # an overlapping out at the root: the general path copies
    y = np.arange(12.0)
    r = comm.bcast(y[:6] if me == 0 else None, 0, out=y[3:9] if me == 0 else None)
    got.append(("overlap", r.tolist()))
    return got


@pytest.mark.timeout(60)
def test_odd_out_buffers_leave_the_bound_path_and_come_out_right():
    root, other = collops.spawn(_odd_outs, 2, transport="shm", timeout=50)
    x = np.arange(6.0).tolist()
    assert root[:3] == [("ok", (6,), x, True)] * 3
    assert other[0] == ("ok", (6,), x, True)
    assert other[1][0] == "error" and "out=" in other[1][1] and "rank 1" in other[1][1]
    assert other[2][0] == "error" and "float32" in other[2][1] and "rank 1" in other[2][1]
    assert root[3] == other[3] == ("overlap", x)


def _late_root(comm, delay):
    x = np.arange(4.0)
    got = []
    for i in range(6):
        if comm.rank == 0 and i >= 3:
            time.sleep(delay)  # the bound non-root's spin runs out: Python waits for it
        got.append(comm.bcast(x + i if comm.rank == 0 else None, 0).tolist())
    return got


@pytest.mark.timeout(60)
def test_a_late_root_is_waited_for_on_the_bound_path():
    for got in collops.spawn(_late_root, 3, 0.05, transport="shm", timeout=50):
        assert got == [(np.arange(4.0) + i).tolist() for i in range(6)]


def _late_root_new_signature(comm):
    got = []
    for i in range(4):
        x = np.arange(4.0) if i < 3 else np.arange(5, dtype=np.int16)
        if comm.rank == 0 and i == 3:
            time.sleep(0.05)
        got.append(comm.bcast(x if comm.rank == 0 else None, 0))
    return [(g.dtype.str, g.tolist()) for g in got]


@pytest.mark.timeout(60)
def test_a_late_root_with_another_signature_reaches_the_bound_non_roots():
    for got in collops.spawn(_late_root_new_signature, 2, transport="shm", timeout=50):
        assert got[-1] == (np.dtype(np.int16).str, list(range(5)))


def _missing_root(comm):
    x = np.arange(3.0)
    for _ in range(3):
        comm.bcast(x if comm.rank == 0 else None, 0)
    if comm.rank == 0:
        time.sleep(1.0)  # never calls the fourth broadcast, but is alive meanwhile
        return "root"
    start = time.monotonic()
    try:
        comm.bcast(None, 0, timeout=0.3)
    except CollectiveTimeout as exc:
        return str(exc), time.monotonic() - start
    return "no error"


@pytest.mark.timeout(60)
def test_a_bound_non_root_times_out_naming_the_root():
    _, (text, seconds) = collops.spawn(_missing_root, 2, transport="shm", timeout=50)
    assert "bcast" in text and "[0]" in text and seconds < 0.9


def _other_call(comm):
    x = np.arange(2.0)
    for _ in range(3):
        comm.bcast(x if comm.rank == 0 else None, 0)
    try:
        if comm.rank == 0:
            comm.allreduce(x)
        else:
            comm.bcast(None, 0)
    except collops.CollopsError as exc:
        return type(exc).__name__, str(exc)
    return "no error"


@pytest.mark.timeout(60)
def test_a_bound_non_root_whose_root_calls_something_else_raises_a_mismatch():
    root, other = collops.spawn(_other_call, 2, transport="shm", timeout=50)
    assert other[0] == "CollectiveMismatch", other
    assert "bcast" in other[1] and "allreduce" in other[1] and "rank 0" in other[1], other
    # the root waits for an allreduce contribution that never comes, then sees rank 1 leave
    assert root[0] in ("CollectiveMismatch", "PeerFailed"), root


def _in_flight(comm):
    x = np.arange(3.0)
    me = comm.rank
    got = []
    for i in range(4):
        req = comm.iallreduce(np.full(2, float(me + i)))
        got.append(comm.bcast(x + i if me == 0 else None, 0).tolist())
        got.append(req.wait().tolist())
    return got


@pytest.mark.timeout(60)
def test_a_non_blocking_call_in_flight_keeps_the_order_of_calls():
    for got in collops.spawn(_in_flight, 2, transport="shm", timeout=50):
        for i in range(4):
            assert got[2 * i] == (np.arange(3.0) + i).tolist()
            assert got[2 * i + 1] == [float(1 + 2 * i)] * 2


def _set_algorithm(comm):
    x = np.arange(3.0)
    got = [comm.bcast(x if comm.rank == 0 else None, 0).tolist() for _ in range(3)]
    comm.set_algorithm("bcast", "binomial")
    got += [comm.bcast(x if comm.rank == 0 else None, 0).tolist() for _ in range(2)]
    return got, comm.last_algorithm, "bcast" not in comm.bound_calls()


@pytest.mark.timeout(60)
def test_setting_an_algorithm_unbinds_the_broadcast():
    for got, algorithm, unbound in collops.spawn(_set_algorithm, 2, transport="shm",
                                                 timeout=50):
        assert got == [[0.0, 1.0, 2.0]] * 5
        assert algorithm == "binomial" and unbound


# -- scatter: the same binding, the root writing one block per rank -----------------------------
#: (dtype, rows per rank, trailing shape) a root goes through
SCATTER_SIGNATURES = [(np.float64, 1, ()), (np.float64, 1, ()), (np.int16, 2, (3,)),
                      (np.float64, 1, ()), (np.complex64, 3, ()), (np.uint8, 5, (7,))]


def _scatters(comm, root, with_out):
    p, me = comm.size, comm.rank
    got, results = [], []
    for i, (dtype, rows, trailing) in enumerate(SCATTER_SIGNATURES):
        for rep in range(4):
            whole = _values(dtype, (p * rows, *trailing), 10 * i + rep)
            out = np.empty((rows, *trailing), whole.dtype) if with_out else None
            comm.barrier()
            before = len(comm.prepared_calls())
            r = comm.scatter(whole if me == root else None, root, out=out)
            bound = (len(comm.prepared_calls()) == before
                     and comm.bound_calls().get("scatter") == "shm_direct")
            if out is not None:
                assert np.shares_memory(r, out)
            results.append(r)
            got.append((i, rep, r.dtype.str, r.shape, r.tolist(), bound))
    if not with_out:
        assert all(not np.shares_memory(a, b) for k, a in enumerate(results)
                   for b in results[k + 1:])
    return got


@pytest.mark.timeout(90)
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("with_out", [False, True])
def test_bound_scatter_matches_numpy_through_every_change_of_signature(p, with_out):
    for root in (0, p - 1):
        per_rank = collops.spawn(_scatters, p, root, with_out, transport="shm", timeout=80)
        for me, got in enumerate(per_rank):
            for i, rep, dtype_str, shape, values, bound in got:
                dtype, rows, trailing = SCATTER_SIGNATURES[i]
                whole = _values(dtype, (p * rows, *trailing), 10 * i + rep)
                want = whole[me * rows: (me + 1) * rows]
                assert (dtype_str, shape, values) == (want.dtype.str, want.shape,
                                                      want.tolist()), (me, i, rep)
                if rep >= 2 and i > 0:  # a signature's first call binds it
                    assert bound, f"rank {me}, signature {i}, call {rep}: not bound"
