"""Broadcasts whose data does not fit the envelope: after a first general call, both the
envelope and the data phase run from prepared runners (``shm_direct`` up to a slot, the
schedule's plan above). Results against numpy; errors as the general path gives them."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import ArgumentError
from tests.support.runners import compiled_runners


def _bcasts(comm, n, dtype, how):
    got = []
    general = []
    start, data_phase = comm._start, comm._data_phase
    comm._start = lambda *a, **k: (general.append("start"), start(*a, **k))[1]
    comm._data_phase = lambda *a, **k: (general.append("data"), data_phase(*a, **k))[1]
    for i in range(4):  # the first call prepares, the next ones take the fast path
        x = (np.arange(n) * (i + 1)).astype(dtype).reshape(-1, 2)
        if comm.rank == 0:
            if how == "in place":
                y = x.copy()
                r = comm.bcast(y, 0, out=y)
                assert r.__array_interface__["data"][0] == y.__array_interface__["data"][0]
            elif how == "out":
                r = comm.bcast(x, 0, out=np.empty(x.shape, dtype))
            else:
                r = comm.bcast(x, 0)
        else:
            if how == "none":
                r = comm.bcast(None, 0)
            else:
                r = comm.bcast(None, 0, out=np.empty(n, dtype))  # flat out: reshaped
        got.append((r.shape, r.dtype.str, r.copy(), comm.last_algorithm, len(general)))
    return got


@pytest.mark.timeout(90)
@pytest.mark.parametrize("n", [20_000, 200_000])
@pytest.mark.parametrize("dtype", ["f8", "i4", "c16"])
@pytest.mark.parametrize("how", ["in place", "out", "none"])
def test_large_bcast_matches_numpy_on_every_path(n, dtype, how):
    p = 3
    per_rank = collops.spawn(_bcasts, p, n, dtype, how, transport="shm", timeout=80)
    for i in range(4):
        expected = (np.arange(n) * (i + 1)).astype(dtype).reshape(-1, 2)
        for rank in range(p):
            shape, dt, values, _, general = per_rank[rank][i]
            if i >= 2:  # prepared by now: no general call any more
                assert general == per_rank[rank][1][4], (rank, i, general)
            if rank == 0 or how == "none":
                assert shape == expected.shape
            assert dt == np.dtype(dtype).str
            assert np.array_equal(values.reshape(-1), expected.reshape(-1))
    algorithms = {per_rank[r][i][3] for r in range(p) for i in range(1, 4)}
    assert len(algorithms) == 1, algorithms


#: wrong ``out`` arguments of a non-root: too small, not a buffer at all, another dtype
WRONG_OUTS = {"small": lambda: np.empty(10), "list": lambda: [1, 2, 3],
              "dtype": lambda: np.empty(40_000, np.float32)}


def _wrong_out(comm, kind, blocking):
    x = np.arange(40_000.0)
    comm.bcast(x if comm.rank == 0 else None, 0)  # prepares
    try:
        if comm.rank == 1:
            out = WRONG_OUTS[kind]()
            if blocking:
                comm.bcast(None, 0, out=out, timeout=20)
            else:
                comm.ibcast(None, 0, out=out, timeout=20).wait()
        else:
            comm.bcast(x if comm.rank == 0 else None, 0, timeout=20)
        error = None
    except ArgumentError as exc:
        error = str(exc)
    after = comm.allreduce(np.array([1.0]))  # the calls still match afterwards
    return error, after.tolist()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(WRONG_OUTS))
@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_a_wrong_out_on_a_non_root_is_named_and_the_calls_still_match(kind, blocking):
    per_rank = collops.spawn(_wrong_out, 3, kind, blocking, transport="shm", timeout=50)
    assert per_rank[0][0] is None and per_rank[2][0] is None, per_rank
    assert per_rank[1][0] is not None and "out" in per_rank[1][0], per_rank
    assert all(after == [3.0] for _, after in per_rank)


def _scatters(comm, rows, dtype, how):
    p, got, general = comm.size, [], []
    start, data_phase = comm._start, comm._data_phase
    comm._start = lambda *a, **k: (general.append("start"), start(*a, **k))[1]
    comm._data_phase = lambda *a, **k: (general.append("data"), data_phase(*a, **k))[1]
    for i in range(4):
        x = (np.arange(p * rows * 3) * (i + 1)).astype(dtype).reshape(p * rows, 3)
        if comm.rank == 0:
            if how == "in place":
                y = x.copy()
                r = comm.scatter(y, 0, out=y[: rows])
            elif how == "out":
                r = comm.scatter(x, 0, out=np.empty((rows, 3), dtype))
            else:
                r = comm.scatter(x, 0)
        elif how == "none":
            r = comm.scatter(None, 0)
        else:
            r = comm.scatter(None, 0, out=np.empty(rows * 3, dtype))
        got.append((r.copy(), r.dtype.str, len(general)))
    return got


@pytest.mark.timeout(90)
@pytest.mark.parametrize("rows", [3_000, 50_000])
@pytest.mark.parametrize("dtype", ["f8", "u2"])
@pytest.mark.parametrize("how", ["in place", "out", "none"])
def test_large_scatter_matches_numpy_on_every_path(rows, dtype, how):
    p = 3
    per_rank = collops.spawn(_scatters, p, rows, dtype, how, transport="shm", timeout=80)
    for i in range(4):
        x = (np.arange(p * rows * 3) * (i + 1)).astype(dtype).reshape(p * rows, 3)
        for rank in range(p):
            values, dt, general = per_rank[rank][i]
            assert dt == np.dtype(dtype).str
            expected = x[rank * rows: (rank + 1) * rows]
            assert np.array_equal(values.reshape(-1), expected.reshape(-1))
            if i >= 2:
                assert general == per_rank[rank][1][2], (rank, i, general)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("call", ["bcast", "scatter"])
def test_the_python_runner_takes_the_same_data_phase(call):
    """With ``COLLOPS_COMPILED=0`` the data phase runs from the Python runner, same results."""
    with compiled_runners(False):
        if call == "bcast":
            per_rank = collops.spawn(_bcasts, 2, 20_000, "f8", "out", transport="shm",
                                     timeout=80)
        else:
            per_rank = collops.spawn(_scatters, 2, 3_000, "f8", "out", transport="shm",
                                     timeout=80)
    for i in range(4):
        for rank in range(2):
            values = per_rank[rank][i][2 if call == "bcast" else 0]
            if call == "bcast":
                expected = (np.arange(20_000) * (i + 1)).astype("f8")
            else:
                x = (np.arange(2 * 3_000 * 3) * (i + 1)).astype("f8").reshape(6_000, 3)
                expected = x[rank * 3_000: (rank + 1) * 3_000]
            assert np.array_equal(values.reshape(-1), expected.reshape(-1))
            general = per_rank[rank][i][4 if call == "bcast" else 2]
            if i >= 2:
                assert general == per_rank[rank][1][4 if call == "bcast" else 2]
