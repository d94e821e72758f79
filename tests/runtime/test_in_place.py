"""A root that broadcasts in place (``out`` is its ``x``), as MPI_Bcast's root does."""

from __future__ import annotations

import numpy as np
import pytest

import collops


def _in_place(comm, algorithm, n):
    x = np.arange(n, dtype=np.float64) * 3 + 1 if comm.rank == 0 else np.zeros(n)
    kw = {"algorithm": algorithm} if algorithm else {}
    results = []
    for i in range(3):
        if comm.rank == 0:
            x += i
            got = comm.bcast(x, 0, out=x, **kw)
            assert got.__array_interface__["data"][0] == x.__array_interface__["data"][0]
        else:
            got = comm.bcast(None, 0, out=x, **kw)
        results.append(got.copy())
    # an ``out`` that overlaps the root's ``x`` without being it is still correct
    if comm.rank == 0:
        buf = np.arange(n + 8, dtype=np.float64)
        shifted = comm.bcast(buf[:n], 0, out=buf[8:], **kw)
        expected_shift = np.arange(n, dtype=np.float64)
    else:
        shifted = comm.bcast(None, 0, out=np.empty(n), **kw)
        expected_shift = np.arange(n, dtype=np.float64)
    return [r.tolist() for r in results], np.array_equal(shifted, expected_shift)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("algorithm", [None, "linear", "binomial", "shm_cma"])
@pytest.mark.parametrize("n", [100, 200_000])
def test_in_place_root_broadcast(algorithm, n):
    per_rank = collops.spawn(_in_place, 3, algorithm, n, transport="shm", timeout=50)
    expected = np.arange(n, dtype=np.float64) * 3 + 1
    for i in range(3):
        expected = expected + i
        for results, _ in per_rank:
            assert results[i] == expected.tolist()
    assert all(shift_ok for _, shift_ok in per_rank)
