"""An allgather or gather whose ``x`` is exactly its own block of ``out`` (MPI_IN_PLACE).

Such a call is not copied first: every algorithm reads the rank's own block from where it
already is. The algorithm axis comes from the registry (every allgather and gather
algorithm, the transport's own ones included), so an algorithm that wrote its output's own
block before reading its input would fail here. Results against numpy; a partial overlap
(``x`` inside ``out`` but not its own block) is still copied and correct.
"""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.algorithms import all_algorithms
from collops.errors import AlgorithmIneligible, UnknownAlgorithm
from tests.support.recording import schedule_send_areas

#: elements per rank: within a direct slot, and several stream chunks (uneven)
COUNTS = [5, 70_001]


def _names(collective: str) -> list[str | None]:
    """Every algorithm of ``collective`` the shared-memory transport runs (its own among
    them) and automatic selection (None)."""
    return [None, *sorted(a.name for a in all_algorithms() if a.collective == collective
                          and (not a.transports or "shm" in a.transports))]


def _block(rank: int, n: int, salt: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64) * (rank + 2) + salt


def _in_place(comm, collective, algorithm, n):
    """Two in-place calls (the second reuses whatever the first prepared), then a partial
    overlap; for each, whether the result matches numpy and stayed in ``out``."""
    p, me = comm.size, comm.rank
    checks = []
    for salt in (1, 2):
        out = np.zeros(n * p)
        mine = out[me * n:(me + 1) * n]
        mine[:] = _block(me, n, salt)
        expected = np.concatenate([_block(r, n, salt) for r in range(p)])
        try:
            if collective == "allgather":
                got = comm.allgather(mine, out=out, algorithm=algorithm)
            else:
                root = salt % p
                if me != root:
                    mine = _block(me, n, salt)
                got = comm.gather(mine, root, out=out if me == root else None,
                                  algorithm=algorithm)
                if me != root:
                    checks.append(got is None)
                    continue
        except (AlgorithmIneligible, UnknownAlgorithm):  # not for this size or transport
            return None
        checks.append(bool(np.array_equal(got, expected))
                      and got.ctypes.data == out.ctypes.data)
    # x inside out but not its own block: the general path copies it first
    out = np.zeros(n * p)
    x = out[((me + 1) % p) * n:((me + 1) % p + 1) * n]
    x[:] = _block(me, n, 7)
    got = comm.allgather(x, out=out) if collective == "allgather" else comm.gather(
        x, 0, out=out if me == 0 else None)
    if collective == "allgather" or me == 0:
        checks.append(bool(np.array_equal(got, np.concatenate(
            [_block(r, n, 7) for r in range(p)]))))
    return checks


CASES = [(c, a) for c in ("allgather", "gather") for a in _names(c)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("collective", "algorithm"), CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("p", [2, 3])
def test_in_place_matches_numpy(collective, algorithm, p):
    ran = False
    for n in COUNTS:
        for rank, checks in enumerate(collops.spawn(_in_place, p, collective, algorithm, n,
                                                    transport="shm", timeout=100)):
            if checks is None:
                continue
            ran = True
            assert checks and all(checks), (collective, algorithm, p, n, rank, checks)
    if p == 2:
        assert ran, f"{collective}[{algorithm}] ran nowhere"


def _in_place_vector(comm):
    """allgatherv with rows of different counts per rank, x its own rows of out."""
    p, me = comm.size, comm.rank
    counts = [3 * r + 1 for r in range(p)]
    out = np.zeros((sum(counts), 2))
    start = sum(counts[:me])
    mine = out[start:start + counts[me]]
    mine[:] = me + np.arange(2 * counts[me]).reshape(-1, 2)
    got = comm.allgatherv(mine, counts, out=out)
    expected = np.concatenate([r + np.arange(2 * counts[r]).reshape(-1, 2) for r in range(p)])
    return bool(np.array_equal(got, expected)) and got.ctypes.data == out.ctypes.data


@pytest.mark.timeout(60)
def test_in_place_allgatherv_matches_numpy():
    assert collops.spawn(_in_place_vector, 3, transport="shm", timeout=50) == [True] * 3


def _send_of_an_in_place_allgather(comm):
    """Whether a schedule's execution starts on ``x`` itself (no copy) when ``x`` is its own
    block of ``out``, and on a copy when ``x`` overlaps ``out`` otherwise."""
    p, me, n = comm.size, comm.rank, 4
    out = np.zeros(n * p)
    own, other = out[me * n:(me + 1) * n], out[((me + 1) % p) * n:((me + 1) % p + 1) * n]
    with schedule_send_areas() as sends:
        comm.allgather(own, out=out, algorithm="ring")
        comm.allgather(other, out=out, algorithm="ring")
    return [bool(np.shares_memory(sends[0], own)), bool(np.shares_memory(sends[1], other))]


@pytest.mark.timeout(60)
def test_an_in_place_allgather_is_not_copied_and_a_partial_overlap_is():
    assert collops.spawn(_send_of_an_in_place_allgather, 2, transport="shm",
                         timeout=50) == [[True, False]] * 2
